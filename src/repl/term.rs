//! The terminal front-end of `rxvm repl`: rustyline for line editing, a history file and
//! tab completion of commands, function names, labels and live registers; piped input is
//! read line by line with no prompt.

use super::{Outcome, Repl};
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::{DefaultHistory, History};
use rustyline::validate::Validator;
use rustyline::{Context, Editor, Helper};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

/// Completes the word before the cursor from the session's names.
struct Names(Vec<String>);

impl Completer for Names {
    type Candidate = Pair;

    fn complete(&self, line: &str, pos: usize, _: &Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        let start = line[..pos].rfind(|c: char| c.is_whitespace() || c == ',' || c == '(').map_or(0, |i| i + 1);
        let word = &line[start..pos];
        let found = self
            .0
            .iter()
            .filter(|n| n.starts_with(word) && !word.is_empty())
            .map(|n| Pair { display: n.clone(), replacement: n.clone() })
            .collect();
        Ok((start, found))
    }
}

impl Hinter for Names {
    type Hint = String;
}
impl Highlighter for Names {}
impl Validator for Names {}
impl Helper for Names {}

/// Where the history is kept: `$RXVM_HISTORY`, else `~/.rxvm_history`.
fn history_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RXVM_HISTORY") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".rxvm_history"))
}

/// Runs the session on standard input: a line editor on a terminal, plain lines otherwise.
pub fn run(mut repl: Repl) -> Result<(), String> {
    let stdout = std::io::stdout();
    // Ctrl-C pauses a running program (the VM checks the flag before each instruction)
    // instead of ending the session; at the prompt the line editor reads it as a key.
    // Otherwise (a long :load, say) a terminal session goes on, and a piped one ends as it
    // always did (130: killed by SIGINT).
    let interrupt = repl.interrupt_handle();
    let running = repl.running_handle();
    let piped = !std::io::stdin().is_terminal();
    let handler = move || {
        if running.load(std::sync::atomic::Ordering::SeqCst) {
            interrupt.raise();
        } else if piped {
            std::process::exit(130);
        } else {
            eprintln!("(Ctrl-C: nothing is running; :quit or Ctrl-D ends the session)");
        }
    };
    if let Err(e) = ctrlc::set_handler(handler) {
        eprintln!("warning: Ctrl-C will end the session: cannot install its handler: {e}");
    }
    if !std::io::stdin().is_terminal() {
        for line in std::io::stdin().lock().lines() {
            let line = line.map_err(|e| format!("reading standard input: {e}"))?;
            match repl.execute(&line) {
                Outcome::Print(t) => {
                    let mut out = stdout.lock();
                    out.write_all(t.as_bytes()).and_then(|_| out.flush()).map_err(|e| e.to_string())?;
                }
                Outcome::Quit => break,
            }
        }
        return Ok(());
    }
    let mut rl: Editor<Names, DefaultHistory> =
        Editor::new().map_err(|e| format!("cannot start the line editor: {e}"))?;
    let history = history_path();
    if let Some(h) = &history {
        // A missing history file is normal on the first run.
        let _ = rl.load_history(h);
    }
    println!("rxvm repl: :help lists the commands, Tab completes, :quit or Ctrl-D ends");
    loop {
        rl.set_helper(Some(Names(repl.completions())));
        match rl.readline("rxvm> ") {
            Ok(line) => {
                if !line.trim().is_empty() {
                    let _ = rl.history_mut().add(&line);
                    // Saved as it grows: whatever ends the session, its lines are kept.
                    if let Some(h) = &history {
                        let _ = rl.save_history(h);
                    }
                }
                match repl.execute(&line) {
                    Outcome::Print(t) => print!("{t}"),
                    Outcome::Quit => break,
                }
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(format!("reading a line: {e}")),
        }
    }
    if let Some(h) = &history {
        rl.save_history(h).map_err(|e| format!("saving the history to {}: {e}", h.display()))?;
    }
    Ok(())
}
