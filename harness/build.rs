//! Embeds the shipped scenario catalog (the checkout's `scenarios/*.toml`) in the binary, so an
//! installed `limiter-harness` runs `immortal-counter` from any directory, with or without
//! the checkout it was built from.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    // The checkout's `scenarios/`: beside harness/ (whose build this is), or two floors up
    // from harness/unit/ (the library's unit tests, built from the same source).
    let dir = manifest
        .ancestors()
        .map(|d| d.join("scenarios"))
        .find(|d| d.is_dir())
        .unwrap_or_else(|| manifest.join("../scenarios"));
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut out = String::from(
        "/// The shipped scenarios: (name, TOML text), sorted by name.\npub static SHIPPED: &[(&str, &str)] = &[\n",
    );
    for path in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a UTF-8 scenario file name");
        let _ = writeln!(out, "    ({name:?}, include_str!({:?})),", path.display().to_string());
    }
    out.push_str("];\n");
    let target = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("catalog.rs");
    std::fs::write(target, out).expect("write catalog.rs");
}
