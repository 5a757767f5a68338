//! The compiler's graph IR: operators on named tensors in schedule order, with constants
//! and typed inputs; and [`analyze`], which infers every tensor's type and folds constant
//! subgraphs at compile time. `crate::compile` plans and lowers it.

use rxvm_vm::ops::{Attrs, OpId, Operator, TensorInfo};
use rxvm_vm::types::{DType, Dim, Type};
use rxvm_vm::HostTensor;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A graph input: name, dtype and dims.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphInput {
    pub name: String,
    pub dtype: DType,
    pub dims: Vec<InputDim>,
}

/// A dimension of a graph input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputDim {
    Fixed(i64),
    /// A named dynamic dim (ONNX `dim_param`, e.g. `batch`): inputs that name the same
    /// dim have the same size.
    Named(String),
    /// A dynamic dim without a name.
    Unknown,
}

impl InputDim {
    pub fn fixed(&self) -> Option<i64> {
        match self {
            InputDim::Fixed(v) => Some(*v),
            _ => None,
        }
    }
}

impl std::fmt::Display for InputDim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InputDim::Fixed(v) => write!(f, "{v}"),
            InputDim::Named(n) => f.write_str(n),
            InputDim::Unknown => f.write_str("?"),
        }
    }
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
    /// Shared, so the graphs the compiler's passes derive hold the weights once.
    pub consts: Vec<(String, Arc<HostTensor>)>,
    pub nodes: Vec<Node>,
    /// What the reader of the model warns about but accepts (e.g. an opset newer than it
    /// knows), each naming the file; the command line prints them.
    pub warnings: Vec<String>,
    /// The subgraphs of the control-flow nodes (`If`, `Loop`, `Scan`), by node name
    /// ([`ControlFlow`]).
    pub subgraphs: HashMap<String, ControlFlow>,
    const_index: HashMap<String, usize>,
}

/// Operators that hold subgraphs and that the compiler lowers to branches and loops.
pub const CONTROL_FLOW_OPS: [&str; 3] = ["If", "Loop", "Scan"];

/// The subgraphs of a control-flow node. Its subgraphs may read tensors of the enclosing
/// graphs by name: those captures are appended to the node's inputs (after the operator's
/// own inputs), so every stage sees them as ordinary uses.
#[derive(Clone, Debug, Default)]
pub struct ControlFlow {
    /// `then_branch` and `else_branch` of an `If`; `body` of a `Loop` or `Scan`.
    pub subgraphs: Vec<Subgraph>,
    /// The outer tensors the subgraphs read, in order of first use: the last
    /// `captures.len()` inputs of the node.
    pub captures: Vec<String>,
}

impl ControlFlow {
    /// Records `subgraphs` and their captures, and appends those to the node's inputs.
    pub fn attach(node: &mut Node, subgraphs: Vec<Subgraph>) -> ControlFlow {
        let mut captures: Vec<String> = Vec::new();
        for c in subgraphs.iter().flat_map(|s| &s.captures) {
            if !captures.contains(c) {
                captures.push(c.clone());
            }
        }
        node.inputs.extend(captures.iter().cloned());
        ControlFlow { subgraphs, captures }
    }

    /// Checks that the node and its subgraphs fit together: the operator's inputs are there,
    /// and each subgraph takes and returns as many values as the operator passes and
    /// expects. Errors name the node and the operator.
    pub fn check(&self, node: &Node) -> Result<(), String> {
        let who = format!("node `{}` ({})", node.name, node.op);
        let fail = |msg: String| Err(format!("{who}: {msg}"));
        let own = node.inputs.len().saturating_sub(self.captures.len());
        let sub = |attr: &str| self.get(attr).ok_or_else(|| format!("{who}: has no `{attr}` subgraph"));
        let outs = node.outputs.len();
        match node.op.as_str() {
            "If" => {
                if own != 1 || node.inputs[0].is_empty() {
                    return fail(format!("needs one input, the condition; found {own}"));
                }
                for attr in ["then_branch", "else_branch"] {
                    let s = sub(attr)?;
                    if !s.inputs.is_empty() {
                        return fail(format!("`{attr}` takes {} inputs; a branch takes none", s.inputs.len()));
                    }
                    if s.body.outputs.len() != outs {
                        return fail(format!(
                            "`{attr}` returns {} values, the node has {outs} outputs",
                            s.body.outputs.len()
                        ));
                    }
                }
            }
            "Loop" => {
                if own < 2 {
                    return fail(format!(
                        "needs the trip count and condition inputs (either may be \"\"), found {own} inputs"
                    ));
                }
                let n = own - 2;
                let s = sub("body")?;
                if s.inputs.len() != n + 2 {
                    return fail(format!(
                        "`body` takes {} inputs; with {n} loop-carried values it must take {} (iteration number, condition, values)",
                        s.inputs.len(),
                        n + 2
                    ));
                }
                if s.body.outputs.len() < n + 1 {
                    return fail(format!(
                        "`body` returns {} values; with {n} loop-carried values it must return at least {} (condition, values, scan outputs)",
                        s.body.outputs.len(),
                        n + 1
                    ));
                }
                if outs > s.body.outputs.len() - 1 {
                    return fail(format!(
                        "has {outs} outputs, the body gives {} (loop-carried values and scan outputs)",
                        s.body.outputs.len() - 1
                    ));
                }
            }
            "Scan" => {
                // Opset 8's batched Scan takes `sequence_lens` first.
                let batched = matches!(node.attrs.get("onnx_opset"), Some(rxvm_vm::ops::AttrValue::Int(v)) if *v < 9);
                let own = if batched { own.saturating_sub(1) } else { own };
                let scans = match node.attrs.get("num_scan_inputs") {
                    Some(rxvm_vm::ops::AttrValue::Int(k)) if *k >= 1 => *k as usize,
                    _ => return fail("needs the attribute `num_scan_inputs` (a positive int)".into()),
                };
                if own < scans {
                    return fail(format!("has {own} inputs, fewer than `num_scan_inputs` ({scans})"));
                }
                let s = sub("body")?;
                if s.inputs.len() != own {
                    return fail(format!(
                        "`body` takes {} inputs; it must take one per input of the node ({own})",
                        s.inputs.len()
                    ));
                }
                let states = own - scans;
                if s.body.outputs.len() < states || outs > s.body.outputs.len() {
                    return fail(format!(
                        "`body` returns {} values: it must return the {states} state values, then the scan outputs (the node has {outs} outputs)",
                        s.body.outputs.len()
                    ));
                }
            }
            op => return fail(format!("{op} is not a control-flow operator")),
        }
        Ok(())
    }

    /// The subgraph held by attribute `attr`.
    pub fn get(&self, attr: &str) -> Option<&Subgraph> {
        self.subgraphs.iter().find(|s| s.attr == attr)
    }
}

/// A graph attribute of a control-flow node: a function of its inputs (and of the outer
/// tensors it captures) to its outputs.
#[derive(Clone, Debug, Default)]
pub struct Subgraph {
    /// The attribute that holds it: `then_branch`, `else_branch` or `body`.
    pub attr: String,
    /// Its inputs' names, in order.
    pub inputs: Vec<String>,
    /// The element type each output declares, if it declares one.
    pub output_dtypes: Vec<Option<DType>>,
    /// Its constants, nodes (nested control flow in `body.subgraphs`) and outputs; the
    /// inputs are `inputs`, whose types are known only when the program runs.
    pub body: Graph,
    /// Tensors of enclosing graphs it reads, in order of first use.
    pub captures: Vec<String>,
}

impl Subgraph {
    /// A subgraph; its captures are the names its nodes and outputs read that are not its
    /// inputs, constants or earlier nodes' outputs.
    pub fn new(attr: &str, inputs: Vec<String>, output_dtypes: Vec<Option<DType>>, body: Graph) -> Subgraph {
        let mut defined: HashSet<&str> = inputs.iter().map(String::as_str).collect();
        defined.extend(body.consts.iter().map(|(n, _)| n.as_str()));
        let mut captures: Vec<String> = Vec::new();
        let mut read = |x: &str, defined: &HashSet<&str>| {
            if !x.is_empty() && !defined.contains(x) && !captures.iter().any(|c| c == x) {
                captures.push(x.to_string());
            }
        };
        for n in &body.nodes {
            for x in &n.inputs {
                read(x, &defined);
            }
            defined.extend(n.outputs.iter().map(String::as_str));
        }
        for o in &body.outputs {
            read(o, &defined);
        }
        Subgraph { attr: attr.to_string(), inputs, output_dtypes, body, captures }
    }
}

impl Graph {
    pub fn new(name: String) -> Graph {
        Graph { name, ..Graph::default() }
    }

    pub fn add_const(&mut self, name: &str, v: HostTensor) {
        self.add_shared_const(name, Arc::new(v));
    }

    /// [`Graph::add_const`] of a value another graph holds too.
    pub fn add_shared_const(&mut self, name: &str, v: Arc<HostTensor>) {
        self.const_index.insert(name.to_string(), self.consts.len());
        self.consts.push((name.to_string(), v));
    }

    pub fn is_const(&self, name: &str) -> bool {
        self.const_index.contains_key(name)
    }

    pub fn const_value(&self, name: &str) -> Option<&HostTensor> {
        self.const_index.get(name).map(|&i| &*self.consts[i].1)
    }

    /// Adds an input with static dims.
    pub fn input(&mut self, name: &str, dtype: DType, dims: &[i64]) -> &mut Graph {
        self.inputs.push(GraphInput {
            name: name.into(),
            dtype,
            dims: dims.iter().map(|&d| InputDim::Fixed(d)).collect(),
        });
        self
    }

    /// Appends a node to the schedule.
    pub fn node(&mut self, name: &str, op: &str, inputs: &[&str], outputs: &[&str], attrs: Attrs) -> &mut Graph {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        self.nodes.push(Node {
            name: name.into(),
            op: op.into(),
            inputs: strings(inputs),
            outputs: strings(outputs),
            attrs,
        });
        self
    }

    /// Marks a tensor as a graph output.
    pub fn output(&mut self, name: &str) -> &mut Graph {
        self.outputs.push(name.into());
        self
    }

    /// Checks the graph's structure and lists every problem, each naming the offending
    /// node: unknown operators, inputs not defined before their node, tensors defined
    /// twice, duplicate node names, outputs never produced, no outputs at all.
    pub fn validate(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        if self.outputs.is_empty() {
            problems.push("the graph has no outputs, so there is nothing to compute".to_string());
        }
        for (op, nodes) in self.unsupported_ops() {
            problems.push(format!("unsupported operator {op} (nodes `{}`)", nodes.join("`, `")));
        }
        // Who defines each tensor so far: a graph input, a constant, or a node.
        let mut defined: HashMap<&str, String> = HashMap::new();
        for i in &self.inputs {
            if defined.insert(&i.name, "a graph input".into()).is_some() {
                problems.push(format!("graph input `{}` is declared twice", i.name));
            }
        }
        for (c, _) in &self.consts {
            if let Some(prev) = defined.insert(c, "a constant".into()) {
                problems.push(format!("constant `{c}` has the name of {prev}"));
            }
        }
        let later: HashMap<&str, &str> =
            self.nodes.iter().flat_map(|n| n.outputs.iter().map(move |o| (o.as_str(), n.name.as_str()))).collect();
        let mut names: HashMap<&str, usize> = HashMap::new();
        for (k, n) in self.nodes.iter().enumerate() {
            let who = if n.name.is_empty() { format!("node #{k} ({})", n.op) } else { format!("node `{}`", n.name) };
            if !n.name.is_empty() {
                if let Some(first) = names.insert(&n.name, k) {
                    problems.push(format!("{who}: the name is also used by node #{first}; node names must be unique"));
                }
            }
            for x in n.inputs.iter().filter(|x| !x.is_empty()) {
                if !defined.contains_key(x.as_str()) {
                    problems.push(match later.get(x.as_str()) {
                        Some(by) => format!(
                            "{who}: input `{x}` is defined later, by node `{by}` (nodes must be in schedule order)"
                        ),
                        None => {
                            format!("{who}: input `{x}` is not a graph input, a constant or an earlier node's output")
                        }
                    });
                }
            }
            if n.outputs.iter().all(String::is_empty) {
                problems.push(format!("{who}: names no output"));
            }
            for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                if let Some(prev) = defined.insert(o, who.clone()) {
                    problems.push(format!("{who}: output `{o}` is already defined by {prev}"));
                }
            }
        }
        for o in &self.outputs {
            if !defined.contains_key(o.as_str()) {
                problems.push(format!("graph output `{o}` is never produced"));
            }
        }
        match problems.len() {
            0 => Ok(()),
            1 => Err(problems.remove(0)),
            n => Err(format!("{n} problems in the graph:\n  {}", problems.join("\n  "))),
        }
    }

    /// The operators the program calls: those of every node, subgraphs' nodes included,
    /// except the control-flow nodes, which become branches and loops (their loops call
    /// `Add`, `Sub`, `Gather`, `Unsqueeze` and `Concat` as well).
    pub fn called_ops(&self) -> Vec<&str> {
        let mut ops = Vec::new();
        for n in &self.nodes {
            match self.subgraphs.get(&n.name) {
                Some(cf) => {
                    if n.op != "If" {
                        ops.extend(["Add", "Sub", "Gather", "Unsqueeze", "Concat"]);
                    }
                    ops.extend(cf.subgraphs.iter().flat_map(|s| s.body.called_ops()));
                }
                None => ops.push(n.op.as_str()),
            }
        }
        ops
    }

    /// Operator types the VM lacks, with the nodes that use each, sorted.
    pub fn unsupported_ops(&self) -> Vec<(String, Vec<String>)> {
        let mut missing: Vec<(String, Vec<String>)> = Vec::new();
        let mut add = |op: &str, node: &str| match missing.iter_mut().find(|(o, _)| *o == op) {
            Some((_, nodes)) => nodes.push(node.to_string()),
            None => missing.push((op.to_string(), vec![node.to_string()])),
        };
        for n in &self.nodes {
            let control = CONTROL_FLOW_OPS.contains(&n.op.as_str()) && self.subgraphs.contains_key(&n.name);
            if OpId::from_name(&n.op).is_none() && !control {
                add(&n.op, &n.name);
            }
        }
        // Operators inside subgraphs, nested ones included: `node/attribute/inner node`.
        for (node, cf) in &self.subgraphs {
            for s in &cf.subgraphs {
                for (op, nodes) in s.body.unsupported_ops() {
                    for n in nodes {
                        add(&op, &format!("{node}/{}/{n}", s.attr));
                    }
                }
            }
        }
        missing.sort();
        missing
    }
}

/// A valid assembly identifier derived from an ONNX name, unique within `used`.
pub(crate) fn ident(name: &str, used: &mut HashMap<String, usize>) -> String {
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

pub(crate) fn tensor_type(dtype: DType, shape: &[i64]) -> Type {
    Type::Tensor { dtype, dims: shape.iter().map(|&d| Dim::Known(d)).collect() }
}

/// Types and constant values of every tensor, found by running shape inference over the
/// schedule and evaluating nodes whose inputs are all constants.
pub struct Analysis<'g> {
    /// Dtype and shape of every tensor.
    pub types: HashMap<&'g str, (DType, Vec<i64>)>,
    /// Values of constant tensors: initializers and folded node outputs.
    /// (The graph's own constants are borrowed, not copied: a model's weights are held
    /// once however many analyses of its graphs are alive.)
    pub consts: HashMap<&'g str, Arc<HostTensor>>,
    /// Nodes evaluated at compile time.
    pub folded: Vec<bool>,
    /// The bytes of their outputs: what they took of the fold budget.
    pub folded_bytes: u64,
    /// Tensors whose shapes only the run knows (not in `types`): outputs of a node whose
    /// shape depends on the value of a run-time input (a Reshape whose shape is a graph
    /// input), and everything computed from them. The program allocates them when they are
    /// made (`%y = call @onnx.Reshape(...)`) instead of planning them.
    pub run_time: HashSet<&'g str>,
}

impl Analysis<'_> {
    /// The value of constant tensor `name` (an initializer or a folded node output).
    pub fn const_value(&self, name: &str) -> Option<&HostTensor> {
        self.consts.get(name).map(|c| &**c)
    }
}

/// How many bytes of node outputs [`analyze`] may evaluate at compile time, in all (1 GiB):
/// the weights a model generates (the ONNX test models make their fully connected weights
/// with `ConstantOfShape`: 411 MB for vgg19's first) become constants, computed once; what
/// does not fit runs at run time.
pub const DEFAULT_FOLD_BUDGET: u64 = 1 << 30;

/// Infers shapes and folds constant subgraphs, given concrete input shapes, within
/// [`DEFAULT_FOLD_BUDGET`].
pub fn analyze<'g>(g: &'g Graph, input_shapes: &[Vec<i64>]) -> Result<Analysis<'g>, String> {
    analyze_with(g, input_shapes, DEFAULT_FOLD_BUDGET)
}

/// [`analyze`], folding at most `fold_budget` bytes of node outputs in all: a node whose
/// outputs do not fit in what is left (or whose size overflows) runs at run time instead.
/// Folding allocates its outputs on the host, so the budget bounds what compiling a model
/// can allocate (a 100-byte model can ask for a 256 GiB `ConstantOfShape`).
pub fn analyze_with<'g>(g: &'g Graph, input_shapes: &[Vec<i64>], fold_budget: u64) -> Result<Analysis<'g>, String> {
    let shapes: Vec<Option<Vec<i64>>> = input_shapes.iter().cloned().map(Some).collect();
    analyze_inputs(g, &shapes, fold_budget)
}

/// [`analyze_with`] where an input whose shape is `None` is known only when the program
/// runs: it and everything computed from it are [`Analysis::run_time`].
pub fn analyze_inputs<'g>(
    g: &'g Graph,
    input_shapes: &[Option<Vec<i64>>],
    fold_budget: u64,
) -> Result<Analysis<'g>, String> {
    g.validate()?;
    let mut budget = fold_budget;
    let mut a = Analysis {
        types: HashMap::new(),
        consts: HashMap::new(),
        folded: Vec::new(),
        folded_bytes: 0,
        run_time: HashSet::new(),
    };
    for (name, v) in &g.consts {
        a.types.insert(name, (v.dtype, v.shape.clone()));
        a.consts.insert(name, v.clone());
    }
    for (i, inp) in g.inputs.iter().enumerate() {
        match input_shapes.get(i).ok_or_else(|| format!("no shape given for input `{}`", inp.name))? {
            Some(shape) => _ = a.types.insert(&inp.name, (inp.dtype, shape.clone())),
            None => _ = a.run_time.insert(&inp.name),
        }
    }
    for n in &g.nodes {
        // Control flow: the outputs' shapes are known when the program runs (branches may
        // differ, loops carry values).
        if let Some(cf) = g.subgraphs.get(&n.name) {
            cf.check(n)?;
            a.run_time.extend(n.outputs.iter().filter(|o| !o.is_empty()).map(String::as_str));
            a.folded.push(false);
            continue;
        }
        let def = OpId::from_name(&n.op).ok_or_else(|| format!("operator {} is not supported", n.op))?.def();
        // The attributes' names and kinds first, so a bad one is blamed on its node here rather
        // than on an instruction of the lowered module.
        def.check_attrs(&n.attrs).map_err(|e| format!("node `{}` ({}): {e}", n.name, n.op))?;
        if n.inputs.iter().any(|x| a.run_time.contains(x.as_str())) {
            a.run_time.extend(n.outputs.iter().filter(|o| !o.is_empty()).map(String::as_str));
            a.folded.push(false);
            continue;
        }
        let mut infos = Vec::new();
        for x in &n.inputs {
            infos.push(if x.is_empty() {
                None
            } else {
                let (d, s) = a
                    .types
                    .get(x.as_str())
                    .ok_or_else(|| format!("node `{}`: input `{x}` is not defined before it", n.name))?;
                Some(TensorInfo { dtype: *d, shape: s, value: a.const_value(x) })
            });
        }
        let outs = match (def.infer)(&infos, &n.attrs) {
            Ok(outs) => outs,
            // The value of a run-time input decides the shape: known when the program runs.
            Err(e) if rxvm_vm::ir::schema::needs_input_value(&e) => {
                a.run_time.extend(n.outputs.iter().filter(|o| !o.is_empty()).map(String::as_str));
                a.folded.push(false);
                continue;
            }
            Err(e) => return Err(format!("node `{}` ({}): {e}", n.name, n.op)),
        };
        if outs.len() < n.outputs.len() {
            return Err(format!(
                "node `{}` ({}): names {} outputs, the operator produces {}",
                n.name,
                n.op,
                n.outputs.len(),
                outs.len()
            ));
        }
        // Folding allocates the outputs on the host: a node whose outputs do not fit in the
        // budget left (or whose size overflows) runs at run time instead, where the device's
        // limits apply.
        let out_bytes = outs
            .iter()
            .try_fold(0u64, |acc, (d, s)| acc.checked_add(rxvm_vm::types::dense_bytes(*d, s)?))
            .filter(|&bytes| bytes <= budget);
        // `Shape` and `Size` depend on their input's shape alone, which is known here (the
        // input shapes are given), so they fold whatever computes their input: the shape
        // arithmetic after them (Gather, Concat, Reshape's shape input...) then folds as well.
        if let (Operator::Shape | Operator::Size, Some(bytes)) = (def.op, out_bytes) {
            if let (Some(Some(x)), Some(y)) = (infos.first(), n.outputs.first()) {
                let t = if def.op == Operator::Shape {
                    let dims = rxvm_vm::ir::operators::tensor::shape_value(x.shape, &n.attrs);
                    let data = dims.iter().flat_map(|d| d.to_le_bytes()).collect();
                    HostTensor::new(DType::I64, vec![dims.len() as i64], data)?
                } else {
                    // Inference checked that the element count fits.
                    let count = x.shape.iter().product::<i64>();
                    HostTensor::new(DType::I64, vec![], count.to_le_bytes().to_vec())?
                };
                budget -= bytes;
                a.consts.insert(y.as_str(), Arc::new(t));
                for (name, t) in n.outputs.iter().zip(outs) {
                    a.types.insert(name, t);
                }
                a.folded.push(true);
                continue;
            }
        }
        let fold = out_bytes.is_some() && n.inputs.iter().all(|x| x.is_empty() || a.consts.contains_key(x.as_str()));
        if let (true, Some(bytes)) = (fold, out_bytes) {
            budget -= bytes;
            let ins: Vec<Option<&HostTensor>> = n.inputs.iter().map(|x| a.const_value(x)).collect();
            let mut res: Vec<HostTensor> =
                outs.iter().map(|(d, s)| HostTensor::zeros(*d, s)).collect::<Result<_, _>>()?;
            (def.op.id().host_kernel()?)(&ins, &n.attrs, &mut res)
                .map_err(|e| format!("folding node `{}`: {e}", n.name))?;
            for (name, t) in n.outputs.iter().zip(res) {
                a.consts.insert(name, Arc::new(t));
            }
        }
        for (name, t) in n.outputs.iter().zip(outs) {
            a.types.insert(name, t);
        }
        a.folded.push(fold);
    }
    for o in &g.outputs {
        if !a.types.contains_key(o.as_str()) && !a.run_time.contains(o.as_str()) {
            return Err(format!("graph output `{o}` is never produced"));
        }
    }
    a.folded_bytes = fold_budget - budget;
    Ok(a)
}
