//! The interpreter: register frames on one value stack, a tight `match` dispatch loop, and
//! run-time checks for everything the verifier cannot prove.

use crate::builtins::Builtin;
use crate::bytecode::{Arg, ArgKind, FuncId, Instr, OpId, Reg};
use crate::device::DeviceCaps;
use crate::error::{FrameLoc, VmError, VmErrorData};
use crate::exec::{call_builtin, read_view, store_bytes, write_view};
use crate::host_tensor::{store_f64, HostTensor, HostValue};
use crate::io::{copy_view, storage_requirements, Direction, Fallback, IoReport};
use crate::memory::{ConstAlloc, DeviceSpec, Ledger, Runtime, Site, Stats, Storage, View, NO_BIN};
use crate::module::{ConstData, Function, Literal, Module};
use crate::ops::{Attrs, TensorInfo};
use crate::shared::Shared;
use crate::specialize::{Op, NO_SLICE};
use crate::types::{DType, ImageLayout, Scope, Type};
use crate::value::Value;
use smallvec::SmallVec;
use std::cell::{Cell, Ref, RefCell};
use std::io::Write;
use std::rc::Rc;
use std::sync::Arc;

/// Limits that stop a runaway program with an error instead of hanging or eating memory.
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_call_depth: usize,
    /// Instructions per invocation; `None` for no limit.
    pub max_instructions: Option<u64>,
    /// Bytes of storage live at once on each device: everything live there, the module's
    /// constants, inputs and the VM's copies included, but not blocks cached in the pool.
    /// `None`: no limit beyond the device's own memory.
    pub max_live_bytes: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_call_depth: 10_000, max_instructions: None, max_live_bytes: None }
    }
}

/// What operator and kernel calls do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kernels {
    /// Run them (the default).
    #[default]
    Run,
    /// Check every call as usual (operands, devices, the output types the operator infers
    /// for these inputs), then skip the kernel: no computation, no data moved. What is left
    /// is the VM's own cost per inference, the figure `benches/model_overhead.rs`
    /// measures (TVM's reference numbers replace every kernel by a no-op the same way).
    /// Outputs hold whatever their memory held before.
    Noop,
}

/// Where `@vm.print` writes.
pub enum Output {
    Stdout,
    Buffer(Vec<u8>),
}

pub(crate) struct Frame {
    pub(crate) func: u32,
    /// Where to resume (set when this frame calls another, or when a debugger pauses).
    pub(crate) pc: usize,
    pub(crate) base: usize,
    /// The caller's destination list for this frame's results.
    ret_list: u32,
    ret_ndst: u8,
}

/// How [`Vm::exec`] ended without an error. The values a run returned wait in
/// `Vm::returned` (see [`Vm::take_returned`]): without them the result fits in two
/// registers rather than going through memory.
#[derive(Clone, Copy)]
pub(crate) enum Exit {
    Returned,
    Paused,
}

/// An error on the way out of a handler: the message and notes; the loop adds where.
struct Fault {
    message: String,
    notes: Vec<String>,
}

type Step<T> = Result<T, Box<Fault>>;

#[cold]
fn fault<T>(message: String) -> Step<T> {
    Err(Box::new(Fault { message, notes: Vec::new() }))
}

/// A virtual machine: a module, its devices, its constants and a register stack.
pub struct Vm {
    module: Arc<Module>,
    rt: Rc<Runtime>,
    consts: Vec<Shared<View>>,
    pub(crate) regs: Vec<Value>,
    pub(crate) frames: Vec<Frame>,
    pub limits: Limits,
    /// [`Kernels::Noop`] skips the work of operator and kernel calls.
    pub kernels: Kernels,
    /// Per operator call site ([`Op::CallOpSite`]), the operand types it last checked
    /// ([`OpMemo`]).
    op_memo: RefCell<Vec<Option<OpMemo>>>,
    /// Per operator call site, where its [`QuickCheck`]s are in `quick_checks`, and how many
    /// are set. Cells, not a `RefCell`: the no-op path reads them with no borrow.
    quick_sites: Box<[QuickSite]>,
    quick_checks: Box<[Cell<QuickCheck>]>,
    /// Buffers for the host kernels' operand copies.
    scratch: RefCell<Scratch>,
    output: Output,
    /// The copies and fallbacks of the last invocation.
    io: IoReport,
    /// Per function, the bytes its storage parameters need (computed on first use).
    storage_needs: Vec<Option<Rc<[Option<u64>]>>>,
    /// The run a debugger is stepping through ([`crate::debug`]).
    pub(crate) debug: Option<crate::debug::DebugRun>,
    /// Instructions typed at a REPL prompt: sites are [`Site::PROMPT`].
    prompt: bool,
    /// Function ids by name ([`crate::names`]).
    func_names: crate::names::FuncNames,
    /// The values of the last run's `ret` (with [`Exit::Returned`]), until taken.
    returned: Vec<Value>,
    /// The argument and result types invocations last admitted, per function.
    signatures: crate::signature::Signatures,
    /// The module's code as the interpreter runs it ([`crate::specialize`]), one slice per
    /// function. `exec` borrows it through a raw pointer beside `&mut self`; an `Rc`, not
    /// a `Box`, because a `Box`'s contents count as part of `self` for that `&mut`.
    ops: Rc<[Box<[Op]>]>,
    /// The geometries of the constant buffer views in `ops` ([`Op::AllocBufferConst`]).
    buffer_geoms: Box<[crate::specialize::BufferGeom]>,
    /// The constant image views in `ops` ([`Op::AllocImageConst`]), checked per device.
    image_views: Box<[ImageView]>,
    /// The requests of [`Op::AllocStorageConst`], checked for this VM's devices.
    const_allocs: Box<[ConstAlloc]>,
}

/// The fast path of a specialised int builtin ([`crate::specialize`]) with register
/// operands: both ints and no overflow, the result is written in place; anything else runs
/// the original instruction ([`Vm::general_builtin`]), which reports the error.
macro_rules! int_rr {
    ($vm:ident, $m:ident, $f:ident, $base:ident, $at:ident, $x:ident, $b:ident) => {
        match ($vm.reg($base, $x.a), $vm.reg($base, $x.b)) {
            (Value::Int(a), Value::Int(b)) => match crate::specialize::int_builtin(Builtin::$b, *a, *b) {
                Some(r) => {
                    $vm.set_int($base, $x.dst, r);
                    Ok(())
                }
                None => $vm.general_builtin($m, $f, $base, $at),
            },
            _ => $vm.general_builtin($m, $f, $base, $at),
        }
    };
}

/// [`int_rr`] with an immediate second operand.
macro_rules! int_ri {
    ($vm:ident, $m:ident, $f:ident, $base:ident, $at:ident, $x:ident, $b:ident) => {
        match $vm.reg($base, $x.a) {
            Value::Int(a) => match crate::specialize::int_builtin(Builtin::$b, *a, $x.b as i64) {
                Some(r) => {
                    $vm.set_int($base, $x.dst, r);
                    Ok(())
                }
                None => $vm.general_builtin($m, $f, $base, $at),
            },
            _ => $vm.general_builtin($m, $f, $base, $at),
        }
    };
}

/// What an operator call site inferred for the operands it saw last. Inference depends
/// only on the operands' dtypes and shapes and on the values of the small inputs (the ones
/// an OpenCL device reads back for it), so a call that sees the same again (every call of a
/// compiled model after the first) reuses the result instead of inferring and checking
/// again.
struct OpMemo {
    inputs: SmallVec<[Option<OperandKey>; 6]>,
    outputs: SmallVec<[Option<ViewType>; 2]>,
    inferred: Rc<[crate::ops::OutInfo]>,
}

/// Where an operator call site's [`QuickCheck`]s are: what [`Vm::memo_covers_site`] checks
/// instead of the site's [`OpMemo`], when it can decide on its own, one per register
/// operand (constants and omitted inputs are fixed at a call site).
struct QuickSite {
    start: u32,
    /// The site's register operands: the most checks it can have.
    cap: u32,
    /// How many checks are set, or [`QuickSite::UNSET`], or [`QuickSite::PASSED`].
    len: Cell<u32>,
    /// Every register operand is a view the code fixes ([`crate::fixed`]).
    fixed: bool,
}

impl QuickSite {
    const UNSET: u32 = u32::MAX;
    /// A fixed site's check passed: it passes at every run, with nothing to compare.
    const PASSED: u32 = u32::MAX - 1;
}

/// One register operand as [`Vm::memo_covers_site`] checks it: the register, and what the
/// view in it must be.
#[derive(Clone, Copy, Debug, PartialEq)]
struct QuickCheck {
    reg: u32,
    key: QuickKey,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum QuickKey {
    /// A non-constant buffer view of this [`crate::memory::ViewClass`]: dtype, shape and
    /// device in a word.
    Class(u64),
    /// A constant, by view id (constants never change).
    Constant(u64),
    /// A slice ([`Value::Slice`]) of this geometry on this device.
    Slice { geom: u32, device: u8 },
}

impl QuickKey {
    /// The checks of a memo's operands (`items`, and their `views`: inputs then outputs),
    /// if every operand can be checked this way: constants, and buffer views whose values
    /// inference does not read.
    /// `regs` are the frame's registers, where an operand may be a slice. (A view without a
    /// (dtype, shape) id has no check: the general path compares it.)
    fn checks(
        items: &[Arg],
        inputs: &[Option<OperandKey>],
        outputs: &[Option<ViewType>],
        views: &[Option<Shared<View>>],
        regs: &[Value],
    ) -> Option<SmallVec<[QuickCheck; 6]>> {
        let tensor = |r: Reg, v: &View| {
            // Textures take the general path (a slice may hold one).
            if v.scope.is_texture() {
                return None;
            }
            if let Some(Value::Slice(geom, st)) = regs.get(r.0 as usize) {
                return Some(QuickKey::Slice { geom: *geom, device: st.device });
            }
            v.class.is_plain_typed().then_some(QuickKey::Class(v.class.0))
        };
        let ins = inputs.iter().map(|k| match k {
            Some(OperandKey::Constant(id)) => Some(Some(QuickKey::Constant(*id))),
            Some(OperandKey::Tensor { value: None, .. }) | None => Some(None),
            Some(OperandKey::Tensor { value: Some(_), .. }) => None,
        });
        let outs = outputs.iter().map(|_| Some(None));
        let mut checks = SmallVec::new();
        for ((a, key), v) in items.iter().zip(ins.chain(outs)).zip(views) {
            let (ArgKind::Reg(r), Some(v)) = (a.kind(), v) else { continue };
            let key = match key? {
                Some(constant) => constant,
                None => tensor(r, v)?,
            };
            checks.push(QuickCheck { reg: r.0, key });
        }
        Some(checks)
    }

    /// True when register value `v` is what this key saw.
    #[inline(always)]
    fn covers(self, v: &Value) -> bool {
        match (self, v) {
            (QuickKey::Class(c), Value::Tensor(v)) => v.class.0 == c,
            (QuickKey::Constant(id), Value::Tensor(v)) => v.id == id,
            (QuickKey::Slice { geom, device }, Value::Slice(g, st)) => geom == *g && device == st.device,
            _ => false,
        }
    }
}

/// An output view's dtype and shape.
type ViewType = (DType, SmallVec<[i64; 4]>);

/// An input as inference saw it: a constant (immutable: its view id says it all), or its
/// type with the bytes of a small input whose value inference may read.
#[derive(PartialEq)]
enum OperandKey {
    Constant(u64),
    Tensor { dtype: DType, shape: SmallVec<[i64; 4]>, value: Option<Vec<u8>> },
}

/// The error for an operator call whose output view is in a constant, if any.
fn refuse_constant_outputs(def: &crate::ops::OpDef, outputs: &[Option<Shared<View>>]) -> Step<()> {
    match outputs.iter().position(|v| v.as_ref().is_some_and(|v| v.storage.is_constant())) {
        Some(i) => fault(format!("@onnx.{} cannot write output {} into a constant", def.name, i + 1)),
        None => Ok(()),
    }
}

/// Equal shapes, compared inline: `==` on the slices calls `memcmp`, which costs more than
/// the few dimensions it compares.
#[inline(always)]
fn same_dims(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// True for inputs whose values shape inference may read (on OpenCL devices only these
/// are read back for it).
fn inference_reads_value(v: &View) -> bool {
    v.numel() <= 64 || (!v.dtype.is_float() && v.numel() <= 65536)
}

impl OperandKey {
    fn of(v: &View, value: Option<&HostTensor>) -> OperandKey {
        if v.storage.is_constant() {
            return OperandKey::Constant(v.id);
        }
        let value = if inference_reads_value(v) { value.map(|h| h.data.clone()) } else { None };
        OperandKey::Tensor { dtype: v.dtype, shape: v.shape.clone(), value }
    }

    /// True when `v` (with `value` read for it, if any) is what this key saw.
    fn matches(&self, v: &View, value: Option<&HostTensor>) -> bool {
        match self {
            OperandKey::Constant(id) => *id == v.id,
            OperandKey::Tensor { dtype, shape, value: want } => {
                *dtype == v.dtype
                    && same_dims(shape, &v.shape)
                    && !v.storage.is_constant()
                    && match (want, value) {
                        (None, _) => !inference_reads_value(v),
                        (Some(w), Some(h)) => *w == h.data,
                        (Some(_), None) => false,
                    }
            }
        }
    }
}

impl OpMemo {
    /// True when the operands are what this memo saw; `host_in[i]` is the value read for
    /// input `i`, if any (`host_in` may be shorter than `inputs`: nothing read).
    fn matches(
        &self,
        inputs: &[Option<Shared<View>>],
        host_in: &[Option<HostTensor>],
        outputs: &[Option<Shared<View>>],
    ) -> bool {
        self.inputs.len() == inputs.len()
            && self.outputs.len() == outputs.len()
            && self.inputs.iter().zip(inputs).enumerate().all(|(i, (k, v))| match (k, v) {
                (None, None) => true,
                (Some(k), Some(v)) => k.matches(v, host_in.get(i).and_then(Option::as_ref)),
                _ => false,
            })
            && self.outputs.iter().zip(outputs).all(|(k, v)| match (k, v) {
                (None, None) => true,
                (Some((d, s)), Some(v)) => *d == v.dtype && same_dims(s, &v.shape),
                _ => false,
            })
    }
}

/// One operator call's operands and attributes, as the paths that run it take them.
#[derive(Clone, Copy)]
struct OpCall<'a> {
    /// The OpenCL device the operands live on; `None` on the host.
    dev: Option<&'a crate::opencl::ClDevice>,
    def: &'a crate::ops::OpDef,
    inputs: &'a [Option<Shared<View>>],
    outputs: &'a [Option<Shared<View>>],
    infos: &'a [Option<TensorInfo<'a>>],
    /// Host copies of the inputs the call reads on the host.
    host_in: &'a [Option<HostTensor>],
    attrs: &'a Attrs,
}

/// Host memory of finished operator calls, handed to the next ones: the host kernels work
/// on copies of their operands, and fresh buffers for each call fault in fresh pages
/// (a fifth of a small CNN's time). Bounded in count and bytes.
#[derive(Default)]
struct Scratch {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
}

impl Scratch {
    const MAX_BUFFERS: usize = 16;
    const MAX_BYTES: usize = 256 << 20;

    /// An empty buffer with room for `len` bytes (the smallest that fits).
    fn take(&mut self, len: usize) -> Vec<u8> {
        let best = self
            .bufs
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        match best {
            Some(i) => {
                let b = self.bufs.swap_remove(i);
                self.bytes -= b.capacity();
                b
            }
            None => Vec::with_capacity(len),
        }
    }

    fn give(&mut self, b: Vec<u8>) {
        let cap = b.capacity();
        if cap == 0 || self.bufs.len() >= Self::MAX_BUFFERS || self.bytes + cap > Self::MAX_BYTES {
            return;
        }
        self.bytes += cap;
        self.bufs.push(b);
    }
}

/// Host tensors whose buffers go back to the [`Scratch`] pool when dropped.
struct Recycled<'a, T: AsHostTensor> {
    pool: &'a RefCell<Scratch>,
    items: SmallVec<[T; 6]>,
}

trait AsHostTensor {
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
    fn new(pool: &'a RefCell<Scratch>) -> Self {
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

/// A storage parameter the VM replaced with its own (see [`crate::io`]).
pub(crate) struct Substitute {
    caller: Shared<Storage>,
    ours: Shared<Storage>,
    /// The caller's storage can take the results (it was only on the wrong device).
    copy_back: bool,
}

impl Vm {
    /// A VM on the given devices (device 0 holds the constants). The module is verified
    /// here, so the interpreter only ever runs verified code.
    pub fn new(module: Arc<Module>, devices: Vec<DeviceCaps>) -> Result<Vm, VmError> {
        Vm::with_devices(module, devices.into_iter().map(DeviceSpec::Host).collect())
    }

    /// A VM on host and/or OpenCL devices (device 0 holds the constants).
    pub fn with_devices(module: Arc<Module>, devices: Vec<DeviceSpec>) -> Result<Vm, VmError> {
        if devices.is_empty() {
            return Err(VmError::api("a VM needs at least one device"));
        }
        let rt = Runtime::new(devices).map_err(VmError::api)?;
        Vm::with_runtime(module, rt)
    }

    /// A VM on the devices of an existing runtime, e.g. another VM's
    /// ([`Vm::runtime`]): tensors and storages pass between VMs that share a runtime
    /// without copies (one OpenCL context per device).
    pub fn with_runtime(module: Arc<Module>, rt: Rc<Runtime>) -> Result<Vm, VmError> {
        crate::verify::verify_module(&module).map_err(|e| VmError::api(format!("invalid module: {e}")))?;
        if rt.devices.is_empty() {
            return Err(VmError::api("a VM needs at least one device"));
        }
        let mut consts = Vec::with_capacity(module.consts.len());
        for c in &module.consts {
            let numel = c.numel().unwrap_or(0);
            let bytes = numel * c.dtype.size() as u64;
            let fail = |e: String| VmError::api(format!("cannot load constant @{}: {e}", c.name));
            let st =
                Storage::alloc(&rt, 0, bytes, 0, Scope::Global, Site::API, true).map_err(|e| fail(e.to_string()))?;
            let view =
                View::make(st, 0, c.dtype, &c.shape, Scope::Global, None, bytes, Site::API, None).map_err(fail)?;
            match &c.data {
                ConstData::Bytes(b) => store_bytes(&view, b).map_err(|e| fail(*e))?,
                ConstData::Fill(v) => {
                    let mut e = [0u8; 8];
                    store_f64(c.dtype, *v, &mut e);
                    let data = e[..c.dtype.size()].repeat(numel as usize);
                    store_bytes(&view, &data).map_err(|e| fail(*e))?;
                }
            }
            consts.push(view);
        }
        let specialized = crate::specialize::specialize(&module);
        // A request its device refuses keeps no bin: its fast path never finishes, and the
        // general one reports the error when it runs.
        let const_allocs: Box<[ConstAlloc]> = specialized
            .storages
            .iter()
            .map(|r| {
                rt.const_alloc(r.device, r.size, r.align, r.scope).unwrap_or(ConstAlloc {
                    device: r.device,
                    size: r.size,
                    align: r.align,
                    scope: r.scope,
                    bin: NO_BIN,
                })
            })
            .collect();
        let nsites = specialized.op_sites.len();
        let fixed = crate::fixed::fixed_sites(&module, &specialized.ops, &const_allocs, nsites);
        let mut quick_sites = Vec::with_capacity(nsites);
        let mut start = 0u32;
        for (&cap, &fixed) in specialized.op_sites.iter().zip(&fixed) {
            quick_sites.push(QuickSite { start, cap, len: Cell::new(QuickSite::UNSET), fixed });
            start = start.saturating_add(cap);
        }
        let unset = QuickCheck { reg: 0, key: QuickKey::Constant(u64::MAX) };
        let quick_checks = (0..start).map(|_| Cell::new(unset)).collect();
        let buffer_geoms = specialized
            .geoms
            .into_iter()
            .map(|mut g| {
                g.view.type_id = rt.type_id(g.view.dtype, &g.view.shape);
                g.slice = rt.slice_geom_id(&g.view).unwrap_or(NO_SLICE);
                g
            })
            .collect();
        let image_views = specialized
            .images
            .into_iter()
            .map(|geom| {
                let type_id = rt.type_id(geom.dtype, &geom.shape);
                let on_device = rt
                    .devices
                    .iter()
                    .map(|d| {
                        let (layout, bytes) =
                            image_geometry(&d.caps, geom.scope, geom.dtype, &geom.shape, geom.offset).ok()?;
                        let end = geom.offset.checked_add(bytes)?;
                        let slice = crate::memory::SliceGeom {
                            offset: geom.offset,
                            dtype: geom.dtype,
                            shape: geom.shape.clone(),
                            bytes,
                            type_id,
                            scope: geom.scope,
                            image: Some(layout),
                        };
                        let slice = rt.slice_geom_id(&slice).unwrap_or(NO_SLICE);
                        Some(ImagePlacement { layout, bytes, end, slice })
                    })
                    .collect();
                ImageView { geom, on_device }
            })
            .collect();
        Ok(Vm {
            rt,
            consts,
            regs: Vec::new(),
            frames: Vec::new(),
            limits: Limits::default(),
            kernels: Kernels::Run,
            op_memo: RefCell::new((0..nsites).map(|_| None).collect()),
            quick_sites: quick_sites.into(),
            quick_checks,
            scratch: RefCell::default(),
            output: Output::Stdout,
            io: IoReport::default(),
            storage_needs: Vec::new(),
            debug: None,
            prompt: false,
            returned: Vec::new(),
            signatures: crate::signature::Signatures::new(&module),
            func_names: crate::names::FuncNames::new(&module),
            ops: specialized.ops.into(),
            buffer_geoms,
            image_views,
            const_allocs,
            module,
        })
    }

    /// Records the objects this VM's instructions create as made at a REPL prompt
    /// ([`Site::PROMPT`]) rather than at a place in its module.
    pub fn mark_prompt(&mut self) {
        self.prompt = true;
    }

    #[inline]
    fn site(&self, fid: usize, pc: usize) -> Site {
        if self.prompt {
            Site::PROMPT
        } else {
            Site { func: fid as u32, pc: pc as u32 }
        }
    }

    /// The devices and memory ledger this VM allocates from.
    pub fn runtime(&self) -> &Rc<Runtime> {
        &self.rt
    }

    /// The copies and fallbacks of the last invocation ([`crate::io`]).
    pub fn last_io(&self) -> &IoReport {
        &self.io
    }

    /// A VM on the host device with default capabilities.
    pub fn host(module: Arc<Module>) -> Result<Vm, VmError> {
        Vm::new(module, vec![DeviceCaps::host()])
    }

    pub fn module(&self) -> &Arc<Module> {
        &self.module
    }

    pub fn devices(&self) -> impl Iterator<Item = &DeviceCaps> {
        self.rt.devices.iter().map(|d| &d.caps)
    }

    /// Sends `@vm.print` output to a buffer (read it with [`Vm::take_output`]).
    pub fn capture_output(&mut self) {
        self.output = Output::Buffer(Vec::new());
    }

    pub fn take_output(&mut self) -> String {
        match &mut self.output {
            Output::Buffer(b) => String::from_utf8_lossy(&std::mem::take(b)).into_owned(),
            Output::Stdout => String::new(),
        }
    }

    pub fn stats(&self) -> Stats {
        self.rt.stats()
    }

    pub fn ledger(&self) -> Ref<'_, Ledger> {
        self.rt.ledger.borrow()
    }

    /// Live and peak bytes of device `d`.
    pub fn device_bytes(&self, d: usize) -> Option<(u64, u64)> {
        self.rt.devices.get(d).map(|s| (s.live_bytes.get(), s.peak_bytes.get()))
    }

    /// Bytes cached in the pools, not in use.
    pub fn pool_free_bytes(&self) -> u64 {
        self.rt.devices.iter().map(|d| d.pool_free_bytes()).sum()
    }

    /// OpenCL counters summed over the VM's devices (all zero on the host):
    /// `cl_buffers_created`, `cl_sub_buffers_created`, `cl_images_created`,
    /// `compat_images`, `compat_image_bytes`, `live_cl_mem`, `cl_kernels_built`.
    pub fn cl_stats(&self) -> [(&'static str, u64); 7] {
        let mut v = [
            ("cl_buffers_created", 0),
            ("cl_sub_buffers_created", 0),
            ("cl_images_created", 0),
            ("compat_images", 0),
            ("compat_image_bytes", 0),
            ("live_cl_mem", 0),
            ("cl_kernels_built", 0),
        ];
        for d in self.rt.devices.iter().filter_map(|d| d.cl()) {
            let c = &d.counters;
            let vals = [
                c.buffers_created.get(),
                c.sub_buffers_created.get(),
                c.images_created.get(),
                c.compat_images.get(),
                c.compat_image_bytes.get(),
                c.live_cl_mem.get(),
                c.kernels_built.get(),
            ];
            for (slot, x) in v.iter_mut().zip(vals) {
                slot.1 += x;
            }
        }
        v
    }

    /// Returns every pooled block to the system.
    pub fn release_pool(&mut self) {
        for d in &self.rt.devices {
            d.clear_pool();
        }
    }

    /// Invokes `func` with host values; tensors are copied into storages on device 0 and
    /// results are copied back. A function with storage parameters may be given only its
    /// other parameters: the VM then allocates each storage with the bytes its code needs
    /// and writes placed inputs straight into their storage (no copy beyond the upload).
    #[inline]
    pub fn invoke(&mut self, func: &str, args: &[HostValue]) -> Result<Vec<HostValue>, VmError> {
        let id = self.func_id(func)?;
        if !(args.is_empty() && self.module.funcs[id.0 as usize].params.is_empty()) {
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
    fn invoke_plain(&mut self, id: FuncId) -> Result<(), VmError> {
        self.begin_invocation();
        // SAFETY: see `module_ptr`; `m` does not outlive this call.
        let m = unsafe { &*self.module_ptr() };
        let r = self.run_plain(m, id);
        self.end_invocation();
        r
    }

    /// [`Vm::invoke`] with arguments to convert or bind.
    #[inline(never)]
    fn invoke_host(&mut self, id: FuncId, args: &[HostValue]) -> Result<Vec<HostValue>, VmError> {
        self.begin_invocation();
        // SAFETY: see `module_ptr`; `m` does not outlive this call.
        let m = unsafe { &*self.module_ptr() };
        let vals = self.host_values(id, &m.funcs[id.0 as usize], args)?;
        let out = self.bind_and_run(m, id, vals);
        self.results_after_invoke(out)
    }

    /// An invocation's results read back to the host, and its copies recorded.
    #[inline(never)]
    fn results_after_invoke(&mut self, out: Result<Vec<Value>, VmError>) -> Result<Vec<HostValue>, VmError> {
        let host = out.and_then(|out| self.results_to_host(out));
        self.end_invocation();
        host
    }

    /// What every invocation does first: hands the devices the live-bytes limit, marks
    /// the copy counter, forgets the last invocation's fallbacks.
    #[inline(always)]
    fn begin_invocation(&mut self) {
        self.apply_live_limit();
        self.rt.counters.mark_copies();
        self.io.fallbacks.clear();
    }

    /// What every invocation does last: records the copies it made ([`Vm::last_io`]).
    #[inline(always)]
    fn end_invocation(&mut self) {
        self.io.copies = self.rt.counters.copies_since_mark.get();
    }

    /// The VM values of `invoke`'s host arguments (see [`Vm::invoke`]).
    fn host_values(&mut self, id: FuncId, f: &Function, args: &[HostValue]) -> Result<Vec<Value>, VmError> {
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
    fn results_to_host(&self, out: Vec<Value>) -> Result<Vec<HostValue>, VmError> {
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
    fn func_id(&self, func: &str) -> Result<FuncId, VmError> {
        let found = self.func_names.find(&self.module, func);
        found.ok_or_else(|| self.no_such_function(func))
    }

    #[cold]
    fn no_such_function(&self, func: &str) -> VmError {
        let names: Vec<String> = self.module.funcs.iter().map(|f| format!("@{}", f.name)).collect();
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
                    if !crate::verify::type_admits(t, ht.dtype, &ht.shape) {
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
    fn placed_view(
        &self,
        st: &Shared<Storage>,
        offset: u64,
        dtype: crate::types::DType,
        shape: &[i64],
    ) -> Result<Shared<View>, String> {
        let bytes = crate::types::dense_bytes(dtype, shape).ok_or("the tensor's size overflows")?;
        if offset.checked_add(bytes).is_none_or(|end| end > st.size) {
            return Err(format!(
                "{bytes} bytes at offset {offset} do not fit in storage #{} of {} bytes",
                st.id, st.size
            ));
        }
        View::make(st.clone(), offset, dtype, shape, Scope::Global, None, bytes, Site::API, None)
    }

    /// Bytes each storage parameter of `id` needs, by parameter index
    /// ([`crate::io::storage_requirements`] on device 0's capabilities).
    pub fn storage_needs(&mut self, id: FuncId) -> Rc<[Option<u64>]> {
        let i = id.0 as usize;
        if self.storage_needs.len() < self.module.funcs.len() {
            self.storage_needs.resize(self.module.funcs.len(), None);
        }
        if let Some(Some(n)) = self.storage_needs.get(i) {
            return n.clone();
        }
        let n: Rc<[Option<u64>]> = match self.module.funcs.get(i) {
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

    fn count_copy(&self, dir: Direction, bytes: u64) {
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
                let view = View::make(st, 0, t.dtype, &t.shape, Scope::Global, None, bytes, Site::API, None)?;
                write_view(&view, &t.data).map_err(|e| *e)?;
                self.count_copy(Direction::HostToDevice, bytes);
                Value::Tensor(view)
            }
        })
    }

    /// Invokes a function with VM values: checks arity and declared types, binds caller
    /// storages and tensors ([`crate::io`]), then runs. [`Vm::last_io`] reports the copies.
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
        self.end_invocation();
        r
    }

    /// Nothing to check or bind: a function without parameters called without arguments.
    #[inline(always)]
    fn is_plain(m: &Module, id: FuncId, args: &[Value]) -> bool {
        args.is_empty() && m.funcs.get(id.0 as usize).is_some_and(|f| f.params.is_empty())
    }

    #[inline(never)]
    fn bind_and_run(&mut self, m: &Module, id: FuncId, args: Vec<Value>) -> Result<Vec<Value>, VmError> {
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
    fn run_plain(&mut self, m: &Module, id: FuncId) -> Result<(), VmError> {
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

    /// Copies results out of replaced storages ([`crate::io`]).
    #[inline]
    pub(crate) fn finish_results(
        &mut self,
        m: &Module,
        id: FuncId,
        subs: &[Substitute],
        mut out: Vec<Value>,
    ) -> Result<Vec<Value>, VmError> {
        if !subs.is_empty() {
            let f = &m.funcs[id.0 as usize];
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
            if let Err(m) = self.signatures.check(&self.rt, id.0 as usize, i, v, t) {
                return Err(VmError::api(format!("argument {} of @{}: {m}", i + 1, f.name)));
            }
        }
        Ok(())
    }

    /// Checks arity and types and binds the arguments of `id` ([`crate::io`]).
    #[inline]
    pub(crate) fn prepare_args(
        &mut self,
        m: &Module,
        id: FuncId,
        mut args: Vec<Value>,
    ) -> Result<(Vec<Value>, Vec<Substitute>), VmError> {
        self.check_args(id, &args)?;
        let f = &m.funcs[id.0 as usize];
        if args.is_empty() || self.signatures.binds_nothing(&self.rt, id.0 as usize, &args) {
            return Ok((args, Vec::new()));
        }
        let subs = self
            .bind(id, f, &mut args)
            .map_err(|e| VmError::api(format!("binding the arguments of @{}: {e}", f.name)))?;
        Ok((args, subs))
    }

    /// Uses the caller's storages and tensors in place where the function can, and
    /// otherwise replaces them (one copy for a tensor), recording each fallback.
    fn bind(&mut self, id: FuncId, f: &Function, args: &mut [Value]) -> Result<Vec<Substitute>, String> {
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
                    View::make(st, 0, v.dtype, &v.shape, Scope::Global, None, bytes, Site::API, None)?
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
    fn copy_back(&mut self, f: &Function, subs: &[Substitute], out: &mut [Value]) -> Result<(), String> {
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
    fn fallback(&mut self, what: String, reason: String, copied_bytes: u64) {
        let fb = Fallback { what, reason, copied_bytes };
        log::debug!("{fb}");
        self.io.fallbacks.push(fb);
    }

    #[cold]
    fn error_at(&self, m: &Module, fid: usize, pc: usize, f: Fault) -> VmError {
        let mut stack = Vec::new();
        let at = |func: usize, pc: usize| {
            let func_ref = &m.funcs[func];
            FrameLoc { func: func_ref.name.clone(), pc, loc: func_ref.loc(pc) }
        };
        stack.push(at(fid, pc));
        // Callers resume after their call instruction.
        for fr in self.frames.iter().rev().skip(1) {
            stack.push(at(fr.func as usize, fr.pc.saturating_sub(1)));
        }
        VmErrorData { message: f.message, notes: f.notes, stack, source_file: m.source_file.clone() }.into()
    }

    #[inline]
    fn run(&mut self, m: &Module, entry: FuncId, args: Vec<Value>) -> Result<(), VmError> {
        let depth0 = self.frames.len();
        self.push_entry(m, entry, args);
        self.run_from(m, depth0)
    }

    /// Runs the frame just pushed above depth `depth0` to its return; its values wait in
    /// `returned`.
    #[inline(always)]
    fn run_from(&mut self, m: &Module, depth0: usize) -> Result<(), VmError> {
        // Without an instruction limit the loop skips its per-instruction check.
        let exit = if self.limits.max_instructions.is_some() {
            self.exec::<false, true, _>(m, depth0, |_| false)
        } else {
            self.exec::<false, false, _>(m, depth0, |_| false)
        };
        match exit {
            Ok(Exit::Returned) => Ok(()),
            Ok(Exit::Paused) => Err(VmError::api("internal: a run paused without a debugger")),
            Err(e) => Err(e),
        }
    }

    /// Pushes the frame of `entry` with its arguments in its first registers.
    /// The emptied argument buffer becomes `returned`, which the return values fill: one
    /// buffer per invocation, not one for the arguments and one for the results.
    #[inline]
    pub(crate) fn push_entry(&mut self, m: &Module, entry: FuncId, mut args: Vec<Value>) {
        let base = self.push_frame(m, entry);
        if args.is_empty() {
            // Nothing to drop: skip the call into the drop loop.
            std::mem::forget(args);
            return;
        }
        for (slot, v) in self.regs[base..].iter_mut().zip(args.drain(..)) {
            // The frame's registers are new: `Null`, nothing to drop.
            std::mem::forget(std::mem::replace(slot, v));
        }
        if self.returned.capacity() == 0 {
            self.returned = args;
        }
    }

    /// Pushes the frame of `entry` with its registers null; returns its base.
    #[inline(always)]
    fn push_frame(&mut self, m: &Module, entry: FuncId) -> usize {
        let f = &m.funcs[entry.0 as usize];
        let base = self.regs.len();
        // The guard skips a `resize` that does nothing: an empty invocation is a few dozen
        // instructions, and each no-op call was a tenth more.
        if f.num_regs > 0 {
            self.regs.resize_with(base + f.num_regs as usize, || Value::Null);
        }
        self.frames.push(Frame { func: entry.0, pc: 0, base, ret_list: 0, ret_ndst: 0 });
        base
    }

    /// Runs from the top frame's `pc` until the frame at depth `depth0` returns. With
    /// `DEBUG`, `stop` is asked before each instruction and a `true` pauses there (the top
    /// frame keeps its `pc`; on an error too, so a debugger can inspect the state). Without
    /// it, the check compiles away.
    pub(crate) fn exec<const DEBUG: bool, const LIMITED: bool, S: FnMut(&crate::debug::PausePoint) -> bool>(
        &mut self,
        m: &Module,
        depth0: usize,
        mut stop: S,
    ) -> Result<Exit, VmError> {
        let Some(top) = self.frames.last() else {
            return Err(VmError::api("internal: no frame to run"));
        };
        let mut fid = top.func as usize;
        // SAFETY: as for `module_ptr`: `ops` is private, set only by the constructors and
        // never reassigned, so the slices live as long as `self`; `ops` does not outlive
        // this call. (An `Rc` clone here was a twentieth of an empty invocation.)
        let ops: &[Box<[Op]>] = unsafe { &*Rc::as_ptr(&self.ops) };
        // Checked once here: `ops` has one entry per function, and every later function
        // index is a verified call target (below the function count) or a frame's.
        if fid >= m.funcs.len() || ops.len() != m.funcs.len() {
            return Err(VmError::api("internal: the frame's function is not in the module"));
        }
        // SAFETY: just checked.
        let (mut f, mut code) = unsafe { func_code(m, ops, fid) };
        let mut base = top.base;
        let mut pc = top.pc;
        let mut count: u64 = 0;
        let limit = self.limits.max_instructions.unwrap_or(u64::MAX);
        // Every entry into `exec` has applied `Limits::max_live_bytes` (see `apply_live_limit`).
        let result: Result<Exit, (usize, Box<Fault>)> = loop {
            if DEBUG {
                let point = crate::debug::PausePoint {
                    func: FuncId(fid as u32),
                    pc,
                    depth: self.frames.len().saturating_sub(depth0 + 1),
                    instr: f.code[pc],
                    executed: count,
                    next_storage: self.rt.objects.next_storage_id(),
                };
                if stop(&point) {
                    if let Some(top) = self.frames.last_mut() {
                        top.pc = pc;
                    }
                    break Ok(Exit::Paused);
                }
            }
            count += 1;
            if LIMITED && count > limit {
                break Err((
                    pc,
                    Box::new(Fault {
                        message: format!("instruction limit of {limit} reached"),
                        notes: vec!["raise it with --max-instructions or Limits::max_instructions".into()],
                    }),
                ));
            }
            let at = pc;
            pc += 1;
            debug_assert!(at < code.len());
            // SAFETY: the verifier (run on every module a `Vm` holds) proves `at` in bounds:
            // a function is non-empty and ends in `ret`, `br` or `br_if`, so a step past a
            // non-terminator stays inside; branch targets are checked; a call resumes its
            // caller after the call, which is not the last instruction; a paused frame
            // resumes where it stopped. (The bounds check was a twentieth of a `nop`.)
            let step: Step<()> = match *unsafe { code.get_unchecked(at) } {
                Op::IAddRR(x) => int_rr!(self, m, f, base, at, x, IAdd),
                Op::IAddRI(x) => int_ri!(self, m, f, base, at, x, IAdd),
                Op::ISubRR(x) => int_rr!(self, m, f, base, at, x, ISub),
                Op::ISubRI(x) => int_ri!(self, m, f, base, at, x, ISub),
                Op::IMulRR(x) => int_rr!(self, m, f, base, at, x, IMul),
                Op::IMulRI(x) => int_ri!(self, m, f, base, at, x, IMul),
                Op::IMinRR(x) => int_rr!(self, m, f, base, at, x, IMin),
                Op::IMinRI(x) => int_ri!(self, m, f, base, at, x, IMin),
                Op::IMaxRR(x) => int_rr!(self, m, f, base, at, x, IMax),
                Op::IMaxRI(x) => int_ri!(self, m, f, base, at, x, IMax),
                Op::IEqRR(x) => int_rr!(self, m, f, base, at, x, IEq),
                Op::IEqRI(x) => int_ri!(self, m, f, base, at, x, IEq),
                Op::INeRR(x) => int_rr!(self, m, f, base, at, x, INe),
                Op::INeRI(x) => int_ri!(self, m, f, base, at, x, INe),
                Op::ILtRR(x) => int_rr!(self, m, f, base, at, x, ILt),
                Op::ILtRI(x) => int_ri!(self, m, f, base, at, x, ILt),
                Op::ILeRR(x) => int_rr!(self, m, f, base, at, x, ILe),
                Op::ILeRI(x) => int_ri!(self, m, f, base, at, x, ILe),
                Op::IGtRR(x) => int_rr!(self, m, f, base, at, x, IGt),
                Op::IGtRI(x) => int_ri!(self, m, f, base, at, x, IGt),
                Op::IGeRR(x) => int_rr!(self, m, f, base, at, x, IGe),
                Op::IGeRI(x) => int_ri!(self, m, f, base, at, x, IGe),
                Op::Nop {} => Ok(()),
                Op::Mov { dst, src } => self.read_reg(f, base, src).map(|v| self.set(base, dst, v)),
                Op::LoadInt { dst, value } => {
                    self.set(base, dst, Value::Int(value));
                    Ok(())
                }
                Op::LoadFloat { dst, value } => {
                    self.set(base, dst, Value::Float(value));
                    Ok(())
                }
                Op::LoadConst { dst, konst } => {
                    let v = Value::Tensor(self.consts[konst.0 as usize].clone());
                    self.set(base, dst, v);
                    Ok(())
                }
                Op::MakeShape { dst, dims, ndim } => {
                    self.make_shape(m, f, base, dims, ndim).map(|v| self.set(base, dst, v))
                }
                Op::AllocStorage { dst, size, align, device, scope } => self
                    .alloc_storage(m, f, base, size, align, device, scope, self.site(fid, at))
                    .map(|v| self.set(base, dst, v)),
                Op::AllocStorageConst(x) => {
                    if self.alloc_storage_const(base, x, fid, at) {
                        Ok(())
                    } else {
                        self.general_alloc_storage(m, f, base, fid, at)
                    }
                }
                Op::AllocTensor { dst, storage, args, dtype, scope, ndim } => self
                    .alloc_tensor(m, f, base, storage, args, dtype, scope, ndim, self.site(fid, at))
                    .map(|v| self.set(base, dst, v)),
                Op::AllocBufferConst(x) => {
                    if self.alloc_buffer_const(base, x, fid, at) {
                        Ok(())
                    } else {
                        self.general_alloc_tensor(m, f, base, fid, at)
                    }
                }
                Op::AllocImageConst(x) => {
                    if self.alloc_image_const(base, x, fid, at) {
                        Ok(())
                    } else {
                        self.general_alloc_tensor(m, f, base, fid, at)
                    }
                }
                Op::Kill { reg } => match self.reg(base, reg) {
                    Value::Null | Value::Killed(_) => self.read_reg(f, base, reg).map(|_| ()),
                    _ => {
                        *self.reg_mut(base, reg) = Value::Killed(at as u32);
                        Ok(())
                    }
                },
                Op::CallBuiltin { builtin, list, ndst, nargs } => {
                    if builtin.0 == Builtin::Nop as u32 || self.scalar_builtin(m, f, base, builtin.0, list) {
                        Ok(())
                    } else {
                        self.builtin(m, f, base, builtin.0, list, ndst, nargs)
                    }
                }
                Op::Call { func, list, ndst, nargs } => {
                    // SAFETY: the verifier checks a call's target against the function count.
                    let (callee, callee_code) = unsafe { func_code(m, ops, func.0 as usize) };
                    match self.enter(m, f, base, callee, list, ndst, nargs) {
                        Ok(new_base) => {
                            if let Some(top) = self.frames.last_mut() {
                                top.pc = pc;
                            }
                            self.frames.push(Frame {
                                func: func.0,
                                pc: 0,
                                base: new_base,
                                ret_list: list,
                                ret_ndst: ndst,
                            });
                            fid = func.0 as usize;
                            f = callee;
                            code = callee_code;
                            base = new_base;
                            pc = 0;
                            Ok(())
                        }
                        Err(e) => Err(e),
                    }
                }
                // The entry frame's return: its values go straight into `returned`,
                // whose buffer is the arguments' (`push_entry`).
                Op::Ret { list, nvals } if self.frames.len() == depth0 + 1 => {
                    match if nvals == 0 { Ok(()) } else { self.return_values(m, f, fid, base, list, nvals) } {
                        Ok(()) => {
                            self.truncate_regs(base);
                            self.frames.pop();
                            break Ok(Exit::Returned);
                        }
                        Err(e) => Err(e),
                    }
                }
                Op::Ret { list, nvals } => {
                    match if nvals == 0 {
                        Ok(SmallVec::new())
                    } else {
                        self.collect_results(m, f, fid, base, list, nvals)
                    } {
                        Err(e) => Err(e),
                        Ok(vals) => {
                            self.truncate_regs(base);
                            // Not the entry frame (above): a caller's frame is below.
                            let done = self.frames.pop();
                            match (done, self.frames.last()) {
                                (Some(done), Some(top)) => {
                                    fid = top.func as usize;
                                    base = top.base;
                                    pc = top.pc;
                                    // SAFETY: `fid` is a frame's function, checked when it was pushed.
                                    (f, code) = unsafe { func_code(m, ops, fid) };
                                    let dsts = &f.args[done.ret_list as usize..][..done.ret_ndst as usize];
                                    for (d, v) in dsts.iter().zip(vals) {
                                        if let ArgKind::Reg(r) = d.kind() {
                                            self.set(base, r, v);
                                        }
                                    }
                                    Ok(())
                                }
                                _ => fault("internal: a return with no frame to return to".into()),
                            }
                        }
                    }
                }
                Op::CallOpSite(site) => {
                    // With no-op kernels, a call its site's memo covers has nothing left to
                    // do: decided here, before `op_call`'s large frame is set up.
                    if self.kernels == Kernels::Noop && (self.site_passed(site) || self.memo_covers_site(base, site)) {
                        Ok(())
                    } else {
                        self.op_call_at(m, f, base, at, site)
                    }
                }
                // (Specialised to `CallOpSite`; a call without a site has no memo.)
                Op::CallOp { op, list, attrs, nout, nin } => {
                    self.op_call(m, f, base, u32::MAX, op, list, attrs, nout, nin)
                }
                Op::CallKernel { kernel, list, ndims, nargs } => {
                    self.kernel_call(m, f, base, kernel, list, ndims, nargs)
                }
                Op::Br { target } => {
                    pc = target.0 as usize;
                    Ok(())
                }
                Op::BrIf { cond, then_, else_ } => match self.reg(base, cond) {
                    Value::Int(c) => {
                        pc = if *c != 0 { then_.0 as usize } else { else_.0 as usize };
                        Ok(())
                    }
                    _ => self.read_reg(f, base, cond).map(|_| ()),
                },
            };
            if let Err(e) = step {
                break Err((at, e));
            }
        };
        let n = &self.rt.counters.instructions;
        n.set(n.get() + count);
        match result {
            Ok(exit) => Ok(exit),
            Err((pc, e)) => Err(self.exec_error(DEBUG, m, fid, pc, *e)),
        }
    }

    /// The values the last run returned ([`Exit::Returned`]).
    #[inline(always)]
    pub(crate) fn take_returned(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.returned)
    }

    /// The error of a fault at instruction `pc` of function `fid`; `debug` keeps the top
    /// frame there for a debugger to inspect. Out of line: the common exit builds nothing.
    #[cold]
    #[inline(never)]
    fn exec_error(&mut self, debug: bool, m: &Module, fid: usize, pc: usize, e: Fault) -> VmError {
        if debug {
            if let Some(top) = self.frames.last_mut() {
                top.pc = pc;
            }
        }
        self.error_at(m, fid, pc, e)
    }

    /// Hands [`Limits::max_live_bytes`] to the devices, which check it on every allocation
    /// (the field is public, so it is read again at every entry into the VM).
    #[inline]
    pub(crate) fn apply_live_limit(&self) {
        self.rt.set_live_limit(self.limits.max_live_bytes.unwrap_or(u64::MAX));
    }

    /// `regs.truncate(base)`, without the call into the drop loop when nothing is above `base`.
    #[inline(always)]
    fn truncate_regs(&mut self, base: usize) {
        if self.regs.len() > base {
            // By a frame's end most registers own nothing (killed, ints): only the others
            // go through the drop glue, not every register through a call.
            for v in &mut self.regs[base..] {
                if !v.owns_nothing() {
                    *v = Value::Null;
                }
            }
            // SAFETY: `base` is within the length, and every value from `base` on owns
            // nothing now, so forgetting them (rather than dropping them) leaks nothing.
            unsafe { self.regs.set_len(base) }
        }
    }

    /// Register `r` of the frame at `base`, without a bounds check: for the handlers of
    /// `exec`'s hot instructions (a register access was a third of an `iadd`).
    #[inline(always)]
    fn reg(&self, base: usize, r: Reg) -> &Value {
        debug_assert!(base + (r.0 as usize) < self.regs.len(), "register r{} outside the frame", r.0);
        // SAFETY: every register a verified function names is below its `num_regs`
        // (`verify::check_reg`), and while a frame runs `regs` holds all of its registers:
        // `push_frame` and `enter` grow `regs` to `base + num_regs`, and only the return of
        // a frame above it (whose base is at least this frame's end) shrinks it.
        unsafe { self.regs.get_unchecked(base + r.0 as usize) }
    }

    /// [`Vm::reg`], mutably.
    #[inline(always)]
    fn reg_mut(&mut self, base: usize, r: Reg) -> &mut Value {
        debug_assert!(base + (r.0 as usize) < self.regs.len(), "register r{} outside the frame", r.0);
        // SAFETY: as for `reg`.
        unsafe { self.regs.get_unchecked_mut(base + r.0 as usize) }
    }

    // Always inlined: an out-of-line call passes the value through memory, and the callee's
    // wide load of the caller's narrow stores stalls on store forwarding (a third of an
    // `iadd`'s time).
    #[inline(always)]
    fn set(&mut self, base: usize, r: Reg, v: Value) {
        self.regs[base + r.0 as usize] = v;
    }

    /// [`Vm::set`] that drops an old value owning nothing (most often a killed register)
    /// in line, without the call into `Value`'s drop glue. For the out-of-line fast paths
    /// of the allocating instructions: in `exec` the branch cost more than it saved.
    #[inline(always)]
    fn set_fresh(&mut self, base: usize, r: Reg, v: Value) {
        let slot = self.reg_mut(base, r);
        if slot.owns_nothing() {
            std::mem::forget(std::mem::replace(slot, v));
        } else {
            *slot = v;
        }
    }

    /// A specialised builtin call that its fast path cannot finish (an operand that is not
    /// an int, an overflow): the original instruction, through the general path, which
    /// reports the error as it always has.
    #[cold]
    #[inline(never)]
    fn general_builtin(&mut self, m: &Module, f: &Function, base: usize, at: usize) -> Step<()> {
        match f.code[at] {
            Instr::CallBuiltin { builtin, list, ndst, nargs } => self.builtin(m, f, base, builtin.0, list, ndst, nargs),
            other => fault(format!("internal: instruction {other:?} was specialised as a builtin call")),
        }
    }

    /// Writes an int, in place when the register holds one: no drop of the old value.
    #[inline(always)]
    fn set_int(&mut self, base: usize, r: Reg, x: i64) {
        match self.reg_mut(base, r) {
            Value::Int(v) => *v = x,
            slot => *slot = Value::Int(x),
        }
    }

    #[inline]
    fn read_reg(&self, f: &Function, base: usize, r: Reg) -> Step<Value> {
        match &self.regs[base + r.0 as usize] {
            Value::Null => fault(format!("%{} is used before it is defined", f.reg_name(r))),
            Value::Killed(at) => {
                let l = f.loc(*at as usize);
                Err(Box::new(Fault {
                    message: format!("use of %{} after `kill`", f.reg_name(r)),
                    notes: vec![if l.line > 0 {
                        format!("%{} was killed at line {}", f.reg_name(r), l.line)
                    } else {
                        format!("%{} was killed at instruction {at}", f.reg_name(r))
                    }],
                }))
            }
            Value::Slice(g, st) => slice_value(*g, st),
            v => Ok(v.clone()),
        }
    }

    #[inline]
    fn read(&self, m: &Module, f: &Function, base: usize, a: Arg) -> Step<Value> {
        match a.kind() {
            ArgKind::Reg(r) => self.read_reg(f, base, r),
            ArgKind::Imm(v) => Ok(Value::Int(v as i64)),
            ArgKind::Lit(i) => Ok(match m.literals[i as usize] {
                Literal::Int(v) => Value::Int(v),
                Literal::Float(v) => Value::Float(v),
            }),
            ArgKind::Const(c) => Ok(Value::Tensor(self.consts[c.0 as usize].clone())),
            ArgKind::None => fault("`none` used as a value".into()),
        }
    }

    /// `call @cl.name(args) global [dims]`: a user OpenCL kernel. Tensors are passed as
    /// `__global` buffers, ints as `long`, floats as `float`.
    #[allow(clippy::too_many_arguments)]
    fn kernel_call(
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
        let state = match tensors.first() {
            Some(t) => t.storage.device_state(),
            None => &self.rt.devices[0],
        };
        let Some(dev) = state.cl() else {
            return fault(format!(
                "@cl.{} is an OpenCL kernel, but its tensors are on `{}`; run on an OpenCL device (--device opencl)",
                k.name, state.caps.name
            ));
        };
        let mut args = Vec::with_capacity(vals.len());
        for (i, v) in vals.iter().enumerate() {
            args.push(match v {
                Value::Tensor(t) => {
                    if !std::ptr::eq(t.storage.device_state(), state) {
                        return fault(format!("@cl.{}: argument {} is on another device", k.name, i + 1));
                    }
                    match t.cl {
                        Some(h) if h.kind == crate::opencl::ViewKind::Buffer && h.offset == 0 => {
                            t.check_coherent_read().or_else(fault)?;
                            crate::opencl::KernelArg::Mem(h.mem)
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
                Value::Int(x) => crate::opencl::KernelArg::Bytes(x.to_le_bytes(), 8),
                Value::Float(x) => {
                    let mut b = [0u8; 8];
                    b[..4].copy_from_slice(&(*x as f32).to_le_bytes());
                    crate::opencl::KernelArg::Bytes(b, 4)
                }
                other => return fault(format!("@cl.{}: argument {} cannot be {}", k.name, i + 1, other.describe())),
            });
        }
        if self.kernels == Kernels::Noop {
            return Ok(());
        }
        let handle = dev.kernel_entry(&k.source, &k.entry).or_else(fault)?;
        dev.launch_nd(handle, &args, &global).or_else(|e| fault(format!("@cl.{}: {e}", k.name)))?;
        for t in tensors {
            t.record_write();
        }
        Ok(())
    }

    /// Runs an operator's OpenCL kernel on device buffers (outputs already checked).
    fn op_call_cl(
        &self,
        dev: &crate::opencl::ClDevice,
        def: &crate::ops::OpDef,
        inputs: &[Option<Shared<View>>],
        outputs: &[Option<Shared<View>>],
        infos: &[Option<TensorInfo>],
        attrs: &Attrs,
    ) -> Step<()> {
        let Some(run) = crate::ops::cl::cl_fn(def.name) else {
            return fault(format!(
                "@onnx.{} has no OpenCL kernel yet (tensors on `{}`); run it on the host device",
                def.name, dev.caps.name
            ));
        };
        let as_cl = |v: &Shared<View>| -> Step<crate::ops::cl::ClTensor> {
            match crate::ops::cl::ClTensor::of_view(v) {
                Some(t) => Ok(t),
                None => fault(format!(
                    "@onnx.{} takes buffer views on OpenCL; {} is a texture view",
                    def.name,
                    Value::Tensor(v.clone()).describe()
                )),
            }
        };
        let mut ins = Vec::with_capacity(inputs.len());
        for v in inputs {
            ins.push(match v {
                Some(v) => {
                    v.check_coherent_read().or_else(fault)?;
                    Some(as_cl(v)?)
                }
                None => None,
            });
        }
        let mut outs = Vec::with_capacity(outputs.len());
        for v in outputs.iter().flatten() {
            outs.push(as_cl(v)?);
        }
        let ctx = crate::ops::cl::ClCtx { dev };
        run(&ctx, &ins, infos, attrs, &outs).or_else(|e| fault(format!("@onnx.{}: {e}", def.name)))?;
        for v in outputs.iter().flatten() {
            v.record_write();
        }
        Ok(())
    }

    /// An operator call on blocked textures (`ops::blocked`): checked and inferred on the
    /// logical shapes; run by the texture kernels on OpenCL, and on the host by unblocking
    /// the textures, running the host kernel and blocking its output.
    fn op_call_blocked(&self, call: &OpCall, noop: bool) -> Step<()> {
        let OpCall { dev, def, inputs, outputs, infos, host_in, attrs } = *call;
        use crate::ops::blocked;
        use crate::ops::texture_cl::{self, ClOperand, ClTexture};
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
        let call = blocked::infer(def, infos, &tin, &tout, attrs).map_err(bx)?;
        let Some(y) = outputs.first().and_then(Option::as_ref) else { return err("output 1 is required".into()) };
        if y.dtype != call.out.0 || y.shape[..] != call.out.1[..] {
            return err(format!(
                "output 1 is {}{:?} (blocked) for these inputs and attributes, but its view is {}{:?}",
                call.out.0,
                call.out.1,
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
            for (h, l) in host_in.iter().zip(&call.logical_in) {
                unblocked.push(match (h, l) {
                    (Some(h), Some(l)) => Some(blocked::unblock(h, l[1]).map_err(bx)?),
                    _ => None,
                });
            }
            let refs: SmallVec<[Option<&HostTensor>; 6]> =
                unblocked.iter().zip(host_in).map(|(u, h)| u.as_ref().or(h.as_ref())).collect();
            let mut outs = Vec::with_capacity(call.logical_out.len());
            for (dtype, shape) in &call.logical_out {
                outs.push(HostTensor::zeros(*dtype, shape).map_err(bx)?);
            }
            (def.host)(&refs, attrs, &mut outs).map_err(bx)?;
            let b = blocked::block(&outs[0]).map_err(bx)?;
            return write_view(y, &b.data).map_err(|e| Box::new(Fault { message: *e, notes: vec![] }));
        };
        let handle = |v: &Shared<View>| v.cl.ok_or_else(|| format!("internal: {} has no device handle", v.id));
        let y_mem = handle(y).map_err(bx)?.mem;
        let mut ins = Vec::with_capacity(inputs.len());
        for (v, l) in inputs.iter().zip(&call.logical_in) {
            let Some(v) = v else {
                ins.push(None);
                continue;
            };
            v.check_coherent_read().or_else(fault)?;
            let h = handle(v).map_err(bx)?;
            ins.push(Some(match l {
                Some(shape) => {
                    if h.mem == y_mem {
                        return err(
                            "an input and the output are the same image; texture kernels cannot work in place".into()
                        );
                    }
                    ClOperand::Texture(ClTexture { mem: h.mem, shape: shape.clone() })
                }
                None => ClOperand::Buffer(
                    crate::ops::cl::ClTensor::of_view(v)
                        .ok_or_else(|| bx(format!("input {} is not a buffer view on the device", v.id)))?,
                ),
            }));
        }
        let yt = ClTexture { mem: y_mem, shape: call.logical_out[0].1.clone() };
        texture_cl::run(&crate::ops::cl::ClCtx { dev }, name, &ins, infos, attrs, &yt).map_err(bx)?;
        y.record_write();
        Ok(())
    }

    /// `call @onnx.Name(inputs) -> (outputs) { attrs }`: infers the output types from the
    /// inputs, checks them against the output views, then runs the kernel.
    #[allow(clippy::too_many_arguments)]
    fn op_call(
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
        let dev = first.and_then(|v| v.storage.device_state().cl());
        let io_err = |e: Box<String>| Box::new(Fault { message: *e, notes: vec![] });
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
                Some(v) if (dev.is_none() && !noop) || (inference_reads_value(v) && !v.storage.is_constant()) => {
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
            return self
                .op_call_blocked(&OpCall { dev, def, inputs, outputs, infos: &infos, host_in: &host_in, attrs }, noop);
        }
        if let Some(inferred) = memo {
            // (With no-op kernels a remembered call returned above.)
            refuse_constant_outputs(def, outputs)?;
            return self
                .run_op(&OpCall { dev, def, inputs, outputs, infos: &infos, host_in: &host_in, attrs }, &inferred);
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
        self.run_op(&OpCall { dev, def, inputs, outputs, infos: &infos, host_in: &host_in, attrs }, &inferred)
    }

    /// With no-op kernels: true when the [`QuickCheck`]s of operator call site `site` cover
    /// the views now in its registers, so the call has nothing left to do. The views are
    /// compared where they are, without cloning them (reference counts touched and dropped
    /// were a third of a no-op call): a view object by its [`crate::memory::ViewClass`] or
    /// (a constant) its id, a slice by its geometry number and device; the call's constants
    /// and omitted inputs are the same at every run. Whatever this cannot decide (a texture, an input whose value inference
    /// reads, a constant output, a non-tensor) answers `false`, and the general path
    /// decides and reports. Out of line, so that `exec` stays small; the common case, a
    /// fixed site that has passed, is [`Vm::site_passed`], in line.
    #[inline(never)]
    fn memo_covers_site(&self, base: usize, site: u32) -> bool {
        let Some(s) = self.quick_sites.get(site as usize) else { return false };
        // A passed site never gets here: `exec` asks `site_passed` first, in line.
        debug_assert!(s.len.get() != QuickSite::PASSED, "site {site} passed: exec checks that first");
        let Some(checks) = self.quick_checks.get(s.start as usize..).and_then(|c| c.get(..s.len.get() as usize)) else {
            return false;
        };
        checks.iter().all(|c| {
            let c = c.get();
            self.regs.get(base + c.reg as usize).is_some_and(|v| c.key.covers(v))
        })
    }

    /// True when operator call site `site` is fixed and has passed its check
    /// ([`QuickSite::PASSED`]): in line in `exec`, the no-op path of most of a compiled
    /// model's calls makes no call.
    #[inline(always)]
    fn site_passed(&self, site: u32) -> bool {
        self.quick_sites.get(site as usize).is_some_and(|s| s.len.get() == QuickSite::PASSED)
    }

    /// Sets the [`QuickCheck`]s of operator call site `site`, or unsets them (`None`, or
    /// more than the site has room for).
    fn set_quick(&self, site: usize, checks: Option<SmallVec<[QuickCheck; 6]>>) {
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
    fn op_call_at(&self, m: &Module, f: &Function, base: usize, at: usize, site: u32) -> Step<()> {
        match f.code.get(at) {
            Some(&Instr::CallOp { op, list, attrs, nout, nin }) => {
                self.op_call(m, f, base, site, op, list, attrs, nout, nin)
            }
            other => fault(format!("internal: instruction {at} is {other:?}, not the operator call of site {site}")),
        }
    }

    /// Runs an operator's kernel once its output types are known to match its views.
    fn run_op(&self, call: &OpCall, inferred: &[crate::ops::OutInfo]) -> Step<()> {
        let OpCall { dev, def, inputs, outputs, infos, host_in, attrs } = *call;
        if let Some(dev) = dev {
            return self.op_call_cl(dev, def, inputs, outputs, infos, attrs);
        }
        let mut outs: Recycled<HostTensor> = Recycled::new(&self.scratch);
        for (dtype, shape) in inferred {
            let bytes =
                crate::types::dense_bytes(*dtype, shape).and_then(|b| usize::try_from(b).ok()).ok_or_else(|| {
                    Box::new(Fault { message: format!("@onnx.{}: output too large", def.name), notes: vec![] })
                })?;
            // Zeroed, as the kernels expect.
            let mut data = self.scratch.borrow_mut().take(bytes);
            data.resize(bytes, 0);
            outs.push(HostTensor { dtype: *dtype, shape: shape.clone(), data });
        }
        let refs: SmallVec<[Option<&HostTensor>; 6]> = host_in.iter().map(|t| t.as_ref()).collect();
        (def.host)(&refs, attrs, &mut outs).or_else(|e| fault(format!("@onnx.{}: {e}", def.name)))?;
        for (v, t) in outputs.iter().zip(outs.iter()) {
            if let Some(v) = v {
                write_view(v, &t.data).map_err(|e| Box::new(Fault { message: *e, notes: vec![] }))?;
            }
        }
        Ok(())
    }

    /// [`read_view`] into a recycled buffer (give it back through [`Recycled`]).
    fn read_recycled(&self, v: &View) -> Result<HostTensor, crate::exec::Fail> {
        let bytes = (v.numel() * v.dtype.size() as u64) as usize;
        let buf = self.scratch.borrow_mut().take(bytes);
        crate::exec::read_view_into(v, buf)
    }

    /// An int operand; the common case (an int is there) is inlined, errors are not.
    #[inline(always)]
    fn read_int(&self, m: &Module, f: &Function, base: usize, a: Arg) -> Step<i64> {
        match self.int_operand(m, base, a) {
            Some(v) => Ok(v),
            None => self.read_int_slow(m, f, base, a),
        }
    }

    #[cold]
    #[inline(never)]
    fn read_int_slow(&self, m: &Module, f: &Function, base: usize, a: Arg) -> Step<i64> {
        match self.read(m, f, base, a)? {
            Value::Int(v) => Ok(v),
            v => fault(format!("expected an int, found {}", v.describe())),
        }
    }

    fn arg_name(&self, f: &Function, a: Arg, v: i64) -> String {
        match a.kind() {
            ArgKind::Reg(r) => format!("%{} = {v}", f.reg_name(r)),
            _ => v.to_string(),
        }
    }

    fn make_shape(&self, m: &Module, f: &Function, base: usize, dims: u32, ndim: u8) -> Step<Value> {
        let mut out: SmallVec<[i64; 4]> = SmallVec::new();
        for a in &f.args[dims as usize..][..ndim as usize] {
            let v = self.read_int(m, f, base, *a)?;
            if v < 0 {
                return fault(format!("a shape dimension must be >= 0, found {}", self.arg_name(f, *a, v)));
            }
            out.push(v);
        }
        Ok(Value::Shape(out.into_iter().collect()))
    }

    #[allow(clippy::too_many_arguments)]
    fn alloc_storage(
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
            Err(e) => fault(e.to_string()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn alloc_tensor(
        &self,
        m: &Module,
        f: &Function,
        base: usize,
        storage: Reg,
        args: u32,
        dtype: crate::types::DType,
        scope: Scope,
        ndim: u8,
        site: Site,
    ) -> Step<Value> {
        let st = match &self.regs[base + storage.0 as usize] {
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
        match View::make(st, offset, dtype, &dims, scope, image, bytes, site, None) {
            Ok(v) => Ok(Value::Tensor(v)),
            Err(e) => fault(e),
        }
    }

    /// A storage of constant size and alignment ([`Op::AllocStorageConst`]) in the steady
    /// state: a parked one revived. `None` when there is none to revive or a limit would
    /// be passed: the general instruction then runs (and reports any error).
    /// Writes the register itself: a returned value would pass through memory.
    #[inline]
    fn alloc_storage_const(&mut self, base: usize, x: crate::specialize::StorageArgs, fid: usize, at: usize) -> bool {
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
    fn general_alloc_storage(&mut self, m: &Module, f: &Function, base: usize, fid: usize, at: usize) -> Step<()> {
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
    fn alloc_buffer_const(&mut self, base: usize, x: crate::specialize::BufferArgs, fid: usize, at: usize) -> bool {
        let Value::Storage(st) = self.reg(base, x.storage) else { return false };
        let Some(g) = self.buffer_geoms.get(x.geom as usize) else { return false };
        if g.end > st.size {
            return false;
        }
        // Tracking lists every view in the ledger, so it needs view objects.
        if g.slice == NO_SLICE || !st.in_host_memory() || self.rt.objects.track.get() {
            return self.buffer_view_object(base, x, fid, at);
        }
        crate::memory::bump(&self.rt.objects.views_created, 1);
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
    fn alloc_image_const(&mut self, base: usize, x: crate::specialize::BufferArgs, fid: usize, at: usize) -> bool {
        let Value::Storage(st) = self.reg(base, x.storage) else { return false };
        let Some(v) = self.image_views.get(x.geom as usize) else { return false };
        let Some(Some(p)) = v.on_device.get(st.device as usize) else { return false };
        if p.end > st.size {
            return false;
        }
        // In host memory, as a buffer view: no object while nothing tracks objects.
        if p.slice != NO_SLICE && st.in_host_memory() && !self.rt.objects.track.get() {
            crate::memory::bump(&self.rt.objects.views_created, 1);
            let v = Value::Slice(p.slice, st.clone());
            self.set_fresh(base, x.dst, v);
            return true;
        }
        let g = &v.geom;
        let site = self.site(fid, at);
        match View::make(st.clone(), g.offset, g.dtype, &g.shape, g.scope, Some(p.layout), p.bytes, site, None) {
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
    fn buffer_view_object(&mut self, base: usize, x: crate::specialize::BufferArgs, fid: usize, at: usize) -> bool {
        let (Some(Value::Storage(st)), Some(g)) =
            (self.regs.get(base + x.storage.0 as usize), self.buffer_geoms.get(x.geom as usize))
        else {
            return false;
        };
        let (v, site) = (&g.view, self.site(fid, at));
        match View::make(st.clone(), v.offset, v.dtype, &v.shape, Scope::Global, None, v.bytes, site, Some(v.type_id)) {
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
    fn general_alloc_tensor(&mut self, m: &Module, f: &Function, base: usize, fid: usize, at: usize) -> Step<()> {
        match f.code.get(at) {
            Some(&Instr::AllocTensor { dst, storage, args, dtype, scope, ndim }) => self
                .alloc_tensor(m, f, base, storage, args, dtype, scope, ndim, self.site(fid, at))
                .map(|v| self.set(base, dst, v)),
            other => {
                fault(format!("internal: instruction {at} is {other:?}, not the alloc_tensor it was specialised from"))
            }
        }
    }

    /// The fast path of the two-operand integer builtins (`iadd`, `ilt`, ...): both operands
    /// already ints, the result fits, one register to write. Anything else (an error to
    /// report, another builtin) returns `false` and takes the general path.
    #[inline(always)]
    fn scalar_builtin(&mut self, m: &Module, f: &Function, base: usize, id: u32, list: u32) -> bool {
        // `iadd` ..= `ige` are consecutive ids, all `(int, int) -> int`: one compare picks
        // them, and the verifier has checked their one destination and two operands.
        const FIRST: u32 = Builtin::IAdd as u32;
        let k = id.wrapping_sub(FIRST);
        if k > Builtin::IGe as u32 - FIRST {
            return false;
        }
        let Some(&[d, a, b]) = f.args.get(list as usize..list as usize + 3) else { return false };
        let Some(d) = d.as_reg() else { return false };
        let (Some(x), Some(y)) = (self.int_operand(m, base, a), self.int_operand(m, base, b)) else {
            return false;
        };
        let Some(&builtin) = Builtin::ALL.get(id as usize) else { return false };
        // `idiv`, `irem`: division by zero and overflow are reported by the general path.
        let r = crate::specialize::int_builtin(builtin, x, y);
        let (Some(r), Some(slot)) = (r, self.regs.get_mut(base + d.0 as usize)) else { return false };
        // Overwrite an int in place: no drop of the old value, no temporary on the stack.
        match slot {
            Value::Int(v) => *v = r,
            _ => *slot = Value::Int(r),
        }
        true
    }

    /// An int operand without cloning or error reporting (`None`: not an int right now).
    #[inline(always)]
    fn int_operand(&self, m: &Module, base: usize, a: Arg) -> Option<i64> {
        // Registers and immediates first, one compare each; `kind` decodes every tag.
        if let Some(r) = a.as_reg() {
            return match self.regs.get(base + r.0 as usize) {
                Some(Value::Int(v)) => Some(*v),
                _ => None,
            };
        }
        if let Some(v) = a.as_imm() {
            return Some(v as i64);
        }
        match a.kind() {
            ArgKind::Lit(i) => match m.literals.get(i as usize) {
                Some(Literal::Int(v)) => Some(*v),
                _ => None,
            },
            _ => None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn builtin(&mut self, m: &Module, f: &Function, base: usize, id: u32, list: u32, ndst: u8, nargs: u16) -> Step<()> {
        let b = Builtin::ALL[id as usize];
        let items = &f.args[list as usize..][..ndst as usize + nargs as usize];
        let mut args: SmallVec<[Value; 4]> = SmallVec::new();
        for a in &items[ndst as usize..] {
            args.push(self.read(m, f, base, *a)?);
        }
        let out: &mut dyn Write = match &mut self.output {
            Output::Stdout => &mut std::io::stdout(),
            Output::Buffer(b) => b,
        };
        let r = call_builtin(b, &args, out).map_err(|e| Box::new(Fault { message: *e, notes: vec![] }))?;
        if let (Some(v), Some(d)) = (r, items.first()) {
            if let ArgKind::Reg(d) = d.kind() {
                self.set(base, d, v);
            }
        }
        Ok(())
    }

    /// Sets up a callee frame; returns its base.
    #[allow(clippy::too_many_arguments)]
    fn enter(
        &mut self,
        m: &Module,
        f: &Function,
        base: usize,
        callee: &Function,
        list: u32,
        ndst: u8,
        nargs: u16,
    ) -> Step<usize> {
        if self.frames.len() >= self.limits.max_call_depth {
            return fault(format!(
                "call depth limit of {} reached calling @{}",
                self.limits.max_call_depth, callee.name
            ));
        }
        let new_base = self.regs.len();
        let args = &f.args[list as usize + ndst as usize..][..nargs as usize];
        self.regs.resize(new_base + callee.num_regs as usize, Value::Null);
        for (i, a) in args.iter().enumerate() {
            let v = match self.read(m, f, base, *a) {
                Ok(v) => v,
                Err(e) => {
                    self.regs.truncate(new_base);
                    return Err(e);
                }
            };
            if let Err(msg) = check_type(&v, &callee.params[i]) {
                self.regs.truncate(new_base);
                return fault(format!("argument {} of @{}: {msg}", i + 1, callee.name));
            }
            self.regs[new_base + i] = v;
        }
        Ok(new_base)
    }

    /// The entry frame's return values, checked against its declared results, pushed onto
    /// `returned`: no buffer of their own when the arguments' has room.
    #[inline(never)]
    fn return_values(&mut self, m: &Module, f: &Function, fid: usize, base: usize, list: u32, n: u16) -> Step<()> {
        let mut out = std::mem::take(&mut self.returned);
        debug_assert!(out.is_empty(), "the previous run's values were taken");
        out.reserve(n as usize);
        self.read_results(m, f, fid, base, list, n, &mut out)?;
        self.returned = out;
        Ok(())
    }

    /// A returning frame's values for its caller's registers.
    #[inline]
    fn collect_results(
        &self,
        m: &Module,
        f: &Function,
        fid: usize,
        base: usize,
        list: u32,
        n: u16,
    ) -> Step<SmallVec<[Value; 2]>> {
        let mut vals = SmallVec::new();
        self.read_results(m, f, fid, base, list, n, &mut vals)?;
        Ok(vals)
    }

    /// Reads the `n` values of a `ret` with operand list `list` in function `fid` (frame at
    /// `base`), checks each against its declared result type ([`Signatures`]) and appends
    /// them to `out`.
    ///
    /// [`Signatures`]: crate::signature::Signatures
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn read_results(
        &self,
        m: &Module,
        f: &Function,
        fid: usize,
        base: usize,
        list: u32,
        n: u16,
        out: &mut impl Extend<Value>,
    ) -> Step<()> {
        for (i, a) in f.args[list as usize..][..n as usize].iter().enumerate() {
            let v = self.read(m, f, base, *a)?;
            let slot = self.signatures.result_slot(fid, i);
            if let Err(msg) = self.signatures.check(&self.rt, fid, slot, &v, &f.results[i]) {
                return fault(format!("result {} of @{}: {msg}", i + 1, f.name));
            }
            out.extend(Some(v));
        }
        Ok(())
    }
}

/// The view object of slice `g` of `st` as a value (out of line: `read_reg` is inlined
/// into `exec`).
#[inline(never)]
fn slice_value(g: u32, st: &Shared<Storage>) -> Step<Value> {
    View::of_slice(g, st).map(Value::Tensor).or_else(fault)
}

/// Checks a value against a declared type (kinds, and dtype/shape for typed tensors).
pub(crate) fn check_type(v: &Value, t: &Type) -> Result<(), String> {
    match (v, t) {
        (Value::Tensor(view), Type::Tensor { .. }) => {
            if crate::verify::type_admits(t, view.dtype, &view.shape) {
                Ok(())
            } else {
                Err(format!("expected {t}, found {}{:?}", view.dtype, &view.shape[..]))
            }
        }
        (Value::Slice(..), Type::Tensor { .. }) => check_type(&v.materialized()?, t),
        (v, t) if v.kind() == Some(t.kind()) => Ok(()),
        (v, t) => Err(format!("expected {t}, found {}", v.describe())),
    }
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

/// An image view's layout and bytes on a device with `caps`, or why the device cannot
/// make it: what `alloc_tensor` checks of a texture-scope view besides whether it fits its
/// storage. One definition for the general instruction and for the image geometries a
/// `Vm` checks per device when it is made ([`ImageView`]).
fn image_geometry(
    caps: &DeviceCaps,
    scope: Scope,
    dtype: DType,
    dims: &[i64],
    offset: u64,
) -> Result<(ImageLayout, u64), String> {
    let shape_txt = || format!("{dtype}{dims:?}");
    if !caps.image_support {
        return Err(format!("device `{}` has no image support, so it cannot make \"{scope}\" views", caps.name));
    }
    let layout = ImageLayout::new(scope, dtype, dims, caps.image_pitch_align_px)?;
    if layout.width > caps.max_image2d_width || layout.height > caps.max_image2d_height {
        return Err(format!(
            "image of {}x{} texels for {} is larger than device `{}` allows ({}x{})",
            layout.width,
            layout.height,
            shape_txt(),
            caps.name,
            caps.max_image2d_width,
            caps.max_image2d_height
        ));
    }
    if !offset.is_multiple_of(caps.image_base_align) {
        return Err(format!(
            "image view offset {offset} is not a multiple of the image base-address alignment of device `{}` ({} bytes)",
            caps.name, caps.image_base_align
        ));
    }
    // An image at a non-zero offset is made from a sub-buffer there, so the offset must
    // also meet the sub-buffer alignment (checked on every device, so the host catches
    // what an OpenCL device would refuse).
    if offset != 0 && !offset.is_multiple_of(caps.mem_base_addr_align) {
        return Err(format!(
            "an image view at byte offset {offset} needs a sub-buffer there, but device `{}` requires sub-buffer offsets to be multiples of CL_DEVICE_MEM_BASE_ADDR_ALIGN ({} bytes)",
            caps.name, caps.mem_base_addr_align
        ));
    }
    match layout.byte_size() {
        Some(b) => Ok((layout, b)),
        None => Err(format!("image for {} is too large", shape_txt())),
    }
}

/// An image view of constant geometry ([`Op::AllocImageConst`]) with, per device of the
/// runtime, its layout and size there, or `None` where the device cannot make it (the
/// general instruction then reports why).
struct ImageView {
    geom: crate::specialize::ImageGeom,
    on_device: Box<[Option<ImagePlacement>]>,
}

#[derive(Clone, Copy)]
struct ImagePlacement {
    layout: ImageLayout,
    bytes: u64,
    /// `offset + bytes`: the view fits a storage of at least this many bytes.
    end: u64,
    /// Its number among the runtime's slice geometries ([`Value::Slice`]), or [`NO_SLICE`].
    slice: u32,
}

/// Function `fid` of `m` and its code in `ops`, without bounds checks.
///
/// # Safety
/// `fid` is below `m.funcs.len()`, and `ops` has one entry per function of `m`.
#[inline(always)]
unsafe fn func_code<'a>(m: &'a Module, ops: &'a [Box<[Op]>], fid: usize) -> (&'a Function, &'a [Op]) {
    debug_assert!(fid < m.funcs.len() && ops.len() == m.funcs.len());
    // SAFETY: the caller's promise.
    unsafe { (m.funcs.get_unchecked(fid), ops.get_unchecked(fid)) }
}
