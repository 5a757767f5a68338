//! The host device under a leak checker: `rxvm run` of programs that succeed and programs
//! that fail (a runtime error, an execution limit) under valgrind's memcheck must lose no
//! memory and make no invalid access. Skipped when valgrind is not installed, unless
//! `RXVM_REQUIRE_VALGRIND` is set (CI sets it).

use std::path::Path;
use std::process::Command;

fn valgrind() -> bool {
    let found = Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(found || std::env::var("RXVM_REQUIRE_VALGRIND").is_err(), "valgrind is required but not installed");
    found
}

/// Runs `rxvm ARGS` under memcheck; returns rxvm's exit code and valgrind's report.
fn memcheck(args: &[&str]) -> (i32, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("valgrind")
        .args([
            "--tool=memcheck",
            "--leak-check=full",
            "--show-leak-kinds=definite,indirect",
            "--errors-for-leak-kinds=definite,indirect",
            "--error-exitcode=99",
        ])
        .arg(env!("CARGO_BIN_EXE_rxvm"))
        .args(args)
        .current_dir(root)
        .output()
        .expect("valgrind runs");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn assert_clean(what: &str, code: i32, report: &str, want_code: i32) {
    assert_ne!(code, 99, "{what}: memcheck found errors or leaks:\n{report}");
    assert_eq!(code, want_code, "{what}:\n{report}");
    assert!(report.contains("ERROR SUMMARY: 0 errors"), "{what}:\n{report}");
    // Either nothing was left at exit, or nothing of it was lost.
    assert!(
        report.contains("All heap blocks were freed") || report.contains("definitely lost: 0 bytes in 0 blocks"),
        "{what}:\n{report}"
    );
}

#[test]
fn host_runs_lose_no_memory_under_memcheck() {
    if !valgrind() {
        return;
    }
    for (what, args, want) in [
        ("mlp", &["run", "examples/mlp.rxa", "--input", "x=random:1", "--quiet"][..], 0),
        (
            "texture_cnn",
            &[
                "run",
                "examples/texture_cnn.rxa",
                "-i",
                "x=random:1",
                "-i",
                "w=random:2",
                "-i",
                "b=random:3",
                "-i",
                "dw=random:4",
                "--quiet",
                "--stats",
            ][..],
            0,
        ),
        ("alloc_loop", &["run", "examples/alloc_loop.rxa", "--input", "n=200", "--quiet"][..], 0),
        ("view past the end", &["run", "tests/bad/runtime_view_past_end.rxa"][..], 1),
        ("operator shape mismatch", &["run", "tests/bad/runtime_op_shape_mismatch.rxa"][..], 1),
        (
            "instruction limit",
            &["run", "examples/alloc_loop.rxa", "--input", "n=1000000", "--max-instructions", "500"][..],
            1,
        ),
        ("live-bytes limit", &["run", "examples/alloc_loop.rxa", "--input", "n=10", "--max-live-bytes", "1K"][..], 1),
    ] {
        let (code, report) = memcheck(args);
        assert_clean(what, code, &report, want);
    }
}
