//! Operators on blocked textures give the results of the same operators on buffers: each
//! case runs once on NCHW buffers and once as `@vm.to_blocked` → the operator on
//! `global.texture` views → `@vm.from_blocked`, on the host (textures emulated with a
//! 64-texel pitch), on the Intel runtime (images over the buffers, 64-texel pitch) and on
//! PoCL (standalone images). Widths are never multiples of the pitch, so every image row is
//! padded. Under Oclgrind the texture programs run with no invalid access reported.

use rxvm::asm::assemble;
use rxvm::vm::memory::DeviceSpec;
use rxvm::vm::types::DType;
use rxvm::vm::{DeviceCaps, HostTensor, HostValue, Module, Vm};
use std::fmt::Write;
use std::sync::Arc;

/// One operator call: its name, attributes, inputs (shape, is it an activation) and the
/// logical output shape.
struct Case {
    op: &'static str,
    attrs: &'static str,
    inputs: Vec<(Vec<i64>, bool)>,
    out: Vec<i64>,
}

fn act(s: &[i64]) -> (Vec<i64>, bool) {
    (s.to_vec(), true)
}

fn param(s: &[i64]) -> (Vec<i64>, bool) {
    (s.to_vec(), false)
}

fn case(op: &'static str, attrs: &'static str, inputs: Vec<(Vec<i64>, bool)>, out: &[i64]) -> Case {
    Case { op, attrs, inputs, out: out.to_vec() }
}

fn cases() -> Vec<Case> {
    vec![
        case("Conv", "{ pads = [1, 1, 1, 1] }", vec![act(&[1, 6, 5, 70]), param(&[5, 6, 3, 3])], &[1, 5, 5, 70]),
        case(
            "Conv",
            "{ strides = [2, 2], dilations = [2, 2], pads = [2, 1, 2, 1] }",
            vec![act(&[2, 3, 9, 13]), param(&[8, 3, 3, 3]), param(&[8])],
            &[2, 8, 5, 6],
        ),
        case(
            "Conv",
            "{ group = 6, pads = [1, 1, 1, 1] }",
            vec![act(&[1, 6, 7, 9]), param(&[6, 1, 3, 3]), param(&[6])],
            &[1, 6, 7, 9],
        ),
        case("Conv", "{ group = 2 }", vec![act(&[1, 8, 6, 11]), param(&[6, 4, 3, 3])], &[1, 6, 4, 9]),
        case("Conv", "{ pads = [1, 1] }", vec![act(&[1, 5, 33]), param(&[7, 5, 3]), param(&[7])], &[1, 7, 33]),
        case(
            "Conv",
            "{ pads = [1, 1, 1, 1, 1, 1] }",
            vec![act(&[1, 3, 4, 5, 6]), param(&[4, 3, 3, 3, 3])],
            &[1, 4, 4, 5, 6],
        ),
        case(
            "MaxPool",
            "{ kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1 }",
            vec![act(&[1, 6, 9, 13])],
            &[1, 6, 5, 7],
        ),
        case(
            "AveragePool",
            "{ kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], count_include_pad = 1 }",
            vec![act(&[1, 5, 9, 70])],
            &[1, 5, 5, 35],
        ),
        case(
            "AveragePool",
            "{ kernel_shape = [2, 3], pads = [0, 1, 1, 0] }",
            vec![act(&[2, 5, 9, 13])],
            &[2, 5, 9, 12],
        ),
        case("GlobalAveragePool", "", vec![act(&[2, 5, 7, 9])], &[2, 5, 1, 1]),
        case("GlobalMaxPool", "", vec![act(&[2, 5, 7, 9])], &[2, 5, 1, 1]),
        case("Relu", "", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Sigmoid", "", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("LeakyRelu", "{ alpha = 0.2 }", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Clip", "{ min = -0.5, max = 0.5 }", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Gelu", "", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Gelu", "{ approximate = \"tanh\" }", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Erf", "", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("HardSigmoid", "{ alpha = 0.7, beta = 0.4 }", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("HardSwish", "", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Mish", "", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Celu", "{ alpha = 0.5 }", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("ThresholdedRelu", "{ alpha = 0.1 }", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Round", "", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Sign", "", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Asin", "", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Sin", "", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Atanh", "", vec![act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Add", "", vec![act(&[1, 6, 5, 9]), act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Mul", "", vec![act(&[1, 6, 5, 9]), act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Sub", "", vec![act(&[1, 6, 5, 9]), act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Max", "", vec![act(&[1, 6, 5, 9]), act(&[1, 6, 5, 9]), act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case("Sum", "", vec![act(&[1, 6, 5, 9]), act(&[1, 6, 5, 9]), act(&[1, 6, 5, 9])], &[1, 6, 5, 9]),
        case(
            "BatchNormalization",
            "{ epsilon = 0.001 }",
            vec![act(&[1, 6, 5, 9]), param(&[6]), param(&[6]), param(&[6]), param(&[6])],
            &[1, 6, 5, 9],
        ),
        case("Concat", "{ axis = 1 }", vec![act(&[1, 8, 5, 9]), act(&[1, 4, 5, 9])], &[1, 12, 5, 9]),
        case("Concat", "{ axis = 1 }", vec![act(&[2, 4, 3, 70]), act(&[2, 8, 3, 70])], &[2, 12, 3, 70]),
    ]
}

fn dims(s: &[i64]) -> String {
    s.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

fn blocked(s: &[i64]) -> Vec<i64> {
    let mut b = s.to_vec();
    b[1] = (b[1] + 3) / 4;
    b.push(4);
    b
}

/// Bytes a blocked texture takes with a 64-texel pitch, rounded up to 4 KiB.
fn texture_bytes(s: &[i64]) -> i64 {
    let b = blocked(s);
    let r = b.len();
    let rows: i64 = b[..r - 2].iter().product();
    let pitch = (b[r - 2] + 63) / 64 * 64;
    (rows * pitch * 16 + 4095) / 4096 * 4096
}

/// The program for `c`: on buffers, or on textures between layout conversions.
fn program(c: &Case, textures: bool) -> String {
    let params: Vec<String> =
        c.inputs.iter().enumerate().map(|(i, (s, _))| format!("%a{i}: f32[{}]", dims(s))).collect();
    let mut p = format!("func @main({}) -> f32[{}] {{\n", params.join(", "), dims(&c.out));
    let y_elems: i64 = c.out.iter().product();
    let _ = writeln!(p, "  %ys = alloc_storage {}\n  %y = alloc_tensor %ys, 0, f32[{}]", y_elems * 4, dims(&c.out));
    let mut args = Vec::new();
    if textures {
        let total: i64 =
            c.inputs.iter().filter(|i| i.1).map(|i| texture_bytes(&i.0)).sum::<i64>() + texture_bytes(&c.out);
        let _ = writeln!(p, "  %s = alloc_storage {total}");
        let mut off = 0;
        for (i, (s, is_act)) in c.inputs.iter().enumerate() {
            if !is_act {
                args.push(format!("%a{i}"));
                continue;
            }
            let _ = writeln!(
                p,
                "  %t{i} = alloc_tensor %s, {off}, f32[{}], scope \"global.texture\"\n  call @vm.to_blocked(%a{i}, %t{i})",
                dims(&blocked(s))
            );
            off += texture_bytes(s);
            args.push(format!("%t{i}"));
        }
        let _ =
            writeln!(p, "  %ty = alloc_tensor %s, {off}, f32[{}], scope \"global.texture\"", dims(&blocked(&c.out)));
        let _ = writeln!(p, "  call @onnx.{}({}) -> (%ty) {}", c.op, args.join(", "), c.attrs);
        p.push_str("  call @vm.from_blocked(%ty, %y)\n");
    } else {
        args.extend((0..c.inputs.len()).map(|i| format!("%a{i}")));
        let _ = writeln!(p, "  call @onnx.{}({}) -> (%y) {}", c.op, args.join(", "), c.attrs);
    }
    p.push_str("  ret %y\n}\n");
    p
}

/// Deterministic inputs in [-1, 1); BatchNormalization's variance (its fifth input) positive.
fn inputs(c: &Case) -> Vec<HostValue> {
    c.inputs
        .iter()
        .enumerate()
        .map(|(i, (s, _))| {
            let n: i64 = s.iter().product();
            let mut state = 0x9e37_79b9_u64.wrapping_mul(i as u64 + 1);
            let v: Vec<u8> = (0..n)
                .flat_map(|_| {
                    state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    let x = ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
                    let x = if c.op == "BatchNormalization" && i == 4 { x.abs() + 0.1 } else { x };
                    x.to_le_bytes()
                })
                .collect();
            HostValue::Tensor(HostTensor::new(DType::F32, s.clone(), v).expect("input"))
        })
        .collect()
}

use rxvm_test_support::devices::opencl_platform as platform;

fn run(src: &str, spec: DeviceSpec, ins: &[HostValue]) -> Result<Vec<f64>, String> {
    let m: Arc<Module> = Arc::new(assemble(src, "case.rxa").map_err(|e| format!("{e:?}"))?);
    let mut vm = Vm::with_devices(m, vec![spec]).map_err(|e| e.to_string())?;
    match vm.invoke("main", ins).map_err(|e| e.to_string())?.pop() {
        Some(HostValue::Tensor(t)) => Ok(t.to_f64()),
        other => Err(format!("unexpected result {other:?}")),
    }
}

fn assert_close(what: &str, want: &[f64], got: &[f64]) {
    assert_eq!(want.len(), got.len(), "{what}");
    for (i, (a, b)) in want.iter().zip(got).enumerate() {
        assert!((a - b).abs() <= 1e-5 + 1e-5 * a.abs(), "{what}: element {i}: buffer {a} vs texture {b}");
    }
}

#[test]
fn texture_operators_match_buffer_operators_on_every_device() {
    let mut devices = vec![("host", DeviceSpec::Host(DeviceCaps::host()))];
    for name in ["intel", "pocl"] {
        if let Some(info) = platform(name) {
            devices.push((name, DeviceSpec::OpenCl(info)));
        }
    }
    let mut checked = 0;
    for c in cases() {
        let ins = inputs(&c);
        let reference = run(&program(&c, false), DeviceSpec::Host(DeviceCaps::host()), &ins)
            .unwrap_or_else(|e| panic!("{} on host buffers: {e}", c.op));
        for (name, spec) in &devices {
            let what = format!("{} {:?} on {name}", c.op, c.inputs[0].0);
            let buf = run(&program(&c, false), spec.clone(), &ins).unwrap_or_else(|e| panic!("{what} (buffers): {e}"));
            let tex = run(&program(&c, true), spec.clone(), &ins).unwrap_or_else(|e| panic!("{what} (textures): {e}"));
            assert_close(&what, &buf, &tex);
            assert_close(&format!("{what} vs the host"), &reference, &tex);
            if *name == "host" {
                // The host runs the same kernel on unblocked data: bit-identical.
                assert_eq!(buf, tex, "{what}");
            }
            checked += 1;
        }
    }
    eprintln!("{checked} texture/buffer comparisons on {} devices", devices.len());
}

#[test]
fn texture_kernels_run_clean_under_oclgrind() {
    let Some(_) = platform("oclgrind") else { return };
    let dir = std::env::temp_dir().join(format!("rxvm-textures-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // Small shapes only: Oclgrind simulates every work-item.
    for (k, c) in cases().into_iter().filter(|c| c.out.iter().product::<i64>() <= 1024).enumerate() {
        let file = dir.join(format!("case{k}.rxa"));
        std::fs::write(&file, program(&c, true)).expect("write");
        let mut args = vec!["run".to_string(), file.display().to_string()];
        for i in 0..c.inputs.len() {
            args.extend(["--input".into(), format!("a{i}=random:{}", i + 1)]);
        }
        let cl = std::process::Command::new(env!("CARGO_BIN_EXE_rxvm"))
            .args(&args)
            .args(["--device", "opencl:oclgrind"])
            .output()
            .expect("run rxvm");
        let stderr = String::from_utf8_lossy(&cl.stderr);
        assert!(cl.status.success(), "{}: {stderr}", c.op);
        for bad in ["Invalid", "invalid read", "invalid write", "out-of-bounds", "Uninitialized"] {
            assert!(!stderr.contains(bad), "{}: Oclgrind reported `{bad}`:\n{stderr}", c.op);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn texture_calls_with_wrong_operands_are_refused_with_the_reason() {
    let src = "func @main(%x: f32[1, 6, 5, 9]) {\n  %s = alloc_storage 65536\n  \
               %t = alloc_tensor %s, 0, f32[1, 2, 5, 9, 4], scope \"global.texture\"\n  \
               call @vm.to_blocked(%x, %t)\n  %b = alloc_tensor %s, 32768, f32[1, 6, 5, 9]\n  \
               call @onnx.Relu(%t) -> (%b)\n  ret\n}\n";
    let e = assemble(src, "bad.rxa").map(|_| ()).expect_err("a buffer output of a texture call");
    assert!(format!("{e:?}").contains("output 1 must be a `global.texture` view"), "{e:?}");
    let src = src.replace(
        "call @onnx.Relu(%t) -> (%b)",
        "%o = alloc_tensor %s, 16384, f32[1, 2, 5, 9, 4], scope \"global.texture\"\n  call @onnx.Softmax(%t) -> (%o)",
    );
    let e = assemble(&src, "bad.rxa").map(|_| ()).expect_err("Softmax on textures");
    assert!(format!("{e:?}").contains("has no texture form"), "{e:?}");
}
