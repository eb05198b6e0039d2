use super::*;

#[test]
fn formats_imf_fixdate() {
    for (secs, text) in [
        (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
        (784_111_777, "Sun, 06 Nov 1994 08:49:37 GMT"),
        (951_782_400, "Tue, 29 Feb 2000 00:00:00 GMT"),
        (4_102_444_799, "Thu, 31 Dec 2099 23:59:59 GMT"),
        // 2100 is not a leap year; 2400 is.
        (4_107_542_400, "Mon, 01 Mar 2100 00:00:00 GMT"),
        (13_574_563_200, "Tue, 29 Feb 2400 00:00:00 GMT"),
        (LAST_HTTP_DATE, "Fri, 31 Dec 9999 23:59:59 GMT"),
    ] {
        assert_eq!(format_imf_fixdate(secs), text, "{secs}");
        assert_eq!(text.len(), IMF_FIXDATE_LEN);
    }
}

#[test]
fn dates_past_the_year_9999_are_its_last_second() {
    for secs in [LAST_HTTP_DATE + 1, 300_000_000_000, u64::MAX] {
        assert_eq!(format_imf_fixdate(secs), "Fri, 31 Dec 9999 23:59:59 GMT");
        assert_eq!(DateCache::new().at(secs), "Fri, 31 Dec 9999 23:59:59 GMT");
    }
}

#[test]
fn parses_the_three_forms() {
    let t = Some(784_111_777);
    assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), t);
    assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), t);
    assert_eq!(parse_http_date("Sun Nov  6 08:49:37 1994"), t);
    assert_eq!(parse_http_date("Sun Nov 06 08:49:37 1994"), t);
    assert_eq!(parse_http_date(" Sun, 06 Nov 1994 08:49:37 GMT "), t);
}

#[test]
fn two_digit_years_below_70_are_this_century() {
    assert_eq!(parse_http_date("Thursday, 01-Jan-70 00:00:00 GMT"), Some(0));
    assert_eq!(
        parse_http_date("Tuesday, 31-Dec-69 23:59:59 GMT"),
        Some(3_155_759_999)
    );
    assert_eq!(
        parse_http_date("Friday, 31-Dec-99 23:59:59 GMT"),
        Some(946_684_799)
    );
}

#[test]
fn the_range_is_1970_to_9999() {
    assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
    assert_eq!(parse_http_date("Wed, 31 Dec 1969 23:59:59 GMT"), None);
    assert_eq!(
        parse_http_date("Fri, 31 Dec 9999 23:59:59 GMT"),
        Some(LAST_HTTP_DATE)
    );
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
        "Mon, 29 Feb 1900 00:00:00 GMT",
        "Sun, 00 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 25:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:49 GMT",
        "Sun, 06 Nov 1969 08:49:37 GMT",
        "sun, 06 nov 1994 08:49:37 gmt",
        "Sun,\t06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-1994 08:49:37 GMT",
        "Sun Nov  6 08:49:37 94",
    ] {
        assert_eq!(parse_http_date(bad), None, "{bad:?}");
    }
}

/// What the parser refuses that a lenient one would take (see the module's docs).
#[test]
fn rejects_what_no_implementation_writes() {
    for bad in [
        // Day names that are not the date's.
        "Mon, 06 Nov 1994 08:49:37 GMT",
        "Monday, 06-Nov-94 08:49:37 GMT",
        "Mon Nov  6 08:49:37 1994",
        // A leap second.
        "Thu, 31 Dec 1998 23:59:60 GMT",
        // Spacing outside the grammar.
        "Sun,  06 Nov 1994 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994",
        "Sun Nov 6  08:49:37 1994",
        // Not ASCII: a multi-byte character where a day name's bytes are sliced, and
        // a no-break space that `str::trim` would remove.
        "a\u{20ac} 06 Nov 1994 08:49:37 GMT",
        "S\u{20ac}, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT\u{a0}",
    ] {
        assert_eq!(parse_http_date(bad), None, "{bad:?}");
    }
}

#[test]
fn round_trips_to_the_year_9999() {
    for secs in (0..=LAST_HTTP_DATE).step_by(86_400 * 367 + 3_601) {
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
