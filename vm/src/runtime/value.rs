//! Register values.

use crate::ir::types::Kind;
use crate::runtime::memory::{Storage, View};
use crate::runtime::shared::Shared;
use std::rc::Rc;

/// The value in a register.
#[derive(Clone)]
pub enum Value {
    /// Never assigned in this frame.
    Null,
    /// Dropped by `kill` at this instruction index.
    Killed(u32),
    Int(i64),
    Float(f64),
    Shape(Rc<[i64]>),
    Storage(Shared<Storage>),
    Tensor(Shared<View>),
    /// A buffer view in host memory with no view object: geometry number `.0` of the
    /// storage's runtime ([`crate::runtime::memory::Runtime::slice_geom`]) over storage `.1`. What
    /// a compiled `alloc_tensor` makes when tracking is off: making and dropping it costs a
    /// reference count, where a view object cost a third of an `alloc_storage` +
    /// `alloc_tensor` + `kill` triple. Whatever reads the register as a value gets the view
    /// object ([`Value::materialized`]): only the interpreter holds slices.
    Slice(u32, Shared<Storage>),
}

impl Value {
    pub fn kind(&self) -> Option<Kind> {
        Some(match self {
            Value::Null | Value::Killed(_) => return None,
            Value::Int(_) => Kind::Int,
            Value::Float(_) => Kind::Float,
            Value::Shape(_) => Kind::Shape,
            Value::Storage(_) => Kind::Storage,
            Value::Tensor(_) | Value::Slice(..) => Kind::Tensor,
        })
    }

    /// True for values whose drop does nothing (no reference to give up).
    #[inline(always)]
    pub fn owns_nothing(&self) -> bool {
        matches!(self, Value::Null | Value::Killed(_) | Value::Int(_) | Value::Float(_))
    }

    /// The value with a slice replaced by its view object; other values as they are.
    pub fn materialized(&self) -> Result<Value, String> {
        match self {
            Value::Slice(g, s) => View::of_slice(*g, s).map(Value::Tensor),
            v => Ok(v.clone()),
        }
    }

    /// A short description for error messages: `int 5`, `storage #3 (4096 bytes)`, ...
    pub fn describe(&self) -> String {
        match self {
            Value::Null => "nothing (never defined)".into(),
            Value::Killed(_) => "nothing (killed)".into(),
            Value::Int(v) => format!("int {v}"),
            Value::Float(v) => format!("float {v:?}"),
            Value::Shape(s) => format!("shape {s:?}"),
            Value::Storage(s) => format!("storage #{} ({} bytes)", s.id, s.size),
            Value::Tensor(t) => format!(
                "tensor #{} {}{:?} at offset {} of storage #{}",
                t.id,
                t.dtype,
                &t.shape[..],
                t.offset,
                t.storage.id
            ),
            Value::Slice(g, s) => match s.runtime().slice_geom(*g) {
                Some(g) => format!("tensor {}{:?} at offset {} of storage #{}", g.dtype, &g.shape[..], g.offset, s.id),
                None => format!("tensor of unknown geometry {g} over storage #{}", s.id),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Registers are moved on every instruction: three words (a shape's fat pointer and the
    /// tag), which a slice's index and storage fit in.
    #[test]
    fn a_value_is_three_words() {
        assert_eq!(std::mem::size_of::<Value>(), 24);
    }
}
