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
