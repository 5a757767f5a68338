//! Memory on hostile input, measured: a child `rxvm run` is refused or finishes within a
//! time and a peak resident memory (issue 28). The peak comes from `wait4`'s rusage of the
//! child. Linux folds the memory high-water mark of the process that spawned it into it
//! (at `exec`, of the parent's address space the spawn shared), so the figure is at most
//! an overestimate: the tests live in this file of their own, whose process stays small,
//! rather than beside tests that load OpenCL runtimes.

/// What a child `rxvm` did: exit code, stderr, wall time and peak resident memory.
#[cfg(target_os = "linux")]
struct Measured {
    code: i32,
    stderr: String,
    time: std::time::Duration,
    max_rss: u64,
}

/// Runs `rxvm run` on `src` (written to a temporary file) with `flags`, and measures it:
/// the peak RSS is the child's own, from `wait4`'s rusage (not the test process's).
#[cfg(target_os = "linux")]
fn rxvm_measured(name: &str, src: &str, flags: &[&str]) -> Measured {
    use std::io::Read;
    let dir = std::env::temp_dir().join(format!("rxvm-resources-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, src).expect("write program");
    let start = std::time::Instant::now();
    // Reaped by `wait4` below, which std's `wait` cannot replace: it drops the rusage.
    #[allow(clippy::zombie_processes)]
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rxvm"))
        .arg("run")
        .arg(&path)
        .args(flags)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("rxvm starts");
    let mut stderr = String::new();
    child.stderr.take().expect("piped").read_to_string(&mut stderr).expect("stderr");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for `wait4` to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child; `status` and `usage` are live for the call. `child`
    // is not waited for again (std would not know it was reaped).
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as libc::pid_t, "wait4: {}", std::io::Error::last_os_error());
    let time = start.elapsed();
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -libc::WTERMSIG(status) };
    // Linux reports ru_maxrss in KiB.
    Measured { code, stderr, time, max_rss: usage.ru_maxrss as u64 * 1024 }
}

/// Issue 28: a 193-byte program whose constant wants 4 GiB reached 8.4 GB of RSS, and
/// `--max-live-bytes 64M` did not stop it (constants were not counted until an
/// `alloc_storage` ran). Now it is refused as it loads, before its memory is taken.
#[test]
#[cfg(target_os = "linux")]
fn a_constant_bomb_is_refused_at_load_under_the_live_bytes_limit() {
    let src = "const @w: u8[4294967296] = fill(1)\n\nfunc @main() -> int {\n  %n = int 1\n  ret %n\n}\n";
    let m = rxvm_measured("bomb.rxa", src, &["--max-live-bytes", "64M"]);
    assert_eq!(m.code, 1, "{}", m.stderr);
    assert!(
        m.stderr.contains(
            "cannot load constant @w (u8[4294967296], 4294967296 bytes): live-bytes limit reached on `host`: 4294967296 more bytes with 0 live would exceed the limit of 67108864 bytes"
        ),
        "{}",
        m.stderr
    );
    assert!(m.time < std::time::Duration::from_secs(1), "took {:?}", m.time);
    assert!(m.max_rss < 256 << 20, "peak RSS {} MiB", m.max_rss >> 20);
}

/// Issue 28: an `alloc_storage 4294967296` never touched cost 4.2 GB of RSS (the host
/// zeroed storages eagerly). Its pages are now the OS's zero pages until written.
#[test]
#[cfg(target_os = "linux")]
fn an_untouched_4_gib_storage_costs_no_memory() {
    let src = "func @main() -> int {\n  %s = alloc_storage 4294967296\n  %t = alloc_tensor %s, 4294967040, f32[64]\n  call @vm.fill(%t, 2.0)\n  %n = int 1\n  ret %n\n}\n";
    // The device's memory is set so that the run does not depend on the machine's RAM.
    let m = rxvm_measured("untouched.rxa", src, &["--host-caps", "mem=8G", "--stats"]);
    assert_eq!(m.code, 0, "{}", m.stderr);
    assert!(m.max_rss < 64 << 20, "peak RSS {} MiB", m.max_rss >> 20);
}

/// Issue 28: the host device's memory is the machine's RAM, so a program that keeps
/// asking for storages gets "out of device memory" when its storages would pass the RAM,
/// not when the OS runs out (and, untouched, they cost nothing on the way).
#[test]
#[cfg(target_os = "linux")]
fn runaway_allocations_run_out_of_the_host_device_s_memory() {
    let src = "func @main(%n: int) -> int {\n  %s = alloc_storage 4294967296\n  %m = call @vm.iadd(%n, 1)\n  %r = call @main(%m)\n  ret %r\n}\n";
    let ram = rxvm::vm::device::host_memory();
    let m = rxvm_measured("runaway.rxa", src, &["--input", "n=0"]);
    assert_eq!(m.code, 1, "{}", m.stderr);
    assert!(m.stderr.contains("out of device memory on `host`: 4294967296 more bytes with"), "{}", m.stderr);
    assert!(m.stderr.contains(&format!("would exceed its {ram} bytes")), "{}", m.stderr);
    assert!(m.time < std::time::Duration::from_secs(5), "took {:?}", m.time);
    assert!(m.max_rss < 64 << 20, "peak RSS {} MiB", m.max_rss >> 20);
}
