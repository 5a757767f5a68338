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
