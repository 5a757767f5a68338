//! What an operator is, independent of any kernel: its name, arity, attribute schema and
//! validation, shape inference and docs ([`OpDef`]), declared with [`op!`].

use crate::ir::attrs::{AttrSpec, Attrs};
use crate::ir::host_tensor::HostTensor;
use crate::ir::operators::Operator;
use crate::ir::types::DType;

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

/// Whether an inference error says that the value of an input decides the output shape
/// and was not given (a run-time tensor, not a constant): the call's outputs can then be
/// typed only at run time. The schemas word every such error this way.
pub fn needs_input_value(err: &str) -> bool {
    err.contains("needs the value of its") || err.contains("its value decides the output shape")
}

/// Infers output types from the inputs (`None` for an omitted optional input).
pub type InferFn = fn(&[Option<TensorInfo>], &Attrs) -> Result<Vec<OutInfo>, String>;

/// One operator.
pub struct OpDef {
    pub op: Operator,
    /// The ONNX operator type, as written after `@onnx.` (`op.name()`).
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
    /// One line for the operator table in `docs/operators.md`.
    pub doc: &'static str,
}

pub(crate) fn no_extra_checks(_: &Attrs) -> Result<(), String> {
    Ok(())
}

/// Declares an [`OpDef`]: `op!(Name, in 1..=2, out 1..=1, attrs &[...], [validate f,]
/// infer f, "doc")`, `Name` being the [`Operator`].
macro_rules! op {
    ($name:ident, in $min:literal ..= $max:literal, out $omin:literal ..= $omax:literal, attrs $attrs:expr, infer $infer:path, $doc:literal) => {
        $crate::ir::schema::op!($name, in $min..=$max, out $omin..=$omax, attrs $attrs, validate $crate::ir::schema::no_extra_checks, infer $infer, $doc)
    };
    ($name:ident, in $min:literal ..= $max:literal, out $omin:literal ..= $omax:literal, attrs $attrs:expr, validate $validate:path, infer $infer:path, $doc:literal) => {
        $crate::ir::schema::OpDef {
            op: $crate::ir::operators::Operator::$name,
            name: stringify!($name),
            min_inputs: $min,
            max_inputs: $max,
            min_outputs: $omin,
            max_outputs: $omax,
            attrs: $attrs,
            validate: $validate,
            infer: $infer,
            doc: $doc,
        }
    };
}
pub(crate) use op;

/// An attribute spec: `attr!("strides", Ints)`.
macro_rules! attr {
    ($name:literal, $kind:ident) => {
        $crate::ir::attrs::AttrSpec { name: $name, kind: $crate::ir::attrs::AttrKind::$kind }
    };
}
pub(crate) use attr;

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
