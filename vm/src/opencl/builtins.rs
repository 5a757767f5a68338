//! OpenCL C for the tensor builtins, generated per (builtin, dtype, operand kinds): each
//! operand is a buffer (pointer + element offset) or an image (read through `LOADn(i)` with
//! the image's width and channel count), so one body serves every combination. Buffer
//! outputs run one work-item per element, image outputs one per texel (writing all its
//! channels at once). Sources are cached by text on each device, so each variant is built
//! once per device.

use super::narrow;
use crate::ir::builtins::Builtin;
use crate::ir::types::DType;
use std::fmt::Write;

/// The sampler and the image element load every kernel shares.
const PRELUDE: &str = "__constant sampler_t smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;
float img_load(__read_only image2d_t im, int w, int c, ulong i) {
  ulong tx = i / c; int comp = (int)(i % c);
  float4 v = read_imagef(im, smp, (int2)((int)(tx % w), (int)(tx / w)));
  return comp == 0 ? v.x : comp == 1 ? v.y : comp == 2 ? v.z : v.w;
}
";

/// How an operand reaches the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    Buffer,
    Image { channels: u64 },
}

/// The OpenCL element type and the type arithmetic happens in (float8 elements are only
/// filled and copied, as their codes).
pub fn cl_types(d: DType) -> Option<(&'static str, &'static str)> {
    Some(match d {
        DType::F32 => ("float", "float"),
        DType::F16 => ("half", "float"),
        DType::BF16 => ("ushort", "float"),
        DType::F8E4M3FN | DType::F8E5M2 | DType::F8E4M3FNUZ | DType::F8E5M2FNUZ | DType::F8E8M0 => ("uchar", "uchar"),
        DType::F64 => ("double", "double"),
        DType::I8 => ("char", "char"),
        DType::I16 => ("short", "short"),
        DType::I32 => ("int", "int"),
        DType::I64 => ("long", "long"),
        DType::U8 | DType::Bool => ("uchar", "uchar"),
        DType::U16 => ("ushort", "ushort"),
        DType::U32 => ("uint", "uint"),
        DType::U64 => ("ulong", "ulong"),
    })
}

/// Generates the kernel `k` for `b` with operands `ops` (the output is the last operand,
/// or the only one for `fill`/`iota`). Parameters, in order: for each operand either
/// `(global T* pN, ulong oN)` or `(image2d_t pN, int wN, int cN)`; then `ulong n` (output
/// elements) and the builtin's scalars (see [`scalar_params`]).
pub fn source(b: Builtin, dtype: DType, ops: &[Access]) -> Option<String> {
    if b == Builtin::MatMul {
        return matmul_source(dtype, ops);
    }
    let (t, mut ct) = cl_types(dtype)?;
    let is_float = dtype.is_float();
    // A copy of bf16 moves bit patterns (NaN payloads included), as the host's.
    let raw_copy = b == Builtin::Copy && narrow::is_narrow(dtype);
    if raw_copy {
        ct = t;
    }
    // float8 elements are codes: filled with an encoded value or copied, nothing else.
    if dtype.is_float8() && (!matches!(b, Builtin::Fill | Builtin::Copy) || ops.iter().any(|a| *a != Access::Buffer)) {
        return None;
    }
    let bf16 = dtype == DType::BF16 && !raw_copy;
    if dtype == DType::BF16 && ops.iter().any(|a| *a != Access::Buffer) {
        return None;
    }
    let mut s = String::new();
    if dtype == DType::F64 {
        s.push_str("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n");
    }
    s.push_str(PRELUDE);
    if bf16 {
        s.push_str(&narrow::defs(dtype, false));
    }
    let last = ops.len() - 1;
    // Loads for inputs.
    for (k, a) in ops.iter().enumerate().take(last) {
        match a {
            Access::Buffer if dtype == DType::F16 => {
                let _ = writeln!(s, "#define L{k}(i) vload_half(o{k} + (i), p{k})");
            }
            Access::Buffer if bf16 => {
                let _ = writeln!(s, "#define L{k}(i) {}", narrow::load(dtype, &format!("p{k}[o{k} + (i)]")));
            }
            Access::Buffer => {
                let _ = writeln!(s, "#define L{k}(i) (({ct})p{k}[o{k} + (i)])");
            }
            Access::Image { .. } => {
                let _ = writeln!(s, "#define L{k}(i) img_load(p{k}, w{k}, c{k}, (i))");
            }
        }
    }
    let mut params = Vec::new();
    for (k, a) in ops.iter().enumerate() {
        match a {
            Access::Buffer => {
                let q = if k == last { "" } else { "const " };
                params.push(format!("__global {q}{t}* p{k}, ulong o{k}"));
            }
            Access::Image { .. } => {
                let q = if k == last { "__write_only" } else { "__read_only" };
                params.push(format!("{q} image2d_t p{k}, int w{k}, int c{k}"));
            }
        }
    }
    params.push("ulong n".into());
    params.extend(scalar_params(b, ct));
    // The value of output element i.
    let expr = match b {
        Builtin::Fill => "val".to_string(),
        Builtin::Iota => format!("(({ct})start + ({ct})(i) * ({ct})step)"),
        Builtin::Copy => "L0(i)".into(),
        Builtin::Add => "(L0(i) + L1((i) * bstep))".into(),
        Builtin::Sub => "(L0(i) - L1((i) * bstep))".into(),
        Builtin::Mul => "(L0(i) * L1((i) * bstep))".into(),
        Builtin::Relu if is_float => format!("fmax(L0(i), ({ct})0)"),
        Builtin::Relu => format!("max(L0(i), ({ct})0)"),
        _ => return None,
    };
    let _ = writeln!(s, "__kernel void k({}) {{", params.join(", "));
    match ops[last] {
        Access::Buffer => {
            let _ = writeln!(s, "  ulong i = get_global_id(0);\n  if (i >= n) return;\n  {ct} v = {expr};");
            if dtype == DType::F16 {
                let _ = writeln!(s, "  vstore_half(v, o{last} + i, p{last});");
            } else if bf16 {
                let _ = writeln!(s, "  p{last}[o{last} + i] = {};", narrow::store_default(dtype, "v"));
            } else if dtype == DType::Bool {
                let _ = writeln!(s, "  p{last}[o{last} + i] = (v != 0);");
            } else {
                let _ = writeln!(s, "  p{last}[o{last} + i] = ({t})v;");
            }
        }
        Access::Image { .. } => {
            let _ = writeln!(
                s,
                "  ulong tx = get_global_id(0);\n  int c = c{last};\n  if (tx * c >= n) return;\n  float r[4] = {{0, 0, 0, 0}};\n  for (int q = 0; q < c; q++) {{ ulong i = tx * c + q; r[q] = (float)({expr}); }}\n  write_imagef(p{last}, (int2)((int)(tx % w{last}), (int)(tx / w{last})), (float4)(r[0], r[1], r[2], r[3]));"
            );
        }
    }
    s.push_str("}\n");
    Some(s)
}

/// OpenCL declarations of the scalar parameters after `n`.
pub fn scalar_params(b: Builtin, ct: &str) -> Vec<String> {
    match b {
        Builtin::Fill => vec![format!("{ct} val")],
        Builtin::Iota => vec![format!("{ct} start"), format!("{ct} step")],
        Builtin::Add | Builtin::Sub | Builtin::Mul => vec!["ulong bstep".into()],
        _ => vec![],
    }
}

/// Matmul: output element i = (r, c) accumulates row r of a times column c of b.
fn matmul_source(dtype: DType, ops: &[Access]) -> Option<String> {
    if narrow::is_narrow(dtype) {
        return None;
    }
    let (t, ct) = cl_types(dtype)?;
    let acc = ct;
    let mut s = String::new();
    if dtype == DType::F64 {
        s.push_str("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n");
    }
    s.push_str(PRELUDE);
    let mut params = Vec::new();
    let mut loads = Vec::new();
    for (k, a) in ops.iter().enumerate() {
        let out = k == 2;
        match a {
            Access::Buffer => {
                let q = if out { "" } else { "const " };
                params.push(format!("__global {q}{t}* p{k}, ulong o{k}"));
                loads.push(if dtype == DType::F16 {
                    format!("vload_half(o{k} + (IDX), p{k})")
                } else {
                    format!("(({ct})p{k}[o{k} + (IDX)])")
                });
            }
            Access::Image { .. } => {
                let q = if out { "__write_only" } else { "__read_only" };
                params.push(format!("{q} image2d_t p{k}, int w{k}, int c{k}"));
                loads.push(format!("img_load(p{k}, w{k}, c{k}, (IDX))"));
            }
        }
    }
    params.push("ulong n".into());
    params.push("ulong kk".into());
    params.push("ulong nn".into());
    let la = loads[0].replace("IDX", "r * kk + q");
    let lb = loads[1].replace("IDX", "q * nn + c");
    let _ = writeln!(s, "__kernel void k({}) {{", params.join(", "));
    let body = format!("{acc} a = 0; for (ulong q = 0; q < kk; q++) a += {la} * {lb};");
    match ops[2] {
        Access::Buffer => {
            let store = if dtype == DType::F16 {
                "vstore_half(a, o2 + i, p2);".to_string()
            } else {
                format!("p2[o2 + i] = ({t})a;")
            };
            let _ = writeln!(s, "  ulong i = get_global_id(0);\n  if (i >= n) return;\n  ulong r = i / nn, c = i % nn;\n  {body}\n  {store}");
        }
        Access::Image { .. } => {
            let _ = writeln!(
                s,
                "  ulong tx = get_global_id(0);\n  int ch = c2;\n  if (tx * ch >= n) return;\n  float res[4] = {{0, 0, 0, 0}};\n  for (int e = 0; e < ch; e++) {{ ulong i = tx * ch + e; ulong r = i / nn, c = i % nn; {body} res[e] = (float)a; }}\n  write_imagef(p2, (int2)((int)(tx % w2), (int)(tx / w2)), (float4)(res[0], res[1], res[2], res[3]));"
            );
        }
    }
    s.push_str("}\n");
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// bf16 builtins load as float and store rounded; float8 buffers are only filled and
    /// copied (as codes), and neither reads or writes images. The sources build on the
    /// test device, when there is one.
    #[test]
    fn narrow_float_builtins() {
        let buf = [Access::Buffer, Access::Buffer, Access::Buffer];
        let mut built = Vec::new();
        for b in [Builtin::Fill, Builtin::Iota, Builtin::Copy, Builtin::Add, Builtin::Mul, Builtin::Relu] {
            let n = match b {
                Builtin::Fill | Builtin::Iota => 1,
                Builtin::Copy | Builtin::Relu => 2,
                _ => 3,
            };
            let s = source(b, DType::BF16, &buf[..n]).unwrap_or_else(|| panic!("{b:?} on bf16"));
            assert!(s.contains("ushort* p") && s.contains("st_bf16") != (b == Builtin::Copy), "{s}");
            built.push(s);
            let f8 = source(b, DType::F8E4M3FN, &buf[..n]);
            assert_eq!(f8.is_some(), matches!(b, Builtin::Fill | Builtin::Copy), "{b:?} on f8e4m3fn");
            built.extend(f8);
        }
        assert!(source(Builtin::MatMul, DType::BF16, &buf).is_none());
        assert!(source(Builtin::Copy, DType::BF16, &[Access::Buffer, Access::Image { channels: 4 }]).is_none());
        let Ok(info) = crate::opencl::device::find_device(&std::env::var("RXVM_TEST_CL_DEVICE").unwrap_or_default())
        else {
            return;
        };
        let dev = crate::opencl::device::ClDevice::open(&info).unwrap();
        for s in built {
            dev.kernel(&s).unwrap_or_else(|e| panic!("{e}\n{s}"));
        }
    }
}
