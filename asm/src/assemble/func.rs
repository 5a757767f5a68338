//! Function bodies to bytecode: registers, labels, operand lists, each instruction
//! form, parameter placements, and the diagnostics of calls.

use super::consts::*;
use super::source_map::*;
use super::state::*;
use super::suggest::*;
use super::symbols::SymTable;
use rxvm_vm::bytecode::EntityRef;

/// The spans of an instruction's operands, recorded only when the source map is wanted.
pub(super) struct OperandSpans {
    on: bool,
    spans: SmallVec<[Span; 6]>,
}

impl OperandSpans {
    pub(super) fn push(&mut self, s: Span) {
        if self.on {
            self.spans.push(s);
        }
    }
}

/// Equal names. Names are short: comparing them inline is faster than calling `memcmp`,
/// which `str`'s equality does.
pub(super) fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

pub(super) fn name_hash(name: &str) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    std::hash::Hasher::write(&mut h, name.as_bytes());
    std::hash::Hasher::finish(&h)
}

/// Per-function state.
pub(super) struct FuncAsm<'s> {
    /// Registers by the hash of their name (checked against `reg_names`, see `find_reg`):
    /// keys that borrow nothing let one table serve every function.
    regs: FastMap<u64, u32>,
    /// Whether two names of this function had the same hash: then a name missing from
    /// `regs` may still be a register.
    collided: bool,
    reg_names: NameList,
    labels: FastMap<&'s str, u32>,
    code: Vec<Instr>,
    args: Vec<Arg>,
    locs: Vec<SourceLoc>,
    map: Vec<InstrMap>,
    too_many_regs: bool,
    /// When the body is assembled a piece at a time ([`begin_stream`]): branches to labels
    /// not defined yet, as (pc, target: 0 `br`, 1 `br_if` then, 2 `br_if` else, label).
    forward: Option<Vec<(u32, u8, String)>>,
}

impl<'s> FuncAsm<'s> {
    /// The register named `name` (with hash `h`), if any.
    pub(super) fn find_reg(&self, name: &str, h: u64) -> Option<u32> {
        match self.regs.get(&h) {
            Some(&r) if self.reg_names.get(r as usize).is_some_and(|n| same_name(n, name)) => Some(r),
            _ if self.collided => self.reg_names.iter().position(|n| same_name(n, name)).map(|i| i as u32),
            _ => None,
        }
    }

    pub(super) fn reg(&mut self, n: &Name<'_>, errs: &mut Vec<Diagnostic>) -> Reg {
        let h = name_hash(n.text);
        if let Some(r) = self.find_reg(n.text, h) {
            return Reg(r);
        }
        let r = self.reg_names.len() as u32;
        if r > Arg::MAX_INDEX {
            if !self.too_many_regs {
                errs.push(Diagnostic::new(n.span, "too many registers in this function"));
                self.too_many_regs = true;
            }
            return Reg(0);
        }
        // On a collision the first name keeps the entry; the other is found by `find_reg`.
        match self.regs.entry(h) {
            std::collections::hash_map::Entry::Occupied(_) => self.collided = true,
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(r);
            }
        }
        self.reg_names.push(n.text);
        Reg(r)
    }

    /// Starts an operand list in `args`; `None` (after reporting) when the pool is full.
    pub(super) fn list_start(&self, span: Span, errs: &mut Vec<Diagnostic>) -> u32 {
        match u32::try_from(self.args.len()) {
            Ok(s) => s,
            Err(_) => {
                errs.push(Diagnostic::new(span, "too many operands in this function"));
                0
            }
        }
    }
}

pub(super) fn count_u8(n: usize, span: Span, what: &str, errs: &mut Vec<Diagnostic>) -> u8 {
    u8::try_from(n).unwrap_or_else(|_| {
        errs.push(
            Diagnostic::new(span, format!("too many {what}: {n}"))
                .with_label("the encoding allows at most 255")
                .with_note("the count is stored in 8 bits"),
        );
        0
    })
}

pub(super) fn count_u16(n: usize, span: Span, what: &str, errs: &mut Vec<Diagnostic>) -> u16 {
    u16::try_from(n).unwrap_or_else(|_| {
        errs.push(
            Diagnostic::new(span, format!("too many {what}: {n}"))
                .with_label("the encoding allows at most 65535")
                .with_note("the count is stored in 16 bits"),
        );
        0
    })
}

/// How many operands the instruction puts in its function's operand lists.
pub(super) fn operand_list_len(ins: &InstrNode<'_>) -> usize {
    match ins.kind {
        InstrKind::Shape { dims } => dims.len(),
        InstrKind::AllocTensor(AllocTensorOps { dims, .. }) => 1 + dims.len(),
        InstrKind::Call { args, .. } => ins.dsts.len() + args.len(),
        InstrKind::OpCall(OpCallOps { inputs, outputs, .. }) => ins.dsts.len() + inputs.len() + outputs.len(),
        InstrKind::KernelCall(KernelCallOps { args, global, .. }) => args.len() + global.map_or(0, |g| g.dims.len()),
        InstrKind::Ret { values } => values.len(),
        _ => 0,
    }
}

pub(super) fn expect_dsts(ins: &InstrNode<'_>, n: usize, errs: &mut Vec<Diagnostic>) {
    if ins.dsts.len() == n {
        return;
    }
    let m = ins.mnemonic.text;
    let d = if n == 1 {
        let d = Diagnostic::new(
            ins.dsts.first().map_or(ins.mnemonic.span, |f| f.span.to(ins.dsts[ins.dsts.len() - 1].span)),
            format!("`{m}` writes exactly one register"),
        );
        if ins.dsts.is_empty() {
            d.with_label("no destination").with_note(format!("write `%dst = {m} ...`"))
        } else {
            d.with_label(format!("{} destinations", ins.dsts.len()))
        }
    } else {
        let span = ins.dsts[0].span.to(ins.dsts[ins.dsts.len() - 1].span);
        Diagnostic::new(span, format!("`{m}` does not write a register"))
            .with_label("remove this destination")
            .with_note(format!("write `{m} ...` without `%dst =`"))
    };
    errs.push(d);
}

/// The start of a function: its parameters' registers, its signature and placements.
fn begin_func<'s>(a: &mut Asm<'_>, fi: usize, f: &FuncDecl<'_>) -> (FuncAsm<'s>, Vec<Type>, Vec<Placement>, Vec<Type>) {
    let mut regs = std::mem::take(&mut a.reg_table);
    regs.clear();
    let mut fa = FuncAsm {
        regs,
        collided: false,
        reg_names: std::mem::take(&mut a.reg_names),
        labels: FastMap::default(),
        code: Vec::new(),
        args: Vec::new(),
        locs: Vec::new(),
        map: Vec::new(),
        too_many_regs: false,
        forward: None,
    };

    for p in f.params {
        if let Some(r) = fa.find_reg(p.name.text, name_hash(p.name.text)) {
            let first = f.params[r as usize].name.span;
            a.errs.push(
                Diagnostic::new(p.name.span, format!("duplicate parameter `%{}`", p.name.text))
                    .with_label("declared again here")
                    .with_secondary(first, "first declared here"),
            );
            // Still give the parameter its own register so that register i = parameter i.
            fa.reg_names.push(p.name.text);
        } else {
            fa.reg(&p.name, &mut a.errs);
        }
    }
    // The dimension symbols take the registers after the parameters', as `SymTable` numbers them.
    let syms = SymTable::new(f);
    for s in syms.names() {
        let span = f.params.iter().find_map(|p| match p.ty.kind {
            TypeKind::Tensor { dims, .. } => dims.iter().find_map(|d| match d {
                DimExpr::Sym(n) if n.text == *s => Some(n.span),
                _ => None,
            }),
            _ => None,
        });
        fa.reg(&Name { text: s, span: span.unwrap_or(f.name.span) }, &mut a.errs);
    }
    let params = a.func_params.get_mut(fi).map(std::mem::take).unwrap_or_default();
    let placements = placements(f, &params, &mut a.errs);
    let results: Vec<Type> = f.results.iter().map(|t| a.ty(t, Some(&syms))).collect();

    (fa, params, placements, results)
}

pub(super) fn assemble_func<'f>(a: &mut Asm<'_>, fi: usize, f: &FuncDecl<'f>) -> (Function, FuncMap) {
    let (mut fa, params, placements, results) = begin_func(a, fi, f);
    // Labels: name -> pc of the next instruction.
    let mut pc = 0u32;
    let mut pending: Vec<Name<'f>> = Vec::new();
    let mut debug_labels: Vec<(u32, String)> = Vec::new();
    let mut label_spans: FastMap<&str, Span> = FastMap::default();
    let mut nargs = 0usize;
    for item in f.body {
        match item {
            BodyItem::Label(l) => {
                if let Some(first) = label_spans.get(l.text) {
                    a.errs.push(
                        Diagnostic::new(l.span, format!("duplicate label `{}`", l.text))
                            .with_label("defined again here")
                            .with_secondary(*first, "first defined here"),
                    );
                } else {
                    label_spans.insert(l.text, l.span);
                    fa.labels.insert(l.text, pc);
                    if debug_labels.last().is_none_or(|(p, _)| *p != pc) {
                        debug_labels.push((pc, l.text.to_string()));
                    }
                    pending.push(*l);
                }
            }
            BodyItem::Instr(ins) => {
                pending.clear();
                pc = pc.saturating_add(1);
                nargs += operand_list_len(ins);
            }
        }
    }
    // Room for the code, its positions and operand lists: growing them was a tenth of the
    // assembler's time.
    fa.code.reserve_exact(pc as usize);
    fa.locs.reserve_exact(pc as usize);
    fa.args.reserve_exact(nargs);
    for l in &pending {
        a.errs.push(
            Diagnostic::new(l.span, "label has no instruction after it")
                .with_label(format!("`{}` is at the end of the function", l.text))
                .with_note("a label names the instruction that follows it"),
        );
    }

    for item in f.body {
        let BodyItem::Instr(ins) = item else { continue };
        assemble_instr(a, &mut fa, fi, &results, ins);
    }
    let parts = FuncParts { params, placements, results, debug_labels };
    end_func(a, fa, f.name.text.to_string(), f.header_span, parts)
}

/// A function's signature and labels, for [`end_func`].
struct FuncParts {
    params: Vec<Type>,
    placements: Vec<Placement>,
    results: Vec<Type>,
    debug_labels: Vec<(u32, String)>,
}

/// Assembles one instruction at the end of `fa`'s code.
fn assemble_instr(a: &mut Asm<'_>, fa: &mut FuncAsm<'_>, fi: usize, results: &[Type], ins: &InstrNode<'_>) {
    let mut ops = OperandSpans { on: a.want_map, spans: SmallVec::new() };
    let mut attr_spans: Vec<(String, Span)> = Vec::new();
    let dst = |fa: &mut FuncAsm<'_>, ops: &mut OperandSpans, errs: &mut Vec<Diagnostic>| -> Reg {
        match ins.dsts.first() {
            Some(d) => {
                ops.push(d.span);
                fa.reg(d, errs)
            }
            None => Reg(0),
        }
    };
    let instr = match ins.kind {
        InstrKind::Nop => {
            expect_dsts(ins, 0, &mut a.errs);
            Instr::Nop {}
        }
        InstrKind::Mov { src } => {
            expect_dsts(ins, 1, &mut a.errs);
            let dst = dst(&mut *fa, &mut ops, &mut a.errs);
            ops.push(src.span);
            Instr::Mov { dst, src: fa.reg(&src, &mut a.errs) }
        }
        InstrKind::Int { value } => {
            expect_dsts(ins, 1, &mut a.errs);
            let dst = dst(&mut *fa, &mut ops, &mut a.errs);
            ops.push(value.span);
            let value = match i64_of(&value) {
                Ok(v) => v,
                Err(d) => {
                    a.errs.push(d);
                    0
                }
            };
            Instr::LoadInt { dst, value }
        }
        InstrKind::Float(&FloatOps { value }) => {
            expect_dsts(ins, 1, &mut a.errs);
            let dst = dst(&mut *fa, &mut ops, &mut a.errs);
            ops.push(value.span());
            let v = match value {
                Number::Int(i) => match i.value {
                    Some(v) => Ok(v as f64),
                    None => Err(int_out_of_range(i.span, "a float")),
                },
                Number::Float(f) => f64_of(&f),
            };
            let value = match v {
                Ok(v) => v,
                Err(d) => {
                    a.errs.push(d);
                    0.0
                }
            };
            Instr::LoadFloat { dst, value }
        }
        InstrKind::Const { konst } => {
            expect_dsts(ins, 1, &mut a.errs);
            let dst = dst(&mut *fa, &mut ops, &mut a.errs);
            ops.push(konst.span);
            let konst = a.const_ref(&konst);
            Instr::LoadConst { dst, konst }
        }
        InstrKind::Shape { dims } => {
            expect_dsts(ins, 1, &mut a.errs);
            let dst = dst(&mut *fa, &mut ops, &mut a.errs);
            let ndim = count_u8(dims.len(), ins.span, "dimensions", &mut a.errs);
            let start = fa.list_start(ins.span, &mut a.errs);
            for d in dims {
                ops.push(d.span());
                let arg = operand(a, &mut *fa, d, false);
                fa.args.push(arg);
            }
            Instr::MakeShape { dst, dims: start, ndim }
        }
        InstrKind::AllocStorage(&AllocStorageOps { size, align, device, scope }) => {
            expect_dsts(ins, 1, &mut a.errs);
            let dst = dst(&mut *fa, &mut ops, &mut a.errs);
            ops.push(size.span());
            let size = operand(a, &mut *fa, &size, false);
            let align = match align {
                None => {
                    ops.push(ins.span);
                    Arg::imm(0).unwrap_or(Arg(0))
                }
                Some(al) => {
                    ops.push(al.span());
                    if let Operand::Int(i) = al {
                        let ok =
                            i.value.is_some_and(|v| v > 0 && (v as u128).is_power_of_two() && v <= i64::MAX as i128);
                        if !ok {
                            a.errs.push(
                                Diagnostic::new(i.span, "align must be a positive power of two")
                                    .with_label("not a power of two")
                                    .with_note("omit `align` to use the device's base alignment"),
                            );
                        }
                    }
                    operand(a, &mut *fa, &al, false)
                }
            };
            let device = match device {
                None => {
                    ops.push(ins.span);
                    0
                }
                Some(d) => {
                    ops.push(d.span);
                    match d.value.and_then(|v| u8::try_from(v).ok()) {
                        Some(v) => v,
                        None => {
                            a.errs.push(
                                Diagnostic::new(d.span, "device must be in 0 ..= 255")
                                    .with_label("not a device number"),
                            );
                            0
                        }
                    }
                }
            };
            ops.push(scope.map_or(ins.span, |s| s.span));
            let scope = a.scope(scope);
            Instr::AllocStorage { dst, size, align, device, scope }
        }
        InstrKind::AllocTensor(&AllocTensorOps { storage, offset, dtype, dims, scope }) => {
            expect_dsts(ins, 1, &mut a.errs);
            let dst = dst(&mut *fa, &mut ops, &mut a.errs);
            ops.push(storage.span);
            let storage = fa.reg(&storage, &mut a.errs);
            let ndim = count_u8(dims.len(), ins.span, "dimensions", &mut a.errs);
            let start = fa.list_start(ins.span, &mut a.errs);
            ops.push(offset.span());
            let off = operand(a, &mut *fa, &offset, false);
            fa.args.push(off);
            for d in dims {
                ops.push(d.span());
                let arg = operand(a, &mut *fa, d, false);
                fa.args.push(arg);
            }
            ops.push(scope.map_or(ins.span, |s| s.span));
            let dt = a.dtype(&dtype).unwrap_or(DType::F32);
            let scope = a.scope(scope);
            Instr::AllocTensor { dst, storage, args: start, dtype: dt, scope, ndim }
        }
        InstrKind::Kill { reg } => {
            expect_dsts(ins, 0, &mut a.errs);
            ops.push(reg.span);
            Instr::Kill { reg: fa.reg(&reg, &mut a.errs) }
        }
        InstrKind::Call { callee, args } => {
            let ndst = count_u8(ins.dsts.len(), ins.span, "destinations", &mut a.errs);
            let nargs = count_u16(args.len(), ins.span, "arguments", &mut a.errs);
            // Which parameters take floats (integer literals there become floats).
            let float_params: SmallVec<[bool; 8]>;
            let target = if let Some(bname) = callee.text.strip_prefix("vm.") {
                match a.names.builtin(bname) {
                    Some(b) => {
                        float_params = b.sig().params.iter().map(|k| *k == Kind::Float).collect();
                        Ok(BuiltinId(b as u32))
                    }
                    None => {
                        float_params = SmallVec::new();
                        a.errs.push(unknown_builtin(&callee));
                        Ok(BuiltinId(0))
                    }
                }
            } else {
                match a.funcs.get(callee.text) {
                    Some(&(id, _)) => {
                        float_params = a.float_params.get(id.index()).cloned().unwrap_or_default();
                        Err(id)
                    }
                    // Streaming: maybe defined further on. Only integer literal
                    // arguments depend on the callee's parameter types (a float
                    // parameter makes them float literals).
                    None if a.stream => {
                        float_params = SmallVec::new();
                        if args.iter().any(|x| matches!(x, Operand::Int(_))) {
                            a.give_up = true;
                        }
                        match a.lines.src.get(callee.span.start + 1..callee.span.end) {
                            Some(name) => a.fixups.push((fi, fa.code.len(), name)),
                            None => a.give_up = true,
                        }
                        Err(FuncId(0))
                    }
                    None => {
                        float_params = SmallVec::new();
                        let mut d = Diagnostic::new(callee.span, format!("unknown function `@{}`", callee.text))
                            .with_label("no function of this name");
                        if let Some(s) = did_you_mean("@", &close_names(callee.text, a.funcs.keys().copied())) {
                            d = d.with_note(s);
                        }
                        a.errs.push(d);
                        Err(FuncId(0))
                    }
                }
            };
            let list = fa.list_start(ins.span, &mut a.errs);
            for d in ins.dsts {
                ops.push(d.span);
                let r = fa.reg(d, &mut a.errs);
                fa.args.push(Arg::reg(r));
            }
            for (k, arg) in args.iter().enumerate() {
                ops.push(arg.span());
                let fl = float_params.get(k).copied().unwrap_or(false);
                let v = operand(a, &mut *fa, arg, fl);
                fa.args.push(v);
            }
            match target {
                Ok(builtin) => Instr::CallBuiltin { builtin, list, ndst, nargs },
                Err(func) => Instr::Call { func, list, ndst, nargs },
            }
        }
        InstrKind::OpCall(&OpCallOps { op, inputs, outputs, arrow, attrs }) => {
            // `%y = call @onnx.X(...)`: the VM allocates the outputs.
            let allocates = !ins.dsts.is_empty();
            if allocates && arrow.is_some() {
                a.errs.push(op_call_dsts_and_outputs(ins));
            }
            let id = a.names.op(op.text).unwrap_or_else(|| {
                a.errs.push(unknown_operator(&op));
                OpId(0)
            });
            let nin = count_u16(inputs.len(), ins.span, "operator inputs", &mut a.errs);
            let nout = if allocates {
                count_u8(ins.dsts.len(), ins.span, "destinations", &mut a.errs)
            } else {
                count_u8(outputs.len(), ins.span, "operator outputs", &mut a.errs)
            };
            let list = fa.list_start(ins.span, &mut a.errs);
            for d in ins.dsts {
                ops.push(d.span);
                let r = fa.reg(d, &mut a.errs);
                fa.args.push(Arg::reg(r));
            }
            for x in inputs {
                ops.push(x.span());
                let v = operand(a, &mut *fa, x, false);
                fa.args.push(v);
            }
            for (k, y) in outputs.iter().enumerate() {
                ops.push(y.span());
                match y {
                    Operand::Reg(_) => {}
                    Operand::None(s) => a.errs.push(
                        Diagnostic::new(*s, "`none` cannot be an operator output")
                            .with_label("not a tensor")
                            .with_note(format!(
                                "output {} must be a register holding a tensor the program allocated \
                                 (`alloc_tensor`); `none` only marks an omitted optional input",
                                k + 1
                            )),
                    ),
                    _ => a.errs.push(
                        Diagnostic::new(y.span(), "an operator output must be a register")
                            .with_label("not a register")
                            .with_note("outputs are tensors the program allocated, written in place"),
                    ),
                }
                let v = operand(a, &mut *fa, y, false);
                fa.args.push(v);
            }
            let attrs = match attrs {
                None => {
                    ops.push(ins.span);
                    0
                }
                Some(block) => {
                    ops.push(block.span);
                    let text = a.lines.src.get(block.span.range()).unwrap_or("");
                    match a.attrs_by_text.get(text).copied() {
                        // The source map wants this call's own attribute spans.
                        Some(id) if !a.want_map => id,
                        seen => {
                            let errs = a.errs.len();
                            let set = a.attr_set(&block, &mut attr_spans);
                            let id = seen.unwrap_or_else(|| a.intern_attrs(set, block.span));
                            if a.errs.len() == errs && id != 0 {
                                a.attrs_by_text.insert(text, id);
                            }
                            id
                        }
                    }
                }
            };
            if allocates {
                Instr::CallOpAlloc { op: id, list, attrs, ndst: nout, nin }
            } else {
                Instr::CallOp { op: id, list, attrs, nout, nin }
            }
        }
        InstrKind::KernelCall(&KernelCallOps { kernel, args, global }) => {
            if !ins.dsts.is_empty() {
                a.errs.push(kernel_call_dsts(ins));
            }
            let name = kernel.text.strip_prefix("cl.").unwrap_or(kernel.text);
            let id = match a.kernels.get(name) {
                Some(&(id, _)) => id,
                None => {
                    a.errs.push(unknown_kernel(&kernel, a.kernels.keys().copied()));
                    0
                }
            };
            let dims = global.map_or(&[][..], |g| g.dims);
            match global {
                None => a.errs.push(
                    Diagnostic::new(ins.span, format!("kernel call `@{}` has no global work size", kernel.text))
                        .with_label("missing `global [...]`")
                        .with_note(format!(
                            "write the number of work items per dimension after the arguments: `{} global [N]`",
                            a.lines.src.get(ins.mnemonic.span.start..ins.span.end).unwrap_or("call ...").trim_end()
                        )),
                ),
                Some(g) if g.dims.is_empty() || g.dims.len() > 3 => a.errs.push(
                    Diagnostic::new(g.span, format!("a kernel runs over 1 to 3 dimensions, not {}", g.dims.len()))
                        .with_label(format!("{} global sizes", g.dims.len()))
                        .with_note("OpenCL's NDRange has at most 3 dimensions"),
                ),
                Some(_) => {}
            }
            let nargs = count_u16(args.len(), ins.span, "kernel arguments", &mut a.errs);
            let ndims = count_u8(dims.len(), ins.span, "global sizes", &mut a.errs);
            let list = fa.list_start(ins.span, &mut a.errs);
            for x in args.iter().chain(dims) {
                ops.push(x.span());
                let v = operand(a, &mut *fa, x, false);
                fa.args.push(v);
            }
            Instr::CallKernel { kernel: id, list, ndims, nargs }
        }
        InstrKind::Ret { values } => {
            expect_dsts(ins, 0, &mut a.errs);
            let nvals = count_u16(values.len(), ins.span, "return values", &mut a.errs);
            let list = fa.list_start(ins.span, &mut a.errs);
            for (k, v) in values.iter().enumerate() {
                ops.push(v.span());
                let fl = results.get(k) == Some(&Type::Float);
                let arg = operand(a, &mut *fa, v, fl);
                fa.args.push(arg);
            }
            Instr::Ret { list, nvals }
        }
        InstrKind::Br { target } => {
            expect_dsts(ins, 0, &mut a.errs);
            ops.push(target.span);
            Instr::Br { target: label(fa, &target, 0, &mut a.errs) }
        }
        InstrKind::BrIf(&BrIfOps { cond, then_, else_ }) => {
            expect_dsts(ins, 0, &mut a.errs);
            ops.push(cond.span);
            ops.push(then_.span);
            ops.push(else_.span);
            let cond = fa.reg(&cond, &mut a.errs);
            Instr::BrIf { cond, then_: label(fa, &then_, 1, &mut a.errs), else_: label(fa, &else_, 2, &mut a.errs) }
        }
    };
    // Destinations of single-result instructions beyond the first are reported by
    // `expect_dsts`; still number them so later diagnostics stay consistent.
    if !matches!(ins.kind, InstrKind::Call { .. } | InstrKind::OpCall(_) | InstrKind::KernelCall(_)) {
        for d in ins.dsts.iter().skip(1) {
            fa.reg(d, &mut a.errs);
        }
    }
    fa.code.push(instr);
    fa.locs.push(a.lines.loc(ins.span.start));
    if a.want_map {
        fa.map.push(InstrMap { span: ins.span, operands: ops.spans, attrs: attr_spans });
    }
}

fn end_func(a: &mut Asm<'_>, mut fa: FuncAsm<'_>, name: String, header: Span, parts: FuncParts) -> (Function, FuncMap) {
    let FuncParts { params, placements, results, debug_labels } = parts;
    let num_regs = fa.reg_names.len() as u32;
    // The names, copied at their exact size; the buffer goes back for the next function.
    let reg_names = fa.reg_names.clone();
    fa.reg_names.clear();
    a.reg_names = fa.reg_names;
    a.reg_table = fa.regs;
    let func = Function {
        name,
        params,
        placements,
        results,
        num_regs,
        code: fa.code,
        args: fa.args,
        debug: FuncDebug { reg_names, labels: debug_labels, locs: fa.locs },
    };
    (func, FuncMap { header, instrs: fa.map })
}

/// A function assembled a piece of its body at a time ([`begin_stream`], [`stream_body`],
/// [`end_stream`]), for a function too long for the parser's token window: its tokens and
/// parse tree are never all in memory. Only for valid code: at anything the whole-function
/// path ([`assemble_func`]) would report (a duplicate label, a label at the end, a branch
/// to an unknown label, or any diagnostic), the caller assembles the whole file instead,
/// which gives the diagnostics.
pub(super) struct StreamFunc<'s> {
    fa: FuncAsm<'s>,
    name: String,
    header: Span,
    parts: FuncParts,
    label_spans: FastMap<&'s str, Span>,
    /// The last body item was a label.
    label_last: bool,
}

/// Starts assembling the function `f`, whose body is empty: [`stream_body`] feeds it.
pub(super) fn begin_stream<'s>(a: &mut Asm<'_>, fi: usize, f: &FuncDecl<'_>) -> StreamFunc<'s> {
    let (mut fa, params, placements, results) = begin_func(a, fi, f);
    fa.forward = Some(Vec::new());
    StreamFunc {
        fa,
        name: f.name.text.to_string(),
        header: f.header_span,
        parts: FuncParts { params, placements, results, debug_labels: Vec::new() },
        label_spans: FastMap::default(),
        label_last: false,
    }
}

/// Assembles the next items of the body; `false` when the whole-function path must
/// assemble it instead (a duplicate label). Labels are named by their text in `src`.
pub(super) fn stream_body<'s>(
    a: &mut Asm<'_>,
    sf: &mut StreamFunc<'s>,
    fi: usize,
    src: &'s str,
    items: &[BodyItem<'_>],
) -> bool {
    for item in items {
        match item {
            BodyItem::Label(l) => {
                let Some(key) = src.get(l.span.range()).filter(|k| *k == l.text) else { return false };
                if sf.label_spans.insert(key, l.span).is_some() {
                    return false;
                }
                let pc = sf.fa.code.len() as u32;
                sf.fa.labels.insert(key, pc);
                if sf.parts.debug_labels.last().is_none_or(|(p, _)| *p != pc) {
                    sf.parts.debug_labels.push((pc, l.text.to_string()));
                }
                sf.label_last = true;
            }
            BodyItem::Instr(ins) => {
                sf.label_last = false;
                assemble_instr(a, &mut sf.fa, fi, &sf.parts.results, ins);
            }
        }
    }
    true
}

/// The function, its forward branches patched; `None` when the whole-function path must
/// assemble it instead (a label at the end of the body, a branch to an unknown label).
pub(super) fn end_stream(a: &mut Asm<'_>, mut sf: StreamFunc<'_>) -> Option<Function> {
    if sf.label_last {
        return None;
    }
    for (pc, slot, name) in sf.fa.forward.take().unwrap_or_default() {
        let target = Label(*sf.fa.labels.get(name.as_str())?);
        match (sf.fa.code.get_mut(pc as usize)?, slot) {
            (Instr::Br { target: t }, 0) | (Instr::BrIf { then_: t, .. }, 1) | (Instr::BrIf { else_: t, .. }, 2) => {
                *t = target
            }
            _ => return None,
        }
    }
    Some(end_func(a, sf.fa, sf.name, sf.header, sf.parts).0)
}

/// The placements written in a function header (`%x: f32[1, 4] in %arena at 4096`):
/// `in` names another parameter, of type `storage`; the placed parameter is a tensor whose
/// dimensions are all known; the offset is a `u64` and the tensor ends within `u64` bytes.
pub(super) fn placements(f: &FuncDecl<'_>, params: &[Type], errs: &mut Vec<Diagnostic>) -> Vec<Placement> {
    let mut out = Vec::new();
    for (pi, p) in f.params.iter().enumerate() {
        let Some(pl) = p.placement else { continue };
        let storage = pl.storage;
        let mut ok = true;

        let si = f.params.iter().position(|q| q.name.text == storage.text);
        match si {
            None => {
                let storages: Vec<&str> =
                    f.params.iter().filter(|q| matches!(q.ty.kind, TypeKind::Storage)).map(|q| q.name.text).collect();
                let mut d = Diagnostic::new(
                    storage.span,
                    format!("`%{}` is not a parameter of `@{}`", storage.text, f.name.text),
                )
                .with_label("not a parameter")
                .with_note("`in` names the parameter of type `storage` that holds the placed tensor");
                d = match (did_you_mean("%", &close_names(storage.text, storages.iter().copied())), storages.as_slice())
                {
                    (Some(s), _) => d.with_note(s),
                    (None, []) => d.with_note(format!("add a parameter `%{}: storage`", storage.text)),
                    (None, some) => d.with_note(format!(
                        "the storage parameters are {}",
                        some.iter().map(|n| format!("`%{n}`")).collect::<Vec<_>>().join(", ")
                    )),
                };
                errs.push(d);
                ok = false;
            }
            Some(si) => {
                let q = &f.params[si];
                if !matches!(q.ty.kind, TypeKind::Storage) {
                    let ty = params.get(si).map_or_else(|| "?".to_string(), |t| t.to_string());
                    errs.push(
                        Diagnostic::new(storage.span, format!("`%{}` is not a storage", storage.text))
                            .with_label(format!("`%{}` is a parameter of type `{ty}`", storage.text))
                            .with_secondary(q.ty.span, "declared here")
                            .with_note("`in` names the parameter of type `storage` that holds the placed tensor"),
                    );
                    ok = false;
                }
            }
        }

        match p.ty.kind {
            TypeKind::Tensor { dims, .. } => {
                if let Some(s) = dims.iter().find_map(|d| match d {
                    DimExpr::Any(s) => Some(*s),
                    DimExpr::Sym(n) => Some(n.span),
                    DimExpr::Known(_) => None,
                }) {
                    errs.push(
                        Diagnostic::new(s, "a placed parameter's dimensions must be known")
                            .with_label("`?` is not allowed here")
                            .with_secondary(pl.span, "placed here")
                            .with_note(format!(
                                "`%{}` occupies a fixed byte range of `%{}`: write every dimension, e.g. `f32[1, 3, 4, 4]`",
                                p.name.text, storage.text
                            )),
                    );
                    ok = false;
                }
            }
            _ => {
                let ty = params.get(pi).map_or_else(|| "?".to_string(), |t| t.to_string());
                errs.push(
                    Diagnostic::new(p.ty.span, "only a tensor with known dimensions can be placed")
                        .with_label(format!("`{ty}` is not a tensor type with known dimensions"))
                        .with_secondary(pl.span, "placed here")
                        .with_note(format!(
                            "write the tensor's full type, e.g. `%{}: f32[1, 3, 4, 4] in %{} at 0`",
                            p.name.text, storage.text
                        )),
                );
                ok = false;
            }
        }

        let offset = match pl.offset.value.and_then(|v| u64::try_from(v).ok()) {
            Some(v) => Some(v),
            None => {
                let negative = pl.offset.value.is_some_and(|v| v < 0);
                errs.push(
                    Diagnostic::new(pl.offset.span, "placement offset out of range")
                        .with_label(if negative { "negative" } else { "too large" })
                        .with_note(format!("an offset is a number of bytes in 0 ..= {}", u64::MAX)),
                );
                None
            }
        };

        // The tensor's bytes must end within u64 (the verifier checks this too). A dimension
        // that is not a valid i64 has been reported (and made `?`) by `Asm::ty`.
        if let (Some(offset), Some(t @ Type::Tensor { .. }), true) = (offset, params.get(pi), ok) {
            if let Some((dtype, shape)) = t.known_shape() {
                let bytes = rxvm_vm::types::dense_bytes(dtype, &shape);
                if bytes.and_then(|b| offset.checked_add(b)).is_none() {
                    errs.push(
                        Diagnostic::new(pl.span, format!("`%{}` would end past the largest byte offset", p.name.text))
                            .with_label(format!("offset {offset} plus the size of {t} overflows 64 bits")),
                    );
                    ok = false;
                }
            } else {
                ok = false;
            }
        }

        if let (true, Some(si), Some(offset)) = (ok, si, offset) {
            out.push(Placement { param: pi as u32, storage: si as u32, offset });
        }
    }
    out
}

pub(super) fn unknown_builtin(callee: &Name<'_>) -> Diagnostic {
    let bname = callee.text.strip_prefix("vm.").unwrap_or(callee.text);
    let mut d = Diagnostic::new(callee.span, format!("unknown builtin `@{}`", callee.text))
        .with_label("no builtin of this name");
    match did_you_mean("@vm.", &close_names(bname, BUILTINS.iter().map(|b| b.name))) {
        Some(s) => d = d.with_note(s),
        None => {
            d = d.with_note(format!(
                "the builtins are {}",
                BUILTINS.iter().map(|b| format!("@vm.{}", b.name)).collect::<Vec<_>>().join(", ")
            ))
        }
    }
    d
}

pub(super) fn unknown_operator(op: &Name<'_>) -> Diagnostic {
    let name = op.text.strip_prefix("onnx.").unwrap_or(op.text);
    let d = Diagnostic::new(op.span, format!("unknown operator `@{}`", op.text)).with_label("no operator of this name");
    let names = || OPS.iter().map(|o| o.name);
    // A difference in case only is the likeliest mistake (`relu` for `Relu`).
    let close = match names().find(|n| n.eq_ignore_ascii_case(name)) {
        Some(n) => vec![n],
        None => close_names(name, names()),
    };
    match did_you_mean("@onnx.", &close) {
        Some(s) => d.with_note(s),
        None if OPS.len() <= 24 => d.with_note(format!(
            "the operators are {}",
            names().map(|n| format!("@onnx.{n}")).collect::<Vec<_>>().join(", ")
        )),
        None => d.with_note(format!("docs/operators.md lists the {} operators", OPS.len())),
    }
}

/// `%y = call @onnx.Relu(%x)`: operators write into tensors the program passes after `->`.
/// `%y = call @onnx.X(...) -> (%z)`: both forms of an operator call at once.
pub(super) fn op_call_dsts_and_outputs(ins: &InstrNode<'_>) -> Diagnostic {
    let span = ins.dsts[0].span.to(ins.dsts[ins.dsts.len() - 1].span);
    let dsts: Vec<String> = ins.dsts.iter().map(|n| format!("%{}", n.text)).collect();
    Diagnostic::new(span, "an operator call assigns its outputs or writes into views, not both")
        .with_label("the VM would allocate these")
        .with_note(
            "`%y = call @onnx.X(...)` allocates the outputs at run time; `call @onnx.X(...) -> (%y)` \
             writes into views the program allocated",
        )
        .with_note(format!("write the call without `{} =`, or without `-> (...)`", dsts.join(", ")))
}

pub(super) fn unknown_kernel<'n>(kernel: &Name<'_>, declared: impl Iterator<Item = &'n str>) -> Diagnostic {
    let name = kernel.text.strip_prefix("cl.").unwrap_or(kernel.text);
    let d =
        Diagnostic::new(kernel.span, format!("unknown kernel `@{}`", kernel.text)).with_label("no kernel of this name");
    let declared: Vec<&str> = declared.collect();
    match did_you_mean("@cl.", &close_names(name, declared.iter().copied())) {
        Some(s) => d.with_note(s),
        None if declared.is_empty() => {
            d.with_note(format!("declare it first: `kernel @{name} = opencl(\"{name}\", file(\"{name}.cl\"))`"))
        }
        None => d.with_note("kernels are declared with `kernel @name = opencl(\"entry\", source)`"),
    }
}

/// `%r = call @cl.k(...)`: kernels write into the tensors passed as arguments.
pub(super) fn kernel_call_dsts(ins: &InstrNode<'_>) -> Diagnostic {
    let span = ins.dsts[0].span.to(ins.dsts[ins.dsts.len() - 1].span);
    let dsts: Vec<String> = ins.dsts.iter().map(|n| format!("%{}", n.text)).collect();
    Diagnostic::new(span, "a kernel call has no destinations")
        .with_label("remove this")
        .with_note("kernels write into the tensors passed as arguments")
        .with_note(format!("write the call without `{} =`", dsts.join(", ")))
}

/// The target `n` of a branch (`slot` 0 for `br`, 1 and 2 for `br_if`'s then and else);
/// when the body is assembled a piece at a time, a label not defined yet is a forward
/// branch, patched at the end.
pub(super) fn label(fa: &mut FuncAsm<'_>, n: &Name<'_>, slot: u8, errs: &mut Vec<Diagnostic>) -> Label {
    match fa.labels.get(n.text) {
        Some(&pc) => Label(pc),
        None if fa.forward.is_some() => {
            let pc = fa.code.len() as u32;
            if let Some(f) = &mut fa.forward {
                f.push((pc, slot, n.text.to_string()));
            }
            Label(0)
        }
        None => {
            let mut d = Diagnostic::new(n.span, format!("unknown label `{}`", n.text))
                .with_label("no such label in this function");
            if let Some(s) = did_you_mean("", &close_names(n.text, fa.labels.keys().copied())) {
                d = d.with_note(s);
            }
            errs.push(d);
            Label(0)
        }
    }
}

/// Encodes an operand; `float` converts integer literals to float literals.
pub(super) fn operand(a: &mut Asm<'_>, fa: &mut FuncAsm<'_>, op: &Operand<'_>, float: bool) -> Arg {
    match op {
        Operand::Reg(n) => {
            let r = fa.reg(n, &mut a.errs);
            Arg::reg(r)
        }
        Operand::Int(i) if float => match i.value {
            Some(v) => a.literal(Literal::Float(v as f64), i.span),
            None => {
                a.err(int_out_of_range(i.span, "a float"));
                Arg::lit(0)
            }
        },
        Operand::Int(i) => a.int_arg(i),
        Operand::Float(f) => a.float_arg(f),
        Operand::Const(n) => {
            let c = a.const_ref(n);
            Arg::konst(c)
        }
        Operand::None(_) => Arg::NONE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The diagnostics of a function header `func @f(PARAMS) {`: (message, spanned text).
    fn header_errors(params: &str) -> Vec<(String, String)> {
        let src = format!("func @f({params}) {{\n  ret\n}}\n");
        match crate::assemble_unverified(&src, "t.rxa") {
            Ok(m) => panic!("assembled: {:?}", m.funcs[FuncId(0)].placements),
            Err(d) => d.items().iter().map(|i| (i.message.clone(), src[i.span.clone()].to_string())).collect(),
        }
    }

    #[test]
    fn placements() {
        let src = "func @f(%x: f32[1, 4] in %a at 64, %a: storage, %y: i8[3] in %a at 0x80) {\n  ret\n}\n";
        let m = crate::assemble(src, "t.rxa").unwrap_or_else(|d| panic!("{}", d.render()));
        assert_eq!(
            m.funcs[FuncId(0)].placements,
            vec![Placement { param: 0, storage: 1, offset: 64 }, Placement { param: 2, storage: 1, offset: 128 }]
        );

        let e = |m: &str, t: &str| vec![(m.to_string(), t.to_string())];
        assert_eq!(header_errors("%x: f32[4] in %b at 0, %a: storage"), e("`%b` is not a parameter of `@f`", "%b"));
        assert_eq!(header_errors("%x: f32[4] in %x at 0"), e("`%x` is not a storage", "%x"));
        assert_eq!(header_errors("%x: f32[4] in %n at 0, %n: int"), e("`%n` is not a storage", "%n"));
        assert_eq!(
            header_errors("%x: tensor in %a at 0, %a: storage"),
            e("only a tensor with known dimensions can be placed", "tensor")
        );
        assert_eq!(
            header_errors("%x: float in %a at 0, %a: storage"),
            e("only a tensor with known dimensions can be placed", "float")
        );
        assert_eq!(
            header_errors("%x: f32[2, ?] in %a at 0, %a: storage"),
            e("a placed parameter's dimensions must be known", "?")
        );
        assert_eq!(header_errors("%x: f32[4] in %a at -8, %a: storage"), e("placement offset out of range", "-8"));
        assert_eq!(
            header_errors("%x: f32[4] in %a at 18446744073709551616, %a: storage"),
            e("placement offset out of range", "18446744073709551616")
        );
        assert_eq!(
            header_errors("%x: f32[4] in %a at 18446744073709551600, %a: storage"),
            e("`%x` would end past the largest byte offset", "in %a at 18446744073709551600")
        );
        // Several problems in one placement are all reported.
        assert_eq!(header_errors("%x: tensor in %n at -1, %n: int").len(), 3, "storage type, placed type and offset");
    }

    #[test]
    fn register_table_collisions() {
        let mut fa = FuncAsm {
            regs: FastMap::default(),
            collided: false,
            reg_names: NameList::new(),
            labels: FastMap::default(),
            code: Vec::new(),
            args: Vec::new(),
            locs: Vec::new(),
            map: Vec::new(),
            too_many_regs: false,
            forward: None,
        };
        let mut errs = Vec::new();
        let name = |text| Name { text, span: Span::default() };
        assert_eq!(fa.reg(&name("a"), &mut errs), Reg(0));
        // As if "b" had the hash of "a": its slot is taken.
        fa.regs.insert(name_hash("b"), 0);
        assert_eq!(fa.reg(&name("b"), &mut errs), Reg(1));
        assert!(fa.collided);
        assert_eq!(fa.reg(&name("b"), &mut errs), Reg(1));
        assert_eq!(fa.reg(&name("a"), &mut errs), Reg(0));
        assert_eq!(fa.reg(&name("c"), &mut errs), Reg(2));
        assert_eq!(fa.reg_names.iter().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert!(errs.is_empty());
    }
}
