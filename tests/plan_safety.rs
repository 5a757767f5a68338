//! Plan safety as a property: for random graphs with branches, skip connections and views,
//! the program compiled with memory reuse computes exactly (bit for bit) what the no-reuse
//! program computes. A plan that lets two live tensors share bytes changes some output.

use proptest::prelude::*;
use rxvm::compile::{compile, Options, Planner, Textures};
use rxvm::graph::{Graph, GraphInput, InputDim, Node};
use rxvm::vm::ops::{AttrValue, Attrs};
use rxvm::vm::types::DType;
use rxvm::vm::{DeviceCaps, HostTensor, HostValue, Vm};
use std::sync::Arc;

/// One step of a random graph; operands are indices into the tensors made so far (taken
/// modulo their count). Every tensor has the shape of the input, [1, C, H, W].
#[derive(Clone, Debug)]
enum Step {
    Unary(u8, usize),
    Binary(u8, usize, usize),
    Conv3x3(usize),
    /// Concat of two tensors along channels, then a 1x1 Conv back to C channels.
    Branch(usize, usize),
    /// Reshape to [1, C*H*W], an activation on the flat view, and Reshape back.
    View(usize),
    MaxPool(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..3, any::<usize>()).prop_map(|(k, a)| Step::Unary(k, a)),
        (0u8..2, any::<usize>(), any::<usize>()).prop_map(|(k, a, b)| Step::Binary(k, a, b)),
        any::<usize>().prop_map(Step::Conv3x3),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Step::Branch(a, b)),
        any::<usize>().prop_map(Step::View),
        any::<usize>().prop_map(Step::MaxPool),
    ]
}

fn node(name: String, op: &str, ins: &[&str], out: &str, attrs: Vec<(&str, AttrValue)>) -> Node {
    Node {
        name,
        op: op.into(),
        inputs: ins.iter().map(|s| s.to_string()).collect(),
        outputs: vec![out.to_string()],
        attrs: Attrs(attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
    }
}

/// The graph of `steps` on an input of `c` channels and `hw`×`hw` pixels; its outputs are
/// the last tensor and the tensors `extra` picks.
fn build(c: i64, hw: i64, steps: &[Step], extra: &[usize]) -> Graph {
    let mut g = Graph::new("random".into());
    g.inputs.push(GraphInput {
        name: "x".into(),
        dtype: DType::F32,
        dims: vec![InputDim::Fixed(1), InputDim::Fixed(c), InputDim::Fixed(hw), InputDim::Fixed(hw)],
    });
    g.add_const(
        "flat_shape",
        HostTensor::new(DType::I64, vec![2], [1, c * hw * hw].iter().flat_map(|v: &i64| v.to_le_bytes()).collect())
            .expect("shape"),
    );
    g.add_const(
        "full_shape",
        HostTensor::new(DType::I64, vec![4], [1, c, hw, hw].iter().flat_map(|v: &i64| v.to_le_bytes()).collect())
            .expect("shape"),
    );
    let mut tensors = vec!["x".to_string()];
    let pick = |t: &Vec<String>, i: usize| t[i % t.len()].clone();
    for (k, s) in steps.iter().enumerate() {
        let out = format!("t{k}");
        let name = |what: &str| format!("{what}_{k}");
        match s {
            Step::Unary(op, a) => {
                let op = ["Relu", "Sigmoid", "Tanh"][*op as usize % 3];
                g.nodes.push(node(name(op), op, &[&pick(&tensors, *a)], &out, vec![]));
            }
            Step::Binary(op, a, b) => {
                let op = ["Add", "Mul"][*op as usize % 2];
                g.nodes.push(node(name(op), op, &[&pick(&tensors, *a), &pick(&tensors, *b)], &out, vec![]));
            }
            Step::Conv3x3(a) => {
                let w = format!("w{k}");
                g.add_const(&w, HostTensor::random(DType::F32, &[c, c, 3, 3], k as u64).expect("weights"));
                let pads = vec![("pads", AttrValue::Ints(vec![1, 1, 1, 1]))];
                g.nodes.push(node(name("conv"), "Conv", &[&pick(&tensors, *a), &w], &out, pads));
            }
            Step::Branch(a, b) => {
                let (cat, w) = (format!("cat{k}"), format!("w{k}"));
                let axis = vec![("axis", AttrValue::Int(1))];
                g.nodes.push(node(name("concat"), "Concat", &[&pick(&tensors, *a), &pick(&tensors, *b)], &cat, axis));
                g.add_const(&w, HostTensor::random(DType::F32, &[c, 2 * c, 1, 1], k as u64).expect("weights"));
                g.nodes.push(node(name("mix"), "Conv", &[&cat, &w], &out, vec![]));
            }
            Step::View(a) => {
                let (flat, act) = (format!("flat{k}"), format!("act{k}"));
                g.nodes.push(node(name("flatten"), "Reshape", &[&pick(&tensors, *a), "flat_shape"], &flat, vec![]));
                g.nodes.push(node(name("act"), "Relu", &[&flat], &act, vec![]));
                g.nodes.push(node(name("unflatten"), "Reshape", &[&act, "full_shape"], &out, vec![]));
            }
            Step::MaxPool(a) => {
                let attrs = vec![
                    ("kernel_shape", AttrValue::Ints(vec![3, 3])),
                    ("pads", AttrValue::Ints(vec![1, 1, 1, 1])),
                    ("strides", AttrValue::Ints(vec![1, 1])),
                ];
                g.nodes.push(node(name("pool"), "MaxPool", &[&pick(&tensors, *a)], &out, attrs));
            }
        }
        tensors.push(out);
    }
    let last = tensors.last().cloned().unwrap_or_default();
    g.outputs.push(last.clone());
    for &e in extra {
        // Earlier tensors as extra outputs (not the input, not twice).
        let t = tensors[1 + e % (tensors.len() - 1)].clone();
        if !g.outputs.contains(&t) {
            g.outputs.push(t);
        }
    }
    g
}

/// The outputs' bytes of `g` compiled with `opts`, run on the host.
fn outputs(g: &Graph, shape: &[i64], opts: &Options) -> Vec<Vec<u8>> {
    let c = compile(g, &[shape.to_vec()], opts).unwrap_or_else(|e| panic!("compiles: {e}"));
    let mut vm = Vm::new(Arc::new(c.module), vec![DeviceCaps::host()]).expect("a VM");
    let x = HostTensor::random(DType::F32, shape, 7).expect("input");
    vm.invoke("main", &[HostValue::Tensor(x)])
        .expect("runs")
        .into_iter()
        .map(|v| match v {
            HostValue::Tensor(t) => t.data,
            other => panic!("{other:?}"),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn planned_programs_compute_what_the_no_reuse_program_computes(
        c in prop_oneof![Just(2i64), Just(4)],
        hw in prop_oneof![Just(3i64), Just(5)],
        steps in prop::collection::vec(step(), 1..14),
        extra in prop::collection::vec(any::<usize>(), 0..3),
    ) {
        let g = build(c, hw, &steps, &extra);
        let shape = [1, c, hw, hw];
        let want = outputs(&g, &shape, &Options { planner: Planner::None, ..Options::default() });
        for (label, opts) in [
            ("best", Options::default()),
            ("best, reordered", Options { reorder: true, ..Options::default() }),
            ("heuristics", Options { planner: Planner::Heuristics, ..Options::default() }),
            ("first fit", Options { planner: Planner::from_name("first_fit_in_order").expect("a strategy"), ..Options::default() }),
            ("textures", Options { textures: Textures::Auto, ..Options::default() }),
        ] {
            prop_assert!(outputs(&g, &shape, &opts) == want, "{} differs from the no-reuse plan for {:?}", label, steps);
        }
    }
}

/// The property above means something only if the plans do reuse memory: most random
/// graphs must plan into fewer bytes than one storage per tensor.
#[test]
fn random_graphs_exercise_reuse() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let steps = prop::collection::vec(step(), 4..14);
    let mut reused = 0;
    for _ in 0..20 {
        let s = steps.new_tree(&mut runner).expect("a graph").current();
        let g = build(4, 5, &s, &[]);
        let r = compile(&g, &[vec![1, 4, 5, 5]], &Options::default()).expect("compiles").report;
        if r.arena_bytes < r.naive_bytes {
            reused += 1;
        }
    }
    assert!(reused >= 15, "only {reused} of 20 random graphs reuse memory");
}
