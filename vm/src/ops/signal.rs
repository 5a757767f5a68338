//! Operators: the signal family (DFT, STFT, HannWindow, HammingWindow, BlackmanWindow,
//! MelWeightMatrix): the host kernels and their `HOST` table (the schemas are in
//! `crate::ir::operators::signal`).
//!
//! Transforms are direct sums in f64 (twiddles from `(k·t mod n) / n`, so long transforms
//! keep their precision), written back rounded to the output's dtype.

use super::host::HostFn;
use super::host::{infos, prepare, req};
use super::loss::{floats, ints, put};
use super::{Attrs, InferFn};
use crate::ir::host_tensor::HostTensor;
use crate::ir::operators::signal::*;
use crate::ir::operators::Operator;
use std::f64::consts::PI;

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[
    (Operator::DFT, dft),
    (Operator::STFT, stft),
    (Operator::HannWindow, hann),
    (Operator::HammingWindow, hamming),
    (Operator::BlackmanWindow, blackman),
    (Operator::MelWeightMatrix, mel),
];

/// The first element of an optional integer scalar input.
fn scalar(t: Option<&HostTensor>) -> Option<i64> {
    t.and_then(|t| ints(t).first().copied())
}

/// A DFT's plan on host inputs (the axis input's value known).
pub(crate) fn host_dft_plan(ins: &[Option<&HostTensor>], a: &Attrs) -> Result<DftPlan, String> {
    let x = req(ins, 0)?;
    let inf = infos(ins)?;
    let axis = dft_axis_of(inf.get(2).and_then(Option::as_ref), a)?.ok_or("DFT: the axis is unknown")?;
    dft_plan(&x.shape, Some(axis), scalar(ins.get(1).copied().flatten()), a)
}

fn dft(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, out, infer_dft)?;
    let p = host_dft_plan(ins, a)?;
    let x = floats(req(ins, 0)?);
    let y = dft_compute(&p, &x);
    put(&mut out[0], &y);
    Ok(())
}

/// The angle 2π·(k·t mod n)/n.
pub(crate) fn twiddle(k: usize, t: usize, n: usize) -> f64 {
    let m = ((k as u128 * t as u128) % n as u128) as f64;
    2.0 * PI * m / n as f64
}

/// The DFT of `x` (dense, as `p` describes it).
pub(crate) fn dft_compute(p: &DftPlan, x: &[f64]) -> Vec<f64> {
    let oc = if p.kind == DftKind::InverseReal { 1 } else { 2 };
    let mut y = vec![0.0; p.outer * p.out_len * p.inner * oc];
    let at = |o: usize, t: usize, i: usize| ((o * p.len + t) * p.inner + i) * p.comps;
    let val = |o: usize, t: usize, i: usize| -> (f64, f64) {
        let b = at(o, t, i);
        (x[b], if p.comps == 2 { x[b + 1] } else { 0.0 })
    };
    let n = p.n;
    for o in 0..p.outer {
        for k in 0..p.out_len {
            for i in 0..p.inner {
                let (re, im) = match p.kind {
                    DftKind::Forward | DftKind::Inverse => {
                        let sign = if p.kind == DftKind::Forward { -1.0 } else { 1.0 };
                        let (mut sr, mut si) = (0.0, 0.0);
                        for t in 0..p.len.min(n) {
                            let (xr, xi) = val(o, t, i);
                            let (s, c) = (sign * twiddle(k, t, n)).sin_cos();
                            sr += xr * c - xi * s;
                            si += xr * s + xi * c;
                        }
                        if p.kind == DftKind::Inverse {
                            (sr / n as f64, si / n as f64)
                        } else {
                            (sr, si)
                        }
                    }
                    DftKind::InverseReal => {
                        let m = p.len.min(n / 2 + 1);
                        let mut acc = if m > 0 { val(o, 0, i).0 } else { 0.0 };
                        for q in 1..m {
                            let (xr, xi) = val(o, q, i);
                            let (s, c) = twiddle(q, k, n).sin_cos();
                            if 2 * q == n {
                                acc += xr * c;
                            } else {
                                acc += 2.0 * (xr * c - xi * s);
                            }
                        }
                        (acc / n as f64, 0.0)
                    }
                };
                let b = ((o * p.out_len + k) * p.inner + i) * oc;
                y[b] = re;
                if oc == 2 {
                    y[b + 1] = im;
                }
            }
        }
    }
    y
}

/// An STFT's plan on host inputs.
pub(crate) fn host_stft_plan(ins: &[Option<&HostTensor>], a: &Attrs) -> Result<StftPlan, String> {
    let x = req(ins, 0)?;
    let step = scalar(ins.get(1).copied().flatten()).ok_or("STFT: input 2 (frame_step) is required")?;
    let w = ins.get(2).copied().flatten();
    stft_plan(&x.shape, step, w.map(|w| &w.shape[..]), scalar(ins.get(3).copied().flatten()), a)
}

fn stft(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, out, infer_stft)?;
    let p = host_stft_plan(ins, a)?;
    let x = floats(req(ins, 0)?);
    let w = ins.get(2).copied().flatten().map(floats);
    let mut y = vec![0.0; p.batch * p.frames * p.bins * 2];
    for b in 0..p.batch {
        for f in 0..p.frames {
            for k in 0..p.bins {
                let (mut sr, mut si) = (0.0, 0.0);
                for t in 0..p.frame {
                    let at = (b * p.length + f * p.step + t) * p.comps;
                    let wt = w.as_ref().map_or(1.0, |w| w[t]);
                    let (xr, xi) = (x[at] * wt, if p.comps == 2 { x[at + 1] * wt } else { 0.0 });
                    let (s, c) = (-twiddle(k, t, p.frame)).sin_cos();
                    sr += xr * c - xi * s;
                    si += xr * s + xi * c;
                }
                let o = ((b * p.frames + f) * p.bins + k) * 2;
                y[o] = sr;
                y[o + 1] = si;
            }
        }
    }
    put(&mut out[0], &y);
    Ok(())
}

fn window(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor], kind: WindowKind) -> Result<(), String> {
    let infer: InferFn = match kind {
        WindowKind::Hann => infer_hannwindow,
        WindowKind::Hamming => infer_hammingwindow,
        WindowKind::Blackman => infer_blackmanwindow,
    };
    prepare(ins, a, out, infer)?;
    let size = out[0].shape.first().copied().unwrap_or(0) as usize;
    let periodic = a.int("periodic", 1) != 0;
    let v: Vec<f64> = (0..size).map(|n| window_value(kind, n, size, periodic)).collect();
    put(&mut out[0], &v);
    Ok(())
}

fn hann(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    window(ins, a, out, WindowKind::Hann)
}
fn hamming(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    window(ins, a, out, WindowKind::Hamming)
}
fn blackman(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    window(ins, a, out, WindowKind::Blackman)
}

/// MelWeightMatrix's values from its host inputs.
pub(crate) fn mel_values(ins: &[Option<&HostTensor>], out_shape: &[i64]) -> Result<Vec<f64>, String> {
    let len = scalar(ins.get(1).copied().flatten()).ok_or("MelWeightMatrix: input 2 (dft_length) is required")?;
    let rate = scalar(ins.get(2).copied().flatten()).ok_or("MelWeightMatrix: input 3 (sample_rate) is required")?;
    let edge = |i: usize| -> Result<f64, String> {
        floats(req(ins, i)?).first().copied().ok_or_else(|| format!("MelWeightMatrix: input {} is empty", i + 1))
    };
    let bins = out_shape.get(1).copied().unwrap_or(0) as usize;
    mel_matrix(bins, len as usize, rate, edge(3)?, edge(4)?)
}

fn mel(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, out, infer_mel)?;
    let v = mel_values(ins, &out[0].shape)?;
    put(&mut out[0], &v);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ir::types::DType;

    pub(crate) use crate::ops::host::testing::tensor;

    fn run(op: &str, ins: &[Option<HostTensor>], a: &Attrs) -> Result<Vec<f64>, String> {
        let def = crate::ops::OPS.iter().find(|o| o.name == op).unwrap();
        let refs: Vec<Option<&HostTensor>> = ins.iter().map(Option::as_ref).collect();
        let inferred = (def.infer)(&infos(&refs)?, a)?;
        let mut out: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        (def.op.id().host_kernel().unwrap())(&refs, a, &mut out)?;
        Ok(floats(&out[0]))
    }

    fn attrs(list: &[(&str, i64)]) -> Attrs {
        Attrs(list.iter().map(|(k, v)| (k.to_string(), AttrValue::Int(*v))).collect())
    }

    fn close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-5, "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn dft_of_four_samples() {
        // x = [1, 2, 3, 4]: X = [10, -2+2i, -2, -2-2i].
        let x = tensor(DType::F32, &[4, 1], &[1.0, 2.0, 3.0, 4.0]);
        let a = attrs(&[("axis", 0)]);
        close(&run("DFT", &[Some(x.clone())], &a).unwrap(), &[10.0, 0.0, -2.0, 2.0, -2.0, 0.0, -2.0, -2.0]);
        let a1 = attrs(&[("axis", 0), ("onesided", 1)]);
        close(&run("DFT", &[Some(x.clone())], &a1).unwrap(), &[10.0, 0.0, -2.0, 2.0, -2.0, 0.0]);
        // The inverse brings the spectrum back; the inverse real transform of the one-sided half too.
        let spec = tensor(DType::F32, &[4, 2], &[10.0, 0.0, -2.0, 2.0, -2.0, 0.0, -2.0, -2.0]);
        let inv = attrs(&[("axis", 0), ("inverse", 1)]);
        close(&run("DFT", &[Some(spec)], &inv).unwrap(), &[1.0, 0.0, 2.0, 0.0, 3.0, 0.0, 4.0, 0.0]);
        let half = tensor(DType::F32, &[3, 2], &[10.0, 0.0, -2.0, 2.0, -2.0, 0.0]);
        let irfft = attrs(&[("axis", 0), ("inverse", 1), ("onesided", 1)]);
        close(&run("DFT", &[Some(half)], &irfft).unwrap(), &[1.0, 2.0, 3.0, 4.0]);
        // dft_length 2 truncates: [1+2, 1-2].
        let two = HostTensor::new(DType::I64, vec![], 2i64.to_le_bytes().to_vec()).unwrap();
        close(&run("DFT", &[Some(x), Some(two)], &a).unwrap(), &[3.0, 0.0, -1.0, 0.0]);
    }

    #[test]
    fn windows_and_stft() {
        let size = HostTensor::new(DType::I32, vec![], 4i32.to_le_bytes().to_vec()).unwrap();
        close(&run("HannWindow", &[Some(size.clone())], &Attrs::default()).unwrap(), &[0.0, 0.5, 1.0, 0.5]);
        let sym = attrs(&[("periodic", 0)]);
        close(&run("BlackmanWindow", &[Some(size.clone())], &sym).unwrap()[..1], &[0.0]);
        let h = run("HammingWindow", &[Some(size)], &Attrs::default()).unwrap();
        close(&h, &[4.0 / 46.0, 25.0 / 46.0, 1.0, 25.0 / 46.0]);
        // STFT of [1, 2, 3, 4] in frames of 2 every 2: [3, -1] and [7, -1] (real parts).
        let x = tensor(DType::F32, &[1, 4, 1], &[1.0, 2.0, 3.0, 4.0]);
        let step = HostTensor::new(DType::I64, vec![], 2i64.to_le_bytes().to_vec()).unwrap();
        let fl = step.clone();
        let y = run("STFT", &[Some(x), Some(step), None, Some(fl)], &Attrs::default()).unwrap();
        close(&y, &[3.0, 0.0, -1.0, 0.0, 7.0, 0.0, -1.0, 0.0]);
    }

    #[test]
    fn mel_matrix_rows_are_triangles() {
        let i32s = |v: i32| HostTensor::new(DType::I32, vec![], v.to_le_bytes().to_vec()).unwrap();
        let f = |v: f64| tensor(DType::F32, &[], &[v]);
        let ins = [Some(i32s(8)), Some(i32s(16)), Some(i32s(8192)), Some(f(0.0)), Some(f(4096.0))];
        let m = run("MelWeightMatrix", &ins, &Attrs::default()).unwrap();
        assert_eq!(m.len(), 9 * 8);
        assert!(m.iter().all(|&v| (0.0..=1.0).contains(&v)));
        // An upper edge above the spectrogram is an error, not a panic.
        let bad = [Some(i32s(8)), Some(i32s(16)), Some(i32s(100)), Some(f(0.0)), Some(f(4096.0))];
        assert!(run("MelWeightMatrix", &bad, &Attrs::default()).is_err());
    }

    #[test]
    fn bad_dft_inputs_are_errors() {
        let x = tensor(DType::F32, &[4, 3], &[0.0; 12]);
        assert!(run("DFT", &[Some(x)], &Attrs::default()).unwrap_err().contains("last dim"));
        let x = tensor(DType::F32, &[4, 1], &[0.0; 4]);
        assert!(run("DFT", &[Some(x)], &attrs(&[("axis", 1)])).unwrap_err().contains("axis"));
    }
}
