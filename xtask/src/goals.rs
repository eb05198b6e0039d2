//! Goals a benchmark holds Rusty to: at least so many times a baseline's work per
//! server or machine CPU-second in a case, or at most so many times its CPU time per
//! unit of work, and the verdict a run prints on them.

/// What a goal counts work per.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Per {
    ServerCpu,
    MachineCpu,
}

impl Per {
    fn text(self) -> &'static str {
        match self {
            Per::ServerCpu => "server CPU-second",
            Per::MachineCpu => "machine CPU-second",
        }
    }

    fn cpu(self) -> &'static str {
        match self {
            Per::ServerCpu => "server CPU",
            Per::MachineCpu => "machine CPU",
        }
    }
}

/// Which way a goal bounds the ratio to the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// At least `factor` times the baseline's work per CPU-second.
    MoreWork,
    /// At most `factor` times the baseline's CPU time per unit of work.
    LessCpu,
}

/// A goal in one case: at least `factor` times the baseline's work per CPU-second, or
/// at most `factor` times its CPU time per unit of work.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Goal {
    /// The case's label in the table.
    pub case: &'static str,
    pub per: Per,
    pub factor: f64,
    pub bound: Bound,
}

impl Goal {
    /// At least `factor` times the baseline's work per CPU-second.
    pub(crate) const fn new(case: &'static str, per: Per, factor: f64) -> Goal {
        Goal {
            case,
            per,
            factor,
            bound: Bound::MoreWork,
        }
    }

    /// At most `factor` times the baseline's CPU time per unit of work.
    pub(crate) const fn at_most_cpu(case: &'static str, per: Per, factor: f64) -> Goal {
        Goal {
            case,
            per,
            factor,
            bound: Bound::LessCpu,
        }
    }

    /// Whether `ratio` (work per CPU-second, or CPU per unit of work, over the
    /// baseline's) meets the goal.
    fn met(&self, ratio: f64) -> bool {
        match self.bound {
            Bound::MoreWork => ratio >= self.factor,
            Bound::LessCpu => ratio <= self.factor,
        }
    }

    /// "≥ 3× per server CPU-second", or "≤ 1.1× the server CPU per request" for
    /// `unit` "request".
    fn target(&self, unit: &str) -> String {
        match self.bound {
            Bound::MoreWork => format!("≥ {}× per {}", self.factor, self.per.text()),
            Bound::LessCpu => format!("≤ {}× the {} per {unit}", self.factor, self.per.cpu()),
        }
    }

    /// "3.50× the requests per server CPU-second (goal ≥ 3×: met)" for `ratio` 3.5.
    fn outcome(&self, unit: &str, ratio: f64) -> String {
        let (what, sign) = match self.bound {
            Bound::MoreWork => (format!("{unit}s per {}", self.per.text()), '≥'),
            Bound::LessCpu => (format!("{} per {unit}", self.per.cpu()), '≤'),
        };
        format!(
            "{ratio:.2}× the {what} (goal {sign} {}×: {})",
            self.factor,
            if self.met(ratio) { "met" } else { "not met" }
        )
    }
}

/// Where a server stands against `goals`, each measured as `ratio` (work per CPU-second,
/// or CPU per unit of work, over the baseline's, as the goal's [`Bound`] says), under the
/// heading `head`; `skipped` says why it was not measured. `unit` names one unit of work
/// ("request"; an `s` makes it plural).
pub(crate) fn verdict(
    head: &str,
    goals: &[Goal],
    unit: &str,
    skipped: Option<&str>,
    ratio: impl Fn(&Goal) -> f64,
) -> String {
    if let Some(why) = skipped {
        let list: Vec<String> = goals
            .iter()
            .map(|g| format!("{}: {}", g.case, g.target(unit)))
            .collect();
        return format!(
            "{head} ({}): not measured in this run; {why}.\n",
            list.join("; ")
        );
    }
    let mut met = 0;
    let lines: Vec<String> = goals
        .iter()
        .map(|g| {
            let r = ratio(g);
            met += usize::from(g.met(r));
            format!("- {}: {}\n", g.case, g.outcome(unit, r))
        })
        .collect();
    format!(
        "{head}: met {met} of {} in this run:\n\n{}",
        goals.len(),
        lines.concat()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "Goals against the kernel";
    const GOALS: [Goal; 3] = [
        Goal::new("small", Per::ServerCpu, 3.0),
        Goal::new("small", Per::MachineCpu, 2.0),
        Goal::at_most_cpu("large", Per::ServerCpu, 1.1),
    ];

    #[test]
    fn verdict_counts_goals_met() {
        let ratio = |cost: f64| {
            move |g: &Goal| match (g.bound, g.per) {
                (Bound::LessCpu, _) => cost,
                (_, Per::ServerCpu) => 3.5,
                (_, Per::MachineCpu) => 1.5,
            }
        };
        let v = verdict(HEAD, &GOALS, "request", None, ratio(1.1));
        for want in [
            "Goals against the kernel: met 2 of 3",
            "- small: 3.50× the requests per server CPU-second (goal ≥ 3×: met)",
            "- small: 1.50× the requests per machine CPU-second (goal ≥ 2×: not met)",
            "- large: 1.10× the server CPU per request (goal ≤ 1.1×: met)",
        ] {
            assert!(v.contains(want), "{want} missing from\n{v}");
        }
        let v = verdict(HEAD, &GOALS, "request", None, ratio(1.12));
        assert!(
            v.contains("- large: 1.12× the server CPU per request (goal ≤ 1.1×: not met)"),
            "{v}"
        );
        let v = verdict(HEAD, &GOALS, "request", Some("no driver"), |_| 9.0);
        assert!(v.contains("not measured in this run; no driver."), "{v}");
        assert!(
            v.contains(
                "(small: ≥ 3× per server CPU-second; small: ≥ 2× per machine CPU-second; \
                 large: ≤ 1.1× the server CPU per request)"
            ),
            "{v}"
        );
    }
}
