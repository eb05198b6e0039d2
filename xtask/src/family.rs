//! The address families `bench http`, `bench echo` and `bench ws` measure side by side:
//! `--family`, each family's addresses on a benchmark's links, the table's rows keyed by
//! server and family, and the goal IPv6 is held to against IPv4 on the same path.
//!
//! Rusty's servers get both families' addresses on their link (`10.x.0.2/24,
//! fd00:x::2/64`) and the kernel's end of the link both of its own (the IPv6 one without
//! duplicate address detection, usable at once), so that one server, started the same
//! way, answers the clients of either family; the kernel backend listens on `[::]`, both
//! families, and is reached over loopback at `127.0.0.1` or `::1`. `--family` says which
//! clients run. Rusty's engine probes for duplicates of its IPv6 addresses for about a
//! second before it uses them, so a server counts as ready only once a connection to the
//! address its run targets opens.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use crate::common::median_by;
use crate::goals::{self, Goal, Per};
use crate::http_load::report::Row;

/// An address family a run goes over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    V4,
    V6,
}

impl Family {
    /// The loopback address, where a client reaches a server on the kernel's sockets.
    pub(crate) fn loopback(self) -> &'static str {
        match self {
            Family::V4 => "127.0.0.1",
            Family::V6 => "::1",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        })
    }
}

/// `--family`: the families a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Families {
    Ipv4,
    Ipv6,
    Both,
}

impl Families {
    pub(crate) fn list(self) -> Vec<Family> {
        match self {
            Families::Ipv4 => vec![Family::V4],
            Families::Ipv6 => vec![Family::V6],
            Families::Both => vec![Family::V4, Family::V6],
        }
    }

    /// The family the goals against a baseline are judged in: IPv4 when it is measured.
    pub(crate) fn first(self) -> Family {
        self.list()[0]
    }

    /// Why IPv6 cannot be judged against IPv4: only one of them was measured.
    pub(crate) fn one_only(self) -> Option<&'static str> {
        match self {
            Families::Ipv4 => Some("only IPv4 was measured (`--family ipv4`)"),
            Families::Ipv6 => Some("only IPv6 was measured (`--family ipv6`)"),
            Families::Both => None,
        }
    }
}

/// `host:port` as a URL or a socket address writes it: an IPv6 address in brackets
/// (`[fd00::2]:7`).
pub(crate) fn endpoint(host: &str, port: u16) -> String {
    match host.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, port).to_string(),
        Err(_) => format!("{host}:{port}"),
    }
}

/// One family's subnet on a link: the kernel's end as `ADDRESS/PREFIX`, and Rusty's
/// address.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Subnet {
    pub kernel_cidr: &'static str,
    pub rusty: &'static str,
}

impl Subnet {
    /// Rusty's address with the subnet's prefix (`10.79.0.2/24`).
    pub(crate) fn rusty_cidr(&self) -> String {
        let prefix = self.kernel_cidr.rsplit_once('/').map_or("", |(_, p)| p);
        format!("{}/{prefix}", self.rusty)
    }
}

/// A link's subnets, one per family.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Subnets {
    pub v4: Subnet,
    pub v6: Subnet,
}

impl Subnets {
    pub(crate) fn of(&self, family: Family) -> Subnet {
        match family {
            Family::V4 => self.v4,
            Family::V6 => self.v6,
        }
    }

    /// Rusty's addresses as a link spec writes them (`10.79.0.2/24,fd00:79::2/64`).
    pub(crate) fn rusty_spec(&self) -> String {
        format!("{},{}", self.v4.rusty_cidr(), self.v6.rusty_cidr())
    }
}

/// A server (or backend) over one family: what a row of a benchmark's table stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Over<S> {
    pub server: S,
    pub family: Family,
}

impl<S> Over<S> {
    pub(crate) const fn new(server: S, family: Family) -> Over<S> {
        Over { server, family }
    }
}

impl<S: Row> Row for Over<S> {
    fn label(self) -> String {
        format!("{}, {}", self.server.label(), self.family)
    }

    fn short(self) -> String {
        format!("{} {}", self.server.short(), self.family)
    }
}

/// The rows of a run in order: each of `servers` over each of `families`, except IPv6
/// for the servers `v4_only` names.
pub(crate) fn rows<S: Copy>(
    servers: &[S],
    families: &[Family],
    v4_only: impl Fn(S) -> bool,
) -> Vec<Over<S>> {
    let mut rows = Vec::new();
    for &s in servers {
        for &f in families {
            if f == Family::V4 || !v4_only(s) {
                rows.push(Over::new(s, f));
            }
        }
    }
    rows
}

/// The ratio rows: each of `rusty` against each of `baselines` over IPv4, the same over
/// IPv6, then each server over IPv6 against itself over IPv4. A table leaves out the
/// pairs it has no runs for.
pub(crate) fn pairs<S: Copy>(rusty: &[S], baselines: &[S]) -> Vec<(Over<S>, Over<S>)> {
    let mut pairs = Vec::new();
    for f in [Family::V4, Family::V6] {
        for &r in rusty {
            for &b in baselines {
                pairs.push((Over::new(r, f), Over::new(b, f)));
            }
        }
    }
    for &s in rusty.iter().chain(baselines) {
        pairs.push((Over::new(s, Family::V6), Over::new(s, Family::V4)));
    }
    pairs
}

/// One case of a run: its label and its runs, by server and family.
pub(crate) type CaseRuns<'a, S, T> = (&'static str, &'a [(Over<S>, T)]);

/// The goal of IPv6 on each of Rusty's paths, in every case: at most this many times the
/// server CPU per unit of work that IPv4 costs on the same path (10 % more).
pub(crate) const IPV6_COST: f64 = 1.1;

/// Where `server` (named `name` in the heading, "Rusty on TAP") stands over IPv6
/// against itself over IPv4 in each of `cases` (its label and its runs), by the medians
/// of `cpu` (a run's server CPU per unit of work, `unit`); `skipped` says why it was not
/// measured. See [`goals::verdict`].
pub(crate) fn ipv6_verdict<S: Copy + PartialEq, T>(
    name: &str,
    server: S,
    cases: &[CaseRuns<'_, S, T>],
    unit: &str,
    skipped: Option<&str>,
    cpu: impl Fn(&T) -> f64,
) -> String {
    let goals: Vec<Goal> = cases
        .iter()
        .map(|&(case, _)| Goal::at_most_cpu(case, Per::ServerCpu, IPV6_COST))
        .collect();
    let head = format!("Goals for {name} over IPv6 against IPv4 on the same path");
    goals::verdict(&head, &goals, unit, skipped, |g| {
        let runs = cases
            .iter()
            .find(|(case, _)| *case == g.case)
            .map_or(&[][..], |(_, runs)| runs);
        let of = |f| median_by(runs, Over::new(server, f), &cpu);
        of(Family::V6) / of(Family::V4)
    })
}

/// The results page's paragraph on the families: which were measured and how, and the
/// goal of IPv6. `unit` names the work ("request"); `v4_only` names what runs over IPv4
/// alone ("nginx"), if anything does.
pub(crate) fn page_note(families: Families, unit: &str, v4_only: Option<&str>) -> String {
    let measured = match families {
        Families::Both => "over IPv4 and over IPv6, side by side in every round (`--family both`)",
        Families::Ipv4 => "over IPv4 only (`--family ipv4`)",
        Families::Ipv6 => "over IPv6 only (`--family ipv6`)",
    };
    let v4_only = v4_only.map_or(String::new(), |s| format!(" ({s} over IPv4 only)"));
    format!(
        "Each server runs {measured}{v4_only}. Rusty's link has an address of each family,\n\
         and so has the kernel's end of it (IPv6: a unique-local /64, the kernel's address\n\
         without duplicate address detection), so that the same server, started the same way,\n\
         answers either family; the kernel backend listens on `[::]` and is reached at\n\
         `127.0.0.1` or `[::1]`. The goal for Rusty (TAP, AF_XDP) over IPv6 is at most\n\
         {IPV6_COST}× the server CPU per {unit} of IPv4 on the same path, in every case; the\n\
         IPv6 / IPv4 ratio rows hold {unit}s per CPU-second like the others, where the goal\n\
         is at least {:.2}×.",
        1.0 / IPV6_COST
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum S {
        Rusty,
        Kernel,
        Other,
    }

    impl Row for S {
        fn label(self) -> String {
            format!("server {self:?}")
        }
        fn short(self) -> String {
            format!("{self:?}")
        }
    }

    #[test]
    fn addresses() {
        assert_eq!(endpoint("10.79.0.2", 7), "10.79.0.2:7");
        assert_eq!(endpoint("fd00:79::2", 7), "[fd00:79::2]:7");
        assert_eq!(endpoint(Family::V6.loopback(), 80), "[::1]:80");
        let subnet = |kernel_cidr, rusty| Subnet { kernel_cidr, rusty };
        let tap = Subnets {
            v4: subnet("10.9.0.1/24", "10.9.0.2"),
            v6: subnet("fd00:9::1/64", "fd00:9::2"),
        };
        assert_eq!(tap.rusty_spec(), "10.9.0.2/24,fd00:9::2/64");
        assert_eq!(tap.of(Family::V6).rusty, "fd00:9::2");
        assert_eq!(Families::Both.list(), [Family::V4, Family::V6]);
        assert_eq!(Families::Ipv6.first(), Family::V6);
        assert!(Families::Both.one_only().is_none());
        let note = page_note(Families::Both, "request", Some("nginx"));
        assert!(
            note.starts_with("Each server runs over IPv4 and over IPv6"),
            "{note}"
        );
        assert!(note.contains("(nginx over IPv4 only)"), "{note}");
        assert!(
            note.contains("at most\n1.1× the server CPU per request"),
            "{note}"
        );
        assert!(note.contains("is at least 0.91×."), "{note}");
    }

    #[test]
    fn rows_pairs_and_names() {
        let rows = rows(&[S::Rusty, S::Other], &Families::Both.list(), |s| {
            s == S::Other
        });
        assert_eq!(
            rows,
            [
                Over::new(S::Rusty, Family::V4),
                Over::new(S::Rusty, Family::V6),
                Over::new(S::Other, Family::V4)
            ]
        );
        assert_eq!(rows[1].label(), "server Rusty, IPv6");
        assert_eq!(rows[1].short(), "Rusty IPv6");
        let p = pairs(&[S::Rusty], &[S::Kernel]);
        let v4 = |s| Over::new(s, Family::V4);
        let v6 = |s| Over::new(s, Family::V6);
        assert_eq!(
            p,
            [
                (v4(S::Rusty), v4(S::Kernel)),
                (v6(S::Rusty), v6(S::Kernel)),
                (v6(S::Rusty), v4(S::Rusty)),
                (v6(S::Kernel), v4(S::Kernel)),
            ]
        );
    }

    #[test]
    fn ipv6_goal_is_server_cpu_per_unit_against_ipv4() {
        // Server CPU per request: IPv4 1.0, 2.0, 3.0 (median 2.0); IPv6 2.3 and 2.5.
        let runs: Vec<(Over<S>, f64)> = [(Family::V4, 1.0), (Family::V4, 3.0)]
            .into_iter()
            .chain([(Family::V4, 2.0), (Family::V6, 2.3), (Family::V6, 2.5)])
            .map(|(f, cpu)| (Over::new(S::Rusty, f), cpu))
            .collect();
        let fast: Vec<(Over<S>, f64)> = runs
            .iter()
            .map(|&(k, cpu)| (k, if k.family == Family::V6 { 2.0 } else { cpu }))
            .collect();
        let cases = [("small", &runs[..]), ("large", &fast[..])];
        let v = ipv6_verdict("Rusty on TAP", S::Rusty, &cases, "request", None, |c| *c);
        for want in [
            "Goals for Rusty on TAP over IPv6 against IPv4 on the same path: met 1 of 2",
            "- small: 1.20× the server CPU per request (goal ≤ 1.1×: not met)",
            "- large: 1.00× the server CPU per request (goal ≤ 1.1×: met)",
        ] {
            assert!(v.contains(want), "{want} missing from\n{v}");
        }
        let why = Families::Ipv4.one_only();
        let v = ipv6_verdict("Rusty on TAP", S::Rusty, &cases, "request", why, |c| *c);
        assert!(
            v.contains("not measured in this run; only IPv4 was measured (`--family ipv4`)."),
            "{v}"
        );
    }
}
