//! The command line of the workload examples: positional numbers and a `main` that
//! reports errors with the program's name.

use std::process::ExitCode;

/// Positional argument `index` as a number (`_` separators allowed), `default` when absent
/// or `-`.
pub(crate) fn arg(index: usize, default: u64) -> Result<u64, String> {
    match std::env::args().nth(index).filter(|s| s != "-") {
        None => Ok(default),
        Some(s) => s
            .replace('_', "")
            .parse()
            .map_err(|e| format!("argument {index} ({s:?}): {e}")),
    }
}

/// Positional argument `index` as a count that must be at least 1.
pub(crate) fn count(index: usize, default: u64, what: &str) -> Result<usize, String> {
    let n = usize::try_from(arg(index, default)?).map_err(|e| e.to_string())?;
    if n == 0 {
        return Err(format!("{what} must be at least 1"));
    }
    Ok(n)
}

/// Run `run`; an error is printed after `name` and fails the process.
pub(crate) fn main(name: &str, run: impl FnOnce() -> Result<(), String>) -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}
