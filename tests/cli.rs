//! The `rxvm` command line: each subcommand's output, and clear errors with exit code 1
//! (2 for usage errors) for bad files and arguments.

use std::path::PathBuf;

fn rxvm(args: &[&str]) -> (i32, String, String) {
    rxvm_test_support::cli::run(env!("CARGO_BIN_EXE_rxvm"), env!("CARGO_MANIFEST_DIR"), args)
}

fn tmp(name: &str) -> PathBuf {
    rxvm_test_support::cli::tmp("cli", name)
}

#[test]
fn asm_disasm_check_and_run_bytecode() {
    let rxb = tmp("mlp.rxb");
    let p = rxb.to_str().unwrap();
    let (code, _, err) = rxvm(&["asm", "examples/mlp.rxa", "-o", p]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = rxvm(&["check", p]);
    assert_eq!((code, out.as_str()), (0, "ok: module `mlp`: 1 function(s), 4 constant(s), 15 instruction(s)\n"));
    let (_, from_source, _) = rxvm(&["disasm", "examples/mlp.rxa"]);
    let (code, from_bytecode, _) = rxvm(&["disasm", p]);
    assert_eq!(code, 0);
    assert_eq!(from_source, from_bytecode);
    assert!(from_bytecode.contains("%hr = alloc_tensor %arena, 32, f32[1, 3]"), "{from_bytecode}");
    let (code, out, err) = rxvm(&["run", p, "--input", "x=zeros"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("result 0: f32[1, 2] "), "{out}");

    let stripped = tmp("mlp-stripped.rxb");
    let (code, _, _) = rxvm(&["asm", "examples/mlp.rxa", "--strip", "-o", stripped.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(std::fs::metadata(&stripped).unwrap().len() < std::fs::metadata(&rxb).unwrap().len());
    let (_, text, _) = rxvm(&["disasm", stripped.to_str().unwrap()]);
    assert!(text.contains("%r2 = alloc_tensor %r1, 0, f32[1, 3]"), "{text}");
}

#[test]
fn stats_json_has_the_documented_keys() {
    let (code, out, _) = rxvm(&["run", "examples/tiny.rxa", "--input", "x=random:3", "--stats=json", "-q"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    for k in ["fresh_allocations", "pool_hits", "live_bytes", "peak_bytes", "instructions"] {
        assert!(v[k].is_u64(), "missing {k} in {v}");
    }
    assert_eq!(v["instructions"], 7);
    assert_eq!(v["peak_bytes"], 16 + 4096);
}

#[test]
fn bad_arguments_are_clear_errors() {
    let cases: &[(&[&str], &str)] = &[
        (&["run", "no/such/file.rxa"], "error: cannot read no/such/file.rxa"),
        (
            &["run", "examples/tiny.rxa"],
            "error: missing input(s) for @main: %x: f32[4]; pass --input NAME=PATH.npy|zeros|random:SEED|VALUE",
        ),
        (
            &["run", "examples/tiny.rxa", "--input", "y=zeros"],
            "error: --input y=zeros: @main has no parameter %y; its parameters are: %x",
        ),
        (
            &["run", "examples/tiny.rxa", "--input", "x=7"],
            "error: input %x: the integer 7 does not fit its type f32[4]",
        ),
        (&["run", "examples/tiny.rxa", "--input", "x=missing.npy"], "error: cannot open missing.npy"),
        (
            &["run", "examples/tiny.rxa", "--func", "nope", "--input", "x=zeros"],
            "error: no function @nope in examples/tiny.rxa; it has: @main",
        ),
        (
            &["run", "examples/tiny.rxa", "--input", "x=zeros", "-o", "a.npy", "-o", "b.npy"],
            "error: 2 --output paths given but @main returned 1 tensor(s)",
        ),
        (
            &["run", "examples/tiny.rxa", "--input", "x=zeros", "--host-caps", "pitch=x"],
            "error: --host-caps: `x` is not a size",
        ),
        (
            &["run", "examples/alloc_loop.rxa", "--input", "n=100", "--max-instructions", "50"],
            "instruction limit of 50 reached",
        ),
        (&["check", "Cargo.toml"], "error"),
    ];
    for (args, want) in cases {
        let (code, _, err) = rxvm(args);
        assert_eq!(code, 1, "rxvm {args:?}: {err}");
        assert!(err.contains(want), "rxvm {args:?}:\n{err}\nwanted: {want}");
    }
    let (code, _, err) = rxvm(&["run"]);
    assert_eq!(code, 2, "usage errors exit 2: {err}");
}

#[test]
fn a_failed_write_leaves_no_partial_file() {
    let (code, _, err) = rxvm(&["asm", "examples/tiny.rxa", "-o", "/nonexistent-dir/x.rxb"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot write /nonexistent-dir/x.rxa") || err.contains("cannot write /nonexistent-dir/x."),
        "{err}"
    );
    // A refused program never overwrites an existing output.
    let out = tmp("keep.rxb");
    std::fs::write(&out, b"previous").unwrap();
    let (code, _, _) = rxvm(&["asm", "tests/bad/double_kill.rxa", "-o", out.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(std::fs::read(&out).unwrap(), b"previous");
}

#[test]
fn compile_and_run_an_onnx_model() {
    let light = "backend/test/data/light/light_squeezenet.onnx";
    let model = format!(".cache/onnx/wheel/onnx/{light}");
    if !std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(&model).exists() {
        assert!(std::env::var("RXVM_REQUIRE_ONNX_DATA").is_err(), "{model} is missing");
        return;
    }
    let rxa = tmp("squeezenet.rxa");
    let (code, _, err) = rxvm(&["compile", &model, "-o", rxa.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&rxa).unwrap();
    assert!(text.starts_with("; memory plan ("), "{}", &text[..200]);
    assert!(text.contains("%arena = alloc_storage 3928576"), "the arena of the plan");
    let rxb = tmp("squeezenet.rxb");
    let (code, _, err) = rxvm(&["compile", &model, "-o", rxb.to_str().unwrap(), "--planner", "none"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = rxvm(&["run", &model, "--input", "data_0=ramp", "--stats=json", "-q"]);
    assert_eq!(code, 0, "{err}");
    let stats: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(stats["arena_bytes"], 3928576);
    assert_eq!(stats["lower_bound"], 3928576);
    assert!(stats["naive_bytes"].as_u64().unwrap() > 3928576);
    let (code, _, err) = rxvm(&["compile", &model, "--planner", "magic"]);
    assert_eq!(code, 1);
    assert!(err.contains("unknown planner `magic`; the planners are: none, best, heuristics, greedy_by_size"), "{err}");

    // Textures for a named target: the plan says where each texture lives, and the program
    // runs on the host to the same result as the buffer program.
    let tex = tmp("squeezenet_tex.rxa");
    let (code, _, err) =
        rxvm(&["compile", &model, "--textures", "auto", "--target", "intel-cpu", "-o", tex.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&tex).unwrap();
    assert!(text.contains("for target `intel-cpu`") && text.contains("; textures: 66 tensors, 4 layout conversions"));
    assert!(
        text.contains("scope \"global.texture\"") && text.contains("call @vm.to_blocked(%data_0, %data_0_blocked)")
    );
    let buffers = tmp("squeezenet_buf.npy");
    let textures = tmp("squeezenet_tex.npy");
    for (file, out) in [(model.as_str(), &buffers), (tex.to_str().unwrap(), &textures)] {
        let (code, _, err) = rxvm(&["run", file, "--input", "data_0=ramp", "-q", "-o", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
    }
    assert_eq!(std::fs::read(&buffers).unwrap(), std::fs::read(&textures).unwrap());
    for (args, want) in [
        (&["--textures", "maybe"][..], "error: --textures: unknown texture mode `maybe`; expected `none` or `auto`"),
        (
            &["--target", "adreno"],
            "error: --target: unknown target `adreno`; the targets are: host, intel-cpu, pocl-cpu",
        ),
        (&["--target", "intel-cpu,pitch=x"], "error: --target: `x` is not a size"),
        (&["--align", "48"], "error: --align: the alignment must be a power of two, found 48"),
        (&["--device", "gpu"], "error: --device gpu: expected `host`, `opencl` or `opencl:NAME`"),
    ] {
        let mut all = vec!["compile", model.as_str(), "-o", "/tmp/unused.rxa"];
        all.extend_from_slice(args);
        let (code, _, err) = rxvm(&all);
        assert_eq!(code, 1, "{args:?}");
        assert!(err.starts_with(want), "{args:?}: {err}");
    }
    let (code, _, err) = rxvm(&["compile", &model, "--device", "host", "--target", "host"]);
    assert_eq!(code, 2, "clap refuses --device with --target: {err}");

    // The test models generate their weights with `ConstantOfShape`: folded into constants
    // by default, run at run time with no fold budget.
    let generated = |budget: &[&str]| {
        let out = tmp("squeezenet_fold.rxa");
        let mut all = vec!["compile", model.as_str(), "-o", out.to_str().unwrap()];
        all.extend_from_slice(budget);
        let (code, _, err) = rxvm(&all);
        assert_eq!(code, 0, "{err}");
        std::fs::read_to_string(&out).unwrap().matches("call @onnx.ConstantOfShape").count()
    };
    assert_eq!(generated(&[]), 0);
    assert_eq!(generated(&["--fold-budget", "0"]), 39);
    let (code, _, err) = rxvm(&["compile", &model, "--fold-budget", "lots"]);
    assert_eq!(code, 2);
    assert!(err.contains("expected a byte count such as 4096, 64K, 16M or 1G, found `lots`"), "{err}");
}

#[test]
fn plan_reports_traces_and_models() {
    let glow = "tests/data/glow/MemoryAllocatorTestModels.txt";
    let (code, out, err) = rxvm(&["plan", "--trace", glow, "--json"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<serde_json::Value> =
        out.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
    assert_eq!(lines.len(), 79);
    for v in &lines {
        for key in ["name", "arena_bytes", "lower_bound", "naive_bytes", "strategy", "millis", "efficiency", "pools"] {
            assert!(!v[key].is_null(), "{key} missing in {v}");
        }
        assert!(v["arena_bytes"].as_u64() >= v["lower_bound"].as_u64(), "{v}");
        assert_eq!(v["pools"][0]["arena_bytes"], v["arena_bytes"], "{v}");
    }
    let (code, out, err) = rxvm(&["plan", "--trace", "tests/data/minimalloc/A.1048576.csv"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("A.1048576\n  strategy") && out.contains("  lower bound  1,048,576 B"), "{out}");

    let svg = tmp("resnet_v2.svg");
    let (code, out, err) =
        rxvm(&["plan", "--trace", glow, "--only", "resnet50_v2.onnx", "--svg", svg.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("resnet50_v2"), "{out}");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg xmlns"), "an SVG picture");

    for (args, want) in [
        (
            &["plan", "--trace", glow, "--svg", "/tmp/x.svg"][..],
            "error: --svg draws one plan, but 79 were made; pick one with --only NAME",
        ),
        (&["plan", "--trace", glow, "--only", "nothing-like-this"], "error: --only nothing-like-this: no model of"),
        (
            &["plan", "--trace", glow, "--textures", "auto"],
            "error: --textures applies to models; a trace fixes sizes and lifetimes",
        ),
        (&["plan", "--trace", "Cargo.toml"], "error: Cargo.toml: line 1:"),
    ] {
        let (code, _, err) = rxvm(args);
        assert_eq!(code, 1, "{args:?}");
        assert!(err.starts_with(want), "{args:?}: {err}");
    }
}

#[test]
fn inputs_in_the_arena_pools_and_caller_io_from_the_command_line() {
    let model = ".cache/onnx/wheel/onnx/backend/test/data/light/light_squeezenet.onnx";
    if !std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(model).exists() {
        assert!(std::env::var("RXVM_REQUIRE_ONNX_DATA").is_err(), "{model} is missing");
        return;
    }
    let stats = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["run", model, "--input", "data_0=ramp", "--stats=json", "-q"];
        args.extend_from_slice(extra);
        let (code, out, err) = rxvm(&args);
        assert_eq!(code, 0, "{extra:?}: {err}");
        serde_json::from_str(out.trim()).expect("json")
    };
    // The input's 602,112 bytes are reused by the activations: the run needs that much less.
    let plain = stats(&[]);
    let shared = stats(&["--inputs-in-arena"]);
    assert_eq!((plain["input_bytes"].as_u64(), plain["device_bytes"].as_u64()), (Some(602112), Some(4530688)));
    assert_eq!((shared["input_bytes"].as_u64(), shared["device_bytes"].as_u64()), (Some(0), Some(3928576)));
    assert_eq!(shared["peak_bytes"], shared["device_bytes"], "measured = planned");
    assert_eq!(shared["pools"]["arena"]["holds"], "inputs+activations+outputs");
    assert_eq!(shared["pools"]["arena"]["caller_provided"], true);
    // Written in place: one upload, one read-back, nothing else.
    for s in [&plain, &shared] {
        assert_eq!((s["copies_h2d"].as_u64(), s["bytes_h2d"].as_u64()), (Some(1), Some(602112)));
        assert_eq!((s["copies_d2h"].as_u64(), s["bytes_d2h"].as_u64()), (Some(1), Some(4000)));
        assert_eq!(s["copies_d2d"], 0);
        assert_eq!(s["io_fallbacks"], serde_json::json!([]));
    }
    // Caller-owned outputs and three pools.
    let pools = stats(&["--io", "caller", "--pool", "inputs=in", "--pool", "activations=act"]);
    let p = &pools["pools"];
    assert_eq!((p["in"]["bytes"].as_u64(), p["in"]["caller_provided"].as_bool()), (Some(602112), Some(true)));
    assert_eq!((p["act"]["bytes"].as_u64(), p["act"]["caller_provided"].as_bool()), (Some(3928576), Some(false)));
    assert_eq!((p["outputs"]["bytes"].as_u64(), p["outputs"]["caller_provided"].as_bool()), (Some(4000), Some(true)));

    // The compiled program says where the input lives.
    let rxa = tmp("squeezenet_in_arena.rxa");
    let (code, _, err) = rxvm(&["compile", model, "--inputs-in-arena", "-o", rxa.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(rxa).unwrap();
    assert!(text.contains("func @main(%data_0: f32[1, 3, 224, 224] in %arena at "), "{}", &text[..600]);
    assert!(text.contains(
        "; pool `arena`: 3928576 bytes, lower bound 3928576, holds inputs+activations+outputs, provided by the caller"
    ));

    for (args, want) in [
        (&["--pool", "constants=w"][..], "error: --pool `constants=w`: constants are not planned"),
        (&["--pool", "inputs"], "error: --pool `inputs`: expected CLASS_OR_TENSOR=POOL"),
        // Names are checked against the model, and the message says which file.
        (
            &["--pool", "nope=p"],
            "error: .cache/onnx/wheel/onnx/backend/test/data/light/light_squeezenet.onnx: --pool nope=...: `nope` is neither a class (inputs, activations, outputs) nor a tensor",
        ),
        (
            &["--inputs-in-arena=image"],
            "error: .cache/onnx/wheel/onnx/backend/test/data/light/light_squeezenet.onnx: --inputs-in-arena: `image` is not a graph input; the inputs are: data_0",
        ),
        (&["--io", "both"], "error: --io: expected `vm` or `caller`, found `both`"),
    ] {
        let mut all = vec!["compile", model, "-o", "/tmp/unused.rxa"];
        all.extend_from_slice(args);
        let (code, _, err) = rxvm(&all);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.starts_with(want), "{args:?}: {err}");
    }
}

/// `--noop-kernels` (docs/performance.md): the same instructions run, the kernels do not.
#[test]
fn noop_kernels_run_the_same_instructions_without_kernel_work() {
    let stats = |extra: &[&str]| {
        let mut args = vec!["run", "examples/mlp.rxa", "--input", "x=ramp", "-q", "--stats=json"];
        args.extend_from_slice(extra);
        let (code, out, err) = rxvm(&args);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        (v["instructions"].as_u64().expect("instructions"), v["views_created"].as_u64().expect("views"))
    };
    let (run, noop) = (stats(&[]), stats(&["--noop-kernels"]));
    assert!(run.0 > 0 && run == noop, "{run:?} vs {noop:?}");
    let out = tmp("noop.npy");
    let (_, _, _) =
        rxvm(&["run", "examples/mlp.rxa", "--input", "x=ramp", "-q", "--noop-kernels", "-o", out.to_str().unwrap()]);
    assert!(out.exists(), "results are still written");
}

/// A model `y = Relu(x)` whose input has an ONNX name that is not an assembly identifier
/// (`in/x`, register `%in_x`), of `n` elements; written to a temp file.
fn relu_model(file: &str, n: i64) -> PathBuf {
    use onnx_protobuf::GraphProto;
    use rxvm_test_support::onnx_build::{bytes, model, node, value_info, F32};
    let mut g = GraphProto::new();
    g.name = "relu".into();
    g.input.push(value_info("in/x", F32, &[1, n]));
    g.node.push(node("Relu", &["in/x"], &["y"]));
    g.output.push(value_info("y", F32, &[1, n]));
    let path = tmp(file);
    std::fs::write(&path, bytes(&model(g))).expect("write the model");
    path
}

#[test]
fn run_takes_onnx_input_names_and_register_names() {
    let m = relu_model("names.onnx", 4);
    let m = m.to_str().unwrap();
    let (code, by_onnx_name, err) = rxvm(&["run", m, "--input", "in/x=ramp"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(by_onnx_name, "result 0: f32[1, 4] [[0.0, 0.25, 0.5, 0.75]]\n");
    let (code, by_register, err) = rxvm(&["run", m, "--input", "%in_x=ramp"]);
    assert_eq!((code, by_register), (0, by_onnx_name), "{err}");
    // Errors show both names.
    let (code, _, err) = rxvm(&["run", m, "--input", "x=ramp"]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "error: --input x=ramp: @main has no parameter %x; its parameters are: %in_x (ONNX input `in/x`)\n"
    );
    let (code, _, err) = rxvm(&["run", m]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "error: missing input(s) for @main: %in_x (ONNX input `in/x`): f32[1, 4]; pass --input NAME=PATH.npy|zeros|random:SEED|VALUE\n"
    );
    let (code, _, err) = rxvm(&["run", m, "--input", "in/x=ramp", "--input", "in_x=zeros"]);
    assert_eq!(code, 1);
    assert_eq!(err, "error: --input in_x=zeros: %in_x (ONNX input `in/x`) is given twice\n");
}

#[test]
fn an_input_to_a_function_without_parameters_says_so() {
    let p = tmp("no_params.rxa");
    std::fs::write(&p, "func @main() -> int {\n  %a = int 1\n  ret %a\n}\n").expect("write");
    let (code, _, err) = rxvm(&["run", p.to_str().unwrap(), "--input", "x=1"]);
    assert_eq!(code, 1);
    assert_eq!(err, "error: --input x=1: @main has no parameter %x; it takes no inputs\n");
}

#[test]
fn compile_prints_where_it_wrote_the_program() {
    let m = relu_model("wrote.onnx", 4);
    let rxa = m.with_extension("rxa");
    let _ = std::fs::remove_file(&rxa);
    let (code, out, err) = rxvm(&["compile", m.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let len = std::fs::metadata(&rxa).expect("MODEL.rxa written beside the model").len();
    assert_eq!(out, format!("wrote {} ({len} bytes)\n", rxa.display()));
    let rxb = tmp("wrote.rxb");
    let (code, out, err) = rxvm(&["compile", m.to_str().unwrap(), "-o", rxb.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let len = std::fs::metadata(&rxb).expect("the -o file").len();
    assert_eq!(out, format!("wrote {} ({len} bytes)\n", rxb.display()));
}

#[test]
fn long_results_are_summarised_unless_print_all() {
    let m = relu_model("long.onnx", 1000);
    let m = m.to_str().unwrap();
    let (code, out, err) = rxvm(&["run", m, "--input", "in/x=ramp"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "result 0: f32[1, 1000] [[0.0, 0.001, 0.002, ..., 0.997, 0.998, 0.999]]\n");
    let (code, out, err) = rxvm(&["run", m, "--input", "in/x=ramp", "--print-all"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("result 0: f32[1, 1000] [[0.0, 0.001, 0.002, 0.003, "), "{out}");
    assert!(!out.contains("..."), "{out}");
    assert_eq!(out.matches(", ").count(), 1 + 999, "every element: {out}");
    let (code, _, err) = rxvm(&["run", m, "--input", "in/x=ramp", "--print-all", "--quiet"]);
    assert_eq!(code, 2, "{err}");
}

/// Every bad input of `tests/bad/` run by `rxvm run` (under the limits its `;
/// max-live-bytes:` comment sets) gives an error with one `error: ` prefix (a VM that could
/// not load a constant once printed `error: error: ...`).
#[test]
fn errors_have_one_prefix() {
    let mut count = 0;
    for e in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/bad")).expect("tests/bad") {
        let path = e.expect("an entry").path();
        // A file's `; limits: K=V ...` line (see tests/bad_inputs.rs) as the CLI flags.
        let text = std::fs::read_to_string(&path).expect("read");
        let flags: Vec<String> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("; limits:"))
            .flat_map(|l| l.split_whitespace())
            .flat_map(|kv| {
                let (k, v) = kv.split_once('=').expect("KEY=VALUE");
                [format!("--{k}"), v.to_string()]
            })
            .collect();
        let mut args = vec!["run", path.to_str().unwrap()];
        args.extend(flags.iter().map(String::as_str));
        let (code, _, err) = rxvm(&args);
        assert_eq!(code, 1, "{}: {err}", path.display());
        assert!(err.starts_with("error: ") && !err.contains("error: error"), "{}: {err}", path.display());
        count += 1;
    }
    assert!(count >= 30, "{count}");
}

#[test]
fn dynamic_input_dims_take_the_shapes_given() {
    // x: f32[batch, 3, 8, 8] into a convolution.
    let model = "tests/bad_onnx/input_symbolic_dims.onnx";
    let x3 = rxvm::vm::HostTensor::random(rxvm::vm::types::DType::F32, &[3, 3, 8, 8], 7).expect("x");
    let x1 = rxvm::vm::HostTensor::new(x3.dtype, vec![1, 3, 8, 8], x3.data[..3 * 64 * 4].to_vec()).expect("row 0");
    let (p3, p1, y3, y1) = (tmp("x3.npy"), tmp("x1.npy"), tmp("y3.npy"), tmp("y1.npy"));
    rxvm::npy::write_npy(&p3, &x3).expect("write");
    rxvm::npy::write_npy(&p1, &x1).expect("write");
    // `run` compiles for the shape of the .npy input: batch 3, then batch 1.
    for (x, y) in [(&p3, &y3), (&p1, &y1)] {
        let (code, _, err) = rxvm(&["run", model, "--input", &format!("x={}", x.display()), "-o", y.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
    }
    let (y3, y1) = (rxvm::npy::read_npy(&y3).expect("y3"), rxvm::npy::read_npy(&y1).expect("y1"));
    assert_eq!((y3.shape.as_slice(), y1.shape.as_slice()), (&[3, 4, 8, 8][..], &[1, 4, 8, 8][..]));
    assert_eq!(y1.data, y3.data[..y1.data.len()], "row 0 of the batch is the batch of row 0");
    assert!(y1.data.chunks_exact(4).any(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) > 0.0), "not all zero");

    let rxa = tmp("pinned.rxa");
    let (code, _, err) = rxvm(&["compile", model, "--shape", "x=[2,3,8,8]", "-o", rxa.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&rxa).expect("written");
    assert!(text.contains("func @main(%x: f32[2, 3, 8, 8])"), "{text}");
    let refused = [
        (vec!["compile", model, "--bound", "n=8"], "error: tests/bad_onnx/input_symbolic_dims.onnx: --bound n=8: no symbol `n`; the symbols are `batch`\n"),
        (vec!["compile", model, "--bound", "batch"], "error: --bound batch: expected NAME=N[,NAME=N...], e.g. batch=8,seq=512\n"),
        (vec!["compile", model, "--shape", "x=[2,4,8,8]"], "error: tests/bad_onnx/input_symbolic_dims.onnx: input `x` is f32[batch, 3, 8, 8], which the shape [2, 4, 8, 8] given for it does not fit\n"),
        (vec!["compile", model, "--shape", "y=[2,3,8,8]"], "error: tests/bad_onnx/input_symbolic_dims.onnx: the model has no input `y`; its inputs are `x`: f32[batch, 3, 8, 8]\n"),
        (vec!["compile", model, "--shape", "x=2,3"], "error: --shape x=2,3: expected NAME=[d0,d1,...], e.g. x=[1,3,224,224]\n"),
        (vec!["run", model, "--input", "x=zeros"], "error: tests/bad_onnx/input_symbolic_dims.onnx: these inputs have dynamic dims: `x`: f32[batch, 3, 8, 8]; give their shapes with --shape NAME=[d0,d1,...] (or, for `run` and `bench`, a .npy --input), or export the model with fixed input dims\n"),
    ];
    for (args, want) in refused {
        let (code, _, err) = rxvm(&args);
        assert_eq!((code, err.as_str()), (1, want), "{args:?}");
    }

    // Without --shape the batch is a symbol: one program for batch 1 and 3, planned up to
    // its bound; over the bound, the entry check says so.
    let rxb = tmp("symbolic.rxb");
    let (code, _, err) = rxvm(&["compile", model, "--bound", "batch=4", "-o", rxb.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for (x, want) in [(&p3, &y3), (&p1, &y1)] {
        let y = tmp("y_symbolic.npy");
        let args = ["run", rxb.to_str().unwrap(), "--input", &format!("x={}", x.display()), "-o", y.to_str().unwrap()];
        let (code, _, err) = rxvm(&args);
        assert_eq!(code, 0, "{err}");
        assert_eq!(rxvm::npy::read_npy(&y).expect("y").data, want.data);
    }
    let x5 = tmp("x5.npy");
    rxvm::npy::write_npy(&x5, &rxvm::vm::HostTensor::zeros(x3.dtype, &[5, 3, 8, 8]).unwrap()).expect("write");
    let (code, _, err) = rxvm(&["run", rxb.to_str().unwrap(), "--input", &format!("x={}", x5.display())]);
    assert_eq!(code, 1);
    assert!(
        err.contains("argument 1 (%x) of @main: dimension 0 is 5, over the bound of %batch (%batch <= 4)"),
        "{err}"
    );
}

#[test]
fn inputs_that_name_one_dim_must_agree_on_its_size() {
    use onnx_protobuf::tensor_shape_proto::dimension;
    use onnx_protobuf::type_proto::Value;
    use onnx_protobuf::GraphProto;
    use rxvm_test_support::onnx_build::{bytes, model, node, value_info, F32};
    let batch = |mut v: onnx_protobuf::ValueInfoProto| {
        if let Some(Value::TensorType(t)) = v.type_.as_mut().and_then(|t| t.value.as_mut()) {
            if let Some(s) = t.shape.as_mut() {
                s.dim[0].value = Some(dimension::Value::DimParam("batch".into()));
            }
        }
        v
    };
    let mut g = GraphProto::new();
    g.name = "add".into();
    g.input.push(batch(value_info("a", F32, &[1, 4])));
    g.input.push(batch(value_info("b", F32, &[1, 4])));
    g.node.push(node("Add", &["a", "b"], &["y"]));
    g.output.push(value_info("y", F32, &[1, 4]));
    let path = tmp("shared_batch.onnx");
    std::fs::write(&path, bytes(&model(g))).expect("write the model");
    let m = path.to_str().unwrap();
    let (code, _, err) = rxvm(&["compile", m, "--shape", "a=[2,4]", "--shape", "b=[3,4]"]);
    assert_eq!(code, 1);
    assert!(
        err.ends_with("inputs `a` and `b` share the dim `batch`, but have sizes 2 (dim 0) and 3 (dim 0)\n"),
        "{err}"
    );
    let out = tmp("shared_batch.rxa");
    let (code, _, err) = rxvm(&["compile", m, "--shape", "a=[3,4]", "--shape", "b=[3,4]", "-o", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn plan_shows_a_symbolic_plan_at_chosen_values() {
    let model = "tests/symbolic/encoder.onnx";
    let (code, out, err) = rxvm(&["plan", model, "--bound", "seq=512", "--at", "seq=64"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("encoder at seq=64 (target host)\n  strategy     placement order\n  arena        147,456 B\n  lower bound  147,456 B\n"), "{out}");
    let svg = tmp("enc64.svg");
    let (code, _, err) = rxvm(&["plan", model, "--bound", "seq=512", "--at", "seq=7", "--svg", svg.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read_to_string(&svg).expect("drawn").contains("<title>encoder at seq=7"));
    for (args, want) in [
        (vec!["plan", model, "--bound", "seq=512", "--at", "seq=600"], "error: --at seq=600: outside 0..=512\n"),
        (
            vec!["plan", model, "--bound", "seq=512", "--at", "n=6"],
            "error: --at n=6: no symbol `n`; the symbols are seq <= 512\n",
        ),
        (
            vec!["plan", model, "--shape", "x=[1,8,32]", "--at", "seq=6"],
            "error: --at: the program has no planned symbols (compile with --bound for each symbolic dim)\n",
        ),
    ] {
        let (code, _, err) = rxvm(&args);
        assert_eq!((code, err.as_str()), (1, want), "{args:?}");
    }
}
