//! ONNX control flow (`If`, `Loop`, `Scan`) compiled to branches and loops around calls of the
//! subgraphs' functions (docs/compiler.md, "Control flow"): small models built in code run
//! on random inputs and are checked against a direct computation; malformed subgraphs are
//! refused with errors naming the node (snapshots `control_flow__*.snap`).

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::{AttributeProto, GraphProto, NodeProto};
use rxvm::compile::{compile, Options};
use rxvm::vm::types::DType;
use rxvm::vm::{HostTensor, HostValue, Vm};
use rxvm_test_support::onnx_build::{bytes, int_attr, ints_attr, model, node, value_info, F32, I64};
use std::sync::Arc;

/// `TensorProto.DataType` of `bool`.
const BOOL: i32 = 9;

fn named(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    let mut n = node(op, inputs, outputs);
    n.name = name.into();
    n
}

fn graph_attr(name: &str, g: GraphProto) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::GRAPH.into();
    a.g = Some(g).into();
    a
}

/// A subgraph with `inputs` (no types), `nodes` and f32 `outputs`.
fn subgraph(name: &str, inputs: &[(&str, i32)], nodes: Vec<NodeProto>, outputs: &[&str]) -> GraphProto {
    let mut g = GraphProto::new();
    g.name = name.into();
    g.input = inputs.iter().map(|(n, t)| value_info(n, *t, &[])).collect();
    g.node = nodes;
    g.output = outputs.iter().map(|o| value_info(o, F32, &[])).collect();
    g
}

/// x, y: f32[n]; c: bool[] → `If(c)`: then x + y, else x * y (both branches read x and y
/// from the outer graph).
fn if_model(n: i64, then_outputs: &[&str]) -> GraphProto {
    let mut g = GraphProto::new();
    g.name = "branch".into();
    g.input.push(value_info("c", BOOL, &[]));
    g.input.push(value_info("x", F32, &[n]));
    g.input.push(value_info("y", F32, &[n]));
    let then_ = subgraph("then", &[], vec![named("add", "Add", &["x", "y"], &["s"])], then_outputs);
    let else_ = subgraph("else", &[], vec![named("mul", "Mul", &["x", "y"], &["p"])], &["p"]);
    let mut iff = named("if", "If", &["c"], &["out"]);
    iff.attribute.push(graph_attr("then_branch", then_));
    iff.attribute.push(graph_attr("else_branch", else_));
    g.node.push(iff);
    g.output.push(value_info("out", F32, &[n]));
    g
}

/// m: i64[]; x, a0: f32[n] → `Loop(m, "", a0)` whose body adds x (captured) to the carried
/// value and also outputs twice the new value (a scan output): a_m = a0 + m x and
/// scans[k] = 2 (a0 + (k + 1) x).
fn loop_model(n: i64) -> GraphProto {
    let mut g = GraphProto::new();
    g.name = "accumulate".into();
    g.input.push(value_info("m", I64, &[]));
    g.input.push(value_info("x", F32, &[n]));
    g.input.push(value_info("a0", F32, &[n]));
    let mut two = node("Constant", &[], &["two"]);
    let mut v = AttributeProto::new();
    v.name = "value_float".into();
    v.type_ = AttributeType::FLOAT.into();
    v.f = 2.0;
    two.attribute.push(v);
    let body = subgraph(
        "body",
        &[("i", I64), ("cond_in", BOOL), ("a", F32)],
        vec![
            named("keep", "Identity", &["cond_in"], &["cond_out"]),
            named("acc", "Add", &["a", "x"], &["a_out"]),
            two,
            named("twice", "Mul", &["a_out", "two"], &["scan"]),
        ],
        &["cond_out", "a_out", "scan"],
    );
    let mut lp = named("loop", "Loop", &["m", "", "a0"], &["a_final", "scans"]);
    lp.attribute.push(graph_attr("body", body));
    g.node.push(lp);
    g.output.push(value_info("a_final", F32, &[n]));
    g.output.push(value_info("scans", F32, &[-1, n]));
    g
}

/// s0: f32[r]; xa: f32[r, t], xb: f32[t, r] → a Scan over xa's axis 1 backwards and xb's
/// axis 0 forwards. The body: s' = s + a, o1 = s' * b, o2 = a - b; o1 is stacked along axis
/// 1 backwards, o2 along axis -1 forwards.
fn scan_model(r: i64, t: i64) -> GraphProto {
    let mut g = GraphProto::new();
    g.name = "scan".into();
    g.input.push(value_info("s0", F32, &[r]));
    g.input.push(value_info("xa", F32, &[r, t]));
    g.input.push(value_info("xb", F32, &[t, r]));
    let body = subgraph(
        "body",
        &[("s", F32), ("a", F32), ("b", F32)],
        vec![
            named("acc", "Add", &["s", "a"], &["s_out"]),
            named("mul", "Mul", &["s_out", "b"], &["o1"]),
            named("sub", "Sub", &["a", "b"], &["o2"]),
        ],
        &["s_out", "o1", "o2"],
    );
    let mut scan = named("scan", "Scan", &["s0", "xa", "xb"], &["s_final", "y1", "y2"]);
    scan.attribute.push(graph_attr("body", body));
    scan.attribute.push(int_attr("num_scan_inputs", 2));
    scan.attribute.push(ints_attr("scan_input_axes", &[1, 0]));
    scan.attribute.push(ints_attr("scan_input_directions", &[1, 0]));
    scan.attribute.push(ints_attr("scan_output_axes", &[1, -1]));
    scan.attribute.push(ints_attr("scan_output_directions", &[1, 0]));
    g.node.push(scan);
    for o in ["s_final", "y1", "y2"] {
        g.output.push(value_info(o, F32, &[]));
    }
    g
}

fn compiled(g: GraphProto, shapes: &[Vec<i64>]) -> Result<Vm, String> {
    compiled_at(g, shapes, 13)
}

fn compiled_at(g: GraphProto, shapes: &[Vec<i64>], opset: i64) -> Result<Vm, String> {
    let mut m = model(g);
    m.opset_import[0].version = opset;
    let graph = rxvm::onnx::model_from_bytes(&bytes(&m), "control.onnx")?;
    let c = compile(&graph, shapes, &Options::default())?;
    Vm::host(Arc::new(c.module)).map_err(|e| e.to_string())
}

fn scalar(dtype: DType, v: i64) -> HostValue {
    let data = match dtype {
        DType::Bool => vec![v as u8],
        _ => v.to_le_bytes().to_vec(),
    };
    HostValue::Tensor(HostTensor::new(dtype, vec![], data).unwrap())
}

fn close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "{got:?} vs {want:?}");
    }
}

#[test]
fn if_runs_the_branch_its_condition_picks() {
    let n = 7;
    let mut vm = compiled(if_model(n, &["s"]), &[vec![], vec![n], vec![n]]).expect("compiles");
    for seed in 0..4u64 {
        let x = HostTensor::random(DType::F32, &[n], 2 * seed).unwrap();
        let y = HostTensor::random(DType::F32, &[n], 2 * seed + 1).unwrap();
        let (xs, ys) = (x.to_f64(), y.to_f64());
        for c in [1, 0] {
            let out = vm
                .invoke("main", &[scalar(DType::Bool, c), HostValue::Tensor(x.clone()), HostValue::Tensor(y.clone())])
                .expect("runs");
            let [HostValue::Tensor(got)] = &out[..] else { panic!("{out:?}") };
            assert_eq!(got.shape, [n]);
            let want: Vec<f64> = xs
                .iter()
                .zip(&ys)
                .map(|(a, b)| if c == 1 { (*a as f32 + *b as f32) as f64 } else { (*a as f32 * *b as f32) as f64 })
                .collect();
            close(&got.to_f64(), &want);
        }
    }
}

#[test]
fn loop_carries_values_and_stacks_its_scan_outputs() {
    let n = 5;
    let mut vm = compiled(loop_model(n), &[vec![], vec![n], vec![n]]).expect("compiles");
    for (seed, m) in [(0u64, 3i64), (1, 1), (2, 6), (3, 0)] {
        let x = HostTensor::random(DType::F32, &[n], 2 * seed).unwrap();
        let a0 = HostTensor::random(DType::F32, &[n], 2 * seed + 1).unwrap();
        let out = vm
            .invoke("main", &[scalar(DType::I64, m), HostValue::Tensor(x.clone()), HostValue::Tensor(a0.clone())])
            .expect("runs");
        let [HostValue::Tensor(a), HostValue::Tensor(scans)] = &out[..] else { panic!("{out:?}") };
        // Accumulated in f32, as the VM does.
        let (xs, mut acc) = (x.to_f64(), a0.to_f64());
        let mut want_scans = Vec::new();
        for _ in 0..m {
            for (v, d) in acc.iter_mut().zip(&xs) {
                *v = (*v as f32 + *d as f32) as f64;
            }
            want_scans.extend(acc.iter().map(|v| 2.0 * v));
        }
        close(&a.to_f64(), &acc);
        if m == 0 {
            assert_eq!(scans.shape, [0], "no iteration: an empty scan output");
        } else {
            assert_eq!(scans.shape, [m, n]);
            close(&scans.to_f64(), &want_scans);
        }
    }
}

#[test]
fn scan_slices_and_stacks_along_its_axes_in_both_directions() {
    let (r, t) = (3usize, 5usize);
    let mut vm =
        compiled(scan_model(r as i64, t as i64), &[vec![r as i64], vec![r as i64, t as i64], vec![t as i64, r as i64]])
            .expect("compiles");
    for seed in 0..3u64 {
        let s0 = HostTensor::random(DType::F32, &[r as i64], 3 * seed).unwrap();
        let xa = HostTensor::random(DType::F32, &[r as i64, t as i64], 3 * seed + 1).unwrap();
        let xb = HostTensor::random(DType::F32, &[t as i64, r as i64], 3 * seed + 2).unwrap();
        let out = vm
            .invoke(
                "main",
                &[HostValue::Tensor(s0.clone()), HostValue::Tensor(xa.clone()), HostValue::Tensor(xb.clone())],
            )
            .expect("runs");
        let [HostValue::Tensor(s), HostValue::Tensor(y1), HostValue::Tensor(y2)] = &out[..] else { panic!("{out:?}") };
        let (a, b) = (xa.to_f64(), xb.to_f64());
        let mut state: Vec<f32> = s0.to_f64().iter().map(|v| *v as f32).collect();
        let (mut w1, mut w2) = (vec![0f64; r * t], vec![0f64; r * t]);
        for k in 0..t {
            // xa's column t-1-k (backwards), xb's row k.
            for i in 0..r {
                let (av, bv) = (a[i * t + (t - 1 - k)] as f32, b[k * r + i] as f32);
                state[i] += av;
                w1[i * t + (t - 1 - k)] = (state[i] * bv) as f64;
                w2[i * t + k] = (av - bv) as f64;
            }
        }
        close(&s.to_f64(), &state.iter().map(|v| *v as f64).collect::<Vec<_>>());
        assert_eq!(
            (y1.shape.as_slice(), y2.shape.as_slice()),
            ([r as i64, t as i64].as_slice(), [r as i64, t as i64].as_slice())
        );
        close(&y1.to_f64(), &w1);
        close(&y2.to_f64(), &w2);
    }
}

/// Opset 8's Scan is batched: axis 0 of every input is the batch, `sequence_lens` (first)
/// is omitted.
#[test]
fn opset_8_scan_runs_each_batch_entry() {
    let (n, t, d) = (2usize, 4usize, 3usize);
    let mut g = GraphProto::new();
    g.name = "scan8".into();
    g.input.push(value_info("s0", F32, &[n as i64, d as i64]));
    g.input.push(value_info("x", F32, &[n as i64, t as i64, d as i64]));
    let body = subgraph(
        "body",
        &[("s", F32), ("e", F32)],
        vec![named("acc", "Add", &["s", "e"], &["s_out"]), named("keep", "Identity", &["s_out"], &["y"])],
        &["s_out", "y"],
    );
    let mut scan = named("scan", "Scan", &["", "s0", "x"], &["s_final", "ys"]);
    scan.attribute.push(graph_attr("body", body));
    scan.attribute.push(int_attr("num_scan_inputs", 1));
    g.node.push(scan);
    g.output.push(value_info("s_final", F32, &[]));
    g.output.push(value_info("ys", F32, &[]));
    let mut vm = compiled_at(g, &[vec![n as i64, d as i64], vec![n as i64, t as i64, d as i64]], 8).expect("compiles");
    let s0 = HostTensor::random(DType::F32, &[n as i64, d as i64], 5).unwrap();
    let x = HostTensor::random(DType::F32, &[n as i64, t as i64, d as i64], 6).unwrap();
    let out = vm.invoke("main", &[HostValue::Tensor(s0.clone()), HostValue::Tensor(x.clone())]).expect("runs");
    let [HostValue::Tensor(s), HostValue::Tensor(ys)] = &out[..] else { panic!("{out:?}") };
    let xs = x.to_f64();
    let mut state: Vec<f32> = s0.to_f64().iter().map(|v| *v as f32).collect();
    let mut want = vec![0f64; n * t * d];
    for bi in 0..n {
        for k in 0..t {
            for j in 0..d {
                state[bi * d + j] += xs[(bi * t + k) * d + j] as f32;
                want[(bi * t + k) * d + j] = state[bi * d + j] as f64;
            }
        }
    }
    assert_eq!(ys.shape, [n as i64, t as i64, d as i64]);
    close(&s.to_f64(), &state.iter().map(|v| *v as f64).collect::<Vec<_>>());
    close(&ys.to_f64(), &want);
}

#[test]
fn malformed_subgraphs_are_refused_naming_the_node() {
    let n = 3;
    let shapes = [vec![], vec![n], vec![n]];
    // A branch that returns two values for the node's one output.
    let e = compiled(if_model(n, &["s", "x"]), &shapes).err().expect("refused");
    insta::assert_snapshot!("if_branch_output_count", e);
    // An If without its condition.
    let mut g = if_model(n, &["s"]);
    g.node[0].input.clear();
    let e = compiled(g, &shapes).err().expect("refused");
    insta::assert_snapshot!("if_without_condition", e);
    // A Loop body that does not take the iteration number and condition.
    let mut g = loop_model(n);
    if let Some(b) = g.node[0].attribute[0].g.as_mut() {
        b.input.remove(0);
    }
    let e = compiled(g, &shapes).err().expect("refused");
    insta::assert_snapshot!("loop_body_input_count", e);
    // A Loop without its `body`.
    let mut g = loop_model(n);
    g.node[0].attribute.clear();
    let e = compiled(g, &shapes).err().expect("refused");
    insta::assert_snapshot!("loop_without_body", e);
}
