//! OpenCL devices through `opencl3` (loaded at run time: without an OpenCL runtime every
//! call returns an error and the VM stays on the host device).
//!
//! Storages are plain `cl_mem` buffers from a pool; views are sub-buffers (when the
//! offset meets `CL_DEVICE_MEM_BASE_ADDR_ALIGN`), (buffer, offset) pairs otherwise, or
//! images created from the buffer (`cl_khr_image2d_from_buffer`) with a pitched row. On
//! devices without image2d-from-buffer a texture view is a standalone "compat" image.
//! Every sub-buffer or image is cached on its pooled block, so a steady-state run creates
//! no `cl_mem` objects at all.

use crate::ir::types::{DType, ImageLayout};
use crate::runtime::backend::DeviceBlock;
use crate::runtime::counters::{bump, sub};
use crate::runtime::device::{size_class, AllocSource, DeviceCaps};
use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL};
use opencl3::kernel::Kernel;
use opencl3::program::Program;
use opencl3::types::{cl_device_id, cl_image_desc, cl_image_format, cl_mem, CL_BLOCKING};
use rustc_hash::FxHashMap;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt;
use std::rc::Rc;

/// A failed OpenCL call: which one and the CL error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClError {
    pub call: &'static str,
    pub code: i32,
}

impl fmt::Display for ClError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {} ({})", self.call, opencl3::error_codes::error_text(self.code), self.code)
    }
}

fn cl<T>(call: &'static str, r: Result<T, i32>) -> Result<T, ClError> {
    r.map_err(|code| ClError { call, code })
}

fn cl3<T>(call: &'static str, r: opencl3::Result<T>) -> Result<T, ClError> {
    r.map_err(|e| ClError { call, code: e.0 })
}

/// `cl_mem` objects created and still alive, for the stats and leak tests.
#[derive(Debug, Default)]
pub struct ClCounters {
    pub buffers_created: Cell<u64>,
    pub sub_buffers_created: Cell<u64>,
    pub images_created: Cell<u64>,
    pub compat_images: Cell<u64>,
    pub compat_image_bytes: Cell<u64>,
    pub live_cl_mem: Cell<u64>,
    pub kernels_built: Cell<u64>,
}

/// An owned `cl_mem`, released (and uncounted) on drop.
pub struct ClMem {
    mem: cl_mem,
    counters: Rc<ClCounters>,
}

impl ClMem {
    fn new(mem: cl_mem, counters: &Rc<ClCounters>) -> ClMem {
        bump(&counters.live_cl_mem, 1);
        ClMem { mem, counters: counters.clone() }
    }

    pub fn raw(&self) -> cl_mem {
        self.mem
    }
}

impl Drop for ClDevice {
    fn drop(&mut self) {
        // Kernels and programs go under the lock (see `PROGRAM_LOCK`); the rest of the
        // device after it, in field order.
        let kernels = std::mem::take(self.kernels.get_mut());
        let _serial = program_lock();
        drop(kernels);
    }
}

impl Drop for ClMem {
    fn drop(&mut self) {
        // SAFETY: `mem` came from a successful create call and is released exactly once.
        let _ = unsafe { opencl3::memory::release_mem_object(self.mem) };
        sub(&self.counters.live_cl_mem, 1);
    }
}

/// A view's device handle on OpenCL: `mem` is a `cl_mem`.
pub use crate::runtime::backend::{ViewHandle as ClView, ViewKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ViewKey {
    offset: u64,
    kind: ViewKind,
    width: u64,
    height: u64,
    pitch: u64,
    channels: u64,
    dtype: u8,
}

/// A pooled buffer and the sub-buffers and images made over it.
pub struct ClBlock {
    mem: ClMem,
    capacity: u64,
    views: RefCell<FxHashMap<ViewKey, ClMem>>,
    /// The view `views` gave last: a block's steady state asks for the same view again
    /// and again, and a compare is a fraction of a hash lookup.
    last_view: Cell<Option<(ViewKey, cl_mem)>>,
}

impl ClBlock {
    pub fn raw(&self) -> cl_mem {
        self.mem.raw()
    }
    pub fn capacity(&self) -> u64 {
        self.capacity
    }
}

/// Held while a program is built or released, in every thread. The Intel CPU runtime
/// (2021.2) shares LLVM state between its contexts: a thread building a program while
/// another releases one crashed the process (SIGSEGV in `llvm::StringMapImpl::RemoveKey`,
/// seen in parallel tests). Builds are once per kernel and device, so serialising them
/// costs nothing in a run.
static PROGRAM_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn program_lock() -> std::sync::MutexGuard<'static, ()> {
    // A panic elsewhere while holding it leaves nothing half-done that needs guarding.
    PROGRAM_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Everything the VM needs from one OpenCL device.
pub struct ClDevice {
    pub caps: DeviceCaps,
    pub platform: String,
    pub id: cl_device_id,
    pub context: Context,
    pub queue: CommandQueue,
    pub counters: Rc<ClCounters>,
    /// `cl_khr_fp64` is available.
    pub has_fp64: bool,
    pool: RefCell<FxHashMap<u64, Vec<ClBlock>>>,
    pub pool_free_bytes: Cell<u64>,
    kernels: RefCell<HashMap<String, (Program, Kernel)>>,
    /// Kernel variants chosen by timing, by what they were tuned for (see `tuned`).
    tuned: RefCell<HashMap<String, i64>>,
    /// Oclgrind's log file (`OCLGRIND_LOG`, which `rxvm` sets), checked after each launch
    /// so that an invalid access it reports fails the launch.
    oclgrind_log: Option<std::path::PathBuf>,
}

/// One device as `rxvm devices` lists it.
#[derive(Clone, Debug)]
pub struct ClDeviceInfo {
    pub platform: String,
    pub id: cl_device_id,
    pub caps: DeviceCaps,
    pub version: String,
}

// SAFETY: `id` is a root device's handle: valid for the life of the process, not reference
// counted, and the OpenCL API is thread-safe for it (OpenCL 1.2 §A.2: every call but
// clSetKernelArg and clSetKernelExecInfo). Sending the description lets each thread open its
// own VM (own context and queue) on the same device.
unsafe impl Send for ClDeviceInfo {}
unsafe impl Sync for ClDeviceInfo {}

fn caps_of(platform: &str, d: &Device) -> Result<(DeviceCaps, String), ClError> {
    let name = cl3("clGetDeviceInfo(CL_DEVICE_NAME)", d.name())?;
    let ext = d.extensions().unwrap_or_default();
    let base_bits = cl3("clGetDeviceInfo(CL_DEVICE_MEM_BASE_ADDR_ALIGN)", d.mem_base_addr_align())? as u64;
    let base = (base_bits / 8).max(1);
    let image_support = d.image_support().unwrap_or(false);
    let image_from_buffer = image_support && ext.split_whitespace().any(|e| e == "cl_khr_image2d_from_buffer");
    let pitch = d.image_pitch_alignment().unwrap_or(0) as u64;
    let image_base = d.image_base_address_alignment().unwrap_or(0) as u64;
    let caps = DeviceCaps {
        name: format!("{platform} / {name}"),
        base_align: base,
        mem_base_addr_align: base,
        image_pitch_align_px: pitch.max(1),
        image_base_align: if image_from_buffer { image_base.max(1) } else { base },
        max_image2d_width: if image_support { d.image2d_max_width().unwrap_or(0) as u64 } else { 0 },
        max_image2d_height: if image_support { d.image2d_max_height().unwrap_or(0) as u64 } else { 0 },
        max_alloc: cl3("clGetDeviceInfo(CL_DEVICE_MAX_MEM_ALLOC_SIZE)", d.max_mem_alloc_size())?,
        global_mem: cl3("clGetDeviceInfo(CL_DEVICE_GLOBAL_MEM_SIZE)", d.global_mem_size())?,
        image_support,
        image_from_buffer,
    };
    Ok((caps, d.version().unwrap_or_default()))
}

/// Every OpenCL device on every platform. An error when no OpenCL runtime can be loaded.
pub fn list_devices() -> Result<Vec<ClDeviceInfo>, ClError> {
    // One enumeration at a time: PoCL 3.1 initialises its devices on the first
    // `clGetPlatformIDs` and answers a `clGetDeviceInfo` from another thread before that
    // is done with a crash (two test threads opening their first devices at once did).
    static ENUMERATING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = ENUMERATING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut out = Vec::new();
    for p in cl3("clGetPlatformIDs", opencl3::platform::get_platforms())? {
        let pname = p.name().unwrap_or_else(|_| "unknown platform".into());
        let Ok(ids) = p.get_devices(CL_DEVICE_TYPE_ALL) else { continue };
        for id in ids {
            let (caps, version) = caps_of(&pname, &Device::new(id))?;
            out.push(ClDeviceInfo { platform: pname.clone(), id, caps, version });
        }
    }
    Ok(out)
}

/// Finds a device: `""` for the first one that is not the Oclgrind simulator, else the
/// first whose platform or device name contains `needle` (case-insensitive; `pocl` names
/// the Portable Computing Language platform).
pub fn find_device(needle: &str) -> Result<ClDeviceInfo, String> {
    let devices = list_devices().map_err(|e| format!("no OpenCL runtime is usable: {e}"))?;
    if devices.is_empty() {
        return Err("the OpenCL runtime reports no devices".into());
    }
    if needle.is_empty() {
        // The simulator is for checking kernels, not a default place to run.
        let real = devices.iter().find(|d| !d.platform.contains("Oclgrind"));
        return Ok(real.unwrap_or(&devices[0]).clone());
    }
    // Short names for the platforms this project sets up.
    let lower = match needle.to_lowercase().as_str() {
        "pocl" => "portable computing language".to_string(),
        other => other.to_string(),
    };
    devices.iter().find(|d| d.caps.name.to_lowercase().contains(&lower)).cloned().ok_or_else(|| {
        let names: Vec<String> = devices.iter().map(|d| format!("`{}`", d.caps.name)).collect();
        format!("no OpenCL device matches `{needle}`; the devices are: {}", names.join(", "))
    })
}

impl ClDevice {
    pub fn open(info: &ClDeviceInfo) -> Result<ClDevice, ClError> {
        let device = Device::new(info.id);
        let context = cl3("clCreateContext", Context::from_device(&device))?;
        let queue = cl3("clCreateCommandQueue", CommandQueue::create_default(&context, 0))?;
        Ok(ClDevice {
            caps: info.caps.clone(),
            platform: info.platform.clone(),
            id: info.id,
            context,
            queue,
            counters: Rc::default(),
            has_fp64: device.extensions().unwrap_or_default().split_whitespace().any(|e| e == "cl_khr_fp64"),
            pool: RefCell::default(),
            pool_free_bytes: Cell::new(0),
            kernels: RefCell::default(),
            tuned: RefCell::default(),
            oclgrind_log: info
                .platform
                .contains("Oclgrind")
                .then(|| std::env::var_os("OCLGRIND_LOG"))
                .flatten()
                .map(std::path::PathBuf::from),
        })
    }

    /// A buffer of at least `size` bytes from the pool, or a fresh `clCreateBuffer`.
    pub fn alloc(&self, size: u64) -> Result<(ClBlock, AllocSource), ClError> {
        let class = size_class(size);
        if let Some(b) = self.pool.borrow_mut().get_mut(&class).and_then(Vec::pop) {
            self.pool_free_bytes.set(self.pool_free_bytes.get() - b.capacity);
            return Ok((b, AllocSource::PoolHit));
        }
        // SAFETY: no host pointer; the context is valid.
        let mem = cl("clCreateBuffer", unsafe {
            opencl3::memory::create_buffer(
                self.context.get(),
                opencl3::memory::CL_MEM_READ_WRITE,
                class as usize,
                std::ptr::null_mut(),
            )
        })?;
        bump(&self.counters.buffers_created, 1);
        let block = ClBlock {
            mem: ClMem::new(mem, &self.counters),
            capacity: class,
            views: RefCell::default(),
            last_view: Cell::new(None),
        };
        Ok((block, AllocSource::Fresh))
    }

    /// Returns a block (with its cached views) to the pool.
    pub fn release(&self, b: ClBlock) {
        self.pool_free_bytes.set(self.pool_free_bytes.get() + b.capacity);
        self.pool.borrow_mut().entry(b.capacity).or_default().push(b);
    }

    /// Releases every pooled block and the views cached on it.
    pub fn clear_pool(&self) {
        self.pool.borrow_mut().clear();
        self.pool_free_bytes.set(0);
    }

    /// The handle for a view of `block` at `offset`: a buffer view, or an image.
    pub fn view(
        &self,
        block: &ClBlock,
        offset: u64,
        dtype: DType,
        image: Option<&ImageLayout>,
    ) -> Result<ClView, String> {
        let Some(l) = image else {
            if offset == 0 || !offset.is_multiple_of(self.caps.mem_base_addr_align) {
                return Ok(ClView { mem: block.raw(), offset, kind: ViewKind::Buffer });
            }
            let key = ViewKey { offset, kind: ViewKind::Buffer, width: 0, height: 0, pitch: 0, channels: 0, dtype: 0 };
            let mem = self.cached(block, key, || self.sub_buffer(block, offset, block.capacity - offset))?;
            return Ok(ClView { mem, offset: 0, kind: ViewKind::Buffer });
        };
        if !self.caps.image_support {
            return Err(format!("device `{}` has no image support, so it cannot make texture views", self.caps.name));
        }
        let (order, ctype) = image_format(dtype, l.channels)?;
        let kind = if self.caps.image_from_buffer { ViewKind::Image } else { ViewKind::CompatImage };
        let key = ViewKey {
            offset,
            kind,
            width: l.width,
            height: l.height,
            pitch: l.pitch_px,
            channels: l.channels,
            dtype: dtype as u8,
        };
        let mem = self.cached(block, key, || {
            let format = cl_image_format { image_channel_order: order, image_channel_data_type: ctype };
            let mut desc: cl_image_desc = unsafe { std::mem::zeroed() };
            desc.image_type = opencl3::memory::CL_MEM_OBJECT_IMAGE2D;
            desc.image_width = l.width as usize;
            desc.image_height = l.height as usize;
            let mut parent = None;
            if kind == ViewKind::Image {
                desc.image_row_pitch = l.row_pitch_bytes() as usize;
                if offset == 0 {
                    desc.buffer = block.raw();
                } else {
                    if !offset.is_multiple_of(self.caps.mem_base_addr_align) {
                        return Err(format!(
                            "an image view at byte offset {offset} needs a sub-buffer there, but device `{}` requires sub-buffer offsets to be multiples of CL_DEVICE_MEM_BASE_ADDR_ALIGN ({} bytes)",
                            self.caps.name, self.caps.mem_base_addr_align
                        ));
                    }
                    let bytes = l.byte_size().unwrap_or(u64::MAX).min(block.capacity - offset);
                    let sub = self.sub_buffer(block, offset, bytes)?;
                    desc.buffer = sub.raw();
                    parent = Some(sub);
                }
            }
            // SAFETY: format and desc are fully initialised; desc.buffer (if any) is a live
            // buffer of the same context large enough for the pitched image (checked by the
            // caller against the storage size).
            let r = unsafe {
                opencl3::memory::create_image(
                    self.context.get(),
                    opencl3::memory::CL_MEM_READ_WRITE,
                    &format,
                    &desc,
                    std::ptr::null_mut(),
                )
            };
            // The image keeps its own reference to the sub-buffer; ours can go.
            drop(parent);
            let mem = cl("clCreateImage", r).map_err(|e| e.to_string())?;
            bump(&self.counters.images_created, 1);
            if kind == ViewKind::CompatImage {
                bump(&self.counters.compat_images, 1);
                bump(&self.counters.compat_image_bytes, l.width * l.height * l.bytes_per_texel);
            }
            Ok(ClMem::new(mem, &self.counters))
        })?;
        Ok(ClView { mem, offset: 0, kind })
    }

    fn cached(
        &self,
        block: &ClBlock,
        key: ViewKey,
        make: impl FnOnce() -> Result<ClMem, String>,
    ) -> Result<cl_mem, String> {
        if let Some((k, raw)) = block.last_view.get() {
            if k == key {
                return Ok(raw);
            }
        }
        let cached = block.views.borrow().get(&key).map(|m| m.raw());
        let raw = match cached {
            Some(raw) => raw,
            None => {
                let m = make()?;
                let raw = m.raw();
                block.views.borrow_mut().insert(key, m);
                raw
            }
        };
        // `views` keeps every view until the block is released, so `raw` stays valid.
        block.last_view.set(Some((key, raw)));
        Ok(raw)
    }

    fn sub_buffer(&self, block: &ClBlock, offset: u64, size: u64) -> Result<ClMem, String> {
        let region = opencl3::types::cl_buffer_region { origin: offset as usize, size: size as usize };
        // SAFETY: region lies inside the block; the region struct outlives the call.
        let r = unsafe {
            opencl3::memory::create_sub_buffer(
                block.raw(),
                opencl3::memory::CL_MEM_READ_WRITE,
                opencl3::memory::CL_BUFFER_CREATE_TYPE_REGION,
                &region as *const _ as *const c_void,
            )
        };
        let mem = cl("clCreateSubBuffer", r).map_err(|e| e.to_string())?;
        bump(&self.counters.sub_buffers_created, 1);
        Ok(ClMem::new(mem, &self.counters))
    }

    /// Reads a view's elements into dense row-major host bytes.
    pub fn read(&self, v: &ClView, bytes: usize, image: Option<&ImageLayout>, out: &mut [u8]) -> Result<(), ClError> {
        debug_assert!(out.len() >= bytes);
        match (v.kind, image) {
            (ViewKind::Buffer, _) | (_, None) => {
                // SAFETY: `out` has `bytes` bytes; the read is blocking.
                let r = unsafe {
                    opencl3::command_queue::enqueue_read_buffer(
                        self.queue.get(),
                        v.mem,
                        CL_BLOCKING,
                        v.offset as usize,
                        bytes,
                        out.as_mut_ptr() as *mut c_void,
                        0,
                        std::ptr::null(),
                    )
                };
                cl("clEnqueueReadBuffer", r.map(drop))
            }
            (_, Some(l)) => {
                let region = [l.width as usize, l.height as usize, 1];
                // SAFETY: `out` holds width * height texels densely; blocking read.
                let r = unsafe {
                    opencl3::command_queue::enqueue_read_image(
                        self.queue.get(),
                        v.mem,
                        CL_BLOCKING,
                        [0usize; 3].as_ptr(),
                        region.as_ptr(),
                        (l.width * l.bytes_per_texel) as usize,
                        0,
                        out.as_mut_ptr() as *mut c_void,
                        0,
                        std::ptr::null(),
                    )
                };
                cl("clEnqueueReadImage", r.map(drop))
            }
        }
    }

    /// Writes dense row-major host bytes into a view.
    pub fn write(&self, v: &ClView, image: Option<&ImageLayout>, data: &[u8]) -> Result<(), ClError> {
        match (v.kind, image) {
            (ViewKind::Buffer, _) | (_, None) => {
                // SAFETY: `data` is live for the blocking call.
                let r = unsafe {
                    opencl3::command_queue::enqueue_write_buffer(
                        self.queue.get(),
                        v.mem,
                        CL_BLOCKING,
                        v.offset as usize,
                        data.len(),
                        data.as_ptr() as *const c_void,
                        0,
                        std::ptr::null(),
                    )
                };
                cl("clEnqueueWriteBuffer", r.map(drop))
            }
            (_, Some(l)) => {
                let region = [l.width as usize, l.height as usize, 1];
                // SAFETY: `data` holds width * height texels densely; blocking write.
                let r = unsafe {
                    opencl3::command_queue::enqueue_write_image(
                        self.queue.get(),
                        v.mem,
                        CL_BLOCKING,
                        [0usize; 3].as_ptr(),
                        region.as_ptr(),
                        (l.width * l.bytes_per_texel) as usize,
                        0,
                        data.as_ptr() as *mut c_void,
                        0,
                        std::ptr::null(),
                    )
                };
                cl("clEnqueueWriteImage", r.map(drop))
            }
        }
    }

    /// Builds (once per device) and returns the kernel named `k` in `source`.
    pub fn kernel(&self, source: &str) -> Result<KernelHandle, String> {
        self.kernel_entry(source, "k")
    }

    /// Builds (once per device) and returns the kernel `entry` of `source`.
    pub fn kernel_entry(&self, source: &str, entry: &str) -> Result<KernelHandle, String> {
        let key = format!("{entry}\0{source}");
        if let Some((_, k)) = self.kernels.borrow().get(&key) {
            return Ok(KernelHandle(k.get()));
        }
        let _serial = program_lock();
        let program = Program::create_and_build_from_source(&self.context, source, "").map_err(|log| {
            format!("building an OpenCL kernel for `{}` failed:\n{log}\n--- source ---\n{source}", self.caps.name)
        })?;
        let kernel = cl3("clCreateKernel", Kernel::create(&program, entry))
            .map_err(|e| format!("{e} (is `{entry}` a __kernel in the source?)"))?;
        bump(&self.counters.kernels_built, 1);
        let raw = KernelHandle(kernel.get());
        self.kernels.borrow_mut().insert(key, (program, kernel));
        Ok(raw)
    }

    /// The buffer `mem` is part of and where it starts in it, in bytes: a sub-buffer's
    /// parent and offset, else `mem` itself at 0. Buffer views at aligned offsets are
    /// sub-buffers, so two operands may be different `cl_mem`s over the same bytes.
    pub fn buffer_origin(&self, mem: cl_mem) -> (cl_mem, u64) {
        use opencl3::memory::{get_mem_object_info, CL_MEM_ASSOCIATED_MEMOBJECT, CL_MEM_OFFSET};
        let parent = get_mem_object_info(mem, CL_MEM_ASSOCIATED_MEMOBJECT)
            .map(|v| isize::from(v) as cl_mem)
            .unwrap_or(std::ptr::null_mut());
        if parent.is_null() {
            return (mem, 0);
        }
        let offset = get_mem_object_info(mem, CL_MEM_OFFSET).map(|v| usize::from(v) as u64).unwrap_or(0);
        (parent, offset)
    }

    /// The variant a launcher chose by timing for `key` (a kernel family and the shapes
    /// it was timed on), if it has.
    pub fn tuned(&self, key: &str) -> Option<i64> {
        self.tuned.borrow().get(key).copied()
    }

    /// Remembers the variant chosen for `key`, for the life of the device.
    pub fn set_tuned(&self, key: String, variant: i64) {
        self.tuned.borrow_mut().insert(key, variant);
    }

    /// Waits until every command given to the queue has run.
    pub fn finish(&self) -> Result<(), ClError> {
        cl("clFinish", opencl3::command_queue::finish(self.queue.get()))
    }

    /// Sets raw kernel arguments and launches `global` work-items. The launch returns
    /// before the kernel runs: the queue is in order, so later kernels and the blocking
    /// transfers see its results, and an invocation ends with [`ClDevice::finish`]. (One
    /// `clFinish` per launch kept the runtime's threads waking and sleeping kernel by
    /// kernel.) Under Oclgrind each launch is waited for, to read the checker's log.
    pub fn launch(&self, kernel: KernelHandle, args: &[KernelArg], global: usize) -> Result<(), String> {
        self.launch_nd(kernel, args, &[global])
    }

    /// As [`ClDevice::launch`] over a 1- to 3-dimensional global range.
    pub fn launch_nd(&self, kernel: KernelHandle, args: &[KernelArg], global: &[usize]) -> Result<(), String> {
        self.launch_groups(kernel, args, global, None)
    }

    /// As [`ClDevice::launch_nd`] in work-groups of `local` (each dimension of `global` a
    /// multiple of it), for kernels that share local memory; `None` lets the runtime pick.
    pub fn launch_groups(
        &self,
        kernel: KernelHandle,
        args: &[KernelArg],
        global: &[usize],
        local: Option<&[usize]>,
    ) -> Result<(), String> {
        let log_before = self.oclgrind_log.as_ref().map(|p| std::fs::metadata(p).map_or(0, |m| m.len()));
        self.enqueue(kernel, args, global, local).map_err(|e| e.to_string())?;
        match (&self.oclgrind_log, log_before) {
            (Some(p), Some(before)) => {
                self.finish().map_err(|e| e.to_string())?;
                oclgrind_errors(p, before)
            }
            _ => Ok(()),
        }
    }

    fn enqueue(
        &self,
        kernel: KernelHandle,
        args: &[KernelArg],
        global: &[usize],
        local: Option<&[usize]>,
    ) -> Result<(), ClError> {
        let kernel = kernel.0;
        for (i, a) in args.iter().enumerate() {
            let (size, ptr): (usize, *const c_void) = match a {
                KernelArg::Mem(m) => (std::mem::size_of::<cl_mem>(), m as *const cl_mem as *const c_void),
                KernelArg::U64(v) => (8, v as *const u64 as *const c_void),
                KernelArg::I32(v) => (4, v as *const i32 as *const c_void),
                KernelArg::Bytes(b, n) => (*n, b.as_ptr() as *const c_void),
            };
            // SAFETY: `ptr` points at `size` bytes matching the kernel's parameter type
            // (the generator emits parameters in this order and with these types).
            let r = unsafe { opencl3::kernel::set_kernel_arg(kernel, i as u32, size, ptr) };
            cl("clSetKernelArg", r)?;
        }
        if global.is_empty() || global.len() > 3 || global.contains(&0) {
            return Ok(());
        }
        let gws = global;
        let lws = local.filter(|l| l.len() == gws.len()).map_or(std::ptr::null(), <[usize]>::as_ptr);
        // SAFETY: the kernel's arguments are all set; `gws` (and `lws` when given) have the
        // range's dimensions.
        let r = unsafe {
            opencl3::command_queue::enqueue_nd_range_kernel(
                self.queue.get(),
                kernel,
                gws.len() as u32,
                std::ptr::null(),
                gws.as_ptr(),
                lws,
                0,
                std::ptr::null(),
            )
        };
        let ev = cl("clEnqueueNDRangeKernel", r)?;
        // SAFETY: the event is released once; the queue keeps the command until it has run.
        let _ = unsafe { opencl3::event::release_event(ev) };
        Ok(())
    }
}

/// What Oclgrind logged past byte `before` of its log (an invalid access, a data race...),
/// as the launch's error; nothing new is a clean launch. The log is shrunk to empty when
/// another context of the process opens it, so a shorter file holds only new reports.
fn oclgrind_errors(log: &std::path::Path, before: u64) -> Result<(), String> {
    let Ok(text) = std::fs::read(log) else { return Ok(()) };
    let start = if (text.len() as u64) < before { 0 } else { before as usize };
    let new = String::from_utf8_lossy(&text[start..]);
    let new = new.trim();
    if new.is_empty() {
        return Ok(());
    }
    // Reports are separated by blank lines; the first says what and where.
    let reports: Vec<&str> = new.split("\n\n").map(str::trim).filter(|r| !r.is_empty()).collect();
    let first = reports.first().copied().unwrap_or(new);
    let first = first.char_indices().nth(2000).map_or(first, |(i, _)| &first[..i]);
    let more = match reports.len() {
        0 | 1 => String::new(),
        n => format!("\n({} more reports like it)", n - 1),
    };
    Err(format!("Oclgrind reported an invalid operation in this kernel:\n{first}{more}"))
}

/// A kernel built by [`ClDevice::kernel`] (owned by the device's cache).
#[derive(Clone, Copy, Debug)]
pub struct KernelHandle(opencl3::types::cl_kernel);

/// A kernel argument value.
#[derive(Clone, Copy)]
pub enum KernelArg {
    Mem(cl_mem),
    U64(u64),
    I32(i32),
    /// Up to 8 raw bytes (a scalar of the kernel's compute type) and their count.
    Bytes([u8; 8], usize),
}

/// The CL image format for `channels` elements of `dtype` per texel.
pub fn image_format(dtype: DType, channels: u64) -> Result<(u32, u32), String> {
    use opencl3::memory::{CL_FLOAT, CL_HALF_FLOAT, CL_R, CL_RG, CL_RGBA};
    let order = match channels {
        1 => CL_R,
        2 => CL_RG,
        4 => CL_RGBA,
        c => return Err(format!("an image texel has 1, 2 or 4 channels, not {c}")),
    };
    let ty = match dtype {
        DType::F32 => CL_FLOAT,
        DType::F16 => CL_HALF_FLOAT,
        d => return Err(format!("texture views hold f32 or f16 elements, not {d}")),
    };
    Ok((order, ty))
}

impl DeviceBlock for ClBlock {
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// The OpenCL device as the runtime sees it: blocks from its `cl_mem` pool, sub-buffer and
/// image views cached on them, blocking transfers.
impl crate::runtime::memory::DeviceState {
    /// The OpenCL device behind this state, if it is one (for the OpenCL kernels).
    pub fn cl(&self) -> Option<&ClDevice> {
        self.device()?.as_any().downcast_ref::<ClDevice>()
    }
}
