//! Binding a function's parameters to the caller's memory.
//!
//! A compiled model may take *storage* parameters: memory pools the caller provides (its
//! outputs become views in them, `--io caller`; an arena that holds its inputs,
//! `--inputs-in-arena`), and tensor parameters *placed* in one of them
//! ([`crate::ir::module::Placement`]). The VM uses what the caller passes in place when it can and
//! makes exactly one copy when it cannot, recording why ([`Fallback`]):
//!
//! - a storage parameter on another device, or smaller than the function needs (the need is
//!   derived from the code: [`storage_requirements`]), is replaced by a VM storage; results
//!   in it are copied back into the caller's storage when it is large enough;
//! - a placed tensor that is not a view of its storage at its offset is copied there;
//! - a tensor of another runtime (another VM's OpenCL context) or on another device than
//!   device 0, where compiled functions run, is copied to device 0.
//!
//! Every transfer is counted ([`Copies`]): host→device when host data is written into a
//! storage, device→host when a result is read back, device→device for the copies above.

use crate::interp::exec::{read_view, store_bytes};
use crate::ir::bytecode::EntityRef;
use crate::ir::bytecode::{ArgKind, Instr, Reg};
use crate::ir::host_tensor::{HostTensor, HostValue};
use crate::ir::module::{Function, Module};
use crate::ir::types::{dense_bytes, ImageLayout, Scope, Type};
pub use crate::runtime::counters::{Copies, Direction};
use crate::runtime::device::DeviceCaps;
use crate::runtime::memory::View;
use crate::runtime::value::Value;
use std::fmt;

/// A parameter or result the VM could not use in place, and what it did instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    /// `@main %x` (parameter) or `@main result 0`.
    pub what: String,
    pub reason: String,
    /// Bytes copied because of it (0 when nothing was copied).
    pub copied_bytes: u64,
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.copied_bytes > 0 {
            write!(f, "{}: {}; copied {} bytes", self.what, self.reason, self.copied_bytes)
        } else {
            write!(f, "{}: {}", self.what, self.reason)
        }
    }
}

/// What one invocation moved: its copies and every fallback with its reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IoReport {
    pub copies: Copies,
    pub fallbacks: Vec<Fallback>,
}

/// Bytes each storage parameter must hold, by parameter index (`None` for other parameters
/// and for storages whose use the code does not fix: a view at a computed offset or shape,
/// or a register the function reassigns). Derived from the function's `alloc_tensor`
/// instructions on the parameter (image views take their pitched size on `caps`) and its
/// placements.
pub fn storage_requirements(m: &Module, f: &Function, caps: &DeviceCaps) -> Vec<Option<u64>> {
    let mut need: Vec<Option<u64>> =
        f.params.iter().map(|t| if matches!(t, Type::Storage) { Some(0) } else { None }).collect();
    let grow = |need: &mut Vec<Option<u64>>, r: usize, end: Option<u64>| {
        if let Some(slot) = need.get_mut(r) {
            *slot = match (*slot, end) {
                (Some(n), Some(e)) => Some(n.max(e)),
                _ => None,
            };
        }
    };
    for p in &f.placements {
        let end = f
            .params
            .get(p.param as usize)
            .and_then(Type::known_shape)
            .and_then(|(dtype, shape)| dense_bytes(dtype, &shape))
            .and_then(|b| b.checked_add(p.offset));
        grow(&mut need, p.storage as usize, end);
    }
    for ins in &f.code {
        match *ins {
            Instr::AllocTensor { storage, args, dtype, scope, ndim, .. } if is_param(f, storage) => {
                let list = f.args.get(args as usize..args as usize + ndim as usize + 1);
                let end = list.and_then(|l| {
                    let off = u64::try_from(m.const_int(l[0])?).ok()?;
                    let dims: Vec<i64> = l[1..].iter().map(|a| m.const_int(*a)).collect::<Option<_>>()?;
                    let bytes = view_bytes(scope, dtype, &dims, caps)?;
                    off.checked_add(bytes)
                });
                grow(&mut need, storage.index(), end);
            }
            Instr::Mov { dst, .. } | Instr::AllocStorage { dst, .. } if is_param(f, dst) => {
                grow(&mut need, dst.index(), None)
            }
            Instr::Call { list, ndst, .. } | Instr::CallBuiltin { list, ndst, .. } => {
                for a in f.args.get(list as usize..list as usize + ndst as usize).unwrap_or(&[]) {
                    if let ArgKind::Reg(r) = a.kind() {
                        if is_param(f, r) {
                            grow(&mut need, r.index(), None);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    need
}

fn is_param(f: &Function, r: Reg) -> bool {
    (r.index()) < f.params.len()
}

/// Bytes a view covers: dense for buffers, pitched for images.
fn view_bytes(scope: Scope, dtype: crate::ir::types::DType, dims: &[i64], caps: &DeviceCaps) -> Option<u64> {
    if scope.is_texture() {
        ImageLayout::new(scope, dtype, dims, caps.image_pitch_align_px).ok()?.byte_size()
    } else {
        dense_bytes(dtype, dims)
    }
}

/// Copies the elements of `src` into `dst` (same dtype and element count), staged through
/// host memory; returns the bytes copied.
pub fn copy_view(src: &crate::runtime::memory::View, dst: &crate::runtime::memory::View) -> Result<u64, String> {
    if src.dtype != dst.dtype || src.numel() != dst.numel() {
        return Err(format!("cannot copy {}{:?} into {}{:?}", src.dtype, &src.shape[..], dst.dtype, &dst.shape[..]));
    }
    let t = read_view(src).map_err(|e| *e)?;
    store_bytes(dst, &t.data).map_err(|e| *e)?;
    Ok(t.data.len() as u64)
}

/// Copies a VM value out to the host (tensors are read back from their device).
pub fn to_host(v: &Value) -> Result<HostValue, String> {
    Ok(match v {
        Value::Int(i) => HostValue::Int(*i),
        Value::Float(f) => HostValue::Float(*f),
        Value::Shape(s) => HostValue::Shape(s.to_vec()),
        Value::Tensor(t) => HostValue::Tensor(read_view(t).map_err(|e| *e)?),
        Value::Slice(..) => return to_host(&v.materialized()?),
        Value::Storage(s) => HostValue::Storage { id: s.id, size: s.size },
        Value::Null | Value::Killed(_) => return Err("a result register holds no value".into()),
    })
}

/// Reads a tensor value to the host (for callers that hold [`Value`]s).
pub fn tensor_to_host(v: &View) -> Result<HostTensor, String> {
    read_view(v).map_err(|e| *e)
}
