//! Operator schemas of the sampling family: GridSample and AffineGrid (the kernels are in
//! `crate::ops::resize` and `crate::ops::resize_cl`).

use super::elementwise::{check_dtype, input};
use super::loss::FLOATS;
use super::nn::dims;
use super::tensor::{check_shape, value_ints};
use crate::ir::attrs::*;
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
