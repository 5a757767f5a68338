//! OpenCL C for the narrow float dtypes the devices have no type for: bf16 (held as its
//! `ushort` bit pattern, computed in float) and the float8 formats (held as `uchar` codes,
//! storage only). Each dtype gets a load function to `float` and a store function from
//! `float` (and, for float8 from f64 sources, from `double`), converting exactly as
//! `crate::ir::minifloat` does on the host: bf16 rounds to nearest even, float8 rounds to
//! nearest even and saturates or overflows by `sat`, E8M0 rounds by `mode` (0 up, 1 down,
//! 2 nearest). NaNs load as the canonical quiet NaN of their sign (`NAN` is not that on
//! every device), as the host decodes them.

use crate::ir::minifloat::{Minifloat, RoundMode, Specials};
use crate::ir::types::DType;
use std::fmt::Write;

/// Whether `d` is stored in a way OpenCL C has no arithmetic type for (bf16, float8).
pub fn is_narrow(d: DType) -> bool {
    d == DType::BF16 || d.is_float8()
}

/// The `mode` argument of the store functions.
pub fn mode_arg(m: RoundMode) -> u32 {
    match m {
        RoundMode::Up => 0,
        RoundMode::Down => 1,
        RoundMode::Nearest => 2,
    }
}

/// The definitions of `d`'s load and store functions (empty for other dtypes); with
/// `double`, also the float8 store from `double` (the source needs fp64 enabled).
pub fn defs(d: DType, double: bool) -> String {
    let n = d.name();
    let mut s = String::new();
    if d == DType::BF16 {
        let _ = write!(
            s,
            "float ld_{n}(ushort b) {{ return as_float((uint)b << 16); }}\n\
             ushort st_{n}(float v, int sat, int mode) {{\n  \
               uint u = as_uint(v);\n  \
               if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);\n  \
               return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n}}\n"
        );
    } else if d == DType::F8E8M0 {
        let _ = write!(
            s,
            "float ld_{n}(uchar b) {{ return as_float(b == 0xff ? 0x7fc00000u : b == 0 ? 0x400000u : (uint)b << 23); }}\n\
             uchar st_{n}(float v, int sat, int mode) {{\n  \
               uint u = as_uint(v), e = (u >> 23) & 0xffu;\n  \
               if (e == 0xffu) return 0xff;\n  \
               int up = mode == 0 ? (u & 0x7fffffu) != 0 : mode == 2 ? ((u & 0x400000u) != 0 && \
             ((u & 0x200000u) != 0 || (u & 0x1fffffu) != 0 || e > 0)) : 0;\n  \
               if (up && !(sat && e == 0xfeu)) e += 1;\n  \
               return (uchar)e;\n}}\n"
        );
    } else if let Some(f) = Minifloat::of(d) {
        minifloat_defs(&mut s, n, &f, double);
    }
    s
}

fn minifloat_defs(s: &mut String, n: &str, f: &Minifloat, double: bool) {
    let (man, bias) = (f.man_bits, f.bias);
    let emask = (1u32 << f.exp_bits) - 1;
    let mmask = (1u32 << man) - 1;
    let emin = 1 - bias;
    let special = match f.specials {
        Specials::Fnuz => "if (b == 0x80) return as_float(0x7fc00000u);".to_string(),
        Specials::Fn => format!("if (e == {emask}u && m == {mmask}u) return as_float(s << 24 | 0x7fc00000u);"),
        Specials::Ieee => format!("if (e == {emask}u) return as_float(s << 24 | (m ? 0x7fc00000u : 0x7f800000u));"),
    };
    let _ = write!(
        s,
        "float ld_{n}(uchar b) {{\n  \
           uint s = b & 0x80u, e = (b >> {man}) & {emask}u, m = b & {mmask}u;\n  \
           {special}\n  \
           float a = e == 0 ? ldexp((float)m, {lo}) : ldexp((float)(m | {one}u), (int)e - {hi});\n  \
           return s ? -a : a;\n}}\n",
        lo = emin - man as i32,
        one = 1u32 << man,
        hi = bias + man as i32,
    );
    let nan = |neg: &str| match f.specials {
        Specials::Ieee => format!("({neg} | 0x{:02x})", (emask << man) | (1 << (man - 1))),
        Specials::Fn => format!("({neg} | 0x7f)"),
        Specials::Fnuz => "0x80".to_string(),
    };
    let over = match f.specials {
        Specials::Ieee => format!("(sg | 0x{:02x})", emask << man),
        _ => nan("sg"),
    };
    let zero = if f.specials == Specials::Fnuz { "0" } else { "sg" };
    let (max_code, max_value) = (f.max_code(), f.max_value());
    let mut one = |suffix: &str, real: &str| {
        let _ = write!(
            s,
            "uchar st_{n}{suffix}({real} v, int sat, int mode) {{\n  \
               uint sg = signbit(v) ? 0x80u : 0u;\n  \
               if (isnan(v)) return (uchar){nan};\n  \
               uint ovf = sat ? (sg | {max_code}u) : {over};\n  \
               {real} a = fabs(v);\n  \
               if (isinf(a)) return (uchar)ovf;\n  \
               int e = a == 0 ? {emin} : max(ilogb(a), {emin});\n  \
               {real} r = ldexp(rint(ldexp(a, {man} - e)), e - {man});\n  \
               if (r > ({real}){max_value:?}) return (uchar)ovf;\n  \
               if (r == 0) return (uchar){zero};\n  \
               uint c;\n  \
               if (r < ldexp(({real})1, {emin})) c = (uint)ldexp(r, {sub});\n  \
               else {{ int q = ilogb(r); c = ((uint)(q + {bias}) << {man}) | ((uint)ldexp(r, {man} - q) - {one}u); }}\n  \
               return (uchar)(sg | c);\n}}\n",
            nan = nan("sg"),
            sub = man as i32 - emin,
            one = 1u32 << man,
        );
    };
    one("", "float");
    if double {
        one("_d", "double");
    }
}

/// `raw` (an element of `d` as stored) as a float.
pub fn load(d: DType, raw: &str) -> String {
    format!("ld_{}({raw})", d.name())
}

/// The stored form of the value `v` as `d`; `double` when `v` is a double (float8 rounds
/// once from it; bf16 and E8M0 convert it to float first, as the host does).
pub fn store(d: DType, v: &str, double: bool, sat: bool, mode: RoundMode) -> String {
    let (n, m, sat) = (d.name(), mode_arg(mode), sat as u32);
    if double && Minifloat::of(d).is_some() {
        format!("st_{n}_d({v}, {sat}, {m})")
    } else if double {
        format!("st_{n}(convert_float_rte({v}), {sat}, {m})")
    } else {
        format!("st_{n}({v}, {sat}, {m})")
    }
}

/// [`store`] with ONNX's defaults (saturate, round up), from a float.
pub fn store_default(d: DType, v: &str) -> String {
    store(d, v, false, true, RoundMode::Up)
}
