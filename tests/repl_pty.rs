//! `rxvm repl` on a terminal: driven in a pseudo-terminal, Tab completes commands,
//! function names and registers, and the history file keeps lines across sessions (the
//! Up arrow brings the last one back).

use rexpect::session::spawn_command;
use std::process::Command;

const TIMEOUT_MS: u64 = 20_000;

fn repl(history: &std::path::Path) -> rexpect::session::PtySession {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rxvm"));
    cmd.args(["repl", "examples/tiny.rxa"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("RXVM_HISTORY", history)
        .env("TERM", "xterm");
    spawn_command(cmd, Some(TIMEOUT_MS)).expect("rxvm repl starts in a pty")
}

#[test]
fn tab_completion_and_history_on_a_terminal() {
    let dir = std::env::temp_dir().join(format!("rxvm-pty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let history = dir.join("history");
    let _ = std::fs::remove_file(&history);

    let mut p = repl(&history);
    p.exp_string("loaded examples/tiny.rxa").expect("loads");
    p.exp_string("rxvm> ").expect("a prompt");
    // `:brea` + Tab completes to `:break`; then a breakpoint on the function, completed
    // from `@ma`.
    p.send(":brea\t").expect("send");
    p.send(" @ma\t").expect("send");
    p.send_line("").expect("send");
    p.exp_string("breakpoint 1: @main").expect("the completed command ran");
    p.send_line(":run").expect("send");
    p.exp_string("stopped at @main+0").expect("stops at the entry");
    p.send_line(":step 3").expect("send");
    p.exp_string("stopped at @main+3").expect("steps");
    // A live register completes: `%` + `t` → `%t`.
    p.send(":print %t\t").expect("send");
    p.send_line(" 2").expect("send");
    p.exp_string("%t = tensor #3 f32[1, 2, 8, 4]").expect("the completed register printed");
    p.send_line(":quit").expect("send");
    p.exp_eof().expect("ends");

    let saved = std::fs::read_to_string(&history).expect("the history file is written");
    assert!(saved.contains(":break @main") && saved.contains(":print %t 2"), "{saved}");

    // A new session: Up brings back the last line.
    let mut p = repl(&history);
    p.exp_string("rxvm> ").expect("a prompt");
    p.send_line(":break on kill").expect("send");
    p.exp_string("breakpoint 1: on kill").expect("break");
    p.send_line(":run").expect("send");
    p.exp_string("stopped at @main+4").expect("stops at the first kill");
    p.send("\x1b[A").expect("up");
    p.send_line("").expect("enter");
    // The recalled line is `:run` again: it restarts and stops at the same kill.
    p.exp_string("started @main").expect("the recalled :run ran");
    p.send_line(":quit").expect("send");
    p.exp_eof().expect("ends");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ctrl-C during `:run` of an endless loop pauses it, as in gdb: the REPL prints where,
/// returns to the prompt with the state inspectable (`:regs`, `:where`), `:continue`
/// resumes, and the session ends normally with its history saved.
#[test]
fn ctrl_c_pauses_an_endless_run_and_the_session_goes_on() {
    let dir = std::env::temp_dir().join(format!("rxvm-pty-ctrlc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let history = dir.join("history");
    let _ = std::fs::remove_file(&history);

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rxvm"));
    cmd.args(["repl", "tests/data/repl/endless.rxa"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("RXVM_HISTORY", &history)
        .env("TERM", "xterm");
    let mut p = spawn_command(cmd, Some(TIMEOUT_MS)).expect("rxvm repl starts in a pty");
    p.exp_string("rxvm> ").expect("a prompt");
    p.send_line(":run x=ramp").expect("send");
    // Let it loop a while (the REPL prints a command's output when it ends), then interrupt.
    let pid = p.process.child_pid.as_raw() as u32;
    wait_until_spinning(pid);
    p.send_control('c').expect("Ctrl-C");
    p.exp_string("started @main").expect("it ran");
    p.exp_string(", interrupted (Ctrl-C); :continue resumes").expect("paused, and says why");
    p.exp_string("rxvm> ").expect("back at the prompt");
    p.send_line(":regs").expect("send");
    p.exp_string("%t = tensor").expect("the loop's registers");
    p.exp_regex(r"%i += int [1-9][0-9]*").expect("the counter has counted");
    p.send_line(":where").expect("send");
    p.exp_string("#0 @main+").expect("the stack");
    // Resumed, it loops again until the next Ctrl-C.
    p.send_line(":continue").expect("send");
    wait_until_spinning(pid);
    p.send_control('c').expect("Ctrl-C");
    p.exp_string("interrupted (Ctrl-C)").expect("paused again");
    p.exp_string("rxvm> ").expect("back at the prompt");
    p.send_line(":quit").expect("send");
    p.exp_eof().expect("ends");
    let status = p.process.wait().expect("exit status");
    assert!(matches!(status, rexpect::process::wait::WaitStatus::Exited(_, 0)), "{status:?}");

    let saved = std::fs::read_to_string(&history).expect("the history file is written");
    for line in [":run x=ramp", ":regs", ":where", ":continue", ":quit"] {
        assert!(saved.lines().any(|l| l == line), "{line} in the history: {saved}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// CPU time (user, clock ticks) process `pid` has used, from /proc/PID/stat.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').expect("(comm)") + 2..];
    rest.split(' ').nth(11).and_then(|t| t.parse().ok()).expect("utime")
}

/// Waits until process `pid` has spun for a while (its run is in progress, so a Ctrl-C
/// pauses it rather than meeting an idle prompt), however loaded the machine is.
fn wait_until_spinning(pid: u32) {
    let start = cpu_ticks(pid);
    let t0 = std::time::Instant::now();
    while cpu_ticks(pid) < start + 20 {
        assert!(t0.elapsed() < std::time::Duration::from_secs(60), "the run never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
