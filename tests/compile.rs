//! The compiler through its Rust API, as a frontend uses it: build a graph, compile it with
//! a memory plan, run it, and compare with the no-reuse plan. Snapshots show where each
//! `alloc_tensor` and `kill` lands in the emitted `.rxa`.

use rxvm::compile::{compile, Options, Planner, Textures};
use rxvm::graph::{Graph, GraphInput, InputDim};
use rxvm::vm::ops::{AttrValue, Attrs};
use rxvm::vm::types::DType;
use rxvm::vm::{DeviceCaps, HostTensor, HostValue, Vm};
use rxvm_test_support::graphs::node;
use std::sync::Arc;

fn weights(shape: &[i64], seed: u64) -> HostTensor {
    HostTensor::random(DType::F32, shape, seed).expect("weights")
}

/// A small CNN: Conv → Relu → MaxPool → Conv (residual Add) → GlobalAveragePool → Flatten → Gemm.
fn small_cnn() -> Graph {
    let mut g = Graph::new("small_cnn".into());
    g.inputs.push(GraphInput {
        name: "image".into(),
        dtype: DType::F32,
        dims: vec![InputDim::Fixed(1), InputDim::Fixed(3), InputDim::Fixed(8), InputDim::Fixed(8)],
    });
    g.add_const("w1", weights(&[4, 3, 3, 3], 1));
    g.add_const("w2", weights(&[4, 4, 3, 3], 2));
    g.add_const("fc", weights(&[10, 4], 3));
    let pads = ("pads", AttrValue::Ints(vec![1, 1, 1, 1]));
    g.nodes.push(node("Conv", &["image", "w1"], &["c1"], std::slice::from_ref(&pads)));
    g.nodes.push(node("Relu", &["c1"], &["r1"], &[]));
    let k2 = [("kernel_shape", AttrValue::Ints(vec![2, 2])), ("strides", AttrValue::Ints(vec![2, 2]))];
    g.nodes.push(node("MaxPool", &["r1"], &["p1"], &k2));
    g.nodes.push(node("Conv", &["p1", "w2"], &["c2"], &[pads]));
    g.nodes.push(node("Add", &["c2", "p1"], &["s"], &[]));
    g.nodes.push(node("GlobalAveragePool", &["s"], &["gap"], &[]));
    g.nodes.push(node("Flatten", &["gap"], &["flat"], &[]));
    g.nodes.push(node("Gemm", &["flat", "fc"], &["logits"], &[("transB", AttrValue::Int(1))]));
    g.outputs.push("logits".into());
    g
}

/// Two branches that meet in a Concat, one output a view (Reshape) of an intermediate.
fn branches() -> Graph {
    let mut g = Graph::new("branches".into());
    g.inputs.push(GraphInput {
        name: "x".into(),
        dtype: DType::F32,
        dims: vec![InputDim::Fixed(2), InputDim::Fixed(8)],
    });
    g.add_const(
        "shape",
        HostTensor::new(DType::I64, vec![2], [8i64, 4].iter().flat_map(|v| v.to_le_bytes()).collect()).unwrap(),
    );
    g.nodes.push(node("Relu", &["x"], &["a"], &[]));
    g.nodes.push(node("Sigmoid", &["x"], &["b"], &[]));
    g.nodes.push(node("Concat", &["a", "b"], &["ab"], &[("axis", AttrValue::Int(1))]));
    g.nodes.push(node("Reshape", &["ab"], &["square"], &[]));
    g.nodes.last_mut().unwrap().inputs.push("shape".into());
    g.nodes.push(node("Tanh", &["square"], &["t"], &[]));
    g.outputs.push("t".into());
    g.outputs.push("a".into());
    g
}

fn run(g: &Graph, shapes: &[Vec<i64>], planner: Planner) -> Vec<Vec<f64>> {
    let c = compile(g, shapes, &Options { planner, ..Options::default() }).expect("compiles");
    run_module(c.module, shapes, DeviceCaps::host())
}

fn run_module(m: rxvm::vm::Module, shapes: &[Vec<i64>], device: DeviceCaps) -> Vec<Vec<f64>> {
    let mut vm = Vm::new(Arc::new(m), vec![device]).expect("a VM");
    let ins: Vec<HostValue> =
        shapes.iter().enumerate().map(|(i, s)| HostValue::Tensor(weights(s, 10 + i as u64))).collect();
    vm.invoke("main", &ins)
        .expect("runs")
        .into_iter()
        .map(|v| match v {
            HostValue::Tensor(t) => t.to_f64(),
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn a_frontend_built_cnn_runs_the_same_with_and_without_the_plan() {
    let g = small_cnn();
    let shapes = vec![vec![1, 3, 8, 8]];
    let planned = run(&g, &shapes, Planner::Best);
    assert_eq!(planned[0].len(), 10);
    assert_eq!(planned, run(&g, &shapes, Planner::None));
    let c = compile(&g, &shapes, &Options::default()).unwrap();
    assert!(c.report.arena_bytes < c.report.naive_bytes, "{:?}", c.report);
    assert_eq!(c.report.arena_bytes, c.report.lower_bound, "{:?}", c.report);
    let g = branches();
    assert_eq!(run(&g, &[vec![2, 8]], Planner::Best), run(&g, &[vec![2, 8]], Planner::None));
}

fn listing(g: &Graph, shapes: &[Vec<i64>]) -> String {
    listing_with(g, shapes, &Options::default())
}

fn listing_with(g: &Graph, shapes: &[Vec<i64>], opts: &Options) -> String {
    let c = compile(g, shapes, opts).expect("compiles");
    // Constants are random data: keep their declarations out of the snapshot.
    let text = rxvm::asm::disassemble(&c.module);
    let body: Vec<&str> = text.lines().filter(|l| !l.starts_with("const ")).collect();
    format!("{}{}\n", c.plan_comment, body.join("\n"))
}

#[test]
fn emitted_programs_show_where_tensors_are_allocated_and_killed() {
    insta::assert_snapshot!("small_cnn", listing(&small_cnn(), &[vec![1, 3, 8, 8]]));
    insta::assert_snapshot!("branches", listing(&branches(), &[vec![2, 8]]));
}

fn with_textures(target: &str) -> Options {
    Options { textures: Textures::Auto, target: DeviceCaps::parse_target(target).unwrap(), ..Options::default() }
}

#[test]
fn textures_share_the_arena_on_a_target_with_images_over_buffers() {
    let (g, shapes) = (small_cnn(), vec![vec![1, 3, 8, 8]]);
    let text = listing_with(&g, &shapes, &with_textures("intel-cpu"));
    // The image conversion at each edge, blocked texture views in the one arena, pitched to
    // 64 texels (an 8-wide row of 16-byte texels takes 1024 bytes), and Gemm on a buffer.
    insta::assert_snapshot!("small_cnn_textures", text);
    let c = compile(&g, &shapes, &with_textures("intel-cpu")).unwrap();
    assert_eq!((c.report.textures, c.report.conversions), (7, 2), "{:?}", c.report);
    // The text assembles, and runs on the host bit-identically to the buffer program.
    let m = rxvm::asm::assemble(&format!("{}{}", c.plan_comment, rxvm::asm::disassemble(&c.module)), "t.rxa")
        .map_err(|d| d.render())
        .unwrap();
    let host = DeviceCaps::parse_target("intel-cpu").unwrap();
    assert_eq!(run_module(m, &shapes, host), run(&g, &shapes, Planner::Best));
}

#[test]
fn textures_share_image_slots_without_images_over_buffers() {
    let (g, shapes) = (small_cnn(), vec![vec![1, 3, 8, 8]]);
    let c = compile(&g, &shapes, &with_textures("pocl-cpu")).unwrap();
    // Seven textures of three sizes (8x8, 4x4, 1x1 texels) in image slots that a later
    // texture reuses when it is free and covers it: the 8x8 slots hold the 4x4 textures too.
    assert_eq!((c.report.textures, c.report.image_slots), (7, 3), "{}", c.plan_comment);
    assert!(
        c.plan_comment.contains("; images (no image2d-from-buffer): 3 shared slots, 2304 image bytes: 8x8, 8x8, 4x4"),
        "{}",
        c.plan_comment
    );
    let text = rxvm::asm::disassemble(&c.module);
    assert_eq!(text.matches("alloc_storage").count(), 1 + c.report.image_slots, "{text}");
    let pocl_like = DeviceCaps::parse_target("pocl-cpu").unwrap();
    assert_eq!(run_module(c.module, &shapes, pocl_like), run(&g, &shapes, Planner::Best));
    // Without images, `auto` keeps every tensor in buffers and says why.
    let c = compile(&g, &shapes, &with_textures("host,images=0")).unwrap();
    assert_eq!(c.report.textures, 0);
    assert!(
        c.plan_comment.contains("; note: target `host` has no images: every tensor is a buffer"),
        "{}",
        c.plan_comment
    );
}

#[test]
fn unsupported_operators_are_all_listed() {
    let mut g = branches();
    g.nodes[1].op = "Frobnicate".into();
    g.nodes[4].op = "Wobble".into();
    let e = compile(&g, &[vec![2, 8]], &Options::default()).err().expect("an error");
    assert!(e.contains("Frobnicate") && e.contains("Wobble"), "{e}");
}

#[test]
fn the_builder_reports_every_malformed_node_by_name() {
    let mut g = Graph::new("broken".into());
    g.input("x", DType::F32, &[2, 8])
        .node("first", "Relu", &["x"], &["a"], Attrs::default())
        .node("early", "Add", &["a", "b"], &["c"], Attrs::default())
        .node("second", "Sigmoid", &["x"], &["b"], Attrs::default())
        .node("again", "Tanh", &["a"], &["a"], Attrs::default())
        .node("typo", "Relu", &["nowhere"], &["d"], Attrs::default())
        .node("first", "Relu", &["x"], &["e"], Attrs::default())
        .output("c")
        .output("missing");
    let e = compile(&g, &[vec![2, 8]], &Options::default()).err().expect("an error");
    insta::assert_snapshot!("builder_validation", e);
    // A well-formed graph built the same way compiles and runs.
    let mut g = Graph::new("ok".into());
    g.input("x", DType::F32, &[2, 8]).node("r", "Relu", &["x"], &["y"], Attrs::default()).output("y");
    assert_eq!(run(&g, &[vec![2, 8]], Planner::Best), run(&g, &[vec![2, 8]], Planner::None));
}

/// A fully connected layer whose weight a `ConstantOfShape` generates (as the ONNX
/// model-zoo test models generate theirs).
fn generated_weight() -> Graph {
    let mut g = Graph::new("generated".into());
    g.inputs.push(GraphInput {
        name: "x".into(),
        dtype: DType::F32,
        dims: vec![InputDim::Fixed(1), InputDim::Fixed(256)],
    });
    g.add_const(
        "wshape",
        HostTensor::new(DType::I64, vec![2], [16i64, 256].iter().flat_map(|v| v.to_le_bytes()).collect()).unwrap(),
    );
    let fill = [("dtype", AttrValue::Str("f32".into())), ("value", AttrValue::Float(0.5))];
    g.nodes.push(node("ConstantOfShape", &["wshape"], &["w"], &fill));
    g.nodes.push(node("Gemm", &["x", "w"], &["y"], &[("transB", AttrValue::Int(1))]));
    g.outputs.push("y".into());
    g
}

/// Constant subgraphs are evaluated at compile time within `Options::fold_budget` (bytes
/// of outputs, in all); what does not fit runs at run time and computes the same.
#[test]
fn constant_subgraphs_fold_within_the_fold_budget() {
    let g = generated_weight();
    let shapes = vec![vec![1, 256]];
    let calls = |opts: &Options| {
        let text = rxvm::asm::disassemble(&compile(&g, &shapes, opts).expect("compiles").module);
        text.lines().filter(|l| l.contains("call @onnx.ConstantOfShape")).count()
    };
    // The weight is 16 x 256 f32: 16 KiB.
    assert_eq!(calls(&Options::default()), 0, "folded into a constant by default");
    let small = Options { fold_budget: 16 * 1024 - 1, ..Options::default() };
    assert_eq!(calls(&small), 1, "one byte short: left to run time");
    let exact = Options { fold_budget: 16 * 1024, ..Options::default() };
    assert_eq!(calls(&exact), 0);
    let folded = run_module(compile(&g, &shapes, &Options::default()).unwrap().module, &shapes, DeviceCaps::host());
    let at_run_time = run_module(compile(&g, &shapes, &small).unwrap().module, &shapes, DeviceCaps::host());
    assert_eq!(folded, at_run_time);
}

fn i64_const(v: &[i64], shape: &[i64]) -> HostTensor {
    HostTensor::new(DType::I64, shape.to_vec(), v.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap()
}

/// A causal-mask subgraph of constants (Range, Reshape, Less, Where, Expand) folds at compile
/// time through the host kernels, bool tensors included; the comparisons and logic on a
/// computed tensor run at run time.
#[test]
fn mask_subgraphs_of_constants_fold_and_logic_runs() {
    let mut g = Graph::new("mask".into());
    g.inputs.push(GraphInput {
        name: "x".into(),
        dtype: DType::F32,
        dims: vec![InputDim::Fixed(2), InputDim::Fixed(4), InputDim::Fixed(4)],
    });
    g.add_const("start", i64_const(&[0], &[]));
    g.add_const("limit", i64_const(&[4], &[]));
    g.add_const("one", i64_const(&[1], &[]));
    g.add_const("col_shape", i64_const(&[4, 1], &[2]));
    g.add_const("out_shape", i64_const(&[2, 4, 4], &[3]));
    g.add_const("neg", HostTensor::from_f32(&[], &[-1000.0]).unwrap());
    g.add_const("zero", HostTensor::from_f32(&[], &[0.0]).unwrap());
    g.nodes.push(node("Range", &["start", "limit", "one"], &["r"], &[]));
    g.nodes.push(node("Reshape", &["r", "col_shape"], &["col"], &[]));
    g.nodes.push(node("Less", &["col", "r"], &["masked"], &[]));
    g.nodes.push(node("Where", &["masked", "neg", "zero"], &["bias"], &[]));
    g.nodes.push(node("Expand", &["bias", "out_shape"], &["bias3"], &[]));
    g.nodes.push(node("Greater", &["x", "zero"], &["positive"], &[]));
    g.nodes.push(node("Not", &["positive"], &["keep"], &[]));
    g.nodes.push(node("Where", &["keep", "x", "bias3"], &["y"], &[]));
    g.outputs.push("y".into());
    let shapes = vec![vec![2, 4, 4]];
    let text = rxvm::asm::disassemble(&compile(&g, &shapes, &Options::default()).expect("compiles").module);
    for folded in ["Range", "Reshape", "Less", "Expand"] {
        assert!(!text.contains(&format!("call @onnx.{folded}(")), "{folded} is not folded:\n{text}");
    }
    for runs in ["Greater", "Not", "Where"] {
        assert_eq!(text.matches(&format!("call @onnx.{runs}(")).count(), 1, "{runs}:\n{text}");
    }
    let x = weights(&[2, 4, 4], 10).to_f64();
    let want: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(k, &v)| {
            let (i, j) = ((k / 4) % 4, k % 4);
            if v <= 0.0 {
                v
            } else if i < j {
                -1000.0
            } else {
                0.0
            }
        })
        .collect();
    assert!(x.iter().any(|&v| v > 0.0) && x.iter().any(|&v| v <= 0.0), "the input has both signs");
    assert_eq!(run(&g, &shapes, Planner::Best), vec![want]);
}

/// A legacy export's shape arithmetic: `Shape` of a computed tensor, a dim picked out with
/// `Gather`, joined with `-1` by `Concat` and fed to `Reshape`. The input shapes are known
/// when compiling, so `Shape` folds whatever computes its input, the arithmetic after it
/// folds too, and the program has none of it: only the Relu and the Reshape's view.
#[test]
fn shape_of_a_computed_tensor_folds_with_the_arithmetic_after_it() {
    let g = rxvm_test_support::graphs::legacy_reshape(InputDim::Fixed(2));
    let shapes = vec![vec![2, 3, 4]];
    let c = compile(&g, &shapes, &Options::default()).expect("compiles: the reshape target is known");
    let text = rxvm::asm::disassemble(&c.module);
    for op in ["Shape", "Gather", "Concat"] {
        assert!(!text.contains(&format!("@onnx.{op}")), "{op} was not folded:\n{text}");
    }
    assert!(text.contains("f32[2, 12]"), "the output is [2, 12]:\n{text}");
    // run_module's input is `weights([2, 3, 4], 10)`: the output is its Relu, row-major.
    let out = run_module(c.module, &shapes, DeviceCaps::host());
    let want: Vec<f64> = weights(&[2, 3, 4], 10).to_f64().into_iter().map(|v| v.max(0.0)).collect();
    assert_eq!(out, vec![want]);
}

/// `Size` of a computed tensor folds as `Shape` does, and a `Range` over it folds too.
#[test]
fn size_of_a_computed_tensor_folds_and_feeds_a_range() {
    let mut g = Graph::new("positions".into());
    g.inputs.push(GraphInput {
        name: "x".into(),
        dtype: DType::F32,
        dims: vec![InputDim::Fixed(2), InputDim::Fixed(3), InputDim::Fixed(4)],
    });
    g.add_const("zero", i64_const(&[0], &[]));
    g.add_const("one", i64_const(&[1], &[]));
    g.add_const("flat", i64_const(&[-1], &[1]));
    g.nodes.push(node("Relu", &["x"], &["h"], &[]));
    g.nodes.push(node("Size", &["h"], &["n"], &[]));
    g.nodes.push(node("Range", &["zero", "n", "one"], &["r"], &[]));
    g.nodes.push(node("Cast", &["r"], &["rf"], &[("to", AttrValue::Int(1))]));
    g.nodes.push(node("Reshape", &["h", "flat"], &["hf"], &[]));
    g.nodes.push(node("Add", &["hf", "rf"], &["y"], &[]));
    g.outputs.push("y".into());
    let shapes = vec![vec![2, 3, 4]];
    let c = compile(&g, &shapes, &Options::default()).expect("compiles: the range's length is known");
    let text = rxvm::asm::disassemble(&c.module);
    for op in ["Size", "Range", "Cast"] {
        assert!(!text.contains(&format!("@onnx.{op}")), "{op} was not folded:\n{text}");
    }
    let out = run_module(c.module, &shapes, DeviceCaps::host());
    let want: Vec<f64> = weights(&[2, 3, 4], 10)
        .to_f64()
        .into_iter()
        .enumerate()
        .map(|(k, v)| ((v as f32).max(0.0) + k as f32) as f64)
        .collect();
    assert_eq!(out, vec![want]);
}

/// A ReduceSum whose axes are a graph input: its output shape is known only when the
/// program runs. The planned part (`h = Relu(x)`, also an output) feeds it; the VM
/// allocates `s` and the `Mul` after it at run time, and frees `s` after its last use.
#[test]
fn shapes_decided_by_run_time_values_are_allocated_when_the_program_runs() {
    let mut g = Graph::new("reduce_by_input".into());
    g.inputs.push(GraphInput {
        name: "x".into(),
        dtype: DType::F32,
        dims: vec![InputDim::Fixed(2), InputDim::Fixed(3), InputDim::Fixed(4)],
    });
    g.inputs.push(GraphInput { name: "axes".into(), dtype: DType::I64, dims: vec![InputDim::Fixed(1)] });
    g.nodes.push(node("Relu", &["x"], &["h"], &[]));
    g.nodes.push(node("ReduceSum", &["h", "axes"], &["s"], &[("keepdims", AttrValue::Int(0))]));
    g.nodes.push(node("Mul", &["s", "s"], &["y"], &[]));
    g.outputs.push("y".into());
    g.outputs.push("h".into());
    let shapes = vec![vec![2, 3, 4], vec![1]];
    let c = compile(&g, &shapes, &Options::default()).expect("compiles");
    let text = rxvm::asm::disassemble(&c.module);
    assert!(text.contains("%s = call @onnx.ReduceSum(%h, %axes) { keepdims = 0 }"), "{text}");
    assert!(text.contains("%y = call @onnx.Mul(%s, %s)"), "{text}");
    assert!(text.contains("kill %s"), "{text}");
    assert!(text.contains("-> (tensor, f32[2, 3, 4])"), "{text}");
    assert_eq!(c.report.run_time, ["s", "y"]);
    assert!(c.plan_comment.contains("; run-time shapes: 2 tensors allocated when the program runs (s, y)\n"));
    assert_eq!(c.report.tensors, 1, "only h is planned");
    let x = weights(&[2, 3, 4], 7);
    let h: Vec<f64> = x.to_f64().into_iter().map(|v| v.max(0.0)).collect();
    let mut vm = Vm::host(Arc::new(c.module)).expect("a VM");
    for (axis, shape) in [(0usize, vec![3, 4]), (2, vec![2, 3]), (1, vec![2, 4])] {
        let axes = i64_const(&[axis as i64], &[1]);
        let out = vm.invoke("main", &[HostValue::Tensor(x.clone()), HostValue::Tensor(axes)]).expect("runs");
        let [HostValue::Tensor(y), HostValue::Tensor(h_out)] = &out[..] else { panic!("{out:?}") };
        assert_eq!(y.shape, shape, "axis {axis}");
        assert_eq!(h_out.to_f64(), h);
        // The sum over `axis` of [2, 3, 4], squared.
        let dims = [2usize, 3, 4];
        let mut want = vec![0f64; 24 / dims[axis]];
        for (i, v) in h.iter().enumerate() {
            let idx = [i / 12, i / 4 % 3, i % 4];
            let rest: Vec<usize> = (0..3).filter(|&d| d != axis).map(|d| idx[d]).collect();
            let other = (0..3).filter(|&d| d != axis).map(|d| dims[d]).collect::<Vec<_>>();
            want[rest[0] * other[1] + rest[1]] += (*v as f32) as f64;
        }
        let got = y.to_f64();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w * w).abs() <= 1e-4 * (1.0 + w * w), "axis {axis}: {got:?} vs squares of {want:?}");
        }
    }
}
