//! The operator library: ONNX operators called as `call @onnx.Name(inputs) -> (outputs)
//! { attributes }`. Each operator is defined once in [`OPS`] with its arity, attribute
//! schema, attribute validation (run by the verifier at load time), shape inference (run by
//! the verifier when shapes are static, by the interpreter always, and by the compiler) and
//! its host kernel.
//!
//! Operators are destination-passing: outputs are tensors the program allocated (views in
//! its storages), and the interpreter checks their dtype and shape against the inferred
//! ones before the kernel runs.

pub mod blocked;
#[cfg(feature = "opencl")]
pub mod cl;
pub mod elementwise;
#[cfg(feature = "opencl")]
pub mod elementwise_cl;
pub mod host;
pub mod nn;
#[cfg(feature = "opencl")]
pub mod nn_cl;
pub mod shape;
pub mod tensor;
#[cfg(feature = "opencl")]
pub mod tensor_cl;
#[cfg(feature = "opencl")]
pub mod texture_cl;

pub use crate::ir::attrs::{AttrKind, AttrSpec, AttrTable, AttrValue, Attrs};

pub use crate::ir::bytecode::OpId;
pub(crate) use crate::ir::schema::{attr, op};
pub use crate::ir::schema::{HostFn, InferFn, OpDef, OutInfo, TensorInfo};

use std::sync::LazyLock;

/// Operators defined here; the families live in their own modules.
static CORE: &[OpDef] =
    &[op!("Relu", in 1..=1, out 1..=1, attrs &[], infer elementwise::infer_f32, host host::relu, "max(x, 0)")];

/// Every operator, by [`OpId`]: the core table, then each family's table in a fixed
/// order. An operator's index is its bytecode encoding.
pub static OPS: LazyLock<Vec<&'static OpDef>> =
    LazyLock::new(|| CORE.iter().chain(elementwise::OPS).chain(nn::OPS).chain(tensor::OPS).collect());

/// Each operator's OpenCL buffer kernel, by [`OpId`]: the families' tables resolved once,
/// so that a call indexes a table instead of searching one by name.
#[cfg(feature = "opencl")]
static CL_KERNELS: LazyLock<Vec<Option<cl::ClFn>>> = LazyLock::new(|| {
    let by_name = |name: &str| {
        elementwise_cl::CL.iter().chain(nn_cl::CL).chain(tensor_cl::CL).find(|(n, _)| *n == name).map(|(_, f)| *f)
    };
    OPS.iter().map(|d| by_name(d.name)).collect()
});

/// The OpenCL buffer kernel of operator `name`, if it has one (for tools and tests; the
/// interpreter uses [`OpId::cl_kernel`]).
#[cfg(feature = "opencl")]
pub fn cl_fn(name: &str) -> Option<cl::ClFn> {
    OpId::from_name(name)?.cl_kernel()
}

impl OpId {
    pub fn def(self) -> &'static OpDef {
        OPS[self.0 as usize]
    }

    /// The operator's OpenCL buffer kernel, if it has one.
    #[cfg(feature = "opencl")]
    #[inline]
    pub fn cl_kernel(self) -> Option<cl::ClFn> {
        CL_KERNELS.get(self.0 as usize).copied().flatten()
    }

    pub fn from_name(name: &str) -> Option<OpId> {
        let name = name.strip_prefix("onnx.").unwrap_or(name);
        OPS.iter().position(|o| o.name == name).map(|i| OpId(i as u32))
    }

    pub fn get(id: u32) -> Option<&'static OpDef> {
        OPS.get(id as usize).copied()
    }
}

/// Whether operator `name` has an OpenCL buffer kernel in this build.
fn has_cl_kernel(name: &str) -> bool {
    #[cfg(feature = "opencl")]
    return cl_fn(name).is_some();
    #[cfg(not(feature = "opencl"))]
    return {
        let _ = name;
        false
    };
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
            if has_cl_kernel(o.name) { "yes" } else { "no" },
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
