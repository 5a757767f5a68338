//! Writes the seed corpora of every fuzz target (`rxvm_test_support::fuzz::seeds`) to
//! `fuzz/corpus/<target>/`, or under the directory given as the first argument, and the
//! dictionaries (`rxvm_test_support::fuzz::dictionary`, `onnx_dictionary`) to `rxa.dict` and `onnx.dict`
//! beside them.
//! Run by `scripts/fuzz-seeds.sh`.

use rxvm_test_support::fuzz::{seeds, Target};
use std::path::{Path, PathBuf};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::env::args().nth(1).map_or_else(|| root.join("fuzz/corpus"), PathBuf::from);
    for target in Target::ALL {
        let dir = out.join(target.name());
        if let Err(e) = std::fs::create_dir_all(&dir) {
            eprintln!("cannot create {}: {e}", dir.display());
            std::process::exit(1);
        }
        let seeds = seeds(target, &root);
        let bytes: usize = seeds.iter().map(|(_, d)| d.len()).sum();
        for (name, data) in &seeds {
            if let Err(e) = std::fs::write(dir.join(name), data) {
                eprintln!("cannot write {}/{name}: {e}", dir.display());
                std::process::exit(1);
            }
        }
        println!("{:<14} {:>4} seeds, {:>7} bytes -> {}", target.name(), seeds.len(), bytes, dir.display());
    }
    for (file, text, targets) in [
        ("rxa.dict", rxvm_test_support::fuzz::dictionary(), "asm_text and exec_host"),
        ("onnx.dict", rxvm_test_support::fuzz::onnx_dictionary(), "onnx_frontend"),
    ] {
        let dict = out.join(file);
        if let Err(e) = std::fs::write(&dict, text) {
            eprintln!("cannot write {}: {e}", dict.display());
            std::process::exit(1);
        }
        println!("dictionary for {targets} -> {}", dict.display());
    }
}
