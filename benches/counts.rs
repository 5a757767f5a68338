//! The benchmarks' workloads, run a given number of times without timing, for counting
//! instructions with callgrind: `scripts/callgrind-counts.sh` runs a workload N and 2N
//! times and divides the difference of the totals, so set-up and warm-up cancel out.
//! Callgrind counts do not move with the machine's load or the code's layout, which is
//! what comparing two builds needs (docs/performance.md).
//!
//! ```text
//! counts <workload> <iterations>   one warm-up, then <iterations> runs; prints what one is
//! counts --list                    the workloads and the iterations the script uses
//! counts --test                    each workload (one model) twice, results checked
//! ```
//!
//! Workloads are named as the criterion benchmarks they mirror (`triple/host/image`,
//! `model_overhead/resnet50`, ...). Run by `cargo bench` without a workload, it prints
//! a note and exits: it measures nothing by itself.

use rxvm::vm::{HostValue, Vm, VmError};
use std::hint::black_box;
use std::process::ExitCode;

mod common;
use common::{IADD, LOOP, N, NOP, TRIPLES};

/// A workload ready to run, its warm-up done.
struct Workload {
    /// What the counts are divided by: one VM instruction, triple, invocation or inference.
    unit: &'static str,
    units_per_run: u64,
    /// VM instructions one run executes.
    instructions_per_run: u64,
    /// Runs the workload the given number of times: the loop is inside, monomorphic, so
    /// the counts carry no indirect call per run.
    run: Box<dyn FnMut(u64) -> Result<(), String>>,
}

/// Runs `run` once to warm up (pools, view caches, memo checks), checks that run's
/// results and counts its instructions. Later runs do what criterion's loop does: run,
/// require success, drop the results.
fn prepare<R: 'static>(
    mut vm: Vm,
    unit: &'static str,
    // `None`: per VM instruction.
    units_per_run: Option<u64>,
    mut run: impl FnMut(&mut Vm) -> Result<R, VmError> + 'static,
    check: impl FnOnce(R) -> Result<(), String>,
) -> Result<Workload, String> {
    let before = vm.stats().instructions;
    check(run(&mut vm).map_err(|e| e.to_string())?)?;
    let instructions_per_run = vm.stats().instructions - before;
    Ok(Workload {
        unit,
        units_per_run: units_per_run.unwrap_or(instructions_per_run),
        instructions_per_run,
        run: Box::new(move |runs| {
            for _ in 0..runs {
                black_box(run(&mut vm).map_err(|e| e.to_string())?);
            }
            Ok(())
        }),
    })
}

fn invoke_main(vm: &mut Vm) -> Result<Vec<HostValue>, VmError> {
    vm.invoke("main", &[])
}

/// A check that the results are exactly `expected`.
fn returns(expected: Vec<HostValue>) -> impl FnOnce(Vec<HostValue>) -> Result<(), String> {
    move |got| match got == expected {
        true => Ok(()),
        false => Err(format!("@main returned {got:?}, expected {expected:?}")),
    }
}

fn host(module: std::sync::Arc<rxvm::vm::Module>) -> Result<Vm, String> {
    Vm::host(module).map_err(|e| e.to_string())
}

/// The workload called `name`.
fn workload(name: &str) -> Result<Workload, String> {
    let parts: Vec<&str> = name.split('/').collect();
    match parts[..] {
        ["straight", "nop"] => {
            let vm = host(common::straight(NOP, "()"))?;
            prepare(vm, "instruction", None, invoke_main, returns(vec![]))
        }
        ["straight", "iadd"] => {
            let vm = host(common::straight(IADD, "int"))?;
            prepare(vm, "instruction", None, invoke_main, returns(vec![HostValue::Int(N as i64)]))
        }
        ["loop", "iadd_ilt_br_if"] => {
            let n = [HostValue::Int(N as i64)];
            let vm = host(common::module(LOOP))?;
            let expected = returns(n.to_vec());
            prepare(vm, "instruction", None, move |vm| vm.invoke("main", &n), expected)
        }
        ["triple", dev, kind] => {
            let Some((_, view)) = common::VIEWS.iter().find(|(k, _)| *k == kind) else {
                return Err(format!("no view kind `{kind}`: buffer or image"));
            };
            let spec = common::devices("counts")
                .into_iter()
                .find(|(d, _)| *d == dev)
                .map(|(_, spec)| spec)
                .ok_or_else(|| format!("no device `{dev}` here: host, or intel with its runtime"))?;
            let vm = Vm::with_devices(common::triples(view), vec![spec]).map_err(|e| e.to_string())?;
            prepare(vm, "triple", Some(TRIPLES as u64), invoke_main, returns(vec![]))
        }
        ["empty_invocation", how] => {
            let module = common::module(common::EMPTY);
            let id = module.func_by_name("main").ok_or("no @main")?;
            let vm = host(module)?;
            match how {
                "by_id" => prepare(
                    vm,
                    "invocation",
                    Some(1),
                    move |vm| vm.invoke_values(id, Vec::new()),
                    |got| if got.is_empty() { Ok(()) } else { Err(format!("@main returned {} values", got.len())) },
                ),
                "by_name" => prepare(vm, "invocation", Some(1), invoke_main, returns(vec![])),
                _ => Err(format!("no invocation `{how}`: by_id or by_name")),
            }
        }
        ["model_overhead", model] => {
            if !common::MODELS.contains(&model) {
                return Err(format!("no model `{model}`: one of {}", common::MODELS.join(", ")));
            }
            let dir = common::light_dir("counts").ok_or("the models are missing")?;
            let mut model = common::NoopModel::new(&dir, model);
            Ok(Workload {
                unit: "inference",
                units_per_run: 1,
                instructions_per_run: model.instructions,
                run: Box::new(move |runs| {
                    for _ in 0..runs {
                        black_box(model.infer());
                    }
                    Ok(())
                }),
            })
        }
        ["assembler", what] => assembler(what),
        _ => Err(format!("no workload `{name}` (`counts --list` lists them)")),
    }
}

/// The assembler benchmark's workloads, on the same ~10 MB program: per byte of `.rxa`
/// text (assemble), of text produced (disassemble) or of `.rxb` (load and verify).
fn assembler(what: &str) -> Result<Workload, String> {
    use rxvm::asm::{assemble, disassemble};
    use rxvm::vm::{load_module, write_module};
    let text = common::rxa::program(common::rxa::BENCH_BYTES);
    let module = assemble(&text, "bench.rxa").map_err(|d| d.render())?;
    let per_byte = |bytes: usize, mut run: Box<dyn FnMut() -> Result<(), String>>| {
        run()?;
        Ok(Workload {
            unit: "byte",
            units_per_run: bytes as u64,
            instructions_per_run: 0,
            run: Box::new(move |runs| (0..runs).try_for_each(|_| run())),
        })
    };
    match what {
        "assemble" => per_byte(
            text.len(),
            Box::new(move || assemble(black_box(&text), "bench.rxa").map(drop).map_err(|d| d.render())),
        ),
        "disassemble" => {
            let bytes = disassemble(&module).len();
            per_byte(
                bytes,
                Box::new(move || {
                    black_box(disassemble(black_box(&module)));
                    Ok(())
                }),
            )
        }
        "load_verify" => {
            let rxb = write_module(&module);
            per_byte(rxb.len(), Box::new(move || load_module(black_box(&rxb)).map(drop).map_err(|e| e.to_string())))
        }
        _ => Err(format!("no assembler workload `{what}`: assemble, disassemble or load_verify")),
    }
}

/// Every workload with the iterations `scripts/callgrind-counts.sh` runs by default:
/// enough that a run's counts dwarf the difference between two set-ups.
fn workloads() -> Vec<(String, u32)> {
    let mut all: Vec<(String, u32)> =
        ["straight/nop", "straight/iadd", "loop/iadd_ilt_br_if"].iter().map(|w| (w.to_string(), 100)).collect();
    for dev in ["host", "intel"] {
        for (kind, _) in common::VIEWS {
            all.push((format!("triple/{dev}/{kind}"), 100));
        }
    }
    all.push(("empty_invocation/by_id".into(), 100_000));
    all.push(("empty_invocation/by_name".into(), 100_000));
    all.extend(common::MODELS.iter().map(|m| (format!("model_overhead/{m}"), 1_000)));
    // ~10 MB a run: one is plenty.
    all.extend(["assemble", "disassemble", "load_verify"].iter().map(|w| (format!("assembler/{w}"), 1)));
    all
}

/// The runs callgrind counts: `scripts/callgrind-counts.sh` collects only inside this
/// function (`--toggle-collect`), so the set-up (reading and compiling a model, whose hash
/// maps make its count vary from run to run) stays out of the counts.
#[inline(never)]
fn measured_runs(w: &mut Workload, iterations: u64) -> Result<(), String> {
    (w.run)(iterations)
}

fn run(name: &str, iterations: u64) -> Result<(), String> {
    let mut w = workload(name)?;
    measured_runs(&mut w, iterations)?;
    println!(
        "workload={name} unit={} units_per_run={} instructions_per_run={} runs={iterations}",
        w.unit, w.units_per_run, w.instructions_per_run
    );
    Ok(())
}

/// `cargo bench -- --test`: every workload runs and checks its results; the models are
/// represented by the smallest, `model_overhead` runs all nine.
fn smoke_test() -> Result<(), String> {
    let intel = rxvm::vm::opencl::find_device("intel").is_ok();
    for (name, _) in workloads() {
        let skip = (name.contains("/intel/") && !intel)
            || (name.starts_with("model_overhead/") && name != "model_overhead/squeezenet")
            || (name.starts_with("model_overhead/") && common::light_dir("counts").is_none());
        if !skip {
            run(&name, 2).map_err(|e| format!("{name}: {e}"))?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["--list"] => {
            for (name, iterations) in workloads() {
                println!("{name} {iterations}");
            }
            Ok(())
        }
        [name, iterations] if !name.starts_with('-') => match iterations.parse::<u64>() {
            Ok(n) => run(name, n),
            Err(e) => Err(format!("iterations `{iterations}`: {e}")),
        },
        ref flags if flags.contains(&"--test") => smoke_test(),
        ref flags if flags.iter().all(|f| f.starts_with('-')) => {
            eprintln!("counts: measures nothing by itself; scripts/callgrind-counts.sh runs it under callgrind");
            Ok(())
        }
        _ => Err("usage: counts <workload> <iterations> | --list | --test".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("counts: {e}");
            ExitCode::FAILURE
        }
    }
}
