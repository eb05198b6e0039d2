//! The Prometheus text exposition format, version 0.0.4: `# HELP` and `# TYPE` lines
//! once per metric family, then one line per sample, `name{label="value",...} value`.
//! Also OpenMetrics 1.0, for clients that ask for it: the same lines, but a counter
//! family is named without its samples' `_total`, and the document ends in `# EOF`.
//!
//! [`Exposition`] writes it and enforces what a parser relies on: names of the allowed
//! alphabet, a family's samples together under its one `# HELP` and `# TYPE`, and
//! help texts and label values escaped.

use std::fmt::{self, Write};

/// The media type of this format, for `Content-Type`.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Which of the two formats a document is written in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format, version 0.0.4.
    #[default]
    Prometheus,
    /// OpenMetrics 1.0.0 text.
    OpenMetrics,
}

impl Format {
    /// The media type, for `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => CONTENT_TYPE,
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// The kind of a metric family, as its `# TYPE` line says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only grows (until the process restarts). Its name ends in `_total`.
    Counter,
    /// Goes up and down: a level, such as memory held or connections open.
    Gauge,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// Whether `name` may name a metric: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
pub fn valid_metric_name(name: &str) -> bool {
    valid(name, |c| c == ':')
}

/// Whether `name` may name a label: `[a-zA-Z_][a-zA-Z0-9_]*`, and not `__`-prefixed
/// (reserved for Prometheus itself).
pub fn valid_label_name(name: &str) -> bool {
    valid(name, |_| false) && !name.starts_with("__")
}

fn valid(name: &str, extra: impl Fn(char) -> bool) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || first == '_' || extra(first))
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || extra(c))
}

/// Writes `s` as a label value: backslash, double quote and line feed escaped.
fn escape_label_value(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Writes `s` as a help text: backslash and line feed escaped.
fn escape_help(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A document in the text format being written.
///
/// Call [`Exposition::family`] once per family, then [`Exposition::sample`] for each of
/// its samples. A family with an invalid name is refused (`false`), and so are its
/// samples until the next family; a sample with an invalid label name is left out.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
    format: Format,
    /// The current family's sample name, and what OpenMetrics adds to it.
    family: Option<(&'static str, &'static str)>,
}

impl Exposition {
    /// An empty document in the Prometheus format.
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// An empty document in `format`.
    pub fn with_format(format: Format) -> Exposition {
        Exposition {
            format,
            ..Exposition::default()
        }
    }

    /// Start the family `name`: its `# HELP` and `# TYPE` lines. Returns whether the
    /// name is valid (and the family's samples will be written).
    pub fn family(&mut self, name: &'static str, help: &str, kind: Kind) -> bool {
        if !valid_metric_name(name) {
            log::debug!("metrics: invalid metric name {name:?} left out");
            self.family = None;
            return false;
        }
        // OpenMetrics names a counter family without the `_total` its samples carry.
        let (family, suffix) = match (self.format, kind) {
            (Format::OpenMetrics, Kind::Counter) => match name.strip_suffix("_total") {
                Some(stem) => (stem, "_total"),
                None => (name, "_total"),
            },
            _ => (name, ""),
        };
        self.family = Some((family, suffix));
        self.out.push_str("# HELP ");
        self.out.push_str(family);
        self.out.push(' ');
        escape_help(&mut self.out, help);
        self.out.push_str("\n# TYPE ");
        self.out.push_str(family);
        self.out.push(' ');
        self.out.push_str(kind.as_str());
        self.out.push('\n');
        true
    }

    /// One sample of the current family, with `labels` in order.
    pub fn sample(&mut self, labels: &[(&str, &str)], value: impl Value) {
        let Some((name, suffix)) = self.family else {
            return;
        };
        if let Some((bad, _)) = labels.iter().find(|(n, _)| !valid_label_name(n)) {
            log::debug!("metrics: {name}: invalid label name {bad:?} left out");
            return;
        }
        self.out.push_str(name);
        self.out.push_str(suffix);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (n, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                self.out.push_str(n);
                self.out.push_str("=\"");
                escape_label_value(&mut self.out, v);
                self.out.push('"');
            }
            self.out.push('}');
        }
        self.out.push(' ');
        // Writing to a String cannot fail.
        let _ = value.write(&mut self.out);
        self.out.push('\n');
    }

    /// The document.
    pub fn finish(mut self) -> String {
        if self.format == Format::OpenMetrics {
            self.out.push_str("# EOF\n");
        }
        self.out
    }
}

/// A sample's value as the format writes it.
pub trait Value {
    /// Write the value.
    fn write(&self, out: &mut String) -> fmt::Result;
}

impl Value for u64 {
    fn write(&self, out: &mut String) -> fmt::Result {
        write!(out, "{self}")
    }
}

impl Value for f64 {
    /// Finite values as Rust prints them (shortest exact form); the format's own
    /// spellings of the others.
    fn write(&self, out: &mut String) -> fmt::Result {
        if self.is_nan() {
            out.push_str("NaN");
        } else if self.is_infinite() {
            out.push_str(if *self > 0.0 { "+Inf" } else { "-Inf" });
        } else {
            write!(out, "{self}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_has_help_and_type_then_its_samples() {
        let mut e = Exposition::new();
        assert!(e.family("rusty_x_total", "Things counted.", Kind::Counter));
        e.sample(&[("worker", "0")], 3u64);
        e.sample(&[("worker", "1"), ("code", "200")], 4u64);
        assert!(e.family("rusty_level", "A level.", Kind::Gauge));
        e.sample(&[], 1.5f64);
        assert_eq!(
            e.finish(),
            "# HELP rusty_x_total Things counted.\n# TYPE rusty_x_total counter\n\
             rusty_x_total{worker=\"0\"} 3\n\
             rusty_x_total{worker=\"1\",code=\"200\"} 4\n\
             # HELP rusty_level A level.\n# TYPE rusty_level gauge\nrusty_level 1.5\n"
        );
    }

    #[test]
    fn label_values_and_help_are_escaped() {
        let mut e = Exposition::new();
        e.family("m", "back\\slash and\nnewline \"quoted\"", Kind::Gauge);
        e.sample(&[("why", "a \"b\"\\c\nd")], 1u64);
        let text = e.finish();
        assert!(
            text.contains("# HELP m back\\\\slash and\\nnewline \"quoted\"\n"),
            "{text}"
        );
        assert!(
            text.contains("m{why=\"a \\\"b\\\"\\\\c\\nd\"} 1\n"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 3, "no raw line feed leaks: {text}");
    }

    #[test]
    fn invalid_names_are_left_out_not_written() {
        let mut e = Exposition::new();
        assert!(!e.family("2bad", "x", Kind::Counter));
        e.sample(&[], 1u64);
        assert!(!e.family("bad-name", "x", Kind::Counter));
        assert!(e.family("good:name_1", "x", Kind::Counter));
        e.sample(&[("bad-label", "v")], 1u64);
        e.sample(&[("__reserved", "v")], 1u64);
        e.sample(&[("ok", "v")], 2u64);
        let text = e.finish();
        assert!(!text.contains("bad"), "{text}");
        assert!(!text.contains("__reserved"), "{text}");
        assert!(text.ends_with("good:name_1{ok=\"v\"} 2\n"), "{text}");
    }

    #[test]
    fn openmetrics_names_counter_families_without_total_and_ends_in_eof() {
        let mut e = Exposition::with_format(Format::OpenMetrics);
        e.family("rusty_x_total", "Counted.", Kind::Counter);
        e.sample(&[("worker", "0")], 3u64);
        e.family("rusty_y", "Counted, named without _total.", Kind::Counter);
        e.sample(&[], 1u64);
        e.family("rusty_level_bytes", "A level.", Kind::Gauge);
        e.sample(&[], 2u64);
        assert_eq!(
            e.finish(),
            "# HELP rusty_x Counted.\n# TYPE rusty_x counter\nrusty_x_total{worker=\"0\"} 3\n\
             # HELP rusty_y Counted, named without _total.\n# TYPE rusty_y counter\n\
             rusty_y_total 1\n\
             # HELP rusty_level_bytes A level.\n# TYPE rusty_level_bytes gauge\n\
             rusty_level_bytes 2\n# EOF\n"
        );
    }

    #[test]
    fn names_follow_the_formats_alphabet() {
        for ok in ["a", "_a", "a:b", "rusty_drops_total", "A9"] {
            assert!(valid_metric_name(ok), "{ok}");
        }
        for bad in ["", "9a", "a-b", "a b", "é"] {
            assert!(!valid_metric_name(bad), "{bad}");
        }
        assert!(valid_label_name("worker"));
        assert!(!valid_label_name("a:b"));
        assert!(!valid_label_name("__name__"));
    }

    #[test]
    fn special_floats_use_the_formats_spelling() {
        let mut s = String::new();
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.25] {
            v.write(&mut s).unwrap();
            s.push(' ');
        }
        assert_eq!(s, "NaN +Inf -Inf 0.25 ");
    }
}
