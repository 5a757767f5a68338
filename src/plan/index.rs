//! Index structures shared by the strategies.
//!
//! * [`IntervalSet`]: a growing subset of one pool's buffers that lists the members whose lifetimes
//!   intersect a given buffer's, in `O(log n + k)`-ish for `k` answers. The strategies use it to
//!   find the placed buffers a new buffer must avoid, so placement never scans unrelated buffers.
//! * [`LiveProfile`]: live bytes per step under range updates, with the leftmost maximum, and
//!   [`StabQueue`]: the highest-priority unplaced buffer live at a step; together they run
//!   [`max_live_first`](super::max_live_first) in `O(n log n)`.

use super::problem::Buffer;

/// A growing subset of a fixed universe of buffers that lists the members whose lifetimes intersect
/// a given universe buffer's lifetime in `O(log n + k + span / 64)` for `k` answers.
///
/// The universe is sorted by `first` ("positions"). A buffer `i` with lifetime `f..=l` intersects
/// member `j` either because `j` is live at step `f` (`first_j <= f <= last_j`) or because `j` starts
/// inside `(f, l]`; the two cases are disjoint.
/// * Live at `f`: a member `j` is also recorded in the canonical nodes of a segment tree over
///   positions that cover `j`'s span, from its own position to the last position whose `first` is
///   `<= last_j`. The members whose span holds the last position with `first == f` are exactly those
///   live at `f`; they are found by walking from that leaf to the root. Node capacities are known
///   up front (the universe is fixed), so the node lists share one flat array.
/// * Starting inside `(f, l]`: a contiguous range of positions, scanned in a bitset of members.
pub(crate) struct IntervalSet {
    /// Buffer ids sorted by `(first, id)`.
    order: Vec<u32>,
    /// `first` of `order[k]`.
    firsts: Vec<u32>,
    /// Last position whose `first` is `<= last` of `order[k]`.
    span_end: Vec<u32>,
    /// Position of each buffer id (`u32::MAX` for ids outside the universe).
    rank: Vec<u32>,
    /// Leaves of the segment tree (a power of two, at least 1).
    cap: usize,
    /// Node `k`'s members are `items[start[k]..start[k] + fill[k]]`.
    start: Vec<usize>,
    fill: Vec<u32>,
    items: Vec<u32>,
    /// Bit `k` set when `order[k]` is a member.
    members: Vec<u64>,
}

impl IntervalSet {
    /// An empty set over the universe `ids` (indices into `bufs`).
    pub(crate) fn new(bufs: &[Buffer], ids: &[u32]) -> Self {
        let mut order = ids.to_vec();
        order.sort_unstable_by_key(|&i| (bufs[i as usize].first, i));
        let firsts: Vec<u32> = order.iter().map(|&i| bufs[i as usize].first).collect();
        // Positions fit in u32: `ids.len() <= bufs.len() <= u32::MAX` (`Problem::validate`), and a
        // buffer's own position is `<=` its span end since `first <= last`.
        let span_end: Vec<u32> = order
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let end = firsts.partition_point(|&f| f <= bufs[i as usize].last).saturating_sub(1);
                end.max(k) as u32
            })
            .collect();
        let mut rank = vec![u32::MAX; bufs.len()];
        for (k, &i) in order.iter().enumerate() {
            rank[i as usize] = k as u32;
        }
        let cap = order.len().next_power_of_two();
        let mut start = vec![0usize; 2 * cap + 1];
        for (k, &end) in span_end.iter().enumerate() {
            canonical_nodes(cap, k, end as usize, |node| start[node + 1] += 1);
        }
        for node in 1..start.len() {
            start[node] += start[node - 1];
        }
        let items = vec![0u32; start[2 * cap]];
        let members = vec![0u64; order.len().div_ceil(64)];
        IntervalSet { order, firsts, span_end, rank, cap, start, fill: vec![0; 2 * cap], items, members }
    }

    /// Adds buffer `id`; ids outside the universe and repeated insertions are ignored.
    pub(crate) fn insert(&mut self, id: u32) {
        let Some(&pos) = self.rank.get(id as usize) else { return };
        if pos == u32::MAX {
            return;
        }
        let pos = pos as usize;
        let (word, bit) = (pos / 64, 1u64 << (pos % 64));
        if self.members[word] & bit != 0 {
            return;
        }
        self.members[word] |= bit;
        let (start, fill, items) = (&self.start, &mut self.fill, &mut self.items);
        canonical_nodes(self.cap, pos, self.span_end[pos] as usize, |node| {
            items[start[node] + fill[node] as usize] = id;
            fill[node] += 1;
        });
    }

    /// Replaces `out` with the members whose lifetime intersects that of universe buffer `id`
    /// (`id` itself included if it is a member); nothing for ids outside the universe.
    pub(crate) fn query(&self, id: u32, out: &mut Vec<u32>) {
        out.clear();
        let Some(&pos) = self.rank.get(id as usize) else { return };
        if pos == u32::MAX {
            return;
        }
        let pos = pos as usize;
        // Members live at `first`: those covering the last position whose `first` is `first` (a
        // member that starts at `first` too may sit after `pos` in the sorted order).
        let first = self.firsts[pos];
        let from = self.firsts.partition_point(|&f| f <= first);
        let mut node = from - 1 + self.cap;
        while node >= 1 {
            let begin = self.start[node];
            out.extend_from_slice(&self.items[begin..begin + self.fill[node] as usize]);
            node /= 2;
        }
        // Members starting after `first` and no later than the span end of `id`.
        let to = self.span_end[pos] as usize + 1;
        let mut k = from;
        while k < to {
            let word = self.members[k / 64] >> (k % 64);
            if word == 0 {
                k = (k / 64 + 1) * 64;
                continue;
            }
            k += word.trailing_zeros() as usize;
            if k < to {
                out.push(self.order[k]);
            }
            k += 1;
        }
    }
}

/// Calls `visit` on the canonical nodes of a heap-ordered segment tree with `cap` leaves that cover
/// positions `lo..=hi` (nothing if the range is empty or out of bounds).
fn canonical_nodes(cap: usize, lo: usize, hi: usize, mut visit: impl FnMut(usize)) {
    if lo > hi || hi >= cap {
        return;
    }
    let (mut l, mut r) = (lo + cap, hi + cap + 1);
    while l < r {
        if l & 1 == 1 {
            visit(l);
            l += 1;
        }
        if r & 1 == 1 {
            r -= 1;
            visit(r);
        }
        l /= 2;
        r /= 2;
    }
}

/// Items covering ranges of points, taken out one by one, answering "the first remaining item (in
/// insertion order) that covers point `t`" in amortized `O(log points)`.
///
/// Each item is stored in the `O(log points)` canonical nodes of a segment tree that cover its range;
/// items are inserted in priority order, so every node's list is sorted by priority. A query walks
/// from `t`'s leaf to the root and takes the best head among those lists; heads skip items already
/// taken, and never move back, so skipping costs `O(total stored)` over the whole run.
pub(crate) struct StabQueue {
    cap: usize,
    /// Node `k`'s items are `items[start[k]..start[k + 1]]`, in priority order.
    start: Vec<usize>,
    items: Vec<u32>,
    /// Per node, the index in `items` of its first item not yet taken.
    head: Vec<usize>,
    /// Priority rank of each item id (lower is better; `u32::MAX` for ids never inserted).
    rank: Vec<u32>,
    taken: Vec<bool>,
}

impl StabQueue {
    /// `entries` are `(id, lo, hi)` in priority order (best first), covering points `lo..=hi` of
    /// `points` points; ids are below `ids_len`.
    pub(crate) fn new(points: usize, ids_len: usize, entries: &[(u32, usize, usize)]) -> Self {
        let cap = points.next_power_of_two();
        let mut count = vec![0usize; 2 * cap + 1];
        for &(_, lo, hi) in entries {
            canonical_nodes(cap, lo, hi, |node| count[node] += 1);
        }
        let mut start = vec![0usize; 2 * cap + 1];
        let mut total = 0usize;
        for node in 0..2 * cap {
            start[node] = total;
            total += count[node];
        }
        start[2 * cap] = total;
        let mut fill = start.clone();
        let mut items = vec![0u32; total];
        let mut rank = vec![u32::MAX; ids_len];
        for (r, &(id, lo, hi)) in entries.iter().enumerate() {
            rank[id as usize] = r as u32;
            canonical_nodes(cap, lo, hi, |node| {
                items[fill[node]] = id;
                fill[node] += 1;
            });
        }
        let head = start[..2 * cap].to_vec();
        StabQueue { cap, start, items, head, rank, taken: vec![false; ids_len] }
    }

    /// The best remaining item covering `point`, if any.
    pub(crate) fn best_at(&mut self, point: usize) -> Option<u32> {
        if point >= self.cap {
            return None;
        }
        let mut node = point + self.cap;
        let mut best: Option<u32> = None;
        while node >= 1 {
            let end = self.start[node + 1];
            let mut h = self.head[node];
            while h < end && self.taken[self.items[h] as usize] {
                h += 1;
            }
            self.head[node] = h;
            if h < end {
                let id = self.items[h];
                if best.is_none_or(|b| self.rank[id as usize] < self.rank[b as usize]) {
                    best = Some(id);
                }
            }
            node /= 2;
        }
        best
    }

    /// Marks `id` as taken.
    pub(crate) fn take(&mut self, id: u32) {
        if let Some(flag) = self.taken.get_mut(id as usize) {
            *flag = true;
        }
    }
}

/// Live bytes at a set of points (sorted distinct steps) under "subtract `v` on points `lo..=hi`",
/// with the leftmost maximum. Segment tree with non-propagated pending subtractions: `max[node]` is
/// the subtree maximum after the subtractions recorded at `node` and below.
pub(crate) struct LiveProfile {
    max: Vec<u64>,
    pending: Vec<u64>,
    cap: usize,
}

impl LiveProfile {
    /// A profile with the given initial values, one per point.
    pub(crate) fn new(values: &[u64]) -> Self {
        let cap = values.len().next_power_of_two();
        let mut max = vec![0u64; 2 * cap];
        max[cap..cap + values.len()].copy_from_slice(values);
        for node in (1..cap).rev() {
            max[node] = max[2 * node].max(max[2 * node + 1]);
        }
        LiveProfile { max, pending: vec![0; 2 * cap], cap }
    }

    /// The leftmost point with the maximum value, and that value.
    pub(crate) fn argmax(&self) -> (usize, u64) {
        let mut node = 1;
        while node < self.cap {
            // Both children carry the same ancestor subtractions, so they compare directly.
            node = if self.max[2 * node] >= self.max[2 * node + 1] { 2 * node } else { 2 * node + 1 };
        }
        (node - self.cap, self.max[1])
    }

    /// Subtracts `value` from points `lo..=hi` (saturating; callers only remove what they added).
    pub(crate) fn subtract(&mut self, lo: usize, hi: usize, value: u64) {
        if lo <= hi && hi < self.cap {
            self.subtract_in(1, 0, self.cap - 1, lo, hi, value);
        }
    }

    fn subtract_in(&mut self, node: usize, node_lo: usize, node_hi: usize, lo: usize, hi: usize, value: u64) {
        if hi < node_lo || node_hi < lo {
            return;
        }
        if lo <= node_lo && node_hi <= hi {
            self.max[node] = self.max[node].saturating_sub(value);
            self.pending[node] = self.pending[node].saturating_add(value);
            return;
        }
        let mid = node_lo + (node_hi - node_lo) / 2;
        self.subtract_in(2 * node, node_lo, mid, lo, hi, value);
        self.subtract_in(2 * node + 1, mid + 1, node_hi, lo, hi, value);
        self.max[node] = self.max[2 * node].max(self.max[2 * node + 1]).saturating_sub(self.pending[node]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(bufs: &[Buffer], members: &[bool], f: u32, l: u32) -> Vec<u32> {
        (0..bufs.len() as u32)
            .filter(|&i| members[i as usize] && bufs[i as usize].first <= l && f <= bufs[i as usize].last)
            .collect()
    }

    #[test]
    fn interval_set_matches_brute_force() {
        let mut seed = 12345u64;
        let mut next = move |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        // Many equal `first`s, short and long lifetimes.
        let bufs: Vec<Buffer> = (0..300)
            .map(|_| {
                let first = next(100) as u32;
                let len = if next(10) == 0 { next(100) } else { next(6) };
                Buffer::new(1, 1, first, first + len as u32)
            })
            .collect();
        // Universe: every buffer except multiples of 7.
        let ids: Vec<u32> = (0..300).filter(|i: &u32| !i.is_multiple_of(7)).collect();
        let mut set = IntervalSet::new(&bufs, &ids);
        let mut members = vec![false; bufs.len()];
        let mut out = Vec::new();
        for step in 0..600u32 {
            // Ids outside the universe (multiples of 7, 300 and above) are ignored, and so are
            // repeated insertions.
            let id = next(310) as u32;
            set.insert(id);
            if let Some(member) = members.get_mut(id as usize) {
                *member = !id.is_multiple_of(7);
            }
            let probe = next(300) as u32;
            set.query(probe, &mut out);
            out.sort_unstable();
            let b = &bufs[probe as usize];
            let expected = if probe.is_multiple_of(7) { Vec::new() } else { brute(&bufs, &members, b.first, b.last) };
            assert_eq!(out, expected, "query for {probe} ({}..={}) after step {step}", b.first, b.last);
        }
    }

    #[test]
    fn stab_queue_gives_the_best_remaining_cover() {
        // Items in priority order: (id, lo, hi) over 7 points.
        let entries = [(4, 0, 6), (1, 2, 3), (0, 3, 5), (3, 0, 0), (2, 5, 6)];
        let mut q = StabQueue::new(7, 5, &entries);
        assert_eq!(q.best_at(3), Some(4));
        q.take(4);
        assert_eq!(q.best_at(3), Some(1));
        assert_eq!(q.best_at(0), Some(3));
        assert_eq!(q.best_at(6), Some(2));
        q.take(1);
        assert_eq!(q.best_at(3), Some(0));
        assert_eq!(q.best_at(2), None);
        q.take(0);
        q.take(2);
        assert_eq!(q.best_at(5), None);
        assert_eq!(q.best_at(0), Some(3));
        assert_eq!(q.best_at(7), None);
        assert_eq!(StabQueue::new(0, 0, &[]).best_at(0), None);
    }

    #[test]
    fn live_profile_tracks_leftmost_max() {
        let mut values = vec![5u64, 9, 9, 3, 7];
        let mut profile = LiveProfile::new(&values);
        assert_eq!(profile.argmax(), (1, 9));
        for (lo, hi, v) in [(1, 2, 4), (0, 4, 1), (4, 4, 2), (0, 1, 4), (3, 4, 1)] {
            profile.subtract(lo, hi, v);
            for x in &mut values[lo..=hi] {
                *x -= v;
            }
            let best = *values.iter().max().unwrap();
            let at = values.iter().position(|&x| x == best).unwrap();
            assert_eq!(profile.argmax(), (at, best), "values {values:?}");
        }
    }
}
