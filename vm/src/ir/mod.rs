//! The program as data: value types, the bytecode and its opcode table, modules and their
//! `.rxb` encoding, the operator schemas (`operators/`), the builder and the verifier.
//! Imports nothing else of the crate (tests/layers.rs checks it).

pub mod attrs;
pub mod binary;
pub mod builder;
pub mod builtins;
pub mod bytecode;
pub mod host_tensor;
pub mod minifloat;
pub mod module;
pub(crate) mod names;
pub mod operators;
pub mod schema;
pub mod symbolic;
pub mod types;
pub mod verify;
