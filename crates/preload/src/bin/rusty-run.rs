//! `rusty-run`: run an unmodified program with its TCP sockets on Rusty.
//!
//! ```text
//! rusty-run --link 'tap:tap0 10.0.2.2/24' [--tap-host 10.0.2.1/24] [stack flags] -- nginx -g 'daemon off;'
//! ```
//!
//! It checks its flags, puts `librusty_preload.so` in front of `LD_PRELOAD`, hands the
//! flags to the library in `RUSTY_PRELOAD_FLAGS` and the table the program's processes
//! share in `RUSTY_PRELOAD_SHARED` (a memory file's descriptor), and execs the program
//! (which keeps rusty-run's process id). With `--metrics` or `--metrics-file` it runs
//! the program as its child instead and stays beside it to export the counters the
//! program's processes publish (see `rusty_preload::supervisor`). The library is looked
//! for next to this executable unless `--library` names it.

use std::ffi::OsString;
use std::os::fd::IntoRawFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use clap::Parser;
use rusty::cli::link::LinkKind;
use rusty_preload::config::{random_mac, StackArgs, FLAGS_VAR};
use rusty_preload::supervisor::{self, Exports};
use rusty_preload::SHARED_VAR;
use rusty_stack::io::MacAddr;

/// Run a program with its TCP sockets on Rusty's stack.
#[derive(Debug, Parser)]
#[command(name = "rusty-run", version)]
struct RunArgs {
    #[command(flatten)]
    stack: StackArgs,
    /// The interposer library (default: librusty_preload.so next to rusty-run).
    #[arg(long, value_name = "PATH")]
    library: Option<PathBuf>,
    /// The program and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    program: Vec<OsString>,
}

fn main() -> ExitCode {
    let args = RunArgs::parse();
    match run(args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("rusty-run: {e}");
            // As the other binaries: 1 when the metrics cannot start, 2 for the rest
            // (flags, the library, the program).
            match e {
                supervisor::Error::Metrics(_) => ExitCode::from(1),
                _ => ExitCode::from(2),
            }
        }
    }
}

/// Run the program; the exit code, when rusty-run outlives it.
fn run(args: RunArgs) -> Result<u8, supervisor::Error> {
    let config = args.stack.config()?;
    let library = match args.library {
        Some(path) => path,
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find rusty-run's own path: {e}"))?
            .with_file_name("librusty_preload.so"),
    };
    if !library.is_file() {
        return Err(format!(
            "no interposer library at {} (build the rusty-preload crate, or pass --library)",
            library.display()
        )
        .into());
    }
    let library = library
        .canonicalize()
        .map_err(|e| format!("{}: {e}", library.display()))?;
    let mut flags = stack_flags(std::env::args_os().skip(1));
    if args.stack.mac.is_none() {
        // One address for every process the program forks or execs.
        flags.push("--mac".into());
        flags.push(format_mac(random_mac()?).into());
    }
    let flags = StackArgs::to_env(&flags)?;
    let mut preload = OsString::from(library.as_os_str());
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(" ");
        preload.push(old);
    }
    // The table the program's processes share, in a memory file that every process it
    // forks and every program it execs inherits (the descriptor stays open across the
    // exec below).
    let table = rusty_preload::table_file()?.into_raw_fd();
    let (program, rest) = args.program.split_first().expect("clap requires a program");
    let mut command = Command::new(program);
    command
        .args(rest)
        .env("LD_PRELOAD", preload)
        .env(FLAGS_VAR, flags)
        .env(SHARED_VAR, table.to_string());
    let common = &args.stack.common;
    if common.metrics.is_none() && common.metrics_file.is_none() {
        let err = command.exec();
        return Err(format!("cannot run {}: {err}", program.to_string_lossy()).into());
    }
    let name = match config.launch.links.first().map(|l| &l.kind) {
        Some(LinkKind::Tap { name }) => name.clone(),
        Some(LinkKind::Xdp { ifname }) => ifname.clone(),
        Some(other) => other.driver().to_string(),
        None => String::new(),
    };
    let exports = Exports {
        listen: common.metrics,
        file: common.metrics_file.clone(),
        name,
    };
    supervisor::supervise(command, table, &exports)
}

fn format_mac(mac: MacAddr) -> String {
    let b = mac.0;
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[0], b[1], b[2], b[3], b[4], b[5]
    )
}

/// rusty-run's own flags, which the library does not get (each takes a value).
const OWN_FLAGS: [&str; 3] = ["--library", "--metrics", "--metrics-file"];

/// The stack flags among rusty-run's arguments: everything before `--` but
/// [`OWN_FLAGS`] and their values.
fn stack_flags(args: impl Iterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for a in args.take_while(|a| a != "--") {
        let text = a.to_string_lossy();
        let own = OWN_FLAGS.iter().any(|f| {
            text.strip_prefix(f)
                .is_some_and(|rest| rest.starts_with('='))
        });
        if skip_value {
            skip_value = false;
        } else if OWN_FLAGS.contains(&text.as_ref()) {
            skip_value = true;
        } else if !own {
            out.push(a);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rusty_runs_own_flags_and_the_program_are_not_stack_flags() {
        let args = [
            "--link",
            "tap:t 10.0.0.2/24",
            "--library",
            "x.so",
            "--library=y.so",
            "--metrics",
            "127.0.0.1:9464",
            "--metrics-file=/tmp/m.prom",
            "--metrics-filex",
            "--spin-us",
            "5",
            "--",
            "prog",
            "--link",
        ];
        let got = stack_flags(args.iter().map(OsString::from));
        assert_eq!(
            got,
            [
                "--link",
                "tap:t 10.0.0.2/24",
                "--metrics-filex",
                "--spin-us",
                "5"
            ]
        );
    }
}
