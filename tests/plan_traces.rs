//! The memory planner on public benchmark inputs: Glow's allocator traces of 79 real models and
//! MiniMalloc's 11 challenging instances (tests/data/, see the README files there).

use std::path::Path;

use rxvm::plan::trace::{parse_glow_models, parse_minimalloc_csv};
use rxvm::plan::{best_of, check, lower_bound, STRATEGIES};

fn data(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

#[test]
fn glow_models_plan_at_or_below_glow() {
    let models = parse_glow_models(&data("glow/MemoryAllocatorTestModels.txt")).expect("the trace file parses");
    assert_eq!(models.len(), 79);
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
    for name in ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K"] {
        let file = format!("minimalloc/{name}.1048576.csv");
        let problem = parse_minimalloc_csv(&data(&file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let plan = best_of(&problem).unwrap_or_else(|e| panic!("{file}: {e}"));
        check(&problem, &plan).unwrap_or_else(|e| panic!("{file}: {e}"));
        let bound = lower_bound(&problem);
        assert!(plan.arena_bytes() >= bound, "{file}: arena below the lower bound");
        let per_strategy: Vec<String> = STRATEGIES
            .iter()
            .map(|(strategy, run)| {
                let arena = run(&problem).map(|p| p.arena_bytes()).unwrap_or_else(|e| panic!("{file}: {e}"));
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
