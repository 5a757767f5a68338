//! Every complete program in the documentation (fenced as ```rxa) assembles and runs on the
//! host device, so the docs cannot drift from the implementation. Examples whose `@main`
//! takes storage parameters get them from the VM, sized by the code (`docs/memory.md`).

use rxvm::asm::assemble;
use rxvm::vm::types::{Dim, Type};
use rxvm::vm::{HostTensor, HostValue, Vm};
use std::path::Path;
use std::sync::Arc;

fn rxa_blocks(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match &mut cur {
            None if line.trim_start() == "```rxa" => cur = Some((i + 1, String::new())),
            Some(_) if line.trim_start() == "```" => out.extend(cur.take()),
            Some((_, s)) => {
                s.push_str(line);
                s.push('\n');
            }
            None => {}
        }
    }
    out
}

fn default_input(t: &Type) -> HostValue {
    match t {
        Type::Int => HostValue::Int(3),
        Type::Float => HostValue::Float(1.5),
        Type::Shape => HostValue::Shape(vec![2, 2]),
        Type::Tensor { dtype, dims } => {
            let shape: Vec<i64> = dims.iter().map(|d| if let Dim::Known(v) = d { *v } else { 2 }).collect();
            HostValue::Tensor(HostTensor::random(*dtype, &shape, 1).expect("input"))
        }
        other => panic!("a documented example takes a {other} parameter; use int, float, shape, tensor or storage"),
    }
}

#[test]
fn documented_programs_assemble_and_run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut total = 0;
    let mut docs: Vec<String> = vec!["README.md".into()];
    for e in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "md") {
            docs.push(format!("docs/{}", p.file_name().and_then(|n| n.to_str()).expect("utf-8 name")));
        }
    }
    docs.sort();
    for doc in &docs {
        let text = std::fs::read_to_string(root.join(doc)).expect("readable doc");
        for (line, src) in rxa_blocks(&text) {
            let name = format!("{doc}:{line}");
            // A block headed `; examples/NAME.rxa` quotes that file: the same code, whatever
            // the comments and spacing.
            if let Some(file) =
                src.lines().next().and_then(|l| l.trim().strip_prefix("; ")).filter(|f| f.starts_with("examples/"))
            {
                let code = |s: &str| -> Vec<String> {
                    s.lines()
                        .map(|l| l.split(';').next().unwrap_or("").split_whitespace().collect::<Vec<_>>().join(" "))
                        .filter(|l| !l.is_empty())
                        .collect()
                };
                let quoted = std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{name}: {file}: {e}"));
                assert_eq!(code(&src), code(&quoted), "{name} quotes {file} but its code differs");
            }
            let m = assemble(&src, &name).unwrap_or_else(|d| panic!("{name}:\n{}", d.render()));
            let m = Arc::new(m);
            let Some(fid) = m.func_by_name("main") else { panic!("{name}: a complete example has @main") };
            // Storage parameters are left to the VM, which allocates what the code needs.
            let args: Vec<HostValue> =
                m.funcs[fid].params.iter().filter(|t| !matches!(t, Type::Storage)).map(default_input).collect();
            let mut vm = Vm::host(m).expect("vm");
            vm.capture_output();
            vm.invoke("main", &args).unwrap_or_else(|e| panic!("{name}: {e}"));
            total += 1;
        }
    }
    assert!(total >= 10, "only {total} runnable examples in the docs");
}

// ---------------------------------------------------------------------------------------
// Shell blocks
// ---------------------------------------------------------------------------------------
//
// Every shell block (```sh, ```bash, ```shell or ```console) of README.md and docs/*.md is
// run, so a command pasted from the docs works. The conventions, which the docs follow:
//
// - **Not run.** A block whose info string is `sh no-run: REASON` is not run, and REASON
//   (not empty) says why: it sets up the machine, downloads, takes minutes, needs nightly
//   or root, or runs the test suite itself. Every other shell block is run.
// - **How a block runs.** Each block runs as one `bash` script in a fresh directory of its
//   own, holding a copy of `examples/` and links to `tests/` and `.cache/`, with `rxvm` on
//   `PATH` as the binary under test and `D` set to the light model zoo
//   (`.cache/onnx/wheel/onnx/backend/test/data/light`), as the README defines it. A
//   `console` block's commands are its `$ ` lines. A command continues onto the next line
//   after a trailing `\`.
// - **Mapped commands.** `cargo run --release --` and `cargo run --` become `rxvm`, as do
//   `target/release/rxvm` and `target/debug/rxvm`; `cargo build` is a no-op (cargo built
//   the binary under test before the test started). Any other `cargo`, `source`, `rustup`,
//   `sudo` or `apt-get` command, or one that names a script of `scripts/`, in a block that
//   is run is an error: mark the block `no-run`.
// - **Exit status.** Each command must exit with 0, except one whose trailing comment
//   begins with `refused` (`rxvm run ... # refused: why`) or, in a `console` block, whose
//   shown output has a line beginning with `error:`: that one must exit with 1, an error
//   the tool reports, not a crash.
// - **Output.** A ```text output block that directly follows a shell block (blank lines
//   between are allowed) shows its output, and so do the lines under each `$ ` command of
//   a `console` block: each shown line must appear in the block's standard output and
//   error, in that order. A line `...` stands for any lines, `...` within a line for any
//   text, and a shown line may be part of an output line (trailing blanks are trimmed).
// - **Programs above.** A block that directly follows an ```rxa or ```rxa-bad block finds
//   that program in each `NAME.rxa` (no directory) its commands name that does not exist
//   (`$ rxvm check bad.rxa` under a bad example).
// - **What a command needs.** A command that names `$D` or `.cache/onnx` needs the ONNX
//   test data (scripts/fetch-onnx-data.sh); without it the command is skipped with a
//   message, unless `RXVM_REQUIRE_ONNX_DATA` is set, which makes it a failure. A command
//   with `--device opencl:NAME` needs that OpenCL platform (`--device opencl`: any), and
//   is skipped without it unless `RXVM_REQUIRE_OPENCL` names it (any platform, for a bare
//   `--device opencl`).

/// A fenced block of a markdown file.
#[derive(Debug)]
struct Fence {
    /// The 1-based line of the opening fence.
    line: usize,
    /// The first word of the info string (`sh`, `text`, ...).
    lang: String,
    /// The rest of the info string, trimmed.
    info: String,
    body: Vec<String>,
    /// Whether only blank lines separate this block from the one before it.
    follows_previous: bool,
}

fn fences(text: &str) -> Vec<Fence> {
    let mut out: Vec<Fence> = Vec::new();
    let mut cur: Option<Fence> = None;
    let mut only_blank_since_close = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        match &mut cur {
            Some(_) if t == "```" => {
                out.extend(cur.take());
                only_blank_since_close = true;
            }
            Some(f) => f.body.push(line.to_string()),
            None if t.starts_with("```") => {
                let info = t.trim_start_matches('`').trim();
                let (lang, rest) = info.split_once(char::is_whitespace).unwrap_or((info, ""));
                cur = Some(Fence {
                    line: i + 1,
                    lang: lang.to_string(),
                    info: rest.trim().to_string(),
                    body: Vec::new(),
                    follows_previous: only_blank_since_close && !out.is_empty(),
                });
            }
            None => only_blank_since_close &= t.is_empty(),
        }
    }
    out
}

fn is_shell(lang: &str) -> bool {
    matches!(lang, "sh" | "bash" | "shell" | "console")
}

/// One command of a shell block: its first line in the doc, and its text as written.
#[derive(Debug)]
struct Command {
    line: usize,
    text: String,
    /// In a `console` block, the lines under the command: its output.
    shown: Vec<String>,
}

fn commands(f: &Fence) -> Vec<Command> {
    let mut out: Vec<Command> = Vec::new();
    let mut open = false;
    for (i, raw) in f.body.iter().enumerate() {
        let line = f.line + 1 + i;
        let text = if f.lang == "console" {
            match raw.trim_start().strip_prefix("$ ") {
                Some(c) => c,
                None if open => raw.as_str(),
                None => {
                    if let Some(c) = out.last_mut() {
                        c.shown.push(raw.clone());
                    }
                    continue;
                }
            }
        } else {
            raw.as_str()
        };
        if open {
            let last = out.last_mut().expect("an open command");
            last.text.push('\n');
            last.text.push_str(text);
        } else {
            let t = text.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            out.push(Command { line, text: text.to_string(), shown: Vec::new() });
        }
        open = text.trim_end().ends_with('\\');
    }
    out
}

/// The trailing comment of a command (after ` # `), if any.
fn trailing_comment(cmd: &str) -> Option<&str> {
    let last = cmd.lines().last().unwrap_or("");
    last.find(" #").map(|i| last[i + 2..].trim())
}

/// What the test environment offers a doc's commands.
struct Env {
    /// The repository (examples/, tests/, .cache/).
    root: std::path::PathBuf,
    onnx_data: bool,
    require_onnx_data: bool,
    /// Whether an OpenCL platform (`""`: any) is present; panics when it is required and
    /// absent.
    opencl: fn(&str) -> bool,
    /// How long one block may take.
    limit: std::time::Duration,
}

const ONNX_LIGHT: &str = ".cache/onnx/wheel/onnx/backend/test/data/light";

fn opencl_present(name: &str) -> bool {
    if name.is_empty() {
        match rxvm::vm::opencl::find_device("") {
            Ok(_) => true,
            Err(e) => {
                let required = std::env::var("RXVM_REQUIRE_OPENCL").unwrap_or_default();
                assert!(required.trim().is_empty(), "RXVM_REQUIRE_OPENCL is set but no OpenCL device is usable: {e}");
                false
            }
        }
    } else {
        rxvm_test_support::devices::opencl_platform(name).is_some()
    }
}

/// The script line for `cmd`, or why it is skipped.
fn prepare(cmd: &Command, env: &Env) -> Result<Result<String, String>, String> {
    let mut text = cmd.text.clone();
    for from in ["cargo run --release -- ", "cargo run -- ", "target/release/rxvm ", "target/debug/rxvm "] {
        text = text.replace(from, "rxvm ");
    }
    // The command without its trailing comments, and its word after any `VAR=value` words.
    let code: String = text.lines().map(|l| l.find(" #").map_or(l, |i| &l[..i])).collect::<Vec<_>>().join("\n");
    let first = code.split_whitespace().find(|w| !w.contains('=')).unwrap_or("");
    if code.trim_start().starts_with("cargo build") {
        return Ok(Ok(":".into()));
    }
    if matches!(first, "cargo" | "source" | "." | "rustup" | "sudo" | "apt-get") || code.contains("scripts/") {
        return Err(format!("`{}` cannot run in a test: mark the block `no-run: REASON`", cmd.text.trim()));
    }
    if (code.contains("$D") || code.contains(".cache/onnx")) && !env.onnx_data {
        if env.require_onnx_data {
            return Err(format!("RXVM_REQUIRE_ONNX_DATA is set but {ONNX_LIGHT} is missing"));
        }
        return Ok(Err(format!(
            "the ONNX test data is missing (bash scripts/fetch-onnx-data.sh): {}",
            cmd.text.trim()
        )));
    }
    let words: Vec<&str> = code.split_whitespace().collect();
    for w in words.windows(2) {
        if w[0] == "--device" && w[1].starts_with("opencl") {
            let name = w[1].strip_prefix("opencl").unwrap_or("").trim_start_matches(':');
            if !(env.opencl)(name) {
                let which = if name.is_empty() { "an OpenCL device" } else { name };
                return Ok(Err(format!("{which} is not available: {}", cmd.text.trim())));
            }
        }
    }
    Ok(Ok(text))
}

/// The expected exit status of `cmd`: 1 when its comment says `refused` or the output
/// shown under it reports an `error:`.
fn expected_status(cmd: &Command) -> i32 {
    let refused = trailing_comment(&cmd.text).is_some_and(|c| c.starts_with("refused"));
    if refused || cmd.shown.iter().any(|l| l.starts_with("error:")) {
        1
    } else {
        0
    }
}

/// Runs `script` with bash in `dir`, with `bin` first on `PATH`; kills it after `limit`.
/// Returns its exit status and its standard output and error, interleaved.
#[cfg(unix)]
fn run_script(script: &str, dir: &Path, bin: &Path, env: &Env, limit: std::time::Duration) -> (Option<i32>, String) {
    use std::os::unix::process::CommandExt;
    let log = dir.join(".doc-test-output");
    let out = std::fs::File::create(&log).expect("output file");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut child = std::process::Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("PATH", path)
        .env("D", ONNX_LIGHT)
        .env("RXVM_DOC_ROOT", &env.root)
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone().expect("dup"))
        .stderr(out)
        .process_group(0)
        .spawn()
        .expect("bash");
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s.code();
        }
        if start.elapsed() > limit {
            // The whole process group: bash and the commands it started.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    (status, std::fs::read_to_string(&log).unwrap_or_default())
}

/// Whether `shown` (the lines of an output block) appear in `actual`, in order. A line
/// `...` stands for any lines; `...` inside a line for any text.
fn output_shows(actual: &str, shown: &[String]) -> Result<(), String> {
    fn line_shows(line: &str, shown: &str) -> bool {
        let mut rest = line;
        for part in shown.split("...") {
            match rest.find(part) {
                Some(i) => rest = &rest[i + part.len()..],
                None => return false,
            }
        }
        true
    }
    let mut lines = actual.lines();
    for s in shown.iter().map(|s| s.trim_end()).filter(|s| !s.is_empty() && s.trim() != "...") {
        if !lines.any(|l| line_shows(l, s)) {
            return Err(format!("the output lacks the shown line `{s}` (in this order)"));
        }
    }
    Ok(())
}

/// What running the shell blocks of one doc did.
#[derive(Debug, Default)]
struct Report {
    ran: usize,
    not_run: usize,
    skipped: Vec<String>,
    outputs_checked: usize,
}

/// Runs every shell block of the markdown `text` (named `doc`), each in a fresh directory
/// under `work`. An error names the block and the command that failed, with its output.
#[cfg(unix)]
fn run_shell_blocks(doc: &str, text: &str, env: &Env, work: &Path) -> Result<Report, String> {
    let mut report = Report::default();
    let blocks = fences(text);
    for (bi, f) in blocks.iter().enumerate() {
        if !is_shell(&f.lang) {
            continue;
        }
        let at = format!("{doc}:{}", f.line);
        if let Some(rest) = f.info.strip_prefix("no-run") {
            let reason = rest.trim_start().strip_prefix(':').map(str::trim).unwrap_or("");
            if reason.is_empty() {
                return Err(format!("{at}: `no-run` needs a reason: ```{} no-run: REASON", f.lang));
            }
            report.not_run += 1;
            continue;
        }
        if !f.info.is_empty() {
            return Err(format!("{at}: unknown info string `{}` (expected nothing or `no-run: REASON`)", f.info));
        }
        let cmds = commands(f);
        let shown: Vec<String> = match blocks.get(bi + 1) {
            Some(n) if n.follows_previous && n.lang == "text" && n.info == "output" => n.body.clone(),
            _ => cmds.iter().flat_map(|c| c.shown.iter().cloned()).collect(),
        };
        // The program of an ```rxa or ```rxa-bad block right above, for the commands to name.
        let program = (bi > 0 && f.follows_previous && blocks[bi - 1].lang.starts_with("rxa"))
            .then(|| blocks[bi - 1].body.join("\n") + "\n");
        if cmds.is_empty() {
            return Err(format!("{at}: a shell block without a command"));
        }
        let mut script = String::new();
        let mut skipped = false;
        let mut to_run = 0;
        for c in &cmds {
            match prepare(c, env).map_err(|e| format!("{doc}:{}: {e}", c.line))? {
                Err(why) => {
                    report.skipped.push(format!("{doc}:{}: skipped: {why}", c.line));
                    skipped = true;
                }
                Ok(line) => {
                    to_run += 1;
                    let want = expected_status(c);
                    let check = if want == 0 { "$rc -ne 0" } else { "$rc -ne 1" };
                    script.push_str(&format!(
                        "{line}\nrc=$?; if [ {check} ]; then echo \"rxvm-doc-test: line {}: exit status $rc, expected {want}\" >&2; exit 99; fi\n",
                        c.line
                    ));
                }
            }
        }
        if to_run == 0 {
            continue;
        }
        // Unique per run: the unit test runs several synthetic docs under one name.
        static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = work.join(format!("{}-{}-{n}", doc.replace(['/', '.'], "_"), f.line));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        copy_dir(&env.root.join("examples"), &dir.join("examples"));
        for link in ["tests", ".cache"] {
            let target = env.root.join(link);
            if target.exists() {
                std::os::unix::fs::symlink(&target, dir.join(link)).map_err(|e| format!("link {link}: {e}"))?;
            }
        }
        // The program above goes into each `NAME.rxa` the block names that is not there.
        for c in cmds.iter().filter(|_| program.is_some()) {
            for w in c.text.split_whitespace().filter(|w| w.ends_with(".rxa") && !w.contains('/')) {
                if !dir.join(w).exists() {
                    std::fs::write(dir.join(w), program.as_deref().unwrap_or_default())
                        .map_err(|e| format!("{w}: {e}"))?;
                }
            }
        }
        let bin = work.join("bin");
        let (status, out) = run_script(&script, &dir, &bin, env, env.limit);
        if status != Some(0) {
            return Err(format!("{at}: the block failed (status {status:?}):\n{out}"));
        }
        if !shown.is_empty() && !skipped {
            output_shows(&out, &shown).map_err(|e| format!("{at}: {e}; the output was:\n{out}"))?;
            report.outputs_checked += 1;
        }
        report.ran += 1;
    }
    Ok(report)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("readable dir") {
        let p = e.expect("entry").path();
        let dest = to.join(p.file_name().expect("name"));
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).expect("copy");
        }
    }
}

/// A scratch directory, removed when dropped (also when a test fails).
struct Scratch(std::path::PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh scratch directory with `bin/rxvm` linked to the binary under test.
#[cfg(unix)]
fn scratch(name: &str) -> (Scratch, Env) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf();
    let work = std::env::temp_dir().join(format!("rxvm-docs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("bin")).expect("scratch dir");
    let rxvm = std::path::PathBuf::from(env!("CARGO_BIN_EXE_rxvm"));
    std::os::unix::fs::symlink(&rxvm, work.join("bin/rxvm")).expect("link rxvm");
    let env = Env {
        onnx_data: root.join(ONNX_LIGHT).join("light_squeezenet.onnx").exists(),
        require_onnx_data: std::env::var_os("RXVM_REQUIRE_ONNX_DATA").is_some(),
        root,
        opencl: opencl_present,
        limit: std::time::Duration::from_secs(120),
    };
    (Scratch(work), env)
}

#[cfg(unix)]
#[test]
fn documented_shell_commands_run() {
    let (work, env) = scratch("shell");
    let root = env.root.clone();
    let mut docs: Vec<String> = vec!["README.md".into()];
    for e in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "md") {
            docs.push(format!("docs/{}", p.file_name().and_then(|n| n.to_str()).expect("utf-8 name")));
        }
    }
    docs.sort();
    let (mut ran, mut not_run, mut checked) = (0, 0, 0);
    for doc in &docs {
        let text = std::fs::read_to_string(root.join(doc)).expect("readable doc");
        let r = run_shell_blocks(doc, &text, &env, &work).unwrap_or_else(|e| panic!("{e}"));
        for s in &r.skipped {
            eprintln!("{s}");
        }
        ran += r.ran;
        not_run += r.not_run;
        checked += r.outputs_checked;
    }
    eprintln!("{ran} shell blocks run ({checked} with their output checked), {not_run} marked no-run");
    // 26 blocks run here with the ONNX data and the three OpenCL platforms; 14 without either.
    let least = if env.onnx_data { 20 } else { 10 };
    assert!(ran >= least, "only {ran} shell blocks ran");
    assert!(checked >= 3 || !env.onnx_data, "only {checked} shown outputs were checked");
}

/// The runner on synthetic docs: a command that fails, a shown line the output lacks, a
/// `refused` command that succeeds and a `no-run` without a reason each fail it, so
/// `documented_shell_commands_run` cannot pass on docs whose commands do not work.
#[cfg(unix)]
#[test]
fn shell_block_runner_catches_broken_commands() {
    let (work, mut env) = scratch("runner");
    env.opencl = |_| false;
    let run = |md: &str| run_shell_blocks("synthetic.md", md, &env, &work);

    let good = "Text.\n\n```sh\nrxvm asm examples/tiny.rxa -o t.rxb   # assemble\nrxvm check t.rxb\n```\n\n\
                ```text output\nok: module `tiny`: 1 function(s), 1 constant(s)\n...\n```\n";
    let r = run(good).expect("a working block");
    assert_eq!((r.ran, r.outputs_checked), (1, 1));

    // A missing file: the exit status of the second command fails the block, naming its line.
    let e = run("```sh\nrxvm asm examples/tiny.rxa -o t.rxb\nrxvm check missing.rxb\n```\n")
        .expect_err("a failing command");
    assert!(e.contains("synthetic.md:1") && e.contains("line 3: exit status 1"), "{e}");
    // A failure in the middle of a block is not hidden by a later command that works.
    let e = run("```bash\nrxvm run examples/nope.rxa\nrxvm devices\n```\n").expect_err("a failing first command");
    assert!(e.contains("line 2: exit status 1"), "{e}");
    // A console block: the `$ ` lines are commands, a continued command is one, and the
    // lines under a command are its output.
    let e = run("```console\n$ rxvm run \\\n    examples/nope.rxa\nresult 0: ...\n```\n")
        .expect_err("a failing console command");
    assert!(e.contains("line 2: exit status 1, expected 0"), "{e}");
    // A transcript that shows an `error:` expects the command to be refused, with that text;
    // the ```rxa-bad program right above it is the file it names; `...` in a line is any text.
    let bad =
        "```rxa-bad\nfunc @main() {\n  %s = alloc_storage 64\n  %t = alloc_tensor %s 0, f32[4]\n  ret\n}\n```\n\n";
    let r = run(&format!(
        "{bad}```console\n$ rxvm check bad.rxa\nerror: expected `,`, found ...\n  ┌─ bad.rxa:3:24\n```\n"
    ))
    .expect("the transcript as shown");
    assert_eq!((r.ran, r.outputs_checked), (1, 1));
    let e = run(&format!("{bad}```console\n$ rxvm check bad.rxa\nerror: expected `;`, found ...\n```\n"))
        .expect_err("another error than shown");
    assert!(e.contains("lacks the shown line `error: expected `;`, found ...`"), "{e}");
    let e = run("```rxa\nfunc @main() {\n  ret\n}\n```\n```console\n$ rxvm check ok.rxa\nerror: an error\n```\n")
        .expect_err("a program that is accepted, shown as refused");
    assert!(e.contains("exit status 0, expected 1"), "{e}");
    // Output the docs show but the command does not print.
    let e = run("```sh\nrxvm check examples/tiny.rxa\n```\n```text output\nok: module `huge`\n```\n")
        .expect_err("a shown line that is not printed");
    assert!(e.contains("lacks the shown line `ok: module `huge``"), "{e}");
    // Shown lines out of order.
    let e = run("```sh\nrxvm asm examples/tiny.rxa -o a.rxb && rxvm check a.rxb\n```\n\n```text output\nok: module\nwrote\n```\n")
        .expect_err("shown lines in the wrong order");
    assert!(e.contains("lacks the shown line `wrote`"), "{e}");
    // A command documented as refused must be refused, with status 1 (not a crash).
    let e =
        run("```sh\nrxvm check examples/tiny.rxa   # refused: not really\n```\n").expect_err("refused but accepted");
    assert!(e.contains("exit status 0, expected 1"), "{e}");
    let r = run("```sh\nrxvm check examples/nope.rxa   # refused: no such file\n```\n").expect("refused as documented");
    assert_eq!(r.ran, 1);
    // Not running a block needs a reason; commands that cannot run in a test need the mark.
    let e = run("```sh no-run\nbash scripts/test.sh\n```\n").expect_err("no-run without a reason");
    assert!(e.contains("needs a reason"), "{e}");
    let e = run("```sh\nbash scripts/test.sh\n```\n").expect_err("an unmarked script");
    assert!(e.contains("mark the block `no-run: REASON`"), "{e}");
    let r = run("```sh no-run: the whole suite\nbash scripts/test.sh\n```\n").expect("marked no-run");
    assert_eq!((r.ran, r.not_run), (0, 1));
    // `cargo run --release --` is the binary under test; an absent OpenCL platform skips.
    let r = run("```sh\ncargo run --release -- check examples/tiny.rxa\nrxvm run examples/tiny.rxa --device opencl:intel\n```\n")
        .expect("mapped cargo run, skipped OpenCL");
    assert_eq!(r.skipped.len(), 1, "{:?}", r.skipped);
    // Without the ONNX data a command on it is skipped, unless the data is required.
    (env.onnx_data, env.require_onnx_data) = (false, false);
    let md = "```sh\nrxvm run $D/light_squeezenet.onnx -i data_0=ramp\n```\n";
    let r = run_shell_blocks("synthetic.md", md, &env, &work).expect("skipped");
    assert_eq!((r.ran, r.skipped.len()), (0, 1), "{r:?}");
    env.require_onnx_data = true;
    let e = run_shell_blocks("synthetic.md", md, &env, &work).expect_err("required");
    assert!(e.contains("RXVM_REQUIRE_ONNX_DATA is set"), "{e}");
    // A block that does not end is killed at the time limit, and fails.
    env.limit = std::time::Duration::from_secs(1);
    let run = |md: &str| run_shell_blocks("synthetic.md", md, &env, &work);
    let t = std::time::Instant::now();
    let e = run("```sh\nprintf ':run\\n' | rxvm repl tests/data/repl/endless.rxa\n```\n").expect_err("an endless loop");
    assert!(e.contains("status None") && t.elapsed() < std::time::Duration::from_secs(30), "{e}");
}

/// Every key `--host-caps` accepts (as `DeviceCaps::with_overrides` lists them when it
/// refuses an unknown one) is in the table of docs/devices.md and in `rxvm run --help`.
#[test]
fn every_host_caps_key_is_documented() {
    let e = rxvm::vm::DeviceCaps::host().with_overrides("no-such-key=1").expect_err("an unknown key is refused");
    let list = e.split_once("expected one of:").map(|(_, l)| l).unwrap_or_else(|| panic!("no key list in `{e}`"));
    let keys: Vec<&str> = list.split(',').filter_map(|k| k.split_whitespace().next()).collect();
    assert!(keys.len() >= 10 && keys.contains(&"images"), "{keys:?}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let devices = std::fs::read_to_string(root.join("docs/devices.md")).expect("docs/devices.md");
    let table: Vec<&str> = devices.lines().filter(|l| l.starts_with('|')).collect();
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_rxvm")).args(["run", "--help"]).output().expect("rxvm");
    let help = String::from_utf8_lossy(&help.stdout);
    let host_caps_help = help.split("--host-caps <").nth(1).and_then(|h| h.split("\n      --").next()).unwrap_or("");
    for k in keys {
        let cell = format!("| `{k}`");
        assert!(table.iter().any(|l| l.contains(&cell)), "docs/devices.md: the --host-caps table lacks `{k}`");
        assert!(
            host_caps_help.split(|c: char| !(c.is_alphanumeric() || c == '-')).any(|w| w == k),
            "`rxvm run --help` does not name the --host-caps key `{k}`:\n{host_caps_help}"
        );
    }
}
