//! `rxvm conformance DIR...`: runs ONNX backend test cases (a folder with `model.onnx` and
//! `test_data_set_*/input_*.pb, output_*.pb`) through the VM's operators and compares
//! with the expected outputs. Each case that does not pass gets a [`Cause`]; `--summary`
//! groups them ([`summary`]).

use crate::compile::{compile, Options};
use crate::onnx::{read_model, read_tensor_file};
use rxvm_vm::memory::DeviceSpec;
use rxvm_vm::{HostTensor, HostValue, Vm};
use std::path::{Path, PathBuf};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::Duration;

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

/// Why a case did not pass. Wrong results, panics and timeouts are known where they happen;
/// the others are read from the error the model reader, compiler or VM gave
/// ([`classify_error`]). The `String` of a variant is its detail, what the summary ranks:
/// the dtype, or the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cause {
    /// Uses operators the VM lacks (their names; an operator of another domain as
    /// `domain.Op`).
    MissingOperator(Vec<String>),
    /// A dtype the reader or an operator does not take (f16, bf16, float8, int4, strings,
    /// integer widths an operator lacks), or a value that is not a tensor (sequence, map,
    /// optional). The detail: the ONNX type (`BFLOAT16`), `Op on dtype` (`Add on u8`) or
    /// `non-tensor value`.
    Dtype(String),
    /// An attribute, or an attribute value, the operator does not support. The detail: the
    /// operator.
    Attribute(String),
    /// A shape that depends on a value computed at run time (a `shape`, `axes`, `pads`...
    /// input that is not a constant). The detail: the operator.
    DynamicShape(String),
    /// A control-flow operator or a graph attribute (If, Loop, Scan, SequenceMap). The
    /// detail: the operator.
    ControlFlow(String),
    /// The case ran and an output differs from the expected one (value, shape, dtype or
    /// number of outputs).
    WrongResult,
    /// The case panicked (a bug: the run goes on with the next case).
    Panic,
    /// The case ran longer than the time limit.
    Timeout,
    /// Anything else.
    Other,
}

impl Cause {
    /// The group's heading in the summary.
    pub fn label(&self) -> &'static str {
        match self {
            Cause::MissingOperator(_) => "missing operator",
            Cause::Dtype(_) => "unsupported dtype",
            Cause::Attribute(_) => "unsupported attribute",
            Cause::DynamicShape(_) => "dynamic shape",
            Cause::ControlFlow(_) => "control flow",
            Cause::WrongResult => "wrong result",
            Cause::Panic => "panic",
            Cause::Timeout => "timeout",
            Cause::Other => "other",
        }
    }

    /// What the summary ranks within the group: the operators, the dtype, or nothing.
    pub fn details(&self) -> Vec<&str> {
        match self {
            Cause::MissingOperator(ops) => ops.iter().map(String::as_str).collect(),
            Cause::Dtype(d) | Cause::Attribute(d) | Cause::DynamicShape(d) | Cause::ControlFlow(d) => vec![d.as_str()],
            Cause::WrongResult | Cause::Panic | Cause::Timeout | Cause::Other => Vec::new(),
        }
    }
}

/// Operators that hold subgraphs: a case using one is counted as control flow.
const CONTROL_FLOW: [&str; 4] = ["If", "Loop", "Scan", "SequenceMap"];

/// The operator an error names: `node `n` (Op): ...` or `@onnx.Op: ...`; `?` if none.
fn error_op(msg: &str) -> String {
    let from_node = msg.find("` (").and_then(|i| {
        let rest = &msg[i + 3..];
        rest.find(')').map(|j| rest[..j].to_string())
    });
    let from_schema = || {
        msg.find("@onnx.").map(|i| {
            let rest = &msg[i + 6..];
            rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next().unwrap_or_default().to_string()
        })
    };
    from_node.or_else(from_schema).filter(|s| !s.is_empty()).unwrap_or_else(|| "?".into())
}

/// The word after `prefix` in `msg` (up to a space or `(`), if `prefix` is there.
fn word_after<'a>(msg: &'a str, prefix: &str) -> Option<&'a str> {
    let i = msg.find(prefix)?;
    msg[i + prefix.len()..].split([' ', '(', ')', ',', ';', '[']).next().filter(|w| !w.is_empty())
}

/// The cause of an error from reading, compiling or running a case (not of a wrong
/// result, which [`run_case`] knows itself). `model` is the case's `model.onnx`, read to
/// name the operators of a domain the reader refuses. When the error joins several
/// (`a; b`), the first recognised kind in the order below wins.
pub fn classify_error(msg: &str, model: Option<&Path>) -> Cause {
    if msg.contains("of type GRAPH is not supported") || msg.contains("opset 8's `sequence_lens` is not supported") {
        return Cause::ControlFlow(error_op(msg));
    }
    if msg.contains("of type TYPE_PROTO is not supported") {
        return Cause::Dtype("non-tensor value".into());
    }
    if msg.contains("operator domain") && msg.contains("is not supported")
        || msg.contains("declares no opset for the default domain")
    {
        let ops = model.map(foreign_ops).unwrap_or_default();
        return if ops.is_empty() { Cause::Other } else { Cause::MissingOperator(ops) };
    }
    if let Some(t) = word_after(msg, "unsupported ONNX data type ").or_else(|| word_after(msg, ": ONNX data type ")) {
        return Cause::Dtype(t.to_string());
    }
    if msg.contains(" is not a tensor") {
        return Cause::Dtype("non-tensor value".into());
    }
    // Every dtype the VM names (`f8e4m3fn` is not read as a prefix of `f8e4m3fnuz`).
    let dtype_at = |rest: &str| {
        rxvm_vm::types::DType::ALL
            .iter()
            .map(|d| d.name())
            .find(|d| rest.starts_with(d) && !rest[d.len()..].starts_with(|c: char| c.is_ascii_alphanumeric()))
    };
    let found =
        msg.match_indices(", found ").find_map(|(i, m)| dtype_at(&msg[i + m.len()..]).map(|d| (i + m.len(), d)));
    if let Some((at, d)) = found {
        if msg.contains("must have the same dtype") {
            // `..., found f32 and u32`: the pair.
            let other = msg[at + d.len()..].strip_prefix(" and ").and_then(dtype_at);
            return Cause::Dtype(format!("{d} with {}", other.unwrap_or("?")));
        }
        // `must be f32, i32 or i64, found u8`; not `must be f32[3], found f32[4]` (a shape).
        let wanted = msg[..at].rfind(" must be ").map(|i| &msg[i..at]);
        if wanted.is_some_and(|w| !w.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w == d)) {
            return Cause::Dtype((*d).to_string());
        }
    }
    if rxvm_vm::ir::schema::needs_input_value(msg) {
        return Cause::DynamicShape(error_op(msg));
    }
    if msg.contains("a Constant needs a tensor `value`") {
        return Cause::Attribute("Constant".into());
    }
    if msg.contains(" has no attribute ")
        || msg.contains("only inference is supported")
        || msg.contains("supports inference only")
        || msg.contains(") is not supported; use ")
    {
        return Cause::Attribute(error_op(msg));
    }
    Cause::Other
}

/// The operators of `model` outside the default domain, as `domain.Op`, sorted, each once.
fn foreign_ops(model: &Path) -> Vec<String> {
    use onnx_protobuf::{Message, ModelProto};
    let Ok(m) = std::fs::read(model).map_err(|_| ()).and_then(|b| ModelProto::parse_from_bytes(&b).map_err(|_| ()))
    else {
        return Vec::new();
    };
    let mut ops: Vec<String> = m
        .graph
        .iter()
        .flat_map(|g| &g.node)
        .filter(|n| !n.domain.is_empty() && n.domain != "ai.onnx")
        .map(|n| format!("{}.{}", n.domain, n.op_type))
        .collect();
    ops.sort();
    ops.dedup();
    ops
}

/// A case directory's result.
#[derive(Clone, Debug)]
pub struct CaseResult {
    pub name: String,
    pub outcome: Outcome,
    /// Why it did not pass (`None` when it passed).
    pub cause: Option<Cause>,
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
    run_case_with_cause(dir, device).0
}

/// Runs one case on `device`: how it ended, and why when it did not pass.
pub fn run_case_with_cause(dir: &Path, device: &DeviceSpec) -> (Outcome, Option<Cause>) {
    run_case_with_options(dir, device, &Options::default())
}

/// [`run_case_with_cause`], compiling with `options` (e.g. `--textures auto`).
pub fn run_case_with_options(dir: &Path, device: &DeviceSpec, options: &Options) -> (Outcome, Option<Cause>) {
    let model_path = dir.join("model.onnx");
    let fail = |e: String| {
        let cause = classify_error(&e, Some(&model_path));
        (Outcome::Fail(e), Some(cause))
    };
    let wrong = |e: String| (Outcome::Fail(e), Some(Cause::WrongResult));
    let model = match read_model(&model_path) {
        Ok(m) => m,
        Err(e) => return fail(e),
    };
    let missing = model.unsupported_ops();
    if !missing.is_empty() {
        let names: Vec<String> = missing.iter().map(|(o, _)| o.clone()).collect();
        let cause = if let Some(cf) = names.iter().find(|n| CONTROL_FLOW.contains(&n.as_str())) {
            Cause::ControlFlow(cf.clone())
        } else {
            Cause::MissingOperator(names.clone())
        };
        return (Outcome::Skip(format!("uses {}", names.join(", "))), Some(cause));
    }
    if let DeviceSpec::OpenCl(info) = device {
        let mut lacking: Vec<&str> =
            model.called_ops().into_iter().filter(|op| rxvm_vm::ops::cl_fn(op).is_none()).collect();
        lacking.sort();
        lacking.dedup();
        if !lacking.is_empty() {
            let cause = Cause::MissingOperator(lacking.iter().map(|s| s.to_string()).collect());
            return (
                Outcome::Skip(format!("no OpenCL kernel on `{}` for {}", info.caps.name, lacking.join(", "))),
                Some(cause),
            );
        }
    }
    let sets = numbered(dir, "test_data_set_");
    if sets.is_empty() {
        return (Outcome::Fail("no test_data_set_* folder".into()), Some(Cause::Other));
    }
    for set in sets {
        let mut inputs = Vec::new();
        for p in numbered(&set, "input_") {
            match read_tensor_file(&p) {
                Ok((_, t)) => inputs.push(t),
                Err(e) => return fail(e),
            }
        }
        let mut wants = Vec::new();
        for p in numbered(&set, "output_") {
            match read_tensor_file(&p) {
                Ok((_, t)) => wants.push(t),
                Err(e) => return fail(e),
            }
        }
        if inputs.len() != model.inputs.len() {
            return (
                Outcome::Fail(format!(
                    "{} inputs in {}, the model takes {}",
                    inputs.len(),
                    set.display(),
                    model.inputs.len()
                )),
                Some(Cause::Other),
            );
        }
        let shapes: Vec<Vec<i64>> = inputs.iter().map(|t| t.shape.clone()).collect();
        let module = match compile(&model, &shapes, options) {
            Ok(c) => c.module,
            Err(e) => return fail(e),
        };
        let mut vm = match Vm::with_devices(Arc::new(module), vec![device.clone()]) {
            Ok(vm) => vm,
            Err(e) => return fail(e.to_string()),
        };
        let args: Vec<HostValue> = inputs.into_iter().map(HostValue::Tensor).collect();
        let outs = match vm.invoke("main", &args) {
            Ok(o) => o,
            Err(e) => return fail(e.into_data().message),
        };
        if outs.len() != wants.len() {
            return wrong(format!(
                "{} output(s), but {} holds {} expected output(s)",
                outs.len(),
                set.display(),
                wants.len()
            ));
        }
        for (i, (got, want)) in outs.iter().zip(&wants).enumerate() {
            let HostValue::Tensor(got) = got else { return wrong(format!("output {i} is not a tensor")) };
            if let Err(e) = compare(got, want) {
                return wrong(format!("output {i}: {e}"));
            }
        }
    }
    (Outcome::Pass, None)
}

/// How long one case may run on a device before [`run_all`] counts it as a timeout and
/// goes on: 60 s, and 30 min on Oclgrind, a simulator that takes minutes on the wheel's
/// largest convolution (`test_operator_conv`: about 3 min in a debug build).
pub fn default_time_limit(device: &DeviceSpec) -> Duration {
    match device {
        DeviceSpec::OpenCl(info) if info.platform.contains("Oclgrind") => Duration::from_secs(30 * 60),
        _ => Duration::from_secs(60),
    }
}

/// Runs every case within [`default_time_limit`]; the results in order.
pub fn run_all(cases: &[PathBuf], device: &DeviceSpec) -> Vec<CaseResult> {
    run_all_within(cases, device, default_time_limit(device))
}

/// Runs every case, each on a thread of its own so that a panic fails that case alone and
/// a case that runs longer than `limit` fails as a timeout (its thread is left to finish
/// on its own; the process's exit ends it); the results in order.
pub fn run_all_within(cases: &[PathBuf], device: &DeviceSpec, limit: Duration) -> Vec<CaseResult> {
    cases
        .iter()
        .map(|c| {
            let name = c.file_name().map_or_else(|| c.display().to_string(), |n| n.to_string_lossy().into_owned());
            let (outcome, cause) = run_guarded(c, device, limit);
            CaseResult { name, outcome, cause }
        })
        .collect()
}

fn run_guarded(case: &Path, device: &DeviceSpec, limit: Duration) -> (Outcome, Option<Cause>) {
    let (case, device) = (case.to_path_buf(), device.clone());
    match guarded(limit, move || run_case_with_cause(&case, &device)) {
        Ok(r) => r,
        Err((cause, why)) => (Outcome::Fail(why), Some(cause)),
    }
}

/// Runs `f` on a thread of its own and waits at most `limit` for it: its result, or why
/// there is none — `Cause::Timeout` (the thread is left to finish on its own),
/// `Cause::Panic` with the panic's message, or `Cause::Other` if no thread could start.
fn guarded<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Result<T, (Cause, String)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let start = std::time::Instant::now();
    let spawned = std::thread::Builder::new().name("conformance case".into()).spawn(move || {
        // The receiver is gone only after a timeout, when nobody waits for the result.
        let _ = tx.send(f());
    });
    let handle = spawned.map_err(|e| (Cause::Other, format!("cannot start a thread for the case: {e}")))?;
    let late = || (Cause::Timeout, format!("ran longer than the time limit ({limit:?})"));
    match rx.recv_timeout(limit) {
        // A result that came in after the limit (the waiting thread was not scheduled in
        // time) is late all the same: the limit is on the case, not on the wait.
        Ok(r) => {
            let _ = handle.join();
            if start.elapsed() > limit {
                return Err(late());
            }
            Ok(r)
        }
        Err(RecvTimeoutError::Timeout) => Err(late()),
        // The sender went without sending: `f` panicked.
        Err(RecvTimeoutError::Disconnected) => {
            let msg = match handle.join() {
                Err(p) => p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(not a text)".into()),
                Ok(()) => "(no message)".into(),
            };
            Err((Cause::Panic, format!("panicked: {msg}")))
        }
    }
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

/// `--summary`: the cases that did not pass, grouped by [`Cause`] with their counts, each
/// group's details ranked by the number of cases (the missing operators; the dtypes; the
/// operators whose attribute, shape or control flow is not supported), every case of the
/// groups that point at a bug (wrong result, panic, timeout) or at nothing known (other)
/// named with its error; then the closing `N passed, M failed, K skipped` (alone when every
/// case passed).
pub fn summary(results: &[CaseResult]) -> String {
    use std::collections::BTreeMap;
    type Group<'a> = (&'static str, Vec<&'a CaseResult>, BTreeMap<&'a str, usize>);
    let (mut p, mut f, mut k) = (0, 0, 0);
    let mut groups: Vec<Group> = Vec::new();
    for r in results {
        match &r.outcome {
            Outcome::Pass => p += 1,
            Outcome::Fail(_) => f += 1,
            Outcome::Skip(_) => k += 1,
        }
        let Some(cause) = &r.cause else { continue };
        let i = match groups.iter().position(|(l, _, _)| *l == cause.label()) {
            Some(i) => i,
            None => {
                groups.push((cause.label(), Vec::new(), BTreeMap::new()));
                groups.len() - 1
            }
        };
        groups[i].1.push(r);
        for d in cause.details() {
            *groups[i].2.entry(d).or_default() += 1;
        }
    }
    let known = ["missing operator", "unsupported dtype", "unsupported attribute", "dynamic shape", "control flow"];
    let order = |l: &str| known.iter().position(|x| *x == l).unwrap_or(usize::MAX);
    // The known kinds first, in a fixed order; then the ones that need a look.
    groups.sort_by_key(|(l, v, _)| (order(l), std::cmp::Reverse(v.len())));
    let mut s = String::new();
    if results.len() > p {
        s.push_str(&format!("{} case(s) did not pass, by cause:\n", results.len() - p));
    }
    for (label, cases, details) in &groups {
        let unit = if cases.len() == 1 { "case" } else { "cases" };
        s.push_str(&format!("  {label}: {} {unit}", cases.len()));
        if *label == "missing operator" {
            s.push_str(&format!(" ({} operators)", details.len()));
        }
        s.push('\n');
        let mut ranked: Vec<(&str, usize)> = details.iter().map(|(o, n)| (*o, *n)).collect();
        ranked.sort_by_key(|(o, n)| (std::cmp::Reverse(*n), *o));
        for (o, n) in ranked {
            s.push_str(&format!("    {o} {n}\n"));
        }
        if order(label) == usize::MAX {
            for r in cases {
                let (Outcome::Fail(e) | Outcome::Skip(e)) = &r.outcome else { continue };
                s.push_str(&format!("    {}: {e}\n", r.name));
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

    /// Errors as the reader, compiler and VM give them (from the node suite), each with the
    /// cause the summary files it under.
    #[test]
    fn errors_are_classified_by_cause() {
        let m = "out/node/test_x/model.onnx: ";
        let cases: [(String, Cause); 16] = [
            (
                format!("{m}node `Scan_0` (Scan): opset 8's `sequence_lens` is not supported: omit it (\"\") when every sequence has the full length"),
                Cause::ControlFlow("Scan".into()),
            ),
            (
                format!("{m}node `Scan_0` (Scan): attribute `body` of type GRAPH is not supported"),
                Cause::ControlFlow("Scan".into()),
            ),
            (
                format!("{m}input `s` is not a tensor; node `Loop_0` (Loop): attribute `body` of type GRAPH is not supported"),
                Cause::ControlFlow("Loop".into()),
            ),
            (
                format!("{m}input `X` has unsupported ONNX data type BFLOAT16 (16); node `Constant_0`: a Constant needs a tensor `value` and one output"),
                Cause::Dtype("BFLOAT16".into()),
            ),
            (
                format!("{m}test_data_set_0/output_0.pb: tensor `output`: ONNX data type FLOAT8E4M3FN (17) is not supported"),
                Cause::Dtype("FLOAT8E4M3FN".into()),
            ),
            (format!("{m}input `seq` is not a tensor"), Cause::Dtype("non-tensor value".into())),
            ("node `Add_0` (Add): input 0 (A) must be f32, f16, i32 or i64, found u8".into(), Cause::Dtype("u8".into())),
            ("node `MaxPool_0` (MaxPool): `X` must be f32, found u8[1, 1, 5, 5]".into(), Cause::Dtype("u8".into())),
            (
                "node `Pow_0` (Pow): inputs 0 and 1 must have the same dtype, found f32 and i64".into(),
                Cause::Dtype("f32 with i64".into()),
            ),
            (
                "node `ReduceSum_0` (ReduceSum): input 1 (axes) must be a constant: its value decides the output shape".into(),
                Cause::DynamicShape("ReduceSum".into()),
            ),
            (
                "node `Reshape_0` (Reshape): Reshape needs the value of its shape input to infer the output shape".into(),
                Cause::DynamicShape("Reshape".into()),
            ),
            (
                format!("{m}node `Constant_9`: a Constant needs a tensor `value` and one output"),
                Cause::Attribute("Constant".into()),
            ),
            (
                "node `Cast_0` (Cast): @onnx.Cast has no attribute `saturate`; its attributes are: to".into(),
                Cause::Attribute("Cast".into()),
            ),
            (
                "@onnx.Dropout: training_mode is true, but only inference is supported (Dropout copies its input)".into(),
                Cause::Attribute("Dropout".into()),
            ),
            ("node `Add_0` (Add): input 1 (B) must be f32[3], found f32[4]".into(), Cause::Other),
            ("something nobody anticipated".into(), Cause::Other),
        ];
        for (msg, want) in cases {
            assert_eq!(classify_error(&msg, None), want, "{msg}");
        }
        // The reader refuses another domain as a whole; without the model to name its
        // operators, the cause is unknown.
        let refused = "model.onnx: node `n`: operator domain `ai.onnx.ml` is not supported";
        assert_eq!(classify_error(refused, None), Cause::Other);
    }

    /// A model of another domain's operators: the reader refuses it, and the cause names
    /// them from the model itself.
    #[test]
    fn another_domains_operators_are_named() {
        use onnx_protobuf::{GraphProto, Message, ModelProto, NodeProto};
        let mut g = GraphProto::new();
        for (domain, op) in [("ai.onnx.ml", "LabelEncoder"), ("", "Relu"), ("ai.onnx.ml", "Binarizer")] {
            let mut n = NodeProto::new();
            n.op_type = op.into();
            n.domain = domain.into();
            g.node.push(n);
        }
        let mut m = ModelProto::new();
        m.graph = Some(g).into();
        let path = std::env::temp_dir().join(format!("rxvm-conformance-domain-{}.onnx", std::process::id()));
        std::fs::write(&path, m.write_to_bytes().unwrap()).unwrap();
        let msg = "model.onnx: the model declares no opset for the default domain `ai.onnx`";
        let cause = classify_error(msg, Some(&path));
        let _ = std::fs::remove_file(&path);
        assert_eq!(
            cause,
            Cause::MissingOperator(vec!["ai.onnx.ml.Binarizer".into(), "ai.onnx.ml.LabelEncoder".into()])
        );
    }

    #[test]
    fn the_summary_groups_and_ranks_the_causes() {
        let case =
            |name: &str, outcome: Outcome, cause: Option<Cause>| CaseResult { name: name.into(), outcome, cause };
        let skip = |ops: &[&str]| {
            (
                Outcome::Skip(format!("uses {}", ops.join(", "))),
                Some(Cause::MissingOperator(ops.iter().map(|o| o.to_string()).collect())),
            )
        };
        let (a, b, c) = (skip(&["Where"]), skip(&["Equal", "Where"]), skip(&["Equal", "Mod"]));
        let results = vec![
            case("ok", Outcome::Pass, None),
            case("a", a.0, a.1),
            case("b", b.0, b.1),
            case("c", c.0, c.1),
            case("d", Outcome::Fail("bad value".into()), Some(Cause::WrongResult)),
            case("e", Outcome::Fail("x".into()), Some(Cause::Dtype("u8".into()))),
            case("f", Outcome::Fail("y".into()), Some(Cause::Dtype("u8".into()))),
            case("g", Outcome::Fail("z".into()), Some(Cause::Dtype("BFLOAT16".into()))),
        ];
        assert_eq!(
            summary(&results),
            "7 case(s) did not pass, by cause:\n\
             \x20 missing operator: 3 cases (3 operators)\n\
             \x20   Equal 2\n\
             \x20   Where 2\n\
             \x20   Mod 1\n\
             \x20 unsupported dtype: 3 cases\n\
             \x20   u8 2\n\
             \x20   BFLOAT16 1\n\
             \x20 wrong result: 1 case\n\
             \x20   d: bad value\n\
             1 passed, 4 failed, 3 skipped\n"
        );
        // When every case passes, only the last line.
        assert_eq!(summary(&results[..1]), "1 passed, 0 failed, 0 skipped\n");
    }

    #[test]
    fn a_case_that_panics_or_hangs_fails_alone() {
        let limit = Duration::from_secs(10);
        assert_eq!(guarded(limit, || 7), Ok(7));
        assert_eq!(
            guarded(limit, || -> i32 { panic!("a bug in a kernel") }),
            Err((Cause::Panic, "panicked: a bug in a kernel".into()))
        );
        let n = 3;
        assert_eq!(
            guarded(limit, move || -> i32 { panic!("index {n} out of range") }),
            Err((Cause::Panic, "panicked: index 3 out of range".into()))
        );
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        // Blocks until the test lets it go: longer than the limit.
        let hang = move || rx.recv_timeout(Duration::from_secs(60)).is_ok();
        let started = std::time::Instant::now();
        assert_eq!(
            guarded(Duration::from_millis(50), hang),
            Err((Cause::Timeout, "ran longer than the time limit (50ms)".into()))
        );
        assert!(started.elapsed() < Duration::from_secs(30), "the timeout waited for the case");
        drop(tx);
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
