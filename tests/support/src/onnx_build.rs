//! Small ONNX models built in code: the protobuf pieces that the fuzz seeds
//! ([`crate::fuzz::builtin_onnx_models`]) and the bad-model tests (`tests/bad_onnx.rs`)
//! assemble their models from. Everything here builds `onnx-protobuf` messages; nothing
//! reads them.

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::tensor_shape_proto::{dimension, Dimension};
use onnx_protobuf::type_proto;
use onnx_protobuf::{
    AttributeProto, GraphProto, Message, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto,
    TypeProto, ValueInfoProto,
};

/// `TensorProto.DataType` of `float`.
pub const F32: i32 = 1;
/// `TensorProto.DataType` of `int64`.
pub const I64: i32 = 7;

/// How a tensor's values are stored in its `TensorProto`: the typed repeated fields
/// (`float_data`, `int64_data`) or little-endian `raw_data`. Readers must accept both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Typed,
    Raw,
}

/// A graph input or output: a tensor of `elem_type` with fixed `dims`.
pub fn value_info(name: &str, elem_type: i32, dims: &[i64]) -> ValueInfoProto {
    let mut shape = TensorShapeProto::new();
    shape.dim = dims
        .iter()
        .map(|&d| {
            let mut dim = Dimension::new();
            dim.value = Some(dimension::Value::DimValue(d));
            dim
        })
        .collect();
    let mut t = type_proto::Tensor::new();
    t.elem_type = elem_type;
    t.shape = Some(shape).into();
    let mut ty = TypeProto::new();
    ty.value = Some(type_proto::Value::TensorType(t));
    let mut v = ValueInfoProto::new();
    v.name = name.into();
    v.type_ = Some(ty).into();
    v
}

/// An `f32` initializer.
pub fn f32_tensor(name: &str, dims: &[i64], values: &[f32], encoding: Encoding) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.into();
    t.dims = dims.to_vec();
    t.data_type = F32;
    match encoding {
        Encoding::Typed => t.float_data = values.to_vec(),
        Encoding::Raw => t.raw_data = values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
    t
}

/// A one-dimensional `i64` initializer (shapes, axes, pads).
pub fn i64_tensor(name: &str, values: &[i64], encoding: Encoding) -> TensorProto {
    let mut t = TensorProto::new();
    t.name = name.into();
    t.dims = vec![values.len() as i64];
    t.data_type = I64;
    match encoding {
        Encoding::Typed => t.int64_data = values.to_vec(),
        Encoding::Raw => t.raw_data = values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
    t
}

/// A node of operator `op` (no name, no attributes: set `name` and push to `attribute`).
pub fn node(op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    let mut n = NodeProto::new();
    n.op_type = op.into();
    n.input = inputs.iter().map(|s| s.to_string()).collect();
    n.output = outputs.iter().map(|s| s.to_string()).collect();
    n
}

/// An `INTS` attribute.
pub fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::INTS.into();
    a.ints = v.to_vec();
    a
}

/// An `INT` attribute.
pub fn int_attr(name: &str, v: i64) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.name = name.into();
    a.type_ = AttributeType::INT.into();
    a.i = v;
    a
}

/// A model of `graph`: IR version 8, default domain at opset 13.
pub fn model(graph: GraphProto) -> ModelProto {
    let mut m = ModelProto::new();
    m.ir_version = 8;
    let mut op = OperatorSetIdProto::new();
    op.version = 13;
    m.opset_import.push(op);
    m.graph = Some(graph).into();
    m
}

/// The model's bytes (empty if it cannot be serialised, which these builders never cause).
pub fn bytes(m: &ModelProto) -> Vec<u8> {
    m.write_to_bytes().unwrap_or_default()
}
