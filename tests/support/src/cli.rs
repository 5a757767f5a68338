//! Running the `rxvm` binary from a test (`env!("CARGO_BIN_EXE_rxvm")` is known only to
//! the root package's tests, so they pass it in).

use std::path::PathBuf;
use std::process::Command;

/// Runs `exe` with `args` in `dir`: the exit code (-1 when killed), stdout and stderr.
pub fn run(exe: &str, dir: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(exe).args(args).current_dir(dir).output().expect("run rxvm");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A path `name` in a temporary directory of this test process, named after `suite`.
pub fn tmp(suite: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rxvm-{suite}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d.join(name)
}
