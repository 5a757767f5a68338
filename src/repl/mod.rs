//! `rxvm repl`: step through a program and see every storage, view and kill.
//!
//! A [`Repl`] holds the loaded program, a VM running it under the debugger
//! ([`rxvm_vm::debug`]), breakpoints, and a scratch frame for instructions typed at the
//! prompt. [`Repl::execute`] takes one input line and returns what to print, so the same
//! code serves a terminal (rustyline, in [`term`]), piped input and the tests' transcripts.

pub mod inspect;
pub mod term;

use crate::inputs::parse_input_spec;
use crate::session::{load_program, make_input, render_vm_error, Failure};
use rxvm_vm::bytecode::{FuncId, Instr, Reg};
use rxvm_vm::debug::PausePoint;
use rxvm_vm::memory::{DeviceSpec, Runtime};
use rxvm_vm::module::Module;
use rxvm_vm::types::Type;
use rxvm_vm::value::Value;
use rxvm_vm::{DeviceCaps, Interrupt, Stopped, Vm};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A place or event to stop at.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Break {
    /// A source line of the loaded program.
    Line(u32),
    /// An instruction: a function's entry or a label.
    At(FuncId, usize, String),
    OnAlloc,
    OnKill,
    /// Before the `alloc_storage` that creates storage #`id`. Storage ids count up through
    /// the session (constants, inputs, typed instructions and earlier runs take them), so
    /// once it has a run, `base` (the first id that run could allocate), the breakpoint
    /// keeps its distance from it and moves with it when a `:run` or `:restart` starts
    /// higher.
    OnStorage {
        id: u64,
        base: Option<u64>,
    },
}

impl Break {
    fn describe(&self) -> String {
        match self {
            Break::Line(l) => format!("line {l}"),
            Break::At(_, _, what) => what.clone(),
            Break::OnAlloc => "on alloc".into(),
            Break::OnKill => "on kill".into(),
            Break::OnStorage { id, .. } => format!("on storage {id}"),
        }
    }

    fn hit(&self, m: &Module, p: &PausePoint) -> bool {
        match self {
            Break::Line(l) => m.funcs.get(p.func).is_some_and(|f| f.loc(p.pc).line == *l),
            Break::At(f, pc, _) => p.func == *f && p.pc == *pc,
            Break::OnAlloc => matches!(p.instr, Instr::AllocStorage { .. } | Instr::AllocTensor { .. }),
            Break::OnKill => matches!(p.instr, Instr::Kill { .. }),
            Break::OnStorage { id, .. } => matches!(p.instr, Instr::AllocStorage { .. }) && p.next_storage == *id,
        }
    }
}

/// The loaded program.
struct Loaded {
    module: Arc<Module>,
    /// Source name and text (`.rxa`, or the compiled program of a model).
    source: Option<(String, String)>,
    /// The path it was loaded from.
    name: String,
}

/// Instructions typed at the prompt run in a scratch frame whose registers persist.
#[derive(Default)]
struct Scratch {
    regs: BTreeMap<String, Value>,
    /// Registers dropped by a typed `kill`, with the input line that killed them.
    killed: BTreeMap<String, usize>,
    /// Input lines so far (commands included), to say which line killed a register.
    lines: usize,
}

/// One REPL session.
pub struct Repl {
    loaded: Option<Loaded>,
    vm: Option<Vm>,
    /// A VM for typed instructions when no program is loaded.
    scratch_rt: Option<Rc<Runtime>>,
    breaks: Vec<(usize, Break)>,
    next_break: usize,
    /// The last `:run`, for `:restart`.
    last_run: Option<(String, Vec<String>)>,
    /// The first storage id the current (or last) run could allocate.
    run_base: Option<u64>,
    /// The results of the last run that returned, by name, for `:print` and `:regs`.
    finished: Option<Finished>,
    scratch: Scratch,
    /// Raised by Ctrl-C (see [`term`]): pauses the run before its next instruction.
    interrupt: Interrupt,
    /// True while the program runs (for the Ctrl-C handler: pause it, or else end a piped
    /// session as Ctrl-C always did).
    running: Arc<AtomicBool>,
    /// `--timeout`: each `:run`, `:continue` or `:step` pauses after this long.
    timeout: Option<Duration>,
}

/// A run that returned: its function and results, kept (with the storages they hold) until
/// the next `:run` or `:load`.
struct Finished {
    func: String,
    /// `(names, value)`: `result0`, and the register the function's one `ret` names.
    results: Vec<(Vec<String>, Value)>,
}

/// What a line did.
pub enum Outcome {
    /// Text to print (may be empty).
    Print(String),
    /// `:quit`.
    Quit,
}

/// A command: its names (the first is the full one, the others its short aliases), its
/// usage, and what `:help NAME` says about it.
struct Cmd {
    names: &'static [&'static str],
    usage: &'static str,
    help: &'static str,
}

const COMMANDS: &[Cmd] = &[
    Cmd {
        names: &["load", "l"],
        usage: ":load FILE",
        help: "Load a .rxa, .rxb or .onnx file (a model is compiled with the default plan). \
               If FILE fails to load, the program loaded before is unloaded too: nothing runs \
               until a :load succeeds.",
    },
    Cmd {
        names: &["run", "r"],
        usage: ":run [@FUNC] [NAME=SPEC..]",
        help: "Start FUNC (default @main) and run it to a breakpoint or the end. Inputs take \
               --input specs (x=ramp, x=random:3, x=path.npy, n=5); an input not given gets \
               a ramp tensor or 0. Ctrl-C pauses the run before its next instruction.",
    },
    Cmd {
        names: &["step", "s"],
        usage: ":step [N]",
        help: "Execute N instructions (default 1), stepping into calls.",
    },
    Cmd { names: &["next", "n"], usage: ":next", help: "Execute one instruction, stepping over calls." },
    Cmd {
        names: &["continue", "c"],
        usage: ":continue",
        help: "Run to the next breakpoint or the end (Ctrl-C pauses it).",
    },
    Cmd {
        names: &["break", "b"],
        usage: ":break LINE|LABEL|@FUNC|@FUNC+PC",
        help: "Stop before a source line, a label, a function's entry or its instruction PC, \
               or on alloc|kill|storage N. A line or PC without an instruction is refused. \
               :break on alloc stops before every alloc_storage and alloc_tensor, :break on \
               kill before every kill, and :break on storage N (before the alloc_storage that creates storage #N; ids as :storages shows \
               them, and a breakpoint keeps its place in the run when :run or :restart \
               starts at higher ids). :break alone lists the breakpoints.",
    },
    Cmd { names: &["delete", "d"], usage: ":delete [N]", help: "Delete breakpoint N, or all of them." },
    Cmd {
        names: &["where", "w", "bt"],
        usage: ":where",
        help: "The call stack, innermost first, with the source around the next instruction.",
    },
    Cmd { names: &["restart"], usage: ":restart", help: "Start the last :run again, with the same inputs." },
    Cmd {
        names: &["regs"],
        usage: ":regs",
        help: "Every register of the current frame: null, killed (where), int, shape, storage, \
               view. After a run returned: its results.",
    },
    Cmd {
        names: &["storages"],
        usage: ":storages",
        help: "Live storages: id, device, size, capacity, alignment, scope, views, holders, where created.",
    },
    Cmd {
        names: &["views"],
        usage: ":views",
        help: "Live views: id, holder, storage, offset, type, scope, bytes, image layout, where created.",
    },
    Cmd {
        names: &["mem"],
        usage: ":mem",
        help: "Live and peak bytes per device, and a map of the byte ranges each live view \
               of each storage covers; for a compiled model, also its plan's pools.",
    },
    Cmd {
        names: &["print", "p"],
        usage: ":print %REG [N]",
        help: "A register of the current frame, a result of the finished run or a register of \
               the scratch frame; for a tensor, its first N elements (default 16).",
    },
    Cmd { names: &["plan"], usage: ":plan", help: "For a compiled model, the memory plan: tensor lifetimes and offsets." },
    Cmd { names: &["disasm"], usage: ":disasm [@FUNC]", help: "A function's instructions (default @main)." },
    Cmd {
        names: &["help", "h", "?"],
        usage: ":help [CMD]",
        help: "The commands, or what one of them does (:help break). `help` works without the colon.",
    },
    Cmd { names: &["quit", "q", "exit"], usage: ":quit", help: "End the session (so does Ctrl-D)." },
];

/// The command named `name` (full name or alias).
fn command(name: &str) -> Option<&'static Cmd> {
    COMMANDS.iter().find(|c| c.names.contains(&name))
}

/// `:help`: one line per command, with its aliases.
fn help_all() -> String {
    let mut s = String::new();
    for c in COMMANDS {
        let first = c.help.split(". ").next().unwrap_or(c.help).trim_end_matches('.');
        let aliases: Vec<String> = c.names[1..].iter().map(|a| format!(":{a}")).collect();
        let also = if aliases.is_empty() { String::new() } else { format!(" ({})", aliases.join(", ")) };
        let _ = writeln!(s, "{:<34} {first}{also}", c.usage);
    }
    s.push_str(
        "Anything else is an instruction, executed at once in a scratch frame, e.g.\n  %s = alloc_storage 1024\n\
         :help CMD says more about one command.\n",
    );
    s
}

/// `:help CMD`.
fn help_one(name: &str) -> String {
    let name = name.trim_start_matches(':');
    match command(name) {
        Some(c) => {
            let aliases: Vec<String> = c.names[1..].iter().map(|a| format!(":{a}")).collect();
            let also = if aliases.is_empty() { String::new() } else { format!("\nshort: {}", aliases.join(", ")) };
            format!("{}{also}\n{}\n", c.usage, wrap(c.help, 88))
        }
        None => format!("error: no command `:{name}`{}; :help lists the commands\n", did_you_mean(name)),
    }
}

/// `help` wrapped at `width` columns.
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for w in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + w.len() > width {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(w);
    }
    out.push_str(&line);
    out
}

/// ` (did you mean `:NAME`?)` for the command closest to an unknown one, if one is close.
fn did_you_mean(name: &str) -> String {
    let best = COMMANDS
        .iter()
        .flat_map(|c| c.names.iter().map(move |n| (c.names[0], *n)))
        .filter(|(_, n)| n.len() > 1)
        .map(|(full, n)| (edit_distance(name, n), full))
        .min();
    match best {
        // One edit in a short word, two in a longer one; a prefix of a command counts too.
        Some((d, full)) if d <= if name.len() > 4 { 2 } else { 1 } => format!(" (did you mean `:{full}`?)"),
        _ => match COMMANDS.iter().find(|c| name.len() >= 2 && c.names[0].starts_with(name)) {
            Some(c) => format!(" (did you mean `:{}`?)", c.names[0]),
            None => String::new(),
        },
    }
}

/// Levenshtein distance (with transpositions counted as one edit).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

impl Default for Repl {
    fn default() -> Self {
        Repl::new()
    }
}

impl Repl {
    pub fn new() -> Repl {
        Repl {
            loaded: None,
            vm: None,
            scratch_rt: None,
            breaks: Vec::new(),
            next_break: 1,
            last_run: None,
            run_base: None,
            finished: None,
            scratch: Scratch::default(),
            interrupt: Interrupt::new(),
            running: Arc::new(AtomicBool::new(false)),
            timeout: None,
        }
    }

    /// The flag Ctrl-C raises: a run in progress pauses before its next instruction.
    pub fn interrupt_handle(&self) -> Interrupt {
        self.interrupt.clone()
    }

    /// True while the program runs: Ctrl-C then pauses it.
    pub fn running_handle(&self) -> Arc<AtomicBool> {
        self.running.clone()
    }

    /// Pauses each `:run`, `:continue` or `:step` after `t` (`None`: no limit).
    pub fn set_timeout(&mut self, t: Option<Duration>) {
        self.timeout = t;
        if let Some(vm) = &mut self.vm {
            vm.limits.timeout = t;
        }
    }

    /// Names for tab completion: commands, function names, labels and live registers.
    pub fn completions(&self) -> Vec<String> {
        let mut v: Vec<String> = COMMANDS.iter().map(|c| format!(":{}", c.names[0])).collect();
        if let Some(l) = &self.loaded {
            for f in l.module.funcs.values() {
                v.push(format!("@{}", f.name));
                v.extend(f.debug.labels.iter().map(|(_, n)| n.clone()));
            }
        }
        if let (Some(vm), Some(l)) = (&self.vm, &self.loaded) {
            if let Some(top) = vm.debug_frames().last() {
                let f = &l.module.funcs[top.func];
                for r in 0..f.num_regs {
                    if matches!(vm.debug_reg(vm.debug_frames().len() - 1, Reg(r)), Some(v) if v.kind().is_some()) {
                        v.push(format!("%{}", f.reg_name(Reg(r))));
                    }
                }
            }
        }
        v.extend(self.scratch.regs.keys().map(|n| format!("%{n}")));
        v.sort();
        v.dedup();
        v
    }

    /// Loads a program (replacing any loaded one).
    pub fn load(&mut self, path: &Path) -> Outcome {
        let p = match load_program(path) {
            Ok(p) => p,
            Err(e) => {
                let mut t = match e {
                    Failure::Message(m) => format!("error: {m}\n"),
                    Failure::Rendered(t) => t,
                };
                // What runs next must not be an older program the user meant to replace.
                if let Some(old) = self.unload() {
                    let _ =
                        writeln!(t, "unloaded {old}: nothing is loaded now; fix {} and :load it again", path.display());
                }
                return Outcome::Print(t);
            }
        };
        let module = Arc::new(p.module);
        let mut vm =
            match self.scratch_runtime().and_then(|rt| Vm::with_runtime(module.clone(), rt).map_err(|e| e.to_string()))
            {
                Ok(vm) => vm,
                Err(e) => return Outcome::Print(format!("error: {e}\n")),
            };
        // `@vm.print` output goes into the transcript, after the command that caused it.
        vm.capture_output();
        vm.limits.interrupt = Some(self.interrupt.clone());
        vm.limits.timeout = self.timeout;
        let funcs: Vec<String> = module.funcs.values().map(|f| format!("@{}", f.name)).collect();
        let out = format!("loaded {}: module `{}`, functions {}\n", path.display(), module.name, funcs.join(", "));
        self.unload();
        self.loaded = Some(Loaded { module, source: p.source, name: path.display().to_string() });
        self.vm = Some(vm);
        Outcome::Print(out)
    }

    /// Drops the loaded program, its run, results and breakpoints; returns its name.
    fn unload(&mut self) -> Option<String> {
        self.vm = None;
        self.finished = None;
        self.breaks.clear();
        self.last_run = None;
        self.run_base = None;
        self.loaded.take().map(|l| l.name)
    }

    /// The runtime every VM of the session shares, so typed instructions and the program
    /// see the same storages.
    fn scratch_runtime(&mut self) -> Result<Rc<Runtime>, String> {
        if let Some(rt) = &self.scratch_rt {
            return Ok(rt.clone());
        }
        let rt = Runtime::new(vec![DeviceSpec::Host(DeviceCaps::host())])?;
        // `:storages`, `:views` and `:mem` list the live objects.
        rt.objects.track.set(true);
        self.scratch_rt = Some(rt.clone());
        Ok(rt)
    }

    /// Executes one input line.
    pub fn execute(&mut self, line: &str) -> Outcome {
        self.scratch.lines += 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with(';') {
            return Outcome::Print(String::new());
        }
        // `help` needs no colon: it is no instruction, and what a newcomer types first.
        let bare_help = line == "help" || line.starts_with("help ");
        let Some(cmd) = line.strip_prefix(':').or(if bare_help { Some(line) } else { None }) else {
            return Outcome::Print(self.typed_instruction(line));
        };
        let mut words = cmd.split_whitespace();
        let name = words.next().unwrap_or("");
        let rest: Vec<&str> = words.collect();
        let text = match name {
            "q" | "quit" | "exit" => return Outcome::Quit,
            "h" | "help" | "?" => match rest.first() {
                None => help_all(),
                Some(c) => help_one(c),
            },
            "load" | "l" => match rest.first() {
                Some(p) => return self.load(Path::new(p)),
                None => "error: :load needs a file\n".into(),
            },
            "run" | "r" => self.run(&rest),
            "restart" => match self.last_run.clone() {
                Some((f, args)) => {
                    let mut all = vec![f.as_str()];
                    all.extend(args.iter().map(String::as_str));
                    self.run(&all)
                }
                None => "error: nothing to restart; use :run first\n".into(),
            },
            "step" | "s" => match rest.first().map(|n| n.parse::<u64>()) {
                None => self.resume(|p| p.executed >= 1, true),
                Some(Ok(n)) if n > 0 => self.resume(move |p| p.executed >= n, true),
                Some(_) => format!("error: :step takes a positive count, found `{}`\n", rest[0]),
            },
            "next" | "n" => {
                let depth = self.vm.as_ref().map_or(0, |vm| vm.debug_frames().len().saturating_sub(1));
                self.resume(move |p| p.executed >= 1 && p.depth <= depth, true)
            }
            "continue" | "c" => self.resume(|_| false, true),
            "break" | "b" => self.add_break(&rest),
            "delete" | "d" => self.delete_break(&rest),
            "where" | "w" | "bt" => self.where_(),
            "regs" => self.regs(),
            "storages" => self.with_vm(inspect::storages),
            "views" => self.with_vm(inspect::views),
            "mem" => {
                let mut t = self.with_vm(inspect::mem);
                t.push_str(&self.pools());
                t
            }
            "print" | "p" => self.print(&rest),
            "plan" => self.plan(),
            "disasm" => self.disasm(rest.first().copied()),
            other => format!("error: unknown command `:{other}`{}; :help lists the commands\n", did_you_mean(other)),
        };
        Outcome::Print(text)
    }

    /// Runs an inspection on the program's VM, or with nothing loaded on an empty one over
    /// the session's runtime (where typed instructions allocate).
    fn with_vm(&mut self, f: impl Fn(&Vm, &[(String, Value)]) -> String) -> String {
        let mut scratch: Vec<(String, Value)> = self.scratch.regs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        // The finished run's results hold their storages too.
        if let Some(f) = &self.finished {
            scratch.extend(f.results.iter().filter_map(|(n, v)| Some((n.last()?.clone(), v.clone()))));
        }
        if let Some(vm) = &self.vm {
            return f(vm, &scratch);
        }
        match self
            .scratch_runtime()
            .and_then(|rt| Vm::with_runtime(Arc::new(Module::default()), rt).map_err(|e| e.to_string()))
        {
            Ok(vm) => f(&vm, &scratch),
            Err(e) => format!("error: {e}\n"),
        }
    }

    /// `:regs`: the current frame's registers; after a run returned, its results.
    fn regs(&self) -> String {
        match (&self.vm, &self.finished) {
            (Some(vm), _) if vm.debug_active() => inspect::regs(vm, vm.debug_frames().len().saturating_sub(1)),
            (Some(_), Some(done)) => {
                let mut s = format!("{} returned; its frame is gone, its results are kept:\n", done.func);
                if done.results.is_empty() {
                    s.push_str("  (no results)\n");
                }
                for (names, v) in &done.results {
                    let _ = writeln!(s, "  %{} = {}", names.join(" = %"), show_value(v));
                }
                s
            }
            _ => "nothing is running; :run a function first\n".into(),
        }
    }

    fn run(&mut self, args: &[&str]) -> String {
        let (Some(l), Some(vm)) = (&self.loaded, &mut self.vm) else {
            return "error: nothing loaded; :load a program first\n".into();
        };
        let (func, specs) = match args.first() {
            Some(f) if f.starts_with('@') => (f.to_string(), &args[1..]),
            _ => ("@main".to_string(), args),
        };
        let Some(id) = l.module.func_by_name(&func) else {
            let names: Vec<String> = l.module.funcs.values().map(|f| format!("@{}", f.name)).collect();
            return format!("error: no function {func}; the functions are: {}\n", names.join(", "));
        };
        let f = &l.module.funcs[id];
        let mut host = Vec::new();
        let mut given: BTreeMap<String, crate::inputs::InputSpec> = BTreeMap::new();
        for s in specs {
            match parse_input_spec(s) {
                Ok((n, spec)) => {
                    given.insert(n, spec);
                }
                Err(e) => return format!("error: {e}\n"),
            }
        }
        for (i, t) in f.params.iter().enumerate() {
            if matches!(t, Type::Storage) {
                continue;
            }
            let name = f.reg_name(Reg(i as u32));
            let spec = given.remove(&name).unwrap_or(match t {
                Type::Tensor { .. } => crate::inputs::InputSpec::Ramp,
                Type::Float => crate::inputs::InputSpec::Float(0.0),
                _ => crate::inputs::InputSpec::Int(0),
            });
            match make_input(f, i, &spec) {
                Ok(v) => host.push(v),
                Err(e) => return format!("error: {e}\n"),
            }
        }
        if let Some(extra) = given.keys().next() {
            return format!("error: {func} has no parameter %{extra}\n");
        }
        let vals = match vm.host_args(id, &host, &[]) {
            Ok(v) => v,
            Err(e) => return format!("error: {e}\n"),
        };
        self.finished = None;
        if let Err(e) = vm.debug_start(id, vals) {
            return format!("error: {e}\n");
        }
        self.last_run = Some((func.clone(), specs.iter().map(|s| s.to_string()).collect()));
        let mut out = format!("started {func}\n");
        // Storage ids count up through the session: move each storage breakpoint by as
        // much as this run starts above the ids it was set against.
        let base = vm.runtime().objects.next_storage_id();
        self.run_base = Some(base);
        for (n, b) in &mut self.breaks {
            let Break::OnStorage { id, base: old } = b else { continue };
            if let Some(old) = *old {
                let new = id.saturating_sub(old).saturating_add(base);
                if new != *id {
                    let _ = writeln!(
                        out,
                        "breakpoint {n} (on storage {id}) moves to storage {new}, the same allocation in this run"
                    );
                    *id = new;
                }
            } else if *id < base {
                // Left unbased: it is said again at the next run, and never moves onto an
                // allocation it was not set for.
                let _ = writeln!(
                    out,
                    "breakpoint {n} (on storage {id}) cannot fire: storage #{id} was created before this run \
                     (an input, a constant or a typed instruction); this run's first alloc_storage creates #{base}"
                );
                continue;
            }
            *old = Some(base);
        }
        out.push_str(&self.resume_from(|_| false, true, true));
        out
    }

    /// Resumes the run until `stop` (and, with `breakpoints`, any breakpoint) holds.
    fn resume(&mut self, stop: impl FnMut(&PausePoint) -> bool, breakpoints: bool) -> String {
        self.resume_from(stop, breakpoints, false)
    }

    /// [`Repl::resume`]; `fresh` for a run that has not executed anything yet, where a
    /// breakpoint on the first instruction counts (after a pause it would stop again at
    /// once).
    fn resume_from(&mut self, mut stop: impl FnMut(&PausePoint) -> bool, breakpoints: bool, fresh: bool) -> String {
        let (Some(l), Some(vm)) = (&self.loaded, &mut self.vm) else {
            return "error: nothing loaded; :load a program first\n".into();
        };
        if !vm.debug_active() {
            return "nothing is running; :run a function first\n".into();
        }
        let module = l.module.clone();
        let breaks = &self.breaks;
        let mut hit: Option<usize> = None;
        // A Ctrl-C pressed while nothing ran is not for this run.
        self.interrupt.clear();
        self.running.store(true, Ordering::SeqCst);
        let r = vm.debug_resume(&mut |p| {
            if stop(p) {
                return true;
            }
            if breakpoints && (fresh || p.executed > 0) {
                if let Some((n, _)) = breaks.iter().find(|(_, b)| b.hit(&module, p)) {
                    hit = Some(*n);
                    return true;
                }
            }
            false
        });
        self.running.store(false, Ordering::SeqCst);
        let printed = vm.take_output();
        let text = match r {
            Ok(None) => {
                let why = match (vm.debug_stopped_by(), hit) {
                    (Some(Stopped::Interrupted), _) => ", interrupted (Ctrl-C); :continue resumes".to_string(),
                    (Some(t @ Stopped::TimedOut(_)), _) => format!(", {t}; :continue resumes"),
                    (None, hit) => hit
                        .and_then(|n| self.breaks.iter().find(|(k, _)| *k == n))
                        .map(|(n, b)| format!(", breakpoint {n} ({})", b.describe()))
                        .unwrap_or_default(),
                };
                let mut s = self.location(&why);
                s.push_str(&self.context(2));
                s
            }
            Ok(Some(values)) => {
                let entry = self.last_run.as_ref().map_or("@main".to_string(), |(f, _)| f.clone());
                let names = module.func_by_name(&entry).map(|id| result_names(&module, id)).unwrap_or_default();
                let mut s = String::from("returned");
                let mut results = Vec::new();
                for (i, v) in values.into_iter().enumerate() {
                    let mut n = vec![format!("result{i}")];
                    let reg = names.get(i).cloned().flatten();
                    let shown = reg.as_ref().map_or(String::new(), |r| format!(" (%{r})"));
                    let _ = write!(s, "\n  result {i}{shown}: {}", show_value(&v));
                    n.extend(reg);
                    results.push((n, v));
                }
                if !results.is_empty() {
                    s.push_str("\n(kept for :print, :regs and :mem until the next :run)");
                }
                s.push('\n');
                self.finished = Some(Finished { func: entry, results });
                s
            }
            Err(e) => {
                let mut s = render_vm_error(&e, l.source.as_ref());
                s.push_str("the run stopped here; :regs, :mem and :where show its state, :restart runs it again\n");
                s
            }
        };
        format!("{printed}{text}")
    }

    /// `stopped at @f+pc (line L)` for the innermost frame.
    fn location(&self, why: &str) -> String {
        let (Some(l), Some(vm)) = (&self.loaded, &self.vm) else { return String::new() };
        let Some(top) = vm.debug_frames().last().copied() else { return String::new() };
        let f = &l.module.funcs[top.func];
        let line = f.loc(top.pc).line;
        let at = if line > 0 { format!(" (line {line})") } else { String::new() };
        format!("stopped at @{}+{}{at}{why}\n", f.name, top.pc)
    }

    /// The next instruction with `n` source lines around it (or its disassembly).
    fn context(&self, n: u32) -> String {
        let (Some(l), Some(vm)) = (&self.loaded, &self.vm) else { return String::new() };
        let Some(top) = vm.debug_frames().last().copied() else { return String::new() };
        let f = &l.module.funcs[top.func];
        let line = f.loc(top.pc).line;
        if let (Some((_, text)), true) = (&l.source, line > 0) {
            let lines: Vec<&str> = text.lines().collect();
            let lo = line.saturating_sub(n).max(1);
            let hi = (line + n).min(lines.len() as u32);
            let mut s = String::new();
            for k in lo..=hi {
                let mark = if k == line { "=>" } else { "  " };
                let _ = writeln!(s, "{mark} {k:>4} | {}", lines.get(k as usize - 1).unwrap_or(&""));
            }
            return s;
        }
        match rxvm_asm::printer::print_instr(&l.module, f, top.pc) {
            Some(i) => format!("=> {i}\n"),
            None => String::new(),
        }
    }

    fn where_(&self) -> String {
        let (Some(l), Some(vm)) = (&self.loaded, &self.vm) else {
            return "nothing loaded; :load a program first\n".into();
        };
        let frames = vm.debug_frames();
        if frames.is_empty() {
            return "nothing is running; :run a function first\n".into();
        }
        let mut s = String::new();
        for (k, fr) in frames.iter().rev().enumerate() {
            let f = &l.module.funcs[fr.func];
            let line = f.loc(fr.pc).line;
            let ins = rxvm_asm::printer::print_instr(&l.module, f, fr.pc).unwrap_or_default();
            let at = if line > 0 { format!(" line {line}") } else { String::new() };
            let _ = writeln!(s, "#{k} @{}+{}{at}: {ins}", f.name, fr.pc);
        }
        if let Some(fault) = vm.debug_fault() {
            let _ = writeln!(s, "stopped by an error: {fault}");
        }
        s.push_str(&self.context(2));
        s
    }

    fn add_break(&mut self, args: &[&str]) -> String {
        if args.is_empty() {
            if self.breaks.is_empty() {
                return "no breakpoints\n".into();
            }
            return self.breaks.iter().map(|(n, b)| format!("{n}: {}\n", b.describe())).collect();
        }
        let b = match args {
            ["on", "alloc"] => Break::OnAlloc,
            ["on", "kill"] => Break::OnKill,
            ["on", "storage", n] => match n.trim_start_matches('#').parse::<u64>() {
                Ok(id) => match self.storage_break(id) {
                    Ok(b) => b,
                    Err(e) => return format!("error: {e}\n"),
                },
                Err(_) => return format!("error: :break on storage takes a storage id, found `{n}`\n"),
            },
            [one] => match self.resolve_place(one) {
                Ok(b) => b,
                Err(e) => return format!("error: {e}\n"),
            },
            _ => return "error: expected :break LINE|LABEL|@FUNC|@FUNC+PC|on alloc|on kill|on storage N\n".into(),
        };
        let n = self.next_break;
        self.next_break += 1;
        let s = format!("breakpoint {n}: {}\n", b.describe());
        self.breaks.push((n, b));
        s
    }

    /// `:break on storage ID`, refused when storage #ID exists or existed already.
    fn storage_break(&self, id: u64) -> Result<Break, String> {
        let Some(vm) = &self.vm else { return Err("nothing loaded; :load a program first".into()) };
        let next = vm.runtime().objects.next_storage_id();
        if id < next {
            return Err(format!(
                "storage #{id} was created already; ids count up through the session (constants, inputs, \
                 typed instructions and earlier runs take them), and the next storage will be #{next}"
            ));
        }
        // Set during a run: relative to the run's first id; outside one, absolute until a run.
        let base = if vm.debug_active() { self.run_base } else { None };
        Ok(Break::OnStorage { id, base })
    }

    fn resolve_place(&self, what: &str) -> Result<Break, String> {
        let Some(l) = &self.loaded else { return Err("nothing loaded; :load a program first".into()) };
        if let Ok(line) = what.parse::<u32>() {
            return line_break(&l.module, line);
        }
        if let Some((func, pc)) = what.strip_prefix('@').and_then(|w| w.split_once('+')) {
            let Some(id) = l.module.func_by_name(func) else {
                return Err(format!("no function @{func}"));
            };
            let f = &l.module.funcs[id];
            return match pc.parse::<usize>() {
                Ok(pc) if pc < f.code.len() => Ok(Break::At(id, pc, format!("@{func}+{pc}"))),
                _ => Err(format!(
                    "@{func} has no instruction `{pc}`: its instructions are @{func}+0 to @{func}+{}",
                    f.code.len().saturating_sub(1)
                )),
            };
        }
        if let Some(id) = what.strip_prefix('@').and_then(|n| l.module.func_by_name(n)) {
            return Ok(Break::At(id, 0, format!("@{}", l.module.funcs[id].name)));
        }
        for (id, f) in l.module.funcs.iter() {
            if let Some((pc, name)) = f.debug.labels.iter().find(|(_, n)| n == what) {
                return Ok(Break::At(id, *pc as usize, format!("label {name} in @{}", f.name)));
            }
        }
        Err(format!(
            "`{what}` is not a line number, a function (@name), an instruction (@name+pc) or a label of the program"
        ))
    }

    fn delete_break(&mut self, args: &[&str]) -> String {
        match args.first() {
            None => {
                let n = self.breaks.len();
                self.breaks.clear();
                format!("deleted {n} breakpoint(s)\n")
            }
            Some(k) => match k.parse::<usize>() {
                Ok(k) if self.breaks.iter().any(|(n, _)| *n == k) => {
                    self.breaks.retain(|(n, _)| *n != k);
                    format!("deleted breakpoint {k}\n")
                }
                _ => format!("error: no breakpoint `{k}`\n"),
            },
        }
    }

    fn print(&self, args: &[&str]) -> String {
        let Some(name) = args.first().and_then(|a| a.strip_prefix('%')) else {
            return "error: :print takes a register, e.g. :print %x 8\n".into();
        };
        let n = match args.get(1).map(|s| s.parse::<usize>()) {
            None => 16,
            Some(Ok(n)) => n,
            Some(Err(_)) => return format!("error: :print takes an element count, found `{}`\n", args[1]),
        };
        let value = self.lookup(name);
        match value {
            None => format!("error: no register %{name} in the current frame or the scratch frame\n"),
            Some(Value::Tensor(v)) => match rxvm_vm::interp::tensor_to_host(&v) {
                Ok(t) => {
                    let vals = t.to_f64();
                    let shown: Vec<String> = vals.iter().take(n).map(|x| format!("{x}")).collect();
                    let more = if vals.len() > n { format!(", ... ({} more)", vals.len() - n) } else { String::new() };
                    format!("%{name} = {} [{}{more}]\n", show_value(&Value::Tensor(v)), shown.join(", "))
                }
                Err(e) => format!("error: reading %{name}: {e}\n"),
            },
            Some(v) => format!("%{name} = {}\n", show_value(&v)),
        }
    }

    /// A register of the innermost frame, else of the scratch frame.
    fn lookup(&self, name: &str) -> Option<Value> {
        if let (Some(l), Some(vm)) = (&self.loaded, &self.vm) {
            let frames = vm.debug_frames();
            if let Some(top) = frames.last() {
                let f = &l.module.funcs[top.func];
                for r in 0..f.num_regs {
                    if f.reg_name(Reg(r)) == name {
                        return vm.debug_reg(frames.len() - 1, Reg(r)).cloned();
                    }
                }
            }
        }
        if let Some(done) = &self.finished {
            if let Some((_, v)) = done.results.iter().find(|(n, _)| n.iter().any(|n| n == name)) {
                return Some(v.clone());
            }
        }
        self.scratch.regs.get(name).cloned()
    }

    /// For a compiled model, each pool of its plan and the storage that holds it now.
    fn pools(&self) -> String {
        let Some(Loaded { source: Some((_, text)), .. }) = &self.loaded else { return String::new() };
        let mut s = String::new();
        for line in text.lines().take_while(|l| l.starts_with(';')) {
            let Some(rest) = line.strip_prefix("; pool `") else { continue };
            let Some((name, after)) = rest.split_once("`: ") else { continue };
            let bytes = after.split(' ').next().unwrap_or("?");
            let now = match self.lookup(name) {
                Some(Value::Storage(st)) => format!("live as storage #{}", st.id),
                _ => "not allocated now".to_string(),
            };
            let _ = writeln!(s, "pool `{name}`: {bytes} B planned, {now}");
        }
        s
    }

    fn plan(&self) -> String {
        let Some(l) = &self.loaded else { return "nothing loaded; :load a program first\n".into() };
        match &l.source {
            Some((_, text)) if text.starts_with("; memory plan") => {
                text.lines().take_while(|l| l.starts_with(';')).map(|l| format!("{l}\n")).collect()
            }
            _ => "the loaded program has no memory plan (compile a model: :load MODEL.onnx)\n".into(),
        }
    }

    fn disasm(&self, func: Option<&str>) -> String {
        let Some(l) = &self.loaded else { return "nothing loaded; :load a program first\n".into() };
        let text = rxvm_asm::disassemble(&l.module);
        let name = func.map_or("@main".to_string(), |f| format!("@{}", f.trim_start_matches('@')));
        let head = format!("func {name}(");
        match text.find(&head) {
            Some(i) => {
                let body = &text[i..];
                let end = body.find("\n}\n").map_or(body.len(), |e| e + 3);
                body[..end].to_string()
            }
            None => format!("error: no function {name}\n"),
        }
    }

    /// Runs one typed instruction in the scratch frame: its registers persist from line to
    /// line, and errors (bad syntax, use after kill, an out-of-bounds view) are reported
    /// without ending the session.
    fn typed_instruction(&mut self, line: &str) -> String {
        let input = self.scratch.lines;
        // A killed register used again: the VM's message, with where it was killed.
        for (name, at) in &self.scratch.killed {
            if mentions(line, name) && !self.scratch.regs.contains_key(name) {
                return format!(
                    "error: use of %{name} after `kill`\n  = note: %{name} was killed by input line {at}\n"
                );
            }
        }
        let params: Vec<(String, &'static str)> = self
            .scratch
            .regs
            .iter()
            .filter(|(n, _)| mentions(line, n))
            .map(|(n, v)| (n.clone(), kind_type(v)))
            .collect();
        let header: Vec<String> = params.iter().map(|(n, t)| format!("%{n}: {t}")).collect();
        let src = format!("func @scratch({}) {{\n  {line}\n  ret\n}}\n", header.join(", "));
        let module = match rxvm_asm::assemble(&src, "<input>") {
            Ok(m) => Arc::new(m),
            Err(d) => return d.render(),
        };
        let rt = match &self.vm {
            Some(vm) => Ok(vm.runtime().clone()),
            None => self.scratch_runtime(),
        };
        let rt = match rt {
            Ok(rt) => rt,
            Err(e) => return format!("error: {e}\n"),
        };
        let mut vm = match Vm::with_runtime(module.clone(), rt) {
            Ok(vm) => vm,
            Err(e) => return format!("error: {e}\n"),
        };
        vm.mark_prompt();
        let id = FuncId(0);
        let args: Vec<Value> = params.iter().filter_map(|(n, _)| self.scratch.regs.get(n).cloned()).collect();
        if let Err(e) = vm.debug_start_exact(id, args) {
            return format!("error: {e}\n");
        }
        let f = &module.funcs[FuncId(0)];
        let ret_pc = f.code.len().saturating_sub(1);
        let source = Some(("<input>".to_string(), src.clone()));
        match vm.debug_resume(&mut |p| p.pc == ret_pc) {
            Ok(_) => {}
            Err(e) => return render_vm_error(&e, source.as_ref()),
        }
        let mut out = String::new();
        for r in 0..f.num_regs {
            let name = f.reg_name(Reg(r));
            match vm.debug_reg(0, Reg(r)) {
                Some(Value::Killed(_)) => {
                    self.scratch.regs.remove(&name);
                    self.scratch.killed.insert(name.clone(), input);
                    let _ = writeln!(out, "%{name} killed");
                }
                Some(v) if v.kind().is_some() => {
                    let new = (r as usize) >= params.len();
                    if new {
                        self.scratch.killed.remove(&name);
                        let _ = writeln!(out, "%{name} = {}", show_value(v));
                    }
                    self.scratch.regs.insert(name, v.clone());
                }
                _ => {}
            }
        }
        vm.debug_abort();
        out
    }
}

/// `:break LINE`: refused unless an instruction is on that line; the error names the
/// closest lines that have one.
fn line_break(m: &Module, line: u32) -> Result<Break, String> {
    let lines: std::collections::BTreeSet<u32> =
        m.funcs.values().flat_map(|f| (0..f.code.len()).map(|pc| f.loc(pc).line)).filter(|l| *l > 0).collect();
    if lines.contains(&line) {
        return Ok(Break::Line(line));
    }
    let (Some(first), Some(last)) = (lines.first(), lines.last()) else {
        return Err("the program has no line information (a stripped .rxb or a compiled model): \
                    break at @FUNC+PC, a function or a label"
            .into());
    };
    let before = lines.range(..line).next_back();
    let after = lines.range(line..).next();
    let near = match (before, after) {
        (Some(b), Some(a)) => format!(", the nearest on lines {b} and {a}"),
        _ => String::new(),
    };
    Err(format!("no instruction on line {line}: instructions are on lines {first} to {last}{near}"))
}

/// For each result of function `id`, the register its `ret` returns, when every `ret` of
/// the function returns the same register there.
fn result_names(m: &Module, id: FuncId) -> Vec<Option<String>> {
    let f = &m.funcs[id];
    let mut names: Vec<Option<String>> = Vec::new();
    let mut first = true;
    for ins in &f.code {
        let Instr::Ret { list, nvals } = *ins else { continue };
        let regs: Vec<Option<String>> =
            f.args[list as usize..][..nvals as usize].iter().map(|a| a.as_reg().map(|r| f.reg_name(r))).collect();
        if first {
            names = regs;
            first = false;
        } else {
            for (n, r) in names.iter_mut().zip(regs) {
                if *n != r {
                    *n = None;
                }
            }
        }
    }
    names
}

/// Whether `%name` occurs in `line` as a whole register name.
fn mentions(line: &str, name: &str) -> bool {
    let pat = format!("%{name}");
    line.match_indices(&pat).any(|(i, _)| {
        line[i + pat.len()..].chars().next().is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '.'))
    })
}

/// The parameter type that admits a value.
fn kind_type(v: &Value) -> &'static str {
    match v {
        Value::Int(_) => "int",
        Value::Float(_) => "float",
        Value::Shape(_) => "shape",
        Value::Storage(_) => "storage",
        _ => "tensor",
    }
}

/// A register value in one line.
pub fn show_value(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Killed(at) => format!("killed (at instruction {at})"),
        Value::Int(i) => format!("int {i}"),
        Value::Float(f) => format!("float {f:?}"),
        Value::Shape(s) => format!("shape {:?}", &s[..]),
        Value::Storage(s) => format!("storage #{} ({} B, device {})", s.id, s.size, s.device),
        Value::Slice(..) => match v.materialized() {
            Ok(t) => show_value(&t),
            Err(e) => format!("tensor ({e})"),
        },
        Value::Tensor(t) => {
            let scope = if t.scope.is_texture() { format!(" \"{}\"", t.scope) } else { String::new() };
            format!("tensor #{} {}{:?}{scope} at storage #{} +{}", t.id, t.dtype, &t.shape[..], t.storage.id, t.offset)
        }
    }
}

/// Runs a whole script (one input per line) and returns the transcript: each input line
/// after `> `, then its output. Stops at `:quit`.
pub fn transcript(repl: &mut Repl, script: &str) -> String {
    let mut out = String::new();
    for line in script.lines() {
        let _ = writeln!(out, "> {line}");
        match repl.execute(line) {
            Outcome::Print(t) => out.push_str(&t),
            Outcome::Quit => break,
        }
    }
    out
}
