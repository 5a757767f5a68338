//! Fusing a `Conv` with what follows it into one `FusedConv` (onnxruntime's contrib
//! operator, `Y = activation(Conv(X, W, B) + Z)`): the `Add` or two-input `Sum` of a
//! tensor shaped as its output (a residual connection), then an activation (`Relu`,
//! `LeakyRelu`, `Clip` with two constant bounds, `Sigmoid`, `Tanh`, `HardSigmoid`), each link
//! the only reader of the one before. That saves a kernel and an activation tensor per
//! absorbed operator (resnet50: 49 `Relu`s and 16 `Sum`s), and the kernels apply the
//! epilogue while the output is in cache. On the host the results are bit-identical to the
//! unfused graph's: the fused kernel rounds each step to the output dtype as the unfused
//! operators do.
//!
//! The fused node takes the place of the last operator it absorbs, where all its inputs
//! exist; the memory plan is made for the fused graph.

use super::fold::{f32_shaped, fresh_name, inference_normalization, Normalization};
use crate::graph::{Analysis, Graph, Node};
use rxvm_vm::ops::AttrValue;
use rxvm_vm::types::DType;
use std::collections::HashMap;

/// `g` with every inference-mode `BatchNormalization` of an f32 `[N, C, spatial...]` input
/// whose parameters are constants (one not folded into a Conv before it: densenet121's
/// 62, which precede their Conv) written as the per-channel `Conv` it is: `group = C`,
/// 1×1 weights `k = scale / sqrt(var + epsilon)`, bias `B - mean · k`. The Conv runs in
/// place (the normalization's host kernel copies its operands), and
/// [`fuse_conv_chains`] then absorbs the `Relu` that follows. Results differ from the
/// normalization by rounding only (`x · k + (B - mean · k)` for `(x - mean) · k + B`).
/// Node for node (same positions, same output names), so `a` still describes the result
/// for [`fuse_conv_chains`]. `None` when there is none.
pub fn batchnorm_as_conv(g: &Graph, a: &Analysis) -> Option<Graph> {
    let mut out = g.clone();
    let mut changed = false;
    for (n, bn) in g.nodes.iter().enumerate() {
        if bn.op != "BatchNormalization" || bn.inputs.is_empty() {
            continue;
        }
        let Some((DType::F32, shape)) = a.types.get(bn.inputs[0].as_str()).filter(|t| t.1.len() >= 3) else { continue };
        let Ok(channels) = usize::try_from(shape[1]) else { continue };
        let Some(Normalization { k, bias, mean }) = inference_normalization(bn, n, a, channels) else { continue };
        let b: Vec<f64> = (0..channels).map(|c| bias[c] - mean[c] * k[c]).collect();
        let spatial = shape.len() - 2;
        let mut w_shape = vec![channels as i64, 1];
        w_shape.extend(std::iter::repeat_n(1, spatial));
        let [w_name, b_name] =
            ["weights", "bias"].map(|what| fresh_name(&out, a, format!("{}.as_conv_{what}", bn.name)));
        out.add_const(&w_name, f32_shaped(w_shape, &k));
        out.add_const(&b_name, f32_shaped(vec![channels as i64], &b));
        let attrs = rxvm_vm::ops::Attrs(vec![
            ("group".into(), AttrValue::Int(channels as i64)),
            ("kernel_shape".into(), AttrValue::Ints(vec![1; spatial])),
        ]);
        out.nodes[n] = Node {
            name: bn.name.clone(),
            op: "Conv".into(),
            inputs: vec![bn.inputs[0].clone(), w_name, b_name],
            outputs: vec![bn.outputs[0].clone()],
            attrs,
        };
        changed = true;
    }
    changed.then_some(out)
}

/// An activation `FusedConv` applies in place of `node`: its name and parameters, or
/// `None` when `node` is not one (or its parameters are not constants).
fn activation_of(node: &Node, a: &Analysis) -> Option<(&'static str, Vec<f64>)> {
    let scalar = |i: usize| -> Option<Option<f64>> {
        match node.inputs.get(i).filter(|x| !x.is_empty()) {
            None => Some(None),
            Some(x) => {
                let c = a.consts.get(x.as_str())?;
                (c.numel() == 1 && c.dtype == DType::F32).then(|| c.to_f64().first().copied())
            }
        }
    };
    match node.op.as_str() {
        "Relu" => Some(("Relu", vec![])),
        "Sigmoid" => Some(("Sigmoid", vec![])),
        "Tanh" => Some(("Tanh", vec![])),
        "LeakyRelu" => Some(("LeakyRelu", vec![node.attrs.float("alpha", 0.01)])),
        "HardSigmoid" => Some(("HardSigmoid", vec![node.attrs.float("alpha", 0.2), node.attrs.float("beta", 0.5)])),
        "Clip" => {
            // Opset 11 on: optional min and max inputs; before: attributes. Both bounds
            // given (ReLU6), so the fused clamp is the same.
            let (lo, hi) = (scalar(1)?, scalar(2)?);
            let lo = lo.or_else(|| node.attrs.get("min").map(|_| node.attrs.float("min", 0.0)))?;
            let hi = hi.or_else(|| node.attrs.get("max").map(|_| node.attrs.float("max", 0.0)))?;
            Some(("Clip", vec![lo, hi]))
        }
        _ => None,
    }
}

/// `g` with every `Conv` chain fused into a `FusedConv`; `None` when nothing fuses.
pub fn fuse_conv_chains(g: &Graph, a: &Analysis) -> Option<Graph> {
    let mut readers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (n, node) in g.nodes.iter().enumerate() {
        for x in node.inputs.iter().filter(|x| !x.is_empty()) {
            readers.entry(x.as_str()).or_default().push(n);
        }
    }
    let is_output = |t: &str| g.outputs.iter().any(|o| o == t);
    // The one reader of `t`, when `t` is no graph output and the reader runs at run time.
    let only_reader = |t: &str| match readers.get(t).map(Vec::as_slice) {
        Some(&[r]) if !is_output(t) && !a.folded[r] => Some(r),
        _ => None,
    };
    let mut absorbed = vec![false; g.nodes.len()];
    // By the position of the last node each chain absorbs: the fused node.
    let mut fused: HashMap<usize, Node> = HashMap::new();
    for (p, conv) in g.nodes.iter().enumerate() {
        if conv.op != "Conv" || a.folded[p] || absorbed[p] || conv.outputs.len() != 1 || conv.inputs.len() < 2 {
            continue;
        }
        let y = conv.outputs[0].as_str();
        let Some(ty) = a.types.get(y).filter(|t| t.0 == DType::F32) else { continue };
        // The nodes the chain absorbs after the Conv, in order.
        let mut chain: Vec<usize> = Vec::new();
        let mut cur = y;
        let mut z: Option<String> = None;
        let mut act: Option<(&str, Vec<f64>)> = None;
        if let Some(r) = only_reader(cur) {
            let add = &g.nodes[r];
            let is_add = matches!(add.op.as_str(), "Add" | "Sum") && add.inputs.len() == 2 && add.outputs.len() == 1;
            let other = add.inputs.iter().find(|x| x.as_str() != cur);
            if let (true, Some(other)) = (is_add && !absorbed[r], other) {
                if a.types.get(other.as_str()) == Some(ty) {
                    z = Some(other.clone());
                    cur = add.outputs[0].as_str();
                    chain.push(r);
                }
            }
        }
        if let Some(r) = only_reader(cur) {
            let node = &g.nodes[r];
            if let (Some(found), false, 1) = (activation_of(node, a), absorbed[r], node.outputs.len()) {
                act = Some(found);
                cur = node.outputs[0].as_str();
                chain.push(r);
            }
        }
        let Some(&last) = chain.last() else { continue };
        let mut inputs = conv.inputs.clone();
        if let Some(z) = z {
            inputs.resize(3, String::new());
            inputs.push(z);
        }
        let mut attrs = conv.attrs.clone();
        if let Some((name, params)) = act {
            attrs.0.push(("activation".into(), AttrValue::Str(name.into())));
            if !params.is_empty() {
                attrs.0.push(("activation_params".into(), AttrValue::Floats(params)));
            }
        }
        for n in std::iter::once(p).chain(chain) {
            absorbed[n] = true;
        }
        let node = Node {
            name: format!("{}.fused", conv.name),
            op: "FusedConv".into(),
            inputs,
            outputs: vec![cur.to_string()],
            attrs,
        };
        fused.insert(last, node);
    }
    if fused.is_empty() {
        return None;
    }
    let mut out = g.clone();
    out.nodes.clear();
    for (n, node) in g.nodes.iter().enumerate() {
        if let Some(f) = fused.remove(&n) {
            out.nodes.push(f);
        } else if !absorbed[n] {
            out.nodes.push(node.clone());
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::analyze;
    use rxvm_vm::ops::Attrs;
    use rxvm_vm::HostTensor;

    fn konst(shape: &[i64], seed: u32) -> HostTensor {
        let n: i64 = shape.iter().product();
        let v: Vec<u8> = (0..n)
            .flat_map(|i| ((((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 500.0 - 1.0).to_le_bytes())
            .collect();
        HostTensor::new(DType::F32, shape.to_vec(), v).unwrap()
    }

    fn residual_block() -> Graph {
        let mut g = Graph::new("g".into());
        g.input("x", DType::F32, &[1, 4, 5, 5]);
        g.add_const("w1", konst(&[4, 4, 3, 3], 1));
        g.add_const("w2", konst(&[4, 4, 1, 1], 2));
        g.add_const("lo", konst(&[], 3));
        g.add_const("hi", konst(&[], 4));
        let pads = Attrs(vec![("pads".into(), AttrValue::Ints(vec![1, 1, 1, 1]))]);
        g.node("c1", "Conv", &["x", "w1"], &["a"], pads)
            .node("r1", "Relu", &["a"], &["b"], Attrs::default())
            .node("c2", "Conv", &["b", "w2"], &["c"], Attrs::default())
            .node("sum", "Sum", &["x", "c"], &["d"], Attrs::default())
            .node("r2", "Relu", &["d"], &["e"], Attrs::default())
            .node("c3", "Conv", &["e", "w2"], &["f"], Attrs::default())
            .node("clip", "Clip", &["f", "lo", "hi"], &["g"], Attrs::default())
            .output("g");
        g
    }

    #[test]
    fn conv_add_and_activation_chains_become_one_fused_conv() {
        let g = residual_block();
        let a = analyze(&g, &[vec![1, 4, 5, 5]]).unwrap();
        let f = fuse_conv_chains(&g, &a).expect("fuses");
        let got: Vec<(&str, Vec<&str>, &str, &str)> = f
            .nodes
            .iter()
            .map(|n| {
                (
                    n.op.as_str(),
                    n.inputs.iter().map(String::as_str).collect(),
                    n.outputs[0].as_str(),
                    n.attrs.str("activation").unwrap_or("-"),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("FusedConv", vec!["x", "w1"], "b", "Relu"),
                ("FusedConv", vec!["b", "w2", "", "x"], "e", "Relu"),
                ("FusedConv", vec!["e", "w2"], "g", "Clip"),
            ]
        );
        let (lo, hi) = (a.consts["lo"].to_f64()[0], a.consts["hi"].to_f64()[0]);
        assert_eq!(f.nodes[2].attrs.floats("activation_params"), Some(vec![lo, hi]));
    }

    #[test]
    fn outputs_read_twice_or_returned_stay_unfused() {
        let mut g = residual_block();
        // `a` is also a graph output, and `c` is read by a second node.
        g.output("a");
        g.node("twice", "Relu", &["c"], &["h"], Attrs::default()).output("h");
        let a = analyze(&g, &[vec![1, 4, 5, 5]]).unwrap();
        let f = fuse_conv_chains(&g, &a).expect("fuses the third chain");
        let ops: Vec<&str> = f.nodes.iter().map(|n| n.op.as_str()).collect();
        assert_eq!(ops, ["Conv", "Relu", "Conv", "Sum", "Relu", "FusedConv", "Relu"]);
    }
}
