//! `target_arch = "tilegx"` guards the libgxio bindings (`src/sys.rs`); no Rust target
//! has that architecture today, so tell the cfg checker it is expected.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(target_arch, values(\"tilegx\"))");
}
