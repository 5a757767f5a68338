//! Reordering independent operators to lower the peak of live bytes.
//!
//! The lower bound of every memory plan is the peak of bytes live at one step, and that
//! peak depends on the schedule: in an inception or densenet block, running the branch
//! that frees the most (or allocates the least) first keeps fewer tensors alive at once.
//! [`reorder`] is a list scheduler: among the nodes whose inputs are ready it runs the one
//! that adds the fewest net bytes (its outputs minus the tensors it reads for the last
//! time), ties broken by the original order. Views (Reshape, Flatten, ...) cost nothing and
//! keep their source alive, as in [`super::liveness`]. The caller keeps whichever order has
//! the lower peak, so the pass never makes a plan worse.

use super::liveness::VIEW_OPS;
use super::scopes::dense_bytes;
use crate::graph::{Analysis, Graph};
use std::collections::{BTreeSet, HashMap};

/// Bytes of a tensor's type (0 when unknown; liveness has already refused overflowing ones).
fn bytes_of(a: &Analysis, t: &str) -> u64 {
    a.types.get(t).and_then(|(d, s)| dense_bytes(*d, s)).unwrap_or(0)
}

/// A dependency-respecting permutation of `g.nodes` (indices) that greedily keeps the
/// live bytes low. Nodes folded at compile time keep their places at the front.
pub fn reorder<'g>(g: &'g Graph, a: &Analysis) -> Vec<usize> {
    let n = g.nodes.len();
    let runtime = |x: &str| !x.is_empty() && !a.consts.contains_key(x);
    // The buffer each run-time tensor lives in: itself, or the source a view aliases.
    let mut root: HashMap<&str, &str> = HashMap::new();
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, node) in g.nodes.iter().enumerate() {
        for o in node.outputs.iter().filter(|o| runtime(o)) {
            producer.insert(o, i);
            let src = node.inputs.first().map(String::as_str).filter(|x| runtime(x));
            let aliased = match src {
                Some(x) if VIEW_OPS.contains(&node.op.as_str()) && bytes_of(a, x) == bytes_of(a, o) => {
                    root.get(x).copied().unwrap_or(x)
                }
                _ => o.as_str(),
            };
            root.insert(o, aliased);
        }
    }
    fn root_in<'g>(root: &HashMap<&'g str, &'g str>, t: &'g str) -> &'g str {
        root.get(t).copied().unwrap_or(t)
    }
    let root_of = |t: &'g str| root_in(&root, t);
    // Readers left per buffer; graph outputs are never freed.
    let mut readers: HashMap<&str, usize> = HashMap::new();
    let mut deps = vec![0usize; n];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in g.nodes.iter().enumerate() {
        let mut seen = BTreeSet::new();
        for x in node.inputs.iter().filter(|x| runtime(x)) {
            *readers.entry(root_of(x)).or_default() += 1;
            if let Some(&p) = producer.get(x.as_str()) {
                if seen.insert(p) {
                    deps[i] += 1;
                    users[p].push(i);
                }
            }
        }
    }
    for o in &g.outputs {
        *readers.entry(root_of(o)).or_default() += usize::MAX / 2;
    }
    let mut order: Vec<usize> = (0..n).filter(|&i| a.folded[i]).collect();
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| !a.folded[i] && deps[i] == 0).collect();
    // Net bytes node `i` would add if it ran now.
    let net = |i: usize, readers: &HashMap<&str, usize>| -> i64 {
        let node = &g.nodes[i];
        let alloc: u64 =
            node.outputs.iter().filter(|o| runtime(o) && root_of(o) == o.as_str()).map(|o| bytes_of(a, o)).sum();
        let mut last: HashMap<&str, usize> = HashMap::new();
        for x in node.inputs.iter().filter(|x| runtime(x)) {
            *last.entry(root_of(x)).or_default() += 1;
        }
        // Graph inputs are the caller's memory: reading them last frees nothing planned.
        let freed: u64 = last
            .iter()
            .filter(|(r, k)| producer.contains_key(*r) && readers.get(*r).copied().unwrap_or(0) == **k)
            .map(|(r, _)| bytes_of(a, r))
            .sum();
        alloc as i64 - freed as i64
    };
    while let Some(&next) = ready.iter().min_by_key(|&&i| (net(i, &readers), i)) {
        ready.remove(&next);
        order.push(next);
        for x in g.nodes[next].inputs.iter().filter(|x| runtime(x)) {
            if let Some(r) = readers.get_mut(root_of(x)) {
                *r -= 1;
            }
        }
        for &u in &users[next] {
            deps[u] -= 1;
            if deps[u] == 0 {
                ready.insert(u);
            }
        }
    }
    order
}

/// `g` with its nodes in `order`.
pub fn reordered(g: &Graph, order: &[usize]) -> Graph {
    let mut out = g.clone();
    out.nodes = order.iter().map(|&i| g.nodes[i].clone()).collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::analyze;
    use rxvm_vm::ops::Attrs;
    use rxvm_vm::types::DType;

    #[test]
    fn the_branch_that_frees_memory_runs_first() {
        // x feeds two branches; the schedule runs both wide producers before either
        // reducer. Interleaving (wide, reduce, wide, reduce) halves the peak.
        let mut g = Graph::new("g".into());
        let none = Attrs::default;
        g.input("x", DType::F32, &[1, 4, 8, 8])
            .node("wide_a", "Relu", &["x"], &["a"], none())
            .node("wide_b", "Sigmoid", &["x"], &["b"], none())
            .node("reduce_a", "GlobalAveragePool", &["a"], &["ra"], none())
            .node("reduce_b", "GlobalAveragePool", &["b"], &["rb"], none())
            .node("join", "Add", &["ra", "rb"], &["y"], none())
            .output("y");
        let a = analyze(&g, &[vec![1, 4, 8, 8]]).unwrap();
        let order = reorder(&g, &a);
        let names: Vec<&str> = order.iter().map(|&i| g.nodes[i].name.as_str()).collect();
        assert_eq!(names, ["wide_a", "reduce_a", "wide_b", "reduce_b", "join"]);
    }
}
