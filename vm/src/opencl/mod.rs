//! The OpenCL backend: devices, contexts and queues, buffers, sub-buffers and images over
//! pooled `cl_mem` blocks, program builds, and the kernels of the VM's builtins.

pub mod backend;
pub mod builtins;
pub mod device;
pub mod narrow;

pub use device::*;
