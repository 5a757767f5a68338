//! `rxvm repl` sessions, scripted: each transcript (input lines after `> `, then what the
//! REPL printed) is an insta snapshot. The binary is also driven through piped stdin,
//! where it prints no prompt.

use rxvm::repl::{transcript, Repl};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn session(file: Option<&str>, script: &str) -> String {
    let mut repl = Repl::new();
    let mut out = String::new();
    if let Some(f) = file {
        out.push_str(&transcript(&mut repl, &format!(":load {f}")));
    }
    out.push_str(&transcript(&mut repl, script));
    out
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn stepping_through_a_program_with_a_texture_view() {
    let script = "\
:break @main
:run x=ramp
:step
:step 2
:views
:where
:print %t 8
:next
:regs
:continue
";
    std::env::set_current_dir(root()).expect("cd");
    insta::assert_snapshot!("repl_texture_steps", session(Some("examples/tiny.rxa"), script));
}

#[test]
fn breaking_on_every_kill() {
    let script = "\
:break on kill
:break
:run
:mem
:continue
:storages
:continue
:continue
";
    std::env::set_current_dir(root()).expect("cd");
    insta::assert_snapshot!("repl_break_on_kill", session(Some("examples/tiny.rxa"), script));
}

#[test]
fn mem_after_a_use_after_kill_error() {
    let script = "\
%s = alloc_storage 256
%a = alloc_tensor %s, 0, f32[4, 4]
%b = alloc_tensor %s, 32, f32[8]
kill %a
%c = alloc_tensor %a, 0, f32[2]
call @vm.fill(%a, 1.0)
:mem
:views
";
    insta::assert_snapshot!("repl_use_after_kill", session(None, script));
}

#[test]
fn an_interactive_alloc_view_kill_sequence() {
    let script = "\
%s = alloc_storage 2048, align 64
%x = alloc_tensor %s, 0, f32[2, 3]
call @vm.iota(%x, 0.0, 0.5)
:print %x
%t = alloc_tensor %s, 1024, f32[1, 1, 2, 4], scope \"global.texture\"
%y = alloc_tensor %s, 2040, f32[8]
%y = alloc_tensor %s, 16, f32[8]
%bad syntax here
:storages
:views
:mem
kill %x
kill %t
:mem
kill %s
:storages
%z = alloc_tensor %y, 0, f32[1]
kill %y
:storages
";
    insta::assert_snapshot!("repl_interactive", session(None, script));
}

#[test]
fn piped_stdin_runs_a_script_without_prompts() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rxvm"))
        .args(["repl", "examples/tiny.rxa"])
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rxvm repl starts");
    child.stdin.take().expect("stdin").write_all(b":break on kill\n:run\n:quit\n:regs\n").expect("write the script");
    let out = child.wait_with_output().expect("rxvm repl ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!stdout.contains("rxvm>"), "no prompt on piped input: {stdout}");
    assert!(stdout.starts_with("loaded examples/tiny.rxa: module `tiny`, functions @main\nbreakpoint 1: on kill\n"));
    assert!(stdout.contains("stopped at @main+4 (line 12), breakpoint 1 (on kill)"), "{stdout}");
    // `:quit` ends the session: the `:regs` after it never runs.
    assert!(!stdout.contains("%x = tensor"), "{stdout}");
}

/// The session of `docs/repl.md`, kept in sync: `RXVM_UPDATE_DOCS=1` rewrites it.
#[test]
fn the_documented_session_is_what_the_repl_prints() {
    let script = "\
:break on kill
:run x=ramp
:views
:mem
:continue
:where
:continue
%s = alloc_storage 256
%a = alloc_tensor %s, 0, f32[16]
%b = alloc_tensor %s, 32, f32[4]
:mem
kill %a
%c = alloc_tensor %a, 0, f32[2]
:storages
";
    std::env::set_current_dir(root()).expect("cd");
    check_doc_transcript("transcript", &session(Some("examples/tiny.rxa"), script));
}

/// The second session of `docs/repl.md`: places without an instruction, storage ids,
/// results after the run, help.
#[test]
fn the_documented_breakpoint_session_is_what_the_repl_prints() {
    let script = "\
:break 4
:break on storage 1
:break on storage 2
:run
:continue
:regs
:print %y
:restart
:delete
:contnue
:help break
";
    std::env::set_current_dir(root()).expect("cd");
    check_doc_transcript("breakpoints", &session(Some("examples/tiny.rxa"), script));
}

/// Checks the block between `<!-- NAME:begin -->` and `<!-- NAME:end -->` of
/// docs/repl.md against `text`; `RXVM_UPDATE_DOCS=1` rewrites it.
fn check_doc_transcript(name: &str, text: &str) {
    // The tests run in parallel, and with RXVM_UPDATE_DOCS two of them rewrite the file.
    static DOC: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = DOC.lock().unwrap_or_else(|e| e.into_inner());
    let (open, close) = (format!("<!-- {name}:begin -->"), format!("<!-- {name}:end -->"));
    let block = format!("{open}\n```text\n{text}```\n{close}");
    let doc_path = root().join("docs/repl.md");
    let doc = std::fs::read_to_string(&doc_path).expect("docs/repl.md");
    let (Some(start), Some(end)) = (doc.find(&open), doc.find(&close)) else {
        panic!("docs/repl.md has no {open} ... {close} markers");
    };
    let current = &doc[start..end + close.len()];
    if current != block {
        if std::env::var("RXVM_UPDATE_DOCS").is_ok() {
            let updated = format!("{}{block}{}", &doc[..start], &doc[end + close.len()..]);
            std::fs::write(&doc_path, updated).expect("write docs/repl.md");
        } else {
            panic!("docs/repl.md's {name} block is stale; rerun with RXVM_UPDATE_DOCS=1:\n{text}");
        }
    }
}

#[test]
fn a_compiled_model_shows_its_plan_and_steps_through_its_allocations() {
    let model = ".cache/onnx/wheel/onnx/backend/test/data/light/light_squeezenet.onnx";
    if !root().join(model).exists() {
        assert!(std::env::var("RXVM_REQUIRE_ONNX_DATA").is_err(), "{model} is missing");
        return;
    }
    std::env::set_current_dir(root()).expect("cd");
    let out = session(Some(model), ":plan\n:break on alloc\n:run\n:where\n:mem\n:step 2\n:storages\n:mem\n");
    assert!(out.contains("> :plan\n; memory plan (") && out.contains("; pool `arena`: 3928576 bytes"), "{out}");
    assert!(out.contains(";   r1: f32[1, 64, 111, 111] 3154176 B at arena +0, live [0, 1]"), "{out}");
    // The arena is the program's first allocation.
    assert!(out.contains("stopped at @main+0, breakpoint 1 (on alloc)\n=> %arena = alloc_storage 3928576"), "{out}");
    assert!(out.contains("#0 @main+0: %arena = alloc_storage 3928576"), "{out}");
    // :mem lists the plan's pools: not yet allocated at the first stop, then live.
    assert!(out.contains("pool `arena`: 3928576 B planned, not allocated now"), "{out}");
    assert!(out.contains("pool `arena`: 3928576 B planned, live as storage #53"), "{out}");
    let arena_row = |l: &str| l.contains(" 3928576 ") && l.contains("%arena") && l.ends_with("@main:0");
    assert!(out.lines().any(arena_row), "the arena in :storages: {out}");
}

#[test]
fn labels_functions_lines_storages_and_restart() {
    let script = "\
:break yes
:break @pair
:break 44
:break on storage 8
:break
:run
:where
:continue
:continue
:delete 1
:continue
:continue
:restart
:delete
:continue
:disasm @pair
:step
:bogus
:break nowhere
";
    std::env::set_current_dir(root()).expect("cd");
    insta::assert_snapshot!("repl_breakpoints", session(Some("tests/programs/every_instruction.rxa"), script));
}

/// Issue 28, item 11: a failed `:load` unloads the old program, a breakpoint that cannot
/// fire is refused or said so, the results of a finished run stay inspectable, and
/// `help`, `:help CMD` and "did you mean" help a newcomer.
#[test]
fn failed_loads_dead_breakpoints_finished_runs_and_help() {
    let script = "\
:break 9999
:break 3
:break 13
:break @main+99
:break @main+2
:break on storage 0
:break on storage 1
:break on storage 2
:run
:continue
:continue
:continue
:regs
:print %y
:print %result0 2
:mem
:restart
:where
:delete
:contnue
:stpe
help
:help break
:h c
:help nope
:load tests/bad/double_kill.rxa
:run
:break 9
";
    std::env::set_current_dir(root()).expect("cd");
    insta::assert_snapshot!("repl_item_11", session(Some("examples/tiny.rxa"), script));
}

/// docs/repl.md's `--timeout` example, as written there: each `:run` of an endless loop
/// pauses after 200 ms, with where, and the session goes on to `:where` and `:quit`.
#[test]
fn the_repl_timeout_pauses_an_endless_run() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rxvm"))
        .args(["repl", "--timeout", "200ms", "tests/data/repl/endless.rxa"])
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rxvm repl starts");
    child.stdin.take().expect("stdin").write_all(b":run\n:where\n:quit\n").expect("write the script");
    let out = child.wait_with_output().expect("rxvm repl ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("started @main\nstopped at @main+"), "{stdout}");
    assert!(stdout.contains(", time limit of 200ms reached; :continue resumes"), "{stdout}");
    assert!(stdout.contains("#0 @main+"), ":where after the pause: {stdout}");
}

/// Piped input: SIGINT (Ctrl-C) during a run pauses it and the script goes on; SIGINT
/// while the REPL waits for input ends it, as Ctrl-C always ended a piped session.
#[cfg(unix)]
#[test]
fn sigint_pauses_a_piped_run_and_ends_an_idle_piped_session() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_rxvm"))
        .args(["repl", "tests/data/repl/endless.rxa"])
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rxvm repl starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next = || lines.next().expect("a line").expect("utf-8");
    assert!(next().starts_with("loaded tests/data/repl/endless.rxa"));
    stdin.write_all(b":run\n").expect("write");
    wait_until_spinning(child.id());
    let sigint = || {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
    };
    sigint();
    assert_eq!(next(), "started @main");
    let stopped = next();
    assert!(stopped.contains(", interrupted (Ctrl-C); :continue resumes"), "{stopped}");
    stdin.write_all(b":where\n").expect("write");
    while !next().starts_with("#0 @main+") {}
    // Idle, waiting for a line: Ctrl-C ends the session.
    std::thread::sleep(std::time::Duration::from_millis(100));
    sigint();
    let status = child.wait().expect("it ends");
    assert_eq!(status.code(), Some(130), "{status:?}");
}

#[cfg(unix)]
/// CPU time (user, clock ticks) process `pid` has used, from /proc/PID/stat.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').expect("(comm)") + 2..];
    rest.split(' ').nth(11).and_then(|t| t.parse().ok()).expect("utime")
}

/// Waits until process `pid` has spun for a while (its run is in progress, so a Ctrl-C
/// pauses it rather than meeting an idle prompt), however loaded the machine is.
#[cfg(unix)]
fn wait_until_spinning(pid: u32) {
    let start = cpu_ticks(pid);
    let t0 = std::time::Instant::now();
    while cpu_ticks(pid) < start + 20 {
        assert!(t0.elapsed() < std::time::Duration::from_secs(60), "the run never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn regs_show_the_values_of_dimension_symbols() {
    // The entry binds %n from the inputs' first dimension (3); `ramp` cannot size %x.
    let script = "\
:break @main
:run x=tests/data/repl/rows3.npy y=tests/data/repl/rows3.npy
:regs
:run x=ramp
";
    std::env::set_current_dir(root()).expect("cd");
    insta::assert_snapshot!("repl_symbol_regs", session(Some("examples/symbolic_batch.rxa"), script));
}
