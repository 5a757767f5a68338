//! What the ONNX reader accepts beyond the basics: tensors whose bytes are in an external
//! file (the exporters' default for large models: `model.onnx` + `model.onnx.data`), and
//! every attribute form of `Constant`.

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::tensor_proto::DataLocation;
use onnx_protobuf::{AttributeProto, GraphProto, StringStringEntryProto};
use rxvm::vm::types::DType;
use rxvm_test_support::onnx_build::{bytes, f32_tensor, model, node, value_info, Encoding, F32};
use std::path::PathBuf;

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rxvm-onnx-import-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn entry(key: &str, value: &str) -> StringStringEntryProto {
    let mut e = StringStringEntryProto::new();
    e.key = key.into();
    e.value = value.into();
    e
}

/// `y = x + w` over f32[2, 3], with `w` an initializer built by `w`.
fn add_model(w: onnx_protobuf::TensorProto) -> Vec<u8> {
    let mut g = GraphProto::new();
    g.name = "add".into();
    g.input.push(value_info("x", F32, &[2, 3]));
    g.output.push(value_info("y", F32, &[2, 3]));
    g.initializer.push(w);
    g.node.push(node("Add", &["x", "w"], &["y"]));
    bytes(&model(g))
}

const W: [f32; 6] = [0.5, -1.25, 2.0, 3.5, -0.75, 1.0];

/// `w` with its bytes at `offset` of `location` (written by the caller).
fn external(location: &str, offset: u64, length: Option<u64>) -> onnx_protobuf::TensorProto {
    let mut t = f32_tensor("w", &[2, 3], &[], Encoding::Raw);
    t.raw_data.clear();
    t.data_location = DataLocation::EXTERNAL.into();
    t.external_data.push(entry("location", location));
    t.external_data.push(entry("offset", &offset.to_string()));
    if let Some(l) = length {
        t.external_data.push(entry("length", &l.to_string()));
    }
    t
}

fn w_bytes() -> Vec<u8> {
    W.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn external_data_is_read_from_beside_the_model() {
    let dir = scratch("external");
    // Another tensor's 16 bytes first, as exporters pack several into one file.
    let mut data = vec![0xAAu8; 16];
    data.extend(w_bytes());
    std::fs::write(dir.join("model.onnx.data"), &data).expect("write data");
    std::fs::write(dir.join("model.onnx"), add_model(external("model.onnx.data", 16, Some(24)))).expect("write");
    let g = rxvm::onnx::read_model(&dir.join("model.onnx")).expect("reads");
    let w = g.const_value("w").expect("w is a constant");
    assert_eq!((w.dtype, &w.shape[..]), (DType::F32, &[2i64, 3][..]));
    assert_eq!(w.to_f64(), W.map(|v| v as f64));
    // The same tensor inline reads the same.
    let inline =
        rxvm::onnx::model_from_bytes(&add_model(f32_tensor("w", &[2, 3], &W, Encoding::Raw)), "inline").expect("reads");
    assert_eq!(inline.const_value("w").expect("w").data, w.data);
    // Without `length`, the rest of the file from `offset`.
    std::fs::write(dir.join("rest.onnx"), add_model(external("model.onnx.data", 16, None))).expect("write");
    let g = rxvm::onnx::read_model(&dir.join("rest.onnx")).expect("reads");
    assert_eq!(g.const_value("w").expect("w").data, w_bytes());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_external_data_is_refused_with_its_cause() {
    let dir = scratch("external-bad");
    std::fs::write(dir.join("w.data"), w_bytes()).expect("write data");
    let refuse = |t: onnx_protobuf::TensorProto| {
        std::fs::write(dir.join("m.onnx"), add_model(t)).expect("write");
        rxvm::onnx::read_model(&dir.join("m.onnx")).expect_err("refused")
    };
    let e = refuse(external("../w.data", 0, Some(24)));
    assert!(
        e.contains("external data location `../w.data` must be a relative path inside the model's directory"),
        "{e}"
    );
    let e = refuse(external("/etc/passwd", 0, Some(24)));
    assert!(e.contains("must be a relative path inside the model's directory"), "{e}");
    let e = refuse(external("w.data", 8, Some(24)));
    assert!(e.contains("external data at offset 8, 24 bytes, goes past the end of"), "{e}");
    let e = refuse(external("w.data", 0, Some(20)));
    assert!(e.contains("external data of 20 bytes for 6 elements of f32 (24 bytes)"), "{e}");
    let e = refuse(external("missing.data", 0, Some(24)));
    assert!(e.contains("cannot open its external data"), "{e}");
    // From memory there is no directory to look in.
    let e = rxvm::onnx::model_from_bytes(&add_model(external("w.data", 0, Some(24))), "mem").expect_err("refused");
    assert!(e.contains("its data is in the external file `w.data`; read the model from its file"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `Constant` node with one attribute of `kind` set by `set`.
fn constant(
    name: &str,
    kind: AttributeType,
    set: impl FnOnce(&mut AttributeProto),
) -> Result<rxvm::graph::Graph, String> {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = kind.into();
    set(&mut a);
    let mut c = node("Constant", &[], &["c"]);
    c.attribute.push(a);
    let mut g = GraphProto::new();
    g.name = "c".into();
    g.input.push(value_info("x", F32, &[1]));
    g.output.push(value_info("y", F32, &[1]));
    g.node.push(c);
    g.node.push(node("Identity", &["x"], &["y"]));
    rxvm::onnx::model_from_bytes(&bytes(&model(g)), "constant.onnx")
}

#[test]
fn every_constant_form_is_read() {
    let value = |g: rxvm::graph::Graph| {
        let t = g.const_value("c").expect("c is a constant").clone();
        (t.dtype, t.shape.clone(), t.to_f64())
    };
    let g = constant("value_float", AttributeType::FLOAT, |a| a.f = 2.5).expect("reads");
    assert_eq!(value(g), (DType::F32, vec![], vec![2.5]));
    let g = constant("value_floats", AttributeType::FLOATS, |a| a.floats = vec![1.0, -2.0, 0.25]).expect("reads");
    assert_eq!(value(g), (DType::F32, vec![3], vec![1.0, -2.0, 0.25]));
    let g = constant("value_int", AttributeType::INT, |a| a.i = -7).expect("reads");
    assert_eq!(value(g), (DType::I64, vec![], vec![-7.0]));
    let g = constant("value_ints", AttributeType::INTS, |a| a.ints = vec![3, 0, -1]).expect("reads");
    assert_eq!(value(g), (DType::I64, vec![3], vec![3.0, 0.0, -1.0]));
    let e = constant("value_string", AttributeType::STRING, |a| a.s = b"hi".to_vec()).expect_err("refused");
    assert!(e.contains("attribute `value_string`: string tensors (ONNX STRING) are not supported"), "{e}");
    let e = constant("value_ints", AttributeType::FLOAT, |a| a.f = 1.0).expect_err("refused");
    assert!(e.contains("attribute `value_ints` of type FLOAT is not a Constant value"), "{e}");
}

/// A call names a prefix of its operator's outputs, so an omitted output before a named one
/// (Attention's `Y, "", "", qk_matmul_output`) is given a fresh name, unlike any other tensor's;
/// omitted outputs after the last named one stay omitted.
#[test]
fn omitted_outputs_before_named_ones_get_fresh_names() {
    let mut g = GraphProto::new();
    g.name = "attention".into();
    for x in ["q", "k", "v", "attn.unused1"] {
        g.input.push(value_info(x, F32, &[1, 1, 2, 2]));
    }
    let mut n = node("Attention", &["q", "k", "v"], &["y", "", "", "s", ""]);
    n.name = "attn".into();
    g.node.push(n);
    g.output.push(value_info("y", F32, &[1, 1, 2, 2]));
    g.output.push(value_info("s", F32, &[1, 1, 2, 2]));
    let graph = rxvm::onnx::model_from_bytes(&bytes(&model(g)), "attention").expect("reads");
    assert_eq!(graph.nodes[0].outputs, ["y", "attn.unused1_", "attn.unused2", "s", ""]);
}
