//! The plan validator. Written independently of the strategies (it shares no code with them) so that
//! a bug in a strategy cannot hide itself.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::problem::{Plan, Problem};

/// Checks that `plan` is a valid placement of `p`:
///
/// * one offset per buffer, every buffer's alignment and lifetime well-formed;
/// * every offset is a multiple of the buffer's alignment;
/// * every buffer's pool has an arena size in the plan (listed once), and `[offset, offset + size)`
///   lies inside it;
/// * no two non-empty buffers of the same pool whose lifetimes share a step share a byte.
///
/// The overlap test sweeps the steps in order, keeping the live buffers of each pool in an ordered
/// map by offset. As long as no overlap has been found the live ranges are disjoint, so a new buffer
/// only needs comparing with its two neighbours: `O(n log n)` overall.
///
/// Errors name the buffers involved with their lifetimes and byte ranges.
pub fn check(p: &Problem, plan: &Plan) -> Result<(), String> {
    let n = p.buffers.len();
    if plan.offsets.len() != n {
        return Err(format!("plan has {} offsets for {n} buffers", plan.offsets.len()));
    }
    let mut pool_sizes = plan.pool_sizes.clone();
    pool_sizes.sort_unstable();
    if let Some(w) = pool_sizes.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(format!("plan lists pool {} more than once", w[0].0));
    }
    let describe = |i: usize| {
        let b = &p.buffers[i];
        let start = plan.offsets[i];
        format!(
            "{} (pool {}, steps {}..={}, bytes [{start}, {}))",
            p.describe(i),
            b.pool,
            b.first,
            b.last,
            u128::from(start) + u128::from(b.size)
        )
    };

    for (i, (b, &offset)) in p.buffers.iter().zip(&plan.offsets).enumerate() {
        if b.align == 0 {
            return Err(format!("{} has alignment 0", p.describe(i)));
        }
        if b.first > b.last {
            return Err(format!(
                "{} has an empty lifetime: first step {} > last step {}",
                p.describe(i),
                b.first,
                b.last
            ));
        }
        if !offset.is_multiple_of(b.align) {
            return Err(format!("{} is misaligned: offset {offset} is not a multiple of {}", describe(i), b.align));
        }
        let arena = match pool_sizes.binary_search_by_key(&b.pool, |&(pool, _)| pool) {
            Ok(k) => pool_sizes[k].1,
            Err(_) => return Err(format!("{} is in pool {}, which has no arena in the plan", p.describe(i), b.pool)),
        };
        match offset.checked_add(b.size) {
            Some(end) if end <= arena => {}
            _ => {
                return Err(format!("{} does not fit in the {arena}-byte arena of pool {}", describe(i), b.pool));
            }
        }
    }

    // Sweep: buffers enter in (pool, first) order; before one enters, every buffer of an earlier pool
    // or of the same pool with `last < first` leaves.
    let live_ids: Vec<usize> = (0..n).filter(|&i| p.buffers[i].size > 0).collect();
    let mut entering = live_ids.clone();
    entering.sort_unstable_by_key(|&i| (p.buffers[i].pool, p.buffers[i].first, i));
    let mut leaving = live_ids;
    leaving.sort_unstable_by_key(|&i| (p.buffers[i].pool, p.buffers[i].last, i));
    let mut leaving = leaving.into_iter().peekable();
    // Key (pool, offset, index) -> end offset.
    let mut live: BTreeMap<(u32, u64, usize), u64> = BTreeMap::new();
    for i in entering {
        let b = &p.buffers[i];
        while let Some(&j) = leaving.peek() {
            let o = &p.buffers[j];
            if (o.pool, o.last) >= (b.pool, b.first) {
                break;
            }
            live.remove(&(o.pool, plan.offsets[j], j));
            leaving.next();
        }
        let start = plan.offsets[i];
        let end = start + b.size; // checked above
        let key = (b.pool, start, i);
        let below = live.range(..key).next_back();
        if let Some((&(pool, _, j), &other_end)) = below {
            if pool == b.pool && other_end > start {
                return Err(format!("{} overlaps {}", describe(j), describe(i)));
            }
        }
        let above = live.range((Bound::Excluded(key), Bound::Unbounded)).next();
        if let Some((&(pool, other_start, j), _)) = above {
            if pool == b.pool && other_start < end {
                return Err(format!("{} overlaps {}", describe(j), describe(i)));
            }
        }
        live.insert(key, end);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::problem::Buffer;

    fn plan(offsets: Vec<u64>, pool_sizes: Vec<(u32, u64)>) -> Plan {
        Plan { offsets, pool_sizes, strategy: "hand" }
    }

    #[test]
    fn accepts_valid_plans() {
        let p = Problem::new(vec![
            Buffer::new(10, 1, 0, 2),
            Buffer::new(10, 1, 3, 4), // same bytes, disjoint lifetime
            Buffer::new(5, 5, 1, 3),
            Buffer::new(0, 1, 0, 9), // zero-size: conflicts with nothing
            Buffer::new(10, 1, 0, 9).in_pool(1),
        ]);
        check(&p, &plan(vec![0, 0, 10, 3, 0], vec![(0, 15), (1, 10)])).unwrap();
        // Extra pools and slack are allowed.
        check(&p, &plan(vec![0, 0, 10, 3, 0], vec![(1, 99), (0, 15), (4, 1)])).unwrap();
    }

    #[test]
    fn rejects_overlap_naming_both() {
        let p = Problem {
            buffers: vec![Buffer::new(10, 1, 0, 2), Buffer::new(10, 1, 2, 4)],
            names: vec!["x".into(), "y".into()],
            kinds: Vec::new(),
            pool_names: Vec::new(),
        };
        let err = check(&p, &plan(vec![0, 9], vec![(0, 19)])).unwrap_err();
        assert_eq!(
            err,
            "buffer 0 'x' (pool 0, steps 0..=2, bytes [0, 10)) overlaps buffer 1 'y' (pool 0, steps 2..=4, bytes [9, 19))"
        );
        // The same offsets are fine in different pools, or when the lifetimes are disjoint.
        let mut q = p.clone();
        q.buffers[1].pool = 1;
        check(&q, &plan(vec![0, 9], vec![(0, 10), (1, 19)])).unwrap();
        q.buffers[1] = Buffer::new(10, 1, 3, 4);
        check(&q, &plan(vec![0, 0], vec![(0, 10)])).unwrap();
    }

    #[test]
    fn rejects_overlap_with_lower_neighbour_and_equal_offsets() {
        let p = Problem::new(vec![Buffer::new(4, 1, 0, 0), Buffer::new(4, 1, 0, 0), Buffer::new(4, 1, 0, 0)]);
        assert!(check(&p, &plan(vec![0, 4, 8], vec![(0, 12)])).is_ok());
        let err = check(&p, &plan(vec![0, 4, 4], vec![(0, 12)])).unwrap_err();
        assert!(err.contains("buffer 1 ") && err.contains("buffer 2 "), "{err}");
        let err = check(&p, &plan(vec![0, 4, 6], vec![(0, 12)])).unwrap_err();
        assert!(err.contains("bytes [4, 8)) overlaps buffer 2"), "{err}");
    }

    #[test]
    fn rejects_structural_errors() {
        let p = Problem::new(vec![Buffer::new(8, 4, 0, 1), Buffer::new(8, 1, 0, 1).in_pool(3)]);
        let cases = [
            (plan(vec![0], vec![(0, 8), (3, 8)]), "1 offsets for 2 buffers"),
            (plan(vec![2, 0], vec![(0, 10), (3, 8)]), "misaligned: offset 2 is not a multiple of 4"),
            (plan(vec![0, 0], vec![(0, 8)]), "pool 3, which has no arena"),
            (plan(vec![0, 1], vec![(0, 8), (3, 8)]), "does not fit in the 8-byte arena of pool 3"),
            (plan(vec![0, u64::MAX], vec![(0, 8), (3, u64::MAX)]), "does not fit"),
            (plan(vec![0, 0], vec![(0, 8), (3, 8), (0, 8)]), "pool 0 more than once"),
        ];
        for (bad, needle) in cases {
            let err = check(&p, &bad).unwrap_err();
            assert!(err.contains(needle), "expected {needle:?} in {err:?}");
        }
        let bad_align = Problem::new(vec![Buffer::new(1, 0, 0, 0)]);
        assert!(check(&bad_align, &plan(vec![0], vec![(0, 1)])).unwrap_err().contains("alignment 0"));
        let bad_life = Problem::new(vec![Buffer::new(1, 1, 2, 0)]);
        assert!(check(&bad_life, &plan(vec![0], vec![(0, 1)])).unwrap_err().contains("empty lifetime"));
    }
}
