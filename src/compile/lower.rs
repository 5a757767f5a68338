//! Lowering a planned graph to a VM module: one `alloc_storage` per arena (right before the
//! first tensor in it is defined), an `alloc_tensor` at each tensor's definition (views
//! reuse their source's offset), the operator calls, a `kill` after each tensor's last use
//! and, for each arena, a `kill` once no further tensor is allocated in it; then `ret` of
//! the outputs. Layout conversions of the schedule become `@vm.to_blocked` /
//! `@vm.from_blocked` calls, and texture tensors `global.texture` views.

use super::liveness::Liveness;
use super::scopes::{Schedule, StepKind};
use crate::graph::{ident, tensor_type, Analysis, Graph};
use crate::plan::{Plan, Problem};
use rxvm_vm::builder::{FunctionBuilder, ModuleBuilder, Operand};
use rxvm_vm::bytecode::Reg;
use rxvm_vm::host_tensor::shared_data;
use rxvm_vm::module::ConstData;
use rxvm_vm::types::{Scope, Type};
use rxvm_vm::{HostTensor, Module};
use std::collections::HashMap;
use std::sync::Arc;

/// Where the types, arena sizes, offsets and view dims of the lowered program come from:
/// the plan's numbers ([`Fixed`]), or for a program that serves every value of its
/// symbols, expressions computed in bytecode ([`super::symbolic`]).
pub trait Layout {
    /// The type of graph input `input`, given its concrete type.
    fn param_type(&self, _input: usize, concrete: Type) -> Type {
        concrete
    }
    /// The result type of graph output `name`, given its concrete type.
    fn result_type(&self, _name: &str, concrete: Type) -> Type {
        concrete
    }
    /// Runs once the function has its parameters, before any other instruction.
    fn prologue(&mut self, _f: &mut FunctionBuilder) -> Result<(), String> {
        Ok(())
    }
    /// The size of arena `pool`, `bytes` in the plan.
    fn arena_size(&mut self, f: &mut FunctionBuilder, pool: u32, bytes: u64) -> Result<Operand, String>;
    /// The offset of buffer `buffer`, `offset` in the plan.
    fn offset(&mut self, f: &mut FunctionBuilder, buffer: usize, offset: u64) -> Result<Operand, String>;
    /// The view dims of tensor `name`, `shape` in the plan.
    fn dims(&mut self, f: &mut FunctionBuilder, name: &str, shape: &[i64]) -> Result<Vec<Operand>, String>;
}

/// The plan's numbers, as constants.
pub struct Fixed;

impl Layout for Fixed {
    fn arena_size(&mut self, _: &mut FunctionBuilder, _: u32, bytes: u64) -> Result<Operand, String> {
        Ok(Operand::Int(i64::try_from(bytes.max(1)).map_err(|_| format!("internal: arena of {bytes} bytes"))?))
    }
    fn offset(&mut self, _: &mut FunctionBuilder, _: usize, offset: u64) -> Result<Operand, String> {
        Ok(Operand::Int(i64::try_from(offset).map_err(|_| format!("internal: offset {offset}"))?))
    }
    fn dims(&mut self, _: &mut FunctionBuilder, _: &str, shape: &[i64]) -> Result<Vec<Operand>, String> {
        Ok(shape.iter().map(|&d| Operand::Int(d)).collect())
    }
}

/// Emits the module for the schedule `s` of `g`, with buffer `i` of `live` at
/// `plan.offsets[i]` in arena `problem.buffers[i].pool`. The pools in `parameters` are
/// storage parameters of `@main` after the graph inputs (in that order); planned inputs are
/// placed in theirs. `layout` gives the numbers (see [`Layout`]).
#[allow(clippy::too_many_arguments)]
pub fn lower(
    g: &Graph,
    a: &Analysis,
    s: &Schedule,
    live: &Liveness,
    problem: &Problem,
    plan: &Plan,
    parameters: &[u32],
    layout: &mut dyn Layout,
) -> Result<Module, String> {
    // Storage sizes and offsets are `int`s (i64) in the program: an arena beyond i64::MAX
    // would wrap to a negative size. Offsets lie within their arena, so they fit too.
    if let Some(&(pool, bytes)) = plan.pool_sizes.iter().find(|&&(_, bytes)| i64::try_from(bytes).is_err()) {
        return Err(format!(
            "{} needs {bytes} bytes, more than a storage can hold ({} bytes)",
            problem.pool_name(pool),
            i64::MAX
        ));
    }
    let ty = |name: &str| -> Result<Type, String> {
        if a.run_time.contains(name) {
            return Ok(Type::AnyTensor);
        }
        let (d, s) = a.types.get(name).ok_or_else(|| format!("tensor `{name}` has no type"))?;
        Ok(tensor_type(*d, s))
    };
    // The last step reading each tensor the run allocates; returned ones live on.
    let mut run_time_last: HashMap<&str, u32> = HashMap::new();
    for (step, st) in s.steps.iter().enumerate() {
        for x in st.inputs.iter().chain(&st.outputs).filter(|x| s.run_time.contains(*x)) {
            run_time_last.insert(x, step as u32);
        }
    }
    for o in &s.outputs {
        run_time_last.remove(o.as_str());
    }
    let mut params: Vec<Type> = g
        .inputs
        .iter()
        .enumerate()
        .map(|(k, i)| Ok(layout.param_type(k, ty(&i.name)?)))
        .collect::<Result<_, String>>()?;
    params.extend(parameters.iter().map(|_| Type::Storage));
    // Returned tensors are buffers: the outputs themselves or their buffer copies.
    let results: Vec<Type> =
        g.outputs.iter().map(|o| Ok(layout.result_type(o, ty(o)?))).collect::<Result<_, String>>()?;
    let mut mb = ModuleBuilder::new(&ident(if g.name.is_empty() { "model" } else { &g.name }, &mut HashMap::new()));
    let mut f = mb.function("main", params, results);
    let mut names = HashMap::new();
    // Registers of run-time values: graph inputs and computed tensors.
    let mut regs: HashMap<&str, Reg> = HashMap::new();
    for (i, inp) in g.inputs.iter().enumerate() {
        let r = f.param(i as u32);
        f.name(r, &ident(&inp.name, &mut names));
        regs.insert(&inp.name, r);
    }
    // Per arena: the step of its first definition and of its last allocation.
    let mut arena_span: HashMap<u32, (u32, u32)> = HashMap::new();
    for t in &live.tensors {
        let pool = problem.buffers[t.buffer].pool;
        let e = arena_span.entry(pool).or_insert((t.def, t.def));
        e.0 = e.0.min(t.def);
        e.1 = e.1.max(t.def);
    }
    let mut arenas: HashMap<u32, Reg> = HashMap::new();
    // The pool's register: its name, or for a pool of one buffer `<tensor>.storage`.
    let pool_name =
        |pool: u32, names: &mut HashMap<String, usize>| match problem.pool_names.iter().find(|p| p.0 == pool) {
            Some((_, n)) => ident(n, names),
            None => {
                let b = problem.buffers.iter().position(|b| b.pool == pool).unwrap_or(0);
                format!("{}.storage", ident(&live.tensors[live.buffers[b].tensor].name, names))
            }
        };
    for (k, &pool) in parameters.iter().enumerate() {
        let r = f.param((g.inputs.len() + k) as u32);
        let name = pool_name(pool, &mut names);
        f.name(r, &name);
        arenas.insert(pool, r);
    }
    for (i, inp) in g.inputs.iter().enumerate() {
        if let Some(t) = live.tensor(&inp.name) {
            let pool = problem.buffers[t.buffer].pool;
            let k = parameters.iter().position(|&p| p == pool).ok_or_else(|| {
                format!("internal: input `{}` is planned in pool {pool}, which is not a parameter", inp.name)
            })?;
            f.place_param(i as u32, (g.inputs.len() + k) as u32, plan.offsets[t.buffer]);
        }
    }
    layout.prologue(&mut f)?;
    let mut const_ids = HashMap::new();
    let mut const_names = HashMap::new();
    let mut konst = |mb: &mut ModuleBuilder, name: &str, c: &Arc<HostTensor>| {
        *const_ids.entry(name.to_string()).or_insert_with(|| {
            mb.constant(&ident(name, &mut const_names), c.dtype, &c.shape, ConstData::Bytes(shared_data(c)))
        })
    };
    for (step, st) in s.steps.iter().enumerate() {
        let step = step as u32;
        let what = match st.kind {
            StepKind::Node(n) => format!("node `{}`", g.nodes[n].name),
            _ => format!("conversion of `{}`", st.inputs[0]),
        };
        // Arenas whose first tensor is defined here.
        let mut opening: Vec<(u32, u64)> = plan
            .pool_sizes
            .iter()
            .copied()
            .filter(|(p, _)| !parameters.contains(p) && arena_span.get(p).is_some_and(|s| s.0 == step))
            .collect();
        opening.sort_unstable();
        for (pool, bytes) in opening {
            let size = layout.arena_size(&mut f, pool, bytes)?;
            let storage = f.alloc_storage(size, None, 0, Scope::Global);
            let name = pool_name(pool, &mut names);
            f.name(storage, &name);
            arenas.insert(pool, storage);
        }
        let mut out_regs = Vec::new();
        let run_time = st.outputs.iter().any(|o| s.run_time.contains(o));
        for o in st.outputs.iter().filter(|o| !o.is_empty() && !run_time && !s.aliases.contains_key(*o)) {
            let t = live.tensor(o).ok_or_else(|| format!("{what}: output `{o}` was not planned"))?;
            let pool = problem.buffers[t.buffer].pool;
            let storage = *arenas.get(&pool).ok_or_else(|| format!("internal: arena {pool} is not open at `{o}`"))?;
            let dims = layout.dims(&mut f, o, &t.shape)?;
            let off = layout.offset(&mut f, t.buffer, plan.offsets[t.buffer])?;
            let r = f.alloc_tensor(storage, off, t.dtype, &dims, t.scope);
            f.name(r, &ident(o, &mut names));
            regs.insert(o, r);
            out_regs.push(r);
        }
        if let StepKind::ToBlocked | StepKind::FromBlocked = st.kind {
            let src = *regs.get(st.inputs[0].as_str()).ok_or_else(|| format!("internal: {what}: no register"))?;
            let name = if st.kind == StepKind::ToBlocked { "to_blocked" } else { "from_blocked" };
            f.call_builtin(name, &[Operand::Reg(src), Operand::Reg(out_regs[0])])
                .map_err(|e| format!("{what}: {e}"))?;
        } else if let (StepKind::Node(n), false) = (st.kind, live.is_view_step(st)) {
            let node = &g.nodes[n];
            let mut inputs = Vec::new();
            for x in &st.inputs {
                inputs.push(if x.is_empty() {
                    Operand::None
                } else if let Some(r) = regs.get(x.as_str()) {
                    Operand::Reg(*r)
                } else {
                    let c = a
                        .consts
                        .get(x.as_str())
                        .ok_or_else(|| format!("node `{}`: input `{x}` is undefined", node.name))?;
                    Operand::Const(konst(&mut mb, x, c))
                });
            }
            if run_time {
                // Shapes known only at run time: the VM infers them and allocates the outputs.
                let nout = st.outputs.iter().rposition(|o| !o.is_empty()).map_or(1, |i| i + 1);
                let cf = g.subgraphs.get(&node.name);
                let dsts = super::control::emit_run_time_node(&mut mb, &mut f, "main", node, cf, &inputs, nout)?;
                for (o, r) in st.outputs.iter().zip(dsts) {
                    if o.is_empty() {
                        f.kill(r);
                    } else {
                        f.name(r, &ident(o, &mut names));
                        regs.insert(o, r);
                    }
                }
                kill_dying(&mut f, st, step, live, &regs, &run_time_last);
                continue;
            }
            // Outputs named "" are omitted: the call passes `none` for them.
            let mut outs = Vec::new();
            let mut k = 0;
            for o in &st.outputs {
                if o.is_empty() {
                    outs.push(None);
                } else if let Some(src) = s.aliases.get(o) {
                    // A donated input updated in place: the output is its tensor.
                    let r =
                        *regs.get(src.as_str()).ok_or_else(|| format!("internal: donated `{src}` has no register"))?;
                    regs.insert(o, r);
                    outs.push(Some(r));
                } else {
                    outs.push(Some(out_regs[k]));
                    k += 1;
                }
            }
            while outs.last() == Some(&None) {
                outs.pop();
            }
            if outs.contains(&None) {
                return Err(format!("node `{}`: omitted outputs before named ones are not supported", node.name));
            }
            let outs: Vec<Reg> = outs.into_iter().flatten().collect();
            f.call_op(&node.op, &inputs, &outs, node.attrs.clone())
                .map_err(|e| format!("node `{}`: {e}", node.name))?;
        }
        kill_dying(&mut f, st, step, live, &regs, &run_time_last);
        let mut closing: Vec<u32> = arena_span.iter().filter(|(_, s)| s.1 == step).map(|(p, _)| *p).collect();
        closing.sort_unstable();
        for pool in closing {
            if let Some(st) = arenas.remove(&pool) {
                f.kill(st);
            }
        }
    }
    let mut rets = Vec::new();
    for o in &s.outputs {
        rets.push(match regs.get(o.as_str()) {
            Some(r) => Operand::Reg(*r),
            None => {
                let c = a.consts.get(o.as_str()).ok_or_else(|| format!("graph output `{o}` is never produced"))?;
                Operand::Const(konst(&mut mb, o, c))
            }
        });
    }
    f.ret(&rets);
    mb.add_function(f);
    mb.build().map_err(|e| format!("the lowered module does not verify: {e}"))
}

/// Kills the tensors step `step` reads (or defines) for the last time: planned ones by
/// their liveness, those the run allocates by `run_time_last`.
fn kill_dying(
    f: &mut FunctionBuilder,
    st: &super::scopes::Step,
    step: u32,
    live: &Liveness,
    regs: &HashMap<&str, Reg>,
    run_time_last: &HashMap<&str, u32>,
) {
    let mut dying: Vec<&str> = st.inputs.iter().chain(&st.outputs).map(String::as_str).collect();
    dying.sort_unstable();
    dying.dedup();
    for x in dying {
        let last = live.tensor(x).map(|t| t.last).or_else(|| run_time_last.get(x).copied());
        if let (Some(last), Some(r)) = (last, regs.get(x)) {
            if last == step {
                f.kill(*r);
            }
        }
    }
}
