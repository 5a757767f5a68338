//! The `rxvm` command line: assemble, disassemble, check, run, compile and plan programs
//! and models, run ONNX conformance cases, list devices, and start the REPL.

use crate::inputs::{parse_input_spec, InputSpec};
use crate::npy::write_npy;
use crate::session::{
    compile_graph, device_caps, device_spec, find_function, host_inputs, load_program, read_program_for,
    render_vm_error, CompileSettings, Failure, Missing,
};
use crate::stats::{print_stats, StatsFormat};
use clap::{Args, Parser, Subcommand};
use rxvm_vm::host_tensor::{HostTensor, HostValue};
use rxvm_vm::{DeviceCaps, Vm};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Parser, Debug)]
#[command(name = "rxvm", version, about = "A Relax-style bytecode VM for neural-network programs")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Assemble a `.rxa` program into `.rxb` bytecode.
    Asm {
        file: PathBuf,
        /// Output file (default: FILE with the extension `.rxb`).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Leave out names and source positions.
        #[arg(long)]
        strip: bool,
    },
    /// Print `.rxb` bytecode (or a `.rxa` program, normalised) as assembly text.
    Disasm {
        file: PathBuf,
        /// Write the text here instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Assemble or load a program and verify it, without running.
    Check { file: PathBuf },
    /// Compile an ONNX model to a program (`.rxa` text with the memory plan in comments, or
    /// `.rxb` bytecode) whose memory instructions come from a memory plan.
    Compile {
        model: PathBuf,
        /// Output file: `.rxa` or `.rxb` (default: MODEL with the extension `.rxa`).
        #[arg(short, long)]
        output: Option<PathBuf>,
        #[command(flatten)]
        compile: CompileArgs,
        /// Plan for the capabilities of this device: `host`, `opencl` or `opencl:NAME`
        /// (instead of a `--target` preset).
        #[arg(long, value_name = "host|opencl|opencl:NAME", conflicts_with = "target")]
        device: Option<String>,
    },
    /// Plan memory and report it: for an ONNX model (compiled as `compile` would) or a
    /// planning trace (`--trace`): arena bytes per pool, lower bound, no-reuse total,
    /// efficiency, time and the winning strategy.
    Plan(PlanArgs),
    /// Run a function of a `.rxa` or `.rxb` program.
    Run(RunArgs),
    /// Measure a model's or program's inference time: load (read, compile, create the VM),
    /// the first inference, then steady-state inferences after a warm-up (median, min,
    /// p90, mean), and the process's peak resident memory.
    Bench(BenchArgs),
    /// Step through a program and inspect its storages, views and kills (`:help` inside).
    /// Reads commands from standard input; on a terminal with line editing, history and
    /// tab completion.
    Repl {
        /// A `.rxa`, `.rxb` or `.onnx` file to load.
        file: Option<PathBuf>,
        /// Pause a `:run`, `:continue` or `:step` after this much wall-clock time, e.g.
        /// `10s` (default: no limit; Ctrl-C pauses a run at any time).
        #[arg(long, value_name = "TIME", value_parser = parse_duration)]
        timeout: Option<std::time::Duration>,
    },
    /// List the host device and every OpenCL platform and device with the capabilities
    /// the VM and planner use.
    Devices,
    /// Run ONNX backend test cases (folders with model.onnx and test_data_set_*/) and
    /// compare with their expected outputs; ends with `N passed, M failed, K skipped`.
    Conformance {
        /// Case folders, or folders of case folders.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Where to run: host, opencl or opencl:NAME.
        #[arg(long, default_value = "host")]
        device: String,
        /// Instead of a line per case, the cases that do not pass grouped by cause
        /// (missing operator, ranked; unsupported dtype; unsupported attribute; dynamic
        /// shape; control flow; wrong result, panic, timeout and other, each case named).
        #[arg(long)]
        summary: bool,
        /// How long one case may run before it fails as a timeout and the next one starts
        /// (e.g. 500ms, 30s, 2m). Default: 60s, 30m on Oclgrind.
        #[arg(long, value_name = "TIME", value_parser = parse_duration)]
        timeout: Option<std::time::Duration>,
    },
}

/// How `compile` (and `run` of an `.onnx` file) plans memory.
#[derive(Args, Debug, Clone)]
pub struct CompileArgs {
    /// `best` (every heuristic, then the exact search within --plan-budget), `heuristics`
    /// (the best heuristic alone), one strategy (`greedy_by_size`, `max_live_first`,
    /// `max_live_longest_first`, `first_fit_in_order`), or `none` (every tensor its own
    /// storage, the no-reuse baseline).
    #[arg(long, default_value = "best", value_name = "NAME")]
    pub planner: String,
    /// Search nodes per pool for the exact search of `--planner best` (deterministic: the
    /// same budget gives the same plan).
    #[arg(long, value_name = "NODES", default_value_t = crate::plan::exact::DEFAULT_BUDGET)]
    pub plan_budget: u64,
    /// Bytes of constant subgraph outputs (generated weights, shapes) evaluated at compile
    /// time, in all, e.g. `256M`; what does not fit runs at run time. Default 1G.
    #[arg(long, value_name = "SIZE", value_parser = parse_byte_size)]
    pub fold_budget: Option<u64>,
    /// Offset alignment of buffer tensors in an arena, in bytes (default: the target's
    /// CL_DEVICE_MEM_BASE_ADDR_ALIGN; 128 on the host).
    #[arg(long, value_name = "BYTES")]
    pub align: Option<u64>,
    /// `auto`: 4-D f32 activations of texture operators live in `global.texture` images
    /// (blocked NCHW4), with layout conversions at the edges; `none`: buffers only.
    #[arg(long, default_value = "none", value_name = "none|auto")]
    pub textures: String,
    /// The device to plan for: `host`, `intel-cpu` or `pocl-cpu`, optionally with caps
    /// overrides, e.g. `intel-cpu,pitch=32,image-base=256` (keys as in --host-caps).
    /// Default: the device the program runs on (`run`), or `host` (`compile`).
    #[arg(long, value_name = "PRESET[,KEY=VALUE...]")]
    pub target: Option<String>,
    /// Reorder independent operators (e.g. the branches of an inception block) when that
    /// lowers the peak of live bytes; the plan's comments give the bound before and after.
    #[arg(long)]
    pub reorder: bool,
    /// Plan graph inputs in the activations' pool, live from entry to their last reader, so
    /// their bytes are reused afterwards: all inputs, or the comma-separated NAMES. THE
    /// INPUT DATA IS OVERWRITTEN during the run. The pool becomes a storage parameter of
    /// `@main` with each such input placed in it (`run` allocates it and writes the input
    /// there directly).
    #[arg(long, num_args = 0..=1, default_missing_value = "all", value_name = "NAMES")]
    pub inputs_in_arena: Option<String>,
    /// Put a class of buffers (`inputs`, `activations`, `outputs`) or one tensor in the named
    /// pool; each pool is its own storage, and memory is reused only within a pool.
    /// Repeatable; a tensor rule beats a class rule. Default: activations and outputs in
    /// `arena`, inputs in the caller's memory.
    #[arg(long = "pool", value_name = "CLASS_OR_TENSOR=POOL")]
    pub pools: Vec<String>,
    /// Who owns output memory: `vm` (the program allocates it) or `caller` (outputs are
    /// views in a storage parameter of `@main`, pool `outputs`, that the caller passes: no
    /// copy out of VM memory).
    #[arg(long, default_value = "vm", value_name = "vm|caller")]
    pub io: String,
    /// The shape of a model input, NAME=[d0,d1,...]: pins its dynamic (`?` or named) dims
    /// and must agree with its fixed ones. Repeatable. `run` also takes the shape of each
    /// `.npy` `--input`.
    #[arg(long = "shape", value_name = "NAME=[D0,D1,...]")]
    pub shapes: Vec<String>,
    /// Upper bounds of symbolic input dims, NAME=N[,NAME=N...] (`batch=8`; a `?` dim of
    /// input `x` is the symbol `x_K`, K its position). With a bound for every symbol, one
    /// program plans memory for every value up to the bounds; without, the tensors that
    /// depend on a symbol are allocated at run time. Repeatable.
    #[arg(long = "bound", value_name = "NAME=N[,NAME=N...]")]
    pub bounds: Vec<String>,
    /// Graph inputs the program may update in place, NAME[,NAME...] (a KV cache): an
    /// operator that rewrites part of one (TensorScatter, ScatterND, ScatterElements) and
    /// is its only reader writes into it, and returns it as its output. THE INPUT DATA IS
    /// UPDATED by the run. Repeatable.
    #[arg(long = "donate", value_name = "NAME[,NAME...]")]
    pub donate: Vec<String>,
    /// Keep each Conv, residual Add and activation its own operator, instead of fusing
    /// them into a `FusedConv` (buffer programs fuse by default).
    #[arg(long)]
    pub no_fuse: bool,
}

impl CompileSettings for CompileArgs {
    fn given_shapes(&self) -> Result<Vec<(String, Vec<i64>)>, String> {
        CompileArgs::given_shapes(self)
    }

    fn options(&self, caps: &DeviceCaps) -> Result<crate::compile::Options, Failure> {
        CompileArgs::options(self, caps)
    }
}

impl CompileArgs {
    /// The shapes `--shape` gives, by input name.
    pub fn given_shapes(&self) -> Result<Vec<(String, Vec<i64>)>, String> {
        self.shapes
            .iter()
            .map(|raw| match parse_input_spec(raw) {
                Ok((name, InputSpec::Shape(dims))) => Ok((name, dims)),
                _ => Err(format!("--shape {raw}: expected NAME=[d0,d1,...], e.g. x=[1,3,224,224]")),
            })
            .collect()
    }

    /// The bounds `--bound` gives, by symbol name.
    pub fn given_bounds(&self) -> Result<Vec<(String, i64)>, String> {
        let mut out = Vec::new();
        for raw in &self.bounds {
            for part in raw.split(',') {
                let parsed = part.split_once('=').and_then(|(n, v)| Some((n.trim(), v.trim().parse::<i64>().ok()?)));
                match parsed {
                    Some((name, v)) if !name.is_empty() => out.push((name.to_string(), v)),
                    _ => return Err(format!("--bound {raw}: expected NAME=N[,NAME=N...], e.g. batch=8,seq=512")),
                }
            }
        }
        Ok(out)
    }

    /// The pool map of `--inputs-in-arena`, `--pool` and `--io`.
    pub fn pool_map(&self) -> Result<crate::compile::PoolMap, String> {
        let mut rules = Vec::with_capacity(self.pools.len());
        for r in &self.pools {
            rules.push(crate::compile::PoolMap::parse_rule(r).map_err(|e| format!("--pool {e}"))?);
        }
        Ok(crate::compile::PoolMap {
            rules,
            inputs_in_arena: self
                .inputs_in_arena
                .as_deref()
                .map_or(crate::compile::InputsInArena::None, crate::compile::InputsInArena::parse),
            io: crate::compile::Io::from_name(&self.io).map_err(|e| format!("--io: {e}"))?,
        })
    }

    /// The compiler options these arguments give for `device` (used unless `--target`).
    pub fn options(&self, device: &DeviceCaps) -> Result<crate::compile::Options, Failure> {
        let planner = crate::compile::Planner::from_name(&self.planner).map_err(|e| format!("--planner: {e}"))?;
        let textures = crate::compile::Textures::from_name(&self.textures).map_err(|e| format!("--textures: {e}"))?;
        let mut target = match &self.target {
            Some(spec) => DeviceCaps::parse_target(spec).map_err(|e| format!("--target: {e}"))?,
            None => device.clone(),
        };
        if let Some(align) = self.align {
            if !align.is_power_of_two() {
                return Err(Failure::Message(format!("--align: the alignment must be a power of two, found {align}")));
            }
            target.mem_base_addr_align = align;
        }
        Ok(crate::compile::Options {
            planner,
            textures,
            target,
            reorder: self.reorder,
            plan_budget: self.plan_budget,
            pools: self.pool_map()?,
            fold_budget: self.fold_budget.unwrap_or(crate::graph::DEFAULT_FOLD_BUDGET),
            donate: self.donate.iter().flat_map(|d| d.split(',')).map(|d| d.trim().to_string()).collect(),
            fuse: !self.no_fuse,
        })
    }
}

#[derive(Args, Debug)]
pub struct PlanArgs {
    /// An ONNX model to plan.
    #[arg(required_unless_present = "trace", conflicts_with = "trace")]
    pub model: Option<PathBuf>,
    /// A planning trace instead of a model: a Glow allocator trace (`MODEL`, `ALLOC`, `FREE`
    /// lines; every model in it is planned) or a MiniMalloc CSV (`id,lower,upper,size`).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Only the models of the trace whose name contains this text.
    #[arg(long, value_name = "TEXT", requires = "trace")]
    pub only: Option<String>,
    #[command(flatten)]
    pub compile: CompileArgs,
    /// Plan for the capabilities of this device: `host`, `opencl` or `opencl:NAME`.
    #[arg(long, value_name = "host|opencl|opencl:NAME", conflicts_with = "target")]
    pub device: Option<String>,
    /// One JSON object per planned model, one per line.
    #[arg(long)]
    pub json: bool,
    /// Draw the plan (time × address, one panel per pool) as an SVG picture.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// For a model compiled with symbolic dims and --bound: report (and draw) the plan the
    /// program uses when the symbols take these values, NAME=N[,NAME=N...] (the others at
    /// their bounds).
    #[arg(long, value_name = "NAME=N[,NAME=N...]")]
    pub at: Option<String>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// A `.rxa` or `.rxb` program, or an `.onnx` model (compiled in memory).
    pub file: PathBuf,
    #[command(flatten)]
    pub compile: CompileArgs,
    /// Function to run.
    #[arg(long, default_value = "main")]
    pub func: String,
    /// An input: NAME=PATH.npy, NAME=zeros, NAME=random:SEED, NAME=ramp (element i of n is
    /// i/n), or NAME=VALUE for int/float
    /// parameters and NAME=[d0,d1,...] for shapes. Repeatable.
    #[arg(short, long = "input", value_name = "NAME=SPEC")]
    pub inputs: Vec<String>,
    /// Write tensor result i to the i-th `--output` path (`.npy`). Repeatable.
    #[arg(short, long = "output", value_name = "PATH.npy")]
    pub outputs: Vec<PathBuf>,
    /// Print allocation counters after the run: `--stats` (a table) or `--stats=json`.
    #[arg(long, num_args = 0..=1, default_missing_value = "table", value_name = "table|json")]
    pub stats: Option<StatsFormat>,
    /// Do not print the results.
    #[arg(short, long)]
    pub quiet: bool,
    /// Print every element of the results. By default a tensor of more than 100 elements
    /// is summarised as numpy does: the first and last 3 entries of each long axis, with
    /// `...` between them.
    #[arg(long, conflicts_with = "quiet")]
    pub print_all: bool,
    /// Where to run: `host` (default), `opencl` (the first OpenCL device) or
    /// `opencl:NAME` (the first whose platform or device name contains NAME).
    #[arg(long, default_value = "host", value_name = "host|opencl|opencl:NAME")]
    pub device: String,
    /// Host device capabilities, e.g. `pitch=32,image-base=256,mem=1G`
    /// (keys: base-align, mem-base-align, pitch, image-base, max-width, max-height, max-alloc, mem,
    /// and the switches images and image-from-buffer, 0 or 1). `mem` defaults to the
    /// machine's RAM.
    #[arg(long, value_name = "KEY=VALUE,...")]
    pub host_caps: Option<String>,
    /// Stop with an error after this many instructions (default: no limit; an endless
    /// loop runs until --timeout or Ctrl-C).
    #[arg(long, value_name = "N")]
    pub max_instructions: Option<u64>,
    /// Stop with an error beyond this call depth.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub max_call_depth: usize,
    /// Stop with an error when an allocation would make more than SIZE bytes live on the
    /// device (constants included: one that would cross it is refused as it loads; and the
    /// storages every frame of a recursion holds), e.g. `64M` (default: no limit beyond the
    /// device's memory).
    #[arg(long, value_name = "SIZE", value_parser = parse_byte_size)]
    pub max_live_bytes: Option<u64>,
    /// Stop with an error, naming the instruction, after this much wall-clock time, e.g.
    /// `30s`, `500ms`, `2m` or `1.5` (seconds); an operator call in progress finishes first
    /// (default: no limit).
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub timeout: Option<std::time::Duration>,
    /// Check every operator and kernel call, but skip its work: measures the VM's own cost
    /// (results are meaningless; combine with --quiet and --stats).
    #[arg(long)]
    pub noop_kernels: bool,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// A `.rxa` or `.rxb` program, or an `.onnx` model (compiled in memory).
    pub file: PathBuf,
    #[command(flatten)]
    pub compile: CompileArgs,
    /// Function to measure.
    #[arg(long, default_value = "main")]
    pub func: String,
    /// An input, as for `run`: NAME=PATH.npy, NAME=zeros, NAME=random:SEED, NAME=ramp,
    /// NAME=VALUE or NAME=[d0,d1,...]. Repeatable. A tensor input not given is generated:
    /// deterministic pseudo-random values of its type (`random:K` for the K-th parameter).
    #[arg(short, long = "input", value_name = "NAME=SPEC")]
    pub inputs: Vec<String>,
    /// Where to run: `host` (default), `opencl` or `opencl:NAME`.
    #[arg(long, default_value = "host", value_name = "host|opencl|opencl:NAME")]
    pub device: String,
    /// Host device capabilities, as for `run`.
    #[arg(long, value_name = "KEY=VALUE,...")]
    pub host_caps: Option<String>,
    /// Inferences run and not measured after the first one.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub warmup: u64,
    /// Steady-state inferences measured (default 20).
    #[arg(long, value_name = "N", value_parser = parse_count, conflicts_with = "time")]
    pub reps: Option<u64>,
    /// Measure steady-state inferences for this long instead (at least one), e.g. `10s`.
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub time: Option<std::time::Duration>,
    /// Print one JSON object (keys model, device, reps, load_ms, first_ms, median_ms,
    /// min_ms, p90_ms, mean_ms, peak_rss_bytes) instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// A count of at least 1 for clap.
fn parse_count(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("expected a count of at least 1, found `{s}`")),
    }
}

fn cmd_bench(a: BenchArgs) -> Result<(), Failure> {
    let spec = device_spec(&a.device, a.host_caps.as_deref())?;
    let amount = match a.time {
        Some(t) => crate::bench::Amount::Time(t),
        None => crate::bench::Amount::Reps(a.reps.unwrap_or(crate::bench::DEFAULT_REPS)),
    };
    let request = crate::bench::Request {
        file: &a.file,
        device: &a.device,
        spec,
        settings: &a.compile,
        func: &a.func,
        inputs: &a.inputs,
        warmup: a.warmup,
        amount,
    };
    let report = crate::bench::run(request)?;
    let text = if a.json { format!("{}\n", report.to_json()) } else { report.to_text() };
    std::io::stdout().write_all(text.as_bytes()).map_err(|e| Failure::Message(e.to_string()))
}

/// Runs the command line; returns the process exit code.
pub fn main_with(cli: Cli) -> i32 {
    let r = match cli.command {
        Command::Asm { file, output, strip } => cmd_asm(&file, output, strip),
        Command::Disasm { file, output } => cmd_disasm(&file, output),
        Command::Check { file } => cmd_check(&file),
        Command::Compile { model, output, compile, device } => cmd_compile(&model, output, &compile, device.as_deref()),
        Command::Plan(args) => cmd_plan(&args),
        Command::Run(args) => cmd_run(args),
        Command::Bench(args) => cmd_bench(args),
        Command::Repl { file, timeout } => cmd_repl(file.as_deref(), timeout),
        Command::Devices => cmd_devices(),
        Command::Conformance { dirs, device, summary, timeout } => cmd_conformance(&dirs, &device, summary, timeout),
    };
    match r {
        Ok(()) => 0,
        Err(Failure::Message(m)) => {
            eprintln!("error: {m}");
            1
        }
        Err(Failure::Rendered(t)) => {
            eprint!("{t}");
            1
        }
    }
}

/// Reads and compiles an ONNX model for `args.target`, or else `device`.
/// Compiles a model for `compile` and `plan`: inputs whose dims stay dynamic (not pinned
/// by `--shape`) are symbolic, bounded by `--bound`.
fn compile_model(path: &Path, args: &CompileArgs, device: &DeviceCaps) -> Result<crate::compile::Compiled, Failure> {
    let g = crate::onnx::read_model(path)?;
    for w in &g.warnings {
        eprintln!("warning: {w}");
    }
    let named = |e: String| Failure::Message(format!("{}: {e}", path.display()));
    let pinned = crate::session::input_dims(&g, &args.given_shapes()?).map_err(named)?;
    let bounds = args.given_bounds()?;
    let opts = args.options(device)?;
    match pinned.iter().cloned().collect::<Option<Vec<Vec<i64>>>>() {
        Some(shapes) if bounds.is_empty() => compile_graph(path, &g, &shapes, &opts),
        _ => crate::compile::compile_symbolic(&g, &pinned, &bounds, &opts).map_err(named),
    }
}

fn write_out(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    write_out_with(path, |w| w.write_all(bytes).map(|()| bytes.len() as u64)).map(drop)
}

/// Writes `path` with `write` (which returns how many bytes it wrote) through a buffer,
/// beside the target and renamed, so a failure never leaves a half-written file.
fn write_out_with(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<u64>,
) -> Result<u64, Failure> {
    let tmp = path.with_extension("rxvm-tmp");
    let written = std::fs::File::create(&tmp).and_then(|f| {
        let mut w = std::io::BufWriter::new(f);
        let n = write(&mut w)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(n)
    });
    let renamed = written.and_then(|n| std::fs::rename(&tmp, path).map(|()| n));
    renamed.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Failure::Message(format!("cannot write {}: {e}", path.display()))
    })
}

/// Writes `m` as a `.rxb` at `path`, streamed (no copy of the file in memory).
fn write_rxb(path: &Path, m: &rxvm_vm::Module) -> Result<u64, Failure> {
    write_out_with(path, |w| rxvm_vm::write_module_to(m, w))
}

fn cmd_repl(file: Option<&Path>, timeout: Option<std::time::Duration>) -> Result<(), Failure> {
    let mut repl = crate::repl::Repl::new();
    repl.set_timeout(timeout);
    if let Some(f) = file {
        if let crate::repl::Outcome::Print(t) = repl.load(f) {
            print!("{t}");
        }
    }
    crate::repl::term::run(repl).map_err(Failure::Message)
}

fn cmd_asm(file: &Path, output: Option<PathBuf>, strip: bool) -> Result<(), Failure> {
    let mut p = load_program(file)?;
    if strip {
        p.module.strip_debug();
    }
    let out = output.unwrap_or_else(|| file.with_extension("rxb"));
    write_rxb(&out, &p.module).map(drop)
}

fn cmd_disasm(file: &Path, output: Option<PathBuf>) -> Result<(), Failure> {
    let p = load_program(file)?;
    let text = rxvm_asm::disassemble(&p.module);
    match output {
        Some(o) => write_out(&o, text.as_bytes()),
        None => std::io::stdout().write_all(text.as_bytes()).map_err(|e| Failure::Message(e.to_string())),
    }
}

fn cmd_compile(model: &Path, output: Option<PathBuf>, args: &CompileArgs, device: Option<&str>) -> Result<(), Failure> {
    let caps = planning_caps(device)?;
    let c = compile_model(model, args, &caps)?;
    let out = output.unwrap_or_else(|| model.with_extension("rxa"));
    let written = match out.extension().and_then(|e| e.to_str()) {
        Some("rxb") => write_rxb(&out, &c.module)?,
        // Text only when it is asked for: a large model's weights printed in decimal take
        // seconds and gigabytes.
        Some("rxa") => {
            let text = format!("{}{}", c.plan_comment, rxvm_asm::disassemble(&c.module));
            write_out(&out, text.as_bytes())?;
            text.len() as u64
        }
        _ => return Err(Failure::Message(format!("-o {}: the output must end in .rxa or .rxb", out.display()))),
    };
    // Say where the program went: without `-o` the path is derived from the model's.
    println!("wrote {} ({written} bytes)", out.display());
    Ok(())
}

/// The problems of a trace file, named: every model of a Glow trace, or the one MiniMalloc
/// instance of a `.csv` file.
fn read_trace(path: &Path) -> Result<Vec<(String, crate::plan::Problem)>, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let show = path.display();
    if path.extension().is_some_and(|e| e == "csv") {
        let p = crate::plan::trace::parse_minimalloc_csv(&text).map_err(|e| format!("{show}: {e}"))?;
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        return Ok(vec![(name, p)]);
    }
    let models = crate::plan::trace::parse_glow_models(&text).map_err(|e| format!("{show}: {e}"))?;
    Ok(models.into_iter().map(|m| (m.name, m.problem)).collect())
}

fn cmd_plan(a: &PlanArgs) -> Result<(), Failure> {
    let planner = crate::compile::Planner::from_name(&a.compile.planner).map_err(|e| format!("--planner: {e}"))?;
    // (summary, problem, plan) of each planned model.
    let mut planned = Vec::new();
    if let Some(trace) = &a.trace {
        let compile_only = [("--textures", a.compile.textures != "none"), ("--target", a.compile.target.is_some())];
        if let Some((flag, _)) = compile_only.iter().find(|f| f.1) {
            return Err(Failure::Message(format!("{flag} applies to models; a trace fixes sizes and lifetimes")));
        }
        let mut problems = read_trace(trace)?;
        if let Some(only) = &a.only {
            problems.retain(|(name, _)| name.contains(only.as_str()));
            if problems.is_empty() {
                return Err(Failure::Message(format!("--only {only}: no model of {} matches", trace.display())));
            }
        }
        for (name, problem) in problems {
            let started = std::time::Instant::now();
            let plan = crate::compile::run_planner(&problem, planner, a.compile.plan_budget)
                .map_err(|e| format!("{name}: {e}"))?;
            let millis = started.elapsed().as_secs_f64() * 1e3;
            planned.push((crate::report::PlanSummary::new(&name, &problem, &plan, millis), problem, plan));
        }
    } else if let Some(model) = &a.model {
        let caps = planning_caps(a.device.as_deref())?;
        let c = compile_model(model, &a.compile, &caps)?;
        let name = model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let (title, problem, plan) = match &a.at {
            None => (format!("{name} (target {})", c.report.target), c.problem.clone(), c.plan.clone()),
            Some(at) => {
                let values = CompileArgs { bounds: vec![at.clone()], ..a.compile.clone() }
                    .given_bounds()
                    .map_err(|_| format!("--at {at}: expected NAME=N[,NAME=N...], e.g. batch=2"))?;
                let (p, plan) = c.plan_at(&values)?;
                (format!("{name} at {at} (target {})", c.report.target), p, plan)
            }
        };
        let mut summary = crate::report::PlanSummary::new(&title, &problem, &plan, c.plan_millis);
        summary.reorder_peaks = c.report.reorder_peaks;
        summary.images = (c.report.image_slots > 0).then_some((c.report.image_slots, c.report.image_bytes));
        planned.push((summary, problem, plan));
    }
    if let Some(svg) = &a.svg {
        let [(summary, problem, plan)] = planned.as_slice() else {
            return Err(Failure::Message(format!(
                "--svg draws one plan, but {} were made; pick one with --only NAME",
                planned.len()
            )));
        };
        let picture = crate::plan::svg::render(problem, plan, &summary.name)?;
        write_out(svg, picture.as_bytes())?;
    }
    let mut out = String::new();
    for (s, _, _) in &planned {
        if a.json {
            out.push_str(&s.to_json().to_string());
            out.push('\n');
        } else {
            out.push_str(&s.to_text());
        }
    }
    std::io::stdout().write_all(out.as_bytes()).map_err(|e| Failure::Message(e.to_string()))
}

fn cmd_check(file: &Path) -> Result<(), Failure> {
    let p = load_program(file)?;
    let m = &p.module;
    let ninstr: usize = m.funcs.values().map(|f| f.code.len()).sum();
    println!(
        "ok: module `{}`: {} function(s), {} constant(s), {} instruction(s)",
        m.name,
        m.funcs.len(),
        m.consts.len(),
        ninstr
    );
    Ok(())
}

/// The caps `compile` and `plan` plan for without `--target`: those of `--device`, or the
/// host's.
fn planning_caps(device: Option<&str>) -> Result<DeviceCaps, String> {
    match device {
        Some(d) => Ok(device_caps(&device_spec(d, None)?)),
        None => Ok(DeviceCaps::host()),
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// One device's capabilities as `rxvm devices` prints them.
pub fn describe_caps(c: &DeviceCaps) -> String {
    let mut s = String::new();
    let rows: [(&str, String); 10] = [
        ("image support", yes_no(c.image_support).into()),
        ("image2d from buffer", yes_no(c.image_from_buffer).into()),
        ("image pitch alignment", format!("{} px", c.image_pitch_align_px)),
        ("image base-address alignment", format!("{} B", c.image_base_align)),
        ("mem base-address alignment", format!("{} B", c.mem_base_addr_align)),
        ("default storage alignment", format!("{} B", c.base_align)),
        ("max allocation", format!("{} B", c.max_alloc)),
        ("max image2d", format!("{} x {}", c.max_image2d_width, c.max_image2d_height)),
        ("global memory", format!("{} B", c.global_mem)),
        (
            "texture views",
            if c.image_from_buffer {
                "share the buffer"
            } else if c.image_support {
                "separate images (compat)"
            } else {
                "unsupported"
            }
            .into(),
        ),
    ];
    for (k, v) in rows {
        s.push_str(&format!("    {k:<30} {v}\n"));
    }
    s
}

fn cmd_conformance(
    dirs: &[PathBuf],
    device: &str,
    summary: bool,
    timeout: Option<std::time::Duration>,
) -> Result<(), Failure> {
    let spec = device_spec(device, None)?;
    let cases = crate::conformance::find_cases(dirs)?;
    let limit = timeout.unwrap_or_else(|| crate::conformance::default_time_limit(&spec));
    let results = crate::conformance::run_all_within(&cases, &spec, limit);
    if summary {
        print!("{}", crate::conformance::summary(&results));
    } else {
        print!("{}", crate::conformance::report(&results));
    }
    let failed = results.iter().filter(|r| matches!(r.outcome, crate::conformance::Outcome::Fail(_))).count();
    if failed > 0 {
        return Err(Failure::Message(format!("{failed} conformance case(s) failed")));
    }
    Ok(())
}

fn cmd_devices() -> Result<(), Failure> {
    let mut out = String::from("host\n  device `host` (embedded; --device host)\n");
    out.push_str(&describe_caps(&DeviceCaps::host()));
    match rxvm_vm::opencl::list_devices() {
        Err(e) => out.push_str(&format!("opencl: no usable OpenCL runtime ({e})\n")),
        Ok(list) if list.is_empty() => out.push_str("opencl: no platforms\n"),
        Ok(list) => {
            let mut last = String::new();
            for d in list {
                if d.platform != last {
                    out.push_str(&format!("opencl platform `{}`\n", d.platform));
                    last = d.platform.clone();
                }
                out.push_str(&format!("  device `{}` ({})\n", d.caps.name, d.version.trim()));
                out.push_str(&describe_caps(&d.caps));
            }
        }
    }
    print!("{out}");
    Ok(())
}

fn cmd_run(a: RunArgs) -> Result<(), Failure> {
    let spec = device_spec(&a.device, a.host_caps.as_deref())?;
    // For a model, the ONNX names of @main's first parameters (its graph inputs): `--input`
    // takes them as well as the register names, in which characters other than letters,
    // digits and `_` became `_`.
    let (p, onnx_inputs) = read_program_for(&a.file, &spec, &a.compile, &a.inputs)?;
    let module = Arc::new(p.module);
    let fid = find_function(&module, &a.func, &a.file)?;
    let f = &module.funcs[fid];
    // Storage parameters (pools the caller provides) are allocated by the VM with the size
    // the code needs; every other parameter takes an --input.
    let inputs = host_inputs(f, &onnx_inputs, &a.inputs, Missing::Refuse)?;

    // The limits hold from the start: constants that would cross --max-live-bytes are
    // refused as they load.
    let limits = rxvm_vm::Limits {
        max_instructions: a.max_instructions,
        max_call_depth: a.max_call_depth,
        max_live_bytes: a.max_live_bytes,
        timeout: a.timeout,
        ..rxvm_vm::Limits::default()
    };
    let mut vm = Vm::with_devices_and_limits(module.clone(), vec![spec], limits)
        .map_err(|e| Failure::Rendered(render_vm_error(&e, p.source.as_ref())))?;
    if a.noop_kernels {
        vm.kernels = rxvm_vm::Kernels::Noop;
    }
    let func_name = f.name.clone();
    let results = vm.invoke(&func_name, &inputs).map_err(|e| Failure::Rendered(render_vm_error(&e, p.source.as_ref())));
    // Print the stats even when the run failed: peak bytes and counters cover the failed
    // run (live counts are taken after its registers were released).
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let results = match results {
        Ok(r) => r,
        Err(e) => {
            if let Some(fmt) = a.stats {
                let _ = print_stats(&mut out, fmt, &vm, p.plan.as_ref());
            }
            return Err(e);
        }
    };
    if !a.quiet {
        for (i, r) in results.iter().enumerate() {
            let text = match r {
                HostValue::Int(v) => v.to_string(),
                HostValue::Float(v) => format!("{v:?}"),
                HostValue::Shape(s) => format!("shape {s:?}"),
                HostValue::Tensor(t) if a.print_all => t.to_string(),
                HostValue::Tensor(t) => t.summary(),
                HostValue::Storage { id, size } => format!("storage #{id} ({size} bytes)"),
            };
            let _ = writeln!(out, "result {i}: {text}");
        }
    }
    let tensors: Vec<&HostTensor> = results
        .iter()
        .filter_map(|r| match r {
            HostValue::Tensor(t) => Some(t),
            _ => None,
        })
        .collect();
    if a.outputs.len() > tensors.len() {
        return Err(Failure::Message(format!(
            "{} --output paths given but @{func_name} returned {} tensor(s)",
            a.outputs.len(),
            tensors.len()
        )));
    }
    for (path, t) in a.outputs.iter().zip(&tensors) {
        write_npy(path, t)?;
    }
    if let Some(fmt) = a.stats {
        print_stats(&mut out, fmt, &vm, p.plan.as_ref()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A duration for clap: `30s`, `500ms`, `2m`, `1h`, or a number of seconds (`1.5`).
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (num, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let scale = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => f64::NAN,
    };
    let secs = num.trim().parse::<f64>().map(|v| v * scale);
    match secs {
        Ok(v) if v.is_finite() && v > 0.0 && v < 1e9 => Ok(std::time::Duration::from_secs_f64(v)),
        _ => Err(format!("expected a positive time such as 30s, 500ms, 2m or 1.5, found `{s}`")),
    }
}

/// A byte count for clap: `4096`, `64K`, `16M`, `1G`.
fn parse_byte_size(s: &str) -> Result<u64, String> {
    rxvm_vm::device::parse_size(s)
        .ok_or_else(|| format!("expected a byte count such as 4096, 64K, 16M or 1G, found `{s}`"))
}
