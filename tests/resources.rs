//! Resource accounting: after any run, successful or failed, every storage and view is
//! released, the device's live bytes are back to zero, and on OpenCL the number of live
//! `cl_mem` objects returns to its baseline once the pool is released, however the run
//! ended. Runs on the host, and on the Intel and PoCL OpenCL runtimes when installed
//! (required when `RXVM_REQUIRE_OPENCL` names them).

use rxvm::asm::assemble;
use rxvm::vm::memory::DeviceSpec;
use rxvm::vm::{HostTensor, HostValue, Vm};
use std::sync::Arc;

/// One function that runs to the end and one per way a run can fail, each failing while it
/// holds storages, buffer views and image views.
const PROGRAM: &str = r#"module failures

func @ok() -> float {
  %s = alloc_storage 65536
  %t = alloc_tensor %s, 0, f32[1, 2, 30, 4], scope "global.texture"
  %b = alloc_tensor %s, 32768, f32[64]
  call @vm.fill(%b, 1.5)
  %r = call @vm.sum(%b)
  kill %t
  kill %b
  kill %s
  ret %r
}

func @too_large() {
  %s = alloc_storage 65536
  %t = alloc_tensor %s, 0, f32[1, 2, 30, 4], scope "global.texture"
  %b = alloc_tensor %s, 32768, f32[64]
  %g = int 1099511627776
  %n = call @vm.imul(%g, 64)
  %huge = alloc_storage %n
  ret
}

func @view_past_end() {
  %s = alloc_storage 65536
  %t = alloc_tensor %s, 0, f32[1, 2, 30, 4], scope "global.texture"
  %n = int 100000
  %b = alloc_tensor %s, 0, f32[%n]
  ret
}

func @operator_shapes() {
  %s = alloc_storage 65536
  %x = alloc_tensor %s, 0, f32[2, 3]
  %n = int 4
  %y = alloc_tensor %s, 1024, f32[2, %n]
  %t = alloc_tensor %s, 4096, f32[1, 2, 30, 4], scope "global.texture"
  call @onnx.Relu(%x) -> (%y)
  ret
}

func @divide_by_zero() -> int {
  %s = alloc_storage 65536
  %t = alloc_tensor %s, 0, f32[1, 2, 30, 4], scope "global.texture"
  %a = int 1
  %z = int 0
  %q = call @vm.idiv(%a, %z)
  ret %q
}

func @endless() {
  %keep = alloc_storage 65536
  %img = alloc_tensor %keep, 0, f32[1, 2, 30, 4], scope "global.texture"
loop:
  %s = alloc_storage 4096
  %t = alloc_tensor %s, 0, f32[1024]
  br loop
}

func @deep(%n: int) -> int {
  %s = alloc_storage 4096
  %t = alloc_tensor %s, 0, f32[1024]
  %m = call @vm.iadd(%n, 1)
  %r = call @deep(%m)
  ret %r
}

func @hoard() {
  %a = alloc_storage 1048576
  %ta = alloc_tensor %a, 0, f32[1, 2, 30, 4], scope "global.texture"
  %b = alloc_storage 1048576
  %tb = alloc_tensor %b, 0, f32[262144]
  %c = alloc_storage 1048576
  ret
}

func @typed_input(%x: f32[4]) -> float {
  %s = alloc_storage 4096
  %t = alloc_tensor %s, 0, f32[1, 2, 30, 4], scope "global.texture"
  %r = call @vm.sum(%x)
  ret %r
}
"#;

/// Each failing function, its arguments and a piece of its error.
fn failures() -> Vec<(&'static str, Vec<HostValue>, &'static str)> {
    let wrong = HostTensor::from_f32(&[5], &[1.0; 5]).expect("a tensor");
    vec![
        ("too_large", vec![], "exceeds the largest allocation of device"),
        ("view_past_end", vec![], "ends past the end of %s"),
        ("operator_shapes", vec![], "@onnx.Relu"),
        ("divide_by_zero", vec![], "division by zero"),
        ("endless", vec![], "instruction limit of 5000 reached"),
        ("deep", vec![HostValue::Int(0)], "call depth limit of 40 reached"),
        ("hoard", vec![], "live-bytes limit reached"),
        ("typed_input", vec![HostValue::Tensor(wrong)], "expected f32[4]"),
    ]
}

fn devices() -> Vec<(&'static str, DeviceSpec)> {
    rxvm_test_support::devices::host_and(&["intel", "pocl"])
}

fn live_cl_mem(vm: &Vm) -> u64 {
    vm.cl_stats().iter().find(|(k, _)| *k == "live_cl_mem").map_or(0, |(_, n)| *n)
}

fn assert_released(vm: &Vm, what: &str) {
    let s = vm.stats();
    assert_eq!((s.live_storages, s.live_views, s.live_bytes), (0, 0, 0), "{what}: {s:?}");
    assert_eq!(vm.device_bytes(0).map(|(live, _)| live), Some(0), "{what}: device bytes");
}

#[test]
fn every_run_releases_its_storages_views_and_cl_mem() {
    let m = Arc::new(assemble(PROGRAM, "failures.rxa").unwrap_or_else(|d| panic!("{}", d.render())));
    for (dev, spec) in devices() {
        let mut vm = Vm::with_devices(m.clone(), vec![spec]).expect("a VM");
        vm.limits.max_instructions = Some(5000);
        vm.limits.max_call_depth = 40;
        vm.limits.max_live_bytes = Some(2 << 20);
        let baseline = live_cl_mem(&vm);
        assert_eq!(vm.invoke("ok", &[]).expect("@ok runs"), [HostValue::Float(96.0)], "{dev}");
        assert_released(&vm, &format!("{dev}: @ok"));
        let after_ok = live_cl_mem(&vm);
        for (func, args, want) in failures() {
            let what = format!("{dev}: @{func}");
            let e = vm.invoke(func, &args).expect_err(&what).to_string();
            assert!(e.contains(want), "{what}: {e}");
            assert_released(&vm, &what);
            // What the failed run made is either released or cached in the pool (blocks, and
            // the sub-buffers and images made on them): clearing the pool leaves the baseline.
            vm.release_pool();
            assert_eq!(live_cl_mem(&vm), baseline, "{what}: live cl_mem after releasing the pool");
        }
        // And the VM still works after all that.
        assert_eq!(vm.invoke("ok", &[]).expect("@ok runs again"), [HostValue::Float(96.0)], "{dev}");
        vm.release_pool();
        assert_eq!(live_cl_mem(&vm), baseline, "{dev}: live cl_mem after releasing the pool");
        if dev != "host" {
            assert!(after_ok > baseline, "{dev}: @ok made cl_mem objects, so the check above means something");
        }
    }
}

#[test]
fn dropping_a_vm_after_a_failure_releases_everything() {
    let m = Arc::new(assemble(PROGRAM, "failures.rxa").unwrap_or_else(|d| panic!("{}", d.render())));
    for (dev, spec) in devices() {
        let mut vm = Vm::with_devices(m.clone(), vec![spec]).expect("a VM");
        vm.limits.max_instructions = Some(5000);
        let rt = vm.runtime().clone();
        vm.invoke("endless", &[]).expect_err("stops at the limit");
        drop(vm);
        // The runtime outlives the VM here; what the VM held is gone, and only the pool's
        // cached blocks remain until it is cleared.
        let cl_live = |rt: &rxvm::vm::memory::Runtime| {
            rt.devices.iter().filter_map(|d| d.cl()).map(|c| c.counters.live_cl_mem.get()).sum::<u64>()
        };
        assert_eq!(rt.stats().live_storages, 0, "{dev}");
        for d in &rt.devices {
            d.clear_pool();
        }
        assert_eq!(cl_live(&rt), 0, "{dev}: no cl_mem left once the pool is cleared");
    }
}

#[test]
fn a_timeout_or_an_interrupt_releases_what_the_run_held() {
    let m = Arc::new(assemble(PROGRAM, "failures.rxa").unwrap_or_else(|d| panic!("{}", d.render())));
    for (dev, spec) in devices() {
        let mut vm = Vm::with_devices(m.clone(), vec![spec]).expect("a VM");
        vm.limits.timeout = Some(std::time::Duration::from_millis(50));
        let e = vm.invoke("endless", &[]).expect_err("stops at the timeout").to_string();
        assert!(e.contains("time limit of 50ms reached"), "{dev}: {e}");
        assert_released(&vm, &format!("{dev}: after the timeout"));
        vm.limits.timeout = None;
        let stop = rxvm::vm::Interrupt::new();
        vm.limits.interrupt = Some(stop.clone());
        stop.raise();
        let e = vm.invoke("endless", &[]).expect_err("interrupted").to_string();
        assert!(e.contains("interrupted"), "{dev}: {e}");
        assert_released(&vm, &format!("{dev}: after the interrupt"));
        assert_eq!(vm.invoke("ok", &[]).expect("@ok runs"), [HostValue::Float(96.0)], "{dev}");
    }
}
