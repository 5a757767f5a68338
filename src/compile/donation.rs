//! Donated inputs: graph inputs the caller lets the program update in place (`--donate`).
//! A node that rewrites part of its input 0 and leaves the rest — `TensorScatter` writing a
//! KV cache's new entries, `ScatterND`, `ScatterElements` — writes straight into a donated
//! input when nothing reads that input after it: its output is then the input's tensor,
//! neither planned nor copied, and returned as such. A decoder's caches passed from one
//! call to the next stay in one place (docs/symbolic-shapes.md).

use crate::graph::{Analysis, Graph};
use std::collections::HashMap;

/// Operators whose output is input 0 with some elements replaced, so that writing the
/// output over input 0 is the same computation (their kernels read what they replace
/// before writing it, or nothing of it).
pub const IN_PLACE_OPS: &[&str] = &["TensorScatter", "ScatterND", "ScatterElements"];

/// The outputs that are donated inputs updated in place, each mapped to its input. `Err`
/// names a donated input the graph does not have.
pub fn aliases(g: &Graph, a: &Analysis, donate: &[String]) -> Result<HashMap<String, String>, String> {
    for name in donate {
        if !g.inputs.iter().any(|i| &i.name == name) {
            let have: Vec<String> = g.inputs.iter().map(|i| format!("`{}`", i.name)).collect();
            return Err(format!(
                "--donate {name}: the model has no input `{name}`; its inputs are {}",
                have.join(", ")
            ));
        }
    }
    let mut out = HashMap::new();
    for (n, node) in g.nodes.iter().enumerate() {
        let (Some(x), Some(y)) = (node.inputs.first(), node.outputs.first()) else { continue };
        if !IN_PLACE_OPS.contains(&node.op.as_str()) || !donate.contains(x) || a.folded.get(n) == Some(&true) {
            continue;
        }
        // Same type, and no other reader of the input (before or after), nor is it returned.
        let same = matches!((a.types.get(x.as_str()), a.types.get(y.as_str())), (Some(t), Some(u)) if t == u);
        let readers = g.nodes.iter().filter(|m| m.inputs.contains(x)).count();
        if same && readers == 1 && !g.outputs.contains(x) && !out.values().any(|v| v == x) {
            out.insert(y.clone(), x.clone());
        }
    }
    Ok(out)
}
