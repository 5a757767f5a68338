//! The compiler: a model graph (from ONNX or built by a frontend through [`crate::graph`])
//! to a VM module whose memory instructions come from a memory plan.
//!
//! ```text
//! Graph ──analyze──▶ types + folded constants ──fold──▶ Scale layers merged into BatchNormalization,
//!       BatchNormalization merged into the Conv before it
//!       ──scopes──▶ steps, buffer/texture placements
//!       ──liveness──▶ tensors, buffers, lifetimes ──plan──▶ offsets in arenas
//!       ──lower──▶ Module (alloc_storage / alloc_tensor / call / kill / ret)
//! ```
//!
//! Each stage is a module with its own tests: [`crate::graph::analyze`], [`fold`], [`scopes`],
//! [`liveness`], [`crate::plan`] and [`lower`]. `docs/compiler.md` describes them.

pub mod control;
pub mod donation;
pub mod fold;
pub mod fuse;
pub mod liveness;
pub mod lower;
pub mod pools;
pub mod reorder;
pub mod scopes;
pub mod symbolic;

pub use pools::{InputsInArena, Io, PoolMap};
pub use scopes::Textures;

use crate::graph::Graph;
use crate::plan::{self, Buffer, BufferKind, Plan, Problem};
use rxvm_vm::{DeviceCaps, Module};
use std::fmt::Write;

/// How tensors get memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Planner {
    /// Every buffer its own storage: the no-reuse baseline.
    None,
    /// The best heuristic, improved by the exact search within the options' budget.
    Best,
    /// The best of the heuristics alone.
    Heuristics,
    /// One arena, one strategy.
    Strategy(&'static str),
}

impl Planner {
    /// `none`, `best`, or a strategy name of [`plan::STRATEGIES`].
    pub fn from_name(s: &str) -> Result<Planner, String> {
        match s {
            "none" => Ok(Planner::None),
            "best" => Ok(Planner::Best),
            "heuristics" => Ok(Planner::Heuristics),
            _ => match plan::STRATEGIES.iter().find(|st| st.0 == s) {
                Some(st) => Ok(Planner::Strategy(st.0)),
                None => {
                    let mut names = vec!["none", "best", "heuristics"];
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
    /// without image2d-from-buffer textures share image slots ([`plan::images`]).
    pub target: DeviceCaps,
    /// Reorder independent operators when that lowers the peak of live bytes
    /// ([`reorder`]).
    pub reorder: bool,
    /// Search nodes per pool for the exact search of [`Planner::Best`].
    pub plan_budget: u64,
    /// Which pool each buffer lives in, whether inputs are planned, and who owns the
    /// outputs ([`pools`]).
    pub pools: PoolMap,
    /// Bytes of constant subgraph outputs evaluated at compile time, in all
    /// ([`crate::graph::analyze_with`]); the rest runs at run time.
    pub fold_budget: u64,
    /// Graph inputs the program may update in place ([`donation`]): an operator that
    /// rewrites part of one (a KV cache's `TensorScatter`) writes into it, and the output
    /// is the input's tensor.
    pub donate: Vec<String>,
    /// Fuse each Conv with the residual Add and the activation after it into a
    /// `FusedConv` ([`fuse`]); buffer programs only.
    pub fuse: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            planner: Planner::Best,
            textures: Textures::None,
            target: DeviceCaps::host(),
            reorder: false,
            plan_budget: plan::exact::DEFAULT_BUDGET,
            pools: PoolMap::default(),
            fold_budget: crate::graph::DEFAULT_FOLD_BUDGET,
            donate: Vec::new(),
            fuse: true,
        }
    }
}

/// One pool of a compiled program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolReport {
    pub name: String,
    pub bytes: u64,
    pub lower_bound: u64,
    /// What it holds, e.g. `inputs+activations+outputs`.
    pub holds: String,
    /// The caller provides it (a storage parameter of `@main`).
    pub parameter: bool,
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
    /// With `reorder`: the peak of live bytes of the original schedule and of the one
    /// kept (the same when reordering did not lower it).
    pub reorder_peaks: Option<(u64, u64)>,
    /// On targets without images over buffers: the shared image slots the textures use and
    /// their dense image bytes ([`crate::plan::images`]).
    pub image_slots: usize,
    pub image_bytes: u64,
    /// Named pools (image slots and the no-reuse baseline's per-buffer storages are not
    /// listed), by pool id.
    pub pools: Vec<PoolReport>,
    /// Bytes of the graph inputs left in the caller's memory (not planned).
    pub input_bytes: u64,
    /// Tensors whose shapes only the run knows, allocated from the VM's pools when they
    /// are made (not planned), in schedule order.
    pub run_time: Vec<String>,
}

impl PlanReport {
    /// Device memory one run needs apart from constants: every pool, plus the inputs kept
    /// in the caller's memory.
    pub fn device_bytes(&self) -> u64 {
        self.arena_bytes + self.input_bytes
    }
}

/// The peak of bytes live at one step (the lower bound with all buffers in one pool).
fn peak_bytes(live: &liveness::Liveness) -> u64 {
    let buffers = live.buffers.iter().map(|b| Buffer::new(b.bytes, 1, b.first, b.last)).collect();
    plan::lower_bound(&Problem::new(buffers))
}

/// The image slot of every texture buffer (by buffer index), for a target whose images
/// cannot alias buffers.
fn image_slots(
    live: &liveness::Liveness,
    target: &DeviceCaps,
) -> Result<(std::collections::HashMap<usize, usize>, plan::images::ImagePlan), String> {
    let mut index = Vec::new();
    let mut reqs = Vec::new();
    for (i, b) in live.buffers.iter().enumerate().filter(|(_, b)| b.scope.is_texture()) {
        let t = &live.tensors[b.tensor];
        let img = rxvm_vm::types::ImageLayout::new(t.scope, t.dtype, &t.shape, target.image_pitch_align_px)
            .map_err(|e| format!("internal: texture `{}`: {e}", t.name))?;
        index.push(i);
        reqs.push(plan::images::ImageRequest {
            width: img.width,
            height: img.height,
            bytes_per_texel: img.bytes_per_texel,
            first: b.first,
            last: b.last,
        });
    }
    let p = plan::images::plan_images(&reqs);
    Ok((index.into_iter().zip(p.slot_of.iter().copied()).collect(), p))
}

/// Where each buffer lives.
struct PoolLayout {
    /// Pool id of every buffer.
    pool_of: Vec<u32>,
    classes: Vec<pools::Class>,
    /// Named pools by id (the activations' pool is 0).
    names: Vec<(u32, String)>,
    /// Pools the caller provides, ascending.
    parameters: Vec<u32>,
}

/// Assigns pools: named pools from the pool map (the activations' pool first, id 0), then
/// image slots (textures on targets without images over buffers), or with the no-reuse
/// planner one pool per buffer.
fn pool_layout(
    live: &liveness::Liveness,
    sched: &scopes::Schedule,
    opts: &Options,
    slot_of: Option<&std::collections::HashMap<usize, usize>>,
) -> Result<PoolLayout, String> {
    let outputs: std::collections::HashSet<&str> = sched.outputs.iter().map(String::as_str).collect();
    let mut members: Vec<Vec<&str>> = vec![Vec::new(); live.buffers.len()];
    for t in &live.tensors {
        members[t.buffer].push(&t.name);
    }
    let classes: Vec<pools::Class> = live
        .buffers
        .iter()
        .zip(&members)
        .map(|(b, m)| {
            if live.tensors[b.tensor].is_input {
                pools::Class::Input
            } else if m.iter().any(|n| outputs.contains(n)) {
                pools::Class::Output
            } else {
                pools::Class::Activation
            }
        })
        .collect();
    let mut names: Vec<(u32, String)> = vec![(0, opts.pools.activations().to_string())];
    let mut pool_of = Vec::with_capacity(live.buffers.len());
    for (i, (c, m)) in classes.iter().zip(&members).enumerate() {
        let name = opts
            .pools
            .pool_of(*c, m)
            .ok_or_else(|| format!("internal: input `{}` is planned but has no pool", m[0]))?;
        let id = match names.iter().find(|(_, n)| *n == name) {
            Some((id, _)) => *id,
            None => {
                names.push((names.len() as u32, name));
                names.len() as u32 - 1
            }
        };
        // The no-reuse baseline: every buffer its own storage, numbered from 1.
        pool_of.push(if opts.planner == Planner::None { i as u32 + 1 } else { id });
    }
    let named = names.len() as u32;
    if let Some(slot_of) = slot_of {
        for (i, p) in pool_of.iter_mut().enumerate() {
            if let Some(&slot) = slot_of.get(&i) {
                *p = named + slot as u32;
            }
        }
    }
    if opts.planner == Planner::None {
        names.clear();
    } else {
        names.retain(|(id, _)| pool_of.contains(id));
    }
    let mut parameters: Vec<u32> = Vec::new();
    for (i, &p) in pool_of.iter().enumerate() {
        let holds_input = classes[i] == pools::Class::Input;
        let holds_output = classes[i] == pools::Class::Output;
        if opts.pools.is_parameter(holds_input, holds_output) && !parameters.contains(&p) {
            parameters.push(p);
        }
    }
    // A pool is provided whole: any class in a parameter pool makes the pool a parameter.
    parameters.sort_unstable();
    Ok(PoolLayout { pool_of, classes, names, parameters })
}

/// A compiled graph: the module, its plan and a readable listing of the plan.
pub struct Compiled {
    pub module: Module,
    pub report: PlanReport,
    /// One comment line per tensor: name, type, bytes, arena offset and lifetime.
    pub plan_comment: String,
    /// The planning problem (one buffer per non-view tensor, named after it) and its plan.
    pub problem: Problem,
    pub plan: Plan,
    /// Time spent planning (milliseconds).
    pub plan_millis: f64,
    /// For a planned symbolic program: its symbols, buffer sizes and placement orders, to
    /// show the plan at other values of the symbols ([`Compiled::plan_at`]).
    pub symbolic: Option<(symbolic::Symbols, symbolic::SymbolicPlan)>,
}

impl Compiled {
    /// The plan of a planned symbolic program when its symbols take `values` (by name;
    /// the others at their bounds): the buffers at those sizes, placed in the order the
    /// entry would pick (the one with the smallest arena).
    pub fn plan_at(&self, values: &[(String, i64)]) -> Result<(Problem, Plan), String> {
        let Some((syms, sp)) = &self.symbolic else {
            return Err("--at: the program has no planned symbols (compile with --bound for each symbolic dim)".into());
        };
        let mut at: Vec<i64> = syms.bounds.iter().map(|b| b.unwrap_or(1)).collect();
        for (name, v) in values {
            let k =
                syms.names.iter().position(|n| n == name).ok_or_else(|| {
                    format!("--at {name}={v}: no symbol `{name}`; the symbols are {}", syms.describe())
                })?;
            let bound = syms.bounds[k].unwrap_or(i64::MAX);
            if *v < 0 || *v > bound {
                return Err(format!("--at {name}={v}: outside 0..={bound}"));
            }
            at[k] = *v;
        }
        let mut q = self.problem.clone();
        for (b, size) in q.buffers.iter_mut().zip(&sp.sizes) {
            let v = size.eval(&|s| at.get(s as usize).copied()).ok_or("a size overflows")?;
            b.size = u64::try_from(v).map_err(|_| "a size is negative at these values")?;
        }
        let mut best: Option<Plan> = None;
        for order in &sp.orders {
            let p = crate::plan::order::place_in_order_with(&q, order, &self.problem)?;
            if best.as_ref().is_none_or(|b| p.arena_bytes() < b.arena_bytes()) {
                best = Some(p);
            }
        }
        let plan = best.ok_or("internal: a symbolic plan without orders")?;
        Ok((q, plan))
    }
}

/// Plans `problem` with `planner` and checks the result with the independent checker.
/// `Planner::None` stacks each pool's buffers without reuse.
pub fn run_planner(problem: &Problem, planner: Planner, budget: u64) -> Result<Plan, String> {
    let plan = match planner {
        Planner::None => {
            problem.validate()?;
            let mut tops: std::collections::BTreeMap<u32, u64> = Default::default();
            let offsets = problem
                .buffers
                .iter()
                .map(|b| {
                    let top = tops.entry(b.pool).or_insert(0);
                    let off = plan::align_up(*top, b.align);
                    *top = off + b.size;
                    off
                })
                .collect();
            Plan { offsets, pool_sizes: tops.into_iter().collect(), strategy: "none" }
        }
        Planner::Best => plan::exact::plan_exact(problem, budget)?.plan,
        Planner::Heuristics => plan::best_of(problem)?,
        Planner::Strategy(name) => {
            let st = plan::STRATEGIES.iter().find(|s| s.0 == name).ok_or("unknown strategy")?;
            (st.1)(problem)?
        }
    };
    plan::check(problem, &plan).map_err(|e| format!("internal: the memory plan is invalid: {e}"))?;
    Ok(plan)
}

/// Compiles `g` for concrete input shapes (in the order of `g.inputs`).
pub fn compile(g: &Graph, input_shapes: &[Vec<i64>], opts: &Options) -> Result<Compiled, String> {
    let shapes: Vec<Option<Vec<i64>>> = input_shapes.iter().cloned().map(Some).collect();
    compile_inner(g, &shapes, None, opts).map_err(Fail::into_message)
}

/// Compiles `g` for inputs whose dims may be symbolic ([`symbolic`]): an input `pinned` to
/// a shape has it; the others' named and `?` dims are symbols, bounded by `bounds` (by
/// name). With a bound for every symbol, memory is planned for every value within the
/// bounds (offsets computed at entry); otherwise, or when a node has no symbolic
/// inference, the tensors that depend on a symbol are allocated when the program runs,
/// and the plan's comments say why.
pub fn compile_symbolic(
    g: &Graph,
    pinned: &[Option<Vec<i64>>],
    bounds: &[(String, i64)],
    opts: &Options,
) -> Result<Compiled, String> {
    let syms = symbolic::Symbols::new(g, pinned, bounds)?;
    if syms.names.is_empty() {
        let shapes: Vec<Option<Vec<i64>>> = syms.shapes_at(&[])?.into_iter().map(Some).collect();
        return compile_inner(g, &shapes, None, opts).map_err(Fail::into_message);
    }
    if !matches!(opts.pools.inputs_in_arena, InputsInArena::None)
        || opts.pools.io != Io::Vm
        || !opts.pools.rules.is_empty()
    {
        return Err("inputs with symbolic dims are compiled with the default pools (no --inputs-in-arena, --pool or --io caller yet)".into());
    }
    let why = match syms.all_bounds() {
        Some(bounds) => {
            let shapes: Vec<Option<Vec<i64>>> = syms.shapes_at(&bounds)?.into_iter().map(Some).collect();
            let planned = Options { textures: Textures::None, ..opts.clone() };
            match compile_inner(g, &shapes, Some((&syms, Mode::Planned)), &planned) {
                Ok(c) => return Ok(c),
                Err(Fail::NotSymbolic(why)) => why,
                Err(Fail::Error(e)) => return Err(e),
            }
        }
        None => {
            let free: Vec<&str> =
                syms.names.iter().zip(&syms.bounds).filter(|(_, b)| b.is_none()).map(|(n, _)| n.as_str()).collect();
            format!("no bound for {} (give --bound NAME=N to plan them)", free.join(", "))
        }
    };
    // The inputs without symbols keep their (constant) shapes.
    let shapes: Vec<Option<Vec<i64>>> =
        syms.inputs.iter().map(|dims| dims.iter().map(|e| e.as_const()).collect::<Option<Vec<i64>>>()).collect();
    compile_inner(g, &shapes, Some((&syms, Mode::RunTime(why))), opts).map_err(Fail::into_message)
}

/// How a symbolic program handles the tensors that depend on its symbols.
enum Mode {
    /// Planned at the bounds and placed by orders evaluated at entry.
    Planned,
    /// Allocated when the program runs, for this reason.
    RunTime(String),
}

/// Why [`compile_inner`] failed.
enum Fail {
    /// The graph cannot be planned symbolically (run-time allocation serves it).
    NotSymbolic(String),
    Error(String),
}

impl Fail {
    fn into_message(self) -> String {
        match self {
            Fail::NotSymbolic(e) | Fail::Error(e) => e,
        }
    }
}

impl From<String> for Fail {
    fn from(e: String) -> Fail {
        Fail::Error(e)
    }
}

impl From<&str> for Fail {
    fn from(e: &str) -> Fail {
        Fail::Error(e.to_string())
    }
}

/// Compiles `g` with each input's shape, `None` for an input allocated at run time
/// (whose dims are symbols of `sym`).
fn compile_inner(
    g: &Graph,
    input_shapes: &[Option<Vec<i64>>],
    sym: Option<(&symbolic::Symbols, Mode)>,
    opts: &Options,
) -> Result<Compiled, Fail> {
    let a = crate::graph::analyze_inputs(g, input_shapes, opts.fold_budget)?;
    // What was folded becomes constants below and takes no more of the budget when the
    // derived graphs are analysed, so what is left of it bounds their folding.
    let budget = opts.fold_budget - a.folded_bytes;
    let analyze = |g, shapes| crate::graph::analyze_inputs(g, shapes, budget);
    let materialized;
    let (g, a) = match fold::materialize_folded(g, &a) {
        Some(m) => {
            materialized = m;
            drop(a);
            (&materialized, analyze(&materialized, input_shapes)?)
        }
        None => (g, a),
    };
    let folded;
    let (g, a) = match fold::fold_scale_into_batchnorm(g, &a) {
        Some(f) => {
            folded = f;
            (&folded, analyze(&folded, input_shapes)?)
        }
        None => (g, a),
    };
    let into_conv;
    let (g, a) = match fold::fold_batchnorm_into_conv(g, &a) {
        Some(f) => {
            into_conv = f;
            (&into_conv, analyze(&into_conv, input_shapes)?)
        }
        None => (g, a),
    };
    // Texture programs keep their operators: FusedConv has buffer kernels only.
    let fuse = opts.fuse && opts.textures == Textures::None;
    // The normalizations become Convs node for node, so `a` still describes that graph
    // for the fusion after it: one analysis for both (an analysis holds the folded
    // constants, so each one more is a peak of memory while compiling).
    let bn_conv = if fuse { fuse::batchnorm_as_conv(g, &a) } else { None };
    let fused = fuse.then(|| fuse::fuse_conv_chains(bn_conv.as_ref().unwrap_or(g), &a)).flatten().or(bn_conv);
    let fused_graph;
    let (g, a) = match fused {
        Some(f) => {
            fused_graph = f;
            (&fused_graph, analyze(&fused_graph, input_shapes)?)
        }
        None => (g, a),
    };
    let mut sched = scopes::schedule(g, &a, &opts.target, opts.textures)?;
    sched.aliases = donation::aliases(g, &a, &opts.donate)?;
    let planned = |n: &str| opts.pools.pool_of(pools::Class::Input, &[n]).is_some();
    let live = liveness::liveness(g, &sched, &planned)?;
    let reordered_graph;
    let (g, a, sched, live, reorder_peaks) = if opts.reorder {
        let before = peak_bytes(&live);
        reordered_graph = reorder::reordered(g, &reorder::reorder(g, &a));
        let a2 = analyze(&reordered_graph, input_shapes)?;
        let mut sched2 = scopes::schedule(&reordered_graph, &a2, &opts.target, opts.textures)?;
        sched2.aliases = donation::aliases(&reordered_graph, &a2, &opts.donate)?;
        let live2 = liveness::liveness(&reordered_graph, &sched2, &planned)?;
        let after = peak_bytes(&live2);
        if after < before {
            (&reordered_graph, a2, sched2, live2, Some((before, after)))
        } else {
            (g, a, sched, live, Some((before, before)))
        }
    } else {
        (g, a, sched, live, None)
    };
    // Textures that cannot alias a buffer share image slots (pools 1, 2, ...) instead.
    let images = if opts.target.image_from_buffer || opts.planner == Planner::None {
        None
    } else {
        Some(image_slots(&live, &opts.target)?)
    };
    let inputs: Vec<&str> = g.inputs.iter().map(|i| i.name.as_str()).collect();
    opts.pools.check_names(&inputs, &live.index)?;
    let layout = pool_layout(&live, &sched, opts, images.as_ref().map(|(slot_of, _)| slot_of))?;
    let buffers: Vec<Buffer> = live
        .buffers
        .iter()
        .zip(&layout.pool_of)
        .map(|(b, &pool)| Buffer::new(b.bytes, b.align, b.first, b.last).in_pool(pool))
        .collect();
    let names = live.buffers.iter().map(|b| live.tensors[b.tensor].name.clone()).collect();
    let kinds: Vec<BufferKind> = layout
        .classes
        .iter()
        .zip(&live.buffers)
        .map(|(c, b)| match c {
            pools::Class::Input => BufferKind::Input,
            pools::Class::Output => BufferKind::Output,
            pools::Class::Activation if b.scope.is_texture() => BufferKind::Texture,
            pools::Class::Activation => BufferKind::Buffer,
        })
        .collect();
    let problem = Problem { buffers, names, kinds, pool_names: layout.names.clone() };
    let started = std::time::Instant::now();
    let plan = run_planner(&problem, opts.planner, opts.plan_budget)?;
    let millis = started.elapsed().as_secs_f64() * 1e3;
    // The textures of one image slot never live at the same time, so every planner puts
    // them at offset 0, where the slot's image starts.
    if let Some((slot_of, _)) = &images {
        if slot_of.keys().any(|&i| plan.offsets[i] != 0) {
            return Err("internal: a texture of an image slot was not placed at offset 0".into());
        }
    }
    let nparams = (g.inputs.len() + layout.parameters.len()) as u32;
    let mut sym_note = None;
    let mut sym_plan = None;
    let module = match &sym {
        None => lower::lower(g, &a, &sched, &live, &problem, &plan, &layout.parameters, &mut lower::Fixed)?,
        Some((syms, Mode::RunTime(why))) => {
            sym_note = Some(format!(
                "; symbolic: {}; the tensors computed from them are allocated at run time: {why}\n",
                syms.describe()
            ));
            let mut l = symbolic::SymbolicLayout::run_time(g, syms, nparams);
            lower::lower(g, &a, &sched, &live, &problem, &plan, &layout.parameters, &mut l)?
        }
        Some((syms, Mode::Planned)) => {
            let bounds =
                syms.all_bounds().ok_or_else(|| "internal: a planned symbolic program without bounds".to_string())?;
            let dims = symbolic::infer_dims(g, &a, syms, &bounds).map_err(Fail::NotSymbolic)?;
            let replan = |q: &Problem| run_planner(q, opts.planner, opts.plan_budget);
            let sp =
                symbolic::symbolic_plan(&live, &problem, &plan, &dims, &bounds, &replan).map_err(Fail::NotSymbolic)?;
            sym_note = Some(format!(
                "; symbolic: {}; sizes and offsets below are at the bounds; {} placement order(s), evaluated at entry\n",
                syms.describe(),
                sp.orders.len()
            ));
            sym_plan = Some(((*syms).clone(), sp.clone()));
            let mut l = symbolic::SymbolicLayout::planned(g, syms, nparams, &problem, sp, dims);
            lower::lower(g, &a, &sched, &live, &problem, &plan, &layout.parameters, &mut l)?
        }
    };
    let bounds = plan::lower_bound_per_pool(&problem);
    let pool_reports = layout
        .names
        .iter()
        .map(|(id, name)| {
            let mut holds: Vec<&str> = Vec::new();
            for (c, label) in [
                (pools::Class::Input, "inputs"),
                (pools::Class::Activation, "activations"),
                (pools::Class::Output, "outputs"),
            ] {
                if layout.classes.iter().zip(&layout.pool_of).any(|(k, p)| *k == c && p == id) {
                    holds.push(label);
                }
            }
            PoolReport {
                name: name.clone(),
                bytes: plan.pool_size(*id).unwrap_or(0),
                lower_bound: bounds.iter().find(|b| b.0 == *id).map_or(0, |b| b.1),
                holds: holds.join("+"),
                parameter: layout.parameters.contains(id),
            }
        })
        .collect();
    let input_bytes = g
        .inputs
        .iter()
        .filter(|i| live.tensor(&i.name).is_none())
        .filter_map(|i| sched.tensors.get(&i.name).map(|p| p.bytes))
        .sum();
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
        reorder_peaks,
        image_slots: images.as_ref().map_or(0, |(_, p)| p.slots.len()),
        image_bytes: images.as_ref().map_or(0, |(_, p)| p.bytes()),
        pools: pool_reports,
        input_bytes,
        run_time: sched
            .steps
            .iter()
            .flat_map(|st| &st.outputs)
            .filter(|o| sched.run_time.contains(*o))
            .cloned()
            .collect(),
    };
    let mut c = format!(
        "; memory plan ({}) for target `{}`: {} arena bytes, lower bound {}, no-reuse {}; steps 0..{}\n",
        report.strategy, report.target, report.arena_bytes, report.lower_bound, report.naive_bytes, live.steps
    );
    if let Some(note) = &sym_note {
        c.push_str(note);
    }
    if opts.textures == Textures::Auto {
        let _ = writeln!(c, "; textures: {} tensors, {} layout conversions", report.textures, report.conversions);
    }
    if let Some((_, p)) = &images {
        let sizes: Vec<String> = p.slots.iter().map(|s| format!("{}x{}", s.width, s.height)).collect();
        let _ = writeln!(
            c,
            "; images (no image2d-from-buffer): {} shared slots, {} image bytes: {}",
            p.slots.len(),
            p.bytes(),
            sizes.join(", ")
        );
    }
    if let Some((before, after)) = report.reorder_peaks {
        let _ = writeln!(c, "; reorder: peak of live bytes {before} before, {after} after");
    }
    if !report.run_time.is_empty() {
        let _ = writeln!(
            c,
            "; run-time shapes: {} tensor{} allocated when the program runs ({})",
            report.run_time.len(),
            if report.run_time.len() == 1 { "" } else { "s" },
            report.run_time.join(", ")
        );
    }
    if let Some(note) = &sched.note {
        let _ = writeln!(c, "; note: {note}");
    }
    for p in &report.pools {
        let _ = writeln!(
            c,
            "; pool `{}`: {} bytes, lower bound {}, holds {}{}",
            p.name,
            p.bytes,
            p.lower_bound,
            p.holds,
            if p.parameter { ", provided by the caller" } else { "" }
        );
    }
    for t in &live.tensors {
        let b = &problem.buffers[t.buffer];
        let pool = match layout.names.iter().find(|(id, _)| *id == b.pool) {
            Some((_, n)) if n == pools::DEFAULT_POOL => "arena".to_string(),
            Some((_, n)) => format!("pool `{n}`"),
            None => format!("storage {}", b.pool),
        };
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
    Ok(Compiled { module, report, plan_comment: c, problem, plan, plan_millis: millis, symbolic: sym_plan })
}
