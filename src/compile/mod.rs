//! The compiler: a model graph (from ONNX or built by a frontend through [`crate::graph`])
//! to a VM module whose memory instructions come from a memory plan.
//!
//! ```text
//! Graph ──analyze──▶ types + folded constants ──fold──▶ Scale layers merged into BatchNormalization
//!       ──scopes──▶ steps, buffer/texture placements
//!       ──liveness──▶ tensors, buffers, lifetimes ──plan──▶ offsets in arenas
//!       ──lower──▶ Module (alloc_storage / alloc_tensor / call / kill / ret)
//! ```
//!
//! Each stage is a module with its own tests: [`crate::graph::analyze`], [`fold`], [`scopes`],
//! [`liveness`], [`crate::plan`] and [`lower`]. `docs/compiler.md` describes them.

pub mod fold;
pub mod liveness;
pub mod lower;
pub mod scopes;

pub use scopes::Textures;

use crate::graph::{analyze, Graph};
use crate::plan::{self, Buffer, Plan, Problem};
use rxvm_vm::{DeviceCaps, Module};
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
    /// Whether activations may live in textures.
    pub textures: Textures,
    /// The device the program is planned for. Buffer offsets in an arena are multiples of
    /// its `mem_base_addr_align` (so any tensor can become a sub-buffer); texture offsets
    /// also of its `image_base_align`, and a texture takes its pitched size. On a target
    /// without image2d-from-buffer each texture gets a storage of its own (the device makes
    /// it a separate image).
    pub target: DeviceCaps,
}

impl Default for Options {
    fn default() -> Options {
        Options { planner: Planner::Best, textures: Textures::None, target: DeviceCaps::host() }
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
    /// Tensors in textures, and the layout conversions the program runs.
    pub textures: usize,
    pub conversions: usize,
    /// The target the plan was made for.
    pub target: String,
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
    let folded;
    let (g, a) = match fold::fold_scale_into_batchnorm(g, &a) {
        Some(f) => {
            folded = f;
            (&folded, analyze(&folded, input_shapes)?)
        }
        None => (g, a),
    };
    let sched = scopes::schedule(g, &a, &opts.target, opts.textures)?;
    let live = liveness::liveness(g, &sched)?;
    // Images that cannot alias a buffer get storages of their own.
    let own_storage = |b: &liveness::Buffer| b.scope.is_texture() && !opts.target.image_from_buffer;
    let buffers: Vec<Buffer> = live
        .buffers
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let pool = if opts.planner == Planner::None || own_storage(b) { i as u32 + 1 } else { 0 };
            Buffer::new(b.bytes, b.align, b.first, b.last).in_pool(pool)
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
    let module = lower::lower(g, &a, &sched, &live, &problem, &plan)?;
    let report = PlanReport {
        arena_bytes: plan.arena_bytes(),
        lower_bound: plan::lower_bound(&problem),
        naive_bytes: plan::naive_bytes(&problem),
        strategy: plan.strategy.to_string(),
        tensors: live.tensors.len(),
        buffers: live.buffers.len(),
        textures: sched.textures(),
        conversions: sched.conversions(),
        target: opts.target.name.clone(),
    };
    let mut c = format!(
        "; memory plan ({}) for target `{}`: {} arena bytes, lower bound {}, no-reuse {}; steps 0..{}\n",
        report.strategy, report.target, report.arena_bytes, report.lower_bound, report.naive_bytes, live.steps
    );
    if opts.textures == Textures::Auto {
        let _ = writeln!(c, "; textures: {} tensors, {} layout conversions", report.textures, report.conversions);
    }
    if let Some(note) = &sched.note {
        let _ = writeln!(c, "; note: {note}");
    }
    for t in &live.tensors {
        let b = &problem.buffers[t.buffer];
        let pool = if b.pool == 0 { "arena".into() } else { format!("storage {}", b.pool) };
        let _ = writeln!(
            c,
            ";   {}: {}{:?}{} {} B at {pool} +{}, live [{}, {}]{}",
            t.name,
            t.dtype,
            t.shape,
            if t.scope.is_texture() { format!(" \"{}\"", t.scope) } else { String::new() },
            t.bytes,
            plan.offsets[t.buffer],
            t.def,
            t.last,
            if t.is_view { " (view)" } else { "" }
        );
    }
    Ok(Compiled { module, report, plan_comment: c })
}
