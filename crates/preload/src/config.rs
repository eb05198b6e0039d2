//! What the library runs on, from the flags `rusty-run` was given.
//!
//! `rusty-run` checks its flags, then hands them to the library in the program's
//! environment, one per line, in [`FLAGS_VAR`]; the library parses them with the same
//! parser ([`StackArgs`]), so a flag means the same in both places and the library
//! never meets a flag `rusty-run` did not accept.

use std::ffi::OsString;
use std::time::Duration;

use clap::{Args, Parser};
use rusty::cli::CommonArgs;
use rusty::launch::Launch;
use rusty_stack::io::MacAddr;

/// The environment variable that carries the stack flags, one per line. Unset or
/// empty: the library stays out of the way and every call goes to libc.
pub const FLAGS_VAR: &str = "RUSTY_PRELOAD_FLAGS";

/// The flags that say which link the program's sockets run on and how the stack on it
/// behaves: `rusty-run`'s, without the program.
#[derive(Debug, Clone, Args)]
pub struct StackArgs {
    /// The link: DRIVER:NAME, its address and prefix, and optionally how many queues
    /// it has (processes of the program that may each run a stack on it; default 1),
    /// e.g. 'tap:tap0 10.0.2.2/24' or 'xdp:eth1 192.168.1.20/24 2'.
    #[arg(long, value_name = "'LINK IP/PREFIX [QUEUES]'")]
    pub link: String,
    /// The stack's MAC address on the link, the same in every process of the program
    /// (default: a random locally administered one, which rusty-run picks and passes
    /// on).
    #[arg(long, value_name = "MAC", value_parser = parse_mac)]
    pub mac: Option<MacAddr>,
    /// Microseconds a blocking call or a wait polls the link before it sleeps in the
    /// kernel. 0 (the default) sleeps at once: polling a TAP is a system call each
    /// time, which costs more than it saves; on AF_XDP, whose rings are polled in
    /// memory, 20 to 50 can shorten the wake-up.
    #[arg(
        long = "wait-spin-us",
        value_name = "MICROSECONDS",
        default_value_t = 0
    )]
    pub wait_spin_us: u64,
    /// The stack flags every Rusty binary takes.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// [`StackArgs`] as a whole command line, for parsing the environment's copy.
#[derive(Debug, Parser)]
#[command(name = "librusty_preload", no_binary_name = true)]
struct FromEnv {
    #[command(flatten)]
    stack: StackArgs,
}

/// The parsed configuration: the launch description of the one link and the wait.
#[derive(Debug, Clone)]
pub struct Config {
    /// The link and every engine setting, as the other binaries build it.
    pub launch: Launch,
    /// How long a wait polls before it sleeps.
    pub spin: Duration,
    /// The stack's MAC address, the same in every process of the program, so that
    /// whichever queue a frame reaches, it is addressed to that process's stack. `None`
    /// only without `rusty-run` (the first queue's own, then kept across fork).
    pub mac: Option<MacAddr>,
}

impl Config {
    /// Whether each process of the program can open a queue of its own on the link (a
    /// TAP can; an AF_XDP queue is opened once and handed from parent to child, see
    /// `handover`).
    pub fn queue_per_process(&self) -> bool {
        self.launch
            .links
            .first()
            .is_some_and(|l| matches!(l.kind, rusty::cli::link::LinkKind::Tap { .. }))
    }
}

impl StackArgs {
    /// Check the flags and build the configuration.
    pub fn config(&self) -> Result<Config, String> {
        let mut words: Vec<String> = self.link.split_whitespace().map(String::from).collect();
        match words.len() {
            2 => words.push("1".into()),
            3 => {}
            _ => {
                return Err(format!(
                    "--link '{}': want 'DRIVER:NAME IP/PREFIX [QUEUES]'",
                    self.link
                ))
            }
        }
        if words[0] == "kernel" {
            return Err("--link: the kernel is what the program uses without rusty-run".into());
        }
        // The other binaries' positional form: how many links, then each link.
        words.insert(0, "1".into());
        let launch = self.common.launch(&words)?;
        Ok(Config {
            launch,
            spin: Duration::from_micros(self.wait_spin_us),
            mac: self.mac,
        })
    }

    /// The flags as `rusty-run` passes them on: `args` (the flags it was given, in
    /// order), one per line.
    pub fn to_env(args: &[OsString]) -> Result<String, String> {
        let mut out = String::new();
        for a in args {
            let a = a
                .to_str()
                .ok_or_else(|| format!("flag {a:?} is not UTF-8"))?;
            if a.contains('\n') {
                return Err(format!("flag {a:?} contains a newline"));
            }
            out.push_str(a);
            out.push('\n');
        }
        Ok(out)
    }
}

/// A MAC address as six hexadecimal bytes separated by colons.
pub fn parse_mac(s: &str) -> Result<MacAddr, String> {
    let bytes: Vec<u8> = s
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).ok().filter(|_| b.len() == 2))
        .collect::<Option<_>>()
        .ok_or_else(|| format!("'{s}' is not a MAC address like 02:00:00:00:00:01"))?;
    let mac: [u8; 6] = bytes
        .try_into()
        .map_err(|_| format!("'{s}' is not a MAC address like 02:00:00:00:00:01"))?;
    if mac[0] & 1 != 0 {
        return Err(format!("'{s}' is a group address, not a station's"));
    }
    Ok(MacAddr(mac))
}

/// A random locally administered unicast MAC address (the TAP driver's).
pub fn random_mac() -> Result<MacAddr, String> {
    rusty_drivers_tap::random_mac().map_err(|e| e.to_string())
}

/// The configuration in the environment's [`FLAGS_VAR`]: `None` when it is unset or
/// empty, an error when it does not parse.
pub fn from_env(value: Option<&str>) -> Option<Result<Config, String>> {
    let value = value.filter(|v| !v.trim().is_empty())?;
    let args = value.lines().filter(|l| !l.is_empty());
    Some(
        FromEnv::try_parse_from(args)
            .map_err(|e| e.to_string())
            .and_then(|f| f.stack.config()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_through_the_environment() {
        let args: Vec<OsString> = [
            "--link",
            "tap:tap0 10.0.2.2/24",
            "--tap-host",
            "10.0.2.1/24",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let env = StackArgs::to_env(&args).unwrap();
        let cfg = from_env(Some(&env)).unwrap().unwrap();
        assert_eq!(cfg.launch.links.len(), 1);
        assert_eq!(cfg.launch.links[0].workers, 1);
        assert_eq!(cfg.launch.tap_host.map(|h| h.1), Some(24));
        assert_eq!(cfg.spin, Duration::ZERO);
    }

    #[test]
    fn no_flags_means_no_configuration_and_bad_ones_an_error() {
        assert!(from_env(None).is_none());
        assert!(from_env(Some("  ")).is_none());
        assert!(from_env(Some("--link\ntap:tap0\n")).unwrap().is_err());
        assert!(from_env(Some("--link\nkernel 10.0.0.1/24\n"))
            .unwrap()
            .is_err());
        assert!(from_env(Some("--bogus\n")).unwrap().is_err());
        let three = from_env(Some("--link\ntap:t0 10.0.2.2/24 2\n"))
            .unwrap()
            .unwrap();
        assert_eq!(three.launch.links[0].workers, 2);
    }
}
