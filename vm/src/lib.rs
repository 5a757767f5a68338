//! rxvm-vm: the bytecode, the `.rxb` module format, the verifier and the interpreter with
//! its devices and builtins.

pub mod binary;
pub mod builtins;
pub mod bytecode;
pub mod module;
pub mod types;
pub mod verify;

pub use binary::{read_module, write_module, LoadError};
pub use module::Module;
pub use verify::{verify_module, VerifyError};
