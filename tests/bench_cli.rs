//! `rxvm bench`: the JSON report's keys and values, `--reps`/`--time`, inputs given or
//! generated, and clear errors (exit 1, or 2 for usage errors) for bad arguments.

use std::path::PathBuf;

fn rxvm(args: &[&str]) -> (i32, String, String) {
    rxvm_test_support::cli::run(env!("CARGO_BIN_EXE_rxvm"), env!("CARGO_MANIFEST_DIR"), args)
}

fn tmp(name: &str) -> PathBuf {
    rxvm_test_support::cli::tmp("bench-cli", name)
}

/// `y = Relu(Conv(x, w))`, x: f32[1, 3, 16, 16] named `in/x`, w an initializer.
fn conv_model(file: &str) -> PathBuf {
    use onnx_protobuf::GraphProto;
    use rxvm_test_support::onnx_build::{bytes, f32_tensor, model, node, value_info, Encoding, F32};
    let mut g = GraphProto::new();
    g.name = "conv".into();
    g.input.push(value_info("in/x", F32, &[1, 3, 16, 16]));
    g.node.push(node("Conv", &["in/x", "w"], &["c"]));
    g.node.push(node("Relu", &["c"], &["y"]));
    g.output.push(value_info("y", F32, &[1, 8, 14, 14]));
    g.initializer.push(f32_tensor("w", &[8, 3, 3, 3], &[0.01; 8 * 3 * 3 * 3], Encoding::Raw));
    let path = tmp(file);
    std::fs::write(&path, bytes(&model(g))).expect("write the model");
    path
}

fn report(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = rxvm(args);
    assert_eq!(code, 0, "rxvm {args:?}: {err}");
    assert_eq!(out.lines().count(), 1, "one JSON object on one line: {out}");
    serde_json::from_str(out.trim()).expect("a JSON object")
}

fn ms(v: &serde_json::Value, key: &str) -> f64 {
    let x = v[key].as_f64().unwrap_or_else(|| panic!("{key} is not a number in {v}"));
    assert!(x.is_finite() && x >= 0.0, "{key} = {x}");
    x
}

#[test]
fn json_has_every_key_with_sane_values() {
    let m = conv_model("json.onnx");
    let m = m.to_str().unwrap();
    let v = report(&["bench", m, "--json", "--reps", "7", "--warmup", "1"]);
    let keys = [
        "model",
        "device",
        "reps",
        "load_ms",
        "first_ms",
        "median_ms",
        "min_ms",
        "p90_ms",
        "mean_ms",
        "peak_rss_bytes",
    ];
    let obj = v.as_object().expect("an object");
    assert_eq!(obj.len(), keys.len(), "{v}");
    for k in keys {
        assert!(obj.contains_key(k), "missing {k} in {v}");
    }
    assert_eq!(v["model"], m);
    assert_eq!(v["device"], "host");
    assert_eq!(v["reps"], 7);
    let (min, median, p90, mean) = (ms(&v, "min_ms"), ms(&v, "median_ms"), ms(&v, "p90_ms"), ms(&v, "mean_ms"));
    assert!(min <= median && median <= p90, "{v}");
    assert!(min <= mean && mean > 0.0, "{v}");
    assert!(ms(&v, "load_ms") > 0.0 && ms(&v, "first_ms") > 0.0, "{v}");
    // Linux reports the peak resident set; the VM and its model take more than a MiB.
    if cfg!(target_os = "linux") {
        assert!(v["peak_rss_bytes"].as_u64().is_some_and(|b| b > 1 << 20), "{v}");
    }
}

#[test]
fn time_measures_as_many_as_fit_and_at_least_one() {
    let m = conv_model("time.onnx");
    let v = report(&["bench", m.to_str().unwrap(), "--json", "--time", "300ms", "--warmup", "0"]);
    let reps = v["reps"].as_u64().expect("reps");
    assert!(reps >= 1, "{v}");
    // Each inference is far shorter than the time, and the time bounds the whole.
    assert!(ms(&v, "mean_ms") * reps as f64 <= 300.0 + ms(&v, "p90_ms") * 2.0 + 50.0, "{v}");
    // A time shorter than one inference still measures one.
    let v = report(&["bench", m.to_str().unwrap(), "--json", "--time", "0.000001", "--warmup", "0"]);
    assert_eq!(v["reps"], 1, "{v}");
}

#[test]
fn the_table_names_each_measure() {
    let (code, out, err) = rxvm(&["bench", "examples/mlp.rxa", "--reps", "3"]);
    assert_eq!(code, 0, "{err}");
    let labels: Vec<&str> = out.lines().map(|l| l.split_whitespace().next().unwrap_or("")).collect();
    assert_eq!(labels, ["model", "device", "load", "first", "reps", "median", "min", "p90", "mean", "peak"], "{out}");
    assert!(out.contains("\nreps      3 (after 3 warm-up)\n"), "{out}");
    // Every value starts in one column.
    assert!(out.lines().all(|l| l.len() > 10 && l.as_bytes()[9] == b' ' && l.as_bytes()[10] != b' '), "{out}");
}

#[test]
fn inputs_are_given_or_generated() {
    let m = conv_model("inputs.onnx");
    let m = m.to_str().unwrap();
    // By ONNX name, by register name, and from a .npy file.
    let x = rxvm::vm::HostTensor::random(rxvm::vm::types::DType::F32, &[1, 3, 16, 16], 3).expect("x");
    let npy = tmp("x.npy");
    rxvm::npy::write_npy(&npy, &x).expect("write");
    for input in ["in/x=ramp", "in_x=zeros", &format!("in/x={}", npy.display())] {
        let v = report(&["bench", m, "--json", "--reps", "2", "-i", input]);
        assert_eq!(v["reps"], 2, "{input}: {v}");
    }
    // Dynamic dims take --shape (or the shape of a .npy input), as for `run`.
    let dynamic = "tests/bad_onnx/input_symbolic_dims.onnx";
    let v = report(&["bench", dynamic, "--json", "--reps", "2", "--shape", "x=[2,3,8,8]"]);
    assert_eq!(v["reps"], 2, "{v}");
    let x1 = rxvm::vm::HostTensor::random(rxvm::vm::types::DType::F32, &[1, 3, 8, 8], 3).expect("x");
    let npy1 = tmp("x1.npy");
    rxvm::npy::write_npy(&npy1, &x1).expect("write");
    let v = report(&["bench", dynamic, "--json", "--reps", "1", "-i", &format!("x={}", npy1.display())]);
    assert_eq!(v["reps"], 1, "{v}");
    // Compile flags apply, as for `run`.
    let v = report(&["bench", m, "--json", "--reps", "1", "--planner", "none", "--textures", "auto"]);
    assert_eq!(v["reps"], 1, "{v}");
}

#[test]
fn bad_arguments_are_clear_errors() {
    let m = conv_model("bad.onnx");
    let m = m.to_str().unwrap();
    let cases: &[&[&str]] = &[
        &["bench", "examples/mlp.rxa", "--reps", "0"],
        &["bench", "examples/mlp.rxa", "--reps", "lots"],
        &["bench", "examples/mlp.rxa", "--reps", "2", "--time", "1s"],
        &["bench", "examples/mlp.rxa", "--time", "0"],
        &["bench", "examples/mlp.rxa", "--device", "gpu"],
        &["bench", "examples/mlp.rxa", "--device", "opencl:no-such-platform"],
        &["bench", "no/such/model.onnx"],
        &["bench", "no/such/program.rxa"],
        &["bench", "tests/bad_onnx/not_protobuf.onnx"],
        &["bench", "tests/bad_onnx/input_symbolic_dims.onnx"],
        &["bench", "tests/bad/double_kill.rxa"],
        &["bench", "examples/mlp.rxa", "--func", "nope"],
        &["bench", "examples/mlp.rxa", "-i", "y=zeros"],
        &["bench", "examples/alloc_loop.rxa"],
        &["bench", m, "--planner", "magic"],
    ];
    let mut out = String::new();
    for args in cases {
        let (code, stdout, err) = rxvm(args);
        assert!(code == 1 || code == 2, "rxvm {args:?} exits {code}: {err}");
        assert!(stdout.is_empty(), "rxvm {args:?} printed {stdout}");
        assert!(err.starts_with("error: ") && !err.contains("panicked"), "rxvm {args:?}: {err}");
        // The first line says what is wrong; clap's usage lines follow for exit 2. The
        // OpenCL error depends on the machine's platforms.
        let first = err.lines().next().unwrap_or("").replace(m, "MODEL");
        let first = match first.split_once("--device opencl:no-such-platform: ") {
            Some((head, _)) => format!("{head}--device opencl:no-such-platform: ..."),
            None => first,
        };
        out.push_str(&format!("{}\n  exit {code}: {first}\n", args[1..].join(" ").replace(m, "MODEL")));
    }
    insta::assert_snapshot!(out);
}
