//! HTTP dates (`rusty_httpd::date`): formatting one IMF-fixdate (what the `Date` cache
//! does once a second and the file cache once per file), and parsing each of the three
//! forms RFC 9110 §5.6.7 accepts plus a malformed value (what every conditional request
//! with `If-Modified-Since` or a date in `If-Range` costs).
//!
//! `cargo bench -p rusty-httpd --bench date`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use rusty_httpd::date::{format_imf_fixdate, parse_http_date};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("http_date");
    g.bench_function("format", |b| {
        b.iter(|| format_imf_fixdate(black_box(784_111_777)))
    });
    for (name, text) in [
        ("parse_imf_fixdate", "Sun, 06 Nov 1994 08:49:37 GMT"),
        ("parse_rfc850", "Sunday, 06-Nov-94 08:49:37 GMT"),
        ("parse_asctime", "Sun Nov  6 08:49:37 1994"),
        ("parse_malformed", "Sun, 06 Nov 1994 08:49:37 UTC"),
    ] {
        g.bench_function(name, |b| b.iter(|| parse_http_date(black_box(text))));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
