//! Small graphs built with the compiler's graph API, shared by tests.

use rxvm::graph::{Graph, GraphInput, InputDim, Node};
use rxvm::vm::ops::{AttrValue, Attrs};
use rxvm::vm::types::DType;
use rxvm::vm::HostTensor;

/// A node named `<op>_<first output>`.
pub fn node(op: &str, ins: &[&str], outs: &[&str], attrs: &[(&str, AttrValue)]) -> Node {
    Node {
        name: format!("{}_{}", op.to_lowercase(), outs[0]),
        op: op.into(),
        inputs: ins.iter().map(|s| s.to_string()).collect(),
        outputs: outs.iter().map(|s| s.to_string()).collect(),
        attrs: Attrs(attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()),
    }
}

/// A legacy export's shape arithmetic on `x: f32[batch, 3, 4]`: `h = Relu(x)`, then
/// `Shape(h)` → `Gather` of dim 0 → `Concat` with `-1` → `Reshape(h)`, to `y: [batch, 12]`.
pub fn legacy_reshape(batch: InputDim) -> Graph {
    let i64s = |v: &[i64]| {
        HostTensor::new(DType::I64, vec![v.len() as i64], v.iter().flat_map(|x| x.to_le_bytes()).collect())
            .expect("an i64 tensor")
    };
    let mut g = Graph::new("legacy".into());
    g.inputs.push(GraphInput {
        name: "x".into(),
        dtype: DType::F32,
        dims: vec![batch, InputDim::Fixed(3), InputDim::Fixed(4)],
    });
    g.add_const("zero", i64s(&[0]));
    g.add_const("minus_one", i64s(&[-1]));
    g.nodes.push(node("Relu", &["x"], &["h"], &[]));
    g.nodes.push(node("Shape", &["h"], &["s"], &[]));
    g.nodes.push(node("Gather", &["s", "zero"], &["n"], &[("axis", AttrValue::Int(0))]));
    g.nodes.push(node("Concat", &["n", "minus_one"], &["target"], &[("axis", AttrValue::Int(0))]));
    g.nodes.push(node("Reshape", &["h", "target"], &["y"], &[]));
    g.outputs.push("y".into());
    g
}
