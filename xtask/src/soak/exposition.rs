//! Reading the Prometheus text exposition format (version 0.0.4) that httpd's
//! `--metrics` endpoint serves: one sample a line, `name{label="value",...} value
//! [timestamp]`, with `#` lines (`# HELP`, `# TYPE`, `# EOF`) and blank lines between.
//! Only what a soak run reads: the samples, their labels and values; help texts and
//! types are skipped.

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MetricSample {
    pub name: String,
    pub labels: Labels,
    pub value: f64,
}

impl MetricSample {
    /// The value of label `key`, if the sample has it.
    pub(crate) fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Every sample of one scrape, in the order served.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Exposition {
    pub samples: Vec<MetricSample>,
}

impl Exposition {
    /// Parses `text`; `Err` names the first line that is not a comment, blank or a
    /// well-formed sample.
    pub(crate) fn parse(text: &str) -> Result<Exposition, String> {
        let mut samples = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            samples.push(parse_sample(line).map_err(|e| format!("line {}: {e}", i + 1))?);
        }
        Ok(Exposition { samples })
    }

    /// The sum of family `name`'s samples whose labels `keep` accepts.
    pub(crate) fn sum_where(&self, name: &str, keep: impl Fn(&MetricSample) -> bool) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name && keep(s))
            .map(|s| s.value)
            .sum()
    }

    /// The sum of all of family `name`'s samples (over workers and other labels).
    pub(crate) fn sum(&self, name: &str) -> f64 {
        self.sum_where(name, |_| true)
    }

    /// [`Exposition::sum`] as a count: rounded, negative and non-finite sums as 0.
    pub(crate) fn total(&self, name: &str) -> u64 {
        as_count(self.sum(name))
    }

    /// Every series summed over workers: one row per name and labels other than
    /// `worker`, in the order first served.
    pub(crate) fn over_workers(&self) -> Vec<(String, f64)> {
        let mut rows: Vec<(String, f64)> = Vec::new();
        for s in &self.samples {
            let labels: Vec<String> = s
                .labels
                .iter()
                .filter(|(k, _)| k != "worker")
                .map(|(k, v)| format!("{k}=\"{v}\""))
                .collect();
            let key = if labels.is_empty() {
                s.name.clone()
            } else {
                format!("{}{{{}}}", s.name, labels.join(","))
            };
            match rows.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => *v += s.value,
                None => rows.push((key, s.value)),
            }
        }
        rows
    }
}

/// A sum of counter or gauge samples as a whole number.
pub(crate) fn as_count(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        v.round() as u64
    } else {
        0
    }
}

fn parse_sample(line: &str) -> Result<MetricSample, String> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("no metric name in {line:?}"));
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, tail) = parse_labels(after)?;
        labels = parsed;
        rest = tail;
    }
    let mut fields = rest.split_whitespace();
    let value = fields
        .next()
        .ok_or_else(|| format!("no value in {line:?}"))
        .and_then(parse_value)?;
    if let Some(ts) = fields.next() {
        ts.parse::<i64>()
            .map_err(|_| format!("bad timestamp {ts:?} in {line:?}"))?;
    }
    if fields.next().is_some() {
        return Err(format!("trailing text in {line:?}"));
    }
    Ok(MetricSample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// A sample's labels, in the order written.
type Labels = Vec<(String, String)>;

/// The labels after `{`, up to and including `}`; returns them and what follows.
fn parse_labels(mut s: &str) -> Result<(Labels, &str), String> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix('}') {
            return Ok((labels, rest));
        }
        let eq = s.find('=').ok_or("a label without `=`")?;
        let key = s[..eq].trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("bad label name {key:?}"));
        }
        let after = s[eq + 1..].trim_start();
        let quoted = after
            .strip_prefix('"')
            .ok_or_else(|| format!("label {key} has no quoted value"))?;
        let (value, rest) = unescape_until_quote(quoted)?;
        labels.push((key.to_string(), value));
        s = rest.trim_start();
        if let Some(rest) = s.strip_prefix(',') {
            s = rest;
        } else if !s.starts_with('}') {
            return Err(format!("expected `,` or `}}` after label {key}"));
        }
    }
}

/// A label value up to its closing quote, with `\\`, `\"` and `\n` undone; returns it
/// and what follows the quote.
fn unescape_until_quote(s: &str) -> Result<(String, &str), String> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, &s[i + 1..])),
            '\\' => match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, e @ ('\\' | '"'))) => out.push(e),
                Some((_, e)) => return Err(format!("unknown escape \\{e}")),
                None => break,
            },
            c => out.push(c),
        }
    }
    Err("a label value without its closing quote".into())
}

fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => s.parse().map_err(|_| format!("bad value {s:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str = "\
# HELP rusty_http_requests_total Requests answered, by status code.
# TYPE rusty_http_requests_total counter
rusty_http_requests_total{worker=\"0\",code=\"200\"} 1200
rusty_http_requests_total{worker=\"0\",code=\"206\"} 30
rusty_http_requests_total{worker=\"1\",code=\"200\"} 1100
rusty_http_requests_total{worker=\"1\",code=\"404\"} 2

# TYPE rusty_buffer_memory_bytes gauge
rusty_buffer_memory_bytes{worker=\"0\"} 65536
rusty_buffer_memory_bytes{worker=\"1\"} 4096
rusty_worker_snapshot_age_seconds{worker=\"0\"} 0.737508813
rusty_worker_info{worker=\"0\",name=\"tap \\\"q0\\\" \\\\ x\\ny\"} 1 1700000000000
rusty_up 1
# EOF
";

    #[test]
    fn reads_samples_labels_and_sums() {
        let e = Exposition::parse(SCRAPE).unwrap();
        assert_eq!(e.samples.len(), 9);
        assert_eq!(e.total("rusty_http_requests_total"), 2332);
        assert_eq!(
            e.sum_where("rusty_http_requests_total", |s| s.label("code")
                == Some("200")),
            2300.0
        );
        assert_eq!(e.total("rusty_buffer_memory_bytes"), 69_632);
        assert_eq!(e.total("rusty_missing"), 0);
        let info = &e.samples[7];
        assert_eq!(info.label("name"), Some("tap \"q0\" \\ x\ny"));
        assert_eq!(info.label("worker"), Some("0"));
        assert_eq!(e.samples[8].labels, vec![]);
        assert!((e.samples[6].value - 0.737_508_813).abs() < 1e-12);
    }

    #[test]
    fn sums_over_workers_by_the_other_labels() {
        let e = Exposition::parse(SCRAPE).unwrap();
        let rows = e.over_workers();
        assert_eq!(
            rows[..3],
            [
                (
                    "rusty_http_requests_total{code=\"200\"}".to_string(),
                    2300.0
                ),
                ("rusty_http_requests_total{code=\"206\"}".to_string(), 30.0),
                ("rusty_http_requests_total{code=\"404\"}".to_string(), 2.0),
            ]
        );
        assert_eq!(rows[3], ("rusty_buffer_memory_bytes".to_string(), 69_632.0));
        assert_eq!(rows.last().unwrap(), &("rusty_up".to_string(), 1.0));
    }

    #[test]
    fn special_values() {
        let e = Exposition::parse("a +Inf\nb -Inf\nc NaN\nd 1e3\ne -2\n").unwrap();
        assert_eq!(e.samples[0].value, f64::INFINITY);
        assert_eq!(e.samples[1].value, f64::NEG_INFINITY);
        assert!(e.samples[2].value.is_nan());
        assert_eq!(e.total("d"), 1000);
        assert_eq!(e.total("a"), 0, "not a count");
        assert_eq!(e.total("e"), 0, "not a count");
    }

    #[test]
    fn bad_lines_are_errors_not_panics() {
        for bad in [
            "rusty_x",
            "rusty_x{worker=\"0\"}",
            "rusty_x{worker=\"0\" 1",
            "rusty_x{worker=0} 1",
            "rusty_x{worker=\"0} 1",
            "rusty_x{=\"0\"} 1",
            "rusty_x{wo-rker=\"0\"} 1",
            "rusty_x{worker=\"\\q\"} 1",
            "rusty_x{worker=\"0\"",
            "rusty_x{worker=\"0\"\\",
            "rusty_x one",
            "rusty_x 1 2 3",
            "rusty_x 1 later",
            "{worker=\"0\"} 1",
            "9lives 1",
            "é 1",
        ] {
            let err = Exposition::parse(&format!("# HELP x y\n{bad}\n")).unwrap_err();
            assert!(err.starts_with("line 2: "), "{bad:?}: {err}");
        }
        assert_eq!(Exposition::parse("").unwrap(), Exposition::default());
    }
}
