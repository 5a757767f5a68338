//! Operator schemas of the sampling family: GridSample, AffineGrid, Resize and Upsample (the
//! kernels are in `crate::ops::resize` and `crate::ops::resize_cl`).

use super::elementwise::{check_dtype, input};
use super::loss::FLOATS;
use super::nn::dims;
use super::tensor::{check_shape, value_ints};
use crate::ir::attrs::*;
use crate::ir::host_tensor::{load_f64, HostTensor};
use crate::ir::schema::*;
use crate::ir::types::DType;

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(GridSample, in 2..=2, out 1..=1,
        attrs &[attr!("align_corners", Int), attr!("mode", Str), attr!("padding_mode", Str)],
        validate validate_grid_sample, infer infer_grid_sample,
        "samples X [N, C, D1..Dr] at the normalized points grid [N, H1..Hr, r] (x first) → [N, C, H1..Hr]; mode \
        linear / nearest (ties to even) / cubic (r = 2; also bilinear, bicubic), padding_mode zeros / border / \
        reflection, align_corners; f16, f32, f64"),
    op!(AffineGrid, in 2..=2, out 1..=1, attrs &[attr!("align_corners", Int)],
        validate validate_affine_grid, infer infer_affine_grid,
        "the sampling grid [N, H, W, 2] (or [N, D, H, W, 3]) of the affine maps theta [N, 2, 3] (or [N, 3, 4]) over \
        the normalized output of `size` [N, C, H, W] (or [N, C, D, H, W], a constant input); align_corners; f16, \
        f32, f64"),
    op!(Resize, in 1..=4, out 1..=1,
        attrs &[attr!("mode", Str), attr!("coordinate_transformation_mode", Str), attr!("nearest_mode", Str),
            attr!("cubic_coeff_a", Float), attr!("exclude_outside", Int), attr!("extrapolation_value", Float),
            attr!("antialias", Int), attr!("axes", Ints), attr!("keep_aspect_ratio_policy", Str),
            attr!("onnx_opset", Int)],
        validate validate_resize, infer infer_resize,
        "resizes X (any rank) to `sizes` or by `scales` (inputs X, roi, scales, sizes; opset 10: X, scales), which \
        must be constants (as roi must be for tf_crop_and_resize); `axes` restricts them to some axes, \
        `keep_aspect_ratio_policy` stretch / not_larger / not_smaller scales the sized axes alike. mode nearest \
        (nearest_mode round_prefer_floor / round_prefer_ceil / floor / ceil), linear (any number of axes) or cubic \
        (`cubic_coeff_a`, `exclude_outside`), `antialias` for linear and cubic downsampling; \
        coordinate_transformation_mode half_pixel / half_pixel_symmetric / pytorch_half_pixel / align_corners / \
        asymmetric / tf_crop_and_resize (roi, `extrapolation_value`). The per-axis taps are ONNX's reference's, \
        summed in f64 (OpenCL: f32, f64 for f64 tensors); nearest moves any dtype, linear and cubic take floats and \
        integers (rounded to nearest even and saturated). On textures: resizes of H and W of a 4-D tensor. Opset \
        10 (`onnx_opset` < 11) resizes as Upsample does"),
    op!(Upsample, in 1..=2, out 1..=1, attrs &[attr!("mode", Str), attr!("scales", Floats)],
        validate validate_upsample, infer infer_upsample,
        "Resize of opsets 7 and 9: X scaled by `scales` (an attribute in opset 7, a constant input in opset 9), \
        mode nearest (floor when upsampling, ceil when downsampling) or linear, asymmetric coordinates"),
];

// ---------------------------------------------------------------------------------------
// GridSample.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SampleMode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// GridSample's attributes: mode, padding and align_corners.
pub(crate) fn grid_sample_attrs(a: &Attrs) -> Result<(SampleMode, Padding, bool), String> {
    const OP: &str = "GridSample";
    let mode = match a.str("mode").unwrap_or("linear") {
        "linear" | "bilinear" => SampleMode::Linear,
        "nearest" => SampleMode::Nearest,
        "cubic" | "bicubic" => SampleMode::Cubic,
        m => return Err(format!("attribute `mode` of @onnx.{OP} must be linear, nearest or cubic, found {m:?}")),
    };
    let pad = match a.str("padding_mode").unwrap_or("zeros") {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        m => {
            return Err(format!(
                "attribute `padding_mode` of @onnx.{OP} must be zeros, border or reflection, found {m:?}"
            ))
        }
    };
    let align = match a.int("align_corners", 0) {
        0 => false,
        1 => true,
        v => return Err(format!("attribute `align_corners` of @onnx.{OP} must be 0 or 1, found {v}")),
    };
    Ok((mode, pad, align))
}

fn validate_grid_sample(a: &Attrs) -> Result<(), String> {
    grid_sample_attrs(a).map(|_| ())
}

/// GridSample's output shape [N, C, H1..Hr].
pub(crate) fn grid_sample_shape(x: &[i64], g: &[i64], a: &Attrs) -> Result<Vec<i64>, String> {
    const OP: &str = "GridSample";
    let (mode, _, _) = grid_sample_attrs(a)?;
    if x.len() < 3 {
        return Err(format!("{OP}: X must be [N, C, D1, ..., Dr] (rank 3 or more), found shape {x:?}"));
    }
    dims(x, "X")?;
    dims(g, "grid")?;
    let r = x.len() - 2;
    if g.len() != x.len() || g[0] != x[0] || g[r + 1] != r as i64 {
        return Err(format!("{OP}: the grid must be [N, H1, ..., H{r}, {r}] for X {x:?}, found shape {g:?}"));
    }
    if mode == SampleMode::Cubic && r != 2 {
        return Err(format!("{OP}: cubic mode takes 2 spatial dims only (4-D X), found {r}"));
    }
    let mut out = vec![x[0], x[1]];
    out.extend_from_slice(&g[1..=r]);
    check_shape(&out, OP)?;
    Ok(out)
}

pub(crate) fn infer_grid_sample(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (x, g) = (input(ins, 0, "X")?, input(ins, 1, "grid")?);
    check_dtype(x, 0, "X", FLOATS)?;
    check_dtype(g, 1, "grid", FLOATS)?;
    Ok(vec![(x.dtype, grid_sample_shape(x.shape, g.shape, a)?)])
}

// ---------------------------------------------------------------------------------------
// AffineGrid.

fn validate_affine_grid(a: &Attrs) -> Result<(), String> {
    match a.int("align_corners", 0) {
        0 | 1 => Ok(()),
        v => Err(format!("attribute `align_corners` of @onnx.AffineGrid must be 0 or 1, found {v}")),
    }
}

/// AffineGrid's spatial sizes (H, W or D, H, W) and output shape.
pub(crate) fn affine_grid_shape(theta: &[i64], size: &[i64]) -> Result<(Vec<i64>, Vec<i64>), String> {
    const OP: &str = "AffineGrid";
    let r = match size.len() {
        4 => 2,
        5 => 3,
        n => return Err(format!("{OP}: size must hold [N, C, H, W] or [N, C, D, H, W], found {n} values {size:?}")),
    };
    if size.iter().any(|&d| d < 0) {
        return Err(format!("{OP}: size {size:?} has a negative dim"));
    }
    if theta != [size[0], r, r + 1] {
        return Err(format!(
            "{OP}: theta must be [N, {r}, {}] = [{}, {r}, {}] for size {size:?}, found {theta:?}",
            r + 1,
            size[0],
            r + 1
        ));
    }
    let sp = size[2..].to_vec();
    let mut out = vec![size[0]];
    out.extend_from_slice(&sp);
    out.push(r);
    check_shape(&out, OP)?;
    Ok((sp, out))
}

pub(crate) fn infer_affine_grid(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (t, s) = (input(ins, 0, "theta")?, input(ins, 1, "size")?);
    check_dtype(t, 0, "theta", FLOATS)?;
    check_dtype(s, 1, "size", &[DType::I64])?;
    let size = value_ints(s, "AffineGrid", "size")?;
    Ok(vec![(t.dtype, affine_grid_shape(t.shape, &size)?.1)])
}

// ---------------------------------------------------------------------------------------
// Resize and Upsample.

/// Resize's interpolation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ResizeMode {
    Nearest,
    Linear,
    Cubic,
}

/// How an output coordinate maps to an input coordinate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Coord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

/// How nearest mode rounds; `Simple` is Upsample's and Resize-10's (floor when upsampling,
/// ceil when downsampling).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Nearest {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
    Simple,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    Stretch,
    NotLarger,
    NotSmaller,
}

/// Resize's (or Upsample's) attributes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ResizeAttrs {
    pub mode: ResizeMode,
    pub coord: Coord,
    pub nearest: Nearest,
    pub cubic_a: f64,
    pub exclude_outside: bool,
    pub extrapolation: f64,
    pub antialias: bool,
    pub axes: Option<Vec<i64>>,
    pub policy: Policy,
    /// Opset 10 Resize or Upsample: inputs X, scales.
    pub legacy: bool,
}

fn bool_attr(a: &Attrs, name: &str, op: &str) -> Result<bool, String> {
    match a.int(name, 0) {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(format!("attribute `{name}` of @onnx.{op} must be 0 or 1, found {v}")),
    }
}

/// Resize's attributes, checked.
pub(crate) fn resize_attrs(a: &Attrs) -> Result<ResizeAttrs, String> {
    const OP: &str = "Resize";
    let opset = a.int("onnx_opset", 19);
    if opset < 1 {
        return Err(format!("attribute `onnx_opset` of @onnx.{OP} must be a positive opset version, found {opset}"));
    }
    let legacy = opset < 11;
    let mode = match a.str("mode").unwrap_or("nearest") {
        "nearest" => ResizeMode::Nearest,
        "linear" | "bilinear" | "trilinear" => ResizeMode::Linear,
        "cubic" | "bicubic" if !legacy => ResizeMode::Cubic,
        m => {
            let modes = if legacy { "nearest or linear (opset 10)" } else { "nearest, linear or cubic" };
            return Err(format!("attribute `mode` of @onnx.{OP} must be {modes}, found {m:?}"));
        }
    };
    let coord = match a.str("coordinate_transformation_mode") {
        _ if legacy => Coord::Asymmetric,
        None | Some("half_pixel") => Coord::HalfPixel,
        Some("half_pixel_symmetric") => Coord::HalfPixelSymmetric,
        Some("pytorch_half_pixel") => Coord::PytorchHalfPixel,
        Some("align_corners") => Coord::AlignCorners,
        Some("asymmetric") => Coord::Asymmetric,
        Some("tf_crop_and_resize") => Coord::TfCropAndResize,
        Some(m) => {
            return Err(format!(
                "attribute `coordinate_transformation_mode` of @onnx.{OP} must be half_pixel, half_pixel_symmetric, \
                 pytorch_half_pixel, align_corners, asymmetric or tf_crop_and_resize, found {m:?}"
            ))
        }
    };
    let nearest = match a.str("nearest_mode") {
        _ if legacy => Nearest::Simple,
        None | Some("round_prefer_floor") => Nearest::RoundPreferFloor,
        Some("round_prefer_ceil") => Nearest::RoundPreferCeil,
        Some("floor") => Nearest::Floor,
        Some("ceil") => Nearest::Ceil,
        Some(m) => {
            return Err(format!(
                "attribute `nearest_mode` of @onnx.{OP} must be round_prefer_floor, round_prefer_ceil, floor or \
                 ceil, found {m:?}"
            ))
        }
    };
    let policy = match a.str("keep_aspect_ratio_policy").unwrap_or("stretch") {
        "stretch" => Policy::Stretch,
        "not_larger" => Policy::NotLarger,
        "not_smaller" => Policy::NotSmaller,
        m => {
            return Err(format!(
                "attribute `keep_aspect_ratio_policy` of @onnx.{OP} must be stretch, not_larger or not_smaller, \
                 found {m:?}"
            ))
        }
    };
    let cubic_a = a.float("cubic_coeff_a", -0.75);
    let extrapolation = a.float("extrapolation_value", 0.0);
    if !cubic_a.is_finite() {
        return Err(format!("attribute `cubic_coeff_a` of @onnx.{OP} must be finite, found {cubic_a}"));
    }
    let antialias = bool_attr(a, "antialias", OP)?;
    if antialias && mode == ResizeMode::Nearest {
        return Err(format!("@onnx.{OP}: `antialias` applies to the linear and cubic modes, not nearest"));
    }
    Ok(ResizeAttrs {
        mode,
        coord,
        nearest,
        cubic_a,
        exclude_outside: bool_attr(a, "exclude_outside", OP)?,
        extrapolation,
        antialias,
        axes: a.ints("axes").map(<[i64]>::to_vec),
        policy,
        legacy,
    })
}

fn validate_resize(a: &Attrs) -> Result<(), String> {
    resize_attrs(a).map(|_| ())
}

/// Upsample's attributes, as a Resize-10's.
pub(crate) fn upsample_attrs(a: &Attrs) -> Result<ResizeAttrs, String> {
    let mode = match a.str("mode").unwrap_or("nearest") {
        "nearest" => ResizeMode::Nearest,
        "linear" | "bilinear" | "trilinear" => ResizeMode::Linear,
        m => return Err(format!("attribute `mode` of @onnx.Upsample must be nearest or linear, found {m:?}")),
    };
    Ok(ResizeAttrs {
        mode,
        coord: Coord::Asymmetric,
        nearest: Nearest::Simple,
        cubic_a: -0.75,
        exclude_outside: false,
        extrapolation: 0.0,
        antialias: false,
        axes: None,
        policy: Policy::Stretch,
        legacy: true,
    })
}

fn validate_upsample(a: &Attrs) -> Result<(), String> {
    upsample_attrs(a).map(|_| ())
}

/// A resize worked out: the attributes and, per dim of X, the output size, the scale and
/// the roi's start and end (full rank).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ResizePlan {
    pub attrs: ResizeAttrs,
    pub input: Vec<i64>,
    pub out: Vec<i64>,
    pub scales: Vec<f64>,
    pub roi: Option<Vec<(f64, f64)>>,
}

/// The float values of a constant input (empty: absent).
fn const_floats(t: Option<&TensorInfo>, op: &str, what: &str, needed: bool) -> Result<Option<Vec<f64>>, String> {
    let Some(t) = t else { return Ok(None) };
    if t.shape.iter().product::<i64>() == 0 {
        return Ok(None);
    }
    if !FLOATS.contains(&t.dtype) {
        return Err(format!("{op}: the {what} input must be f32, f16 or f64, found {}", t.dtype));
    }
    let Some(v) = t.value else {
        if !needed {
            return Ok(None);
        }
        return Err(format!("{op} needs the value of its {what} input to infer the output shape"));
    };
    floats_of(v, op, what).map(Some)
}

fn floats_of(v: &HostTensor, op: &str, what: &str) -> Result<Vec<f64>, String> {
    if v.shape.len() > 1 {
        return Err(format!("{op}: the {what} input must be 1-D, found shape {:?}", v.shape));
    }
    super::tensor::check_data(v, op)?;
    Ok(v.data.chunks_exact(v.dtype.size()).map(|c| load_f64(v.dtype, c)).collect())
}

/// Resize's (`upsample`: Upsample's) plan for its inputs, whose constant values it reads.
pub(crate) fn resize_plan(ins: &[Option<TensorInfo>], a: &Attrs, upsample: bool) -> Result<ResizePlan, String> {
    let op = if upsample { "Upsample" } else { "Resize" };
    let x = input(ins, 0, "X")?;
    dims(x.shape, "X")?;
    let attrs = if upsample { upsample_attrs(a)? } else { resize_attrs(a)? };
    let opt = |i: usize| ins.get(i).and_then(Option::as_ref);
    let (roi, scales, sizes) = if upsample {
        let s = match (a.floats("scales"), opt(1)) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "{op}: give `scales` either as an attribute (opset 7) or as input 2 (opset 9), not both"
                ))
            }
            (Some(s), None) => Some(s),
            (None, t) => const_floats(t, op, "scales", true)?,
        };
        (None, s, None)
    } else if attrs.legacy {
        if opt(2).is_some() || opt(3).is_some() {
            return Err(format!("{op}: opset 10 takes two inputs (X, scales), found more"));
        }
        (None, const_floats(opt(1), op, "scales", true)?, None)
    } else {
        let tf = attrs.coord == Coord::TfCropAndResize;
        let roi = const_floats(opt(1), op, "roi", tf)?;
        let scales = const_floats(opt(2), op, "scales", true)?;
        let sizes = match opt(3) {
            Some(t) if t.shape.iter().product::<i64>() != 0 => Some(value_ints(t, op, "sizes")?),
            _ => None,
        };
        (roi, scales, sizes)
    };
    let r = x.shape.len();
    let axes: Vec<usize> = match &attrs.axes {
        None => (0..r).collect(),
        Some(ax) => {
            let mut out = Vec::with_capacity(ax.len());
            for &v in ax {
                let n = if v < 0 { v + r as i64 } else { v };
                if n < 0 || n >= r as i64 {
                    return Err(format!("{op}: axis {v} is out of range for X of rank {r}"));
                }
                if out.contains(&(n as usize)) {
                    return Err(format!("{op}: axis {v} is repeated in `axes` {ax:?}"));
                }
                out.push(n as usize);
            }
            out
        }
    };
    let k = axes.len();
    let input_dims = x.shape.to_vec();
    let mut out = input_dims.clone();
    let mut sc = vec![1.0; r];
    match (scales, sizes) {
        (Some(_), Some(_)) => return Err(format!("{op}: give either scales or sizes, not both")),
        (None, None) => return Err(format!("{op}: one of scales and sizes is required")),
        (Some(s), None) => {
            if s.len() != k {
                return Err(format!("{op}: scales must hold {k} values (one per resized axis), found {}", s.len()));
            }
            if attrs.policy != Policy::Stretch && !upsample {
                return Err(format!("{op}: keep_aspect_ratio_policy applies to sizes, not scales"));
            }
            for (&ax, &v) in axes.iter().zip(&s) {
                if !(v.is_finite() && v > 0.0) {
                    return Err(format!("{op}: scales must be positive and finite, found {s:?}"));
                }
                sc[ax] = v;
                let o = (v * input_dims[ax] as f64).floor();
                if o > i64::MAX as f64 / 2.0 {
                    return Err(format!("{op}: scale {v} makes axis {ax} too large"));
                }
                out[ax] = o as i64;
            }
        }
        (None, Some(z)) => {
            if z.len() != k {
                return Err(format!("{op}: sizes must hold {k} values (one per resized axis), found {}", z.len()));
            }
            if z.iter().any(|&v| v < 0) {
                return Err(format!("{op}: sizes must not be negative, found {z:?}"));
            }
            for (&ax, &v) in axes.iter().zip(&z) {
                if input_dims[ax] == 0 && v != 0 {
                    return Err(format!("{op}: axis {ax} of X is empty and cannot be resized to {v}"));
                }
                sc[ax] = if input_dims[ax] == 0 { 1.0 } else { v as f64 / input_dims[ax] as f64 };
                out[ax] = v;
            }
            if attrs.policy != Policy::Stretch && k > 0 {
                let pick = axes.iter().map(|&ax| sc[ax]);
                let s = if attrs.policy == Policy::NotLarger {
                    pick.fold(f64::INFINITY, f64::min)
                } else {
                    pick.fold(0.0, f64::max)
                };
                for &ax in &axes {
                    sc[ax] = s;
                    out[ax] = (s * input_dims[ax] as f64 + 0.5).floor() as i64;
                }
            }
        }
    }
    let roi = match roi {
        Some(v) if attrs.coord == Coord::TfCropAndResize => {
            if v.len() != 2 * k {
                return Err(format!(
                    "{op}: roi must hold {} values (starts, then ends of the resized axes), found {}",
                    2 * k,
                    v.len()
                ));
            }
            let mut full = vec![(0.0, 1.0); r];
            for (i, &ax) in axes.iter().enumerate() {
                full[ax] = (v[i], v[k + i]);
            }
            Some(full)
        }
        None if attrs.coord == Coord::TfCropAndResize => {
            return Err(format!("{op}: coordinate_transformation_mode tf_crop_and_resize needs the roi input"))
        }
        _ => None,
    };
    check_shape(&out, op)?;
    Ok(ResizePlan { attrs, input: input_dims, out, scales: sc, roi })
}

fn resize_dtypes(x: &TensorInfo, p: &ResizePlan, op: &str) -> Result<(), String> {
    if p.attrs.mode != ResizeMode::Nearest && !RESIZE_NUMERIC.contains(&x.dtype) {
        return Err(format!(
            "{op}: linear and cubic modes take float or integer tensors, found {} (nearest takes any dtype)",
            x.dtype
        ));
    }
    Ok(())
}

/// The dtypes Resize interpolates (nearest moves every dtype).
pub(crate) const RESIZE_NUMERIC: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::F64,
    DType::U8,
    DType::I8,
    DType::U16,
    DType::I16,
    DType::U32,
    DType::I32,
    DType::U64,
    DType::I64,
];

pub(crate) fn infer_resize(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    let p = resize_plan(ins, a, false)?;
    let x = input(ins, 0, "X")?;
    resize_dtypes(x, &p, "Resize")?;
    Ok(vec![(x.dtype, p.out)])
}

pub(crate) fn infer_upsample(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    let p = resize_plan(ins, a, true)?;
    let x = input(ins, 0, "X")?;
    resize_dtypes(x, &p, "Upsample")?;
    Ok(vec![(x.dtype, p.out)])
}

/// One resized axis: for every output position, `taps` input positions (clamped into the
/// axis; -1 where tf_crop_and_resize extrapolates) and their weights.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AxisTable {
    pub axis: usize,
    pub taps: usize,
    pub idx: Vec<i64>,
    pub w: Vec<f64>,
}

/// The most taps an antialiased axis may take per output (a downscale by 1/32768 or so).
const MAX_TAPS: usize = 1 << 16;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// Keys' cubic convolution kernel with coefficient `a` (ONNX's `cubic_coeff_a`).
pub(crate) fn cubic(x: f64, a: f64) -> f64 {
    let x = x.abs();
    if x <= 1.0 {
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    } else {
        0.0
    }
}

impl ResizePlan {
    /// The tables of the axes that change (an axis of scale 1, the same size and the whole
    /// roi is copied as ONNX's reference does).
    pub(crate) fn tables(&self) -> Result<Vec<AxisTable>, String> {
        if self.out.contains(&0) {
            return Ok(Vec::new());
        }
        let mut v = Vec::new();
        for ax in 0..self.input.len() {
            if !self.is_identity(ax) {
                v.push(self.table(ax)?);
            }
        }
        Ok(v)
    }

    /// True when axis `ax` is copied unchanged.
    pub(crate) fn is_identity(&self, ax: usize) -> bool {
        let roi = self.roi.as_ref().and_then(|r| r.get(ax).copied());
        let whole = roi.is_none_or(|(s, e)| close(s, 0.0) && close(e, 1.0));
        self.scales.get(ax).is_some_and(|&s| close(s, 1.0)) && self.out.get(ax) == self.input.get(ax) && whole
    }

    fn table(&self, ax: usize) -> Result<AxisTable, String> {
        let a = &self.attrs;
        let (len, out, scale) = (self.input[ax], self.out[ax], self.scales[ax]);
        let roi = self.roi.as_ref().and_then(|r| r.get(ax).copied());
        let lenf = len as f64;
        let width = scale * lenf;
        let s = scale.min(1.0);
        // Taps and the first tap's offset from the floor of the coordinate.
        let (taps, start) = match (a.mode, a.antialias) {
            (ResizeMode::Nearest, _) => (1usize, 0i64),
            (ResizeMode::Linear, false) => (2, 0),
            (ResizeMode::Cubic, false) => (4, -1),
            (mode, true) => {
                let reach = if mode == ResizeMode::Linear { 1.0 } else { 2.0 };
                let st = (-reach / s).floor() + 1.0;
                if st < -(MAX_TAPS as f64) {
                    return Err(format!(
                        "Resize: antialiased downscaling of axis {ax} by {scale} needs {} taps per output; at most \
                         {MAX_TAPS} are supported",
                        2.0 - 2.0 * st
                    ));
                }
                let st = st as i64;
                ((2 - 2 * st) as usize, st)
            }
        };
        let cap = (out.max(0) as usize)
            .checked_mul(taps)
            .ok_or_else(|| format!("Resize: the tap table of axis {ax} is too large"))?;
        let mut idx = Vec::with_capacity(cap);
        let mut w = Vec::with_capacity(idx.capacity());
        let mut ws = vec![0.0; taps];
        for y in 0..out.max(0) {
            let yf = y as f64;
            let x = match a.coord {
                Coord::AlignCorners => {
                    if width == 1.0 {
                        0.0
                    } else {
                        yf * (lenf - 1.0) / (width - 1.0)
                    }
                }
                Coord::Asymmetric => yf / scale,
                Coord::TfCropAndResize => {
                    let (r0, r1) = roi.unwrap_or((0.0, 1.0));
                    let x = if width == 1.0 {
                        (r1 - r0) * (lenf - 1.0) / 2.0
                    } else {
                        yf * (r1 - r0) * (lenf - 1.0) / (width - 1.0)
                    };
                    x + r0 * (lenf - 1.0)
                }
                Coord::PytorchHalfPixel => {
                    if width == 1.0 {
                        -0.5
                    } else {
                        (yf + 0.5) / scale - 0.5
                    }
                }
                Coord::HalfPixel => (yf + 0.5) / scale - 0.5,
                Coord::HalfPixelSymmetric => {
                    let adjustment = out as f64 / width;
                    let offset = lenf / 2.0 * (1.0 - adjustment);
                    offset + (yf + 0.5) / scale - 0.5
                }
            };
            if a.coord == Coord::TfCropAndResize && (x < 0.0 || x > lenf - 1.0) || !x.is_finite() || len == 0 {
                idx.extend(std::iter::repeat_n(-1, taps));
                w.extend(std::iter::repeat_n(0.0, taps));
                continue;
            }
            // Far outside the axis every tap clamps to an edge; bounded, the taps cannot overflow.
            let x = x.clamp(-1e15, 1e15);
            // The floor of x, but one less at an integer x (the reference's ratio is in (0, 1]).
            let f = if x == x.floor() { x - 1.0 } else { x.floor() };
            let ratio = x - f;
            let fi = f as i64;
            if a.mode == ResizeMode::Nearest {
                let up = match a.nearest {
                    _ if ratio == 1.0 => true,
                    Nearest::RoundPreferFloor => ratio > 0.5,
                    Nearest::RoundPreferCeil => ratio >= 0.5,
                    Nearest::Floor => false,
                    Nearest::Ceil => true,
                    Nearest::Simple => scale < 1.0,
                };
                idx.push((fi + up as i64).clamp(0, len - 1));
                w.push(1.0);
                continue;
            }
            for (k, wk) in ws.iter_mut().enumerate() {
                let d = start as f64 + k as f64 - ratio;
                *wk = match (a.mode, a.antialias) {
                    (ResizeMode::Linear, false) => {
                        if k == 0 {
                            1.0 - ratio
                        } else {
                            ratio
                        }
                    }
                    (ResizeMode::Linear, true) => (1.0 - (d * s).abs()).clamp(0.0, 1.0),
                    (_, false) => cubic(d, a.cubic_a),
                    (_, true) => cubic(d * s, a.cubic_a),
                };
            }
            if a.antialias {
                let sum: f64 = ws.iter().sum();
                ws.iter_mut().for_each(|v| *v /= sum);
            }
            let base = fi + start;
            if a.exclude_outside {
                for (k, wk) in ws.iter_mut().enumerate() {
                    let at = base + k as i64;
                    if at < 0 || at >= len {
                        *wk = 0.0;
                    }
                }
                let sum: f64 = ws.iter().sum();
                let sum = if sum == 0.0 { 1.0 } else { sum };
                ws.iter_mut().for_each(|v| *v /= sum);
            }
            for (k, &wk) in ws.iter().enumerate() {
                idx.push((base + k as i64).clamp(0, len - 1));
                w.push(wk);
            }
        }
        Ok(AxisTable { axis: ax, taps, idx, w })
    }
}
