//! `ModuleBuilder`: emit modules from Rust without going through text (for compilers and
//! frontends). The result is verified like any loaded module.

use crate::ir::attrs::{AttrTable, Attrs};
use crate::ir::builtins::Builtin;
use crate::ir::bytecode::EntityRef;
use crate::ir::bytecode::{Arg, BuiltinId, ConstId, FuncId, Instr, Label, OpId, Reg};
use crate::ir::module::{ConstData, Constant, FuncDebug, Function, Literal, Module};
use crate::ir::types::{DType, Scope, Type};
use crate::ir::verify::{verify_module, VerifyError};

/// An instruction operand before encoding.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Operand {
    Reg(Reg),
    Int(i64),
    Float(f64),
    Const(ConstId),
    /// An omitted optional operator input.
    None,
}

impl From<Reg> for Operand {
    fn from(r: Reg) -> Self {
        Operand::Reg(r)
    }
}

/// Builds a module function by function.
pub struct ModuleBuilder {
    module: Module,
    defined: Vec<bool>,
    /// Numbers `module.attrs`: equal sets are stored once.
    attr_table: AttrTable,
}

impl ModuleBuilder {
    pub fn new(name: &str) -> ModuleBuilder {
        ModuleBuilder {
            module: Module { name: name.to_string(), ..Module::default() },
            defined: Vec::new(),
            attr_table: AttrTable::default(),
        }
    }

    pub fn constant(&mut self, name: &str, dtype: DType, shape: &[i64], data: ConstData) -> ConstId {
        self.module.consts.push(Constant { name: name.to_string(), dtype, shape: shape.to_vec(), data });
        ConstId(self.module.consts.len() as u32 - 1)
    }

    /// Declares an OpenCL kernel (`kernel @name = opencl("entry", source)`); returns its index.
    pub fn kernel(&mut self, name: &str, entry: &str, source: &str) -> u32 {
        self.module.kernels.push(crate::ir::module::UserKernel {
            name: name.to_string(),
            entry: entry.to_string(),
            source: source.to_string(),
        });
        self.module.kernels.len() as u32 - 1
    }

    /// Declares a function so calls can refer to it before its body is added.
    pub fn declare(&mut self, name: &str, params: Vec<Type>, results: Vec<Type>) -> FuncId {
        if let Some(id) = self.module.func_by_name(name) {
            return id;
        }
        let nparams = params.len() as u32;
        self.module.funcs.push(Function {
            name: name.to_string(),
            params,
            placements: Vec::new(),
            results,
            num_regs: nparams,
            code: Vec::new(),
            args: Vec::new(),
            debug: FuncDebug::default(),
        });
        self.defined.push(false);
        FuncId(self.module.funcs.len() as u32 - 1)
    }

    /// Starts a function body (declaring it if needed). The symbols of symbolic parameter
    /// types (`Dim::Sym`, registers `nparams`, `nparams + 1`, ... in order of first
    /// occurrence) are reserved: they are int registers from the first instruction on.
    pub fn function(&mut self, name: &str, params: Vec<Type>, results: Vec<Type>) -> FunctionBuilder {
        let nparams = params.len();
        let regs = params.iter().flat_map(|t| t.symbols().map(|(_, reg, _)| reg + 1)).fold(nparams as u32, u32::max);
        let id = self.declare(name, params, results);
        FunctionBuilder {
            id,
            num_regs: regs,
            code: Vec::new(),
            ops: Vec::new(),
            labels: Vec::new(),
            reg_names: vec![String::new(); regs as usize],
            attrs: Vec::new(),
            placements: Vec::new(),
        }
    }

    fn intern(&mut self, lit: Literal) -> u32 {
        if let Some(i) = self.module.literals.iter().position(|l| l.same(&lit)) {
            return i as u32;
        }
        self.module.literals.push(lit);
        self.module.literals.len() as u32 - 1
    }

    fn encode(&mut self, o: Operand) -> Arg {
        match o {
            Operand::Reg(r) => Arg::reg(r),
            Operand::Int(v) => Arg::imm(v).unwrap_or_else(|| Arg::lit(self.intern(Literal::Int(v)))),
            Operand::Float(v) => Arg::lit(self.intern(Literal::Float(v))),
            Operand::Const(c) => Arg::konst(c),
            Operand::None => Arg::NONE,
        }
    }

    /// Adds a finished body: resolves labels and encodes operands.
    pub fn add_function(&mut self, fb: FunctionBuilder) {
        let args: Vec<Arg> = fb.ops.iter().map(|o| self.encode(*o)).collect();
        // Attribute sets are numbered per function while building; make them module-wide,
        // each stored once. (`u32::MAX` sets cannot fit in memory.)
        let attr_ids: Vec<u32> = fb
            .attrs
            .into_iter()
            .map(|set| self.attr_table.intern(&mut self.module.attrs, set).unwrap_or(u32::MAX))
            .collect();
        let at = |l: Label| Label(fb.labels.get(l.index()).copied().flatten().unwrap_or(u32::MAX));
        let code = fb
            .code
            .iter()
            .map(|i| match *i {
                Instr::Br { target } => Instr::Br { target: at(target) },
                Instr::BrIf { cond, then_, else_ } => Instr::BrIf { cond, then_: at(then_), else_: at(else_) },
                Instr::CallOp { op, list, attrs, nout, nin } if attrs != 0 => {
                    let attrs = attr_ids.get(attrs as usize - 1).copied().unwrap_or(u32::MAX);
                    Instr::CallOp { op, list, attrs, nout, nin }
                }
                Instr::CallOpAlloc { op, list, attrs, ndst, nin } if attrs != 0 => {
                    let attrs = attr_ids.get(attrs as usize - 1).copied().unwrap_or(u32::MAX);
                    Instr::CallOpAlloc { op, list, attrs, ndst, nin }
                }
                other => other,
            })
            .collect();
        let f = &mut self.module.funcs[fb.id];
        f.num_regs = fb.num_regs;
        f.placements = fb.placements;
        f.code = code;
        f.args = args;
        if fb.reg_names.iter().any(|n| !n.is_empty()) {
            let unnamed = (fb.num_regs as usize).saturating_sub(fb.reg_names.len());
            let names = fb.reg_names.iter().map(String::as_str);
            f.debug.reg_names = names.chain(std::iter::repeat_n("", unnamed)).collect();
        }
        self.defined[fb.id.index()] = true;
    }

    /// Verifies and returns the module.
    pub fn build(self) -> Result<Module, VerifyError> {
        verify_module(&self.module)?;
        Ok(self.module)
    }
}

/// Emits one function's instructions. Registers are allocated on demand.
pub struct FunctionBuilder {
    id: FuncId,
    num_regs: u32,
    code: Vec<Instr>,
    ops: Vec<Operand>,
    labels: Vec<Option<u32>>,
    reg_names: Vec<String>,
    attrs: Vec<Attrs>,
    placements: Vec<crate::ir::module::Placement>,
}

impl FunctionBuilder {
    pub fn id(&self) -> FuncId {
        self.id
    }

    /// Declares that tensor parameter `param` must be a view of storage parameter `storage`
    /// at byte `offset` ([`crate::ir::module::Placement`]).
    pub fn place_param(&mut self, param: u32, storage: u32, offset: u64) {
        // Kept in parameter order, the order the assembler and the printer use.
        let at = self.placements.partition_point(|p| p.param < param);
        self.placements.insert(at, crate::ir::module::Placement { param, storage, offset });
    }

    pub fn param(&self, i: u32) -> Reg {
        Reg(i)
    }

    pub fn new_reg(&mut self) -> Reg {
        self.num_regs += 1;
        self.reg_names.push(String::new());
        Reg(self.num_regs - 1)
    }

    /// Names a register for diagnostics and disassembly.
    pub fn name(&mut self, r: Reg, name: &str) {
        if let Some(n) = self.reg_names.get_mut(r.index()) {
            *n = name.to_string();
        }
    }

    fn list(&mut self, ops: &[Operand]) -> u32 {
        let start = self.ops.len() as u32;
        self.ops.extend_from_slice(ops);
        start
    }

    pub fn int(&mut self, v: i64) -> Reg {
        let dst = self.new_reg();
        self.code.push(Instr::LoadInt { dst, value: v });
        dst
    }

    pub fn float(&mut self, v: f64) -> Reg {
        let dst = self.new_reg();
        self.code.push(Instr::LoadFloat { dst, value: v });
        dst
    }

    pub fn konst(&mut self, c: ConstId) -> Reg {
        let dst = self.new_reg();
        self.code.push(Instr::LoadConst { dst, konst: c });
        dst
    }

    pub fn mov(&mut self, dst: Reg, src: Reg) {
        self.code.push(Instr::Mov { dst, src });
    }

    pub fn shape(&mut self, dims: &[Operand]) -> Reg {
        let dst = self.new_reg();
        let start = self.list(dims);
        self.code.push(Instr::MakeShape { dst, dims: start, ndim: dims.len() as u8 });
        dst
    }

    /// `align: None` uses the device's base alignment.
    pub fn alloc_storage(&mut self, size: Operand, align: Option<Operand>, device: u8, scope: Scope) -> Reg {
        let dst = self.new_reg();
        let size = self.encode_now(size);
        let align = self.encode_now(align.unwrap_or(Operand::Int(0)));
        self.code.push(Instr::AllocStorage { dst, size, align, device, scope });
        dst
    }

    /// Storage operands are single words in the instruction, so they are encoded now:
    /// registers and small integers only (larger sizes go through a register).
    fn encode_now(&mut self, o: Operand) -> Arg {
        match o {
            Operand::Reg(r) => Arg::reg(r),
            Operand::Int(v) => match Arg::imm(v) {
                Some(a) => a,
                None => Arg::reg(self.int(v)),
            },
            Operand::Float(v) => Arg::reg(self.float(v)),
            Operand::Const(c) => Arg::reg(self.konst(c)),
            Operand::None => Arg::NONE,
        }
    }

    pub fn alloc_tensor(&mut self, storage: Reg, offset: Operand, dtype: DType, dims: &[Operand], scope: Scope) -> Reg {
        let dst = self.new_reg();
        let mut ops = Vec::with_capacity(dims.len() + 1);
        ops.push(offset);
        ops.extend_from_slice(dims);
        let args = self.list(&ops);
        self.code.push(Instr::AllocTensor { dst, storage, args, dtype, scope, ndim: dims.len() as u8 });
        dst
    }

    pub fn kill(&mut self, r: Reg) {
        self.code.push(Instr::Kill { reg: r });
    }

    /// Calls a module function; returns `nresults` fresh result registers.
    pub fn call(&mut self, func: FuncId, nresults: usize, args: &[Operand]) -> Vec<Reg> {
        let dsts: Vec<Reg> = (0..nresults).map(|_| self.new_reg()).collect();
        let mut ops: Vec<Operand> = dsts.iter().map(|r| Operand::Reg(*r)).collect();
        ops.extend_from_slice(args);
        let list = self.list(&ops);
        self.code.push(Instr::Call { func, list, ndst: nresults as u8, nargs: args.len() as u16 });
        dsts
    }

    /// Calls `@vm.NAME`; returns its result registers (fresh).
    pub fn call_builtin(&mut self, name: &str, args: &[Operand]) -> Result<Vec<Reg>, String> {
        let b = Builtin::from_name(name).ok_or_else(|| format!("unknown builtin @vm.{name}"))?;
        let nres = b.sig().results.len();
        let dsts: Vec<Reg> = (0..nres).map(|_| self.new_reg()).collect();
        let mut ops: Vec<Operand> = dsts.iter().map(|r| Operand::Reg(*r)).collect();
        ops.extend_from_slice(args);
        let list = self.list(&ops);
        self.code.push(Instr::CallBuiltin {
            builtin: BuiltinId(b as u32),
            list,
            ndst: nres as u8,
            nargs: args.len() as u16,
        });
        Ok(dsts)
    }

    /// `call @cl.NAME(args) global [dims]` for kernel index `kernel` (see
    /// [`ModuleBuilder::kernel`]).
    pub fn call_kernel(&mut self, kernel: u32, args: &[Operand], global: &[Operand]) {
        let mut ops = args.to_vec();
        ops.extend_from_slice(global);
        let list = self.list(&ops);
        self.code.push(Instr::CallKernel { kernel, list, ndims: global.len() as u8, nargs: args.len() as u16 });
    }

    /// `call @onnx.NAME(inputs) -> (outputs) { attrs }`; `Operand::None` omits an optional
    /// input. Outputs are tensors the caller allocated.
    pub fn call_op(&mut self, name: &str, inputs: &[Operand], outputs: &[Reg], attrs: Attrs) -> Result<(), String> {
        let op = OpId::from_name(name).ok_or_else(|| format!("unknown operator @onnx.{name}"))?;
        let mut ops: Vec<Operand> = inputs.to_vec();
        ops.extend(outputs.iter().map(|r| Operand::Reg(*r)));
        let list = self.list(&ops);
        let attrs = if attrs.is_empty() {
            0
        } else {
            self.attrs.push(attrs);
            self.attrs.len() as u32
        };
        self.code.push(Instr::CallOp { op, list, attrs, nout: outputs.len() as u8, nin: inputs.len() as u16 });
        Ok(())
    }

    /// `%y0, ... = call @onnx.NAME(inputs) { attrs }` with `nout` outputs the VM allocates
    /// at run time (their shapes are known only then); returns the destination registers
    /// (fresh).
    pub fn call_op_alloc(
        &mut self,
        name: &str,
        inputs: &[Operand],
        nout: usize,
        attrs: Attrs,
    ) -> Result<Vec<Reg>, String> {
        let op = OpId::from_name(name).ok_or_else(|| format!("unknown operator @onnx.{name}"))?;
        let ndst = u8::try_from(nout).map_err(|_| format!("@onnx.{name}: {nout} outputs are too many"))?;
        let dsts: Vec<Reg> = (0..nout).map(|_| self.new_reg()).collect();
        let mut ops: Vec<Operand> = dsts.iter().map(|r| Operand::Reg(*r)).collect();
        ops.extend_from_slice(inputs);
        let list = self.list(&ops);
        let attrs = if attrs.is_empty() {
            0
        } else {
            self.attrs.push(attrs);
            self.attrs.len() as u32
        };
        self.code.push(Instr::CallOpAlloc { op, list, attrs, ndst, nin: inputs.len() as u16 });
        Ok(dsts)
    }

    pub fn ret(&mut self, vals: &[Operand]) {
        let list = self.list(vals);
        self.code.push(Instr::Ret { list, nvals: vals.len() as u16 });
    }

    /// A new label, placed later with [`FunctionBuilder::place`].
    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() as u32 - 1)
    }

    /// Binds `l` to the next instruction.
    pub fn place(&mut self, l: Label) {
        if let Some(slot) = self.labels.get_mut(l.index()) {
            *slot = Some(self.code.len() as u32);
        }
    }

    pub fn br(&mut self, l: Label) {
        self.code.push(Instr::Br { target: l });
    }

    pub fn br_if(&mut self, cond: Reg, then_: Label, else_: Label) {
        self.code.push(Instr::BrIf { cond, then_, else_ });
    }
}

/// The name the embedding API documents for [`ModuleBuilder`]: it builds programs
/// (modules) without text.
pub type ProgramBuilder = ModuleBuilder;
