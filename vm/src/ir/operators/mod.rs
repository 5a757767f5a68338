//! The operator schemas: every ONNX operator the VM knows, defined once ([`OpDef`]: name,
//! arity, attribute schema, validation, shape inference, docs), with no kernel in sight.
//!
//! [`Operator`] lists the operators in encoding order (an [`OpId`] is an index into it);
//! [`OPS`] holds their schemas in the same order. The kernels live in `crate::ops` and
//! register in tables keyed by [`Operator`], so a name typo there is a compile error and a
//! call finds its kernel by index.

pub mod activation;
pub mod attention;
pub mod bitwise;
pub mod blocked;
pub mod datadep;
pub mod detection;
pub mod elementwise;
pub mod flex;
pub mod indexing;
pub mod linalg;
pub mod logic;
pub mod loss;
pub mod ml;
pub mod nn;
pub mod normalization;
mod operator;
pub mod quantize;
pub mod recurrent;
pub mod resize;
pub mod shape;
pub mod signal;
pub mod symbolic_infer;
pub mod tensor;
pub mod vision;

pub use operator::Operator;

use crate::ir::bytecode::EntityRef;
use crate::ir::bytecode::OpId;
use crate::ir::schema::{op, OpDef};
use std::sync::LazyLock;

/// Operators defined here; the families live in their own modules.
static CORE: &[OpDef] = &[op!(Relu, in 1..=1, out 1..=1, attrs &[], infer elementwise::infer_f32_f64, "max(x, 0)")];

/// Every operator's schema, by [`OpId`]: the families' tables merged in [`Operator`] order
/// (a test checks that every operator has exactly one schema).
pub static OPS: LazyLock<Vec<&'static OpDef>> = LazyLock::new(|| {
    let mut all: Vec<&OpDef> = CORE
        .iter()
        .chain(activation::OPS)
        .chain(elementwise::OPS)
        .chain(nn::OPS)
        .chain(tensor::OPS)
        .chain(logic::OPS)
        .chain(loss::OPS)
        .chain(resize::OPS)
        .chain(indexing::OPS)
        .chain(attention::OPS)
        .chain(normalization::OPS)
        .chain(recurrent::OPS)
        .chain(signal::OPS)
        .chain(vision::OPS)
        .chain(bitwise::OPS)
        .chain(quantize::OPS)
        .chain(linalg::OPS)
        .chain(detection::OPS)
        .chain(ml::OPS)
        .chain(flex::OPS)
        .chain(datadep::OPS)
        .collect();
    all.sort_by_key(|d| d.op);
    all
});

/// Resolves a kernel table (`(operator, kernel)` pairs, in any order) into one indexed by
/// [`OpId`]: built once, so that a call indexes it instead of searching.
pub fn by_id<F: Copy>(entries: &[&[(Operator, F)]]) -> Vec<Option<F>> {
    let mut table = vec![None; Operator::ALL.len()];
    for &(op, f) in entries.iter().copied().flatten() {
        table[op as usize] = Some(f);
    }
    table
}

impl OpId {
    pub fn def(self) -> &'static OpDef {
        OPS[self.index()]
    }

    /// The operator of this id, if it is one.
    pub fn operator(self) -> Option<Operator> {
        Operator::ALL.get(self.index()).copied()
    }

    pub fn from_name(name: &str) -> Option<OpId> {
        Operator::from_name(name).map(Operator::id)
    }

    pub fn get(id: u32) -> Option<&'static OpDef> {
        OPS.get(id as usize).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_in_operator_order() {
        assert_eq!(OPS.len(), Operator::ALL.len());
        for (i, (def, op)) in OPS.iter().zip(Operator::ALL).enumerate() {
            assert_eq!(def.op, *op, "schema {i} is {}, the operator list says {}", def.name, op.name());
            assert_eq!(def.name, op.name());
            assert_eq!(op.id(), OpId(i as u32));
        }
    }

    #[test]
    fn names_are_unique_and_resolve() {
        for (i, op) in OPS.iter().enumerate() {
            assert_eq!(OpId::from_name(op.name), Some(OpId(i as u32)), "{}", op.name);
            assert!(op.min_inputs <= op.max_inputs && op.min_outputs <= op.max_outputs, "{}", op.name);
        }
    }
}
