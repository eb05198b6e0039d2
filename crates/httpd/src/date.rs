//! HTTP dates (RFC 9110 §5.6.7): formatting IMF-fixdate, parsing all three forms a
//! recipient must accept, and [`DateCache`], the per-worker `Date` value formatted at
//! most once per second.

use std::time::{SystemTime, UNIX_EPOCH};

const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
const LONG_DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Length of an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const IMF_FIXDATE_LEN: usize = 29;

/// (year, month 1..=12, day 1..=31) of a count of days since 1970-01-01
/// (H. Hinnant's `civil_from_days`, proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Days since 1970-01-01 of a civil date (inverse of [`civil_from_days`]).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Seconds since the Unix epoch as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub fn format_imf_fixdate(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn month(s: &str) -> Option<u32> {
    MONTHS.iter().position(|m| *m == s).map(|i| i as u32 + 1)
}

/// `HH:MM:SS` as seconds of the day.
fn time_of_day(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != 8 || b[2] != b':' || b[5] != b':' {
        return None;
    }
    let num = |i: usize| -> Option<u64> {
        let (a, c) = (b[i], b[i + 1]);
        (a.is_ascii_digit() && c.is_ascii_digit()).then(|| u64::from((a - b'0') * 10 + c - b'0'))
    };
    let (h, m, sec) = (num(0)?, num(3)?, num(6)?);
    // 60 is a leap second (RFC 5322 allows it); it counts as the next second.
    (h < 24 && m < 60 && sec <= 60).then_some(h * 3600 + m * 60 + sec)
}

fn digits(s: &str, len: usize) -> Option<u32> {
    (s.len() == len && s.bytes().all(|c| c.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

fn to_secs(y: i64, m: u32, d: u32, tod: u64) -> Option<u64> {
    if !(1..=31).contains(&d) || y < 1970 {
        return None;
    }
    let days = days_from_civil(y, m, d);
    // Reject 31 Feb and the like: the date must round-trip.
    if civil_from_days(days) != (y, m, d) {
        return None;
    }
    Some(days as u64 * 86_400 + tod)
}

/// Parse an HTTP-date into seconds since the Unix epoch: IMF-fixdate, and the obsolete
/// RFC 850 and asctime forms recipients must also accept (RFC 9110 §5.6.7). The day
/// name is checked for form, not against the date. `None` for anything else (and
/// dates before 1970).
pub fn parse_http_date(s: &str) -> Option<u64> {
    let s = s.trim();
    let parts: Vec<&str> = s.split(' ').filter(|p| !p.is_empty()).collect();
    match parts.as_slice() {
        // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
        [day, d, mon, y, t, "GMT"] if day.len() == 4 && DAYS.contains(&&day[..3]) => {
            if !day.ends_with(',') {
                return None;
            }
            let y = digits(y, 4)?;
            to_secs(i64::from(y), month(mon)?, digits(d, 2)?, time_of_day(t)?)
        }
        // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
        [day, dmy, t, "GMT"] => {
            let name = day.strip_suffix(',')?;
            if !LONG_DAYS.contains(&name) {
                return None;
            }
            let mut it = dmy.split('-');
            let (d, mon, y) = (it.next()?, it.next()?, it.next()?);
            if it.next().is_some() {
                return None;
            }
            let yy = digits(y, 2)?;
            // RFC 9110: a two-digit year more than 50 years in the future is in the past
            // century; with no clock here, 70..99 are 19xx and 00..69 are 20xx.
            let y = if yy >= 70 { 1900 + yy } else { 2000 + yy };
            to_secs(i64::from(y), month(mon)?, digits(d, 2)?, time_of_day(t)?)
        }
        // asctime: Sun Nov  6 08:49:37 1994
        [day, mon, d, t, y] if DAYS.contains(day) => {
            let d: u32 = if d.len() <= 2 && d.bytes().all(|c| c.is_ascii_digit()) {
                d.parse().ok()?
            } else {
                return None;
            };
            to_secs(i64::from(digits(y, 4)?), month(mon)?, d, time_of_day(t)?)
        }
        _ => None,
    }
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
            self.secs = secs;
            self.text = format_imf_fixdate(secs);
        }
        &self.text
    }

    /// The date now.
    pub fn now(&mut self) -> &str {
        self.at(now_secs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_imf_fixdate() {
        assert_eq!(format_imf_fixdate(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(
            format_imf_fixdate(784_111_777),
            "Sun, 06 Nov 1994 08:49:37 GMT"
        );
        assert_eq!(
            format_imf_fixdate(951_782_400),
            "Tue, 29 Feb 2000 00:00:00 GMT"
        );
        assert_eq!(
            format_imf_fixdate(4_102_444_799),
            "Thu, 31 Dec 2099 23:59:59 GMT"
        );
        assert_eq!(format_imf_fixdate(784_111_777).len(), IMF_FIXDATE_LEN);
    }

    #[test]
    fn parses_the_three_forms() {
        let t = Some(784_111_777);
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), t);
        assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), t);
        assert_eq!(parse_http_date("Sun Nov  6 08:49:37 1994"), t);
        assert_eq!(parse_http_date(" Sun, 06 Nov 1994 08:49:37 GMT "), t);
    }

    #[test]
    fn rejects_malformed_dates() {
        for bad in [
            "",
            "yesterday",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun 06 Nov 1994 08:49:37 GMT",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 31 Feb 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 25:49:37 GMT",
            "Sun, 06 Nov 1994 08:49 GMT",
            "Sun, 06 Nov 1969 08:49:37 GMT",
            "Sunday, 06-Nov-1994 08:49:37 GMT",
        ] {
            assert_eq!(parse_http_date(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn round_trips_over_many_days() {
        for secs in (0..4_000_000_000u64).step_by(86_400 * 37 + 3_601) {
            assert_eq!(parse_http_date(&format_imf_fixdate(secs)), Some(secs));
        }
    }

    #[test]
    fn cache_reformats_only_on_a_new_second() {
        let mut c = DateCache::new();
        assert_eq!(c.at(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(c.at(1), "Thu, 01 Jan 1970 00:00:01 GMT");
        assert_eq!(c.now().len(), IMF_FIXDATE_LEN);
    }
}
