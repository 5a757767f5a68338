//! The bytecode verifier. Every module is verified on load: the loader treats `.rxb` as
//! untrusted, so the interpreter can rely on what is proven here (indices in range, operand
//! kinds, arity, definitions before use on every path, no use after `kill` on any path) and
//! only checks at run time what depends on values (dynamic sizes, bounds, alignment).
//!
//! Passes per function, after its parameter placements (each a tensor parameter of known
//! shape in a `storage` parameter): (1) structure and index ranges, (2) one static kind per
//! register, (3) a forward dataflow over basic blocks of "definitely defined" and "maybe
//! killed" register sets, (4) constant-size views against constant-size storages.

use crate::builtins::Builtin;
use crate::bytecode::{Arg, ArgKind, FuncId, Instr, OpId, Reg};
use crate::host_tensor::HostTensor;
use crate::module::{ConstData, Function, Literal, Module};
use crate::ops::{TensorInfo, OPS};
use crate::types::{DType, ImageLayout, Kind, Scope, Type};
use std::collections::HashSet;

/// Why a module was refused: which function and instruction, and which operand (numbered
/// in the order the operands are written in assembly text, destinations first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    pub func: Option<FuncId>,
    pub pc: Option<usize>,
    pub operand: Option<usize>,
    pub message: String,
    pub notes: Vec<String>,
    /// Where, for readers without the source: `@main, instruction 3 (line 4, column 3)`.
    pub context: Option<String>,
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        if let Some(c) = &self.context {
            write!(f, "\n  --> {c}")?;
        }
        for n in &self.notes {
            write!(f, "\n  note: {n}")?;
        }
        Ok(())
    }
}

impl std::error::Error for VerifyError {}

/// Verifies a whole module; returns the first error found.
pub fn verify_module(m: &Module) -> Result<(), VerifyError> {
    let module_err =
        |message: String| VerifyError { func: None, pc: None, operand: None, message, notes: vec![], context: None };
    let mut names = HashSet::new();
    for c in &m.consts {
        if !names.insert(c.name.as_str()) {
            return Err(module_err(format!("constant @{} is defined twice", c.name)));
        }
        let need = c.numel().and_then(|n| n.checked_mul(c.dtype.size() as u64));
        match (&c.data, need) {
            (_, None) => return Err(module_err(format!("constant @{} has too many elements", c.name))),
            (ConstData::Bytes(b), Some(n)) if b.len() as u64 != n => {
                return Err(module_err(format!(
                    "constant @{} needs {n} bytes for {}{:?}, found {}",
                    c.name,
                    c.dtype,
                    c.shape,
                    b.len()
                )))
            }
            _ => {}
        }
    }
    let mut names = HashSet::new();
    for k in &m.kernels {
        if !names.insert(k.name.as_str()) {
            return Err(module_err(format!("kernel @cl.{} is declared twice", k.name)));
        }
        if k.entry.is_empty() || k.source.contains('\0') {
            return Err(module_err(format!(
                "kernel @cl.{} needs an entry name and a source without NUL bytes",
                k.name
            )));
        }
    }
    let mut names = HashSet::new();
    for (i, f) in m.funcs.iter().enumerate() {
        if !names.insert(f.name.as_str()) {
            return Err(VerifyError {
                func: Some(FuncId(i as u32)),
                ..module_err(format!("function @{} is defined twice", f.name))
            });
        }
    }
    // The values of integer constants (shape-like operator inputs), built once, on first need.
    let const_values = std::cell::OnceCell::new();
    for i in 0..m.funcs.len() {
        FuncVerifier::new(m, FuncId(i as u32), &const_values).run()?;
    }
    Ok(())
}

/// A fixed-size set of registers.
#[derive(Clone, PartialEq, Eq)]
struct RegSet(Vec<u64>);

impl RegSet {
    fn new(n: usize, full: bool) -> RegSet {
        RegSet(vec![if full { u64::MAX } else { 0 }; n.div_ceil(64)])
    }
    fn has(&self, r: u32) -> bool {
        self.0[(r / 64) as usize] & (1 << (r % 64)) != 0
    }
    fn set(&mut self, r: u32, on: bool) {
        let w = &mut self.0[(r / 64) as usize];
        if on {
            *w |= 1 << (r % 64)
        } else {
            *w &= !(1 << (r % 64))
        }
    }
    /// `self &= o`; true when `self` changed.
    fn intersect(&mut self, o: &RegSet) -> bool {
        let mut changed = false;
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            let n = *a & *b;
            changed |= n != *a;
            *a = n;
        }
        changed
    }
    /// `self |= o`; true when `self` changed.
    fn union(&mut self, o: &RegSet) -> bool {
        let mut changed = false;
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            let n = *a | *b;
            changed |= n != *a;
            *a = n;
        }
        changed
    }
}

/// Dataflow facts at a program point.
#[derive(Clone, PartialEq, Eq)]
struct State {
    defined: RegSet,
    killed: RegSet,
}

/// The registers an instruction defines (most define at most one).
type Defs = smallvec::SmallVec<[(Reg, Option<Kind>); 2]>;

/// How an instruction touches a register, in text operand order.
#[derive(Clone, Copy)]
enum Access {
    Def(Reg),
    Use(Reg),
    Kill(Reg),
}

struct FuncVerifier<'m> {
    m: &'m Module,
    id: FuncId,
    f: &'m Function,
    kinds: Vec<Option<Kind>>,
    /// Where each register's kind was first fixed, for the "conflicting kinds" note.
    kind_site: Vec<usize>,
    /// Module-wide: the value of each integer constant (see `check_static_ops`).
    const_values: &'m std::cell::OnceCell<Vec<Option<HostTensor>>>,
}

type VResult<T> = Result<T, VerifyError>;

impl<'m> FuncVerifier<'m> {
    fn new(m: &'m Module, id: FuncId, const_values: &'m std::cell::OnceCell<Vec<Option<HostTensor>>>) -> Self {
        let f = &m.funcs[id.0 as usize];
        FuncVerifier { m, id, f, kinds: Vec::new(), kind_site: Vec::new(), const_values }
    }

    fn err(&self, pc: Option<usize>, operand: Option<usize>, message: String) -> VerifyError {
        let mut context = format!("in @{}", self.f.name);
        if let Some(pc) = pc {
            context.push_str(&format!(", instruction {pc}"));
            let l = self.f.loc(pc);
            if l.line > 0 {
                context.push_str(&format!(" (line {}, column {})", l.line, l.col));
            }
        }
        VerifyError { func: Some(self.id), pc, operand, message, notes: Vec::new(), context: Some(context) }
    }

    fn at<T>(&self, pc: usize, operand: Option<usize>, message: String) -> VResult<T> {
        Err(self.err(Some(pc), operand, message))
    }

    fn rn(&self, r: Reg) -> String {
        format!("%{}", self.f.reg_name(r))
    }

    fn line_note(&self, pc: usize) -> String {
        let l = self.f.loc(pc);
        if l.line > 0 {
            format!("line {}", l.line)
        } else {
            format!("instruction {pc}")
        }
    }

    fn run(mut self) -> VResult<()> {
        let f = self.f;
        if (f.num_regs as usize) < f.params.len() {
            return Err(self.err(
                None,
                None,
                format!("@{} has {} parameters but only {} registers", f.name, f.params.len(), f.num_regs),
            ));
        }
        if f.num_regs > Arg::MAX_INDEX {
            return Err(self.err(
                None,
                None,
                format!(
                    "@{} has {} registers, more than the {} an operand can address",
                    f.name,
                    f.num_regs,
                    Arg::MAX_INDEX
                ),
            ));
        }
        // Every register beyond the parameters is named by some operand, so a larger count is
        // corrupt (and would make the verifier and the interpreter allocate for nothing).
        let reachable = f.params.len() as u64 + 3 * f.code.len() as u64 + f.args.len() as u64;
        if f.num_regs as u64 > reachable {
            return Err(self.err(
                None,
                None,
                format!("@{} declares {} registers, but its code can name at most {reachable}", f.name, f.num_regs),
            ));
        }
        self.check_placements()?;
        let Some(last) = f.code.last() else {
            return Err(self.err(
                None,
                None,
                format!("@{} has no instructions; a function must end with `ret`", f.name),
            ));
        };
        if !last.is_terminator() {
            return self.at(
                f.code.len() - 1,
                None,
                format!(
                    "@{} can run past its last instruction: expected `ret`, `br` or `br_if` at the end, found `{}`",
                    f.name,
                    last.opcode().mnemonic()
                ),
            );
        }
        for pc in 0..f.code.len() {
            self.check_indices(pc)?;
        }
        self.infer_kinds()?;
        for pc in 0..f.code.len() {
            self.check_kinds(pc)?;
        }
        self.dataflow()?;
        self.check_constant_views()?;
        self.check_static_ops()
    }

    /// Each placement puts a distinct tensor parameter with a fully known shape in another
    /// parameter of type `storage`, and its bytes end within `u64`.
    fn check_placements(&self) -> VResult<()> {
        let f = self.f;
        let np = f.params.len();
        let pname = |i: u32| format!("%{}", f.reg_name(Reg(i)));
        let header_err = |message: String| Err(self.err(None, None, message));
        for (k, p) in f.placements.iter().enumerate() {
            let Some(ty) = f.params.get(p.param as usize) else {
                return header_err(format!("@{} places parameter {}, but it has {np} parameters", f.name, p.param));
            };
            let x = pname(p.param);
            let Some(sty) = f.params.get(p.storage as usize) else {
                return header_err(format!(
                    "@{} places {x} in parameter {}, but it has {np} parameters",
                    f.name, p.storage
                ));
            };
            if f.placements[..k].iter().any(|q| q.param == p.param) {
                return header_err(format!(
                    "@{} places parameter {x} twice; a parameter has at most one placement",
                    f.name
                ));
            }
            if p.storage == p.param {
                return header_err(format!("@{} places parameter {x} in itself", f.name));
            }
            let s = pname(p.storage);
            if *sty != Type::Storage {
                return header_err(format!(
                    "@{} places {x} in {s}, a parameter of type {sty}; a placement's storage must be a parameter of type storage",
                    f.name
                ));
            }
            let Some((dtype, dims)) = ty.known_shape() else {
                return header_err(format!(
                    "@{} places {x} of type {ty} in {s}; a placed parameter must be a tensor with every dimension known (e.g. f32[1, 3, 4, 4])",
                    f.name
                ));
            };
            match crate::types::dense_bytes(dtype, &dims) {
                None => {
                    return header_err(format!(
                        "@{} places {x} of type {ty} in {s}, but its size overflows u64",
                        f.name
                    ))
                }
                Some(b) if p.offset.checked_add(b).is_none() => {
                    return header_err(format!(
                    "@{} places {x} ({ty}, {b} bytes) at offset {} in {s}: its end is past the largest u64 byte offset",
                    f.name, p.offset
                ))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------ pass 1: indices

    fn list(&self, pc: usize, start: u32, len: usize) -> VResult<&'m [Arg]> {
        match self.f.arg_slice(start, len) {
            Some(s) => Ok(s),
            None => self.at(
                pc,
                None,
                format!(
                    "operand list {start}..{} is outside the function's {} arguments",
                    start as usize + len,
                    self.f.args.len()
                ),
            ),
        }
    }

    fn check_reg(&self, pc: usize, op: usize, r: Reg) -> VResult<()> {
        if r.0 >= self.f.num_regs {
            return self.at(
                pc,
                Some(op),
                format!("register r{} is out of range: the function has {} registers", r.0, self.f.num_regs),
            );
        }
        Ok(())
    }

    fn check_arg(&self, pc: usize, op: usize, a: Arg) -> VResult<()> {
        match a.kind() {
            ArgKind::Reg(r) => self.check_reg(pc, op, r),
            ArgKind::Imm(_) => Ok(()),
            ArgKind::Lit(i) if (i as usize) < self.m.literals.len() => Ok(()),
            ArgKind::Lit(i) => self.at(
                pc,
                Some(op),
                format!("literal {i} is out of range: the module has {} literals", self.m.literals.len()),
            ),
            ArgKind::Const(c) if (c.0 as usize) < self.m.consts.len() => Ok(()),
            ArgKind::Const(c) => self.at(
                pc,
                Some(op),
                format!("constant {} is out of range: the module has {} constants", c.0, self.m.consts.len()),
            ),
            ArgKind::None => self.at(pc, Some(op), "`none` is only allowed as an omitted operator input".into()),
        }
    }

    /// An operator call: arities, attribute set and attributes, inputs and outputs.
    fn check_op_call(&self, pc: usize, op: OpId, list: u32, attrs: u32, nout: u8, nin: u16) -> VResult<()> {
        let Some(def) = OpId::get(op.0) else {
            return self.at(pc, None, format!("operator {} does not exist: there are {} operators", op.0, OPS.len()));
        };
        let items = self.list(pc, list, nin as usize + nout as usize)?;
        let (nin, nout) = (nin as usize, nout as usize);
        if nin < def.min_inputs || nin > def.max_inputs {
            return self.at(
                pc,
                None,
                format!(
                    "@onnx.{} takes {}, found {nin}",
                    def.name,
                    range_text(def.min_inputs, def.max_inputs, "input")
                ),
            );
        }
        if nout < def.min_outputs || nout > def.max_outputs {
            return self.at(
                pc,
                None,
                format!(
                    "@onnx.{} produces {}, found {nout}",
                    def.name,
                    range_text(def.min_outputs, def.max_outputs, "output")
                ),
            );
        }
        for (i, a) in items.iter().enumerate() {
            match a.kind() {
                ArgKind::None if i < def.min_inputs => {
                    return self.at(
                        pc,
                        Some(i),
                        format!(
                            "input {} of @onnx.{} is required; `none` marks omitted optional inputs",
                            i + 1,
                            def.name
                        ),
                    );
                }
                ArgKind::None if i >= nin => {
                    return self.at(pc, Some(i), "an operator output must be a tensor register, not `none`".into());
                }
                ArgKind::None => {}
                ArgKind::Reg(_) => self.check_arg(pc, i, *a)?,
                ArgKind::Const(_) if i < nin => self.check_arg(pc, i, *a)?,
                _ if i >= nin => return self.at(pc, Some(i), "an operator output must be a tensor register".into()),
                _ => {
                    return self.at(
                        pc,
                        Some(i),
                        format!("input {} of @onnx.{} must be a tensor register or a constant", i + 1, def.name),
                    )
                }
            }
        }
        if attrs != 0 {
            let Some(set) = self.m.attrs.get(attrs as usize - 1) else {
                return self.at(
                    pc,
                    None,
                    format!("attribute set {} is out of range: the module has {}", attrs - 1, self.m.attrs.len()),
                );
            };
            if let Err(e) = def.check_attrs(set) {
                return self.at(pc, Some(nin + nout), e);
            }
        } else if let Err(e) = def.check_attrs(&crate::ops::Attrs::default()) {
            return self.at(pc, None, e);
        }
        Ok(())
    }

    fn check_indices(&self, pc: usize) -> VResult<()> {
        let f = self.f;
        let nlabels = f.code.len() as u32;
        let label = |op: usize, l: crate::bytecode::Label| -> VResult<()> {
            if l.0 >= nlabels {
                return self.at(
                    pc,
                    Some(op),
                    format!("branch target {} is outside the function's {} instructions", l.0, nlabels),
                );
            }
            Ok(())
        };
        match f.code[pc] {
            Instr::Nop {} => {}
            Instr::Mov { dst, src } => {
                self.check_reg(pc, 0, dst)?;
                self.check_reg(pc, 1, src)?;
            }
            Instr::LoadInt { dst, .. } | Instr::LoadFloat { dst, .. } => self.check_reg(pc, 0, dst)?,
            Instr::LoadConst { dst, konst } => {
                self.check_reg(pc, 0, dst)?;
                if konst.0 as usize >= self.m.consts.len() {
                    return self.at(
                        pc,
                        Some(1),
                        format!(
                            "constant {} is out of range: the module has {} constants",
                            konst.0,
                            self.m.consts.len()
                        ),
                    );
                }
            }
            Instr::MakeShape { dst, dims, ndim } => {
                self.check_reg(pc, 0, dst)?;
                for (i, a) in self.list(pc, dims, ndim as usize)?.iter().enumerate() {
                    self.check_arg(pc, 1 + i, *a)?;
                }
            }
            Instr::AllocStorage { dst, size, align, .. } => {
                self.check_reg(pc, 0, dst)?;
                self.check_arg(pc, 1, size)?;
                self.check_arg(pc, 2, align)?;
            }
            Instr::AllocTensor { dst, storage, args, ndim, .. } => {
                self.check_reg(pc, 0, dst)?;
                self.check_reg(pc, 1, storage)?;
                for (i, a) in self.list(pc, args, ndim as usize + 1)?.iter().enumerate() {
                    self.check_arg(pc, 2 + i, *a)?;
                }
            }
            Instr::Kill { reg } => self.check_reg(pc, 0, reg)?,
            Instr::Call { func, list, ndst, nargs } => {
                let Some(callee) = self.m.func(func) else {
                    return self.at(
                        pc,
                        None,
                        format!("call of function {} but the module has {} functions", func.0, self.m.funcs.len()),
                    );
                };
                self.check_call_list(
                    pc,
                    list,
                    ndst,
                    nargs,
                    &callee.name,
                    callee.params.len(),
                    false,
                    callee.results.len(),
                )?;
            }
            Instr::CallBuiltin { builtin, list, ndst, nargs } => {
                let Some(b) = Builtin::from_id(builtin.0) else {
                    return self.at(
                        pc,
                        None,
                        format!(
                            "call of builtin {} but there are {} builtins",
                            builtin.0,
                            crate::builtins::BUILTINS.len()
                        ),
                    );
                };
                let s = b.sig();
                self.check_call_list(
                    pc,
                    list,
                    ndst,
                    nargs,
                    format_args!("vm.{}", s.name),
                    s.params.len(),
                    s.variadic,
                    s.results.len(),
                )?;
            }
            Instr::Ret { list, nvals } => {
                let vals = self.list(pc, list, nvals as usize)?;
                if vals.len() != f.results.len() {
                    return self.at(
                        pc,
                        None,
                        format!(
                            "`ret` returns {} but @{} declares {}",
                            count(vals.len(), "value"),
                            f.name,
                            count(f.results.len(), "result")
                        ),
                    );
                }
                for (i, a) in vals.iter().enumerate() {
                    self.check_arg(pc, i, *a)?;
                }
            }
            Instr::CallOp { op, list, attrs, nout, nin } => self.check_op_call(pc, op, list, attrs, nout, nin)?,
            Instr::CallKernel { kernel, list, ndims, nargs } => {
                if kernel as usize >= self.m.kernels.len() {
                    return self.at(
                        pc,
                        None,
                        format!(
                            "kernel {kernel} is out of range: the module declares {} kernels",
                            self.m.kernels.len()
                        ),
                    );
                }
                if !(1..=3).contains(&ndims) {
                    return self.at(pc, None, format!("a kernel launch has 1 to 3 global sizes, found {ndims}"));
                }
                for (i, a) in self.list(pc, list, nargs as usize + ndims as usize)?.iter().enumerate() {
                    self.check_arg(pc, i, *a)?;
                }
            }
            Instr::Br { target } => label(0, target)?,
            Instr::BrIf { cond, then_, else_ } => {
                self.check_reg(pc, 0, cond)?;
                label(1, then_)?;
                label(2, else_)?;
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn check_call_list(
        &self,
        pc: usize,
        list: u32,
        ndst: u8,
        nargs: u16,
        name: impl std::fmt::Display,
        nparams: usize,
        variadic: bool,
        nresults: usize,
    ) -> VResult<()> {
        let items = self.list(pc, list, ndst as usize + nargs as usize)?;
        if ndst as usize != nresults {
            return self.at(
                pc,
                None,
                format!(
                    "@{name} returns {} but the call assigns {}",
                    count(nresults, "value"),
                    count(ndst as usize, "register")
                ),
            );
        }
        let arity_ok = if variadic { nargs as usize >= nparams } else { nargs as usize == nparams };
        if !arity_ok {
            return self.at(
                pc,
                None,
                format!(
                    "@{name} takes {}{}, found {nargs}",
                    if variadic { "at least " } else { "" },
                    count(nparams, "argument")
                ),
            );
        }
        for (i, a) in items.iter().enumerate() {
            if i < ndst as usize && !matches!(a.kind(), ArgKind::Reg(_)) {
                return self.at(pc, Some(i), "a call destination must be a register".into());
            }
            self.check_arg(pc, i, *a)?;
        }
        Ok(())
    }

    // ------------------------------------------------------------ pass 2: kinds

    /// Registers the instruction defines, with their kinds (None: same as a source register).
    fn defs(&self, pc: usize) -> Defs {
        let f = self.f;
        let one = |dst: Reg, k: Option<Kind>| -> Defs { smallvec::smallvec![(dst, k)] };
        match f.code[pc] {
            Instr::Mov { dst, .. } => one(dst, None),
            Instr::LoadInt { dst, .. } => one(dst, Some(Kind::Int)),
            Instr::LoadFloat { dst, .. } => one(dst, Some(Kind::Float)),
            Instr::LoadConst { dst, .. } => one(dst, Some(Kind::Tensor)),
            Instr::MakeShape { dst, .. } => one(dst, Some(Kind::Shape)),
            Instr::AllocStorage { dst, .. } => one(dst, Some(Kind::Storage)),
            Instr::AllocTensor { dst, .. } => one(dst, Some(Kind::Tensor)),
            Instr::Call { func, list, ndst, .. } => {
                let callee = &self.m.funcs[func.0 as usize];
                self.call_dsts(list, ndst).zip(callee.results.iter().map(|t| Some(t.kind()))).collect()
            }
            Instr::CallBuiltin { builtin, list, ndst, .. } => {
                let sig = Builtin::ALL[builtin.0 as usize].sig();
                self.call_dsts(list, ndst).zip(sig.results.iter().map(|k| Some(*k))).collect()
            }
            Instr::Nop {}
            | Instr::Kill { .. }
            | Instr::Ret { .. }
            | Instr::Br { .. }
            | Instr::BrIf { .. }
            | Instr::CallOp { .. }
            | Instr::CallKernel { .. } => Defs::new(),
        }
    }

    fn call_dsts(&self, list: u32, ndst: u8) -> impl Iterator<Item = Reg> + '_ {
        self.f.args[list as usize..list as usize + ndst as usize].iter().map(|a| match a.kind() {
            ArgKind::Reg(r) => r,
            _ => unreachable!("checked in pass 1"),
        })
    }

    fn set_kind(&mut self, pc: usize, r: Reg, k: Kind) -> VResult<bool> {
        match self.kinds[r.0 as usize] {
            None => {
                self.kinds[r.0 as usize] = Some(k);
                self.kind_site[r.0 as usize] = pc;
                Ok(true)
            }
            Some(old) if old == k => Ok(false),
            Some(old) => {
                let site = self.kind_site[r.0 as usize];
                let mut e = self.err(
                    Some(pc),
                    Some(0),
                    format!(
                        "register {} would hold {} here, but it holds {} elsewhere: a register keeps one kind",
                        self.rn(r),
                        k.with_article(),
                        old.with_article()
                    ),
                );
                e.notes.push(if site == usize::MAX {
                    format!("{} is {} parameter", self.rn(r), old.with_article())
                } else {
                    format!("{} is first {} at {}", self.rn(r), old.with_article(), self.line_note(site))
                });
                Err(e)
            }
        }
    }

    fn infer_kinds(&mut self) -> VResult<()> {
        let n = self.f.num_regs as usize;
        self.kinds = vec![None; n];
        self.kind_site = vec![usize::MAX; n];
        for (i, t) in self.f.params.iter().enumerate() {
            self.kinds[i] = Some(t.kind());
        }
        // `mov` chains propagate kinds; iterate to a fixpoint (bounded by the register count).
        loop {
            let mut changed = false;
            for pc in 0..self.f.code.len() {
                for (r, k) in self.defs(pc) {
                    let k = match (k, self.f.code[pc]) {
                        (Some(k), _) => Some(k),
                        (None, Instr::Mov { src, .. }) => self.kinds[src.0 as usize],
                        _ => None,
                    };
                    if let Some(k) = k {
                        changed |= self.set_kind(pc, r, k)?;
                    }
                }
            }
            if !changed {
                return Ok(());
            }
        }
    }

    fn arg_kind(&self, a: Arg) -> Option<Kind> {
        match a.kind() {
            ArgKind::Reg(r) => self.kinds[r.0 as usize],
            ArgKind::Imm(_) => Some(Kind::Int),
            ArgKind::Lit(i) => Some(match self.m.literals[i as usize] {
                Literal::Int(_) => Kind::Int,
                Literal::Float(_) => Kind::Float,
            }),
            ArgKind::Const(_) | ArgKind::None => Some(Kind::Tensor),
        }
    }

    /// `role` is only formatted when the check fails (pass `format_args!`, not `format!`).
    fn expect_kind(&self, pc: usize, op: usize, a: Arg, want: Kind, role: impl std::fmt::Display) -> VResult<()> {
        match self.arg_kind(a) {
            Some(k) if k == want => Ok(()),
            Some(k) => {
                let what = match a.kind() {
                    ArgKind::Reg(r) => format!("{} holds {}", self.rn(r), k.with_article()),
                    ArgKind::Const(_) => "found a constant tensor".to_string(),
                    _ => format!("found {} literal", k.with_article()),
                };
                self.at(pc, Some(op), format!("{role} must be {}, but {what}", want.with_article()))
            }
            None => match a.kind() {
                ArgKind::Reg(r) => self.at(pc, Some(op), format!("{} is used but never defined", self.rn(r))),
                _ => unreachable!("literals always have a kind"),
            },
        }
    }

    fn check_kinds(&self, pc: usize) -> VResult<()> {
        let f = self.f;
        let reg = Arg::reg;
        match f.code[pc] {
            Instr::Nop {}
            | Instr::LoadInt { .. }
            | Instr::LoadFloat { .. }
            | Instr::LoadConst { .. }
            | Instr::Br { .. } => {}
            Instr::CallKernel { kernel, list, ndims, nargs } => {
                let name = &self.m.kernels[kernel as usize].name;
                for (i, a) in f.args[list as usize..][..nargs as usize + ndims as usize].iter().enumerate() {
                    if i >= nargs as usize {
                        self.expect_kind(pc, i, *a, Kind::Int, "a global work size")?;
                    } else if !matches!(self.arg_kind(*a), Some(Kind::Tensor | Kind::Int | Kind::Float)) {
                        self.expect_kind(pc, i, *a, Kind::Tensor, format_args!("argument {} of @cl.{name}", i + 1))?;
                    }
                }
            }
            Instr::CallOp { op, list, nout, nin, .. } => {
                let name = OPS[op.0 as usize].name;
                for (i, a) in f.args[list as usize..][..nin as usize + nout as usize].iter().enumerate() {
                    if i < nin as usize {
                        self.expect_kind(pc, i, *a, Kind::Tensor, format_args!("input {} of @onnx.{name}", i + 1))?;
                    } else {
                        let k = i + 1 - nin as usize;
                        self.expect_kind(pc, i, *a, Kind::Tensor, format_args!("output {k} of @onnx.{name}"))?;
                    }
                }
            }
            Instr::Mov { src, .. } => {
                if self.kinds[src.0 as usize].is_none() {
                    return self.at(pc, Some(1), format!("{} is used but never defined", self.rn(src)));
                }
            }
            Instr::MakeShape { dims, ndim, .. } => {
                for (i, a) in f.args[dims as usize..][..ndim as usize].iter().enumerate() {
                    self.expect_kind(pc, 1 + i, *a, Kind::Int, "a shape dimension")?;
                }
            }
            Instr::AllocStorage { size, align, .. } => {
                self.expect_kind(pc, 1, size, Kind::Int, "the storage size")?;
                self.expect_kind(pc, 2, align, Kind::Int, "the alignment")?;
            }
            Instr::AllocTensor { storage, args, ndim, .. } => {
                self.expect_kind(pc, 1, reg(storage), Kind::Storage, "the first operand of `alloc_tensor`")?;
                for (i, a) in f.args[args as usize..][..ndim as usize + 1].iter().enumerate() {
                    let role = if i == 0 { "the view offset" } else { "a view dimension" };
                    self.expect_kind(pc, 2 + i, *a, Kind::Int, role)?;
                }
            }
            Instr::Kill { reg: r } => {
                if self.kinds[r.0 as usize].is_none() {
                    return self.at(pc, Some(0), format!("{} is killed but never defined", self.rn(r)));
                }
            }
            Instr::Call { func, list, ndst, nargs } => {
                let callee = &self.m.funcs[func.0 as usize];
                let args = &f.args[list as usize + ndst as usize..][..nargs as usize];
                for (i, (a, t)) in args.iter().zip(&callee.params).enumerate() {
                    let (op, k) = (ndst as usize + i, t.kind());
                    self.expect_kind(pc, op, *a, k, format_args!("argument {} of @{}", i + 1, callee.name))?;
                }
            }
            Instr::CallBuiltin { builtin, list, ndst, nargs } => {
                let sig = Builtin::ALL[builtin.0 as usize].sig();
                let args = &f.args[list as usize + ndst as usize..][..nargs as usize];
                for (i, a) in args.iter().enumerate() {
                    let op = ndst as usize + i;
                    match sig.params.get(i) {
                        Some(k) => {
                            self.expect_kind(pc, op, *a, *k, format_args!("argument {} of @vm.{}", i + 1, sig.name))?
                        }
                        None => {
                            if self.arg_kind(*a).is_none() {
                                if let ArgKind::Reg(r) = a.kind() {
                                    return self.at(pc, Some(op), format!("{} is used but never defined", self.rn(r)));
                                }
                            }
                        }
                    }
                }
            }
            Instr::Ret { list, nvals } => {
                for (i, (a, t)) in f.args[list as usize..][..nvals as usize].iter().zip(&f.results).enumerate() {
                    self.expect_kind(pc, i, *a, t.kind(), format_args!("result {} of @{}", i + 1, f.name))?;
                }
            }
            Instr::BrIf { cond, .. } => self.expect_kind(pc, 0, reg(cond), Kind::Int, "the branch condition")?,
        }
        Ok(())
    }

    // ------------------------------------------------------------ pass 3: dataflow

    /// Register accesses of an instruction in text operand order (uses before defs, as
    /// they happen at run time).
    fn accesses(&self, pc: usize, out: &mut Vec<(usize, Access)>) {
        out.clear();
        let f = self.f;
        let uses = |first_op: usize, args: &[Arg], out: &mut Vec<(usize, Access)>| {
            for (i, a) in args.iter().enumerate() {
                if let ArgKind::Reg(r) = a.kind() {
                    out.push((first_op + i, Access::Use(r)));
                }
            }
        };
        match f.code[pc] {
            Instr::Nop {} | Instr::Br { .. } => {}
            Instr::Mov { dst, src } => {
                out.push((1, Access::Use(src)));
                out.push((0, Access::Def(dst)));
            }
            Instr::LoadInt { dst, .. } | Instr::LoadFloat { dst, .. } | Instr::LoadConst { dst, .. } => {
                out.push((0, Access::Def(dst)))
            }
            Instr::MakeShape { dst, dims, ndim } => {
                uses(1, &f.args[dims as usize..][..ndim as usize], out);
                out.push((0, Access::Def(dst)));
            }
            Instr::AllocStorage { dst, size, align, .. } => {
                uses(1, &[size, align], out);
                out.push((0, Access::Def(dst)));
            }
            Instr::AllocTensor { dst, storage, args, ndim, .. } => {
                out.push((1, Access::Use(storage)));
                uses(2, &f.args[args as usize..][..ndim as usize + 1], out);
                out.push((0, Access::Def(dst)));
            }
            Instr::Kill { reg } => out.push((0, Access::Kill(reg))),
            Instr::Call { list, ndst, nargs, .. } | Instr::CallBuiltin { list, ndst, nargs, .. } => {
                let items = &f.args[list as usize..][..ndst as usize + nargs as usize];
                uses(ndst as usize, &items[ndst as usize..], out);
                for (i, a) in items[..ndst as usize].iter().enumerate() {
                    if let ArgKind::Reg(r) = a.kind() {
                        out.push((i, Access::Def(r)));
                    }
                }
            }
            Instr::Ret { list, nvals } => uses(0, &f.args[list as usize..][..nvals as usize], out),
            Instr::CallKernel { list, ndims, nargs, .. } => {
                uses(0, &f.args[list as usize..][..nargs as usize + ndims as usize], out)
            }
            Instr::CallOp { list, nout, nin, .. } => {
                uses(0, &f.args[list as usize..][..nin as usize + nout as usize], out)
            }
            Instr::BrIf { cond, .. } => out.push((0, Access::Use(cond))),
        }
    }

    fn successors(&self, pc: usize) -> ([usize; 2], usize) {
        match self.f.code[pc] {
            Instr::Ret { .. } => ([0, 0], 0),
            Instr::Br { target } => ([target.0 as usize, 0], 1),
            Instr::BrIf { then_, else_, .. } => ([then_.0 as usize, else_.0 as usize], 2),
            _ => ([pc + 1, 0], 1),
        }
    }

    /// The most recent `kill` of `r` before `pc` in code order, for the error note.
    fn kill_site(&self, r: Reg, pc: usize) -> Option<usize> {
        let is_kill = |p: &usize| matches!(self.f.code[*p], Instr::Kill { reg } if reg == r);
        (0..pc).rev().find(is_kill).or_else(|| (pc..self.f.code.len()).find(is_kill))
    }

    fn dataflow(&self) -> VResult<()> {
        let f = self.f;
        let n = f.code.len();
        let nregs = f.num_regs as usize;
        // Basic blocks: leaders are 0, branch targets and instructions after terminators.
        let mut leader = vec![false; n];
        leader[0] = true;
        for pc in 0..n {
            let (succ, k) = self.successors(pc);
            if f.code[pc].is_terminator() {
                for s in &succ[..k] {
                    leader[*s] = true;
                }
                if pc + 1 < n {
                    leader[pc + 1] = true;
                }
            }
        }
        let mut block_of = vec![0u32; n];
        let mut starts = Vec::new();
        for pc in 0..n {
            if leader[pc] {
                starts.push(pc);
            }
            block_of[pc] = (starts.len() - 1) as u32;
        }
        let nblocks = starts.len();
        let mut entry: Vec<Option<State>> = vec![None; nblocks];
        let mut init = State { defined: RegSet::new(nregs, false), killed: RegSet::new(nregs, false) };
        for i in 0..f.params.len() {
            init.defined.set(i as u32, true);
        }
        entry[0] = Some(init);
        let mut work = vec![0usize];
        let mut queued = vec![false; nblocks];
        queued[0] = true;
        let mut acc = Vec::new();
        while let Some(b) = work.pop() {
            queued[b] = false;
            let mut st = entry[b].clone().expect("queued blocks have a state");
            let mut pc = starts[b];
            loop {
                self.accesses(pc, &mut acc);
                for &(op, a) in &acc {
                    match a {
                        Access::Use(r) | Access::Kill(r) => {
                            let verb = if matches!(a, Access::Kill(_)) { "killed" } else { "used" };
                            if st.killed.has(r.0) {
                                let message = if matches!(a, Access::Kill(_)) {
                                    format!("{} is killed twice: it is already killed on some path to here", self.rn(r))
                                } else {
                                    format!("{} is used after `kill` on some path to here", self.rn(r))
                                };
                                let mut e = self.err(Some(pc), Some(op), message);
                                if let Some(k) = self.kill_site(r, pc) {
                                    e.notes.push(format!("{} is killed at {}", self.rn(r), self.line_note(k)));
                                }
                                return Err(e);
                            }
                            if !st.defined.has(r.0) {
                                return self.at(
                                    pc,
                                    Some(op),
                                    format!("{} is {verb} before it is defined on some path to here", self.rn(r)),
                                );
                            }
                            if matches!(a, Access::Kill(_)) {
                                st.killed.set(r.0, true);
                            }
                        }
                        Access::Def(r) => {
                            st.defined.set(r.0, true);
                            st.killed.set(r.0, false);
                        }
                    }
                }
                let (succ, k) = self.successors(pc);
                let ends_block = f.code[pc].is_terminator() || (pc + 1 < n && leader[pc + 1]);
                if !ends_block {
                    pc += 1;
                    continue;
                }
                for &s in &succ[..k] {
                    let sb = block_of[s] as usize;
                    let changed = match &mut entry[sb] {
                        slot @ None => {
                            *slot = Some(st.clone());
                            true
                        }
                        Some(e) => {
                            let a = e.defined.intersect(&st.defined);
                            let b = e.killed.union(&st.killed);
                            a || b
                        }
                    };
                    if changed && !queued[sb] {
                        queued[sb] = true;
                        work.push(sb);
                    }
                }
                break;
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------ pass 4: constant views

    fn check_constant_views(&self) -> VResult<()> {
        let f = self.f;
        // Storage registers with exactly one definition, by an alloc_storage of constant size.
        let mut ndefs = vec![0u32; f.num_regs as usize];
        ndefs[..f.params.len()].fill(1);
        for pc in 0..f.code.len() {
            for (r, _) in self.defs(pc) {
                ndefs[r.0 as usize] += 1;
            }
        }
        let mut storage: Vec<Option<(u64, u64, usize)>> = vec![None; f.num_regs as usize];
        for (pc, ins) in f.code.iter().enumerate() {
            match *ins {
                Instr::AllocStorage { dst, size, align, .. } => {
                    let size_v = self.m.const_int(size);
                    if let Some(s) = size_v {
                        if s < 0 {
                            return self.at(pc, Some(1), format!("storage size must be >= 0, found {s}"));
                        }
                    }
                    let align_v = self.m.const_int(align);
                    if let Some(a) = align_v {
                        if a < 0 || (a != 0 && !(a as u64).is_power_of_two()) {
                            return self.at(pc, Some(2), format!("alignment must be a power of two, found {a}"));
                        }
                    }
                    if let (Some(s), Some(a), 1) = (size_v, align_v, ndefs[dst.0 as usize]) {
                        storage[dst.0 as usize] = Some((s as u64, a as u64, pc));
                    }
                }
                Instr::MakeShape { dims, ndim, .. } => {
                    for (i, a) in f.args[dims as usize..][..ndim as usize].iter().enumerate() {
                        if let Some(v) = self.m.const_int(*a) {
                            if v < 0 {
                                return self.at(pc, Some(1 + i), format!("a dimension must be >= 0, found {v}"));
                            }
                        }
                    }
                }
                Instr::AllocTensor { storage: s, args, dtype, scope, ndim, .. } => {
                    let list = &f.args[args as usize..][..ndim as usize + 1];
                    let offset = self.m.const_int(list[0]);
                    if let Some(o) = offset {
                        if o < 0 {
                            return self.at(pc, Some(2), format!("view offset must be >= 0, found {o}"));
                        }
                        if !(o as u64).is_multiple_of(dtype.size() as u64) {
                            return self.at(
                                pc,
                                Some(2),
                                format!(
                                    "view offset {o} is not a multiple of the {dtype} element size ({} bytes)",
                                    dtype.size()
                                ),
                            );
                        }
                    }
                    let mut dims = Vec::with_capacity(ndim as usize);
                    for (i, a) in list[1..].iter().enumerate() {
                        if let Some(v) = self.m.const_int(*a) {
                            if v < 0 {
                                return self.at(pc, Some(3 + i), format!("a dimension must be >= 0, found {v}"));
                            }
                            dims.push(v);
                        }
                    }
                    if (ndim as usize) < scope.min_rank() {
                        return self.at(
                            pc,
                            Some(3 + ndim as usize),
                            format!(
                                "scope \"{scope}\" needs a shape of rank >= {}, found rank {ndim}",
                                scope.min_rank()
                            ),
                        );
                    }
                    if dims.len() != ndim as usize {
                        continue;
                    }
                    let Some(bytes) = min_view_bytes(dtype, scope, &dims)
                        .map_err(|m| self.err(Some(pc), Some(3 + ndim as usize), m))?
                    else {
                        return self.at(pc, None, "the view's size overflows 64 bits".into());
                    };
                    if let (Some(o), Some((ssize, _align, spc))) = (offset, storage[s.0 as usize]) {
                        let end = (o as u64).checked_add(bytes);
                        if end.is_none_or(|e| e > ssize) {
                            let mut e = self.err(Some(pc), Some(2), format!(
                                "view of {bytes} bytes at offset {o} ends at byte {}, past the end of {} ({ssize} bytes)",
                                end.map_or("2^64".into(), |e| e.to_string()),
                                self.rn(s)
                            ));
                            e.notes.push(format!("{} is allocated at {}", self.rn(s), self.line_note(spc)));
                            if scope.is_texture() {
                                e.notes.push("image rows are counted unpadded here; the device's pitch alignment can only add bytes".into());
                            }
                            return Err(e);
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// `1 input`, `1 to 3 inputs`.
fn range_text(min: usize, max: usize, noun: &str) -> String {
    if min == max {
        count(min, noun)
    } else {
        format!("{min} to {max} {noun}s")
    }
}

/// `1 value`, `2 values`.
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

impl FuncVerifier<'_> {
    /// Dtype, shape and scope (unknown for parameters) of registers whose tensor shape is
    /// fixed: parameters with fully known tensor types, and registers defined once by an
    /// `alloc_tensor` with constant dims.
    fn static_shapes(&self) -> Vec<Option<StaticTensor>> {
        let f = self.f;
        let mut ndefs = vec![0u32; f.num_regs as usize];
        ndefs[..f.params.len()].fill(1);
        for pc in 0..f.code.len() {
            for (r, _) in self.defs(pc) {
                ndefs[r.0 as usize] += 1;
            }
        }
        let mut out: Vec<Option<StaticTensor>> = vec![None; f.num_regs as usize];
        for (i, t) in f.params.iter().enumerate() {
            if let Type::Tensor { dtype, dims } = t {
                let known: Option<Vec<i64>> =
                    dims.iter().map(|d| if let crate::types::Dim::Known(v) = d { Some(*v) } else { None }).collect();
                out[i] = known.map(|k| (*dtype, k, None));
            }
        }
        for ins in &f.code {
            if let Instr::AllocTensor { dst, args, dtype, ndim, scope, .. } = *ins {
                if ndefs[dst.0 as usize] != 1 {
                    continue;
                }
                let dims: Option<Vec<i64>> =
                    f.args[args as usize + 1..][..ndim as usize].iter().map(|a| self.m.const_int(*a)).collect();
                out[dst.0 as usize] = dims.map(|d| (dtype, d, Some(scope)));
            }
        }
        out
    }

    /// Operator calls whose operand shapes are all fixed are shape-checked at load time:
    /// shape inference must accept the inputs and attributes, and the output views must have
    /// the inferred dtype and shape. Calls with integer-typed register inputs (shapes, axes,
    /// indices whose values inference may need) are left to the run-time check.
    fn check_static_ops(&self) -> VResult<()> {
        let f = self.f;
        if !f.code.iter().any(|i| matches!(i, Instr::CallOp { .. })) {
            return Ok(());
        }
        let shapes = self.static_shapes();
        let const_values: &[Option<HostTensor>] = self.const_values.get_or_init(|| {
            self.m
                .consts
                .iter()
                .map(|c| match &c.data {
                    // Only integer constants can be shape-like; float weights are not copied.
                    ConstData::Bytes(b) if !c.dtype.is_float() => {
                        HostTensor::new(c.dtype, c.shape.clone(), b.clone()).ok()
                    }
                    _ => None,
                })
                .collect()
        });
        let empty = crate::ops::Attrs::default();
        let mut infos = Vec::new();
        // Per operand: Some(true) for a texture, None when the scope is unknown.
        let mut scopes: Vec<Option<bool>> = Vec::new();
        'calls: for (pc, ins) in f.code.iter().enumerate() {
            let Instr::CallOp { op, list, attrs, nout, nin } = *ins else { continue };
            let def = OPS[op.0 as usize];
            let attrs = if attrs == 0 { &empty } else { &self.m.attrs[attrs as usize - 1] };
            let items = &f.args[list as usize..][..nin as usize + nout as usize];
            infos.clear();
            scopes.clear();
            for a in &items[..nin as usize] {
                infos.push(match a.kind() {
                    ArgKind::None => {
                        scopes.push(Some(false));
                        None
                    }
                    ArgKind::Const(c) => {
                        scopes.push(Some(false));
                        let k = &self.m.consts[c.0 as usize];
                        Some(TensorInfo { dtype: k.dtype, shape: &k.shape, value: const_values[c.0 as usize].as_ref() })
                    }
                    ArgKind::Reg(r) => match &shapes[r.0 as usize] {
                        Some((d, s, scope)) if d.is_float() => {
                            scopes.push(scope.map(Scope::is_texture));
                            Some(TensorInfo { dtype: *d, shape: s, value: None })
                        }
                        _ => continue 'calls,
                    },
                    _ => continue 'calls,
                });
            }
            for a in &items[nin as usize..] {
                scopes.push(match a.kind() {
                    ArgKind::Reg(r) => shapes[r.0 as usize].as_ref().and_then(|t| t.2).map(Scope::is_texture),
                    _ => Some(false),
                });
            }
            // The blocked-texture inference, with operands of unknown scope taken as `unknown`.
            let blocked = |unknown: bool| {
                let is_tex = |s: &Option<bool>| s.unwrap_or(unknown);
                let tin: Vec<bool> = scopes[..nin as usize].iter().map(is_tex).collect();
                let tout: Vec<Option<bool>> = items[nin as usize..]
                    .iter()
                    .zip(&scopes[nin as usize..])
                    .map(|(a, s)| if matches!(a.kind(), ArgKind::None) { None } else { Some(is_tex(s)) })
                    .collect();
                crate::ops::blocked::infer(def, &infos, &tin, &tout, attrs)
            };
            let inferred = if scopes.contains(&Some(true)) {
                if scopes.contains(&None) {
                    continue;
                }
                match blocked(false) {
                    Ok(call) => vec![call.out],
                    Err(e) => return self.at(pc, None, format!("@onnx.{}: {e}", def.name)),
                }
            } else {
                match (def.infer)(&infos, attrs) {
                    Ok(o) => o,
                    // Parameters may be texture views: refused only if no reading fits.
                    Err(_) if scopes.contains(&None) && blocked(true).is_ok() => continue,
                    Err(e) => return self.at(pc, None, format!("@onnx.{}: {e}", def.name)),
                }
            };
            for (i, a) in items[nin as usize..].iter().enumerate() {
                let (ArgKind::Reg(r), Some((dtype, shape))) = (a.kind(), inferred.get(i)) else { continue };
                if let Some((vd, vs, _)) = &shapes[r.0 as usize] {
                    if vd != dtype || vs != shape {
                        return self.at(
                            pc,
                            Some(nin as usize + i),
                            format!(
                                "@onnx.{}: output {} is {dtype}{shape:?} for these inputs and attributes, but {} is {vd}{vs:?}",
                                def.name,
                                i + 1,
                                self.rn(r)
                            ),
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

/// A register's fixed dtype and shape, and its scope when known.
type StaticTensor = (DType, Vec<i64>, Option<Scope>);

/// The fewest bytes a view can take on any device (images counted without row padding).
/// `Ok(None)` on overflow, `Err` when the shape does not fit the scope.
fn min_view_bytes(dtype: DType, scope: Scope, dims: &[i64]) -> Result<Option<u64>, String> {
    if scope.is_texture() {
        if dims.contains(&0) {
            return Ok(Some(0));
        }
        let l = ImageLayout::new(scope, dtype, dims, 1)?;
        return Ok(l.byte_size());
    }
    Ok(dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64)).and_then(|n| n.checked_mul(dtype.size() as u64)))
}

/// True if a declared type admits the tensor shape (for run-time checks at call boundaries).
pub fn type_admits(t: &Type, dtype: DType, shape: &[i64]) -> bool {
    match t {
        Type::AnyTensor => true,
        Type::Tensor { dtype: d, dims } => {
            *d == dtype
                && dims.len() == shape.len()
                && dims.iter().zip(shape).all(|(d, s)| match d {
                    crate::types::Dim::Known(v) => v == s,
                    crate::types::Dim::Any => true,
                })
        }
        _ => false,
    }
}
