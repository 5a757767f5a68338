//! Every program in `examples/` runs with `rxvm run` and gives the values it promises.

use rxvm::npy::{read_npy, write_npy};
use rxvm::vm::HostTensor;
use std::path::{Path, PathBuf};
use std::process::Command;

fn rxvm(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rxvm"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run rxvm");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn run_ok(args: &[&str]) -> String {
    let (ok, out, err) = rxvm(args);
    assert!(ok, "rxvm {args:?} failed:\n{err}");
    out
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rxvm-examples-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d.join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn stats_json(stdout: &str) -> serde_json::Value {
    let line = stdout.lines().last().expect("a stats line");
    serde_json::from_str(line).expect("stats are one JSON object")
}

#[test]
fn tiny_adds_the_constant() {
    let x = tmp("tiny_x.npy");
    write_npy(&x, &HostTensor::from_f32(&[4], &[10.0, 20.0, 30.0, 40.0]).unwrap()).unwrap();
    let y = tmp("tiny_y.npy");
    let out = run_ok(&["run", "examples/tiny.rxa", "--input", &format!("x={}", s(&x)), "--output", s(&y)]);
    assert_eq!(out, "result 0: f32[4] [11.0, 22.0, 33.0, 44.0]\n");
    assert_eq!(read_npy(&y).unwrap().to_f64(), vec![11.0, 22.0, 33.0, 44.0]);
}

#[test]
fn storage_reuse_computes_through_shared_bytes_and_hits_the_pool() {
    let xs: Vec<f32> = (0..16).map(|i| i as f32 - 4.0).collect();
    let x = tmp("reuse_x.npy");
    write_npy(&x, &HostTensor::from_f32(&[16], &xs).unwrap()).unwrap();
    let y = tmp("reuse_y.npy");
    let out = run_ok(&[
        "run",
        "examples/storage_reuse.rxa",
        "-i",
        &format!("x={}", s(&x)),
        "-o",
        s(&y),
        "--stats=json",
        "-q",
    ]);
    let want: Vec<f64> = xs
        .iter()
        .map(|&v| {
            let a = (v as f64).max(0.0);
            2.0 * a * a - a
        })
        .collect();
    assert_eq!(read_npy(&y).unwrap().to_f64(), want);
    let st = stats_json(&out);
    // x (input), arena, tmp (its class is 256 bytes like the arena's, but the arena is
    // still live), out: fresh. `again` reuses the arena's block.
    assert_eq!(st["fresh_allocations"], 4, "{st}");
    assert_eq!(st["pool_hits"], 1, "{st}");
    assert_eq!(st["peak_bytes"], 64 + 256 + 200, "{st}");
}

#[test]
fn alloc_loop_reports_one_fresh_allocation_and_999_pool_hits() {
    let out = run_ok(&["run", "examples/alloc_loop.rxa", "--input", "n=1000", "--stats=json"]);
    assert!(out.starts_with("result 0: 512000.0\n"), "{out}");
    let st = stats_json(&out);
    assert_eq!((st["fresh_allocations"].as_u64(), st["pool_hits"].as_u64()), (Some(1), Some(999)), "{st}");
    assert_eq!(st["live_bytes"], 0);
    assert_eq!(st["peak_bytes"], 4096);
    assert!(st["instructions"].as_u64().unwrap() > 10_000, "{st}");
    let table = run_ok(&["run", "examples/alloc_loop.rxa", "--input", "n=10", "--stats", "-q"]);
    assert!(table.contains("fresh_allocations") && table.contains("pool_hits"), "{table}");
}

#[test]
fn dynamic_loop_sizes_storages_from_registers() {
    // Iteration k (1-based) sums 0 .. 16k - 1.
    let want: f64 = (1..=4)
        .map(|k| {
            let m = 16 * k - 1;
            (m * (m + 1) / 2) as f64
        })
        .sum();
    let out = run_ok(&["run", "examples/dynamic_loop.rxa", "--input", "n=4", "--stats=json"]);
    assert!(out.starts_with(&format!("result 0: {want:?}\n")), "{out}");
    // 64, 128, 192, 256 bytes: four different size classes, four fresh blocks.
    assert_eq!(stats_json(&out)["fresh_allocations"], 4);
}

#[test]
fn run_time_shapes_select_rows_by_value() {
    let x = tmp("rts_x.npy");
    let values: Vec<f32> = (0..12).map(|i| i as f32 - 4.0).collect();
    write_npy(&x, &HostTensor::from_f32(&[4, 3], &values).unwrap()).unwrap();
    for (scores, rows) in [([1.0, -1.0, 2.0, -3.0], vec![0, 2]), ([-1.0, -1.0, -1.0, 0.5], vec![3])] {
        let score = tmp("rts_score.npy");
        write_npy(&score, &HostTensor::from_f32(&[4], &scores).unwrap()).unwrap();
        let y = tmp("rts_y.npy");
        let out = run_ok(&[
            "run",
            "examples/run_time_shapes.rxa",
            "--input",
            &format!("x={}", s(&x)),
            "--input",
            &format!("score={}", s(&score)),
            "--output",
            s(&y),
            "--stats=json",
        ]);
        let y = read_npy(&y).unwrap();
        assert_eq!(y.shape, vec![rows.len() as i64, 3], "{out}");
        let want: Vec<f64> =
            rows.iter().flat_map(|&r| values[r * 3..r * 3 + 3].iter().map(|v| f64::from(v.max(0.0)))).collect();
        assert_eq!(y.to_f64(), want);
        // The two inputs and three tensors made at run time (keep, rows, y); only the
        // result is left.
        let st = stats_json(&out);
        assert_eq!(st["storages_created"], 5, "{out}");
        assert_eq!(st["live_storages"], 1, "{out}");
    }
}

#[test]
fn textures_pad_rows_to_the_pitch() {
    let dense = tmp("tex_dense.npy");
    let out = run_ok(&["run", "examples/textures.rxa", "-o", s(&dense), "-q"]);
    assert_eq!(out, "24 12.0\n", "the print of numel(%w) and sum(%w)");
    let d = read_npy(&dense).unwrap();
    assert_eq!(d.shape, vec![1, 2, 30, 4]);
    assert_eq!(d.to_f64(), (0..240).map(f64::from).collect::<Vec<_>>());
    // With a pitch alignment of 1 texel the image is dense; the results are the same.
    let out = run_ok(&["run", "examples/textures.rxa", "--host-caps", "pitch=1", "-o", s(&dense), "-q"]);
    assert_eq!(out, "24 12.0\n");
    assert_eq!(read_npy(&dense).unwrap().to_f64(), (0..240).map(f64::from).collect::<Vec<_>>());
    // A pitch of 128 texels makes the 30x2 image 4 KiB: it no longer fits after 2 KiB.
    let (ok, _, err) = rxvm(&["run", "examples/textures.rxa", "--host-caps", "pitch=128"]);
    assert!(!ok && err.contains("ends past the end of %s (4096 bytes)"), "{err}");
}

#[test]
fn texture_alias_sees_image_texels_through_the_buffer() {
    let out = tmp("alias.npy");
    run_ok(&["run", "examples/texture_alias.rxa", "-o", s(&out), "-q"]);
    let v = read_npy(&out).unwrap().to_f64();
    for y in 0..2 {
        for x in 0..64 {
            for c in 0..4 {
                let want = if x < 30 { ((y * 30 + x) * 4 + c) as f64 } else { -1.0 };
                assert_eq!(v[(y * 64 + x) * 4 + c], want, "texel ({x}, {y}) channel {c}");
            }
        }
    }
}

#[test]
fn calls_recurse_and_share_the_callers_storage() {
    let out = run_ok(&["run", "examples/calls.rxa", "--input", "x=zeros"]);
    assert!(out.starts_with("result 0: 3628800\n"), "{out}");
    let x = tmp("calls_x.npy");
    write_npy(&x, &HostTensor::from_f32(&[4], &[1.0, -2.0, 0.5, 3.0]).unwrap()).unwrap();
    let out = run_ok(&["run", "examples/calls.rxa", "--input", &format!("x={}", s(&x))]);
    assert_eq!(
        out,
        "result 0: 3628800\nresult 1: f32[4] [2.0, -4.0, 1.0, 6.0]\nresult 2: f32[4] [-2.0, 4.0, -1.0, -6.0]\n"
    );
}

#[test]
fn mlp_matches_a_reference_computation() {
    let w1 = [[0.5, -1.0, 0.25], [1.0, 0.5, -0.5], [-0.25, 1.0, 0.75], [0.0, -0.5, 1.0]];
    let b1 = [0.1, -0.2, 0.3];
    let w2 = [[1.0, -1.0], [0.5, 2.0], [-1.5, 0.25]];
    let xs = [0.3f32, -1.2, 2.0, 0.7];
    let mut h = [0f64; 3];
    for j in 0..3 {
        let v: f64 = (0..4).map(|k| xs[k] as f64 * w1[k][j]).sum::<f64>();
        h[j] = ((v as f32 + b1[j] as f32) as f64).max(0.0);
    }
    let want: Vec<f64> = (0..2).map(|j| ((0..3).map(|k| h[k] * w2[k][j]).sum::<f64>() as f32 + 0.5) as f64).collect();
    let x = tmp("mlp_x.npy");
    write_npy(&x, &HostTensor::from_f32(&[1, 4], &xs).unwrap()).unwrap();
    let y = tmp("mlp_y.npy");
    run_ok(&["run", "examples/mlp.rxa", "--input", &format!("x={}", s(&x)), "--output", s(&y), "-q"]);
    let got = read_npy(&y).unwrap().to_f64();
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0), "got {got:?}, want {want:?}");
    }
}
