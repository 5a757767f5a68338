//! The memory instructions: `alloc_storage` and `alloc_tensor` (buffer and image views),
//! in their general forms and the specialised forms of constant size and geometry.

use super::sites::*;
use super::state::*;
use super::vm::Vm;
use crate::interp::specialize::NO_SLICE;
use crate::ir::bytecode::EntityRef;
use crate::ir::bytecode::{Arg, Instr, Reg};
use crate::ir::module::{Function, Module};
use crate::ir::types::Scope;
use crate::runtime::memory::{AllocError, Site, Storage, View, ViewSpec};
use crate::runtime::value::Value;
use smallvec::SmallVec;

impl Vm {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn alloc_storage(
        &self,
        m: &Module,
        f: &Function,
        base: usize,
        size: Arg,
        align: Arg,
        device: u8,
        scope: Scope,
        site: Site,
    ) -> Step<Value> {
        let sz = self.read_int(m, f, base, size)?;
        if sz < 0 {
            return fault(format!("storage size must be >= 0, found {}", self.arg_name(f, size, sz)));
        }
        let al = self.read_int(m, f, base, align)?;
        if al < 0 || (al != 0 && !(al as u64).is_power_of_two()) {
            return fault(format!("alignment must be a power of two, found {}", self.arg_name(f, align, al)));
        }
        match Storage::alloc(&self.rt, device, sz as u64, al as u64, scope, site, false) {
            Ok(s) => Ok(Value::Storage(s)),
            Err(e) => Err(self.alloc_fault(e)),
        }
    }

    /// The fault of a refused allocation; when memory ran out, with a note on what the
    /// stack holds.
    pub(crate) fn alloc_fault(&self, e: AllocError) -> Box<Fault> {
        let memory = matches!(e, AllocError::LiveLimit { .. } | AllocError::OutOfMemory { .. });
        let notes = if memory { self.stack_memory_note().into_iter().collect() } else { Vec::new() };
        Box::new(Fault { message: e.to_string(), notes })
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn alloc_tensor(
        &self,
        m: &Module,
        f: &Function,
        base: usize,
        storage: Reg,
        args: u32,
        dtype: crate::ir::types::DType,
        scope: Scope,
        ndim: u8,
        site: Site,
    ) -> Step<Value> {
        let st = match &self.regs[base + storage.index()] {
            Value::Storage(s) => s.clone(),
            _ => {
                let v = self.read_reg(f, base, storage)?;
                return fault(format!("alloc_tensor needs a storage, found {}", v.describe()));
            }
        };
        let list = &f.args[args as usize..][..ndim as usize + 1];
        let offset = self.read_int(m, f, base, list[0])?;
        if offset < 0 {
            return fault(format!("view offset must be >= 0, found {}", self.arg_name(f, list[0], offset)));
        }
        let mut dims: SmallVec<[i64; 4]> = SmallVec::new();
        for a in &list[1..] {
            let d = self.read_int(m, f, base, *a)?;
            if d < 0 {
                return fault(format!("a view dimension must be >= 0, found {}", self.arg_name(f, *a, d)));
            }
            dims.push(d);
        }
        let caps = st.caps();
        let offset = offset as u64;
        let shape_txt = || format!("{dtype}{:?}", &dims[..]);
        let (image, bytes) = if scope.is_texture() {
            match image_geometry(caps, scope, dtype, &dims, offset) {
                Ok((layout, bytes)) => (Some(layout), bytes),
                Err(e) => return fault(e),
            }
        } else {
            if !offset.is_multiple_of(dtype.size() as u64) {
                return fault(format!(
                    "view offset {offset} is not a multiple of the {dtype} element size ({})",
                    dtype.size()
                ));
            }
            match dims.iter().try_fold(dtype.size() as u64, |a, &d| a.checked_mul(d as u64)) {
                Some(b) => (None, b),
                None => return fault(format!("view {} is too large", shape_txt())),
            }
        };
        let end = offset.checked_add(bytes);
        if end.is_none_or(|e| e > st.size) {
            let mut notes = vec![format!("storage #{} was allocated with {} bytes", st.id, st.size)];
            if let Some(l) = image {
                notes.push(format!(
                    "a {}x{} image with rows padded to {} texels of {} bytes takes {bytes} bytes",
                    l.width, l.height, l.pitch_px, l.bytes_per_texel
                ));
            }
            return Err(Box::new(Fault {
                message: format!(
                    "view {} ({bytes} bytes at offset {offset}) ends past the end of %{} ({} bytes)",
                    shape_txt(),
                    f.reg_name(storage),
                    st.size
                ),
                notes,
            }));
        }
        match View::make(st, ViewSpec { offset, dtype, shape: &dims, scope, image, bytes }, site, None) {
            Ok(v) => Ok(Value::Tensor(v)),
            Err(e) => fault(e),
        }
    }

    /// A storage of constant size and alignment ([`Op::AllocStorageConst`]) in the steady
    /// state: a parked one revived. `None` when there is none to revive or a limit would
    /// be passed: the general instruction then runs (and reports any error).
    /// Writes the register itself: a returned value would pass through memory.
    #[inline]
    pub(crate) fn alloc_storage_const(
        &mut self,
        base: usize,
        x: crate::interp::specialize::StorageArgs,
        fid: usize,
        at: usize,
    ) -> bool {
        let Some(c) = self.const_allocs.get(x.alloc as usize) else { return false };
        match Storage::alloc_const(&self.rt, c, self.site(fid, at)) {
            Some(s) => {
                self.set_fresh(base, x.dst, Value::Storage(s));
                true
            }
            None => false,
        }
    }

    /// Runs instruction `at` of function `fid` as it is in the bytecode: the general form
    /// of a specialised `alloc_storage` whose fast path could not finish.
    #[cold]
    #[inline(never)]
    pub(crate) fn general_alloc_storage(
        &mut self,
        m: &Module,
        f: &Function,
        base: usize,
        fid: usize,
        at: usize,
    ) -> Step<()> {
        match f.code.get(at) {
            Some(&Instr::AllocStorage { dst, size, align, device, scope }) => self
                .alloc_storage(m, f, base, size, align, device, scope, self.site(fid, at))
                .map(|v| self.set(base, dst, v)),
            other => {
                fault(format!("internal: instruction {at} is {other:?}, not the alloc_storage it was specialised from"))
            }
        }
    }

    /// A buffer view of constant geometry ([`Op::AllocBufferConst`]): checked when the VM
    /// was made, so only whether it fits its storage is left. Writes the register and
    /// returns `true`; `false` when it does not fit, `%storage` holds no storage, or the
    /// device refuses the view: the general instruction then runs and reports the error.
    /// Forced into `exec`: out of line its call was 9 of the 51 instructions of a compiled
    /// model's view (an older loop's `nop` was slower with it in line; today's `nop` count
    /// is the same either way).
    #[inline(always)]
    pub(crate) fn alloc_buffer_const(
        &mut self,
        base: usize,
        x: crate::interp::specialize::BufferArgs,
        fid: usize,
        at: usize,
    ) -> bool {
        let Value::Storage(st) = self.reg(base, x.storage) else { return false };
        let Some(g) = self.buffer_geoms.get(x.geom as usize) else { return false };
        if g.end > st.size {
            return false;
        }
        // Tracking lists every view in the ledger, so it needs view objects.
        if g.slice == NO_SLICE || !st.in_host_memory() || self.rt.objects.track.get() {
            return self.buffer_view_object(base, x, fid, at);
        }
        crate::runtime::counters::bump(&self.rt.objects.views_created, 1);
        let v = Value::Slice(g.slice, st.clone());
        self.set_fresh(base, x.dst, v);
        true
    }

    /// An image view of constant geometry ([`Op::AllocImageConst`]): its layout on each
    /// device was checked when the VM was made, so only whether it fits its storage is
    /// left before the view is made. `false` when the device cannot make it, it does not
    /// fit, `%storage` holds no storage, or the device refuses the view: the general
    /// instruction then runs and reports the error.
    #[inline(never)]
    pub(crate) fn alloc_image_const(
        &mut self,
        base: usize,
        x: crate::interp::specialize::BufferArgs,
        fid: usize,
        at: usize,
    ) -> bool {
        let Value::Storage(st) = self.reg(base, x.storage) else { return false };
        let Some(v) = self.image_views.get(x.geom as usize) else { return false };
        let Some(Some(p)) = v.on_device.get(st.device as usize) else { return false };
        if p.end > st.size {
            return false;
        }
        // In host memory, as a buffer view: no object while nothing tracks objects.
        if p.slice != NO_SLICE && st.in_host_memory() && !self.rt.objects.track.get() {
            crate::runtime::counters::bump(&self.rt.objects.views_created, 1);
            let v = Value::Slice(p.slice, st.clone());
            self.set_fresh(base, x.dst, v);
            return true;
        }
        let g = &v.geom;
        let site = self.site(fid, at);
        match View::make(
            st.clone(),
            ViewSpec {
                offset: g.offset,
                dtype: g.dtype,
                shape: &g.shape,
                scope: g.scope,
                image: Some(p.layout),
                bytes: p.bytes,
            },
            site,
            None,
        ) {
            Ok(t) => {
                self.set(base, x.dst, Value::Tensor(t));
                true
            }
            Err(_) => false,
        }
    }

    /// [`Vm::alloc_buffer_const`] of a view that needs its object (on a device, or when
    /// tracked): out of line, so the slice's path keeps no stack frame. The site
    /// (instruction `at` of function `fid`) is looked up only here: a slice has none.
    #[inline(never)]
    pub(crate) fn buffer_view_object(
        &mut self,
        base: usize,
        x: crate::interp::specialize::BufferArgs,
        fid: usize,
        at: usize,
    ) -> bool {
        let (Some(Value::Storage(st)), Some(g)) =
            (self.regs.get(base + x.storage.index()), self.buffer_geoms.get(x.geom as usize))
        else {
            return false;
        };
        let (v, site) = (&g.view, self.site(fid, at));
        match View::make(st.clone(), ViewSpec::buffer(v.offset, v.dtype, &v.shape, v.bytes), site, Some(v.type_id)) {
            Ok(t) => {
                self.set(base, x.dst, Value::Tensor(t));
                true
            }
            Err(_) => false,
        }
    }

    /// Runs instruction `at` of function `fid` as it is in the bytecode: the general form
    /// of a specialised `alloc_tensor` whose fast path could not finish.
    #[cold]
    #[inline(never)]
    pub(crate) fn general_alloc_tensor(
        &mut self,
        m: &Module,
        f: &Function,
        base: usize,
        fid: usize,
        at: usize,
    ) -> Step<()> {
        match f.code.get(at) {
            Some(&Instr::AllocTensor { dst, storage, args, dtype, scope, ndim }) => self
                .alloc_tensor(m, f, base, storage, args, dtype, scope, ndim, self.site(fid, at))
                .map(|v| self.set(base, dst, v)),
            other => {
                fault(format!("internal: instruction {at} is {other:?}, not the alloc_tensor it was specialised from"))
            }
        }
    }
}
