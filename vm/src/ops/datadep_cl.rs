//! OpenCL kernels of the operators whose output shapes depend on their data (NonZero,
//! Unique, NonMaxSuppression). Their inference already reads the whole input to the host
//! and computes the result to learn its size (an allocating call reads these operators'
//! inputs whatever their size, `crate::ir::operators::datadep::reads_whole_inputs`), so
//! the kernel writes that host result into the device outputs instead of recomputing it:
//! [`super::datadep::results`] on the values read for inference. Without those values (a
//! call whose outputs the program allocated, with large inputs) the kernel says so.

use super::cl::{ClCtx, ClFn, ClTensor, Res};
use super::datadep::results;
use super::{Attrs, Operator, TensorInfo};
use crate::ir::schema::needs_input_value;
use crate::opencl::device::{ClView, ViewKind};

macro_rules! table {
    ($($op:ident)*) => {
        /// This family's OpenCL buffer kernels, by operator.
        pub static CL: &[(Operator, ClFn)] = &[$(
            (Operator::$op, |ctx: &ClCtx, _: &[Option<ClTensor>], infos: &[Option<TensorInfo>], attrs: &Attrs,
                outs: &[ClTensor]| -> Res { write_results(Operator::$op, ctx, infos, attrs, outs) }),
        )*];
    };
}

table!(NonZero Unique NonMaxSuppression);

fn write_results(op: Operator, ctx: &ClCtx, infos: &[Option<TensorInfo>], attrs: &Attrs, outs: &[ClTensor]) -> Res {
    let res = results(op, infos, attrs).map_err(|e| {
        if needs_input_value(&e) {
            format!(
                "{e}; on OpenCL it runs on the input values read back for inference, which a call that allocates \
                 its outputs (`%y = call @onnx.{}(...)`) reads",
                op.name()
            )
        } else {
            e
        }
    })?;
    if outs.is_empty() || outs.len() > res.len() {
        return Err(format!("expected 1 to {} output tensors, found {}", res.len(), outs.len()));
    }
    for (i, (y, ((dtype, shape), bytes))) in outs.iter().zip(res).enumerate() {
        if y.dtype != dtype || y.shape != shape {
            return Err(format!("output {} is {}{:?}, expected {dtype}{shape:?}", i + 1, y.dtype, y.shape));
        }
        if !bytes.is_empty() {
            let view = ClView { mem: y.mem, offset: y.offset * dtype.size() as u64, kind: ViewKind::Buffer };
            ctx.dev.write(&view, None, &bytes).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// The device kernels against the host kernels on random data, on the OpenCL device named
/// by `RXVM_TEST_CL_DEVICE` (skipped without an OpenCL runtime).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::host_tensor::HostTensor;
    use crate::ir::types::DType;
    use crate::ops::cl::testing::{device, run_kernel};
    use crate::ops::host::testing::{attrs, tensor};
    use crate::ops::AttrValue;

    fn check(dev: &crate::opencl::device::ClDevice, op: Operator, ins: &[Option<HostTensor>], a: &Attrs) {
        let infos: Vec<_> = ins
            .iter()
            .map(|t| t.as_ref().map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) }))
            .collect();
        let mut want: Vec<HostTensor> = (op.id().def().infer)(&infos, a)
            .unwrap()
            .into_iter()
            .map(|(d, s)| HostTensor::zeros(d, &s).unwrap())
            .collect();
        let refs: Vec<Option<&HostTensor>> = ins.iter().map(Option::as_ref).collect();
        (op.id().host_kernel().unwrap())(&refs, a, &mut want).unwrap();
        let got = run_kernel(dev, op.name(), ins, &infos, a, &want);
        for (i, (w, g)) in want.iter().zip(got).enumerate() {
            assert_eq!(w.data, g, "{} {a}: output {}", op.name(), i + 1);
        }
        // Without the values (a call whose outputs the program allocated), a clear error.
        let blind: Vec<_> = ins
            .iter()
            .map(|t| t.as_ref().map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: None }))
            .collect();
        let outs: Vec<ClTensor> = Vec::new();
        let f = crate::ops::cl_fn(op.name()).unwrap();
        let e = f(&ClCtx { dev }, &[], &blind, a, &outs).unwrap_err();
        assert!(e.contains("needs the value of its") && e.contains("allocates its outputs"), "{e}");
    }

    #[test]
    fn kernels_match_the_host() {
        let Some(dev) = device() else { return };
        let none = Attrs::default();
        let int = AttrValue::Int;
        // Random small integers as floats: repeats and zeros.
        let r = HostTensor::random(DType::F32, &[6, 50], 3).unwrap().to_f64();
        let vals: Vec<f64> = r.iter().map(|v| ((v * 4.0).floor()).clamp(-2.0, 2.0)).collect();
        for d in [DType::F32, DType::I64, DType::F16, DType::Bool] {
            let x = tensor(d, &[6, 50], &vals);
            check(&dev, Operator::NonZero, &[Some(x.clone())], &none);
            check(&dev, Operator::Unique, &[Some(x.clone())], &none);
            check(&dev, Operator::Unique, &[Some(x.clone())], &attrs(&[("sorted", int(0))]));
            check(&dev, Operator::Unique, &[Some(x.clone())], &attrs(&[("axis", int(1))]));
        }
        let boxes = HostTensor::random(DType::F32, &[2, 30, 4], 5).unwrap();
        let scores = HostTensor::random(DType::F32, &[2, 3, 30], 6).unwrap();
        let max = tensor(DType::I64, &[1], &[7.0]);
        let iou = tensor(DType::F32, &[1], &[0.3]);
        let thr = tensor(DType::F32, &[1], &[0.2]);
        for center in [0, 1] {
            check(
                &dev,
                Operator::NonMaxSuppression,
                &[Some(boxes.clone()), Some(scores.clone()), Some(max.clone()), Some(iou.clone()), Some(thr.clone())],
                &attrs(&[("center_point_box", int(center))]),
            );
        }
    }
}
