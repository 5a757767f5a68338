//! Execution limits: the instruction budget, the call depth and the live bytes per device.
//! Each stops a program with a clear error (through the API and the CLI), and the VM is
//! clean and usable afterwards.

use rxvm::asm::assemble;
use rxvm::vm::{HostValue, Limits, Vm, VmError};
use std::process::Command;
use std::sync::Arc;

const SPIN: &str = "module spin

func @main() {
loop:
  br loop
}

func @answer() -> int {
  %a = int 42
  ret %a
}
";

const RECURSE: &str = "module recurse

func @down(%n: int) -> int {
  %m = call @vm.iadd(%n, 1)
  %r = call @down(%m)
  ret %r
}
";

/// Eight live 1 MiB storages, each with a view, none killed before the next.
const HOARD: &str = "module hoard

func @main() -> int {
  %a = alloc_storage 1048576
  %ta = alloc_tensor %a, 0, f32[262144]
  %b = alloc_storage 1048576
  %tb = alloc_tensor %b, 0, f32[262144]
  %c = alloc_storage 1048576
  %d = alloc_storage 1048576
  %e = alloc_storage 1048576
  %f = alloc_storage 1048576
  %g = alloc_storage 1048576
  %h = alloc_storage 1048576
  %n = int 8
  ret %n
}
";

fn vm(src: &str) -> Vm {
    let m = assemble(src, "limits.rxa").unwrap_or_else(|d| panic!("{}", d.render()));
    Vm::host(Arc::new(m)).expect("a VM")
}

/// Nothing the failed run made is still alive, and the VM's stacks are empty.
fn assert_clean(vm: &Vm, what: &str) {
    let s = vm.stats();
    assert_eq!((s.live_storages, s.live_views, s.live_bytes), (0, 0, 0), "{what}: {s:?}");
    assert_eq!(vm.device_bytes(0).map(|(live, _)| live), Some(0), "{what}: device bytes");
}

fn message(e: VmError) -> String {
    e.to_string()
}

#[test]
fn the_instruction_limit_stops_an_endless_loop() {
    let mut vm = vm(SPIN);
    vm.limits.max_instructions = Some(10_000);
    let e = message(vm.invoke("main", &[]).expect_err("the loop never ends"));
    assert!(e.contains("instruction limit of 10000 reached"), "{e}");
    assert!(e.contains("raise it with --max-instructions or Limits::max_instructions"), "{e}");
    assert_clean(&vm, "after the instruction limit");
    // The budget is per invocation: the VM runs the next call normally.
    assert_eq!(vm.invoke("answer", &[]).expect("runs"), [HostValue::Int(42)]);
    // Every instruction counts, so a limit of exactly the instructions a call needs passes.
    vm.limits.max_instructions = Some(2);
    assert_eq!(vm.invoke("answer", &[]).expect("runs"), [HostValue::Int(42)]);
    vm.limits.max_instructions = Some(1);
    let e = message(vm.invoke("answer", &[]).expect_err("one instruction short"));
    assert!(e.contains("instruction limit of 1 reached"), "{e}");
}

#[test]
fn the_call_depth_limit_stops_runaway_recursion() {
    let mut vm = vm(RECURSE);
    vm.limits.max_call_depth = 50;
    let e = message(vm.invoke("down", &[HostValue::Int(0)]).expect_err("no base case"));
    assert!(e.contains("call depth limit of 50 reached calling @down"), "{e}");
    assert_clean(&vm, "after the depth limit");
    // The register stack was unwound: a deeper limit still reaches exactly that depth.
    vm.limits.max_call_depth = 200;
    let e = message(vm.invoke("down", &[HostValue::Int(0)]).expect_err("no base case"));
    assert!(e.contains("call depth limit of 200 reached"), "{e}");
    assert_eq!(Limits::default().max_call_depth, 10_000);
}

#[test]
fn the_live_bytes_limit_refuses_the_allocation_that_would_cross_it() {
    let mut vm = vm(HOARD);
    vm.limits.max_live_bytes = Some(4 << 20);
    let e = message(vm.invoke("main", &[]).expect_err("8 MiB do not fit in 4"));
    assert!(
        e.contains(
            "live-bytes limit reached on `host`: 1048576 more bytes with 4194304 live would exceed the limit of 4194304 bytes"
        ),
        "{e}"
    );
    assert!(e.contains("--max-live-bytes"), "{e}");
    assert_clean(&vm, "after the live-bytes limit");
    // The peak never went past the limit.
    assert!(vm.device_bytes(0).expect("device 0").1 <= 4 << 20);
    // Raised, the same program runs; lifted, too.
    vm.limits.max_live_bytes = Some(8 << 20);
    assert_eq!(vm.invoke("main", &[]).expect("fits"), [HostValue::Int(8)]);
    vm.limits.max_live_bytes = None;
    assert_eq!(vm.invoke("main", &[]).expect("no limit"), [HostValue::Int(8)]);
    assert_clean(&vm, "after successful runs");
    // Lowered again with eight dead storages of the class kept for reuse: reviving one
    // (the compiled `alloc_storage`'s fast path) is refused at the same allocation.
    assert!(vm.pool_free_bytes() >= 8 << 20);
    vm.limits.max_live_bytes = Some(4 << 20);
    let e = message(vm.invoke("main", &[]).expect_err("a pool hit does not pass the limit"));
    assert!(e.contains("1048576 more bytes with 4194304 live would exceed the limit of 4194304 bytes"), "{e}");
    assert!(e.contains("limits.rxa:10:3"), "{e}");
    assert_clean(&vm, "after the limit refused a pool hit");
}

#[test]
fn the_live_bytes_limit_counts_inputs() {
    let m = assemble(
        "module sum\n\nfunc @main(%x: f32[1024]) -> float {\n  %s = call @vm.sum(%x)\n  ret %s\n}\n",
        "sum.rxa",
    )
    .unwrap_or_else(|d| panic!("{}", d.render()));
    let mut vm = Vm::host(Arc::new(m)).expect("a VM");
    let x = rxvm::vm::HostTensor::from_f32(&[1024], &[0.5; 1024]).expect("a tensor");
    vm.limits.max_live_bytes = Some(1000);
    let e = message(vm.invoke("main", &[HostValue::Tensor(x.clone())]).expect_err("4096 bytes of input"));
    assert!(e.contains("live-bytes limit reached on `host`: 4096 more bytes with 0 live"), "{e}");
    vm.limits.max_live_bytes = Some(4096);
    assert_eq!(vm.invoke("main", &[HostValue::Tensor(x)]).expect("fits"), [HostValue::Float(512.0)]);
    assert_clean(&vm, "after the input was released");
}

fn rxvm_run(src: &str, name: &str, flags: &[&str]) -> (i32, String) {
    let dir = std::env::temp_dir().join(format!("rxvm-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, src).expect("write program");
    let out = Command::new(env!("CARGO_BIN_EXE_rxvm")).arg("run").arg(&path).args(flags).output().expect("rxvm runs");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn every_limit_is_a_cli_flag() {
    let (code, err) = rxvm_run(SPIN, "spin.rxa", &["--max-instructions", "500"]);
    assert_ne!(code, 0);
    assert!(err.contains("instruction limit of 500 reached"), "{err}");
    let (code, err) = rxvm_run(RECURSE, "recurse.rxa", &["--func", "down", "--max-call-depth", "20", "--input", "n=0"]);
    assert_ne!(code, 0);
    assert!(err.contains("call depth limit of 20 reached calling @down"), "{err}");
    let (code, err) = rxvm_run(HOARD, "hoard.rxa", &["--max-live-bytes", "2M"]);
    assert_ne!(code, 0);
    assert!(err.contains("live-bytes limit reached on `host`"), "{err}");
    let (code, err) = rxvm_run(HOARD, "hoard.rxa", &["--max-live-bytes", "8M", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let (code, err) = rxvm_run(SPIN, "spin.rxa", &["--timeout", "200ms"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("error: time limit of 200ms reached"), "{err}");
    assert!(err.contains("spin.rxa:5:3"), "names where it stopped: {err}");
    let (code, err) = rxvm_run(SPIN, "spin.rxa", &["--timeout", "soon"]);
    assert_eq!(code, 2, "clap refuses it: {err}");
    assert!(err.contains("expected a positive time such as 30s, 500ms, 2m or 1.5, found `soon`"), "{err}");
    let (code, err) = rxvm_run(HOARD, "hoard.rxa", &["--max-live-bytes", "lots"]);
    assert_eq!(code, 2, "clap refuses it: {err}");
    assert!(err.contains("expected a byte count such as 4096, 64K, 16M or 1G, found `lots`"), "{err}");
}

/// Each frame holds a 1 MiB storage and calls itself: the frames' storages count against
/// the live-bytes limit, so the recursion is refused in its 65th frame under a 64 MiB limit,
/// and the error says what the frames hold.
const HOARDING_RECURSION: &str = "module hoarding

func @down(%n: int) -> int {
  %s = alloc_storage 1048576
  %t = alloc_tensor %s, 0, f32[262144]
  call @vm.fill(%t, 1.0)
  %m = call @vm.iadd(%n, 1)
  %r = call @down(%m)
  ret %r
}
";

#[test]
fn storages_held_by_recursive_frames_count_against_the_live_bytes_limit() {
    let mut vm = vm(HOARDING_RECURSION);
    vm.limits.max_live_bytes = Some(64 << 20);
    let e = vm.invoke("down", &[HostValue::Int(0)]).expect_err("no base case");
    assert!(e.message.contains("1048576 more bytes with 67108864 live would exceed the limit of 67108864"), "{e}");
    assert!(e.notes.iter().any(|n| n == "the 65 frames on the call stack hold 67108864 bytes in 64 storages"), "{e}");
    assert_eq!(e.stack.len(), 65, "refused 65 frames deep: {e}");
    assert_clean(&vm, "after the recursion was refused");
    assert!(vm.device_bytes(0).expect("device 0").1 <= 64 << 20, "the peak stayed under the limit");
    // Frames that hold nothing add no note to the call-depth error.
    vm.limits.max_live_bytes = None;
    let mut vm2 = self::vm(RECURSE);
    vm2.limits.max_call_depth = 10;
    let e = vm2.invoke("down", &[HostValue::Int(0)]).expect_err("no base case");
    assert!(e.notes.is_empty(), "{e}");
    // With a storage per frame, the call-depth error says what the frames hold.
    vm.limits.max_call_depth = 10;
    let e = vm.invoke("down", &[HostValue::Int(0)]).expect_err("no base case");
    assert!(e.message.contains("call depth limit of 10 reached"), "{e}");
    assert!(e.notes.iter().any(|n| n == "the 10 frames on the call stack hold 10485760 bytes in 10 storages"), "{e}");
    assert_clean(&vm, "after the call-depth limit");
}

#[test]
fn the_timeout_stops_an_endless_loop_where_it_is() {
    let mut vm = vm(SPIN);
    vm.limits.timeout = Some(std::time::Duration::from_millis(100));
    let t0 = std::time::Instant::now();
    let e = vm.invoke("main", &[]).expect_err("the loop never ends");
    let took = t0.elapsed();
    assert!(took >= std::time::Duration::from_millis(100) && took < std::time::Duration::from_secs(5), "{took:?}");
    assert_eq!(e.message, "time limit of 100ms reached");
    assert!(e.notes.iter().any(|n| n.contains("--timeout")), "{e}");
    assert_eq!((e.stack[0].func.as_str(), e.stack[0].pc, e.stack[0].loc.line), ("main", 0, 5), "{e}");
    assert_clean(&vm, "after the timeout");
    // A run that ends in time is not affected, nor is the next one by the last one's timer.
    assert_eq!(vm.invoke("answer", &[]).expect("runs"), [HostValue::Int(42)]);
    std::thread::sleep(std::time::Duration::from_millis(150));
    assert_eq!(vm.invoke("answer", &[]).expect("runs"), [HostValue::Int(42)]);
}

#[test]
fn an_interrupt_from_another_thread_stops_the_run() {
    let mut vm = vm(SPIN);
    let stop = rxvm::vm::Interrupt::new();
    vm.limits.interrupt = Some(stop.clone());
    let raiser = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            stop.raise();
        })
    };
    let e = vm.invoke("main", &[]).expect_err("interrupted");
    raiser.join().expect("the raising thread");
    assert_eq!(e.message, "interrupted");
    assert!(!stop.is_raised(), "the run took the request");
    assert_clean(&vm, "after the interrupt");
    assert_eq!(vm.invoke("answer", &[]).expect("runs"), [HostValue::Int(42)]);
    // Under the debugger an interrupt pauses the run, which resumes where it was.
    let main = vm.module().func_by_name("main").expect("@main");
    vm.debug_start(main, vec![]).expect("starts");
    stop.raise();
    assert!(vm.debug_resume(&mut |_| false).expect("pauses").is_none());
    assert_eq!(vm.debug_stopped_by(), Some(rxvm::vm::Stopped::Interrupted));
    assert_eq!(vm.debug_frames()[0].pc, 0, "before its first instruction");
    assert!(vm.debug_resume(&mut |p| p.executed >= 3).expect("resumes").is_none());
    assert_eq!(vm.debug_stopped_by(), None, "paused by the caller this time");
    vm.debug_abort();
}

/// `rxvm run --help` states every limit's default.
#[test]
fn the_help_gives_each_limits_default() {
    let out = Command::new(env!("CARGO_BIN_EXE_rxvm")).args(["run", "--help"]).output().expect("rxvm runs");
    let help = String::from_utf8_lossy(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
    for want in [
        "--max-instructions <N> Stop with an error after this many instructions (default: no limit;",
        "--max-call-depth <N> Stop with an error beyond this call depth [default: 10000]",
        "e.g. `64M` (default: no limit beyond the device's memory)",
        "--timeout <TIME> Stop with an error, naming the instruction, after this much wall-clock time",
    ] {
        assert!(help.contains(want), "`{want}` in: {help}");
    }
}

/// Constants of each kind: a byte fill, a float fill, a zero fill and literal data.
const CONSTANTS: &str = "module consts

const @ones: u8[1048576] = fill(1)
const @halves: f32[300000] = fill(0.5)
const @zeros: f64[262144] = fill(0)
const @w: f32[4] = [1.0, 2.0, 3.0, 4.0]

func @main() -> (float, float, float, float) {
  %a = call @vm.sum(@ones)
  %b = call @vm.sum(@halves)
  %c = call @vm.sum(@zeros)
  %d = call @vm.sum(@w)
  ret %a, %b, %c, %d
}

func @two_mib() -> int {
  %a = alloc_storage 1048576
  %b = alloc_storage 1048576
  %n = int 2
  ret %n
}
";

/// Bytes of `CONSTANTS`' constants.
const CONSTANT_BYTES: u64 = 1048576 + 300000 * 4 + 262144 * 8 + 16;

fn constants_module() -> Arc<rxvm::vm::Module> {
    Arc::new(assemble(CONSTANTS, "consts.rxa").unwrap_or_else(|d| panic!("{}", d.render())))
}

fn host_runtime() -> std::rc::Rc<rxvm::vm::memory::Runtime> {
    let host = rxvm::vm::memory::DeviceSpec::Host(rxvm::vm::DeviceCaps::host());
    rxvm::vm::memory::Runtime::new(vec![host]).expect("a host runtime")
}

/// Constants count against the live-bytes limit when they load: a VM made with a limit
/// they cross is refused, naming the constant, its size and the limit, having taken no
/// more than the limit (the constants before it) on the way.
#[test]
fn constants_are_refused_at_load_against_the_live_bytes_limit() {
    let limits = |bytes| Limits { max_live_bytes: Some(bytes), ..Limits::default() };
    // @ones (1 MiB) fits in 2 MiB, @halves (1,200,000 bytes) then does not.
    let rt = host_runtime();
    let e = match Vm::with_runtime_and_limits(constants_module(), rt.clone(), limits(2 << 20)) {
        Ok(_) => panic!("2.2 MiB of constants loaded under a 2 MiB limit"),
        Err(e) => message(e),
    };
    assert!(
        e.contains(
            "cannot load constant @halves (f32[300000], 1200000 bytes): live-bytes limit reached on `host`: 1200000 more bytes with 1048576 live would exceed the limit of 2097152 bytes"
        ),
        "{e}"
    );
    let dev = &rt.devices[0];
    assert_eq!((dev.live_bytes.get(), dev.peak_bytes.get()), (0, 1 << 20), "only @ones was taken, and given back");
    // At the limit exactly, they load and read back as written.
    let mut vm = Vm::with_devices_and_limits(
        constants_module(),
        vec![rxvm::vm::memory::DeviceSpec::Host(rxvm::vm::DeviceCaps::host())],
        limits(CONSTANT_BYTES),
    )
    .expect("they fit");
    let want = [1048576.0, 150000.0, 0.0, 10.0].map(HostValue::Float);
    assert_eq!(vm.invoke("main", &[]).expect("runs"), want);
    let s = vm.stats();
    assert_eq!(
        (s.constant_bytes, s.peak_total_bytes, s.live_bytes, s.peak_bytes),
        (CONSTANT_BYTES, CONSTANT_BYTES, 0, 0)
    );
    assert_eq!(vm.device_bytes(0), Some((CONSTANT_BYTES, CONSTANT_BYTES)));
    // The limit goes on holding at run time, constants included: one more MiB fits, two do not.
    let mut vm = Vm::with_runtime_and_limits(constants_module(), host_runtime(), limits(CONSTANT_BYTES + (1 << 20)))
        .expect("they fit");
    let e = message(vm.invoke("two_mib", &[]).expect_err("one more MiB, not two"));
    assert!(e.contains(&format!("1048576 more bytes with {} live", CONSTANT_BYTES + (1 << 20))), "{e}");
    assert_eq!(vm.stats().peak_total_bytes, CONSTANT_BYTES + (1 << 20));
    // Without a limit they load, whatever limit a VM before it on the runtime had.
    let rt = host_runtime();
    assert!(Vm::with_runtime_and_limits(constants_module(), rt.clone(), limits(1024)).is_err());
    assert!(Vm::with_runtime(constants_module(), rt).is_ok());
}
