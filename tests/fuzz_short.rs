//! Short, deterministic runs of the fuzz targets of `rxvm_test_support::fuzz` (the ones `cargo fuzz`
//! drives in `fuzz/`): for each target, every seed input (`rxvm_test_support::fuzz::seeds`), then a
//! fixed number of mutants of them (bit flips, interesting bytes and integers, inserts,
//! deletes, duplications, splices, truncations, and for text token-level edits), then every
//! input of the regression corpus `tests/fuzz-regressions/<target>/`, whose `NAME.expected`
//! files hold the exact outcome (`ok` or the errors) an input must give.
//!
//! A target panics only on a bug (see `rxvm_test_support::fuzz`). Failing inputs are written to
//! `$CARGO_TARGET_TMPDIR/fuzz-short-failures/<target>/` and named in the failure message;
//! `docs/reliability.md` tells how to minimise one and add it to the regression corpus.

use rxvm_test_support::fuzz::{seeds, Rng, Target};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

const INTERESTING_BYTES: &[u8] = &[0, 1, 0x7f, 0x80, 0xff, b'0', b'9', b' ', b'\n', b',', b'%', b'@', b'['];
const INTERESTING_INTS: &[u64] =
    &[0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x1_0000, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, u64::MAX];
/// Names, punctuation and numbers at the edges; the language's words come from its tables
/// ([`TOKENS`]).
const OTHER_TOKENS: &[&str] = &[
    "0",
    "-1",
    "1",
    "64",
    "4096",
    "65536",
    "2147483648",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "99999999999999999999",
    "1e308",
    "-0.0",
    "nan",
    "inf",
    "0x10",
    "?",
    "%x",
    "%s",
    "%t",
    "@main",
    "@vm.add",
    "@vm.print",
    "@vm.copy",
    "@onnx.Conv",
    "@onnx.MaxPool",
    "[0]",
    "[1, 0]",
    "[65536, 65536]",
    "\"global\"",
    "\"global.texture\"",
    "\"global.texture-weight\"",
    "->",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    ",",
    "=",
    ":",
    "\n",
    ";",
];

/// Every token the mutator inserts: the language's words (mnemonics, keywords, dtypes:
/// [`rxvm_asm::syntax::keywords`]) and [`OTHER_TOKENS`].
static TOKENS: std::sync::LazyLock<Vec<&'static str>> = std::sync::LazyLock::new(|| {
    let mut t = rxvm_asm::syntax::keywords();
    t.extend_from_slice(OTHER_TOKENS);
    t
});

fn mutate(rng: &mut Rng, seed: &[u8], other: &[u8], text: bool) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = b.len();
        match rng.below(if text { 12 } else { 9 }) {
            0 if len > 0 => {
                let i = rng.below(len);
                b[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                b[i] = if rng.below(2) == 0 {
                    INTERESTING_BYTES[rng.below(INTERESTING_BYTES.len())]
                } else {
                    rng.next() as u8
                };
            }
            2 => {
                let i = rng.below(len + 1);
                for _ in 0..1 + rng.below(4) {
                    b.insert(i, rng.next() as u8);
                }
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = (1 + rng.below(8)).min(len - i);
                b.drain(i..i + n);
            }
            4 if len > 0 => {
                let i = rng.below(len);
                let n = (1 + rng.below(32)).min(len - i);
                let piece = b[i..i + n].to_vec();
                let at = rng.below(len + 1);
                b.splice(at..at, piece);
            }
            5 if !other.is_empty() => {
                let i = rng.below(len + 1);
                let j = rng.below(other.len());
                b.truncate(i);
                b.extend_from_slice(&other[j..]);
            }
            6 if len >= 8 => {
                let i = rng.below(len - 7);
                let v = INTERESTING_INTS[rng.below(INTERESTING_INTS.len())];
                let w = [1, 2, 4, 8][rng.below(4)];
                let v = if rng.below(4) == 0 { v.wrapping_neg() } else { v };
                b[i..i + w].copy_from_slice(&v.to_le_bytes()[..w]);
            }
            7 if len > 0 => b.truncate(rng.below(len)),
            8 if len > 0 => {
                let i = rng.below(len);
                b[i] = b[i].wrapping_add(1 + rng.below(3) as u8);
            }
            // Text: token-level edits.
            9..=11 => {
                let s = String::from_utf8_lossy(&b).into_owned();
                let mut toks: Vec<&str> =
                    s.split_inclusive(|c: char| c.is_whitespace() || ",()[]{}:=".contains(c)).collect();
                let n = toks.len();
                match rng.below(4) {
                    0 if n > 0 => {
                        toks.remove(rng.below(n));
                    }
                    1 if n > 1 => toks.swap(rng.below(n), rng.below(n)),
                    2 if n > 0 => {
                        let i = rng.below(n);
                        toks[i] = TOKENS[rng.below(TOKENS.len())];
                    }
                    _ => {
                        let i = rng.below(n + 1);
                        toks.insert(i, " ");
                        toks.insert(i, TOKENS[rng.below(TOKENS.len())]);
                    }
                }
                b = toks.concat().into_bytes();
            }
            _ => {}
        }
    }
    b
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `target` on `data`; on a panic, saves the input and returns where.
fn run_one(target: Target, data: &[u8], what: &str) -> Option<String> {
    match catch_unwind(AssertUnwindSafe(|| target.run(data))) {
        Ok(()) => None,
        Err(_) => {
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-short-failures").join(target.name());
            let _ = std::fs::create_dir_all(&dir);
            let hash =
                data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
            let path = dir.join(format!("{hash:016x}"));
            let _ = std::fs::write(&path, data);
            Some(format!("{what}: panicked; input saved to {}", path.display()))
        }
    }
}

/// The short run of one target: seeds, `mutants` mutants, then the regression corpus.
/// Returns the number of mutants whose outcome was `ok` (accepted and, where it applies, run).
fn short_run(target: Target, mutants: usize, min_seeds: usize) -> usize {
    let started = std::time::Instant::now();
    let seeds = seeds(target, root());
    assert!(seeds.len() >= min_seeds, "{}: only {} seeds", target.name(), seeds.len());
    let mut failures = Vec::new();
    for (name, data) in &seeds {
        failures.extend(run_one(target, data, &format!("seed {name}")));
    }
    let mut rng = Rng(0x5eed ^ target.name().len() as u64);
    let mut ok = 0;
    for k in 0..mutants {
        let (name, seed) = &seeds[rng.below(seeds.len())];
        let other = &seeds[rng.below(seeds.len())].1;
        let text = std::str::from_utf8(seed).is_ok() && !matches!(target, Target::Planner);
        let data = mutate(&mut rng, seed, other, text);
        match catch_unwind(AssertUnwindSafe(|| target.outcome(&data))) {
            Ok(outcome) => ok += usize::from(outcome == "ok"),
            Err(_) => failures.extend(run_one(target, &data, &format!("mutant {k} of {name}"))),
        }
    }
    failures.extend(replay_regressions(target));
    assert!(failures.is_empty(), "{}: {} failures:\n{}", target.name(), failures.len(), failures.join("\n"));
    eprintln!(
        "{}: {} seeds, {mutants} mutants ({ok} ok) in {:.1} s",
        target.name(),
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
    ok
}

/// Every input under `tests/fuzz-regressions/<target>/` runs without a panic within two
/// seconds, and gives the outcome in its `NAME.expected` file, which must exist
/// (`RXVM_UPDATE_FUZZ_EXPECTED=1` writes the outcomes instead; review them). Assembly
/// text is assembled even when it names files (`Target::outcome_reading_files`).
fn replay_regressions(target: Target) -> Vec<String> {
    let dir = root().join("tests/fuzz-regressions").join(target.name());
    let mut failures = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_none_or(|x| x != "expected"))
        .collect();
    files.sort();
    for path in files {
        let name = path.display().to_string();
        let Ok(data) = std::fs::read(&path) else {
            failures.push(format!("{name}: unreadable"));
            continue;
        };
        let expected_path = PathBuf::from(format!("{name}.expected"));
        let started = std::time::Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| target.outcome_reading_files(&data)));
        // Some regressions were denials of service: each must now finish quickly.
        let secs = started.elapsed().as_secs_f64();
        if secs > 2.0 {
            failures.push(format!("regression {name}: took {secs:.1} s"));
        }
        match result {
            Err(_) => failures.push(format!("regression {name}: panicked")),
            Ok(outcome) => {
                if std::env::var_os("RXVM_UPDATE_FUZZ_EXPECTED").is_some() {
                    if let Err(e) = std::fs::write(&expected_path, format!("{}\n", outcome.trim_end())) {
                        failures.push(format!("{}: {e}", expected_path.display()));
                    }
                    continue;
                }
                match std::fs::read_to_string(&expected_path) {
                    Ok(expected) if outcome.trim_end() == expected.trim_end() => {}
                    Ok(expected) => failures.push(format!(
                        "regression {name}: outcome differs from {}:\n--- expected\n{}\n--- got\n{}",
                        expected_path.display(),
                        expected.trim_end(),
                        outcome.trim_end()
                    )),
                    Err(_) => failures.push(format!(
                        "regression {name}: no {} (RXVM_UPDATE_FUZZ_EXPECTED=1 writes it); the outcome is:\n{}",
                        expected_path.display(),
                        outcome.trim_end()
                    )),
                }
            }
        }
    }
    failures
}

#[test]
fn fuzz_short_asm_text() {
    let ok = short_run(Target::AsmText, 30_000, 40);
    assert!(ok > 0, "no mutant assembled: the mutator only makes garbage");
}

#[test]
fn fuzz_short_rxb_load() {
    let ok = short_run(Target::RxbLoad, 100_000, 40);
    assert!(ok > 0, "no mutant loaded: the mutator only makes garbage");
}

#[test]
fn fuzz_short_exec_host() {
    let ok = short_run(Target::ExecHost, 60_000, 80);
    assert!(ok > 0, "no mutant ran to the end");
}

#[test]
fn fuzz_short_onnx_frontend() {
    let require = std::env::var_os("RXVM_REQUIRE_ONNX_DATA").is_some();
    let ok = short_run(Target::OnnxFrontend, 60_000, if require { 60 } else { 30 });
    assert!(ok > 0, "no mutant compiled and ran");
}

#[test]
fn fuzz_short_planner() {
    let ok = short_run(Target::Planner, 8_000, 10);
    assert!(ok > 0, "no mutant was a valid problem");
}

/// The mutator is deterministic: the short runs try the same inputs every time.
#[test]
fn mutations_are_deterministic() {
    let seed = b"func @main() -> int {\n  %x = int 42\n  ret %x\n}\n";
    let run = || {
        let mut rng = Rng(7);
        (0..50).map(|_| mutate(&mut rng, seed, seed, true)).collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}
