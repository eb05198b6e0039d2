//! httpd's request-head parser ([`parse_request`]) and the parsers of what it returns:
//! the target ([`normalise`]), `Range` ([`parse_range`]) and HTTP dates.
//!
//! The input is a byte choosing tiny limits and a representation length, then the
//! received bytes. They are parsed as the server does, one head after another off the
//! front (pipelining), with the default limits and with the tiny ones. Checked: a
//! complete head is non-empty, within the bytes and the limits, ends its blank line,
//! and parses the same on its own; a partial one is within the head limit; a normalised
//! path stays inside the root; a range lies inside the representation; a date formats
//! and parses back to itself.

use rusty_httpd::date::{format_imf_fixdate, parse_http_date};
use rusty_httpd::path::normalise;
use rusty_httpd::range::{parse_range, RangeRequest};
use rusty_httpd::request::{parse_request, Parsed, Request};
use rusty_httpd::Limits;

use crate::input::Input;

/// Parse `data` as received request bytes. Panics on a bug.
pub fn http_request(data: &[u8]) {
    let mut input = Input::new(data);
    let sel = input.u8();
    let buf = input.rest();
    let mut tiny = Limits::default();
    tiny.max_header_bytes = usize::from(sel & 0x0f) * 16;
    tiny.max_target = usize::from(sel >> 4) * 4;
    let len = [0, 1, 100, u64::MAX][usize::from(sel >> 6)];
    for limits in [Limits::default(), tiny] {
        pipeline(buf, &limits, len);
    }
}

fn pipeline(mut buf: &[u8], limits: &Limits, len: u64) {
    let mut path = String::new();
    let mut scratch = Vec::new();
    loop {
        match parse_request(buf, limits) {
            Parsed::Complete(r) => {
                check_head(buf, &r, limits);
                if let Ok(t) = normalise(r.target, &mut path, &mut scratch) {
                    check_path(&path, t.trailing_slash);
                }
                if let Some(range) = r.range {
                    if let RangeRequest::Partial { start, end } = parse_range(range, len) {
                        assert!(
                            start < end && end <= len,
                            "{range:?} of {len}: {start}..{end}"
                        );
                    }
                }
                for date in [r.if_modified_since, r.if_range].into_iter().flatten() {
                    if let Some(secs) = parse_http_date(date) {
                        let formatted = format_imf_fixdate(secs);
                        assert_eq!(parse_http_date(&formatted), Some(secs), "{date:?}");
                    }
                }
                let _ = r.persistent();
                buf = &buf[r.len..];
            }
            Parsed::Partial => {
                assert!(buf.len() <= limits.max_header_bytes);
                return;
            }
            Parsed::Error(e) => {
                assert!((400..600).contains(&e.status()));
                return;
            }
        }
    }
}

fn check_head(buf: &[u8], r: &Request<'_>, limits: &Limits) {
    assert!(
        r.len > 0 && r.len <= buf.len(),
        "head of {} in {}",
        r.len,
        buf.len()
    );
    assert!(r.len <= limits.max_header_bytes);
    assert!(r.target.len() <= limits.max_target);
    assert!(r.minor <= 1);
    assert!(buf[..r.len].ends_with(b"\n"));
    match parse_request(&buf[..r.len], limits) {
        Parsed::Complete(again) => assert_eq!(&again, r),
        other => panic!("the head alone parses as {other:?}, not {r:?}"),
    }
}

/// A normalised path is absolute, with no empty, `.` or `..` segment and no trailing
/// slash but the root's.
fn check_path(path: &str, trailing_slash: bool) {
    assert!(path.starts_with('/'), "{path:?}");
    if path != "/" {
        assert!(!path.ends_with('/'), "{path:?}");
        for seg in path[1..].split('/') {
            assert!(!matches!(seg, "" | "." | ".."), "{path:?}");
        }
    } else {
        assert!(trailing_slash);
    }
}
