//! Liveness on the schedule: every run-time tensor's defining step and last use, and the
//! buffers they live in. A step is a node that runs at run time (nodes folded at compile
//! time take none) or a layout conversion ([`super::scopes`]). Views — Reshape, Flatten,
//! Squeeze, Unsqueeze, and inference-time Identity/Dropout of a tensor the program
//! allocated, in the same scope — share their source's buffer and extend its life. Graph
//! outputs stay live to the end, so nothing overwrites them. Graph inputs planned in a pool
//! (`--inputs-in-arena`, `--pool inputs=...`) are tensors live from step 0, the program's
//! entry, to their last reader; the others stay in the caller's memory and are not planned.

use super::scopes::{Schedule, StepKind};
use crate::graph::Graph;
use rxvm_vm::types::{DType, Scope};
use std::collections::HashMap;

/// Operators whose single output can be a view of input 0: the VM's tensors are dense, so
/// the bytes are the same in row-major order.
pub const VIEW_OPS: &[&str] = &["Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"];

/// A tensor the program computes.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub dtype: DType,
    /// The view's shape (blocked for textures).
    pub shape: Vec<i64>,
    pub scope: Scope,
    /// Bytes it covers (the pitched image size for textures).
    pub bytes: u64,
    /// The step that defines it.
    pub def: u32,
    /// The last step that reads it (`def` when nothing does; `steps` for graph outputs).
    pub last: u32,
    /// Index of its buffer in [`Liveness::buffers`].
    pub buffer: usize,
    /// True when it is a view of an earlier tensor's buffer.
    pub is_view: bool,
    /// True for a graph input (a parameter, not defined by a step).
    pub is_input: bool,
}

/// Memory that tensors live in: the first tensor's bytes, live from its definition to the
/// last use of any tensor viewing it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    pub bytes: u64,
    /// Offset alignment in an arena.
    pub align: u64,
    pub scope: Scope,
    pub first: u32,
    pub last: u32,
    /// The tensor that defines it.
    pub tensor: usize,
}

/// The liveness of one graph's run-time tensors.
#[derive(Clone, Debug, Default)]
pub struct Liveness {
    pub tensors: Vec<Tensor>,
    pub buffers: Vec<Buffer>,
    /// Tensor index by name.
    pub index: HashMap<String, usize>,
    /// Steps in the schedule.
    pub steps: u32,
}

impl Liveness {
    /// The tensor named `name`, if the program computes it.
    pub fn tensor(&self, name: &str) -> Option<&Tensor> {
        self.index.get(name).map(|&i| &self.tensors[i])
    }

    /// True when `step` only makes a view (no kernel runs).
    pub fn is_view_step(&self, step: &super::scopes::Step) -> bool {
        step.outputs.first().and_then(|o| self.tensor(o)).is_some_and(|t| t.is_view)
    }
}

/// Computes liveness over the schedule `s` of graph `g`, with the graph inputs for which
/// `planned` holds planned from entry.
pub fn liveness(g: &Graph, s: &Schedule, planned: &dyn Fn(&str) -> bool) -> Result<Liveness, String> {
    let mut l = Liveness::default();
    for inp in g.inputs.iter().filter(|i| planned(&i.name)) {
        let p = s.tensors.get(&inp.name).ok_or_else(|| format!("graph input `{}` has no type", inp.name))?;
        let t = l.tensors.len();
        l.buffers.push(Buffer { bytes: p.bytes, align: p.align, scope: p.scope, first: 0, last: 0, tensor: t });
        l.index.insert(inp.name.clone(), t);
        l.tensors.push(Tensor {
            name: inp.name.clone(),
            dtype: p.dtype,
            shape: p.shape.clone(),
            scope: p.scope,
            bytes: p.bytes,
            def: 0,
            last: 0,
            buffer: l.buffers.len() - 1,
            is_view: false,
            is_input: true,
        });
    }
    for (step, st) in s.steps.iter().enumerate() {
        let step = step as u32;
        for x in &st.inputs {
            if let Some(&t) = l.index.get(x.as_str()) {
                l.tensors[t].last = step;
                let b = l.tensors[t].buffer;
                l.buffers[b].last = l.buffers[b].last.max(step);
            }
        }
        let (what, op) = match st.kind {
            StepKind::Node(n) => (format!("node `{}`", g.nodes[n].name), g.nodes[n].op.as_str()),
            StepKind::ToBlocked | StepKind::FromBlocked => (format!("conversion of `{}`", st.inputs[0]), ""),
        };
        // Tensors the run allocates are not planned.
        let named: Vec<&String> = st
            .outputs
            .iter()
            .filter(|o| !o.is_empty() && !s.run_time.contains(*o) && !s.aliases.contains_key(*o))
            .collect();
        for &o in &named {
            let p = s.tensors.get(o).ok_or_else(|| format!("{what}: output `{o}` has no type"))?;
            // A view of input 0 when the node only reinterprets it in the same scope.
            let source = st.inputs.first().and_then(|x| l.index.get(x.as_str())).copied();
            let view = match source {
                Some(src)
                    if VIEW_OPS.contains(&op)
                        && named.len() == 1
                        && l.tensors[src].bytes == p.bytes
                        && l.tensors[src].scope == p.scope =>
                {
                    Some(l.tensors[src].buffer)
                }
                _ => None,
            };
            let t = l.tensors.len();
            let buffer = view.unwrap_or_else(|| {
                l.buffers.push(Buffer {
                    bytes: p.bytes,
                    align: p.align,
                    scope: p.scope,
                    first: step,
                    last: step,
                    tensor: t,
                });
                l.buffers.len() - 1
            });
            if l.index.insert(o.clone(), t).is_some() {
                return Err(format!("{what}: tensor `{o}` is defined twice"));
            }
            l.tensors.push(Tensor {
                name: o.clone(),
                dtype: p.dtype,
                shape: p.shape.clone(),
                scope: p.scope,
                bytes: p.bytes,
                def: step,
                last: step,
                buffer,
                is_view: view.is_some(),
                is_input: false,
            });
        }
    }
    l.steps = s.steps.len() as u32;
    for o in &s.outputs {
        if let Some(&t) = l.index.get(o.as_str()) {
            l.tensors[t].last = l.steps;
            let b = l.tensors[t].buffer;
            l.buffers[b].last = l.steps;
        }
    }
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::scopes::{schedule, Textures};
    use crate::graph::{analyze, GraphInput, InputDim, Node};
    use rxvm_vm::ops::Attrs;
    use rxvm_vm::DeviceCaps;

    fn node(op: &str, ins: &[&str], outs: &[&str]) -> Node {
        Node {
            name: outs[0].to_string(),
            op: op.into(),
            inputs: ins.iter().map(|s| s.to_string()).collect(),
            outputs: outs.iter().map(|s| s.to_string()).collect(),
            attrs: Attrs::default(),
        }
    }

    #[test]
    fn lifetimes_views_and_outputs() {
        let mut g = Graph::new("g".into());
        g.inputs.push(GraphInput {
            name: "x".into(),
            dtype: DType::F32,
            dims: vec![InputDim::Fixed(2), InputDim::Fixed(3)],
        });
        g.nodes.push(node("Relu", &["x"], &["a"]));
        g.nodes.push(node("Flatten", &["a"], &["f"]));
        g.nodes.push(node("Relu", &["f"], &["b"]));
        g.nodes.push(node("Relu", &["a"], &["c"]));
        g.nodes.push(node("Add", &["b", "c"], &["y"]));
        g.outputs.push("y".into());
        g.outputs.push("c".into());
        let a = analyze(&g, &[vec![2, 3]]).unwrap();
        let s = schedule(&g, &a, &DeviceCaps::host(), Textures::Auto).unwrap();
        let l = liveness(&g, &s, &|_| false).unwrap();
        let t = |n: &str| l.tensor(n).unwrap().clone();
        assert_eq!((t("a").def, t("a").last), (0, 3));
        assert!(t("f").is_view && t("f").buffer == t("a").buffer);
        assert_eq!((t("f").def, t("f").last), (1, 2));
        // c is a graph output: live to the end (step 5 = after the last node).
        assert_eq!((t("c").def, t("c").last), (3, 5));
        assert_eq!(l.buffers.len(), 4);
        let b = &l.buffers[t("a").buffer];
        assert_eq!((b.bytes, b.align, b.first, b.last, b.tensor), (24, 128, 0, 3, 0));

        // A planned input is live from entry to its last reader, and views of it share it.
        let l = liveness(&g, &s, &|n| n == "x").unwrap();
        let x = l.tensor("x").unwrap();
        assert!(x.is_input && !x.is_view);
        assert_eq!((l.buffers[x.buffer].first, l.buffers[x.buffer].last), (0, 0));
        assert_eq!(l.buffers.len(), 5);
    }
}
