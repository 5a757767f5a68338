//! Operator schemas of the signal family: DFT, STFT, HannWindow, HammingWindow,
//! BlackmanWindow and MelWeightMatrix (the kernels are in `crate::ops::signal` and
//! `crate::ops::signal_cl`).
//!
//! Complex tensors are real tensors with a last dim of 2 (real, imaginary); a last dim of 1
//! is a real signal. The inputs that decide an output's shape (DFT's `dft_length` and, when
//! `onesided` is set, its `axis`; STFT's `frame_step` and `frame_length`; a window's size;
//! MelWeightMatrix's `num_mel_bins` and `dft_length`) must be constants.

use super::elementwise::{check_dtype, check_scalar, input, optional};
use super::tensor::{check_shape, value_ints};
use crate::ir::attrs::*;
use crate::ir::schema::*;
use crate::ir::types::DType;

/// The float dtypes of this family.
pub(crate) const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::F64];
const INTS: &[DType] = &[DType::I32, DType::I64];

const WINDOW_ATTRS: &[AttrSpec] = &[attr!("output_datatype", Int), attr!("periodic", Int)];

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(DFT, in 1..=3, out 1..=1,
        attrs &[attr!("axis", Int), attr!("inverse", Int), attr!("onesided", Int), attr!("onnx_opset", Int)],
        validate validate_dft, infer infer_dft,
        "discrete Fourier transform of a real [..., 1] or complex [..., 2] input along `axis` (an attribute before \
        opset 20, default 1; input 3 from opset 20, default -2) → complex [..., 2]; dft_length (input 2, a constant) \
        pads or truncates; onesided keeps the n/2 + 1 first bins; inverse divides by n; inverse with onesided is \
        the inverse real transform → real [..., 1]; f16, f32, f64"),
    op!(STFT, in 2..=4, out 1..=1, attrs &[attr!("onesided", Int)], validate validate_stft, infer infer_stft,
        "short-time Fourier transform of signal [batch, length, 1 or 2] by frames of frame_length (input 4, else the \
        window's length) every frame_step (input 2) samples, weighted by window (input 3) → [batch, frames, bins, 2] \
        (onesided, default 1: frame_length/2 + 1 bins); frame_step and frame_length must be constants; f16, f32, f64"),
    op!(HannWindow, in 1..=1, out 1..=1, attrs WINDOW_ATTRS, validate validate_window, infer infer_hannwindow,
        "sin²(πn/N) for n < size (a constant scalar), N = size (periodic, default) or size - 1; output_datatype \
        (default f32) any numeric dtype"),
    op!(HammingWindow, in 1..=1, out 1..=1, attrs WINDOW_ATTRS, validate validate_window, infer infer_hammingwindow,
        "25/46 - 21/46·cos(2πn/N) for n < size (a constant scalar), N = size (periodic, default) or size - 1; \
        output_datatype (default f32) any numeric dtype"),
    op!(BlackmanWindow, in 1..=1, out 1..=1, attrs WINDOW_ATTRS, validate validate_window, infer infer_blackmanwindow,
        "0.42 - 0.5·cos(2πn/N) + 0.08·cos(4πn/N) for n < size (a constant scalar), N = size (periodic, default) or \
        size - 1; output_datatype (default f32) any numeric dtype"),
    op!(MelWeightMatrix, in 5..=5, out 1..=1, attrs &[attr!("output_datatype", Int)],
        validate validate_mel, infer infer_mel,
        "the [dft_length/2 + 1, num_mel_bins] matrix of triangular mel filters from num_mel_bins, dft_length (constant \
        scalars), sample_rate and the lower / upper edge frequencies in hertz (scalars, f16, f32 or f64); \
        output_datatype (default f32)"),
];

fn flag(a: &Attrs, name: &str, default: i64, op: &str) -> Result<bool, String> {
    match a.int(name, default) {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(format!("attribute `{name}` of @onnx.{op} must be 0 or 1, found {v}")),
    }
}

/// The value of a constant integer scalar input, or the dynamic-shape error.
pub(crate) fn const_scalar(t: &TensorInfo, i: usize, name: &str, op: &str) -> Result<i64, String> {
    check_dtype(t, i, name, INTS)?;
    check_scalar(t, i, name)?;
    let v = value_ints(t, op, name)?;
    v.first().copied().ok_or_else(|| format!("{op}: input {} ({name}) holds no element", i + 1))
}

// ---------------------------------------------------------------------------------------
// DFT.

fn validate_dft(a: &Attrs) -> Result<(), String> {
    flag(a, "inverse", 0, "DFT")?;
    flag(a, "onesided", 0, "DFT")?;
    Ok(())
}

/// What a DFT computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DftKind {
    Forward,
    Inverse,
    /// Inverse of a one-sided spectrum: a real signal.
    InverseReal,
}

/// A DFT's plan: the input viewed as `[outer, len, inner, comps]` along the axis, the
/// transform length `n` and the output's length along the axis.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct DftPlan {
    pub(crate) kind: DftKind,
    pub(crate) outer: usize,
    pub(crate) len: usize,
    pub(crate) inner: usize,
    /// 1 (real) or 2 (complex) input components.
    pub(crate) comps: usize,
    pub(crate) n: usize,
    pub(crate) out_len: usize,
    pub(crate) out: Vec<i64>,
}

/// Normalizes a DFT axis of a rank-`r` input: [-r, -2] ∪ [0, r - 2].
pub(crate) fn dft_axis(axis: i64, r: usize) -> Result<usize, String> {
    let ri = r as i64;
    let k = if axis < 0 { axis + ri } else { axis };
    if k < 0 || k > ri - 2 {
        return Err(format!("DFT: axis {axis} is out of range for rank {r} (it must name a signal dim, not the last)"));
    }
    Ok(k as usize)
}

/// The plan of a DFT on `x` (dtype, shape) along `axis` (`None` when it is only known at run
/// time; the plan then holds a placeholder axis and is only good for the output shape).
pub(crate) fn dft_plan(x: &[i64], axis: Option<i64>, dft_length: Option<i64>, a: &Attrs) -> Result<DftPlan, String> {
    const OP: &str = "DFT";
    let inverse = flag(a, "inverse", 0, OP)?;
    let onesided = flag(a, "onesided", 0, OP)?;
    let r = x.len();
    if r < 2 {
        return Err(format!("{OP}: the input must be [..., signal, 1 or 2] (rank 2 or more), found shape {x:?}"));
    }
    check_shape(x, OP)?;
    let comps = x[r - 1];
    if comps != 1 && comps != 2 {
        return Err(format!("{OP}: the last dim must be 1 (real) or 2 (complex), found shape {x:?}"));
    }
    let k = match axis {
        Some(v) => dft_axis(v, r)?,
        None => 0,
    };
    let len = x[k] as usize;
    let kind = match (inverse, onesided) {
        (false, _) => DftKind::Forward,
        (true, false) => DftKind::Inverse,
        (true, true) => DftKind::InverseReal,
    };
    let n = match dft_length {
        Some(v) if v < 1 => return Err(format!("{OP}: dft_length must be positive, found {v}")),
        Some(v) => v as usize,
        None if kind == DftKind::InverseReal => {
            if len < 2 {
                return Err(format!("{OP}: an inverse one-sided transform of {len} bins needs dft_length"));
            }
            2 * (len - 1)
        }
        None => len,
    };
    let out_len = if onesided && !inverse { n / 2 + 1 } else { n };
    let mut out = x.to_vec();
    out[k] = out_len as i64;
    out[r - 1] = if kind == DftKind::InverseReal { 1 } else { 2 };
    check_shape(&out, OP)?;
    let outer = x[..k].iter().product::<i64>() as usize;
    let inner = x[k + 1..r - 1].iter().product::<i64>() as usize;
    Ok(DftPlan { kind, outer, len, inner, comps: comps as usize, n, out_len, out })
}

/// DFT's axis: the attribute, input 3, or the opset's default (`None`: input 3 is not a
/// constant).
pub(crate) fn dft_axis_of(axis_in: Option<&TensorInfo>, a: &Attrs) -> Result<Option<i64>, String> {
    match (a.get("axis"), axis_in) {
        (Some(_), Some(_)) => Err("DFT: the axis is given both as the `axis` attribute and as input 3".into()),
        (Some(_), None) => Ok(Some(a.int("axis", 1))),
        (None, Some(t)) => {
            check_dtype(t, 2, "axis", INTS)?;
            check_scalar(t, 2, "axis")?;
            match t.value {
                Some(_) => Ok(Some(const_scalar(t, 2, "axis", "DFT")?)),
                None => Ok(None),
            }
        }
        (None, None) => Ok(Some(if a.int("onnx_opset", 20) >= 20 { -2 } else { 1 })),
    }
}

pub(crate) fn infer_dft(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "input")?;
    check_dtype(x, 0, "input", FLOATS)?;
    let len = match optional(ins, 1) {
        Some(t) => Some(const_scalar(t, 1, "dft_length", "DFT")?),
        None => None,
    };
    let axis = dft_axis_of(optional(ins, 2), a)?;
    if axis.is_none() && a.int("onesided", 0) != 0 {
        return Err(
            "DFT needs the value of its axis input to infer the output shape (onesided shortens that axis)".into()
        );
    }
    if axis.is_none() && len.is_some() {
        return Err(
            "DFT needs the value of its axis input to infer the output shape (dft_length resizes that axis)".into()
        );
    }
    Ok(vec![(x.dtype, dft_plan(x.shape, axis, len, a)?.out)])
}

// ---------------------------------------------------------------------------------------
// STFT.

fn validate_stft(a: &Attrs) -> Result<(), String> {
    flag(a, "onesided", 1, "STFT").map(|_| ())
}

/// An STFT's sizes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StftPlan {
    pub(crate) batch: usize,
    pub(crate) length: usize,
    pub(crate) comps: usize,
    pub(crate) step: usize,
    pub(crate) frame: usize,
    pub(crate) frames: usize,
    pub(crate) bins: usize,
    pub(crate) out: Vec<i64>,
}

/// The plan of an STFT on signal shape `x`, given its step, the window's length (if any)
/// and frame_length (if given).
pub(crate) fn stft_plan(
    x: &[i64],
    step: i64,
    window: Option<&[i64]>,
    frame_length: Option<i64>,
    a: &Attrs,
) -> Result<StftPlan, String> {
    const OP: &str = "STFT";
    let onesided = flag(a, "onesided", 1, OP)?;
    if x.len() != 3 || (x[2] != 1 && x[2] != 2) {
        return Err(format!("{OP}: the signal must be [batch, length, 1 or 2], found shape {x:?}"));
    }
    check_shape(x, OP)?;
    if step < 1 {
        return Err(format!("{OP}: frame_step must be positive, found {step}"));
    }
    if let Some(w) = window {
        if w.len() != 1 {
            return Err(format!("{OP}: the window must be 1-D, found shape {w:?}"));
        }
    }
    let frame = match (frame_length, window) {
        (Some(f), Some(w)) if f != w[0] => {
            return Err(format!("{OP}: frame_length {f} differs from the window's length {}", w[0]))
        }
        (Some(f), _) => f,
        (None, Some(w)) => w[0],
        (None, None) => x[1],
    };
    if frame < 1 || frame > x[1] {
        return Err(format!("{OP}: frame_length must be in [1, {}] (the signal's length), found {frame}", x[1]));
    }
    let frames = 1 + (x[1] - frame) / step;
    let bins = if onesided { frame / 2 + 1 } else { frame };
    let out = vec![x[0], frames, bins, 2];
    check_shape(&out, OP)?;
    Ok(StftPlan {
        batch: x[0] as usize,
        length: x[1] as usize,
        comps: x[2] as usize,
        step: step as usize,
        frame: frame as usize,
        frames: frames as usize,
        bins: bins as usize,
        out,
    })
}

pub(crate) fn infer_stft(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "signal")?;
    check_dtype(x, 0, "signal", FLOATS)?;
    let step = const_scalar(input(ins, 1, "frame_step")?, 1, "frame_step", "STFT")?;
    let w = optional(ins, 2);
    if let Some(w) = w {
        if w.dtype != x.dtype {
            return Err(format!("input 3 (window) must have the signal's dtype {}, found {}", x.dtype, w.dtype));
        }
    }
    let fl = match optional(ins, 3) {
        Some(t) => Some(const_scalar(t, 3, "frame_length", "STFT")?),
        None => None,
    };
    let plan = stft_plan(x.shape, step, w.map(|w| w.shape), fl, a)?;
    Ok(vec![(x.dtype, plan.out)])
}

// ---------------------------------------------------------------------------------------
// Windows and MelWeightMatrix.

/// The output dtype of `output_datatype` (default f32): any numeric dtype.
pub(crate) fn output_dtype(a: &Attrs, op: &str) -> Result<DType, String> {
    let code = a.int("output_datatype", 1);
    match DType::from_onnx(code) {
        Some(d) if d != DType::Bool => Ok(d),
        _ => Err(format!(
            "attribute `output_datatype` of @onnx.{op} must be an ONNX numeric data type this VM has (1 f32, 10 f16, \
             11 f64, 2-7 and 12-13 integers), found {code}"
        )),
    }
}

fn validate_window(a: &Attrs) -> Result<(), String> {
    output_dtype(a, "a window operator")?;
    flag(a, "periodic", 1, "a window operator").map(|_| ())
}

fn infer_window(ins: &[Option<TensorInfo>], a: &Attrs, op: &str) -> Result<Vec<OutInfo>, String> {
    validate_window(a)?;
    let size = const_scalar(input(ins, 0, "size")?, 0, "size", op)?;
    if size < 0 {
        return Err(format!("{op}: the window size must not be negative, found {size}"));
    }
    check_shape(&[size], op)?;
    Ok(vec![(output_dtype(a, op)?, vec![size])])
}

pub(crate) fn infer_hannwindow(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    infer_window(ins, a, "HannWindow")
}
pub(crate) fn infer_hammingwindow(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    infer_window(ins, a, "HammingWindow")
}
pub(crate) fn infer_blackmanwindow(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    infer_window(ins, a, "BlackmanWindow")
}

/// The window's value at `n` of `size` (f64).
pub(crate) fn window_value(kind: WindowKind, n: usize, size: usize, periodic: bool) -> f64 {
    let den = if periodic { size } else { size.saturating_sub(1) };
    if den == 0 {
        return 1.0;
    }
    let x = std::f64::consts::PI * 2.0 * n as f64 / den as f64;
    match kind {
        WindowKind::Hann => (x / 2.0).sin().powi(2),
        WindowKind::Hamming => 25.0 / 46.0 - 21.0 / 46.0 * x.cos(),
        WindowKind::Blackman => 0.42 - 0.5 * x.cos() + 0.08 * (2.0 * x).cos(),
    }
}

/// Which window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WindowKind {
    Hann,
    Hamming,
    Blackman,
}

fn validate_mel(a: &Attrs) -> Result<(), String> {
    output_dtype(a, "MelWeightMatrix").map(|_| ())
}

pub(crate) fn infer_mel(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    const OP: &str = "MelWeightMatrix";
    let bins = const_scalar(input(ins, 0, "num_mel_bins")?, 0, "num_mel_bins", OP)?;
    let len = const_scalar(input(ins, 1, "dft_length")?, 1, "dft_length", OP)?;
    let rate = input(ins, 2, "sample_rate")?;
    check_dtype(rate, 2, "sample_rate", INTS)?;
    check_scalar(rate, 2, "sample_rate")?;
    for (i, name) in [(3, "lower_edge_hertz"), (4, "upper_edge_hertz")] {
        let t = input(ins, i, name)?;
        check_dtype(t, i, name, FLOATS)?;
        check_scalar(t, i, name)?;
    }
    if bins < 1 || len < 1 {
        return Err(format!("{OP}: num_mel_bins and dft_length must be positive, found {bins} and {len}"));
    }
    let out = vec![len / 2 + 1, bins];
    check_shape(&out, OP)?;
    Ok(vec![(output_dtype(a, OP)?, out)])
}

/// The mel filter matrix `[dft_length/2 + 1, bins]` as ONNX's reference computes it.
pub(crate) fn mel_matrix(bins: usize, len: usize, rate: i64, low: f64, high: f64) -> Result<Vec<f64>, String> {
    const OP: &str = "MelWeightMatrix";
    if rate < 1 {
        return Err(format!("{OP}: sample_rate must be positive, found {rate}"));
    }
    if !(low.is_finite() && high.is_finite() && low >= 0.0 && low <= high) {
        return Err(format!("{OP}: the edges must satisfy 0 <= lower <= upper, found {low} and {high}"));
    }
    let spec = len / 2 + 1;
    let mel = |hz: f64| 2595.0 * (hz / 700.0).ln_1p() / 10f64.ln();
    let (lo, hi) = (mel(low), mel(high));
    let step = (hi - lo) / (bins + 2) as f64;
    let mut f = Vec::with_capacity(bins + 2);
    for i in 0..bins + 2 {
        let m = i as f64 * step + lo;
        let hz = 700.0 * (m / 2595.0 * 10f64.ln()).exp_m1();
        let b = ((len as f64 + 1.0) * hz / rate as f64).floor();
        if !(0.0..spec as f64).contains(&b) {
            return Err(format!(
                "{OP}: the edge {hz} Hz falls in bin {b}, outside the {spec} spectrogram bins (is upper_edge_hertz above \
                 half the sample rate?)"
            ));
        }
        f.push(b as usize);
    }
    let mut out = vec![0.0; spec * bins];
    for i in 0..bins {
        let (l, c, h) = (f[i], f[i + 1], f[i + 2]);
        if c == l {
            out[c * bins + i] = 1.0;
        } else {
            for j in l..=c {
                out[j * bins + i] = (j - l) as f64 / (c - l) as f64;
            }
        }
        if h > c {
            for j in c..h {
                out[j * bins + i] = (h - j) as f64 / (h - c) as f64;
            }
        }
    }
    Ok(out)
}
