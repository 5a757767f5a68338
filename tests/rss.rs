//! Peak memory of whole `rxvm` runs on hostile programs, measured on the process itself.
//!
//! Its own test binary: wait4(2) reports the largest resident set the child had, and
//! that counts the memory it shared with this process before it exec'd `rxvm` (a forked
//! or vforked copy of this one). Here this process is only the test harness, a few MB,
//! so the bounds below measure `rxvm`; beside the tests of tests/resources.rs, which
//! open OpenCL devices, it was 84 MB before `rxvm` ran an instruction.
// ru_maxrss is in KiB on Linux (bytes elsewhere).
#![cfg(target_os = "linux")]

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

/// Writes `src` to a temporary file named `name` for `rxvm run`.
fn program(name: &str, src: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rxvm-rss-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, src).expect("write program");
    path
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

/// Issue 28: a 193-byte program whose constant wants 4 GiB reached 8.4 GB of RSS, and
/// `--max-live-bytes 64M` did not stop it (constants were not counted until an
/// `alloc_storage` ran). Now it is refused as it loads, before its memory is taken.
#[test]
fn a_constant_bomb_is_refused_at_load_under_the_live_bytes_limit() {
    let src = "const @w: u8[4294967296] = fill(1)\n\nfunc @main() -> int {\n  %n = int 1\n  ret %n\n}\n";
    let bomb = program("bomb.rxa", src);
    let (code, stderr, max_rss, time) =
        rxvm_measured(&["run", bomb.to_str().expect("utf-8"), "--max-live-bytes", "64M"]);
    assert_eq!(code, 1, "{}", stderr);
    assert!(
        stderr.contains(
            "cannot load constant @w (u8[4294967296], 4294967296 bytes): live-bytes limit reached on `host`: 4294967296 more bytes with 0 live would exceed the limit of 67108864 bytes"
        ),
        "{}",
        stderr
    );
    assert!(time < std::time::Duration::from_secs(1), "took {:?}", time);
    assert!(max_rss < 256 << 20, "peak RSS {} MiB", max_rss >> 20);
}

/// Issue 28: an `alloc_storage 4294967296` never touched cost 4.2 GB of RSS (the host
/// zeroed storages eagerly). Its pages are now the OS's zero pages until written.
#[test]
fn an_untouched_4_gib_storage_costs_no_memory() {
    let src = "func @main() -> int {\n  %s = alloc_storage 4294967296\n  %t = alloc_tensor %s, 4294967040, f32[64]\n  call @vm.fill(%t, 2.0)\n  %n = int 1\n  ret %n\n}\n";
    // The device's memory is set so that the run does not depend on the machine's RAM.
    let file = program("untouched.rxa", src);
    let (code, stderr, max_rss, _) =
        rxvm_measured(&["run", file.to_str().expect("utf-8"), "--host-caps", "mem=8G", "--stats"]);
    assert_eq!(code, 0, "{}", stderr);
    assert!(max_rss < 64 << 20, "peak RSS {} MiB", max_rss >> 20);
}

/// Issue 28: the host device's memory is the machine's RAM, so a program that keeps
/// asking for storages gets "out of device memory" when its storages would pass the RAM,
/// not when the OS runs out (and, untouched, they cost nothing on the way).
#[test]
fn runaway_allocations_run_out_of_the_host_device_s_memory() {
    let src = "func @main(%n: int) -> int {\n  %s = alloc_storage 4294967296\n  %m = call @vm.iadd(%n, 1)\n  %r = call @main(%m)\n  ret %r\n}\n";
    let ram = rxvm::vm::device::host_memory();
    let file = program("runaway.rxa", src);
    let (code, stderr, max_rss, time) = rxvm_measured(&["run", file.to_str().expect("utf-8"), "--input", "n=0"]);
    assert_eq!(code, 1, "{}", stderr);
    assert!(stderr.contains("out of device memory on `host`: 4294967296 more bytes with"), "{}", stderr);
    assert!(stderr.contains(&format!("would exceed its {ram} bytes")), "{}", stderr);
    assert!(time < std::time::Duration::from_secs(5), "took {:?}", time);
    assert!(max_rss < 64 << 20, "peak RSS {} MiB", max_rss >> 20);
}

/// Issue 31: a `.rxb`'s constants are used where the file is mapped, not read and copied
/// (before, the file was read into memory and each constant copied out of it: a 64 MiB
/// weight cost 128 MiB and more). A MatMul reads every byte of its 64 MiB weight; the
/// process holds it once.
#[test]
fn a_bytecode_file_s_weights_are_mapped_and_held_once() {
    const N: usize = 4096;
    let dir = program("w.bin", "").parent().expect("temp dir").to_path_buf();
    // Small finite values, not all alike, streamed: a child's peak RSS counts what this
    // process held when it forked (see the top), and other tests' children fork meanwhile.
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("w.bin")).expect("create weights"));
        for i in 0..N * N {
            f.write_all(&(((i * 7919) % 1009) as f32 / 1009.0 - 0.5).to_le_bytes()).expect("write weights");
        }
        f.flush().expect("write weights");
    }
    let src = format!(
        "module mapped\n\nconst @w: f32[{N}, {N}] = file(\"w.bin\")\n\nfunc @main(%x: f32[1, {N}]) -> f32[1, {N}] {{\n  \
         %out = alloc_storage {bytes}\n  %y = alloc_tensor %out, 0, f32[1, {N}]\n  \
         call @onnx.MatMul(%x, @w) -> (%y)\n  kill %out\n  ret %y\n}}\n",
        bytes = N * 4
    );
    let rxa = program("mapped.rxa", &src);
    let rxb = rxa.with_extension("rxb");
    let (code, err, _, _) = rxvm_measured(&["asm", rxa.to_str().expect("utf-8"), "-o", rxb.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{err}");
    let (code, err, rss, _) = rxvm_measured(&["bench", rxb.to_str().expect("utf-8"), "--reps", "2", "--warmup", "0"]);
    assert_eq!(code, 0, "{err}");
    let weights = (N * N * 4) as u64;
    assert!(rss > weights, "peak RSS {} MiB: the weight was not read", rss >> 20);
    assert!(rss < weights + (40 << 20), "peak RSS {} MiB for a {} MiB weight", rss >> 20, weights >> 20);
}

/// Issue 31: compiling and running vgg19 (548 MiB of weights, which the model generates
/// with `ConstantOfShape`) held its weights three times (1.65 GB): each analysis of the
/// compiler folded them anew, and the module copied the graph's constants. Now they are
/// folded once, and the module and the VM share them.
#[test]
fn compiling_and_running_vgg19_holds_its_weights_once() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/onnx/wheel/onnx/backend/test/data/light");
    if !dir.is_dir() {
        assert!(std::env::var("RXVM_REQUIRE_ONNX_DATA").is_err(), "the ONNX light models are missing");
        eprintln!("skipped: the ONNX light models are missing (scripts/fetch-onnx-data.sh)");
        return;
    }
    let model = dir.join("light_vgg19.onnx");
    let (code, err, rss, _) = rxvm_measured(&["bench", model.to_str().expect("utf-8"), "--reps", "1", "--warmup", "0"]);
    assert_eq!(code, 0, "{err}");
    // vgg19's 143,667,240 parameters; its 3x3 convolutions after the first keep their
    // Winograd transform instead of their weights packed for im2col: 36/9 of their size
    // on the planes of 4x4 tiles (224 to 28: 10,579,968 parameters), 16/9 on 14x14
    // (9,437,184 parameters).
    let weights: u64 = 143_667_240 * 4;
    let winograd: u64 = 10_579_968 * 4 * 36 / 9 + 9_437_184 * 4 * 16 / 9;
    let bound = weights + winograd + (96 << 20);
    assert!(rss < bound, "peak RSS {} MiB, over the bound of {} MiB", rss >> 20, bound >> 20);
}
