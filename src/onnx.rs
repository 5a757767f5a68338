//! Reading ONNX files with the `onnx-protobuf` crate: models into the compiler's [`Graph`],
//! and `TensorProto` files (`input_0.pb`, `output_0.pb`) into host tensors.

use crate::graph::{Graph, GraphInput, Node};
use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::{Message, ModelProto, NodeProto, TensorProto};
use rxvm_vm::ops::{AttrValue, Attrs};
use rxvm_vm::types::DType;
use rxvm_vm::HostTensor;
use std::path::Path;

/// ONNX `TensorProto.DataType` codes to dtypes.
pub fn dtype_of(code: i32) -> Option<DType> {
    DType::from_onnx(code as i64)
}

/// A `TensorProto` as a host tensor (raw_data or the typed fields).
pub fn tensor_from_proto(t: &TensorProto) -> Result<HostTensor, String> {
    let what = if t.name.is_empty() { "tensor".to_string() } else { format!("tensor `{}`", t.name) };
    let dtype =
        dtype_of(t.data_type).ok_or_else(|| format!("{what}: ONNX data type {} is not supported", t.data_type))?;
    if t.dims.iter().any(|&d| d < 0) {
        return Err(format!("{what}: negative dimension in {:?}", t.dims));
    }
    if !t.external_data.is_empty() {
        return Err(format!("{what}: external data is not supported"));
    }
    let n = rxvm_vm::host_tensor::numel(&t.dims).ok_or_else(|| format!("{what}: shape {:?} is too large", t.dims))?;
    let data: Vec<u8> = if !t.raw_data.is_empty() {
        t.raw_data.clone()
    } else {
        let mut out = Vec::new();
        let mut push = |v: f64, i: i64| {
            let mut b = [0u8; 8];
            if dtype.is_float() {
                rxvm_vm::host_tensor::store_f64(dtype, v, &mut b);
            } else {
                rxvm_vm::host_tensor::store_i64(dtype, i, &mut b);
            }
            out.extend_from_slice(&b[..dtype.size()]);
        };
        match dtype {
            DType::F32 => t.float_data.iter().for_each(|&v| push(v as f64, 0)),
            DType::F64 => t.double_data.iter().for_each(|&v| push(v, 0)),
            DType::I64 => t.int64_data.iter().for_each(|&v| push(0.0, v)),
            DType::U32 | DType::U64 => t.uint64_data.iter().for_each(|&v| push(0.0, v as i64)),
            // f16 values are stored as their bit patterns in int32_data.
            DType::F16 => t.int32_data.iter().for_each(|&v| out.extend_from_slice(&(v as u16).to_le_bytes())),
            _ => t.int32_data.iter().for_each(|&v| push(0.0, v as i64)),
        }
        out
    };
    HostTensor::new(dtype, t.dims.clone(), data).map_err(|e| format!("{what}: {e} (for {n} elements)"))
}

/// Reads a serialized `TensorProto` (`input_0.pb`): its name and value.
pub fn read_tensor_file(path: &Path) -> Result<(String, HostTensor), String> {
    let show = path.display();
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {show}: {e}"))?;
    let t = TensorProto::parse_from_bytes(&bytes).map_err(|e| format!("{show} is not an ONNX TensorProto: {e}"))?;
    Ok((t.name.clone(), tensor_from_proto(&t).map_err(|e| format!("{show}: {e}"))?))
}

/// The node's attributes; for `Constant`, also its value.
fn node_attrs(n: &NodeProto) -> Result<(Attrs, Option<HostTensor>), String> {
    let mut attrs = Attrs::default();
    let mut value = None;
    for a in &n.attribute {
        let kind = a.type_.enum_value().map_err(|t| format!("attribute `{}` has unknown type {t}", a.name))?;
        let v = match kind {
            AttributeType::INT => AttrValue::Int(a.i),
            AttributeType::FLOAT => AttrValue::Float(a.f as f64),
            AttributeType::INTS => AttrValue::Ints(a.ints.clone()),
            AttributeType::FLOATS => AttrValue::Floats(a.floats.iter().map(|&f| f as f64).collect()),
            AttributeType::STRING => AttrValue::Str(String::from_utf8_lossy(&a.s).into_owned()),
            AttributeType::TENSOR if n.op_type == "Constant" && a.name == "value" => {
                let t = a.t.as_ref().ok_or_else(|| "attribute `value` has no tensor".to_string())?;
                value = Some(tensor_from_proto(t)?);
                continue;
            }
            // ConstantOfShape's one-element `value` tensor becomes `value` and `dtype`.
            AttributeType::TENSOR if n.op_type == "ConstantOfShape" && a.name == "value" => {
                let t = a.t.as_ref().ok_or_else(|| "attribute `value` has no tensor".to_string())?;
                let v = tensor_from_proto(t)?;
                if v.numel() != 1 {
                    return Err(format!("attribute `value` must hold one element, found shape {:?}", v.shape));
                }
                attrs.0.push(("dtype".into(), AttrValue::Str(v.dtype.name().into())));
                if v.dtype.is_float() {
                    AttrValue::Float(v.to_f64()[0])
                } else {
                    AttrValue::Int(v.to_i64()[0])
                }
            }
            other => return Err(format!("attribute `{}` of type {other:?} is not supported", a.name)),
        };
        attrs.0.push((a.name.clone(), v));
    }
    Ok((attrs, value))
}

/// The version of the default ONNX opset the model imports.
pub fn opset(m: &ModelProto) -> i64 {
    m.opset_import.iter().find(|o| o.domain.is_empty() || o.domain == "ai.onnx").map_or(1, |o| o.version)
}

/// Operators whose meaning changed across opsets in a way their attributes cannot tell:
/// the importer records the opset on them as the `onnx_opset` attribute.
const OPSET_SENSITIVE: &[&str] = &["Softmax", "LogSoftmax", "Hardmax"];

/// Reads an ONNX model into a graph. Errors list every problem found, not just the first.
pub fn read_model(path: &Path) -> Result<Graph, String> {
    let show = path.display();
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {show}: {e}"))?;
    model_from_bytes(&bytes, &show.to_string())
}

/// Reads a serialized ONNX model from memory into a graph; `show` names it in errors (as
/// [`read_model`] does with the path). Untrusted bytes give an error, never a panic.
pub fn model_from_bytes(bytes: &[u8], show: &str) -> Result<Graph, String> {
    let m = ModelProto::parse_from_bytes(bytes).map_err(|e| format!("{show} is not an ONNX model: {e}"))?;
    let opset = opset(&m);
    let g = m.graph.as_ref().ok_or_else(|| format!("{show}: the model has no graph"))?;
    let mut graph = Graph::new(g.name.clone());
    let mut problems = Vec::new();
    for t in &g.initializer {
        match tensor_from_proto(t) {
            Ok(v) => graph.add_const(&t.name, v),
            Err(e) => problems.push(format!("initializer `{}`: {e}", t.name)),
        }
    }
    for vi in &g.input {
        if graph.is_const(&vi.name) {
            continue;
        }
        let tt = vi.type_.as_ref().and_then(|t| match &t.value {
            Some(onnx_protobuf::type_proto::Value::TensorType(tt)) => Some(tt),
            _ => None,
        });
        let Some(tt) = tt else {
            problems.push(format!("input `{}` is not a tensor", vi.name));
            continue;
        };
        let Some(dtype) = dtype_of(tt.elem_type) else {
            problems.push(format!("input `{}` has unsupported ONNX data type {}", vi.name, tt.elem_type));
            continue;
        };
        let dims: Vec<Option<i64>> = match tt.shape.as_ref() {
            Some(s) => s.dim.iter().map(|d| if d.has_dim_value() { Some(d.dim_value()) } else { None }).collect(),
            None => Vec::new(),
        };
        graph.inputs.push(GraphInput { name: vi.name.clone(), dtype, dims });
    }
    // ONNX does not enforce unique node names; ours are, so errors name one node.
    let mut seen = std::collections::HashSet::new();
    for (i, n) in g.node.iter().enumerate() {
        let mut name = if n.name.is_empty() { format!("{}_{i}", n.op_type) } else { n.name.clone() };
        if !seen.insert(name.clone()) {
            name = format!("{name}_{i}");
            seen.insert(name.clone());
        }
        if !(n.domain.is_empty() || n.domain == "ai.onnx") {
            problems.push(format!("node `{name}`: operator domain `{}` is not supported", n.domain));
            continue;
        }
        match node_attrs(n) {
            Ok((mut attrs, value)) => {
                if n.op_type == "Constant" {
                    match (value, n.output.first()) {
                        (Some(v), Some(out)) => graph.add_const(out, v),
                        _ => problems.push(format!("node `{name}`: a Constant needs a tensor `value` and one output")),
                    }
                    continue;
                }
                // An equal Split names its parts by its outputs alone; the VM's Split reads
                // their count from `outputs`.
                if n.op_type == "Split"
                    && n.input.len() < 2
                    && attrs.get("split").is_none()
                    && attrs.get("num_outputs").is_none()
                {
                    attrs.0.push(("outputs".into(), AttrValue::Int(n.output.len() as i64)));
                }
                if OPSET_SENSITIVE.contains(&n.op_type.as_str()) {
                    attrs.0.push(("onnx_opset".into(), AttrValue::Int(opset)));
                }
                graph.nodes.push(Node {
                    name,
                    op: n.op_type.clone(),
                    inputs: n.input.clone(),
                    outputs: n.output.clone(),
                    attrs,
                });
            }
            Err(e) => problems.push(format!("node `{name}` ({}): {e}", n.op_type)),
        }
    }
    graph.outputs = g.output.iter().map(|o| o.name.clone()).collect();
    if !problems.is_empty() {
        return Err(format!("{show}: {}", problems.join("; ")));
    }
    Ok(graph)
}
