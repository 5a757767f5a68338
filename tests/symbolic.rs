//! Symbolic compilation (docs/symbolic-shapes.md): one program compiled for a symbolic
//! batch runs every batch up to its bound, gives the fixed-shape program's outputs, and
//! uses no more memory than the plan made for that batch alone.

use rxvm::compile::{compile, compile_symbolic, Options};
use rxvm::graph::InputDim;
use rxvm::vm::types::DType;
use rxvm::vm::{HostTensor, HostValue, Module, Vm};
use rxvm_test_support::graphs::resnet18_style;
use std::sync::Arc;

/// Runs `m` on `input` in a fresh VM: the outputs and the peak of live bytes.
fn run(m: &Arc<Module>, input: &HostTensor) -> (Vec<f64>, u64) {
    let mut vm = Vm::host(m.clone()).expect("a VM");
    let out = vm.invoke("main", &[HostValue::Tensor(input.clone())]).expect("runs");
    let [HostValue::Tensor(y)] = &out[..] else { panic!("{out:?}") };
    (y.to_f64(), vm.stats().peak_bytes)
}

#[test]
fn one_program_serves_every_batch_with_the_fixed_plans_memory() {
    let g = resnet18_style();
    let opts = Options::default();
    let c = compile_symbolic(&g, &[None], &[("batch".into(), 8)], &opts).expect("compiles symbolically");
    let text = rxvm::asm::disassemble(&c.module);
    assert!(text.contains("func @main(%image: f32[%batch, 3, 32, 32]) -> f32[%batch, 10] where %batch <= 8"), "{text}");
    assert!(c.plan_comment.contains("; symbolic: batch <= 8;"), "{}", c.plan_comment);
    // One `.rxb`, loaded back, serves every batch.
    let m = Arc::new(rxvm::vm::read_module(&rxvm::vm::write_module(&c.module)).expect("loads"));
    let upper = c.report.arena_bytes;
    for batch in [1i64, 2, 3, 8] {
        let image = HostTensor::random(DType::F32, &[batch, 3, 32, 32], 7 + batch as u64).unwrap();
        let fixed = compile(&g, &[vec![batch, 3, 32, 32]], &opts).expect("compiles for the batch");
        let (want, fixed_peak) = run(&Arc::new(fixed.module), &image);
        let (got, peak) = run(&m, &image);
        assert_eq!(got.len(), 10 * batch as usize);
        assert_eq!(got, want, "batch {batch}: the symbolic program's outputs differ from the fixed one's");
        // Logits of random weights: O(1) and not all alike.
        assert!(got.iter().any(|v| v.abs() > 0.05) && got.iter().any(|v| (v - got[0]).abs() > 1e-3), "{got:?}");
        assert!(peak <= fixed_peak, "batch {batch}: peak {peak} bytes, the fixed-shape plan's {fixed_peak}");
        // docs/performance.md's table (`-- --nocapture`): arena bytes at this batch, the
        // peak less the input the caller passes.
        let input = (batch * 3 * 32 * 32 * 4) as u64;
        eprintln!("| {batch} | {} | {} | {upper} |", fixed_peak - input, peak - input);
        // The arena follows the batch: at batch 1 it is far below the bound's.
        if batch == 1 {
            assert!(fixed.report.arena_bytes * 4 < upper, "{} vs {upper}", fixed.report.arena_bytes);
        }
    }
}

#[test]
fn without_a_bound_the_batch_is_allocated_at_run_time() {
    let g = resnet18_style();
    let c = compile_symbolic(&g, &[None], &[], &Options::default()).expect("compiles");
    assert!(
        c.plan_comment.contains(
            "; symbolic: batch; the tensors computed from them are allocated at run time: no bound for batch \
             (give --bound NAME=N to plan them)\n"
        ),
        "{}",
        c.plan_comment
    );
    assert_eq!(c.report.arena_bytes, 0);
    let m = Arc::new(c.module);
    for batch in [1i64, 5] {
        let image = HostTensor::random(DType::F32, &[batch, 3, 32, 32], 3).unwrap();
        let fixed = compile(&g, &[vec![batch, 3, 32, 32]], &Options::default()).unwrap();
        let (want, _) = run(&Arc::new(fixed.module), &image);
        assert_eq!(run(&m, &image).0, want);
    }
}

#[test]
fn bounds_must_name_symbols() {
    let g = resnet18_style();
    let err = compile_symbolic(&g, &[None], &[("n".into(), 8)], &Options::default()).err().unwrap();
    assert_eq!(err, "--bound n=8: no symbol `n`; the symbols are `batch`");
    let err = compile_symbolic(&g, &[None], &[("batch".into(), 0)], &Options::default()).err().unwrap();
    assert_eq!(err, "--bound batch=0: a bound must be at least 1");
}

/// A two-layer transformer encoder (`scripts/make-symbolic-encoder.py`: pre-norm 4-head
/// self-attention and a ReLU MLP, random weights) whose input is `f32[1, seq, 32]`,
/// compiled once with `seq <= 512`: at lengths 1, 7, 64 and 512 its outputs equal
/// onnxruntime's (written by the script), and its arena is within 1.1x of the lower bound
/// for that length (attention scores grow as seq², the rest as seq: the entry picks the
/// better of the placement orders planned at several lengths).
#[test]
fn a_transformer_with_a_symbolic_sequence_length_stays_at_the_lower_bound() {
    let dir = std::path::Path::new("tests/symbolic");
    let g = rxvm::onnx::read_model(&dir.join("encoder.onnx")).expect("reads");
    let opts = Options::default();
    let c = compile_symbolic(&g, &[None], &[("seq".into(), 512)], &opts).expect("compiles symbolically");
    assert!(c.plan_comment.contains("; symbolic: seq <= 512;"), "{}", c.plan_comment);
    let m = Arc::new(c.module);
    for len in [1i64, 7, 64, 512] {
        let x = rxvm::npy::read_npy(&dir.join(format!("x_{len}.npy"))).expect("x");
        let want = rxvm::npy::read_npy(&dir.join(format!("y_{len}.npy"))).expect("y").to_f64();
        let (got, peak) = run(&m, &x);
        assert_eq!(got.len(), want.len());
        let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(worst < 1e-4, "length {len}: differs from onnxruntime by {worst}");
        assert!(want.iter().any(|v| v.abs() > 0.5), "outputs of size O(1)");
        let fixed = compile(&g, &[vec![1, len, 32]], &opts).expect("compiles for the length");
        let arena = peak - (len * 32 * 4) as u64;
        let bound = fixed.report.lower_bound;
        assert!(arena as f64 <= 1.1 * bound as f64, "length {len}: arena {arena} bytes, lower bound {bound}");
        eprintln!("| {len} | {bound} | {arena} | {} |", c.report.arena_bytes);
    }
}

/// A legacy export's shape arithmetic (`Shape` → `Gather` → `Concat` → `Reshape`) reads the
/// symbolic batch as a value: the program cannot plan it, so the tensors computed from the
/// batch are allocated at run time, and the plan's comments say which node stopped it.
#[test]
fn a_shape_read_as_a_value_falls_back_to_run_time_allocation() {
    let g = rxvm_test_support::graphs::legacy_reshape(InputDim::Named("batch".into()));
    let c = compile_symbolic(&g, &[None], &[("batch".into(), 4)], &Options::default()).expect("compiles");
    assert!(
        c.plan_comment.contains(
            "allocated at run time: node `shape_s` (Shape): its value is a symbolic dim, which the program would fix at compile time"
        ),
        "{}",
        c.plan_comment
    );
    let m = Arc::new(c.module);
    for batch in [2i64, 3] {
        let x = HostTensor::random(DType::F32, &[batch, 3, 4], 5).unwrap();
        let (y, _) = run(&m, &x);
        let want: Vec<f64> = x.to_f64().iter().map(|v| v.max(0.0)).collect();
        assert_eq!(y, want);
    }
}

/// The symbolic program runs on the OpenCL devices too (offsets computed at entry, views
/// over sub-buffers), planned for each device's alignment, with the host's results.
#[test]
fn symbolic_programs_run_on_every_device() {
    let g = resnet18_style();
    let image = HostTensor::random(DType::F32, &[3, 3, 32, 32], 11).unwrap();
    let host = compile(&g, &[vec![3, 3, 32, 32]], &Options::default()).unwrap();
    let (want, _) = run(&Arc::new(host.module), &image);
    for (name, spec) in rxvm_test_support::devices::host_and(&["intel", "pocl"]) {
        let opts = Options { target: rxvm::session::device_caps(&spec), ..Options::default() };
        let c = compile_symbolic(&g, &[None], &[("batch".into(), 4)], &opts).expect("compiles");
        let mut vm = Vm::with_devices(Arc::new(c.module), vec![spec]).expect("a VM");
        let out = vm.invoke("main", &[HostValue::Tensor(image.clone())]).expect("runs");
        let [HostValue::Tensor(y)] = &out[..] else { panic!("{out:?}") };
        assert_eq!(y.shape, vec![3, 10], "{name}");
        for (a, b) in y.to_f64().iter().zip(&want) {
            assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{name}: {a} vs {b}");
        }
    }
}
