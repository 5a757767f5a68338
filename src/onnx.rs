//! Reading ONNX files with the `onnx-protobuf` crate: models into the compiler's [`Graph`],
//! and `TensorProto` files (`input_0.pb`, `output_0.pb`) into host tensors.

use crate::graph::{ControlFlow, Graph, GraphInput, InputDim, Node, Subgraph, CONTROL_FLOW_OPS};
use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::{GraphProto, Message, ModelProto, NodeProto, TensorProto};
use rxvm_vm::ir::operators::flex::PREVIEW_DOMAIN_OPS;
use rxvm_vm::ir::operators::ml::ML_DOMAIN_OPS;
use rxvm_vm::ops::{AttrValue, Attrs};
use rxvm_vm::types::DType;
use rxvm_vm::HostTensor;
use std::path::Path;

/// ONNX `TensorProto.DataType` codes to dtypes.
pub fn dtype_of(code: i32) -> Option<DType> {
    DType::from_onnx(code as i64)
}

/// The names of ONNX's `TensorProto.DataType` codes (onnx.proto of ONNX 1.23), by code.
const ONNX_DATA_TYPES: [&str; 29] = [
    "UNDEFINED",
    "FLOAT",
    "UINT8",
    "INT8",
    "UINT16",
    "INT16",
    "INT32",
    "INT64",
    "STRING",
    "BOOL",
    "FLOAT16",
    "DOUBLE",
    "UINT32",
    "UINT64",
    "COMPLEX64",
    "COMPLEX128",
    "BFLOAT16",
    "FLOAT8E4M3FN",
    "FLOAT8E4M3FNUZ",
    "FLOAT8E5M2",
    "FLOAT8E5M2FNUZ",
    "UINT4",
    "INT4",
    "FLOAT4E2M1",
    "FLOAT8E8M0",
    "UINT2",
    "INT2",
    "FLOAT6E2M3",
    "FLOAT6E3M2",
];

/// An ONNX data type code as errors name it: `STRING (8)`, or `8` for a code ONNX does not
/// define.
pub fn onnx_type_name(code: i32) -> String {
    match usize::try_from(code).ok().and_then(|i| ONNX_DATA_TYPES.get(i)) {
        Some(name) => format!("{name} ({code})"),
        None => format!("{code} (not an ONNX data type)"),
    }
}

/// The largest version of the default (`ai.onnx`) opset this importer knows: that of ONNX
/// 1.23. A model declaring a later one is read with a warning (its operators are read with
/// the semantics of their latest version known here).
pub const MAX_KNOWN_OPSET: i64 = 28;

/// The fields of `ModelProto` and `TensorProto`, by number, for messages about a file's
/// top-level fields.
fn field_name(message: &str, field: u64) -> Option<&'static str> {
    let names: &[(u64, &str)] = if message == "model" {
        &[
            (1, "ir_version"),
            (2, "producer_name"),
            (3, "producer_version"),
            (4, "domain"),
            (5, "model_version"),
            (6, "doc_string"),
            (7, "graph"),
            (8, "opset_import"),
            (14, "metadata_props"),
            (20, "training_info"),
            (25, "functions"),
            (26, "configuration"),
        ]
    } else {
        &[
            (1, "dims"),
            (2, "data_type"),
            (3, "segment"),
            (4, "float_data"),
            (5, "int32_data"),
            (6, "string_data"),
            (7, "int64_data"),
            (8, "name"),
            (9, "raw_data"),
            (10, "double_data"),
            (11, "uint64_data"),
            (12, "doc_string"),
            (13, "external_data"),
            (14, "data_location"),
            (16, "metadata_props"),
        ]
    };
    names.iter().find(|(n, _)| *n == field).map(|(_, name)| *name)
}

/// Checks that `bytes` is a whole sequence of protobuf fields: that no field runs past the
/// end of the file. The protobuf decoder does not check this for nested messages: it
/// stops a nested message at the end of the input as if it had ended there, so a file cut
/// between two of the graph's nodes or value infos decodes as a smaller graph. Every
/// nested message lies inside a top-level field, so checking the top level catches every
/// cut. `message` is `model` or `TensorProto`, `show` names the file; errors say where the
/// file ends.
pub fn check_whole(bytes: &[u8], message: &str, show: &str) -> Result<(), String> {
    fn varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *bytes.get(*pos)?;
            *pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }
    let len = bytes.len();
    let mut pos = 0;
    while pos < len {
        let start = pos;
        let Some(tag) = varint(bytes, &mut pos) else {
            return Err(format!("{show}: the file is truncated: it ends inside the tag of a field at byte {start}"));
        };
        let field = tag >> 3;
        let name = match field_name(message, field) {
            Some(n) => format!("field {field} (`{n}`)"),
            None => format!("field {field}"),
        };
        let cut = |need: u64, at: usize| {
            format!(
                "{show}: the file is truncated: its {name}, at byte {start}, holds {need} bytes, but only {} follow (the file has {len} bytes)",
                len - at
            )
        };
        match tag & 7 {
            0 => {
                if varint(bytes, &mut pos).is_none() {
                    return Err(format!(
                        "{show}: the file is truncated: it ends inside the value of its {name} at byte {start}"
                    ));
                }
            }
            1 | 5 => {
                let need: u64 = if tag & 7 == 1 { 8 } else { 4 };
                if need > (len - pos) as u64 {
                    return Err(cut(need, pos));
                }
                pos += need as usize;
            }
            2 => {
                let Some(need) = varint(bytes, &mut pos) else {
                    return Err(format!(
                        "{show}: the file is truncated: it ends inside the length of its {name} at byte {start}"
                    ));
                };
                if need > (len - pos) as u64 {
                    return Err(cut(need, pos));
                }
                pos += need as usize;
            }
            w => {
                return Err(format!(
                    "{show} is not an ONNX {message}: the field tag at byte {start} has protobuf wire type {w}, which ONNX files do not use"
                ))
            }
        }
    }
    Ok(())
}

/// A `TensorProto` as a host tensor (raw_data or the typed fields).
pub fn tensor_from_proto(t: &TensorProto) -> Result<HostTensor, String> {
    tensor_in(t, None)
}

/// The bytes of a tensor stored outside the model (`data_location: EXTERNAL`): `length`
/// bytes (all of the file by default) at `offset` of the file `location` names, relative to
/// the model's directory `dir`. The location may not leave that directory.
fn external_bytes(t: &TensorProto, dir: Option<&Path>, what: &str) -> Result<Vec<u8>, String> {
    use std::io::{Read, Seek, SeekFrom};
    let entry = |key: &str| t.external_data.iter().find(|e| e.key == key).map(|e| e.value.as_str());
    let location = entry("location").ok_or_else(|| format!("{what}: external data without a `location`"))?;
    let number = |key: &str| -> Result<Option<u64>, String> {
        entry(key)
            .map(|v| v.parse::<u64>().map_err(|_| format!("{what}: external data `{key}` is not a byte count: `{v}`")))
            .transpose()
    };
    let (offset, length) = (number("offset")?.unwrap_or(0), number("length")?);
    let rel = Path::new(location);
    if rel.is_absolute() || rel.components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
        return Err(format!(
            "{what}: external data location `{location}` must be a relative path inside the model's directory"
        ));
    }
    let dir = dir.ok_or_else(|| {
        format!("{what}: its data is in the external file `{location}`; read the model from its file so that it can be found")
    })?;
    let path = dir.join(rel);
    let show = path.display();
    let mut f = std::fs::File::open(&path).map_err(|e| format!("{what}: cannot open its external data {show}: {e}"))?;
    let size = f.metadata().map_err(|e| format!("{what}: {show}: {e}"))?.len();
    let length = length.unwrap_or(size.saturating_sub(offset));
    if offset.checked_add(length).is_none_or(|end| end > size) {
        return Err(format!(
            "{what}: external data at offset {offset}, {length} bytes, goes past the end of {show} ({size} bytes)"
        ));
    }
    let mut data =
        vec![0u8; usize::try_from(length).map_err(|_| format!("{what}: {length} bytes do not fit in memory"))?];
    f.seek(SeekFrom::Start(offset))
        .and_then(|_| f.read_exact(&mut data))
        .map_err(|e| format!("{what}: reading {show}: {e}"))?;
    Ok(data)
}

/// [`tensor_from_proto`] for a tensor of a model in directory `dir` (where its external
/// data, if any, is).
fn tensor_in(t: &TensorProto, dir: Option<&Path>) -> Result<HostTensor, String> {
    let what = if t.name.is_empty() { "tensor".to_string() } else { format!("tensor `{}`", t.name) };
    let dtype = dtype_of(t.data_type)
        .ok_or_else(|| format!("{what}: ONNX data type {} is not supported", onnx_type_name(t.data_type)))?;
    if t.dims.iter().any(|&d| d < 0) {
        return Err(format!("{what}: negative dimension in {:?}", t.dims));
    }
    let n = rxvm_vm::host_tensor::numel(&t.dims).ok_or_else(|| format!("{what}: shape {:?} is too large", t.dims))?;
    let external = t.data_location.enum_value() == Ok(onnx_protobuf::tensor_proto::DataLocation::EXTERNAL);
    let data: Vec<u8> = if external || !t.external_data.is_empty() {
        // The size is checked against the shape below, before the bytes are used; a
        // length beyond what the shape needs is refused before reading.
        let want =
            n.checked_mul(dtype.size() as u64).ok_or_else(|| format!("{what}: shape {:?} is too large", t.dims))?;
        let declared = t.external_data.iter().find(|e| e.key == "length").and_then(|e| e.value.parse::<u64>().ok());
        if declared.is_some_and(|l| l != want) {
            return Err(format!(
                "{what}: external data of {} bytes for {n} elements of {dtype} ({want} bytes)",
                declared.unwrap_or(0)
            ));
        }
        external_bytes(t, dir, &what)?
    } else if !t.raw_data.is_empty() {
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
            // f16 and bf16 values are stored as their bit patterns in int32_data, float8
            // values as their codes (one per int32).
            DType::F16 | DType::BF16 => {
                t.int32_data.iter().for_each(|&v| out.extend_from_slice(&(v as u16).to_le_bytes()))
            }
            d if d.is_float8() => t.int32_data.iter().for_each(|&v| out.push(v as u8)),
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
    check_whole(&bytes, "TensorProto", &show.to_string())?;
    let t = TensorProto::parse_from_bytes(&bytes).map_err(|e| format!("{show} is not an ONNX TensorProto: {e}"))?;
    Ok((t.name.clone(), tensor_from_proto(&t).map_err(|e| format!("{show}: {e}"))?))
}

/// A scalar (`dims` empty) or 1-D tensor of `values`.
fn values_tensor<T: Copy>(
    dtype: DType,
    dims: Vec<i64>,
    values: &[T],
    bytes: impl Fn(T) -> Vec<u8>,
) -> Result<HostTensor, String> {
    HostTensor::new(dtype, dims, values.iter().flat_map(|&v| bytes(v)).collect())
}

/// The node's attributes; for `Constant`, also its value (from any of its forms:
/// `value`, `value_float(s)`, `value_int(s)`).
fn node_attrs(n: &NodeProto, dir: Option<&Path>) -> Result<(Attrs, Option<HostTensor>), String> {
    let mut attrs = Attrs::default();
    let mut value = None;
    for a in &n.attribute {
        let kind = a.type_.enum_value().map_err(|t| format!("attribute `{}` has unknown type {t}", a.name))?;
        if kind == AttributeType::UNDEFINED {
            return Err(format!("attribute `{}` has no type (its type is UNDEFINED, 0)", a.name));
        }
        if n.op_type == "Constant" && (a.name.starts_with("value_") || a.name == "sparse_value") {
            let f32_bytes = |v: f32| v.to_le_bytes().to_vec();
            let i64_bytes = |v: i64| v.to_le_bytes().to_vec();
            value = Some(match (a.name.as_str(), kind) {
                ("value_float", AttributeType::FLOAT) => values_tensor(DType::F32, vec![], &[a.f], f32_bytes)?,
                ("value_floats", AttributeType::FLOATS) => {
                    values_tensor(DType::F32, vec![a.floats.len() as i64], &a.floats, f32_bytes)?
                }
                ("value_int", AttributeType::INT) => values_tensor(DType::I64, vec![], &[a.i], i64_bytes)?,
                ("value_ints", AttributeType::INTS) => {
                    values_tensor(DType::I64, vec![a.ints.len() as i64], &a.ints, i64_bytes)?
                }
                ("value_string" | "value_strings", _) => {
                    return Err(format!("attribute `{}`: string tensors (ONNX STRING) are not supported", a.name))
                }
                ("sparse_value", _) => return Err("attribute `sparse_value`: sparse tensors are not supported".into()),
                (name, kind) => return Err(format!("attribute `{name}` of type {kind:?} is not a Constant value")),
            });
            continue;
        }
        let v = match kind {
            AttributeType::INT => AttrValue::Int(a.i),
            AttributeType::FLOAT => AttrValue::Float(a.f as f64),
            AttributeType::INTS => AttrValue::Ints(a.ints.clone()),
            AttributeType::FLOATS => AttrValue::Floats(a.floats.iter().map(|&f| f as f64).collect()),
            AttributeType::STRING => AttrValue::Str(String::from_utf8_lossy(&a.s).into_owned()),
            // A list of strings (the recurrent operators' `activations`) is one string, its
            // items joined by commas.
            AttributeType::STRINGS => {
                let items: Vec<String> = a.strings.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect();
                if items.iter().any(|s| s.contains(',')) {
                    return Err(format!("attribute `{}`: a string list item holds a comma", a.name));
                }
                AttrValue::Str(items.join(","))
            }
            AttributeType::TENSOR if n.op_type == "Constant" && a.name == "value" => {
                let t = a.t.as_ref().ok_or_else(|| "attribute `value` has no tensor".to_string())?;
                value = Some(tensor_in(t, dir)?);
                continue;
            }
            // ConstantOfShape's one-element `value` tensor becomes `value` and `dtype`.
            AttributeType::TENSOR if n.op_type == "ConstantOfShape" && a.name == "value" => {
                let t = a.t.as_ref().ok_or_else(|| "attribute `value` has no tensor".to_string())?;
                let v = tensor_in(t, dir)?;
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
            // The `ai.onnx.ml` operators' tensor attributes (TreeEnsemble's splits, modes,
            // weights) are lists of their values.
            AttributeType::TENSOR if n.domain == "ai.onnx.ml" => {
                let t = a.t.as_ref().ok_or_else(|| format!("attribute `{}` has no tensor", a.name))?;
                let v = tensor_in(t, dir)?;
                if v.dtype.is_float() {
                    AttrValue::Floats(v.to_f64())
                } else {
                    AttrValue::Ints(v.to_i64())
                }
            }
            // The subgraphs of control flow: `nodes_in` reads them.
            AttributeType::GRAPH if CONTROL_FLOW_OPS.contains(&n.op_type.as_str()) => continue,
            other => return Err(format!("attribute `{}` of type {other:?} is not supported", a.name)),
        };
        attrs.0.push((a.name.clone(), v));
    }
    Ok((attrs, value))
}

/// The version of the default ONNX opset the model imports, if it imports one.
pub fn opset(m: &ModelProto) -> Option<i64> {
    m.opset_import.iter().find(|o| o.domain.is_empty() || o.domain == "ai.onnx").map(|o| o.version)
}

/// The default opset a model is read with: the one it declares, or 1 for a model of IR
/// version 1 or 2 (from before `opset_import`). A model of a later IR version that declares
/// none, or declares a version below 1, is refused; a version above [`MAX_KNOWN_OPSET`] is
/// read, with a warning in `warnings`.
fn model_opset(m: &ModelProto, warnings: &mut Vec<String>) -> Result<i64, String> {
    // A model of `ai.onnx.ml` operators alone needs no default opset.
    let foreign_only = m.opset_import.iter().any(|o| o.domain == "ai.onnx.ml")
        && m.graph.as_ref().is_some_and(|g| g.node.iter().all(|n| n.domain == "ai.onnx.ml"));
    match opset(m) {
        None if (1..3).contains(&m.ir_version) => Ok(1),
        None if foreign_only => Ok(MAX_KNOWN_OPSET),
        None => Err(format!(
            "the model declares no opset for the default domain `ai.onnx` (no `opset_import` entry with domain \"\" or \"ai.onnx\"), so the meaning of its operators is unknown{}",
            if m.opset_import.is_empty() { "; is the file truncated?" } else { "" }
        )),
        Some(v) if v < 1 => Err(format!("the model declares opset version {v} for the default domain; versions start at 1")),
        Some(v) if v > MAX_KNOWN_OPSET => {
            warnings.push(format!(
                "the model declares opset {v} for the default domain, newer than the latest this importer knows ({MAX_KNOWN_OPSET}); its operators are read as in opset {MAX_KNOWN_OPSET}"
            ));
            Ok(v)
        }
        Some(v) => Ok(v),
    }
}

/// Operators whose meaning changed across opsets in a way their attributes cannot tell:
/// the importer records the opset on them as the `onnx_opset` attribute.
const OPSET_SENSITIVE: &[&str] = &["Softmax", "LogSoftmax", "Hardmax", "DFT", "Resize", "RoiAlign", "Scan"];

/// Reads an ONNX model into a graph. Errors list every problem found, not just the first.
pub fn read_model(path: &Path) -> Result<Graph, String> {
    let show = path.display();
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {show}: {e}"))?;
    model_in(&bytes, &show.to_string(), Some(path.parent().unwrap_or(Path::new("."))))
}

/// Reads a serialized ONNX model from memory into a graph; `show` names it in errors (as
/// [`read_model`] does with the path). Untrusted bytes give an error, never a panic.
pub fn model_from_bytes(bytes: &[u8], show: &str) -> Result<Graph, String> {
    model_in(bytes, show, None)
}

/// [`model_from_bytes`] for a model whose file is in `dir`, where its external data is.
fn model_in(bytes: &[u8], show: &str, dir: Option<&Path>) -> Result<Graph, String> {
    check_whole(bytes, "model", show)?;
    let m = ModelProto::parse_from_bytes(bytes).map_err(|e| format!("{show} is not an ONNX model: {e}"))?;
    let g = m.graph.as_ref().ok_or_else(|| format!("{show}: the model has no graph (is the file truncated?)"))?;
    let mut warnings = Vec::new();
    let opset = model_opset(&m, &mut warnings).map_err(|e| format!("{show}: {e}"))?;
    let mut graph = Graph::new(g.name.clone());
    graph.warnings = warnings.into_iter().map(|w| format!("{show}: {w}")).collect();
    let mut problems = Vec::new();
    for t in &g.initializer {
        match tensor_in(t, dir) {
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
            problems.push(format!(
                "input `{}` has unsupported ONNX data type {}",
                vi.name,
                onnx_type_name(tt.elem_type)
            ));
            continue;
        };
        let dims: Vec<InputDim> = match tt.shape.as_ref() {
            Some(s) => s
                .dim
                .iter()
                .map(|d| {
                    if d.has_dim_value() {
                        InputDim::Fixed(d.dim_value())
                    } else if d.has_dim_param() && !d.dim_param().is_empty() {
                        InputDim::Named(d.dim_param().to_string())
                    } else {
                        InputDim::Unknown
                    }
                })
                .collect(),
            None => Vec::new(),
        };
        graph.inputs.push(GraphInput { name: vi.name.clone(), dtype, dims });
    }
    nodes_in(g, &mut graph, opset, dir, &mut problems);
    graph.outputs = g.output.iter().map(|o| o.name.clone()).collect();
    if graph.outputs.is_empty() {
        problems.push("the graph declares no outputs, so there is nothing to compute (is the file truncated?)".into());
    }
    if !problems.is_empty() {
        return Err(format!("{show}: {}", problems.join("; ")));
    }
    Ok(graph)
}

/// Reads the nodes of `g` into `graph` (constants of `Constant` nodes into its constants,
/// control-flow subgraphs into `graph.subgraphs`), adding what is wrong to `problems`.
fn nodes_in(g: &GraphProto, graph: &mut Graph, opset: i64, dir: Option<&Path>, problems: &mut Vec<String>) {
    // ONNX does not enforce unique node names; ours are, so errors name one node.
    let mut seen = std::collections::HashSet::new();
    // Every tensor name, so that an omitted output can be given a fresh one.
    let mut tensor_names: std::collections::HashSet<String> = g
        .initializer
        .iter()
        .map(|t| t.name.clone())
        .chain(g.input.iter().map(|v| v.name.clone()))
        .chain(g.output.iter().map(|v| v.name.clone()))
        .chain(g.node.iter().flat_map(|n| n.input.iter().chain(&n.output).cloned()))
        .collect();
    for (i, n) in g.node.iter().enumerate() {
        let mut name = if n.name.is_empty() { format!("{}_{i}", n.op_type) } else { n.name.clone() };
        if !seen.insert(name.clone()) {
            name = format!("{name}_{i}");
            seen.insert(name.clone());
        }
        // The `ai.onnx.ml` and `ai.onnx.preview` operators the VM has keep their names (no
        // default-domain operator shares them); any other domain is refused as a whole.
        let ml = ML_DOMAIN_OPS.contains(&n.op_type.as_str());
        let preview = PREVIEW_DOMAIN_OPS.contains(&n.op_type.as_str());
        if n.domain == "ai.onnx.ml" && ml || n.domain == "ai.onnx.preview" && preview {
        } else if !(n.domain.is_empty() || n.domain == "ai.onnx") {
            problems.push(format!("node `{name}`: operator domain `{}` is not supported", n.domain));
            continue;
        } else if ml || preview {
            problems.push(format!(
                "node `{name}`: operator `{}` is of the `{}` domain, but the node names the default domain",
                n.op_type,
                if ml { "ai.onnx.ml" } else { "ai.onnx.preview" }
            ));
            continue;
        }
        match node_attrs(n, dir) {
            Ok((mut attrs, value)) => {
                if n.op_type == "Constant" {
                    match (value, n.output.first()) {
                        (Some(v), Some(out)) => graph.add_const(out, v),
                        _ => problems.push(format!("node `{name}`: a Constant needs a value (`value`, `value_float(s)` or `value_int(s)`) and one output")),
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
                // A call names a prefix of its operator's outputs: an omitted output before a
                // named one (Attention's `Y, "", "", qk_matmul_output`) gets a fresh name, a
                // tensor nothing reads.
                let last = n.output.iter().rposition(|o| !o.is_empty());
                let outputs = n
                    .output
                    .iter()
                    .enumerate()
                    .map(|(k, o)| {
                        if !o.is_empty() || Some(k) > last {
                            return o.clone();
                        }
                        let mut fresh = format!("{name}.unused{k}");
                        while tensor_names.contains(&fresh) {
                            fresh.push('_');
                        }
                        tensor_names.insert(fresh.clone());
                        fresh
                    })
                    .collect();
                let mut node = Node { name, op: n.op_type.clone(), inputs: n.input.clone(), outputs, attrs };
                if CONTROL_FLOW_OPS.contains(&n.op_type.as_str()) {
                    let mut subs = Vec::new();
                    for a in n.attribute.iter().filter(|a| a.type_.enum_value() == Ok(AttributeType::GRAPH)) {
                        match a.g.as_ref() {
                            Some(sg) => match subgraph_in(&a.name, sg, opset, dir) {
                                Ok(sub) => subs.push(sub),
                                Err(e) => problems
                                    .push(format!("node `{}` ({}): subgraph `{}`: {e}", node.name, n.op_type, a.name)),
                            },
                            None => problems.push(format!(
                                "node `{}` ({}): attribute `{}` holds no graph",
                                node.name, n.op_type, a.name
                            )),
                        }
                    }
                    let cf = ControlFlow::attach(&mut node, subs);
                    graph.subgraphs.insert(node.name.clone(), cf);
                }
                graph.nodes.push(node);
            }
            Err(e) => problems.push(format!("node `{name}` ({}): {e}", n.op_type)),
        }
    }
}

/// Reads a control-flow node's subgraph (attribute `attr`): its initializers, nodes and
/// outputs, and the names of its inputs (their types are known when the program runs).
fn subgraph_in(attr: &str, g: &GraphProto, opset: i64, dir: Option<&Path>) -> Result<Subgraph, String> {
    let mut body = Graph::new(g.name.clone());
    let mut problems = Vec::new();
    for t in &g.initializer {
        match tensor_in(t, dir) {
            Ok(v) => body.add_const(&t.name, v),
            Err(e) => problems.push(format!("initializer `{}`: {e}", t.name)),
        }
    }
    nodes_in(g, &mut body, opset, dir, &mut problems);
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    body.outputs = g.output.iter().map(|o| o.name.clone()).collect();
    let elem = |v: &onnx_protobuf::ValueInfoProto| match v.type_.as_ref().and_then(|t| t.value.as_ref()) {
        Some(onnx_protobuf::type_proto::Value::TensorType(tt)) => dtype_of(tt.elem_type),
        _ => None,
    };
    let dtypes = g.output.iter().map(elem).collect();
    let inputs = g.input.iter().map(|i| i.name.clone()).filter(|n| !body.is_const(n)).collect();
    Ok(Subgraph::new(attr, inputs, dtypes, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `TensorProto` file cut inside its packed `float_data`, at a float boundary: the
    /// decoder alone reads the floats that are there; the reader says the file is cut.
    #[test]
    fn a_cut_tensor_file_is_refused() {
        let mut t = TensorProto::new();
        t.name = "x".into();
        t.dims = vec![4];
        t.data_type = 1;
        t.float_data = vec![1.0, 2.0, 3.0, 4.0];
        let whole = t.write_to_bytes().unwrap();
        let dir = std::env::temp_dir().join(format!("rxvm-onnx-tensor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cut.pb");
        std::fs::write(&path, &whole).unwrap();
        assert_eq!(read_tensor_file(&path).unwrap().1.to_f64(), [1.0, 2.0, 3.0, 4.0]);
        // Without the name (3 bytes, the last field) and the last float.
        std::fs::write(&path, &whole[..whole.len() - 7]).unwrap();
        let e = read_tensor_file(&path).unwrap_err();
        assert!(
            e.contains(
                "the file is truncated: its field 4 (`float_data`), at byte 4, holds 16 bytes, but only 12 follow"
            ),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// bf16 and float8 tensors as ONNX writes them without `raw_data`: bf16 bit patterns and
    /// float8 codes in `int32_data`, one element per int32.
    #[test]
    fn narrow_floats_read_from_int32_data_and_raw_data() {
        let read = |code: i32, int32: Vec<i32>, raw: Vec<u8>| {
            let mut t = TensorProto::new();
            t.dims = vec![3];
            t.data_type = code;
            t.int32_data = int32;
            t.raw_data = raw;
            tensor_from_proto(&t).unwrap()
        };
        // bf16 1.0, -2.0, NaN.
        let bf = read(16, vec![0x3f80, 0xc000, 0x7fc0], vec![]);
        assert_eq!(bf.dtype, DType::BF16);
        assert_eq!(bf.data, [0x80, 0x3f, 0x00, 0xc0, 0xc0, 0x7f]);
        assert_eq!(bf, read(16, vec![], vec![0x80, 0x3f, 0x00, 0xc0, 0xc0, 0x7f]));
        // E4M3FN 1.0 (0x38), -448 (0xfe), NaN (0x7f); E8M0 2^0, 2^-127, NaN.
        let f8 = read(17, vec![0x38, 0xfe, 0x7f], vec![]);
        assert_eq!((f8.dtype, f8.data.as_slice()), (DType::F8E4M3FN, &[0x38u8, 0xfe, 0x7f][..]));
        let v = f8.to_f64();
        assert_eq!(&v[..2], [1.0, -448.0]);
        assert!(v[2].is_nan());
        assert_eq!(read(17, vec![], vec![0x38, 0xfe, 0x7f]), f8);
        let e8 = read(24, vec![127, 0, 255], vec![]);
        assert_eq!(e8.dtype, DType::F8E8M0);
        assert_eq!(&e8.to_f64()[..2], [1.0, 2f64.powi(-127)]);
        for (code, d) in [(18, DType::F8E4M3FNUZ), (19, DType::F8E5M2), (20, DType::F8E5M2FNUZ)] {
            assert_eq!(read(code, vec![1, 2, 3], vec![]).dtype, d);
        }
    }

    /// The `ai.onnx.ml` operators the VM has are read from that domain (a model of them
    /// alone needs no default opset, their tensor attributes are value lists); from the
    /// default domain they are refused, as is any other `ai.onnx.ml` operator.
    #[test]
    fn ml_domain_operators_are_read_from_their_domain_only() {
        use onnx_protobuf::{AttributeProto, GraphProto, NodeProto, OperatorSetIdProto, ValueInfoProto};
        let model = |domain: &str, op: &str| {
            let mut n = NodeProto::new();
            n.op_type = op.into();
            n.domain = domain.into();
            n.input = vec!["x".into()];
            n.output = vec!["y".into()];
            let mut t = TensorProto::new();
            t.dims = vec![2];
            t.data_type = 1;
            t.float_data = vec![0.5, 1.5];
            let mut a = AttributeProto::new();
            a.name = "nodes_splits".into();
            a.type_ = AttributeType::TENSOR.into();
            a.t = Some(t).into();
            n.attribute.push(a);
            let mut g = GraphProto::new();
            g.node.push(n);
            let mut out = ValueInfoProto::new();
            out.name = "y".into();
            g.output.push(out);
            let mut m = ModelProto::new();
            m.ir_version = 8;
            m.graph = Some(g).into();
            let mut o = OperatorSetIdProto::new();
            o.domain = if domain.is_empty() { String::new() } else { "ai.onnx.ml".into() };
            o.version = if domain.is_empty() { 21 } else { 5 };
            m.opset_import.push(o);
            model_from_bytes(&m.write_to_bytes().unwrap(), "m.onnx")
        };
        let g = model("ai.onnx.ml", "TreeEnsemble").unwrap();
        assert_eq!(g.nodes[0].op, "TreeEnsemble");
        assert_eq!(g.nodes[0].attrs.get("nodes_splits"), Some(&AttrValue::Floats(vec![0.5, 1.5])));
        let e = model("", "TreeEnsemble").unwrap_err();
        assert!(e.contains("operator `TreeEnsemble` is of the `ai.onnx.ml` domain"), "{e}");
        let e = model("ai.onnx.ml", "LabelEncoder").unwrap_err();
        assert!(e.contains("operator domain `ai.onnx.ml` is not supported"), "{e}");
    }

    #[test]
    fn onnx_data_types_are_named() {
        assert_eq!(onnx_type_name(8), "STRING (8)");
        assert_eq!(onnx_type_name(28), "FLOAT6E3M2 (28)");
        assert_eq!(onnx_type_name(-1), "-1 (not an ONNX data type)");
        assert_eq!(onnx_type_name(29), "29 (not an ONNX data type)");
    }
}
