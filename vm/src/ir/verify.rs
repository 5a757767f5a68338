//! The bytecode verifier. Every module is verified on load: the loader treats `.rxb` as
//! untrusted, so the interpreter can rely on what is proven here (indices in range, operand
//! kinds, arity, definitions before use on every path, no use after `kill` on any path) and
//! only checks at run time what depends on values (dynamic sizes, bounds, alignment).
//!
//! Passes per function, after its parameter placements (each a tensor parameter of known
//! shape in a `storage` parameter): (1) structure and index ranges, (2) one static kind per
//! register, (3) a forward dataflow over basic blocks of "definitely defined" and "maybe
//! killed" register sets, (4) constant-size views against constant-size storages.

use crate::ir::attrs::Attrs;
use crate::ir::builtins::Builtin;
use crate::ir::bytecode::EntityRef;
use crate::ir::bytecode::{Arg, ArgKind, FuncId, Instr, OpId, Reg};
use crate::ir::host_tensor::HostTensor;
use crate::ir::module::{ConstData, Function, Literal, Module};
use crate::ir::operators::OPS;
use crate::ir::schema::{OutInfo, TensorInfo};
use crate::ir::types::{DType, ImageLayout, Kind, Scope, Type};
use rustc_hash::{FxHashMap, FxHashSet};
use std::cell::RefCell;

/// Why a module was refused: which function and instruction, and which operand (numbered
/// in the order the operands are written in assembly text, destinations first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    pub func: Option<FuncId>,
    pub pc: Option<usize>,
    pub operand: Option<usize>,
    pub message: String,
    pub notes: Vec<String>,
    /// Where, for readers without the source: `@main, instruction 3 (line 4, column 3)`;
    /// [`crate::load_module`] adds the byte offset in the `.rxb` (`, at byte 301`).
    pub context: Option<String>,
    /// The module-level part at fault when it is not an instruction: a constant, kernel,
    /// attribute set or placement (to locate it in a `.rxb`: `binary::FileMap::locate`).
    pub item: Option<Item>,
}

/// A part of a module that is not an instruction, named by its index (`u32`, as in the
/// `.rxb`: it keeps [`VerifyError`] small).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item {
    Const(u32),
    Kernel(u32),
    AttrSet(u32),
    /// The placement at this index of the function's `placements`.
    Placement(u32),
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
    module_checks(m)?;
    let shared = RefCell::new(Shared::default());
    for i in 0..m.funcs.len() {
        FuncVerifier::new(m, FuncId(i as u32), &shared).run()?;
    }
    Ok(())
}

/// The module-wide checks: distinct names, constant sizes, kernel declarations.
fn module_checks(m: &Module) -> Result<(), VerifyError> {
    let item_err = |item: Item, message: String| VerifyError {
        func: None,
        pc: None,
        operand: None,
        message,
        notes: vec![],
        context: None,
        item: Some(item),
    };
    let mut names = FxHashSet::default();
    for (id, c) in m.consts.iter() {
        let module_err = |message: String| item_err(Item::Const(id.as_u32()), message);
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
            (ConstData::Bytes(b), Some(_)) if c.dtype == DType::Bool && b.iter().any(|&x| x > 1) => {
                return Err(module_err(format!("constant @{}: a bool element must be 0 or 1", c.name)))
            }
            (ConstData::Fill(v), Some(_)) => {
                if let Some((lo, hi)) = c.dtype.int_range() {
                    // -0.0 is refused too: it prints as `fill(0)`, which assembles to +0.0,
                    // so the module would not be the one its text describes.
                    if v.fract() != 0.0 || *v < lo as f64 || *v > hi as f64 || v.to_bits() == (-0.0f64).to_bits() {
                        return Err(module_err(format!(
                            "constant @{}: fill value {v} is not an integer in {lo} ..= {hi}, the values of {}",
                            c.name, c.dtype
                        )));
                    }
                }
            }
            _ => {}
        }
        check_name(&c.name, "constant").map_err(module_err)?;
    }
    let mut names = FxHashSet::default();
    for (i, k) in m.kernels.iter().enumerate() {
        let module_err = |message: String| item_err(Item::Kernel(i as u32), message);
        check_name(&k.name, "kernel").map_err(module_err)?;
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
    for (i, set) in m.attrs.iter().enumerate() {
        // Sets are short (a handful of attributes): a quadratic scan beats hashing.
        for (k, (name, _)) in set.0.iter().enumerate() {
            if set.0[..k].iter().any(|(n, _)| n == name) {
                return Err(item_err(Item::AttrSet(i as u32), format!("attribute set {} names `{name}` twice", i + 1)));
            }
        }
    }
    let mut names = FxHashSet::default();
    names.reserve(m.funcs.len());
    for (id, f) in m.funcs.iter() {
        let func_err = |message: String| VerifyError {
            func: Some(id),
            pc: None,
            operand: None,
            message,
            notes: vec![],
            context: Some(format!("in @{}", f.name)),
            item: None,
        };
        if !names.insert(f.name.as_str()) {
            return Err(func_err(format!("function @{} is defined twice", f.name)));
        }
        check_name(&f.name, "function").map_err(func_err)?;
        if let Some(prefix) = ["vm.", "onnx.", "cl."].into_iter().find(|p| f.name.starts_with(p)) {
            return Err(func_err(format!(
                "function name @{} starts with `{prefix}`, which is reserved for builtins, operators and kernels",
                f.name
            )));
        }
        for n in f.debug.reg_names.iter().filter(|n| !n.is_empty()) {
            check_name(n, "register").map_err(func_err)?;
        }
        for (_, l) in &f.debug.labels {
            if !l.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                return Err(func_err(format!("label `{l}` must start with a letter or `_`")));
            }
            check_name(l, "label").map_err(func_err)?;
        }
    }
    Ok(())
}

/// Names print as `@name`, `%name` and `name:`, so they must be what the assembler reads
/// back: letters, digits, `_` and `.` (a module whose names are not would disassemble to
/// text that does not assemble).
fn check_name(name: &str, what: &str) -> Result<(), String> {
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.') {
        return Ok(());
    }
    Err(format!("{what} name {name:?} is not valid: names are one or more ASCII letters, digits, `_` and `.`"))
}

/// What the functions of one module share while they are verified: the operator-check memo
/// and buffers reused from function to function (a module has thousands of small functions,
/// and fresh vectors for each were a sizeable part of the verifier's time).
#[derive(Default)]
struct Shared<'m> {
    memo: OpMemo<'m>,
    /// The value of each integer constant (shape-like operator inputs), made on first need.
    const_values: Vec<Option<HostTensor>>,
    kinds: Vec<Option<Kind>>,
    kind_site: Vec<usize>,
    /// Definitions per register (parameters count as one), from `infer_kinds`.
    ndefs: Vec<u32>,
    flow: FlowBufs,
    storage: Vec<Option<(u64, u64, usize)>>,
    shapes: Vec<Option<StaticTensor>>,
    dims: Vec<i64>,
}

/// The dataflow pass's buffers; the entry states of all blocks live in one vector.
#[derive(Default)]
struct FlowBufs {
    leader: Vec<bool>,
    block_of: Vec<u32>,
    starts: Vec<usize>,
    /// Per block: `defined` then `killed`, `2 * words` words, valid when `has_entry`.
    entry: Vec<u64>,
    has_entry: Vec<bool>,
    queued: Vec<bool>,
    work: Vec<usize>,
    /// The state being propagated: `defined` then `killed`.
    st: Vec<u64>,
}

/// An attribute set compared by content (floats bitwise), so that equal sets written at
/// different call sites share one id.
#[derive(Clone, Copy)]
struct AttrsKey<'m>(&'m Attrs);

impl std::hash::Hash for AttrsKey<'_> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.hash_bits(h)
    }
}

impl PartialEq for AttrsKey<'_> {
    fn eq(&self, o: &Self) -> bool {
        self.0.same_bits(o.0)
    }
}

impl Eq for AttrsKey<'_> {}

/// The attributes of a call without an attribute set.
static NO_ATTRS: Attrs = Attrs(Vec::new());

/// Module-wide memo of operator checks. Attribute validation depends only on the operator
/// and the attributes, and load-time shape inference only on the operator, the attributes,
/// the input types (a constant by identity: its value may be read) and which operands are
/// textures; compiled models repeat the same combinations at many call sites. Only successes
/// are remembered: the first failure ends verification.
#[derive(Default)]
struct OpMemo<'m> {
    /// Content id of attribute set `i` (1-based; 0 = none) at `attr_ids[i]`; `u32::MAX`
    /// until computed.
    attr_ids: Vec<u32>,
    by_content: FxHashMap<AttrsKey<'m>, u32>,
    /// `(operator, attributes id)` pairs whose attributes passed `OpDef::check_attrs`.
    attrs_ok: FxHashSet<(u32, u32)>,
    /// Static shape checks by key (see `check_static_ops`).
    static_ops: FxHashMap<Box<[u64]>, StaticOutcome>,
    key: Vec<u64>,
}

/// A remembered load-time inference.
enum StaticOutcome {
    /// Shapes are left to the run-time check (a parameter's scope is unknown and some
    /// reading of it fits).
    Skip,
    /// The inferred outputs.
    Outputs(Vec<OutInfo>),
}

impl<'m> OpMemo<'m> {
    /// The content id of attribute set `attrs` (1-based; 0 = none), which must exist.
    fn attrs_id(&mut self, m: &'m Module, attrs: u32) -> u32 {
        if self.attr_ids.is_empty() {
            self.attr_ids = vec![u32::MAX; m.attrs.len() + 1];
        }
        let i = attrs as usize;
        if self.attr_ids[i] == u32::MAX {
            let set = if attrs == 0 { &NO_ATTRS } else { &m.attrs[i - 1] };
            let next = self.by_content.len() as u32;
            self.attr_ids[i] = *self.by_content.entry(AttrsKey(set)).or_insert(next);
        }
        self.attr_ids[i]
    }
}

/// The register an instruction other than a call defines, with its kind (None: the same
/// as `mov`'s source).
#[inline]
fn single_def(ins: Instr) -> Option<(Reg, Option<Kind>)> {
    Some(match ins {
        Instr::Mov { dst, .. } => (dst, None),
        Instr::LoadInt { dst, .. } => (dst, Some(Kind::Int)),
        Instr::LoadFloat { dst, .. } => (dst, Some(Kind::Float)),
        Instr::LoadConst { dst, .. } => (dst, Some(Kind::Tensor)),
        Instr::MakeShape { dst, .. } => (dst, Some(Kind::Shape)),
        Instr::AllocStorage { dst, .. } => (dst, Some(Kind::Storage)),
        Instr::AllocTensor { dst, .. } => (dst, Some(Kind::Tensor)),
        _ => return None,
    })
}

/// How an instruction touches a register, in text operand order.
#[derive(Clone, Copy)]
pub(crate) enum Access {
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
    /// Module-wide memo and reusable buffers.
    shared: &'m RefCell<Shared<'m>>,
}

type VResult<T> = Result<T, VerifyError>;

impl<'m> FuncVerifier<'m> {
    fn new(m: &'m Module, id: FuncId, shared: &'m RefCell<Shared<'m>>) -> Self {
        let f = &m.funcs[id];
        let (kinds, kind_site) = {
            let mut sh = shared.borrow_mut();
            (std::mem::take(&mut sh.kinds), std::mem::take(&mut sh.kind_site))
        };
        FuncVerifier { m, id, f, kinds, kind_site, shared }
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
        VerifyError { func: Some(self.id), pc, operand, message, notes: Vec::new(), context: Some(context), item: None }
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
        let r = self.passes();
        let mut sh = self.shared.borrow_mut();
        sh.kinds = std::mem::take(&mut self.kinds);
        sh.kind_site = std::mem::take(&mut self.kind_site);
        r
    }

    fn passes(&mut self) -> VResult<()> {
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
        // Every register in the operand pool, including entries no instruction uses: the
        // disassembler names every register it finds there.
        if let Some(r) = f.args.iter().filter_map(|a| a.as_reg()).find(|r| r.0 >= f.num_regs) {
            return Err(self.err(
                None,
                None,
                format!("@{}'s operand pool names register r{}, but it has {} registers", f.name, r.0, f.num_regs),
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
        // After the indices: it visits every instruction's registers.
        self.check_symbols()?;
        self.infer_kinds()?;
        for pc in 0..f.code.len() {
            self.check_kinds(pc)?;
        }
        self.dataflow()?;
        self.check_constant_views()?;
        self.check_static_ops()
    }

    /// Each symbolic dimension names a register that is not a parameter's, is never
    /// written by an instruction (the entry binds it) and has one bound; a result's
    /// symbols are bound by the parameters.
    fn check_symbols(&self) -> VResult<()> {
        let f = self.f;
        let syms = f.symbols();
        let np = f.params.len();
        let types = f.params.iter().map(|t| (t, "parameter")).chain(f.results.iter().map(|t| (t, "result")));
        for (k, (t, what)) in types.enumerate() {
            for (d, reg, max) in t.symbols() {
                let at = || format!("{what} {} of @{}, dimension {d}", if k < np { k + 1 } else { k - np + 1 }, f.name);
                if reg >= f.num_regs {
                    return Err(self.err(
                        None,
                        None,
                        format!("{}: symbol register r{reg}, but the function has {} registers", at(), f.num_regs),
                    ));
                }
                let name = format!("%{}", f.reg_name(Reg(reg)));
                if (reg as usize) < np {
                    return Err(self.err(
                        None,
                        None,
                        format!(
                            "{}: the symbol {name} is a parameter; a dimension symbol is a register of its own",
                            at()
                        ),
                    ));
                }
                match syms.iter().find(|(r, _)| *r == reg) {
                    None => {
                        return Err(self.err(
                            None,
                            None,
                            format!("{}: the symbol {name} is bound by no parameter", at()),
                        ))
                    }
                    Some((_, m)) if *m != max => {
                        return Err(self.err(
                            None,
                            None,
                            format!("{}: the symbol {name} is declared with two bounds", at()),
                        ))
                    }
                    _ => {}
                }
            }
        }
        if syms.is_empty() {
            return Ok(());
        }
        // One encoding per program: the symbols take the registers right after the
        // parameters', in order of first appearance (as the assembler numbers them).
        for (k, (reg, _)) in syms.iter().enumerate() {
            if *reg as usize != np + k {
                return Err(self.err(
                    None,
                    None,
                    format!(
                        "@{}: symbol {} of the parameter types is register r{reg}; it must be r{} (symbols take the registers after the parameters', in order of first appearance)",
                        f.name,
                        k + 1,
                        np + k
                    ),
                ));
            }
        }
        for pc in 0..f.code.len() {
            self.accesses(pc, &mut |_, a| match a {
                Access::Def(r) if syms.iter().any(|(s, _)| *s == r.0) => self.at(
                    pc,
                    None,
                    format!(
                        "%{} is a dimension symbol of @{}, bound at entry; an instruction cannot redefine it",
                        f.reg_name(r),
                        f.name
                    ),
                ),
                _ => Ok(()),
            })?;
        }
        Ok(())
    }

    /// Each placement puts a distinct tensor parameter with a fully known shape in another
    /// parameter of type `storage`, and its bytes end within `u64`.
    fn check_placements(&self) -> VResult<()> {
        let f = self.f;
        let np = f.params.len();
        let pname = |i: u32| format!("%{}", f.reg_name(Reg(i)));
        for (k, p) in f.placements.iter().enumerate() {
            let header_err = |message: String| {
                Err(VerifyError { item: Some(Item::Placement(k as u32)), ..self.err(None, None, message) })
            };
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
            match crate::ir::types::dense_bytes(dtype, &dims) {
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

    #[inline]
    fn check_arg(&self, pc: usize, op: usize, a: Arg) -> VResult<()> {
        let ok = match a.kind() {
            ArgKind::Reg(r) => r.0 < self.f.num_regs,
            ArgKind::Imm(_) => true,
            ArgKind::Lit(i) => (i as usize) < self.m.literals.len(),
            ArgKind::Const(c) => (c.index()) < self.m.consts.len(),
            ArgKind::None => false,
        };
        if ok {
            return Ok(());
        }
        self.arg_error(pc, op, a)
    }

    #[cold]
    #[inline(never)]
    fn arg_error(&self, pc: usize, op: usize, a: Arg) -> VResult<()> {
        match a.kind() {
            ArgKind::Reg(r) => self.check_reg(pc, op, r),
            ArgKind::Imm(_) => Ok(()),
            ArgKind::Lit(i) if (i as usize) < self.m.literals.len() => Ok(()),
            ArgKind::Lit(i) => self.at(
                pc,
                Some(op),
                format!("literal {i} is out of range: the module has {} literals", self.m.literals.len()),
            ),
            ArgKind::Const(c) if (c.index()) < self.m.consts.len() => Ok(()),
            ArgKind::Const(c) => self.at(
                pc,
                Some(op),
                format!("constant {} is out of range: the module has {} constants", c.0, self.m.consts.len()),
            ),
            ArgKind::None => self.at(pc, Some(op), "`none` is only allowed as an omitted operator input".into()),
        }
    }

    /// An operator call: arities, attribute set and attributes, inputs and outputs.
    /// `call @onnx.Name(inputs) -> (outputs)` (`alloc` false: the list holds the inputs
    /// then the outputs) or `%outputs = call @onnx.Name(inputs)` (`alloc`: the list holds
    /// the destinations then the inputs).
    #[allow(clippy::too_many_arguments)]
    fn check_op_call(
        &self,
        pc: usize,
        op: OpId,
        list: u32,
        attrs: u32,
        nout: u8,
        nin: u16,
        alloc: bool,
    ) -> VResult<()> {
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
            let what = if alloc { "the call assigns" } else { "found" };
            return self.at(
                pc,
                None,
                format!(
                    "@onnx.{} produces {}, {what} {nout}",
                    def.name,
                    range_text(def.min_outputs, def.max_outputs, "output")
                ),
            );
        }
        // Operand `i` in text order is input `k`, or (None) an output.
        let first_input = if alloc { nout } else { 0 };
        for (i, a) in items.iter().enumerate() {
            let input = (first_input..first_input + nin).contains(&i).then(|| i - first_input);
            match (a.kind(), input) {
                (ArgKind::None, Some(k)) if k < def.min_inputs => {
                    return self.at(
                        pc,
                        Some(i),
                        format!(
                            "input {} of @onnx.{} is required; `none` marks omitted optional inputs",
                            k + 1,
                            def.name
                        ),
                    );
                }
                (ArgKind::None, Some(_)) => {}
                (ArgKind::Reg(_), _) => self.check_arg(pc, i, *a)?,
                (ArgKind::Const(_), Some(_)) => self.check_arg(pc, i, *a)?,
                (ArgKind::None, None) if !alloc => {
                    return self.at(pc, Some(i), "an operator output must be a tensor register, not `none`".into());
                }
                (_, None) if alloc => return self.at(pc, Some(i), "a call destination must be a register".into()),
                (_, None) => return self.at(pc, Some(i), "an operator output must be a tensor register".into()),
                (_, Some(k)) => {
                    return self.at(
                        pc,
                        Some(i),
                        format!("input {} of @onnx.{} must be a tensor register or a constant", k + 1, def.name),
                    )
                }
            }
        }
        let set = if attrs != 0 {
            let Some(set) = self.m.attrs.get(attrs as usize - 1) else {
                return self.at(
                    pc,
                    None,
                    format!("attribute set {} is out of range: the module has {}", attrs - 1, self.m.attrs.len()),
                );
            };
            set
        } else {
            &NO_ATTRS
        };
        let mut sh = self.shared.borrow_mut();
        let key = (op.0, sh.memo.attrs_id(self.m, attrs));
        if sh.memo.attrs_ok.contains(&key) {
            return Ok(());
        }
        if let Err(e) = def.check_attrs(set) {
            return self.at(pc, if attrs != 0 { Some(nin + nout) } else { None }, e);
        }
        sh.memo.attrs_ok.insert(key);
        Ok(())
    }

    fn check_indices(&self, pc: usize) -> VResult<()> {
        let f = self.f;
        let nlabels = f.code.len() as u32;
        let label = |op: usize, l: crate::ir::bytecode::Label| -> VResult<()> {
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
                if konst.index() >= self.m.consts.len() {
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
                            crate::ir::builtins::BUILTINS.len()
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
            Instr::CallOp { op, list, attrs, nout, nin } => {
                self.check_op_call(pc, op, list, attrs, nout, nin, false)?
            }
            Instr::CallOpAlloc { op, list, attrs, ndst, nin } => {
                self.check_op_call(pc, op, list, attrs, ndst, nin, true)?
            }
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

    fn set_kind(&mut self, pc: usize, r: Reg, k: Kind) -> VResult<bool> {
        match self.kinds[r.index()] {
            None => {
                self.kinds[r.index()] = Some(k);
                self.kind_site[r.index()] = pc;
                Ok(true)
            }
            Some(old) if old == k => Ok(false),
            Some(old) => {
                let site = self.kind_site[r.index()];
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
        self.kinds.clear();
        self.kinds.resize(n, None);
        self.kind_site.clear();
        self.kind_site.resize(n, usize::MAX);
        for (i, t) in self.f.params.iter().enumerate() {
            self.kinds[i] = Some(t.kind());
        }
        let syms = self.f.symbols();
        for (r, _) in &syms {
            self.kinds[*r as usize] = Some(Kind::Int);
        }
        // Definitions per register, for the later passes (counted on the first sweep).
        let mut ndefs = std::mem::take(&mut self.shared.borrow_mut().ndefs);
        ndefs.clear();
        ndefs.resize(n, 0);
        ndefs[..self.f.params.len()].fill(1);
        for (r, _) in &syms {
            ndefs[*r as usize] = 1;
        }
        let mut first = true;
        // `mov` chains propagate kinds; iterate to a fixpoint (bounded by the register count).
        let r = 'sweeps: loop {
            let mut changed = false;
            // A `mov` whose source had no kind yet: only then can another sweep change
            // anything (every other definition sets the same kind again).
            let mut deferred = false;
            let (f, m) = (self.f, self.m);
            for pc in 0..f.code.len() {
                // What `defs` lists, without building the list: calls define their
                // destinations, the others at most one register.
                let (dsts, kinds): (&[Arg], &[Kind]) = match f.code[pc] {
                    Instr::Call { func, list, ndst, .. } => {
                        let results = &m.funcs[func].results;
                        let dsts = &f.args[list as usize..][..ndst as usize];
                        for (a, t) in dsts.iter().zip(results) {
                            let ArgKind::Reg(r) = a.kind() else { unreachable!("checked in pass 1") };
                            if first {
                                ndefs[r.index()] += 1;
                            }
                            match self.set_kind(pc, r, t.kind()) {
                                Ok(c) => changed |= c,
                                Err(e) => break 'sweeps Err(e),
                            }
                        }
                        continue;
                    }
                    Instr::CallBuiltin { builtin, list, ndst, .. } => {
                        (&f.args[list as usize..][..ndst as usize], Builtin::ALL[builtin.index()].sig().results)
                    }
                    Instr::CallOpAlloc { list, ndst, .. } => {
                        (&f.args[list as usize..][..ndst as usize], &[Kind::Tensor; 256][..ndst as usize])
                    }
                    ins => {
                        let Some((r, k)) = single_def(ins) else { continue };
                        if first {
                            ndefs[r.index()] += 1;
                        }
                        let k = match (k, ins) {
                            (Some(k), _) => Some(k),
                            (None, Instr::Mov { src, .. }) => self.kinds[src.index()],
                            _ => None,
                        };
                        match k {
                            Some(k) => match self.set_kind(pc, r, k) {
                                Ok(c) => changed |= c,
                                Err(e) => break 'sweeps Err(e),
                            },
                            None => deferred = true,
                        }
                        continue;
                    }
                };
                for (a, k) in dsts.iter().zip(kinds) {
                    let ArgKind::Reg(r) = a.kind() else { unreachable!("checked in pass 1") };
                    if first {
                        ndefs[r.index()] += 1;
                    }
                    match self.set_kind(pc, r, *k) {
                        Ok(c) => changed |= c,
                        Err(e) => break 'sweeps Err(e),
                    }
                }
            }
            first = false;
            if !changed || !deferred {
                break Ok(());
            }
        };
        self.shared.borrow_mut().ndefs = ndefs;
        r
    }

    fn arg_kind(&self, a: Arg) -> Option<Kind> {
        match a.kind() {
            ArgKind::Reg(r) => self.kinds[r.index()],
            ArgKind::Imm(_) => Some(Kind::Int),
            ArgKind::Lit(i) => Some(match self.m.literals[i as usize] {
                Literal::Int(_) => Kind::Int,
                Literal::Float(_) => Kind::Float,
            }),
            ArgKind::Const(_) | ArgKind::None => Some(Kind::Tensor),
        }
    }

    /// `role` is only formatted when the check fails (pass `format_args!`, not `format!`).
    #[inline]
    fn expect_kind(&self, pc: usize, op: usize, a: Arg, want: Kind, role: impl std::fmt::Display) -> VResult<()> {
        if self.arg_kind(a) == Some(want) {
            return Ok(());
        }
        self.kind_error(pc, op, a, want, &role)
    }

    #[cold]
    #[inline(never)]
    fn kind_error(&self, pc: usize, op: usize, a: Arg, want: Kind, role: &dyn std::fmt::Display) -> VResult<()> {
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
            Instr::CallOpAlloc { op, list, ndst, nin, .. } => {
                let name = OPS[op.index()].name;
                let inputs = &f.args[list as usize + ndst as usize..][..nin as usize];
                for (i, a) in inputs.iter().enumerate() {
                    let op = ndst as usize + i;
                    self.expect_kind(pc, op, *a, Kind::Tensor, format_args!("input {} of @onnx.{name}", i + 1))?;
                }
            }
            Instr::CallOp { op, list, nout, nin, .. } => {
                let name = OPS[op.index()].name;
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
                if self.kinds[src.index()].is_none() {
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
                if self.kinds[r.index()].is_none() {
                    return self.at(pc, Some(0), format!("{} is killed but never defined", self.rn(r)));
                }
            }
            Instr::Call { func, list, ndst, nargs } => {
                let callee = &self.m.funcs[func];
                let args = &f.args[list as usize + ndst as usize..][..nargs as usize];
                for (i, (a, t)) in args.iter().zip(&callee.params).enumerate() {
                    let (op, k) = (ndst as usize + i, t.kind());
                    self.expect_kind(pc, op, *a, k, format_args!("argument {} of @{}", i + 1, callee.name))?;
                }
                self.check_placed_args(pc, callee, args, ndst as usize)?;
            }
            Instr::CallBuiltin { builtin, list, ndst, nargs } => {
                let sig = Builtin::ALL[builtin.index()].sig();
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

    /// The placed parameters of a call's callee, where the caller's code proves the
    /// argument is not the view the placement names: a constant (its own storage), or a
    /// register defined once, by an `alloc_tensor` at a constant offset of the register
    /// passed as the storage (itself defined once), at another offset or as a texture.
    /// Other arguments are checked when the call runs.
    fn check_placed_args(&self, pc: usize, callee: &Function, args: &[Arg], first: usize) -> VResult<()> {
        for p in &callee.placements {
            let (Some(x), Some(st)) = (args.get(p.param as usize), args.get(p.storage as usize)) else { continue };
            let place = format!(
                "argument {} of @{}: parameter %{} is placed in %{} at byte {}",
                p.param + 1,
                callee.name,
                callee.reg_name(Reg(p.param)),
                callee.reg_name(Reg(p.storage)),
                p.offset
            );
            let op = Some(first + p.param as usize);
            let (xr, sr) = match (x.kind(), st.kind()) {
                (ArgKind::Const(c), _) => {
                    let name = self.m.consts.get(c).map_or("?", |c| c.name.as_str());
                    return self.at(pc, op, format!("{place}, but @{name} is a constant, in a storage of its own"));
                }
                (ArgKind::Reg(xr), ArgKind::Reg(sr)) => (xr, sr),
                _ => continue,
            };
            let Some(def) = self.sole_def(xr).filter(|_| xr.index() >= self.f.params.len()) else { continue };
            if self.sole_def(sr).is_none() && sr.index() >= self.f.params.len() {
                continue;
            }
            let Instr::AllocTensor { storage, args: list, scope, .. } = self.f.code[def] else { continue };
            let Some(offset) = self.f.args.get(list as usize).and_then(|a| self.m.const_int(*a)) else { continue };
            if storage != sr {
                continue; // another storage register may hold the same storage
            }
            if scope.is_texture() {
                return self.at(pc, op, format!("{place}, but {} is a `{scope}` view", self.rn(xr)));
            }
            if u64::try_from(offset).ok() != Some(p.offset) {
                return self.at(
                    pc,
                    op,
                    format!("{place}, but {} is the view at byte {offset} of {}", self.rn(xr), self.rn(sr)),
                );
            }
        }
        Ok(())
    }

    /// The one instruction that defines `r`, if exactly one does (a parameter is defined
    /// on entry besides).
    fn sole_def(&self, r: Reg) -> Option<usize> {
        let mut found = None;
        let mut count = usize::from(r.index() < self.f.params.len());
        for pc in 0..self.f.code.len() {
            let _ = self.accesses(pc, &mut |_, a| {
                if let Access::Def(d) = a {
                    if d == r {
                        count += 1;
                        found = Some(pc);
                    }
                }
                Ok(())
            });
        }
        found.filter(|_| count == 1)
    }

    // ------------------------------------------------------------ pass 3: dataflow

    /// [`accesses`] of instruction `pc` of the function being verified.
    #[inline(always)]
    fn accesses<V: FnMut(usize, Access) -> VResult<()>>(&self, pc: usize, visit: &mut V) -> VResult<()> {
        accesses(self.f, pc, visit)
    }

    fn successors(&self, pc: usize) -> ([usize; 2], usize) {
        match self.f.code[pc] {
            Instr::Ret { .. } => ([0, 0], 0),
            Instr::Br { target } => ([target.index(), 0], 1),
            Instr::BrIf { then_, else_, .. } => ([then_.index(), else_.index()], 2),
            _ => ([pc + 1, 0], 1),
        }
    }

    /// The most recent `kill` of `r` before `pc` in code order, for the error note.
    fn kill_site(&self, r: Reg, pc: usize) -> Option<usize> {
        let is_kill = |p: &usize| matches!(self.f.code[*p], Instr::Kill { reg } if reg == r);
        (0..pc).rev().find(is_kill).or_else(|| (pc..self.f.code.len()).find(is_kill))
    }

    /// The error for a use or kill of `r` that is killed (`killed`) or not defined on some
    /// path to `pc`.
    #[cold]
    #[inline(never)]
    fn flow_error(&self, pc: usize, op: usize, a: Access, killed: bool) -> VerifyError {
        let (Access::Use(r) | Access::Kill(r) | Access::Def(r)) = a;
        let is_kill = matches!(a, Access::Kill(_));
        if killed {
            let message = if is_kill {
                format!("{} is killed twice: it is already killed on some path to here", self.rn(r))
            } else {
                format!("{} is used after `kill` on some path to here", self.rn(r))
            };
            let mut e = self.err(Some(pc), Some(op), message);
            if let Some(k) = self.kill_site(r, pc) {
                e.notes.push(format!("{} is killed at {}", self.rn(r), self.line_note(k)));
            }
            return e;
        }
        let verb = if is_kill { "killed" } else { "used" };
        self.err(Some(pc), Some(op), format!("{} is {verb} before it is defined on some path to here", self.rn(r)))
    }

    /// Applies instruction `pc` to the state `st` (`defined` words, then `killed`).
    #[inline(always)]
    fn flow_step(&self, pc: usize, st: &mut [u64], words: usize) -> VResult<()> {
        self.accesses(pc, &mut |op, a| {
            match a {
                Access::Use(r) | Access::Kill(r) => {
                    let (w, bit) = ((r.0 / 64) as usize, 1u64 << (r.0 % 64));
                    if st[words + w] & bit != 0 {
                        return Err(self.flow_error(pc, op, a, true));
                    }
                    if st[w] & bit == 0 {
                        return Err(self.flow_error(pc, op, a, false));
                    }
                    if matches!(a, Access::Kill(_)) {
                        st[words + w] |= bit;
                    }
                }
                Access::Def(r) => {
                    let (w, bit) = ((r.0 / 64) as usize, 1u64 << (r.0 % 64));
                    st[w] |= bit;
                    st[words + w] &= !bit;
                }
            }
            Ok(())
        })
    }

    fn dataflow(&self) -> VResult<()> {
        let f = self.f;
        let n = f.code.len();
        let words = (f.num_regs as usize).div_ceil(64);
        let w2 = 2 * words;
        let mut guard = self.shared.borrow_mut();
        let b = &mut guard.flow;
        // Straight-line code (one block ending in `ret`, most compiled functions): one pass.
        if matches!(f.code[n - 1], Instr::Ret { .. }) && !f.code[..n - 1].iter().any(Instr::is_terminator) {
            b.st.clear();
            b.st.resize(w2, 0);
            for i in (0..f.params.len()).chain(f.symbols().iter().map(|(r, _)| *r as usize)) {
                b.st[i / 64] |= 1 << (i % 64);
            }
            for pc in 0..n {
                self.flow_step(pc, &mut b.st, words)?;
            }
            return Ok(());
        }
        // Basic blocks: leaders are 0, branch targets and instructions after terminators.
        b.leader.clear();
        b.leader.resize(n, false);
        b.leader[0] = true;
        for pc in 0..n {
            if f.code[pc].is_terminator() {
                let (succ, k) = self.successors(pc);
                for s in &succ[..k] {
                    b.leader[*s] = true;
                }
                if pc + 1 < n {
                    b.leader[pc + 1] = true;
                }
            }
        }
        b.block_of.clear();
        b.starts.clear();
        for pc in 0..n {
            if b.leader[pc] {
                b.starts.push(pc);
            }
            b.block_of.push((b.starts.len() - 1) as u32);
        }
        let nblocks = b.starts.len();
        // Block entry states: `defined` (words 0..words) then `killed`.
        b.entry.clear();
        b.entry.resize(nblocks * w2, 0);
        b.has_entry.clear();
        b.has_entry.resize(nblocks, false);
        b.queued.clear();
        b.queued.resize(nblocks, false);
        for i in (0..f.params.len()).chain(f.symbols().iter().map(|(r, _)| *r as usize)) {
            b.entry[i / 64] |= 1 << (i % 64);
        }
        b.has_entry[0] = true;
        b.work.clear();
        b.work.push(0);
        b.queued[0] = true;
        b.st.clear();
        b.st.resize(w2, 0);
        while let Some(blk) = b.work.pop() {
            b.queued[blk] = false;
            b.st.copy_from_slice(&b.entry[blk * w2..][..w2]);
            let mut pc = b.starts[blk];
            loop {
                self.flow_step(pc, &mut b.st, words)?;
                let ends_block = f.code[pc].is_terminator() || (pc + 1 < n && b.leader[pc + 1]);
                if !ends_block {
                    pc += 1;
                    continue;
                }
                let (succ, k) = self.successors(pc);
                for &s in &succ[..k] {
                    let sb = b.block_of[s] as usize;
                    let e = &mut b.entry[sb * w2..][..w2];
                    let changed = if !b.has_entry[sb] {
                        e.copy_from_slice(&b.st);
                        b.has_entry[sb] = true;
                        true
                    } else {
                        // Defined on every path (intersection), killed on some path (union).
                        let mut changed = false;
                        for (i, (x, y)) in e.iter_mut().zip(&b.st).enumerate() {
                            let v = if i < words { *x & *y } else { *x | *y };
                            changed |= v != *x;
                            *x = v;
                        }
                        changed
                    };
                    if changed && !b.queued[sb] {
                        b.queued[sb] = true;
                        b.work.push(sb);
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
        let mut guard = self.shared.borrow_mut();
        let Shared { ndefs, storage, shapes, dims: shape_dims, .. } = &mut *guard;
        // Storage registers with exactly one definition, by an alloc_storage of constant size.
        storage.clear();
        storage.resize(f.num_regs as usize, None);
        // The static shapes for `check_static_ops`: parameters here, views below.
        self.param_shapes(shapes, shape_dims);
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
                    if let (Some(s), Some(a), 1) = (size_v, align_v, ndefs[dst.index()]) {
                        storage[dst.index()] = Some((s as u64, a as u64, pc));
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
                Instr::AllocTensor { dst, storage: s, args, dtype, scope, ndim } => {
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
                    let mut dims = smallvec::SmallVec::<[i64; 8]>::new();
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
                    if ndefs[dst.index()] == 1 {
                        shapes[dst.index()] = Some((dtype, shape_dims.len() as u32, ndim as u32, Some(scope)));
                        shape_dims.extend_from_slice(&dims);
                    }
                    let Some(bytes) = min_view_bytes(dtype, scope, &dims)
                        .map_err(|m| self.err(Some(pc), Some(3 + ndim as usize), m))?
                    else {
                        return self.at(pc, None, "the view's size overflows 64 bits".into());
                    };
                    if let (Some(o), Some((ssize, _align, spc))) = (offset, storage[s.index()]) {
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
    /// Dtype, shape and scope of registers whose tensor shape is fixed: here parameters
    /// with fully known tensor types (scope unknown); `check_constant_views` adds registers
    /// defined once by an `alloc_tensor` with constant dims. Shapes go to `dims`; `out`
    /// holds where.
    fn param_shapes(&self, out: &mut Vec<Option<StaticTensor>>, dims: &mut Vec<i64>) {
        let f = self.f;
        out.clear();
        out.resize(f.num_regs as usize, None);
        dims.clear();
        for (i, t) in f.params.iter().enumerate() {
            if let Type::Tensor { dtype, dims: ds } = t {
                let start = dims.len();
                let known = ds.iter().all(|d| match d {
                    crate::ir::types::Dim::Known(v) => {
                        dims.push(*v);
                        true
                    }
                    crate::ir::types::Dim::Any | crate::ir::types::Dim::Sym { .. } => false,
                });
                if known {
                    out[i] = Some((*dtype, start as u32, ds.len() as u32, None));
                } else {
                    dims.truncate(start);
                }
            }
        }
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
        let mut guard = self.shared.borrow_mut();
        // Shape-like constants are integers, or small floats (OneHot's depth may be one); float
        // weights are not copied.
        let have = guard.const_values.len();
        guard.const_values.extend(self.m.consts.as_values_slice()[have.min(self.m.consts.len())..].iter().map(|c| {
            match &c.data {
                ConstData::Bytes(b) if !c.dtype.is_float() || b.len() <= 64 * c.dtype.size() => {
                    HostTensor::new(c.dtype, c.shape.clone(), b.to_vec()).ok()
                }
                _ => None,
            }
        }));
        // The static shapes are those `check_constant_views` found.
        let Shared { memo, shapes, dims, const_values, .. } = &mut *guard;
        let (shapes, dims) = (&*shapes, &*dims);
        let shape_of = |t: &StaticTensor| &dims[t.1 as usize..][..t.2 as usize];
        let mut infos = Vec::new();
        // Per operand: Some(true) for a texture, None when the scope is unknown.
        let mut scopes: Vec<Option<bool>> = Vec::new();
        let scope_code = |s: Option<Scope>| s.map_or(2, |s| u64::from(s.is_texture()));
        'calls: for (pc, ins) in f.code.iter().enumerate() {
            let Instr::CallOp { op, list, attrs: attrs_index, nout, nin } = *ins else { continue };
            let (nin, nout) = (nin as usize, nout as usize);
            let items = &f.args[list as usize..][..nin + nout];
            // The memo key: everything the outcome depends on. Constants by index (their value
            // may be read), other inputs by dtype, shape and scope, and the outputs' scopes.
            let attrs_id = memo.attrs_id(self.m, attrs_index);
            let key = &mut memo.key;
            key.clear();
            key.extend_from_slice(&[op.0 as u64, attrs_id as u64, nin as u64, nout as u64]);
            for a in &items[..nin] {
                match a.kind() {
                    ArgKind::None => key.push(0),
                    ArgKind::Const(c) => key.extend_from_slice(&[1, c.0 as u64]),
                    ArgKind::Reg(r) => match &shapes[r.index()] {
                        Some(t) if t.0.is_float() => {
                            let shape = shape_of(t);
                            key.extend_from_slice(&[2 | scope_code(t.3) << 2, t.0 as u64, shape.len() as u64]);
                            key.extend(shape.iter().map(|&d| d as u64));
                        }
                        _ => continue 'calls,
                    },
                    _ => continue 'calls,
                }
            }
            for a in &items[nin..] {
                key.push(match a.kind() {
                    ArgKind::None => 3,
                    ArgKind::Reg(r) => scope_code(shapes[r.index()].as_ref().and_then(|t| t.3)),
                    _ => 0,
                });
            }
            let def = OPS[op.index()];
            let inferred: &[OutInfo] = match memo.static_ops.get(&key[..]) {
                Some(StaticOutcome::Skip) => continue,
                Some(StaticOutcome::Outputs(o)) => o,
                None => {
                    infos.clear();
                    scopes.clear();
                    for a in &items[..nin] {
                        let (info, scope) = match a.kind() {
                            ArgKind::Const(c) => {
                                let k = &self.m.consts[c];
                                let value = const_values[c.index()].as_ref();
                                (Some(TensorInfo { dtype: k.dtype, shape: &k.shape, value }), Some(false))
                            }
                            // Every register input has a static float shape (the key has it).
                            ArgKind::Reg(r) => match &shapes[r.index()] {
                                Some(t) => (
                                    Some(TensorInfo { dtype: t.0, shape: shape_of(t), value: None }),
                                    t.3.map(Scope::is_texture),
                                ),
                                None => continue 'calls,
                            },
                            _ => (None, Some(false)),
                        };
                        infos.push(info);
                        scopes.push(scope);
                    }
                    for a in &items[nin..] {
                        scopes.push(match a.kind() {
                            ArgKind::Reg(r) => shapes[r.index()].as_ref().and_then(|t| t.3).map(Scope::is_texture),
                            _ => Some(false),
                        });
                    }
                    let attrs = if attrs_index == 0 { &NO_ATTRS } else { &self.m.attrs[attrs_index as usize - 1] };
                    let outcome = self.infer_static(pc, def, &infos, &scopes, items, nin, attrs)?;
                    let key = key.clone().into_boxed_slice();
                    match memo.static_ops.entry(key).or_insert(outcome) {
                        StaticOutcome::Skip => continue,
                        StaticOutcome::Outputs(o) => o,
                    }
                }
            };
            for (i, a) in items[nin..].iter().enumerate() {
                let (ArgKind::Reg(r), Some((dtype, shape))) = (a.kind(), inferred.get(i)) else { continue };
                if let Some(t) = &shapes[r.index()] {
                    let (vd, vs) = (t.0, shape_of(t));
                    if vd != *dtype || vs != &shape[..] {
                        return self.at(
                            pc,
                            Some(nin + i),
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

    /// Load-time inference of one operator call (see `check_static_ops`).
    #[allow(clippy::too_many_arguments)]
    fn infer_static(
        &self,
        pc: usize,
        def: &crate::ir::schema::OpDef,
        infos: &[Option<TensorInfo>],
        scopes: &[Option<bool>],
        items: &[Arg],
        nin: usize,
        attrs: &Attrs,
    ) -> VResult<StaticOutcome> {
        // The blocked-texture inference, with operands of unknown scope taken as `unknown`.
        let blocked = |unknown: bool| {
            let is_tex = |s: &Option<bool>| s.unwrap_or(unknown);
            let tin: Vec<bool> = scopes[..nin].iter().map(is_tex).collect();
            let tout: Vec<Option<bool>> = items[nin..]
                .iter()
                .zip(&scopes[nin..])
                .map(|(a, s)| if matches!(a.kind(), ArgKind::None) { None } else { Some(is_tex(s)) })
                .collect();
            crate::ir::operators::blocked::infer(def, infos, &tin, &tout, attrs)
        };
        Ok(if scopes.contains(&Some(true)) {
            if scopes.contains(&None) {
                return Ok(StaticOutcome::Skip);
            }
            match blocked(false) {
                Ok(call) => StaticOutcome::Outputs(vec![call.out]),
                Err(e) => return self.at(pc, None, format!("@onnx.{}: {e}", def.name)),
            }
        } else {
            match (def.infer)(infos, attrs) {
                Ok(o) => StaticOutcome::Outputs(o),
                // Parameters may be texture views: refused only if no reading fits.
                Err(_) if scopes.contains(&None) && blocked(true).is_ok() => StaticOutcome::Skip,
                Err(e) => return self.at(pc, None, format!("@onnx.{}: {e}", def.name)),
            }
        })
    }
}

/// A register's fixed dtype, shape (start and length in a shared dims vector) and scope
/// when known.
type StaticTensor = (DType, u32, u32, Option<Scope>);

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
                    crate::ir::types::Dim::Known(v) => v == s,
                    // Bound and related at entry (`interp::signature`).
                    crate::ir::types::Dim::Any | crate::ir::types::Dim::Sym { .. } => true,
                })
        }
        _ => false,
    }
}

/// One register access of an instruction: `$n` is its operand number in text order
/// (destinations first); the `uses` pass visits reads and kills, the `defs` pass defs.
macro_rules! access_item {
    (uses $f:ident $v:ident $n:ident; def $r:ident) => {
        $n += 1;
    };
    (defs $f:ident $v:ident $n:ident; def $r:ident) => {
        $v($n, Access::Def($r))?;
        $n += 1;
    };
    (uses $f:ident $v:ident $n:ident; read $r:ident) => {
        $v($n, Access::Use($r))?;
        $n += 1;
    };
    (defs $f:ident $v:ident $n:ident; read $r:ident) => {
        $n += 1;
    };
    (uses $f:ident $v:ident $n:ident; kill $r:ident) => {
        $v($n, Access::Kill($r))?;
        $n += 1;
    };
    (defs $f:ident $v:ident $n:ident; kill $r:ident) => {
        $n += 1;
    };
    (uses $f:ident $v:ident $n:ident; arg $a:ident) => {
        if let ArgKind::Reg(r) = $a.kind() {
            $v($n, Access::Use(r))?;
        }
        $n += 1;
    };
    (defs $f:ident $v:ident $n:ident; arg $a:ident) => {
        $n += 1;
    };
    (uses $f:ident $v:ident $n:ident; args $list:ident [$from:expr; $len:expr]) => {
        for a in &$f.args[$list as usize + $from..][..$len] {
            if let ArgKind::Reg(r) = a.kind() {
                $v($n, Access::Use(r))?;
            }
            $n += 1;
        }
    };
    (defs $f:ident $v:ident $n:ident; args $list:ident [$from:expr; $len:expr]) => {
        $n += $len;
    };
    (uses $f:ident $v:ident $n:ident; defs $list:ident [$from:expr; $len:expr]) => {
        $n += $len;
    };
    (defs $f:ident $v:ident $n:ident; defs $list:ident [$from:expr; $len:expr]) => {
        for a in &$f.args[$list as usize + $from..][..$len] {
            if let ArgKind::Reg(r) = a.kind() {
                $v($n, Access::Def(r))?;
            }
            $n += 1;
        }
    };
}

/// Generates [`accesses`] from the access clauses of the opcode table
/// (`for_each_opcode!` in `ir/bytecode.rs`).
macro_rules! define_accesses {
    ($(
        $(#[doc = $doc:literal])*
        $code:literal $Name:ident $mnemonic:literal { $($field:ident : $fty:ty = $slot:ident),* $(,)? }
        => [ $($role:ident $item:ident $([$from:expr; $len:expr])?),* ]
    )*) => {
        /// Visits the register accesses of an instruction in text operand order (uses and
        /// kills before defs, as they happen at run time). Generated from the opcode table.
        #[inline(always)]
        pub(crate) fn accesses<E, V: FnMut(usize, Access) -> Result<(), E>>(
            f: &Function,
            pc: usize,
            visit: &mut V,
        ) -> Result<(), E> {
            match f.code[pc] {
                $(
                    #[allow(unused_variables, unused_mut, unused_assignments)]
                    Instr::$Name { $($field),* } => {
                        let mut n = 0usize;
                        $( access_item!(uses f visit n; $role $item $([$from; $len])?); )*
                        let mut n = 0usize;
                        $( access_item!(defs f visit n; $role $item $([$from; $len])?); )*
                        Ok(())
                    }
                )*
            }
        }
    };
}

crate::ir::bytecode::for_each_opcode!(define_accesses);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::bytecode::{BuiltinId, FuncId, Label};

    /// What the generated `accesses` visits for each instruction form: reads and kills
    /// first, then defs, each with its operand number in text order.
    #[test]
    fn accesses_follow_the_opcode_table() {
        let r = |n| Arg::reg(Reg(n));
        let imm = |v| Arg::imm(v).unwrap();
        let args = vec![r(1), imm(4), r(2), r(3), r(4), imm(8), r(5), r(6), r(7)];
        let code = vec![
            Instr::Mov { dst: Reg(0), src: Reg(9) },
            Instr::MakeShape { dst: Reg(0), dims: 0, ndim: 2 },
            Instr::AllocStorage { dst: Reg(0), size: r(8), align: imm(0), device: 0, scope: Scope::Global },
            Instr::AllocTensor {
                dst: Reg(0),
                storage: Reg(9),
                args: 1,
                dtype: DType::F32,
                scope: Scope::Global,
                ndim: 1,
            },
            Instr::Kill { reg: Reg(9) },
            Instr::Call { func: FuncId(0), list: 2, ndst: 2, nargs: 2 },
            Instr::CallBuiltin { builtin: BuiltinId(0), list: 6, ndst: 1, nargs: 2 },
            Instr::Ret { list: 0, nvals: 2 },
            Instr::BrIf { cond: Reg(9), then_: Label(0), else_: Label(0) },
            Instr::Br { target: Label(0) },
        ];
        let f = Function {
            name: "f".into(),
            params: vec![],
            placements: vec![],
            results: vec![],
            num_regs: 10,
            code,
            args,
            debug: Default::default(),
        };
        let seen: Vec<Vec<String>> = (0..f.code.len())
            .map(|pc| {
                let mut v = Vec::new();
                accesses::<(), _>(&f, pc, &mut |op, a| {
                    v.push(match a {
                        Access::Def(r) => format!("{op}:def r{}", r.0),
                        Access::Use(r) => format!("{op}:use r{}", r.0),
                        Access::Kill(r) => format!("{op}:kill r{}", r.0),
                    });
                    Ok(())
                })
                .unwrap();
                v
            })
            .collect();
        let want: Vec<Vec<&str>> = vec![
            vec!["1:use r9", "0:def r0"],
            vec!["1:use r1", "0:def r0"],
            vec!["1:use r8", "0:def r0"],
            vec!["1:use r9", "3:use r2", "0:def r0"],
            vec!["0:kill r9"],
            vec!["2:use r4", "0:def r2", "1:def r3"],
            vec!["1:use r6", "2:use r7", "0:def r5"],
            vec!["0:use r1"],
            vec!["0:use r9"],
            vec![],
        ];
        assert_eq!(seen, want);
    }
}
