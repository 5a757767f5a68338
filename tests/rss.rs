//! Peak memory of whole `rxvm` runs on hostile programs, measured on the process itself.
//!
//! Its own test binary: wait4(2) reports the largest resident set the child had, and
//! that counts the memory it shared with this process before it exec'd `rxvm` (a forked
//! or vforked copy of this one). Here this process is only the test harness, a few MB,
//! so the bounds below measure `rxvm`; beside the tests of tests/resources.rs, which
//! open OpenCL devices, it was 84 MB before `rxvm` ran an instruction.
#![cfg(unix)]

/// Runs `rxvm ARGS` and returns its exit code, its standard error, its peak RSS in bytes
/// (the child's own, from wait4(2)) and how long it took.
// The child is reaped by wait4 below (which std's `Child::wait` cannot do: it drops the
// rusage), so clippy's zombie check does not see it.
#[allow(clippy::zombie_processes)]
fn rxvm_measured(args: &[&str]) -> (i32, String, u64, std::time::Duration) {
    use std::io::Read;
    let t0 = std::time::Instant::now();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rxvm"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("rxvm starts");
    let mut err = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut err).expect("read stderr");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our unwaited child; both pointers are to live locals.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as libc::pid_t, "wait4");
    let took = t0.elapsed();
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 };
    // Linux reports ru_maxrss in KiB.
    (code, err, usage.ru_maxrss as u64 * 1024, took)
}

/// Issue 28, item 8: a recursion whose every frame holds a 1 MiB storage reached 17 GB
/// before failing. The storages its frames hold count against `--max-live-bytes`, so under
/// 64 MiB it is refused in its 65th frame, quickly, and the process stays small.
#[test]
fn a_recursion_hoarding_memory_is_refused_early_with_bounded_rss() {
    let (code, err, rss, took) =
        rxvm_measured(&["run", "tests/bad/runtime_recursion_memory.rxa", "--max-live-bytes", "64M"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("live-bytes limit reached on `host`"), "{err}");
    assert!(err.contains("the 66 frames on the call stack hold 67108864 bytes in 64 storages"), "{err}");
    assert!(rss < 256 << 20, "peak RSS {} MiB", rss >> 20);
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    // An endless loop under --timeout ends on time, as small.
    let (code, err, rss, took) = rxvm_measured(&["run", "tests/bad/runtime_timeout.rxa", "--timeout", "300ms"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("time limit of 300ms reached"), "{err}");
    assert!(rss < 64 << 20, "peak RSS {} MiB", rss >> 20);
    assert!(took >= std::time::Duration::from_millis(300) && took < std::time::Duration::from_secs(5), "{took:?}");
}
