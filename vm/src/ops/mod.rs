//! The operator library: ONNX operators called as `call @onnx.Name(inputs) -> (outputs)
//! { attributes }`. Each operator is defined once in [`OPS`] with its arity, attribute
//! schema, attribute validation (run by the verifier at load time), shape inference (run by
//! the verifier when shapes are static, by the interpreter always, and by the compiler) and
//! its host kernel.
//!
//! Operators are destination-passing: outputs are tensors the program allocated (views in
//! its storages), and the interpreter checks their dtype and shape against the inferred
//! ones before the kernel runs.

mod attrs;
pub mod blocked;
pub mod cl;
pub mod elementwise;
pub mod elementwise_cl;
pub mod host;
pub mod nn;
pub mod nn_cl;
pub mod shape;
pub mod tensor;
pub mod tensor_cl;
pub mod texture_cl;

pub use attrs::{AttrKind, AttrSpec, AttrTable, AttrValue, Attrs};

use crate::host_tensor::HostTensor;
use crate::types::DType;
use std::sync::LazyLock;

/// What shape inference knows about one input: dtype, shape and, when the input is a
/// constant (or known at run time), its value.
#[derive(Clone, Copy, Debug)]
pub struct TensorInfo<'a> {
    pub dtype: DType,
    pub shape: &'a [i64],
    pub value: Option<&'a HostTensor>,
}

/// An inferred output: dtype and shape.
pub type OutInfo = (DType, Vec<i64>);

/// Infers output types from the inputs (`None` for an omitted optional input).
pub type InferFn = fn(&[Option<TensorInfo>], &Attrs) -> Result<Vec<OutInfo>, String>;

/// Computes the outputs (pre-shaped, zeroed) from the inputs on the host.
pub type HostFn = fn(&[Option<&HostTensor>], &Attrs, &mut [HostTensor]) -> Result<(), String>;

/// One operator.
pub struct OpDef {
    /// The ONNX operator type, as written after `@onnx.`.
    pub name: &'static str,
    /// Inputs accepted: at least `min_inputs`, at most `max_inputs` (optional inputs may be
    /// given as `none`).
    pub min_inputs: usize,
    pub max_inputs: usize,
    pub min_outputs: usize,
    pub max_outputs: usize,
    pub attrs: &'static [AttrSpec],
    /// Extra attribute checks beyond kinds (ranges, lengths). Run at load time.
    pub validate: fn(&Attrs) -> Result<(), String>,
    pub infer: InferFn,
    pub host: HostFn,
    /// One line for the operator table in `docs/operators.md`.
    pub doc: &'static str,
}

/// Index of an operator in [`OPS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpId(pub u32);

pub(crate) fn no_extra_checks(_: &Attrs) -> Result<(), String> {
    Ok(())
}

/// Declares an [`OpDef`]: `op!("Name", in 1..=2, out 1..=1, attrs &[...], [validate f,]
/// infer f, host f, "doc")`.
macro_rules! op {
    ($name:literal, in $min:literal ..= $max:literal, out $omin:literal ..= $omax:literal, attrs $attrs:expr, infer $infer:path, host $host:path, $doc:literal) => {
        $crate::ops::op!($name, in $min..=$max, out $omin..=$omax, attrs $attrs, validate $crate::ops::no_extra_checks, infer $infer, host $host, $doc)
    };
    ($name:literal, in $min:literal ..= $max:literal, out $omin:literal ..= $omax:literal, attrs $attrs:expr, validate $validate:path, infer $infer:path, host $host:path, $doc:literal) => {
        $crate::ops::OpDef {
            name: $name,
            min_inputs: $min,
            max_inputs: $max,
            min_outputs: $omin,
            max_outputs: $omax,
            attrs: $attrs,
            validate: $validate,
            infer: $infer,
            host: $host,
            doc: $doc,
        }
    };
}
pub(crate) use op;

/// An attribute spec: `attr!("strides", Ints)`.
macro_rules! attr {
    ($name:literal, $kind:ident) => {
        $crate::ops::AttrSpec { name: $name, kind: $crate::ops::AttrKind::$kind }
    };
}
pub(crate) use attr;

/// Operators defined here; the families live in their own modules.
static CORE: &[OpDef] =
    &[op!("Relu", in 1..=1, out 1..=1, attrs &[], infer elementwise::infer_f32, host host::relu, "max(x, 0)")];

/// Every operator, by [`OpId`]: the core table, then each family's table in a fixed
/// order. An operator's index is its bytecode encoding.
pub static OPS: LazyLock<Vec<&'static OpDef>> =
    LazyLock::new(|| CORE.iter().chain(elementwise::OPS).chain(nn::OPS).chain(tensor::OPS).collect());

impl OpId {
    pub fn def(self) -> &'static OpDef {
        OPS[self.0 as usize]
    }

    pub fn from_name(name: &str) -> Option<OpId> {
        let name = name.strip_prefix("onnx.").unwrap_or(name);
        OPS.iter().position(|o| o.name == name).map(|i| OpId(i as u32))
    }

    pub fn get(id: u32) -> Option<&'static OpDef> {
        OPS.get(id as usize).copied()
    }
}

impl OpDef {
    /// Checks attribute names and kinds against the schema, then the operator's own rules.
    pub fn check_attrs(&self, attrs: &Attrs) -> Result<(), String> {
        for (name, v) in attrs.iter() {
            let Some(spec) = self.attrs.iter().find(|s| s.name == name) else {
                let known: Vec<&str> = self.attrs.iter().map(|s| s.name).collect();
                return Err(if known.is_empty() {
                    format!("@onnx.{} takes no attributes, found `{name}`", self.name)
                } else {
                    format!("@onnx.{} has no attribute `{name}`; its attributes are: {}", self.name, known.join(", "))
                });
            };
            if !spec.kind.accepts(v) {
                return Err(format!(
                    "attribute `{name}` of @onnx.{} must be {}, found {}",
                    self.name,
                    spec.kind.describe(),
                    v.describe()
                ));
            }
        }
        (self.validate)(attrs)
    }
}

/// The operator table of `docs/operators.md` (a test keeps the doc equal to this).
pub fn markdown_table() -> String {
    let mut s = String::from(
        "| operator | inputs | outputs | attributes | host | OpenCL buffer | OpenCL texture | notes |\n|---|---|---|---|---|---|---|---|\n",
    );
    let mut ops: Vec<&OpDef> = OPS.to_vec();
    ops.sort_by_key(|o| o.name);
    let range = |a: usize, b: usize| if a == b { a.to_string() } else { format!("{a}–{b}") };
    for o in ops {
        let attrs: Vec<String> = o.attrs.iter().map(|a| format!("`{}`", a.name)).collect();
        s.push_str(&format!(
            "| {} | {} | {} | {} | yes | {} | {} | {} |\n",
            o.name,
            range(o.min_inputs, o.max_inputs),
            range(o.min_outputs, o.max_outputs),
            if attrs.is_empty() { "—".to_string() } else { attrs.join(", ") },
            if cl::cl_fn(o.name).is_some() { "yes" } else { "no" },
            if blocked::supports(o.name) { "yes" } else { "no" },
            o.doc.replace('|', "\\|")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_resolve() {
        for (i, op) in OPS.iter().enumerate() {
            assert_eq!(OpId::from_name(op.name), Some(OpId(i as u32)), "{}", op.name);
            assert!(op.min_inputs <= op.max_inputs && op.min_outputs <= op.max_outputs, "{}", op.name);
        }
    }
}
