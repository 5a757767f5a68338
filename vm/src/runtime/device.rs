//! Devices: their capabilities and memory. The host device keeps storages in aligned host
//! memory and emulates image views with the same pitch rules an OpenCL device uses, so a
//! plan made for any target can be executed and checked on the host.

use rustc_hash::FxHashMap;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fmt;
use std::ptr::NonNull;

/// What the planner and the VM need to know about a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceCaps {
    pub name: String,
    /// Default storage alignment in bytes (`alloc_storage` without `align`).
    pub base_align: u64,
    /// `CL_DEVICE_MEM_BASE_ADDR_ALIGN` in bytes: sub-buffer offsets must be multiples.
    pub mem_base_addr_align: u64,
    /// Image rows are padded to a multiple of this many texels.
    pub image_pitch_align_px: u64,
    /// Image views must start at a multiple of this many bytes.
    pub image_base_align: u64,
    pub max_image2d_width: u64,
    pub max_image2d_height: u64,
    /// Largest single storage in bytes.
    pub max_alloc: u64,
    /// Device memory: live storage bytes may not exceed it.
    pub global_mem: u64,
    pub image_support: bool,
    pub image_from_buffer: bool,
}

impl DeviceCaps {
    /// The embedded host device. Its image rules default to those of the Intel CPU OpenCL
    /// runtime (64-texel pitch, 64-byte image base), so host runs check the same plans.
    /// Its memory (`global_mem`) is the machine's RAM ([`host_memory`]): a program that
    /// asks for more gets "out of device memory" before the OS runs out; `--host-caps
    /// mem=SIZE` ([`DeviceCaps::with_overrides`]) sets another.
    pub fn host() -> DeviceCaps {
        DeviceCaps {
            name: "host".into(),
            base_align: 64,
            mem_base_addr_align: 128,
            image_pitch_align_px: 64,
            image_base_align: 64,
            max_image2d_width: 16384,
            max_image2d_height: 16384,
            max_alloc: 4 << 30,
            global_mem: host_memory(),
            image_support: true,
            image_from_buffer: true,
        }
    }

    /// The named targets a program can be compiled for without the device at hand:
    /// `host`, and the two OpenCL CPU runtimes this project tests on, with the caps they
    /// report (`rxvm devices`).
    pub const PRESETS: [&'static str; 3] = ["host", "intel-cpu", "pocl-cpu"];

    /// A named target of [`DeviceCaps::PRESETS`].
    pub fn preset(name: &str) -> Option<DeviceCaps> {
        let host = DeviceCaps::host();
        match name {
            "host" => Some(host),
            // Intel CPU OpenCL runtime 2021.2: images over buffers, 64-texel pitch.
            "intel-cpu" => Some(DeviceCaps { name: "intel-cpu".into(), base_align: 128, ..host }),
            // PoCL 3.1 (pthread): images, but none over buffers, and dense rows.
            "pocl-cpu" => Some(DeviceCaps {
                name: "pocl-cpu".into(),
                base_align: 128,
                image_pitch_align_px: 1,
                image_base_align: 128,
                image_from_buffer: false,
                ..host
            }),
            _ => None,
        }
    }

    /// A target spec: `PRESET` or `PRESET,KEY=VALUE,...` (see [`DeviceCaps::with_overrides`]),
    /// e.g. `intel-cpu,pitch=32`.
    pub fn parse_target(spec: &str) -> Result<DeviceCaps, String> {
        let (name, rest) = spec.split_once(',').unwrap_or((spec, ""));
        let caps = DeviceCaps::preset(name.trim()).ok_or_else(|| {
            format!("unknown target `{}`; the targets are: {}", name.trim(), DeviceCaps::PRESETS.join(", "))
        })?;
        caps.with_overrides(rest)
    }

    /// Applies `key=value` overrides, comma separated, e.g. `pitch=32,image-base=256`.
    /// Keys: `base-align`, `mem-base-align`, `pitch`, `image-base`, `max-width`, `max-height`,
    /// `max-alloc`, `mem`, and the switches `images` and `image-from-buffer` (0 or 1).
    pub fn with_overrides(mut self, spec: &str) -> Result<DeviceCaps, String> {
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) =
                item.split_once('=').ok_or_else(|| format!("expected KEY=VALUE in device caps, found `{item}`"))?;
            let v: u64 = parse_size(v).ok_or_else(|| format!("`{v}` is not a size (e.g. 64, 4k, 2M, 1G)"))?;
            let pow2 = |name: &str, v: u64| {
                if v.is_power_of_two() {
                    Ok(v)
                } else {
                    Err(format!("{name} must be a power of two, found {v}"))
                }
            };
            match k {
                "base-align" => self.base_align = pow2(k, v)?,
                "mem-base-align" => self.mem_base_addr_align = pow2(k, v)?,
                "pitch" => self.image_pitch_align_px = v.max(1),
                "image-base" => self.image_base_align = pow2(k, v)?,
                "max-width" => self.max_image2d_width = v,
                "max-height" => self.max_image2d_height = v,
                "max-alloc" => self.max_alloc = v,
                "mem" => self.global_mem = v,
                "images" => self.image_support = v != 0,
                "image-from-buffer" => self.image_from_buffer = v != 0,
                _ => {
                    return Err(format!(
                        "unknown device cap `{k}`; expected one of: base-align, mem-base-align, pitch, image-base, max-width, max-height, max-alloc, mem, images (0 or 1), image-from-buffer (0 or 1)"
                    ))
                }
            }
        }
        Ok(self)
    }
}

/// The host device's default memory: the machine's physical RAM as the OS reports it
/// (`sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE)`), or [`HOST_MEMORY_FALLBACK`] where
/// it cannot say. Read once per process.
pub fn host_memory() -> u64 {
    static RAM: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *RAM.get_or_init(|| physical_memory().filter(|&b| b > 0).unwrap_or(HOST_MEMORY_FALLBACK))
}

/// The host device's memory where the OS does not report its RAM (8 GiB).
pub const HOST_MEMORY_FALLBACK: u64 = 8 << 30;

#[cfg(unix)]
fn physical_memory() -> Option<u64> {
    // SAFETY: `sysconf` reads system configuration; it has no preconditions.
    let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    u64::try_from(pages).ok()?.checked_mul(u64::try_from(page).ok()?)
}

#[cfg(not(unix))]
fn physical_memory() -> Option<u64> {
    None
}

/// Parses `123`, `4k`, `2M`, `1G` (binary multiples).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mul) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1u64 << 10),
        'm' | 'M' => (&s[..s.len() - 1], 1 << 20),
        'g' | 'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}

impl fmt::Display for DeviceCaps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: base align {} B, sub-buffer align {} B, image pitch {} px, image base {} B, max image {}x{}, max alloc {} B, memory {} B",
            self.name,
            self.base_align,
            self.mem_base_addr_align,
            self.image_pitch_align_px,
            self.image_base_align,
            self.max_image2d_width,
            self.max_image2d_height,
            self.max_alloc,
            self.global_mem
        )
    }
}

/// An aligned, zero-initialised block of host memory. A fresh block reads as zeros; a
/// block reused from the pool holds what its last storage left there.
///
/// Blocks of [`HOST_MAP_THRESHOLD`] bytes or more are anonymous memory mappings: the OS
/// gives them zero pages on first touch, so a storage costs resident memory only for the
/// pages written (an untouched 4 GiB `alloc_storage` costs nothing). Smaller blocks come
/// from the system allocator, zeroed (the allocator zeroes eagerly for alignments above
/// 16 bytes, which is cheap at these sizes).
pub struct HostBlock {
    ptr: NonNull<u8>,
    capacity: u64,
    align: u64,
    mem: HostMem,
}

/// Where a [`HostBlock`]'s bytes come from.
enum HostMem {
    /// The system allocator, with this layout.
    Heap(Layout),
    /// An anonymous mapping, held to be unmapped when the block drops; `ptr` is its first
    /// address aligned to the block's alignment.
    Mapped { _map: memmap2::MmapMut },
    /// Bytes another object owns and keeps alive (a module's constant data): a constant
    /// storage over them costs no copy. Never written.
    Borrowed { _owner: std::sync::Arc<dyn std::any::Any + Send + Sync> },
}

/// The largest alignment a host storage may ask for (2 MiB, a huge page). A stricter
/// `align` is refused as such: the system allocator would fail it, which looked like "out
/// of device memory", or reserve address space the size of the alignment.
pub const HOST_MAX_ALIGN: u64 = 1 << 21;

/// The alignment of a [`HostBlock::borrowed`] block.
pub const BORROWED_ALIGN: u64 = 16;

/// Host blocks of at least this many bytes (1 MiB) are anonymous mappings, zeroed lazily
/// by the OS (see [`HostBlock`]).
pub const HOST_MAP_THRESHOLD: u64 = 1 << 20;

/// The alignment every mapping has: a page (4 KiB is the smallest page size of the
/// systems the crate runs on).
const MAP_ALIGN: u64 = 4096;

impl HostBlock {
    /// A zeroed block of `capacity` bytes; `None` if the system refuses.
    pub fn new(capacity: u64, align: u64) -> Option<HostBlock> {
        if !align.is_power_of_two() {
            return None;
        }
        if capacity >= HOST_MAP_THRESHOLD {
            return HostBlock::mapped(capacity, align);
        }
        let layout = Layout::from_size_align(usize::try_from(capacity.max(1)).ok()?, align as usize).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) })?;
        Some(HostBlock { ptr, capacity: layout.size() as u64, align, mem: HostMem::Heap(layout) })
    }

    /// A block in an anonymous mapping, over-mapped by `align` when that is stricter than
    /// a page so that an aligned start lies inside it (the slack is never touched, so it
    /// costs address space only).
    fn mapped(capacity: u64, align: u64) -> Option<HostBlock> {
        let slack = if align > MAP_ALIGN { align } else { 0 };
        let len = usize::try_from(capacity.checked_add(slack)?).ok()?;
        let mut map = memmap2::MmapMut::map_anon(len).ok()?;
        let base = map.as_mut_ptr();
        let addr = base as usize;
        let skip = (addr.wrapping_add(align as usize - 1) & !(align as usize - 1)).wrapping_sub(addr);
        if skip as u64 > slack {
            return None;
        }
        // SAFETY: `skip <= slack`, so `skip + capacity <= len`: inside the mapping.
        let ptr = NonNull::new(unsafe { base.add(skip) })?;
        Some(HostBlock { ptr, capacity, align, mem: HostMem::Mapped { _map: map } })
    }

    /// A block over `bytes`, which `owner` keeps alive and nobody writes while the block
    /// lives (only a constant storage may hold it). Its alignment is [`BORROWED_ALIGN`]
    /// (what the system allocator gives any heap buffer, so it does not depend on where
    /// the bytes happen to lie); `None` for empty or less aligned bytes.
    pub fn borrowed(bytes: &[u8], owner: std::sync::Arc<dyn std::any::Any + Send + Sync>) -> Option<HostBlock> {
        let ptr = NonNull::new(bytes.as_ptr() as *mut u8)?;
        if bytes.is_empty() || !(ptr.as_ptr() as usize).is_multiple_of(BORROWED_ALIGN as usize) {
            return None;
        }
        let mem = HostMem::Borrowed { _owner: owner };
        Some(HostBlock { ptr, capacity: bytes.len() as u64, align: BORROWED_ALIGN, mem })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn align(&self) -> u64 {
        self.align
    }

    /// True when the block is an anonymous mapping (see [`HOST_MAP_THRESHOLD`]).
    pub fn is_mapped(&self) -> bool {
        matches!(self.mem, HostMem::Mapped { .. })
    }
}

impl Drop for HostBlock {
    fn drop(&mut self) {
        if let HostMem::Heap(layout) = self.mem {
            // SAFETY: allocated in `new` with this layout.
            unsafe { dealloc(self.ptr.as_ptr(), layout) }
        }
        // A mapping is unmapped when `mem` drops.
    }
}

/// Rounds a request up to its size class: multiples of 64 bytes up to 1 KiB, then four
/// classes per power of two, so a reused block wastes at most a quarter of its size.
pub fn size_class(size: u64) -> u64 {
    if size <= 1024 {
        return size.max(1).div_ceil(64) * 64;
    }
    let top = 63 - size.leading_zeros() as u64; // floor(log2(size))
    let step = 1u64 << (top - 2);
    size.div_ceil(step).saturating_mul(step)
}

/// A small index of each size class (see [`size_class`]): 0..16 for the 64-byte classes up
/// to 1 KiB, then four per power of two (16 is unused: 1 KiB is the last 64-byte class).
pub(crate) fn class_index(class: u64) -> usize {
    if class <= 1024 {
        return (class / 64 - 1) as usize;
    }
    // class = q * 2^(top - 2) with q in 4..8 (or 8 when a request rounded up to 2^(top + 1)).
    let top = 63 - class.leading_zeros() as usize;
    let q = (class >> (top - 2)) as usize; // 4..=7
    16 + (top - 10) * 4 + (q - 4)
}

/// What [`Bins`] keeps: something with a size class (its capacity) and an alignment.
pub trait Binned {
    fn capacity(&self) -> u64;
    fn align(&self) -> u64;
    /// [`class_index`] of the capacity (an item may keep it rather than recompute it).
    fn bin(&self) -> usize {
        class_index(self.capacity())
    }
}

/// Free items (dead storages kept whole, see `memory::Storage::park`) by size class
/// and alignment, handed out again for any request of the same class and alignment.
pub struct Bins<T> {
    /// Items with the alignment most requests use, by [`class_index`]: a steady-state
    /// `alloc_storage` is a `Vec` pop, with no hashing (an Fx-hashed map of (class, align)
    /// was a tenth of an `alloc_storage` + `alloc_tensor` + `kill` round).
    bins: Vec<Vec<T>>,
    /// The alignment of `bins`: that of the first item put.
    bin_align: u64,
    /// Items of any other alignment, by (class, alignment).
    other: FxHashMap<(u64, u64), Vec<T>>,
}

impl<T> Default for Bins<T> {
    fn default() -> Self {
        Bins { bins: Vec::new(), bin_align: 0, other: FxHashMap::default() }
    }
}

/// Where an allocation's block came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocSource {
    Fresh,
    PoolHit,
}

impl<T: Binned> Bins<T> {
    /// An item of size class `class` (see [`size_class`]) and alignment `align`.
    #[inline]
    pub fn take(&mut self, class: u64, align: u64) -> Option<T> {
        if align == self.bin_align {
            return self.take_bin(class_index(class), align);
        }
        self.other.get_mut(&(class, align)).and_then(Vec::pop)
    }

    /// An item of the class with [`class_index`] `bin` and alignment `align`, when that
    /// is the bins' alignment (`None` otherwise, even if [`Bins::take`] would find one).
    #[inline(always)]
    pub fn take_bin(&mut self, bin: usize, align: u64) -> Option<T> {
        if align != self.bin_align {
            return None;
        }
        self.bins.get_mut(bin)?.pop()
    }

    #[inline]
    pub fn put(&mut self, item: T) {
        if self.bin_align == 0 {
            self.bin_align = item.align();
        }
        if item.align() == self.bin_align {
            let i = item.bin();
            if i >= self.bins.len() {
                self.bins.resize_with(i + 1, Vec::new);
            }
            self.bins[i].push(item);
        } else {
            self.other.entry((item.capacity(), item.align())).or_default().push(item);
        }
    }

    /// The capacities of the items held, summed (counted when asked: the pool's hot paths
    /// keep no total).
    pub fn free_bytes(&self) -> u64 {
        self.bins.iter().chain(self.other.values()).flatten().map(Binned::capacity).sum()
    }

    /// Takes every item out (to be dropped by the caller, outside any borrow of `self`).
    pub fn take_all(&mut self) -> Vec<T> {
        let mut all: Vec<T> = self.bins.drain(..).flatten().collect();
        all.extend(self.other.drain().flat_map(|(_, v)| v));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_bound_waste() {
        assert_eq!(size_class(0), 64);
        assert_eq!(size_class(1), 64);
        assert_eq!(size_class(1024), 1024);
        assert_eq!(size_class(1025), 1280);
        for s in [1500u64, 4097, 1 << 20, (1 << 20) + 1, 123_456_789] {
            let c = size_class(s);
            assert!(c >= s && c - s <= s / 4, "{s} -> {c}");
        }
    }

    #[test]
    fn class_indices_are_dense_and_distinct() {
        let mut seen = std::collections::BTreeMap::new();
        for size in (1..=1 << 22).step_by(37).chain([1 << 40, (1 << 40) + 1, u64::MAX >> 2]) {
            let c = size_class(size);
            if let Some(prev) = seen.insert(class_index(c), c) {
                assert_eq!(prev, c, "classes {prev} and {c} share index {}", class_index(c));
            }
        }
        let small: Vec<usize> = (1..=16).map(|k| class_index(k * 64)).collect();
        assert_eq!(small, (0..16).collect::<Vec<_>>());
        assert_eq!(class_index(1280), 17);
        assert_eq!(class_index(2048), 20);
    }

    impl Binned for HostBlock {
        fn capacity(&self) -> u64 {
            HostBlock::capacity(self)
        }
        fn align(&self) -> u64 {
            HostBlock::align(self)
        }
    }

    #[test]
    fn bins_hand_back_items_of_the_same_class_and_alignment() {
        let mut p: Bins<HostBlock> = Bins::default();
        let b = HostBlock::new(size_class(1000), 64).unwrap();
        assert_eq!(b.as_ptr() as usize % 64, 0);
        let addr = b.as_ptr();
        p.put(b);
        assert_eq!(p.free_bytes(), 1024);
        assert!(p.take(size_class(990), 128).is_none(), "another alignment");
        assert!(p.take(size_class(1100), 64).is_none(), "another class");
        let odd = HostBlock::new(size_class(5000), 256).unwrap();
        p.put(odd);
        assert_eq!(p.take(size_class(990), 64).map(|b| b.as_ptr()), Some(addr));
        assert!(p.take(size_class(990), 64).is_none(), "taken once");
        assert_eq!(p.free_bytes(), size_class(5000));
        assert_eq!(p.take(size_class(4900), 256).map(|b| b.capacity()), Some(size_class(5000)));
        assert_eq!(p.free_bytes(), 0);
        p.put(HostBlock::new(64, 64).unwrap());
        assert_eq!(p.take_all().len(), 1);
        assert_eq!(p.free_bytes(), 0);
    }

    #[test]
    fn large_host_blocks_are_mappings_aligned_zeroed_and_writable() {
        for align in [64, 4096, 1 << 16, HOST_MAX_ALIGN] {
            let b = HostBlock::new(HOST_MAP_THRESHOLD + 100, align).unwrap();
            assert!(b.is_mapped(), "{align}");
            assert_eq!(b.as_ptr() as u64 % align, 0, "aligned to {align}");
            assert_eq!((b.capacity(), b.align()), (HOST_MAP_THRESHOLD + 100, align));
            // SAFETY: the block holds `capacity` bytes.
            let bytes = unsafe { std::slice::from_raw_parts_mut(b.as_ptr(), b.capacity() as usize) };
            assert!(bytes.iter().all(|&x| x == 0), "fresh mappings read as zeros");
            bytes[0] = 1;
            *bytes.last_mut().unwrap() = 2;
            assert_eq!((bytes[0], bytes[bytes.len() - 1]), (1, 2));
        }
        let small = HostBlock::new(HOST_MAP_THRESHOLD - 64, 64).unwrap();
        assert!(!small.is_mapped());
        // SAFETY: as above.
        let bytes = unsafe { std::slice::from_raw_parts(small.as_ptr(), small.capacity() as usize) };
        assert!(bytes.iter().all(|&x| x == 0));
        assert!(HostBlock::new(HOST_MAP_THRESHOLD, 3).is_none(), "not a power of two");
    }

    #[test]
    fn the_host_device_has_the_machine_s_memory() {
        let ram = host_memory();
        assert_eq!(DeviceCaps::host().global_mem, ram);
        assert_eq!(DeviceCaps::preset("intel-cpu").unwrap().global_mem, ram);
        #[cfg(target_os = "linux")]
        {
            // /proc/meminfo's MemTotal is the RAM less what the kernel reserved at boot.
            let info = std::fs::read_to_string("/proc/meminfo").unwrap();
            let kib: u64 = info
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap();
            let total = kib * 1024;
            assert!(ram >= total && ram - total <= ram / 8, "sysconf {ram} B, MemTotal {total} B");
        }
        let c = DeviceCaps::host().with_overrides("mem=1G").unwrap();
        assert_eq!(c.global_mem, 1 << 30, "--host-caps mem= overrides it");
    }

    #[test]
    fn caps_overrides_parse_and_reject() {
        let c = DeviceCaps::host().with_overrides("pitch=32, image-base=256, mem=1G").unwrap();
        assert_eq!((c.image_pitch_align_px, c.image_base_align, c.global_mem), (32, 256, 1 << 30));
        assert!(DeviceCaps::host().with_overrides("image-base=100").is_err());
        assert!(DeviceCaps::host().with_overrides("bogus=1").is_err());
        assert!(DeviceCaps::host().with_overrides("pitch").is_err());
    }

    #[test]
    fn targets_are_presets_with_overrides() {
        for name in DeviceCaps::PRESETS {
            assert_eq!(DeviceCaps::parse_target(name).unwrap().name, name);
        }
        let pocl = DeviceCaps::parse_target("pocl-cpu, mem-base-align=256").unwrap();
        assert!(!pocl.image_from_buffer && pocl.image_support);
        assert_eq!(pocl.mem_base_addr_align, 256);
        let e = DeviceCaps::parse_target("adreno").unwrap_err();
        assert!(e.contains("the targets are: host, intel-cpu, pocl-cpu"), "{e}");
    }
}
