//! The kernel library: each operator's host kernel (the reference), OpenCL buffer kernel
//! and OpenCL texture kernel, registered in tables keyed by [`Operator`] and resolved once
//! into tables indexed by [`OpId`]. The operators themselves (arity, attributes, shape
//! inference) are defined in `crate::ir::operators`.
//!
//! Operators are destination-passing: outputs are tensors the program allocated (views in
//! its storages), and the interpreter checks their dtype and shape against the inferred
//! ones before the kernel runs.

pub mod activation;
#[cfg(feature = "opencl")]
pub mod activation_cl;
pub mod attention;
#[cfg(feature = "opencl")]
pub mod attention_cl;
pub mod bitwise;
#[cfg(feature = "opencl")]
pub mod bitwise_cl;
#[cfg(feature = "opencl")]
pub mod cl;
pub mod datadep;
#[cfg(feature = "opencl")]
pub mod datadep_cl;
pub mod detection;
#[cfg(feature = "opencl")]
pub mod detection_cl;
pub mod elementwise;
#[cfg(feature = "opencl")]
pub mod elementwise_cl;
pub mod flex;
#[cfg(feature = "opencl")]
pub mod flex_cl;
pub mod host;
pub mod indexing;
#[cfg(feature = "opencl")]
pub mod indexing_cl;
pub mod linalg;
#[cfg(feature = "opencl")]
pub mod linalg_cl;
pub mod logic;
#[cfg(feature = "opencl")]
pub mod logic_cl;
pub mod loss;
#[cfg(feature = "opencl")]
pub mod loss_cl;
pub mod ml;
#[cfg(feature = "opencl")]
pub mod ml_cl;
pub mod nn;
#[cfg(feature = "opencl")]
pub mod nn_cl;
pub mod normalization;
#[cfg(feature = "opencl")]
pub mod normalization_cl;
pub(crate) mod num;
pub mod quantize;
#[cfg(feature = "opencl")]
pub mod quantize_cl;
pub mod recurrent;
#[cfg(feature = "opencl")]
pub mod recurrent_cl;
pub mod resize;
#[cfg(feature = "opencl")]
pub mod resize_cl;
pub mod signal;
#[cfg(feature = "opencl")]
pub mod signal_cl;
pub mod tensor;
#[cfg(feature = "opencl")]
pub mod tensor_cl;
#[cfg(feature = "opencl")]
pub mod texture_cl;
pub mod vision;
#[cfg(feature = "opencl")]
pub mod vision_cl;

pub use crate::ir::attrs::{AttrKind, AttrSpec, AttrTable, AttrValue, Attrs};
pub use crate::ir::bytecode::OpId;
pub use crate::ir::operators::{blocked, shape, Operator, OPS};
pub use crate::ir::schema::{InferFn, OpDef, OutInfo, TensorInfo};
pub use host::{HostFn, ViewFn};

use crate::ir::bytecode::EntityRef;
use crate::ir::operators::by_id;
use std::sync::LazyLock;

/// Host kernels of the operators defined in `ir::operators` itself.
static CORE_HOST: &[(Operator, HostFn)] = &[(Operator::Relu, elementwise::relu)];

static HOST_KERNELS: LazyLock<Vec<Option<HostFn>>> = LazyLock::new(|| {
    by_id(&[
        CORE_HOST,
        activation::HOST,
        elementwise::HOST,
        nn::HOST,
        tensor::HOST,
        logic::HOST,
        loss::HOST,
        resize::HOST,
        indexing::HOST,
        attention::HOST,
        normalization::HOST,
        recurrent::HOST,
        signal::HOST,
        vision::HOST,
        bitwise::HOST,
        quantize::HOST,
        linalg::HOST,
        detection::HOST,
        ml::HOST,
        flex::HOST,
        datadep::HOST,
    ])
});

/// The operators whose host kernels run in place, on the operands' memory.
static VIEW_KERNELS: LazyLock<Vec<Option<ViewFn>>> = LazyLock::new(|| by_id(&[nn::VIEW, tensor::VIEW]));

#[cfg(feature = "opencl")]
static CL_KERNELS: LazyLock<Vec<Option<cl::ClFn>>> = LazyLock::new(|| {
    by_id(&[
        activation_cl::CL,
        elementwise_cl::CL,
        nn_cl::CL,
        tensor_cl::CL,
        logic_cl::CL,
        loss_cl::CL,
        resize_cl::CL,
        indexing_cl::CL,
        attention_cl::CL,
        normalization_cl::CL,
        recurrent_cl::CL,
        signal_cl::CL,
        vision_cl::CL,
        bitwise_cl::CL,
        quantize_cl::CL,
        linalg_cl::CL,
        detection_cl::CL,
        ml_cl::CL,
        flex_cl::CL,
        datadep_cl::CL,
    ])
});

#[cfg(feature = "opencl")]
static TEXTURE_KERNELS: LazyLock<Vec<Option<texture_cl::TextureFn>>> =
    LazyLock::new(|| by_id(&[texture_cl::TEXTURE, resize_cl::TEXTURE]));

/// The OpenCL buffer kernel of operator `name`, if it has one (for tools and tests; the
/// interpreter uses [`OpId::cl_kernel`]).
#[cfg(feature = "opencl")]
pub fn cl_fn(name: &str) -> Option<cl::ClFn> {
    OpId::from_name(name)?.cl_kernel()
}

impl OpId {
    /// The operator's host kernel (every operator has one: a test checks it).
    #[inline]
    pub fn host_kernel(self) -> Result<HostFn, String> {
        HOST_KERNELS
            .get(self.index())
            .copied()
            .flatten()
            .ok_or_else(|| format!("operator {} has no host kernel", self.0))
    }

    /// The operator's in-place host kernel, if it has one (its [`OpId::host_kernel`] runs
    /// the same kernel on host tensors).
    #[inline]
    pub fn view_kernel(self) -> Option<ViewFn> {
        VIEW_KERNELS.get(self.index()).copied().flatten()
    }

    /// The operator's OpenCL buffer kernel, if it has one.
    #[cfg(feature = "opencl")]
    #[inline]
    pub fn cl_kernel(self) -> Option<cl::ClFn> {
        CL_KERNELS.get(self.index()).copied().flatten()
    }

    /// The operator's OpenCL texture kernel, if it has one.
    #[cfg(feature = "opencl")]
    #[inline]
    pub fn texture_kernel(self) -> Option<texture_cl::TextureFn> {
        TEXTURE_KERNELS.get(self.index()).copied().flatten()
    }

    /// Whether the operator has an OpenCL buffer kernel in this build.
    pub fn has_cl_kernel(self) -> bool {
        #[cfg(feature = "opencl")]
        return self.cl_kernel().is_some();
        #[cfg(not(feature = "opencl"))]
        return false;
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
    let yes = |b: bool| if b { "yes" } else { "no" };
    for o in ops {
        let attrs: Vec<String> = o.attrs.iter().map(|a| format!("`{}`", a.name)).collect();
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            o.name,
            range(o.min_inputs, o.max_inputs),
            range(o.min_outputs, o.max_outputs),
            if attrs.is_empty() { "—".to_string() } else { attrs.join(", ") },
            yes(o.op.id().host_kernel().is_ok()),
            yes(o.op.id().has_cl_kernel()),
            yes(blocked::form(o.op).is_some()),
            o.doc.replace('|', "\\|")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operator_has_a_host_kernel() {
        for op in Operator::ALL {
            assert!(op.id().host_kernel().is_ok(), "{} has no host kernel", op.name());
        }
    }

    /// An operator with a blocked-texture form runs on textures on every backend that has
    /// textures, and only those have texture kernels.
    #[cfg(feature = "opencl")]
    #[test]
    fn texture_kernels_match_the_blocked_forms() {
        for op in Operator::ALL {
            assert_eq!(
                op.id().texture_kernel().is_some(),
                blocked::form(*op).is_some(),
                "{}: texture kernel and blocked form disagree",
                op.name()
            );
        }
    }
}
