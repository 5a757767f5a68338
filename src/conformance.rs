//! `rxvm conformance DIR...`: runs ONNX backend test cases (a folder with `model.onnx` and
//! `test_data_set_*/input_*.pb, output_*.pb`) through the VM's operators and compares
//! with the expected outputs.

use crate::compile::{compile, Options};
use crate::onnx::{read_model, read_tensor_file};
use rxvm_vm::memory::DeviceSpec;
use rxvm_vm::{HostTensor, HostValue, Vm};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Relative and absolute tolerance for float outputs: `|got - want| <= ATOL + RTOL * |want|`
/// (the ONNX backend tests use rtol 1e-3).
pub const RTOL: f64 = 1e-3;
pub const ATOL: f64 = 1e-5;

/// How one case ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Pass,
    Fail(String),
    /// Uses operators the VM lacks (named).
    Skip(String),
}

/// A case directory's result.
#[derive(Clone, Debug)]
pub struct CaseResult {
    pub name: String,
    pub outcome: Outcome,
}

/// The case directories under `dirs`: each dir that holds `model.onnx`, or its
/// subdirectories that do, sorted.
pub fn find_cases(dirs: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for d in dirs {
        if d.join("model.onnx").is_file() {
            out.push(d.clone());
            continue;
        }
        let entries = std::fs::read_dir(d).map_err(|e| format!("cannot read {}: {e}", d.display()))?;
        let mut found: Vec<PathBuf> =
            entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.join("model.onnx").is_file()).collect();
        if found.is_empty() {
            return Err(format!("{} holds no ONNX test case (no model.onnx in it or its subfolders)", d.display()));
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

fn numbered(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<(usize, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            let n = name.strip_prefix(prefix)?.strip_suffix(".pb").unwrap_or(name.strip_prefix(prefix)?);
            Some((n.parse().ok()?, p))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

/// Compares `got` with `want` within the tolerance; the first mismatch, if any.
pub fn compare(got: &HostTensor, want: &HostTensor) -> Result<(), String> {
    if got.shape != want.shape {
        return Err(format!("shape {:?}, expected {:?}", got.shape, want.shape));
    }
    if got.dtype != want.dtype {
        return Err(format!("dtype {}, expected {}", got.dtype, want.dtype));
    }
    if !got.dtype.is_float() {
        return if got.data == want.data { Ok(()) } else { Err("integer values differ".into()) };
    }
    let (g, w) = (got.to_f64(), want.to_f64());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = (a - b).abs() <= ATOL + RTOL * b.abs() || (a.is_nan() && b.is_nan());
        if !ok {
            return Err(format!("element {i} is {a}, expected {b} (tolerance {ATOL} + {RTOL} * |expected|)"));
        }
    }
    Ok(())
}

/// Runs one case on `device`.
pub fn run_case(dir: &Path, device: &DeviceSpec) -> Outcome {
    let model = match read_model(&dir.join("model.onnx")) {
        Ok(m) => m,
        Err(e) => return Outcome::Fail(e),
    };
    let missing = model.unsupported_ops();
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|(o, _)| o.as_str()).collect();
        return Outcome::Skip(format!("uses {}", names.join(", ")));
    }
    if let DeviceSpec::OpenCl(info) = device {
        let mut lacking: Vec<&str> =
            model.nodes.iter().map(|n| n.op.as_str()).filter(|op| rxvm_vm::ops::cl_fn(op).is_none()).collect();
        lacking.sort();
        lacking.dedup();
        if !lacking.is_empty() {
            return Outcome::Skip(format!("no OpenCL kernel on `{}` for {}", info.caps.name, lacking.join(", ")));
        }
    }
    let sets = numbered(dir, "test_data_set_");
    if sets.is_empty() {
        return Outcome::Fail("no test_data_set_* folder".into());
    }
    for set in sets {
        let mut inputs = Vec::new();
        for p in numbered(&set, "input_") {
            match read_tensor_file(&p) {
                Ok((_, t)) => inputs.push(t),
                Err(e) => return Outcome::Fail(e),
            }
        }
        let mut wants = Vec::new();
        for p in numbered(&set, "output_") {
            match read_tensor_file(&p) {
                Ok((_, t)) => wants.push(t),
                Err(e) => return Outcome::Fail(e),
            }
        }
        if inputs.len() != model.inputs.len() {
            return Outcome::Fail(format!(
                "{} inputs in {}, the model takes {}",
                inputs.len(),
                set.display(),
                model.inputs.len()
            ));
        }
        let shapes: Vec<Vec<i64>> = inputs.iter().map(|t| t.shape.clone()).collect();
        let module = match compile(&model, &shapes, &Options::default()) {
            Ok(c) => c.module,
            Err(e) => return Outcome::Fail(e),
        };
        let mut vm = match Vm::with_devices(Arc::new(module), vec![device.clone()]) {
            Ok(vm) => vm,
            Err(e) => return Outcome::Fail(e.to_string()),
        };
        let args: Vec<HostValue> = inputs.into_iter().map(HostValue::Tensor).collect();
        let outs = match vm.invoke("main", &args) {
            Ok(o) => o,
            Err(e) => return Outcome::Fail(e.into_data().message),
        };
        for (i, (got, want)) in outs.iter().zip(&wants).enumerate() {
            let HostValue::Tensor(got) = got else { return Outcome::Fail(format!("output {i} is not a tensor")) };
            if let Err(e) = compare(got, want) {
                return Outcome::Fail(format!("output {i}: {e}"));
            }
        }
    }
    Outcome::Pass
}

/// Runs every case; the results in order.
pub fn run_all(cases: &[PathBuf], device: &DeviceSpec) -> Vec<CaseResult> {
    cases
        .iter()
        .map(|c| CaseResult {
            name: c.file_name().map_or_else(|| c.display().to_string(), |n| n.to_string_lossy().into_owned()),
            outcome: run_case(c, device),
        })
        .collect()
}

/// The report: one line per case and the closing `N passed, M failed, K skipped`.
pub fn report(results: &[CaseResult]) -> String {
    let mut s = String::new();
    let (mut p, mut f, mut k) = (0, 0, 0);
    for r in results {
        match &r.outcome {
            Outcome::Pass => {
                p += 1;
                s.push_str(&format!("pass  {}\n", r.name));
            }
            Outcome::Fail(e) => {
                f += 1;
                s.push_str(&format!("FAIL  {}: {e}\n", r.name));
            }
            Outcome::Skip(e) => {
                k += 1;
                s.push_str(&format!("skip  {}: {e}\n", r.name));
            }
        }
    }
    s.push_str(&format!("{p} passed, {f} failed, {k} skipped\n"));
    s
}
