//! Memory as the interpreter sees it: reference-counted objects, device capabilities and
//! size-class pools, storages and their views, the allocation ledger and its counters, and
//! register values.

pub mod backend;
pub mod counters;
pub mod device;
pub mod memory;
pub mod shared;
pub mod value;
