//! Constants and literal values: string escapes, integer and float literals (ranges, NaN
//! payloads), and the encoding of `const` declarations (lists, `fill`) into their bytes.

use super::state::*;
use rxvm_vm::minifloat::{e8m0_encode, Minifloat, RoundMode, E5M2};

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
pub(super) fn a_dtype(d: DType) -> String {
    match d.name().as_bytes()[0] {
        b'i' | b'f' => format!("an {}", d.name()),
        _ => format!("a {}", d.name()),
    }
}

/// Integer range of an integer dtype (bool is 0..=1).
pub(super) fn int_range(d: DType) -> Option<(i128, i128)> {
    d.int_range()
}

/// Mantissa width, exponent mask and sign bit of a float dtype, as raw bits.
pub(super) fn float_layout(d: DType) -> (u32, u64, u64) {
    match d {
        DType::F16 => (10, 0x7c00, 0x8000),
        DType::BF16 => (7, 0x7f80, 0x8000),
        DType::F8E5M2 => (2, 0x7c, 0x80),
        DType::F32 => (23, 0x7f80_0000, 0x8000_0000),
        _ => (52, 0x7ff0_0000_0000_0000, 0x8000_0000_0000_0000),
    }
}

/// The raw bits of a NaN literal in a float dtype.
pub(super) fn nan_bits(d: DType, negative: bool, payload: Option<u64>, span: Span) -> Result<u64, Diagnostic> {
    // The float8 formats without IEEE NaNs have one NaN code (of each sign, for E4M3FN)
    // and no payload.
    if matches!(d, DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2FNUZ | DType::F8E8M0) {
        if payload.is_some() {
            return Err(Diagnostic::new(span, format!("{} has no NaN payloads", d.name()))
                .with_label("write `nan`")
                .with_note(format!("{} has a single NaN code", d.name())));
        }
        return Ok(match d {
            DType::F8E4M3FN => 0x7f | if negative { 0x80 } else { 0 },
            DType::F8E8M0 => 0xff,
            _ => 0x80,
        });
    }
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
pub(super) fn f64_of(f: &FloatLit<'_>) -> Result<f64, Diagnostic> {
    match f.value {
        FloatVal::Num(v) => Ok(v),
        FloatVal::Nan { negative, payload } => Ok(f64::from_bits(nan_bits(DType::F64, negative, payload, f.span)?)),
    }
}

pub(super) fn int_out_of_range(span: Span, what: &str) -> Diagnostic {
    Diagnostic::new(span, format!("integer literal out of range for {what}")).with_label("out of range")
}

#[inline]
pub(super) fn i64_of(i: &IntLit) -> Result<i64, Diagnostic> {
    match i.value.and_then(|v| i64::try_from(v).ok()) {
        Some(v) => Ok(v),
        None => Err(i64_error(i)),
    }
}

#[cold]
pub(super) fn i64_error(i: &IntLit) -> Diagnostic {
    int_out_of_range(i.span, "i64").with_note(format!("integers are in {} ..= {}", i64::MIN, i64::MAX))
}

/// Appends one element of a byte constant, little endian.
pub(super) fn encode_elem(d: DType, e: &Elem<'_>, out: &mut Vec<u8>) -> Result<(), Diagnostic> {
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

pub(super) fn float_out_of_range(span: Span, d: DType) -> Diagnostic {
    Diagnostic::new(span, format!("float literal out of range for {}", d.name()))
        .with_label("too large: it would be infinite")
}

pub(super) fn encode_float(d: DType, v: f64, span: Span, out: &mut Vec<u8>) -> Result<(), Diagnostic> {
    match d {
        DType::F64 => out.extend_from_slice(&v.to_bits().to_le_bytes()),
        DType::F32 => {
            let x = v as f32;
            if x.is_infinite() && v.is_finite() {
                return Err(float_out_of_range(span, d));
            }
            out.extend_from_slice(&x.to_bits().to_le_bytes())
        }
        DType::BF16 => {
            let x = half::bf16::from_f64(v);
            if x.is_infinite() && v.is_finite() {
                return Err(float_out_of_range(span, d));
            }
            out.extend_from_slice(&x.to_bits().to_le_bytes())
        }
        DType::F8E8M0 => {
            // A power of two 2^-127 ..= 2^127: rounded to the nearer exponent.
            if v.is_nan() || v <= 0.0 || v.is_infinite() {
                return Err(Diagnostic::new(span, "f8e8m0 holds positive finite powers of two only")
                    .with_label("not positive and finite"));
            }
            let b = e8m0_encode(v as f32, false, RoundMode::Nearest);
            if b == 0xff || (v as f32).is_infinite() {
                return Err(float_out_of_range(span, d));
            }
            out.push(b)
        }
        d if d.is_float8() => {
            let f = Minifloat::of(d).unwrap_or(E5M2);
            // Rounded once to nearest even; a finite value past the largest is an error.
            let b = f.encode(v, false);
            if v.is_finite() && !f.decode(b).is_finite() {
                return Err(float_out_of_range(span, d));
            }
            out.push(b)
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
pub(super) struct ConstType {
    dtype: DType,
    shape: Vec<i64>,
}

impl Asm<'_> {
    pub(super) fn const_type(&mut self, c: &ConstDecl<'_>) -> Option<ConstType> {
        let ty = self.ty(&c.ty, None);
        match ty {
            Type::Tensor { dtype, dims } => {
                let mut shape = Vec::with_capacity(dims.len());
                for (d, e) in dims.iter().zip(match c.ty.kind {
                    TypeKind::Tensor { dims, .. } => dims,
                    _ => &[],
                }) {
                    match d {
                        Dim::Known(v) => shape.push(*v),
                        Dim::Any | Dim::Sym { .. } => {
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

    pub(super) fn constant(&mut self, c: &ConstDecl<'_>) -> Constant {
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
                ConstData::Bytes(bytes.into())
            }
            ConstInit::File(s) => match self.file_bytes(s, nbytes, &type_text) {
                Some(b) => ConstData::Bytes(b.into()),
                None => ConstData::Fill(0.0),
            },
        };
        Constant { name, dtype, shape, data }
    }

    pub(super) fn fill_value(&mut self, d: DType, n: &Number<'_>) -> f64 {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
