//! Symbolic compilation: one program for every value of the symbols of its input dims
//! (`f32[%batch, 3, 224, 224]`), as docs/symbolic-shapes.md designs it.
//!
//! The compiler runs its usual pipeline at the symbols' bounds (the graph's folds, the
//! schedule, liveness and a plan are the same for every value), then infers every tensor's
//! dims as expressions of the symbols (`rxvm_vm::ir::operators::symbolic_infer`). Each
//! buffer's size is then an expression, and the plan becomes **placement orders**
//! (`crate::plan::order`): the order of the plan at the bounds, and of plans made at other
//! points of the range. At entry the program evaluates each order's offsets and arena in
//! integer instructions and keeps the order whose arena is smallest, so the arena follows
//! the shapes of the call instead of the bounds. Views take their dims from the same
//! expressions; operator calls check their shapes as they always do.
//!
//! Without a bound for every symbol, or when a node has no symbolic inference, the
//! tensors that depend on a symbol are allocated when the program runs instead (allocating
//! operator calls), and the plan's comments say why.

use super::liveness::Liveness;
use super::lower::{Fixed, Layout};
use crate::graph::{ident, Analysis, Graph, InputDim};
use crate::plan::order::{order_of, place_in_order_with};
use crate::plan::{Plan, Problem};
use rxvm_vm::builder::{FunctionBuilder, Operand};
use rxvm_vm::bytecode::Reg;
use rxvm_vm::ir::operators::symbolic_infer::{infer_symbolic, SymInfo};
use rxvm_vm::ir::symbolic::{Atom, Expr, SymId};
use rxvm_vm::ops::{OpId, Operator};
use rxvm_vm::types::{DType, Dim, Type};
use std::collections::HashMap;

/// The symbols of a program's input dims and each input's dims in them.
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    /// Names, by [`SymId`]: a named ONNX dim (`batch`), or `<input>_<k>` for a `?` dim.
    pub names: Vec<String>,
    /// Each symbol's upper bound, if given.
    pub bounds: Vec<Option<i64>>,
    /// Each graph input's dims.
    pub inputs: Vec<Vec<Expr>>,
}

impl Symbols {
    /// The symbols of `g`'s inputs: an input `pinned` to a shape has it; otherwise its
    /// named dims are symbols (one per name, whatever input names it) and each `?` dim a
    /// symbol of its own. `bounds` bounds symbols by name.
    pub fn new(g: &Graph, pinned: &[Option<Vec<i64>>], bounds: &[(String, i64)]) -> Result<Symbols, String> {
        let mut s = Symbols::default();
        // A name a pinned input fixes is a size for the others too.
        let mut fixed: HashMap<&str, i64> = HashMap::new();
        for (inp, shape) in g.inputs.iter().zip(pinned) {
            if let Some(shape) = shape {
                for (d, &v) in inp.dims.iter().zip(shape) {
                    if let InputDim::Named(n) = d {
                        fixed.insert(n, v);
                    }
                }
            }
        }
        let mut used = HashMap::new();
        for (i, inp) in g.inputs.iter().enumerate() {
            let dims = match pinned.get(i).and_then(Option::as_ref) {
                Some(shape) => shape.iter().map(|&v| Expr::constant(v)).collect(),
                None => {
                    let mut dims = Vec::with_capacity(inp.dims.len());
                    for (k, d) in inp.dims.iter().enumerate() {
                        dims.push(match d {
                            InputDim::Fixed(v) => Expr::constant(*v),
                            InputDim::Named(n) if fixed.contains_key(n.as_str()) => Expr::constant(fixed[n.as_str()]),
                            InputDim::Named(n) => match s.names.iter().position(|m| m == n) {
                                Some(id) => Expr::sym(id as SymId),
                                None => s.add(ident(n, &mut used)),
                            },
                            InputDim::Unknown => s.add(ident(&format!("{}_{k}", inp.name), &mut used)),
                        });
                    }
                    dims
                }
            };
            s.inputs.push(dims);
        }
        for (name, bound) in bounds {
            let Some(id) = s.names.iter().position(|n| n == name) else {
                let known = if s.names.is_empty() {
                    "the model's inputs have no symbolic dims".to_string()
                } else {
                    format!(
                        "the symbols are {}",
                        s.names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                    )
                };
                return Err(format!("--bound {name}={bound}: no symbol `{name}`; {known}"));
            };
            if *bound < 1 {
                return Err(format!("--bound {name}={bound}: a bound must be at least 1"));
            }
            s.bounds[id] = Some(*bound);
        }
        Ok(s)
    }

    fn add(&mut self, name: String) -> Expr {
        self.names.push(name);
        self.bounds.push(None);
        Expr::sym(self.names.len() as SymId - 1)
    }

    /// Whether input `i` has a symbolic dim.
    pub fn is_symbolic(&self, i: usize) -> bool {
        self.inputs.get(i).is_some_and(|d| d.iter().any(|e| e.as_const().is_none()))
    }

    /// The bounds, when every symbol has one.
    pub fn all_bounds(&self) -> Option<Vec<i64>> {
        self.bounds.iter().copied().collect()
    }

    /// The input shapes when the symbols take `values`.
    pub fn shapes_at(&self, values: &[i64]) -> Result<Vec<Vec<i64>>, String> {
        self.inputs
            .iter()
            .map(|dims| dims.iter().map(|e| at(e, values)).collect::<Result<Vec<i64>, String>>())
            .collect()
    }

    /// `names <= bounds`, for the plan's comments.
    pub fn describe(&self) -> String {
        let each: Vec<String> = self
            .names
            .iter()
            .zip(&self.bounds)
            .map(|(n, b)| match b {
                Some(b) => format!("{n} <= {b}"),
                None => n.clone(),
            })
            .collect();
        each.join(", ")
    }
}

/// `e` with the symbols at `values`.
fn at(e: &Expr, values: &[i64]) -> Result<i64, String> {
    e.eval(&|s| values.get(s as usize).copied()).ok_or_else(|| "internal: a dim overflows at a probe point".to_string())
}

/// A type whose dims are expressions: a symbol is `%name` (register `sym_base + id`), a
/// constant a size, anything else `?`.
fn sym_type(dtype: DType, dims: &[Expr], syms: &Symbols, sym_base: u32) -> Type {
    let dims = dims
        .iter()
        .map(|e| match (e.as_const(), e.as_sym()) {
            (Some(v), _) => Dim::Known(v),
            (_, Some(s)) => Dim::Sym { reg: sym_base + s, max: syms.bounds.get(s as usize).copied().flatten() },
            _ => Dim::Any,
        })
        .collect();
    Type::Tensor { dtype, dims }
}

/// Every tensor's dims as expressions, for the analysis `a` made at the bounds (`probe`
/// the symbols' values there). `Err` says why the graph cannot be planned symbolically.
pub fn infer_dims(
    g: &Graph,
    a: &Analysis,
    syms: &Symbols,
    probe: &[i64],
) -> Result<HashMap<String, Vec<Expr>>, String> {
    let mut dims: HashMap<String, Vec<Expr>> = HashMap::new();
    for (name, v) in &g.consts {
        dims.insert(name.clone(), v.shape.iter().map(|&d| Expr::constant(d)).collect());
    }
    for (inp, d) in g.inputs.iter().zip(&syms.inputs) {
        dims.insert(inp.name.clone(), d.clone());
    }
    for (n, node) in g.nodes.iter().enumerate() {
        let what = || format!("node `{}` ({})", node.name, node.op);
        if node.outputs.iter().any(|o| a.run_time.contains(o.as_str())) {
            return Err(format!("{}: its output shapes depend on a run-time value", what()));
        }
        if a.folded.get(n).copied().unwrap_or(false) {
            // A folded value is the same for every value of the symbols, unless it reads
            // the dims themselves: `Shape` or `Size` of a tensor whose dims are symbolic.
            if let (Some(op @ (Operator::Shape | Operator::Size)), Some(x)) =
                (Operator::from_name(&node.op), node.inputs.first().and_then(|x| dims.get(x.as_str())))
            {
                let index: Vec<i64> = (0..x.len() as i64).collect();
                let read: Vec<i64> = match op {
                    Operator::Shape => rxvm_vm::ir::operators::tensor::shape_value(&index, &node.attrs),
                    _ => index,
                };
                if read
                    .iter()
                    .any(|&k| usize::try_from(k).ok().and_then(|k| x.get(k)).is_some_and(|e| e.as_const().is_none()))
                {
                    return Err(format!(
                        "{}: its value is a symbolic dim, which the program would fix at compile time",
                        what()
                    ));
                }
            }
            for o in node.outputs.iter().filter(|o| !o.is_empty()) {
                let (_, s) = a.types.get(o.as_str()).ok_or_else(|| format!("internal: `{o}` has no type"))?;
                dims.insert(o.clone(), s.iter().map(|&d| Expr::constant(d)).collect());
            }
            continue;
        }
        let def = OpId::from_name(&node.op).ok_or_else(|| format!("operator {} is not supported", node.op))?.def();
        let mut infos = Vec::with_capacity(node.inputs.len());
        for x in &node.inputs {
            infos.push(if x.is_empty() {
                None
            } else {
                let d = dims.get(x.as_str()).ok_or_else(|| format!("internal: `{x}` has no dims"))?;
                let (dtype, _) = a.types.get(x.as_str()).ok_or_else(|| format!("internal: `{x}` has no type"))?;
                Some(SymInfo { dtype: *dtype, dims: d, value: a.const_value(x) })
            });
        }
        let inferred = infer_symbolic(def, &infos, &node.attrs).map_err(|e| format!("{}: {e}", what()))?;
        for (o, (_, d)) in node.outputs.iter().zip(inferred.outs) {
            if o.is_empty() {
                continue;
            }
            // The expressions must give the shapes the plan was made with.
            let (_, s) = a.types.get(o.as_str()).ok_or_else(|| format!("internal: `{o}` has no type"))?;
            let here = d.iter().map(|e| at(e, probe)).collect::<Result<Vec<i64>, String>>()?;
            if here != *s {
                return Err(format!(
                    "internal: {}: symbolic inference gives {here:?} for `{o}` at the bounds, shape inference {s:?}",
                    what()
                ));
            }
            dims.insert(o.clone(), d);
        }
    }
    Ok(dims)
}

/// What a program whose plan is symbolic computes at entry: each buffer's size as an
/// expression and the placement orders to choose from.
#[derive(Clone, Debug)]
pub struct SymbolicPlan {
    pub sizes: Vec<Expr>,
    pub orders: Vec<Vec<usize>>,
}

/// The sizes of `problem`'s buffers as expressions of the symbols, and the distinct
/// placement orders of plans made at the bounds (`plan`) and at other points of the range
/// (each symbol at 1, and at half its bound), with `replan` planning a problem.
pub fn symbolic_plan(
    live: &Liveness,
    problem: &Problem,
    plan: &Plan,
    dims: &HashMap<String, Vec<Expr>>,
    bounds: &[i64],
    replan: &dyn Fn(&Problem) -> Result<Plan, String>,
) -> Result<SymbolicPlan, String> {
    let mut sizes = Vec::with_capacity(live.buffers.len());
    for (b, buf) in live.buffers.iter().enumerate() {
        let t = &live.tensors[buf.tensor];
        if t.scope.is_texture() {
            return Err(format!("`{}` is a texture; symbolic plans place buffers", t.name));
        }
        let d = dims.get(&t.name).ok_or_else(|| format!("internal: `{}` has no dims", t.name))?;
        let mut size = Expr::constant(t.dtype.size() as i64);
        for e in d {
            size = size.mul(e).ok_or("a buffer's size overflows")?;
        }
        if at(&size, bounds)? as u64 != problem.buffers[b].size {
            return Err(format!("internal: the size of `{}` at the bounds is not the planned one", t.name));
        }
        // Buffers of no bytes at the bounds constrain nothing (`conflict`): they must have
        // none at any value.
        if problem.buffers[b].size == 0 && size.as_const() != Some(0) {
            return Err(format!("`{}` has no bytes at the bounds but may have some below them", t.name));
        }
        sizes.push(size);
    }
    let mut orders = vec![order_of(plan)];
    let points: [Vec<i64>; 2] = [vec![1; bounds.len()], bounds.iter().map(|b| (b / 2).max(1)).collect()];
    for point in points {
        let mut q = problem.clone();
        for (b, size) in q.buffers.iter_mut().zip(&sizes) {
            b.size = u64::try_from(at(size, &point)?).map_err(|_| "a buffer's size is negative at a probe point")?;
        }
        let order = order_of(&replan(&q)?);
        // Another order only when it places this point better than the ones kept.
        let best_kept = orders
            .iter()
            .map(|o| place_in_order_with(&q, o, problem).map(|p| p.arena_bytes()))
            .collect::<Result<Vec<u64>, String>>()?
            .into_iter()
            .min()
            .unwrap_or(u64::MAX);
        if place_in_order_with(&q, &order, problem)?.arena_bytes() < best_kept {
            orders.push(order);
        }
    }
    Ok(SymbolicPlan { sizes, orders })
}

/// The [`Layout`] of a symbolic program: parameter types with symbols; with a
/// [`SymbolicPlan`], arena sizes, offsets and view dims computed at entry; without one, the
/// plan's constants (for the tensors that do not depend on a symbol).
pub struct SymbolicLayout<'a> {
    syms: &'a Symbols,
    /// The register of symbol 0 (the parameters come first).
    sym_base: u32,
    input_dtypes: Vec<DType>,
    planned: Option<Planned<'a>>,
    memo: HashMap<Expr, Operand>,
}

struct Planned<'a> {
    plan: SymbolicPlan,
    problem: &'a Problem,
    dims: HashMap<String, Vec<Expr>>,
    offsets: Vec<Operand>,
    arenas: HashMap<u32, Operand>,
}

impl<'a> SymbolicLayout<'a> {
    /// Tensors that depend on a symbol are allocated at run time: only the types and the
    /// symbols' names come from here.
    pub fn run_time(g: &Graph, syms: &'a Symbols, nparams: u32) -> SymbolicLayout<'a> {
        SymbolicLayout {
            syms,
            sym_base: nparams,
            input_dtypes: g.inputs.iter().map(|i| i.dtype).collect(),
            planned: None,
            memo: HashMap::new(),
        }
    }

    /// A planned symbolic program.
    pub fn planned(
        g: &Graph,
        syms: &'a Symbols,
        nparams: u32,
        problem: &'a Problem,
        plan: SymbolicPlan,
        dims: HashMap<String, Vec<Expr>>,
    ) -> SymbolicLayout<'a> {
        let planned = Planned { plan, problem, dims, offsets: Vec::new(), arenas: HashMap::new() };
        SymbolicLayout { planned: Some(planned), ..SymbolicLayout::run_time(g, syms, nparams) }
    }

    fn sym_reg(&self, s: SymId) -> Reg {
        Reg(self.sym_base + s)
    }

    /// `e` as an operand: a constant, or a register computed here (each expression once).
    fn expr(&mut self, f: &mut FunctionBuilder, e: &Expr) -> Result<Operand, String> {
        if let Some(c) = e.as_const() {
            return Ok(Operand::Int(c));
        }
        if let Some(s) = e.as_sym() {
            return Ok(Operand::Reg(self.sym_reg(s)));
        }
        if let Some(op) = self.memo.get(e) {
            return Ok(*op);
        }
        let mut acc = Operand::Int(0);
        let terms: Vec<(Vec<(Atom, u32)>, i64)> = e.terms().map(|(m, c)| (m.to_vec(), c)).collect();
        for (mono, coef) in terms {
            let mut term = Operand::Int(coef);
            for (atom, pow) in mono {
                let v = self.atom(f, &atom)?;
                for _ in 0..pow {
                    term = int_op(f, "imul", term, v)?;
                }
            }
            acc = int_op(f, "iadd", acc, term)?;
        }
        self.memo.insert(e.clone(), acc);
        Ok(acc)
    }

    fn atom(&mut self, f: &mut FunctionBuilder, a: &Atom) -> Result<Operand, String> {
        match a {
            Atom::Sym(s) => Ok(Operand::Reg(self.sym_reg(*s))),
            Atom::FloorDiv(e, d) => {
                let x = self.expr(f, e)?;
                floor_div(f, x, *d)
            }
            Atom::Mod(e, d) => {
                // x - d * floor(x / d).
                let x = self.expr(f, e)?;
                let q = floor_div(f, x, *d)?;
                let dq = int_op(f, "imul", q, Operand::Int(*d))?;
                int_op(f, "isub", x, dq)
            }
            Atom::Max(a, b) => {
                let (x, y) = (self.expr(f, a)?, self.expr(f, b)?);
                int_op(f, "imax", x, y)
            }
            Atom::Min(a, b) => {
                let (x, y) = (self.expr(f, a)?, self.expr(f, b)?);
                int_op(f, "imin", x, y)
            }
        }
    }
}

/// `name(a, b)` for an int builtin, folded when both are constants.
fn int_op(f: &mut FunctionBuilder, name: &str, a: Operand, b: Operand) -> Result<Operand, String> {
    if let (Operand::Int(x), Operand::Int(y)) = (a, b) {
        let folded = match name {
            "iadd" => x.checked_add(y),
            "isub" => x.checked_sub(y),
            "imul" => x.checked_mul(y),
            "imax" => Some(x.max(y)),
            "imin" => Some(x.min(y)),
            "ilt" => Some(i64::from(x < y)),
            _ => None,
        };
        if let Some(v) = folded {
            return Ok(Operand::Int(v));
        }
    }
    match (name, a, b) {
        ("iadd", Operand::Int(0), x) | ("iadd", x, Operand::Int(0)) | ("isub", x, Operand::Int(0)) => return Ok(x),
        ("imul", Operand::Int(1), x) | ("imul", x, Operand::Int(1)) => return Ok(x),
        ("imul", Operand::Int(0), _) | ("imul", _, Operand::Int(0)) => return Ok(Operand::Int(0)),
        _ => {}
    }
    let r = f.call_builtin(name, &[a, b])?;
    Ok(Operand::Reg(r[0]))
}

/// `⌊x / d⌋` for `d > 0` (`idiv` rounds toward zero: one less when the remainder is
/// negative).
fn floor_div(f: &mut FunctionBuilder, x: Operand, d: i64) -> Result<Operand, String> {
    if let Operand::Int(v) = x {
        return Ok(Operand::Int(v.div_euclid(d)));
    }
    let q = int_op(f, "idiv", x, Operand::Int(d))?;
    let r = int_op(f, "irem", x, Operand::Int(d))?;
    let neg = int_op(f, "ilt", r, Operand::Int(0))?;
    int_op(f, "isub", q, neg)
}

/// `align_up(x, a)` for `x >= 0`.
fn align_up(f: &mut FunctionBuilder, x: Operand, a: u64) -> Result<Operand, String> {
    if a <= 1 {
        return Ok(x);
    }
    let a = i64::try_from(a).map_err(|_| "an alignment is too large")?;
    let up = int_op(f, "iadd", x, Operand::Int(a - 1))?;
    let q = int_op(f, "idiv", up, Operand::Int(a))?;
    int_op(f, "imul", q, Operand::Int(a))
}

/// `c ? x : y` for `c` in {0, 1}: `y + c * (x - y)`.
fn select(f: &mut FunctionBuilder, c: Operand, x: Operand, y: Operand) -> Result<Operand, String> {
    if x == y {
        return Ok(x);
    }
    let d = int_op(f, "isub", x, y)?;
    let cd = int_op(f, "imul", c, d)?;
    int_op(f, "iadd", y, cd)
}

impl Layout for SymbolicLayout<'_> {
    fn param_type(&self, input: usize, concrete: Type) -> Type {
        match (self.syms.is_symbolic(input), self.syms.inputs.get(input), self.input_dtypes.get(input)) {
            (true, Some(dims), Some(dtype)) => sym_type(*dtype, dims, self.syms, self.sym_base),
            _ => concrete,
        }
    }

    fn result_type(&self, name: &str, concrete: Type) -> Type {
        match (&self.planned, &concrete) {
            (Some(p), Type::Tensor { dtype, .. }) => match p.dims.get(name) {
                Some(d) => sym_type(*dtype, d, self.syms, self.sym_base),
                None => concrete,
            },
            _ => concrete,
        }
    }

    fn prologue(&mut self, f: &mut FunctionBuilder) -> Result<(), String> {
        for (k, name) in self.syms.names.iter().enumerate() {
            f.name(self.sym_reg(k as SymId), name);
        }
        let Some(mut p) = self.planned.take() else { return Ok(()) };
        let result = self.place(f, &mut p);
        self.planned = Some(p);
        result
    }

    fn arena_size(&mut self, f: &mut FunctionBuilder, pool: u32, bytes: u64) -> Result<Operand, String> {
        match self.planned.as_ref().and_then(|p| p.arenas.get(&pool)) {
            // A storage has at least one byte.
            Some(&size) => int_op(f, "imax", size, Operand::Int(1)),
            None => Fixed.arena_size(f, pool, bytes),
        }
    }

    fn offset(&mut self, f: &mut FunctionBuilder, buffer: usize, offset: u64) -> Result<Operand, String> {
        match self.planned.as_ref().and_then(|p| p.offsets.get(buffer)) {
            Some(&off) => Ok(off),
            None => Fixed.offset(f, buffer, offset),
        }
    }

    fn dims(&mut self, f: &mut FunctionBuilder, name: &str, shape: &[i64]) -> Result<Vec<Operand>, String> {
        let Some(d) = self.planned.as_ref().and_then(|p| p.dims.get(name)).cloned() else {
            return Fixed.dims(f, name, shape);
        };
        d.iter().map(|e| self.expr(f, e)).collect()
    }
}

impl SymbolicLayout<'_> {
    /// Emits each placement order's offsets and arenas, and keeps the order whose arenas
    /// add up to the least (`crate::plan::order::place_in_order`, in instructions).
    fn place(&mut self, f: &mut FunctionBuilder, p: &mut Planned) -> Result<(), String> {
        let n = p.problem.buffers.len();
        let sizes: Vec<Operand> = p.plan.sizes.clone().iter().map(|e| self.expr(f, e)).collect::<Result<_, _>>()?;
        let mut best: Option<(Operand, Vec<Operand>, HashMap<u32, Operand>)> = None;
        for order in &p.plan.orders {
            let mut offsets = vec![Operand::Int(0); n];
            // Offsets and sizes are never negative: a maximum starts at its first term.
            let max = |f: &mut FunctionBuilder, acc: Option<Operand>, x: Operand| match acc {
                None => Ok(x),
                Some(acc) => int_op(f, "imax", acc, x),
            };
            for (k, &b) in order.iter().enumerate() {
                let mut off = None;
                for &a in &order[..k] {
                    if crate::plan::order::conflict(p.problem, a, b) {
                        let top = int_op(f, "iadd", offsets[a], sizes[a])?;
                        let top = align_up(f, top, p.problem.buffers[b].align)?;
                        off = Some(max(f, off, top)?);
                    }
                }
                offsets[b] = off.unwrap_or(Operand::Int(0));
            }
            let mut arenas: HashMap<u32, Operand> = HashMap::new();
            for (b, buf) in p.problem.buffers.iter().enumerate() {
                let top = int_op(f, "iadd", offsets[b], sizes[b])?;
                let cur = arenas.get(&buf.pool).copied();
                arenas.insert(buf.pool, max(f, cur, top)?);
            }
            let mut pools: Vec<u32> = arenas.keys().copied().collect();
            pools.sort_unstable();
            let mut total = Operand::Int(0);
            for pool in &pools {
                total = int_op(f, "iadd", total, arenas[pool])?;
            }
            best = Some(match best {
                None => (total, offsets, arenas),
                Some((best_total, best_offsets, best_arenas)) => {
                    let better = int_op(f, "ilt", total, best_total)?;
                    let offsets = offsets
                        .iter()
                        .zip(&best_offsets)
                        .map(|(&x, &y)| select(f, better, x, y))
                        .collect::<Result<Vec<_>, String>>()?;
                    let mut chosen = HashMap::new();
                    for pool in pools {
                        let y = best_arenas.get(&pool).copied().unwrap_or(Operand::Int(0));
                        chosen.insert(pool, select(f, better, arenas[&pool], y)?);
                    }
                    (int_op(f, "imin", total, best_total)?, offsets, chosen)
                }
            });
        }
        if let Some((_, offsets, arenas)) = best {
            p.offsets = offsets;
            p.arenas = arenas;
        }
        Ok(())
    }
}
