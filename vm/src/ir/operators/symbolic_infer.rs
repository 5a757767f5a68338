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
//! too), MatMul, Gemm, Conv, ConvTranspose, MaxPool, AveragePool, GlobalAveragePool,
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
//! ConstantOfShape, Range, TopK...), Reshape's `-1` when the other dims do not divide the
//! input's element count as expressions (`[n, 6]` to `[m, -1]`), Squeeze without axes over
//! a symbolic dim (whether it is 1 decides the rank), symbolic kernels or parameters of
//! PRelu/GroupNormalization/Clip-like inputs, and every operator not listed above.

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
        Relu, Clip, LeakyRelu, Sigmoid, Tanh, Exp, Sqrt, Neg, Abs, Elu, Selu, Softplus, Softsign, Dropout, Identity,
        Softmax, LogSoftmax, LRN, Cast, CastLike, Gelu, Erf, HardSigmoid, HardSwish, Mish, Celu, ThresholdedRelu, Log,
        Reciprocal, Floor, Ceil, Round, Sign, Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Not,
        BitwiseNot, IsInf, IsNaN, Shrink, Swish, Hardmax, LpNormalization, MeanVarianceNormalization, Trilu, CumSum,
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
/// most divisibility relations.
const PROBE_BASES: [i64; 4] = [60, 24, 420, 6];

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

/// Values of `syms` from `base` that satisfy `requires` (relations of the form
/// `symbol == expression` decide their symbol), if they do.
fn probe_values(syms: &[SymId], requires: &[(Expr, Expr)], base: i64) -> Option<Valuation> {
    let mut val: Vec<(SymId, Option<i64>)> = syms.iter().map(|&s| (s, None)).collect();
    let known = |val: &[(SymId, Option<i64>)]| -> Valuation { val.iter().filter_map(|(s, v)| Some((*s, (*v)?))).collect() };
    loop {
        let mut progress = true;
        while progress {
            progress = false;
            for (a, b) in requires {
                for (x, y) in [(a, b), (b, a)] {
                    let Some(s) = x.as_sym() else { continue };
                    let k = known(&val);
                    if lookup(&k, s).is_some() {
                        continue;
                    }
                    if let (Some(v), Some(slot)) = (y.eval(&|t| lookup(&k, t)), val.iter_mut().find(|(t, _)| *t == s)) {
                        slot.1 = Some(v);
                        progress = true;
                    }
                }
            }
        }
        let Some(j) = val.iter().position(|(_, v)| v.is_none()) else { break };
        let slot = val.get_mut(j)?;
        slot.1 = Some(base.checked_mul(1 + (j % 3) as i64)?);
    }
    let v = known(&val);
    let holds = requires.iter().all(|(a, b)| {
        let (x, y) = (a.eval(&|s| lookup(&v, s)), b.eval(&|s| lookup(&v, s)));
        x.is_some() && x == y
    });
    (holds && v.iter().all(|(_, x)| *x >= 0)).then_some(v)
}

/// Runs the concrete inference on `shapes` (the inputs' dims evaluated).
fn run(def: &OpDef, ins: &[Option<SymInfo>], shapes: &[Option<Vec<i64>>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
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
fn run_at(def: &OpDef, ins: &[Option<SymInfo>], attrs: &Attrs, v: &[(SymId, i64)]) -> Option<Result<Vec<OutInfo>, String>> {
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
fn probes(def: &OpDef, ins: &[Option<SymInfo>], attrs: &Attrs, requires: &[(Expr, Expr)]) -> Vec<(Valuation, Result<Vec<OutInfo>, String>)> {
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
    /// The inputs' dims: each is a size, so at least 0.
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

    fn max(&self, a: &Expr, b: &Expr) -> R<Expr> {
        if self.nonneg(&ov(a.sub(b))?) {
            return Ok(a.clone());
        }
        if self.nonneg(&ov(b.sub(a))?) {
            return Ok(b.clone());
        }
        ov(a.maximum(b))
    }

    fn min(&self, a: &Expr, b: &Expr) -> R<Expr> {
        if self.nonneg(&ov(b.sub(a))?) {
            return Ok(a.clone());
        }
        if self.nonneg(&ov(a.sub(b))?) {
            return Ok(b.clone());
        }
        ov(a.minimum(b))
    }

    /// `min(max(v, lo), hi)` for `lo <= hi`.
    fn clamp(&self, v: &Expr, lo: &Expr, hi: &Expr) -> R<Expr> {
        if self.nonneg(&ov(hi.sub(v))?) {
            return self.max(v, lo);
        }
        let m = self.max(v, lo)?;
        self.min(&m, hi)
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
    dims.iter()
        .map(|d| d.as_const().ok_or_else(|| Fail::Unsupported(format!("{what} has symbolic dims"))))
        .collect()
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
            let stats: Vec<Expr> = x.dims.iter().enumerate().map(|(i, d)| if i < axis { d.clone() } else { c(1) }).collect();
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
                            None => {
                                return unsupported(
                                    "squeezing every size-1 axis of a tensor with symbolic dims: whether a symbol is 1 \
                                     decides the rank",
                                )
                            }
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
        opt(ins, 1)
            .zip(axes_shape.as_deref())
            .map(|(t, shape)| TensorInfo { dtype: t.dtype, shape, value: t.value }),
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
fn window(cx: &mut Cx, len: &Expr, k: i64, st: i64, di: i64, pb: i64, pe: i64, ap: AutoPad, ceil_mode: bool) -> R<Expr> {
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
    let out = out.into_iter().enumerate().map(|(i, d)| d.unwrap_or_else(|| if i == slot { inferred.clone() } else { c(0) }));
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
        let (start, end, step) = (at(&starts)?, at(&ends)?, at(&steps)?);
        if step == 0 {
            return Err(Fail::Defer);
        }
        let wrap = |v: i64| if v < 0 { ov(d.add(&c(v))) } else { Ok(c(v)) };
        let (s, e) = (wrap(start)?, wrap(end)?);
        let count = if step > 0 {
            let (s, e) = (cx.clamp(&s, &c(0), &d)?, cx.clamp(&e, &c(0), &d)?);
            ov(cx.max(&ov(e.sub(&s))?, &c(0))?.ceil_div(step))?
        } else {
            let last = ov(d.sub(&c(1)))?;
            let (s, e) = (cx.min(&cx.max(&s, &c(0))?, &last)?, cx.min(&cx.max(&e, &c(-1))?, &last)?);
            ov(cx.max(&ov(s.sub(&e))?, &c(0))?.ceil_div(ov(step.checked_neg())?))?
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
