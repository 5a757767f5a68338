//! Plans that stay valid when sizes change: a **placement order**. Each buffer sits right
//! above the buffers before it in the order that are live with it (in its pool),
//! `offset(b) = max over such a of align_up(offset(a) + size(a), align(b))`. Whatever the
//! sizes, two buffers live together never overlap, so one order serves every value of a
//! program's symbols; the compiler evaluates it in bytecode at entry
//! (docs/symbolic-shapes.md).
//!
//! [`order_of`] reads the order out of a plan (buffers by offset); placing in that order at
//! the plan's own sizes never puts a buffer higher than the plan did, so the arena is at
//! most the plan's (a property test checks it).

use super::problem::{align_up, Plan, Problem};

/// The buffers of `plan` by offset (ties by index): the order [`place_in_order`] stacks.
pub fn order_of(plan: &Plan) -> Vec<usize> {
    let mut order: Vec<usize> = (0..plan.offsets.len()).collect();
    order.sort_by_key(|&i| (plan.offsets[i], i));
    order
}

/// Whether two buffers constrain each other: live at a common step in one pool, both with
/// bytes (a buffer of no bytes may sit anywhere).
pub fn conflict(p: &Problem, a: usize, b: usize) -> bool {
    let (x, y) = (&p.buffers[a], &p.buffers[b]);
    x.pool == y.pool && x.size > 0 && y.size > 0 && x.first <= y.last && y.first <= x.last
}

/// The plan that stacks `p`'s buffers in `order` (a permutation of its buffers); `Err` when
/// it is not one, or an offset overflows.
pub fn place_in_order(p: &Problem, order: &[usize]) -> Result<Plan, String> {
    place_in_order_with(p, order, p)
}

/// [`place_in_order`] with the pairs that constrain each other decided by `reference` (the
/// same buffers at other sizes): a symbolic program decides them once, at its bounds, and
/// places every call's sizes with them.
pub fn place_in_order_with(p: &Problem, order: &[usize], reference: &Problem) -> Result<Plan, String> {
    let n = p.buffers.len();
    if reference.buffers.len() != n {
        return Err("a reference problem has other buffers".into());
    }
    let mut seen = vec![false; n];
    if order.len() != n || order.iter().any(|&i| i >= n || std::mem::replace(&mut seen[i], true)) {
        return Err(format!("a placement order lists each of the {n} buffers once"));
    }
    let mut offsets = vec![0u64; n];
    for (k, &b) in order.iter().enumerate() {
        let mut off = 0u64;
        for &a in &order[..k] {
            if conflict(reference, a, b) {
                let top = offsets[a].checked_add(p.buffers[a].size).ok_or("a placement overflows")?;
                off = off.max(align_up(top, p.buffers[b].align));
            }
        }
        offsets[b] = off;
    }
    let mut pools: std::collections::BTreeMap<u32, u64> = Default::default();
    for (b, &off) in p.buffers.iter().zip(&offsets) {
        let top = pools.entry(b.pool).or_insert(0);
        *top = (*top).max(off.checked_add(b.size).ok_or("a placement overflows")?);
    }
    Ok(Plan { offsets, pool_sizes: pools.into_iter().collect(), strategy: "placement order" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{best_of, check, Buffer};
    use proptest::prelude::*;

    fn problem(spec: &[(u64, u64, u32, u32, u32)]) -> Problem {
        Problem {
            buffers: spec.iter().map(|&(s, a, f, l, pool)| Buffer::new(s, a, f, l.max(f)).in_pool(pool)).collect(),
            ..Problem::default()
        }
    }

    proptest! {
        /// Re-placing a plan's order at its own sizes is valid and puts no buffer higher;
        /// at other sizes (every size scaled and shifted) it is still valid.
        #[test]
        fn an_order_never_loses_to_its_plan_and_stays_valid(
            spec in prop::collection::vec((0u64..5000, prop::sample::select(vec![1u64, 4, 64, 128]), 0u32..20, 0u32..20, 0u32..2), 1..40),
            scale in 1u64..9,
            shift in 0u64..300,
        ) {
            let p = problem(&spec);
            let plan = best_of(&p).unwrap();
            let order = order_of(&plan);
            let again = place_in_order(&p, &order).unwrap();
            check(&p, &again).unwrap();
            for (new, old) in again.offsets.iter().zip(&plan.offsets) {
                prop_assert!(new <= old);
            }
            prop_assert!(again.arena_bytes() <= plan.arena_bytes());
            let mut q = p.clone();
            for b in &mut q.buffers {
                b.size = b.size * scale + shift * u64::from(b.size > 0);
            }
            check(&q, &place_in_order_with(&q, &order, &p).unwrap()).unwrap();
        }
    }

    /// A buffer of no bytes may share its offset with a live one (the plan puts it there):
    /// it constrains nothing, so the other is not pushed above it.
    #[test]
    fn buffers_of_no_bytes_constrain_nothing() {
        let p = problem(&[(1, 1, 0, 18, 1), (0, 1, 0, 0, 1)]);
        let plan = place_in_order(&p, &[1, 0]).unwrap();
        assert_eq!(plan.offsets, vec![0, 0]);
        let plan = place_in_order(&p, &[0, 1]).unwrap();
        assert_eq!((plan.offsets, plan.pool_sizes), (vec![0, 0], vec![(1, 1)]));
    }

    #[test]
    fn orders_must_be_permutations() {
        let p = problem(&[(8, 1, 0, 1, 0), (8, 1, 1, 2, 0)]);
        assert!(place_in_order(&p, &[0]).is_err());
        assert!(place_in_order(&p, &[0, 0]).is_err());
        assert!(place_in_order(&p, &[0, 2]).is_err());
        let plan = place_in_order(&p, &[1, 0]).unwrap();
        assert_eq!((plan.offsets, plan.pool_sizes), (vec![8, 0], vec![(0, 16)]));
    }
}
