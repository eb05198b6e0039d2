//! The programs the benchmark drives besides httpd: wrk (required) and nginx (optional),
//! found on PATH or installed with apt-get, and their versions for the report.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;

use super::Options;
use crate::common::{apt_install, find_program, Result};

/// wrk and (maybe) nginx, and why nginx is missing.
pub(super) struct Tools {
    pub wrk: PathBuf,
    pub nginx: Option<PathBuf>,
    pub nginx_note: Option<String>,
    pub nginx_version: Option<String>,
    pub wrk_version: Option<String>,
}

impl Tools {
    pub(super) fn find_or_install(
        opts: &Options,
        tmp: &Path,
        interrupted: &AtomicBool,
    ) -> Result<Tools> {
        let mut wrk = find_program("wrk");
        let mut nginx = if opts.no_nginx {
            None
        } else {
            find_program("nginx")
        };
        let mut nginx_note = opts.no_nginx.then(|| "left out (--no-nginx)".to_string());
        let mut missing = Vec::new();
        if wrk.is_none() {
            missing.push("wrk");
        }
        if nginx.is_none() && !opts.no_nginx {
            missing.push("nginx");
        }
        if !missing.is_empty() && opts.no_install {
            nginx_note = nginx_note.or(Some("not installed (--no-install)".into()));
        } else if !missing.is_empty() {
            eprintln!(
                "bench http: installing {} with apt-get (Debian packages)",
                missing.join(" and ")
            );
            let log = tmp.join("apt-get.log");
            // One package at a time: wrk is required, nginx only adds rows.
            let installed = apt_install(&missing, &log, interrupted)?;
            for (pkg, r) in missing.iter().zip(installed) {
                if let Err(e) = r {
                    eprintln!("bench http: installing {pkg} failed: {e}");
                    if *pkg == "nginx" {
                        nginx_note = Some(format!("could not be installed with apt-get ({e})"));
                    }
                }
            }
            wrk = find_program("wrk");
            if !opts.no_nginx {
                nginx = find_program("nginx");
            }
        }
        let wrk = wrk.ok_or_else(|| {
            "wrk is not installed and could not be installed; install it (Debian: `apt-get \
             install wrk`) and run again"
                .to_string()
        })?;
        if nginx.is_none() && nginx_note.is_none() {
            nginx_note = Some("not found after installing".into());
        }
        if let Some(n) = &nginx_note {
            eprintln!("bench http: nginx {n}; its rows are skipped");
        }
        let nginx_version = nginx.as_ref().and_then(|n| version(n, &["-v"]));
        let wrk_version = version(&wrk, &["-v"]);
        Ok(Tools {
            wrk,
            nginx,
            nginx_note,
            nginx_version,
            wrk_version,
        })
    }
}

/// The first line a program prints for `args` (wrk and nginx print to stderr).
fn version(program: &Path, args: &[&str]) -> Option<String> {
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
