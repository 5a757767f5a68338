//! Register values.

use crate::memory::{Storage, View};
use crate::shared::Shared;
use crate::types::Kind;
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
}

impl Value {
    pub fn kind(&self) -> Option<Kind> {
        Some(match self {
            Value::Null | Value::Killed(_) => return None,
            Value::Int(_) => Kind::Int,
            Value::Float(_) => Kind::Float,
            Value::Shape(_) => Kind::Shape,
            Value::Storage(_) => Kind::Storage,
            Value::Tensor(_) => Kind::Tensor,
        })
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
        }
    }
}
