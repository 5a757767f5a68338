//! The program as data: value types, the bytecode and its opcode table, modules and their
//! `.rxb` encoding, operator schemas, the builder and the verifier. Imports nothing else of
//! the crate but the operator registry (`ops::OPS`: the verifier finds schemas there, the
//! builder operators by name) and the blocked-texture rules of `ops/blocked.rs`; both go
//! when schemas and kernel tables are split (docs/architecture.md, tests/layers.rs).

pub mod attrs;
pub mod binary;
pub mod builder;
pub mod builtins;
pub mod bytecode;
pub mod host_tensor;
pub mod module;
pub(crate) mod names;
pub mod schema;
pub mod types;
pub mod verify;
