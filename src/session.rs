//! What the command line (`cli.rs`) and the REPL (`repl/`) share, so that the REPL does
//! not import the command line (which starts it): reading a program from a path (`.rxa`, `.rxb`, or an ONNX model compiled for
//! the host), building inputs from `--input` specs, selecting a device, and rendering
//! run-time errors. It imports neither front end.

use crate::compile::{Compiled, Options};
use crate::graph::{Graph, InputDim};
use crate::inputs::InputSpec;
use crate::npy::read_npy;
use rxvm_vm::bytecode::Reg;
use rxvm_vm::host_tensor::{HostTensor, HostValue};
use rxvm_vm::memory::DeviceSpec;
use rxvm_vm::module::{Bytes, Function, Module};
use rxvm_vm::types::{Dim, Type};
use rxvm_vm::{load_module_shared, DeviceCaps, ModuleError, VmError};
use std::path::Path;

/// A failure already reported to the user, or one to report.
pub enum Failure {
    /// Message to print as `error: ...`.
    Message(String),
    /// Fully rendered text (diagnostics), printed as is.
    Rendered(String),
}

impl From<String> for Failure {
    fn from(s: String) -> Self {
        Failure::Message(s)
    }
}

/// A program read from disk, with its source text when it came from `.rxa`, and its memory
/// plan when it was compiled from a model.
pub struct Program {
    pub module: Module,
    pub source: Option<(String, String)>,
    pub plan: Option<crate::compile::PlanReport>,
}

/// Whether `path` names an ONNX model (`.onnx`).
pub fn is_onnx(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "onnx")
}

/// Reads an ONNX model to compile: its graph and input shapes, which must be fixed (the
/// memory plan needs them).
pub fn read_model(path: &Path) -> Result<(Graph, Vec<Vec<i64>>), Failure> {
    read_model_with(path, &[])
}

/// [`read_model`], with the shapes of some inputs `given` by name (`--shape NAME=[...]`,
/// or the shape of an `--input` file): they pin the inputs' dynamic dims and must agree
/// with the fixed ones.
pub fn read_model_with(path: &Path, given: &[(String, Vec<i64>)]) -> Result<(Graph, Vec<Vec<i64>>), Failure> {
    let g = crate::onnx::read_model(path)?;
    for w in &g.warnings {
        eprintln!("warning: {w}");
    }
    let shapes = input_shapes(&g, given).map_err(|e| Failure::Message(format!("{}: {e}", path.display())))?;
    Ok((g, shapes))
}

/// The shape of each graph input: its own dims where they are fixed, else the shape
/// `given` for it by ONNX name or register name; an error names the inputs left with
/// dynamic dims.
pub fn input_shapes(g: &Graph, given: &[(String, Vec<i64>)]) -> Result<Vec<Vec<i64>>, String> {
    let shapes = input_dims(g, given)?;
    let ty = |i: &crate::graph::GraphInput| {
        let dims: Vec<String> = i.dims.iter().map(|d| d.to_string()).collect();
        format!("{}[{}]", i.dtype, dims.join(", "))
    };
    let dynamic: Vec<String> = g
        .inputs
        .iter()
        .zip(&shapes)
        .filter(|(_, s)| s.is_none())
        .map(|(i, _)| format!("`{}`: {}", i.name, ty(i)))
        .collect();
    if !dynamic.is_empty() {
        return Err(format!(
            "these inputs have dynamic dims: {}; give their shapes with --shape NAME=[d0,d1,...] (or, for `run` and `bench`, a .npy --input), or export the model with fixed input dims",
            dynamic.join(", ")
        ));
    }
    Ok(shapes.into_iter().flatten().collect())
}

/// [`input_shapes`], with `None` for an input whose dims stay dynamic (symbolic, for
/// `compile`).
pub fn input_dims(g: &Graph, given: &[(String, Vec<i64>)]) -> Result<Vec<Option<Vec<i64>>>, String> {
    let ty = |i: &crate::graph::GraphInput| {
        let dims: Vec<String> = i.dims.iter().map(|d| d.to_string()).collect();
        format!("{}[{}]", i.dtype, dims.join(", "))
    };
    let names = |i: &crate::graph::GraphInput| [i.name.clone(), crate::graph::ident(&i.name, &mut Default::default())];
    for (name, _) in given {
        if !g.inputs.iter().any(|i| names(i).contains(name)) {
            let have: Vec<String> = g.inputs.iter().map(|i| format!("`{}`: {}", i.name, ty(i))).collect();
            return Err(format!("the model has no input `{name}`; its inputs are {}", have.join(", ")));
        }
    }
    let mut shapes = Vec::with_capacity(g.inputs.len());
    for i in &g.inputs {
        let pinned = given.iter().find(|(n, _)| names(i).contains(n)).map(|(_, s)| s);
        match (i.dims.iter().map(InputDim::fixed).collect::<Option<Vec<i64>>>(), pinned) {
            (Some(s), None) => shapes.push(Some(s)),
            (_, Some(s)) => {
                let fits = s.len() == i.dims.len()
                    && i.dims.iter().zip(s).all(|(d, v)| *v >= 0 && d.fixed().is_none_or(|d| d == *v));
                if !fits {
                    return Err(format!(
                        "input `{}` is {}, which the shape {s:?} given for it does not fit",
                        i.name,
                        ty(i)
                    ));
                }
                shapes.push(Some(s.clone()));
            }
            (None, None) => shapes.push(None),
        }
    }
    // Inputs that name the same dim must agree on its size.
    let mut named: Vec<(&str, i64, &str, usize)> = Vec::new();
    for (i, s) in g.inputs.iter().zip(&shapes) {
        let Some(s) = s else { continue };
        for (k, (d, v)) in i.dims.iter().zip(s).enumerate() {
            let InputDim::Named(n) = d else { continue };
            match named.iter().find(|(m, ..)| m == n) {
                Some((_, w, other, j)) if w != v => {
                    return Err(format!(
                        "inputs `{other}` and `{}` share the dim `{n}`, but have sizes {w} (dim {j}) and {v} (dim {k})",
                        i.name
                    ))
                }
                Some(_) => {}
                None => named.push((n, *v, &i.name, k)),
            }
        }
    }
    Ok(shapes)
}

/// Compiles a model [`read_model`] read; errors name the file.
pub fn compile_graph(path: &Path, g: &Graph, shapes: &[Vec<i64>], opts: &Options) -> Result<Compiled, Failure> {
    crate::compile::compile(g, shapes, opts).map_err(|e| Failure::Message(format!("{}: {e}", path.display())))
}

/// A compiled model as a program to run: its source text is the plan (the comments that
/// head its `.rxa`). The compiled code has no source lines, so errors and the REPL show
/// its disassembly instead; printing that here would dominate a large model's run time
/// (every weight as a decimal literal).
pub fn compiled_program(path: &Path, c: Compiled) -> Program {
    Program {
        module: c.module,
        source: Some((path.display().to_string() + ".rxa", c.plan_comment)),
        plan: Some(c.report),
    }
}

fn is_bytecode(path: &Path, bytes: &[u8]) -> bool {
    path.extension().is_some_and(|e| e == "rxb") || bytes.starts_with(&rxvm_vm::binary::MAGIC)
}

/// A file's bytes, memory-mapped: a `.rxb`'s constants are used where they are (on the host,
/// in place), so loading a model neither reads nor copies its weights, and they are in
/// memory once, as pages of the file the kernel can drop and reread. Empty files, and
/// files that cannot be mapped (a pipe), are read.
fn read_shared(path: &Path) -> std::io::Result<Bytes> {
    let file = std::fs::File::open(path)?;
    if file.metadata()?.len() > 0 {
        // SAFETY: a private mapping: our writes, if any, never reach the file. A file
        // changed by another process while mapped may change under us, as with every
        // mapped model (onnxruntime's and TVM's too); rxvm never writes its inputs.
        if let Ok(map) = unsafe { memmap2::MmapOptions::new().map_copy(&file) } {
            return Ok(Bytes::from_owner(map));
        }
    }
    std::fs::read(path).map(Bytes::from)
}

/// Loads `.rxa` (assemble + verify), `.rxb` (decode + verify), or an `.onnx` model
/// (compiled for the host with the default [`Options`]).
pub fn load_program(path: &Path) -> Result<Program, Failure> {
    if is_onnx(path) {
        let (g, shapes) = read_model(path)?;
        let c = compile_graph(path, &g, &shapes, &Options::default())?;
        return Ok(compiled_program(path, c));
    }
    let bytes = read_shared(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let name = path.display().to_string();
    if is_bytecode(path, &bytes) {
        return match load_module_shared(&bytes) {
            Ok(module) => {
                // Debug info names the source file; show its lines in run-time errors if it
                // is still there.
                let source =
                    module.source_file.as_ref().and_then(|f| std::fs::read_to_string(f).ok().map(|t| (f.clone(), t)));
                Ok(Program { module, source, plan: None })
            }
            Err(ModuleError::Load(e)) => Err(Failure::Message(format!("{name}: {e}"))),
            Err(ModuleError::Verify(e)) => Err(Failure::Message(format!("{name}: invalid module: {e}"))),
        };
    }
    let text = String::from_utf8(bytes.into()).map_err(|e| format!("{name} is not UTF-8 text: {e}"))?;
    // The text already read (not `assemble_file`, which would read the file again: a
    // second copy of a large source); `file("...")` paths are relative to `name`'s folder.
    match rxvm_asm::assemble(&text, &name) {
        Ok(module) => Ok(Program { module, source: Some((name, text)), plan: None }),
        Err(d) => Err(Failure::Rendered(d.render())),
    }
}

/// Callers listed under a run-time error; deeper stacks are summarised.
const MAX_SHOWN_FRAMES: usize = 4;

/// Renders a run-time error, with the source line when the program's text is at hand.
pub fn render_vm_error(e: &VmError, source: Option<&(String, String)>) -> String {
    if let (Some((name, text)), Some(top)) = (source, e.stack.first()) {
        if top.loc.line > 0 {
            let mut notes = e.notes.clone();
            notes.push(format!("in @{}, instruction {}", top.func, top.pc));
            let callers = &e.stack[1..];
            for fr in callers.iter().take(MAX_SHOWN_FRAMES) {
                notes.push(format!("called from @{} at {name}:{}:{}", fr.func, fr.loc.line, fr.loc.col));
            }
            if callers.len() > MAX_SHOWN_FRAMES {
                notes.push(format!("... and {} more callers", callers.len() - MAX_SHOWN_FRAMES));
            }
            return rxvm_asm::render_runtime_error(text, name, top.loc.line, top.loc.col, &e.message, &notes);
        }
    }
    format!("error: {e}\n")
}

/// Builds the host value for parameter `param` of `f` from its `--input` spec.
pub fn make_input(f: &Function, param: usize, spec: &InputSpec) -> Result<HostValue, String> {
    let name = &f.reg_name(Reg(param as u32));
    let ty = f.params.get(param).ok_or_else(|| format!("@{} has no parameter {param}", f.name))?;
    let ty_text = f.type_text(ty);
    let known_shape = || match ty {
        Type::Tensor { dims, .. } => dims
            .iter()
            .map(|d| match d {
                Dim::Known(v) => Some(*v),
                Dim::Any | Dim::Sym { .. } => None,
            })
            .collect::<Option<Vec<i64>>>(),
        _ => None,
    };
    let need_shape = |what: &str| {
        format!(
            "input %{name}: `{what}` needs a tensor type with known dims, but %{name} is {ty_text}; pass a .npy file"
        )
    };
    let v = match (spec, ty) {
        (InputSpec::Npy(path), _) => HostValue::Tensor(read_npy(path)?),
        (InputSpec::Zeros, Type::Tensor { dtype, .. }) => {
            let shape = known_shape().ok_or_else(|| need_shape("zeros"))?;
            HostValue::Tensor(HostTensor::zeros(*dtype, &shape)?)
        }
        (InputSpec::Random(seed), Type::Tensor { dtype, .. }) => {
            let shape = known_shape().ok_or_else(|| need_shape("random"))?;
            HostValue::Tensor(HostTensor::random(*dtype, &shape, *seed)?)
        }
        (InputSpec::Ramp, Type::Tensor { dtype, .. }) => {
            let shape = known_shape().ok_or_else(|| need_shape("ramp"))?;
            HostValue::Tensor(ramp(*dtype, &shape)?)
        }
        (InputSpec::Zeros | InputSpec::Random(_) | InputSpec::Ramp, _) => return Err(need_shape("zeros/random/ramp")),
        (InputSpec::Int(v), Type::Int) => HostValue::Int(*v),
        (InputSpec::Int(v), Type::Float) => HostValue::Float(*v as f64),
        (InputSpec::Float(v), Type::Float) => HostValue::Float(*v),
        (InputSpec::Shape(s), Type::Shape) => HostValue::Shape(s.clone()),
        (spec, ty) => return Err(format!("input %{name}: {} does not fit its type {ty}", spec.describe())),
    };
    Ok(v)
}

/// Element i of n is `i / n` (computed in f64, then converted): numpy's
/// `(np.arange(n).reshape(shape) / n).astype(dtype)`, the input of ONNX's light model tests.
pub fn ramp(dtype: rxvm_vm::types::DType, shape: &[i64]) -> Result<HostTensor, String> {
    let mut t = HostTensor::zeros(dtype, shape)?;
    let n = t.numel();
    let es = dtype.size();
    for (i, e) in t.data.chunks_exact_mut(es).enumerate() {
        let mut b = [0u8; 8];
        rxvm_vm::host_tensor::store_f64(dtype, i as f64 / n as f64, &mut b);
        e.copy_from_slice(&b[..es]);
    }
    Ok(t)
}

/// Parses `--device` (and applies `--host-caps` to the host device).
pub fn device_spec(device: &str, host_caps: Option<&str>) -> Result<DeviceSpec, String> {
    if device == "host" {
        let mut caps = DeviceCaps::host();
        if let Some(spec) = host_caps {
            caps = caps.with_overrides(spec).map_err(|e| format!("--host-caps: {e}"))?;
        }
        return Ok(DeviceSpec::Host(caps));
    }
    let needle = match device.strip_prefix("opencl") {
        Some("") => "",
        Some(rest) => rest.strip_prefix(':').ok_or_else(|| bad_device(device))?,
        None => return Err(bad_device(device)),
    };
    if host_caps.is_some() {
        return Err("--host-caps applies to --device host only; OpenCL devices report their own".into());
    }
    let info = rxvm_vm::opencl::find_device(needle).map_err(|e| format!("--device {device}: {e}"))?;
    Ok(DeviceSpec::OpenCl(info))
}

/// The capabilities of a selected device.
pub fn device_caps(spec: &DeviceSpec) -> DeviceCaps {
    match spec {
        DeviceSpec::Host(c) => c.clone(),
        DeviceSpec::OpenCl(i) => i.caps.clone(),
    }
}

fn bad_device(device: &str) -> String {
    format!("--device {device}: expected `host`, `opencl` or `opencl:NAME`")
}

/// How a model is compiled for `run` and `bench`: the command line's compile flags.
pub trait CompileSettings {
    /// The input shapes `--shape` gives, by input name.
    fn given_shapes(&self) -> Result<Vec<(String, Vec<i64>)>, String>;
    /// The compiler options for a program to run on a device with `caps`.
    fn options(&self, caps: &DeviceCaps) -> Result<Options, Failure>;
}

/// A program to run, read as `run` reads it: a `.rxa`/`.rxb` file, or an ONNX model
/// compiled for `spec`'s device with `settings`, the dynamic dims of its inputs given by
/// `--shape` and then by the shapes of `.npy` inputs. With the ONNX names of the graph's
/// inputs (@main's first parameters), empty for a program.
pub fn read_program_for(
    file: &Path,
    spec: &DeviceSpec,
    settings: &dyn CompileSettings,
    raw_inputs: &[String],
) -> Result<(Program, Vec<String>), Failure> {
    if !is_onnx(file) {
        return Ok((load_program(file)?, Vec::new()));
    }
    let mut given = settings.given_shapes()?;
    for raw in raw_inputs {
        if let Ok((name, InputSpec::Npy(path))) = crate::inputs::parse_input_spec(raw) {
            if !given.iter().any(|(n, _)| *n == name) {
                given.push((name, crate::npy::npy_shape(&path)?));
            }
        }
    }
    let (g, shapes) = read_model_with(file, &given)?;
    let c = compile_graph(file, &g, &shapes, &settings.options(&device_caps(spec))?)?;
    Ok((compiled_program(file, c), g.inputs.into_iter().map(|i| i.name).collect()))
}

/// What to do for a value parameter no `--input` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// Refuse (`run`): the error lists the missing inputs.
    Refuse,
    /// Generate a tensor parameter's value as `random:K` (deterministic pseudo-random values
    /// of its type), K its position among the value parameters (`bench`); refuse the others.
    Random,
}

/// The host values of `f`'s value parameters (every parameter but storages, which the VM
/// allocates) from `--input NAME=SPEC` specs. NAME is a register name or, for @main of a
/// compiled model, the ONNX name of a graph input (`onnx_inputs`).
pub fn host_inputs(
    f: &Function,
    onnx_inputs: &[String],
    raw_inputs: &[String],
    missing: Missing,
) -> Result<Vec<HostValue>, Failure> {
    let value_params: Vec<usize> = (0..f.params.len()).filter(|&i| !matches!(f.params[i], Type::Storage)).collect();
    let param_names: Vec<String> = value_params.iter().map(|&i| f.reg_name(Reg(i as u32))).collect();
    // The ONNX name of each value parameter, where it has one (the graph inputs are
    // @main's first parameters, in order).
    let onnx_names: Vec<Option<&str>> = value_params
        .iter()
        .map(|&i| if f.name == "main" { onnx_inputs.get(i).map(String::as_str) } else { None })
        .collect();
    // `%reg` or `%reg (ONNX input `name`)` when the names differ.
    let describe = |k: usize| match onnx_names[k] {
        Some(o) if o != param_names[k] => format!("%{} (ONNX input `{o}`)", param_names[k]),
        _ => format!("%{}", param_names[k]),
    };

    let mut specs: Vec<Option<InputSpec>> = vec![None; value_params.len()];
    for raw in raw_inputs {
        let (name, spec) = crate::inputs::parse_input_spec(raw)?;
        let idx = param_names
            .iter()
            .position(|n| *n == name)
            .or_else(|| onnx_names.iter().position(|o| *o == Some(name.as_str())))
            .ok_or_else(|| {
                let have = if param_names.is_empty() {
                    "it takes no inputs".to_string()
                } else {
                    format!(
                        "its parameters are: {}",
                        (0..param_names.len()).map(describe).collect::<Vec<_>>().join(", ")
                    )
                };
                format!("--input {raw}: @{} has no parameter %{name}; {have}", f.name)
            })?;
        if specs[idx].is_some() {
            return Err(Failure::Message(format!("--input {raw}: {} is given twice", describe(idx))));
        }
        specs[idx] = Some(spec);
    }
    if missing == Missing::Random {
        for (i, s) in specs.iter_mut().enumerate() {
            if s.is_none() && matches!(f.params[value_params[i]], Type::Tensor { .. }) {
                *s = Some(InputSpec::Random(i as u64));
            }
        }
    }
    let absent: Vec<String> = specs
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_none())
        .map(|(i, _)| format!("{}: {}", describe(i), f.params[value_params[i]]))
        .collect();
    if !absent.is_empty() {
        return Err(Failure::Message(format!(
            "missing input(s) for @{}: {}; pass --input NAME=PATH.npy|zeros|random:SEED|VALUE",
            f.name,
            absent.join(", ")
        )));
    }
    let mut inputs = Vec::with_capacity(specs.len());
    for (i, s) in specs.iter().enumerate() {
        let s = s.as_ref().ok_or_else(|| "missing input".to_string())?;
        inputs.push(make_input(f, value_params[i], s)?);
    }
    Ok(inputs)
}

/// The function `name` of `module`, or an error listing the functions `file` has.
pub fn find_function(module: &Module, name: &str, file: &Path) -> Result<rxvm_vm::bytecode::FuncId, Failure> {
    module.func_by_name(name).ok_or_else(|| {
        let names: Vec<String> = module.funcs.values().map(|f| format!("@{}", f.name)).collect();
        Failure::Message(format!(
            "no function @{} in {}; it has: {}",
            name.trim_start_matches('@'),
            file.display(),
            names.join(", ")
        ))
    })
}
