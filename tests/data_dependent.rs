//! Operators whose output shapes depend on their data (NonZero, Unique,
//! NonMaxSuppression) in allocating calls, on the host and on each OpenCL platform present,
//! with inputs larger than the small tensors other operators' inference reads back: these
//! operators' inputs are read whatever their size.

use rxvm::asm::assemble;
use rxvm::vm::{HostTensor, HostValue, Vm};
use rxvm_test_support::devices::host_and;
use std::sync::Arc;

const SRC: &str = r#"
module data_dependent

const @max: i64[1] = [4]
const @iou: f32[1] = [0.5]

func @main(%x: f32[300], %boxes: f32[1, 40, 4], %scores: f32[1, 2, 40]) -> (tensor, tensor, tensor, tensor, tensor, tensor) {
  %nz = call @onnx.NonZero(%x)
  %y, %first, %inverse, %counts = call @onnx.Unique(%x) { sorted = 0 }
  %sel = call @onnx.NonMaxSuppression(%boxes, %scores, @max, @iou) { center_point_box = 1 }
  ret %nz, %y, %first, %inverse, %counts, %sel
}
"#;

fn ints(v: &HostValue) -> Vec<i64> {
    match v {
        HostValue::Tensor(t) => t.to_i64(),
        other => panic!("expected a tensor, found {other:?}"),
    }
}

#[test]
fn data_dependent_shapes_on_every_device() {
    let m = Arc::new(assemble(SRC, "data_dependent.rxa").unwrap_or_else(|e| panic!("{e:?}")));
    // x: zero except every 7th element, which is (i / 7) % 5 (so 0 among them too).
    let xs: Vec<f32> = (0..300).map(|i| if i % 7 == 3 { ((i / 7) % 5) as f32 } else { 0.0 }).collect();
    let nz: Vec<i64> = (0..300).filter(|&i| xs[i as usize] != 0.0).collect();
    // Boxes (centre x, y, w, h): box i at x = 3 * (i / 2) with width 2, so pairs coincide.
    let boxes: Vec<f32> = (0..40).flat_map(|i| [3.0 * (i / 2) as f32, 0.0, 2.0, 2.0]).collect();
    // Class 0 scores rise with i, class 1 falls.
    let scores: Vec<f32> = (0..80).map(|k| if k < 40 { k as f32 } else { (80 - k) as f32 }).collect();
    let inputs = [
        HostValue::Tensor(HostTensor::from_f32(&[300], &xs).unwrap()),
        HostValue::Tensor(HostTensor::from_f32(&[1, 40, 4], &boxes).unwrap()),
        HostValue::Tensor(HostTensor::from_f32(&[1, 2, 40], &scores).unwrap()),
    ];
    for (name, spec) in host_and(&["pocl", "intel"]) {
        let mut vm = Vm::with_devices(m.clone(), vec![spec]).unwrap();
        let r = vm.invoke("main", &inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(ints(&r[0]), nz, "{name}: NonZero");
        let HostValue::Tensor(y) = &r[1] else { panic!("{name}: Y") };
        // First occurrences: 0 at 0, then 1, 2, 3, 4 at 10, 17, 24, 31.
        assert_eq!(y.to_f64(), vec![0.0, 1.0, 2.0, 3.0, 4.0], "{name}: Unique Y");
        assert_eq!(ints(&r[2]), vec![0, 10, 17, 24, 31], "{name}: Unique indices");
        let inverse = ints(&r[3]);
        assert_eq!(inverse.len(), 300);
        assert!(inverse.iter().zip(&xs).all(|(&g, &v)| g == v as i64), "{name}: Unique inverse");
        let counts = ints(&r[4]);
        assert_eq!(counts.iter().sum::<i64>(), 300, "{name}: Unique counts");
        assert_eq!(counts[1..], [9, 9, 8, 8], "{name}: Unique counts");
        // Class 0: boxes 39, 37, 35, 33 (38 coincides with 39, ...); class 1: 0, 2, 4, 6.
        let sel = ints(&r[5]);
        assert_eq!(sel, vec![0, 0, 39, 0, 0, 37, 0, 0, 35, 0, 0, 33, 0, 1, 0, 0, 1, 2, 0, 1, 4, 0, 1, 6], "{name}");
    }
}
