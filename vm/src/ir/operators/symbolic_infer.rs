//! Symbolic shape inference: output dims as [`Expr`]essions of the input dims, so that one
//! compiled program serves every batch size and sequence length (docs/symbolic-shapes.md).
//!
//! [`infer_symbolic`] takes the inputs' dims as expressions. When every dim is a constant it
//! runs the operator's concrete `infer`, so the behaviour is identical. Otherwise the
//! families below compute the output dims symbolically, and the relations they need (two
//! broadcast dims equal, a Reshape's element count kept, a window that fits its input)
//! come back in [`SymInferred::requires`], to be checked at run time. A lower bound
//! `e >= c` is stated as the pair `(max(e, c), e)`.
//!
//! Handled: the shape-preserving unary operators ([`UNARY`]: activations, math, Cast,
//! Identity, Dropout, Softmax, LRN, CumSum, Trilu...), LayerNormalization,
//! BatchNormalization, InstanceNormalization, RMSNormalization, GroupNormalization and
//! PRelu (their parameters related to X's dims), the broadcasting operators (arithmetic,
//! comparisons, logic, bitwise, Where, Max/Min/Sum/Mean; the opset ≤ 6 `axis` placement
//! too), SwiGLU, MatMul, Gemm, Conv, FusedConv, ConvTranspose, MaxPool, AveragePool, GlobalAveragePool,
//! GlobalMaxPool, Flatten, Reshape (constant shape), Transpose, Concat, Split, Slice
//! (constant starts/ends/axes/steps), Gather, Squeeze, Unsqueeze, Expand (constant shape),
//! Tile and Pad (constant repeats and pads), the Reduce operators and ArgMax/ArgMin.
//!
//! Choices:
//! - Broadcasting never assumes that a symbolic dim is 1: a constant 1 broadcasts, equal
//!   expressions agree, and any other pair is required equal (a symbol against a constant
//!   `c` gives `c`). A program compiled this way refuses, at its entry check, a call where
//!   such a symbol is 1 although the operator would have broadcast it.
//! - Symbols are dimension sizes: `0 <= s <= i64::MAX / 8` (a larger dim has no valid
//!   tensor), which decides the clamps of a Slice (`ends = INT_MAX` is the dim).
//! - Dtypes, attribute checks and the number of outputs come from the concrete inference,
//!   run at (up to) two probe values of the symbols that satisfy the relations; its output
//!   shapes must equal the symbolic ones evaluated there, or the result is `Unsupported`.
//!   An error at every probe is `Invalid` (dtype and attribute errors do not depend on
//!   the dims; the shape errors that do are relations).
//!
//! Falls back (`Unsupported`, the caller infers at run time): Shape and Size (their output
//! *value* is the symbolic dims, which inference does not model), operators whose shape
//! depends on an input value that is not a constant (a Reshape by a computed shape,
//! ConstantOfShape, Range, TopK...), Squeeze without axes over a symbolic dim (whether it is
//! 1 decides the rank), symbolic kernels or parameters of PRelu/GroupNormalization/Clip-like
//! inputs, relations for which no probe values are found (contradictory ones such as
//! `%c == 16` and `%c == 17`, or products such as `%n * %s == 12`), and every operator not
//! listed above (Attention and RotaryEmbedding among them: their masks, caches and past
//! key/values relate to Q's dims in more ways than are modelled here yet). Reshape's `-1`
//! with a constant shape is always expressible: the copied (`0`) dims cancel against the
//! input's, and the rest is divided by a constant (a relation requires divisibility).

use super::elementwise::reduce_axes;
use super::nn::{auto_pad, axis_list, flag, pads_list, AutoPad};
use super::tensor::{check_perm, check_reshape_spec, ints_of, norm_axes, validate_pad, validate_slice, validate_split};
use super::Operator;
use crate::ir::attrs::{AttrValue, Attrs};
use crate::ir::host_tensor::HostTensor;
use crate::ir::schema::{OpDef, OutInfo, TensorInfo};
use crate::ir::symbolic::{Expr, SymId};
use crate::ir::types::DType;
use std::fmt;

/// One input of a symbolic inference: dtype, dims as expressions, and the value when
/// constant.
#[derive(Clone, Copy, Debug)]
pub struct SymInfo<'a> {
    pub dtype: DType,
    pub dims: &'a [Expr],
    pub value: Option<&'a HostTensor>,
}

/// The outputs of a symbolic inference and what it assumed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymInferred {
    pub outs: Vec<(DType, Vec<Expr>)>,
    /// Relations inference assumed that the program must check at run time (each pair must
    /// be equal), e.g. two broadcast dims `n` and `m` that must be equal, or a Reshape's
    /// element count preserved. A lower bound `e >= c` is the pair `(max(e, c), e)`.
    pub requires: Vec<(Expr, Expr)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SymError {
    /// The operator or case is not handled symbolically: the caller falls back to run-time
    /// inference.
    Unsupported(String),
    /// Definitely wrong for every value of the symbols.
    Invalid(String),
}

impl fmt::Display for SymError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SymError::Unsupported(m) => write!(f, "no symbolic inference: {m}"),
            SymError::Invalid(m) => f.write_str(m),
        }
    }
}

/// Operators whose every output has the shape of input 1 (their other inputs are scalars
/// or parameters whose checks do not involve input 1's dims).
pub const UNARY: &[Operator] = {
    use Operator::*;
    &[
        Relu,
        Clip,
        LeakyRelu,
        Sigmoid,
        Tanh,
        Exp,
        Sqrt,
        Neg,
        Abs,
        Elu,
        Selu,
        Softplus,
        Softsign,
        Dropout,
        Identity,
        Softmax,
        LogSoftmax,
        LRN,
        Cast,
        CastLike,
        Gelu,
        Erf,
        HardSigmoid,
        HardSwish,
        Mish,
        Celu,
        ThresholdedRelu,
        Log,
        Reciprocal,
        Floor,
        Ceil,
        Round,
        Sign,
        Sin,
        Cos,
        Tan,
        Asin,
        Acos,
        Atan,
        Sinh,
        Cosh,
        Asinh,
        Acosh,
        Atanh,
        Not,
        BitwiseNot,
        IsInf,
        IsNaN,
        Shrink,
        Swish,
        Hardmax,
        LpNormalization,
        MeanVarianceNormalization,
        Trilu,
        CumSum,
        CumProd,
    ]
};

/// Binary broadcasting operators that also take the opset ≤ 6 `broadcast`/`axis` placement.
const LEGACY_BINARY: &[Operator] = {
    use Operator::*;
    &[Add, Sub, Mul, Div, Pow, Mod, Equal, Less, Greater, LessOrEqual, GreaterOrEqual, And, Or, Xor]
};

/// Binary broadcasting operators (numpy rules only).
const BINARY: &[Operator] = {
    use Operator::*;
    &[BitShift, BitwiseAnd, BitwiseOr, BitwiseXor]
};

/// Operators whose inputs all broadcast together, in order.
const VARIADIC: &[Operator] = {
    use Operator::*;
    &[Max, Min, Sum, Mean, Where]
};

const REDUCE: &[Operator] = {
    use Operator::*;
    &[
        ReduceMean,
        ReduceSum,
        ReduceMax,
        ReduceMin,
        ReduceProd,
        ReduceL1,
        ReduceL2,
        ReduceLogSum,
        ReduceLogSumExp,
        ReduceSumSquare,
    ]
};

/// The largest size a dim can have: a tensor's byte size fits in an i64.
const DIM_MAX: i64 = i64::MAX / 8;

/// Infers the outputs of `def` from symbolic inputs (`None` for an omitted optional input).
pub fn infer_symbolic(def: &OpDef, ins: &[Option<SymInfo>], attrs: &Attrs) -> Result<SymInferred, SymError> {
    let all_const = ins.iter().flatten().all(|i| i.dims.iter().all(|d| d.as_const().is_some()));
    if all_const {
        let shapes: Vec<Option<Vec<i64>>> =
            ins.iter().map(|i| i.map(|i| i.dims.iter().filter_map(Expr::as_const).collect())).collect();
        return match run(def, ins, &shapes, attrs) {
            Ok(outs) => Ok(SymInferred {
                outs: outs.into_iter().map(|(d, s)| (d, s.into_iter().map(Expr::constant).collect())).collect(),
                requires: Vec::new(),
            }),
            Err(e) => Err(SymError::Invalid(format!("@onnx.{}: {e}", def.name))),
        };
    }
    let mut cx = Cx { requires: Vec::new(), dims: ins.iter().flatten().flat_map(|i| i.dims.iter().cloned()).collect() };
    match shapes(def.op, &mut cx, ins, attrs) {
        Ok(outs) => finish(def, ins, attrs, outs, cx.requires),
        Err(Fail::Unsupported(m)) => Err(SymError::Unsupported(format!("@onnx.{}: {m}", def.name))),
        Err(Fail::Defer) => Err(deferred(def, ins, attrs)),
    }
}

// ---------------------------------------------------------------------------------------
// Probing the concrete inference.

/// Why a family's symbolic inference stopped.
enum Fail {
    Unsupported(String),
    /// The inputs or attributes are wrong whatever the symbols: the concrete inference at
    /// a probe gives the error.
    Defer,
}

type R<T> = Result<T, Fail>;

fn unsupported<T>(msg: impl Into<String>) -> R<T> {
    Err(Fail::Unsupported(msg.into()))
}

fn ov<T>(v: Option<T>) -> R<T> {
    v.ok_or_else(|| Fail::Unsupported("the dimension arithmetic overflows i64".into()))
}

/// The symbols' values of the probes, in this order of preference: symbol `j` (in sorted
/// order) is `base * (1 + j % 3)` unless a relation decides it. Multiples of 60 satisfy
/// most divisibility relations; small values keep a high-rank tensor's size in range (so
/// that both probes failing is not an overflow of large ones).
const PROBE_BASES: [i64; 4] = [60, 6, 24, 420];

type Valuation = Vec<(SymId, i64)>;

fn lookup(v: &[(SymId, i64)], s: SymId) -> Option<i64> {
    v.iter().find(|(k, _)| *k == s).map(|(_, x)| *x)
}

fn input_symbols(ins: &[Option<SymInfo>]) -> Vec<SymId> {
    let mut out: Vec<SymId> = ins.iter().flatten().flat_map(|i| i.dims.iter().flat_map(Expr::symbols)).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Values of `syms` that satisfy `requires`, if found: a symbol that is the only one
/// without a value in some relations takes the value nearest its default satisfying them
/// all (the solution of a linear one first); when none is alone, the next symbol takes its
/// default, `base * (1 + j % 3)` for the `j`-th.
fn probe_values(syms: &[SymId], requires: &[(Expr, Expr)], base: i64) -> Option<Valuation> {
    let mut val: Valuation = Vec::with_capacity(syms.len());
    loop {
        let unknown: Vec<(usize, SymId)> =
            syms.iter().copied().enumerate().filter(|(_, s)| lookup(&val, *s).is_none()).collect();
        let Some(&(j0, s0)) = unknown.first() else { break };
        let mut progress = false;
        for &(j, s) in &unknown {
            let alone: Vec<&(Expr, Expr)> = requires
                .iter()
                .filter(|(a, b)| {
                    let mut free = a.symbols();
                    free.extend(b.symbols());
                    free.retain(|t| lookup(&val, *t).is_none());
                    free.dedup();
                    free.iter().all(|t| *t == s) && !free.is_empty()
                })
                .collect();
            if alone.is_empty() {
                continue;
            }
            let default = base.checked_mul(1 + (j % 3) as i64)?;
            let v = solve(&alone, s, &val, default)?;
            val.push((s, v));
            progress = true;
            break;
        }
        if !progress {
            val.push((s0, base.checked_mul(1 + (j0 % 3) as i64)?));
        }
    }
    let holds = requires.iter().all(|(a, b)| {
        let (x, y) = (a.eval(&|s| lookup(&val, s)), b.eval(&|s| lookup(&val, s)));
        x.is_some() && x == y
    });
    holds.then_some(val)
}

/// A value of `s` (the other symbols having values in `k`) satisfying every relation of
/// `rel`: the solution of a relation linear in `s`, else the nearest to `default` within
/// 4096 of it.
fn solve(rel: &[&(Expr, Expr)], s: SymId, k: &[(SymId, i64)], default: i64) -> Option<i64> {
    let at = |e: &Expr, v: i64| e.eval(&|t| if t == s { Some(v) } else { lookup(k, t) });
    let ok = |v: i64| v >= 0 && rel.iter().all(|(a, b)| at(a, v).is_some() && at(a, v) == at(b, v));
    for (a, b) in rel {
        // a - b = slope * s + f0 when linear.
        let Some(d) = a.sub(b) else { continue };
        let (Some(f0), Some(f1)) = (at(&d, 0), at(&d, 1)) else { continue };
        let Some(slope) = f1.checked_sub(f0) else { continue };
        if slope != 0 && f0 % slope == 0 && ok(-f0 / slope) {
            return Some(-f0 / slope);
        }
    }
    (0..4096i64).flat_map(|i| [default.saturating_add(i), default.saturating_sub(i + 1)]).find(|&v| ok(v))
}

/// Runs the concrete inference on `shapes` (the inputs' dims evaluated).
fn run(
    def: &OpDef,
    ins: &[Option<SymInfo>],
    shapes: &[Option<Vec<i64>>],
    attrs: &Attrs,
) -> Result<Vec<OutInfo>, String> {
    let infos: Vec<Option<TensorInfo>> = ins
        .iter()
        .zip(shapes)
        .map(|(i, s)| match (i, s) {
            (Some(i), Some(s)) => Some(TensorInfo { dtype: i.dtype, shape: s, value: i.value }),
            _ => None,
        })
        .collect();
    (def.infer)(&infos, attrs)
}

/// The concrete inference at a valuation; `None` when a dim does not evaluate.
fn run_at(
    def: &OpDef,
    ins: &[Option<SymInfo>],
    attrs: &Attrs,
    v: &[(SymId, i64)],
) -> Option<Result<Vec<OutInfo>, String>> {
    let mut shapes = Vec::with_capacity(ins.len());
    for i in ins {
        shapes.push(match i {
            None => None,
            Some(i) => Some(i.dims.iter().map(|d| d.eval(&|s| lookup(v, s))).collect::<Option<Vec<i64>>>()?),
        });
    }
    Some(run(def, ins, &shapes, attrs))
}

/// The concrete inference at up to two probes satisfying `requires`.
fn probes(
    def: &OpDef,
    ins: &[Option<SymInfo>],
    attrs: &Attrs,
    requires: &[(Expr, Expr)],
) -> Vec<(Valuation, Result<Vec<OutInfo>, String>)> {
    let syms = input_symbols(ins);
    let mut out: Vec<(Valuation, Result<Vec<OutInfo>, String>)> = Vec::new();
    for base in PROBE_BASES {
        if out.len() == 2 {
            break;
        }
        let Some(v) = probe_values(&syms, requires, base) else { continue };
        if out.iter().any(|(w, _)| *w == v) {
            continue;
        }
        if let Some(r) = run_at(def, ins, attrs, &v) {
            out.push((v, r));
        }
    }
    out
}

fn show_valuation(v: &[(SymId, i64)]) -> String {
    let parts: Vec<String> = v.iter().map(|(s, x)| format!("%{s} = {x}")).collect();
    parts.join(", ")
}

/// Checks the symbolic outputs against the concrete inference at the probes and takes the
/// dtypes from it.
fn finish(
    def: &OpDef,
    ins: &[Option<SymInfo>],
    attrs: &Attrs,
    outs: Vec<Vec<Expr>>,
    mut requires: Vec<(Expr, Expr)>,
) -> Result<SymInferred, SymError> {
    let name = def.name;
    let mut seen = Vec::with_capacity(requires.len());
    requires.retain(|r| {
        let new = !seen.contains(r);
        if new {
            seen.push(r.clone());
        }
        new
    });
    let results = probes(def, ins, attrs, &requires);
    let Some((_, first)) = results.first() else {
        return Err(SymError::Unsupported(format!(
            "@onnx.{name}: no value of the symbols satisfying the relations was found to check the inference at"
        )));
    };
    let errors: Vec<&String> = results.iter().filter_map(|(_, r)| r.as_ref().err()).collect();
    if let Some(e) = errors.first() {
        return Err(if errors.len() == results.len() {
            SymError::Invalid(format!("@onnx.{name}: {e}"))
        } else {
            SymError::Unsupported(format!(
                "@onnx.{name}: the concrete inference fails for some values of the symbols and not for others ({e})"
            ))
        });
    }
    let first = first.as_ref().map_err(|e| SymError::Invalid(e.clone()))?;
    if first.len() > outs.len() {
        return Err(SymError::Unsupported(format!(
            "@onnx.{name}: the concrete inference gives {} outputs, the symbolic one {}",
            first.len(),
            outs.len()
        )));
    }
    for (v, r) in &results {
        let Ok(c) = r else { continue };
        for (j, ((dt, shape), dims)) in c.iter().zip(&outs).enumerate() {
            let got: Option<Vec<i64>> = dims.iter().map(|d| d.eval(&|s| lookup(v, s))).collect();
            let same_dtype = first.get(j).map(|f| f.0) == Some(*dt);
            if got.as_deref() != Some(shape.as_slice()) || !same_dtype || c.len() != first.len() {
                return Err(SymError::Unsupported(format!(
                    "@onnx.{name}: symbolic inference disagrees with the concrete inference at {} (output {}: {got:?} \
                     vs {shape:?})",
                    show_valuation(v),
                    j + 1
                )));
            }
        }
    }
    let outs = first.iter().zip(outs).map(|((dt, _), dims)| (*dt, dims)).collect();
    Ok(SymInferred { outs, requires })
}

/// The error of inputs the symbolic inference found wrong for every value of the symbols:
/// the concrete inference's, when it fails at the probes.
fn deferred(def: &OpDef, ins: &[Option<SymInfo>], attrs: &Attrs) -> SymError {
    let results = probes(def, ins, attrs, &[]);
    match results.iter().find_map(|(_, r)| r.as_ref().err()) {
        Some(e) if results.iter().all(|(_, r)| r.is_err()) => SymError::Invalid(format!("@onnx.{}: {e}", def.name)),
        _ => SymError::Unsupported(format!(
            "@onnx.{}: the symbolic inference rejects these inputs, but the concrete inference accepts them for some \
             values of the symbols",
            def.name
        )),
    }
}

// ---------------------------------------------------------------------------------------
// Relations.

/// What a family's inference collects.
struct Cx {
    requires: Vec<(Expr, Expr)>,
    /// Sizes: the inputs' dims and clamped indices, each at least 0 and at most DIM_MAX.
    dims: Vec<Expr>,
}

fn c(v: i64) -> Expr {
    Expr::constant(v)
}

impl Cx {
    /// Requires `a == b`; wrong whatever the symbols when they differ by a constant.
    fn eq(&mut self, a: &Expr, b: &Expr) -> R<()> {
        if a == b {
            return Ok(());
        }
        if ov(a.sub(b))?.as_const().is_some() {
            return Err(Fail::Defer);
        }
        self.requires.push((a.clone(), b.clone()));
        Ok(())
    }

    /// Requires `e >= lo`.
    fn ge(&mut self, e: &Expr, lo: i64) -> R<()> {
        let d = ov(e.sub(&c(lo)))?;
        if self.nonneg(&d) {
            return Ok(());
        }
        if d.as_const().is_some() {
            return Err(Fail::Defer);
        }
        self.requires.push((ov(e.maximum(&c(lo)))?, e.clone()));
        Ok(())
    }

    /// A size: an input dim, a symbol, or a positive multiple of a symbol.
    fn size_form(&self, r: &Expr) -> bool {
        if r.as_sym().is_some() || self.dims.contains(r) {
            return true;
        }
        match r.symbols().as_slice() {
            [s] => {
                let k = r.eval(&|_| Some(1)).unwrap_or(0);
                k > 0 && Expr::sym(*s).scale(k).as_ref() == Some(r)
            }
            _ => false,
        }
    }

    /// Whether `e >= 0` for every value of the symbols (as far as its form tells).
    fn nonneg(&self, e: &Expr) -> bool {
        let Some(c0) = e.eval(&|_| Some(0)) else { return false };
        let Some(rest) = e.sub(&c(c0)) else { return false };
        if rest.as_const() == Some(0) {
            return c0 >= 0;
        }
        if c0 >= 0 && self.size_form(&rest) {
            return true;
        }
        // `c0 - d` with `d` a single dim, at most DIM_MAX.
        rest.scale(-1).is_some_and(|neg| (neg.as_sym().is_some() || self.dims.contains(&neg)) && c0 >= DIM_MAX)
    }

    /// Whether `a >= b` for every value of the symbols (as far as the forms tell).
    fn at_least(&self, a: &Expr, b: &Expr) -> bool {
        a.sub(b).is_some_and(|d| self.nonneg(&d))
    }

    fn max(&self, a: &Expr, b: &Expr) -> R<Expr> {
        if self.at_least(a, b) {
            return Ok(a.clone());
        }
        if self.at_least(b, a) {
            return Ok(b.clone());
        }
        ov(a.maximum(b))
    }

    fn min(&self, a: &Expr, b: &Expr) -> R<Expr> {
        if self.at_least(b, a) {
            return Ok(a.clone());
        }
        if self.at_least(a, b) {
            return Ok(b.clone());
        }
        ov(a.minimum(b))
    }

    /// `min(max(v, 0), hi)` for a size `hi`: a size too (recorded as one).
    fn clamp(&mut self, v: &Expr, hi: &Expr) -> R<Expr> {
        let out = if self.at_least(hi, v) {
            self.max(v, &c(0))?
        } else {
            let m = self.max(v, &c(0))?;
            self.min(&m, hi)?
        };
        if !self.dims.contains(&out) {
            self.dims.push(out.clone());
        }
        Ok(out)
    }

    /// The numpy broadcast of two shapes; a pair of dims neither of which is the constant 1
    /// must be equal (a symbolic dim is never taken to be 1).
    fn broadcast(&mut self, a: &[Expr], b: &[Expr]) -> R<Vec<Expr>> {
        let r = a.len().max(b.len());
        let one = c(1);
        let mut out = Vec::with_capacity(r);
        for i in 0..r {
            let da = if i + a.len() >= r { a.get(i + a.len() - r) } else { None }.unwrap_or(&one);
            let db = if i + b.len() >= r { b.get(i + b.len() - r) } else { None }.unwrap_or(&one);
            out.push(if da == db || *db == one {
                da.clone()
            } else if *da == one {
                db.clone()
            } else {
                self.eq(da, db)?;
                if db.as_const().is_some() {
                    db.clone()
                } else {
                    da.clone()
                }
            });
        }
        Ok(out)
    }

    /// `t` broadcasts to `target` unchanged.
    fn broadcasts_to(&mut self, t: &[Expr], target: &[Expr]) -> R<()> {
        let Some(off) = target.len().checked_sub(t.len()) else { return Err(Fail::Defer) };
        for (i, d) in t.iter().enumerate() {
            if *d != c(1) {
                let want = target.get(off + i).ok_or(Fail::Defer)?;
                self.eq(d, want)?;
            }
        }
        Ok(())
    }
}

fn prod(dims: &[Expr]) -> R<Expr> {
    dims.iter().try_fold(c(1), |a, d| ov(a.mul(d)))
}

fn input<'a, 'b>(ins: &'a [Option<SymInfo<'b>>], i: usize) -> R<&'a SymInfo<'b>> {
    ins.get(i).and_then(|x| x.as_ref()).ok_or(Fail::Defer)
}

fn opt<'a, 'b>(ins: &'a [Option<SymInfo<'b>>], i: usize) -> Option<&'a SymInfo<'b>> {
    ins.get(i).and_then(|x| x.as_ref())
}

fn dim(dims: &[Expr], i: usize) -> R<&Expr> {
    dims.get(i).ok_or(Fail::Defer)
}

fn consts(dims: &[Expr], what: &str) -> R<Vec<i64>> {
    dims.iter().map(|d| d.as_const().ok_or_else(|| Fail::Unsupported(format!("{what} has symbolic dims")))).collect()
}

/// The values of a constant index input.
fn value_of(t: &SymInfo, op: &str, what: &str) -> R<Vec<i64>> {
    let v = t.value.ok_or_else(|| {
        Fail::Unsupported(format!("its {what} input is not a constant: its value decides the output shape"))
    })?;
    ints_of(v, op, what).map_err(|_| Fail::Defer)
}

/// A list given as the attribute `name` or as the constant input `i`.
fn attr_or_input(ins: &[Option<SymInfo>], attrs: &Attrs, i: usize, name: &str, op: &str) -> R<Option<Vec<i64>>> {
    match (attrs.ints(name), opt(ins, i)) {
        (Some(_), Some(_)) => Err(Fail::Defer),
        (Some(a), None) => Ok(Some(a.to_vec())),
        (None, Some(t)) => value_of(t, op, name).map(Some),
        (None, None) => Ok(None),
    }
}

fn norm_axis(axis: i64, rank: usize) -> R<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(Fail::Defer);
    }
    Ok((if axis < 0 { axis + r } else { axis }) as usize)
}

fn defer<T, E>(r: Result<T, E>) -> R<T> {
    r.map_err(|_| Fail::Defer)
}

// ---------------------------------------------------------------------------------------
// The families.

/// Output dims of every output the operator may have (the concrete inference at a probe
/// decides how many there are).
fn shapes(op: Operator, cx: &mut Cx, ins: &[Option<SymInfo>], attrs: &Attrs) -> R<Vec<Vec<Expr>>> {
    use Operator as O;
    let x = || input(ins, 0);
    match op {
        O::Shape | O::Size => unsupported(
            "its output value is the input's (symbolic) dims, and symbolic values are not modelled: inferred at run \
             time",
        ),
        // The cache keeps its shape; the update's own dims (a symbolic number of new
        // entries) are checked against it by the concrete inference at the probes.
        O::TensorScatter => Ok(vec![x()?.dims.to_vec()]),
        op if UNARY.contains(&op) => {
            let x = x()?;
            if op != O::CastLike {
                for (i, t) in ins.iter().enumerate().skip(1) {
                    if let Some(t) = t {
                        consts(t.dims, &format!("input {}", i + 1))?;
                    }
                }
            }
            Ok(vec![x.dims.to_vec(); 2])
        }
        op if LEGACY_BINARY.contains(&op) || BINARY.contains(&op) => {
            let (a, b) = (x()?, input(ins, 1)?);
            let mut bd = b.dims.to_vec();
            if let (true, Some(AttrValue::Int(axis))) = (LEGACY_BINARY.contains(&op), attrs.get("axis")) {
                if attrs.int("broadcast", 0) == 1 {
                    let r = a.dims.len() as i64;
                    let start = if *axis < 0 { axis + r } else { *axis };
                    if start < 0 || start + bd.len() as i64 > r {
                        return Err(Fail::Defer);
                    }
                    bd.resize((r - start) as usize, c(1));
                }
            }
            Ok(vec![cx.broadcast(a.dims, &bd)?])
        }
        op if VARIADIC.contains(&op) => {
            let mut out = x()?.dims.to_vec();
            for i in 1..ins.len() {
                out = cx.broadcast(&out, input(ins, i)?.dims)?;
            }
            Ok(vec![out])
        }
        op if REDUCE.contains(&op) => reduce(ins, attrs),
        O::ArgMax | O::ArgMin => {
            let x = x()?;
            let mut d = if x.dims.is_empty() { vec![c(1)] } else { x.dims.to_vec() };
            let axis = norm_axis(attrs.int("axis", 0), d.len())?;
            cx.ge(dim(&d, axis)?, 1)?;
            if attrs.int("keepdims", 1) != 0 {
                if let Some(s) = d.get_mut(axis) {
                    *s = c(1);
                }
            } else {
                d.remove(axis);
            }
            Ok(vec![d])
        }
        O::LayerNormalization => {
            let x = x()?;
            let axis = norm_axis(attrs.int("axis", -1), x.dims.len())?;
            let normalized = x.dims.get(axis..).ok_or(Fail::Defer)?;
            cx.broadcasts_to(input(ins, 1)?.dims, normalized)?;
            if let Some(b) = opt(ins, 2) {
                cx.broadcasts_to(b.dims, normalized)?;
            }
            let stats: Vec<Expr> =
                x.dims.iter().enumerate().map(|(i, d)| if i < axis { d.clone() } else { c(1) }).collect();
            Ok(vec![x.dims.to_vec(), stats.clone(), stats])
        }
        O::BatchNormalization => {
            let x = x()?;
            if x.dims.is_empty() {
                return Err(Fail::Defer);
            }
            let want = if attrs.int("spatial", 1) == 0 {
                prod(x.dims.get(1..).unwrap_or(&[]))?
            } else if x.dims.len() >= 2 {
                dim(x.dims, 1)?.clone()
            } else {
                c(1)
            };
            for i in 1..=4 {
                cx.eq(&prod(input(ins, i)?.dims)?, &want)?;
            }
            let p = input(ins, 3)?.dims.to_vec();
            Ok(vec![x.dims.to_vec(), p.clone(), p.clone(), p.clone(), p])
        }
        O::InstanceNormalization => {
            let x = x()?;
            if x.dims.len() < 3 {
                return Err(Fail::Defer);
            }
            for i in 1..=2 {
                match input(ins, i)?.dims {
                    [d] => cx.eq(d, dim(x.dims, 1)?)?,
                    _ => return Err(Fail::Defer),
                }
            }
            Ok(vec![x.dims.to_vec()])
        }
        O::RMSNormalization => {
            let x = x()?;
            norm_axis(attrs.int("axis", -1), x.dims.len())?;
            cx.broadcasts_to(input(ins, 1)?.dims, x.dims)?;
            Ok(vec![x.dims.to_vec()])
        }
        O::GroupNormalization | O::PRelu => {
            // The parameters relate to the channel dim (and PRelu's to the trailing dims):
            // handled when those are constants.
            let x = x()?;
            let s = input(ins, 1)?;
            consts(s.dims, "the parameter")?;
            if let Some(b) = opt(ins, 2) {
                consts(b.dims, "the parameter")?;
            }
            let trailing = if op == O::PRelu { x.dims.len().saturating_sub(s.dims.len()) } else { x.dims.len() };
            let involved = x.dims.iter().enumerate().filter(|(i, _)| *i == 1 || *i >= trailing);
            for (_, d) in involved {
                if d.as_const().is_none() {
                    return unsupported("the channel dim (or a dim the parameter lines up with) is symbolic");
                }
            }
            Ok(vec![x.dims.to_vec()])
        }
        O::SwiGLU => {
            // A and B have one shape, no broadcasting.
            let (a, b) = (x()?, input(ins, 1)?);
            if a.dims.len() != b.dims.len() {
                return Err(Fail::Defer);
            }
            for (da, db) in a.dims.iter().zip(b.dims) {
                cx.eq(da, db)?;
            }
            Ok(vec![a.dims.to_vec()])
        }
        O::MatMul => matmul(cx, ins),
        O::Gemm => {
            let (a, b) = (x()?, input(ins, 1)?);
            let ([a0, a1], [b0, b1]) = (a.dims, b.dims) else { return Err(Fail::Defer) };
            let (m, k) = if attrs.int("transA", 0) != 0 { (a1, a0) } else { (a0, a1) };
            let (k2, n) = if attrs.int("transB", 0) != 0 { (b1, b0) } else { (b0, b1) };
            cx.eq(k, k2)?;
            if let Some(t) = opt(ins, 2) {
                if t.dims.len() > 2 {
                    return Err(Fail::Defer);
                }
                for (d, want) in t.dims.iter().rev().zip([n, m]) {
                    if *d != c(1) {
                        cx.eq(d, want)?;
                    }
                }
            }
            Ok(vec![vec![m.clone(), n.clone()]])
        }
        O::Conv | O::ConvTranspose => conv(cx, ins, attrs, op == O::ConvTranspose),
        O::FusedConv => {
            let out = conv(cx, ins.get(..3).unwrap_or(ins), attrs, false)?;
            if let (Some(z), Some(y)) = (opt(ins, 3), out.first()) {
                if z.dims.len() != y.len() {
                    return Err(Fail::Defer);
                }
                for (a, b) in z.dims.iter().zip(y) {
                    cx.eq(a, b)?;
                }
            }
            Ok(out)
        }
        O::MaxPool | O::AveragePool => {
            let x = x()?;
            if x.dims.len() < 3 {
                return Err(Fail::Defer);
            }
            let ks = attrs.ints("kernel_shape").ok_or(Fail::Defer)?;
            let sp = x.dims.get(2..).unwrap_or(&[]);
            if ks.len() != sp.len() {
                return Err(Fail::Defer);
            }
            let ceil = defer(flag(attrs, "ceil_mode"))?;
            let mut out = x.dims.get(..2).unwrap_or(&[]).to_vec();
            out.extend(windows(cx, sp, ks, attrs, ceil)?);
            Ok(vec![out.clone(), out])
        }
        O::GlobalAveragePool | O::GlobalMaxPool => {
            let x = x()?;
            if x.dims.len() < 2 {
                return Err(Fail::Defer);
            }
            let mut out = x.dims.get(..2).unwrap_or(&[]).to_vec();
            out.resize(x.dims.len(), c(1));
            Ok(vec![out])
        }
        O::Flatten => {
            let x = x()?;
            let (axis, r) = (attrs.int("axis", 1), x.dims.len() as i64);
            if !(-r..=r).contains(&axis) {
                return Err(Fail::Defer);
            }
            let a = (if axis < 0 { axis + r } else { axis }) as usize;
            let (head, tail) = x.dims.split_at(a.min(x.dims.len()));
            Ok(vec![vec![prod(head)?, prod(tail)?]])
        }
        O::Reshape => reshape(cx, ins, attrs),
        O::Transpose => {
            let x = x()?;
            let r = x.dims.len();
            let perm: Vec<usize> = match attrs.ints("perm") {
                Some(p) => {
                    defer(check_perm(p, "Transpose"))?;
                    if p.len() != r {
                        return Err(Fail::Defer);
                    }
                    p.iter().map(|&v| v as usize).collect()
                }
                None => (0..r).rev().collect(),
            };
            Ok(vec![perm.iter().map(|&p| dim(x.dims, p).cloned()).collect::<R<Vec<Expr>>>()?])
        }
        O::Concat => {
            let axis = match attrs.get("axis") {
                Some(_) => attrs.int("axis", 0),
                None => return Err(Fail::Defer),
            };
            let first = x()?;
            let axis = norm_axis(axis, first.dims.len())?;
            let mut out = first.dims.to_vec();
            let mut sum = c(0);
            for i in 0..ins.len() {
                let t = input(ins, i)?;
                if t.dims.len() != first.dims.len() {
                    return Err(Fail::Defer);
                }
                for (d, (a, b)) in t.dims.iter().zip(first.dims).enumerate() {
                    if d != axis {
                        cx.eq(a, b)?;
                    }
                }
                sum = ov(sum.add(dim(t.dims, axis)?))?;
            }
            if let Some(s) = out.get_mut(axis) {
                *s = sum;
            }
            Ok(vec![out])
        }
        O::Split => split(cx, ins, attrs),
        O::Slice => slice(cx, ins, attrs),
        O::Gather => {
            let (x, idx) = (x()?, input(ins, 1)?);
            let axis = norm_axis(attrs.int("axis", 0), x.dims.len())?;
            let mut out = x.dims.get(..axis).unwrap_or(&[]).to_vec();
            out.extend(idx.dims.iter().cloned());
            out.extend(x.dims.get(axis + 1..).unwrap_or(&[]).iter().cloned());
            Ok(vec![out])
        }
        O::Squeeze => {
            let x = x()?;
            match attr_or_input(ins, attrs, 1, "axes", "Squeeze")?.filter(|a| !a.is_empty()) {
                None => {
                    let mut out = Vec::new();
                    for d in x.dims {
                        match d.as_const() {
                            Some(1) => {}
                            Some(_) => out.push(d.clone()),
                            None => return unsupported(
                                "squeezing every size-1 axis of a tensor with symbolic dims: whether a symbol is 1 \
                                     decides the rank",
                            ),
                        }
                    }
                    Ok(vec![out])
                }
                Some(axes) => {
                    let axes = defer(norm_axes(&axes, x.dims.len(), "Squeeze"))?;
                    for &a in &axes {
                        cx.eq(dim(x.dims, a)?, &c(1))?;
                    }
                    let out = x.dims.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, d)| d.clone());
                    Ok(vec![out.collect()])
                }
            }
        }
        O::Unsqueeze => {
            let x = x()?;
            let axes = attr_or_input(ins, attrs, 1, "axes", "Unsqueeze")?.ok_or(Fail::Defer)?;
            let n = x.dims.len() + axes.len();
            let axes = defer(norm_axes(&axes, n, "Unsqueeze"))?;
            let mut dims = x.dims.iter();
            let out = (0..n).map(|i| if axes.contains(&i) { c(1) } else { dims.next().cloned().unwrap_or(c(1)) });
            Ok(vec![out.collect()])
        }
        O::Expand => {
            let x = x()?;
            let shape = value_of(input(ins, 1)?, "Expand", "shape")?;
            if shape.iter().any(|&d| d < 0) {
                return Err(Fail::Defer);
            }
            let shape: Vec<Expr> = shape.into_iter().map(c).collect();
            Ok(vec![cx.broadcast(x.dims, &shape)?])
        }
        O::Tile => {
            let x = x()?;
            let reps = value_of(input(ins, 1)?, "Tile", "repeats")?;
            if reps.len() != x.dims.len() || reps.iter().any(|&r| r < 0) {
                return Err(Fail::Defer);
            }
            Ok(vec![x.dims.iter().zip(reps).map(|(d, r)| ov(d.scale(r))).collect::<R<Vec<Expr>>>()?])
        }
        O::Pad => pad(cx, ins, attrs),
        _ => unsupported("no symbolic shape inference for this operator yet"),
    }
}

fn reduce(ins: &[Option<SymInfo>], attrs: &Attrs) -> R<Vec<Vec<Expr>>> {
    let x = input(ins, 0)?;
    let axes_shape: Option<Vec<i64>> = opt(ins, 1).map(|t| consts(t.dims, "the axes input")).transpose()?;
    let infos: Vec<Option<TensorInfo>> = vec![
        None,
        opt(ins, 1).zip(axes_shape.as_deref()).map(|(t, shape)| TensorInfo { dtype: t.dtype, shape, value: t.value }),
    ];
    let out = match defer(reduce_axes(&infos, attrs, x.dims.len()))? {
        None => x.dims.to_vec(),
        Some(red) => {
            let keep = attrs.int("keepdims", 1) != 0;
            x.dims
                .iter()
                .zip(&red)
                .filter_map(|(d, &r)| match (r, keep) {
                    (false, _) => Some(d.clone()),
                    (true, true) => Some(c(1)),
                    (true, false) => None,
                })
                .collect()
        }
    };
    Ok(vec![out])
}

fn matmul(cx: &mut Cx, ins: &[Option<SymInfo>]) -> R<Vec<Vec<Expr>>> {
    let (a, b) = (input(ins, 0)?, input(ins, 1)?);
    if a.dims.is_empty() || b.dims.is_empty() {
        return Err(Fail::Defer);
    }
    let a2 = if a.dims.len() == 1 { vec![c(1), dim(a.dims, 0)?.clone()] } else { a.dims.to_vec() };
    let b2 = if b.dims.len() == 1 { vec![dim(b.dims, 0)?.clone(), c(1)] } else { b.dims.to_vec() };
    let (ra, rb) = (a2.len(), b2.len());
    let (m, k, k2, n) = (dim(&a2, ra - 2)?, dim(&a2, ra - 1)?, dim(&b2, rb - 2)?, dim(&b2, rb - 1)?);
    cx.eq(k, k2)?;
    let mut out = cx.broadcast(a2.get(..ra - 2).unwrap_or(&[]), b2.get(..rb - 2).unwrap_or(&[]))?;
    if a.dims.len() > 1 {
        out.push(m.clone());
    }
    if b.dims.len() > 1 {
        out.push(n.clone());
    }
    Ok(vec![out])
}

/// The output size of a sliding window (Conv, pooling) over a dim of size `len`.
#[allow(clippy::too_many_arguments)]
fn window(
    cx: &mut Cx,
    len: &Expr,
    k: i64,
    st: i64,
    di: i64,
    pb: i64,
    pe: i64,
    ap: AutoPad,
    ceil_mode: bool,
) -> R<Expr> {
    if st < 1 || di < 1 || k < 1 {
        return Err(Fail::Defer);
    }
    let span = ov(k.checked_sub(1).and_then(|v| v.checked_mul(di)).and_then(|v| v.checked_add(1)))?;
    match ap {
        AutoPad::SameUpper | AutoPad::SameLower => ov(len.ceil_div(st)),
        AutoPad::Valid | AutoPad::NotSet => {
            let (pb, pe) = if ap == AutoPad::Valid { (0, 0) } else { (pb, pe) };
            let padded = ov(len.add(&c(ov(pb.checked_add(pe))?)))?;
            cx.ge(&padded, span)?;
            let room = ov(padded.sub(&c(span)))?;
            if !(ceil_mode && ap == AutoPad::NotSet) {
                return ov(ov(room.floor_div(st))?.add(&c(1)));
            }
            // ceil_mode: one more window when a partial one remains, unless it would start
            // in the end padding.
            let q = ov(room.ceil_div(st))?;
            let late = ov(ov(ov(q.scale(st))?.sub(len))?.sub(&c(ov(pb.checked_sub(1))?)))?;
            let dropped = cx.min(&cx.max(&late, &c(0))?, &c(1))?;
            ov(ov(q.add(&c(1)))?.sub(&dropped))
        }
    }
}

/// The window output sizes over the spatial dims `sp`.
fn windows(cx: &mut Cx, sp: &[Expr], k: &[i64], attrs: &Attrs, ceil: bool) -> R<Vec<Expr>> {
    let n = sp.len();
    let s = defer(axis_list(attrs, "strides", n, 1))?;
    let d = defer(axis_list(attrs, "dilations", n, 1))?;
    let (pb, pe) = defer(pads_list(attrs, n))?;
    let ap = defer(auto_pad(attrs))?;
    let mut out = Vec::with_capacity(n);
    for (i, len) in sp.iter().enumerate() {
        let at = |v: &[i64]| v.get(i).copied().ok_or(Fail::Defer);
        out.push(window(cx, len, at(k)?, at(&s)?, at(&d)?, at(&pb)?, at(&pe)?, ap, ceil)?);
    }
    Ok(out)
}

fn conv(cx: &mut Cx, ins: &[Option<SymInfo>], attrs: &Attrs, transpose: bool) -> R<Vec<Vec<Expr>>> {
    let (x, w) = (input(ins, 0)?, input(ins, 1)?);
    let r = x.dims.len();
    if r < 3 || w.dims.len() != r {
        return Err(Fail::Defer);
    }
    let g = attrs.int("group", 1);
    if g < 1 {
        return Err(Fail::Defer);
    }
    let (n, ch) = (dim(x.dims, 0)?, dim(x.dims, 1)?);
    cx.eq(&ov(ch.rem(g))?, &c(0))?;
    let m = if transpose {
        cx.eq(dim(w.dims, 0)?, ch)?;
        ov(dim(w.dims, 1)?.scale(g))?
    } else {
        let m = dim(w.dims, 0)?.clone();
        cx.eq(&ov(m.rem(g))?, &c(0))?;
        cx.eq(dim(w.dims, 1)?, &ov(ch.floor_div(g))?)?;
        m
    };
    let k = consts(w.dims.get(2..).unwrap_or(&[]), "the kernel")?;
    if k.iter().any(|&v| v < 1) {
        return Err(Fail::Defer);
    }
    if let Some(b) = opt(ins, 2) {
        match b.dims {
            [d] => cx.eq(d, &m)?,
            _ => return Err(Fail::Defer),
        }
    }
    let sp = x.dims.get(2..).unwrap_or(&[]);
    let mut out = vec![n.clone(), m];
    if !transpose {
        out.extend(windows(cx, sp, &k, attrs, false)?);
        return Ok(vec![out]);
    }
    let nsp = sp.len();
    let s = defer(axis_list(attrs, "strides", nsp, 1))?;
    let d = defer(axis_list(attrs, "dilations", nsp, 1))?;
    let op = defer(axis_list(attrs, "output_padding", nsp, 0))?;
    let (pb, pe) = defer(pads_list(attrs, nsp))?;
    let ap = defer(auto_pad(attrs))?;
    let wanted: Option<&[i64]> = match attrs.ints("output_shape") {
        None => None,
        Some(v) if v.len() == nsp => Some(v),
        Some(v) if v.len() == nsp + 2 => v.get(2..),
        Some(_) => return Err(Fail::Defer),
    };
    for (i, len) in sp.iter().enumerate() {
        let at = |v: &[i64]| v.get(i).copied().ok_or(Fail::Defer);
        let (kk, st, di, opad) = (at(&k)?, at(&s)?, at(&d)?, at(&op)?);
        if st < 1 || di < 1 || kk < 1 || opad < 0 || (opad >= st && opad >= di) {
            return Err(Fail::Defer);
        }
        let size = match (wanted, ap) {
            (Some(w), _) => c(at(w)?),
            (None, AutoPad::SameUpper | AutoPad::SameLower) => ov(len.scale(st))?,
            _ => {
                // st · (len - 1) + opad + (kk - 1) · di + 1 - pads
                let (pb, pe) = if ap == AutoPad::Valid { (0, 0) } else { (at(&pb)?, at(&pe)?) };
                let span = ov(kk.checked_sub(1).and_then(|v| v.checked_mul(di)).and_then(|v| v.checked_add(1)))?;
                let extra = ov(opad.checked_add(span).and_then(|v| v.checked_sub(st)))?;
                let extra = ov(extra.checked_sub(pb).and_then(|v| v.checked_sub(pe)))?;
                let o = ov(ov(len.scale(st))?.add(&c(extra)))?;
                cx.ge(&o, 0)?;
                o
            }
        };
        out.push(size);
    }
    Ok(vec![out])
}

fn reshape(cx: &mut Cx, ins: &[Option<SymInfo>], attrs: &Attrs) -> R<Vec<Vec<Expr>>> {
    const OP: &str = "Reshape";
    let x = input(ins, 0)?;
    let spec = attr_or_input(ins, attrs, 1, "shape", OP)?.ok_or(Fail::Defer)?;
    let allowzero = attrs.int("allowzero", 0) == 1;
    defer(check_reshape_spec(&spec, allowzero, OP))?;
    let mut out: Vec<Option<Expr>> = Vec::with_capacity(spec.len());
    for (i, &d) in spec.iter().enumerate() {
        out.push(match d {
            0 if !allowzero => Some(dim(x.dims, i)?.clone()),
            -1 => None,
            d => Some(c(d)),
        });
    }
    let known: Vec<&Expr> = out.iter().flatten().collect();
    let Some(slot) = out.iter().position(Option::is_none) else {
        let known: Vec<Expr> = known.into_iter().cloned().collect();
        cx.eq(&prod(x.dims)?, &prod(&known)?)?;
        return Ok(vec![known]);
    };
    // The -1 is the input's element count over the product of the others: cancel the
    // symbolic factors they share (each must be nonzero), then divide by a constant.
    let mut rest: Vec<Expr> = x.dims.to_vec();
    let mut k: i64 = 1;
    for f in known {
        if let Some(v) = f.as_const() {
            k = ov(k.checked_mul(v))?;
        } else if let Some(pos) = rest.iter().position(|r| r == f) {
            rest.remove(pos);
            cx.ge(f, 1)?;
        } else {
            return unsupported(
                "the -1 is the element count divided by symbolic dims that do not divide it as expressions",
            );
        }
    }
    if k <= 0 {
        return Err(Fail::Defer);
    }
    let total = prod(&rest)?;
    cx.eq(&ov(total.rem(k))?, &c(0))?;
    let inferred = ov(total.floor_div(k))?;
    let out =
        out.into_iter().enumerate().map(|(i, d)| d.unwrap_or_else(|| if i == slot { inferred.clone() } else { c(0) }));
    Ok(vec![out.collect()])
}

fn split(cx: &mut Cx, ins: &[Option<SymInfo>], attrs: &Attrs) -> R<Vec<Vec<Expr>>> {
    const OP: &str = "Split";
    const MAX: i64 = 64;
    defer(validate_split(attrs))?;
    let x = input(ins, 0)?;
    let axis = norm_axis(attrs.int("axis", 0), x.dims.len())?;
    let size = dim(x.dims, axis)?;
    let given = attr_or_input(ins, attrs, 1, "split", OP)?.filter(|s| !s.is_empty());
    let num = attrs.get("num_outputs").map(|_| attrs.int("num_outputs", 0));
    let outputs = attrs.get("outputs").map(|_| attrs.int("outputs", 0));
    let sizes: Vec<Expr> = match (given, num) {
        (Some(_), Some(_)) => return Err(Fail::Defer),
        (Some(s), None) => {
            if s.iter().any(|&d| d < 0) || s.len() as i64 > MAX || outputs.is_some_and(|o| o != s.len() as i64) {
                return Err(Fail::Defer);
            }
            let sum = ov(s.iter().try_fold(0i64, |a, &d| a.checked_add(d)))?;
            cx.eq(&c(sum), size)?;
            s.into_iter().map(c).collect()
        }
        (None, Some(n)) => {
            if !(1..=MAX).contains(&n) {
                return Err(Fail::Defer);
            }
            let chunk = ov(size.ceil_div(n))?;
            let last = ov(size.sub(&ov(chunk.scale(n - 1))?))?;
            cx.ge(&last, 0)?;
            let mut v = vec![chunk; (n - 1) as usize];
            v.push(last);
            v
        }
        (None, None) => {
            let n = outputs.ok_or(Fail::Defer)?;
            if !(1..=MAX).contains(&n) {
                return Err(Fail::Defer);
            }
            cx.eq(&ov(size.rem(n))?, &c(0))?;
            vec![ov(size.floor_div(n))?; n as usize]
        }
    };
    Ok(sizes
        .into_iter()
        .map(|s| x.dims.iter().enumerate().map(|(i, d)| if i == axis { s.clone() } else { d.clone() }).collect())
        .collect())
}

fn slice(cx: &mut Cx, ins: &[Option<SymInfo>], attrs: &Attrs) -> R<Vec<Vec<Expr>>> {
    const OP: &str = "Slice";
    defer(validate_slice(attrs))?;
    let x = input(ins, 0)?;
    let r = x.dims.len();
    let attr_form = attrs.ints("starts").is_some();
    let input_form = (1..5).any(|i| opt(ins, i).is_some());
    let list = |name: &str| attrs.ints(name).map(<[i64]>::to_vec);
    let value = |i: usize, what: &str| opt(ins, i).map(|t| value_of(t, OP, what)).transpose();
    let (starts, ends, axes, steps) = match (attr_form, input_form) {
        (true, true) => return Err(Fail::Defer),
        (true, false) => (list("starts").unwrap_or_default(), list("ends").unwrap_or_default(), list("axes"), None),
        (false, _) => {
            let (Some(s), Some(e)) = (value(1, "starts")?, value(2, "ends")?) else { return Err(Fail::Defer) };
            (s, e, value(3, "axes")?, value(4, "steps")?)
        }
    };
    let n = starts.len();
    let axes = axes.unwrap_or_else(|| (0..n as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; n]);
    if ends.len() != n || axes.len() != n || steps.len() != n {
        return Err(Fail::Defer);
    }
    let axes = defer(norm_axes(&axes, r, OP))?;
    let mut out = x.dims.to_vec();
    for (i, &a) in axes.iter().enumerate() {
        let d = dim(x.dims, a)?.clone();
        let at = |v: &[i64]| v.get(i).copied().ok_or(Fail::Defer);
        // A step above DIM_MAX takes one element at most, as DIM_MAX + 1 does (the span
        // is at most a size), which keeps the arithmetic in range.
        let (start, end, step) = (at(&starts)?, at(&ends)?, at(&steps)?);
        if step == 0 {
            return Err(Fail::Defer);
        }
        // Below -DIM_MAX, `d + v` is below 0 for every size `d`: -1 clamps alike; above DIM_MAX, `v` is at least every size: DIM_MAX clamps alike.
        let wrap = |v: i64| match v {
            v if v < -DIM_MAX => Ok(c(-1)),
            v if v < 0 => ov(d.add(&c(v))),
            v => Ok(c(v.min(DIM_MAX))),
        };
        let (s, e) = (wrap(start)?, wrap(end)?);
        let count = if step > 0 {
            let (s, e) = (cx.clamp(&s, &d)?, cx.clamp(&e, &d)?);
            ov(cx.max(&ov(e.sub(&s))?, &c(0))?.ceil_div(step.min(DIM_MAX + 1)))?
        } else {
            let last = ov(d.sub(&c(1)))?;
            let (s, e) = (cx.min(&cx.max(&s, &c(0))?, &last)?, cx.min(&cx.max(&e, &c(-1))?, &last)?);
            ov(cx.max(&ov(s.sub(&e))?, &c(0))?.ceil_div(step.saturating_neg().min(DIM_MAX + 1)))?
        };
        if let Some(o) = out.get_mut(a) {
            *o = count;
        }
    }
    Ok(vec![out])
}

fn pad(cx: &mut Cx, ins: &[Option<SymInfo>], attrs: &Attrs) -> R<Vec<Vec<Expr>>> {
    const OP: &str = "Pad";
    defer(validate_pad(attrs))?;
    let x = input(ins, 0)?;
    let r = x.dims.len();
    let mode = attrs.str("mode").unwrap_or("constant");
    let pads = match (attrs.ints("pads").or(attrs.ints("paddings")), opt(ins, 1)) {
        (Some(_), Some(_)) | (None, None) => return Err(Fail::Defer),
        (Some(p), None) => p.to_vec(),
        (None, Some(t)) => value_of(t, OP, "pads")?,
    };
    if let Some(v) = opt(ins, 2) {
        consts(v.dims, "the constant_value input")?;
    }
    let axes = match opt(ins, 3) {
        Some(t) => defer(norm_axes(&value_of(t, OP, "axes")?, r, OP))?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(Fail::Defer);
    }
    let (mut begin, mut end) = (vec![0i64; r], vec![0i64; r]);
    for (i, &a) in axes.iter().enumerate() {
        if let (Some(b), Some(e)) = (begin.get_mut(a), end.get_mut(a)) {
            (*b, *e) = (pads.get(i).copied().unwrap_or(0), pads.get(i + axes.len()).copied().unwrap_or(0));
        }
    }
    let mut out = Vec::with_capacity(r);
    for ((d, &b), &e) in x.dims.iter().zip(&begin).zip(&end) {
        let crop = ov(b.min(0).checked_neg().zip(e.min(0).checked_neg()).and_then(|(x, y)| x.checked_add(y)))?;
        let kept = ov(d.sub(&c(crop)))?;
        cx.ge(&kept, 0)?;
        let (a0, a1) = (b.max(0), e.max(0));
        if mode != "constant" && (a0 > 0 || a1 > 0) {
            cx.ge(&kept, 1)?;
        }
        out.push(ov(kept.add(&c(ov(a0.checked_add(a1))?)))?);
    }
    Ok(vec![out])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::bytecode::OpId;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    use std::cell::Cell;

    fn def(name: &str) -> &'static OpDef {
        OpId::from_name(name).unwrap_or_else(|| panic!("no operator {name}")).def()
    }

    fn attrs(v: &[(&str, AttrValue)]) -> Attrs {
        Attrs(v.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    fn ints(v: &[i64]) -> AttrValue {
        AttrValue::Ints(v.to_vec())
    }

    fn i64s(v: &[i64]) -> HostTensor {
        HostTensor::new(DType::I64, vec![v.len() as i64], v.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap()
    }

    fn s(i: SymId) -> Expr {
        Expr::sym(i)
    }

    fn name(i: SymId) -> String {
        ["%n", "%s", "%h", "%w"].get(i as usize).map_or_else(|| format!("%s{i}"), |n| n.to_string())
    }

    fn show(e: &Expr) -> String {
        e.display(&name).to_string()
    }

    /// A symbolic input: dtype, dims, value.
    type SymIn = Option<(DType, Vec<Expr>, Option<HostTensor>)>;

    /// Symbolic inference of `op` on inputs given as (dtype, dims, value).
    fn infer(op: &str, ins: &[SymIn], a: &Attrs) -> Result<SymInferred, SymError> {
        let infos: Vec<Option<SymInfo>> =
            ins.iter().map(|i| i.as_ref().map(|(d, dims, v)| SymInfo { dtype: *d, dims, value: v.as_ref() })).collect();
        infer_symbolic(def(op), &infos, a)
    }

    fn f32_in(dims: &[Expr]) -> SymIn {
        Some((DType::F32, dims.to_vec(), None))
    }

    fn value_in(v: &[i64]) -> SymIn {
        Some((DType::I64, vec![c(v.len() as i64)], Some(i64s(v))))
    }

    fn eval_at(e: &Expr, vals: &[i64]) -> i64 {
        e.eval(&|s| vals.get(s as usize).copied()).unwrap()
    }

    fn holds(r: &SymInferred, vals: &[i64]) -> bool {
        let get = |s: SymId| vals.get(s as usize).copied();
        r.requires.iter().all(|(a, b)| a.eval(&get).is_some() && a.eval(&get) == b.eval(&get))
    }

    // -----------------------------------------------------------------------------------
    // Hand-written cases.

    #[test]
    fn conv_over_a_symbolic_batch_and_spatial_dims() {
        let x = [s(0), c(3), s(2), s(3)];
        let w = [c(16), c(3), c(3), c(3)];
        let a = attrs(&[("strides", ints(&[2, 2])), ("pads", ints(&[1, 1, 1, 1]))]);
        let r = infer("Conv", &[f32_in(&x), f32_in(&w), f32_in(&[c(16)])], &a).unwrap();
        let (dt, dims) = &r.outs[0];
        assert_eq!(*dt, DType::F32);
        let shown: Vec<String> = dims.iter().map(show).collect();
        assert_eq!(shown, ["%n", "16", "(%h + 1) // 2", "(%w + 1) // 2"]);
        assert_eq!(eval_at(&dims[2], &[1, 0, 224, 223]), 112);
        assert_eq!(eval_at(&dims[3], &[1, 0, 224, 223]), 112);
        // The window must fit: h + 2 >= 3.
        assert_eq!(r.requires.len(), 2, "{:?}", r.requires);
        assert!(!holds(&r, &[1, 0, 0, 5]) && holds(&r, &[1, 0, 1, 5]));
        // A channel count that does not match the weight is wrong for every batch.
        let bad = infer("Conv", &[f32_in(&[s(0), c(4), s(2), s(3)]), f32_in(&w)], &a);
        assert!(matches!(bad, Err(SymError::Invalid(_))), "{bad:?}");
        // A symbolic channel count is a relation with the weight.
        let r = infer("Conv", &[f32_in(&[s(0), s(1), c(8), c(8)]), f32_in(&w)], &attrs(&[])).unwrap();
        assert_eq!(r.requires, vec![(c(3), s(1))]);
        assert_eq!(r.outs[0].1, vec![s(0), c(16), c(6), c(6)]);
    }

    #[test]
    fn pooling_ceil_mode_and_same_padding() {
        let x = [s(0), c(8), s(2), s(2)];
        let a = attrs(&[("kernel_shape", ints(&[3, 3])), ("strides", ints(&[2, 2])), ("ceil_mode", AttrValue::Int(1))]);
        let r = infer("MaxPool", &[f32_in(&x)], &a).unwrap();
        assert_eq!(r.outs.len(), 2, "Y and Indices");
        assert_eq!(r.outs[1].0, DType::I64);
        for h in 3..40 {
            let want = (def("MaxPool").infer)(
                &[Some(TensorInfo { dtype: DType::F32, shape: &[1, 8, h, h], value: None })],
                &a,
            )
            .unwrap();
            assert_eq!(eval_at(&r.outs[0].1[2], &[1, 0, h]), want[0].1[2], "h = {h}");
        }
        let a = attrs(&[
            ("kernel_shape", ints(&[3, 3])),
            ("strides", ints(&[2, 2])),
            ("auto_pad", AttrValue::Str("SAME_UPPER".into())),
        ]);
        let r = infer("AveragePool", &[f32_in(&x)], &a).unwrap();
        assert_eq!(show(&r.outs[0].1[2]), "(%h + 1) // 2");
        assert!(r.requires.is_empty());
    }

    #[test]
    fn reshape_with_minus_one_and_zero() {
        let x = [s(0), s(1), c(768)];
        let r = infer("Reshape", &[f32_in(&x), value_in(&[0, 0, 12, -1])], &attrs(&[])).unwrap();
        assert_eq!(r.outs[0].1, vec![s(0), s(1), c(12), c(64)]);
        // The copied dims are cancelled: they must not be 0 (the -1 is undefined then).
        assert_eq!(r.requires.len(), 2);
        assert!(holds(&r, &[1, 1]) && !holds(&r, &[0, 5]));
        let r = infer("Reshape", &[f32_in(&x), value_in(&[-1, 768])], &attrs(&[])).unwrap();
        assert_eq!(r.outs[0].1, vec![s(0).mul(&s(1)).unwrap(), c(768)]);
        assert!(r.requires.is_empty());
        // [n, 6] -> [-1, 4]: 6n / 4 needs n even.
        let r = infer("Reshape", &[f32_in(&[s(0), c(6)]), value_in(&[-1, 4])], &attrs(&[])).unwrap();
        assert_eq!(eval_at(&r.outs[0].1[0], &[10]), 15);
        assert!(holds(&r, &[10]) && !holds(&r, &[3]));
        // Without -1 the element counts must agree.
        let r = infer("Reshape", &[f32_in(&[s(0), c(6)]), value_in(&[3, 4])], &attrs(&[])).unwrap();
        assert_eq!(r.requires, vec![(s(0).scale(6).unwrap(), c(12))]);
        // [n, 6] -> [-1, 5] needs n a multiple of 5.
        let r = infer("Reshape", &[f32_in(&[s(0), c(6)]), value_in(&[-1, 5])], &attrs(&[])).unwrap();
        assert!(holds(&r, &[5]) && !holds(&r, &[6]));
        // A computed shape is not known at compile time.
        let computed = Some((DType::I64, vec![c(2)], None));
        let e = infer("Reshape", &[f32_in(&x), computed], &attrs(&[]));
        assert!(matches!(e, Err(SymError::Unsupported(_))), "{e:?}");
        // Two -1s are wrong whatever the dims.
        let e = infer("Reshape", &[f32_in(&x), value_in(&[-1, -1])], &attrs(&[]));
        assert!(matches!(e, Err(SymError::Invalid(_))), "{e:?}");
    }

    #[test]
    fn matmul_over_a_symbolic_sequence() {
        let r = infer("MatMul", &[f32_in(&[s(0), s(1), c(768)]), f32_in(&[c(768), c(3072)])], &attrs(&[])).unwrap();
        assert_eq!(r.outs[0].1, vec![s(0), s(1), c(3072)]);
        assert!(r.requires.is_empty());
        // Attention scores: [n, 12, s, 64] x [n, 12, 64, s] -> [n, 12, s, s].
        let q = [s(0), c(12), s(1), c(64)];
        let k = [s(0), c(12), c(64), s(1)];
        let r = infer("MatMul", &[f32_in(&q), f32_in(&k)], &attrs(&[])).unwrap();
        assert_eq!(r.outs[0].1, vec![s(0), c(12), s(1), s(1)]);
        // 1-D operands.
        let r = infer("MatMul", &[f32_in(&[s(1)]), f32_in(&[s(1), c(5)])], &attrs(&[])).unwrap();
        assert_eq!(r.outs[0].1, vec![c(5)]);
        // Inner dims: constants that differ are wrong, symbols are related.
        let e = infer("MatMul", &[f32_in(&[s(0), c(768)]), f32_in(&[c(512), c(10)])], &attrs(&[]));
        assert!(matches!(e, Err(SymError::Invalid(_))), "{e:?}");
        let r = infer("MatMul", &[f32_in(&[s(0), s(1)]), f32_in(&[s(2), c(10)])], &attrs(&[])).unwrap();
        assert_eq!(r.requires, vec![(s(1), s(2))]);
        let r = infer(
            "Gemm",
            &[f32_in(&[s(0), c(64)]), f32_in(&[c(10), c(64)]), f32_in(&[c(10)])],
            &attrs(&[("transB", AttrValue::Int(1))]),
        )
        .unwrap();
        assert_eq!(r.outs[0].1, vec![s(0), c(10)]);
    }

    #[test]
    fn slice_on_a_symbolic_dim() {
        let x = [s(0), s(1), c(64)];
        let slice = |st: i64, en: i64, step: i64| {
            infer(
                "Slice",
                &[f32_in(&x), value_in(&[st]), value_in(&[en]), value_in(&[1]), value_in(&[step])],
                &attrs(&[]),
            )
            .unwrap()
        };
        // To the end: exactly the dim.
        let r = slice(0, i64::MAX, 1);
        assert_eq!(r.outs[0].1, x.to_vec());
        // The first 3 (fewer when the sequence is shorter).
        let r = slice(0, 3, 1);
        assert_eq!(show(&r.outs[0].1[1]), "min(3, %s)");
        // The last one, the reversed sequence, every other one.
        for (st, en, step) in [(-1, i64::MAX, 1), (-1, i64::MIN, -1), (1, -1, 2), (5, 2, -2)] {
            let r = slice(st, en, step);
            assert!(r.requires.is_empty());
            for len in 0..12 {
                let want = (def("Slice").infer)(
                    &[
                        Some(TensorInfo { dtype: DType::F32, shape: &[2, len, 64], value: None }),
                        Some(TensorInfo { dtype: DType::I64, shape: &[1], value: Some(&i64s(&[st])) }),
                        Some(TensorInfo { dtype: DType::I64, shape: &[1], value: Some(&i64s(&[en])) }),
                        Some(TensorInfo { dtype: DType::I64, shape: &[1], value: Some(&i64s(&[1])) }),
                        Some(TensorInfo { dtype: DType::I64, shape: &[1], value: Some(&i64s(&[step])) }),
                    ],
                    &attrs(&[]),
                )
                .unwrap();
                assert_eq!(eval_at(&r.outs[0].1[1], &[2, len]), want[0].1[1], "{st}..{en} step {step}, len {len}");
            }
        }
    }

    #[test]
    fn broadcasting_relations() {
        // A constant 1 broadcasts; equal expressions agree.
        let r = infer("Add", &[f32_in(&[s(0), c(1), s(1)]), f32_in(&[c(4), s(1)])], &attrs(&[])).unwrap();
        assert_eq!(r.outs[0].1, vec![s(0), c(4), s(1)]);
        assert!(r.requires.is_empty());
        // Two symbols must be equal; a symbol against a constant is that constant.
        let r = infer("Mul", &[f32_in(&[s(0), s(1)]), f32_in(&[s(2)])], &attrs(&[])).unwrap();
        assert_eq!(r.requires, vec![(s(1), s(2))]);
        assert_eq!(r.outs[0].1, vec![s(0), s(1)]);
        let r = infer("Sub", &[f32_in(&[s(0), s(1)]), f32_in(&[c(5)])], &attrs(&[])).unwrap();
        assert_eq!(r.outs[0].1, vec![s(0), c(5)]);
        assert_eq!(r.requires, vec![(s(1), c(5))]);
        // Two different constants never broadcast.
        let e = infer("Add", &[f32_in(&[s(0), c(3)]), f32_in(&[c(4)])], &attrs(&[]));
        assert!(matches!(e, Err(SymError::Invalid(_))), "{e:?}");
        // n against n + 1 never agrees either.
        let e = infer("Add", &[f32_in(&[s(0)]), f32_in(&[s(0).add(&c(1)).unwrap()])], &attrs(&[]));
        assert!(matches!(e, Err(SymError::Invalid(_))), "{e:?}");
        // Where: bool condition, three inputs.
        let cond = Some((DType::Bool, vec![c(1), s(1)], None));
        let r = infer("Where", &[cond, f32_in(&[s(0), c(1)]), f32_in(&[c(1)])], &attrs(&[])).unwrap();
        assert_eq!(r.outs[0], (DType::F32, vec![s(0), s(1)]));
        // Dtype errors are Invalid (an i64 condition).
        let cond = Some((DType::I64, vec![c(1), s(1)], None));
        let e = infer("Where", &[cond, f32_in(&[s(0), c(1)]), f32_in(&[c(1)])], &attrs(&[]));
        assert!(matches!(e, Err(SymError::Invalid(_))), "{e:?}");
    }

    #[test]
    fn shape_falls_back_and_constants_delegate() {
        let e = infer("Shape", &[f32_in(&[s(0), c(3)])], &attrs(&[]));
        assert!(matches!(&e, Err(SymError::Unsupported(m)) if m.contains("symbolic")), "{e:?}");
        let r = infer("Shape", &[f32_in(&[c(2), c(3)])], &attrs(&[])).unwrap();
        assert_eq!(r.outs, vec![(DType::I64, vec![c(2)])]);
        let e = infer("TopK", &[f32_in(&[s(0), c(3)]), value_in(&[2])], &attrs(&[]));
        assert!(matches!(e, Err(SymError::Unsupported(_))), "{e:?}");
    }

    #[test]
    fn squeeze_and_layer_norm() {
        let r = infer("Squeeze", &[f32_in(&[s(0), c(1), s(1)]), value_in(&[1])], &attrs(&[])).unwrap();
        assert_eq!(r.outs[0].1, vec![s(0), s(1)]);
        let r = infer("Squeeze", &[f32_in(&[s(0), c(1), s(1)]), value_in(&[0])], &attrs(&[])).unwrap();
        assert_eq!(r.requires, vec![(s(0), c(1))]);
        let e = infer("Squeeze", &[f32_in(&[s(0), c(1), s(1)])], &attrs(&[]));
        assert!(matches!(e, Err(SymError::Unsupported(_))), "{e:?}");
        let x = [s(0), s(1), c(768)];
        let r = infer("LayerNormalization", &[f32_in(&x), f32_in(&[c(768)]), f32_in(&[c(768)])], &attrs(&[])).unwrap();
        assert_eq!(r.outs.len(), 3);
        assert_eq!(r.outs[1].1, vec![s(0), s(1), c(1)]);
        let e = infer("LayerNormalization", &[f32_in(&x), f32_in(&[c(512)])], &attrs(&[]));
        assert!(matches!(e, Err(SymError::Invalid(_))), "{e:?}");
        let r = infer("LayerNormalization", &[f32_in(&[s(0), s(2)]), f32_in(&[c(768)])], &attrs(&[])).unwrap();
        assert_eq!(r.requires, vec![(c(768), s(2))]);
    }

    /// Inputs the inference must reject (or leave to run time) without panicking.
    #[test]
    fn bad_inputs_are_errors_not_panics() {
        let x = [s(0), c(3)];
        let cases: Vec<(&str, Vec<SymIn>, Attrs)> = vec![
            ("Conv", vec![f32_in(&x), f32_in(&[c(4), c(3), c(3)])], attrs(&[])),
            ("Conv", vec![f32_in(&[s(0), c(3), s(1)]), None], attrs(&[])),
            ("Conv", vec![f32_in(&[s(0), c(3), s(1)]), f32_in(&[c(4), c(3), c(0)])], attrs(&[])),
            (
                "Conv",
                vec![f32_in(&[s(0), c(3), s(1)]), f32_in(&[c(4), c(3), c(3)])],
                attrs(&[("group", AttrValue::Int(0))]),
            ),
            ("Conv", vec![f32_in(&[s(0), c(3), s(1)]), f32_in(&[c(4), c(3), c(3)])], attrs(&[("strides", ints(&[0]))])),
            (
                "Conv",
                vec![f32_in(&[s(0), c(3), s(1)]), f32_in(&[c(4), c(3), c(3)])],
                attrs(&[("pads", ints(&[i64::MIN, 1]))]),
            ),
            (
                "ConvTranspose",
                vec![f32_in(&[s(0), c(3), s(1)]), f32_in(&[c(3), c(2), c(3)])],
                attrs(&[("output_padding", ints(&[2]))]),
            ),
            ("MaxPool", vec![f32_in(&[s(0), c(3), s(1)])], attrs(&[])),
            (
                "AveragePool",
                vec![f32_in(&[s(0), c(3), s(1)])],
                attrs(&[("kernel_shape", ints(&[i64::MAX])), ("dilations", ints(&[i64::MAX]))]),
            ),
            ("Softmax", vec![f32_in(&x)], attrs(&[("axis", AttrValue::Int(i64::MIN))])),
            ("Gather", vec![f32_in(&x), value_in(&[0])], attrs(&[("axis", AttrValue::Int(7))])),
            ("Concat", vec![f32_in(&x), f32_in(&[s(0)])], attrs(&[("axis", AttrValue::Int(0))])),
            ("Concat", vec![f32_in(&x)], attrs(&[])),
            ("Transpose", vec![f32_in(&x)], attrs(&[("perm", ints(&[0, 0]))])),
            ("Split", vec![f32_in(&x)], attrs(&[("num_outputs", AttrValue::Int(1000))])),
            ("Split", vec![f32_in(&x)], attrs(&[("outputs", AttrValue::Int(i64::MIN))])),
            ("Slice", vec![f32_in(&x), value_in(&[0]), value_in(&[1]), value_in(&[0]), value_in(&[0])], attrs(&[])),
            ("Slice", vec![f32_in(&x), value_in(&[0])], attrs(&[])),
            ("Reshape", vec![f32_in(&x), value_in(&[0, 0, 0])], attrs(&[])),
            ("Reshape", vec![f32_in(&x), value_in(&[i64::MAX, i64::MAX, -1])], attrs(&[])),
            ("Unsqueeze", vec![f32_in(&x), value_in(&[9])], attrs(&[])),
            ("Flatten", vec![f32_in(&x)], attrs(&[("axis", AttrValue::Int(i64::MAX))])),
            ("Tile", vec![f32_in(&x), value_in(&[i64::MAX, i64::MAX])], attrs(&[])),
            ("Pad", vec![f32_in(&x), value_in(&[i64::MIN, 0, 0, 0])], attrs(&[])),
            ("Expand", vec![f32_in(&x), value_in(&[-3])], attrs(&[])),
            ("MatMul", vec![f32_in(&[]), f32_in(&x)], attrs(&[])),
            ("Gemm", vec![f32_in(&x), f32_in(&[c(3)])], attrs(&[])),
            ("Add", vec![f32_in(&x)], attrs(&[])),
            (
                "Add",
                vec![f32_in(&x), f32_in(&x)],
                attrs(&[("axis", AttrValue::Int(i64::MIN)), ("broadcast", AttrValue::Int(1))]),
            ),
            ("ReduceSum", vec![f32_in(&x)], attrs(&[("axes", ints(&[5]))])),
            ("ArgMax", vec![f32_in(&x)], attrs(&[("axis", AttrValue::Int(-9))])),
            ("BatchNormalization", vec![f32_in(&x)], attrs(&[])),
            ("LayerNormalization", vec![f32_in(&[]), f32_in(&[])], attrs(&[])),
            ("Relu", vec![], attrs(&[])),
            ("Relu", vec![Some((DType::I64, x.to_vec(), None))], attrs(&[])),
            ("Mul", vec![f32_in(&[s(0).scale(i64::MAX).unwrap()]), f32_in(&[c(2)])], attrs(&[])),
        ];
        for (op, ins, a) in cases {
            match infer(op, &ins, &a) {
                Err(SymError::Invalid(m)) => assert!(m.contains(op), "{m}"),
                Err(SymError::Unsupported(m)) => assert!(m.contains(op) && !m.contains("disagrees"), "{m}"),
                Ok(r) => panic!("{op} {ins:?} {a:?}: expected an error, found {r:?}"),
            }
        }
    }

    /// Extreme attributes: an answer (here: Ok for the sizes where the concrete inference
    /// accepts them), never a panic or a wrapped value.
    #[test]
    fn extreme_values_do_not_wrap() {
        let x = [s(0), c(3), s(1)];
        let w = [c(3), c(2), c(3)];
        let r = infer("ConvTranspose", &[f32_in(&x), f32_in(&w)], &attrs(&[("strides", ints(&[i64::MAX]))]));
        if let Ok(r) = &r {
            // Only sizes 0 and 1 fit: the relations say so.
            assert!(holds(r, &[1, 1]) && !holds(r, &[1, 2]), "{r:?}");
        }
        let r = infer(
            "Slice",
            &[f32_in(&x), value_in(&[i64::MAX]), value_in(&[i64::MIN]), value_in(&[2]), value_in(&[i64::MIN + 1])],
            &attrs(&[]),
        );
        let r = r.unwrap();
        assert_eq!(eval_at(&r.outs[0].1[2], &[1, 9]), 1);
        let r = infer(
            "Slice",
            &[f32_in(&x), value_in(&[0]), value_in(&[1]), value_in(&[0]), value_in(&[i64::MIN])],
            &attrs(&[]),
        );
        assert_eq!(eval_at(&r.unwrap().outs[0].1[0], &[4, 9]), 0, "a backward slice from 0 to 1 is empty");
    }

    /// Every operator, on random symbolic inputs: an answer, never a panic.
    #[test]
    fn every_operator_answers_without_panicking() {
        let mut rng = Rng(7);
        for op in crate::ir::operators::OPS.iter() {
            for _ in 0..12 {
                let n = rng.int(0, 3) as usize;
                let ins: Vec<SymIn> = (0..n)
                    .map(|_| {
                        let rank = rng.int(0, 4) as usize;
                        let dims: Vec<Expr> = (0..rank)
                            .map(|_| if rng.chance(40) { s(rng.int(0, 2) as u32) } else { c(rng.int(0, 4)) })
                            .collect();
                        Some((rng.pick(&[DType::F32, DType::I64, DType::Bool]), dims, None))
                    })
                    .collect();
                let _ = infer(op.name, &ins, &attrs(&[]));
            }
        }
    }

    // -----------------------------------------------------------------------------------
    // The property: the symbolic result, evaluated, is the concrete inference.

    /// A small deterministic generator the case builders draw from (proptest draws its
    /// seed).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        /// In `lo..=hi`.
        fn int(&mut self, lo: i64, hi: i64) -> i64 {
            lo + (self.next() % ((hi - lo + 1).max(1) as u64)) as i64
        }

        fn chance(&mut self, pct: u64) -> bool {
            self.next() % 100 < pct
        }

        fn pick<T: Clone>(&mut self, v: &[T]) -> T {
            v[(self.next() % v.len() as u64) as usize].clone()
        }

        fn shape(&mut self, rank: usize, lo: i64, hi: i64) -> Vec<i64> {
            (0..rank).map(|_| self.int(lo, hi)).collect()
        }
    }

    /// A concrete input: dtype, shape, value.
    type In = Option<(DType, Vec<i64>, Option<HostTensor>)>;

    fn t(dtype: DType, shape: &[i64]) -> In {
        Some((dtype, shape.to_vec(), None))
    }

    fn v(values: &[i64]) -> In {
        Some((DType::I64, vec![values.len() as i64], Some(i64s(values))))
    }

    struct Case {
        op: &'static str,
        ins: Vec<In>,
        attrs: Attrs,
    }

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Outcome {
        Symbolic,
        Constant,
        Invalid,
        Unsupported,
    }

    /// Makes dims of the inputs without a value symbolic: occurrence `i` (every dim of
    /// every input, in order) when `mask[i % len]`, as a fresh symbol when also
    /// `fresh[i % len]`, else as the symbol of its value. Returns the dims and the
    /// symbols' original values.
    fn symbolize(ins: &[In], mask: &[bool], fresh: &[bool]) -> (Vec<Option<Vec<Expr>>>, Vec<i64>) {
        let mut vals: Vec<i64> = Vec::new();
        let mut by_value: Vec<(i64, SymId)> = Vec::new();
        let mut k = 0usize;
        let dims = ins
            .iter()
            .map(|i| {
                i.as_ref().map(|(_, shape, value)| {
                    shape
                        .iter()
                        .map(|&d| {
                            k += 1;
                            let pick = |m: &[bool]| !m.is_empty() && m[(k - 1) % m.len()];
                            if value.is_some() || !pick(mask) {
                                return c(d);
                            }
                            if !pick(fresh) {
                                if let Some((_, s)) = by_value.iter().find(|(v, _)| *v == d) {
                                    return Expr::sym(*s);
                                }
                            }
                            let s = vals.len() as SymId;
                            vals.push(d);
                            if !by_value.iter().any(|(v, _)| *v == d) {
                                by_value.push((d, s));
                            }
                            Expr::sym(s)
                        })
                        .collect()
                })
            })
            .collect();
        (dims, vals)
    }

    /// Checks `res` (the symbolic inference of the case with `dims`) against the concrete
    /// inference at the valuations `vals` (symbol `i` is `vals[j][i]`): where the
    /// relations hold, the evaluated outputs are the concrete ones; `Invalid` means the
    /// concrete inference fails at every valuation.
    fn compare(
        case: &Case,
        dims: &[Option<Vec<Expr>>],
        res: &Result<SymInferred, SymError>,
        vals: &[Vec<i64>],
    ) -> Result<(), TestCaseError> {
        let def = def(case.op);
        for val in vals {
            let get = |s: SymId| val.get(s as usize).copied();
            let shapes: Vec<Option<Vec<i64>>> =
                dims.iter().map(|d| d.as_ref().map(|d| d.iter().map(|e| e.eval(&get).unwrap()).collect())).collect();
            let infos: Vec<Option<TensorInfo>> = case
                .ins
                .iter()
                .zip(&shapes)
                .map(|(i, s)| match (i, s) {
                    (Some((dt, _, v)), Some(s)) => Some(TensorInfo { dtype: *dt, shape: s, value: v.as_ref() }),
                    _ => None,
                })
                .collect();
            let concrete = (def.infer)(&infos, &case.attrs);
            match res {
                Ok(r) => {
                    let holds = r.requires.iter().all(|(a, b)| a.eval(&get).is_some() && a.eval(&get) == b.eval(&get));
                    if !holds {
                        continue;
                    }
                    let want = concrete.map_err(|e| {
                        TestCaseError::fail(format!(
                            "{}: symbolic {r:?} holds at {val:?} but the concrete inference fails: {e}",
                            case.op
                        ))
                    })?;
                    let got: Vec<(DType, Vec<i64>)> =
                        r.outs.iter().map(|(d, e)| (*d, e.iter().map(|x| x.eval(&get).unwrap()).collect())).collect();
                    prop_assert_eq!(got, want, "{} at {:?}: {:?}", case.op, val, r);
                }
                Err(SymError::Invalid(m)) => {
                    prop_assert!(
                        concrete.is_err(),
                        "{}: Invalid ({}) but the concrete inference accepts {:?}",
                        case.op,
                        m,
                        shapes
                    )
                }
                Err(SymError::Unsupported(m)) => prop_assert!(!m.contains("disagrees"), "{}", m),
            }
        }
        Ok(())
    }

    /// Runs the property over `build`'s cases; at least `min_symbolic` percent of them
    /// must be inferred symbolically.
    fn family(build: fn(&mut Rng) -> Case, min_symbolic: usize) {
        const CASES: u32 = 400;
        let counts = Cell::new([0usize; 4]);
        let strategy = (
            any::<u64>(),
            proptest::collection::vec(prop::bool::weighted(0.6), 1..6),
            proptest::collection::vec(prop::bool::weighted(0.15), 1..6),
            proptest::collection::vec(proptest::collection::vec(0i64..20, 24), 0..5),
        );
        let mut runner = TestRunner::new(Config { cases: CASES, failure_persistence: None, ..Config::default() });
        let result = runner.run(&strategy, |(seed, mask, fresh, extra)| {
            let case = build(&mut Rng(seed));
            let (dims, orig) = symbolize(&case.ins, &mask, &fresh);
            let infos: Vec<Option<SymInfo>> = case
                .ins
                .iter()
                .zip(&dims)
                .map(|(i, d)| match (i, d) {
                    (Some((dt, _, v)), Some(d)) => Some(SymInfo { dtype: *dt, dims: d, value: v.as_ref() }),
                    _ => None,
                })
                .collect();
            let res = infer_symbolic(def(case.op), &infos, &case.attrs);
            let mut vals = vec![orig.clone()];
            vals.extend(extra.iter().map(|e| e[..orig.len().min(e.len())].to_vec()).filter(|e| e.len() == orig.len()));
            compare(&case, &dims, &res, &vals)?;
            let o = match &res {
                Ok(_) if orig.is_empty() => Outcome::Constant,
                Ok(_) => Outcome::Symbolic,
                Err(SymError::Invalid(_)) => Outcome::Invalid,
                Err(SymError::Unsupported(m)) => {
                    // SYMINF_DEBUG=1 lists the cases left to run time, to see what is missing.
                    if std::env::var_os("SYMINF_DEBUG").is_some() {
                        eprintln!("{m} {:?} {:?} {:?}", case.ins, dims, case.attrs);
                    }
                    Outcome::Unsupported
                }
            };
            let mut n = counts.get();
            n[o as usize] += 1;
            counts.set(n);
            Ok(())
        });
        if let Err(e) = result {
            panic!("{e}");
        }
        let n = counts.get();
        eprintln!("outcomes (symbolic, constant, invalid, unsupported): {n:?}");
        assert!(
            n[Outcome::Symbolic as usize] * 100 >= min_symbolic * CASES as usize,
            "too few symbolic results: {n:?}"
        );
    }

    /// The checker finds a wrong symbolic result: the property can fail.
    #[test]
    fn the_property_catches_a_wrong_result() {
        let case = Case { op: "Relu", ins: vec![t(DType::F32, &[4, 3])], attrs: attrs(&[]) };
        let dims = vec![Some(vec![s(0), c(3)])];
        let right = Ok(SymInferred { outs: vec![(DType::F32, vec![s(0), c(3)])], requires: vec![] });
        assert!(compare(&case, &dims, &right, &[vec![4], vec![7]]).is_ok());
        let wrong = Ok(SymInferred { outs: vec![(DType::F32, vec![s(0), c(4)])], requires: vec![] });
        assert!(compare(&case, &dims, &wrong, &[vec![4]]).is_err());
        let wrong = Ok(SymInferred { outs: vec![(DType::F32, vec![c(4), c(3)])], requires: vec![] });
        assert!(compare(&case, &dims, &wrong, &[vec![4], vec![5]]).is_err());
        let invalid = Err(SymError::Invalid("no".into()));
        assert!(compare(&case, &dims, &invalid, &[vec![4]]).is_err());
    }

    fn int(v: i64) -> AttrValue {
        AttrValue::Int(v)
    }

    fn unary_case(r: &mut Rng) -> Case {
        let op = r.pick(&[
            "Relu",
            "Sigmoid",
            "Tanh",
            "Erf",
            "Gelu",
            "Exp",
            "Sqrt",
            "Neg",
            "Cast",
            "Identity",
            "Dropout",
            "Softmax",
            "LogSoftmax",
            "Clip",
            "LeakyRelu",
            "HardSwish",
            "LRN",
            "Abs",
            "Not",
            "IsNaN",
            "Hardmax",
            "Trilu",
            "SwiGLU",
        ]);
        let rank = r.int(0, 4) as usize;
        let shape = r.shape(rank, 0, 6);
        let dtype = if r.chance(10) {
            r.pick(&[DType::I64, DType::Bool, DType::F16])
        } else if op == "Not" {
            DType::Bool
        } else {
            DType::F32
        };
        let mut a = Vec::new();
        let mut ins = vec![t(dtype, &shape)];
        match op {
            "Softmax" | "LogSoftmax" | "Hardmax" if r.chance(70) => a.push(("axis", int(r.int(-4, 3)))),
            "Cast" => a.push(("to", int(r.pick(&[1, 7, 10, 99])))),
            "LRN" => a.push(("size", int(3))),
            "Clip" if r.chance(50) => ins.push(t(dtype, &[])),
            "Dropout" if r.chance(30) => ins.push(t(DType::F32, &[])),
            "SwiGLU" => {
                let mut other = shape.clone();
                if !other.is_empty() && r.chance(10) {
                    other[0] += 1;
                }
                ins.push(t(dtype, &other));
            }
            _ => {}
        }
        Case { op, ins, attrs: attrs(&a) }
    }

    fn norm_case(r: &mut Rng) -> Case {
        let op = r.pick(&["LayerNormalization", "BatchNormalization", "InstanceNormalization", "RMSNormalization"]);
        let rank = r.int(1, 4) as usize;
        let mut x = r.shape(rank, 1, 6);
        let mut a = Vec::new();
        let mut ins;
        // A shape `want` broadcasts to: a suffix of it with some dims 1 (rarely wrong).
        let broadcaster = |r: &mut Rng, want: &[i64]| -> Vec<i64> {
            let keep = r.int(0, want.len() as i64) as usize;
            want[want.len() - keep..]
                .iter()
                .map(|&d| {
                    if r.chance(20) {
                        1
                    } else if r.chance(4) {
                        d + 1
                    } else {
                        d
                    }
                })
                .collect()
        };
        match op {
            "LayerNormalization" | "RMSNormalization" => {
                let axis = r.int(-(rank as i64) - 1, rank as i64);
                a.push(("axis", int(axis)));
                let ax = if axis < 0 { axis + rank as i64 } else { axis }.clamp(0, rank as i64) as usize;
                let target = if op == "RMSNormalization" { x.clone() } else { x[ax..].to_vec() };
                ins = vec![t(DType::F32, &x), t(DType::F32, &broadcaster(r, &target))];
                if op == "LayerNormalization" && r.chance(50) {
                    ins.push(t(DType::F32, &broadcaster(r, &target)));
                }
            }
            "BatchNormalization" => {
                let spatial = r.chance(20);
                if spatial {
                    a.push(("spatial", int(0)));
                }
                if r.chance(30) {
                    a.push(("training_mode", int(1)));
                }
                let ch = if spatial {
                    x[1.min(rank)..].iter().product()
                } else if rank >= 2 {
                    x[1]
                } else {
                    1
                };
                ins = vec![t(DType::F32, &x)];
                for _ in 0..4 {
                    let n = if r.chance(5) { ch + 1 } else { ch };
                    ins.push(t(DType::F32, &[n]));
                }
            }
            _ => {
                if x.len() < 3 && r.chance(80) {
                    x.resize(3, 2);
                }
                let ch = x.get(1).copied().unwrap_or(1);
                ins = vec![
                    t(DType::F32, &x),
                    t(DType::F32, &[ch]),
                    t(DType::F32, &[if r.chance(5) { ch + 1 } else { ch }]),
                ];
            }
        }
        Case { op, ins, attrs: attrs(&a) }
    }

    fn broadcast_case(r: &mut Rng) -> Case {
        let op = r.pick(&[
            "Add",
            "Sub",
            "Mul",
            "Div",
            "Pow",
            "Equal",
            "Less",
            "Greater",
            "And",
            "Or",
            "Where",
            "Max",
            "Min",
            "Sum",
            "Mean",
            "BitwiseAnd",
            "Mod",
        ]);
        let rank = r.int(0, 4) as usize;
        let out = r.shape(rank, 0, 5);
        let n = match op {
            "Where" => 3,
            "Max" | "Min" | "Sum" | "Mean" => r.int(1, 4),
            _ => 2,
        };
        let mut shapes: Vec<Vec<i64>> = (0..n)
            .map(|_| {
                let rank = r.int(0, out.len() as i64) as usize;
                out[out.len() - rank..]
                    .iter()
                    .map(|&d| {
                        if r.chance(30) {
                            1
                        } else if r.chance(4) {
                            r.int(0, 5)
                        } else {
                            d
                        }
                    })
                    .collect()
            })
            .collect();
        let mut a = Vec::new();
        if matches!(op, "Add" | "Mul" | "Equal") && !out.is_empty() && r.chance(25) {
            // The opset ≤ 6 placement: B lines up with A from `axis`.
            let rank = out.len() as i64;
            let start = r.int(0, rank);
            let len = r.int(0, rank - start);
            shapes = vec![out.clone(), out[start as usize..(start + len) as usize].to_vec()];
            a.push(("broadcast", int(1)));
            a.push(("axis", int(if r.chance(50) { start } else { start - rank })));
        }
        let dtype = match op {
            "And" | "Or" => DType::Bool,
            "BitwiseAnd" => DType::I32,
            _ => DType::F32,
        };
        let ins = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let d = if op == "Where" && i == 0 { DType::Bool } else { dtype };
                t(if r.chance(3) { DType::I8 } else { d }, s)
            })
            .collect();
        Case { op, ins, attrs: attrs(&a) }
    }

    fn matmul_case(r: &mut Rng) -> Case {
        let (m, k, n) = (r.int(1, 6), r.int(0, 6), r.int(1, 6));
        let k2 = if r.chance(5) { k + 1 } else { k };
        if r.chance(30) {
            let (ta, tb) = (r.chance(50), r.chance(50));
            let a_sh = if ta { [k, m] } else { [m, k] };
            let b_sh = if tb { [n, k2] } else { [k2, n] };
            let mut ins = vec![t(DType::F32, &a_sh), t(DType::F32, &b_sh)];
            let cs: [&[i64]; 6] = [&[], &[n], &[1, n], &[m, n], &[m, 1], &[3, 3, 3]];
            if r.chance(60) {
                ins.push(t(DType::F32, r.pick(&cs)));
            }
            return Case { op: "Gemm", ins, attrs: attrs(&[("transA", int(ta as i64)), ("transB", int(tb as i64))]) };
        }
        let rank = r.int(0, 3) as usize;
        let batch = r.shape(rank, 1, 4);
        let part = |r: &mut Rng| -> Vec<i64> {
            let keep = r.int(0, batch.len() as i64) as usize;
            batch[batch.len() - keep..].iter().map(|&d| if r.chance(25) { 1 } else { d }).collect()
        };
        let mut a = part(r);
        a.extend([m, k]);
        let mut b = part(r);
        b.extend([k2, n]);
        if r.chance(15) {
            a = vec![k];
        }
        if r.chance(15) {
            b = vec![k2];
        }
        Case { op: "MatMul", ins: vec![t(DType::F32, &a), t(DType::F32, &b)], attrs: attrs(&[]) }
    }

    fn window_case(r: &mut Rng) -> Case {
        let op =
            r.pick(&["Conv", "Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"]);
        let nsp = r.int(1, 2) as usize;
        let (n, g) = (r.int(0, 3), r.pick(&[1, 1, 2]));
        let (cpg, mpg) = (r.int(1, 3), r.int(1, 3));
        let ch = g * cpg;
        let sp = r.shape(nsp, 1, 14);
        let k = r.shape(nsp, 1, 4);
        let strides = r.shape(nsp, 1, 3);
        let dil = r.shape(nsp, 1, 2);
        let mut x = vec![n, ch];
        x.extend(&sp);
        let mut a = Vec::new();
        if r.chance(60) {
            a.push(("strides", ints(&strides)));
        }
        if r.chance(30) && op != "MaxPool" {
            a.push(("dilations", ints(&dil)));
        }
        if r.chance(25) {
            a.push(("auto_pad", AttrValue::Str(r.pick(&["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]).into())));
        } else if r.chance(60) {
            a.push(("pads", ints(&r.shape(2 * nsp, 0, 2))));
        }
        let mut ins = vec![t(DType::F32, &x)];
        match op {
            "Conv" | "ConvTranspose" => {
                if g > 1 || r.chance(20) {
                    a.push(("group", int(g)));
                }
                if r.chance(20) {
                    a.push(("kernel_shape", ints(&k)));
                }
                let mut w = if op == "Conv" { vec![g * mpg, cpg] } else { vec![ch, mpg] };
                w.extend(&k);
                // Weights are constants (their dims stay constants); the bias sometimes not.
                ins.push(Some((DType::F32, w.clone(), HostTensor::zeros(DType::F32, &w).ok())));
                if r.chance(50) {
                    ins.push(t(DType::F32, &[g * mpg]));
                }
                if op == "ConvTranspose" {
                    if r.chance(30) {
                        let st = a.iter().find(|(n, _)| *n == "strides").map_or(vec![1; nsp], |_| strides.clone());
                        a.push(("output_padding", ints(&st.iter().map(|&s| r.int(0, s - 1)).collect::<Vec<_>>())));
                    }
                    if r.chance(15) {
                        a.push(("output_shape", ints(&r.shape(nsp, 1, 30))));
                    }
                }
            }
            "MaxPool" | "AveragePool" => {
                a.push(("kernel_shape", ints(&k)));
                if r.chance(40) {
                    a.push(("ceil_mode", int(1)));
                }
            }
            _ => a.clear(),
        }
        Case { op, ins, attrs: attrs(&a) }
    }

    fn reshape_case(r: &mut Rng) -> Case {
        let op = r.pick(&["Reshape", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Expand", "Tile"]);
        let rank = r.int(0, 4) as usize;
        let x: Vec<i64> = (0..rank)
            .map(|_| {
                if r.chance(10) {
                    0
                } else if r.chance(25) {
                    1
                } else {
                    r.int(2, 5)
                }
            })
            .collect();
        let mut a = Vec::new();
        let mut ins = vec![t(DType::F32, &x)];
        match op {
            "Reshape" => {
                // Groups of adjacent dims merged; a group of one dim at its own index may be
                // copied with 0; one entry may be -1.
                let mut spec = Vec::new();
                let mut i = 0;
                while i < x.len() {
                    let mut j = i + 1;
                    while j < x.len() && r.chance(35) {
                        j += 1;
                    }
                    let p: i64 = x[i..j].iter().product();
                    spec.push(if j == i + 1 && spec.len() == i && r.chance(40) { 0 } else { p });
                    i = j;
                }
                if r.chance(15) {
                    spec.insert(r.int(0, spec.len() as i64) as usize, 1);
                }
                if !spec.is_empty() && r.chance(60) {
                    let at = r.int(0, spec.len() as i64 - 1) as usize;
                    spec[at] = -1;
                }
                if !spec.is_empty() && r.chance(5) {
                    let at = r.int(0, spec.len() as i64 - 1) as usize;
                    spec[at] = r.int(-1, 7);
                }
                if r.chance(10) {
                    a.push(("allowzero", int(1)));
                }
                if r.chance(20) {
                    a.push(("shape", ints(&spec)));
                } else {
                    ins.push(v(&spec));
                }
            }
            "Flatten" => a.push(("axis", int(r.int(-(rank as i64) - 1, rank as i64 + 1)))),
            "Transpose" => {
                if r.chance(70) {
                    let mut perm: Vec<i64> = (0..rank as i64).collect();
                    for i in (1..perm.len()).rev() {
                        perm.swap(i, r.int(0, i as i64) as usize);
                    }
                    if r.chance(5) {
                        perm.push(0);
                    }
                    a.push(("perm", ints(&perm)));
                }
            }
            "Squeeze" => {
                if r.chance(80) {
                    let mut axes: Vec<i64> = (0..rank as i64).filter(|&i| x[i as usize] == 1 && r.chance(60)).collect();
                    if rank > 0 && r.chance(10) {
                        axes.push(r.int(-(rank as i64), rank as i64 - 1));
                    }
                    if r.chance(30) {
                        a.push(("axes", ints(&axes)));
                    } else {
                        ins.push(v(&axes));
                    }
                }
            }
            "Unsqueeze" => {
                let out_rank = rank as i64 + r.int(1, 2);
                let mut axes = Vec::new();
                while (axes.len() as i64) < out_rank - rank as i64 {
                    let ax = r.int(-out_rank, out_rank - 1);
                    if r.chance(90) && axes.iter().any(|&b: &i64| b.rem_euclid(out_rank) == ax.rem_euclid(out_rank)) {
                        continue;
                    }
                    axes.push(ax);
                }
                ins.push(v(&axes));
            }
            "Expand" => {
                let mut shape: Vec<i64> = x
                    .iter()
                    .map(|&d| {
                        if r.chance(30) {
                            1
                        } else if r.chance(5) {
                            d + 2
                        } else {
                            d
                        }
                    })
                    .collect();
                for _ in 0..r.int(0, 2) {
                    shape.insert(0, r.int(1, 3));
                }
                if r.chance(30) {
                    shape.drain(..r.int(0, shape.len() as i64) as usize);
                }
                ins.push(v(&shape));
            }
            _ => ins.push(v(&r.shape(rank, 0, 3))),
        }
        Case { op, ins, attrs: attrs(&a) }
    }

    fn pieces_case(r: &mut Rng) -> Case {
        let op = r.pick(&["Concat", "Split", "Slice", "Slice", "Gather"]);
        let rank = r.int(1, 3) as usize;
        let x = r.shape(rank, 0, 8);
        let axis = r.int(-(rank as i64), rank as i64 - 1);
        let ax = axis.rem_euclid(rank as i64) as usize;
        let mut a = vec![("axis", int(axis))];
        let mut ins = vec![t(DType::F32, &x)];
        match op {
            "Concat" => {
                for _ in 0..r.int(0, 3) {
                    let mut y = x.clone();
                    y[ax] = r.int(0, 5);
                    if r.chance(5) {
                        y[r.int(0, rank as i64 - 1) as usize] += 1;
                    }
                    ins.push(t(DType::F32, &y));
                }
            }
            "Split" => match r.int(0, 2) {
                0 => {
                    let mut left = x[ax];
                    let mut parts = Vec::new();
                    while left > 0 && parts.len() < 4 {
                        let p = r.int(0, left);
                        parts.push(p);
                        left -= p;
                    }
                    parts.push(left + if r.chance(5) { 1 } else { 0 });
                    ins.push(v(&parts));
                }
                1 => a.push(("num_outputs", int(r.int(1, 4)))),
                _ => a.push(("outputs", int(r.int(1, 4)))),
            },
            "Slice" => {
                a.clear();
                let n = r.int(1, rank as i64) as usize;
                let mut axes: Vec<i64> = (0..rank as i64).collect();
                for i in (1..axes.len()).rev() {
                    axes.swap(i, r.int(0, i as i64) as usize);
                }
                axes.truncate(n);
                let bound = |r: &mut Rng| {
                    if r.chance(15) {
                        r.pick(&[i64::MAX, i64::MIN, i64::MAX - 1, -i64::MAX])
                    } else {
                        r.int(-10, 10)
                    }
                };
                let starts: Vec<i64> = (0..n).map(|_| bound(r)).collect();
                let ends: Vec<i64> = (0..n).map(|_| bound(r)).collect();
                let steps: Vec<i64> = (0..n).map(|_| r.pick(&[1, 1, 2, 3, -1, -2])).collect();
                ins.extend([v(&starts), v(&ends)]);
                let with_steps = r.chance(60);
                if with_steps || r.chance(70) {
                    ins.push(v(&axes
                        .iter()
                        .map(|&a| if r.chance(30) { a - rank as i64 } else { a })
                        .collect::<Vec<_>>()));
                }
                if with_steps && ins.len() == 4 {
                    ins.push(v(&steps));
                }
            }
            _ => {
                let rank = r.int(0, 2) as usize;
                let idx = r.shape(rank, 0, 4);
                ins.push(Some((DType::I64, idx, None)));
            }
        }
        Case { op, ins, attrs: attrs(&a) }
    }

    fn reduce_case(r: &mut Rng) -> Case {
        let op = r.pick(&["ReduceMean", "ReduceSum", "ReduceMax", "ReduceL2", "ArgMax", "ArgMin", "Pad", "Tile"]);
        let rank = r.int(0, 4) as usize;
        let x = r.shape(rank, 0, 5);
        let mut a = Vec::new();
        let mut ins = vec![t(DType::F32, &x)];
        match op {
            "ArgMax" | "ArgMin" => {
                a.push(("axis", int(r.int(-(rank as i64), rank as i64))));
                a.push(("keepdims", int(r.int(0, 1))));
            }
            "Pad" => {
                ins.push(v(&r.shape(2 * rank, -2, 3)));
                a.push(("mode", AttrValue::Str(r.pick(&["constant", "reflect", "edge"]).into())));
            }
            "Tile" => ins.push(v(&r.shape(rank, 0, 3))),
            _ => {
                a.push(("keepdims", int(r.int(0, 1))));
                if r.chance(20) {
                    a.push(("noop_with_empty_axes", int(1)));
                }
                if r.chance(70) && rank > 0 {
                    let mut axes: Vec<i64> = (0..rank as i64).filter(|_| r.chance(50)).collect();
                    if r.chance(5) {
                        axes.push(rank as i64);
                    }
                    if r.chance(50) {
                        a.push(("axes", ints(&axes)));
                    } else {
                        ins.push(v(&axes));
                    }
                }
            }
        }
        Case { op, ins, attrs: attrs(&a) }
    }

    #[test]
    fn symbolic_unary_matches_concrete() {
        family(unary_case, 30);
    }

    #[test]
    fn symbolic_normalizations_match_concrete() {
        family(norm_case, 20);
    }

    #[test]
    fn symbolic_broadcasting_matches_concrete() {
        family(broadcast_case, 15);
    }

    #[test]
    fn symbolic_matmul_and_gemm_match_concrete() {
        family(matmul_case, 20);
    }

    #[test]
    fn symbolic_conv_and_pooling_match_concrete() {
        family(window_case, 20);
    }

    #[test]
    fn symbolic_reshapes_match_concrete() {
        family(reshape_case, 15);
    }

    #[test]
    fn symbolic_concat_split_slice_gather_match_concrete() {
        family(pieces_case, 20);
    }

    #[test]
    fn symbolic_reductions_pad_tile_match_concrete() {
        family(reduce_case, 20);
    }
}
