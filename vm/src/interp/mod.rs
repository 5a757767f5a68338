//! The interpreter: register frames on one value stack, a tight `match` dispatch loop, and
//! run-time checks for everything the verifier cannot prove.

mod alloc;
mod call_op;
pub mod chain;
pub mod debug;
pub mod devices;
pub mod error;
pub mod exec;
pub(crate) mod fixed;
mod invoke;
pub mod io;
mod run;
pub(crate) mod signature;
mod sites;
pub(crate) mod specialize;
mod state;
mod vm;

pub use chain::Chain;
pub use io::{tensor_to_host, to_host};
pub use state::{Interrupt, Kernels, Limits, Output, Stopped};
pub use vm::Vm;
