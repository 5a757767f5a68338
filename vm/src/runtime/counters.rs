//! The runtime's counters: objects made and live, bytes live and at peak, instructions,
//! and copies by direction. `Cell`s, bumped on the hot paths without borrowing anything.

use std::cell::Cell;

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

/// Counters of storages and views (merged into [`crate::runtime::memory::Runtime::stats`]), and the next ids.
#[derive(Default)]
pub struct ObjectCounters {
    pub fresh_allocations: Cell<u64>,
    pub live_bytes: Cell<u64>,
    pub peak_bytes: Cell<u64>,
    /// The maximum of `live_bytes + constant_bytes`.
    pub peak_total_bytes: Cell<u64>,
    pub storages_created: Cell<u64>,
    pub views_created: Cell<u64>,
    pub live_storages: Cell<u64>,
    pub live_views: Cell<u64>,
    pub constant_bytes: Cell<u64>,
    pub(crate) next_storage: Cell<u64>,
    pub(crate) next_view: Cell<u64>,
    /// Keep the tables of live objects behind [`crate::runtime::memory::Ledger::storages`] and [`crate::runtime::memory::Ledger::views`]
    /// (the REPL turns this on). Off by default: registering and forgetting each object
    /// costs about a fifth of an `alloc_storage` + `alloc_tensor` + `kill` triple.
    pub track: Cell<bool>,
}

/// Adds `by` to counter `c`.
#[inline(always)]
pub(crate) fn bump(c: &Cell<u64>, by: u64) {
    c.set(c.get() + by);
}

/// Subtracts `by` from counter `c`.
#[inline(always)]
pub(crate) fn sub(c: &Cell<u64>, by: u64) {
    c.set(c.get() - by);
}

/// Returns counter `c`, then increments it.
#[inline(always)]
pub(crate) fn take_next(c: &Cell<u64>) -> u64 {
    let id = c.get();
    c.set(id + 1);
    id
}

impl ObjectCounters {
    /// The id the next storage will get.
    pub fn next_storage_id(&self) -> u64 {
        self.next_storage.get()
    }
}

/// The per-invocation counters of a [`crate::runtime::memory::Runtime`] (merged into [`crate::runtime::memory::Runtime::stats`]).
#[derive(Default)]
pub struct Counters {
    pub instructions: Cell<u64>,
    /// Every copy since the runtime was made.
    pub copies: Cell<Copies>,
    /// Copies since the last [`Counters::mark_copies`]: an invocation marks at its start
    /// and reads this at its end, instead of subtracting two snapshots of `copies`.
    pub copies_since_mark: Cell<Copies>,
}

impl Counters {
    /// Counts a copy of `bytes` in direction `dir`.
    pub fn count_copy(&self, dir: Direction, bytes: u64) {
        for cell in [&self.copies, &self.copies_since_mark] {
            let mut c = cell.get();
            c.count(dir, bytes);
            cell.set(c);
        }
    }

    /// Starts counting [`Counters::copies_since_mark`] from zero.
    #[inline]
    pub fn mark_copies(&self) {
        self.copies_since_mark.set(Copies::default());
    }
}
