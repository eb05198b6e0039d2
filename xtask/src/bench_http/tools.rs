//! The programs the benchmark drives besides httpd: wrk (required) and nginx (optional),
//! found on PATH or installed with apt-get, and their versions for the report.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use super::Options;
use crate::common::Result;
use crate::http_load::tools::{find_or_install, version, Need};

/// wrk and (maybe) nginx, and why nginx is missing; with `--tls`, openssl.
pub(super) struct Tools {
    pub wrk: PathBuf,
    pub openssl: Option<PathBuf>,
    pub openssl_version: Option<String>,
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
        let mut needs = vec![Need {
            program: "wrk",
            package: "wrk",
        }];
        if !opts.no_nginx {
            needs.push(Need {
                program: "nginx",
                package: "nginx",
            });
        }
        if opts.tls {
            needs.push(Need {
                program: "openssl",
                package: "openssl",
            });
        }
        let log = tmp.join("apt-get.log");
        let mut found = find_or_install("bench http", &needs, opts.no_install, &log, interrupted)?;
        let openssl = match opts.tls {
            true => Some(found.pop().and_then(|r| r.ok()).ok_or_else(|| {
                "openssl is not installed and could not be installed; install it (Debian: \
                 `apt-get install openssl`) and run again"
                    .to_string()
            })?),
            false => None,
        };
        let mut found = found.into_iter();
        let wrk = found.next().and_then(|r| r.ok()).ok_or_else(|| {
            "wrk is not installed and could not be installed; install it (Debian: `apt-get \
             install wrk`) and run again"
                .to_string()
        })?;
        let (nginx, nginx_note) = match found.next() {
            None => (None, Some("left out (--no-nginx)".to_string())),
            Some(Ok(p)) => (Some(p), None),
            Some(Err(why)) => (None, Some(why)),
        };
        if let Some(n) = &nginx_note {
            eprintln!("bench http: nginx {n}; its rows are skipped");
        }
        let nginx_version = nginx.as_ref().and_then(|n| version(n, &["-v"]));
        let wrk_version = version(&wrk, &["-v"]);
        let openssl_version = openssl.as_ref().and_then(|o| version(o, &["version"]));
        Ok(Tools {
            wrk,
            openssl,
            openssl_version,
            nginx,
            nginx_note,
            nginx_version,
            wrk_version,
        })
    }
}
