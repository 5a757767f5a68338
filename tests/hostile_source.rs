//! Hostile `.rxa` sources cost time and memory in proportion to what is read before the
//! error, and their diagnostics stay short: a limit is enforced as soon as it is crossed
//! (not after the whole list is collected), and a long source line is shown clipped around
//! the error (`asm/src/diag.rs`, `MAX_SHOWN_LINE`). Issue 28, item 7.

use std::process::Command;
use std::time::{Duration, Instant};

/// A file in the temporary directory, removed when dropped.
struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn temp(name: &str) -> TempFile {
    TempFile(std::env::temp_dir().join(format!("rxvm-hostile-{}-{name}", std::process::id())))
}

/// A 100 MB program whose second line is `%s = shape [1, 1, 1, ...]`: 33 million
/// dimensions where the encoding allows 255. It used to take 24 s and 7 GB, and to print
/// the 100 MB line twice (200 MB of diagnostics).
#[test]
fn a_100_mb_one_line_shape_fails_in_seconds_with_a_short_diagnostic() {
    const SIZE: usize = 100_000_000;
    let src = temp("shape.rxa");
    let head = "func @main() -> shape {\n  %s = shape [";
    let tail = "1]\n  ret %s\n}\n";
    let mut text = String::with_capacity(SIZE + 64);
    text.push_str(head);
    while text.len() + 3 + tail.len() <= SIZE {
        text.push_str("1, ");
    }
    text.push_str(tail);
    std::fs::write(&src.0, &text).expect("write the source");
    drop(text);
    let out = temp("shape.rxb");
    let started = Instant::now();
    let run = Command::new(env!("CARGO_BIN_EXE_rxvm"))
        .args(["asm", src.0.to_str().expect("UTF-8 path"), "-o", out.0.to_str().expect("UTF-8 path")])
        .output()
        .expect("run rxvm");
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "the program assembled");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(run.stderr.len() < 10 * 1024, "{} bytes of diagnostics", run.stderr.len());
    assert!(stderr.contains("error: too many dimensions: more than 255"), "{stderr}");
    // At the 256th dimension: line 2, after `  %s = shape [` (14 characters) and 255 `1, `.
    assert!(stderr.contains(&format!("shape.rxa:2:{}", 14 + 3 * 255 + 1)), "{stderr}");
    assert!(stderr.contains('…'), "the line is not clipped:\n{stderr}");
    assert!(!out.0.exists(), "an output was written");
}

/// The peak resident set of a running child, sampled from `/proc/PID/status` (`VmHWM`,
/// the high-water mark) every few milliseconds until it exits: a lower bound of its true
/// peak, close to it. `None` where `/proc` is not there.
fn run_sampling_peak(cmd: &mut Command) -> (std::process::Output, Option<u64>) {
    let mut child =
        cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().expect("run rxvm");
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak: Option<u64> = None;
    while child.try_wait().expect("wait").is_none() {
        if let Ok(s) = std::fs::read_to_string(&status_path) {
            let kb = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            if let Some(kb) = kb {
                peak = Some(peak.unwrap_or(0).max(kb * 1024));
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    (child.wait_with_output().expect("output"), peak)
}

/// 100 MB of `nop` lines, one function of 16.7 million instructions: the assembler's
/// memory follows the module (16-byte words and 8-byte source positions), not the parse of
/// the whole function. It used to take 28 s and 6.7 GB (one parse-tree node of 272 bytes
/// and two tokens per `nop`, and the function parsed again each time the token window
/// doubled); a function longer than the window is now read a piece of its body at a time.
#[test]
fn a_100_mb_function_of_nops_assembles_in_memory_proportional_to_the_module() {
    const SIZE: usize = 100_000_000;
    let src = temp("nops.rxa");
    let head = "func @main() -> int {\n";
    let tail = "  %x = int 0\n  ret %x\n}\n";
    let n = (SIZE - head.len() - tail.len()) / "  nop\n".len();
    std::fs::write(&src.0, [head, &"  nop\n".repeat(n), tail].concat()).expect("write the source");
    let out = temp("nops.rxb");
    let started = Instant::now();
    let (run, peak) = run_sampling_peak(Command::new(env!("CARGO_BIN_EXE_rxvm")).args([
        "asm",
        src.0.to_str().expect("UTF-8 path"),
        "-o",
        out.0.to_str().expect("UTF-8 path"),
    ]));
    let took = started.elapsed();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    // The .rxb: a 16-byte word and an 8-byte source position per instruction.
    let rxb = std::fs::metadata(&out.0).expect("the .rxb").len();
    assert!(rxb > 24 * n as u64, "{rxb} bytes");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    // The source (read twice by `rxvm asm`), the module and its encoding: 1.15 GB.
    if std::path::Path::new("/proc/self/status").exists() {
        let peak = peak.expect("VmHWM sampled");
        eprintln!("100 MB of nops: {took:?}, peak resident set {} MB", peak / 1_000_000);
        assert!(peak < 2_000_000_000, "peak resident set {peak} bytes");
    }
}

/// The same 100 MB function with a list past its limit at its end: the error is found
/// where the function's body is read, a piece at a time, not by a parse of the whole file
/// (which would hold the tokens and parse tree of all of it).
#[test]
fn an_error_at_the_end_of_a_100_mb_function_costs_no_more_than_assembling_it() {
    const SIZE: usize = 100_000_000;
    let src = temp("nops-bad.rxa");
    let head = "func @main() -> int {\n";
    let tail = format!("  %s = shape [{}]\n  %x = int 0\n  ret %x\n}}\n", vec!["1"; 256].join(", "));
    let n = (SIZE - head.len() - tail.len()) / "  nop\n".len();
    std::fs::write(&src.0, [head, &"  nop\n".repeat(n), &tail].concat()).expect("write the source");
    let out = temp("nops-bad.rxb");
    let started = Instant::now();
    let (run, peak) = run_sampling_peak(Command::new(env!("CARGO_BIN_EXE_rxvm")).args([
        "asm",
        src.0.to_str().expect("UTF-8 path"),
        "-o",
        out.0.to_str().expect("UTF-8 path"),
    ]));
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "the program assembled");
    assert!(stderr.contains("too many dimensions: more than 255"), "{stderr}");
    assert!(stderr.contains(&format!("nops-bad.rxa:{}:", n + 2)), "{stderr}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    if std::path::Path::new("/proc/self/status").exists() {
        let peak = peak.expect("VmHWM sampled");
        eprintln!("100 MB of nops, then an error: {took:?}, peak resident set {} MB", peak / 1_000_000);
        assert!(peak < 2_000_000_000, "peak resident set {peak} bytes");
    }
}
