//! A GPT-2-style decoder with a KV cache (`scripts/make-kv-decoder.py`): one program,
//! compiled with a symbolic number of new tokens (`seq <= 8`), runs the prefill of 8 tokens
//! and then 64 decode steps of one token, the caches it returns passed back in as VM
//! values and updated in place (`--donate`); its logits equal onnxruntime's at every step,
//! the peak is the plan's, and from the first decode step on nothing is allocated: every
//! storage comes from the pool.

use rxvm::compile::{compile_symbolic, Options};
use rxvm::vm::types::DType;
use rxvm::vm::value::Value;
use rxvm::vm::{HostTensor, Vm};
use std::sync::Arc;

const MAX: i64 = 128;
const VOCAB: usize = 64;

fn i64s(shape: &[i64], v: &[i64]) -> HostTensor {
    HostTensor::new(DType::I64, shape.to_vec(), v.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap()
}

/// Token `i` of `n` new ones (at cache position `start + i`) sees positions `0..=start+i`.
fn mask(start: i64, n: i64) -> HostTensor {
    let mut m = vec![-1e9f32; (n * MAX) as usize];
    for i in 0..n {
        for p in 0..=(start + i) {
            m[(i * MAX + p) as usize] = 0.0;
        }
    }
    HostTensor::from_f32(&[1, 1, n, MAX], &m).unwrap()
}

#[test]
fn decoding_with_a_kv_cache_matches_onnxruntime_and_allocates_nothing_when_steady() {
    for (name, spec) in rxvm_test_support::devices::host_and(&["intel", "pocl"]) {
        eprintln!("decoding on {name}");
        decode_on(spec);
    }
}

fn decode_on(spec: rxvm::vm::memory::DeviceSpec) {
    let dir = std::path::Path::new("tests/decoder");
    let g = rxvm::onnx::read_model(&dir.join("decoder.onnx")).expect("reads");
    let caches = ["cache_k0", "cache_v0", "cache_k1", "cache_v1"];
    let opts = Options {
        donate: caches.iter().map(|c| c.to_string()).collect(),
        target: rxvm::session::device_caps(&spec),
        ..Options::default()
    };
    let c = compile_symbolic(&g, &vec![None; g.inputs.len()], &[("seq".into(), 8)], &opts).expect("compiles");
    assert!(c.plan_comment.contains("; symbolic: seq <= 8;"), "{}", c.plan_comment);
    let text = rxvm::asm::disassemble(&c.module);
    for cache in caches {
        assert!(text.contains(&format!("-> (%{cache}) {{ mode = \"linear\" }}")), "{cache} is not updated in place");
    }
    let arena_at = |seq: i64| c.plan_at(&[("seq".into(), seq)]).expect("plan").1.arena_bytes();
    let (prefill_arena, step_arena) = (arena_at(8), arena_at(1));
    let tokens = rxvm::npy::read_npy(&dir.join("tokens.npy")).expect("tokens").to_i64();
    let want_prefill = rxvm::npy::read_npy(&dir.join("logits_prefill.npy")).expect("prefill").to_f64();
    let want_steps = rxvm::npy::read_npy(&dir.join("logits_steps.npy")).expect("steps").to_f64();
    let m = Arc::new(c.module);
    let main = m.func_by_name("main").expect("@main");
    let mut vm = Vm::with_devices(m.clone(), vec![spec]).expect("a VM");
    let zeros = HostTensor::zeros(DType::F32, &[1, 4, MAX, 8]).unwrap();
    let mut caches: Vec<Value> = (0..4).map(|_| vm.upload(&zeros).expect("upload")).collect();
    let step = |vm: &mut Vm, caches: &mut Vec<Value>, start: i64, n: i64| -> Vec<f64> {
        let ids = &tokens[start as usize..(start + n) as usize];
        let mut args = vec![
            vm.upload(&i64s(&[1, n], ids)).unwrap(),
            vm.upload(&i64s(&[1, n], &(start..start + n).collect::<Vec<_>>())).unwrap(),
            vm.upload(&mask(start, n)).unwrap(),
            vm.upload(&i64s(&[1], &[start])).unwrap(),
        ];
        args.append(caches);
        let mut out = vm.invoke_values(main, args).expect("runs");
        *caches = out.split_off(1);
        vm.download(&out[0]).expect("logits").to_f64()
    };
    let close = |got: &[f64], want: &[f64], what: &str| {
        assert_eq!(got.len(), want.len(), "{what}");
        let worst = got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(worst < 1e-4, "{what}: differs from onnxruntime by {worst}");
    };
    close(&step(&mut vm, &mut caches, 0, 8), &want_prefill, "prefill");
    assert!(want_prefill.iter().any(|v| v.abs() > 0.5), "logits of size O(1)");
    // The peak is the prefill's: the caches, its inputs and its planned arena.
    let cache_bytes = 4 * 4 * MAX as u64 * 8 * 4;
    let prefill_inputs = 8 * 8 + 8 * 8 + 8 * MAX as u64 * 4 + 8;
    assert_eq!(vm.stats().peak_bytes, cache_bytes + prefill_inputs + prefill_arena);
    let mut fresh = Vec::new();
    for t in 0..64 {
        let got = step(&mut vm, &mut caches, 8 + t, 1);
        close(&got, &want_steps[t as usize * VOCAB..(t as usize + 1) * VOCAB], &format!("step {t}"));
        fresh.push(vm.stats().fresh_allocations);
        // Between calls only the caches are live: updated in place, never copied.
        assert_eq!(vm.stats().live_bytes, cache_bytes, "step {t}");
    }
    // After the first decode step every storage comes from the pool.
    assert!(fresh.iter().all(|&f| f == fresh[0]), "steady decoding allocates: {fresh:?}");
    // A step plans for one new token, not the prefill's eight.
    assert!(step_arena < prefill_arena, "{step_arena} vs {prefill_arena}");
}
