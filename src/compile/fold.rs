//! Folding per-channel affine operators into the BatchNormalization before them.
//!
//! Caffe2-converted models (densenet121, inception_v2) follow each BatchNormalization with a
//! `Mul` and an `Add` by per-channel constants (the "Scale" layer). Both fold into the
//! normalization's parameters: `(BN(x) · k) + c` is `BN(x)` with `scale · k` and
//! `bias · k + c`. That saves two kernels and two activations per layer, and keeps such
//! chains in textures (a texture `Mul` needs two activations of one shape; a per-channel
//! constant is neither). The results differ from the unfolded graph by rounding only.

use crate::graph::{Analysis, Graph, Node};
use rxvm_vm::types::DType;
use rxvm_vm::HostTensor;
use std::collections::HashMap;

/// Per-channel values of a constant that broadcasts along axis 1 of a `[N, C, ...]`
/// activation of `rank` dims (`[C, 1, 1]`, `[1, C, 1, 1]`, a scalar, ...).
fn per_channel(c: &HostTensor, rank: usize, channels: usize) -> Option<Vec<f64>> {
    if c.dtype != DType::F32 || c.shape.len() > rank {
        return None;
    }
    // Right-aligned: the constant's dim for axis 1 is at index `len - (rank - 1)`.
    let lead = rank - c.shape.len();
    let mut along = 1;
    for (i, &d) in c.shape.iter().enumerate() {
        match (lead + i == 1, d) {
            (_, 1) => {}
            (true, d) if d as usize == channels => along = channels,
            _ => return None,
        }
    }
    let v = c.to_f64();
    Some((0..channels).map(|ch| v[if along == 1 { 0 } else { ch }]).collect())
}

fn f32_tensor(v: &[f64]) -> HostTensor {
    f32_shaped(vec![v.len() as i64], v)
}

/// `v` as an f32 tensor of `shape`, whose element count must be `v.len()`.
// The bytes are made here from `v`, four per element: callers pass a shape of `v.len()`
// elements, so the tensor is always valid.
#[allow(clippy::expect_used)]
pub(super) fn f32_shaped(shape: Vec<i64>, v: &[f64]) -> HostTensor {
    let bytes = v.iter().flat_map(|x| (*x as f32).to_le_bytes()).collect();
    HostTensor::new(DType::F32, shape, bytes).expect("an f32 tensor of its own length")
}

/// An inference-mode BatchNormalization as the per-channel map `(x - mean) · k + bias`,
/// `k = scale / sqrt(var + epsilon)`.
pub(super) struct Normalization {
    pub k: Vec<f64>,
    pub bias: Vec<f64>,
    pub mean: Vec<f64>,
}

/// Node `n`, `bn`, as a [`Normalization`] of `channels` channels: when it is a
/// BatchNormalization that runs at run time with one output, in inference mode, over
/// axis 1 (`spatial`), and its four parameters are f32 constants of `channels` elements.
pub(super) fn inference_normalization(bn: &Node, n: usize, a: &Analysis, channels: usize) -> Option<Normalization> {
    let named = bn.outputs.iter().filter(|o| !o.is_empty()).count();
    let plain = bn.op == "BatchNormalization" && !a.folded[n] && named == 1 && !bn.outputs[0].is_empty();
    let inference = bn.attrs.int("training_mode", 0) == 0 && bn.attrs.int("spatial", 1) == 1;
    if !plain || !inference || bn.inputs.len() != 5 || channels == 0 {
        return None;
    }
    let param = |i: usize| {
        a.const_value(&bn.inputs[i])
            .filter(|c| c.dtype == DType::F32 && c.numel() as usize == channels)
            .map(HostTensor::to_f64)
    };
    let (scale, bias, mean, var) = (param(1)?, param(2)?, param(3)?, param(4)?);
    let eps = bn.attrs.float("epsilon", 1e-5);
    let k = (0..channels).map(|c| scale[c] / (var[c] + eps).sqrt()).collect();
    Some(Normalization { k, bias, mean })
}

/// `base`, or `base` with `_`s appended until it names no constant of `g` and no tensor
/// of `a`: the name of a constant a pass adds.
pub(super) fn fresh_name(g: &Graph, a: &Analysis, base: String) -> String {
    let mut name = base;
    while g.is_const(&name) || a.types.contains_key(name.as_str()) {
        name.push('_');
    }
    name
}

/// `g` with every foldable `Mul`/`Add` by a per-channel constant merged into the
/// inference-mode BatchNormalization it follows; `None` when there is nothing to fold.
pub fn fold_scale_into_batchnorm(g: &Graph, a: &Analysis) -> Option<Graph> {
    let mut readers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (n, node) in g.nodes.iter().enumerate() {
        for x in node.inputs.iter().filter(|x| !x.is_empty()) {
            readers.entry(x.as_str()).or_default().push(n);
        }
    }
    let is_output = |t: &str| g.outputs.iter().any(|o| o == t);
    // For each folded BatchNormalization: its new parameters and output name.
    let mut rewrites: HashMap<usize, (Vec<f64>, Vec<f64>, String)> = HashMap::new();
    let mut absorbed = vec![false; g.nodes.len()];
    for (n, node) in g.nodes.iter().enumerate() {
        let named = node.outputs.iter().filter(|o| !o.is_empty()).count();
        if node.op != "BatchNormalization" || a.folded[n] || named != 1 || node.attrs.int("spatial", 1) == 0 {
            continue;
        }
        let (Some(scale), Some(bias)) = (a.consts.get(node.inputs[1].as_str()), a.consts.get(node.inputs[2].as_str()))
        else {
            continue;
        };
        if scale.dtype != DType::F32 || bias.dtype != DType::F32 {
            continue;
        }
        let Some((_, shape)) = a.types.get(node.outputs[0].as_str()) else { continue };
        let (rank, channels) = (shape.len(), shape.get(1).copied().unwrap_or(0) as usize);
        if rank < 2 || scale.numel() as usize != channels || bias.numel() as usize != channels {
            continue;
        }
        let (mut s, mut b) = (scale.to_f64(), bias.to_f64());
        let mut y = node.outputs[0].as_str();
        // Follow the chain while each link is the only reader of the one before.
        while let [m] = readers.get(y).map(Vec::as_slice).unwrap_or_default() {
            let next = &g.nodes[*m];
            if is_output(y) || a.folded[*m] || next.inputs.len() != 2 || next.outputs.len() != 1 {
                break;
            }
            let other = if next.inputs[0] == y { &next.inputs[1] } else { &next.inputs[0] };
            let Some(k) = a.consts.get(other.as_str()).and_then(|c| per_channel(c, rank, channels)) else { break };
            // The result keeps the activation's type (no broadcast beyond it).
            if a.types.get(next.outputs[0].as_str()) != a.types.get(y) {
                break;
            }
            match next.op.as_str() {
                "Mul" => {
                    s.iter_mut().zip(&k).for_each(|(s, k)| *s *= k);
                    b.iter_mut().zip(&k).for_each(|(b, k)| *b *= k);
                }
                "Add" => b.iter_mut().zip(&k).for_each(|(b, k)| *b += k),
                _ => break,
            }
            absorbed[*m] = true;
            y = next.outputs[0].as_str();
        }
        if y != node.outputs[0] {
            rewrites.insert(n, (s, b, y.to_string()));
        }
    }
    if rewrites.is_empty() {
        return None;
    }
    let rewrites = rewrites
        .into_iter()
        .map(|(n, (s, b, y))| {
            (n, Rewrite { params: vec![("scale", f32_tensor(&s)), ("bias", f32_tensor(&b))], output: y })
        })
        .collect();
    Some(rebuild(g, a, &absorbed, rewrites))
}

/// `g` with the nodes `a` evaluated at compile time replaced by their values, as constants
/// shared with `a`. The passes after it derive graphs and analyse them again: without this,
/// every analysis would evaluate those nodes anew and hold its own copy of their values
/// (vgg19's generated weights: 548 MB each time). `Shape` and `Size` nodes stay: they are
/// small, and a symbolic program must see which of them read a symbolic dim
/// ([`super::symbolic::infer_dims`]). `None` when there is nothing to replace.
pub fn materialize_folded(g: &Graph, a: &Analysis) -> Option<Graph> {
    let replaced: Vec<bool> = g
        .nodes
        .iter()
        .zip(&a.folded)
        .map(|(node, &folded)| folded && node.op != "Shape" && node.op != "Size")
        .collect();
    if !replaced.contains(&true) {
        return None;
    }
    let mut out = rebuild(g, a, &replaced, HashMap::new());
    for (node, _) in g.nodes.iter().zip(&replaced).filter(|(_, &r)| r) {
        for o in node.outputs.iter().filter(|o| !o.is_empty()) {
            if let Some(v) = a.consts.get(o.as_str()) {
                out.add_shared_const(o, v.clone());
            }
        }
    }
    Some(out)
}

/// A folded node's new constants for its inputs 1, 2, ... (named `<node>.folded_<what>`)
/// and its new output.
struct Rewrite {
    params: Vec<(&'static str, HostTensor)>,
    output: String,
}

/// `g` without the `absorbed` nodes, with each rewritten node's parameters and output
/// replaced.
fn rebuild(g: &Graph, a: &Analysis, absorbed: &[bool], mut rewrites: HashMap<usize, Rewrite>) -> Graph {
    let mut out = Graph::new(g.name.clone());
    out.inputs = g.inputs.clone();
    out.outputs = g.outputs.clone();
    out.subgraphs = g.subgraphs.clone();
    for (name, v) in &g.consts {
        out.add_shared_const(name, v.clone());
    }
    for (n, node) in g.nodes.iter().enumerate() {
        if absorbed[n] {
            continue;
        }
        let Some(r) = rewrites.remove(&n) else {
            out.nodes.push(node.clone());
            continue;
        };
        let mut inputs = node.inputs.clone();
        for (i, (what, v)) in r.params.into_iter().enumerate() {
            let name = fresh_name(&out, a, format!("{}.folded_{what}", node.name));
            out.add_const(&name, v);
            match inputs.get_mut(i + 1) {
                Some(slot) => *slot = name,
                None => inputs.push(name),
            }
        }
        out.nodes.push(Node { inputs, outputs: vec![r.output], ..node.clone() });
    }
    out
}

/// `g` with every inference-mode BatchNormalization whose input is the only use of a
/// `Conv`'s output folded into that Conv: with `k = scale / sqrt(var + epsilon)` per
/// output channel, the Conv's weights become `W · k` and its bias `(B - mean) · k + bias`
/// (`B` is 0 when it has none). That saves a kernel and an activation per layer (53 of
/// resnet50's 175 operators), and the results differ from the unfolded graph by rounding
/// only. `None` when there is nothing to fold.
pub fn fold_batchnorm_into_conv(g: &Graph, a: &Analysis) -> Option<Graph> {
    let mut readers: HashMap<&str, usize> = HashMap::new();
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (n, node) in g.nodes.iter().enumerate() {
        for x in node.inputs.iter().filter(|x| !x.is_empty()) {
            *readers.entry(x.as_str()).or_default() += 1;
        }
        for o in node.outputs.iter().filter(|o| !o.is_empty()) {
            producer.insert(o.as_str(), n);
        }
    }
    let f32_const = |name: &str, len: usize| {
        a.const_value(name).filter(|c| c.dtype == DType::F32 && c.numel() as usize == len).map(HostTensor::to_f64)
    };
    // Per folded Conv: its new weights and bias and the normalization's output.
    let mut rewrites: HashMap<usize, (HostTensor, Vec<f64>, String)> = HashMap::new();
    let mut absorbed = vec![false; g.nodes.len()];
    for (n, bn) in g.nodes.iter().enumerate() {
        if bn.op != "BatchNormalization" || bn.inputs.is_empty() {
            continue;
        }
        let x = bn.inputs[0].as_str();
        let Some(&p) = producer.get(x) else { continue };
        let conv = &g.nodes[p];
        let only_use = readers.get(x) == Some(&1) && !g.outputs.iter().any(|o| o == x);
        if conv.op != "Conv" || a.folded[p] || conv.outputs.len() != 1 || !only_use || rewrites.contains_key(&p) {
            continue;
        }
        let Some(w) = a.consts.get(conv.inputs[1].as_str()).filter(|w| w.dtype == DType::F32) else { continue };
        let channels = w.shape.first().copied().unwrap_or(0) as usize;
        let Some(Normalization { k, bias, mean }) = inference_normalization(bn, n, a, channels) else { continue };
        let conv_bias = match conv.inputs.get(2).filter(|b| !b.is_empty()) {
            Some(b) => match f32_const(b, channels) {
                Some(b) => b,
                None => continue,
            },
            None => vec![0.0; channels],
        };
        let per_channel = w.numel() as usize / channels;
        let weights: Vec<f64> = w.to_f64().iter().enumerate().map(|(i, v)| v * k[i / per_channel]).collect();
        let Ok(weights) = HostTensor::new(
            DType::F32,
            w.shape.clone(),
            weights.iter().flat_map(|x| (*x as f32).to_le_bytes()).collect(),
        ) else {
            continue;
        };
        let b: Vec<f64> = (0..channels).map(|c| (conv_bias[c] - mean[c]) * k[c] + bias[c]).collect();
        rewrites.insert(p, (weights, b, bn.outputs[0].clone()));
        absorbed[n] = true;
    }
    if rewrites.is_empty() {
        return None;
    }
    let rewrites = rewrites
        .into_iter()
        .map(|(n, (w, b, y))| (n, Rewrite { params: vec![("weights", w), ("bias", f32_tensor(&b))], output: y }))
        .collect();
    Some(rebuild(g, a, &absorbed, rewrites))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::analyze;
    use rxvm_vm::ops::Attrs;

    fn vec_const(shape: &[i64], v: &[f32]) -> HostTensor {
        HostTensor::new(DType::F32, shape.to_vec(), v.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap()
    }

    #[test]
    fn mul_and_add_by_channel_constants_fold_into_the_normalization() {
        let mut g = Graph::new("g".into());
        g.input("x", DType::F32, &[1, 2, 3, 3]);
        for (name, v) in [("s", [1.0, 2.0]), ("b", [0.5, -1.0]), ("m", [0.0, 0.0]), ("v", [1.0, 1.0])] {
            g.add_const(name, vec_const(&[2], &v));
        }
        g.add_const("k", vec_const(&[2, 1, 1], &[3.0, 4.0]));
        g.add_const("c", vec_const(&[1, 2, 1, 1], &[10.0, 20.0]));
        g.add_const("other", vec_const(&[1, 1, 3, 1], &[1.0, 2.0, 3.0]));
        g.node("bn", "BatchNormalization", &["x", "s", "b", "m", "v"], &["y"], Attrs::default())
            .node("mul", "Mul", &["y", "k"], &["z"], Attrs::default())
            .node("add", "Add", &["c", "z"], &["w"], Attrs::default())
            .node("spatial", "Mul", &["w", "other"], &["u"], Attrs::default())
            .output("u");
        let a = analyze(&g, &[vec![1, 2, 3, 3]]).unwrap();
        let f = fold_scale_into_batchnorm(&g, &a).expect("folds");
        let ops: Vec<(&str, &[String])> = f.nodes.iter().map(|n| (n.op.as_str(), n.outputs.as_slice())).collect();
        // The spatial Mul (its constant varies along H) stays.
        assert_eq!(ops, [("BatchNormalization", &["w".to_string()][..]), ("Mul", &["u".to_string()][..])]);
        assert_eq!(f.const_value("bn.folded_scale").unwrap().to_f64(), [3.0, 8.0]);
        assert_eq!(f.const_value("bn.folded_bias").unwrap().to_f64(), [11.5, 16.0]);
    }

    #[test]
    fn a_normalization_read_twice_or_returned_is_left_alone() {
        let mut g = Graph::new("g".into());
        g.input("x", DType::F32, &[1, 2, 2, 2]);
        for name in ["s", "b", "m", "v", "k"] {
            g.add_const(name, vec_const(&[2], &[1.0, 1.0]));
        }
        g.node("bn", "BatchNormalization", &["x", "s", "b", "m", "v"], &["y"], Attrs::default())
            .node("mul", "Mul", &["y", "k"], &["z"], Attrs::default())
            .output("z")
            .output("y");
        let a = analyze(&g, &[vec![1, 2, 2, 2]]).unwrap();
        assert!(fold_scale_into_batchnorm(&g, &a).is_none());
    }

    /// `x -> Conv(w, b?) -> BatchNormalization -> y`, with the statistics as given.
    fn conv_bn(bias: bool, extra_reader: bool) -> Graph {
        let mut g = Graph::new("g".into());
        g.input("x", DType::F32, &[1, 1, 2, 2]);
        g.add_const("w", vec_const(&[2, 1, 1, 1], &[2.0, 3.0]));
        g.add_const("b", vec_const(&[2], &[1.0, -1.0]));
        for (name, v) in [("s", [1.0, 2.0]), ("beta", [0.5, 0.0]), ("m", [1.0, 0.0]), ("v", [3.0, 0.0])] {
            g.add_const(name, vec_const(&[2], &v));
        }
        let conv_in: &[&str] = if bias { &["x", "w", "b"] } else { &["x", "w"] };
        let eps = Attrs(vec![("epsilon".into(), rxvm_vm::ops::AttrValue::Float(1.0))]);
        g.node("conv", "Conv", conv_in, &["c"], Attrs::default())
            .node("bn", "BatchNormalization", &["c", "s", "beta", "m", "v"], &["y"], eps)
            .output("y");
        if extra_reader {
            g.node("relu", "Relu", &["c"], &["r"], Attrs::default()).output("r");
        }
        g
    }

    #[test]
    fn a_normalization_after_a_conv_folds_into_its_weights_and_bias() {
        // k = scale / sqrt(var + 1) = [0.5, 2]; w' = w * k; b' = (b - mean) * k + beta.
        for (bias, want_b) in [(true, [0.5, -2.0]), (false, [0.0, 0.0])] {
            let g = conv_bn(bias, false);
            let a = analyze(&g, &[vec![1, 1, 2, 2]]).unwrap();
            let f = fold_batchnorm_into_conv(&g, &a).expect("folds");
            let ops: Vec<(&str, &[String])> = f.nodes.iter().map(|n| (n.op.as_str(), n.outputs.as_slice())).collect();
            assert_eq!(ops, [("Conv", &["y".to_string()][..])], "bias {bias}");
            assert_eq!(f.nodes[0].inputs, ["x", "conv.folded_weights", "conv.folded_bias"]);
            assert_eq!(f.const_value("conv.folded_weights").unwrap().to_f64(), [1.0, 6.0]);
            assert_eq!(f.const_value("conv.folded_weights").unwrap().shape, [2, 1, 1, 1]);
            assert_eq!(f.const_value("conv.folded_bias").unwrap().to_f64(), want_b, "bias {bias}");
        }
    }

    #[test]
    fn a_conv_read_by_more_than_the_normalization_is_left_alone() {
        let g = conv_bn(true, true);
        let a = analyze(&g, &[vec![1, 1, 2, 2]]).unwrap();
        assert!(fold_batchnorm_into_conv(&g, &a).is_none(), "the Relu reads the Conv's output too");
        let mut g = conv_bn(true, false);
        g.outputs.push("c".into());
        let a = analyze(&g, &[vec![1, 1, 2, 2]]).unwrap();
        assert!(fold_batchnorm_into_conv(&g, &a).is_none(), "the Conv's output is returned");
        let mut g = conv_bn(true, false);
        g.input("mean", DType::F32, &[2]);
        g.nodes[1].inputs[3] = "mean".into();
        let a = analyze(&g, &[vec![1, 1, 2, 2], vec![2]]).unwrap();
        assert!(fold_batchnorm_into_conv(&g, &a).is_none(), "a mean computed at run time");
        // Training mode normalizes with the batch's statistics, not the constants.
        let mut g = conv_bn(true, false);
        g.nodes[1].attrs.0.push(("training_mode".into(), rxvm_vm::ops::AttrValue::Int(1)));
        let a = analyze(&g, &[vec![1, 1, 2, 2]]).unwrap();
        assert!(fold_batchnorm_into_conv(&g, &a).is_none(), "a normalization in training mode");
    }
}
