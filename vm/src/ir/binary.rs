//! The `.rxb` binary module format (see `docs/bytecode.md`).
//!
//! Layout: a 16-byte header (`\0RXB`, version u16, reserved u16, file length u64) and then
//! sections, each `[id u8][length u32][payload]`, in increasing id order, each at most once.
//! All integers are little endian. The file length makes every truncation an error: a file
//! cut at a section boundary would otherwise read as a module without its later sections. The reader treats its input as untrusted: every count is checked
//! against the bytes that remain before anything is allocated, and every failure is an
//! error carrying the byte offset, never a panic.

use crate::ir::attrs::{AttrValue, Attrs};
use crate::ir::bytecode::{Arg, EntityRef, FuncId, Instr, Word, WORD_SIZE};
use crate::ir::module::{
    Bytes, ConstData, Constant, FuncDebug, Function, Literal, Module, Placement, SourceLoc, UserKernel,
};
use crate::ir::types::{DType, Dim, Type};
use crate::ir::verify::{Item, VerifyError};
use std::fmt;

pub const MAGIC: [u8; 4] = *b"\0RXB";
/// Version 2 added the file length to the header (version 1 files cut between two sections
/// loaded without the later ones).
pub const VERSION: u16 = 2;
/// Magic, version, reserved, file length.
pub const HEADER_LEN: usize = 16;

/// Section ids, in the order they must appear.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum SectionId {
    Strings = 1,
    Meta = 2,
    Literals = 3,
    Constants = 4,
    Functions = 5,
    Code = 6,
    Names = 7,
    Spans = 8,
    /// Operator attribute sets (optional; omitted when the module has none).
    Attrs = 9,
    /// User-declared OpenCL kernels (optional; omitted when the module has none).
    Kernels = 10,
    /// Parameter placements (optional; omitted when no function has any).
    Placements = 11,
}

impl SectionId {
    fn from_u8(v: u8) -> Option<SectionId> {
        use SectionId::*;
        [Strings, Meta, Literals, Constants, Functions, Code, Names, Spans, Attrs, Kernels, Placements]
            .into_iter()
            .find(|s| *s as u8 == v)
    }
}

/// A malformed `.rxb`: where and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    pub offset: usize,
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed bytecode at byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for LoadError {}

// ---------------------------------------------------------------- writing

/// Interns strings for the string section.
#[derive(Default)]
struct Strings {
    list: Vec<String>,
    index: std::collections::HashMap<String, u32>,
}

impl Strings {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.list.len() as u32;
        self.list.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

fn put_u8(o: &mut Vec<u8>, v: u8) {
    o.push(v)
}
fn put_u32(o: &mut Vec<u8>, v: u32) {
    o.extend_from_slice(&v.to_le_bytes())
}
fn put_u64(o: &mut Vec<u8>, v: u64) {
    o.extend_from_slice(&v.to_le_bytes())
}
fn put_len(o: &mut Vec<u8>, n: usize) {
    put_u32(o, n as u32)
}

const DIM_ANY: i64 = -1;
/// A symbolic dimension naming register `r` is written `DIM_SYM - r`, then its bound.
const DIM_SYM: i64 = -2;

fn put_type(o: &mut Vec<u8>, t: &Type) {
    match t {
        Type::Int => put_u8(o, 0),
        Type::Float => put_u8(o, 1),
        Type::Shape => put_u8(o, 2),
        Type::Storage => put_u8(o, 3),
        Type::AnyTensor => put_u8(o, 4),
        Type::Tensor { dtype, dims } => {
            put_u8(o, 5);
            put_u8(o, *dtype as u8);
            put_u8(o, dims.len() as u8);
            for d in dims {
                match d {
                    Dim::Known(v) => put_u64(o, *v as u64),
                    Dim::Any => put_u64(o, DIM_ANY as u64),
                    // A symbol: `-2 - reg`, then its bound (`DIM_ANY` for none).
                    Dim::Sym { reg, max } => {
                        put_u64(o, (DIM_SYM - *reg as i64) as u64);
                        put_u64(o, max.unwrap_or(DIM_ANY) as u64);
                    }
                }
            }
        }
    }
}

/// Where a constant's data starts in a `.rxb`: a multiple of this, so that a mapped file's
/// constants are aligned for every element type and for the host's vector loads, and the
/// VM uses them in place.
pub const CONST_DATA_ALIGN: usize = 64;

/// The padding before each constant's data (`data`: where its pad byte goes in the
/// Constants records `records` bytes long, and the data) when the Constants payload starts
/// at file offset `at`; and the payload's length with the pad bytes, padding and data.
fn const_padding(at: usize, records: usize, data: &[(usize, &[u8])]) -> (Vec<u8>, usize) {
    let mut pads = Vec::with_capacity(data.len());
    let (mut pos, mut prev) = (at, 0);
    for &(split, bytes) in data {
        // The records up to this one's pad byte, then the pad byte.
        pos += split - prev + 1;
        let pad = pos.next_multiple_of(CONST_DATA_ALIGN) - pos;
        pads.push(pad as u8);
        pos += pad + bytes.len();
        prev = split;
    }
    (pads, pos + (records - prev) - at)
}

/// Encodes a module. Modules with no debug info omit the `Names` and `Spans` sections.
pub fn write_module(m: &Module) -> Vec<u8> {
    let mut out = Vec::new();
    match write_module_to(m, &mut out) {
        Ok(_) => out,
        Err(e) => unreachable!("writing into a Vec cannot fail: {e}"),
    }
}

/// [`write_module`] into `w` as it is encoded, returning the file's length: a large
/// module's constants go straight from where they are to the file, with no copy of the
/// whole file in memory. Give it a buffered writer: it writes each instruction word apart.
pub fn write_module_to<W: std::io::Write>(m: &Module, w: &mut W) -> std::io::Result<u64> {
    let mut strings = Strings::default();
    let mut meta = Vec::new();
    put_u32(&mut meta, strings.id(&m.name));

    let mut lits = Vec::new();
    put_len(&mut lits, m.literals.len());
    for l in &m.literals {
        match l {
            Literal::Int(v) => {
                put_u8(&mut lits, 0);
                put_u64(&mut lits, *v as u64);
            }
            Literal::Float(v) => {
                put_u8(&mut lits, 1);
                put_u64(&mut lits, v.to_bits());
            }
        }
    }

    // The constants' records without their data, which is written straight into the output
    // below (it is most of a model: no second copy), each after the padding that aligns it.
    let mut consts = Vec::new();
    let mut const_data: Vec<(usize, &[u8])> = Vec::new();
    put_len(&mut consts, m.consts.len());
    for c in m.consts.values() {
        put_u32(&mut consts, strings.id(&c.name));
        put_u8(&mut consts, c.dtype as u8);
        put_u8(&mut consts, c.shape.len() as u8);
        for d in &c.shape {
            put_u64(&mut consts, *d as u64);
        }
        match &c.data {
            ConstData::Bytes(b) => {
                put_u8(&mut consts, 2);
                put_u64(&mut consts, b.len() as u64);
                const_data.push((consts.len(), b));
            }
            ConstData::Fill(v) => {
                put_u8(&mut consts, 1);
                put_u64(&mut consts, v.to_bits());
            }
        }
    }

    let mut funcs = Vec::new();
    put_len(&mut funcs, m.funcs.len());
    for f in m.funcs.values() {
        put_u32(&mut funcs, strings.id(&f.name));
        put_len(&mut funcs, f.params.len());
        for t in &f.params {
            put_type(&mut funcs, t);
        }
        put_len(&mut funcs, f.results.len());
        for t in &f.results {
            put_type(&mut funcs, t);
        }
        put_u32(&mut funcs, f.num_regs);
        put_len(&mut funcs, f.code.len());
        put_len(&mut funcs, f.args.len());
    }
    // The Code and Spans payloads are written straight into the output below (they are
    // most of a large module: no second copy of them).
    let code_len: usize = m.funcs.values().map(|f| f.code.len() * WORD_SIZE + f.args.len() * 4).sum();

    let has_debug = m.source_file.is_some() || m.funcs.values().any(|f| f.debug != FuncDebug::default());
    let mut names = Vec::new();
    // Spans: the source file flag and string (interned here, before the strings are
    // written), then each function's locations, written into the output below.
    let mut spans_head = Vec::new();
    let mut spans_len = 0usize;
    if has_debug {
        for f in m.funcs.values() {
            put_len(&mut names, f.debug.reg_names.len());
            for n in f.debug.reg_names.iter() {
                put_u32(&mut names, strings.id(n));
            }
            put_len(&mut names, f.debug.labels.len());
            for (pc, n) in &f.debug.labels {
                put_u32(&mut names, *pc);
                put_u32(&mut names, strings.id(n));
            }
        }
        match &m.source_file {
            Some(s) => {
                put_u8(&mut spans_head, 1);
                put_u32(&mut spans_head, strings.id(s));
            }
            None => put_u8(&mut spans_head, 0),
        }
        spans_len = spans_head.len() + m.funcs.values().map(|f| 4 + 8 * f.debug.locs.len()).sum::<usize>();
    }

    let mut attrs = Vec::new();
    put_len(&mut attrs, m.attrs.len());
    for set in &m.attrs {
        put_len(&mut attrs, set.0.len());
        for (name, v) in &set.0 {
            put_u32(&mut attrs, strings.id(name));
            match v {
                AttrValue::Int(x) => {
                    put_u8(&mut attrs, 0);
                    put_u64(&mut attrs, *x as u64);
                }
                AttrValue::Float(x) => {
                    put_u8(&mut attrs, 1);
                    put_u64(&mut attrs, x.to_bits());
                }
                AttrValue::Ints(xs) => {
                    put_u8(&mut attrs, 2);
                    put_len(&mut attrs, xs.len());
                    xs.iter().for_each(|x| put_u64(&mut attrs, *x as u64));
                }
                AttrValue::Floats(xs) => {
                    put_u8(&mut attrs, 3);
                    put_len(&mut attrs, xs.len());
                    xs.iter().for_each(|x| put_u64(&mut attrs, x.to_bits()));
                }
                AttrValue::Str(s) => {
                    put_u8(&mut attrs, 4);
                    put_u32(&mut attrs, strings.id(s));
                }
            }
        }
    }

    let mut kernels = Vec::new();
    put_len(&mut kernels, m.kernels.len());
    for k in &m.kernels {
        put_u32(&mut kernels, strings.id(&k.name));
        put_u32(&mut kernels, strings.id(&k.entry));
        put_u32(&mut kernels, strings.id(&k.source));
    }

    // Placements: only functions that have some, by increasing function index.
    let mut placements = Vec::new();
    let placed: Vec<(usize, &Function)> =
        m.funcs.iter().filter(|(_, f)| !f.placements.is_empty()).map(|(id, f)| (id.index(), f)).collect();
    put_len(&mut placements, placed.len());
    for (i, f) in &placed {
        put_len(&mut placements, *i);
        put_len(&mut placements, f.placements.len());
        for p in &f.placements {
            put_u32(&mut placements, p.param);
            put_u32(&mut placements, p.storage);
            put_u64(&mut placements, p.offset);
        }
    }

    let mut strs = Vec::new();
    put_len(&mut strs, strings.list.len());
    for s in &strings.list {
        put_len(&mut strs, s.len());
        strs.extend_from_slice(s.as_bytes());
    }

    // Where the Constants payload starts decides each data block's padding.
    let consts_at = HEADER_LEN + 5 * 4 + strs.len() + meta.len() + lits.len();
    let (pads, consts_len) = const_padding(consts_at, consts.len(), &const_data);
    // The exact size: sections are 5 bytes of header and their payload.
    let mut total = HEADER_LEN + 5 * 6 + strs.len() + meta.len() + lits.len() + consts_len + funcs.len() + code_len;
    if has_debug {
        total += 10 + names.len() + spans_len;
    }
    for (present, len) in [
        (!m.attrs.is_empty(), attrs.len()),
        (!m.kernels.is_empty(), kernels.len()),
        (!placed.is_empty(), placements.len()),
    ] {
        if present {
            total += 5 + len;
        }
    }
    let mut out = Out { w, written: 0 };
    out.bytes(&MAGIC)?;
    out.bytes(&VERSION.to_le_bytes())?;
    out.bytes(&0u16.to_le_bytes())?;
    out.bytes(&(total as u64).to_le_bytes())?;
    out.section(SectionId::Strings, &strs)?;
    out.section(SectionId::Meta, &meta)?;
    out.section(SectionId::Literals, &lits)?;
    out.section_header(SectionId::Constants, consts_len)?;
    debug_assert_eq!(out.written, consts_at);
    let mut written = 0;
    for (&(at, data), &pad) in const_data.iter().zip(&pads) {
        out.bytes(&consts[written..at])?;
        out.bytes(&[pad])?;
        out.bytes(&[0; CONST_DATA_ALIGN][..pad as usize])?;
        out.bytes(data)?;
        written = at;
    }
    out.bytes(&consts[written..])?;
    out.section(SectionId::Functions, &funcs)?;
    out.section_header(SectionId::Code, code_len)?;
    for f in m.funcs.values() {
        for ins in &f.code {
            out.bytes(&ins.encode().to_bytes())?;
        }
        for a in &f.args {
            out.bytes(&a.0.to_le_bytes())?;
        }
    }
    if has_debug {
        out.section(SectionId::Names, &names)?;
        out.section_header(SectionId::Spans, spans_len)?;
        out.bytes(&spans_head)?;
        for f in m.funcs.values() {
            out.bytes(&(f.debug.locs.len() as u32).to_le_bytes())?;
            for l in &f.debug.locs {
                out.bytes(&l.line.to_le_bytes())?;
                out.bytes(&l.col.to_le_bytes())?;
            }
        }
    }
    if !m.attrs.is_empty() {
        out.section(SectionId::Attrs, &attrs)?;
    }
    if !m.kernels.is_empty() {
        out.section(SectionId::Kernels, &kernels)?;
    }
    if !placed.is_empty() {
        out.section(SectionId::Placements, &placements)?;
    }
    debug_assert_eq!(out.written, total, "write_module's size computation");
    Ok(total as u64)
}

/// A writer that counts what it wrote.
struct Out<'w, W: std::io::Write> {
    w: &'w mut W,
    written: usize,
}

impl<W: std::io::Write> Out<'_, W> {
    fn bytes(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.written += b.len();
        self.w.write_all(b)
    }
    fn section_header(&mut self, id: SectionId, len: usize) -> std::io::Result<()> {
        self.bytes(&[id as u8])?;
        self.bytes(&(len as u32).to_le_bytes())
    }
    fn section(&mut self, id: SectionId, payload: &[u8]) -> std::io::Result<()> {
        self.section_header(id, payload.len())?;
        self.bytes(payload)
    }
}

// ---------------------------------------------------------------- reading

/// A bounds-checked little-endian reader over a byte slice.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Offset of `bytes[0]` in the whole file, for error positions.
    base: usize,
}

type R<T> = Result<T, LoadError>;

impl<'a> Reader<'a> {
    fn err<T>(&self, message: impl Into<String>) -> R<T> {
        Err(LoadError { offset: self.base + self.pos, message: message.into() })
    }
    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }
    // The readers below are inlined with their error path out of line: they run for
    // nearly every byte of a module.
    #[inline]
    fn take(&mut self, n: usize, what: &str) -> R<&'a [u8]> {
        match self.bytes.get(self.pos..).and_then(|r| r.get(..n)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => self.truncated(n, what),
        }
    }
    #[cold]
    #[inline(never)]
    fn truncated<T>(&self, n: usize, what: &str) -> R<T> {
        self.err(format!("truncated: expected {n} bytes of {what}, found {}", self.remaining()))
    }
    /// The next `N` bytes.
    #[inline]
    fn array<const N: usize>(&mut self, what: &str) -> R<[u8; N]> {
        match self.bytes.get(self.pos..).and_then(|r| r.first_chunk::<N>()) {
            Some(a) => {
                self.pos += N;
                Ok(*a)
            }
            None => self.truncated(N, what),
        }
    }
    #[inline]
    fn u8(&mut self, what: &str) -> R<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    #[inline]
    fn u32(&mut self, what: &str) -> R<u32> {
        self.array(what).map(u32::from_le_bytes)
    }
    #[inline]
    fn u64(&mut self, what: &str) -> R<u64> {
        self.array(what).map(u64::from_le_bytes)
    }
    /// A count of items that take at least `min_item_bytes` each; refuses counts that
    /// could not fit in what remains, so a corrupt count never drives a huge allocation.
    #[inline]
    fn count(&mut self, what: &str, min_item_bytes: usize) -> R<usize> {
        let n = self.u32(what)? as usize;
        if n.saturating_mul(min_item_bytes.max(1)) > self.remaining() {
            return self.err(format!("{what} is {n} but only {} bytes remain", self.remaining()));
        }
        Ok(n)
    }
    #[inline]
    fn string<'s>(&mut self, strings: &[&'s str], what: &str) -> R<&'s str> {
        let i = self.u32(what)?;
        match strings.get(i as usize) {
            Some(s) => Ok(*s),
            None => self.bad_string(i, strings.len(), what),
        }
    }
    #[cold]
    #[inline(never)]
    fn bad_string<T>(&self, i: u32, n: usize, what: &str) -> R<T> {
        self.err(format!("{what} refers to string {i}, but the module has {n} strings"))
    }
    fn dtype(&mut self) -> R<DType> {
        let d = self.u8("dtype")?;
        match DType::from_u8(d) {
            Some(d) => Ok(d),
            None => {
                self.pos -= 1;
                self.err(format!("invalid dtype code {d}"))
            }
        }
    }
    fn ty(&mut self) -> R<Type> {
        let tag = self.u8("type tag")?;
        Ok(match tag {
            0 => Type::Int,
            1 => Type::Float,
            2 => Type::Shape,
            3 => Type::Storage,
            4 => Type::AnyTensor,
            5 => {
                let dtype = self.dtype()?;
                let n = self.u8("rank")? as usize;
                let mut dims = Vec::with_capacity(n);
                for _ in 0..n {
                    let v = self.u64("dimension")? as i64;
                    dims.push(match v {
                        DIM_ANY => Dim::Any,
                        v if v >= 0 => Dim::Known(v),
                        v if v <= DIM_SYM && DIM_SYM - v <= u32::MAX as i64 => {
                            let reg = (DIM_SYM - v) as u32;
                            let max = match self.u64("symbol bound")? as i64 {
                                DIM_ANY => None,
                                b if b >= 0 => Some(b),
                                b => {
                                    self.pos -= 8;
                                    return self.err(format!("negative bound {b} of symbol %r{reg}"));
                                }
                            };
                            Dim::Sym { reg, max }
                        }
                        v => {
                            self.pos -= 8;
                            return self.err(format!("negative dimension {v}"));
                        }
                    });
                }
                Type::Tensor { dtype, dims }
            }
            t => {
                self.pos -= 1;
                return self.err(format!("invalid type tag {t}"));
            }
        })
    }
    fn finish(&self, what: &str) -> R<()> {
        if self.remaining() != 0 {
            return self.err(format!("{} unexpected bytes at the end of the {what} section", self.remaining()));
        }
        Ok(())
    }
}

struct FuncHeader {
    ninstr: usize,
    nargs: usize,
}

/// Checks the header: magic, version, reserved bits and the file length, so that a
/// truncated file (even one cut exactly between two sections) or one with bytes appended is
/// refused before any section is read.
fn read_header(bytes: &[u8]) -> R<()> {
    let at = |offset: usize, message: String| Err(LoadError { offset, message });
    let n = bytes.len();
    let magic_len = MAGIC.len().min(n);
    if bytes[..magic_len] != MAGIC[..magic_len] {
        let found = &bytes[..magic_len];
        return at(0, format!("not an rxvm module: expected magic 00 52 58 42 (\"\\0RXB\"), found {found:02x?}"));
    }
    if n == 0 {
        return at(0, "not an rxvm module: the file is empty".into());
    }
    // The version first: a version-1 file has a shorter header, and must be told so.
    if n < 6 {
        return at(n, format!("truncated: the file ends at byte {n}, inside the {HEADER_LEN}-byte header"));
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    if version != VERSION {
        let hint = if version < VERSION {
            "; re-assemble it from its .rxa (`rxvm asm`) or recompile its model (`rxvm compile`)"
        } else {
            "; it was written by a newer rxvm"
        };
        return at(4, format!("unsupported .rxb version {version}: this rxvm reads version {VERSION} only{hint}"));
    }
    let Some(header) = bytes.first_chunk::<HEADER_LEN>() else {
        return at(n, format!("truncated: the file ends at byte {n}, inside the {HEADER_LEN}-byte header"));
    };
    if header[6..8] != [0, 0] {
        return at(6, "reserved header bytes must be zero".into());
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&header[8..HEADER_LEN]);
    let declared = u64::from_le_bytes(len);
    if declared < HEADER_LEN as u64 {
        return at(8, format!("the header declares a {declared}-byte file, shorter than the header itself"));
    }
    if (n as u64) < declared {
        return at(n, format!("truncated: the header declares {declared} bytes, but the file ends at byte {n}"));
    }
    if n as u64 > declared {
        return at(
            declared as usize,
            format!(
                "{} unexpected bytes after the end of the module (the header declares {declared} bytes)",
                n as u64 - declared
            ),
        );
    }
    Ok(())
}

/// Where the parts of a module start in its `.rxb`, for errors found after decoding (the
/// verifier's): byte offsets in the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileMap {
    /// Each constant's record in the Constants section.
    pub consts: Vec<usize>,
    /// Each function's record in the Functions section.
    pub funcs: Vec<usize>,
    /// Each function's first instruction word in the Code section (its instruction `pc` is
    /// at `code[f] + 16 * pc`).
    pub code: Vec<usize>,
    /// Each attribute set's record in the Attrs section.
    pub attr_sets: Vec<usize>,
    /// Each kernel's record in the Kernels section.
    pub kernels: Vec<usize>,
    /// Per function, each placement's record in the Placements section (empty when none).
    pub placements: Vec<Vec<usize>>,
}

impl FileMap {
    /// The byte offset of what `e` refuses: the instruction word, else the record of its
    /// item (constant, kernel, attribute set, placement), else its function's record.
    pub fn locate(&self, e: &VerifyError) -> Option<usize> {
        let f = e.func.map(|f| f.index());
        match (e.item, f, e.pc) {
            (Some(Item::Const(i)), ..) => self.consts.get(i as usize).copied(),
            (Some(Item::Kernel(i)), ..) => self.kernels.get(i as usize).copied(),
            (Some(Item::AttrSet(i)), ..) => self.attr_sets.get(i as usize).copied(),
            (Some(Item::Placement(k)), Some(f), _) => self.placements.get(f)?.get(k as usize).copied(),
            (Some(Item::Placement(_)), None, _) => None,
            (None, Some(f), Some(pc)) => self.code.get(f)?.checked_add(pc.checked_mul(WORD_SIZE)?),
            (None, Some(f), None) => self.funcs.get(f).copied(),
            (None, None, _) => None,
        }
    }
}

/// Decodes a `.rxb`. The result is well formed but not yet verified: run
/// [`crate::ir::verify::verify_module`] (or use [`crate::load_module`], which does both).
pub fn read_module(bytes: &[u8]) -> R<Module> {
    read_module_mapped(bytes).map(|(m, _)| m)
}

/// [`read_module`], also returning where each part of the module is in `bytes`.
pub fn read_module_mapped(bytes: &[u8]) -> R<(Module, FileMap)> {
    decode(bytes, None)
}

/// [`read_module_mapped`] whose constants are slices of `file` (e.g. a memory-mapped
/// `.rxb`), not copies: the weights stay where they are, once.
pub fn read_module_shared(file: &Bytes) -> R<(Module, FileMap)> {
    decode(file, Some(file))
}

/// Decodes `bytes`, which are `shared`'s when that is given: constants then share it.
fn decode(bytes: &[u8], shared: Option<&Bytes>) -> R<(Module, FileMap)> {
    let share = |data: &[u8]| match shared {
        Some(file) => file.slice_ref(data),
        None => Bytes::copy_from_slice(data),
    };
    let mut hdr = Reader { bytes, pos: 0, base: 0 };
    read_header(bytes)?;
    hdr.pos = HEADER_LEN;

    let mut m = Module::default();
    let mut map = FileMap::default();
    // Borrowed from `bytes`: each is copied once, where the module uses it.
    let mut strings: Vec<&str> = Vec::new();
    let mut headers: Vec<FuncHeader> = Vec::new();
    let mut last: Option<SectionId> = None;
    let mut seen_code = false;
    while hdr.remaining() > 0 {
        let id_at = hdr.pos;
        let id = hdr.u8("section id")?;
        let Some(id) = SectionId::from_u8(id) else {
            return Err(LoadError { offset: id_at, message: format!("unknown section id {id}") });
        };
        if let Some(l) = last {
            if id <= l {
                return Err(LoadError {
                    offset: id_at,
                    message: format!(
                        "section {id:?} after {l:?}: sections must appear once each, in increasing id order"
                    ),
                });
            }
        }
        last = Some(id);
        let len = hdr.u32("section length")? as usize;
        let base = hdr.pos;
        let payload = hdr.take(len, "section payload")?;
        let mut r = Reader { bytes: payload, pos: 0, base };
        match id {
            SectionId::Strings => {
                let n = r.count("string count", 4)?;
                strings.reserve(n);
                for _ in 0..n {
                    let len = r.count("string length", 1)?;
                    let at = r.pos;
                    let b = r.take(len, "string")?;
                    match std::str::from_utf8(b) {
                        Ok(s) => strings.push(s),
                        Err(e) => {
                            r.pos = at;
                            return r.err(format!("string is not UTF-8: {e}"));
                        }
                    }
                }
            }
            SectionId::Meta => {
                m.name = r.string(&strings, "module name")?.to_string();
            }
            SectionId::Literals => {
                let n = r.count("literal count", 9)?;
                m.literals.reserve(n);
                for _ in 0..n {
                    let tag = r.u8("literal tag")?;
                    let v = r.u64("literal value")?;
                    m.literals.push(match tag {
                        0 => Literal::Int(v as i64),
                        1 => Literal::Float(f64::from_bits(v)),
                        t => {
                            r.pos -= 9;
                            return r.err(format!("invalid literal tag {t}, expected 0 (int) or 1 (float)"));
                        }
                    });
                }
            }
            SectionId::Constants => {
                let n = r.count("constant count", 7)?;
                m.consts.reserve(n);
                map.consts.reserve(n);
                for _ in 0..n {
                    map.consts.push(r.base + r.pos);
                    let name = r.string(&strings, "constant name")?.to_string();
                    let dtype = r.dtype()?;
                    let rank = r.u8("rank")? as usize;
                    let mut shape = Vec::with_capacity(rank);
                    for _ in 0..rank {
                        let d = r.u64("dimension")? as i64;
                        if d < 0 {
                            r.pos -= 8;
                            return r.err(format!("constant @{name} has negative dimension {d}"));
                        }
                        shape.push(d);
                    }
                    let tag = r.u8("constant data tag")?;
                    let data = match tag {
                        // Bytes; tag 2 pads them to CONST_DATA_ALIGN in the file first.
                        0 | 2 => {
                            let at = r.pos;
                            let len = r.u64("constant byte length")?;
                            if tag == 2 {
                                let pad = r.u8("constant data padding")? as usize;
                                if pad >= CONST_DATA_ALIGN {
                                    r.pos -= 1;
                                    return r.err(format!(
                                        "constant @{name} has {pad} bytes of padding, at most {} expected",
                                        CONST_DATA_ALIGN - 1
                                    ));
                                }
                                let pad_at = r.pos;
                                let padding = r.take(pad, "constant data padding")?;
                                if let Some(i) = padding.iter().position(|&b| b != 0) {
                                    r.pos = pad_at + i;
                                    return r.err(format!(
                                        "constant @{name}'s padding is not zero: byte {i} of {pad} is {:#04x}",
                                        padding[i]
                                    ));
                                }
                            }
                            if len > r.remaining() as u64 {
                                r.pos = at;
                                return r.err(format!(
                                    "constant @{name} claims {len} data bytes but only {} remain",
                                    r.remaining()
                                ));
                            }
                            ConstData::Bytes(share(r.take(len as usize, "constant data")?))
                        }
                        1 => ConstData::Fill(f64::from_bits(r.u64("fill value")?)),
                        t => {
                            r.pos -= 1;
                            return r.err(format!(
                                "invalid constant data tag {t}, expected 0 (bytes), 1 (fill) or 2 (aligned bytes)"
                            ));
                        }
                    };
                    let c = Constant { name, dtype, shape, data };
                    let expected = c.numel().and_then(|n| n.checked_mul(dtype.size() as u64));
                    if let ConstData::Bytes(b) = &c.data {
                        if expected != Some(b.len() as u64) {
                            return r.err(format!(
                                "constant @{} is {}{:?} and needs {} bytes, but has {}",
                                c.name,
                                dtype,
                                c.shape,
                                expected.map_or("too many".to_string(), |e| e.to_string()),
                                b.len()
                            ));
                        }
                    }
                    m.consts.push(c);
                }
            }
            SectionId::Functions => {
                let n = r.count("function count", 21)?;
                m.funcs.reserve(n);
                headers.reserve(n);
                map.funcs.reserve(n);
                for _ in 0..n {
                    map.funcs.push(r.base + r.pos);
                    let name = r.string(&strings, "function name")?.to_string();
                    let np = r.count("parameter count", 1)?;
                    let mut params = Vec::with_capacity(np);
                    for _ in 0..np {
                        params.push(r.ty()?);
                    }
                    let nr = r.count("result count", 1)?;
                    let mut results = Vec::with_capacity(nr);
                    for _ in 0..nr {
                        results.push(r.ty()?);
                    }
                    let num_regs = r.u32("register count")?;
                    let ninstr = r.u32("instruction count")? as usize;
                    let nargs = r.u32("argument count")? as usize;
                    headers.push(FuncHeader { ninstr, nargs });
                    m.funcs.push(Function {
                        name,
                        params,
                        placements: Vec::new(),
                        results,
                        num_regs,
                        code: Vec::new(),
                        args: Vec::new(),
                        debug: FuncDebug::default(),
                    });
                }
            }
            SectionId::Code => {
                seen_code = true;
                for (f, h) in m.funcs.values_mut().zip(&headers) {
                    let need = h.ninstr.checked_mul(WORD_SIZE).and_then(|c| c.checked_add(h.nargs.checked_mul(4)?));
                    match need {
                        Some(need) if need <= r.remaining() => {}
                        _ => {
                            return r.err(format!(
                                "function @{} declares {} instructions and {} arguments, more than the {} code bytes that remain",
                                f.name,
                                h.ninstr,
                                h.nargs,
                                r.remaining()
                            ))
                        }
                    }
                    // Both fit (checked above): decode them from whole slices.
                    let start = r.pos;
                    map.code.push(r.base + start);
                    let words = r.take(h.ninstr * WORD_SIZE, "instruction")?;
                    f.code.reserve_exact(h.ninstr);
                    for (pc, w) in words.chunks_exact(WORD_SIZE).enumerate() {
                        // `chunks_exact` yields whole words; an error, not a panic, if not.
                        let Some(w) = w.first_chunk::<WORD_SIZE>() else {
                            return r.err("internal: a partial instruction word");
                        };
                        match Instr::decode(Word::from_bytes(w)) {
                            Ok(i) => f.code.push(i),
                            Err(e) => {
                                r.pos = start + pc * WORD_SIZE;
                                return r.err(format!("@{} instruction {pc}: {e}", f.name));
                            }
                        }
                    }
                    let args = r.take(h.nargs * 4, "argument")?;
                    f.args.reserve_exact(h.nargs);
                    f.args.extend(args.chunks_exact(4).map(|a| Arg(u32::from_le_bytes([a[0], a[1], a[2], a[3]]))));
                }
            }
            SectionId::Names => {
                for f in m.funcs.values_mut() {
                    let n = r.count("register name count", 4)?;
                    // Names are short: a guess at their length saves most regrowth.
                    f.debug.reg_names.reserve(n, 8 * n);
                    for _ in 0..n {
                        f.debug.reg_names.push(r.string(&strings, "register name")?);
                    }
                    let n = r.count("label count", 8)?;
                    f.debug.labels.reserve(n);
                    for _ in 0..n {
                        let pc = r.u32("label position")?;
                        let name = r.string(&strings, "label name")?.to_string();
                        f.debug.labels.push((pc, name));
                    }
                    if !f.debug.labels.windows(2).all(|w| w[0].0 < w[1].0) {
                        return r.err(format!("labels of @{} are not sorted by position", f.name));
                    }
                }
            }
            SectionId::Attrs => {
                let n = r.count("attribute set count", 4)?;
                m.attrs.reserve(n);
                map.attr_sets.reserve(n);
                for _ in 0..n {
                    map.attr_sets.push(r.base + r.pos);
                    let k = r.count("attribute count", 9)?;
                    let mut set = Attrs::default();
                    set.0.reserve(k);
                    for _ in 0..k {
                        let name = r.string(&strings, "attribute name")?.to_string();
                        let tag = r.u8("attribute tag")?;
                        let v = match tag {
                            0 => AttrValue::Int(r.u64("integer attribute")? as i64),
                            1 => AttrValue::Float(f64::from_bits(r.u64("float attribute")?)),
                            2 | 3 => {
                                let len = r.count("attribute list length", 8)?;
                                let mut xs = Vec::with_capacity(len);
                                for _ in 0..len {
                                    xs.push(r.u64("attribute list element")?);
                                }
                                if tag == 2 {
                                    AttrValue::Ints(xs.into_iter().map(|x| x as i64).collect())
                                } else {
                                    AttrValue::Floats(xs.into_iter().map(f64::from_bits).collect())
                                }
                            }
                            4 => AttrValue::Str(r.string(&strings, "string attribute")?.to_string()),
                            t => {
                                r.pos -= 1;
                                return r.err(format!("invalid attribute tag {t}, expected 0 (int), 1 (float), 2 (ints), 3 (floats) or 4 (string)"));
                            }
                        };
                        set.0.push((name, v));
                    }
                    m.attrs.push(set);
                }
            }
            SectionId::Kernels => {
                let n = r.count("kernel count", 12)?;
                for _ in 0..n {
                    map.kernels.push(r.base + r.pos);
                    let name = r.string(&strings, "kernel name")?.to_string();
                    let entry = r.string(&strings, "kernel entry")?.to_string();
                    let source = r.string(&strings, "kernel source")?.to_string();
                    m.kernels.push(UserKernel { name, entry, source });
                }
            }
            SectionId::Placements => {
                let n = r.count("placement function count", 8)?;
                let mut prev: Option<u32> = None;
                for _ in 0..n {
                    let at = r.pos;
                    let fi = r.u32("placement function index")?;
                    if let Some(p) = prev.filter(|p| fi <= *p) {
                        r.pos = at;
                        return r.err(if fi == p {
                            format!("the placements of function {fi} are listed twice")
                        } else {
                            format!(
                                "placements of function {fi} after those of function {p}: functions are listed in increasing index order"
                            )
                        });
                    }
                    prev = Some(fi);
                    let nfuncs = m.funcs.len();
                    let Some(f) = m.funcs.get_mut(FuncId::new(fi as usize)) else {
                        r.pos = at;
                        return r
                            .err(format!("placements refer to function {fi}, but the module has {nfuncs} functions"));
                    };
                    let at = r.pos;
                    let k = r.count("placement count", 16)?;
                    if k == 0 {
                        r.pos = at;
                        return r.err(format!("function @{} is listed with no placements", f.name));
                    }
                    f.placements.reserve(k);
                    map.placements.resize(nfuncs, Vec::new());
                    let at = &mut map.placements[fi as usize];
                    for _ in 0..k {
                        at.push(r.base + r.pos);
                        let param = r.u32("placed parameter")?;
                        let storage = r.u32("placement storage parameter")?;
                        let offset = r.u64("placement offset")?;
                        f.placements.push(Placement { param, storage, offset });
                    }
                }
            }
            SectionId::Spans => {
                if r.u8("source file flag")? == 1 {
                    m.source_file = Some(r.string(&strings, "source file")?.to_string());
                }
                for f in m.funcs.values_mut() {
                    let n = r.count("span count", 8)?;
                    // `count` checked that the n spans are there: decode them from one slice.
                    let bytes = r.take(n * 8, "span")?;
                    f.debug.locs.reserve_exact(n);
                    f.debug.locs.extend(bytes.chunks_exact(8).map(|c| {
                        let (l, c) = c.split_at(4);
                        let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                        SourceLoc { line: word(l), col: word(c) }
                    }));
                }
            }
        }
        r.finish(&format!("{id:?}"))?;
    }
    if !m.funcs.is_empty() && !seen_code {
        return Err(LoadError { offset: bytes.len(), message: "module has functions but no code section".into() });
    }
    Ok((m, map))
}
