//! What a run reports: one row per case with Rusty and Linux side by side, and the
//! block of `docs/benchmarks.md` around it.

use std::fmt::Write as _;

use super::net::{PEER_IP, RUSTY_IP, SERVER_IP};
use super::runs::Sample;
use super::{percent_label, size_label, Case, Direction, Options, Stack};
use crate::chart::{self, Axes, Line, LinePanel};
use crate::common::{median_by, provenance, Result};
use crate::results::Chart;

/// Three significant-ish digits; `—` for no value.
pub(super) fn num(v: f64) -> String {
    if !v.is_finite() {
        "—".into()
    } else if v.abs() >= 99.95 {
        format!("{v:.0}")
    } else if v.abs() >= 9.995 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn ratio(a: f64, b: f64) -> String {
    let r = a / b;
    if r.is_finite() {
        format!("**{}×**", num(r))
    } else {
        "—".into()
    }
}

/// The markdown table: per case, the medians for Rusty and Linux and their ratios.
pub(super) fn table(cases: &[Case], samples: &[Vec<(Stack, Sample)>]) -> String {
    let mut t = String::from(
        "| Rusty as | transfer | loss each way | goodput MB/s, Rusty / Linux | Rusty ÷ Linux \
         | resent ÷ lost bytes, Rusty / Linux | sender's RTOs, Rusty / Linux \
         | server CPU ms per MB, Rusty / Linux | Rusty ÷ Linux \
         | machine CPU ms per MB, Rusty / Linux |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut any_timeout = false;
    for (case, runs) in cases.iter().zip(samples) {
        let both = |f: &dyn Fn(&Sample) -> f64| {
            (
                median_by(runs, Stack::Rusty, f),
                median_by(runs, Stack::Linux, f),
            )
        };
        let mark = |stack: Stack| {
            if runs.iter().any(|(s, x)| *s == stack && x.peer.timed_out) {
                "†"
            } else {
                ""
            }
        };
        let (mr, ml) = (mark(Stack::Rusty), mark(Stack::Linux));
        any_timeout |= !mr.is_empty() || !ml.is_empty();
        let goodput = both(&Sample::goodput_mb_s);
        let resent = both(&Sample::retransmitted_per_lost);
        let rtos = both(&|s| s.rtos as f64);
        let server = both(&Sample::server_ms_per_mb);
        let machine = both(&Sample::machine_ms_per_mb);
        let _ = writeln!(
            t,
            "| {} | {} | {} | {}{mr} / {}{ml} | {} | {} / {} | {} / {} | {} / {} | {} | {} / {} |",
            case.direction.label(),
            case.transfer(),
            case.loss(),
            num(goodput.0),
            num(goodput.1),
            ratio(goodput.0, goodput.1),
            num(resent.0),
            num(resent.1),
            rtos.0,
            rtos.1,
            num(server.0),
            num(server.1),
            ratio(server.0, server.1),
            num(machine.0),
            num(machine.1),
        );
    }
    if any_timeout {
        t.push_str(
            "\n† At least one run did not finish within the timeout; its goodput counts what \
             arrived by then, and bytes still in flight make its resent ÷ lost low.\n",
        );
    }
    t
}

/// Goodput against the loss rate: a panel per role of Rusty's, a line per stack and
/// transfer, each point the median of the runs (`loss-goodput.svg`).
pub(super) fn chart(cases: &[Case], samples: &[Vec<(Stack, Sample)>]) -> Result<Chart> {
    let mut panels: Vec<LinePanel> = Vec::new();
    for direction in [Direction::RustySends, Direction::RustyReceives] {
        let mut lines: Vec<Line> = Vec::new();
        for (case, runs) in cases.iter().zip(samples) {
            if case.direction != direction {
                continue;
            }
            for stack in [Stack::Rusty, Stack::Linux] {
                let name = format!("{}, {}", stack.label(), case.transfer());
                let x = f64::from(case.basis_points) / 100.0;
                let point = (x, median_by(runs, stack, Sample::goodput_mb_s));
                match lines.iter_mut().find(|l| l.name == name) {
                    Some(line) => line.points.push(point),
                    None => lines.push(Line {
                        name,
                        points: vec![point],
                    }),
                }
            }
        }
        if !lines.is_empty() {
            panels.push(LinePanel {
                name: format!("Rusty as {}", direction.label()),
                lines,
            });
        }
    }
    let axes = Axes {
        title: "Loss: goodput against random packet loss, median of the runs".into(),
        x: "loss each way (%)".into(),
        y: "goodput (MB/s)".into(),
    };
    Ok(Chart {
        file: "loss-goodput.svg".into(),
        alt: "Loss: goodput of Rusty and Linux against the loss rate".into(),
        svg: chart::lines(&axes, &panels)?,
    })
}

pub(super) fn block_body(opts: &Options, charts: &str, table: &str) -> String {
    let (n, per) = opts.multi();
    let spin = opts.host.spin("the binaries' default `--spin-us 200`");
    let rates: Vec<String> = opts.loss().into_iter().map(percent_label).collect();
    format!(
        "### Loss: bulk transfers under random packet loss, Rusty vs Linux\n\
         \n\
         {provenance}.\n\
         {rounds} run(s) per case and stack, alternating which stack goes first; each cell is\n\
         the median over the runs. One connection carrying {single}, and {n} connections at\n\
         once carrying {per} each, while nftables drops {rates} of the TCP packets in each\n\
         direction (`numgen random`, drawn independently per direction; {timeout} s allowed\n\
         per transfer). Options: `--quick` (smoke run; leaves this page alone), `--single\n\
         SIZE`, `--multi NxSIZE`, `--loss P,…`, `--rusty-as sender|receiver|both`,\n\
         `--rounds`, `--timeout`, `--keep-logs`, `--no-docs`, `--no-build`.\n\
         \n\
         - Rusty as sender: `httpd` serves a generated file, on Rusty (`httpd 8080 DIR 1\n\
           tap:NAME {RUSTY_IP}/24 1 --no-tso`) and, for the baseline, on kernel sockets\n\
           ({SERVER_IP}); a Linux client ({PEER_IP}, Python, `GET` with `Connection: close`)\n\
           downloads it.\n\
         - Rusty as receiver: the Linux client sends to `echo --discard` (RFC 863) on Rusty\n\
           (`echo 9 1 tap:NAME {RUSTY_IP}/24 1 --discard`) and on kernel sockets, which\n\
           close after the client's FIN once they have taken every byte (checked against\n\
           the count the server prints).\n\
         \n\
         Three namespaces: the client's, the kernel server's, and between them one holding a\n\
         bridge with three ports (a veth to the client, a veth to the kernel server, and the\n\
         TAP to Rusty). The loss rules sit on the bridge, so they are the same for both\n\
         stacks and a hop away from either TCP (dropping in the sending host's own output\n\
         path would be no loss: Linux sees the failed transmit and sends again). The\n\
         application and the client are the same on both sides; only the TCP at the far end\n\
         differs. Servers run one worker pinned to CPU {scpu} ({spin}); the client runs pinned\n\
         to CPU {ccpu}. No segmentation offload on the path (`gso_max_segs 1` on the kernel\n\
         senders' devices, Rusty `--no-tso`), so the rules see, and drop, single segments;\n\
         a run fails if a packet longer than the MTU passes.\n\
         \n\
         Goodput is the application's bytes over the client's wall time, from its first\n\
         connect to the end of its last connection. Resent ÷ lost bytes is counted on the\n\
         wire by the rules, the same way for both stacks: TCP payload bytes forwarded in the\n\
         data direction minus the bytes the receiving application read, over the payload\n\
         bytes dropped in that direction (1.0: each lost byte was sent again once; above:\n\
         spurious or repeated retransmissions). Sender's RTOs: Rusty's `rto` counter when\n\
         Rusty sends, Linux's `TcpExt.TCPTimeouts` in the sender's namespace otherwise (as a\n\
         receiver, Rusty is judged by the timeouts it costs the Linux sender). Server CPU is\n\
         the server process's utime + stime over the transfer (`/proc/PID/stat`), machine\n\
         CPU every CPU's busy time (`/proc/stat`, other load on the machine included), both\n\
         per MB (10⁶ bytes) moved, at the kernel's 10 ms tick. The kernel runs a receiver's\n\
         input (and the bridge) in the sender's context, so the server's CPU includes some\n\
         of the path's and the client kernel's work, on both sides alike.\n\
         \n\
         {charts}{table}",
        provenance = provenance(),
        rounds = opts.rounds(),
        single = size_label(opts.single()),
        per = size_label(per),
        rates = rates.join(", "),
        timeout = opts.timeout,
        scpu = opts.host.server_cpu,
        ccpu = opts.host.client_cpu,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goodput_chart_has_a_line_per_stack_and_transfer() {
        use super::super::peer::PeerResult;
        // `mb` MB moved in 1 s.
        let run = |stack, mb: u64| {
            let peer = PeerResult {
                payload_bytes: mb * 1_000_000,
                secs: 1.0,
                ..PeerResult::default()
            };
            (
                stack,
                Sample {
                    peer,
                    ..Sample::default()
                },
            )
        };
        let case = |direction, conns, basis_points| Case {
            direction,
            conns,
            bytes: 2_000_000,
            basis_points,
        };
        let (send, recv) = (Direction::RustySends, Direction::RustyReceives);
        let cases = [
            case(send, 1, 100),
            case(send, 1, 500),
            case(send, 4, 100),
            case(send, 4, 500),
            case(recv, 1, 100),
        ];
        let samples: Vec<Vec<(Stack, Sample)>> = (1..=5)
            .map(|i| vec![run(Stack::Rusty, 10 * i), run(Stack::Linux, i)])
            .collect();
        let c = chart(&cases, &samples).unwrap();
        assert_eq!(c.file, "loss-goodput.svg");
        let marks = crate::chart::check(&c.svg).unwrap();
        // Sender: Rusty and Linux at 1 × and 4 × 2 MB, two rates each; receiver: one
        // rate, a marker without a line.
        assert_eq!((marks.lines, marks.points, marks.legend), (4, 10, 4));
        for want in [
            ">\nRusty as sender\n<",
            ">\nRusty as receiver\n<",
            ">\nRusty (TAP), 4 × 2 MB\n<",
            ">\nLinux, 1 × 2 MB\n<",
            ">\nloss each way (%)\n<",
        ] {
            assert!(c.svg.contains(want), "{want} missing");
        }
        let only_one_role = chart(&cases[4..], &samples[4..]).unwrap();
        assert!(!only_one_role.svg.contains("Rusty as sender"));
    }

    #[test]
    fn numbers_and_ratios() {
        assert_eq!(num(1234.4), "1234");
        assert_eq!(num(12.34), "12.3");
        assert_eq!(num(1.234), "1.23");
        assert_eq!(num(9.999_999), "10.0");
        assert_eq!(num(99.96), "100");
        assert_eq!(num(f64::NAN), "—");
        assert_eq!(ratio(1.0, 4.0), "**0.25×**");
        assert_eq!(ratio(1.0, 0.0), "—");
    }
}
