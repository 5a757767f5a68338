//! Element types, memory scopes, value kinds and the texture folding rules.

use std::fmt;

/// Element type of a tensor. The discriminant is the bytecode encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DType {
    F32 = 0,
    F16 = 1,
    F64 = 2,
    I8 = 3,
    I16 = 4,
    I32 = 5,
    I64 = 6,
    U8 = 7,
    U16 = 8,
    U32 = 9,
    U64 = 10,
    Bool = 11,
    /// bfloat16: f32's exponent with 7 mantissa bits; computes in f32.
    BF16 = 12,
    /// float8 E4M3FN (bias 7, no infinities, NaN S.1111.111): a storage type.
    F8E4M3FN = 13,
    /// float8 E5M2 (bias 15, IEEE-like with infinities): a storage type.
    F8E5M2 = 14,
    /// float8 E4M3FNUZ (bias 8, no infinities, no -0, NaN 0x80): a storage type.
    F8E4M3FNUZ = 15,
    /// float8 E5M2FNUZ (bias 16, no infinities, no -0, NaN 0x80): a storage type.
    F8E5M2FNUZ = 16,
    /// float8 E8M0 (a power of two 2^(e - 127), no sign, no zero, NaN 0xFF): a storage type.
    F8E8M0 = 17,
}

impl DType {
    /// How many dtypes [`DType::ALL`] starts with that are numeric (f32 to u64): the
    /// element types arithmetic computes in natively. Bool follows them.
    pub const NUMERIC_COUNT: usize = 11;

    /// Every dtype, in encoding order (`ALL[d as usize] == d`).
    pub const ALL: [DType; 18] = [
        DType::F32,
        DType::F16,
        DType::F64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::Bool,
        DType::BF16,
        DType::F8E4M3FN,
        DType::F8E5M2,
        DType::F8E4M3FNUZ,
        DType::F8E5M2FNUZ,
        DType::F8E8M0,
    ];

    /// The float8 dtypes: storage types that only Cast, CastLike, the quantizers and the
    /// operators that move bytes take.
    pub const FLOAT8: [DType; 5] =
        [DType::F8E4M3FN, DType::F8E5M2, DType::F8E4M3FNUZ, DType::F8E5M2FNUZ, DType::F8E8M0];

    pub fn is_float8(self) -> bool {
        DType::FLOAT8.contains(&self)
    }

    /// The values an integer dtype holds (bool: 0 ..= 1); `None` for floats.
    pub fn int_range(self) -> Option<(i128, i128)> {
        Some(match self {
            DType::I8 => (i8::MIN as i128, i8::MAX as i128),
            DType::I16 => (i16::MIN as i128, i16::MAX as i128),
            DType::I32 => (i32::MIN as i128, i32::MAX as i128),
            DType::I64 => (i64::MIN as i128, i64::MAX as i128),
            DType::U8 => (0, u8::MAX as i128),
            DType::U16 => (0, u16::MAX as i128),
            DType::U32 => (0, u32::MAX as i128),
            DType::U64 => (0, u64::MAX as i128),
            DType::Bool => (0, 1),
            DType::F16 | DType::F32 | DType::F64 | DType::BF16 => return None,
            DType::F8E4M3FN | DType::F8E5M2 | DType::F8E4M3FNUZ | DType::F8E5M2FNUZ | DType::F8E8M0 => return None,
        })
    }

    pub fn from_u8(v: u8) -> Option<DType> {
        DType::ALL.get(v as usize).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::F64 => "f64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::Bool => "bool",
            DType::BF16 => "bf16",
            DType::F8E4M3FN => "f8e4m3fn",
            DType::F8E5M2 => "f8e5m2",
            DType::F8E4M3FNUZ => "f8e4m3fnuz",
            DType::F8E5M2FNUZ => "f8e5m2fnuz",
            DType::F8E8M0 => "f8e8m0",
        }
    }

    pub fn from_name(s: &str) -> Option<DType> {
        DType::ALL.iter().copied().find(|d| d.name() == s)
    }

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::F8E4M3FN | DType::F8E5M2 | DType::F8E4M3FNUZ | DType::F8E5M2FNUZ | DType::F8E8M0 => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// The dtype of an ONNX `TensorProto.DataType` code.
    pub fn from_onnx(code: i64) -> Option<DType> {
        Some(match code {
            1 => DType::F32,
            2 => DType::U8,
            3 => DType::I8,
            4 => DType::U16,
            5 => DType::I16,
            6 => DType::I32,
            7 => DType::I64,
            9 => DType::Bool,
            10 => DType::F16,
            11 => DType::F64,
            12 => DType::U32,
            13 => DType::U64,
            16 => DType::BF16,
            17 => DType::F8E4M3FN,
            18 => DType::F8E4M3FNUZ,
            19 => DType::F8E5M2,
            20 => DType::F8E5M2FNUZ,
            24 => DType::F8E8M0,
            _ => return None,
        })
    }

    /// Every float dtype, the float8 storage types included.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::F64 | DType::BF16) || self.is_float8()
    }

    /// The ONNX `TensorProto.DataType` code of this dtype.
    pub fn onnx_code(self) -> i64 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::U16 => 4,
            DType::I16 => 5,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::Bool => 9,
            DType::F16 => 10,
            DType::F64 => 11,
            DType::U32 => 12,
            DType::U64 => 13,
            DType::BF16 => 16,
            DType::F8E4M3FN => 17,
            DType::F8E4M3FNUZ => 18,
            DType::F8E5M2 => 19,
            DType::F8E5M2FNUZ => 20,
            DType::F8E8M0 => 24,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Memory scope of a storage or a view. The discriminant is the bytecode encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Scope {
    /// A plain linear buffer.
    Global = 0,
    /// 2-D image: height = product of all dims but the last two, width = second-to-last.
    Texture = 1,
    /// 2-D image: height = dim 0, width = product of dims 1..rank-2.
    TextureWeight = 2,
    /// 2-D image: height = dim 0 * dim 1, width = product of dims 2..rank-2.
    TextureNhwc = 3,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Global, Scope::Texture, Scope::TextureWeight, Scope::TextureNhwc];

    pub fn from_u8(v: u8) -> Option<Scope> {
        Scope::ALL.get(v as usize).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::Texture => "global.texture",
            Scope::TextureWeight => "global.texture-weight",
            Scope::TextureNhwc => "global.texture-nhwc",
        }
    }

    pub fn from_name(s: &str) -> Option<Scope> {
        Scope::ALL.iter().copied().find(|d| d.name() == s)
    }

    pub fn is_texture(self) -> bool {
        self != Scope::Global
    }

    /// Minimum rank a view of this scope needs.
    pub fn min_rank(self) -> usize {
        match self {
            Scope::Global => 0,
            Scope::Texture | Scope::TextureWeight => 2,
            Scope::TextureNhwc => 3,
        }
    }

    /// Folds an N-d shape into a 2-D image `(width, height, channels)`.
    /// `None` for `global` or when the rank is too small for the scope.
    pub fn image_dims(self, shape: &[i64]) -> Option<(i64, i64, i64)> {
        let r = shape.len();
        if self == Scope::Global || r < self.min_rank() {
            return None;
        }
        let prod = |s: &[i64]| s.iter().try_fold(1i64, |a, &d| a.checked_mul(d));
        let channels = shape[r - 1];
        let (width, height) = match self {
            Scope::Global => return None,
            Scope::Texture => (shape[r - 2], prod(&shape[..r - 2])?),
            Scope::TextureWeight => (prod(&shape[1..r - 1])?, shape[0]),
            Scope::TextureNhwc => (prod(&shape[2..r - 1])?, shape[0].checked_mul(shape[1])?),
        };
        Some((width, height, channels))
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The static kind of a register or parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    Int = 0,
    Float = 1,
    Shape = 2,
    Storage = 3,
    Tensor = 4,
}

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::Int, Kind::Float, Kind::Shape, Kind::Storage, Kind::Tensor];

    pub fn from_u8(v: u8) -> Option<Kind> {
        Kind::ALL.get(v as usize).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Int => "int",
            Kind::Float => "float",
            Kind::Shape => "shape",
            Kind::Storage => "storage",
            Kind::Tensor => "tensor",
        }
    }
}

impl Kind {
    /// `an int`, `a tensor`, ...
    pub fn with_article(self) -> &'static str {
        match self {
            Kind::Int => "an int",
            Kind::Float => "a float",
            Kind::Shape => "a shape",
            Kind::Storage => "a storage",
            Kind::Tensor => "a tensor",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A dimension in a declared tensor type: known, any (`?`), or a symbol (`%n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    Known(i64),
    Any,
    /// A symbolic dimension: the `int` register `reg` of the function, bound at entry to
    /// the size its first occurrence in the parameters has; every other occurrence must
    /// have the same size (that is how a relation such as `m == n` is written), and the
    /// size must not exceed `max` when one is declared (`where %n <= 8`).
    Sym {
        reg: u32,
        max: Option<i64>,
    },
}

/// Declared type of a function parameter or result.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Int,
    Float,
    Shape,
    Storage,
    /// Any tensor.
    AnyTensor,
    /// A tensor of a given dtype and rank, each dim known or `?`.
    Tensor {
        dtype: DType,
        dims: Vec<Dim>,
    },
}

/// Bytes of a dense (row-major, unpadded) tensor; `None` for a negative dimension or when
/// the size overflows `u64`.
pub fn dense_bytes(dtype: DType, shape: &[i64]) -> Option<u64> {
    shape.iter().try_fold(dtype.size() as u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))
}

impl Type {
    /// The dtype and shape of a tensor type whose dimensions are all known and non-negative.
    pub fn known_shape(&self) -> Option<(DType, Vec<i64>)> {
        match self {
            Type::Tensor { dtype, dims } => dims
                .iter()
                .map(|d| match d {
                    Dim::Known(v) if *v >= 0 => Some(*v),
                    _ => None,
                })
                .collect::<Option<Vec<i64>>>()
                .map(|shape| (*dtype, shape)),
            _ => None,
        }
    }

    /// The symbolic dimensions of a tensor type, with their positions.
    pub fn symbols(&self) -> impl Iterator<Item = (usize, u32, Option<i64>)> + '_ {
        let dims: &[Dim] = match self {
            Type::Tensor { dims, .. } => dims,
            _ => &[],
        };
        dims.iter().enumerate().filter_map(|(i, d)| match d {
            Dim::Sym { reg, max } => Some((i, *reg, *max)),
            _ => None,
        })
    }

    pub fn kind(&self) -> Kind {
        match self {
            Type::Int => Kind::Int,
            Type::Float => Kind::Float,
            Type::Shape => Kind::Shape,
            Type::Storage => Kind::Storage,
            Type::AnyTensor | Type::Tensor { .. } => Kind::Tensor,
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Int => f.write_str("int"),
            Type::Float => f.write_str("float"),
            Type::Shape => f.write_str("shape"),
            Type::Storage => f.write_str("storage"),
            Type::AnyTensor => f.write_str("tensor"),
            Type::Tensor { dtype, dims } => {
                write!(f, "{dtype}[")?;
                for (i, d) in dims.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    match d {
                        Dim::Known(v) => write!(f, "{v}")?,
                        Dim::Any => f.write_str("?")?,
                        // Without the function's register names (see `Function::type_text`).
                        Dim::Sym { reg, .. } => write!(f, "%r{reg}")?,
                    }
                }
                f.write_str("]")
            }
        }
    }
}

/// Rounds `v` up to a multiple of `a` (`a` > 0). `None` on overflow.
pub fn align_up(v: u64, a: u64) -> Option<u64> {
    if a == 0 {
        return Some(v);
    }
    let r = v % a;
    if r == 0 {
        Some(v)
    } else {
        v.checked_add(a - r)
    }
}

/// Memory geometry of a 2-D image view laid over a linear buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageLayout {
    pub width: u64,
    pub height: u64,
    /// Texels per row including padding: `align_up(width, pitch_align_px)`.
    pub pitch_px: u64,
    pub channels: u64,
    pub bytes_per_texel: u64,
}

impl ImageLayout {
    /// Folds `shape` per `scope` and pads rows to `pitch_align_px` texels.
    pub fn new(scope: Scope, dtype: DType, shape: &[i64], pitch_align_px: u64) -> Result<ImageLayout, String> {
        let (w, h, c) = scope.image_dims(shape).ok_or_else(|| {
            format!("scope \"{scope}\" needs a shape of rank >= {}, found rank {}", scope.min_rank(), shape.len())
        })?;
        if !matches!(c, 1 | 2 | 4) {
            return Err(format!(
                "the last dim of a \"{scope}\" view is the texel's channel count and must be 1, 2 or 4, found {c}"
            ));
        }
        if w <= 0 || h <= 0 {
            return Err(format!("image of {w}x{h} texels is empty"));
        }
        let (w, h, c) = (w as u64, h as u64, c as u64);
        let pitch_px = align_up(w, pitch_align_px.max(1)).ok_or("image pitch overflows")?;
        Ok(ImageLayout { width: w, height: h, pitch_px, channels: c, bytes_per_texel: c * dtype.size() as u64 })
    }

    pub fn row_pitch_bytes(&self) -> u64 {
        self.pitch_px * self.bytes_per_texel
    }

    /// Bytes the image covers in its storage: `pitch * bytes_per_texel * height`.
    pub fn byte_size(&self) -> Option<u64> {
        self.row_pitch_bytes().checked_mul(self.height)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texture_folding_rules() {
        let s = [1, 2, 8, 4];
        assert_eq!(Scope::Texture.image_dims(&s), Some((8, 2, 4)));
        assert_eq!(Scope::TextureWeight.image_dims(&[16, 3, 3, 4]), Some((9, 16, 4)));
        assert_eq!(Scope::TextureNhwc.image_dims(&[2, 5, 7, 3, 4]), Some((21, 10, 4)));
        assert_eq!(Scope::TextureNhwc.image_dims(&[2, 4]), None);
        assert_eq!(Scope::Global.image_dims(&s), None);
    }

    #[test]
    fn pitched_size_follows_alignment() {
        let l = ImageLayout::new(Scope::Texture, DType::F32, &[1, 2, 30, 4], 64).unwrap();
        assert_eq!((l.width, l.height, l.pitch_px), (30, 2, 64));
        assert_eq!(l.row_pitch_bytes(), 64 * 16);
        assert_eq!(l.byte_size(), Some(64 * 16 * 2));
        assert!(ImageLayout::new(Scope::Texture, DType::F32, &[1, 2, 8, 3], 64).is_err());
    }

    #[test]
    fn dtype_and_scope_names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
            assert_eq!(DType::from_u8(d as u8), Some(d));
            assert_eq!(DType::from_onnx(d.onnx_code()), Some(d));
        }
        // The codes of the first dtypes are the .rxb encoding of files written before the
        // others were appended.
        assert_eq!((DType::Bool as u8, DType::BF16 as u8, DType::F8E8M0 as u8), (11, 12, 17));
        for s in Scope::ALL {
            assert_eq!(Scope::from_name(s.name()), Some(s));
        }
    }
}
