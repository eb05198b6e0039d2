//! `cargo xtask bench http --tls`: the same three cases over HTTPS, httpd on Rusty (TAP)
//! against httpd on kernel sockets and nginx, with one certificate, one protocol
//! version, one cipher suite and one key-exchange group for all, and full handshakes
//! only ([`crate::http_load::tls`] says how each is enforced and checked).
//!
//! Setup as the plain benchmark's ([`super`]), with no AF_XDP row and everyone on port
//! [`TLS_PORT`]: an ECDSA P-256 certificate made by `openssl` in the temporary
//! directory; httpd with `--tls-cert --tls-key --tls-versions 1.3 --tls-no-resumption`;
//! nginx with `listen … ssl` and [`crate::http_load::tls::nginx_directives`]; wrk over
//! `https://` with `OPENSSL_CONF` naming [`crate::http_load::tls::client_conf`]. Before
//! the measured runs, each server is probed once with `openssl s_client` under wrk's
//! configuration: the run fails unless every server negotiates TLS 1.3, the suite and
//! the group, and sends no session ticket. After every httpd run, its counters give the
//! handshakes it completed and resumed; a resumed one fails the run.

use std::fs;
use std::path::PathBuf;

use super::report::{case_runs, charts, goal_ratio};
use super::runs::Ctx;
use super::tools::Tools;
use super::{measure, servers, tap_namespace, Options, Server, CASES, PORT, TAP};
use crate::common::{median_by, provenance, release_bin, warn_if_busy, Result, TempDir};
use crate::family::{self, Families, Family, Over};
use crate::goals::{self, Goal, Per};
use crate::http_load::report::{self, Row};
use crate::http_load::tls::{
    write_tls_files, Negotiated, TlsFiles, GROUP, PROBE_REQUEST, PROTOCOL, SUITE,
};
use crate::http_load::wrk::Sample;
use crate::http_load::{nginx, write_files, Files};
use crate::results::{publish, Block};

/// The port every server speaks HTTPS on.
pub(super) const TLS_PORT: u16 = 8443;
/// The marker lines of this benchmark's block in `docs/benchmarks.md`.
const BLOCK: Block = Block {
    start: "<!-- bench-http-tls:start -->",
    end: "<!-- bench-http-tls:end -->",
};
/// The goals for Rusty on TAP against nginx, both over TLS.
const GOALS: [Goal; 2] = [
    Goal::new(CASES[0].label, Per::ServerCpu, 1.5),
    Goal::new(CASES[1].label, Per::ServerCpu, 1.0),
];

/// What the runs over TLS need besides the plain ones: the certificate and wrk's
/// configuration, `openssl` for the probes, and the probes' request.
pub(super) struct TlsRun {
    pub files: TlsFiles,
    pub openssl: PathBuf,
    pub request: PathBuf,
}

pub(super) fn run(opts: &Options) -> Result<()> {
    let what = "bench http --tls";
    let (interrupted, root) = opts.run.host.prepare(what, &["rusty-httpd"])?;
    warn_if_busy(what);
    let httpd = release_bin(&root, "httpd")?;

    let pid = std::process::id();
    let tmp = TempDir::new(&format!("rusty-bench-http-tls-{pid}"))?;
    let tools = Tools::find_or_install(opts, tmp.path(), &interrupted)?;
    let Files {
        set: _,
        pages: page_dir,
        script,
        logs,
    } = write_files(tmp.path(), what)?;
    let openssl = tools.openssl.clone().ok_or("openssl is needed for --tls")?;
    let names = [
        "localhost",
        TAP.v4.rusty,
        TAP.v6.rusty,
        Family::V4.loopback(),
        Family::V6.loopback(),
    ];
    let files = write_tls_files(&tmp.path().join("tls"), &openssl, &names)?;
    let request = tmp.path().join("tls").join("probe-request.txt");
    fs::write(&request, PROBE_REQUEST)
        .map_err(|e| format!("writing {}: {e}", request.display()))?;
    let tls = TlsRun {
        files,
        openssl,
        request,
    };
    let nginx_conf = match &tools.nginx {
        Some(_) => Some(nginx::write_nginx_conf(
            tmp.path(),
            "nginx",
            &page_dir,
            TLS_PORT,
            1,
            Some(&tls.files),
        )?),
        None => None,
    };

    let net = tap_namespace("rusty-bench-http-tls", pid)?;
    let servers = servers(&tools);
    let ctx = Ctx {
        opts,
        httpd,
        wrk: tools.wrk.clone(),
        nginx: tools.nginx.clone(),
        nginx_conf,
        pages: page_dir,
        script,
        net: &net,
        xdp: None,
        logs: &logs,
        interrupted: &interrupted,
        port: TLS_PORT,
        tls: Some(&tls),
    };
    let rows = family::rows(&servers, &opts.run.family.list(), |s| s == Server::Nginx);
    eprintln!(
        "{what}: {} runs of {} s, {} connections (server on CPU {}, wrk on CPU {}, \
         namespace {}); probing each server first",
        opts.run.load.rounds * CASES.len() * rows.len(),
        opts.run.load.duration,
        opts.connections,
        opts.run.host.server_cpu,
        opts.run.host.client_cpu,
        net.name
    );
    let mut probes = Vec::new();
    let mut samples: Vec<Vec<(Over<Server>, Sample)>> = vec![Vec::new(); CASES.len()];
    let result: Result<()> = (|| {
        for &row in &rows {
            let n = ctx.probe(row)?;
            eprintln!(
                "  probe {}: {} {} over {}, {} session tickets",
                row.label(),
                n.protocol,
                n.suite,
                n.group.as_deref().unwrap_or("?"),
                n.tickets
            );
            probes.push((row, n));
        }
        measure(&ctx, &rows, &mut samples)
    })();
    drop(net);
    tmp.finish(result, opts.run.host.keep_logs, what)?;

    let table = table(&samples, &rows);
    let handshakes = handshakes(&samples, &rows);
    let nginx_skipped = tools.nginx_note.as_deref().map(|n| format!("nginx {n}"));
    let verdict = verdict(&samples, nginx_skipped.as_deref(), opts.run.family);
    println!("{table}\n{handshakes}\n{verdict}");
    let charts = charts("http-tls", "HTTPS", &samples, &rows)?;
    let text = Text {
        table: &table,
        handshakes: &handshakes,
        verdict: &verdict,
    };
    publish(
        &root,
        what,
        opts.run.host.no_docs,
        &charts,
        BLOCK,
        |charts| block_body(opts, &tools, &probes, charts, &text),
    )
}

/// The block's text besides its charts.
struct Text<'a> {
    table: &'a str,
    handshakes: &'a str,
    verdict: &'a str,
}

/// The table of medians and of the ratios of Rusty on TAP to each baseline in the same
/// family, and of each server over IPv6 to itself over IPv4.
fn table(samples: &[Vec<(Over<Server>, Sample)>], rows: &[Over<Server>]) -> String {
    let pairs = family::pairs(&[Server::Tap], &[Server::Kernel, Server::Nginx]);
    report::table(&case_runs(samples), rows, &pairs)
}

/// The handshakes httpd counted per request wrk counted, per case and httpd row (the
/// median over the runs), and the resumed ones over all runs.
fn handshakes(samples: &[Vec<(Over<Server>, Sample)>], rows: &[Over<Server>]) -> String {
    let mut lines = Vec::new();
    for (case, runs) in CASES.iter().zip(samples) {
        for &row in rows.iter().filter(|r| r.server != Server::Nginx) {
            let counted: Vec<_> = runs
                .iter()
                .filter(|(r, s)| *r == row && s.handshakes.is_some())
                .collect();
            if counted.is_empty() {
                continue;
            }
            let per_request = median_by(runs, row, |s| match s.handshakes {
                Some(h) if s.requests > 0 => h.completed as f64 / s.requests as f64,
                _ => f64::NAN,
            });
            let resumed: u64 = counted
                .iter()
                .filter_map(|(_, s)| s.handshakes)
                .map(|h| h.resumed)
                .sum();
            lines.push(format!(
                "- {}, {}: {per_request:.4} handshakes per request, {resumed} resumed\n",
                case.label,
                row.label()
            ));
        }
    }
    format!(
        "Full TLS handshakes httpd counted (its `tls total:` counters) per request wrk \
         counted, median over the runs; nginx counts none, its probe showed it sends no \
         ticket to resume with:\n\n{}",
        lines.concat()
    )
}

/// Where Rusty on TAP stands against its goals over nginx ([`GOALS`]) over IPv4, the
/// only family nginx runs in; `nginx_skipped` says why nginx did not run.
fn verdict(
    samples: &[Vec<(Over<Server>, Sample)>],
    nginx_skipped: Option<&str>,
    families: Families,
) -> String {
    let skipped = nginx_skipped.map(str::to_string).or_else(|| {
        (!families.list().contains(&Family::V4))
            .then(|| "nginx runs over IPv4 only, and only IPv6 was measured".to_string())
    });
    let on = |s| Over::new(s, Family::V4);
    let tap = goals::verdict(
        "Goals for Rusty on TAP against nginx, both over TLS and IPv4",
        &GOALS,
        "request",
        skipped.as_deref(),
        |g| goal_ratio(samples, g, on(Server::Tap), on(Server::Nginx)),
    );
    let cases = case_runs(samples);
    let v6 = family::ipv6_verdict(
        "Rusty on TAP",
        Server::Tap,
        &cases,
        "request",
        families.one_only(),
        Sample::server_us,
    );
    format!("{tap}\n{v6}")
}

fn block_body(
    opts: &Options,
    tools: &Tools,
    probes: &[(Over<Server>, Negotiated)],
    charts: &str,
    text: &Text<'_>,
) -> String {
    let Text {
        table,
        handshakes,
        verdict,
    } = text;
    let spin = opts.run.host.spin("the binary's default `--spin-us 200`");
    let versions = [
        tools.wrk_version.as_deref(),
        tools.nginx_version.as_deref(),
        tools.openssl_version.as_deref(),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(", ");
    let nginx_note = tools
        .nginx_note
        .as_deref()
        .map(|n| format!("\n\nnginx {n}: its rows are missing."))
        .unwrap_or_default();
    let probed: Vec<String> = probes
        .iter()
        .map(|(row, n)| {
            format!(
                "{}: {} {} over {}, {} tickets",
                row.label(),
                n.protocol,
                n.suite,
                n.group.as_deref().unwrap_or("?"),
                n.tickets
            )
        })
        .collect();
    format!(
        "### HTTPS: httpd on Rusty (TAP) vs httpd on kernel sockets vs nginx\n\
         \n\
         {provenance}; {versions}.\n\
         {rounds} run(s) × {d} s per case and server, rotating which server goes first; each\n\
         column is the median over the runs, requests/s also shows the slowest–fastest run.\n\
         \n\
         As in the plain HTTP benchmark, every server runs on CPU {scpu} (httpd with one\n\
         worker and {spin}; nginx with `worker_processes 1`) and\n\
         `taskset -c {ccpu} wrk -t1 -c{conns} -d{d}s --latency` on CPU {ccpu}, over `https://`\n\
         on port {TLS_PORT}: {PROTOCOL}, {SUITE}, {GROUP}, one ECDSA P-256 certificate, no\n\
         session resumption (the method is above this block). Rusty on TAP:\n\
         `httpd {TLS_PORT} PAGES 1 tap:NAME {tap} 1 --tls-cert CERT --tls-key KEY --tls-versions 1.3 --tls-no-resumption`;\n\
         kernel: the same without the link. What each server negotiated with `openssl\n\
         s_client` under wrk's configuration before the runs: {probed}.{nginx_note}\n\
         \n\
         {charts}{table}\n\
         {handshakes}\n\
         {verdict}",
        provenance = provenance(),
        rounds = opts.run.load.rounds,
        d = opts.run.load.duration,
        scpu = opts.run.host.server_cpu,
        ccpu = opts.run.host.client_cpu,
        conns = opts.connections,
        tap = TAP.rusty_spec(),
        probed = probed.join("; "),
    )
}

// The plain benchmark's port is not used over TLS.
const _: () = assert!(PORT != TLS_PORT);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http_load::tls::Handshakes;

    fn s(rps: f64, server_s: f64, handshakes: Option<u64>) -> Sample {
        Sample {
            latency_us: Some((100.0, 900.0)),
            handshakes: handshakes.map(|completed| Handshakes {
                completed,
                resumed: 0,
            }),
            ..Sample::for_test(rps, server_s, 10.0)
        }
    }

    #[test]
    fn tables_goals_and_handshakes() {
        let v4 = |s| Over::new(s, Family::V4);
        let keep = vec![
            (v4(Server::Tap), s(60_000.0, 5.0, Some(64))),
            (v4(Server::Kernel), s(30_000.0, 5.0, Some(64))),
            (v4(Server::Nginx), s(40_000.0, 5.0, None)),
        ];
        // 5,000 requests/s for 5 s: 25,000 requests, 25,064 handshakes.
        let close = vec![
            (v4(Server::Tap), s(5_000.0, 5.0, Some(25_064))),
            (v4(Server::Kernel), s(3_000.0, 5.0, Some(15_064))),
            (v4(Server::Nginx), s(6_000.0, 5.0, None)),
        ];
        let samples = vec![keep.clone(), close, keep];
        let rows = family::rows(
            &[Server::Tap, Server::Kernel, Server::Nginx],
            &[Family::V4],
            |s| s == Server::Nginx,
        );
        let t = table(&samples, &rows);
        assert!(
            t.contains("| 64 B, keep-alive | **TAP IPv4 / nginx IPv4** | **1.50×** | | **1.50×** per CPU-s |"),
            "{t}"
        );
        assert!(!t.contains("XDP"), "{t}");
        let h = handshakes(&samples, &rows);
        assert!(
            h.contains(
                "- 64 B, `Connection: close`, httpd, Rusty on TAP, IPv4: 1.0026 handshakes per \
                 request, 0 resumed"
            ),
            "{h}"
        );
        assert!(!h.contains("nginx, 1 worker, IPv4:"), "{h}");
        let v = verdict(&samples, None, Families::Ipv4);
        for want in [
            "Goals for Rusty on TAP against nginx, both over TLS and IPv4: met 1 of 2",
            "- 64 B, keep-alive: 1.50× the requests per server CPU-second (goal ≥ 1.5×: met)",
            "- 64 B, `Connection: close`: 0.83× the requests per server CPU-second (goal ≥ 1×: \
             not met)",
        ] {
            assert!(v.contains(want), "{want} missing from\n{v}");
        }
        let v = verdict(
            &samples,
            Some("nginx left out (--no-nginx)"),
            Families::Ipv4,
        );
        assert!(
            v.contains("not measured in this run; nginx left out (--no-nginx)."),
            "{v}"
        );
        let v = verdict(&samples, None, Families::Ipv6);
        assert!(v.contains("nginx runs over IPv4 only"), "{v}");
    }

    #[test]
    fn block_names_the_setup_and_what_was_negotiated() {
        let args = ["x", "--tls", "--duration", "2", "--rounds", "1"];
        let opts: Options = crate::common::parse_flags(&args).unwrap();
        assert!(opts.tls);
        let tools = Tools {
            wrk: "wrk".into(),
            openssl: Some("openssl".into()),
            openssl_version: Some("OpenSSL 3.0.19".into()),
            nginx: None,
            nginx_note: Some("left out (--no-nginx)".into()),
            nginx_version: None,
            wrk_version: Some("wrk 4.1.0".into()),
        };
        let probe = Negotiated {
            protocol: PROTOCOL.into(),
            suite: SUITE.into(),
            group: Some(GROUP.into()),
            tickets: 0,
            ok: true,
        };
        let probes = [(Over::new(Server::Tap, Family::V4), probe)];
        let text = Text {
            table: "TABLE\n",
            handshakes: "HANDSHAKES\n",
            verdict: "VERDICT\n",
        };
        let b = block_body(&opts, &tools, &probes, "CHARTS\n\n", &text);
        for want in [
            "### HTTPS: httpd on Rusty (TAP) vs httpd on kernel sockets vs nginx",
            "wrk 4.1.0, OpenSSL 3.0.19.",
            "1 run(s) × 2 s per case",
            "TLSv1.3, TLS_AES_128_GCM_SHA256, X25519",
            "httpd, Rusty on TAP, IPv4: TLSv1.3 TLS_AES_128_GCM_SHA256 over X25519, 0 tickets.",
            "nginx left out (--no-nginx): its rows are missing.",
            "CHARTS\n\nTABLE\n\nHANDSHAKES\n\nVERDICT",
        ] {
            assert!(b.contains(want), "{want} missing from\n{b}");
        }
    }
}
