//! Lowering the nodes whose outputs the run allocates: an allocating operator call
//! (`%y = call @onnx.X(...)`), or for control flow (`If`, `Loop`, `Scan`) branches and
//! loops around calls of the subgraphs, each lowered to a function of the module whose
//! every node is again such a node. `docs/compiler.md` ("Control flow") describes the code.

use crate::graph::{ident, ControlFlow, Node, Subgraph};
use rxvm_vm::builder::{FunctionBuilder, ModuleBuilder, Operand};
use rxvm_vm::bytecode::{FuncId, Reg};
use rxvm_vm::host_tensor::shared_data;
use rxvm_vm::module::ConstData;
use rxvm_vm::ops::{AttrValue, Attrs};
use rxvm_vm::types::{DType, Type};
use std::collections::HashMap;

/// Emits `node`, whose outputs the run allocates, in `f` (the function `func`): returns
/// `nout` registers, the node's first `nout` outputs. `cf` holds the subgraphs of a
/// control-flow node; `inputs` are the node's inputs (captures last).
pub(crate) fn emit_run_time_node(
    mb: &mut ModuleBuilder,
    f: &mut FunctionBuilder,
    func: &str,
    node: &Node,
    cf: Option<&ControlFlow>,
    inputs: &[Operand],
    nout: usize,
) -> Result<Vec<Reg>, String> {
    let Some(cf) = cf else {
        return f
            .call_op_alloc(&node.op, inputs, nout, node.attrs.clone())
            .map_err(|e| format!("node `{}`: {e}", node.name));
    };
    cf.check(node)?;
    let mut e = Emitter { mb, f, prefix: format!("{func}.{}", ident(&node.name, &mut HashMap::new())), node, cf };
    let own = inputs.len().saturating_sub(cf.captures.len());
    let (own_in, captured) = inputs.split_at(own);
    let outs = match node.op.as_str() {
        "If" => e.branches(own_in, captured, nout)?,
        "Loop" => e.loop_(own_in, captured)?,
        _ => e.scan(own_in, captured)?,
    };
    // The values the node does not name.
    let mut outs = outs.into_iter();
    let named: Vec<Reg> = outs.by_ref().take(nout).collect();
    for r in outs {
        e.f.kill(r);
    }
    if named.len() < nout {
        return Err(format!("node `{}` ({}): names {nout} outputs, it gives {}", node.name, node.op, named.len()));
    }
    Ok(named)
}

/// Lowers `sub` to the function `name` of the module: its inputs, then its captures, are
/// the parameters (any tensors); every node an allocating call or nested control flow;
/// each computed tensor killed after its last use; `ret` of its outputs.
fn lower_subgraph(mb: &mut ModuleBuilder, name: &str, sub: &Subgraph) -> Result<FuncId, String> {
    let g = &sub.body;
    let nparams = sub.inputs.len() + sub.captures.len();
    let mut f = mb.function(name, vec![Type::AnyTensor; nparams], vec![Type::AnyTensor; g.outputs.len()]);
    let mut names = HashMap::new();
    let mut vals: HashMap<&str, Operand> = HashMap::new();
    for (i, x) in sub.inputs.iter().chain(&sub.captures).enumerate() {
        let r = f.param(i as u32);
        f.name(r, &ident(x, &mut names));
        vals.insert(x, Operand::Reg(r));
    }
    let mut const_names = HashMap::new();
    for (c, v) in &g.consts {
        if vals.contains_key(c.as_str()) {
            continue;
        }
        let id = mb.constant(
            &format!("{name}.{}", ident(c, &mut const_names)),
            v.dtype,
            &v.shape,
            ConstData::Bytes(shared_data(v)),
        );
        vals.insert(c, Operand::Const(id));
    }
    // The last node reading each tensor; outputs live on.
    let mut last: HashMap<&str, usize> = HashMap::new();
    for (k, n) in g.nodes.iter().enumerate() {
        for x in n.inputs.iter().chain(&n.outputs) {
            last.insert(x, k);
        }
    }
    for o in &g.outputs {
        last.remove(o.as_str());
    }
    let mut computed: HashMap<&str, Reg> = HashMap::new();
    for (k, n) in g.nodes.iter().enumerate() {
        let mut ins = Vec::with_capacity(n.inputs.len());
        for x in &n.inputs {
            ins.push(if x.is_empty() {
                Operand::None
            } else {
                *vals
                    .get(x.as_str())
                    .ok_or_else(|| format!("node `{}` ({}): input `{x}` is undefined", n.name, n.op))?
            });
        }
        let nout = n.outputs.iter().rposition(|o| !o.is_empty()).map_or(1, |i| i + 1);
        let regs = emit_run_time_node(mb, &mut f, name, n, g.subgraphs.get(&n.name), &ins, nout)?;
        for (o, r) in n.outputs.iter().zip(regs) {
            if o.is_empty() {
                f.kill(r);
            } else {
                f.name(r, &ident(o, &mut names));
                vals.insert(o, Operand::Reg(r));
                computed.insert(o, r);
            }
        }
        let mut dying: Vec<&str> = n.inputs.iter().chain(&n.outputs).map(String::as_str).collect();
        dying.sort_unstable();
        dying.dedup();
        for x in dying {
            if let (Some(&r), Some(&l)) = (computed.get(x), last.get(x)) {
                if l == k {
                    f.kill(r);
                    computed.remove(x);
                }
            }
        }
    }
    let mut rets = Vec::with_capacity(g.outputs.len());
    for o in &g.outputs {
        rets.push(*vals.get(o.as_str()).ok_or_else(|| format!("output `{o}` is never produced"))?);
    }
    f.ret(&rets);
    let id = f.id();
    mb.add_function(f);
    Ok(id)
}

/// Emits one control-flow node into its caller.
struct Emitter<'a, 'm> {
    mb: &'m mut ModuleBuilder,
    f: &'a mut FunctionBuilder,
    /// `<caller>.<node>`: the subgraphs' functions and constants are named after it.
    prefix: String,
    node: &'a Node,
    cf: &'a ControlFlow,
}

impl Emitter<'_, '_> {
    fn fail(&self, msg: String) -> String {
        format!("node `{}` ({}): {msg}", self.node.name, self.node.op)
    }

    fn sub(&self, attr: &str) -> Result<&Subgraph, String> {
        self.cf.get(attr).ok_or_else(|| self.fail(format!("has no `{attr}` subgraph")))
    }

    /// The function of subgraph `attr`.
    fn function(&mut self, attr: &str) -> Result<(FuncId, usize), String> {
        let cf = self.cf;
        let sub = cf.get(attr).ok_or_else(|| self.fail(format!("has no `{attr}` subgraph")))?;
        let name = format!("{}.{}", self.prefix, attr.trim_end_matches("_branch"));
        let id = lower_subgraph(self.mb, &name, sub).map_err(|e| self.fail(format!("subgraph `{attr}`: {e}")))?;
        Ok((id, sub.body.outputs.len()))
    }

    /// A module constant named after the node.
    fn constant(&mut self, what: &str, dtype: DType, shape: &[i64], data: Vec<u8>) -> Reg {
        let c = self.mb.constant(&format!("{}.{what}", self.prefix), dtype, shape, ConstData::Bytes(data.into()));
        self.f.konst(c)
    }

    fn i64_scalar(&mut self, what: &str, v: i64) -> Reg {
        self.constant(what, DType::I64, &[], v.to_le_bytes().to_vec())
    }

    /// A register of its own holding `o`'s value (the loops reassign it).
    fn own_reg(&mut self, o: Operand) -> Result<Reg, String> {
        match o {
            Operand::Reg(r) => {
                let d = self.f.new_reg();
                self.f.mov(d, r);
                Ok(d)
            }
            Operand::Const(c) => Ok(self.f.konst(c)),
            _ => Err(self.fail("an input that must be a tensor is omitted".into())),
        }
    }

    /// The captured tensors a subgraph reads, from the node's captured inputs.
    fn capture_args(&self, attr: &str, captured: &[Operand]) -> Result<Vec<Operand>, String> {
        let sub = self.sub(attr)?;
        let mut args = Vec::with_capacity(sub.captures.len());
        for c in &sub.captures {
            let k = self.cf.captures.iter().position(|x| x == c).ok_or_else(|| self.fail(format!("capture `{c}`")))?;
            args.push(*captured.get(k).ok_or_else(|| self.fail(format!("capture `{c}` is not passed")))?);
        }
        Ok(args)
    }

    /// `Item`: the condition (or trip count) tensor as an int register.
    fn item(&mut self, t: Operand) -> Result<Reg, String> {
        let r = self.f.call_builtin("item", &[t]).map_err(|e| self.fail(e))?;
        r.first().copied().ok_or_else(|| self.fail("@vm.item has no result".into()))
    }

    fn op(&mut self, op: &str, ins: &[Operand], attrs: Attrs) -> Result<Reg, String> {
        let r = self.f.call_op_alloc(op, ins, 1, attrs).map_err(|e| self.fail(e))?;
        r.first().copied().ok_or_else(|| self.fail(format!("@onnx.{op} has no result")))
    }

    /// `dst = value`, dropping what `dst` held and the temporary `value`.
    fn replace(&mut self, dst: Reg, value: Reg) {
        self.f.kill(dst);
        self.f.mov(dst, value);
        self.f.kill(value);
    }

    /// If: `@vm.item` of the condition, `br_if`, a call of each branch's function, both
    /// arms moving its results into the same registers.
    fn branches(&mut self, own: &[Operand], captured: &[Operand], nout: usize) -> Result<Vec<Reg>, String> {
        let cond = *own.first().ok_or_else(|| self.fail("needs a condition input".into()))?;
        let c = self.item(cond)?;
        let dsts: Vec<Reg> = (0..nout).map(|_| self.f.new_reg()).collect();
        let (then_, else_, join) = (self.f.label(), self.f.label(), self.f.label());
        self.f.br_if(c, then_, else_);
        for (label, attr) in [(then_, "then_branch"), (else_, "else_branch")] {
            let args = self.capture_args(attr, captured)?;
            let (id, nres) = self.function(attr)?;
            self.f.place(label);
            let res = self.f.call(id, nres, &args);
            for (k, r) in res.into_iter().enumerate() {
                if let Some(&d) = dsts.get(k) {
                    self.f.mov(d, r);
                }
                self.f.kill(r);
            }
            self.f.br(join);
        }
        self.f.place(join);
        Ok(dsts)
    }

    /// Appends (or with `reverse` prepends) `piece`, given an axis `axis` of its own, to
    /// `acc` along that axis; `first` (an int register) says whether this is the first.
    fn stack(&mut self, acc: Reg, piece: Reg, axis: i64, reverse: bool, first: Reg) -> Result<(), String> {
        let p =
            self.op("Unsqueeze", &[Operand::Reg(piece)], Attrs(vec![("axes".into(), AttrValue::Ints(vec![axis]))]))?;
        self.f.kill(piece);
        let (start, grow, next) = (self.f.label(), self.f.label(), self.f.label());
        self.f.br_if(first, start, grow);
        self.f.place(start);
        self.f.kill(acc);
        self.f.mov(acc, p);
        self.f.br(next);
        self.f.place(grow);
        let pair = if reverse { [p, acc] } else { [acc, p] };
        let cat = self.op(
            "Concat",
            &[Operand::Reg(pair[0]), Operand::Reg(pair[1])],
            Attrs(vec![("axis".into(), AttrValue::Int(axis))]),
        )?;
        self.replace(acc, cat);
        self.f.br(next);
        self.f.place(next);
        self.f.kill(p);
        Ok(())
    }

    /// The value a scan output has when the loop runs no iteration: an empty tensor of the
    /// dtype the subgraph declares (f32 if it declares none).
    fn empty(&mut self, what: &str, sub_output: usize) -> Result<Reg, String> {
        let dtype = self.sub("body")?.output_dtypes.get(sub_output).copied().flatten().unwrap_or(DType::F32);
        Ok(self.constant(&format!("{what}{sub_output}"), dtype, &[0], Vec::new()))
    }

    /// Loop: the trip count and condition as ints; per iteration a call of the body with the
    /// iteration number (an i64 scalar), the condition and the loop-carried values; the
    /// scan outputs stacked along a new axis 0.
    fn loop_(&mut self, own: &[Operand], captured: &[Operand]) -> Result<Vec<Reg>, String> {
        let args = self.capture_args("body", captured)?;
        let (body, nres) = self.function("body")?;
        let carried = own.len().saturating_sub(2);
        let scans = nres.saturating_sub(carried + 1);
        let m = match own.first() {
            Some(Operand::None) | None => self.f.int(i64::MAX),
            Some(&t) => self.item(t)?,
        };
        let (go, cond) = match own.get(1) {
            Some(Operand::None) | None => {
                let go = self.f.int(1);
                (go, self.constant("true", DType::Bool, &[], vec![1]))
            }
            Some(&t) => (self.item(t)?, self.own_reg(t)?),
        };
        let iter = self.i64_scalar("zero", 0);
        let one = self.i64_scalar("one", 1);
        let mut vals = Vec::with_capacity(carried);
        for &v in &own[2..] {
            vals.push(self.own_reg(v)?);
        }
        let mut accs = Vec::with_capacity(scans);
        for j in 0..scans {
            accs.push(self.empty("empty", 1 + carried + j)?);
        }
        let i = self.f.int(0);
        let (head, check, step, done) = (self.f.label(), self.f.label(), self.f.label(), self.f.label());
        self.f.br(head);
        self.f.place(head);
        let more = self.f.call_builtin("ilt", &[Operand::Reg(i), Operand::Reg(m)]).map_err(|e| self.fail(e))?[0];
        self.f.br_if(more, check, done);
        self.f.place(check);
        self.f.br_if(go, step, done);
        self.f.place(step);
        let mut call_args = vec![Operand::Reg(iter), Operand::Reg(cond)];
        call_args.extend(vals.iter().map(|&r| Operand::Reg(r)));
        call_args.extend(args);
        let res = self.f.call(body, nres, &call_args);
        self.replace(cond, res[0]);
        let g = self.item(Operand::Reg(cond))?;
        self.f.mov(go, g);
        for (k, &v) in vals.iter().enumerate() {
            self.replace(v, res[1 + k]);
        }
        let first = self.f.call_builtin("ieq", &[Operand::Reg(i), Operand::Int(0)]).map_err(|e| self.fail(e))?[0];
        for (j, &acc) in accs.iter().enumerate() {
            self.stack(acc, res[1 + carried + j], 0, false, first)?;
        }
        let next = self.op("Add", &[Operand::Reg(iter), Operand::Reg(one)], Attrs::default())?;
        self.replace(iter, next);
        let i2 = self.f.call_builtin("iadd", &[Operand::Reg(i), Operand::Int(1)]).map_err(|e| self.fail(e))?[0];
        self.f.mov(i, i2);
        self.f.br(head);
        self.f.place(done);
        for r in [cond, iter, one] {
            self.f.kill(r);
        }
        vals.extend(accs);
        Ok(vals)
    }

    /// Scan: per iteration, the slice of every scan input at the iteration's index along
    /// its axis (`Gather`; from the end for a reversed input), a call of the body with the
    /// state values and the slices, and the scan outputs stacked along their axes. Opset 8's
    /// Scan is batched: its inputs (after the omitted `sequence_lens`) have a batch axis 0,
    /// and an outer loop runs that scan for each batch entry and stacks its results.
    fn scan(&mut self, own: &[Operand], captured: &[Operand]) -> Result<Vec<Reg>, String> {
        let n_scan = match self.node.attrs.get("num_scan_inputs") {
            Some(AttrValue::Int(k)) if *k >= 1 => *k as usize,
            _ => return Err(self.fail("needs the attribute `num_scan_inputs` (a positive int)".into())),
        };
        let node = self.node;
        let ints = |name: &str, n: usize| -> Result<Vec<i64>, String> {
            match node.attrs.get(name) {
                None => Ok(vec![0; n]),
                Some(AttrValue::Ints(v)) if v.len() == n => Ok(v.clone()),
                Some(_) => Err(format!("node `{}` (Scan): attribute `{name}` must list {n} ints", node.name)),
            }
        };
        let batched = matches!(node.attrs.get("onnx_opset"), Some(AttrValue::Int(v)) if *v < 9);
        let own = if batched {
            if !matches!(own.first(), Some(Operand::None)) {
                return Err(self.fail(
                    "opset 8's `sequence_lens` is not supported: omit it (\"\") when every sequence has the full length"
                        .into(),
                ));
            }
            &own[1..]
        } else {
            own
        };
        let states = own.len().saturating_sub(n_scan);
        let args = self.capture_args("body", captured)?;
        let (body, nres) = self.function("body")?;
        let n_out = nres.saturating_sub(states);
        let spec = if batched {
            ScanSpec {
                states,
                in_axes: vec![0; n_scan],
                in_dirs: ints("directions", n_scan)?,
                out_axes: vec![0; n_out],
                out_dirs: vec![0; n_out],
                body,
                nres,
                args,
            }
        } else {
            ScanSpec {
                states,
                in_axes: ints("scan_input_axes", n_scan)?,
                in_dirs: ints("scan_input_directions", n_scan)?,
                out_axes: ints("scan_output_axes", n_out)?,
                out_dirs: ints("scan_output_directions", n_out)?,
                body,
                nres,
                args,
            }
        };
        if !batched {
            return self.scan_loop(&spec, own);
        }
        // Opset 8: the scan of each batch entry, its results stacked along the batch axis.
        let x0 = self.own_reg(own[0])?;
        let shape = self.int_builtin("shape_of", &[Operand::Reg(x0)])?;
        let batch = self.int_builtin("dim", &[Operand::Reg(shape), Operand::Int(0)])?;
        self.f.kill(x0);
        let at = self.i64_scalar("batch_zero", 0);
        let one = self.i64_scalar("batch_one", 1);
        let mut accs = Vec::with_capacity(nres);
        for j in 0..nres {
            accs.push(self.empty("batch_empty", j)?);
        }
        let b = self.f.int(0);
        let (head, step, done) = (self.f.label(), self.f.label(), self.f.label());
        self.f.br(head);
        self.f.place(head);
        let more = self.int_builtin("ilt", &[Operand::Reg(b), Operand::Reg(batch)])?;
        self.f.br_if(more, step, done);
        self.f.place(step);
        let mut entries = Vec::with_capacity(own.len());
        for &x in own {
            let attrs = Attrs(vec![("axis".into(), AttrValue::Int(0))]);
            entries.push(Operand::Reg(self.op("Gather", &[x, Operand::Reg(at)], attrs)?));
        }
        let res = self.scan_loop(&spec, &entries)?;
        for e in entries {
            if let Operand::Reg(r) = e {
                self.f.kill(r);
            }
        }
        let first = self.int_builtin("ieq", &[Operand::Reg(b), Operand::Int(0)])?;
        for (&acc, r) in accs.iter().zip(res) {
            self.stack(acc, r, 0, false, first)?;
        }
        let next = self.op("Add", &[Operand::Reg(at), Operand::Reg(one)], Attrs::default())?;
        self.replace(at, next);
        let b2 = self.int_builtin("iadd", &[Operand::Reg(b), Operand::Int(1)])?;
        self.f.mov(b, b2);
        self.f.br(head);
        self.f.place(done);
        self.f.kill(at);
        self.f.kill(one);
        Ok(accs)
    }

    /// A builtin of one result.
    fn int_builtin(&mut self, name: &str, args: &[Operand]) -> Result<Reg, String> {
        let r = self.f.call_builtin(name, args).map_err(|e| self.fail(e))?;
        r.first().copied().ok_or_else(|| self.fail(format!("@vm.{name} has no result")))
    }

    /// The loop of a Scan over `own`: the initial states, then the scan inputs. Returns the
    /// final states, then the stacked scan outputs.
    fn scan_loop(&mut self, spec: &ScanSpec, own: &[Operand]) -> Result<Vec<Reg>, String> {
        let states = spec.states;
        let n_out = spec.nres.saturating_sub(states);
        let xs: Vec<Operand> = own[states..].to_vec();
        let x0 = self.own_reg(xs[0])?;
        let shape = self.int_builtin("shape_of", &[Operand::Reg(x0)])?;
        let len = self.int_builtin("dim", &[Operand::Reg(shape), Operand::Int(spec.in_axes[0])])?;
        self.f.kill(x0);
        let fwd = self.i64_scalar("zero", 0);
        let bwd = self.i64_scalar("minus_one", -1);
        let one = self.i64_scalar("one", 1);
        let mut vals = Vec::with_capacity(states);
        for &v in &own[..states] {
            vals.push(self.own_reg(v)?);
        }
        let mut accs = Vec::with_capacity(n_out);
        for j in 0..n_out {
            accs.push(self.empty("empty", states + j)?);
        }
        let i = self.f.int(0);
        let (head, step, done) = (self.f.label(), self.f.label(), self.f.label());
        self.f.br(head);
        self.f.place(head);
        let more = self.int_builtin("ilt", &[Operand::Reg(i), Operand::Reg(len)])?;
        self.f.br_if(more, step, done);
        self.f.place(step);
        let mut slices = Vec::with_capacity(xs.len());
        for (k, &x) in xs.iter().enumerate() {
            let at = if spec.in_dirs[k] == 1 { bwd } else { fwd };
            let attrs = Attrs(vec![("axis".into(), AttrValue::Int(spec.in_axes[k]))]);
            slices.push(self.op("Gather", &[x, Operand::Reg(at)], attrs)?);
        }
        let mut call_args: Vec<Operand> = vals.iter().chain(&slices).map(|&r| Operand::Reg(r)).collect();
        call_args.extend(spec.args.iter().copied());
        let res = self.f.call(spec.body, spec.nres, &call_args);
        for s in slices {
            self.f.kill(s);
        }
        for (k, &v) in vals.iter().enumerate() {
            self.replace(v, res[k]);
        }
        let first = self.int_builtin("ieq", &[Operand::Reg(i), Operand::Int(0)])?;
        for (j, &acc) in accs.iter().enumerate() {
            self.stack(acc, res[states + j], spec.out_axes[j], spec.out_dirs[j] == 1, first)?;
        }
        let f2 = self.op("Add", &[Operand::Reg(fwd), Operand::Reg(one)], Attrs::default())?;
        self.replace(fwd, f2);
        let b2 = self.op("Sub", &[Operand::Reg(bwd), Operand::Reg(one)], Attrs::default())?;
        self.replace(bwd, b2);
        let i2 = self.int_builtin("iadd", &[Operand::Reg(i), Operand::Int(1)])?;
        self.f.mov(i, i2);
        self.f.br(head);
        self.f.place(done);
        for r in [fwd, bwd, one] {
            self.f.kill(r);
        }
        vals.extend(accs);
        Ok(vals)
    }
}

/// What a Scan's loop needs: the number of state values, the axes and directions of the
/// scan inputs and outputs, and the body's function, result count and captured arguments.
struct ScanSpec {
    states: usize,
    in_axes: Vec<i64>,
    in_dirs: Vec<i64>,
    out_axes: Vec<i64>,
    out_dirs: Vec<i64>,
    body: FuncId,
    nres: usize,
    args: Vec<Operand>,
}
