//! Memory planner benchmarks: `cargo bench --bench planner` (a few minutes; `-- <filter>` for a part).
//!
//! * `minimalloc_fit/<A..K>`: the exact search answering MiniMalloc's question on its 11
//!   challenging instances, "do they fit in 1,048,576 bytes?" (they all do);
//! * `glow_plan_exact/<model>`: heuristics plus exact search on Glow models, two that need a
//!   search (resnet*_v2) and two that the heuristics already solve optimally;
//! * `greedy_by_size/<n>`: the main heuristic on synthetic schedules of 10^4, 10^5 and 10^6
//!   buffers; with `Throughput::Elements` the per-buffer time shows the `n log n` growth.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rxvm::plan::exact::{fit, plan_exact, FitOutcome, DEFAULT_BUDGET};
use rxvm::plan::trace::{parse_glow_models, parse_minimalloc_csv};
use rxvm::plan::{greedy_by_size, Buffer, Problem};

const MINIMALLOC_CAPACITY: u64 = 1_048_576;

fn data(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

fn minimalloc_fit(c: &mut Criterion) {
    let mut group = c.benchmark_group("minimalloc_fit");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    for name in ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K"] {
        let problem = parse_minimalloc_csv(&data(&format!("minimalloc/{name}.{MINIMALLOC_CAPACITY}.csv")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        group.bench_function(name, |b| {
            b.iter(|| {
                let outcome = fit(&problem, MINIMALLOC_CAPACITY, DEFAULT_BUDGET).expect("valid instance");
                assert!(matches!(outcome, FitOutcome::Fits(_)), "{name} must fit");
                outcome
            })
        });
    }
    group.finish();
}

fn glow_plan_exact(c: &mut Criterion) {
    let models = parse_glow_models(&data("glow/MemoryAllocatorTestModels.txt")).expect("the trace file parses");
    let mut group = c.benchmark_group("glow_plan_exact");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    for name in ["resnet50_v2.onnx", "resnet152_v2.onnx", "inception_v4.onnx", "kws.onnx"] {
        let model = models.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("{name} is in the trace"));
        group.bench_function(name, |b| b.iter(|| plan_exact(&model.problem, DEFAULT_BUDGET).expect("valid model")));
    }
    group.finish();
}

fn heuristic_scaling(c: &mut Criterion) {
    let mut group = c.benchmark_group("greedy_by_size");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    for n in [10_000, 100_000, 1_000_000] {
        // Built on first use, so that a filtered run (`-- greedy_by_size/1000000`) only holds the
        // problem it measures: its peak RSS is then the planner's memory plus that problem's.
        let problem = OnceLock::new();
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            let p = problem.get_or_init(|| schedule(n, 0x9e37_79b9));
            b.iter(|| greedy_by_size(p).expect("valid problem"))
        });
    }
    group.finish();
}

/// A deterministic schedule-shaped problem of `n` buffers: two start per three steps, most die
/// within a few steps (activations), some after tens of steps (skip connections) and a few after
/// thousands (buffers kept for the backward half of a network); sizes from 64 B to 4 MiB,
/// alignments 1, 64 or 256.
fn schedule(n: usize, seed: u64) -> Problem {
    let mut state = seed;
    // SplitMix64: tiny, and good enough to spread the choices.
    let mut next = move |bound: u64| {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % bound
    };
    let buffers = (0..n)
        .map(|i| {
            let first = (i as u64 * 2 / 3) as u32;
            let span = match next(100) {
                0..=79 => 1 + next(4),
                80..=96 => 5 + next(50),
                _ => 100 + next(3_000),
            };
            let size = 64 << next(17);
            let align = [1, 64, 256][next(3) as usize];
            Buffer::new(size, align, first, first + span as u32)
        })
        .collect();
    Problem::new(buffers)
}

criterion_group!(benches, minimalloc_fit, glow_plan_exact, heuristic_scaling);
criterion_main!(benches);
