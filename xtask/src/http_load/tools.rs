//! The programs the benchmarks drive besides Rusty's (wrk, nginx, redis), found on PATH
//! or installed with apt-get, and their versions for the report.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;

use crate::common::{apt_install, find_program, Result};

/// A program a benchmark needs and the Debian package that has it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Need {
    pub program: &'static str,
    pub package: &'static str,
}

/// Each of `needs`, found on PATH or else (unless `no_install`) installed with apt-get,
/// logging to `log`: its path, or why it is missing. `what` names the benchmark in
/// messages. Fails only when interrupted.
pub(crate) fn find_or_install(
    what: &str,
    needs: &[Need],
    no_install: bool,
    log: &Path,
    interrupted: &AtomicBool,
) -> Result<Vec<std::result::Result<PathBuf, String>>> {
    let mut found: Vec<std::result::Result<PathBuf, String>> = needs
        .iter()
        .map(|n| find_program(n.program).ok_or_else(|| "not installed (--no-install)".into()))
        .collect();
    let mut missing: Vec<&str> = needs
        .iter()
        .zip(&found)
        .filter(|(_, f)| f.is_err())
        .map(|(n, _)| n.package)
        .collect();
    missing.dedup();
    if missing.is_empty() || no_install {
        return Ok(found);
    }
    eprintln!(
        "{what}: installing {} with apt-get (Debian packages)",
        missing.join(", ")
    );
    // One package at a time: one that fails leaves the others.
    let installed = apt_install(&missing, log, interrupted)?;
    for (need, slot) in needs.iter().zip(found.iter_mut()) {
        if slot.is_ok() {
            continue;
        }
        let failed = missing
            .iter()
            .zip(&installed)
            .find(|(pkg, _)| **pkg == need.package)
            .and_then(|(_, r)| r.clone().err());
        *slot = match (find_program(need.program), failed) {
            (Some(p), _) => Ok(p),
            (None, Some(e)) => {
                eprintln!("{what}: installing {} failed: {e}", need.package);
                Err(format!("could not be installed with apt-get ({e})"))
            }
            (None, None) => Err("not found after installing".into()),
        };
    }
    Ok(found)
}

/// The first line a program prints for `args` (wrk and nginx print to stderr), without
/// nginx's "nginx version: " and wrk's copyright.
pub(crate) fn version(program: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let line = text.lines().next()?.trim();
    let line = line.strip_prefix("nginx version: ").unwrap_or(line);
    // wrk: "wrk 4.1.0 [epoll] Copyright (C) 2012 Will Glozer"
    let line = line.split(" Copyright").next().unwrap_or(line);
    (!line.is_empty()).then(|| line.to_string())
}
