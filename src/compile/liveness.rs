//! Liveness on the schedule: every run-time tensor's defining step and last use, and the
//! buffers they live in. A step is one node that runs at run time (nodes folded at compile
//! time take none). Views — Reshape, Flatten, Squeeze, Unsqueeze, and inference-time
//! Identity/Dropout of a tensor the program allocated — share their source's buffer and
//! extend its life. Graph outputs stay live to the end, so nothing overwrites them.

use crate::graph::{Analysis, Graph};
use rxvm_vm::types::DType;
use std::collections::HashMap;

/// Operators whose single output can be a view of input 0: the VM's tensors are dense, so
/// the bytes are the same in row-major order.
pub const VIEW_OPS: &[&str] = &["Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"];

/// A tensor the program computes.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub bytes: u64,
    /// The step that defines it.
    pub def: u32,
    /// The last step that reads it (`def` when nothing does; `steps` for graph outputs).
    pub last: u32,
    /// Index of its buffer in [`Liveness::buffers`].
    pub buffer: usize,
    /// True when it is a view of an earlier tensor's buffer.
    pub is_view: bool,
}

/// Memory that tensors live in: the first tensor's bytes, live from its definition to the
/// last use of any tensor viewing it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    pub bytes: u64,
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
    /// Steps in the schedule (nodes run at run time).
    pub steps: u32,
    /// Node index of each step.
    pub nodes: Vec<usize>,
}

impl Liveness {
    /// The tensor named `name`, if the program computes it.
    pub fn tensor(&self, name: &str) -> Option<&Tensor> {
        self.index.get(name).map(|&i| &self.tensors[i])
    }

    /// True when node `n` only makes a view (no kernel runs).
    pub fn is_view_node(&self, g: &Graph, n: usize) -> bool {
        g.nodes[n].outputs.first().and_then(|o| self.tensor(o)).is_some_and(|t| t.is_view)
    }
}

/// Computes liveness from the analysed graph.
pub fn liveness(g: &Graph, a: &Analysis) -> Result<Liveness, String> {
    let mut l = Liveness::default();
    for (n, node) in g.nodes.iter().enumerate() {
        if a.folded[n] {
            continue;
        }
        let step = l.nodes.len() as u32;
        l.nodes.push(n);
        for x in &node.inputs {
            if let Some(&t) = l.index.get(x.as_str()) {
                l.tensors[t].last = step;
                let b = l.tensors[t].buffer;
                l.buffers[b].last = l.buffers[b].last.max(step);
            }
        }
        let named: Vec<&String> = node.outputs.iter().filter(|o| !o.is_empty()).collect();
        for &o in &named {
            let (dtype, shape) =
                a.types.get(o.as_str()).ok_or_else(|| format!("node `{}`: output `{o}` has no type", node.name))?;
            let elems = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?));
            let bytes = elems
                .and_then(|e| e.checked_mul(dtype.size() as u64))
                .ok_or_else(|| format!("node `{}`: output `{o}` {shape:?} is too large", node.name))?;
            // A view of input 0 when the node only reinterprets it.
            let source = node.inputs.first().and_then(|x| l.index.get(x.as_str())).copied();
            let view = match source {
                Some(s) if VIEW_OPS.contains(&node.op.as_str()) && named.len() == 1 && l.tensors[s].bytes == bytes => {
                    Some(l.tensors[s].buffer)
                }
                _ => None,
            };
            let t = l.tensors.len();
            let buffer = view.unwrap_or_else(|| {
                l.buffers.push(Buffer { bytes, first: step, last: step, tensor: t });
                l.buffers.len() - 1
            });
            if l.index.insert(o.clone(), t).is_some() {
                return Err(format!("node `{}`: tensor `{o}` is defined twice", node.name));
            }
            l.tensors.push(Tensor {
                name: o.clone(),
                dtype: *dtype,
                shape: shape.clone(),
                bytes,
                def: step,
                last: step,
                buffer,
                is_view: view.is_some(),
            });
        }
    }
    l.steps = l.nodes.len() as u32;
    for o in &g.outputs {
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
    use crate::graph::{analyze, GraphInput, Node};
    use rxvm_vm::ops::Attrs;

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
        g.inputs.push(GraphInput { name: "x".into(), dtype: DType::F32, dims: vec![Some(2), Some(3)] });
        g.nodes.push(node("Relu", &["x"], &["a"]));
        g.nodes.push(node("Flatten", &["a"], &["f"]));
        g.nodes.push(node("Relu", &["f"], &["b"]));
        g.nodes.push(node("Relu", &["a"], &["c"]));
        g.nodes.push(node("Add", &["b", "c"], &["y"]));
        g.outputs.push("y".into());
        g.outputs.push("c".into());
        let a = analyze(&g, &[vec![2, 3]]).unwrap();
        let l = liveness(&g, &a).unwrap();
        let t = |n: &str| l.tensor(n).unwrap().clone();
        assert_eq!((t("a").def, t("a").last), (0, 3));
        assert!(t("f").is_view && t("f").buffer == t("a").buffer);
        assert_eq!((t("f").def, t("f").last), (1, 2));
        // c is a graph output: live to the end (step 5 = after the last node).
        assert_eq!((t("c").def, t("c").last), (3, 5));
        assert_eq!(l.buffers.len(), 4);
        assert_eq!(l.buffers[t("a").buffer], Buffer { bytes: 24, first: 0, last: 3, tensor: 0 });
    }
}
