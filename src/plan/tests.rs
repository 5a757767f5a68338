//! Property tests for the planner (every strategy's output passes the independent checker; the
//! checker and the lower bound agree with brute force) and a scale test.

use proptest::prelude::*;

use super::check::check;
use super::heuristics::{best_of, greedy_by_size, STRATEGIES};
use super::problem::{lower_bound, lower_bound_per_pool, Buffer, Plan, Problem};

fn arb_buffer(pools: u32) -> impl Strategy<Value = Buffer> {
    (
        prop_oneof![Just(0u64), 1u64..=64, 1u64..=100_000],
        prop::sample::select(vec![1u64, 1, 1, 2, 3, 4, 8, 16, 64, 100, 4096]),
        0u32..60,
        prop_oneof![0u32..3, 0u32..25],
        0..pools,
    )
        .prop_map(|(size, align, first, len, pool)| Buffer { size, align, first, last: first + len, pool })
}

fn arb_problem() -> impl Strategy<Value = Problem> {
    (1u32..=3, 0usize..=200, any::<bool>()).prop_flat_map(|(pools, n, named)| {
        prop::collection::vec(arb_buffer(pools), n).prop_map(move |buffers| {
            let names = if named { (0..buffers.len()).map(|i| format!("t{i}")).collect() } else { Vec::new() };
            Problem { buffers, names, kinds: Vec::new(), pool_names: Vec::new() }
        })
    })
}

/// Brute-force validity: alignment, arena bounds and pairwise overlap.
fn brute_valid(p: &Problem, plan: &Plan) -> bool {
    let bufs = &p.buffers;
    bufs.iter().zip(&plan.offsets).all(|(b, &o)| {
        o.is_multiple_of(b.align)
            && plan.pool_size(b.pool).is_some_and(|arena| u128::from(o) + u128::from(b.size) <= u128::from(arena))
    }) && (0..bufs.len()).all(|i| {
        (i + 1..bufs.len()).all(|j| {
            let (a, b) = (&bufs[i], &bufs[j]);
            let disjoint_bytes = a.size == 0
                || b.size == 0
                || plan.offsets[i] + a.size <= plan.offsets[j]
                || plan.offsets[j] + b.size <= plan.offsets[i];
            a.pool != b.pool || !a.lives_with(b) || disjoint_bytes
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn plan_strategies_produce_valid_plans(p in arb_problem()) {
        let bound = lower_bound(&p);
        let per_pool = lower_bound_per_pool(&p);
        for (name, strategy) in STRATEGIES {
            let plan = strategy(&p).map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?;
            prop_assert_eq!(plan.strategy, name);
            if let Err(e) = check(&p, &plan) {
                return Err(TestCaseError::fail(format!("{name}: {e}")));
            }
            prop_assert!(plan.arena_bytes() >= bound, "{}: {} < {}", name, plan.arena_bytes(), bound);
            prop_assert_eq!(plan.pool_sizes.len(), per_pool.len());
            for (&(pool, arena), &(bound_pool, pool_bound)) in plan.pool_sizes.iter().zip(&per_pool) {
                prop_assert_eq!(pool, bound_pool);
                prop_assert!(arena >= pool_bound, "{}: pool {} arena {} < {}", name, pool, arena, pool_bound);
            }
            // Deterministic.
            prop_assert_eq!(&strategy(&p).unwrap(), &plan);
        }
        let best = best_of(&p).unwrap();
        check(&p, &best).map_err(TestCaseError::fail)?;
        let min = STRATEGIES.iter().map(|(_, s)| s(&p).unwrap().arena_bytes()).min().unwrap();
        prop_assert_eq!(best.arena_bytes(), min);
    }

    #[test]
    fn plan_lower_bound_is_the_peak_of_live_bytes(p in arb_problem()) {
        let mut expected = 0u64;
        for pool in p.pools() {
            let peak = (0..=90u32)
                .map(|t| {
                    let live = p.buffers.iter().filter(|b| b.pool == pool && b.first <= t && t <= b.last);
                    live.map(|b| b.size).sum::<u64>()
                })
                .max()
                .unwrap_or(0);
            expected += peak;
        }
        prop_assert_eq!(lower_bound(&p), expected);
    }

    #[test]
    fn plan_checker_agrees_with_brute_force(
        p in arb_problem(),
        slots in prop::collection::vec(0u64..6, 200),
        shrink in any::<bool>(),
    ) {
        // Offsets on small multiples of each alignment make overlaps common.
        let offsets: Vec<u64> = p.buffers.iter().zip(&slots).map(|(b, &k)| k * b.align.min(64)).collect();
        let mut pool_sizes: Vec<(u32, u64)> = p.pools().into_iter().map(|pool| {
            let top = p.buffers.iter().zip(&offsets).filter(|(b, _)| b.pool == pool).map(|(b, &o)| o + b.size).max();
            (pool, top.unwrap_or(0))
        }).collect();
        if shrink {
            if let Some(first) = pool_sizes.first_mut() {
                first.1 = first.1.saturating_sub(1);
            }
        }
        let plan = Plan { offsets, pool_sizes, strategy: "random" };
        prop_assert_eq!(check(&p, &plan).is_ok(), brute_valid(&p, &plan), "{:?}", check(&p, &plan));
    }

    #[test]
    fn plan_checker_rejects_corrupted_plans(p in arb_problem(), pick in any::<prop::sample::Index>()) {
        let plan = greedy_by_size(&p).unwrap();
        check(&p, &plan).map_err(TestCaseError::fail)?;
        let bufs = &p.buffers;
        // Move one buffer onto another that shares a step and a pool: rejected as an overlap
        // (or, if the new offset breaks its alignment, as misaligned).
        let pairs: Vec<(usize, usize)> = (0..bufs.len())
            .flat_map(|i| (0..bufs.len()).map(move |j| (i, j)))
            .filter(|&(i, j)| {
                let (a, b) = (&bufs[i], &bufs[j]);
                i != j && a.size > 0 && b.size > 0 && a.pool == b.pool && a.lives_with(b)
            })
            .collect();
        if !pairs.is_empty() {
            let (i, j) = pairs[pick.index(pairs.len())];
            let mut bad = plan.clone();
            bad.offsets[j] = bad.offsets[i];
            // Room for the moved buffer, so that only the overlap or the alignment can fail.
            for entry in &mut bad.pool_sizes {
                entry.1 = entry.1.saturating_add(bufs[j].size);
            }
            let err = check(&p, &bad).expect_err("overlap must be rejected");
            let aligned = bad.offsets[j].is_multiple_of(bufs[j].align);
            prop_assert!(err.contains(if aligned { "overlaps" } else { "misaligned" }), "{}", err);
            // Any overlap involves the moved buffer, since the plan was valid before.
            prop_assert!(err.contains(&format!("buffer {j} ")), "{}", err);
        }
        // Misalign one buffer that needs alignment.
        let aligned: Vec<usize> = (0..bufs.len()).filter(|&i| bufs[i].align > 1).collect();
        if !aligned.is_empty() {
            let i = aligned[pick.index(aligned.len())];
            let mut bad = plan.clone();
            bad.offsets[i] += 1;
            for entry in &mut bad.pool_sizes {
                entry.1 = entry.1.saturating_add(1);
            }
            let err = check(&p, &bad).expect_err("misalignment must be rejected");
            prop_assert!(err.contains("misaligned"), "{}", err);
        }
        // Shrink the arena of a pool below its highest buffer.
        if let Some(k) = plan.pool_sizes.iter().position(|&(_, size)| size > 0) {
            let mut bad = plan.clone();
            bad.pool_sizes[k].1 -= 1;
            let err = check(&p, &bad).expect_err("arena overflow must be rejected");
            prop_assert!(err.contains("does not fit"), "{}", err);
        }
    }
}

/// Deterministic schedule-like problem: about 1.5 buffers start per step; most die within a few
/// steps, some live for tens of steps and a few for thousands (skip connections, weights).
fn synthetic(n: usize, seed: u64) -> Problem {
    let mut state = seed | 1;
    let mut next = move |m: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % m
    };
    let buffers = (0..n)
        .map(|i| {
            let first = (i as u64 * 2 / 3) as u32;
            let len = match next(100) {
                0..=84 => 1 + next(4),
                85..=97 => 5 + next(60),
                _ => 65 + next(2000),
            } as u32;
            let size = (1 + next(4)) << (6 + next(15));
            let align = [1, 64, 256][next(3) as usize];
            Buffer::new(size, align, first, first + len)
        })
        .collect();
    Problem::new(buffers)
}

#[test]
fn plan_scale_hundred_thousand() {
    let p = synthetic(100_000, 0x5eed);
    let start = std::time::Instant::now();
    let plan = greedy_by_size(&p).unwrap();
    let elapsed = start.elapsed();
    check(&p, &plan).unwrap();
    let bound = lower_bound(&p);
    assert!(plan.arena_bytes() >= bound);
    println!(
        "greedy_by_size on {} buffers: {:?}, arena / lower bound = {:.3}",
        p.buffers.len(),
        elapsed,
        plan.arena_bytes() as f64 / bound as f64
    );
}

/// Timing at 10^6 buffers for every strategy; run with
/// `cargo test --release -p rxvm --lib plan_scale_million -- --ignored --nocapture`.
#[test]
#[ignore = "timing run for release builds"]
fn plan_scale_million() {
    let p = synthetic(1_000_000, 0x5eed);
    let bound = lower_bound(&p);
    for (name, strategy) in STRATEGIES {
        let start = std::time::Instant::now();
        let plan = strategy(&p).unwrap();
        let elapsed = start.elapsed();
        let checked = std::time::Instant::now();
        check(&p, &plan).unwrap();
        println!(
            "{name} on {} buffers: {:?} (check {:?}), arena / lower bound = {:.3}",
            p.buffers.len(),
            elapsed,
            checked.elapsed(),
            plan.arena_bytes() as f64 / bound as f64
        );
    }
}
