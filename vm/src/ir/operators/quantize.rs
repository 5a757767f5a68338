//! Operator schemas of the quantization family: QuantizeLinear, DequantizeLinear,
//! DynamicQuantizeLinear, QLinearMatMul, QLinearConv, MatMulInteger and ConvInteger (the
//! kernels are in `crate::ops::quantize` and `crate::ops::quantize_cl`).
//!
//! Quantized tensors are u8, i8, u16 or i16 (i32 where ONNX allows it); the 2-, 4- and
//! 8-bit float and sub-byte integer types have no VM dtype. Rounding is to nearest, ties to
//! even, and results saturate to the quantized type's range.

use super::elementwise::{check_dtype, dtype_list, input, optional};
use super::nn::{conv_dims, matmul_dims, validate_conv, ConvDims, MatMulDims, CONV_ATTRS};
use super::shape::broadcast;
use super::tensor::check_shape;
use crate::ir::attrs::*;
use crate::ir::host_tensor::numel;
use crate::ir::schema::*;
use crate::ir::types::DType;

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(QuantizeLinear, in 2..=3, out 1..=1,
        attrs &[attr!("axis", Int), attr!("saturate", Int), attr!("block_size", Int), attr!("output_dtype", Int),
            attr!("precision", Int)],
        validate validate_quantize, infer infer_quantize,
        "y = saturate(round(x / y_scale) + y_zero_point), rounding half to even; x f32, f16 or i32, scale f32, f16 \
        or i32; y u8 (default), i8, u16 or i16 from the zero point or `output_dtype`; per-tensor, per-axis (`axis`, \
        default 1) or blocked (`block_size`) scales; the division in the wider of x and scale (or `precision`)"),
    op!(DequantizeLinear, in 2..=3, out 1..=1,
        attrs &[attr!("axis", Int), attr!("block_size", Int), attr!("output_dtype", Int)],
        validate validate_dequantize, infer infer_dequantize,
        "y = (x - x_zero_point) * x_scale for x u8, i8, u16, i16 or i32, scale f32 or f16; y the scale's dtype or \
        `output_dtype`; per-tensor, per-axis or blocked scales as QuantizeLinear"),
    op!(DynamicQuantizeLinear, in 1..=1, out 1..=3, attrs &[], infer infer_dynamic_quantize,
        "u8 quantization of f32 x with a scale (max(x, 0) - min(x, 0)) / 255 and zero point computed from x; \
        outputs y, y_scale, y_zero_point"),
    op!(QLinearMatMul, in 8..=8, out 1..=1, attrs &[], infer infer_qlinear_matmul,
        "quantized numpy matmul: ((a - a_zp) @ (b - b_zp)) * a_scale * b_scale / y_scale + y_zp, rounded half to \
        even and saturated (u8 or i8; scales f32 or f16, per tensor, per row of a or per column of b)"),
    op!(QLinearConv, in 8..=9, out 1..=1, attrs CONV_ATTRS, validate validate_conv, infer infer_qlinear_conv,
        "quantized Conv: (conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale / y_scale + y_zp, rounded half to even \
        and saturated (u8 or i8; w_scale and w_zp per tensor or per output channel; B i32)"),
    op!(MatMulInteger, in 2..=4, out 1..=1, attrs &[], infer infer_matmul_integer,
        "i32 numpy matmul of (A - a_zero_point) and (B - b_zero_point) for u8 or i8 A and B (zero points per \
        tensor, per row of A or per column of B; i32 sums wrap)"),
    op!(ConvInteger, in 2..=4, out 1..=1, attrs CONV_ATTRS, validate validate_conv, infer infer_conv_integer,
        "i32 Conv of (x - x_zero_point) and (w - w_zero_point) for u8 or i8 x and w (w_zero_point per tensor or \
        per output channel); pads, strides, dilations, group, auto_pad"),
];

/// The quantized dtypes.
pub(crate) const QUANTIZED: &[DType] = &[DType::U8, DType::I8, DType::U16, DType::I16];
/// The float8 dtypes QuantizeLinear and DequantizeLinear also take (their zero point must
/// be 0: y = saturate(x / scale) and y = x * scale).
pub(crate) const FLOAT8: &[DType] = &[DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ];
/// The dtypes QuantizeLinear produces: [`QUANTIZED`] and [`FLOAT8`].
pub(crate) const QUANTIZE_OUT: &[DType] = &[
    DType::U8,
    DType::I8,
    DType::U16,
    DType::I16,
    DType::F8E4M3FN,
    DType::F8E4M3FNUZ,
    DType::F8E5M2,
    DType::F8E5M2FNUZ,
];

/// A float8 zero point must be 0 (checked when its value is known: on the host, or when
/// it is a constant).
fn float8_zero(z: &TensorInfo, op: &str) -> Result<(), String> {
    if let Some(v) = z.value.filter(|_| z.dtype.is_float8()) {
        if v.to_f64().iter().any(|&x| x != 0.0) {
            return Err(format!("@onnx.{op}: a {} zero point must be 0, found {}", z.dtype, v.summary()));
        }
    }
    Ok(())
}
/// The 8-bit quantized dtypes.
pub(crate) const BYTES: &[DType] = &[DType::U8, DType::I8];
/// What QuantizeLinear's x and scale may be.
pub(crate) const QUANTIZE_IN: &[DType] = &[DType::F32, DType::F16, DType::I32];
/// The scale dtypes of the other operators.
pub(crate) const SCALES: &[DType] = &[DType::F32, DType::F16];

/// Where each element's scale and zero point come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// One scale for the tensor.
    Tensor,
    /// Scale `(k / inner) % dim` for element `k`.
    Axis { inner: usize, dim: usize },
    /// Scale `((k / inner / dim) * blocks + (k / inner) % dim / block) * inner + k % inner`
    /// (the scale has x's shape but `blocks` along the axis).
    Blocks { inner: usize, dim: usize, blocks: usize, block: usize },
}

impl Layout {
    /// The scale index of element `k`.
    #[inline]
    pub(crate) fn index(self, k: usize) -> usize {
        match self {
            Layout::Tensor => 0,
            Layout::Axis { inner, dim } => (k / inner) % dim,
            Layout::Blocks { inner, dim, blocks, block } => {
                let (q, i) = (k / inner, k % inner);
                ((q / dim) * blocks + (q % dim) / block) * inner + i
            }
        }
    }
}

/// The layout of a scale of shape `s` for x of shape `x` (`axis`, `block_size` as given).
pub(crate) fn scale_layout(x: &[i64], s: &[i64], attrs: &Attrs) -> Result<Layout, String> {
    let block = attrs.int("block_size", 0);
    if numel(s) == Some(1) && (block == 0 || s.len() <= 1) {
        return Ok(Layout::Tensor);
    }
    let r = x.len() as i64;
    let axis = attrs.int("axis", 1);
    if axis < -r || axis >= r {
        return Err(format!("axis {axis} is out of range for the input of rank {r}"));
    }
    let a = (if axis < 0 { axis + r } else { axis }) as usize;
    let inner = x[a + 1..].iter().product::<i64>().max(0) as usize;
    let dim = x[a].max(0) as usize;
    if block == 0 {
        if s.len() != 1 || s[0] != x[a] {
            return Err(format!(
                "the scale of shape {s:?} must be a scalar or 1-D with the input's size {} along axis {a} \
                 (per-axis), or set block_size for blocked quantization",
                x[a]
            ));
        }
        return Ok(Layout::Axis { inner, dim });
    }
    let nb = (x[a] + block - 1) / block;
    let want: Vec<i64> = x.iter().enumerate().map(|(i, &d)| if i == a { nb } else { d }).collect();
    if s != want {
        return Err(format!(
            "blocked quantization along axis {a} with block_size {block} needs a scale of shape {want:?} for the \
             input of shape {x:?}, found {s:?}"
        ));
    }
    Ok(Layout::Blocks { inner, dim, blocks: nb as usize, block: block as usize })
}

fn validate_block(a: &Attrs) -> Result<(), String> {
    let b = a.int("block_size", 0);
    if b < 0 {
        return Err(format!("block_size must be 0 (no blocks) or positive, found {b}"));
    }
    Ok(())
}

/// The dtype of an ONNX type-code attribute (0 when absent), `allowed` or an error.
fn code_attr(a: &Attrs, name: &str, op: &str, allowed: &[DType]) -> Result<Option<DType>, String> {
    let code = a.int(name, 0);
    if code == 0 {
        return Ok(None);
    }
    match DType::from_onnx(code) {
        Some(d) if allowed.contains(&d) => Ok(Some(d)),
        Some(d) => Err(format!("attribute `{name}` of @onnx.{op} must be {}, found {d}", dtype_list(allowed))),
        None => Err(format!(
            "attribute `{name}` of @onnx.{op} is the ONNX data type {code}, which the VM does not have \
             (it has {})",
            dtype_list(allowed)
        )),
    }
}

pub(crate) fn validate_quantize(a: &Attrs) -> Result<(), String> {
    match a.int("saturate", 1) {
        0 | 1 => {}
        v => return Err(format!("attribute `saturate` of @onnx.QuantizeLinear must be 0 or 1, found {v}")),
    }
    validate_block(a)?;
    code_attr(a, "output_dtype", "QuantizeLinear", QUANTIZE_OUT)?;
    code_attr(a, "precision", "QuantizeLinear", &[DType::F32, DType::F16])?;
    Ok(())
}

/// QuantizeLinear's plan: output dtype, the division's dtype and the scale layout.
pub(crate) struct QuantizePlan {
    pub(crate) out: DType,
    pub(crate) precision: DType,
    pub(crate) layout: Layout,
}

/// numpy's true-division dtype of x and scale: the wider float, or f64 with an integer.
fn division_dtype(x: DType, s: DType) -> DType {
    match (x, s) {
        (DType::F16, DType::F16) => DType::F16,
        (DType::F32 | DType::F16, DType::F32 | DType::F16) => DType::F32,
        _ => DType::F64,
    }
}

pub(crate) fn plan_quantize(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<QuantizePlan, String> {
    validate_quantize(attrs)?;
    let (x, s) = (input(ins, 0, "x")?, input(ins, 1, "y_scale")?);
    check_dtype(x, 0, "x", QUANTIZE_IN)?;
    check_dtype(s, 1, "y_scale", QUANTIZE_IN)?;
    check_shape(x.shape, "QuantizeLinear")?;
    let layout = scale_layout(x.shape, s.shape, attrs)?;
    let requested = code_attr(attrs, "output_dtype", "QuantizeLinear", QUANTIZE_OUT)?;
    let out = match optional(ins, 2) {
        Some(z) => {
            check_dtype(z, 2, "y_zero_point", QUANTIZE_OUT)?;
            float8_zero(z, "QuantizeLinear")?;
            if z.shape != s.shape && !(numel(z.shape) == Some(1) && layout == Layout::Tensor) {
                return Err(format!("the zero point's shape {:?} differs from the scale's {:?}", z.shape, s.shape));
            }
            if let Some(r) = requested.filter(|&r| r != z.dtype) {
                return Err(format!("output_dtype is {r} but the zero point is {}", z.dtype));
            }
            z.dtype
        }
        None => requested.unwrap_or(DType::U8),
    };
    let precision = match code_attr(attrs, "precision", "QuantizeLinear", &[DType::F32, DType::F16])? {
        Some(p) => p,
        None => division_dtype(x.dtype, s.dtype),
    };
    Ok(QuantizePlan { out, precision, layout })
}

pub(crate) fn infer_quantize(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let p = plan_quantize(ins, attrs)?;
    Ok(vec![(p.out, input(ins, 0, "x")?.shape.to_vec())])
}

pub(crate) fn validate_dequantize(a: &Attrs) -> Result<(), String> {
    validate_block(a)?;
    code_attr(a, "output_dtype", "DequantizeLinear", SCALES)?;
    Ok(())
}

/// DequantizeLinear's output dtype and scale layout.
pub(crate) fn plan_dequantize(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<(DType, Layout), String> {
    validate_dequantize(attrs)?;
    let (x, s) = (input(ins, 0, "x")?, input(ins, 1, "x_scale")?);
    let mut allowed = QUANTIZED.to_vec();
    allowed.push(DType::I32);
    allowed.extend(FLOAT8);
    check_dtype(x, 0, "x", &allowed)?;
    check_dtype(s, 1, "x_scale", SCALES)?;
    check_shape(x.shape, "DequantizeLinear")?;
    let layout = scale_layout(x.shape, s.shape, attrs)?;
    if let Some(z) = optional(ins, 2) {
        if z.dtype != x.dtype {
            return Err(format!("the zero point is {} but x is {}: they must have one dtype", z.dtype, x.dtype));
        }
        float8_zero(z, "DequantizeLinear")?;
        if z.shape != s.shape && !(numel(z.shape) == Some(1) && layout == Layout::Tensor) {
            return Err(format!("the zero point's shape {:?} differs from the scale's {:?}", z.shape, s.shape));
        }
    }
    let out = code_attr(attrs, "output_dtype", "DequantizeLinear", SCALES)?.unwrap_or(s.dtype);
    Ok((out, layout))
}

pub(crate) fn infer_dequantize(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (d, _) = plan_dequantize(ins, attrs)?;
    Ok(vec![(d, input(ins, 0, "x")?.shape.to_vec())])
}

pub(crate) fn infer_dynamic_quantize(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "x")?;
    check_dtype(x, 0, "x", &[DType::F32])?;
    check_shape(x.shape, "DynamicQuantizeLinear")?;
    Ok(vec![(DType::U8, x.shape.to_vec()), (DType::F32, vec![]), (DType::U8, vec![])])
}

/// A per-tensor, per-row or per-column parameter: its length (1 or `n`).
fn param_len(t: &TensorInfo, i: usize, name: &str, n: usize, what: &str) -> Result<usize, String> {
    match numel(t.shape) {
        Some(1) => Ok(1),
        Some(k) if t.shape.len() == 1 && k as usize == n => Ok(n),
        _ => Err(format!(
            "input {} ({name}) of shape {:?} must be a scalar or 1-D with {n} elements (one {what})",
            i + 1,
            t.shape
        )),
    }
}

/// QLinearMatMul's plan: the matmul dims, the lengths of a's and b's parameters (1, or M
/// and N) and the output dtype.
pub(crate) struct QMatMulPlan {
    pub(crate) dims: MatMulDims,
    pub(crate) a_len: usize,
    pub(crate) b_len: usize,
    pub(crate) out: DType,
}

pub(crate) fn plan_qlinear_matmul(ins: &[Option<TensorInfo>]) -> Result<QMatMulPlan, String> {
    let names = ["a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"];
    let t: Vec<&TensorInfo> = names.iter().enumerate().map(|(i, n)| input(ins, i, n)).collect::<Result<_, _>>()?;
    let (a, b) = (t[0], t[3]);
    check_dtype(a, 0, "a", BYTES)?;
    check_dtype(b, 3, "b", BYTES)?;
    check_dtype(t[7], 7, "y_zero_point", BYTES)?;
    check_dtype(t[1], 1, "a_scale", SCALES)?;
    for i in [4, 6] {
        if t[i].dtype != t[1].dtype {
            return Err(format!("input {} ({}) is {}, but a_scale is {}", i + 1, names[i], t[i].dtype, t[1].dtype));
        }
    }
    for (z, x) in [(2, 0), (5, 3)] {
        if t[z].dtype != t[x].dtype {
            return Err(format!(
                "input {} ({}) is {}, but {} is {}",
                z + 1,
                names[z],
                t[z].dtype,
                names[x],
                t[x].dtype
            ));
        }
    }
    let dims = matmul_dims(a.shape, b.shape)?;
    let (m, n) = (if a.shape.len() > 1 { dims.m } else { 1 }, if b.shape.len() > 1 { dims.n } else { 1 });
    let a_len = param_len(t[1], 1, names[1], m, "per row of a")?;
    let b_len = param_len(t[4], 4, names[4], n, "per column of b")?;
    if param_len(t[2], 2, names[2], m, "per row of a")? != a_len {
        return Err(format!("a_zero_point {:?} and a_scale {:?} must have one shape", t[2].shape, t[1].shape));
    }
    if param_len(t[5], 5, names[5], n, "per column of b")? != b_len {
        return Err(format!("b_zero_point {:?} and b_scale {:?} must have one shape", t[5].shape, t[4].shape));
    }
    param_len(t[6], 6, names[6], 1, "")?;
    param_len(t[7], 7, names[7], 1, "")?;
    Ok(QMatMulPlan { dims, a_len, b_len, out: t[7].dtype })
}

pub(crate) fn infer_qlinear_matmul(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let p = plan_qlinear_matmul(ins)?;
    Ok(vec![(p.out, p.dims.out_shape)])
}

/// QLinearConv's plan: the conv dims, the length of w's parameters (1 or M), whether
/// there is a bias, and the output dtype.
pub(crate) struct QConvPlan {
    pub(crate) dims: ConvDims,
    pub(crate) w_len: usize,
    /// Read by the OpenCL kernel only (the host kernel indexes the zero point directly).
    #[cfg_attr(not(feature = "opencl"), allow(dead_code))]
    pub(crate) w_zp_len: usize,
    pub(crate) out: DType,
}

/// Checks an optional i32 bias of `m` elements.
fn check_i32_bias(ins: &[Option<TensorInfo>], i: usize, m: usize) -> Result<(), String> {
    if let Some(b) = optional(ins, i) {
        check_dtype(b, i, "B", &[DType::I32])?;
        if b.shape.len() != 1 || b.shape[0] as u64 != m as u64 {
            return Err(format!("the bias B has shape {:?}, but there are {m} output channels", b.shape));
        }
    }
    Ok(())
}

pub(crate) fn plan_qlinear_conv(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<QConvPlan, String> {
    let names = ["x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point"];
    let t: Vec<&TensorInfo> = names.iter().enumerate().map(|(i, n)| input(ins, i, n)).collect::<Result<_, _>>()?;
    check_dtype(t[0], 0, "x", BYTES)?;
    check_dtype(t[3], 3, "w", BYTES)?;
    check_dtype(t[7], 7, "y_zero_point", BYTES)?;
    for i in [1, 4, 6] {
        check_dtype(t[i], i, names[i], &[DType::F32])?;
    }
    for (z, x) in [(2, 0), (5, 3)] {
        if t[z].dtype != t[x].dtype {
            return Err(format!(
                "input {} ({}) is {}, but {} is {}",
                z + 1,
                names[z],
                t[z].dtype,
                names[x],
                t[x].dtype
            ));
        }
    }
    let dims = conv_dims(t[0].shape, t[3].shape, None, attrs)?;
    for i in [1, 2, 6, 7] {
        param_len(t[i], i, names[i], 1, "")?;
    }
    let w_len = param_len(t[4], 4, names[4], dims.m, "per output channel")?;
    let w_zp_len = param_len(t[5], 5, names[5], dims.m, "per output channel")?;
    check_i32_bias(ins, 8, dims.m)?;
    Ok(QConvPlan { dims, w_len, w_zp_len, out: t[7].dtype })
}

pub(crate) fn infer_qlinear_conv(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let p = plan_qlinear_conv(ins, attrs)?;
    Ok(vec![(p.out, p.dims.out_shape)])
}

/// The shape a MatMulInteger zero point broadcasts as against its operand of shape `x`:
/// a scalar, a vector per row of A (`row`) or per column of B, or a tensor of the
/// operand's rank with a 1 in the reduced dim.
pub(crate) fn zero_point_shape(x: &[i64], z: &[i64], row: bool, name: &str) -> Result<Vec<i64>, String> {
    if numel(z) == Some(1) {
        return Ok(vec![]);
    }
    let r = x.len();
    let shape = if z.len() == 1 && r >= 2 && row && z[0] == x[r - 2] {
        vec![z[0], 1]
    } else if z.len() == 1 && r >= 2 && !row && z[0] == x[r - 1] {
        vec![z[0]]
    } else {
        z.to_vec()
    };
    // The reduced (K) dim of the operand must be 1 (or absent) in the zero point.
    let ok = r >= 2 && broadcast(&shape, x).ok().as_deref() == Some(x) && {
        let kd = if row { r - 1 } else { r - 2 };
        match (kd + shape.len()).checked_sub(r) {
            Some(j) => shape.get(j) == Some(&1),
            None => true,
        }
    };
    if !ok {
        return Err(format!(
            "{name} of shape {z:?} must be a scalar, or hold one value per {} of the operand of shape {x:?}",
            if row { "row" } else { "column" }
        ));
    }
    Ok(shape)
}

/// A zero point's broadcast shape, when it is given.
pub(crate) type ZeroShape = Option<Vec<i64>>;

/// MatMulInteger's dims and its zero points' broadcast shapes.
pub(crate) fn plan_matmul_integer(ins: &[Option<TensorInfo>]) -> Result<(MatMulDims, ZeroShape, ZeroShape), String> {
    let (a, b) = (input(ins, 0, "A")?, input(ins, 1, "B")?);
    check_dtype(a, 0, "A", BYTES)?;
    check_dtype(b, 1, "B", BYTES)?;
    let dims = matmul_dims(a.shape, b.shape)?;
    let mut zs = [None, None];
    for (j, (x, name)) in [(a, "a_zero_point"), (b, "b_zero_point")].into_iter().enumerate() {
        if let Some(z) = optional(ins, 2 + j) {
            if z.dtype != x.dtype {
                return Err(format!("input {} ({name}) is {}, but its operand is {}", 3 + j, z.dtype, x.dtype));
            }
            zs[j] = Some(zero_point_shape(x.shape, z.shape, j == 0, name)?);
        }
    }
    let [za, zb] = zs;
    Ok((dims, za, zb))
}

pub(crate) fn infer_matmul_integer(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (dims, _, _) = plan_matmul_integer(ins)?;
    Ok(vec![(DType::I32, dims.out_shape)])
}

/// ConvInteger's dims and the length of w's zero point (0 without, 1 or M).
pub(crate) fn plan_conv_integer(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<(ConvDims, usize), String> {
    let (x, w) = (input(ins, 0, "x")?, input(ins, 1, "w")?);
    check_dtype(x, 0, "x", BYTES)?;
    check_dtype(w, 1, "w", BYTES)?;
    let dims = conv_dims(x.shape, w.shape, None, attrs)?;
    if let Some(z) = optional(ins, 2) {
        if z.dtype != x.dtype {
            return Err(format!("input 3 (x_zero_point) is {}, but x is {}", z.dtype, x.dtype));
        }
        param_len(z, 2, "x_zero_point", 1, "")?;
    }
    let mut w_len = 0;
    if let Some(z) = optional(ins, 3) {
        if z.dtype != w.dtype {
            return Err(format!("input 4 (w_zero_point) is {}, but w is {}", z.dtype, w.dtype));
        }
        w_len = param_len(z, 3, "w_zero_point", dims.m, "per output channel")?;
    }
    Ok((dims, w_len))
}

pub(crate) fn infer_conv_integer(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (dims, _) = plan_conv_integer(ins, attrs)?;
    Ok(vec![(DType::I32, dims.out_shape)])
}
