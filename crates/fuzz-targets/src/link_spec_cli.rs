//! The command line every binary shares: link specs ([`parse_links`]), the value
//! grammars ([`parse_cidr`], [`parse_cpus`]) and the whole flag set ([`CommonArgs`]
//! under clap, then [`CommonArgs::launch`]).
//!
//! The input is a byte choosing how to split the rest into arguments (bit 0: at NULs,
//! else at ASCII whitespace), then the arguments, raw bytes (not necessarily UTF-8).
//! Checked: what parses renders back to itself (link kinds, addresses), CPU lists stay
//! within their bound, and a command line clap accepts launches with the same links
//! [`parse_links`] reads.

use std::cell::RefCell;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use clap::{CommandFactory, FromArgMatches, Parser};
use rusty::cli::link::{parse_links, LinkKind};
use rusty::cli::parse::{parse_cidr, parse_cpus, MAX_CPU};
use rusty::cli::CommonArgs;

use crate::input::Input;

/// A binary's command line as the servers shape it: a port, the link specs, the flags.
#[derive(Debug, Parser)]
#[command(name = "rusty")]
struct Cli {
    port: u16,
    links: Vec<String>,
    #[command(flatten)]
    common: CommonArgs,
}

thread_local! {
    static COMMAND: RefCell<clap::Command> = RefCell::new(Cli::command());
}

/// Parse `data` as a command line. Panics on a bug.
pub fn link_spec_cli(data: &[u8]) {
    let mut input = Input::new(data);
    let mode = input.u8();
    let rest = input.rest();
    let args: Vec<&[u8]> = if mode & 1 != 0 {
        rest.split(|&c| c == 0).collect()
    } else {
        rest.split(u8::is_ascii_whitespace)
            .filter(|a| !a.is_empty())
            .collect()
    };
    let strings: Vec<String> = args
        .iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();

    if let Ok(links) = parse_links(&strings) {
        assert_eq!(links.len() * 3 + 1, strings.len().max(1));
        for l in &links {
            assert!(l.workers > 0 && l.prefix_len <= 32);
            assert_eq!(l.kind.to_string().parse::<LinkKind>().as_ref(), Ok(&l.kind));
            let cidr = format!("{}/{}", l.ip, l.prefix_len);
            assert_eq!(parse_cidr(&cidr), Ok((l.ip, l.prefix_len)));
        }
    }
    for s in &strings {
        if let Ok((ip, len)) = parse_cidr(s) {
            assert!(len <= 32);
            assert_eq!(parse_cidr(&format!("{ip}/{len}")), Ok((ip, len)));
        }
        // A list of N ranges may name N × 8192 CPUs; keep each run cheap.
        if s.len() <= 64 {
            if let Ok(cpus) = parse_cpus(s) {
                assert!(!cpus.is_empty() && cpus.iter().all(|&c| c <= MAX_CPU));
            }
        }
    }

    let argv = std::iter::once(OsString::from("rusty"))
        .chain(args.iter().map(|a| OsString::from_vec(a.to_vec())));
    // clap builds its parser once per process; parsing does not change it.
    let parsed = COMMAND.with_borrow_mut(|cmd| {
        cmd.try_get_matches_from_mut(argv)
            .and_then(|m| Cli::from_arg_matches(&m))
    });
    match parsed {
        Ok(cli) => {
            if let Ok(launch) = cli.common.launch(&cli.links) {
                assert_eq!(Ok(launch.links.clone()), parse_links(&cli.links));
                let _ = launch.describe_links();
                let _ = launch.engine_tcp();
            }
        }
        // Rendering the error (or the help it carries) must not panic either.
        Err(e) => drop(e.to_string()),
    }
}
