//! The [`Vm`]: its state, construction for a module and devices, and accessors.

use super::sites::*;
use super::state::*;
use crate::interp::devices::DeviceSpec;
use crate::interp::error::VmError;
use crate::interp::exec::{fill_view, store_bytes};
use crate::interp::io::IoReport;
use crate::interp::specialize::{Op, NO_SLICE};
use crate::ir::bytecode::{ConstId, PrimaryMap};
use crate::ir::host_tensor::store_f64;
use crate::ir::module::{ConstData, Module};
use crate::ir::types::Scope;
use crate::runtime::device::{DeviceCaps, HostBlock};
use crate::runtime::memory::{ConstAlloc, Ledger, Runtime, Site, Stats, Storage, View, ViewSpec, NO_BIN};
use crate::runtime::shared::Shared;
use crate::runtime::value::Value;
use std::cell::{Cell, Ref, RefCell};
use std::rc::Rc;
use std::sync::Arc;

/// A virtual machine: a module, its devices, its constants and a register stack.
pub struct Vm {
    pub(crate) module: Arc<Module>,
    pub(crate) rt: Rc<Runtime>,
    pub(crate) consts: PrimaryMap<ConstId, Shared<View>>,
    pub(crate) regs: Vec<Value>,
    pub(crate) frames: Vec<Frame>,
    pub limits: Limits,
    /// [`Kernels::Noop`] skips the work of operator and kernel calls.
    pub kernels: Kernels,
    /// Per operator call site ([`Op::CallOpSite`]), the operand types it last checked
    /// ([`OpMemo`]).
    pub(crate) op_memo: RefCell<Vec<Option<OpMemo>>>,
    /// Per operator call site, where its [`QuickCheck`]s are in `quick_checks`, and how many
    /// are set. Cells, not a `RefCell`: the no-op path reads them with no borrow.
    pub(crate) quick_sites: Box<[QuickSite]>,
    pub(crate) quick_checks: Box<[Cell<QuickCheck>]>,
    /// Buffers for the host kernels' operand copies.
    pub(crate) scratch: RefCell<Scratch>,
    pub(crate) output: Output,
    /// The copies and fallbacks of the last invocation.
    pub(crate) io: IoReport,
    /// Per function, the bytes its storage parameters need (computed on first use).
    pub(crate) storage_needs: Vec<Option<Rc<[Option<u64>]>>>,
    /// The run a debugger is stepping through ([`crate::interp::debug`]).
    pub(crate) debug: Option<crate::interp::state::DebugRun>,
    /// Instructions typed at a REPL prompt: sites are [`Site::PROMPT`].
    pub(crate) prompt: bool,
    /// Function ids by name ([`crate::ir::names`]).
    pub(crate) func_names: crate::ir::names::FuncNames,
    /// The values of the last run's `ret` (with [`Exit::Returned`]), until taken.
    pub(crate) returned: Vec<Value>,
    /// The argument and result types invocations last admitted, per function.
    pub(crate) signatures: crate::interp::signature::Signatures,
    /// The module's code as the interpreter runs it ([`crate::interp::specialize`]), one slice per
    /// function. `exec` borrows it through a raw pointer beside `&mut self`; an `Rc`, not
    /// a `Box`, because a `Box`'s contents count as part of `self` for that `&mut`.
    pub(crate) ops: Rc<[Box<[Op]>]>,
    /// The interrupt flag and timeout timer of the checked run in progress
    /// ([`Vm::run_checked`], [`Vm::debug_resume`]); `exec` reads the flag through a pointer.
    pub(crate) watch: Option<crate::interp::state::Watch>,
    /// The geometries of the constant buffer views in `ops` ([`Op::AllocBufferConst`]).
    pub(crate) buffer_geoms: Box<[crate::interp::specialize::BufferGeom]>,
    /// The constant image views in `ops` ([`Op::AllocImageConst`]), checked per device.
    pub(crate) image_views: Box<[ImageView]>,
    /// The requests of [`Op::AllocStorageConst`], checked for this VM's devices.
    pub(crate) const_allocs: Box<[ConstAlloc]>,
}

impl Vm {
    /// A VM on the given devices (device 0 holds the constants). The module is verified
    /// here, so the interpreter only ever runs verified code.
    pub fn new(module: Arc<Module>, devices: Vec<DeviceCaps>) -> Result<Vm, VmError> {
        Vm::with_devices(module, devices.into_iter().map(DeviceSpec::Host).collect())
    }

    /// A VM on host and/or OpenCL devices (device 0 holds the constants).
    pub fn with_devices(module: Arc<Module>, devices: Vec<DeviceSpec>) -> Result<Vm, VmError> {
        Vm::with_devices_and_limits(module, devices, Limits::default())
    }

    /// A VM on host and/or OpenCL devices with `limits` from the start: the module's
    /// constants count against [`Limits::max_live_bytes`] as they load, so a constant that
    /// would cross it is refused here, before its memory is taken.
    pub fn with_devices_and_limits(
        module: Arc<Module>,
        devices: Vec<DeviceSpec>,
        limits: Limits,
    ) -> Result<Vm, VmError> {
        if devices.is_empty() {
            return Err(VmError::api("a VM needs at least one device"));
        }
        let rt = Runtime::new(devices).map_err(VmError::api)?;
        Vm::with_runtime_and_limits(module, rt, limits)
    }

    /// A VM on the devices of an existing runtime, e.g. another VM's
    /// ([`Vm::runtime`]): tensors and storages pass between VMs that share a runtime
    /// without copies (one OpenCL context per device).
    pub fn with_runtime(module: Arc<Module>, rt: Rc<Runtime>) -> Result<Vm, VmError> {
        Vm::with_runtime_and_limits(module, rt, Limits::default())
    }

    /// [`Vm::with_runtime`] with `limits` from the start (see [`Vm::with_devices_and_limits`]).
    pub fn with_runtime_and_limits(module: Arc<Module>, rt: Rc<Runtime>, limits: Limits) -> Result<Vm, VmError> {
        crate::ir::verify::verify_module(&module).map_err(|e| VmError::api(format!("invalid module: {e}")))?;
        if rt.devices.is_empty() {
            return Err(VmError::api("a VM needs at least one device"));
        }
        // The constants load under this VM's live-bytes limit (each entry applies it again).
        rt.set_live_limit(limits.max_live_bytes.unwrap_or(u64::MAX));
        let mut consts = Vec::with_capacity(module.consts.len());
        // On the host, a constant's storage is the module's own bytes (the VM holds the
        // module): the weights are in memory once, and loading copies nothing.
        let owner: Arc<dyn std::any::Any + Send + Sync> = module.clone();
        let on_host = rt.devices[0].device().is_none();
        for c in module.consts.values() {
            let numel = c.numel().unwrap_or(0);
            let bytes = numel.saturating_mul(c.dtype.size() as u64);
            let fail = |e: String| {
                VmError::api(format!("cannot load constant @{} ({}{:?}, {bytes} bytes): {e}", c.name, c.dtype, c.shape))
            };
            let borrowed = match &c.data {
                ConstData::Bytes(b) if on_host && b.len() as u64 == bytes => HostBlock::borrowed(b, owner.clone()),
                _ => None,
            };
            let loaded = borrowed.is_some();
            let st = match borrowed {
                Some(block) => Storage::constant_over(&rt, 0, block, Site::API),
                None => Storage::alloc(&rt, 0, bytes, 0, Scope::Global, Site::API, true),
            }
            .map_err(|e| fail(e.to_string()))?;
            let in_host_memory = st.in_host_memory();
            let view = View::make(st, ViewSpec::buffer(0, c.dtype, &c.shape, bytes), Site::API, None).map_err(fail)?;
            match &c.data {
                // A borrowed block is the bytes already.
                ConstData::Bytes(_) if loaded => {}
                ConstData::Bytes(b) => store_bytes(&view, b).map_err(|e| fail(*e))?,
                ConstData::Fill(v) => {
                    let mut e = [0u8; 8];
                    store_f64(c.dtype, *v, &mut e);
                    // Written in place. A constant's host storage is never from the pool:
                    // its block is fresh and zeroed, so a zero fill writes nothing.
                    fill_view(&view, &e[..c.dtype.size()], in_host_memory).map_err(|e| fail(*e))?;
                }
            }
            consts.push(view);
        }
        let specialized = crate::interp::specialize::specialize(&module);
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
        let fixed = crate::interp::fixed::fixed_sites(&module, &specialized.ops, &const_allocs, nsites);
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
                        let slice = crate::runtime::memory::SliceGeom {
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
            consts: consts.into(),
            regs: Vec::new(),
            frames: Vec::new(),
            limits,
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
            signatures: crate::interp::signature::Signatures::new(&module),
            func_names: crate::ir::names::FuncNames::new(&module),
            ops: specialized.ops.into(),
            watch: None,
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
    pub(crate) fn site(&self, fid: usize, pc: usize) -> Site {
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

    /// The copies and fallbacks of the last invocation ([`crate::interp::io`]).
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
        for (name, x) in self.rt.devices.iter().filter_map(|d| d.device()).flat_map(|d| d.counters()) {
            if let Some(slot) = v.iter_mut().find(|(n, _)| *n == name) {
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
}
