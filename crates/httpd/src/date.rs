//! HTTP dates (RFC 9110 §5.6.7): formatting IMF-fixdate, parsing all three forms a
//! recipient must accept, and [`DateCache`], the per-worker `Date` value formatted at
//! most once per second.
//!
//! Both directions go through the `httpdate` crate (the one hyper uses); this module
//! only converts to and from seconds since the Unix epoch and bounds them. The parser
//! holds each form to its grammar's fixed layout and checks the date as a whole, so it
//! refuses what a more lenient reader would take:
//!
//! - a day name that is not the date's (`Mon, 06 Nov 1994 …` for a Sunday),
//! - a leap second (`23:59:60`),
//! - spacing other than the grammar's (two spaces after the comma, one before a
//!   one-digit asctime day),
//! - anything not ASCII.
//!
//! A refused `If-Modified-Since` or `If-Range` date only costs a full `200` answer
//! (RFC 9110 §13.1.3, §13.1.5), and no HTTP implementation writes these forms: clients
//! send back the `Last-Modified` value they were given. `cargo bench -p rusty-httpd
//! --bench date` times both directions.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use httpdate::HttpDate;

/// Length of an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const IMF_FIXDATE_LEN: usize = 29;

/// The last second an IMF-fixdate can hold, with its four-digit year:
/// `Fri, 31 Dec 9999 23:59:59 GMT`.
pub const LAST_HTTP_DATE: u64 = 253_402_300_799;

/// The date of `secs`, later seconds taken as [`LAST_HTTP_DATE`].
fn http_date(secs: u64) -> HttpDate {
    HttpDate::from(UNIX_EPOCH + Duration::from_secs(secs.min(LAST_HTTP_DATE)))
}

/// Seconds since the Unix epoch as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`);
/// beyond the year 9999, the last second of it.
pub fn format_imf_fixdate(secs: u64) -> String {
    http_date(secs).to_string()
}

/// Parse an HTTP-date into seconds since the Unix epoch: IMF-fixdate, and the obsolete
/// RFC 850 and asctime forms recipients must also accept (RFC 9110 §5.6.7). A
/// two-digit RFC 850 year from 70 to 99 is 19xx, one below 70 is 20xx. `None` for
/// anything else, for a day name that is not the date's, and for dates before 1970.
pub fn parse_http_date(s: &str) -> Option<u64> {
    let t: SystemTime = httpdate::parse_http_date(s).ok()?;
    t.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs())
}

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The `Date` header value of the current second, reformatted only when the second
/// changes (one per worker: no sharing).
#[derive(Debug, Clone)]
pub struct DateCache {
    secs: u64,
    text: String,
}

impl Default for DateCache {
    fn default() -> Self {
        DateCache::new()
    }
}

impl DateCache {
    /// A cache holding the current second's date.
    pub fn new() -> DateCache {
        let secs = now_secs();
        DateCache {
            secs,
            text: format_imf_fixdate(secs),
        }
    }

    /// The date at `secs` (normally [`now_secs`]).
    pub fn at(&mut self, secs: u64) -> &str {
        if secs != self.secs {
            use std::fmt::Write;
            self.secs = secs;
            self.text.clear();
            // Writing into a String cannot fail.
            let _ = write!(self.text, "{}", http_date(secs));
        }
        &self.text
    }

    /// The date now.
    pub fn now(&mut self) -> &str {
        self.at(now_secs())
    }
}

#[cfg(test)]
mod tests;
