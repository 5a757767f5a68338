//! The embedding API: invoking a function by name or id with host or VM values, binding
//! arguments (and the copies that takes, [`crate::interp::io`]), and collecting results.

use super::state::*;
use super::vm::Vm;
use crate::interp::error::VmError;
use crate::interp::exec::{read_view, write_view};
use crate::interp::io::to_host;
use crate::interp::io::{copy_view, storage_requirements, Direction, Fallback};
use crate::ir::bytecode::EntityRef;
use crate::ir::bytecode::{FuncId, Reg};
use crate::ir::host_tensor::{HostTensor, HostValue};
use crate::ir::module::{Function, Module};
use crate::ir::types::{Scope, Type};
use crate::runtime::memory::{Site, Storage, View, ViewSpec};
use crate::runtime::shared::Shared;
use crate::runtime::value::Value;
use std::rc::Rc;
use std::sync::Arc;

impl Vm {
    /// Invokes `func` with host values; tensors are copied into storages on device 0 and
    /// results are copied back. A function with storage parameters may be given only its
    /// other parameters: the VM then allocates each storage with the bytes its code needs
    /// and writes placed inputs straight into their storage (no copy beyond the upload).
    #[inline]
    pub fn invoke(&mut self, func: &str, args: &[HostValue]) -> Result<Vec<HostValue>, VmError> {
        let id = self.func_id(func)?;
        if !(args.is_empty() && self.module.funcs[id].params.is_empty()) {
            return self.invoke_host(id, args);
        }
        // Nothing to convert: the path of `invoke_values`. The rest out of line, so that
        // this path sets up a small frame.
        self.invoke_plain(id)?;
        if self.returned.is_empty() {
            return Ok(Vec::new());
        }
        let out = self.take_returned();
        self.results_after_invoke(Ok(out))
    }

    /// [`Vm::invoke_values`] of a function without parameters, its results left in
    /// `returned`: what `invoke` runs for a call without arguments. Its result is one
    /// word, in a register; a `Vec` passed back through memory and read again cost a
    /// stall of a few nanoseconds per empty invocation.
    #[inline(never)]
    pub(crate) fn invoke_plain(&mut self, id: FuncId) -> Result<(), VmError> {
        self.begin_invocation();
        // SAFETY: see `module_ptr`; `m` does not outlive this call.
        let m = unsafe { &*self.module_ptr() };
        let r = self.run_plain(m, id);
        let done = self.end_invocation();
        r.and(done)
    }

    /// [`Vm::invoke`] with arguments to convert or bind.
    #[inline(never)]
    pub(crate) fn invoke_host(&mut self, id: FuncId, args: &[HostValue]) -> Result<Vec<HostValue>, VmError> {
        self.begin_invocation();
        // SAFETY: see `module_ptr`; `m` does not outlive this call.
        let m = unsafe { &*self.module_ptr() };
        let vals = self.host_values(id, &m.funcs[id], args)?;
        let out = self.bind_and_run(m, id, vals);
        self.results_after_invoke(out)
    }

    /// An invocation's results read back to the host, and its copies recorded.
    #[inline(never)]
    pub(crate) fn results_after_invoke(&mut self, out: Result<Vec<Value>, VmError>) -> Result<Vec<HostValue>, VmError> {
        let host = out.and_then(|out| self.results_to_host(out));
        let done = self.end_invocation();
        host.and_then(|h| done.map(|()| h))
    }

    /// What every invocation does first: hands the devices the live-bytes limit, marks
    /// the copy counter, forgets the last invocation's fallbacks.
    #[inline(always)]
    pub(crate) fn begin_invocation(&mut self) {
        self.apply_live_limit();
        self.rt.counters.mark_copies();
        self.io.fallbacks.clear();
    }

    /// What every invocation does last: records the copies it made ([`Vm::last_io`]) and
    /// waits for the devices to run what they were given, so that its results and its
    /// time are whole.
    #[inline(always)]
    pub(crate) fn end_invocation(&mut self) -> Result<(), VmError> {
        self.io.copies = self.rt.counters.copies_since_mark.get();
        self.rt.finish().map_err(|e| VmError::api(format!("a device failed: {e}")))
    }

    /// The VM values of `invoke`'s host arguments (see [`Vm::invoke`]).
    pub(crate) fn host_values(&mut self, id: FuncId, f: &Function, args: &[HostValue]) -> Result<Vec<Value>, VmError> {
        let nstorage = f.params.iter().filter(|t| matches!(t, Type::Storage)).count();
        if nstorage > 0 && args.len() + nstorage == f.params.len() {
            return self.host_args(id, args, &[]);
        }
        let mut vals = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            vals.push(self.to_value(a).map_err(|e| VmError::api(format!("argument {}: {e}", i + 1)))?);
        }
        Ok(vals)
    }

    /// Reads results back to the host (each tensor counted as a device→host copy).
    #[inline]
    pub(crate) fn results_to_host(&self, out: Vec<Value>) -> Result<Vec<HostValue>, VmError> {
        if out.is_empty() {
            return Ok(Vec::new());
        }
        let mut host = Vec::with_capacity(out.len());
        for v in &out {
            let h = to_host(v).map_err(|e| VmError::api(format!("reading the results: {e}")))?;
            if let HostValue::Tensor(t) = &h {
                self.count_copy(Direction::DeviceToHost, t.data.len() as u64);
            }
            host.push(h);
        }
        Ok(host)
    }

    /// The module, to borrow beside `&mut self`: the interpreter needs both at once, and
    /// cloning the `Arc` instead costs two atomic operations per invocation (a third of an
    /// empty one). Dereferencing the pointer is sound while `self` is borrowed: `module`
    /// is private, set only by the constructors and never reassigned, and the `Arc` keeps
    /// the module alive and unchanged for as long as `self` lives. Callers must not let the
    /// reference outlive the method that made it.
    #[inline]
    pub(crate) fn module_ptr(&self) -> *const Module {
        Arc::as_ptr(&self.module)
    }

    #[inline]
    pub(crate) fn func_id(&self, func: &str) -> Result<FuncId, VmError> {
        let found = self.func_names.find(&self.module, func);
        found.ok_or_else(|| self.no_such_function(func))
    }

    #[cold]
    pub(crate) fn no_such_function(&self, func: &str) -> VmError {
        let names: Vec<String> = self.module.funcs.values().map(|f| format!("@{}", f.name)).collect();
        VmError::api(format!(
            "no function @{} in module `{}`; it has: {}",
            func.trim_start_matches('@'),
            self.module.name,
            names.join(", ")
        ))
    }

    /// The arguments of `id` from host values for its non-storage parameters: each storage
    /// parameter `i` is `storages[i]` when given, else a new storage of the size the code
    /// needs on device 0; placed tensors are written straight into their storage.
    pub fn host_args(
        &mut self,
        id: FuncId,
        args: &[HostValue],
        storages: &[Option<Value>],
    ) -> Result<Vec<Value>, VmError> {
        let module = self.module.clone();
        let f = module.func(id).ok_or_else(|| VmError::api(format!("no function with index {}", id.0)))?;
        let needs = self.storage_needs(id);
        let mut vals = vec![Value::Null; f.params.len()];
        for (i, t) in f.params.iter().enumerate() {
            if let Some(Some(v)) = storages.get(i) {
                vals[i] = v.clone();
            } else if matches!(t, Type::Storage) {
                let bytes = needs[i].ok_or_else(|| {
                    VmError::api(format!(
                        "@{}: the code does not fix the size of storage parameter %{}; pass it (Vm::invoke_values)",
                        f.name,
                        f.reg_name(Reg(i as u32))
                    ))
                })?;
                vals[i] = self.new_storage(0, bytes)?;
            }
        }
        let mut host = args.iter();
        for (i, t) in f.params.iter().enumerate() {
            if matches!(t, Type::Storage) {
                continue;
            }
            let Some(a) = host.next() else { break };
            let what = || format!("argument %{} of @{}", f.reg_name(Reg(i as u32)), f.name);
            vals[i] = match (f.placement(i as u32), a, &vals) {
                (Some(p), HostValue::Tensor(ht), vals) => {
                    if !crate::ir::verify::type_admits(t, ht.dtype, &ht.shape) {
                        return Err(VmError::api(format!(
                            "{}: expected {t}, found {}{:?}",
                            what(),
                            ht.dtype,
                            ht.shape
                        )));
                    }
                    let Value::Storage(st) = &vals[p.storage as usize] else {
                        return Err(VmError::api(format!("{}: its storage parameter is not a storage", what())));
                    };
                    let view = self
                        .placed_view(st, p.offset, ht.dtype, &ht.shape)
                        .map_err(|e| VmError::api(format!("{}: {e}", what())))?;
                    write_view(&view, &ht.data).map_err(|e| VmError::api(format!("{}: {e}", what())))?;
                    self.count_copy(Direction::HostToDevice, ht.data.len() as u64);
                    Value::Tensor(view)
                }
                _ => self.to_value(a).map_err(|e| VmError::api(format!("{}: {e}", what())))?,
            };
        }
        Ok(vals)
    }

    /// A buffer view of `st` at `offset` (bounds checked).
    pub(crate) fn placed_view(
        &self,
        st: &Shared<Storage>,
        offset: u64,
        dtype: crate::ir::types::DType,
        shape: &[i64],
    ) -> Result<Shared<View>, String> {
        let bytes = crate::ir::types::dense_bytes(dtype, shape).ok_or("the tensor's size overflows")?;
        if offset.checked_add(bytes).is_none_or(|end| end > st.size) {
            return Err(format!(
                "{bytes} bytes at offset {offset} do not fit in storage #{} of {} bytes",
                st.id, st.size
            ));
        }
        View::make(st.clone(), ViewSpec::buffer(offset, dtype, shape, bytes), Site::API, None)
    }

    /// Bytes each storage parameter of `id` needs, by parameter index
    /// ([`crate::interp::io::storage_requirements`] on device 0's capabilities).
    pub fn storage_needs(&mut self, id: FuncId) -> Rc<[Option<u64>]> {
        let i = id.index();
        if self.storage_needs.len() < self.module.funcs.len() {
            self.storage_needs.resize(self.module.funcs.len(), None);
        }
        if let Some(Some(n)) = self.storage_needs.get(i) {
            return n.clone();
        }
        let n: Rc<[Option<u64>]> = match self.module.funcs.get(id) {
            Some(f) => storage_requirements(&self.module, f, &self.rt.devices[0].caps).into(),
            None => Rc::from(Vec::new()),
        };
        if let Some(slot) = self.storage_needs.get_mut(i) {
            *slot = Some(n.clone());
        }
        n
    }

    /// A storage the caller owns, to pass as a storage parameter: `bytes` on `device`.
    pub fn new_storage(&self, device: u8, bytes: u64) -> Result<Value, VmError> {
        let st = Storage::alloc(&self.rt, device, bytes.max(1), 0, Scope::Global, Site::API, false)
            .map_err(|e| VmError::api(e.to_string()))?;
        Ok(Value::Storage(st))
    }

    /// A host tensor copied into a new storage on device 0 (counted as host→device).
    pub fn upload(&self, t: &HostTensor) -> Result<Value, VmError> {
        self.to_value(&HostValue::Tensor(t.clone())).map_err(VmError::api)
    }

    /// A tensor value read back to the host (counted as device→host).
    pub fn download(&self, v: &Value) -> Result<HostTensor, VmError> {
        match v {
            Value::Slice(..) => self.download(&v.materialized().map_err(VmError::api)?),
            Value::Tensor(t) => {
                let h = read_view(t).map_err(|e| VmError::api(*e))?;
                self.count_copy(Direction::DeviceToHost, h.data.len() as u64);
                Ok(h)
            }
            other => Err(VmError::api(format!("expected a tensor, found {}", other.describe()))),
        }
    }

    pub(crate) fn count_copy(&self, dir: Direction, bytes: u64) {
        self.rt.counters.count_copy(dir, bytes);
    }

    /// Copies a host value into the VM (tensors into a fresh storage on device 0).
    pub fn to_value(&self, v: &HostValue) -> Result<Value, String> {
        Ok(match v {
            HostValue::Int(i) => Value::Int(*i),
            HostValue::Float(f) => Value::Float(*f),
            HostValue::Shape(s) => Value::Shape(s.iter().copied().collect()),
            HostValue::Storage { .. } => return Err("a storage cannot be passed from the host".into()),
            HostValue::Tensor(t) => {
                let bytes = t.data.len() as u64;
                let st = Storage::alloc(&self.rt, 0, bytes, 0, Scope::Global, Site::API, false)
                    .map_err(|e| e.to_string())?;
                let view = View::make(st, ViewSpec::buffer(0, t.dtype, &t.shape, bytes), Site::API, None)?;
                write_view(&view, &t.data).map_err(|e| *e)?;
                self.count_copy(Direction::HostToDevice, bytes);
                Value::Tensor(view)
            }
        })
    }

    /// Invokes a function with VM values: checks arity and declared types, binds caller
    /// storages and tensors ([`crate::interp::io`]), then runs. [`Vm::last_io`] reports the copies.
    pub fn invoke_values(&mut self, id: FuncId, args: Vec<Value>) -> Result<Vec<Value>, VmError> {
        self.begin_invocation();
        // SAFETY: see `module_ptr`; `m` does not outlive this call.
        let m = unsafe { &*self.module_ptr() };
        // The plain case in line, the rest through a call: all of `bind_and_run` inlined
        // here saved 17 instructions but ran 4 ns slower per empty invocation
        // (docs/performance.md).
        let r = if Self::is_plain(m, id, &args) {
            // Nothing to drop: skip the call into the drop loop.
            std::mem::forget(args);
            self.run_plain(m, id).map(|()| self.take_returned())
        } else {
            self.bind_and_run(m, id, args)
        };
        let done = self.end_invocation();
        r.and_then(|v| done.map(|()| v))
    }

    /// Nothing to check or bind: a function without parameters called without arguments.
    #[inline(always)]
    pub(crate) fn is_plain(m: &Module, id: FuncId, args: &[Value]) -> bool {
        args.is_empty() && m.funcs.get(id).is_some_and(|f| f.params.is_empty())
    }

    #[inline(never)]
    pub(crate) fn bind_and_run(&mut self, m: &Module, id: FuncId, args: Vec<Value>) -> Result<Vec<Value>, VmError> {
        let (args, subs) = self.prepare_args(m, id, args)?;
        let base = self.regs.len();
        let depth = self.frames.len();
        let r = self.run(m, id, args);
        // On success `exec` has already popped the frame; after an error it has not.
        self.truncate_regs(base);
        if self.frames.len() > depth {
            self.frames.truncate(depth);
        }
        r?;
        let out = self.take_returned();
        self.finish_results(m, id, &subs, out)
    }

    /// Runs `id`, which takes no parameters: no arguments to bind, no results to copy back.
    #[inline(always)]
    pub(crate) fn run_plain(&mut self, m: &Module, id: FuncId) -> Result<(), VmError> {
        let base = self.regs.len();
        let depth = self.frames.len();
        self.push_frame(m, id);
        let r = self.run_from(m, depth);
        if r.is_err() {
            self.truncate_regs(base);
            self.frames.truncate(depth);
        }
        r
    }

    /// Copies results out of replaced storages ([`crate::interp::io`]).
    #[inline]
    pub(crate) fn finish_results(
        &mut self,
        m: &Module,
        id: FuncId,
        subs: &[Substitute],
        mut out: Vec<Value>,
    ) -> Result<Vec<Value>, VmError> {
        if !subs.is_empty() {
            let f = &m.funcs[id];
            self.copy_back(f, subs, &mut out).map_err(|e| VmError::api(format!("@{}: {e}", f.name)))?;
        }
        Ok(out)
    }

    /// Checks the arity and declared types of the arguments of `id`.
    #[inline]
    pub(crate) fn check_args(&self, id: FuncId, args: &[Value]) -> Result<(), VmError> {
        let f = self.module.func(id).ok_or_else(|| VmError::api(format!("no function with index {}", id.0)))?;
        if args.len() != f.params.len() {
            return Err(VmError::api(format!("@{} takes {} arguments, found {}", f.name, f.params.len(), args.len())));
        }
        for (i, (v, t)) in args.iter().zip(&f.params).enumerate() {
            if let Err(m) = self.signatures.check(&self.rt, id.index(), i, v, t) {
                return Err(VmError::api(format!("argument {} of @{}: {}", i + 1, f.name, named(m, f, t))));
            }
        }
        let syms = self.signatures.syms(id.index());
        if !syms.is_empty() {
            crate::interp::signature::bind_symbols(f, syms, |i| args.get(i), |_, _| {}).map_err(VmError::api)?;
        }
        Ok(())
    }

    /// Checks arity and types and binds the arguments of `id` ([`crate::interp::io`]).
    #[inline]
    pub(crate) fn prepare_args(
        &mut self,
        m: &Module,
        id: FuncId,
        mut args: Vec<Value>,
    ) -> Result<(Vec<Value>, Vec<Substitute>), VmError> {
        self.check_args(id, &args)?;
        let f = &m.funcs[id];
        if args.is_empty() || self.signatures.binds_nothing(&self.rt, id.index(), &args) {
            return Ok((args, Vec::new()));
        }
        let subs = self
            .bind(id, f, &mut args)
            .map_err(|e| VmError::api(format!("binding the arguments of @{}: {e}", f.name)))?;
        Ok((args, subs))
    }

    /// Uses the caller's storages and tensors in place where the function can, and
    /// otherwise replaces them (one copy for a tensor), recording each fallback.
    pub(crate) fn bind(&mut self, id: FuncId, f: &Function, args: &mut [Value]) -> Result<Vec<Substitute>, String> {
        let mut subs = Vec::new();
        let has_storage = f.params.iter().any(|t| matches!(t, Type::Storage));
        // An `Rc` of the runtime, not a copy of the name: binding runs on every invocation and
        // the name is only needed in a fallback's message.
        let rt = self.rt.clone();
        let dev0 = &rt.devices[0].caps.name;
        if has_storage {
            let needs = self.storage_needs(id);
            for i in 0..args.len() {
                let Value::Storage(st) = &args[i] else { continue };
                let need = needs.get(i).copied().flatten();
                let reason = if !st.in_runtime(&self.rt) {
                    Some(format!("storage #{} belongs to another runtime (another OpenCL context)", st.id))
                } else if st.device != 0 {
                    Some(format!(
                        "storage #{} is on device {} (`{}`); @{} runs on device 0 (`{dev0}`)",
                        st.id,
                        st.device,
                        st.caps().name,
                        f.name
                    ))
                } else {
                    None
                };
                let small = need.filter(|&n| st.size < n);
                let reason = match (reason, small) {
                    (None, None) => continue,
                    (Some(r), None) => r,
                    (r, Some(n)) => {
                        let small = format!("storage #{} holds {} bytes; @{} needs {n}", st.id, st.size, f.name);
                        r.map_or(small.clone(), |r| format!("{r}, and {small}"))
                    }
                };
                let bytes = need.unwrap_or(st.size);
                let ours = Storage::alloc(&self.rt, 0, bytes.max(1), 0, Scope::Global, Site::API, false)
                    .map_err(|e| e.to_string())?;
                self.fallback(
                    format!("@{} %{}", f.name, f.reg_name(Reg(i as u32))),
                    format!(
                        "{reason}: the VM uses its own storage #{}{}",
                        ours.id,
                        if small.is_none() { " and copies the results back" } else { "; the results stay there" }
                    ),
                    0,
                );
                subs.push(Substitute { caller: st.clone(), ours: ours.clone(), copy_back: small.is_none() });
                args[i] = Value::Storage(ours);
            }
        }
        for i in 0..args.len() {
            let Value::Tensor(v) = &args[i] else { continue };
            // Named only for a fallback's report: formatting it for every argument of every
            // invocation was a fifth of a small model's no-op inference.
            let what = || format!("@{} %{}", f.name, f.reg_name(Reg(i as u32)));
            // Where the tensor cannot be read: another runtime's memory, or another device.
            let unreadable = if !v.storage.in_runtime(&self.rt) {
                Some("it belongs to another runtime (another OpenCL context)".to_string())
            } else if v.storage.device != 0 && has_storage {
                Some(format!(
                    "it is on device {} (`{}`); @{} runs on device 0 (`{dev0}`)",
                    v.storage.device,
                    v.storage.caps().name,
                    f.name
                ))
            } else {
                None
            };
            let (target, reason) = match (f.placement(i as u32), unreadable) {
                (Some(p), unreadable) => {
                    let Some(Value::Storage(st)) = args.get(p.storage as usize) else { continue };
                    let sname = f.reg_name(Reg(p.storage));
                    let reason = if let Some(r) = unreadable {
                        r
                    } else if !Shared::ptr_eq(&v.storage, st) {
                        // Elsewhere, it cannot be overwritten by the function's tensors in
                        // %sname: read it in place; only the planned saving is lost.
                        self.fallback(
                            what(),
                            format!(
                                "it is in storage #{}, not in %{sname} (storage #{}) at offset {}: read where it is; the {} bytes planned for it in %{sname} stay unused",
                                v.storage.id,
                                st.id,
                                p.offset,
                                v.numel() * v.dtype.size() as u64
                            ),
                            0,
                        );
                        continue;
                    } else if v.offset != p.offset {
                        format!(
                            "it is at offset {} of %{sname}, planned at offset {}: the function's tensors would overwrite it",
                            v.offset, p.offset
                        )
                    } else if v.scope != Scope::Global {
                        format!("it must be a \"global\" buffer view, but it is a \"{}\" view", v.scope)
                    } else {
                        continue;
                    };
                    (Some((st.clone(), p.offset)), reason)
                }
                (None, Some(r)) => (None, r),
                (None, None) => continue,
            };
            let copy = match target {
                Some((st, off)) => self.placed_view(&st, off, v.dtype, &v.shape)?,
                None => {
                    let bytes = v.numel() * v.dtype.size() as u64;
                    let st = Storage::alloc(&self.rt, 0, bytes, 0, Scope::Global, Site::API, false)
                        .map_err(|e| e.to_string())?;
                    View::make(st, ViewSpec::buffer(0, v.dtype, &v.shape, bytes), Site::API, None)?
                }
            };
            let n = copy_view(v, &copy)?;
            self.count_copy(Direction::DeviceToDevice, n);
            self.fallback(what(), reason, n);
            args[i] = Value::Tensor(copy);
        }
        Ok(subs)
    }

    /// Copies results that live in a replaced storage back into the caller's.
    pub(crate) fn copy_back(&mut self, f: &Function, subs: &[Substitute], out: &mut [Value]) -> Result<(), String> {
        for (i, v) in out.iter_mut().enumerate() {
            let Value::Tensor(t) = &*v else { continue };
            let Some(s) = subs.iter().find(|s| Shared::ptr_eq(&t.storage, &s.ours)) else { continue };
            if !s.copy_back || t.scope != Scope::Global {
                continue;
            }
            let dst = self.placed_view(&s.caller, t.offset, t.dtype, &t.shape)?;
            let n = copy_view(t, &dst)?;
            self.count_copy(Direction::DeviceToDevice, n);
            self.fallback(
                format!("@{} result {i}", f.name),
                format!(
                    "computed in the VM's storage #{}, then moved into the caller's storage #{}",
                    s.ours.id, s.caller.id
                ),
                n,
            );
            *v = Value::Tensor(dst);
        }
        Ok(())
    }

    #[cold]
    pub(crate) fn fallback(&mut self, what: String, reason: String, copied_bytes: u64) {
        let fb = Fallback { what, reason, copied_bytes };
        log::debug!("{fb}");
        self.io.fallbacks.push(fb);
    }
}

/// A type check's message with the type's symbols by name (`f32[%n, 3]`, not `%r2`).
#[cold]
pub(crate) fn named(msg: String, f: &crate::ir::module::Function, t: &Type) -> String {
    if t.symbols().next().is_none() {
        return msg;
    }
    msg.replacen(&t.to_string(), &f.type_text(t), 1)
}
