//! Operator schemas of the recurrent family: RNN, GRU and LSTM (the kernels are in
//! `crate::ops::recurrent` and `crate::ops::recurrent_cl`).
//!
//! All three take X `[seq, batch, input]` (`layout` 1: `[batch, seq, input]`), weights W
//! `[dirs, gates·hidden, input]`, recurrence weights R `[dirs, gates·hidden, hidden]`, the
//! optional bias B `[dirs, 2·gates·hidden]` (W's bias then R's), `sequence_lens` `[batch]`
//! (i32), `initial_h` `[dirs, batch, hidden]` (`layout` 1: `[batch, dirs, hidden]`) and, for
//! LSTM, `initial_c` (as `initial_h`) and the peepholes P `[dirs, 3·hidden]` (input, output,
//! forget). They produce Y `[seq, dirs, batch, hidden]` (`layout` 1: `[batch, seq, dirs,
//! hidden]`), the last hidden state Y_h and, for LSTM, the last cell state Y_c (both shaped
//! as `initial_h`). Steps past a batch row's sequence length leave Y zero and its state as
//! it was; the reverse direction runs from the row's last step to its first.
//!
//! ONNX's `activations` is a list of strings: the importer passes a string list as one
//! string, its items joined by commas.

use super::elementwise::{check_dtype, input, optional};
use super::tensor::check_shape;
use crate::ir::attrs::*;
use crate::ir::schema::*;
use crate::ir::types::DType;

/// The float dtypes the recurrent operators take.
pub(crate) const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::F64];

const RNN_ATTRS: &[AttrSpec] = &[
    attr!("activation_alpha", Floats),
    attr!("activation_beta", Floats),
    attr!("activations", Str),
    attr!("clip", Float),
    attr!("direction", Str),
    attr!("hidden_size", Int),
    attr!("layout", Int),
];

const GRU_ATTRS: &[AttrSpec] = &[
    attr!("activation_alpha", Floats),
    attr!("activation_beta", Floats),
    attr!("activations", Str),
    attr!("clip", Float),
    attr!("direction", Str),
    attr!("hidden_size", Int),
    attr!("layout", Int),
    attr!("linear_before_reset", Int),
];

const LSTM_ATTRS: &[AttrSpec] = &[
    attr!("activation_alpha", Floats),
    attr!("activation_beta", Floats),
    attr!("activations", Str),
    attr!("clip", Float),
    attr!("direction", Str),
    attr!("hidden_size", Int),
    attr!("input_forget", Int),
    attr!("layout", Int),
];

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(RNN, in 3..=6, out 1..=2, attrs RNN_ATTRS, validate validate_rnn, infer infer_rnn,
        "Elman RNN H = f(X·Wᵀ + H·Rᵀ + Wb + Rb) over the sequence: inputs X, W, R, B?, sequence_lens?, initial_h?; \
        outputs Y, Y_h; direction forward / reverse / bidirectional, layout 0 / 1, activations (default Tanh; \
        Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus) \
        with activation_alpha / beta, clip; f16, f32, f64"),
    op!(GRU, in 3..=6, out 1..=2, attrs GRU_ATTRS, validate validate_gru, infer infer_gru,
        "GRU (gates z, r, h) over the sequence: inputs X, W, R, B?, sequence_lens?, initial_h?; outputs Y, Y_h; \
        direction, layout, activations (default Sigmoid, Tanh) with alpha / beta, clip, linear_before_reset; \
        f16, f32, f64"),
    op!(LSTM, in 3..=8, out 1..=3, attrs LSTM_ATTRS, validate validate_lstm, infer infer_lstm,
        "LSTM (gates i, o, f, c) over the sequence: inputs X, W, R, B?, sequence_lens?, initial_h?, initial_c?, \
        P? (peepholes); outputs Y, Y_h, Y_c; direction, layout, activations (default Sigmoid, Tanh, Tanh) with \
        alpha / beta, clip, input_forget (f = 1 - i); f16, f32, f64"),
];

/// Which recurrent operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cell {
    Rnn,
    Gru,
    Lstm,
}

impl Cell {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Cell::Rnn => "RNN",
            Cell::Gru => "GRU",
            Cell::Lstm => "LSTM",
        }
    }

    /// Gates per hidden unit (rows of W per unit).
    pub(crate) fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }

    /// Activation functions per direction.
    pub(crate) fn activations(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 2,
            Cell::Lstm => 3,
        }
    }

    fn default_activations(self) -> &'static [ActKind] {
        match self {
            Cell::Rnn => &[ActKind::Tanh],
            Cell::Gru => &[ActKind::Sigmoid, ActKind::Tanh],
            Cell::Lstm => &[ActKind::Sigmoid, ActKind::Tanh, ActKind::Tanh],
        }
    }
}

/// An activation function of a recurrent cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ActKind {
    Relu,
    Tanh,
    Sigmoid,
    Affine,
    LeakyRelu,
    ThresholdedRelu,
    ScaledTanh,
    HardSigmoid,
    Elu,
    Softsign,
    Softplus,
}

impl ActKind {
    fn parse(name: &str) -> Option<ActKind> {
        Some(match name.trim().to_ascii_lowercase().as_str() {
            "relu" => ActKind::Relu,
            "tanh" => ActKind::Tanh,
            "sigmoid" => ActKind::Sigmoid,
            "affine" => ActKind::Affine,
            "leakyrelu" => ActKind::LeakyRelu,
            "thresholdedrelu" => ActKind::ThresholdedRelu,
            "scaledtanh" => ActKind::ScaledTanh,
            "hardsigmoid" => ActKind::HardSigmoid,
            "elu" => ActKind::Elu,
            "softsign" => ActKind::Softsign,
            "softplus" => ActKind::Softplus,
            _ => return None,
        })
    }

    /// The default (alpha, beta) and which of them the function uses.
    fn params(self) -> ((bool, f64), (bool, f64)) {
        match self {
            ActKind::Affine => ((true, 1.0), (true, 0.0)),
            ActKind::LeakyRelu => ((true, 0.01), (false, 0.0)),
            ActKind::ThresholdedRelu => ((true, 1.0), (false, 0.0)),
            ActKind::ScaledTanh => ((true, 1.0), (true, 1.0)),
            ActKind::HardSigmoid => ((true, 0.2), (true, 0.5)),
            ActKind::Elu => ((true, 1.0), (false, 0.0)),
            _ => ((false, 0.0), (false, 0.0)),
        }
    }
}

/// An activation with its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Act {
    pub(crate) kind: ActKind,
    pub(crate) alpha: f64,
    pub(crate) beta: f64,
}

impl Act {
    pub(crate) fn apply(&self, x: f64) -> f64 {
        let (a, b) = (self.alpha, self.beta);
        match self.kind {
            ActKind::Relu => x.max(0.0),
            ActKind::Tanh => x.tanh(),
            ActKind::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            ActKind::Affine => a * x + b,
            ActKind::LeakyRelu => {
                if x >= 0.0 {
                    x
                } else {
                    a * x
                }
            }
            ActKind::ThresholdedRelu => {
                if x > a {
                    x
                } else {
                    0.0
                }
            }
            ActKind::ScaledTanh => a * (b * x).tanh(),
            ActKind::HardSigmoid => (a * x + b).clamp(0.0, 1.0),
            ActKind::Elu => {
                if x >= 0.0 {
                    x
                } else {
                    a * (x.exp() - 1.0)
                }
            }
            ActKind::Softsign => x / (1.0 + x.abs()),
            ActKind::Softplus => {
                // log(1 + e^x) without overflow.
                if x > 0.0 {
                    x + (-x).exp().ln_1p()
                } else {
                    x.exp().ln_1p()
                }
            }
        }
    }
}

/// A recurrent operator's direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Forward,
    Reverse,
    Bidirectional,
}

/// A recurrent operator's attributes, checked.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RnnAttrs {
    pub(crate) cell: Cell,
    pub(crate) direction: Direction,
    /// `cell.activations()` per direction, forward first.
    pub(crate) acts: Vec<Act>,
    pub(crate) clip: Option<f64>,
    pub(crate) layout: i64,
    pub(crate) hidden_size: Option<i64>,
    pub(crate) input_forget: bool,
    pub(crate) linear_before_reset: bool,
}

impl RnnAttrs {
    pub(crate) fn dirs(&self) -> usize {
        if self.direction == Direction::Bidirectional {
            2
        } else {
            1
        }
    }

    /// Whether direction `d` (0 or 1) runs from the last step to the first.
    pub(crate) fn reversed(&self, d: usize) -> bool {
        self.direction == Direction::Reverse || d == 1
    }

    /// The activations of direction `d`.
    pub(crate) fn acts_of(&self, d: usize) -> &[Act] {
        let n = self.cell.activations();
        self.acts.get(d * n..(d + 1) * n).unwrap_or(&[])
    }
}

pub(crate) fn rnn_attrs(a: &Attrs, cell: Cell) -> Result<RnnAttrs, String> {
    let op = cell.name();
    let direction = match a.str("direction").unwrap_or("forward") {
        "forward" => Direction::Forward,
        "reverse" => Direction::Reverse,
        "bidirectional" => Direction::Bidirectional,
        other => {
            return Err(format!(
                "attribute `direction` of @onnx.{op} must be \"forward\", \"reverse\" or \"bidirectional\", found {other:?}"
            ))
        }
    };
    let dirs = if direction == Direction::Bidirectional { 2 } else { 1 };
    let per = cell.activations();
    let kinds: Vec<ActKind> = match a.str("activations") {
        None => (0..dirs).flat_map(|_| cell.default_activations().iter().copied()).collect(),
        Some(list) => {
            let names: Vec<&str> = list.split(',').collect();
            let mut kinds = Vec::with_capacity(names.len());
            for n in &names {
                kinds.push(ActKind::parse(n).ok_or_else(|| {
                    format!(
                        "attribute `activations` of @onnx.{op}: unknown activation {:?} (Relu, Tanh, Sigmoid, Affine, \
                         LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign or Softplus)",
                        n.trim()
                    )
                })?);
            }
            // ONNX runtimes accept one direction's list for both directions.
            if kinds.len() == per && dirs == 2 {
                kinds.extend_from_within(..);
            }
            if kinds.len() != per * dirs {
                return Err(format!(
                    "attribute `activations` of @onnx.{op} must list {} functions ({per} per direction), found {}",
                    per * dirs,
                    kinds.len()
                ));
            }
            kinds
        }
    };
    let alphas = a.floats("activation_alpha").unwrap_or_default();
    let betas = a.floats("activation_beta").unwrap_or_default();
    let (mut ai, mut bi) = (alphas.iter(), betas.iter());
    let mut acts = Vec::with_capacity(kinds.len());
    for k in kinds {
        let ((ua, da), (ub, db)) = k.params();
        let alpha = if ua { ai.next().copied().unwrap_or(da) } else { da };
        let beta = if ub { bi.next().copied().unwrap_or(db) } else { db };
        if !alpha.is_finite() || !beta.is_finite() {
            return Err(format!("@onnx.{op}: activation_alpha and activation_beta must be finite"));
        }
        acts.push(Act { kind: k, alpha, beta });
    }
    if ai.next().is_some() || bi.next().is_some() {
        return Err(format!(
            "@onnx.{op}: activation_alpha / activation_beta list more values ({} / {}) than the activations use",
            alphas.len(),
            betas.len()
        ));
    }
    let clip = match a.get("clip") {
        None => None,
        Some(_) => {
            let c = a.float("clip", 0.0);
            if c.is_nan() || c <= 0.0 {
                return Err(format!("attribute `clip` of @onnx.{op} must be positive, found {c}"));
            }
            Some(c)
        }
    };
    let layout = a.int("layout", 0);
    if layout != 0 && layout != 1 {
        return Err(format!("attribute `layout` of @onnx.{op} must be 0 or 1, found {layout}"));
    }
    let hidden_size = match a.get("hidden_size") {
        None => None,
        Some(_) => {
            let h = a.int("hidden_size", 0);
            if h < 1 {
                return Err(format!("attribute `hidden_size` of @onnx.{op} must be positive, found {h}"));
            }
            Some(h)
        }
    };
    let flag = |name: &str| -> Result<bool, String> {
        match a.int(name, 0) {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(format!("attribute `{name}` of @onnx.{op} must be 0 or 1, found {v}")),
        }
    };
    Ok(RnnAttrs {
        cell,
        direction,
        acts,
        clip,
        layout,
        hidden_size,
        input_forget: flag("input_forget")?,
        linear_before_reset: flag("linear_before_reset")?,
    })
}

fn validate_rnn(a: &Attrs) -> Result<(), String> {
    rnn_attrs(a, Cell::Rnn).map(|_| ())
}
fn validate_gru(a: &Attrs) -> Result<(), String> {
    rnn_attrs(a, Cell::Gru).map(|_| ())
}
fn validate_lstm(a: &Attrs) -> Result<(), String> {
    rnn_attrs(a, Cell::Lstm).map(|_| ())
}

/// The sizes of a recurrent call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RnnDims {
    pub(crate) attrs: RnnAttrs,
    pub(crate) dtype: DType,
    /// Sequence length, batch, input size, hidden size, directions.
    pub(crate) seq: usize,
    pub(crate) batch: usize,
    pub(crate) input: usize,
    pub(crate) hidden: usize,
    pub(crate) dirs: usize,
    pub(crate) y: Vec<i64>,
    pub(crate) state: Vec<i64>,
}

fn positive(v: i64, what: &str, op: &str) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("{op}: {what} must not be negative, found {v}"))
}

/// Checks a recurrent call's inputs (`ins` as `(dtype, shape)`, `None` for an omitted one).
pub(crate) fn rnn_dims(ins: &[Option<(DType, &[i64])>], a: &Attrs, cell: Cell) -> Result<RnnDims, String> {
    let op = cell.name();
    let at = rnn_attrs(a, cell)?;
    let get = |i: usize| ins.get(i).copied().flatten();
    let names = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"];
    let (Some(x), Some(w), Some(r)) = (get(0), get(1), get(2)) else {
        let i = (0..3).find(|&i| get(i).is_none()).unwrap_or(0);
        return Err(format!("input {} ({}) is required", i + 1, names[i]));
    };
    if !FLOATS.contains(&x.0) {
        return Err(format!("input 1 (X) must be f32, f16 or f64, found {}", x.0));
    }
    for i in [1, 2, 3, 5, 6, 7] {
        if let Some(t) = get(i) {
            if t.0 != x.0 {
                return Err(format!("input {} ({}) must have X's dtype {}, found {}", i + 1, names[i], x.0, t.0));
            }
        }
    }
    let rank = |t: (DType, &[i64]), i: usize, n: usize| -> Result<(), String> {
        if t.1.len() != n {
            return Err(format!("{op}: input {} ({}) must have rank {n}, found shape {:?}", i + 1, names[i], t.1));
        }
        Ok(())
    };
    rank(x, 0, 3)?;
    rank(w, 1, 3)?;
    rank(r, 2, 3)?;
    let dirs = at.dirs();
    let g = cell.gates();
    let (seq, batch) = if at.layout == 0 { (x.1[0], x.1[1]) } else { (x.1[1], x.1[0]) };
    let (seq, batch, input) = (positive(seq, "the sequence length", op)?, positive(batch, "the batch", op)?, x.1[2]);
    let input = positive(input, "the input size", op)?;
    let hidden = match at.hidden_size {
        Some(h) => h,
        None => r.1[2],
    };
    let h = positive(hidden, "hidden_size", op)?;
    let gh = (g as i64).checked_mul(hidden).ok_or_else(|| format!("{op}: hidden_size {hidden} is too large"))?;
    let want = |t: (DType, &[i64]), i: usize, shape: &[i64]| -> Result<(), String> {
        if t.1 != shape {
            return Err(format!(
                "{op}: input {} ({}) must be {shape:?} (direction {:?}, hidden size {hidden}), found {:?}",
                i + 1,
                names[i],
                at.direction,
                t.1
            ));
        }
        Ok(())
    };
    let d = dirs as i64;
    want(w, 1, &[d, gh, input as i64])?;
    want(r, 2, &[d, gh, hidden])?;
    if let Some(b) = get(3) {
        want(b, 3, &[d, 2 * gh])?;
    }
    if let Some(s) = get(4) {
        if s.0 != DType::I32 {
            return Err(format!("input 5 (sequence_lens) must be i32, found {}", s.0));
        }
        want(s, 4, &[batch as i64])?;
    }
    let state = if at.layout == 0 { vec![d, batch as i64, hidden] } else { vec![batch as i64, d, hidden] };
    if let Some(t) = get(5) {
        want(t, 5, &state)?;
    }
    if cell == Cell::Lstm {
        if let Some(t) = get(6) {
            want(t, 6, &state)?;
        }
        if let Some(p) = get(7) {
            want(p, 7, &[d, 3 * hidden])?;
        }
    } else if let Some(i) = (6..ins.len()).find(|&i| get(i).is_some()) {
        return Err(format!("{op} takes at most 6 inputs, found input {}", i + 1));
    }
    let y = if at.layout == 0 {
        vec![seq as i64, d, batch as i64, hidden]
    } else {
        vec![batch as i64, seq as i64, d, hidden]
    };
    check_shape(&y, op)?;
    check_shape(w.1, op)?;
    check_shape(r.1, op)?;
    Ok(RnnDims { attrs: at, dtype: x.0, seq, batch, input, hidden: h, dirs, y, state })
}

fn infer(ins: &[Option<TensorInfo>], a: &Attrs, cell: Cell) -> Result<Vec<OutInfo>, String> {
    input(ins, 0, "X")?;
    if let Some(s) = optional(ins, 4) {
        check_dtype(s, 4, "sequence_lens", &[DType::I32])?;
    }
    let shapes: Vec<Option<(DType, &[i64])>> = ins.iter().map(|t| t.as_ref().map(|t| (t.dtype, t.shape))).collect();
    let dims = rnn_dims(&shapes, a, cell)?;
    let mut outs = vec![(dims.dtype, dims.y.clone()), (dims.dtype, dims.state.clone())];
    if cell == Cell::Lstm {
        outs.push((dims.dtype, dims.state));
    }
    Ok(outs)
}

pub(crate) fn infer_rnn(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    infer(ins, a, Cell::Rnn)
}
pub(crate) fn infer_gru(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    infer(ins, a, Cell::Gru)
}
pub(crate) fn infer_lstm(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    infer(ins, a, Cell::Lstm)
}
