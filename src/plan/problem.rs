//! The planning problem ([`Problem`]: buffers with sizes, alignments, lifetimes and pools),
//! its solution ([`Plan`]), and the bounds plans are judged by ([`lower_bound`],
//! [`naive_bytes`]). Every strategy, the exact search and the checker work on these.

/// One buffer to place: `size` bytes at an offset that is a multiple of `align`, live during the
/// inclusive schedule steps `first..=last`, in arena `pool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Buffer {
    /// Bytes; zero-size buffers are allowed and never conflict with anything.
    pub size: u64,
    /// Required offset alignment, at least 1 (any value, not only powers of two).
    pub align: u64,
    /// First step at which the buffer is live.
    pub first: u32,
    /// Last step at which the buffer is live (inclusive; `first <= last`).
    pub last: u32,
    /// The arena the buffer lives in; pools are planned independently.
    pub pool: u32,
}

impl Buffer {
    /// A buffer in pool 0.
    pub fn new(size: u64, align: u64, first: u32, last: u32) -> Self {
        Buffer { size, align, first, last, pool: 0 }
    }

    /// The same buffer in another pool.
    pub fn in_pool(self, pool: u32) -> Self {
        Buffer { pool, ..self }
    }

    /// Whether the two lifetimes share at least one step (pools are not compared).
    pub fn lives_with(&self, other: &Buffer) -> bool {
        self.first <= other.last && other.first <= self.last
    }
}

/// What a buffer holds, for reports and pictures (planning ignores it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BufferKind {
    /// An activation in a buffer view.
    #[default]
    Buffer,
    /// An activation in an image view (pitched).
    Texture,
    /// A graph input planned in the arena.
    Input,
    /// A graph output.
    Output,
}

impl BufferKind {
    pub fn name(self) -> &'static str {
        match self {
            BufferKind::Buffer => "buffer",
            BufferKind::Texture => "texture",
            BufferKind::Input => "input",
            BufferKind::Output => "output",
        }
    }
}

/// A planning problem: the buffers, and optionally a name and a kind per buffer for
/// messages, reports and pictures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Problem {
    pub buffers: Vec<Buffer>,
    /// Either empty or one name per buffer.
    pub names: Vec<String>,
    /// Either empty (all [`BufferKind::Buffer`]) or one kind per buffer.
    pub kinds: Vec<BufferKind>,
    /// Names of pools, for reports and pictures (`(pool, name)`; unnamed pools print as
    /// `pool N`).
    pub pool_names: Vec<(u32, String)>,
}

impl Problem {
    /// A problem without names.
    pub fn new(buffers: Vec<Buffer>) -> Self {
        Problem { buffers, names: Vec::new(), kinds: Vec::new(), pool_names: Vec::new() }
    }

    /// The name of `pool`: given in [`Problem::pool_names`], or `pool N`.
    pub fn pool_name(&self, pool: u32) -> String {
        match self.pool_names.iter().find(|(p, _)| *p == pool) {
            Some((_, n)) => n.clone(),
            None => format!("pool {pool}"),
        }
    }

    /// The kind of buffer `i` (`Buffer` when kinds are not given).
    pub fn kind(&self, i: usize) -> BufferKind {
        self.kinds.get(i).copied().unwrap_or_default()
    }

    /// Checks what the strategies rely on: `names` empty or one per buffer, every `align >= 1`,
    /// every `first <= last`, fewer than 2^32 buffers, and the sum of `size + align - 1` over all
    /// buffers fits in a `u64` (which bounds every offset a strategy can produce, so planning
    /// arithmetic cannot overflow).
    pub fn validate(&self) -> Result<(), String> {
        if !self.names.is_empty() && self.names.len() != self.buffers.len() {
            return Err(format!(
                "problem has {} buffers but {} names (names must be empty or one per buffer)",
                self.buffers.len(),
                self.names.len()
            ));
        }
        if !self.kinds.is_empty() && self.kinds.len() != self.buffers.len() {
            return Err(format!(
                "problem has {} buffers but {} kinds (kinds must be empty or one per buffer)",
                self.buffers.len(),
                self.kinds.len()
            ));
        }
        if u32::try_from(self.buffers.len()).is_err() {
            return Err(format!("problem has {} buffers; at most {} are supported", self.buffers.len(), u32::MAX));
        }
        let mut total: u64 = 0;
        for (i, b) in self.buffers.iter().enumerate() {
            if b.align == 0 {
                return Err(format!("{} has alignment 0 (must be at least 1)", self.describe(i)));
            }
            if b.first > b.last {
                return Err(format!(
                    "{} has an empty lifetime: first step {} > last step {}",
                    self.describe(i),
                    b.first,
                    b.last
                ));
            }
            total = total.checked_add(b.size).and_then(|t| t.checked_add(b.align - 1)).ok_or_else(|| {
                format!("total of buffer sizes plus alignment slack overflows u64 at {}", self.describe(i))
            })?;
        }
        Ok(())
    }

    /// `buffer 3` or `buffer 3 'conv1.out'`, for messages; never panics, even on a bad index.
    pub fn describe(&self, i: usize) -> String {
        match self.names.get(i) {
            Some(name) => format!("buffer {i} '{name}'"),
            None => format!("buffer {i}"),
        }
    }

    /// The pools that buffers use, ascending, without duplicates.
    pub fn pools(&self) -> Vec<u32> {
        let mut pools: Vec<u32> = self.buffers.iter().map(|b| b.pool).collect();
        pools.sort_unstable();
        pools.dedup();
        pools
    }
}

/// The result of planning: an offset per buffer (same order as [`Problem::buffers`]) and the arena
/// size of every pool, ascending by pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub offsets: Vec<u64>,
    /// `(pool, arena bytes)`; an arena is the highest `offset + size` of its buffers.
    pub pool_sizes: Vec<(u32, u64)>,
    /// The strategy that produced the plan.
    pub strategy: &'static str,
}

impl Plan {
    /// Total arena bytes over all pools (saturating, so a hand-made plan cannot make it panic).
    pub fn arena_bytes(&self) -> u64 {
        self.pool_sizes.iter().fold(0u64, |acc, &(_, bytes)| acc.saturating_add(bytes))
    }

    /// The arena size of `pool`, if the plan has one.
    pub fn pool_size(&self, pool: u32) -> Option<u64> {
        self.pool_sizes.iter().find(|&&(p, _)| p == pool).map(|&(_, bytes)| bytes)
    }
}

/// Lower bound on [`Plan::arena_bytes`]: for each pool, the peak over steps of the bytes live at
/// that step, summed over pools. Alignment padding is not counted. `O(n log n)` sweep.
///
/// Buffers that [`Problem::validate`] would reject for an empty lifetime count for nothing; the sum
/// saturates instead of overflowing.
pub fn lower_bound(p: &Problem) -> u64 {
    lower_bound_per_pool(p).iter().fold(0u64, |acc, &(_, peak)| acc.saturating_add(peak))
}

/// [`lower_bound`] for each pool separately, ascending by pool (pools with only zero-size buffers
/// have bound 0 and are listed too).
pub fn lower_bound_per_pool(p: &Problem) -> Vec<(u32, u64)> {
    // Events (pool, step, is_start, size); at the same step ends (is_start = false) come first, and
    // an end is placed at `last + 1`, so a buffer ending at t and one starting at t + 1 never add up.
    let mut events: Vec<(u32, u64, bool, u64)> = Vec::with_capacity(2 * p.buffers.len());
    for b in &p.buffers {
        if b.size > 0 && b.first <= b.last {
            events.push((b.pool, u64::from(b.first), true, b.size));
            events.push((b.pool, u64::from(b.last) + 1, false, b.size));
        }
    }
    events.sort_unstable();
    let mut peaks: Vec<(u32, u64)> = p.pools().into_iter().map(|pool| (pool, 0)).collect();
    let mut slot = 0usize;
    let mut live: u64 = 0;
    let mut peak: u64 = 0;
    let mut current: Option<u32> = None;
    for &(pool, _, is_start, size) in &events {
        if current != Some(pool) {
            if let Some(done) = current {
                record_peak(&mut peaks, &mut slot, done, peak);
            }
            current = Some(pool);
            live = 0;
            peak = 0;
        }
        if is_start {
            live = live.saturating_add(size);
            peak = peak.max(live);
        } else {
            live = live.saturating_sub(size);
        }
    }
    if let Some(done) = current {
        record_peak(&mut peaks, &mut slot, done, peak);
    }
    peaks
}

/// Stores `peak` for `pool` in the ascending `(pool, peak)` list, scanning forward from `slot`.
fn record_peak(peaks: &mut [(u32, u64)], slot: &mut usize, pool: u32, peak: u64) {
    while let Some(entry) = peaks.get_mut(*slot) {
        *slot += 1;
        if entry.0 == pool {
            entry.1 = peak;
            return;
        }
    }
}

/// The no-reuse total: every buffer's size rounded up to its alignment, summed (saturating;
/// alignment 0 counts as 1).
pub fn naive_bytes(p: &Problem) -> u64 {
    p.buffers.iter().fold(0u64, |acc, b| acc.saturating_add(align_up(b.size, b.align)))
}

/// `x` rounded up to a multiple of `align` (0 counts as 1); saturates at `u64::MAX`, which callers
/// rule out beforehand via [`Problem::validate`]'s bound.
pub fn align_up(x: u64, align: u64) -> u64 {
    let align = align.max(1);
    match x % align {
        0 => x,
        r => x.saturating_add(align - r),
    }
}
