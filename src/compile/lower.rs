//! Lowering a planned graph to a VM module: one `alloc_storage` per arena (right before the
//! first tensor in it is defined), an `alloc_tensor` at each tensor's definition (views
//! reuse their source's offset), the operator calls, a `kill` after each tensor's last use
//! and, for each arena, a `kill` once no further tensor is allocated in it; then `ret` of
//! the outputs.

use super::liveness::Liveness;
use crate::graph::{ident, tensor_type, Analysis, Graph};
use crate::plan::{Plan, Problem};
use rxvm_vm::builder::{ModuleBuilder, Operand};
use rxvm_vm::bytecode::Reg;
use rxvm_vm::module::ConstData;
use rxvm_vm::types::{Scope, Type};
use rxvm_vm::{HostTensor, Module};
use std::collections::HashMap;

/// Emits the module for `g` with buffer `i` of `live` at `plan.offsets[i]` in arena
/// `problem.buffers[i].pool`.
pub fn lower(g: &Graph, a: &Analysis, live: &Liveness, problem: &Problem, plan: &Plan) -> Result<Module, String> {
    let ty = |name: &str| -> Result<Type, String> {
        let (d, s) = a.types.get(name).ok_or_else(|| format!("tensor `{name}` has no type"))?;
        Ok(tensor_type(*d, s))
    };
    let params: Vec<Type> = g.inputs.iter().map(|i| ty(&i.name)).collect::<Result<_, _>>()?;
    let results: Vec<Type> = g.outputs.iter().map(|o| ty(o)).collect::<Result<_, _>>()?;
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
    let single = plan.pool_sizes.len() == 1;
    let mut arenas: HashMap<u32, Reg> = HashMap::new();
    let mut const_ids = HashMap::new();
    let mut const_names = HashMap::new();
    let mut konst = |mb: &mut ModuleBuilder, name: &str, c: &HostTensor| {
        *const_ids.entry(name.to_string()).or_insert_with(|| {
            mb.constant(&ident(name, &mut const_names), c.dtype, &c.shape, ConstData::Bytes(c.data.clone()))
        })
    };
    for (step, &n) in live.nodes.iter().enumerate() {
        let step = step as u32;
        let node = &g.nodes[n];
        // Arenas whose first tensor is defined here.
        let mut opening: Vec<(u32, u64)> =
            plan.pool_sizes.iter().copied().filter(|(p, _)| arena_span.get(p).is_some_and(|s| s.0 == step)).collect();
        opening.sort_unstable();
        for (pool, bytes) in opening {
            let st = f.alloc_storage(Operand::Int(bytes.max(1) as i64), None, 0, Scope::Global);
            let name = if single {
                "arena".to_string()
            } else {
                let b = problem.buffers.iter().position(|b| b.pool == pool).unwrap_or(0);
                format!("{}.storage", ident(&live.tensors[live.buffers[b].tensor].name, &mut names))
            };
            f.name(st, &name);
            arenas.insert(pool, st);
        }
        let mut out_regs = Vec::new();
        for o in node.outputs.iter().filter(|o| !o.is_empty()) {
            let t = live.tensor(o).ok_or_else(|| format!("node `{}`: output `{o}` was not planned", node.name))?;
            let pool = problem.buffers[t.buffer].pool;
            let st = *arenas.get(&pool).ok_or_else(|| format!("internal: arena {pool} is not open at `{o}`"))?;
            let dims: Vec<Operand> = t.shape.iter().map(|&d| Operand::Int(d)).collect();
            let off = plan.offsets[t.buffer] as i64;
            let r = f.alloc_tensor(st, Operand::Int(off), t.dtype, &dims, Scope::Global);
            f.name(r, &ident(o, &mut names));
            regs.insert(o, r);
            out_regs.push(r);
        }
        if !live.is_view_node(g, n) {
            let mut inputs = Vec::new();
            for x in &node.inputs {
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
            // Outputs named "" are omitted: the call passes `none` for them.
            let mut outs = Vec::new();
            let mut k = 0;
            for o in &node.outputs {
                if o.is_empty() {
                    outs.push(None);
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
        // Tensors read (or defined) for the last time here, then arenas done allocating.
        let mut dying: Vec<&str> = node.inputs.iter().chain(&node.outputs).map(String::as_str).collect();
        dying.sort_unstable();
        dying.dedup();
        for x in dying {
            if let (Some(t), Some(r)) = (live.tensor(x), regs.get(x)) {
                if t.last == step {
                    f.kill(*r);
                }
            }
        }
        let mut closing: Vec<u32> = arena_span.iter().filter(|(_, s)| s.1 == step).map(|(p, _)| *p).collect();
        closing.sort_unstable();
        for pool in closing {
            if let Some(st) = arenas.remove(&pool) {
                f.kill(st);
            }
        }
    }
    let mut rets = Vec::new();
    for o in &g.outputs {
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
