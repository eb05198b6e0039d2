//! `cargo xtask cross-build tilegx`: every step toward Rust on TILE-Gx that a toolchain
//! allows today, and a precise account of what blocks the rest.
//!
//! Done when possible: find the Tilera MDE (`TILERA_ROOT`, or `tile-gcc` on PATH) and
//! compile the mPIPE driver's C shim with it; write a rustc target specification for
//! `tilegx-unknown-linux-gnu`; ask rustc to load it. That last step fails: rustc's LLVM
//! has no TILE-Gx backend, so the command ends with the blockers and what would lift
//! them, and a non-zero exit.

use crate::common::{find_program, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The triple of the target specification.
pub(crate) const TRIPLE: &str = "tilegx-unknown-linux-gnu";

/// The data layout of the out-of-tree LLVM TILE-Gx backend Tilera published for LLVM
/// 3.x (`TileSubtarget::getTargetDataLayout` in github.com/tilera/llvm,
/// lib/Target/Tile/TileSubtarget.h): little-endian, 64-bit pointers, i8/i16 aligned to
/// 32 bits in aggregates, 128-bit long double, native integers 32 and 64 bits.
pub(crate) const DATA_LAYOUT: &str = "e-p:64:64:64-i8:8:32-i16:16:32-i64:64:64-f128:128:128-n32:64";

/// Where the mPIPE driver's C shim lives (written with the driver crate).
const SHIM: &str = "crates/drivers-mpipe/shim/gxio_shim.c";

pub(crate) fn is_tilegx(target: &str) -> bool {
    target == "tilegx" || target == TRIPLE
}

/// The rustc target specification for TILE-Gx Linux, as JSON: GNU/Linux, 64-bit,
/// little-endian, linked by `tile-gcc`. The data layout is [`DATA_LAYOUT`]; the rest
/// follows rustc's built-in `*-linux-gnu` specs. Unwinding is off: no libunwind for
/// TILE-Gx is maintained any more.
pub(crate) fn spec_json() -> String {
    let fields: [(&str, String); 19] = [
        ("llvm-target", quote(TRIPLE)),
        ("data-layout", quote(DATA_LAYOUT)),
        ("arch", quote("tilegx")),
        ("cpu", quote("tilegx")),
        ("target-endian", quote("little")),
        ("target-pointer-width", "64".into()),
        ("target-c-int-width", "32".into()),
        ("os", quote("linux")),
        ("env", quote("gnu")),
        ("vendor", quote("unknown")),
        ("linker", quote("tile-gcc")),
        ("linker-flavor", quote("gnu-cc")),
        ("dynamic-linking", "true".into()),
        ("executables", "true".into()),
        ("has-rpath", "true".into()),
        ("position-independent-executables", "true".into()),
        ("max-atomic-width", "64".into()),
        ("panic-strategy", quote("abort")),
        ("crt-static-respected", "true".into()),
    ];
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("  {}: {v}", quote(k)))
        .collect();
    format!("{{\n{}\n}}\n", body.join(",\n"))
}

/// A JSON string (the values here have nothing to escape but `"` and `\`).
fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The Tilera MDE's C compiler: `$TILERA_ROOT/bin/tile-gcc`, else `tile-gcc` on PATH.
fn find_tile_gcc() -> Option<PathBuf> {
    std::env::var_os("TILERA_ROOT")
        .map(|r| PathBuf::from(r).join("bin/tile-gcc"))
        .filter(|p| p.is_file())
        .or_else(|| find_program("tile-gcc"))
}

/// `cargo xtask cross-build tilegx`. Always ends in an error: the blockers.
pub(crate) fn run(root: &Path, target_dir: &Path) -> Result<()> {
    let out = target_dir.join("tilegx");
    fs::create_dir_all(&out).map_err(|e| format!("creating {}: {e}", out.display()))?;

    // 1. The C side, which needs only the MDE.
    let tile_gcc = find_tile_gcc();
    let shim = root.join(SHIM);
    match (&tile_gcc, shim.is_file()) {
        (None, _) => println!(
            "tilegx: [skipped] no Tilera MDE (TILERA_ROOT is unset or has no bin/tile-gcc, \
             and tile-gcc is not on PATH): the C shim is not compiled"
        ),
        (Some(gcc), false) => println!(
            "tilegx: [skipped] MDE found ({}), but {SHIM} does not exist yet",
            gcc.display()
        ),
        (Some(gcc), true) => {
            let obj = out.join("gxio_shim.o");
            let st = Command::new(gcc)
                .args(["-c", "-O2", "-Wall", "-o"])
                .arg(&obj)
                .arg(&shim)
                .status()
                .map_err(|e| format!("running {}: {e}", gcc.display()))?;
            if !st.success() {
                return Err(format!("{} failed on {SHIM} ({st})", gcc.display()));
            }
            println!("tilegx: [done] {SHIM} compiled to {}", obj.display());
        }
    }

    // 2. The target specification.
    let spec = out.join(format!("{TRIPLE}.json"));
    fs::write(&spec, spec_json()).map_err(|e| format!("writing {}: {e}", spec.display()))?;
    println!("tilegx: [done] target specification {}", spec.display());

    // 3. Ask rustc to load it: what it says is the first blocker, in its own words.
    let probe = probe_rustc(&spec);
    let (rustc, llvm) = crate::cross::rustc_and_llvm()?;
    println!("tilegx: [blocked] rustc {rustc} (LLVM {llvm}) with this spec: {probe}");
    Err(blockers(&probe, &rustc, &llvm))
}

/// What rustc says when asked for the `cfg` of the spec: loading a target builds an
/// LLVM TargetMachine for it. Custom specs are unstable, so the probe runs with
/// `-Z unstable-options` under `RUSTC_BOOTSTRAP=1`; it only prints, it builds nothing.
/// rustc 1.95 turns the failure into an internal compiler error, whose report file
/// `RUSTC_ICE=0` keeps from landing in the working directory.
fn probe_rustc(spec: &Path) -> String {
    let out = Command::new("rustc")
        .env("RUSTC_BOOTSTRAP", "1")
        .env("RUSTC_ICE", "0")
        .args(["-Z", "unstable-options", "--print", "cfg", "--target"])
        .arg(spec)
        .output();
    match out {
        Err(e) => format!("could not run rustc: {e}"),
        Ok(o) if o.status.success() => {
            "rustc accepted it (its LLVM has a TILE-Gx backend?); the standard library \
             still has to be built with -Z build-std"
                .into()
        }
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            err.lines()
                .find(|l| l.contains("could not create LLVM TargetMachine"))
                .or_else(|| err.lines().find(|l| l.starts_with("error")))
                .map(|l| l.trim().trim_start_matches("error: "))
                .unwrap_or("failed without a message")
                .to_string()
        }
    }
}

/// The whole account: why Rust cannot be compiled for TILE-Gx today and what would
/// change that. Sources are cited so that a reader can check them.
fn blockers(probe: &str, rustc: &str, llvm: &str) -> String {
    format!(
        "Rust cannot be compiled for TILE-Gx with today's toolchains:\n\
         \x20 - rustc's code generator is LLVM, and upstream LLVM has no TILE-Gx backend: \
         rustc {rustc} (LLVM {llvm}) says \"{probe}\". Tilera's own backend \
         (github.com/tilera/llvm, lib/Target/Tile) was written against LLVM 3.x and \
         never merged.\n\
         \x20 - GCC: the tilegx port was on GCC's obsolete list by 2019 (GCC 9; \
         --enable-obsolete needed; gcc-patches 2019-04/msg00023) and unmaintained since, \
         so rustc_codegen_gcc, which needs its own patched libgccjit, has no maintained \
         TILE-Gx GCC to sit on.\n\
         \x20 - Linux: arch/tile was removed in 4.17 (commit bb9d812643d8, \"arch: remove \
         tile port\", 2018); boards run vendor kernels.\n\
         What would unblock it: port Tilera's backend to current LLVM and build rustc \
         against it, or build rustc_codegen_gcc's libgccjit from a GCC that still has \
         the tilegx port; either way, with the spec written above and a standard library \
         built with `cargo -Z build-std` against the MDE's glibc. The C shim needs only \
         the MDE (TILERA_ROOT or tile-gcc on PATH)."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
        json.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("\"{key}\": ")))
            .map(|v| v.trim_end_matches(','))
    }

    #[test]
    fn spec_is_linux_gnu_64_bit_little_endian() {
        let j = spec_json();
        assert!(j.starts_with("{\n") && j.ends_with("}\n"));
        assert_eq!(
            field(&j, "llvm-target"),
            Some("\"tilegx-unknown-linux-gnu\"")
        );
        assert_eq!(field(&j, "arch"), Some("\"tilegx\""));
        assert_eq!(field(&j, "os"), Some("\"linux\""));
        assert_eq!(field(&j, "env"), Some("\"gnu\""));
        assert_eq!(field(&j, "linker"), Some("\"tile-gcc\""));
        assert_eq!(field(&j, "target-endian"), Some("\"little\""));
        assert_eq!(field(&j, "target-pointer-width"), Some("64"));
        // The data layout agrees with the fields: little-endian, 64-bit pointers.
        let dl = field(&j, "data-layout").unwrap().trim_matches('"');
        assert_eq!(dl, DATA_LAYOUT);
        assert!(dl.starts_with("e-"));
        assert!(dl.split('-').any(|c| c.starts_with("p:64:64")));
        // Every line but the braces is one `"key": value`, commas between them.
        let lines: Vec<&str> = j.lines().collect();
        let inner = &lines[1..lines.len() - 1];
        for (i, l) in inner.iter().enumerate() {
            assert!(l.starts_with("  \"") && l.contains("\": "), "{l}");
            assert_eq!(l.ends_with(','), i + 1 < inner.len(), "{l}");
        }
    }

    #[test]
    fn names() {
        assert!(is_tilegx("tilegx"));
        assert!(is_tilegx("tilegx-unknown-linux-gnu"));
        assert!(!is_tilegx("aarch64-unknown-linux-gnu"));
        assert_eq!(quote(r#"a"b\c"#), r#""a\"b\\c""#);
    }
}
