//! From the parse tree to a [`Module`]: name resolution, register numbering, literal
//! interning, label resolution, constant encoding and debug info. Also keeps, for every
//! instruction, the spans of its operands so that verifier errors can point at them.

use crate::ast::*;
use crate::diag::Diagnostic;
use crate::stream;
use rustc_hash::FxHashMap as FastMap;
use rxvm_vm::builtins::{Builtin, BUILTINS};
use rxvm_vm::bytecode::{Arg, BuiltinId, ConstId, FuncId, Instr, Label, OpId, Reg};
use rxvm_vm::module::{
    ConstData, Constant, FuncDebug, Function, Literal, Module, NameList, Placement, SourceLoc, UserKernel,
};
use rxvm_vm::ops::{AttrTable, AttrValue, Attrs, OPS};
use rxvm_vm::types::{DType, Dim, Kind, Scope, Type};
use rxvm_vm::VerifyError;
use smallvec::SmallVec;
use std::path::Path;

/// Where each part of the module came from in the text.
#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    /// The `module` declaration, if any.
    pub module_span: Option<Span>,
    pub funcs: Vec<FuncMap>,
}

#[derive(Clone, Debug, Default)]
pub struct FuncMap {
    /// From `func` to the end of the result types.
    pub header: Span,
    pub instrs: Vec<InstrMap>,
}

#[derive(Clone, Debug, Default)]
pub struct InstrMap {
    pub span: Span,
    /// Operands in written order, destinations first (absent optional clauses of
    /// `alloc_storage`/`alloc_tensor` get the instruction's span). An operator call has its
    /// inputs, its outputs, then its attribute block (the instruction's span when absent).
    pub operands: SmallVec<[Span; 6]>,
    /// An operator call's attributes: name and the span of `name = value`.
    pub attrs: Vec<(String, Span)>,
}

impl InstrMap {
    /// The attribute a verifier message is about: the first one named in backquotes, else
    /// the one whose name appears first as a word.
    fn attr_in_message(&self, message: &str) -> Option<Span> {
        if let Some(&(_, s)) = self.attrs.iter().find(|(n, _)| message.contains(&format!("`{n}`"))) {
            return Some(s);
        }
        let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        self.attrs
            .iter()
            .filter_map(|(n, s)| {
                let pos = message.match_indices(n.as_str()).map(|(p, _)| p).find(|&p| {
                    let before = message[..p].chars().next_back();
                    let after = message[p + n.len()..].chars().next();
                    !before.is_some_and(is_word) && !after.is_some_and(is_word)
                })?;
                Some((pos, *s))
            })
            .min_by_key(|(p, _)| *p)
            .map(|(_, s)| s)
    }
}

impl SourceMap {
    /// The diagnostic for a verifier error: at the operand, else the instruction, else the
    /// function header.
    pub fn verify_diagnostic(&self, e: &VerifyError) -> Diagnostic {
        let fmap = e.func.and_then(|f| self.funcs.get(f.0 as usize));
        let span = match (fmap, e.pc) {
            (Some(f), Some(pc)) => match f.instrs.get(pc) {
                Some(ins) => match e.operand {
                    // The attribute block of an operator call: the attribute the message names.
                    Some(o) if o + 1 == ins.operands.len() && !ins.attrs.is_empty() => {
                        ins.attr_in_message(&e.message).unwrap_or(ins.operands[o])
                    }
                    Some(o) => ins.operands.get(o).copied().unwrap_or(ins.span),
                    None => ins.span,
                },
                None => f.header,
            },
            (Some(f), None) => f.header,
            (None, _) => self.module_span.unwrap_or_default(),
        };
        let mut d = Diagnostic::new(span, e.message.clone());
        d.notes = e.notes.clone();
        d
    }
}

/// Precomputed line starts, to turn byte offsets into 1-based line/column.
struct Lines<'a> {
    src: &'a str,
    starts: Vec<usize>,
    /// The line of the previous lookup: instructions are looked up in text order, so the
    /// next one is usually on the same line or a few lines further.
    hint: std::cell::Cell<usize>,
}

impl<'a> Lines<'a> {
    /// Only the first line start; the rest are appended as they are found.
    fn first(src: &'a str) -> Lines<'a> {
        Lines { src, starts: vec![0], hint: std::cell::Cell::new(1) }
    }

    fn new(src: &'a str) -> Lines<'a> {
        let mut starts = vec![0];
        starts.extend(src.bytes().enumerate().filter(|(_, b)| *b == b'\n').map(|(i, _)| i + 1));
        Lines { src, starts, hint: std::cell::Cell::new(1) }
    }

    /// The 1-based line holding byte `off`: the number of line starts at or before it.
    fn line_of(&self, off: usize) -> usize {
        let s = &self.starts;
        let mut line = self.hint.get();
        if line >= 1 && line <= s.len() && s[line - 1] <= off {
            // Walk forward a little from the previous answer, else search.
            let mut steps = 0;
            while line < s.len() && s[line] <= off && steps < 16 {
                line += 1;
                steps += 1;
            }
            if line == s.len() || s[line] > off {
                self.hint.set(line);
                return line;
            }
        }
        line = s.partition_point(|&st| st <= off).max(1);
        self.hint.set(line);
        line
    }

    fn loc(&self, off: usize) -> SourceLoc {
        let line = self.line_of(off);
        let start = self.starts[line - 1];
        // Columns count characters; the indentation before an instruction is ASCII.
        let col = self.src.get(start..off).map_or(0, |t| if t.is_ascii() { t.len() } else { t.chars().count() }) + 1;
        SourceLoc { line: u32::try_from(line).unwrap_or(u32::MAX), col: u32::try_from(col).unwrap_or(u32::MAX) }
    }
}

/// Levenshtein distance, for "did you mean" suggestions.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Candidates close to `name`, best first.
fn close_names<'n>(name: &str, candidates: impl Iterator<Item = &'n str>) -> Vec<&'n str> {
    let limit = (name.chars().count() / 3).max(1);
    let mut v: Vec<(usize, &str)> = candidates
        .map(|c| (distance(name, c), c))
        .filter(|(d, c)| {
            *d <= limit || c.starts_with(name) || name.starts_with(*c) || (name.len() >= 3 && c.contains(name))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, c)| c).take(3).collect()
}

fn did_you_mean(sigil: &str, close: &[&str]) -> Option<String> {
    match close {
        [] => None,
        [one] => Some(format!("did you mean `{sigil}{one}`?")),
        many => Some(format!(
            "did you mean one of: {}?",
            many.iter().map(|c| format!("`{sigil}{c}`")).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Decodes a string literal's escapes (`\\ \" \n \t \r \0`).
pub fn decode_string(s: StrLit<'_>) -> Result<String, Diagnostic> {
    let inner = s.raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')).unwrap_or(s.raw);
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.char_indices();
    while let Some((i, c)) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some((j, e)) = chars.next() else { break };
        out.push(match e {
            '\\' => '\\',
            '"' => '"',
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            '0' => '\0',
            _ => {
                let at = s.span.start + 1 + i;
                return Err(Diagnostic::new(
                    at..at + 1 + (j - i) + e.len_utf8() - 1,
                    format!("unknown escape `\\{e}`"),
                )
                .with_label("in this string")
                .with_note("the escapes are \\\\, \\\", \\n, \\t, \\r and \\0"));
            }
        });
    }
    Ok(out)
}

/// "a u8" / "an i32".
fn a_dtype(d: DType) -> String {
    match d.name().as_bytes()[0] {
        b'i' | b'f' => format!("an {}", d.name()),
        _ => format!("a {}", d.name()),
    }
}

fn dtype_list() -> String {
    DType::ALL.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
}

fn scope_list() -> String {
    Scope::ALL.iter().map(|s| format!("\"{}\"", s.name())).collect::<Vec<_>>().join(", ")
}

/// The largest kernel source `file("...")` reads.
const MAX_KERNEL_SOURCE: u64 = 16 << 20;

/// At most `limit + 1` bytes of a regular file. Devices, FIFOs and directories are refused:
/// their size says nothing (`/dev/zero` has size 0 and never ends).
fn read_regular(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
    }
    let mut v = Vec::new();
    f.take(limit.saturating_add(1)).read_to_end(&mut v)?;
    Ok(v)
}

/// Integer range of an integer dtype (bool is 0..=1).
fn int_range(d: DType) -> Option<(i128, i128)> {
    d.int_range()
}

/// Mantissa width, exponent mask and sign bit of a float dtype, as raw bits.
fn float_layout(d: DType) -> (u32, u64, u64) {
    match d {
        DType::F16 => (10, 0x7c00, 0x8000),
        DType::F32 => (23, 0x7f80_0000, 0x8000_0000),
        _ => (52, 0x7ff0_0000_0000_0000, 0x8000_0000_0000_0000),
    }
}

/// The raw bits of a NaN literal in a float dtype.
fn nan_bits(d: DType, negative: bool, payload: Option<u64>, span: Span) -> Result<u64, Diagnostic> {
    let (mant, exp, sign) = float_layout(d);
    let payload = payload.unwrap_or(1u64 << (mant - 1));
    if payload == 0 || payload >= 1u64 << mant {
        return Err(Diagnostic::new(span, format!("NaN payload out of range for {}", d.name()))
            .with_label(format!("the payload must be in 1 ..= 2^{mant} - 1"))
            .with_note(format!(
                "the payload is the {mant} mantissa bits of the {} value; `nan` alone is the default quiet NaN",
                d.name()
            )));
    }
    Ok(if negative { sign } else { 0 } | exp | payload)
}

/// An f64 from a float literal (NaN payloads in the f64 sense).
fn f64_of(f: &FloatLit<'_>) -> Result<f64, Diagnostic> {
    match f.value {
        FloatVal::Num(v) => Ok(v),
        FloatVal::Nan { negative, payload } => Ok(f64::from_bits(nan_bits(DType::F64, negative, payload, f.span)?)),
    }
}

fn int_out_of_range(span: Span, what: &str) -> Diagnostic {
    Diagnostic::new(span, format!("integer literal out of range for {what}")).with_label("out of range")
}

#[inline]
fn i64_of(i: &IntLit) -> Result<i64, Diagnostic> {
    match i.value.and_then(|v| i64::try_from(v).ok()) {
        Some(v) => Ok(v),
        None => Err(i64_error(i)),
    }
}

#[cold]
fn i64_error(i: &IntLit) -> Diagnostic {
    int_out_of_range(i.span, "i64").with_note(format!("integers are in {} ..= {}", i64::MIN, i64::MAX))
}

/// Appends one element of a byte constant, little endian.
fn encode_elem(d: DType, e: &Elem<'_>, out: &mut Vec<u8>) -> Result<(), Diagnostic> {
    match (d, e) {
        (DType::Bool, Elem::Bool(b, _)) => out.push(u8::from(*b)),
        (_, Elem::Bool(_, s)) => {
            return Err(Diagnostic::new(*s, format!("`true`/`false` in {} constant", a_dtype(d)))
                .with_label("only bool constants take `true`/`false`"))
        }
        (_, Elem::Num(Number::Int(i))) => {
            if let Some((lo, hi)) = int_range(d) {
                let v = i.value.filter(|v| (lo..=hi).contains(v)).ok_or_else(|| {
                    int_out_of_range(i.span, d.name()).with_note(format!("{} values are in {lo} ..= {hi}", d.name()))
                })?;
                let bytes = (v as u64).to_le_bytes();
                out.extend_from_slice(&bytes[..d.size()]);
            } else {
                let v = i.value.ok_or_else(|| int_out_of_range(i.span, "a float"))?;
                encode_float(d, v as f64, i.span, out)?;
            }
        }
        (_, Elem::Num(Number::Float(f))) => {
            if int_range(d).is_some() {
                return Err(Diagnostic::new(f.span, format!("float literal in {} constant", a_dtype(d)))
                    .with_label("expected an integer"));
            }
            match f.value {
                FloatVal::Nan { negative, payload } => {
                    let bits = nan_bits(d, negative, payload, f.span)?;
                    out.extend_from_slice(&bits.to_le_bytes()[..d.size()]);
                }
                FloatVal::Num(v) if d == DType::F32 => {
                    // Parse the text directly as f32: no double rounding through f64.
                    let x = f.text.parse::<f32>().unwrap_or(v as f32);
                    if x.is_infinite() && v.is_finite() {
                        return Err(float_out_of_range(f.span, d));
                    }
                    out.extend_from_slice(&x.to_bits().to_le_bytes());
                }
                FloatVal::Num(v) => encode_float(d, v, f.span, out)?,
            }
        }
    }
    Ok(())
}

fn float_out_of_range(span: Span, d: DType) -> Diagnostic {
    Diagnostic::new(span, format!("float literal out of range for {}", d.name()))
        .with_label("too large: it would be infinite")
}

fn encode_float(d: DType, v: f64, span: Span, out: &mut Vec<u8>) -> Result<(), Diagnostic> {
    match d {
        DType::F64 => out.extend_from_slice(&v.to_bits().to_le_bytes()),
        DType::F32 => {
            let x = v as f32;
            if x.is_infinite() && v.is_finite() {
                return Err(float_out_of_range(span, d));
            }
            out.extend_from_slice(&x.to_bits().to_le_bytes())
        }
        _ => {
            let x = half::f16::from_f64(v);
            if x.is_infinite() && v.is_finite() {
                return Err(float_out_of_range(span, d));
            }
            out.extend_from_slice(&x.to_bits().to_le_bytes())
        }
    }
    Ok(())
}

/// A constant declaration's checked type.
struct ConstType {
    dtype: DType,
    shape: Vec<i64>,
}

/// Module-wide state while assembling.
struct Asm<'s> {
    lines: Lines<'s>,
    base_dir: Option<&'s Path>,
    errs: Vec<Diagnostic>,
    literals: Vec<Literal>,
    lit_index: FastMap<(bool, u64), u32>,
    consts: FastMap<&'s str, (ConstId, Span)>,
    funcs: FastMap<&'s str, (FuncId, Span)>,
    /// Kernels by declared name (without `cl.`).
    kernels: FastMap<&'s str, (u32, Span)>,
    /// Each function's parameter types, until it is assembled (which takes them).
    func_params: Vec<Vec<Type>>,
    /// Which parameters of each function are floats (integer literals passed there become
    /// float literals).
    float_params: Vec<SmallVec<[bool; 8]>>,
    /// Register names of the function being assembled: a buffer kept from function to
    /// function, so that each function's list is allocated once, at its size.
    reg_names: NameList,
    /// The register table of `FuncAsm`, kept from function to function.
    reg_table: FastMap<u64, u32>,
    /// Operator attribute sets, in text order of first use.
    attrs: Vec<Attrs>,
    /// Numbers `attrs`: equal sets are stored once.
    attr_table: AttrTable,
    /// Attribute sets by the text of their block (`{` to `}`), which finds most repeats
    /// without decoding them. Only sets that assembled without errors.
    attrs_by_text: FastMap<&'s str, u32>,
    /// Whether to record the [`SourceMap`]'s per-instruction spans.
    want_map: bool,
    names: CalleeNames,
    /// Assembling item by item ([`assemble_stream`]): a call may name a function defined
    /// further on, which is resolved at the end (see `fixups`).
    stream: bool,
    /// Calls of functions not yet defined: function index, pc, callee name.
    fixups: Vec<(usize, usize, &'s str)>,
    /// Set when the streaming assembler cannot finish (the reference path takes over).
    give_up: bool,
}

/// Builtins and operators by name: the same answers as `Builtin::from_name` and
/// `OpId::from_name`, by hash instead of a scan of the tables for every call.
struct CalleeNames {
    builtins: FastMap<&'static str, Builtin>,
    ops: FastMap<&'static str, OpId>,
}

impl CalleeNames {
    fn new() -> CalleeNames {
        let mut builtins = FastMap::default();
        for b in Builtin::ALL {
            builtins.entry(b.sig().name).or_insert(*b);
        }
        let mut ops = FastMap::default();
        for (i, o) in OPS.iter().enumerate() {
            ops.entry(o.name).or_insert(OpId(i as u32));
        }
        CalleeNames { builtins, ops }
    }

    /// As [`Builtin::from_name`].
    fn builtin(&self, name: &str) -> Option<Builtin> {
        self.builtins.get(name.strip_prefix("vm.").unwrap_or(name)).copied()
    }

    /// As [`OpId::from_name`].
    fn op(&self, name: &str) -> Option<OpId> {
        self.ops.get(name.strip_prefix("onnx.").unwrap_or(name)).copied()
    }
}

/// The spans of an instruction's operands, recorded only when the source map is wanted.
struct OperandSpans {
    on: bool,
    spans: SmallVec<[Span; 6]>,
}

impl OperandSpans {
    fn push(&mut self, s: Span) {
        if self.on {
            self.spans.push(s);
        }
    }
}

impl<'s> Asm<'s> {
    fn err(&mut self, d: Diagnostic) {
        self.errs.push(d);
    }

    fn literal(&mut self, l: Literal, span: Span) -> Arg {
        let key = match l {
            Literal::Int(v) => (false, v as u64),
            Literal::Float(v) => (true, v.to_bits()),
        };
        if let Some(&i) = self.lit_index.get(&key) {
            return Arg::lit(i);
        }
        let i = self.literals.len() as u32;
        if i > Arg::MAX_INDEX {
            self.err(Diagnostic::new(span, "too many distinct literals in the module"));
            return Arg::lit(0);
        }
        self.literals.push(l);
        self.lit_index.insert(key, i);
        Arg::lit(i)
    }

    fn int_arg(&mut self, i: &IntLit) -> Arg {
        match i64_of(i) {
            Ok(v) => match Arg::imm(v) {
                Some(a) => a,
                None => self.literal(Literal::Int(v), i.span),
            },
            Err(d) => {
                self.err(d);
                Arg::lit(0)
            }
        }
    }

    fn float_arg(&mut self, f: &FloatLit<'_>) -> Arg {
        match f64_of(f) {
            Ok(v) => self.literal(Literal::Float(v), f.span),
            Err(d) => {
                self.err(d);
                Arg::lit(0)
            }
        }
    }

    fn const_ref(&mut self, n: &Name<'_>) -> ConstId {
        if let Some(&(id, _)) = self.consts.get(n.text) {
            return id;
        }
        let mut d = Diagnostic::new(n.span, format!("unknown constant `@{}`", n.text)).with_label("not declared");
        let close = close_names(n.text, self.consts.keys().copied());
        if let Some(s) = did_you_mean("@", &close) {
            d = d.with_note(s);
        }
        self.err(d);
        ConstId(0)
    }

    /// The attribute set of an operator call; records where each attribute is written.
    fn attr_set(&mut self, b: &AttrBlock<'_>, spans: &mut Vec<(String, Span)>) -> Attrs {
        let mut set = Attrs(Vec::with_capacity(b.attrs.len()));
        for (k, n) in b.attrs.iter().enumerate() {
            // Blocks are short: the first earlier attribute of the same name, if any.
            if let Some(first) = b.attrs[..k].iter().find(|e| e.name.text == n.name.text).map(|e| e.name.span) {
                self.err(
                    Diagnostic::new(n.name.span, format!("duplicate attribute `{}`", n.name.text))
                        .with_label("given again here")
                        .with_secondary(first, "first given here"),
                );
                continue;
            }
            let value = match n.value {
                AttrExpr::Int(i) => i64_of(&i).map(AttrValue::Int),
                AttrExpr::Float(f) => f64_of(&f).map(AttrValue::Float),
                AttrExpr::Str(s) => decode_string(s).map(AttrValue::Str),
                AttrExpr::List { elems, .. } if elems.iter().any(|e| matches!(e, Number::Float(_))) => elems
                    .iter()
                    .map(|e| match e {
                        Number::Int(i) => i.value.map(|v| v as f64).ok_or_else(|| int_out_of_range(i.span, "a float")),
                        Number::Float(f) => f64_of(f),
                    })
                    .collect::<Result<Vec<f64>, _>>()
                    .map(AttrValue::Floats),
                // No floats (the arm above): every element is an integer.
                AttrExpr::List { elems, .. } => {
                    let mut v = Vec::with_capacity(elems.len());
                    let mut r = Ok(());
                    for e in elems {
                        if let Number::Int(i) = e {
                            match i64_of(i) {
                                Ok(x) => v.push(x),
                                Err(d) => {
                                    r = Err(d);
                                    break;
                                }
                            }
                        }
                    }
                    r.map(|()| AttrValue::Ints(v))
                }
            };
            match value {
                Ok(v) => {
                    if self.want_map {
                        spans.push((n.name.text.to_string(), n.span()));
                    }
                    set.0.push((n.name.text.to_string(), v));
                }
                Err(d) => self.err(d),
            }
        }
        set
    }

    /// The id of attribute set `set` (see [`AttrTable`]).
    fn intern_attrs(&mut self, set: Attrs, span: Span) -> u32 {
        self.attr_table.intern(&mut self.attrs, set).unwrap_or_else(|| {
            self.err(Diagnostic::new(span, "too many attribute sets in the module"));
            0
        })
    }

    fn scope(&mut self, s: Option<StrLit<'_>>) -> Scope {
        let Some(s) = s else { return Scope::Global };
        // Fast path: a known scope written without escapes needs no decoded copy.
        if let Some(inner) = s.raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
            if let Some(sc) = Scope::from_name(inner).filter(|_| !inner.contains('\\')) {
                return sc;
            }
        }
        match decode_string(s) {
            Ok(text) => match Scope::from_name(&text) {
                Some(sc) => sc,
                None => {
                    let mut d = Diagnostic::new(s.span, format!("unknown scope \"{text}\""))
                        .with_label("not a memory scope")
                        .with_note(format!("the scopes are {}", scope_list()));
                    let close = close_names(&text, Scope::ALL.iter().map(|s| s.name()));
                    if let Some(first) = close.first() {
                        d = d.with_note(format!("did you mean \"{first}\"?"));
                    }
                    self.err(d);
                    Scope::Global
                }
            },
            Err(d) => {
                self.err(d);
                Scope::Global
            }
        }
    }

    fn dtype(&mut self, n: &Name<'_>) -> Option<DType> {
        let d = DType::from_name(n.text);
        if d.is_none() {
            let mut diag = Diagnostic::new(n.span, format!("unknown dtype `{}`", n.text))
                .with_label("not an element type")
                .with_note(format!("the dtypes are {}", dtype_list()));
            if let Some(s) = did_you_mean("", &close_names(n.text, DType::ALL.iter().map(|d| d.name()))) {
                diag = diag.with_note(s);
            }
            self.err(diag);
        }
        d
    }

    fn ty(&mut self, t: &TypeExpr<'_>) -> Type {
        match t.kind {
            TypeKind::Int => Type::Int,
            TypeKind::Float => Type::Float,
            TypeKind::Shape => Type::Shape,
            TypeKind::Storage => Type::Storage,
            TypeKind::AnyTensor => Type::AnyTensor,
            TypeKind::Tensor { dtype, dims } => {
                let dtype = self.dtype(&dtype).unwrap_or(DType::F32);
                if dims.len() > u8::MAX as usize {
                    self.err(Diagnostic::new(
                        t.span,
                        format!("a tensor type has at most 255 dims, this one has {}", dims.len()),
                    ));
                }
                let dims = dims
                    .iter()
                    .map(|d| match d {
                        DimExpr::Any(_) => Dim::Any,
                        DimExpr::Known(i) => match i.value.and_then(|v| i64::try_from(v).ok()).filter(|v| *v >= 0) {
                            Some(v) => Dim::Known(v),
                            None => {
                                self.err(
                                    Diagnostic::new(i.span, "a dimension must be a non-negative i64")
                                        .with_label("invalid dimension"),
                                );
                                Dim::Any
                            }
                        },
                    })
                    .collect();
                Type::Tensor { dtype, dims }
            }
        }
    }

    fn const_type(&mut self, c: &ConstDecl<'_>) -> Option<ConstType> {
        let ty = self.ty(&c.ty);
        match ty {
            Type::Tensor { dtype, dims } => {
                let mut shape = Vec::with_capacity(dims.len());
                for (d, e) in dims.iter().zip(match c.ty.kind {
                    TypeKind::Tensor { dims, .. } => dims,
                    _ => &[],
                }) {
                    match d {
                        Dim::Known(v) => shape.push(*v),
                        Dim::Any => {
                            if let DimExpr::Any(s) = e {
                                self.err(
                                    Diagnostic::new(*s, "a constant's dimensions must be known")
                                        .with_label("`?` is not allowed here"),
                                );
                            }
                            return None;
                        }
                    }
                }
                Some(ConstType { dtype, shape })
            }
            _ => {
                self.err(
                    Diagnostic::new(c.ty.span, "a constant must have a tensor type")
                        .with_label("not a tensor type")
                        .with_note("write e.g. `const @w: f32[2, 2] = [1.0, 2.0, 3.0, 4.0]`"),
                );
                None
            }
        }
    }

    fn constant(&mut self, c: &ConstDecl<'_>) -> Constant {
        let name = c.name.text.to_string();
        let Some(ConstType { dtype, shape }) = self.const_type(c) else {
            return Constant { name, dtype: DType::F32, shape: vec![], data: ConstData::Fill(0.0) };
        };
        let type_text = Type::Tensor { dtype, dims: shape.iter().map(|&d| Dim::Known(d)).collect() }.to_string();
        let numel = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64));
        let nbytes = numel.and_then(|n| n.checked_mul(dtype.size() as u64));
        let data = match c.init {
            ConstInit::Fill(n) => ConstData::Fill(self.fill_value(dtype, &n)),
            ConstInit::List { elems, span } => {
                if numel != Some(elems.len() as u64) {
                    self.err(
                        Diagnostic::new(span, format!("wrong number of values for constant `@{name}`"))
                            .with_label(format!("{} values given", elems.len()))
                            .with_secondary(
                                c.ty.span,
                                match numel {
                                    Some(n) => format!("{type_text} has {n} elements"),
                                    None => format!("{type_text} has too many elements"),
                                },
                            ),
                    );
                    return Constant { name, dtype, shape, data: ConstData::Fill(0.0) };
                }
                let mut bytes = Vec::with_capacity(elems.len() * dtype.size());
                for e in elems {
                    if let Err(d) = encode_elem(dtype, e, &mut bytes) {
                        self.err(d);
                    }
                }
                ConstData::Bytes(bytes)
            }
            ConstInit::File(s) => match self.file_bytes(s, nbytes, &type_text) {
                Some(b) => ConstData::Bytes(b),
                None => ConstData::Fill(0.0),
            },
        };
        Constant { name, dtype, shape, data }
    }

    fn fill_value(&mut self, d: DType, n: &Number<'_>) -> f64 {
        let r =
            match (int_range(d), n) {
                (None, Number::Int(i)) => i.value.map(|v| v as f64).ok_or_else(|| int_out_of_range(i.span, d.name())),
                (None, Number::Float(f)) => f64_of(f),
                (Some((lo, hi)), Number::Int(i)) => match i.value.filter(|v| (lo..=hi).contains(v)) {
                    Some(v) if (v as f64) as i128 == v => Ok(v as f64),
                    Some(_) => Err(Diagnostic::new(i.span, "fill value is not exactly representable")
                        .with_label("fill values are stored as f64")
                        .with_note("use a list of values instead")),
                    None => Err(int_out_of_range(i.span, d.name())
                        .with_note(format!("{} values are in {lo} ..= {hi}", d.name()))),
                },
                (Some((lo, hi)), Number::Float(f)) => match f.value {
                    // `+ 0.0` turns -0.0 into 0.0: an integer has one zero, and the printer
                    // writes it as `fill(0)`.
                    FloatVal::Num(v) if v.fract() == 0.0 && v >= lo as f64 && v <= hi as f64 => Ok(v + 0.0),
                    _ => Err(Diagnostic::new(
                        f.span,
                        format!("fill value must be an integer in {lo} ..= {hi} for {} constant", a_dtype(d)),
                    )
                    .with_label("not a valid element")),
                },
            };
        match r {
            Ok(v) => v,
            Err(e) => {
                self.err(e);
                0.0
            }
        }
    }

    fn file_bytes(&mut self, s: StrLit<'_>, nbytes: Option<u64>, type_text: &str) -> Option<Vec<u8>> {
        let rel = match decode_string(s) {
            Ok(p) => p,
            Err(d) => {
                self.err(d);
                return None;
            }
        };
        let path = match self.base_dir {
            Some(b) => b.join(&rel),
            None => Path::new(&rel).to_path_buf(),
        };
        // Check the size before reading, so a wrong path to a huge file fails fast.
        let meta_len = std::fs::metadata(&path).map(|m| m.len());
        let bytes = match meta_len {
            Ok(len) if Some(len) != nbytes => Err(len),
            Ok(len) => match read_regular(&path, len) {
                Ok(b) => Ok(b),
                Err(e) => {
                    self.err(file_error(s, &rel, &path, &e));
                    return None;
                }
            },
            Err(e) => {
                self.err(file_error(s, &rel, &path, &e));
                return None;
            }
        };
        match bytes {
            Ok(b) if Some(b.len() as u64) == nbytes => Some(b),
            Ok(b) => {
                self.err(size_error(s, &rel, b.len() as u64, nbytes, type_text));
                None
            }
            Err(len) => {
                self.err(size_error(s, &rel, len, nbytes, type_text));
                None
            }
        }
    }
}

impl Asm<'_> {
    fn kernel(&mut self, k: &KernelDecl<'_>) -> UserKernel {
        let name = k.name.text.to_string();
        let entry = decode_string(k.entry).unwrap_or_else(|d| {
            self.err(d);
            String::new()
        });
        let source = match k.source {
            KernelSource::Str(s) => decode_string(s),
            KernelSource::File(s) => self.file_text(s),
        }
        .unwrap_or_else(|d| {
            self.err(d);
            String::new()
        });
        UserKernel { name, entry, source }
    }

    /// The text of `file("path")`, relative to the `.rxa` file.
    fn file_text(&self, s: StrLit<'_>) -> Result<String, Diagnostic> {
        let rel = decode_string(s)?;
        let path = match self.base_dir {
            Some(b) => b.join(&rel),
            None => Path::new(&rel).to_path_buf(),
        };
        let bytes = read_regular(&path, MAX_KERNEL_SOURCE).map_err(|e| file_error(s, &rel, &path, &e))?;
        if bytes.len() as u64 > MAX_KERNEL_SOURCE {
            return Err(Diagnostic::new(s.span, format!("`{rel}` is larger than {MAX_KERNEL_SOURCE} bytes"))
                .with_label("kernel source too large"));
        }
        String::from_utf8(bytes).map_err(|e| {
            Diagnostic::new(s.span, format!("`{rel}` is not UTF-8 text"))
                .with_label("not OpenCL C source")
                .with_note(format!("invalid UTF-8 at byte {}", e.utf8_error().valid_up_to()))
        })
    }
}

fn file_error(s: StrLit<'_>, rel: &str, path: &Path, e: &std::io::Error) -> Diagnostic {
    Diagnostic::new(s.span, format!("cannot read `{rel}`: {e}"))
        .with_label("file not readable")
        .with_note(format!("looked for {}", path.display()))
        .with_note("paths are relative to the directory of the .rxa file")
}

fn size_error(s: StrLit<'_>, rel: &str, len: u64, nbytes: Option<u64>, type_text: &str) -> Diagnostic {
    Diagnostic::new(s.span, format!("`{rel}` has the wrong size"))
        .with_label(format!("this file has {len} bytes"))
        .with_note(match nbytes {
            Some(n) => format!("{type_text} needs exactly {n} bytes (raw little-endian elements)"),
            None => format!("{type_text} is too large"),
        })
}

/// Equal names. Names are short: comparing them inline is faster than calling `memcmp`,
/// which `str`'s equality does.
fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

fn name_hash(name: &str) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    std::hash::Hasher::write(&mut h, name.as_bytes());
    std::hash::Hasher::finish(&h)
}

/// Per-function state.
struct FuncAsm<'s> {
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
}

impl<'s> FuncAsm<'s> {
    /// The register named `name` (with hash `h`), if any.
    fn find_reg(&self, name: &str, h: u64) -> Option<u32> {
        match self.regs.get(&h) {
            Some(&r) if self.reg_names.get(r as usize).is_some_and(|n| same_name(n, name)) => Some(r),
            _ if self.collided => self.reg_names.iter().position(|n| same_name(n, name)).map(|i| i as u32),
            _ => None,
        }
    }

    fn reg(&mut self, n: &Name<'_>, errs: &mut Vec<Diagnostic>) -> Reg {
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
    fn list_start(&self, span: Span, errs: &mut Vec<Diagnostic>) -> u32 {
        match u32::try_from(self.args.len()) {
            Ok(s) => s,
            Err(_) => {
                errs.push(Diagnostic::new(span, "too many operands in this function"));
                0
            }
        }
    }
}

fn count_u8(n: usize, span: Span, what: &str, errs: &mut Vec<Diagnostic>) -> u8 {
    u8::try_from(n).unwrap_or_else(|_| {
        errs.push(
            Diagnostic::new(span, format!("too many {what}: {n}"))
                .with_label("the encoding allows at most 255")
                .with_note("the count is stored in 8 bits"),
        );
        0
    })
}

fn count_u16(n: usize, span: Span, what: &str, errs: &mut Vec<Diagnostic>) -> u16 {
    u16::try_from(n).unwrap_or_else(|_| {
        errs.push(
            Diagnostic::new(span, format!("too many {what}: {n}"))
                .with_label("the encoding allows at most 65535")
                .with_note("the count is stored in 16 bits"),
        );
        0
    })
}

/// Assembles a parsed module. `base_dir` resolves `file("...")` paths.
pub fn assemble_ast(
    ast: &SourceModule<'_>,
    src: &str,
    file_name: &str,
    base_dir: Option<&Path>,
) -> Result<(Module, SourceMap), Vec<Diagnostic>> {
    assemble_ast_with(ast, src, file_name, base_dir, true)
}

impl<'s> Asm<'s> {
    fn new(src: &'s str, base_dir: Option<&'s Path>, want_map: bool, stream: bool) -> Asm<'s> {
        Asm {
            // Streaming, the lexer finds the line starts.
            lines: if stream { Lines::first(src) } else { Lines::new(src) },
            base_dir,
            errs: Vec::new(),
            literals: Vec::new(),
            lit_index: FastMap::default(),
            consts: FastMap::default(),
            funcs: FastMap::default(),
            kernels: FastMap::default(),
            func_params: Vec::new(),
            float_params: Vec::new(),
            reg_names: NameList::new(),
            reg_table: FastMap::default(),
            attrs: Vec::new(),
            attr_table: AttrTable::default(),
            attrs_by_text: FastMap::default(),
            want_map,
            names: CalleeNames::new(),
            stream,
            fixups: Vec::new(),
            give_up: false,
        }
    }

    /// Declares and encodes a constant; `key` is its name (the text of `c.name`).
    fn declare_const(&mut self, c: &ConstDecl<'_>, key: &'s str, consts: &mut Vec<Constant>) {
        if let Some(&(_, first)) = self.consts.get(key) {
            self.err(
                Diagnostic::new(c.name.span, format!("duplicate constant `@{}`", c.name.text))
                    .with_label("declared again here")
                    .with_secondary(first, "first declared here"),
            );
        } else if consts.len() as u64 > Arg::MAX_INDEX as u64 {
            self.err(Diagnostic::new(c.name.span, "too many constants"));
        } else {
            self.consts.insert(key, (ConstId(consts.len() as u32), c.name.span));
        }
        let k = self.constant(c);
        consts.push(k);
    }

    /// Declares a kernel; `key` is its name (the text of `k.name`).
    fn declare_kernel(&mut self, k: &KernelDecl<'_>, key: &'s str, kernels: &mut Vec<UserKernel>) {
        if let Some(&(_, first)) = self.kernels.get(key) {
            self.err(
                Diagnostic::new(k.name.span, format!("duplicate kernel `@{}`", k.name.text))
                    .with_label("declared again here")
                    .with_secondary(first, "first declared here"),
            );
        } else {
            self.kernels.insert(key, (kernels.len() as u32, k.name.span));
        }
        let uk = self.kernel(k);
        kernels.push(uk);
    }

    /// Declares function `i`'s name and signature; `key` is its name (the text of `f.name`).
    fn declare_func(&mut self, i: usize, f: &FuncDecl<'_>, key: &'s str) {
        if let Some(&(_, first)) = self.funcs.get(key) {
            self.err(
                Diagnostic::new(f.name.span, format!("duplicate function `@{}`", f.name.text))
                    .with_label("defined again here")
                    .with_secondary(first, "first defined here"),
            );
        } else {
            self.funcs.insert(key, (FuncId(i as u32), f.name.span));
        }
        if f.name.text.starts_with("vm.") {
            self.err(
                Diagnostic::new(f.name.span, format!("function name `@{}` starts with `vm.`", f.name.text))
                    .with_label("reserved for builtins"),
            );
        }
        if f.name.text.starts_with("onnx.") {
            self.err(
                Diagnostic::new(f.name.span, format!("function name `@{}` starts with `onnx.`", f.name.text))
                    .with_label("reserved for operators"),
            );
        }
        if f.name.text.starts_with("cl.") {
            self.err(
                Diagnostic::new(f.name.span, format!("function name `@{}` starts with `cl.`", f.name.text))
                    .with_label("reserved for OpenCL kernels"),
            );
        }
        let params: Vec<Type> = f.params.iter().map(|p| self.ty(&p.ty)).collect();
        self.float_params.push(params.iter().map(|t| *t == Type::Float).collect());
        self.func_params.push(params);
    }
}

/// As [`assemble_ast`]; with `want_map` false the source map has only the module span and
/// function headers (no per-instruction spans), which saves their time and memory when the
/// caller only needs the module.
pub(crate) fn assemble_ast_with(
    ast: &SourceModule<'_>,
    src: &str,
    file_name: &str,
    base_dir: Option<&Path>,
    want_map: bool,
) -> Result<(Module, SourceMap), Vec<Diagnostic>> {
    let mut a = Asm::new(src, base_dir, want_map, false);
    let mut smap = SourceMap::default();

    let name = match ast.name {
        None => "main".to_string(),
        Some(ModuleName::Ident(n)) => {
            smap.module_span = Some(n.span);
            n.text.to_string()
        }
        Some(ModuleName::Str(s)) => {
            smap.module_span = Some(s.span);
            decode_string(s).unwrap_or_else(|d| {
                a.err(d);
                String::new()
            })
        }
    };

    // Constants, in declaration order.
    let mut consts = Vec::with_capacity(ast.consts.len());
    for c in ast.consts {
        a.declare_const(c, c.name.text, &mut consts);
    }

    // Kernels, in declaration order.
    let mut kernels = Vec::with_capacity(ast.kernels.len());
    for k in ast.kernels {
        a.declare_kernel(k, k.name.text, &mut kernels);
    }

    // Function names and signatures first: calls may precede definitions.
    for (i, f) in ast.funcs.iter().enumerate() {
        a.declare_func(i, f, f.name.text);
    }

    let mut funcs = Vec::with_capacity(ast.funcs.len());
    for (fi, f) in ast.funcs.iter().enumerate() {
        let (func, fmap) = assemble_func(&mut a, fi, f);
        funcs.push(func);
        smap.funcs.push(fmap);
    }

    if !a.errs.is_empty() {
        a.errs.sort_by_key(|d| (d.span.start, d.span.end));
        return Err(a.errs);
    }
    let module = Module {
        name,
        literals: a.literals,
        consts,
        funcs,
        attrs: a.attrs,
        kernels,
        source_file: Some(file_name.to_string()),
    };
    Ok((module, smap))
}

/// The fast path of [`crate::assemble`]: parses and assembles one declaration at a time
/// with [`crate::stream`], so that no token array or parse tree of the whole file is ever
/// built. Gives the same module as [`assemble_ast_with`] on a parse of the whole file, or
/// `None` when the input has an error or something the fast path leaves to that path: a
/// function called before its definition with an integer literal argument, a constant or
/// kernel used before its declaration.
pub(crate) fn assemble_stream(src: &str, file_name: &str, base_dir: Option<&Path>) -> Option<Module> {
    let mut p = stream::Parser::new(src).ok()?;
    let name = match p.module_name().ok()? {
        None => "main".to_string(),
        Some(ModuleName::Ident(n)) => n.text.to_string(),
        Some(ModuleName::Str(s)) => decode_string(s).ok()?,
    };
    let mut a = Asm::new(src, base_dir, false, true);
    let (mut consts, mut kernels, mut funcs) = (Vec::new(), Vec::new(), Vec::new());
    // One declaration's nodes at a time: the arena's memory is reused.
    let mut ar = bumpalo::Bump::new();
    // The name of a declaration, borrowed from the source (not from the arena).
    let key = |n: &Name<'_>| src.get(n.span.start + 1..n.span.end);
    loop {
        ar.reset();
        let item = p.next_item(&ar).ok()?;
        p.take_line_starts(&mut a.lines.starts);
        match item {
            None => break,
            Some(stream::Item::Const(c)) => a.declare_const(&c, key(&c.name)?, &mut consts),
            Some(stream::Item::Kernel(k)) => a.declare_kernel(&k, key(&k.name)?, &mut kernels),
            Some(stream::Item::Func(f)) => {
                let fi = funcs.len();
                a.declare_func(fi, &f, key(&f.name)?);
                funcs.push(assemble_func(&mut a, fi, &f).0);
            }
        }
        if a.give_up || !a.errs.is_empty() {
            return None;
        }
    }
    for &(fi, pc, callee) in &a.fixups {
        let &(id, _) = a.funcs.get(callee)?;
        match funcs.get_mut(fi).and_then(|f: &mut Function| f.code.get_mut(pc)) {
            Some(Instr::Call { func, .. }) => *func = id,
            _ => return None,
        }
    }
    Some(Module {
        name,
        literals: a.literals,
        consts,
        funcs,
        attrs: a.attrs,
        kernels,
        source_file: Some(file_name.to_string()),
    })
}

/// How many operands the instruction puts in its function's operand lists.
fn operand_list_len(ins: &InstrNode<'_>) -> usize {
    match ins.kind {
        InstrKind::Shape { dims } => dims.len(),
        InstrKind::AllocTensor { dims, .. } => 1 + dims.len(),
        InstrKind::Call { args, .. } => ins.dsts.len() + args.len(),
        InstrKind::OpCall { inputs, outputs, .. } => inputs.len() + outputs.len(),
        InstrKind::KernelCall { args, global, .. } => args.len() + global.map_or(0, |g| g.dims.len()),
        InstrKind::Ret { values } => values.len(),
        _ => 0,
    }
}

fn expect_dsts(ins: &InstrNode<'_>, n: usize, errs: &mut Vec<Diagnostic>) {
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

fn assemble_func<'f>(a: &mut Asm<'_>, fi: usize, f: &FuncDecl<'f>) -> (Function, FuncMap) {
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
    let params = a.func_params.get_mut(fi).map(std::mem::take).unwrap_or_default();
    let placements = placements(f, &params, &mut a.errs);
    let results: Vec<Type> = f.results.iter().map(|t| a.ty(t)).collect();

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
        let mut ops = OperandSpans { on: a.want_map, spans: SmallVec::new() };
        let mut attr_spans: Vec<(String, Span)> = Vec::new();
        let dst = |fa: &mut FuncAsm<'f>, ops: &mut OperandSpans, errs: &mut Vec<Diagnostic>| -> Reg {
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
                let dst = dst(&mut fa, &mut ops, &mut a.errs);
                ops.push(src.span);
                Instr::Mov { dst, src: fa.reg(&src, &mut a.errs) }
            }
            InstrKind::Int { value } => {
                expect_dsts(ins, 1, &mut a.errs);
                let dst = dst(&mut fa, &mut ops, &mut a.errs);
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
            InstrKind::Float { value } => {
                expect_dsts(ins, 1, &mut a.errs);
                let dst = dst(&mut fa, &mut ops, &mut a.errs);
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
                let dst = dst(&mut fa, &mut ops, &mut a.errs);
                ops.push(konst.span);
                let konst = a.const_ref(&konst);
                Instr::LoadConst { dst, konst }
            }
            InstrKind::Shape { dims } => {
                expect_dsts(ins, 1, &mut a.errs);
                let dst = dst(&mut fa, &mut ops, &mut a.errs);
                let ndim = count_u8(dims.len(), ins.span, "dimensions", &mut a.errs);
                let start = fa.list_start(ins.span, &mut a.errs);
                for d in dims {
                    ops.push(d.span());
                    let arg = operand(a, &mut fa, d, false);
                    fa.args.push(arg);
                }
                Instr::MakeShape { dst, dims: start, ndim }
            }
            InstrKind::AllocStorage { size, align, device, scope } => {
                expect_dsts(ins, 1, &mut a.errs);
                let dst = dst(&mut fa, &mut ops, &mut a.errs);
                ops.push(size.span());
                let size = operand(a, &mut fa, &size, false);
                let align = match align {
                    None => {
                        ops.push(ins.span);
                        Arg::imm(0).unwrap_or(Arg(0))
                    }
                    Some(al) => {
                        ops.push(al.span());
                        if let Operand::Int(i) = al {
                            let ok = i
                                .value
                                .is_some_and(|v| v > 0 && (v as u128).is_power_of_two() && v <= i64::MAX as i128);
                            if !ok {
                                a.errs.push(
                                    Diagnostic::new(i.span, "align must be a positive power of two")
                                        .with_label("not a power of two")
                                        .with_note("omit `align` to use the device's base alignment"),
                                );
                            }
                        }
                        operand(a, &mut fa, &al, false)
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
            InstrKind::AllocTensor { storage, offset, dtype, dims, scope } => {
                expect_dsts(ins, 1, &mut a.errs);
                let dst = dst(&mut fa, &mut ops, &mut a.errs);
                ops.push(storage.span);
                let storage = fa.reg(&storage, &mut a.errs);
                let ndim = count_u8(dims.len(), ins.span, "dimensions", &mut a.errs);
                let start = fa.list_start(ins.span, &mut a.errs);
                ops.push(offset.span());
                let off = operand(a, &mut fa, &offset, false);
                fa.args.push(off);
                for d in dims {
                    ops.push(d.span());
                    let arg = operand(a, &mut fa, d, false);
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
                            float_params = a.float_params.get(id.0 as usize).cloned().unwrap_or_default();
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
                    let v = operand(a, &mut fa, arg, fl);
                    fa.args.push(v);
                }
                match target {
                    Ok(builtin) => Instr::CallBuiltin { builtin, list, ndst, nargs },
                    Err(func) => Instr::Call { func, list, ndst, nargs },
                }
            }
            InstrKind::OpCall { op, inputs, outputs, arrow, attrs } => {
                if !ins.dsts.is_empty() {
                    a.errs.push(op_call_dsts(a.lines.src, ins, arrow.is_some(), attrs.map(|b| b.span)));
                }
                let id = a.names.op(op.text).unwrap_or_else(|| {
                    a.errs.push(unknown_operator(&op));
                    OpId(0)
                });
                let nin = count_u16(inputs.len(), ins.span, "operator inputs", &mut a.errs);
                let nout = count_u8(outputs.len(), ins.span, "operator outputs", &mut a.errs);
                let list = fa.list_start(ins.span, &mut a.errs);
                for x in inputs {
                    ops.push(x.span());
                    let v = operand(a, &mut fa, x, false);
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
                    let v = operand(a, &mut fa, y, false);
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
                Instr::CallOp { op: id, list, attrs, nout, nin }
            }
            InstrKind::KernelCall { kernel, args, global } => {
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
                    let v = operand(a, &mut fa, x, false);
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
                    let arg = operand(a, &mut fa, v, fl);
                    fa.args.push(arg);
                }
                Instr::Ret { list, nvals }
            }
            InstrKind::Br { target } => {
                expect_dsts(ins, 0, &mut a.errs);
                ops.push(target.span);
                Instr::Br { target: label(&fa, &target, &mut a.errs) }
            }
            InstrKind::BrIf { cond, then_, else_ } => {
                expect_dsts(ins, 0, &mut a.errs);
                ops.push(cond.span);
                ops.push(then_.span);
                ops.push(else_.span);
                let cond = fa.reg(&cond, &mut a.errs);
                Instr::BrIf { cond, then_: label(&fa, &then_, &mut a.errs), else_: label(&fa, &else_, &mut a.errs) }
            }
        };
        // Destinations of single-result instructions beyond the first are reported by
        // `expect_dsts`; still number them so later diagnostics stay consistent.
        if !matches!(ins.kind, InstrKind::Call { .. } | InstrKind::OpCall { .. } | InstrKind::KernelCall { .. }) {
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

    let num_regs = fa.reg_names.len() as u32;
    // The names, copied at their exact size; the buffer goes back for the next function.
    let reg_names = fa.reg_names.clone();
    fa.reg_names.clear();
    a.reg_names = fa.reg_names;
    a.reg_table = fa.regs;
    let func = Function {
        name: f.name.text.to_string(),
        params,
        placements,
        results,
        num_regs,
        code: fa.code,
        args: fa.args,
        debug: FuncDebug { reg_names, labels: debug_labels, locs: fa.locs },
    };
    (func, FuncMap { header: f.header_span, instrs: fa.map })
}

/// The placements written in a function header (`%x: f32[1, 4] in %arena at 4096`):
/// `in` names another parameter, of type `storage`; the placed parameter is a tensor whose
/// dimensions are all known; the offset is a `u64` and the tensor ends within `u64` bytes.
fn placements(f: &FuncDecl<'_>, params: &[Type], errs: &mut Vec<Diagnostic>) -> Vec<Placement> {
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

fn unknown_builtin(callee: &Name<'_>) -> Diagnostic {
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

fn unknown_operator(op: &Name<'_>) -> Diagnostic {
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
fn op_call_dsts(src: &str, ins: &InstrNode<'_>, has_arrow: bool, block: Option<Span>) -> Diagnostic {
    let span = ins.dsts[0].span.to(ins.dsts[ins.dsts.len() - 1].span);
    let d = Diagnostic::new(span, "an operator call has no destinations")
        .with_label("remove this")
        .with_note("operators are destination-passing: they write into output tensors the program allocated");
    let dsts: Vec<String> = ins.dsts.iter().map(|n| format!("%{}", n.text)).collect();
    let call_end = block.map_or(ins.span.end, |b| b.start);
    match (has_arrow, src.get(ins.mnemonic.span.start..call_end)) {
        (false, Some(call)) => {
            let attrs = block.and_then(|b| src.get(b.range())).map(|t| format!(" {t}")).unwrap_or_default();
            d.with_note(format!("name the outputs after `->`: `{} -> ({}){attrs}`", call.trim_end(), dsts.join(", ")))
        }
        _ => d.with_note(format!("write the call without `{} =`", dsts.join(", "))),
    }
}

fn unknown_kernel<'n>(kernel: &Name<'_>, declared: impl Iterator<Item = &'n str>) -> Diagnostic {
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
fn kernel_call_dsts(ins: &InstrNode<'_>) -> Diagnostic {
    let span = ins.dsts[0].span.to(ins.dsts[ins.dsts.len() - 1].span);
    let dsts: Vec<String> = ins.dsts.iter().map(|n| format!("%{}", n.text)).collect();
    Diagnostic::new(span, "a kernel call has no destinations")
        .with_label("remove this")
        .with_note("kernels write into the tensors passed as arguments")
        .with_note(format!("write the call without `{} =`", dsts.join(", ")))
}

fn label(fa: &FuncAsm<'_>, n: &Name<'_>, errs: &mut Vec<Diagnostic>) -> Label {
    match fa.labels.get(n.text) {
        Some(&pc) => Label(pc),
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
fn operand<'f>(a: &mut Asm<'_>, fa: &mut FuncAsm<'f>, op: &Operand<'f>, float: bool) -> Arg {
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
            Ok(m) => panic!("assembled: {:?}", m.funcs[0].placements),
            Err(d) => d.items().iter().map(|i| (i.message.clone(), src[i.span.clone()].to_string())).collect(),
        }
    }

    #[test]
    fn placements() {
        let src = "func @f(%x: f32[1, 4] in %a at 64, %a: storage, %y: i8[3] in %a at 0x80) {\n  ret\n}\n";
        let m = crate::assemble(src, "t.rxa").unwrap_or_else(|d| panic!("{}", d.render()));
        assert_eq!(
            m.funcs[0].placements,
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

    #[test]
    fn suggestions() {
        assert_eq!(close_names("ad", ["add", "sub", "iadd"].into_iter()), vec!["add"]);
        assert_eq!(close_names("iad", ["add", "sub", "iadd"].into_iter()), vec!["iadd"]);
        assert_eq!(close_names("matmull", ["matmul", "mul"].into_iter()), vec!["matmul"]);
        assert!(close_names("zzzz", ["add", "sub"].into_iter()).is_empty());
    }

    #[test]
    fn nan_payloads() {
        let s = Span::default();
        assert_eq!(nan_bits(DType::F32, false, None, s).ok(), Some(f32::NAN.to_bits() as u64));
        assert_eq!(nan_bits(DType::F64, false, None, s).ok(), Some(f64::NAN.to_bits()));
        assert_eq!(nan_bits(DType::F16, true, Some(1), s).ok(), Some(0xfc01));
        assert!(nan_bits(DType::F16, false, Some(1 << 10), s).is_err());
        assert!(nan_bits(DType::F64, false, Some(0), s).is_err());
    }

    #[test]
    fn escapes() {
        let raw = r#""a\"b\\c\n""#;
        let s = StrLit { raw, span: Span::new(0, raw.len()) };
        assert_eq!(decode_string(s).ok().as_deref(), Some("a\"b\\c\n"));
        let raw = r#""x\q""#;
        let e = decode_string(StrLit { raw, span: Span::new(10, 10 + raw.len()) }).expect_err("bad escape");
        assert_eq!(e.span, 12..14);
    }
}
