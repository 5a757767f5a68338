//! Storages, views and the allocation ledger.
//!
//! A [`Storage`] owns device memory and is reference counted ([`Shared`]); a [`View`] holds its
//! storage, so a storage lives while any register or view refers to it. When the last
//! reference dies the memory goes back to its device's pool and the ledger forgets it.

use crate::ir::host_tensor::Derived;
use crate::ir::types::{DType, ImageLayout, Scope};
use crate::runtime::backend::{Device, DeviceBlock, Operand, ViewHandle, ViewKind};
use crate::runtime::counters::{bump, sub, take_next, Counters, ObjectCounters};
use crate::runtime::device::{size_class, AllocSource, Binned, Bins, DeviceCaps, HostBlock, HOST_MAX_ALIGN};
use crate::runtime::shared::{Parked, Shared};
use smallvec::SmallVec;
use std::cell::{Cell, RefCell};
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::rc::Rc;

/// The instruction that created an object: function index and instruction index.
/// `func == u32::MAX` marks objects made by the embedding API (inputs, constants).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    pub func: u32,
    pub pc: u32,
}

impl Site {
    pub const API: Site = Site { func: u32::MAX, pc: 0 };
    /// Objects made by instructions typed at a REPL prompt ([`crate::Vm::mark_prompt`]).
    pub const PROMPT: Site = Site { func: u32::MAX - 1, pc: 0 };
}

/// Where a device's memory lives: the host's own memory, or a [`Device`].
pub enum Backend {
    Host,
    Device(Box<dyn Device>),
}

/// One device's memory state.
pub struct DeviceState {
    pub caps: DeviceCaps,
    /// Dead storages kept whole for reuse, by size class and alignment: the pool. Declared
    /// before `backend` so that their blocks go before the device's context and queue.
    pub parked: RefCell<Bins<Parked<Storage>>>,
    pub backend: Backend,
    pub live_bytes: Cell<u64>,
    pub peak_bytes: Cell<u64>,
    /// The most bytes that may be live here: [`crate::Limits::max_live_bytes`] or the
    /// device's memory, whichever is less (so one compare checks both). Set through
    /// [`Runtime::set_live_limit`].
    pub(crate) live_limit: Cell<u64>,
}

impl DeviceState {
    /// The device behind this state, `None` for the host's memory.
    #[inline]
    pub fn device(&self) -> Option<&dyn Device> {
        match &self.backend {
            Backend::Device(d) => Some(&**d),
            Backend::Host => None,
        }
    }

    /// True when the memory is a device's, not the host's.
    #[inline(always)]
    pub fn is_device(&self) -> bool {
        matches!(self.backend, Backend::Device(_))
    }

    /// The strictest `align` a storage may ask for: the device's sub-buffer alignment
    /// (`CL_DEVICE_MEM_BASE_ADDR_ALIGN`), or [`HOST_MAX_ALIGN`] in host memory.
    #[inline]
    pub fn max_align(&self) -> u64 {
        if self.is_device() {
            self.caps.mem_base_addr_align
        } else {
            HOST_MAX_ALIGN
        }
    }

    /// True on devices whose texture views are standalone images: bytes written through
    /// one kind of view are not visible through the other.
    pub fn has_compat_images(&self) -> bool {
        self.is_device() && self.caps.image_support && !self.caps.image_from_buffer
    }

    /// Bytes of dead storages kept for reuse, and of the device's own pool's free blocks.
    pub fn pool_free_bytes(&self) -> u64 {
        self.parked.borrow().free_bytes() + self.device().map_or(0, |d| d.pool_free_bytes())
    }

    /// Gives every dead storage's block, and the device pool's blocks, back to the system.
    pub fn clear_pool(&self) {
        let dead = self.parked.borrow_mut().take_all();
        drop(dead);
        if let Some(d) = self.device() {
            d.clear_pool();
        }
    }
}

/// State shared by a VM and every storage it created.
pub struct Runtime {
    pub devices: Vec<DeviceState>,
    pub ledger: RefCell<Ledger>,
    /// Counters bumped on every invocation, kept out of the ledger's `RefCell`: borrowing
    /// it four times was a fifth of an empty invocation.
    pub counters: Counters,
    /// The allocation counters and object ids, bumped by every storage and view; cells
    /// too, so that only tracking ([`ObjectCounters::track`]) borrows the ledger.
    pub objects: ObjectCounters,
    /// Ids of the (dtype, shape) pairs views have had (see [`ViewClass`]).
    types: RefCell<TypeIds>,
    /// The geometries of buffer views held as [`crate::Value::Slice`], by index.
    slices: RefCell<SliceGeoms>,
    /// The live-bytes limit the devices hold ([`Runtime::set_live_limit`]).
    live_limit: Cell<u64>,
    /// Whether a device may run work after the call that gives it (any but the host).
    asynchronous: bool,
}

/// The buffer-view geometries of [`crate::Value::Slice`]s: what a VM's `alloc_tensor`s of
/// constant geometry make, numbered once per runtime so that a slice means the same view in
/// every VM of it.
#[derive(Default)]
struct SliceGeoms {
    list: Vec<SliceGeom>,
    /// By (dtype, shape) id, offset, scope and (for an image, which the rest determine but
    /// for the device's pitch alignment) row pitch.
    index: rustc_hash::FxHashMap<(u32, u64, Scope, u64), u32>,
}

/// The most geometries a runtime numbers for slices; views of later ones are objects.
const MAX_SLICE_GEOMS: usize = 1 << 20;

/// A view's geometry, as a [`crate::Value::Slice`] refers to it: a buffer view, or an
/// image view with its layout on the slice's device.
#[derive(Clone, Debug)]
pub struct SliceGeom {
    pub offset: u64,
    pub dtype: DType,
    pub shape: SmallVec<[i64; 4]>,
    /// Bytes the view covers (pitched for an image): `offset + bytes` is at most its
    /// storage's size.
    pub bytes: u64,
    /// The runtime's id of (dtype, shape) ([`Runtime::type_id`]).
    pub type_id: u32,
    pub scope: Scope,
    /// The image layout of a texture-scope view.
    pub image: Option<ImageLayout>,
}

/// (dtype, shape) pairs and their ids ([`Runtime::type_id`]).
type TypeIds = rustc_hash::FxHashMap<(DType, SmallVec<[i64; 4]>), u32>;

/// The most (dtype, shape) pairs a runtime numbers: a program of ever-new shapes must not
/// grow the table without bound; later shapes get no id (and compare the long way).
const MAX_TYPE_IDS: usize = 1 << 16;

/// What an operator call's memo compares a view by, in one word: the view's (dtype,
/// shape) id from [`Runtime::type_id`] (0: none), its device, and whether it is a
/// constant or a texture. Two buffer views with the same non-zero class have the same
/// dtype, shape and device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViewClass(pub u64);

impl ViewClass {
    const CONSTANT: u64 = 1 << 40;
    const TEXTURE: u64 = 1 << 41;

    pub fn new(type_id: u32, device: u8, constant: bool, texture: bool) -> ViewClass {
        let flags = if constant { Self::CONSTANT } else { 0 } | if texture { Self::TEXTURE } else { 0 };
        ViewClass(type_id as u64 | (device as u64) << 32 | flags)
    }

    #[inline(always)]
    pub fn type_id(self) -> u32 {
        self.0 as u32
    }

    #[inline(always)]
    pub fn device(self) -> u8 {
        (self.0 >> 32) as u8
    }

    /// A non-constant buffer view.
    #[inline(always)]
    pub fn is_plain(self) -> bool {
        self.0 & (Self::CONSTANT | Self::TEXTURE) == 0
    }

    /// A non-constant buffer view with a (dtype, shape) id: what a memo can match by class.
    #[inline(always)]
    pub fn is_plain_typed(self) -> bool {
        self.type_id() != 0 && self.is_plain()
    }
}

impl Runtime {
    /// A runtime over devices already open: each with its capabilities and where its
    /// memory lives (the host's, or a [`Device`]). `Runtime::new` opens devices from
    /// their descriptions (`interp/devices.rs`).
    pub fn with_backends(backends: Vec<(DeviceCaps, Backend)>) -> Rc<Runtime> {
        let mut devices = Vec::with_capacity(backends.len());
        for (caps, backend) in backends {
            devices.push(DeviceState {
                parked: RefCell::default(),
                backend,
                live_bytes: Cell::new(0),
                peak_bytes: Cell::new(0),
                live_limit: Cell::new(caps.global_mem),
                caps,
            });
        }
        let asynchronous = devices.iter().any(|d| d.device().is_some());
        Rc::new(Runtime {
            devices,
            ledger: RefCell::default(),
            counters: Counters::default(),
            objects: ObjectCounters::default(),
            types: RefCell::default(),
            slices: RefCell::default(),
            live_limit: Cell::new(u64::MAX),
            asynchronous,
        })
    }

    /// Waits until every device has run everything it was given ([`Device::finish`]).
    #[inline(always)]
    pub fn finish(&self) -> Result<(), String> {
        if self.asynchronous {
            self.finish_devices()?;
        }
        Ok(())
    }

    #[cold]
    fn finish_devices(&self) -> Result<(), String> {
        self.devices.iter().filter_map(DeviceState::device).try_for_each(|d| d.finish())
    }

    /// Gives every device the live-bytes limit `limit` (`u64::MAX`: none). Each VM gives
    /// its own at each entry; only a change touches the devices.
    #[inline(always)]
    pub(crate) fn set_live_limit(&self, limit: u64) {
        if self.live_limit.get() != limit {
            self.set_device_limits(limit);
        }
    }

    #[cold]
    fn set_device_limits(&self, limit: u64) {
        for d in &self.devices {
            d.live_limit.set(limit.min(d.caps.global_mem));
        }
        self.live_limit.set(limit);
    }

    /// The id of (dtype, shape) in this runtime, from 1; 0 once `MAX_TYPE_IDS` (65,536) are given.
    pub fn type_id(&self, dtype: DType, shape: &[i64]) -> u32 {
        let mut types = self.types.borrow_mut();
        if let Some(&id) = types.get(&(dtype, SmallVec::from_slice(shape))) {
            return id;
        }
        if types.len() >= MAX_TYPE_IDS {
            return 0;
        }
        let id = types.len() as u32 + 1;
        types.insert((dtype, SmallVec::from_slice(shape)), id);
        id
    }

    /// The number of `g`'s geometry for [`crate::Value::Slice`]s (given once per runtime),
    /// or `None`: no (dtype, shape) id, or `MAX_SLICE_GEOMS` given (such views are objects).
    pub fn slice_geom_id(&self, g: &SliceGeom) -> Option<u32> {
        if g.type_id == 0 {
            return None;
        }
        let key = (g.type_id, g.offset, g.scope, g.image.map_or(0, |l| l.pitch_px));
        let mut t = self.slices.borrow_mut();
        if let Some(&id) = t.index.get(&key) {
            return Some(id);
        }
        if t.list.len() >= MAX_SLICE_GEOMS {
            return None;
        }
        let id = t.list.len() as u32;
        t.list.push(g.clone());
        t.index.insert(key, id);
        Some(id)
    }

    /// Geometry `id` of [`Runtime::slice_geom_id`].
    pub fn slice_geom(&self, id: u32) -> Option<std::cell::Ref<'_, SliceGeom>> {
        std::cell::Ref::filter_map(self.slices.borrow(), |t| t.list.get(id as usize)).ok()
    }

    /// Every counter: the ledger's and [`Runtime::counters`].
    pub fn stats(&self) -> Stats {
        let o = &self.objects;
        Stats {
            fresh_allocations: o.fresh_allocations.get(),
            pool_hits: o.storages_created.get() - o.fresh_allocations.get(),
            live_bytes: o.live_bytes.get(),
            peak_bytes: o.peak_bytes.get(),
            peak_total_bytes: o.peak_total_bytes.get(),
            instructions: self.counters.instructions.get(),
            storages_created: o.storages_created.get(),
            views_created: o.views_created.get(),
            live_storages: o.live_storages.get(),
            live_views: o.live_views.get(),
            constant_bytes: o.constant_bytes.get(),
            copies: self.counters.copies.get(),
        }
    }
}

/// Counters kept for every VM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Storages whose memory came fresh from the system.
    pub fresh_allocations: u64,
    /// Storages whose memory came from the pool.
    pub pool_hits: u64,
    /// Bytes of live non-constant storages (requested sizes), all devices: 0 again after
    /// a run that released everything.
    pub live_bytes: u64,
    /// The maximum `live_bytes` reached: the program's own storages (what a memory plan
    /// accounts for), constants excluded.
    pub peak_bytes: u64,
    /// The most bytes of storages live at once, constants included: the maximum of
    /// `live_bytes + constant_bytes`, all devices.
    pub peak_total_bytes: u64,
    pub instructions: u64,
    pub storages_created: u64,
    pub views_created: u64,
    pub live_storages: u64,
    pub live_views: u64,
    /// Bytes held by constants (outside the pool and `live_bytes`; in `peak_total_bytes`).
    pub constant_bytes: u64,
    /// Copies into, out of and between storages (see `interp/io.rs`).
    pub copies: crate::runtime::counters::Copies,
}

impl Stats {
    /// The counters as `(key, value)` pairs, in a stable order (the JSON keys).
    pub fn fields(&self) -> [(&'static str, u64); 17] {
        let c = self.copies.fields();
        [
            ("fresh_allocations", self.fresh_allocations),
            ("pool_hits", self.pool_hits),
            ("live_bytes", self.live_bytes),
            ("peak_bytes", self.peak_bytes),
            ("peak_total_bytes", self.peak_total_bytes),
            ("instructions", self.instructions),
            ("storages_created", self.storages_created),
            ("views_created", self.views_created),
            ("live_storages", self.live_storages),
            ("live_views", self.live_views),
            ("constant_bytes", self.constant_bytes),
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            c[5],
        ]
    }
}

/// A live storage as the ledger records it.
#[derive(Clone, Debug, PartialEq)]
pub struct StorageInfo {
    pub id: u64,
    pub device: u8,
    pub size: u64,
    pub capacity: u64,
    pub align: u64,
    pub scope: Scope,
    pub site: Site,
    pub constant: bool,
}

/// A live view as the ledger records it.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewInfo {
    pub id: u64,
    pub storage: u64,
    pub offset: u64,
    pub dtype: DType,
    pub shape: SmallVec<[i64; 4]>,
    pub scope: Scope,
    pub image: Option<ImageLayout>,
    pub bytes: u64,
    pub site: Site,
}

/// A vector with O(1) insert and remove by slot, for the live tables.
#[derive(Debug)]
struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab { items: Vec::new(), free: Vec::new() }
    }
}

impl<T> Slab<T> {
    fn insert(&mut self, v: T) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.items[i as usize] = Some(v);
                i
            }
            None => {
                self.items.push(Some(v));
                (self.items.len() - 1) as u32
            }
        }
    }
    fn remove(&mut self, i: u32) {
        if let Some(slot) = self.items.get_mut(i as usize) {
            if slot.take().is_some() {
                self.free.push(i);
            }
        }
    }
    fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter().flatten()
    }
}

/// With [`ObjectCounters::track`], a table of the live storages and views (ids, sizes,
/// offsets, scopes and creating instruction). The tables hold the objects' addresses, so
/// registering one copies nothing; the [`StorageInfo`] and [`ViewInfo`] records are built
/// only when someone asks. An object leaves its table in its `Drop`, before its memory is
/// freed, so every address in a table is that of a live object.
#[derive(Default)]
pub struct Ledger {
    storages: Slab<NonNull<Storage>>,
    views: Slab<NonNull<View>>,
}

impl Ledger {
    /// Live storages, oldest first (created while [`ObjectCounters::track`] was on).
    pub fn storages(&self) -> Vec<StorageInfo> {
        // SAFETY: the table holds live objects only (see the type's docs).
        let mut v: Vec<_> = self.storages.iter().map(|s| unsafe { s.as_ref() }.info()).collect();
        v.sort_by_key(|s| s.id);
        v
    }

    /// Live views, oldest first (created while [`ObjectCounters::track`] was on).
    pub fn views(&self) -> Vec<ViewInfo> {
        // SAFETY: the table holds live objects only (see the type's docs).
        let mut v: Vec<_> = self.views.iter().map(|v| unsafe { v.as_ref() }.info()).collect();
        v.sort_by_key(|s| s.id);
        v
    }
}

/// The table slot of an object created while [`ObjectCounters::track`] was off.
const UNTRACKED: u32 = u32::MAX;

/// Device memory owned by a storage.
pub enum DeviceMem {
    Host(HostBlock),
    Device(Box<dyn DeviceBlock>),
}

/// Who last wrote a byte range of a storage on a device with compat images: the buffer
/// (tag 0) or a standalone image (its `cl_mem` address).
#[derive(Clone, Copy, Debug)]
pub struct WriteRecord {
    pub start: u64,
    pub end: u64,
    pub tag: u64,
}

/// A global buffer on a device.
pub struct Storage {
    pub id: u64,
    pub device: u8,
    pub size: u64,
    pub align: u64,
    pub scope: Scope,
    pub site: Site,
    slot: u32,
    /// [`crate::runtime::device::class_index`] of its block's capacity: the bin it is parked in.
    bin: u8,
    constant: bool,
    /// Dead and kept in its device's bins ([`Storage::park`]): `rt` is gone.
    parked: bool,
    mem: Option<DeviceMem>,
    rt: ManuallyDrop<Rc<Runtime>>,
    /// Only used on devices with compat images (see [`DeviceState::has_compat_images`]).
    pub writes: RefCell<Vec<WriteRecord>>,
    /// What host kernels derived from a constant's bytes (empty for other storages, which
    /// are never given to kernels as constants).
    pub derived: Derived,
}

/// Why an allocation failed.
#[derive(Debug)]
pub enum AllocError {
    NoDevice { device: u8, count: usize },
    TooLarge { size: u64, max_alloc: u64, device: String },
    OutOfMemory { size: u64, live: u64, limit: u64, device: String },
    LiveLimit { size: u64, live: u64, limit: u64, device: String },
    BadAlign(u64),
    AlignTooLarge { align: u64, device: String, max: u64 },
    Device(String),
}

impl std::fmt::Display for AllocError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AllocError::NoDevice { device, count } => {
                write!(f, "device {device} does not exist: this VM has {count} device(s), numbered from 0")
            }
            AllocError::TooLarge { size, max_alloc, device } => write!(
                f,
                "storage of {size} bytes exceeds the largest allocation of device `{device}` ({max_alloc} bytes)"
            ),
            AllocError::OutOfMemory { size, live, limit, device } => write!(
                f,
                "out of device memory on `{device}`: {size} more bytes with {live} live would exceed its {limit} bytes"
            ),
            AllocError::LiveLimit { size, live, limit, device } => write!(
                f,
                "live-bytes limit reached on `{device}`: {size} more bytes with {live} live would exceed the limit of {limit} bytes (raise it with --max-live-bytes or Limits::max_live_bytes)"
            ),
            AllocError::BadAlign(a) => write!(f, "alignment must be a power of two, found {a}"),
            AllocError::AlignTooLarge { align, device, max } => {
                write!(f, "alignment {align} is too large: device `{device}` aligns storages to at most {max} bytes")
            }
            AllocError::Device(e) => f.write_str(e),
        }
    }
}

/// An `alloc_storage` whose device, size and alignment are constants, with the checks
/// [`Storage::alloc`] makes that do not depend on what is live made once
/// ([`Runtime::const_alloc`]), and its size class's bin found.
#[derive(Clone, Copy, Debug)]
pub struct ConstAlloc {
    pub device: u8,
    pub size: u64,
    /// The alignment, the device's base alignment for an `alloc_storage` without one.
    pub align: u64,
    pub scope: Scope,
    /// The index of its size class among the device's bins.
    pub bin: u32,
}

/// [`ConstAlloc::bin`] of a request its device refuses: no bin, so it is never revived.
pub const NO_BIN: u32 = u32::MAX;

impl Runtime {
    /// The constant allocation of `size` bytes aligned to `align` (0: the device's base
    /// alignment) on `device`, or `None` when [`Storage::alloc`] would refuse it whatever
    /// is live (and will say why when it runs).
    pub fn const_alloc(&self, device: u8, size: u64, align: u64, scope: Scope) -> Option<ConstAlloc> {
        let dev = self.devices.get(device as usize)?;
        let caps = &dev.caps;
        let align = if align == 0 { caps.base_align } else { align };
        if !align.is_power_of_two() || size > caps.max_alloc || align > dev.max_align() {
            return None;
        }
        let bin = u32::try_from(crate::runtime::device::class_index(size_class(size))).ok()?;
        Some(ConstAlloc { device, size, align, scope, bin })
    }
}

impl Storage {
    /// Allocates `size` bytes on `device` aligned to `align` (0: the device's base alignment).
    /// Constants bypass the pool and the allocation counters.
    pub fn alloc(
        rt: &Rc<Runtime>,
        device: u8,
        size: u64,
        align: u64,
        scope: Scope,
        site: Site,
        constant: bool,
    ) -> Result<Shared<Storage>, AllocError> {
        Storage::alloc_in(rt, device, size, align, scope, site, constant, None)
    }

    /// A constant host storage over `block`'s bytes (see [`HostBlock::borrowed`]): counted
    /// and limited as [`Storage::alloc`] counts a constant, without a copy.
    pub fn constant_over(
        rt: &Rc<Runtime>,
        device: u8,
        block: HostBlock,
        site: Site,
    ) -> Result<Shared<Storage>, AllocError> {
        let (size, align) = (block.capacity(), block.align());
        Storage::alloc_in(rt, device, size, align, Scope::Global, site, true, Some(block))
    }

    #[allow(clippy::too_many_arguments)]
    fn alloc_in(
        rt: &Rc<Runtime>,
        device: u8,
        size: u64,
        align: u64,
        scope: Scope,
        site: Site,
        constant: bool,
        given: Option<HostBlock>,
    ) -> Result<Shared<Storage>, AllocError> {
        let Some(dev) = rt.devices.get(device as usize) else {
            return Err(AllocError::NoDevice { device, count: rt.devices.len() });
        };
        let caps = &dev.caps;
        let align = if align == 0 { caps.base_align } else { align };
        if !align.is_power_of_two() {
            return Err(AllocError::BadAlign(align));
        }
        if align > dev.max_align() {
            return Err(AllocError::AlignTooLarge { align, device: caps.name.clone(), max: dev.max_align() });
        }
        if size > caps.max_alloc {
            return Err(AllocError::TooLarge { size, max_alloc: caps.max_alloc, device: caps.name.clone() });
        }
        let live = dev.live_bytes.get();
        if live.saturating_add(size) > caps.global_mem {
            return Err(AllocError::OutOfMemory { size, live, limit: caps.global_mem, device: caps.name.clone() });
        }
        // Constants count too: a VM made with a limit refuses a constant that would cross
        // it when it loads ([`crate::Vm::with_runtime_and_limits`]).
        let limit = dev.live_limit.get();
        if live.saturating_add(size) > limit {
            return Err(AllocError::LiveLimit { size, live, limit, device: caps.name.clone() });
        }
        let class = size_class(size);
        // A dead storage of this class kept whole (see `Storage::park`): only its identity
        // changes. Any other request makes a new one.
        let parked = if constant || given.is_some() { None } else { dev.parked.borrow_mut().take(class, align) };
        if let Some(p) = parked {
            return Ok(Storage::revive(rt, dev, p, size, align, scope, site));
        }
        let (storage, source) = Storage::fresh(rt, dev, device, size, class, align, scope, site, constant, given)?;
        Storage::count_new(rt, dev, size, constant, source);
        Ok(storage)
    }

    /// The steady-state `alloc_storage` of a size, alignment and device checked when the
    /// VM was made ([`ConstAlloc`]): a parked storage of its class renamed. `None` when no
    /// storage of the class is parked or the bytes would pass a limit: [`Storage::alloc`]
    /// then makes a new one or reports the error.
    #[inline]
    pub fn alloc_const(rt: &Rc<Runtime>, c: &ConstAlloc, site: Site) -> Option<Shared<Storage>> {
        let dev = rt.devices.get(c.device as usize)?;
        if dev.live_bytes.get().saturating_add(c.size) > dev.live_limit.get() {
            return None;
        }
        let p = dev.parked.borrow_mut().take_bin(c.bin as usize, c.align)?;
        Some(Storage::revive(rt, dev, p, c.size, c.align, c.scope, site))
    }

    /// A parked storage as a new one of `size` bytes (within its class): a new id and
    /// owner, counted as a pool hit.
    #[inline(always)]
    fn revive(
        rt: &Rc<Runtime>,
        dev: &DeviceState,
        mut p: Parked<Storage>,
        size: u64,
        align: u64,
        scope: Scope,
        site: Site,
    ) -> Shared<Storage> {
        let o = &rt.objects;
        let s = p.get_mut();
        s.id = o.next_storage.get();
        s.size = size;
        s.align = align;
        s.scope = scope;
        s.site = site;
        s.slot = if o.track.get() { rt.ledger.borrow_mut().storages.insert(NonNull::from(&*s)) } else { UNTRACKED };
        s.rt = ManuallyDrop::new(rt.clone());
        s.parked = false;
        Storage::count_new(rt, dev, size, false, AllocSource::PoolHit);
        p.revive()
    }

    /// What a new storage of `size` bytes changes in the counters.
    #[inline(always)]
    fn count_new(rt: &Runtime, dev: &DeviceState, size: u64, constant: bool, source: AllocSource) {
        let o = &rt.objects;
        o.next_storage.set(o.next_storage.get() + 1);
        let live = dev.live_bytes.get() + size;
        dev.live_bytes.set(live);
        dev.peak_bytes.set(dev.peak_bytes.get().max(live));
        if constant {
            bump(&o.constant_bytes, size);
        } else {
            // Pool hits are the storages made less the fresh ones (`Runtime::stats`).
            if source == AllocSource::Fresh {
                bump(&o.fresh_allocations, 1);
            }
            bump(&o.storages_created, 1);
            bump(&o.live_bytes, size);
            o.peak_bytes.set(o.peak_bytes.get().max(o.live_bytes.get()));
        }
        // The most storage memory held at once, constants included.
        o.peak_total_bytes.set(o.peak_total_bytes.get().max(o.live_bytes.get() + o.constant_bytes.get()));
        bump(&o.live_storages, 1);
    }

    /// A new storage object on a new (or the OpenCL pool's) block: `alloc` without a parked
    /// storage to revive. Takes the id `rt` hands out next; `alloc` counts it.
    #[cold]
    #[allow(clippy::too_many_arguments)]
    fn fresh(
        rt: &Rc<Runtime>,
        dev: &DeviceState,
        device: u8,
        size: u64,
        class: u64,
        align: u64,
        scope: Scope,
        site: Site,
        constant: bool,
        given: Option<HostBlock>,
    ) -> Result<(Shared<Storage>, AllocSource), AllocError> {
        let caps = &dev.caps;
        let oom = || AllocError::OutOfMemory {
            size,
            live: dev.live_bytes.get(),
            limit: caps.global_mem,
            device: caps.name.clone(),
        };
        let (block, source) = match (given, &dev.backend) {
            (Some(b), Backend::Host) => (DeviceMem::Host(b), AllocSource::Fresh),
            (Some(_), Backend::Device(_)) => {
                return Err(AllocError::Device(format!("on `{}`: host bytes cannot back a device storage", caps.name)))
            }
            // Constants take exactly their size: they are never pooled.
            (None, Backend::Host) if constant => {
                (DeviceMem::Host(HostBlock::new(size, align).ok_or_else(oom)?), AllocSource::Fresh)
            }
            (None, Backend::Host) => {
                (DeviceMem::Host(HostBlock::new(class, align).ok_or_else(oom)?), AllocSource::Fresh)
            }
            (None, Backend::Device(d)) => {
                let (b, s) = d.alloc(size).map_err(|e| AllocError::Device(format!("on `{}`: {e}", caps.name)))?;
                (DeviceMem::Device(b), s)
            }
        };
        let o = &rt.objects;
        // At most 231 (the top class of a 64-bit size), so it fits.
        let bin = crate::runtime::device::class_index(class) as u8;
        let storage = |slot| Storage {
            id: o.next_storage.get(),
            device,
            size,
            align,
            scope,
            site,
            slot,
            bin,
            constant,
            parked: false,
            mem: Some(block),
            rt: ManuallyDrop::new(rt.clone()),
            writes: RefCell::default(),
            derived: Derived::default(),
        };
        let s = Shared::new_at(|at| {
            storage(if o.track.get() { rt.ledger.borrow_mut().storages.insert(at) } else { UNTRACKED })
        });
        Ok((s, source))
    }

    /// Keeps a dead storage whole, with its block, in its device's [`DeviceState::parked`]
    /// bins, for `alloc` to revive: a steady-state `alloc_storage` then only renames it
    /// (building and tearing down the object was over half of an `alloc_storage` +
    /// `alloc_tensor` + `kill` triple). Constants are dropped.
    #[inline(always)]
    fn park(mut p: Parked<Storage>) -> Option<Parked<Storage>> {
        let s = p.get_mut();
        if s.constant {
            return Some(p);
        }
        // A parked storage must not keep its runtime alive: the runtime holds the bins.
        // SAFETY: `parked` says `rt` is gone; nothing reads it until `alloc` writes it anew.
        let rt = unsafe { ManuallyDrop::take(&mut s.rt) };
        s.parked = true;
        s.leave_books(&rt);
        s.writes.get_mut().clear();
        rt.devices[s.device as usize].parked.borrow_mut().put(p);
        // The last runtime reference may go here, and the bins (with `p`) with it.
        drop(rt);
        None
    }

    /// What a storage's death changes in the counters and the ledger's table.
    #[inline(always)]
    fn leave_books(&self, rt: &Runtime) {
        let dev = &rt.devices[self.device as usize];
        dev.live_bytes.set(dev.live_bytes.get() - self.size);
        if self.slot != UNTRACKED {
            rt.ledger.borrow_mut().storages.remove(self.slot);
        }
        let o = &rt.objects;
        sub(&o.live_storages, 1);
        sub(if self.constant { &o.constant_bytes } else { &o.live_bytes }, self.size);
    }

    /// Bytes of the device block behind the storage (its size class; at least `size`).
    pub fn capacity(&self) -> u64 {
        match &self.mem {
            Some(DeviceMem::Host(b)) => b.capacity(),
            Some(DeviceMem::Device(b)) => b.capacity(),
            None => self.size,
        }
    }

    /// The storage as the ledger reports it.
    pub fn info(&self) -> StorageInfo {
        StorageInfo {
            id: self.id,
            device: self.device,
            size: self.size,
            capacity: self.capacity(),
            align: self.align,
            scope: self.scope,
            site: self.site,
            constant: self.constant,
        }
    }

    /// Base address of host memory (null for device memory).
    pub fn host_ptr(&self) -> *mut u8 {
        match &self.mem {
            Some(DeviceMem::Host(b)) => b.as_ptr(),
            _ => std::ptr::null_mut(),
        }
    }

    /// The device block behind the storage (`None` in host memory).
    pub fn device_block(&self) -> Option<&dyn DeviceBlock> {
        match &self.mem {
            Some(DeviceMem::Device(b)) => Some(&**b),
            _ => None,
        }
    }

    pub fn device_state(&self) -> &DeviceState {
        &self.rt.devices[self.device as usize]
    }

    /// True when the storage belongs to runtime `rt` (views of another runtime's storages
    /// live in another OpenCL context).
    pub fn in_runtime(&self, rt: &Rc<Runtime>) -> bool {
        Rc::ptr_eq(&self.rt, rt)
    }

    /// True for storages that hold module constants (read-only).
    pub fn is_constant(&self) -> bool {
        self.constant
    }

    /// True when the storage's memory is the host's: its buffer views need no device
    /// handle, so a register may hold them as [`crate::Value::Slice`]s.
    #[inline(always)]
    pub fn in_host_memory(&self) -> bool {
        matches!(self.mem, Some(DeviceMem::Host(_)))
    }

    /// The runtime the storage belongs to.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    pub fn caps(&self) -> &DeviceCaps {
        &self.rt.devices[self.device as usize].caps
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        if self.parked {
            // Left the books when parked, and has no runtime: its block goes to the system.
            return;
        }
        self.leave_books(&self.rt);
        if let (Some(DeviceMem::Device(b)), Backend::Device(d)) = (self.mem.take(), &self.device_state().backend) {
            d.release(b);
        }
        // SAFETY: not parked, so `rt` is live; this is its last use.
        unsafe { ManuallyDrop::drop(&mut self.rt) }
    }
}

impl Binned for Parked<Storage> {
    fn capacity(&self) -> u64 {
        self.get().capacity()
    }
    #[inline(always)]
    fn align(&self) -> u64 {
        self.get().align
    }
    #[inline(always)]
    fn bin(&self) -> usize {
        self.get().bin as usize
    }
}

/// A typed, shaped view of a storage at a byte offset: a buffer view (`global`) or a 2-D
/// image view (texture scopes) whose rows are `image.row_pitch_bytes()` apart.
pub struct View {
    pub id: u64,
    pub storage: Shared<Storage>,
    pub offset: u64,
    pub dtype: DType,
    pub shape: SmallVec<[i64; 4]>,
    pub scope: Scope,
    pub image: Option<ImageLayout>,
    /// The device handle on devices ([`Device::view`]); `None` in host memory.
    pub handle: Option<ViewHandle>,
    /// Bytes the view covers in its storage (pitched for images).
    pub bytes: u64,
    pub site: Site,
    /// The view's dtype, shape, device and kind in one word (see [`ViewClass`]).
    pub class: ViewClass,
    slot: u32,
}

/// Where a view lies in its storage and what it holds: what [`View::make`] is given,
/// checked by the caller (the view fits, an image's layout suits the device).
#[derive(Clone, Copy, Debug)]
pub struct ViewSpec<'a> {
    pub offset: u64,
    pub dtype: DType,
    pub shape: &'a [i64],
    pub scope: Scope,
    /// The image layout of a texture-scope view (`None` for buffer views).
    pub image: Option<ImageLayout>,
    /// Bytes the view covers (pitched for images).
    pub bytes: u64,
}

impl<'a> ViewSpec<'a> {
    /// A dense buffer view (scope `global`) of `bytes` at `offset`.
    pub fn buffer(offset: u64, dtype: DType, shape: &'a [i64], bytes: u64) -> ViewSpec<'a> {
        ViewSpec { offset, dtype, shape, scope: Scope::Global, image: None, bytes }
    }
}

impl View {
    /// The view as a device kernel's operand; `None` in host memory.
    #[inline]
    pub fn operand(&self) -> Option<Operand<'_>> {
        Some(Operand { handle: self.handle?, dtype: self.dtype, shape: &self.shape, image: self.image.as_ref() })
    }

    /// Registers a view whose geometry and device handle are ready (see [`View::make`]).
    fn new(
        storage: Shared<Storage>,
        g: ViewSpec,
        site: Site,
        handle: Option<ViewHandle>,
        type_id: u32,
        made: Made,
    ) -> Shared<View> {
        let ViewSpec { offset, dtype, shape, scope, image, bytes } = g;
        let class = ViewClass::new(type_id, storage.device, storage.constant, scope.is_texture());
        let o = &storage.rt.objects;
        let id = take_next(&o.next_view);
        if made == Made::New {
            bump(&o.views_created, 1);
        }
        bump(&o.live_views, 1);
        let track = o.track.get();
        // The ledger is borrowed only to register the view in its table (the REPL's
        // tracking): holding an `Rc` of the runtime across the construction instead cost
        // an increment and a decrement per view.
        Shared::new_at(|at| {
            let slot = if track { storage.rt.ledger.borrow_mut().views.insert(at) } else { UNTRACKED };
            let shape = SmallVec::from_slice(shape);
            View { id, storage, offset, dtype, shape, scope, image, handle, bytes, site, class, slot }
        })
    }

    /// The view as the ledger reports it.
    pub fn info(&self) -> ViewInfo {
        ViewInfo {
            id: self.id,
            storage: self.storage.id,
            offset: self.offset,
            dtype: self.dtype,
            shape: self.shape.clone(),
            scope: self.scope,
            image: self.image,
            bytes: self.bytes,
            site: self.site,
        }
    }

    pub fn numel(&self) -> u64 {
        self.shape.iter().map(|&d| d as u64).product()
    }

    /// The writer tag of this view for compat-image coherence (see [`WriteRecord`]).
    pub fn writer_tag(&self) -> u64 {
        match self.handle {
            Some(c) if c.kind == ViewKind::CompatImage => c.mem as u64,
            _ => 0,
        }
    }

    /// Refuses to read bytes through this view that were last written through a view that
    /// does not share memory with it (devices with compat images only).
    pub fn check_coherent_read(&self) -> Result<(), String> {
        let dev = self.storage.device_state();
        if !dev.has_compat_images() {
            return Ok(());
        }
        let (s, e, tag) = (self.offset, self.offset + self.bytes, self.writer_tag());
        for w in self.storage.writes.borrow().iter() {
            if w.start < e && s < w.end && w.tag != tag {
                let (written, reader) = if w.tag == 0 {
                    ("a buffer view", "a texture view (a separate image there)")
                } else {
                    ("a texture view (a separate image there)", "this view")
                };
                return Err(format!(
                    "bytes {}..{} of storage #{} were written through {written}, and {reader} cannot see them: device `{}` has no cl_khr_image2d_from_buffer, so texture views do not share memory with buffer views. Give textures their own storage on this device, or use a device with image2d-from-buffer",
                    s.max(w.start),
                    e.min(w.end),
                    self.storage.id,
                    dev.caps.name
                ));
            }
        }
        Ok(())
    }

    /// Records a write through this view (devices with compat images only).
    pub fn record_write(&self) {
        if !self.storage.device_state().has_compat_images() {
            return;
        }
        let (s, e) = (self.offset, self.offset + self.bytes);
        let mut w = self.storage.writes.borrow_mut();
        // The new write is the last writer of [s, e): earlier records keep only what lies
        // outside it (a record around it splits in two).
        let mut kept = Vec::with_capacity(w.len() + 2);
        for r in w.drain(..) {
            if r.end <= s || e <= r.start {
                kept.push(r);
                continue;
            }
            if r.start < s {
                kept.push(WriteRecord { end: s, ..r });
            }
            if e < r.end {
                kept.push(WriteRecord { start: e, ..r });
            }
        }
        kept.push(WriteRecord { start: s, end: e, tag: self.writer_tag() });
        *w = kept;
    }

    /// Elements per contiguous run and the byte distance between runs: the whole tensor
    /// for a buffer view, one image row for an image view.
    pub fn runs(&self) -> (u64, u64) {
        match self.image {
            Some(l) => (l.width * l.channels, l.row_pitch_bytes()),
            None => {
                let n = self.numel();
                (n, n * self.dtype.size() as u64)
            }
        }
    }

    /// Byte address (from the storage base) of row-major element `i`.
    #[inline]
    pub fn elem_offset(&self, i: u64) -> u64 {
        let es = self.dtype.size() as u64;
        match self.image {
            None => self.offset + i * es,
            Some(l) => {
                let run = l.width * l.channels;
                self.offset + (i / run) * l.row_pitch_bytes() + (i % run) * es
            }
        }
    }

    /// Pointer to element `i` in host memory.
    #[inline]
    pub fn elem_ptr(&self, i: u64) -> *mut u8 {
        // SAFETY: views are checked to lie inside their storage when created.
        unsafe { self.storage.host_ptr().add(self.elem_offset(i) as usize) }
    }
}

impl Drop for View {
    fn drop(&mut self) {
        if self.slot != UNTRACKED {
            self.storage.rt.ledger.borrow_mut().views.remove(self.slot);
        }
        sub(&self.storage.rt.objects.live_views, 1);
    }
}

impl View {
    /// Creates a view whose geometry the caller has checked, making its device handle (a
    /// sub-buffer or an image, cached on the storage's block) on OpenCL devices.
    /// `type_id`: the runtime's id of (dtype, shape) if the caller has it, else `None` to
    /// look it up here (buffer views only: texture views get none).
    pub fn make(
        storage: Shared<Storage>,
        g: ViewSpec,
        site: Site,
        type_id: Option<u32>,
    ) -> Result<Shared<View>, String> {
        let handle = match (storage.device_state().device(), storage.device_block()) {
            (Some(dev), Some(block)) => Some(dev.view(block, g.offset, g.dtype, g.image.as_ref())?),
            _ => None,
        };
        let type_id = match type_id {
            Some(t) => t,
            None if g.scope.is_texture() => 0,
            None => storage.rt.type_id(g.dtype, g.shape),
        };
        Ok(View::new(storage, g, site, handle, type_id, Made::New))
    }

    /// The view object for slice `geom` of `storage` ([`crate::Value::Slice`]), made when
    /// something needs one (an operator's operands, a result, an error message). It is the
    /// view the `alloc_tensor` counted, so it does not count as created.
    pub fn of_slice(geom: u32, storage: &Shared<Storage>) -> Result<Shared<View>, String> {
        let Some(g) = storage.rt.slice_geom(geom) else {
            return Err(format!("buffer view geometry {geom} is not one of this runtime's"));
        };
        if !storage.in_host_memory() || g.offset.checked_add(g.bytes).is_none_or(|e| e > storage.size) {
            return Err(format!(
                "a {}{:?} view at offset {} does not fit storage #{} ({} bytes)",
                g.dtype,
                &g.shape[..],
                g.offset,
                storage.id,
                storage.size
            ));
        }
        // A texture's class has no (dtype, shape) id, as `View::make` gives it.
        let type_id = if g.scope.is_texture() { 0 } else { g.type_id };
        let spec = ViewSpec {
            offset: g.offset,
            dtype: g.dtype,
            shape: &g.shape,
            scope: g.scope,
            image: g.image,
            bytes: g.bytes,
        };
        Ok(View::new(storage.clone(), spec, Site::API, None, type_id, Made::Slice))
    }
}

/// Whether [`View::new`] makes a new view of the program or the object of a slice.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Made {
    New,
    Slice,
}

crate::recycled!(Storage, park = Storage::park);
crate::recycled!(View);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::devices::DeviceSpec;

    #[test]
    fn a_view_class_names_dtype_shape_and_device_and_marks_constants_and_textures() {
        let rt =
            Runtime::new(vec![DeviceSpec::Host(DeviceCaps::host()), DeviceSpec::Host(DeviceCaps::host())]).unwrap();
        let a = rt.type_id(DType::F32, &[1, 64, 56, 56]);
        assert_ne!(a, 0);
        assert_eq!(rt.type_id(DType::F32, &[1, 64, 56, 56]), a, "the same pair, the same id");
        let others = [
            rt.type_id(DType::F16, &[1, 64, 56, 56]),
            rt.type_id(DType::F32, &[1, 64, 56, 57]),
            rt.type_id(DType::F32, &[1, 64, 56]),
            rt.type_id(DType::F32, &[1, 64, 56, 56, 1]),
        ];
        assert!(others.iter().all(|&o| o != 0 && o != a));
        let plain = ViewClass::new(a, 1, false, false);
        assert_eq!((plain.type_id(), plain.device()), (a, 1));
        assert!(plain.is_plain_typed());
        assert_ne!(plain, ViewClass::new(a, 0, false, false), "the device is part of the class");
        for (constant, texture) in [(true, false), (false, true)] {
            let c = ViewClass::new(a, 1, constant, texture);
            assert!(!c.is_plain() && !c.is_plain_typed());
            assert_ne!(c, plain);
        }
        assert!(!ViewClass::new(0, 0, false, false).is_plain_typed(), "no id: compared the long way");
    }
}
