//! Symbolic dimensions in function signatures (`f32[%n, 4] where %n <= 8`): one program
//! runs every size; the entry binds each symbol and refuses a wrong rank, a broken
//! relation, a size over the bound, and a result whose size is not the one its type says.

use rxvm::asm::assemble_file;
use rxvm::vm::{HostTensor, HostValue, Vm};
use std::path::Path;
use std::sync::Arc;

fn vm() -> Vm {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/symbols.rxa");
    let module = assemble_file(&path).expect("assembles");
    Vm::host(Arc::new(module)).expect("a VM")
}

fn rows(n: usize, seed: f32) -> HostValue {
    let v: Vec<f32> = (0..n * 4).map(|i| seed + i as f32 * 0.25).collect();
    HostValue::Tensor(HostTensor::from_f32(&[n as i64, 4], &v).expect("a tensor"))
}

fn f32s(v: &HostValue) -> (Vec<i64>, Vec<f32>) {
    let HostValue::Tensor(t) = v else { panic!("a tensor, found {v:?}") };
    let vals = t.data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    (t.shape.to_vec(), vals)
}

#[test]
fn one_program_runs_every_size_up_to_the_bound() {
    let mut vm = vm();
    for n in [1, 2, 3, 8] {
        let out = vm.invoke("main", &[rows(n, 1.0), rows(n, -0.5)]).expect("runs");
        let (shape, got) = f32s(&out[0]);
        assert_eq!(shape, vec![n as i64, 4]);
        let want: Vec<f32> = (0..n * 4).map(|i| 0.5 + i as f32 * 0.5).collect();
        assert_eq!(got, want, "n = {n}");
        assert!(matches!(out[1], HostValue::Int(v) if v == n as i64), "%n is returned as bound: {:?}", out[1]);
    }
}

#[test]
fn bad_shapes_at_entry_give_one_clear_error_each() {
    let mut vm = vm();
    let scalar = HostValue::Tensor(HostTensor::from_f32(&[4], &[0.0; 4]).expect("a tensor"));
    let cases: [(&str, Vec<HostValue>); 5] = [
        ("wrong rank", vec![scalar, rows(2, 0.0)]),
        ("broken relation", vec![rows(3, 0.0), rows(2, 0.0)]),
        ("over the bound", vec![rows(9, 0.0), rows(9, 0.0)]),
        ("relation checked at an inner call", vec![rows(3, 0.0), rows(2, 0.0)]),
        ("result of another size", vec![rows(2, 0.0)]),
    ];
    let mut report = String::new();
    for (what, args) in cases {
        let func = match what {
            "relation checked at an inner call" => "unchecked",
            "result of another size" => "wrong_result",
            _ => "main",
        };
        let e = vm.invoke(func, &args).expect_err(what);
        report.push_str(&format!("{what}: {}\n", e.message));
    }
    insta::assert_snapshot!(report);
}
