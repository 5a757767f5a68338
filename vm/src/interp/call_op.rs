//! Operator calls: reading operands, checking them against inferred types (with the
//! per-site memo), and running the host, OpenCL-buffer or texture kernel; user OpenCL
//! kernel calls.

use super::sites::*;
use super::state::*;
use super::vm::Vm;
use crate::interp::exec::write_view;
use crate::ir::bytecode::{ArgKind, Instr, OpId};
use crate::ir::host_tensor::{ConstOperand, HostTensor, TensorMut, TensorRef};
use crate::ir::module::{Function, Module};
use crate::ir::types::Scope;
use crate::ops::{Attrs, TensorInfo};
use crate::runtime::backend::{Device, KernelValue, Operand, ViewKind};
use crate::runtime::memory::{Storage, View, ViewSpec};
use crate::runtime::shared::Shared;
use crate::runtime::value::Value;
use smallvec::SmallVec;
use std::cell::RefCell;
use std::rc::Rc;

/// The error for an operator call whose output view is in a constant, if any.
pub(crate) fn refuse_constant_outputs(def: &crate::ir::schema::OpDef, outputs: &[Option<Shared<View>>]) -> Step<()> {
    match outputs.iter().position(|v| v.as_ref().is_some_and(|v| v.storage.is_constant())) {
        Some(i) => fault(format!("@onnx.{} cannot write output {} into a constant", def.name, i + 1)),
        None => Ok(()),
    }
}

/// A user kernel runs in the process with no bounds on what it indexes, so its launch is
/// held to what its tensors can take: at most as many work-items as its largest tensor
/// argument has elements (one when it has none), which also bounds its run time. A
/// launch that overflows or exceeds that is a mistake in the program (e.g. a size in bytes
/// where elements were meant), refused before the kernel runs.
fn check_launch_size(kernel: &str, global: &[usize], tensors: &[&Shared<View>]) -> Step<()> {
    let largest = tensors.iter().map(|t| t.numel()).max().unwrap_or(0).max(1);
    let items = global.iter().try_fold(1u64, |n, &g| n.checked_mul(g as u64));
    match items {
        Some(n) if n <= largest => Ok(()),
        _ => fault(format!(
            "@cl.{kernel}: global {global:?} is {} work-items, more than the {largest} elements of its largest tensor \
             argument; a user kernel gets at most one work-item per element",
            items.map_or("more than 2^64".to_string(), |n| n.to_string())
        )),
    }
}

/// A buffer view's operand for an operator's device kernel.
fn buffer_operand<'v>(op: &str, v: &'v Shared<View>) -> Step<Operand<'v>> {
    match v.operand() {
        Some(o) if o.handle.kind == ViewKind::Buffer => Ok(o),
        _ => fault(format!(
            "@onnx.{op} takes buffer views on a device; {} is a texture view",
            Value::Tensor(v.clone()).describe()
        )),
    }
}

/// A device view's operand (of any kind).
fn device_operand(v: &Shared<View>) -> Result<Operand<'_>, String> {
    v.operand().ok_or_else(|| format!("internal: {} has no device handle", v.id))
}

/// One operator call's operands and attributes, as the paths that run it take them.
#[derive(Clone, Copy)]
pub(crate) struct OpCall<'a> {
    /// The device the operands live on; `None` on the host.
    pub(crate) dev: Option<&'a dyn Device>,
    pub(crate) op: OpId,
    pub(crate) def: &'a crate::ir::schema::OpDef,
    pub(crate) inputs: &'a [Option<Shared<View>>],
    pub(crate) outputs: &'a [Option<Shared<View>>],
    pub(crate) infos: &'a [Option<TensorInfo<'a>>],
    /// Host copies of the inputs the call reads on the host.
    pub(crate) host_in: &'a [Option<HostTensor>],
    pub(crate) attrs: &'a Attrs,
    /// The operator's in-place host kernel runs on the operands' memory ([`in_place`]):
    /// `host_in` holds only what inference reads.
    pub(crate) in_place: bool,
}

/// Whether a host operator call can run its in-place kernel: every operand a dense run of
/// host memory, every output given and writable, and no output overlapping an input or
/// another output (the kernel borrows the inputs shared and the outputs exclusively).
pub(crate) fn in_place(op: OpId, inputs: &[Option<Shared<View>>], outputs: &[Option<Shared<View>>]) -> bool {
    fn span(v: &View) -> Option<(usize, usize)> {
        if v.handle.is_some() || v.image.is_some() || !v.storage.in_host_memory() {
            return None;
        }
        let len = usize::try_from(v.numel() * v.dtype.size() as u64).ok()?;
        let start = (v.storage.host_ptr() as usize).checked_add(v.offset as usize)?;
        Some((start, start.checked_add(len)?))
    }
    let overlap = |a: (usize, usize), b: (usize, usize)| a.0 < b.1 && b.0 < a.1;
    if op.view_kernel().is_none() || outputs.is_empty() {
        return false;
    }
    let mut outs: SmallVec<[(usize, usize); 2]> = SmallVec::new();
    for v in outputs {
        match v.as_deref().filter(|v| !v.storage.is_constant()).and_then(span) {
            Some(o) if outs.iter().all(|&p| !overlap(p, o)) => outs.push(o),
            _ => return false,
        }
    }
    inputs.iter().flatten().all(|v| span(v).is_some_and(|i| outs.iter().all(|&o| !overlap(o, i))))
}

/// A host view's bytes in place.
///
/// # Safety
/// `v` is a dense host-memory view ([`in_place`] checked it) and no `&mut` to its bytes
/// lives as long as the slice.
unsafe fn host_bytes(v: &View) -> &[u8] {
    let len = (v.numel() * v.dtype.size() as u64) as usize;
    std::slice::from_raw_parts(v.storage.host_ptr().add(v.offset as usize), len)
}

/// [`host_bytes`], mutable.
///
/// # Safety
/// As for [`host_bytes`], and no other reference to these bytes lives as long as the slice.
#[allow(clippy::mut_from_ref)]
unsafe fn host_bytes_mut(v: &View) -> &mut [u8] {
    let len = (v.numel() * v.dtype.size() as u64) as usize;
    std::slice::from_raw_parts_mut(v.storage.host_ptr().add(v.offset as usize), len)
}

/// Host tensors whose buffers go back to the [`Scratch`] pool when dropped.
pub(crate) struct Recycled<'a, T: AsHostTensor> {
    pub(crate) pool: &'a RefCell<Scratch>,
    pub(crate) items: SmallVec<[T; 6]>,
}

pub(crate) trait AsHostTensor {
    fn take_data(&mut self) -> Vec<u8>;
}

impl AsHostTensor for HostTensor {
    fn take_data(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.data)
    }
}

impl AsHostTensor for Option<HostTensor> {
    fn take_data(&mut self) -> Vec<u8> {
        self.take().map(|t| t.data).unwrap_or_default()
    }
}

impl<'a, T: AsHostTensor> Recycled<'a, T> {
    pub(crate) fn new(pool: &'a RefCell<Scratch>) -> Self {
        Recycled { pool, items: SmallVec::new() }
    }
}

impl<T: AsHostTensor> std::ops::Deref for Recycled<'_, T> {
    type Target = SmallVec<[T; 6]>;
    fn deref(&self) -> &Self::Target {
        &self.items
    }
}

impl<T: AsHostTensor> std::ops::DerefMut for Recycled<'_, T> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.items
    }
}

impl<T: AsHostTensor> Drop for Recycled<'_, T> {
    fn drop(&mut self) {
        let mut pool = self.pool.borrow_mut();
        for t in self.items.iter_mut() {
            pool.give(t.take_data());
        }
    }
}

impl Vm {
    /// `call @cl.name(args) global [dims]`: a user OpenCL kernel. Tensors are passed as
    /// `__global` buffers, ints as `long`, floats as `float`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn kernel_call(
        &self,
        m: &Module,
        f: &Function,
        base: usize,
        kernel: u32,
        list: u32,
        ndims: u8,
        nargs: u16,
    ) -> Step<()> {
        let k = &m.kernels[kernel as usize];
        let items = &f.args[list as usize..][..nargs as usize + ndims as usize];
        let mut vals: SmallVec<[Value; 6]> = SmallVec::new();
        for a in &items[..nargs as usize] {
            vals.push(self.read(m, f, base, *a)?);
        }
        let mut global: SmallVec<[usize; 3]> = SmallVec::new();
        for a in &items[nargs as usize..] {
            let g = self.read_int(m, f, base, *a)?;
            if g < 0 {
                return fault(format!("@cl.{}: a global work size must be >= 0, found {g}", k.name));
            }
            global.push(g as usize);
        }
        let tensors: SmallVec<[&Shared<View>; 6]> =
            vals.iter().filter_map(|v| if let Value::Tensor(t) = v { Some(t) } else { None }).collect();
        check_launch_size(&k.name, &global, &tensors)?;
        let state = match tensors.first() {
            Some(t) => t.storage.device_state(),
            None => &self.rt.devices[0],
        };
        let Some(dev) = state.device() else {
            return fault(format!(
                "@cl.{} is an OpenCL kernel, but its tensors are on `{}`; run on an OpenCL device (--device opencl)",
                k.name, state.caps.name
            ));
        };
        let mut args: SmallVec<[KernelValue; 6]> = SmallVec::with_capacity(vals.len());
        for (i, v) in vals.iter().enumerate() {
            args.push(match v {
                Value::Tensor(t) => {
                    if !std::ptr::eq(t.storage.device_state(), state) {
                        return fault(format!("@cl.{}: argument {} is on another device", k.name, i + 1));
                    }
                    match t.handle {
                        Some(h) if h.kind == ViewKind::Buffer && h.offset == 0 => {
                            t.check_coherent_read().or_else(fault)?;
                            KernelValue::Buffer(h)
                        }
                        _ => {
                            return fault(format!(
                                "@cl.{}: argument {} must be a buffer view at offset 0 or at a sub-buffer-aligned offset ({} bytes on `{}`)",
                                k.name,
                                i + 1,
                                state.caps.mem_base_addr_align,
                                state.caps.name
                            ))
                        }
                    }
                }
                Value::Int(x) => KernelValue::Int(*x),
                Value::Float(x) => KernelValue::Float(*x),
                other => return fault(format!("@cl.{}: argument {} cannot be {}", k.name, i + 1, other.describe())),
            });
        }
        if self.kernels == Kernels::Noop {
            return Ok(());
        }
        dev.launch_user_kernel(&k.source, &k.entry, &args, &global)
            .or_else(|e| fault(format!("@cl.{}: {e}", k.name)))?;
        for t in tensors {
            t.record_write();
        }
        Ok(())
    }

    /// Runs an operator's kernel on the buffer views of a device (outputs already checked).
    pub(crate) fn op_call_device(&self, dev: &dyn Device, call: &OpCall) -> Step<()> {
        let OpCall { op, def, inputs, outputs, infos, attrs, .. } = *call;
        if !dev.has_op_kernel(op) {
            let name =
                &inputs.iter().chain(outputs).flatten().next().map(|v| v.storage.device_state().caps.name.clone());
            return fault(format!(
                "@onnx.{} has no kernel yet on `{}`; run it on the host device",
                def.name,
                name.as_deref().unwrap_or("?")
            ));
        }
        let operand = |v| buffer_operand(def.name, v);
        let mut ins: SmallVec<[Option<Operand>; 6]> = SmallVec::with_capacity(inputs.len());
        for v in inputs {
            ins.push(match v {
                Some(v) => {
                    v.check_coherent_read().or_else(fault)?;
                    Some(operand(v)?)
                }
                None => None,
            });
        }
        let mut outs: SmallVec<[Operand; 2]> = SmallVec::with_capacity(outputs.len());
        for v in outputs.iter().flatten() {
            outs.push(operand(v)?);
        }
        dev.call_op(op, &ins, infos, attrs, &outs).or_else(|e| fault(format!("@onnx.{}: {e}", def.name)))?;
        for v in outputs.iter().flatten() {
            v.record_write();
        }
        Ok(())
    }

    /// An operator call on blocked textures (`ops::blocked`): checked and inferred on the
    /// logical shapes; run by the texture kernels on OpenCL, and on the host by unblocking
    /// the textures, running the host kernel and blocking its output.
    pub(crate) fn op_call_blocked(&self, call: &OpCall, noop: bool) -> Step<()> {
        let OpCall { dev, def, inputs, outputs, infos, host_in, attrs, .. } = *call;
        use crate::ops::blocked;
        let name = def.name;
        let err = |e: String| fault(format!("@onnx.{name}: {e}"));
        let bx = |e: String| Box::new(Fault { message: format!("@onnx.{name}: {e}"), notes: vec![] });
        let all = inputs.iter().chain(outputs).flatten();
        if let Some(v) = all.clone().find(|v| v.scope.is_texture() && v.scope != Scope::Texture) {
            return err(format!(
                "operators take blocked `global.texture` views; {} has scope `{}`",
                Value::Tensor(v.clone()).describe(),
                v.scope
            ));
        }
        let textured = |v: &Option<Shared<View>>| v.as_ref().is_some_and(|v| v.scope == Scope::Texture);
        let tin: SmallVec<[bool; 6]> = inputs.iter().map(textured).collect();
        let tout: SmallVec<[Option<bool>; 3]> =
            outputs.iter().map(|v| v.as_ref().map(|v| v.scope == Scope::Texture)).collect();
        let shapes = blocked::infer(def, infos, &tin, &tout, attrs).map_err(bx)?;
        let Some(y) = outputs.first().and_then(Option::as_ref) else { return err("output 1 is required".into()) };
        if y.dtype != shapes.out.0 || y.shape[..] != shapes.out.1[..] {
            return err(format!(
                "output 1 is {}{:?} (blocked) for these inputs and attributes, but its view is {}{:?}",
                shapes.out.0,
                shapes.out.1,
                y.dtype,
                &y.shape[..]
            ));
        }
        if y.storage.is_constant() {
            return err("cannot write output 1 into a constant".into());
        }
        if noop {
            return Ok(());
        }
        let Some(dev) = dev else {
            let mut unblocked: SmallVec<[Option<HostTensor>; 6]> = SmallVec::new();
            for (h, l) in host_in.iter().zip(&shapes.logical_in) {
                unblocked.push(match (h, l) {
                    (Some(h), Some(l)) => Some(blocked::unblock(h, l[1]).map_err(bx)?),
                    _ => None,
                });
            }
            let refs: SmallVec<[Option<&HostTensor>; 6]> =
                unblocked.iter().zip(host_in).map(|(u, h)| u.as_ref().or(h.as_ref())).collect();
            let mut outs = Vec::with_capacity(shapes.logical_out.len());
            for (dtype, shape) in &shapes.logical_out {
                outs.push(HostTensor::zeros(*dtype, shape).map_err(bx)?);
            }
            (def.op.id().host_kernel().map_err(bx)?)(&refs, attrs, &mut outs).map_err(bx)?;
            let b = blocked::block(&outs[0]).map_err(bx)?;
            return write_view(y, &b.data).map_err(|e| Box::new(Fault { message: *e, notes: vec![] }));
        };
        self.op_call_blocked_device(dev, call, &shapes, y)
    }

    /// The device half of [`Vm::op_call_blocked`]: the texture kernel on the device.
    fn op_call_blocked_device(
        &self,
        dev: &dyn Device,
        call: &OpCall,
        shapes: &crate::ir::operators::blocked::BlockedCall,
        y: &Shared<View>,
    ) -> Step<()> {
        let OpCall { op, def, inputs, infos, attrs, .. } = *call;
        let name = def.name;
        let err = |e: String| fault(format!("@onnx.{name}: {e}"));
        let bx = |e: String| Box::new(Fault { message: format!("@onnx.{name}: {e}"), notes: vec![] });
        let operand = |v| device_operand(v).map_err(bx);
        let y_op = operand(y)?;
        let mut ins: SmallVec<[Option<(Operand, bool)>; 6]> = SmallVec::with_capacity(inputs.len());
        for (v, l) in inputs.iter().zip(&shapes.logical_in) {
            let Some(v) = v else {
                ins.push(None);
                continue;
            };
            v.check_coherent_read().or_else(fault)?;
            let o = operand(v)?;
            ins.push(Some(match l {
                Some(shape) => {
                    if o.handle.mem == y_op.handle.mem {
                        return err(
                            "an input and the output are the same image; texture kernels cannot work in place".into()
                        );
                    }
                    (Operand { shape, ..o }, true)
                }
                None => {
                    if o.handle.kind != ViewKind::Buffer {
                        return err(format!("input {} is not a buffer view on the device", v.id));
                    }
                    (o, false)
                }
            }));
        }
        let out = Operand { shape: &shapes.logical_out[0].1, ..y_op };
        dev.call_op_blocked(op, &ins, infos, attrs, out).map_err(bx)?;
        y.record_write();
        Ok(())
    }

    /// The tensors of an operator call's operands (`None` for `none`).
    fn op_operands(
        &self,
        m: &Module,
        f: &Function,
        base: usize,
        def: &crate::ir::schema::OpDef,
        items: &[crate::ir::bytecode::Arg],
    ) -> Step<SmallVec<[Option<Shared<View>>; 6]>> {
        let mut views: SmallVec<[Option<Shared<View>>; 6]> = SmallVec::new();
        for a in items {
            views.push(match a.kind() {
                ArgKind::None => None,
                _ => match self.read(m, f, base, *a)? {
                    Value::Tensor(t) => Some(t),
                    v => return fault(format!("@onnx.{} expects tensors, found {}", def.name, v.describe())),
                },
            });
        }
        Ok(views)
    }

    /// `%outputs = call @onnx.Name(inputs) { attrs }`: infers the output types from the
    /// actual inputs (reading the values that decide shapes), allocates each output from
    /// the pool of the inputs' device (the first device when there are no tensor inputs)
    /// and runs the kernel. Returns the new tensors for the destinations.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn op_call_alloc(
        &self,
        m: &Module,
        f: &Function,
        base: usize,
        site: crate::runtime::memory::Site,
        op: OpId,
        list: u32,
        attrs: u32,
        ndst: u8,
        nin: u16,
    ) -> Step<SmallVec<[Shared<View>; 2]>> {
        let def = op.def();
        let empty = Attrs::default();
        let attrs = if attrs == 0 { &empty } else { &m.attrs[attrs as usize - 1] };
        let items = &f.args[list as usize..][..ndst as usize + nin as usize];
        let inputs = self.op_operands(m, f, base, def, &items[ndst as usize..])?;
        let mut first: Option<&View> = None;
        for v in inputs.iter().flatten() {
            if first.is_some_and(|f| f.storage.device != v.storage.device) {
                return fault(format!(
                    "@onnx.{}: tensors on different devices (`{}` and others); copy them to one device first",
                    def.name,
                    v.storage.device_state().caps.name
                ));
            }
            if v.scope.is_texture() {
                return fault(format!(
                    "@onnx.{}: an operator call that allocates its outputs takes buffer views; {} is a texture view",
                    def.name,
                    Value::Tensor(v.clone()).describe()
                ));
            }
            first = first.or(Some(v));
        }
        let device = first.map_or(0, |v| v.storage.device);
        let dev = first.and_then(|v| v.storage.device_state().device());
        let noop = self.kernels == Kernels::Noop;
        let io_err = |e: Box<String>| Box::new(Fault { message: *e, notes: vec![] });
        let mut host_in: Recycled<Option<HostTensor>> = Recycled::new(&self.scratch);
        host_in.resize_with(inputs.len(), || None);
        // Operators whose output shapes depend on their data read every input, whatever its size.
        let whole = crate::ir::operators::datadep::reads_whole_inputs(def.op);
        for (slot, v) in host_in.iter_mut().zip(&inputs) {
            match v {
                Some(v) if (dev.is_none() && !noop) || whole || inference_reads_value(v) => {
                    *slot = Some(self.read_recycled(v).map_err(io_err)?)
                }
                _ => {}
            }
        }
        let infos: SmallVec<[Option<TensorInfo>; 6]> = inputs
            .iter()
            .zip(host_in.iter())
            .map(|(v, h)| v.as_ref().map(|v| TensorInfo { dtype: v.dtype, shape: &v.shape, value: h.as_ref() }))
            .collect();
        let inferred = (def.infer)(&infos, attrs).or_else(|e| fault(format!("@onnx.{}: {e}", def.name)))?;
        if inferred.len() < ndst as usize {
            return fault(format!(
                "@onnx.{} produces {} outputs here, but the call assigns {}",
                def.name,
                inferred.len(),
                ndst
            ));
        }
        let mut outputs: SmallVec<[Option<Shared<View>>; 2]> = SmallVec::new();
        for (dtype, shape) in &inferred[..ndst as usize] {
            let Some(bytes) = crate::ir::types::dense_bytes(*dtype, shape) else {
                return fault(format!("@onnx.{}: output {dtype}{shape:?} is too large", def.name));
            };
            // A storage has at least one byte (OpenCL has no empty buffers).
            let st = Storage::alloc(&self.rt, device, bytes.max(1), 0, Scope::Global, site, false)
                .map_err(|e| self.alloc_fault(e))?;
            outputs.push(Some(View::make(st, ViewSpec::buffer(0, *dtype, shape, bytes), site, None).or_else(fault)?));
        }
        if !noop {
            let call = OpCall {
                dev,
                op,
                def,
                inputs: &inputs,
                outputs: &outputs,
                infos: &infos,
                host_in: &host_in,
                attrs,
                // The host kernel reads the copies in `host_in`.
                in_place: false,
            };
            self.run_op(&call, &inferred)?;
        }
        Ok(outputs.into_iter().flatten().collect())
    }

    /// `call @onnx.Name(inputs) -> (outputs) { attrs }`: infers the output types from the
    /// inputs, checks them against the output views, then runs the kernel.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn op_call(
        &self,
        m: &Module,
        f: &Function,
        base: usize,
        site: u32,
        op: OpId,
        list: u32,
        attrs: u32,
        nout: u8,
        nin: u16,
    ) -> Step<()> {
        let items = &f.args[list as usize..][..nin as usize + nout as usize];
        let slot = site as usize;
        let def = op.def();
        let empty = Attrs::default();
        let attrs = if attrs == 0 { &empty } else { &m.attrs[attrs as usize - 1] };
        let views = self.op_operands(m, f, base, def, items)?;
        let (inputs, outputs) = views.split_at(nin as usize);
        // One pass over the operands: their device, whether any is an image, and whether
        // inference must read a (non-constant, small) input's value.
        let mut first: Option<&View> = None;
        let (mut textured, mut reads_values) = (false, false);
        for (i, v) in views.iter().enumerate() {
            let Some(v) = v else { continue };
            match first {
                None => first = Some(v),
                Some(f) if f.storage.device != v.storage.device => {
                    return fault(format!(
                        "@onnx.{}: tensors on different devices (`{}` and others); copy them to one device first",
                        def.name,
                        v.storage.device_state().caps.name
                    ))
                }
                Some(_) => {}
            }
            textured |= v.scope.is_texture();
            reads_values |= i < nin as usize && inference_reads_value(v) && !v.storage.is_constant();
        }
        let noop = self.kernels == Kernels::Noop;
        // With no-op kernels, a buffer call whose inference reads no values needs only the
        // comparison with what this site saw before: no host copies, no scratch buffers.
        if noop && !textured && !reads_values {
            let hit = self
                .op_memo
                .borrow()
                .get(slot)
                .and_then(Option::as_ref)
                .is_some_and(|o| o.matches(inputs, &[], outputs));
            if hit {
                return refuse_constant_outputs(def, outputs);
            }
        }
        let dev = first.and_then(|v| v.storage.device_state().device());
        let io_err = |e: Box<String>| Box::new(Fault { message: *e, notes: vec![] });
        let in_place = dev.is_none() && !noop && !textured && in_place(op, inputs, outputs);
        // Shape inference needs the values of shape-like inputs; on a device only small
        // inputs (scalars, shapes, pads, indices) are read back for it.
        let mut host_in: Recycled<Option<HostTensor>> = Recycled::new(&self.scratch);
        // `None`s written in place, then filled: pushing each 56-byte `Option` through a
        // temporary stalled on store forwarding (a fifth of a no-op operator call).
        host_in.resize_with(inputs.len(), || None);
        for (slot, v) in host_in.iter_mut().zip(inputs) {
            match v {
                // Constants need not be read when only inference wants them and it has
                // seen them before: `memo` below.
                Some(v)
                    if (dev.is_none() && !noop && !in_place)
                        || (inference_reads_value(v) && !v.storage.is_constant()) =>
                {
                    *slot = Some(self.read_recycled(v).map_err(io_err)?)
                }
                _ => {}
            }
        }
        let memo = self
            .op_memo
            .borrow()
            .get(slot)
            .and_then(Option::as_ref)
            .filter(|o| o.matches(inputs, &host_in, outputs))
            .map(|o| o.inferred.clone());
        if memo.is_some() && noop && !textured {
            return refuse_constant_outputs(def, outputs);
        }
        if memo.is_none() {
            // First call here, or new operand types: read the small constants too.
            for (h, v) in host_in.iter_mut().zip(inputs) {
                if let (None, Some(v)) = (&h, v) {
                    if inference_reads_value(v) {
                        *h = Some(self.read_recycled(v).map_err(io_err)?);
                    }
                }
            }
        }
        let infos: SmallVec<[Option<TensorInfo>; 6]> = inputs
            .iter()
            .zip(host_in.iter())
            .map(|(v, h)| v.as_ref().map(|v| TensorInfo { dtype: v.dtype, shape: &v.shape, value: h.as_ref() }))
            .collect();
        if textured {
            return self.op_call_blocked(
                &OpCall { dev, op, def, inputs, outputs, infos: &infos, host_in: &host_in, attrs, in_place: false },
                noop,
            );
        }
        if let Some(inferred) = memo {
            // (With no-op kernels a remembered call returned above.)
            refuse_constant_outputs(def, outputs)?;
            return self.run_op(
                &OpCall { dev, op, def, inputs, outputs, infos: &infos, host_in: &host_in, attrs, in_place },
                &inferred,
            );
        }
        let inferred = (def.infer)(&infos, attrs).or_else(|e| fault(format!("@onnx.{}: {e}", def.name)))?;
        if inferred.len() < outputs.len() {
            return fault(format!(
                "@onnx.{} produces {} outputs here, but the call names {}",
                def.name,
                inferred.len(),
                outputs.len()
            ));
        }
        for (i, (v, (dtype, shape))) in outputs.iter().zip(&inferred).enumerate() {
            let Some(v) = v else { continue };
            if v.dtype != *dtype || v.shape[..] != shape[..] {
                return fault(format!(
                    "@onnx.{}: output {} is {dtype}{shape:?} for these inputs and attributes, but its view is {}{:?}",
                    def.name,
                    i + 1,
                    v.dtype,
                    &v.shape[..]
                ));
            }
            if v.storage.is_constant() {
                return fault(format!("@onnx.{} cannot write output {} into a constant", def.name, i + 1));
            }
        }
        let inferred: Rc<[crate::ops::OutInfo]> = inferred.into();
        let keys_in: SmallVec<[Option<OperandKey>; 6]> =
            inputs.iter().zip(host_in.iter()).map(|(v, h)| v.as_ref().map(|v| OperandKey::of(v, h.as_ref()))).collect();
        let keys_out: SmallVec<[Option<ViewType>; 2]> =
            outputs.iter().map(|v| v.as_ref().map(|v| (v.dtype, v.shape.clone()))).collect();
        let quick = QuickKey::checks(items, &keys_in, &keys_out, &views, self.regs.get(base..).unwrap_or_default());
        self.set_quick(slot, quick);
        if let Some(memo) = self.op_memo.borrow_mut().get_mut(slot) {
            *memo = Some(OpMemo { inputs: keys_in, outputs: keys_out, inferred: inferred.clone() });
        }
        if noop {
            return Ok(());
        }
        self.run_op(
            &OpCall { dev, op, def, inputs, outputs, infos: &infos, host_in: &host_in, attrs, in_place },
            &inferred,
        )
    }

    /// Sets the [`QuickCheck`]s of operator call site `site`, or unsets them (`None`, or
    /// more than the site has room for).
    pub(crate) fn set_quick(&self, site: usize, checks: Option<SmallVec<[QuickCheck; 6]>>) {
        let Some(s) = self.quick_sites.get(site) else { return };
        let room = self.quick_checks.get(s.start as usize..).and_then(|c| c.get(..s.cap as usize));
        match (checks, room) {
            // Operands the code fixes have these keys at every run.
            (Some(_), _) if s.fixed => s.len.set(QuickSite::PASSED),
            (Some(checks), Some(room)) if checks.len() <= room.len() => {
                for (cell, c) in room.iter().zip(&checks) {
                    cell.set(*c);
                }
                s.len.set(checks.len() as u32);
            }
            _ => s.len.set(QuickSite::UNSET),
        }
    }

    /// The operator call at instruction `at`, site `site`, read from the bytecode.
    #[inline(never)]
    pub(crate) fn op_call_at(&self, m: &Module, f: &Function, base: usize, at: usize, site: u32) -> Step<()> {
        match f.code.get(at) {
            Some(&Instr::CallOp { op, list, attrs, nout, nin }) => {
                self.op_call(m, f, base, site, op, list, attrs, nout, nin)
            }
            other => fault(format!("internal: instruction {at} is {other:?}, not the operator call of site {site}")),
        }
    }

    /// Runs an operator's kernel once its output types are known to match its views.
    pub(crate) fn run_op(&self, call: &OpCall, inferred: &[crate::ops::OutInfo]) -> Step<()> {
        let OpCall { dev, op, def, inputs, outputs, host_in, attrs, in_place, .. } = *call;
        if let Some(dev) = dev {
            return self.op_call_device(dev, call);
        }
        if let (true, Some(kernel)) = (in_place, op.view_kernel()) {
            // SAFETY: `in_place` checked that every operand is a dense run of host memory
            // and that no output overlaps another operand.
            let ins: SmallVec<[Option<TensorRef>; 6]> = inputs
                .iter()
                .map(|v| {
                    v.as_ref().map(|v| TensorRef {
                        dtype: v.dtype,
                        shape: &v.shape,
                        data: unsafe { host_bytes(v) },
                        constant: v
                            .storage
                            .is_constant()
                            .then(|| ConstOperand { derived: &v.storage.derived, offset: v.offset }),
                    })
                })
                .collect();
            let mut outs: SmallVec<[TensorMut; 2]> = outputs
                .iter()
                .flatten()
                .map(|v| TensorMut { dtype: v.dtype, shape: &v.shape, data: unsafe { host_bytes_mut(v) } })
                .collect();
            return kernel(&ins, attrs, &mut outs).or_else(|e| fault(format!("@onnx.{}: {e}", def.name)));
        }
        let mut outs: Recycled<HostTensor> = Recycled::new(&self.scratch);
        for (dtype, shape) in inferred {
            let bytes = crate::ir::types::dense_bytes(*dtype, shape).and_then(|b| usize::try_from(b).ok()).ok_or_else(
                || Box::new(Fault { message: format!("@onnx.{}: output too large", def.name), notes: vec![] }),
            )?;
            // Zeroed, as the kernels expect.
            let mut data = self.scratch.borrow_mut().take(bytes);
            data.resize(bytes, 0);
            outs.push(HostTensor { dtype: *dtype, shape: shape.clone(), data });
        }
        let refs: SmallVec<[Option<&HostTensor>; 6]> = host_in.iter().map(|t| t.as_ref()).collect();
        let host = def.op.id().host_kernel().or_else(|e| fault(format!("@onnx.{}: {e}", def.name)))?;
        host(&refs, attrs, &mut outs).or_else(|e| fault(format!("@onnx.{}: {e}", def.name)))?;
        for (v, t) in outputs.iter().zip(outs.iter()) {
            if let Some(v) = v {
                write_view(v, &t.data).map_err(|e| Box::new(Fault { message: *e, notes: vec![] }))?;
            }
        }
        Ok(())
    }

    /// [`read_view`] into a recycled buffer (give it back through [`Recycled`]).
    pub(crate) fn read_recycled(&self, v: &View) -> Result<HostTensor, crate::interp::exec::Fail> {
        let bytes = (v.numel() * v.dtype.size() as u64) as usize;
        let buf = self.scratch.borrow_mut().take(bytes);
        crate::interp::exec::read_view_into(v, buf)
    }
}
