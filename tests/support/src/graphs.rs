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

/// A node named `name`.
fn named(name: &str, op: &str, ins: &[&str], outs: &[&str], attrs: &[(&str, AttrValue)]) -> Node {
    Node { name: name.into(), ..node(op, ins, outs, attrs) }
}

/// Random weights in [-1, 1) scaled by `scale` (He-like, so activations stay O(1)).
pub fn weights(shape: &[i64], seed: u64, scale: f64) -> HostTensor {
    let t = HostTensor::random(DType::F32, shape, seed).expect("weights");
    let v: Vec<f32> = t.to_f64().iter().map(|x| (x * scale) as f32).collect();
    HostTensor::from_f32(shape, &v).unwrap()
}

/// ResNet-18's structure at a small width: a 3x3 stem with BatchNormalization and ReLU, a
/// max pool, four stages of two basic blocks (the first of stages 2-4 strided, with a 1x1
/// projection), global average pooling, Flatten and a fully connected layer; random
/// weights, on 3x32x32 images with a `batch` dim.
pub fn resnet18_style() -> Graph {
    let mut g = Graph::new("resnet18_style".into());
    g.inputs.push(GraphInput {
        name: "image".into(),
        dtype: DType::F32,
        dims: vec![InputDim::Named("batch".into()), InputDim::Fixed(3), InputDim::Fixed(32), InputDim::Fixed(32)],
    });
    let mut seed = 1;
    let mut conv_bn = |g: &mut Graph, x: &str, y: &str, cin: i64, cout: i64, k: i64, stride: i64, relu: bool| {
        seed += 1;
        let w = format!("{y}.w");
        g.add_const(&w, weights(&[cout, cin, k, k], seed, (2.0 / (cin * k * k) as f64).sqrt() * 1.7));
        for (p, lo) in [("scale", 0.5), ("bias", -0.2), ("mean", -0.1), ("var", 0.5)] {
            seed += 1;
            let t = HostTensor::random(DType::F32, &[cout], seed).unwrap();
            let v: Vec<f32> = t.to_f64().iter().map(|r| (lo + (r + 1.0) * 0.25) as f32).collect();
            g.add_const(&format!("{y}.{p}"), HostTensor::from_f32(&[cout], &v).unwrap());
        }
        let pad = k / 2;
        let attrs = [
            ("pads", AttrValue::Ints(vec![pad; 4])),
            ("strides", AttrValue::Ints(vec![stride, stride])),
            ("kernel_shape", AttrValue::Ints(vec![k, k])),
        ];
        let c = format!("{y}.conv");
        g.nodes.push(named(&c, "Conv", &[x, &w], &[&c], &attrs));
        let bn_out = if relu { format!("{y}.bn") } else { y.to_string() };
        let p = |s: &str| format!("{y}.{s}");
        g.nodes.push(named(
            &bn_out,
            "BatchNormalization",
            &[&c, &p("scale"), &p("bias"), &p("mean"), &p("var")],
            &[&bn_out],
            &[],
        ));
        if relu {
            g.nodes.push(named(y, "Relu", &[&bn_out], &[y], &[]));
        }
    };
    conv_bn(&mut g, "image", "stem", 3, 8, 3, 1, true);
    let pool = [
        ("kernel_shape", AttrValue::Ints(vec![3, 3])),
        ("strides", AttrValue::Ints(vec![2, 2])),
        ("pads", AttrValue::Ints(vec![1, 1, 1, 1])),
    ];
    g.nodes.push(named("pool", "MaxPool", &["stem"], &["pool"], &pool));
    let mut x = "pool".to_string();
    let mut cin = 8;
    for (stage, cout) in [8i64, 16, 32, 64].into_iter().enumerate() {
        for block in 0..2 {
            let stride = if stage > 0 && block == 0 { 2 } else { 1 };
            let b = format!("s{stage}b{block}");
            conv_bn(&mut g, &x, &format!("{b}.a"), cin, cout, 3, stride, true);
            conv_bn(&mut g, &format!("{b}.a"), &format!("{b}.b"), cout, cout, 3, 1, false);
            let skip = if stride != 1 || cin != cout {
                conv_bn(&mut g, &x, &format!("{b}.down"), cin, cout, 1, stride, false);
                format!("{b}.down")
            } else {
                x.clone()
            };
            let sum = format!("{b}.sum");
            g.nodes.push(named(&sum, "Add", &[&format!("{b}.b"), &skip], &[&sum], &[]));
            g.nodes.push(named(&b, "Relu", &[&sum], &[&b], &[]));
            x = b;
            cin = cout;
        }
    }
    g.nodes.push(named("gap", "GlobalAveragePool", &[&x], &["gap"], &[]));
    g.nodes.push(named("flat", "Flatten", &["gap"], &["flat"], &[]));
    g.add_const("fc.w", weights(&[10, 64], 99, 0.3));
    g.add_const("fc.b", weights(&[10], 98, 0.1));
    g.nodes.push(named("logits", "Gemm", &["flat", "fc.w", "fc.b"], &["logits"], &[("transB", AttrValue::Int(1))]));
    g.outputs.push("logits".into());
    g
}
