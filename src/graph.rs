//! The compiler's graph IR: operators on named tensors in schedule order, with constants
//! and typed inputs; and its lowering to a VM module. This first lowering gives every
//! tensor its own storage (the no-reuse plan) and kills it after its last use; constant
//! subgraphs are folded at compile time.

use rxvm_vm::builder::{ModuleBuilder, Operand};
use rxvm_vm::bytecode::Reg;
use rxvm_vm::module::ConstData;
use rxvm_vm::ops::{Attrs, OpId, TensorInfo};
use rxvm_vm::types::{DType, Dim, Scope, Type};
use rxvm_vm::{HostTensor, Module};
use std::collections::HashMap;

/// A graph input: name, dtype and dims (`None` for a dynamic dim).
#[derive(Clone, Debug, PartialEq)]
pub struct GraphInput {
    pub name: String,
    pub dtype: DType,
    pub dims: Vec<Option<i64>>,
}

/// One operator application. An empty input name is an omitted optional input.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    pub op: String,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attrs: Attrs,
}

/// Operators in schedule order over named tensors.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub name: String,
    pub inputs: Vec<GraphInput>,
    pub outputs: Vec<String>,
    pub consts: Vec<(String, HostTensor)>,
    pub nodes: Vec<Node>,
    const_index: HashMap<String, usize>,
}

impl Graph {
    pub fn new(name: String) -> Graph {
        Graph { name, ..Graph::default() }
    }

    pub fn add_const(&mut self, name: &str, v: HostTensor) {
        self.const_index.insert(name.to_string(), self.consts.len());
        self.consts.push((name.to_string(), v));
    }

    pub fn is_const(&self, name: &str) -> bool {
        self.const_index.contains_key(name)
    }

    pub fn const_value(&self, name: &str) -> Option<&HostTensor> {
        self.const_index.get(name).map(|&i| &self.consts[i].1)
    }

    /// Operator types the VM lacks, with the nodes that use each, sorted.
    pub fn unsupported_ops(&self) -> Vec<(String, Vec<String>)> {
        let mut missing: Vec<(String, Vec<String>)> = Vec::new();
        for n in &self.nodes {
            if OpId::from_name(&n.op).is_none() {
                match missing.iter_mut().find(|(o, _)| *o == n.op) {
                    Some((_, nodes)) => nodes.push(n.name.clone()),
                    None => missing.push((n.op.clone(), vec![n.name.clone()])),
                }
            }
        }
        missing.sort();
        missing
    }
}

/// A valid assembly identifier derived from an ONNX name, unique within `used`.
fn ident(name: &str, used: &mut HashMap<String, usize>) -> String {
    let mut s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if !s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        s.insert(0, 't');
    }
    let n = used.entry(s.clone()).or_insert(0);
    *n += 1;
    if *n > 1 {
        s = format!("{s}_{n}");
    }
    s
}

fn tensor_type(dtype: DType, shape: &[i64]) -> Type {
    Type::Tensor { dtype, dims: shape.iter().map(|&d| Dim::Known(d)).collect() }
}

/// Types and constant values of every tensor, found by running shape inference over the
/// schedule and evaluating nodes whose inputs are all constants.
pub struct Analysis<'g> {
    /// Dtype and shape of every tensor.
    pub types: HashMap<&'g str, (DType, Vec<i64>)>,
    /// Values of constant tensors: initializers and folded node outputs.
    pub consts: HashMap<&'g str, HostTensor>,
    /// Nodes evaluated at compile time.
    pub folded: Vec<bool>,
}

/// Infers shapes and folds constant subgraphs, given concrete input shapes.
pub fn analyze<'g>(g: &'g Graph, input_shapes: &[Vec<i64>]) -> Result<Analysis<'g>, String> {
    if let Some((op, nodes)) = g.unsupported_ops().first() {
        return Err(format!("operator {op} is not supported (node `{}`)", nodes[0]));
    }
    let mut a = Analysis { types: HashMap::new(), consts: HashMap::new(), folded: Vec::new() };
    for (name, v) in &g.consts {
        a.types.insert(name, (v.dtype, v.shape.clone()));
        a.consts.insert(name, v.clone());
    }
    for (i, inp) in g.inputs.iter().enumerate() {
        let shape = input_shapes.get(i).ok_or_else(|| format!("no shape given for input `{}`", inp.name))?;
        a.types.insert(&inp.name, (inp.dtype, shape.clone()));
    }
    for n in &g.nodes {
        let def = OpId::from_name(&n.op).ok_or_else(|| format!("operator {} is not supported", n.op))?.def();
        let mut infos = Vec::new();
        for x in &n.inputs {
            infos.push(if x.is_empty() {
                None
            } else {
                let (d, s) = a
                    .types
                    .get(x.as_str())
                    .ok_or_else(|| format!("node `{}`: input `{x}` is not defined before it", n.name))?;
                Some(TensorInfo { dtype: *d, shape: s, value: a.consts.get(x.as_str()) })
            });
        }
        let outs = (def.infer)(&infos, &n.attrs).map_err(|e| format!("node `{}` ({}): {e}", n.name, n.op))?;
        if outs.len() < n.outputs.len() {
            return Err(format!(
                "node `{}` ({}): names {} outputs, the operator produces {}",
                n.name,
                n.op,
                n.outputs.len(),
                outs.len()
            ));
        }
        let fold = n.inputs.iter().all(|x| x.is_empty() || a.consts.contains_key(x.as_str()));
        if fold {
            let ins: Vec<Option<&HostTensor>> = n.inputs.iter().map(|x| a.consts.get(x.as_str())).collect();
            let mut res: Vec<HostTensor> =
                outs.iter().map(|(d, s)| HostTensor::zeros(*d, s)).collect::<Result<_, _>>()?;
            (def.host)(&ins, &n.attrs, &mut res).map_err(|e| format!("folding node `{}`: {e}", n.name))?;
            for (name, t) in n.outputs.iter().zip(res) {
                a.consts.insert(name, t);
            }
        }
        for (name, t) in n.outputs.iter().zip(outs) {
            a.types.insert(name, t);
        }
        a.folded.push(fold);
    }
    for o in &g.outputs {
        if !a.types.contains_key(o.as_str()) {
            return Err(format!("graph output `{o}` is never produced"));
        }
    }
    Ok(a)
}

/// Lowers `g` to a module with one function `@main`, given concrete shapes for the inputs
/// (in the order of `g.inputs`): every tensor in its own storage, killed after its last use.
pub fn lower_naive(g: &Graph, input_shapes: &[Vec<i64>]) -> Result<Module, String> {
    let a = analyze(g, input_shapes)?;
    let ty = |name: &str| {
        let (d, s) = &a.types[name];
        tensor_type(*d, s)
    };
    let params: Vec<Type> = g.inputs.iter().map(|i| ty(&i.name)).collect();
    let results: Vec<Type> = g.outputs.iter().map(|o| ty(o)).collect();
    let mut mb = ModuleBuilder::new(&ident(if g.name.is_empty() { "model" } else { &g.name }, &mut HashMap::new()));
    let mut f = mb.function("main", params, results);
    let mut last_use: HashMap<&str, usize> = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        for x in &n.inputs {
            last_use.insert(x.as_str(), i);
        }
    }
    // Run-time tensors: their view register and (for those this function allocates) storage.
    let mut regs: HashMap<&str, (Reg, Option<Reg>)> = HashMap::new();
    let mut names = HashMap::new();
    for (i, inp) in g.inputs.iter().enumerate() {
        let r = f.param(i as u32);
        f.name(r, &ident(&inp.name, &mut names));
        regs.insert(&inp.name, (r, None));
    }
    let mut const_ids = HashMap::new();
    let mut const_names = HashMap::new();
    let mut konst = |mb: &mut ModuleBuilder, name: &str, c: &HostTensor| {
        *const_ids.entry(name.to_string()).or_insert_with(|| {
            mb.constant(&ident(name, &mut const_names), c.dtype, &c.shape, ConstData::Bytes(c.data.clone()))
        })
    };
    for (i, n) in g.nodes.iter().enumerate() {
        if a.folded[i] {
            continue;
        }
        let mut inputs = Vec::new();
        for x in &n.inputs {
            inputs.push(if x.is_empty() {
                Operand::None
            } else if let Some((r, _)) = regs.get(x.as_str()) {
                Operand::Reg(*r)
            } else {
                Operand::Const(konst(&mut mb, x, &a.consts[x.as_str()]))
            });
        }
        let mut out_regs = Vec::new();
        for name in &n.outputs {
            let (dtype, shape) = &a.types[name.as_str()];
            let bytes = shape.iter().product::<i64>().max(0) * dtype.size() as i64;
            let st = f.alloc_storage(Operand::Int(bytes), None, 0, Scope::Global);
            let dims: Vec<Operand> = shape.iter().map(|&d| Operand::Int(d)).collect();
            let t = f.alloc_tensor(st, Operand::Int(0), *dtype, &dims, Scope::Global);
            let id = ident(name, &mut names);
            f.name(t, &id);
            f.name(st, &format!("{id}.storage"));
            out_regs.push(t);
            regs.insert(name, (t, Some(st)));
        }
        f.call_op(&n.op, &inputs, &out_regs, n.attrs.clone())?;
        // Kill what this node used for the last time (never graph outputs).
        for x in &n.inputs {
            if x.is_empty() || last_use.get(x.as_str()) != Some(&i) || g.outputs.contains(x) {
                continue;
            }
            if let Some((r, Some(st))) = regs.get(x.as_str()) {
                f.kill(*r);
                f.kill(*st);
            }
        }
    }
    let mut rets = Vec::new();
    for o in &g.outputs {
        rets.push(match regs.get(o.as_str()) {
            Some((r, _)) => Operand::Reg(*r),
            None => Operand::Const(konst(&mut mb, o, &a.consts[o.as_str()])),
        });
    }
    f.ret(&rets);
    mb.add_function(f);
    mb.build().map_err(|e| format!("the lowered module does not verify: {e}"))
}
