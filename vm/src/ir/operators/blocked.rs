//! Operators on blocked textures.
//!
//! An operator operand whose view has scope `global.texture` holds a logically
//! `[N, C, spatial...]` tensor in the blocked layout `[N, ceil(C/4), spatial..., 4]`: one RGBA
//! texel carries four consecutive channels, and the channels past `C` in the last block are
//! padding. The image folds that shape the usual way (width = the last spatial dim, height =
//! everything before it), so a whole model can keep its activations in images between two
//! layout conversions (`@vm.to_blocked`, `@vm.from_blocked`).
//!
//! The logical channel count is not part of the view's shape. Where it matters it comes from
//! the operator's parameters (Conv: `W.shape[1] * group`; BatchNormalization: the length of
//! `scale`); everywhere else the padding channels are computed like real ones, so Concat
//! joins whole channel blocks. Parameters (weights, bias, scalars) stay buffer views.
//!
//! [`infer`] checks a call's operands and infers its blocked output here, once, for the
//! verifier, the interpreter, the host path and the OpenCL texture kernels alike.

use super::Operator;
use crate::ir::attrs::Attrs;
use crate::ir::host_tensor::HostTensor;
use crate::ir::schema::{OpDef, OutInfo, TensorInfo};
use crate::ir::types::DType;

/// Channels per texel.
pub const BLOCK: i64 = 4;

/// How an operator computes on blocked textures: which of its operands are activations
/// (textures) and which are parameters (buffer views).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Elementwise on one activation input; the other inputs, if any, are scalar parameters.
    Unary,
    /// Elementwise on inputs that are all activations of one shape.
    Nary,
    /// Channel-wise on one activation input, with buffer parameters.
    Channel,
    /// Joins activations along channel blocks.
    Concat,
}

/// The operator's blocked-texture form, if it has one (on the host and in OpenCL texture
/// kernels, which `crate::ops` registers for exactly these operators).
pub const fn form(op: Operator) -> Option<Form> {
    use Operator::*;
    match op {
        Relu | Clip | LeakyRelu | Sigmoid | Tanh | Exp | Sqrt | Neg | Abs | Elu | Selu | Softplus | Softsign
        | Identity | Dropout | Gelu | Erf | HardSigmoid | HardSwish | Mish | Celu | ThresholdedRelu | Log
        | Reciprocal | Floor | Ceil | Round | Sign | Sin | Cos | Tan | Asin | Acos | Atan | Sinh | Cosh | Asinh
        | Acosh | Atanh => Some(Form::Unary),
        Add | Sub | Mul | Div | Pow | Max | Min | Sum => Some(Form::Nary),
        Conv | MaxPool | AveragePool | GlobalAveragePool | GlobalMaxPool | BatchNormalization => Some(Form::Channel),
        Concat => Some(Form::Concat),
        Resize | Upsample => Some(Form::Channel),
        _ => None,
    }
}

/// True when operator `name` has a blocked-texture form (for the compiler, which works
/// with names).
pub fn supports(name: &str) -> bool {
    Operator::from_name(name).and_then(form).is_some()
}

/// Which of `nin` inputs of `op` are activations (textures in a blocked call); the others
/// are parameters and stay buffer views.
pub fn activation_inputs(op: Operator, nin: usize) -> Vec<bool> {
    match form(op) {
        Some(Form::Nary | Form::Concat) => vec![true; nin],
        _ => (0..nin).map(|i| i == 0).collect(),
    }
}

/// `[N, C, s...]` → `[N, ceil(C/4), s..., 4]`.
pub fn blocked_shape(logical: &[i64]) -> Vec<i64> {
    let mut s = logical.to_vec();
    if s.len() >= 2 {
        s[1] = (s[1].max(0) + BLOCK - 1) / BLOCK;
    }
    s.push(BLOCK);
    s
}

/// `(N, channel blocks, spatial dims)` of a blocked shape `[N, CB, s..., 4]`.
pub fn split(blocked: &[i64]) -> Result<(i64, i64, &[i64]), String> {
    let r = blocked.len();
    if r < 4 || blocked[r - 1] != BLOCK {
        return Err(format!(
            "a blocked texture operand is [N, C/4, spatial..., 4] (rank 4 or more, 4 channels per texel), found {blocked:?}"
        ));
    }
    Ok((blocked[0], blocked[1], &blocked[2..r - 1]))
}

/// The logical `[N, C, s...]` of a blocked shape holding `c` channels.
fn logical(blocked: &[i64], c: i64) -> Result<Vec<i64>, String> {
    let (n, cb, sp) = split(blocked)?;
    if (c + BLOCK - 1) / BLOCK != cb || c < 0 {
        return Err(format!(
            "{c} channels take {} blocks of 4, but the texture {blocked:?} holds {cb}",
            (c.max(0) + BLOCK - 1) / BLOCK
        ));
    }
    let mut s = vec![n, c];
    s.extend_from_slice(sp);
    Ok(s)
}

/// A checked blocked call: the logical input shapes the operator computes on (`None` for
/// buffer inputs, which keep theirs), and its logical and blocked outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockedCall {
    pub logical_in: Vec<Option<Vec<i64>>>,
    /// Every output the operator infers, logical (the call may only name the first).
    pub logical_out: Vec<OutInfo>,
    /// The first output as a blocked texture.
    pub out: OutInfo,
}

/// Checks a call with texture operands and infers its output. `infos` carry the view
/// shapes (blocked for textures); `textured_in` / `textured_out` say which operands are
/// `global.texture` views (`None` for an omitted output).
pub fn infer(
    def: &OpDef,
    infos: &[Option<TensorInfo>],
    textured_in: &[bool],
    textured_out: &[Option<bool>],
    attrs: &Attrs,
) -> Result<BlockedCall, String> {
    let Some(form) = form(def.op) else {
        return Err(format!(
            "has no texture form; convert its inputs with @vm.from_blocked and call it on buffer views (texture \
             operators: {})",
            texture_ops().join(", ")
        ));
    };
    match textured_out {
        [Some(true)] | [Some(true), None] | [Some(true), None, None] => {}
        [Some(false), ..] => return Err("output 1 must be a `global.texture` view like its inputs".into()),
        _ => return Err("on textures only the first output (Y) can be named; omit the others".into()),
    }
    let roles = activation_inputs(def.op, infos.len());
    for (i, (info, &act)) in infos.iter().zip(&roles).enumerate() {
        let Some(info) = info else { continue };
        match (act, textured_in[i]) {
            (true, false) => {
                return Err(format!(
                    "input {} is a buffer view, but the activations of a texture call are all textures",
                    i + 1
                ))
            }
            (false, true) => {
                return Err(format!("input {} is a parameter and must be a buffer view, not a texture", i + 1))
            }
            (true, true) if info.dtype != DType::F32 => {
                return Err(format!("texture operands are f32, input {} is {}", i + 1, info.dtype))
            }
            _ => {}
        }
    }
    let x = infos.first().and_then(|i| i.as_ref()).ok_or("input 1 is required")?;
    let (_, cb, _) = split(x.shape)?;
    // The logical channel count of the first input.
    let c = match def.op {
        Operator::Conv => {
            let w = infos.get(1).and_then(|i| i.as_ref()).ok_or("input 2 (W) is required")?;
            let per_group =
                *w.shape.get(1).ok_or_else(|| format!("the weight {:?} has no input-channel dim", w.shape))?;
            per_group.checked_mul(attrs.int("group", 1)).ok_or("the input channel count overflows")?
        }
        Operator::BatchNormalization => {
            if attrs.int("spatial", 1) == 0 {
                return Err("on textures BatchNormalization needs spatial = 1 (per-channel parameters)".into());
            }
            let s = infos.get(1).and_then(|i| i.as_ref()).ok_or("input 2 (scale) is required")?;
            s.shape.iter().product()
        }
        _ => cb * BLOCK,
    };
    let mut logical_in = Vec::with_capacity(infos.len());
    for (i, info) in infos.iter().enumerate() {
        logical_in.push(match info {
            Some(t) if textured_in[i] => {
                let ch = if i == 0 { c } else { split(t.shape)?.1 * BLOCK };
                Some(logical(t.shape, ch).map_err(|e| format!("input {}: {e}", i + 1))?)
            }
            _ => None,
        });
    }
    if form == Form::Nary {
        if let Some(i) = infos.iter().position(|t| t.as_ref().is_some_and(|t| t.shape != x.shape)) {
            return Err(format!(
                "texture operands of {} have one shape (no broadcasting); input 1 is {:?}, input {} is {:?}",
                def.name,
                x.shape,
                i + 1,
                infos[i].as_ref().map(|t| t.shape.to_vec()).unwrap_or_default()
            ));
        }
    }
    if form == Form::Concat {
        let rank = logical_in[0].as_ref().map_or(0, Vec::len) as i64;
        let axis = attrs.int("axis", 1); // a missing axis is reported by inference below
        if axis != 1 && axis != 1 - rank {
            return Err(format!("on textures Concat joins channel blocks (axis 1), found axis {axis}"));
        }
    }
    let shapes: Vec<Option<TensorInfo>> = infos
        .iter()
        .zip(&logical_in)
        .map(|(t, l)| match (t, l) {
            (Some(t), Some(l)) => Some(TensorInfo { dtype: t.dtype, shape: l, value: None }),
            (t, _) => *t,
        })
        .collect();
    let logical_out = (def.infer)(&shapes, attrs)?;
    if matches!(def.op, Operator::Resize | Operator::Upsample) {
        let plan = super::resize::resize_plan(&shapes, attrs, def.op == Operator::Upsample)?;
        if plan.input.len() != 4 || !plan.is_identity(0) || !plan.is_identity(1) {
            return Err(format!("on textures {} resizes the spatial dims of a 4-D [N, C, H, W] tensor only", def.name));
        }
    }
    let (dtype, y) = logical_out.first().ok_or("the operator infers no output")?;
    if y.len() < 3 {
        return Err(format!("the output {y:?} has no spatial dims, so it has no blocked texture form"));
    }
    let out = (*dtype, blocked_shape(y));
    Ok(BlockedCall { logical_in, logical_out, out })
}

/// The operators with a texture form, sorted.
pub fn texture_ops() -> Vec<&'static str> {
    let mut v: Vec<&str> = Operator::ALL.iter().filter(|op| form(**op).is_some()).map(|op| op.name()).collect();
    v.sort_unstable();
    v
}

/// Dims as `usize` (the shapes here were checked by shape inference or view creation).
fn udims(s: &[i64]) -> Vec<usize> {
    s.iter().map(|&d| d.max(0) as usize).collect()
}

/// `[N, C, s...]` → `[N, ceil(C/4), s..., 4]`, padding channels zero. Any dtype.
pub fn block(t: &HostTensor) -> Result<HostTensor, String> {
    if t.shape.len() < 3 {
        return Err(format!("blocking needs [N, C, spatial...], found {:?}", t.shape));
    }
    let d = udims(&t.shape);
    let (n, c, vol) = (d[0], d[1], d[2..].iter().product::<usize>());
    let cb = c.div_ceil(4);
    let es = t.dtype.size();
    let mut out = vec![0u8; n * cb * vol * 4 * es];
    for ni in 0..n {
        for ci in 0..c {
            let src = &t.data[(ni * c + ci) * vol * es..][..vol * es];
            let base = (ni * cb + ci / 4) * vol * 4;
            for (p, e) in src.chunks_exact(es).enumerate() {
                out[(base + p * 4 + ci % 4) * es..][..es].copy_from_slice(e);
            }
        }
    }
    HostTensor::new(t.dtype, blocked_shape(&t.shape), out)
}

/// `[N, CB, s..., 4]` → `[N, c, s...]` (the first `c` channels). Any dtype.
pub fn unblock(t: &HostTensor, c: i64) -> Result<HostTensor, String> {
    let shape = logical(&t.shape, c)?;
    let d = udims(&shape);
    let (n, c, vol) = (d[0], d[1], d[2..].iter().product::<usize>());
    let cb = t.shape[1] as usize;
    let es = t.dtype.size();
    let mut out = vec![0u8; n * c * vol * es];
    for ni in 0..n {
        for ci in 0..c {
            let dst = &mut out[(ni * c + ci) * vol * es..][..vol * es];
            let base = (ni * cb + ci / 4) * vol * 4;
            for (p, e) in dst.chunks_exact_mut(es).enumerate() {
                e.copy_from_slice(&t.data[(base + p * 4 + ci % 4) * es..][..es]);
            }
        }
    }
    HostTensor::new(t.dtype, shape, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{AttrValue, OpId};

    fn info(shape: &[i64]) -> Option<TensorInfo<'_>> {
        Some(TensorInfo { dtype: DType::F32, shape, value: None })
    }

    fn call(op: &str, ins: &[Option<TensorInfo>], tex: &[bool], attrs: &Attrs) -> Result<BlockedCall, String> {
        infer(OpId::from_name(op).unwrap().def(), ins, tex, &[Some(true)], attrs)
    }

    #[test]
    fn block_and_unblock_round_trip_with_padding_channels() {
        let data: Vec<u8> = (0..2 * 6 * 3).flat_map(|v| (v as f32).to_le_bytes()).collect();
        let t = HostTensor::new(DType::F32, vec![2, 6, 3], data).unwrap();
        let b = block(&t).unwrap();
        assert_eq!(b.shape, vec![2, 2, 3, 4]);
        let v = b.to_f64();
        // n 0, block 1, position 2: channels 4, 5, then two zero padding channels.
        assert_eq!(&v[(3 + 2) * 4..][..4], &[14.0, 17.0, 0.0, 0.0]);
        assert_eq!(unblock(&b, 6).unwrap(), t);
        assert!(unblock(&b, 9).unwrap_err().contains("9 channels take 3 blocks"));
    }

    #[test]
    fn conv_takes_its_channel_count_from_the_weight() {
        let (x, w) = ([1, 1, 5, 7, 4], [8, 3, 3, 3]);
        let c = call("Conv", &[info(&x), info(&w), None], &[true, false, false], &Attrs::default()).unwrap();
        assert_eq!(c.logical_in[0], Some(vec![1, 3, 5, 7]));
        assert_eq!(c.out, (DType::F32, vec![1, 2, 3, 5, 4]));
        let w = [8, 5, 3, 3];
        let e = call("Conv", &[info(&x), info(&w), None], &[true, false, false], &Attrs::default()).unwrap_err();
        assert!(e.contains("5 channels take 2 blocks"), "{e}");
        let e = call("Conv", &[info(&x), info(&w), None], &[true, true, false], &Attrs::default()).unwrap_err();
        assert!(e.contains("input 2 is a parameter"), "{e}");
    }

    #[test]
    fn concat_joins_channel_blocks_and_rejects_other_axes() {
        let (a, b) = ([1, 2, 3, 3, 4], [1, 1, 3, 3, 4]);
        let axis1 = Attrs(vec![("axis".into(), AttrValue::Int(1))]);
        let c = call("Concat", &[info(&a), info(&b)], &[true, true], &axis1).unwrap();
        assert_eq!(c.out.1, vec![1, 3, 3, 3, 4]);
        let attrs = Attrs(vec![("axis".into(), AttrValue::Int(2))]);
        let e = call("Concat", &[info(&a), info(&b)], &[true, true], &attrs).unwrap_err();
        assert!(e.contains("axis 1"), "{e}");
    }

    #[test]
    fn elementwise_needs_one_shape_and_softmax_has_no_texture_form() {
        let (a, b) = ([1, 2, 3, 3, 4], [1, 2, 1, 3, 4]);
        let e = call("Add", &[info(&a), info(&b)], &[true, true], &Attrs::default()).unwrap_err();
        assert!(e.contains("no broadcasting"), "{e}");
        let e = call("Add", &[info(&a), info(&a)], &[true, false], &Attrs::default()).unwrap_err();
        assert!(e.contains("input 2 is a buffer view"), "{e}");
        let e = call("Softmax", &[info(&a)], &[true], &Attrs::default()).unwrap_err();
        assert!(e.contains("no texture form"), "{e}");
    }
}
