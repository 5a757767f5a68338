//! Binding a function's parameters to the caller's memory.
//!
//! A compiled model may take *storage* parameters: memory pools the caller provides (its
//! outputs become views in them, `--io caller`; an arena that holds its inputs,
//! `--inputs-in-arena`), and tensor parameters *placed* in one of them
//! ([`crate::module::Placement`]). The VM uses what the caller passes in place when it can and
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

use crate::bytecode::{ArgKind, FuncId, Instr, Reg};
use crate::device::DeviceCaps;
use crate::error::VmError;
use crate::exec::{read_view, store_bytes};
use crate::host_tensor::{HostTensor, HostValue};
use crate::interp::Vm;
use crate::memory::Runtime;
use crate::module::{Function, Module};
use crate::types::{dense_bytes, ImageLayout, Scope, Type};
use crate::value::Value;
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

/// Numbers and bytes of copies, by direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Copies {
    pub h2d: u64,
    pub d2h: u64,
    pub d2d: u64,
    pub bytes_h2d: u64,
    pub bytes_d2h: u64,
    pub bytes_d2d: u64,
}

/// The direction of a copy: from the caller's host memory into a storage, from a storage to
/// host memory, or between two storages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
}

impl Copies {
    pub fn count(&mut self, dir: Direction, bytes: u64) {
        let (n, b) = match dir {
            Direction::HostToDevice => (&mut self.h2d, &mut self.bytes_h2d),
            Direction::DeviceToHost => (&mut self.d2h, &mut self.bytes_d2h),
            Direction::DeviceToDevice => (&mut self.d2d, &mut self.bytes_d2d),
        };
        *n += 1;
        *b += bytes;
    }

    /// All copies, every direction.
    pub fn total(&self) -> u64 {
        self.h2d + self.d2h + self.d2d
    }

    /// `self - earlier` (counters only grow).
    pub fn since(&self, earlier: &Copies) -> Copies {
        Copies {
            h2d: self.h2d - earlier.h2d,
            d2h: self.d2h - earlier.d2h,
            d2d: self.d2d - earlier.d2d,
            bytes_h2d: self.bytes_h2d - earlier.bytes_h2d,
            bytes_d2h: self.bytes_d2h - earlier.bytes_d2h,
            bytes_d2d: self.bytes_d2d - earlier.bytes_d2d,
        }
    }

    /// The counters as `(key, value)` pairs (the `--stats=json` keys).
    pub fn fields(&self) -> [(&'static str, u64); 6] {
        [
            ("copies_h2d", self.h2d),
            ("copies_d2h", self.d2h),
            ("copies_d2d", self.d2d),
            ("bytes_h2d", self.bytes_h2d),
            ("bytes_d2h", self.bytes_d2h),
            ("bytes_d2d", self.bytes_d2d),
        ]
    }
}

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
                grow(&mut need, storage.0 as usize, end);
            }
            Instr::Mov { dst, .. } | Instr::AllocStorage { dst, .. } if is_param(f, dst) => {
                grow(&mut need, dst.0 as usize, None)
            }
            Instr::Call { list, ndst, .. } | Instr::CallBuiltin { list, ndst, .. } => {
                for a in f.args.get(list as usize..list as usize + ndst as usize).unwrap_or(&[]) {
                    if let ArgKind::Reg(r) = a.kind() {
                        if is_param(f, r) {
                            grow(&mut need, r.0 as usize, None);
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
    (r.0 as usize) < f.params.len()
}

/// Bytes a view covers: dense for buffers, pitched for images.
fn view_bytes(scope: Scope, dtype: crate::types::DType, dims: &[i64], caps: &DeviceCaps) -> Option<u64> {
    if scope.is_texture() {
        ImageLayout::new(scope, dtype, dims, caps.image_pitch_align_px).ok()?.byte_size()
    } else {
        dense_bytes(dtype, dims)
    }
}

/// Copies the elements of `src` into `dst` (same dtype and element count), staged through
/// host memory; returns the bytes copied.
pub fn copy_view(src: &crate::memory::View, dst: &crate::memory::View) -> Result<u64, String> {
    if src.dtype != dst.dtype || src.numel() != dst.numel() {
        return Err(format!("cannot copy {}{:?} into {}{:?}", src.dtype, &src.shape[..], dst.dtype, &dst.shape[..]));
    }
    let t = read_view(src).map_err(|e| *e)?;
    store_bytes(dst, &t.data).map_err(|e| *e)?;
    Ok(t.data.len() as u64)
}

/// Compiled modules run one after another on one runtime: the tensor results of stage `k`
/// are the tensor parameters of stage `k + 1`, in order, read in place when the next stage
/// can (it shares the devices, so a view is just passed on). Every storage parameter is
/// allocated once, when the chain is made, with the bytes its code needs, and reused by
/// every run: with `--io caller`, stage `k`'s output storage is where stage `k + 1` reads
/// its input.
pub struct Chain {
    stages: Vec<Stage>,
}

struct Stage {
    vm: Vm,
    func: FuncId,
    /// By parameter index: the storage the chain passes.
    storages: Vec<Option<Value>>,
}

/// What one run of a chain produced and moved.
#[derive(Clone, Debug)]
pub struct ChainRun {
    /// The last stage's tensor results, read back to the host.
    pub outputs: Vec<HostTensor>,
    /// Each stage's copies and fallbacks (the upload of the inputs is stage 0's, the
    /// read-back of the outputs is not in any stage).
    pub stages: Vec<IoReport>,
    /// Every copy of the run, uploads and read-backs included.
    pub copies: Copies,
}

impl Chain {
    /// A chain of `func` of each module on the devices of `rt`.
    pub fn new(rt: Rc<Runtime>, modules: Vec<Arc<Module>>, func: &str) -> Result<Chain, VmError> {
        if modules.is_empty() {
            return Err(VmError::api("a chain needs at least one module"));
        }
        let mut stages = Vec::with_capacity(modules.len());
        for (k, m) in modules.into_iter().enumerate() {
            let mut vm = Vm::with_runtime(m, rt.clone())?;
            let func = vm.module().func_by_name(func).ok_or_else(|| {
                VmError::api(format!("stage {k}: module `{}` has no function @{func}", vm.module().name))
            })?;
            let needs = vm.storage_needs(func);
            let mut storages = Vec::with_capacity(needs.len());
            for need in needs.iter() {
                storages.push(match need {
                    Some(bytes) => Some(vm.new_storage(0, *bytes)?),
                    None => None,
                });
            }
            stages.push(Stage { vm, func, storages });
        }
        Ok(Chain { stages })
    }

    /// Passes `storage` (e.g. one the caller made with [`Vm::new_storage`]) as storage
    /// parameter `%param` of stage `stage` from now on.
    pub fn bind_storage(&mut self, stage: usize, param: &str, storage: Value) -> Result<(), VmError> {
        let s = self.stages.get_mut(stage).ok_or_else(|| VmError::api(format!("no stage {stage}")))?;
        let module = s.vm.module().clone();
        let f = &module.funcs[s.func.0 as usize];
        let i = (0..f.params.len())
            .find(|&i| matches!(f.params[i], Type::Storage) && f.reg_name(Reg(i as u32)) == param)
            .ok_or_else(|| VmError::api(format!("stage {stage}: @{} has no storage parameter %{param}", f.name)))?;
        if !matches!(storage, Value::Storage(_)) {
            return Err(VmError::api(format!("%{param} takes a storage, found {}", storage.describe())));
        }
        s.storages[i] = Some(storage);
        Ok(())
    }

    /// The VM of stage `k`.
    pub fn vm(&self, k: usize) -> Option<&Vm> {
        self.stages.get(k).map(|s| &s.vm)
    }

    /// Runs every stage on `inputs` (stage 0's tensor parameters, in order).
    pub fn run(&mut self, inputs: &[HostTensor]) -> Result<ChainRun, VmError> {
        let start = self.stages[0].vm.runtime().counters.copies.get();
        let mut reports = Vec::with_capacity(self.stages.len());
        let mut values: Vec<Value> = Vec::new();
        for (k, s) in self.stages.iter_mut().enumerate() {
            let (args, uploads) = if k == 0 {
                let host: Vec<HostValue> = inputs.iter().cloned().map(HostValue::Tensor).collect();
                let before = s.vm.runtime().counters.copies.get();
                let args = s.vm.host_args(s.func, &host, &s.storages)?;
                (args, s.vm.runtime().counters.copies.get().since(&before))
            } else {
                let module = s.vm.module().clone();
                let f = &module.funcs[s.func.0 as usize];
                let mut prev = std::mem::take(&mut values).into_iter().filter(|v| matches!(v, Value::Tensor(_)));
                let mut args = Vec::with_capacity(f.params.len());
                for (i, t) in f.params.iter().enumerate() {
                    args.push(match (t, s.storages.get(i).cloned().flatten()) {
                        (Type::Storage, Some(v)) => v,
                        (Type::Storage, None) => {
                            return Err(VmError::api(format!(
                                "stage {k}: the size of %{} is not fixed by the code; bind it with Chain::bind_storage",
                                f.reg_name(Reg(i as u32))
                            )))
                        }
                        _ => prev.next().ok_or_else(|| {
                            VmError::api(format!(
                                "stage {k}: @{} takes more tensors than stage {} returns",
                                f.name,
                                k - 1
                            ))
                        })?,
                    });
                }
                (args, Copies::default())
            };
            values = s.vm.invoke_values(s.func, args)?;
            let mut r = s.vm.last_io().clone();
            r.copies = add(&r.copies, &uploads);
            reports.push(r);
        }
        let last = &self.stages[self.stages.len() - 1].vm;
        let outputs = values
            .iter()
            .filter(|v| matches!(v, Value::Tensor(_)))
            .map(|v| last.download(v))
            .collect::<Result<_, _>>()?;
        let copies = last.runtime().counters.copies.get().since(&start);
        Ok(ChainRun { outputs, stages: reports, copies })
    }
}

fn add(a: &Copies, b: &Copies) -> Copies {
    Copies {
        h2d: a.h2d + b.h2d,
        d2h: a.d2h + b.d2h,
        d2d: a.d2d + b.d2d,
        bytes_h2d: a.bytes_h2d + b.bytes_h2d,
        bytes_d2h: a.bytes_d2h + b.bytes_d2h,
        bytes_d2d: a.bytes_d2d + b.bytes_d2d,
    }
}
