//! Where a binary's log goes and how much of it: the one logger every binary installs.
//!
//! The libraries (rusty-stack, rusty-kernel, the drivers, this facade) only call the
//! `log` macros. A binary calls [`CommonArgs::init_logging`] first thing, which sends
//! records to stderr, filtered by one rule:
//!
//! 1. an explicit `--log-level` wins;
//! 2. otherwise `RUST_LOG`, in env_logger's filter syntax (`warn`,
//!    `rusty_stack=debug,rusty_kernel=trace`), on top of `info` for every target it does
//!    not name — so asking for one crate's debug lines does not hide the status lines and
//!    counters the binaries print at info;
//! 3. otherwise `info`.
//!
//! Info records are printed as their bare message, so a binary's status lines and the
//! per-worker counters read as plain text (`httpd total: ...`); other levels carry the
//! level and where they come from (`ERROR rusty_kernel::worker: worker 0: ...`).

use std::io::Write;

use clap::builder::PossibleValue;
use clap::ValueEnum;
use log::{Level, Record};

use super::CommonArgs;

/// `--log-level`: how much a binary says on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Nothing at all.
    Off,
    /// Errors only.
    Error,
    /// Errors and warnings.
    Warn,
    /// Also status lines and worker counters (the default).
    Info,
    /// Also detail for debugging.
    Debug,
    /// Everything, the finest detail included.
    Trace,
}

impl LogLevel {
    /// The level's name, as `--log-level` takes it and as env_logger's filter syntax
    /// uses it.
    fn directive(self) -> &'static str {
        match self {
            LogLevel::Off => "off",
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

// Written out rather than derived: the derive would turn the variants' docs into
// per-value help, which switches every binary's `--help` to its long layout.
impl ValueEnum for LogLevel {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            LogLevel::Off,
            LogLevel::Error,
            LogLevel::Warn,
            LogLevel::Info,
            LogLevel::Debug,
            LogLevel::Trace,
        ]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.directive()))
    }
}

/// The level for every target no directive names.
const DEFAULT: LogLevel = LogLevel::Info;

/// The filter directives in force, in env_logger's syntax, for a `--log-level` (if one
/// was given) and the value of `RUST_LOG` (if set). Later directives for the same target
/// replace earlier ones, so `RUST_LOG` refines the default rather than replacing it.
fn filter_spec(flag: Option<LogLevel>, rust_log: Option<&str>) -> String {
    match (flag, rust_log.map(str::trim)) {
        (Some(level), _) => level.directive().to_string(),
        (None, Some(env)) if !env.is_empty() => format!("{},{env}", DEFAULT.directive()),
        (None, _) => DEFAULT.directive().to_string(),
    }
}

/// One line per record: info as the bare message, the rest with level and target.
fn format_line(out: &mut impl Write, record: &Record<'_>) -> std::io::Result<()> {
    if record.level() == Level::Info {
        writeln!(out, "{}", record.args())
    } else {
        writeln!(
            out,
            "{} {}: {}",
            record.level(),
            record.target(),
            record.args()
        )
    }
}

impl CommonArgs {
    /// Install the stderr logger with the filter described in the [module docs](self).
    /// Call once, before anything logs; a logger installed earlier (by an embedding
    /// program or a test) is left in place.
    pub fn init_logging(&self) {
        let rust_log = std::env::var("RUST_LOG").ok();
        let _ = env_logger::Builder::new()
            .parse_filters(&filter_spec(self.log_level, rust_log.as_deref()))
            .format(format_line)
            .target(env_logger::Target::Stderr)
            .try_init();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_level_wins_then_rust_log_then_info() {
        assert_eq!(
            filter_spec(Some(LogLevel::Warn), Some("rusty_stack=debug")),
            "warn"
        );
        assert_eq!(filter_spec(Some(LogLevel::Info), Some("trace")), "info");
        assert_eq!(
            filter_spec(None, Some("rusty_stack=debug")),
            "info,rusty_stack=debug"
        );
        assert_eq!(filter_spec(None, Some("warn")), "info,warn");
        assert_eq!(filter_spec(None, Some("  ")), "info");
        assert_eq!(filter_spec(None, None), "info");
        assert_eq!(filter_spec(Some(LogLevel::Off), None), "off");
    }

    /// What the filter built from a spec lets through, per target and level.
    fn allows(spec: &str, target: &str, level: Level) -> bool {
        use log::Log;
        let logger = env_logger::Builder::new().parse_filters(spec).build();
        logger.enabled(&log::Metadata::builder().target(target).level(level).build())
    }

    #[test]
    fn rust_log_refines_the_default_instead_of_replacing_it() {
        let spec = filter_spec(None, Some("rusty_stack=debug"));
        assert!(allows(&spec, "rusty_stack::engine", Level::Debug));
        assert!(!allows(&spec, "rusty_stack::engine", Level::Trace));
        assert!(allows(&spec, "httpd", Level::Info), "status lines stay");
        assert!(!allows(&spec, "httpd", Level::Debug));
        let spec = filter_spec(None, Some("warn"));
        assert!(
            !allows(&spec, "httpd", Level::Info),
            "a bare level replaces info"
        );
        assert!(allows(&spec, "httpd", Level::Warn));
        let spec = filter_spec(Some(LogLevel::Error), Some("trace"));
        assert!(!allows(&spec, "rusty_kernel::worker", Level::Warn));
        assert!(allows(&spec, "rusty_kernel::worker", Level::Error));
        assert!(!allows(
            &filter_spec(Some(LogLevel::Off), None),
            "httpd",
            Level::Error
        ));
    }

    #[test]
    fn info_lines_are_bare_and_others_say_level_and_target() {
        let line = |level, target: &str, msg: &str| {
            let mut out = Vec::new();
            format_line(
                &mut out,
                &Record::builder()
                    .level(level)
                    .target(target)
                    .args(format_args!("{msg}"))
                    .build(),
            )
            .unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            line(Level::Info, "httpd", "httpd total: requests=3"),
            "httpd total: requests=3\n"
        );
        assert_eq!(
            line(Level::Error, "rusty_kernel::worker", "worker 0: epoll"),
            "ERROR rusty_kernel::worker: worker 0: epoll\n"
        );
        assert_eq!(
            line(Level::Warn, "httpd", "skipped x"),
            "WARN httpd: skipped x\n"
        );
    }
}
