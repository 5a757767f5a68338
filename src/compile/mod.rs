//! The compiler: a model graph (from ONNX or built by a frontend through [`crate::graph`])
//! to a VM module whose memory instructions come from a memory plan.
//!
//! ```text
//! Graph ──analyze──▶ types + folded constants ──liveness──▶ tensors, buffers, lifetimes
//!       ──plan──▶ offsets in arenas ──lower──▶ Module (alloc_storage / alloc_tensor / call / kill / ret)
//! ```
//!
//! Each stage is a module with its own tests: [`crate::graph::analyze`], [`liveness`],
//! [`crate::plan`] and [`lower`]. `docs/compiler.md` describes them.

pub mod liveness;
pub mod lower;

use crate::graph::{analyze, Graph};
use crate::plan::{self, Buffer, Plan, Problem};
use rxvm_vm::Module;
use std::fmt::Write;

/// How tensors get memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Planner {
    /// Every buffer its own storage: the no-reuse baseline.
    None,
    /// All buffers in one arena, best of every strategy.
    Best,
    /// One arena, one strategy.
    Strategy(&'static str),
}

impl Planner {
    /// `none`, `best`, or a strategy name of [`plan::STRATEGIES`].
    pub fn from_name(s: &str) -> Result<Planner, String> {
        match s {
            "none" => Ok(Planner::None),
            "best" => Ok(Planner::Best),
            _ => match plan::STRATEGIES.iter().find(|st| st.0 == s) {
                Some(st) => Ok(Planner::Strategy(st.0)),
                None => {
                    let mut names = vec!["none", "best"];
                    names.extend(plan::STRATEGIES.iter().map(|s| s.0));
                    Err(format!("unknown planner `{s}`; the planners are: {}", names.join(", ")))
                }
            },
        }
    }
}

/// Compiler options.
#[derive(Clone, Debug)]
pub struct Options {
    pub planner: Planner,
    /// Offset alignment of every tensor in an arena (bytes): the target's
    /// `CL_DEVICE_MEM_BASE_ADDR_ALIGN`, so any tensor can become a sub-buffer.
    pub align: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options { planner: Planner::Best, align: 128 }
    }
}

/// What the memory plan achieved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanReport {
    /// Bytes of all arenas (the storages the program allocates for its tensors).
    pub arena_bytes: u64,
    /// Peak of bytes live at one step: no plan of this schedule can use less.
    pub lower_bound: u64,
    /// Every buffer its own storage (each rounded up to the alignment).
    pub naive_bytes: u64,
    /// The planner or strategy that produced the plan.
    pub strategy: String,
    /// Computed tensors, and the buffers they live in (views share one).
    pub tensors: usize,
    pub buffers: usize,
}

/// A compiled graph: the module, its plan and a readable listing of the plan.
pub struct Compiled {
    pub module: Module,
    pub report: PlanReport,
    /// One comment line per tensor: name, type, bytes, arena offset and lifetime.
    pub plan_comment: String,
}

/// Compiles `g` for concrete input shapes (in the order of `g.inputs`).
pub fn compile(g: &Graph, input_shapes: &[Vec<i64>], opts: &Options) -> Result<Compiled, String> {
    let a = analyze(g, input_shapes)?;
    let live = liveness::liveness(g, &a)?;
    let align = opts.align.max(1);
    let buffers: Vec<Buffer> = live
        .buffers
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let pool = if opts.planner == Planner::None { i as u32 } else { 0 };
            Buffer::new(b.bytes, align, b.first, b.last).in_pool(pool)
        })
        .collect();
    let names = live.buffers.iter().map(|b| live.tensors[b.tensor].name.clone()).collect();
    let problem = Problem { buffers, names };
    let plan: Plan = match opts.planner {
        Planner::None => {
            let mut p = plan::first_fit_in_order(&problem)?;
            p.strategy = "none";
            p
        }
        Planner::Best => plan::best_of(&problem)?,
        Planner::Strategy(name) => {
            let st = plan::STRATEGIES.iter().find(|s| s.0 == name).ok_or("unknown strategy")?;
            (st.1)(&problem)?
        }
    };
    plan::check(&problem, &plan).map_err(|e| format!("internal: the memory plan is invalid: {e}"))?;
    let module = lower::lower(g, &a, &live, &problem, &plan)?;
    let report = PlanReport {
        arena_bytes: plan.arena_bytes(),
        lower_bound: plan::lower_bound(&problem),
        naive_bytes: plan::naive_bytes(&problem),
        strategy: plan.strategy.to_string(),
        tensors: live.tensors.len(),
        buffers: live.buffers.len(),
    };
    let mut c = format!(
        "; memory plan ({}): {} arena bytes, lower bound {}, no-reuse {}; steps 0..{}\n",
        report.strategy, report.arena_bytes, report.lower_bound, report.naive_bytes, live.steps
    );
    for t in &live.tensors {
        let b = &problem.buffers[t.buffer];
        let pool = if opts.planner == Planner::None { format!("storage {}", b.pool) } else { "arena".into() };
        let _ = writeln!(
            c,
            ";   {}: {}{:?} {} B at {pool} +{}, live [{}, {}]{}",
            t.name,
            t.dtype,
            t.shape,
            t.bytes,
            plan.offsets[t.buffer],
            t.def,
            t.last,
            if t.is_view { " (view)" } else { "" }
        );
    }
    Ok(Compiled { module, report, plan_comment: c })
}
