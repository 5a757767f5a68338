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

/// Whether `got` matches `want`: finite values within the tolerance, non-finite ones
/// exactly (NaN matches NaN, +inf only +inf, -inf only -inf; `inf - inf` is NaN, so the
/// tolerance alone would fail equal infinities and pass nothing else).
pub fn close(got: f64, want: f64) -> bool {
    if !got.is_finite() || !want.is_finite() {
        return (got.is_nan() && want.is_nan()) || got == want;
    }
    (got - want).abs() <= ATOL + RTOL * want.abs()
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
        if !close(*a, *b) {
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
        if outs.len() != wants.len() {
            return Outcome::Fail(format!(
                "{} output(s), but {} holds {} expected output(s)",
                outs.len(),
                set.display(),
                wants.len()
            ));
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use rxvm_vm::types::DType;

    fn f32s(values: &[f32]) -> HostTensor {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        HostTensor::new(DType::F32, vec![values.len() as i64], bytes).unwrap()
    }

    #[test]
    fn equal_non_finite_values_match() {
        let v = [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1.0];
        assert_eq!(compare(&f32s(&v), &f32s(&v)), Ok(()));
    }

    #[test]
    fn non_finite_values_match_only_themselves() {
        let inf = f32::INFINITY;
        for (got, want) in [
            (inf, -inf),
            (-inf, inf),
            (inf, f32::MAX),
            (f32::MAX, inf),
            (inf, f32::NAN),
            (f32::NAN, inf),
            (f32::NAN, 0.0),
            (0.0, f32::NAN),
        ] {
            assert!(compare(&f32s(&[got]), &f32s(&[want])).is_err(), "{got} matched {want}");
        }
        assert_eq!(
            compare(&f32s(&[1.0, -inf]), &f32s(&[1.0, inf])),
            Err("element 1 is -inf, expected inf (tolerance 0.00001 + 0.001 * |expected|)".into())
        );
    }

    #[test]
    fn finite_values_match_within_the_tolerance() {
        assert!(close(1000.0, 1000.9));
        assert!(!close(1000.0, 1001.5));
        assert!(close(0.0, 1e-6));
    }
}
