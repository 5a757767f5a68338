//! The memory planner on public benchmark inputs: Glow's allocator traces of 79 real models and
//! MiniMalloc's 11 challenging instances (tests/data/, see the README files there).

use std::path::Path;
use std::time::Instant;

use rxvm::plan::exact::{fit, plan_exact, FitOutcome, DEFAULT_BUDGET};
use rxvm::plan::trace::{parse_glow_models, parse_minimalloc_csv, GlowModel};
use rxvm::plan::{best_of, check, lower_bound, Plan, Problem, STRATEGIES};

/// The capacity every MiniMalloc instance is known to fit in (the file names say so).
const MINIMALLOC_CAPACITY: u64 = 1_048_576;
const MINIMALLOC_NAMES: [&str; 11] = ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K"];

fn data(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

fn glow_models() -> Vec<GlowModel> {
    let models = parse_glow_models(&data("glow/MemoryAllocatorTestModels.txt")).expect("the trace file parses");
    assert_eq!(models.len(), 79);
    models
}

fn minimalloc(name: &str) -> Problem {
    let file = format!("minimalloc/{name}.{MINIMALLOC_CAPACITY}.csv");
    parse_minimalloc_csv(&data(&file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn glow_models_plan_at_or_below_glow() {
    let models = glow_models();
    let mut at_bound = 0;
    let mut within_mem = 0;
    let mut wins = vec![0usize; STRATEGIES.len()];
    for m in &models {
        let plan = best_of(&m.problem).unwrap_or_else(|e| panic!("{}: {e}", m.name));
        check(&m.problem, &plan).unwrap_or_else(|e| panic!("{}: {e}", m.name));
        let bound = lower_bound(&m.problem);
        let arena = plan.arena_bytes();
        assert!(arena >= bound, "{}: arena {arena} below the lower bound {bound}", m.name);
        let mem = m.expected_mem.unwrap_or_else(|| panic!("{}: no MEM line", m.name));
        at_bound += usize::from(arena == bound);
        within_mem += usize::from(arena <= mem);
        if let Some(k) = STRATEGIES.iter().position(|(name, _)| *name == plan.strategy) {
            wins[k] += 1;
        }
        if arena > bound {
            let all: Vec<String> = STRATEGIES
                .iter()
                .map(|(name, run)| format!("{name} {}", run(&m.problem).map(|p| p.arena_bytes()).unwrap_or(0)))
                .collect();
            println!("{}: arena {arena}, lower bound {bound}, Glow {mem}; {}", m.name, all.join(", "));
        }
    }
    let wins: Vec<String> = STRATEGIES.iter().zip(&wins).map(|((name, _), n)| format!("{name} {n}")).collect();
    println!(
        "glow: {} models, {at_bound} at the lower bound, {within_mem} at or below Glow's MEM; wins: {}",
        models.len(),
        wins.join(", ")
    );
    // Measured: all 79 at or below MEM, 75 at the bound. Of the other four, kws.onnx misses it by
    // alignment padding (the bound ignores alignment) and the three resnet*_v2.onnx models end at
    // Glow's own MEM (Glow's EFF 0.9 for them).
    assert!(within_mem >= 79, "only {within_mem} of 79 models at or below Glow's MEM");
    assert!(at_bound >= 75, "only {at_bound} of 79 models at the lower bound");
}

#[test]
fn minimalloc_instances_plan_validly() {
    for name in MINIMALLOC_NAMES {
        let problem = minimalloc(name);
        let plan = best_of(&problem).unwrap_or_else(|e| panic!("{name}: {e}"));
        check(&problem, &plan).unwrap_or_else(|e| panic!("{name}: {e}"));
        let bound = lower_bound(&problem);
        assert!(plan.arena_bytes() >= bound, "{name}: arena below the lower bound");
        let per_strategy: Vec<String> = STRATEGIES
            .iter()
            .map(|(strategy, run)| {
                let arena = run(&problem).map(|p| p.arena_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
                format!("{strategy} {:.3}", arena as f64 / 1048576.0)
            })
            .collect();
        println!(
            "minimalloc {name}: {} buffers, arena / 1048576 = {:.3} ({}), lower bound / 1048576 = {:.3}; {}",
            problem.buffers.len(),
            plan.arena_bytes() as f64 / 1048576.0,
            plan.strategy,
            bound as f64 / 1048576.0,
            per_strategy.join(", ")
        );
    }
}

/// The exact search on every Glow model: all 79 at or below Glow's `MEM`, 78 at the lower bound,
/// and all 79 proved optimal.
#[test]
fn glow_models_exact() {
    let mut at_bound = 0;
    let mut proved = 0;
    let mut searched = 0;
    for m in &glow_models() {
        let result = plan_exact(&m.problem, DEFAULT_BUDGET).unwrap_or_else(|e| panic!("{}: {e}", m.name));
        check(&m.problem, &result.plan).unwrap_or_else(|e| panic!("{}: {e}", m.name));
        let [outcome] = result.pools[..] else { panic!("{}: one pool expected", m.name) };
        let arena = result.plan.arena_bytes();
        let bound = lower_bound(&m.problem);
        let mem = m.expected_mem.unwrap_or_else(|| panic!("{}: no MEM line", m.name));
        assert!(arena <= mem, "{}: arena {arena} above Glow's {mem}", m.name);
        assert!(arena >= outcome.lower_bound && outcome.lower_bound >= bound, "{}", m.name);
        at_bound += usize::from(arena == bound);
        proved += usize::from(outcome.proved_optimal);
        searched += usize::from(outcome.nodes > 0);
        if arena > bound {
            // kws.onnx: at its peak only two buffers are live, 71,760 and 276,000 bytes, both at
            // multiples of 64, so the lower one is padded to a multiple of 64: 276,032 + 71,760 =
            // 347,792 is the least possible arena, 32 bytes above the peak of 347,760. The plan
            // reaches this alignment-aware bound, which proves it optimal without a search.
            assert_eq!((m.name.as_str(), bound, arena, outcome.lower_bound), ("kws.onnx", 347_760, 347_792, 347_792));
        }
        if outcome.nodes > 0 {
            println!("{}: {arena} (lower bound {bound}, Glow {mem}) after {} nodes", m.name, outcome.nodes);
        }
    }
    println!("glow exact: {at_bound} of 79 at the lower bound, {proved} proved optimal, {searched} needed a search");
    // Measured: 78 at the bound (the heuristics' 75 plus resnet50/101/152_v2, whose search takes
    // 75-211 nodes), kws.onnx at the alignment-aware bound, so all 79 proved optimal.
    assert!(at_bound >= 78, "only {at_bound} of 79 models at the lower bound");
    assert_eq!(proved, 79);
}

/// MiniMalloc's question on its 11 challenging instances: every one fits in 1,048,576 bytes, where
/// the heuristics need 1.17-1.35 times that.
#[test]
fn minimalloc_instances_fit_exactly() {
    for name in MINIMALLOC_NAMES {
        let problem = minimalloc(name);
        let start = Instant::now();
        let outcome = fit(&problem, MINIMALLOC_CAPACITY, DEFAULT_BUDGET).unwrap_or_else(|e| panic!("{name}: {e}"));
        let FitOutcome::Fits(offsets) = outcome else { panic!("{name}: {outcome:?} at {MINIMALLOC_CAPACITY}") };
        let plan = Plan { offsets, pool_sizes: vec![(0, MINIMALLOC_CAPACITY)], strategy: "fit" };
        check(&problem, &plan).unwrap_or_else(|e| panic!("{name}: {e}"));
        println!("minimalloc {name}: fits in {MINIMALLOC_CAPACITY} ({:?})", start.elapsed());
    }
}

/// The minimisation on the MiniMalloc instances, for docs/performance.md:
/// `cargo test --release --test plan_traces minimalloc_exact_report -- --ignored --nocapture`.
#[test]
#[ignore = "report for release builds (takes about 10 s)"]
fn minimalloc_exact_report() {
    for name in MINIMALLOC_NAMES {
        let problem = minimalloc(name);
        let start = Instant::now();
        let result = plan_exact(&problem, DEFAULT_BUDGET).unwrap_or_else(|e| panic!("{name}: {e}"));
        check(&problem, &result.plan).unwrap_or_else(|e| panic!("{name}: {e}"));
        let outcome = result.pools[0];
        println!(
            "minimalloc {name}: arena / capacity {:.4}, lower bound / capacity {:.4}, proved optimal {}, {} nodes, {:?}",
            outcome.arena as f64 / MINIMALLOC_CAPACITY as f64,
            outcome.lower_bound as f64 / MINIMALLOC_CAPACITY as f64,
            outcome.proved_optimal,
            outcome.nodes,
            start.elapsed()
        );
    }
}
