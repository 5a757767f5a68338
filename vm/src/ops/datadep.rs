//! Host kernels of the operators whose output shapes depend on their data (NonZero,
//! Unique, NonMaxSuppression; schemas in `crate::ir::operators::datadep`). Inference
//! computes their results to know the output sizes (the `plan_*` functions); the kernels
//! write those results. [`results`] is shared with the OpenCL kernels
//! (`super::datadep_cl`), which compute from the input values the VM read back for
//! inference.

use super::host::{self, HostFn};
use super::{Attrs, OutInfo, TensorInfo};
use crate::ir::host_tensor::HostTensor;
use crate::ir::operators::datadep::*;
use crate::ir::operators::Operator;

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[
    (Operator::NonZero, |i, a, o| kernel(Operator::NonZero, i, a, o)),
    (Operator::Unique, |i, a, o| kernel(Operator::Unique, i, a, o)),
    (Operator::NonMaxSuppression, |i, a, o| kernel(Operator::NonMaxSuppression, i, a, o)),
];

fn i64_bytes(v: impl IntoIterator<Item = i64>) -> Vec<u8> {
    v.into_iter().flat_map(i64::to_le_bytes).collect()
}

/// Every output of `op` on inputs whose values `infos` hold: its type and dense bytes.
pub(crate) fn results(
    op: Operator,
    infos: &[Option<TensorInfo>],
    attrs: &Attrs,
) -> Result<Vec<(OutInfo, Vec<u8>)>, String> {
    Ok(match op {
        Operator::NonZero => {
            let (shape, idx) = plan_non_zero(infos)?;
            vec![((crate::ir::types::DType::I64, shape), i64_bytes(idx))]
        }
        Operator::Unique => {
            let plan = plan_unique(infos, attrs)?;
            let x = infos
                .first()
                .and_then(Option::as_ref)
                .and_then(|t| t.value)
                .ok_or("Unique needs the value of its X input to infer the output shape")?;
            let y = unique_values(x, &plan);
            let mut outs = plan.outs.into_iter();
            let mut next = |bytes: Vec<u8>| outs.next().map(|t| (t, bytes)).ok_or("Unique: missing output type");
            vec![next(y)?, next(i64_bytes(plan.first))?, next(i64_bytes(plan.inverse))?, next(i64_bytes(plan.counts))?]
        }
        Operator::NonMaxSuppression => {
            let sel = plan_non_max_suppression(infos, attrs)?;
            let n = sel.len() as i64;
            vec![((crate::ir::types::DType::I64, vec![n, 3]), i64_bytes(sel.into_iter().flatten()))]
        }
        _ => return Err(format!("{} is not a data-dependent operator", op.name())),
    })
}

/// The host kernel: the inputs' data checked, the results computed (inference's plan, run
/// once) and copied into the outputs, which must be a prefix of them with their types.
fn kernel(op: Operator, ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    let res = results(op, &host::infos(ins)?, attrs)?;
    if outs.is_empty() || outs.len() > res.len() {
        return Err(format!("expected 1 to {} output tensors, found {}", res.len(), outs.len()));
    }
    for (i, (o, ((dtype, shape), bytes))) in outs.iter_mut().zip(res).enumerate() {
        if o.dtype != dtype || o.shape != shape || o.data.len() != bytes.len() {
            return Err(format!("output {} is {}{:?}, expected {dtype}{shape:?}", i + 1, o.dtype, o.shape));
        }
        o.data.copy_from_slice(&bytes);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::types::DType;
    use crate::ops::host::testing::{attrs, tensor};
    use crate::ops::AttrValue;

    /// Runs `op` as the interpreter does (inference on the values, then the host kernel).
    fn run(op: Operator, ins: &[Option<&HostTensor>], a: &Attrs) -> Result<Vec<HostTensor>, String> {
        let def = op.id().def();
        def.check_attrs(a)?;
        let infos: Vec<_> =
            ins.iter().map(|t| t.map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) })).collect();
        let mut outs: Vec<HostTensor> =
            (def.infer)(&infos, a)?.into_iter().map(|(d, s)| HostTensor::zeros(d, &s).unwrap()).collect();
        (op.id().host_kernel()?)(ins, a, &mut outs)?;
        Ok(outs)
    }

    fn int(v: i64) -> AttrValue {
        AttrValue::Int(v)
    }

    #[test]
    fn non_zero_lists_indices_row_major() {
        let x = tensor(DType::F32, &[2, 3], &[0.0, 1.5, -0.0, f64::NAN, 0.0, -2.0]);
        let y = run(Operator::NonZero, &[Some(&x)], &Attrs::default()).unwrap().remove(0);
        assert_eq!((y.dtype, y.shape.clone()), (DType::I64, vec![2, 3]));
        assert_eq!(y.to_i64(), vec![0, 1, 1, 1, 0, 2]);
        let b = tensor(DType::Bool, &[4], &[1.0, 0.0, 0.0, 1.0]);
        assert_eq!(run(Operator::NonZero, &[Some(&b)], &Attrs::default()).unwrap()[0].to_i64(), vec![0, 3]);
        // A scalar counts as 1-D; nothing nonzero gives [rank, 0].
        let s = tensor(DType::I32, &[], &[7.0]);
        let y = run(Operator::NonZero, &[Some(&s)], &Attrs::default()).unwrap().remove(0);
        assert_eq!((y.shape.clone(), y.to_i64()), (vec![1, 1], vec![0]));
        let z = tensor(DType::F16, &[2, 2], &[0.0; 4]);
        assert_eq!(run(Operator::NonZero, &[Some(&z)], &Attrs::default()).unwrap()[0].shape, vec![2, 0]);
    }

    #[test]
    fn unique_matches_numpy() {
        // np.unique([2, 1, 1, 3, 4, 3], return_index, return_inverse, return_counts).
        let x = tensor(DType::F32, &[6], &[2.0, 1.0, 1.0, 3.0, 4.0, 3.0]);
        let o = run(Operator::Unique, &[Some(&x)], &Attrs::default()).unwrap();
        assert_eq!(o[0].to_f64(), vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(o[1].to_i64(), vec![1, 0, 3, 4]);
        assert_eq!(o[2].to_i64(), vec![1, 0, 0, 2, 3, 2]);
        assert_eq!(o[3].to_i64(), vec![2, 1, 2, 1]);
        // Unsorted: by first occurrence.
        let o = run(Operator::Unique, &[Some(&x)], &attrs(&[("sorted", int(0))])).unwrap();
        assert_eq!(o[0].to_f64(), vec![2.0, 1.0, 3.0, 4.0]);
        assert_eq!(o[1].to_i64(), vec![0, 1, 3, 4]);
        assert_eq!(o[2].to_i64(), vec![0, 1, 1, 2, 3, 2]);
        assert_eq!(o[3].to_i64(), vec![1, 2, 2, 1]);
        // Rows of [[1, 0, 0], [1, 0, 0], [2, 3, 4]] and columns (axis -1) of the same.
        let m = tensor(DType::I64, &[3, 3], &[1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 2.0, 3.0, 4.0]);
        let o = run(Operator::Unique, &[Some(&m)], &attrs(&[("axis", int(0))])).unwrap();
        assert_eq!((o[0].shape.clone(), o[0].to_i64()), (vec![2, 3], vec![1, 0, 0, 2, 3, 4]));
        assert_eq!((o[1].to_i64(), o[2].to_i64(), o[3].to_i64()), (vec![0, 2], vec![0, 0, 1], vec![2, 1]));
        let o = run(Operator::Unique, &[Some(&m)], &attrs(&[("axis", int(-1))])).unwrap();
        // Columns (1, 1, 2), (0, 0, 3), (0, 0, 4): sorted (0, 0, 3), (0, 0, 4), (1, 1, 2).
        assert_eq!((o[0].shape.clone(), o[0].to_i64()), (vec![3, 3], vec![0, 0, 1, 0, 0, 1, 3, 4, 2]));
        assert_eq!(o[2].to_i64(), vec![2, 0, 1]);
        // NaN sorts last and NaNs are one value; -0 equals 0 (the first occurrence is kept).
        let f = tensor(DType::F64, &[5], &[f64::NAN, -0.0, 1.0, f64::NAN, 0.0]);
        let o = run(Operator::Unique, &[Some(&f)], &Attrs::default()).unwrap();
        let y = o[0].to_f64();
        assert_eq!((y.len(), y[0].is_sign_negative(), y[1]), (3, true, 1.0));
        assert!(y[2].is_nan());
        assert_eq!(o[3].to_i64(), vec![2, 1, 2]);
        // u64 orders unsigned.
        let u =
            HostTensor::new(DType::U64, vec![2], [u64::MAX, 1].iter().flat_map(|v| v.to_le_bytes()).collect()).unwrap();
        assert_eq!(run(Operator::Unique, &[Some(&u)], &Attrs::default()).unwrap()[1].to_i64(), vec![1, 0]);
        // Fewer outputs: a prefix.
        let def = Operator::Unique.id().def();
        let infos = [Some(TensorInfo { dtype: x.dtype, shape: &x.shape, value: Some(&x) })];
        assert_eq!((def.infer)(&infos, &Attrs::default()).unwrap().len(), 4);
        let mut one = [HostTensor::zeros(DType::F32, &[4]).unwrap()];
        (Operator::Unique.id().host_kernel().unwrap())(&[Some(&x)], &Attrs::default(), &mut one).unwrap();
        assert_eq!(one[0].to_f64(), vec![1.0, 2.0, 3.0, 4.0]);
    }

    fn nms(
        boxes: &[f64],
        scores: &[f64],
        nc: i64,
        max: Option<i64>,
        iou: Option<f64>,
        score: Option<f64>,
        center: i64,
    ) -> Vec<i64> {
        let n = boxes.len() as i64 / 4;
        let b = tensor(DType::F32, &[1, n, 4], boxes);
        let s = tensor(DType::F32, &[1, nc, n], scores);
        let m = max.map(|v| tensor(DType::I64, &[1], &[v as f64]));
        let i = iou.map(|v| tensor(DType::F32, &[1], &[v]));
        let t = score.map(|v| tensor(DType::F32, &[1], &[v]));
        let o = run(
            Operator::NonMaxSuppression,
            &[Some(&b), Some(&s), m.as_ref(), i.as_ref(), t.as_ref()],
            &attrs(&[("center_point_box", int(center))]),
        )
        .unwrap()
        .remove(0);
        assert_eq!(o.shape, vec![o.numel() as i64 / 3, 3]);
        o.to_i64()
    }

    #[test]
    fn non_max_suppression_selects_greedily() {
        // Three boxes: 0 and 1 overlap with IoU 0.6 (areas 1 and 0.6, intersection 0.6 / 1),
        // 2 is apart. Corner boxes [y1, x1, y2, x2].
        let boxes = [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.6, 1.0, 5.0, 5.0, 6.0, 6.0];
        let scores = [0.9, 0.95, 0.5];
        assert_eq!(nms(&boxes, &scores, 1, Some(10), Some(0.5), None, 0), vec![0, 0, 1, 0, 0, 2]);
        // IoU 0.6 does not exceed 0.6: kept.
        assert_eq!(nms(&boxes, &scores, 1, Some(10), Some(0.6), None, 0), vec![0, 0, 1, 0, 0, 0, 0, 0, 2]);
        // The limit, the score threshold (strictly above) and no limit at all (0 boxes).
        assert_eq!(nms(&boxes, &scores, 1, Some(1), Some(0.5), None, 0), vec![0, 0, 1]);
        assert_eq!(nms(&boxes, &scores, 1, Some(10), Some(0.9), Some(0.9), 0), vec![0, 0, 1]);
        assert_eq!(nms(&boxes, &scores, 1, None, Some(0.5), None, 0), Vec::<i64>::new());
        // Flipped corners are the same boxes; centre format [x, y, w, h].
        let flipped = [1.0, 1.0, 0.0, 0.0, 0.6, 1.0, 0.0, 0.0, 6.0, 6.0, 5.0, 5.0];
        assert_eq!(nms(&flipped, &scores, 1, Some(10), Some(0.5), None, 0), vec![0, 0, 1, 0, 0, 2]);
        let centre = [0.5, 0.5, 1.0, 1.0, 0.5, 0.3, 1.0, 0.6, 5.5, 5.5, 1.0, 1.0];
        assert_eq!(nms(&centre, &scores, 1, Some(10), Some(0.5), None, 1), vec![0, 0, 1, 0, 0, 2]);
        // Equal scores go to the lower index; a second class, where NaN comes last (box 0,
        // then suppressed by box 1).
        let s2 = [0.5, 0.5, 0.5, f64::NAN, 0.1, 0.2];
        assert_eq!(nms(&boxes, &s2, 2, Some(10), Some(0.5), None, 0), vec![0, 0, 0, 0, 0, 2, 0, 1, 2, 0, 1, 1]);
        assert_eq!(nms(&boxes, &s2, 2, Some(10), Some(0.7), None, 0)[9..], [0, 1, 2, 0, 1, 1, 0, 1, 0]);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let x = tensor(DType::F32, &[3], &[1.0, 0.0, 2.0]);
        let no_value = [Some(TensorInfo { dtype: x.dtype, shape: &x.shape, value: None })];
        for op in [Operator::NonZero, Operator::Unique] {
            let e = (op.id().def().infer)(&no_value, &Attrs::default()).unwrap_err();
            assert_eq!(e, format!("{} needs the value of its X input to infer the output shape", op.name()));
            assert!(crate::ir::schema::needs_input_value(&e));
        }
        let e = run(Operator::Unique, &[Some(&x)], &attrs(&[("axis", int(1))])).unwrap_err();
        assert!(e.contains("axis 1 is out of range"), "{e}");
        let e = run(Operator::Unique, &[Some(&x)], &attrs(&[("sorted", int(2))])).unwrap_err();
        assert!(e.contains("must be 0 or 1"), "{e}");
        let b = tensor(DType::F32, &[1, 2, 4], &[0.0; 8]);
        let s = tensor(DType::F32, &[1, 1, 3], &[0.0; 3]);
        let e = run(Operator::NonMaxSuppression, &[Some(&b), Some(&s)], &Attrs::default()).unwrap_err();
        assert!(e.contains("scores [1, 1, 3] must be [batches, classes, boxes]"), "{e}");
        let b3 = tensor(DType::F32, &[2, 4], &[0.0; 8]);
        let e = run(Operator::NonMaxSuppression, &[Some(&b3), Some(&s)], &Attrs::default()).unwrap_err();
        assert!(e.contains("boxes must be 3-D"), "{e}");
        let m = tensor(DType::I64, &[2], &[1.0, 2.0]);
        let s2 = tensor(DType::F32, &[1, 1, 2], &[0.0; 2]);
        let e = run(Operator::NonMaxSuppression, &[Some(&b), Some(&s2), Some(&m)], &Attrs::default()).unwrap_err();
        assert!(e.contains("max_output_boxes_per_class"), "{e}");
        let infos = [
            Some(TensorInfo { dtype: b.dtype, shape: &b.shape, value: None }),
            Some(TensorInfo { dtype: s2.dtype, shape: &s2.shape, value: Some(&s2) }),
        ];
        let e = (Operator::NonMaxSuppression.id().def().infer)(&infos, &Attrs::default()).unwrap_err();
        assert!(crate::ir::schema::needs_input_value(&e), "{e}");
    }
}
