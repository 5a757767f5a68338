//! From the parse tree to a [`Module`]: name resolution, register numbering, literal
//! interning, label resolution, constant encoding and debug info. Also keeps, for every
//! instruction, the spans of its operands so that verifier errors can point at them.
//!
//! This module holds the drivers (a whole parse tree, or item by item); the rest is by
//! concern, each file importing only the ones listed before it:
//!
//! * `suggest`: "did you mean" suggestions;
//! * `source_map`: where each part came from (verifier errors, debug positions);
//! * `state`: the module-wide state (`Asm`: names, literals, attribute sets, types);
//! * `consts`: literal values and the encoding of constants;
//! * `files`: `file("...")` contents and kernel declarations;
//! * `func`: function bodies to bytecode.

mod consts;
mod files;
mod func;
mod source_map;
mod state;
mod suggest;
mod symbols;

pub use consts::decode_string;
pub use source_map::{FuncMap, InstrMap, SourceMap};

use consts::*;
use func::*;
use source_map::*;
use state::*;
use suggest::*;
use symbols::SymTable;

use crate::diag::Diagnostic;
use crate::parser::{self, Item, Step};
use rustc_hash::FxHashMap as FastMap;
use rxvm_vm::bytecode::{Arg, ConstId, FuncId, Instr};
use rxvm_vm::module::{Constant, Function, Literal, Module, NameList, UserKernel};
use rxvm_vm::ops::{AttrTable, AttrValue, Attrs};
use rxvm_vm::types::{DType, Dim, Scope, Type};
use std::path::Path;

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

    /// Lowers a type; `syms` resolves dimension symbols (a function signature's), and
    /// without it a symbol is refused (a constant's type).
    fn ty(&mut self, t: &TypeExpr<'_>, syms: Option<&SymTable<'_>>) -> Type {
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
                        DimExpr::Sym(n) => match syms.map(|s| s.resolve(n)) {
                            Some(Ok(d)) => d,
                            Some(Err(e)) => {
                                self.err(e);
                                Dim::Any
                            }
                            None => {
                                self.err(
                                    Diagnostic::new(n.span, "a constant's dimensions must be known")
                                        .with_label("a symbol is not allowed here"),
                                );
                                Dim::Any
                            }
                        },
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
        let syms = SymTable::new(f);
        for e in syms.bound_errors(f) {
            self.err(e);
        }
        let params: Vec<Type> = f.params.iter().map(|p| self.ty(&p.ty, Some(&syms))).collect();
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
        consts: consts.into(),
        funcs: funcs.into(),
        attrs: a.attrs,
        kernels,
        source_file: Some(file_name.to_string()),
    };
    Ok((module, smap))
}

/// How [`assemble_stream`] ends.
pub(crate) enum Streamed {
    /// The module (not verified).
    Module(Module),
    /// A lexical or syntax error: the parser's diagnostic, the one users see.
    Error(Diagnostic),
    /// Assemble the whole parse tree instead ([`assemble_ast_with`]): for an error found
    /// while assembling (the whole tree collects them all, sorted), or a forward reference
    /// resolved only with the whole tree in view (a function called before its definition
    /// with an integer literal argument, a constant or kernel used before its
    /// declaration).
    Whole,
}

/// What [`crate::assemble`] runs first: parses and assembles one declaration at a time,
/// reading the tokens a window at a time ([`parser::TokenStream`]), so that no token array
/// or parse tree of the whole file is ever built. Same parser as the whole-tree path; when
/// it gives a module, it is the module [`assemble_ast_with`] gives.
pub(crate) fn assemble_stream(src: &str, file_name: &str, base_dir: Option<&Path>) -> Streamed {
    assemble_stream_in(src, file_name, base_dir, parser::TokenStream::new)
}

fn assemble_stream_in<'s>(
    src: &'s str,
    file_name: &str,
    base_dir: Option<&Path>,
    tokens: impl FnOnce(&'s str) -> Result<parser::TokenStream<'s>, Diagnostic>,
) -> Streamed {
    match stream_items(src, file_name, base_dir, tokens) {
        Ok(Some(m)) => Streamed::Module(m),
        Ok(None) => Streamed::Whole,
        Err(d) => Streamed::Error(d),
    }
}

/// Body items assembled per piece of a function too long for the token window.
const BODY_CHUNK: usize = 4096;

/// The module's name as written (`None` for a string with a bad escape: the whole-file
/// path reports it).
fn module_name(h: &ModuleName<'_>) -> Option<String> {
    match h {
        ModuleName::Ident(n) => Some(n.text.to_string()),
        ModuleName::Str(s) => decode_string(*s).ok(),
    }
}

/// See [`assemble_stream`]; `Ok(None)` is [`Streamed::Whole`].
fn stream_items<'s>(
    src: &'s str,
    file_name: &str,
    base_dir: Option<&Path>,
    tokens: impl FnOnce(&'s str) -> Result<parser::TokenStream<'s>, Diagnostic>,
) -> Result<Option<Module>, Diagnostic> {
    let mut ts = tokens(src)?;
    let mut a = Asm::new(src, base_dir, false, true);
    let (mut consts, mut kernels, mut funcs) = (Vec::new(), Vec::new(), Vec::new());
    let mut name = "main".to_string();
    // One declaration's nodes at a time: the arena's memory is reused.
    let mut ar = bumpalo::Bump::new();
    // The name of a declaration, borrowed from the source (not from the arena).
    let key = |n: &Name<'_>| src.get(n.span.start + 1..n.span.end);
    let mut first = true;
    loop {
        ar.reset();
        ts.take_line_starts(&mut a.lines.starts);
        let (toks, complete) = ts.window();
        let step = if first {
            parser::parse_start(src, toks, complete, &ar).map(|s| match s {
                Step::Done(n, (header, item)) => Step::Done(n, (header, item)),
                Step::More => Step::More,
            })
        } else {
            parser::parse_item(src, toks, complete, &ar).map(|s| match s {
                Step::Done(n, item) => Step::Done(n, (None, item)),
                Step::More => Step::More,
            })
        };
        let (used, header, item) = match step {
            Ok(Step::Done(n, (header, item))) => (n, header, item),
            Ok(Step::More) => {
                // Longer than the window: a function is read and assembled a piece of its
                // body at a time (its tokens and parse tree never all in memory), anything
                // else with a larger window.
                let head = match parser::parse_func_head(src, toks, complete, &ar, first) {
                    Ok(Step::Done(n, Some((header, f)))) => {
                        let fi = funcs.len();
                        a.declare_func(fi, &f, key(&f.name).unwrap_or(""));
                        Some((n, header.map(|h| module_name(&h)), begin_stream(&mut a, fi, &f)))
                    }
                    Ok(_) => None,
                    Err(d) => {
                        // As below: a lexical error anywhere comes first.
                        ts.check_rest()?;
                        return Err(d);
                    }
                };
                let Some((used, header, mut sf)) = head else {
                    ts.more()?;
                    continue;
                };
                match header {
                    Some(Some(n)) => name = n,
                    Some(None) => return Ok(None),
                    None => {}
                }
                first = false;
                ts.consume(used)?;
                let fi = funcs.len();
                loop {
                    ar.reset();
                    ts.take_line_starts(&mut a.lines.starts);
                    let (toks, complete) = ts.window();
                    match parser::parse_body_chunk(src, toks, complete, &ar, BODY_CHUNK) {
                        Ok(Step::Done(n, (items, closed))) => {
                            if !stream_body(&mut a, &mut sf, fi, src, items) || a.give_up || !a.errs.is_empty() {
                                return Ok(None);
                            }
                            ts.consume(n)?;
                            if closed {
                                break;
                            }
                        }
                        Ok(Step::More) => ts.more()?,
                        Err(d) => {
                            ts.check_rest()?;
                            return Err(d);
                        }
                    }
                }
                let Some(f) = end_stream(&mut a, sf) else { return Ok(None) };
                funcs.push(f);
                if a.give_up || !a.errs.is_empty() {
                    return Ok(None);
                }
                continue;
            }
            Err(d) => {
                // A lexical error anywhere comes first, as when the whole file is lexed.
                ts.check_rest()?;
                return Err(d);
            }
        };
        first = false;
        match header.map(|h| module_name(&h)) {
            None => {}
            Some(Some(n)) => name = n,
            Some(None) => return Ok(None),
        }
        let Some(item) = item else { break };
        match item {
            Item::Const(c) => a.declare_const(&c, key(&c.name).unwrap_or(""), &mut consts),
            Item::Kernel(k) => a.declare_kernel(&k, key(&k.name).unwrap_or(""), &mut kernels),
            Item::Func(f) => {
                let fi = funcs.len();
                a.declare_func(fi, &f, key(&f.name).unwrap_or(""));
                funcs.push(assemble_func(&mut a, fi, &f).0);
            }
        }
        if a.give_up || !a.errs.is_empty() {
            return Ok(None);
        }
        ts.consume(used)?;
    }
    for &(fi, pc, callee) in &a.fixups {
        let Some(&(id, _)) = a.funcs.get(callee) else { return Ok(None) };
        match funcs.get_mut(fi).and_then(|f: &mut Function| f.code.get_mut(pc)) {
            Some(Instr::Call { func, .. }) => *func = id,
            _ => return Ok(None),
        }
    }
    Ok(Some(Module {
        name,
        literals: a.literals,
        consts: consts.into(),
        funcs: funcs.into(),
        attrs: a.attrs,
        kernels,
        source_file: Some(file_name.to_string()),
    }))
}

#[cfg(test)]
mod stream_tests {
    use super::*;

    /// Every `.rxa` file of the repository: examples, test programs, invalid programs and
    /// the fuzzing corpus.
    fn corpus() -> Vec<(String, String)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let dirs = ["examples", "tests/programs", "tests/bad", "asm/tests/programs", "fuzz/corpus/asm_text"];
        let mut out = Vec::new();
        for d in dirs {
            let Ok(rd) = std::fs::read_dir(root.join(d)) else { continue };
            for e in rd.flatten() {
                if e.path().extension().is_none_or(|x| x != "rxa") {
                    continue;
                }
                if let Ok(text) = std::fs::read_to_string(e.path()) {
                    out.push((e.path().display().to_string(), text));
                }
            }
        }
        out.sort();
        assert!(out.len() > 50, "found only {} programs", out.len());
        out
    }

    /// A small deterministic generator (64-bit LCG).
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 33) % n.max(1) as u64) as usize
        }
    }

    /// Variants of `src` with small edits: a byte deleted, a line duplicated or deleted, a
    /// snippet inserted, a prefix.
    fn mutations(src: &str, rng: &mut Rng, n: usize) -> Vec<String> {
        const SNIPPETS: &[&str] = &[
            "\n",
            " ",
            ",",
            "%",
            "@",
            "-",
            "-inf",
            "nan(0x1)",
            "0x",
            "1.5e",
            "\"",
            "\\",
            ";",
            "}",
            "{",
            "(",
            ")",
            "[",
            "]",
            "->",
            ":",
            "=",
            "?",
            "none",
            "func",
            "const",
            "kernel",
            "module m\n",
            "ret\n",
            "1",
            "-7",
            "2.5",
            "%x",
            "@w",
            "é",
            "\t",
            "\r\n",
            "label:",
            "br l",
            "int",
            "f32[2]",
            "in %a at 0",
            "\"a\\\"b\"",
        ];
        let mut out = Vec::new();
        let chars: Vec<(usize, char)> = src.char_indices().collect();
        let lines: Vec<&str> = src.split_inclusive('\n').collect();
        for _ in 0..n {
            let mut s = src.to_string();
            match rng.below(5) {
                0 if !chars.is_empty() => {
                    let (i, c) = chars[rng.below(chars.len())];
                    s.replace_range(i..i + c.len_utf8(), "");
                }
                1 if !lines.is_empty() => {
                    let k = rng.below(lines.len());
                    let mut v = lines.clone();
                    if rng.below(2) == 0 {
                        v.insert(k, lines[k]);
                    } else {
                        v.remove(k);
                    }
                    s = v.concat();
                }
                2 => {
                    let at = chars.get(rng.below(chars.len() + 1)).map_or(src.len(), |c| c.0);
                    s.insert_str(at, SNIPPETS[rng.below(SNIPPETS.len())]);
                }
                3 => {
                    let at = chars.get(rng.below(chars.len() + 1)).map_or(src.len(), |c| c.0);
                    s.truncate(at);
                }
                _ => {
                    let at = chars.get(rng.below(chars.len() + 1)).map_or(src.len(), |c| c.0);
                    let snippet: String = (0..1 + rng.below(6)).map(|_| SNIPPETS[rng.below(SNIPPETS.len())]).collect();
                    s.insert_str(at, &snippet);
                }
            }
            out.push(s);
        }
        out
    }

    /// Item by item (with a window of `window` tokens) and the whole tree give the same
    /// module, or the same parse error; the item-by-item path fails only where the whole
    /// tree does (forward references aside).
    fn check_assembler_with(src: &str, name: &str, window: usize) -> bool {
        let dir = std::path::Path::new(name).parent();
        let streamed = assemble_stream_in(src, name, dir, |s| parser::TokenStream::with_window(s, window));
        let reference = crate::assemble_with_map(src, name, dir).map(|(m, _)| m);
        match (streamed, reference) {
            (Streamed::Module(f), Ok(r)) => {
                // (Not `==`: NaN literals are not equal to themselves.)
                assert_eq!(rxvm_vm::write_module(&f), rxvm_vm::write_module(&r), "different .rxb for {src:?}");
                let (f, r) = (format!("{f:#?}"), format!("{r:#?}"));
                if f != r {
                    let at = f.lines().zip(r.lines()).position(|(a, b)| a != b).unwrap_or(0);
                    let show = |t: &str| t.lines().skip(at.saturating_sub(8)).take(16).collect::<Vec<_>>().join("\n");
                    panic!("modules differ for {src:?}:\n{}\n--- reference:\n{}", show(&f), show(&r));
                }
                true
            }
            (Streamed::Module(_), Err(d)) => panic!("only the item-by-item path assembles {src:?}:\n{}", d.render()),
            (Streamed::Error(e), Err(d)) => {
                let items = d.items();
                assert_eq!(items.len(), 1, "{src:?}");
                assert_eq!(format!("{e:?}"), format!("{:?}", items[0]), "different errors for {src:?}");
                false
            }
            (Streamed::Error(e), Ok(_)) => panic!("only the whole tree assembles {src:?}: {}", e.message),
            (Streamed::Whole, _) => false,
        }
    }

    fn check_assembler(src: &str, name: &str) -> bool {
        check_assembler_with(src, name, parser::WINDOW)
    }

    #[test]
    fn assembler_matches_reference() {
        // Edge cases: empty input, a quoted module name, CRLF, tabs and comments, long and
        // hexadecimal integers, attribute and list forms, labels before instructions.
        for src in [
            "",
            "\n\n; only a comment\n",
            "module \"a \\\"b\\\"\"\r\nfunc @f() -> int {\r\n\t%x = int 999999999999999999 ; c\r\n\tret %x\r\n}\r\n",
            "func @f() -> (int, float) {\n  %a = int -9223372036854775808\n  %b = int 0x7fffffffffffffff\n  \
             %c = call @vm.iadd(%a, 1000000000000000000)\n  %d = float -nan(0x1)\n  ret %c, %d\n}\n",
            "const @w: f32[2] = [1, 2.5]\nconst @s: i64[1] = [-0x10]\nfunc @f(%x: f32[2]) {\n  \
             call @onnx.Relu(%x) -> (%x) {\n    a = [1,\n 2], b = 0.5, c = \"s\", d = []\n  }\n  ret\n}\n",
            "func @f(%n: int) {\nl0: l1:\n  br_if %n, l1, l2\nl2: ret\n}\n",
        ] {
            for window in [1, 2, 3, 5, 64] {
                assert!(check_assembler_with(src, "t.rxa", window), "{src:?}");
            }
        }
        let mut rng = Rng(13);
        let (mut ok, mut total) = (0, 0);
        for (path, text) in corpus() {
            let fast = check_assembler(&text, &path);
            if path.contains("/examples/") || path.contains("/programs/") {
                // (`kernels.rxa` declares a kernel after its use: the whole tree.)
                assert!(fast || path.ends_with("kernels.rxa"), "{path} is assembled item by item");
            }
            for m in mutations(&text, &mut rng, 40) {
                total += 1;
                // Small windows: declarations continue past them (`Step::More`).
                let window = [1, 2, 3, 7, 16, 4096][rng.below(6)];
                ok += usize::from(check_assembler_with(&m, &path, window));
            }
        }
        assert!(ok > total / 20 && ok < total, "{ok} of {total} mutations assembled");
    }

    /// A function longer than the window is assembled a piece of its body at a time
    /// (`parse_body_chunk`, more than `BODY_CHUNK` items here), with branches forward and
    /// backward across the pieces, to the same module; what only the whole-function path
    /// reports goes to it.
    #[test]
    fn long_functions_are_assembled_in_pieces() {
        let mut body = String::from("func @main(%n: int) -> int {\n  %x = int 0\n  br_if %n, far, next\nnext:\n");
        for k in 0..3000 {
            body.push_str(&format!("l{k}:\n  %x = call @vm.iadd(%x, {k})\n  nop\n"));
            if k % 500 == 499 {
                body.push_str(&format!("  br_if %x, l{}, l{}\n", k - 400, k + 1));
            }
        }
        body.push_str("l3000:\nfar:\n  ret %x\n}\n");
        for window in [1, 7, 64, 8192] {
            assert!(check_assembler_with(&body, "t.rxa", window), "window {window}");
        }
        let src = format!("module big\n{body}func @g() {{\n  ret\n}}\n");
        assert!(check_assembler_with(&src, "t.rxa", 64));
        // A label at the end, a duplicate label, a branch to no label: the whole path.
        for bad in [
            body.replace("  ret %x\n}", "  ret %x\nend:\n}"),
            body.replace("l2999:", "l7:"),
            body.replace("br_if %n, far, next", "br_if %n, nowhere, next"),
        ] {
            assert!(!check_assembler_with(&bad, "t.rxa", 64));
            assert!(crate::assemble(&bad, "t.rxa").is_err());
        }
        // A syntax error, a list past its limit or an invalid character deep in a long
        // body: the piece's parse error, the same as the whole file's (checked by
        // `check_assembler_with`), without the whole file's parse.
        let dims = vec!["1"; 300].join(", ");
        for bad in [
            body.replace("l1500:\n", "l1500:\n  %x = bogus 1\n"),
            body.replace("l2500:\n", &format!("l2500:\n  %s = shape [{dims}]\n")),
            body.replace("l2000:\n", "l2000:\n  nop $\n"),
            body.replace("func @main(%n: int) -> int {", "func @main(%n: int) -> int {{"),
        ] {
            for window in [1, 64, 8192] {
                let streamed = assemble_stream_in(&bad, "t.rxa", None, |s| parser::TokenStream::with_window(s, window));
                assert!(matches!(streamed, Streamed::Error(_)), "window {window}");
                assert!(!check_assembler_with(&bad, "t.rxa", window));
            }
        }
    }

    #[test]
    fn forward_references() {
        // A call before the definition: resolved at the end (no integer literal argument).
        let src = "func @main(%x: float) -> float {\n  %y = call @f(%x, 2.5)\n  ret %y\n}\n\
                   func @f(%a: float, %b: float) -> float {\n  ret %a\n}\n";
        assert!(check_assembler(src, "t.rxa"));
        // With an integer literal argument the callee's parameter types matter: reference path.
        let src = "func @main(%x: float) -> float {\n  %y = call @f(%x, 2)\n  ret %y\n}\n\
                   func @f(%a: float, %b: float) -> float {\n  ret %a\n}\n";
        assert!(!check_assembler(src, "t.rxa"));
        assert!(crate::assemble(src, "t.rxa").is_ok());
        // A constant declared after its use: reference path.
        let src = "func @main() {\n  %c = const @w\n  ret\n}\nconst @w: f32[1] = [1.0]\n";
        assert!(!check_assembler(src, "t.rxa"));
        assert!(crate::assemble_unverified(src, "t.rxa").is_ok());
        // Never defined: the reference path reports it.
        let src = "func @main() {\n  call @g()\n  ret\n}\n";
        assert!(!check_assembler(src, "t.rxa"));
    }
}
