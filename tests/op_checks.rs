//! Operator calls check their output views against the types the operator infers, on every
//! call: the VM remembers what a call site inferred for the operands it saw (so a compiled
//! model's later inferences skip inference), but a call with other shapes or other values
//! of a shape-like input is inferred and checked again. `Kernels::Noop` keeps every check
//! and skips only the kernels' work.

use rxvm::vm::{HostValue, Kernels, Vm};
use std::sync::Arc;

fn vm(text: &str) -> Vm {
    let m = rxvm_asm::assemble(text, "t.rxa").unwrap_or_else(|d| panic!("{}", d.render()));
    Vm::host(Arc::new(m)).expect("a VM")
}

const RELU_INTO_2X3: &str = "module relu
func @main(%n: int) {
  %s = alloc_storage 4096
  %x = alloc_tensor %s, 0, f32[2, %n]
  %y = alloc_tensor %s, 1024, f32[2, 3]
  call @onnx.Relu(%x) -> (%y)
  ret
}
";

#[test]
fn a_call_site_rechecks_when_its_operand_shapes_change() {
    for kernels in [Kernels::Run, Kernels::Noop] {
        let mut vm = vm(RELU_INTO_2X3);
        vm.kernels = kernels;
        vm.invoke("main", &[HostValue::Int(3)]).expect("f32[2, 3] -> f32[2, 3]");
        vm.invoke("main", &[HostValue::Int(3)]).expect("the same again");
        let e = vm.invoke("main", &[HostValue::Int(4)]).expect_err("f32[2, 4] into a f32[2, 3] view");
        assert!(
            e.message.contains("output 1 is f32[2, 4] for these inputs and attributes, but its view is f32[2, 3]"),
            "{kernels:?}: {e}"
        );
        vm.invoke("main", &[HostValue::Int(3)]).expect("back to the shapes that fit");
    }
}

#[test]
fn a_call_site_rechecks_when_a_shape_input_changes_value() {
    // Reshape's `shape` input is computed at run time: [start, start + step].
    let mut vm = vm("module reshape
func @main(%start: float, %step: float) {
  %s = alloc_storage 4096
  %x = alloc_tensor %s, 0, f32[4]
  %shape = alloc_tensor %s, 1024, i64[2]
  call @vm.iota(%shape, %start, %step)
  %y = alloc_tensor %s, 2048, f32[1, 4]
  call @onnx.Reshape(%x, %shape) -> (%y)
  ret
}
");
    let args = |a: f64, b: f64| [HostValue::Float(a), HostValue::Float(b)];
    // Every operand is a view the code fixes, but the op reads the value of one: no-op
    // kernels must not take the site's first check for all later ones.
    for kernels in [Kernels::Run, Kernels::Noop] {
        vm.kernels = kernels;
        vm.invoke("main", &args(1.0, 3.0)).expect("shape [1, 4]");
        vm.invoke("main", &args(1.0, 3.0)).expect("shape [1, 4] again");
        let e = vm.invoke("main", &args(4.0, -3.0)).expect_err("shape [4, 1] into a f32[1, 4] view");
        assert!(e.message.contains("output 1 is f32[4, 1]"), "{kernels:?}: {e}");
    }
}

#[test]
fn noop_kernels_check_everything_but_compute_nothing() {
    let text = "module noop
func @main() -> f32[4] {
  %s = alloc_storage 1024
  %x = alloc_tensor %s, 0, f32[4]
  call @vm.fill(%x, -1.0)
  %y = alloc_tensor %s, 512, f32[4]
  call @vm.fill(%y, 7.0)
  call @onnx.Relu(%x) -> (%y)
  ret %y
}
";
    let result = |kernels: Kernels| {
        let mut vm = vm(text);
        vm.kernels = kernels;
        let out = vm.invoke("main", &[]).expect("runs");
        let Some(HostValue::Tensor(t)) = out.first() else { panic!("{out:?}") };
        (t.to_f64(), vm.stats().instructions)
    };
    let (computed, n) = result(Kernels::Run);
    let (skipped, m) = result(Kernels::Noop);
    assert_eq!(computed, [0.0; 4], "Relu of -1");
    assert_eq!(skipped, [7.0; 4], "the kernel did not run: %y keeps what it held");
    assert_eq!(n, m, "the same instructions ran");
}

/// `Relu` of `f32[2, ..., %n]` (rank `rank`) into a view whose last dim is 3.
fn relu_of_rank(rank: usize) -> String {
    let ones = |n: usize| vec!["2"; n].join(", ");
    let x = format!("{}{}%n", ones(rank - 1), if rank > 1 { ", " } else { "" });
    let y = format!("{}{}3", ones(rank - 1), if rank > 1 { ", " } else { "" });
    format!(
        "module relu
func @main(%n: int) {{
  %s = alloc_storage 4096
  %x = alloc_tensor %s, 0, f32[{x}]
  %y = alloc_tensor %s, 2048, f32[{y}]
  call @onnx.Relu(%x) -> (%y)
  ret
}}
"
    )
}

#[test]
fn no_op_kernels_recheck_changed_shapes_of_every_rank() {
    // Up to four dims the no-op path compares the operands against the site's memo in
    // place; beyond, the general path does. Either way a changed shape is checked again.
    for rank in 1..=6 {
        let mut vm = vm(&relu_of_rank(rank));
        vm.kernels = Kernels::Noop;
        for round in 0..3 {
            vm.invoke("main", &[HostValue::Int(3)]).unwrap_or_else(|e| panic!("rank {rank}, round {round}: {e}"));
        }
        let e = vm.invoke("main", &[HostValue::Int(4)]).expect_err("a 4 into a 3");
        assert!(e.message.contains("for these inputs and attributes, but its view is"), "rank {rank}: {e}");
        vm.invoke("main", &[HostValue::Int(3)]).unwrap_or_else(|e| panic!("rank {rank}, after the error: {e}"));
    }
}

/// One call site whose input register is made by two `alloc_tensor`s of constant geometry
/// (held as slices, without view objects): the no-op path's per-register check must tell
/// the two geometries apart, and so must the general path. (Inputs of more than 64
/// elements: inference reads smaller ones' values, and such sites take the general path.)
#[test]
fn a_call_site_rechecks_when_its_operand_comes_from_another_alloc_tensor() {
    let text = "module branches
func @main(%wide: int) -> f32[4, 30] {
  %s = alloc_storage 4096
  br_if %wide, wide, narrow
narrow:
  %x = alloc_tensor %s, 0, f32[4, 30]
  br call
wide:
  %x = alloc_tensor %s, 0, f32[4, 40]
  br call
call:
  call @vm.fill(%x, -2.0)
  %y = alloc_tensor %s, 2048, f32[4, 30]
  call @onnx.Relu(%x) -> (%y)
  ret %y
}
";
    for kernels in [Kernels::Run, Kernels::Noop] {
        let mut vm = vm(text);
        vm.kernels = kernels;
        for round in 0..3 {
            let out = vm.invoke("main", &[HostValue::Int(0)]).unwrap_or_else(|e| panic!("{kernels:?} {round}: {e}"));
            let Some(HostValue::Tensor(t)) = out.first() else { panic!("{out:?}") };
            assert_eq!(t.shape, [4, 30]);
        }
        let e = vm.invoke("main", &[HostValue::Int(1)]).expect_err("f32[4, 40] into a f32[4, 30] view");
        assert!(
            e.message.contains("output 1 is f32[4, 40] for these inputs and attributes, but its view is f32[4, 30]"),
            "{kernels:?}: {e}"
        );
        vm.invoke("main", &[HostValue::Int(0)]).unwrap_or_else(|e| panic!("{kernels:?}, after the error: {e}"));
    }
}
