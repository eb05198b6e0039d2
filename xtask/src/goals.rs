//! Goals a benchmark holds Rusty to: at least so many times a baseline's work per
//! server or machine CPU-second in a case, and the verdict a run prints on them.

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
}

/// A goal in one case: at least `factor` times the baseline's work per CPU-second.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Goal {
    /// The case's label in the table.
    pub case: &'static str,
    pub per: Per,
    pub factor: f64,
}

impl Goal {
    pub(crate) const fn new(case: &'static str, per: Per, factor: f64) -> Goal {
        Goal { case, per, factor }
    }
}

/// Where a server stands against `goals`, each measured as `ratio` (work per CPU-second
/// over the baseline's), under the heading `head`; `skipped` says why it was not
/// measured. `unit` names the work ("requests").
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
            .map(|g| format!("{}: ≥ {}× per {}", g.case, g.factor, g.per.text()))
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
            let ok = r >= g.factor;
            met += usize::from(ok);
            format!(
                "- {}: {r:.2}× the {unit} per {} (goal ≥ {}×: {})\n",
                g.case,
                g.per.text(),
                g.factor,
                if ok { "met" } else { "not met" }
            )
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
    const GOALS: [Goal; 2] = [
        Goal {
            case: "small",
            per: Per::ServerCpu,
            factor: 3.0,
        },
        Goal {
            case: "small",
            per: Per::MachineCpu,
            factor: 2.0,
        },
    ];

    #[test]
    fn verdict_counts_goals_met() {
        let v = verdict(HEAD, &GOALS, "requests", None, |g| match g.per {
            Per::ServerCpu => 3.5,
            Per::MachineCpu => 1.5,
        });
        for want in [
            "Goals against the kernel: met 1 of 2",
            "- small: 3.50× the requests per server CPU-second (goal ≥ 3×: met)",
            "- small: 1.50× the requests per machine CPU-second (goal ≥ 2×: not met)",
        ] {
            assert!(v.contains(want), "{want} missing from\n{v}");
        }
        let v = verdict(HEAD, &GOALS, "requests", Some("no driver"), |_| 9.0);
        assert!(v.contains("not measured in this run; no driver."), "{v}");
        assert!(
            v.contains("(small: ≥ 3× per server CPU-second; small: ≥ 2× per machine CPU-second)"),
            "{v}"
        );
    }
}
