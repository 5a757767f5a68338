//! The disassembler: [`Module`] → `.rxa` text.
//!
//! The text re-assembles to the same module: same bytecode, literal pool, constants and
//! debug names, for every module the assembler produces (with or without debug info).
//! Floats are printed with Rust's shortest round-trip formatting (`{:?}`), which always
//! has a `.` or an exponent so that they lex as floats; NaNs print as `nan`, `-nan` or
//! `nan(0xPAYLOAD)`. Operator calls print as `call @onnx.Name(inputs) -> (outputs)` with
//! their attributes, if any, as `{ name = value, ... }` (the form of `Attrs`'s `Display`,
//! with floats and strings written the same exact way). User kernels print as
//! `kernel @name = opencl("entry", "source")` (the source always inline, escaped) and their
//! calls as `call @cl.name(args) global [dims]`.
//!
//! Everything is written into one `String`; names are resolved once per function, so that
//! printing an instruction allocates nothing.

use rustc_hash::FxHashSet as FastSet;
use rxvm_vm::builtins::BUILTINS;
use rxvm_vm::bytecode::EntityRef;
use rxvm_vm::bytecode::{Arg, ArgKind, Instr, Reg};
use rxvm_vm::module::{ConstData, Constant, Function, Literal, Module, UserKernel};
use rxvm_vm::ops::{AttrValue, Attrs, OpId};
use rxvm_vm::types::{DType, Dim, Scope, Type};
use std::borrow::Cow;
use std::fmt::Write;

/// Prints `m` as assembly text.
pub fn print_module(m: &Module) -> String {
    let code_words: usize = m.funcs.values().map(|f| f.code.len()).sum();
    let const_bytes: usize = m
        .consts
        .values()
        .map(|c| match &c.data {
            ConstData::Bytes(b) => b.len() * 3,
            ConstData::Fill(_) => 16,
        })
        .sum();
    let kernel_bytes: usize =
        m.kernels.iter().map(|k| 32 + k.name.len() + k.entry.len() + k.source.len() * 9 / 8).sum();
    let mut out = String::with_capacity(64 + code_words * 32 + const_bytes + kernel_bytes);
    out.push_str("module ");
    if is_ident(&m.name) {
        out.push_str(&m.name);
    } else {
        push_string(&mut out, &m.name);
    }
    out.push('\n');
    if !m.consts.is_empty() {
        out.push('\n');
        for c in m.consts.values() {
            print_const(&mut out, c);
        }
    }
    if !m.kernels.is_empty() {
        out.push('\n');
        for k in &m.kernels {
            print_kernel(&mut out, k);
        }
    }
    for f in m.funcs.values() {
        out.push('\n');
        print_func(&mut out, m, f);
    }
    out
}

/// Can `s` be written as a bare identifier (labels, module name)?
pub fn is_ident(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
        && s != "inf"
        && s != "nan"
}

/// Can `s` follow `%` or `@`?
pub fn is_sigil_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
}

fn push_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn push_u64(out: &mut String, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    // The buffer holds ASCII digits only.
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or("0"));
}

fn push_i64(out: &mut String, v: i64) {
    if v < 0 {
        out.push('-');
    }
    push_u64(out, v.unsigned_abs());
}

/// A NaN, given its sign, its payload and the dtype's default payload.
fn push_nan(out: &mut String, negative: bool, payload: u64, default: u64) {
    if negative {
        out.push('-');
    }
    out.push_str("nan");
    if payload != default {
        let _ = write!(out, "(0x{payload:x})");
    }
}

pub(crate) fn push_f64(out: &mut String, v: f64) {
    if v.is_nan() {
        let b = v.to_bits();
        push_nan(out, b >> 63 == 1, b & ((1 << 52) - 1), 1 << 51);
    } else {
        let _ = write!(out, "{v:?}");
    }
}

fn push_f32(out: &mut String, v: f32) {
    if v.is_nan() {
        let b = v.to_bits();
        push_nan(out, b >> 31 == 1, (b & ((1 << 23) - 1)) as u64, 1 << 22);
    } else {
        let _ = write!(out, "{v:?}");
    }
}

fn push_f16(out: &mut String, bits: u16) {
    let h = half::f16::from_bits(bits);
    if h.is_nan() {
        push_nan(out, bits >> 15 == 1, (bits & 0x3ff) as u64, 1 << 9);
    } else {
        // Every f16 is an f32; the f32's shortest form re-parses (via f64) to the same f16.
        push_f32(out, f32::from(h));
    }
}

fn push_bf16(out: &mut String, bits: u16) {
    let h = half::bf16::from_bits(bits);
    if h.is_nan() {
        push_nan(out, bits >> 15 == 1, (bits & 0x7f) as u64, 1 << 6);
    } else {
        // Every bf16 is an f32; the f32's shortest form re-parses (via f64) to the same bf16.
        push_f32(out, f32::from(h));
    }
}

/// A float8 code: its value, which re-parses to the same code (NaN: `nan`, signed for
/// E4M3FN, with the payload for E5M2).
fn push_f8(out: &mut String, d: DType, b: u8) {
    let v = rxvm_vm::minifloat::float8_decode(d, b).unwrap_or(f64::NAN);
    if !v.is_nan() {
        return push_f64(out, v);
    }
    match d {
        DType::F8E5M2 => push_nan(out, b >> 7 == 1, (b & 3) as u64, 2),
        DType::F8E4M3FN => push_nan(out, b >> 7 == 1, 0, 0),
        _ => out.push_str("nan"),
    }
}

/// `{ a = 1, b = [2, 3], c = [0.5, 1.0], d = "x" }`: the form of [`Attrs`]'s `Display`,
/// with floats (NaN payloads included) and strings written so that they read back exactly;
/// every element of a float list is written as a float.
pub(crate) fn push_attrs(out: &mut String, attrs: &Attrs) {
    out.push('{');
    for (i, (name, v)) in attrs.iter().enumerate() {
        out.push_str(if i == 0 { " " } else { ", " });
        out.push_str(name);
        out.push_str(" = ");
        match v {
            AttrValue::Int(x) => push_i64(out, *x),
            AttrValue::Float(x) => push_f64(out, *x),
            AttrValue::Ints(xs) => push_list(out, xs, |out, x| push_i64(out, *x)),
            AttrValue::Floats(xs) => push_list(out, xs, |out, x| push_f64(out, *x)),
            AttrValue::Str(s) => push_string(out, s),
        }
    }
    out.push_str(if attrs.is_empty() { "}" } else { " }" });
}

fn push_list<T>(out: &mut String, xs: &[T], mut each: impl FnMut(&mut String, &T)) {
    out.push('[');
    for (i, x) in xs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        each(out, x);
    }
    out.push(']');
}

/// A type; symbolic dimensions by the function's register names.
fn push_type(out: &mut String, t: &Type, names: &Names<'_>) {
    match t {
        Type::Tensor { dtype, dims } if t.symbols().next().is_some() => {
            out.push_str(dtype.name());
            out.push('[');
            for (i, d) in dims.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                match d {
                    Dim::Known(v) => push_u64(out, *v as u64),
                    Dim::Any => out.push('?'),
                    Dim::Sym { reg, .. } => {
                        out.push('%');
                        push_reg_name(out, names.regs.get(*reg as usize), *reg);
                    }
                }
            }
            out.push(']');
        }
        _ => {
            let _ = write!(out, "{t}");
        }
    }
}

fn push_tensor_type(out: &mut String, dtype: DType, shape: &[i64]) {
    out.push_str(dtype.name());
    out.push('[');
    for (i, d) in shape.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_i64(out, *d);
    }
    out.push(']');
}

fn print_const(out: &mut String, c: &Constant) {
    out.push_str("const @");
    out.push_str(&c.name);
    out.push_str(": ");
    push_tensor_type(out, c.dtype, &c.shape);
    out.push_str(" = ");
    match &c.data {
        ConstData::Fill(v) => {
            out.push_str("fill(");
            let integral = v.fract() == 0.0 && v.abs() < 9.2e18;
            if !c.dtype.is_float() && integral {
                push_i64(out, *v as i64);
            } else {
                push_f64(out, *v);
            }
            out.push(')');
        }
        ConstData::Bytes(b) => {
            out.push('[');
            let size = c.dtype.size();
            for (i, e) in b.chunks_exact(size).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let mut w = [0u8; 8];
                w[..size].copy_from_slice(e);
                let raw = u64::from_le_bytes(w);
                match c.dtype {
                    DType::F64 => push_f64(out, f64::from_bits(raw)),
                    DType::F32 => push_f32(out, f32::from_bits(raw as u32)),
                    DType::F16 => push_f16(out, raw as u16),
                    DType::BF16 => push_bf16(out, raw as u16),
                    d @ (DType::F8E4M3FN | DType::F8E5M2 | DType::F8E4M3FNUZ | DType::F8E5M2FNUZ | DType::F8E8M0) => {
                        push_f8(out, d, raw as u8)
                    }
                    DType::I8 => push_i64(out, raw as u8 as i8 as i64),
                    DType::I16 => push_i64(out, raw as u16 as i16 as i64),
                    DType::I32 => push_i64(out, raw as u32 as i32 as i64),
                    DType::I64 => push_i64(out, raw as i64),
                    DType::U8 | DType::U16 | DType::U32 | DType::U64 => push_u64(out, raw),
                    DType::Bool => match raw {
                        0 => out.push_str("false"),
                        1 => out.push_str("true"),
                        v => push_u64(out, v),
                    },
                }
            }
            out.push(']');
        }
    }
    out.push('\n');
}

/// `kernel @name = opencl("entry", "source")`: the source always as one string literal
/// (also when it was declared with `file(...)`).
fn print_kernel(out: &mut String, k: &UserKernel) {
    out.push_str("kernel @");
    out.push_str(&k.name);
    out.push_str(" = opencl(");
    push_string(out, &k.entry);
    out.push_str(", ");
    push_string(out, &k.source);
    out.push_str(")\n");
}

/// Unique, printable names for a function's registers and labels.
/// How a register is printed (after the `%`).
enum RegName<'f> {
    Named(&'f str),
    /// `r{N}`, written without allocating.
    Generated(u32),
    Owned(String),
}

struct Names<'f> {
    regs: Vec<RegName<'f>>,
    /// Indexed by pc.
    labels: Vec<Option<Cow<'f, str>>>,
}

impl<'f> Names<'f> {
    fn new(f: &'f Function) -> Names<'f> {
        // Registers that need a name: every one referenced (not `num_regs`, which a corrupt
        // module could set to billions).
        let mut max_ref = 0usize;
        let mut see = |r: Reg| max_ref = max_ref.max(r.index() + 1);
        for ins in &f.code {
            match *ins {
                Instr::Mov { dst, src } => {
                    see(dst);
                    see(src)
                }
                Instr::LoadInt { dst, .. }
                | Instr::LoadFloat { dst, .. }
                | Instr::LoadConst { dst, .. }
                | Instr::MakeShape { dst, .. }
                | Instr::AllocStorage { dst, .. } => see(dst),
                Instr::AllocTensor { dst, storage, .. } => {
                    see(dst);
                    see(storage)
                }
                Instr::Kill { reg } => see(reg),
                Instr::BrIf { cond, .. } => see(cond),
                Instr::Nop {}
                | Instr::Call { .. }
                | Instr::CallBuiltin { .. }
                | Instr::Ret { .. }
                | Instr::CallOp { .. }
                | Instr::CallOpAlloc { .. }
                | Instr::CallKernel { .. }
                | Instr::Br { .. } => {}
            }
        }
        for a in &f.args {
            if let ArgKind::Reg(r) = a.kind() {
                see(r);
            }
        }
        let n = max_ref.max(f.debug.reg_names.len()).max(f.params.len());
        let mut used: FastSet<&str> = FastSet::default();
        let mut regs: Vec<RegName<'f>> = Vec::with_capacity(n);
        for i in 0..n {
            let name = f.debug.reg_names.get(i).filter(|s| is_sigil_name(s));
            regs.push(match name {
                Some(s) if used.insert(s) => RegName::Named(s),
                _ => RegName::Generated(i as u32),
            });
        }
        // A generated `r{i}` must not collide with a source name (only possible when some
        // registers have names and others do not).
        if !used.is_empty() {
            let mut taken: FastSet<String> = FastSet::default();
            for (i, r) in regs.iter_mut().enumerate() {
                if let RegName::Generated(_) = r {
                    let mut cand = format!("r{i}");
                    if !used.contains(cand.as_str()) {
                        continue;
                    }
                    let mut k = 0;
                    while used.contains(cand.as_str()) || taken.contains(&cand) {
                        k += 1;
                        cand = format!("r{i}_{k}");
                    }
                    taken.insert(cand.clone());
                    *r = RegName::Owned(cand);
                }
            }
        }

        let len = f.code.len();
        let mut labels: Vec<Option<Cow<'f, str>>> = vec![None; len];
        let mut used: FastSet<&str> = FastSet::default();
        for (pc, name) in &f.debug.labels {
            let pc = *pc as usize;
            if pc < len && labels[pc].is_none() && is_ident(name) && used.insert(name) {
                labels[pc] = Some(Cow::Borrowed(name.as_str()));
            }
        }
        let mut taken: FastSet<String> = FastSet::default();
        let mut need = |pc: u32, labels: &mut Vec<Option<Cow<'f, str>>>| {
            let pc = pc as usize;
            if pc < len && labels[pc].is_none() {
                let mut cand = format!("L{pc}");
                let mut k = 0;
                while used.contains(cand.as_str()) || taken.contains(&cand) {
                    k += 1;
                    cand = format!("L{pc}_{k}");
                }
                taken.insert(cand.clone());
                labels[pc] = Some(Cow::Owned(cand));
            }
        };
        for ins in &f.code {
            match ins {
                Instr::Br { target } => need(target.0, &mut labels),
                Instr::BrIf { then_, else_, .. } => {
                    need(then_.0, &mut labels);
                    need(else_.0, &mut labels);
                }
                _ => {}
            }
        }
        Names { regs, labels }
    }
}

fn push_reg_name(out: &mut String, name: Option<&RegName<'_>>, index: u32) {
    match name {
        Some(RegName::Named(n)) => out.push_str(n),
        Some(RegName::Owned(n)) => out.push_str(n),
        Some(RegName::Generated(i)) => {
            out.push('r');
            push_u64(out, *i as u64);
        }
        None => {
            out.push('r');
            push_u64(out, index as u64);
        }
    }
}

struct FnPrinter<'a> {
    out: &'a mut String,
    m: &'a Module,
    f: &'a Function,
    names: Names<'a>,
}

impl FnPrinter<'_> {
    fn reg(&mut self, r: Reg) {
        self.out.push('%');
        push_reg_name(self.out, self.names.regs.get(r.index()), r.0);
    }

    fn label(&mut self, pc: u32) {
        match self.names.labels.get(pc as usize) {
            Some(Some(n)) => self.out.push_str(n),
            _ => {
                self.out.push('L');
                push_u64(self.out, pc as u64);
            }
        }
    }

    fn arg(&mut self, a: Arg) {
        match a.kind() {
            ArgKind::Reg(r) => self.reg(r),
            ArgKind::Imm(v) => push_i64(self.out, v as i64),
            ArgKind::Lit(i) => match self.m.literals.get(i as usize) {
                Some(Literal::Int(v)) => push_i64(self.out, *v),
                Some(Literal::Float(v)) => push_f64(self.out, *v),
                None => {
                    let _ = write!(self.out, "<bad literal {i}>");
                }
            },
            ArgKind::Const(c) => match self.m.consts.get(c) {
                Some(k) => {
                    self.out.push('@');
                    self.out.push_str(&k.name);
                }
                None => {
                    let _ = write!(self.out, "<bad constant {}>", c.0);
                }
            },
            ArgKind::None => self.out.push_str("none"),
        }
    }

    /// `args[start..start+len]` separated by `, `.
    fn args(&mut self, start: u32, len: usize) {
        match self.f.arg_slice(start, len) {
            Some(list) => {
                for (i, a) in list.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.arg(*a);
                }
            }
            None => {
                let _ = write!(self.out, "<bad list {start}+{len}>");
            }
        }
    }

    fn dst(&mut self, r: Reg) {
        self.reg(r);
        self.out.push_str(" = ");
    }

    fn scope(&mut self, s: Scope) {
        if s != Scope::Global {
            self.out.push_str(", scope ");
            push_string(self.out, s.name());
        }
    }

    fn instr(&mut self, ins: &Instr) {
        match *ins {
            Instr::Nop {} => self.out.push_str("nop"),
            Instr::Mov { dst, src } => {
                self.dst(dst);
                self.out.push_str("mov ");
                self.reg(src);
            }
            Instr::LoadInt { dst, value } => {
                self.dst(dst);
                self.out.push_str("int ");
                push_i64(self.out, value);
            }
            Instr::LoadFloat { dst, value } => {
                self.dst(dst);
                self.out.push_str("float ");
                push_f64(self.out, value);
            }
            Instr::LoadConst { dst, konst } => {
                self.dst(dst);
                self.out.push_str("const ");
                self.arg(Arg::konst(konst));
            }
            Instr::MakeShape { dst, dims, ndim } => {
                self.dst(dst);
                self.out.push_str("shape [");
                self.args(dims, ndim as usize);
                self.out.push(']');
            }
            Instr::AllocStorage { dst, size, align, device, scope } => {
                self.dst(dst);
                self.out.push_str("alloc_storage ");
                self.arg(size);
                if align.kind() != ArgKind::Imm(0) {
                    self.out.push_str(", align ");
                    self.arg(align);
                }
                if device != 0 {
                    self.out.push_str(", device ");
                    push_u64(self.out, device as u64);
                }
                self.scope(scope);
            }
            Instr::AllocTensor { dst, storage, args, dtype, scope, ndim } => {
                self.dst(dst);
                self.out.push_str("alloc_tensor ");
                self.reg(storage);
                self.out.push_str(", ");
                match self.f.arg_slice(args, ndim as usize + 1) {
                    Some(list) => {
                        self.arg(list[0]);
                        self.out.push_str(", ");
                        self.out.push_str(dtype.name());
                        self.out.push('[');
                        for (i, a) in list[1..].iter().enumerate() {
                            if i > 0 {
                                self.out.push_str(", ");
                            }
                            self.arg(*a);
                        }
                        self.out.push(']');
                    }
                    None => {
                        let _ = write!(self.out, "<bad list {args}+{}>", ndim as usize + 1);
                    }
                }
                self.scope(scope);
            }
            Instr::Kill { reg } => {
                self.out.push_str("kill ");
                self.reg(reg);
            }
            Instr::Call { func, list, ndst, nargs } => {
                self.call_dsts(list, ndst);
                self.out.push_str("call @");
                match self.m.funcs.get(func) {
                    Some(g) => self.out.push_str(&g.name),
                    None => {
                        let _ = write!(self.out, "<bad function {}>", func.0);
                    }
                }
                self.call_args(list, ndst, nargs);
            }
            Instr::CallBuiltin { builtin, list, ndst, nargs } => {
                self.call_dsts(list, ndst);
                self.out.push_str("call @vm.");
                match BUILTINS.get(builtin.index()) {
                    Some(b) => self.out.push_str(b.name),
                    None => {
                        let _ = write!(self.out, "<bad builtin {}>", builtin.0);
                    }
                }
                self.call_args(list, ndst, nargs);
            }
            Instr::CallOp { op, list, attrs, nout, nin } | Instr::CallOpAlloc { op, list, attrs, ndst: nout, nin } => {
                let allocates = matches!(ins, Instr::CallOpAlloc { .. });
                if allocates {
                    self.call_dsts(list, nout);
                }
                self.out.push_str("call @onnx.");
                match OpId::get(op.0) {
                    Some(d) => self.out.push_str(d.name),
                    None => {
                        let _ = write!(self.out, "<bad operator {}>", op.0);
                    }
                }
                self.out.push('(');
                if allocates {
                    self.args(list.wrapping_add(nout as u32), nin as usize);
                    self.out.push(')');
                } else {
                    self.args(list, nin as usize);
                    self.out.push_str(") -> (");
                    self.args(list.wrapping_add(nin as u32), nout as usize);
                    self.out.push(')');
                }
                if attrs != 0 {
                    self.out.push(' ');
                    match self.m.attrs.get(attrs as usize - 1) {
                        Some(set) => push_attrs(self.out, set),
                        None => {
                            let _ = write!(self.out, "<bad attributes {}>", attrs - 1);
                        }
                    }
                }
            }
            Instr::CallKernel { kernel, list, ndims, nargs } => {
                self.out.push_str("call @cl.");
                match self.m.kernels.get(kernel as usize) {
                    Some(k) => self.out.push_str(&k.name),
                    None => {
                        let _ = write!(self.out, "<bad kernel {kernel}>");
                    }
                }
                self.out.push('(');
                self.args(list, nargs as usize);
                self.out.push_str(") global [");
                self.args(list.wrapping_add(nargs as u32), ndims as usize);
                self.out.push(']');
            }
            Instr::Ret { list, nvals } => {
                self.out.push_str("ret");
                if nvals > 0 {
                    self.out.push(' ');
                    self.args(list, nvals as usize);
                }
            }
            Instr::Br { target } => {
                self.out.push_str("br ");
                self.label(target.0);
            }
            Instr::BrIf { cond, then_, else_ } => {
                self.out.push_str("br_if ");
                self.reg(cond);
                self.out.push_str(", ");
                self.label(then_.0);
                self.out.push_str(", ");
                self.label(else_.0);
            }
        }
    }

    fn call_dsts(&mut self, list: u32, ndst: u8) {
        if ndst > 0 {
            self.args(list, ndst as usize);
            self.out.push_str(" = ");
        }
    }

    fn call_args(&mut self, list: u32, ndst: u8, nargs: u16) {
        self.out.push('(');
        self.args(list.wrapping_add(ndst as u32), nargs as usize);
        self.out.push(')');
    }
}

/// Instruction `pc` of `f` as the disassembler prints it (for debuggers); `None` when `pc`
/// is out of range.
pub fn print_instr(m: &Module, f: &Function, pc: usize) -> Option<String> {
    let ins = f.code.get(pc)?;
    let mut out = String::new();
    let mut p = FnPrinter { out: &mut out, m, f, names: Names::new(f) };
    p.instr(ins);
    Some(out)
}

fn print_func(out: &mut String, m: &Module, f: &Function) {
    let names = Names::new(f);
    out.push_str("func @");
    out.push_str(&f.name);
    out.push('(');
    for (i, t) in f.params.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push('%');
        push_reg_name(out, names.regs.get(i), i as u32);
        out.push_str(": ");
        push_type(out, t, &names);
        if let Some(pl) = f.placement(i as u32) {
            out.push_str(" in %");
            push_reg_name(out, names.regs.get(pl.storage as usize), pl.storage);
            out.push_str(" at ");
            push_u64(out, pl.offset);
        }
    }
    out.push(')');
    match f.results.as_slice() {
        [] => {}
        [t] => {
            out.push_str(" -> ");
            push_type(out, t, &names);
        }
        ts => {
            out.push_str(" -> (");
            for (i, t) in ts.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_type(out, t, &names);
            }
            out.push(')');
        }
    }
    let bounded: Vec<(u32, i64)> = f.symbols().into_iter().filter_map(|(r, m)| Some((r, m?))).collect();
    for (k, (reg, max)) in bounded.iter().enumerate() {
        out.push_str(if k == 0 { " where %" } else { ", %" });
        push_reg_name(out, names.regs.get(*reg as usize), *reg);
        out.push_str(" <= ");
        push_u64(out, *max as u64);
    }
    out.push_str(" {\n");
    let mut p = FnPrinter { out, m, f, names };
    for (pc, ins) in f.code.iter().enumerate() {
        if let Some(Some(l)) = p.names.labels.get(pc) {
            p.out.push_str(l);
            p.out.push_str(":\n");
        }
        p.out.push_str("  ");
        p.instr(ins);
        p.out.push('\n');
    }
    p.out.push_str("}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        let mut s = String::new();
        for v in [0i64, 7, -7, i64::MIN, i64::MAX, 1234567890] {
            s.clear();
            push_i64(&mut s, v);
            assert_eq!(s, v.to_string());
        }
        s.clear();
        push_u64(&mut s, u64::MAX);
        assert_eq!(s, u64::MAX.to_string());
    }

    #[test]
    fn floats_lex_as_floats() {
        let mut s = String::new();
        for v in [1.0, -0.0, 1e-7, 1e300, f64::INFINITY, f64::NEG_INFINITY, 0.1, 123456789012345680.0] {
            s.clear();
            push_f64(&mut s, v);
            let toks = crate::lexer::lex(&s).expect("lexes");
            assert_eq!(toks.len(), 1, "{s}");
            assert_eq!(toks[0].kind, crate::lexer::TokKind::Float, "{s}");
            assert_eq!(crate::parser::float_value(&s), crate::ast::FloatVal::Num(v), "{s}");
        }
        s.clear();
        push_f64(&mut s, f64::NAN);
        assert_eq!(s, "nan");
        s.clear();
        push_f64(&mut s, -f64::from_bits(0x7ff0_0000_0000_0001));
        assert_eq!(s, "-nan(0x1)");
    }

    #[test]
    fn attributes_print_like_their_display() {
        let attrs = Attrs(vec![
            ("i".into(), AttrValue::Int(-3)),
            ("f".into(), AttrValue::Float(2.0)),
            ("g".into(), AttrValue::Float(1e-7)),
            ("is".into(), AttrValue::Ints(vec![1, 2])),
            ("e".into(), AttrValue::Ints(vec![])),
            ("fs".into(), AttrValue::Floats(vec![1.0, -0.5, 1e300])),
            ("s".into(), AttrValue::Str("a\"b\\".into())),
        ]);
        let mut s = String::new();
        push_attrs(&mut s, &attrs);
        assert_eq!(s, attrs.to_string());
        assert_eq!(
            s,
            "{ i = -3, f = 2.0, g = 1e-7, is = [1, 2], e = [], fs = [1.0, -0.5, 1e300], s = \"a\\\"b\\\\\" }"
        );
        // NaNs keep their payload, in the form the lexer reads.
        s.clear();
        push_attrs(
            &mut s,
            &Attrs(vec![("n".into(), AttrValue::Floats(vec![f64::NAN, -f64::from_bits(0x7ff0_0000_0000_0002)]))]),
        );
        assert_eq!(s, "{ n = [nan, -nan(0x2)] }");
        s.clear();
        push_attrs(&mut s, &Attrs::default());
        assert_eq!(s, "{}");
    }

    #[test]
    fn placements_print_after_the_parameter_type() {
        let src = "func @f(%arena: storage, %x: f32[1, 3, 4, 4] in %arena at 4096, %y: u8[2] in %arena at 0x20) {\n  ret\n}\n";
        let m = crate::assemble(src, "p.rxa").unwrap_or_else(|d| panic!("{}", d.render()));
        let text = print_module(&m);
        assert!(
            text.contains(
                "func @f(%arena: storage, %x: f32[1, 3, 4, 4] in %arena at 4096, %y: u8[2] in %arena at 32) {"
            ),
            "{text}"
        );
        let mut stripped = m.clone();
        stripped.strip_debug();
        let text = print_module(&stripped);
        assert!(
            text.contains("(%r0: storage, %r1: f32[1, 3, 4, 4] in %r0 at 4096, %r2: u8[2] in %r0 at 32)"),
            "{text}"
        );
        // The largest offset prints in full and reads back.
        let mut big = m.clone();
        big.funcs[rxvm_vm::bytecode::FuncId(0)].params[2] =
            Type::Tensor { dtype: DType::U8, dims: vec![rxvm_vm::types::Dim::Known(0)] };
        big.funcs[rxvm_vm::bytecode::FuncId(0)].placements[1].offset = u64::MAX;
        let text = print_module(&big);
        assert!(text.contains(&format!("%y: u8[0] in %arena at {}", u64::MAX)), "{text}");
        let back = crate::assemble(&text, "p.rxa").unwrap_or_else(|d| panic!("{}", d.render()));
        assert_eq!(
            back.funcs[rxvm_vm::bytecode::FuncId(0)].placements,
            big.funcs[rxvm_vm::bytecode::FuncId(0)].placements
        );
    }

    #[test]
    fn idents() {
        assert!(is_ident("loop_1.x"));
        assert!(!is_ident("1abc"));
        assert!(!is_ident("inf"));
        assert!(!is_ident(""));
        assert!(is_sigil_name("0"));
        assert!(!is_sigil_name("a b"));
    }
}
