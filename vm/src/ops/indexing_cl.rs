//! OpenCL buffer kernels of the indexing family (see `super::indexing`).

use super::cl::ClFn;
use super::Operator;

/// This family's OpenCL buffer kernels, by operator.
pub static CL: &[(Operator, ClFn)] = &[];
