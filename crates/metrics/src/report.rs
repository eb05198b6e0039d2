//! What an application contributes: [`AppMetrics`], the trait its handler implements,
//! and [`Report`], the samples it fills in.

use crate::text::Kind;

/// An application handler's counters, read on its worker's thread at each metrics
/// interval (never on the data path).
///
/// Implement it on the handler a program runs: `report` adds the handler's counters to
/// `out` as they stand, each with at most one label of its own; the worker's label is
/// added when they are exported. Counters must only grow over the handler's life.
/// Families whose names clash with the engine's are left out.
pub trait AppMetrics {
    /// Add this handler's counters to `out`. The default adds none (a program that
    /// exports only the stack's counters).
    fn report(&self, out: &mut Report) {
        let _ = out;
    }
}

/// One sample an application reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppSample {
    /// The family's name (`rusty_http_requests_total`).
    pub name: &'static str,
    /// The family's help text.
    pub help: &'static str,
    /// Counter or gauge.
    pub kind: Kind,
    /// The sample's own label, if any (`("code", "200")`).
    pub label: Option<(&'static str, &'static str)>,
    /// Its value.
    pub value: u64,
}

/// The samples one handler reported at one interval. Reused from one interval to the
/// next, so reporting allocates only while it grows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    samples: Vec<AppSample>,
}

impl Report {
    /// An empty report.
    pub fn new() -> Report {
        Report::default()
    }

    /// A counter without a label of its own. Its name should end in `_total`.
    pub fn counter(&mut self, name: &'static str, help: &'static str, value: u64) {
        self.push(name, help, Kind::Counter, None, value);
    }

    /// One sample of a counter family split by `label` (`("code", "200")`).
    pub fn counter_with(
        &mut self,
        name: &'static str,
        help: &'static str,
        label: (&'static str, &'static str),
        value: u64,
    ) {
        self.push(name, help, Kind::Counter, Some(label), value);
    }

    /// Counters without labels of their own: (name, help, value) each.
    pub fn counters(&mut self, counters: &[(&'static str, &'static str, u64)]) {
        for &(name, help, value) in counters {
            self.counter(name, help, value);
        }
    }

    /// A gauge: a level that goes up and down.
    pub fn gauge(&mut self, name: &'static str, help: &'static str, value: u64) {
        self.push(name, help, Kind::Gauge, None, value);
    }

    fn push(
        &mut self,
        name: &'static str,
        help: &'static str,
        kind: Kind,
        label: Option<(&'static str, &'static str)>,
        value: u64,
    ) {
        self.samples.push(AppSample {
            name,
            help,
            kind,
            label,
            value,
        });
    }

    /// The samples, in the order reported.
    pub fn samples(&self) -> &[AppSample] {
        &self.samples
    }

    /// Forget the samples, keeping the room they took.
    pub fn clear(&mut self) {
        self.samples.clear();
    }
}
