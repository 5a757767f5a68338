//! The narrow float formats ONNX stores: bfloat16 (through `half::bf16`) and the float8
//! formats, as ONNX's reference (`onnx.reference.ops.op_cast`, `ml_dtypes`) converts them.
//!
//! The four sign-exponent-mantissa float8 formats are one parameterised [`Minifloat`]:
//! decoding is exact (every value is an f32 and an f64), encoding rounds to nearest even
//! and then either saturates (ONNX `saturate=1`: an out-of-range value, infinities
//! included, becomes the largest finite value of its sign) or overflows (`saturate=0`:
//! infinity for E5M2, NaN for the formats without infinities). E8M0 (a bare exponent) has
//! its own rounding modes ([`e8m0_encode`]).

use crate::ir::types::DType;

/// What a float8 format spends its top codes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Specials {
    /// IEEE 754: the top exponent is infinity (mantissa 0) or NaN.
    Ieee,
    /// "Finite": no infinities; only S.1111.111 is NaN.
    Fn,
    /// "Finite, unsigned zero": no infinities and no -0; 0x80 is the only NaN.
    Fnuz,
}

/// A float8 format with a sign bit, `exp_bits` exponent bits of `bias` and `man_bits`
/// mantissa bits (1 + exp_bits + man_bits = 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Minifloat {
    pub exp_bits: u32,
    pub man_bits: u32,
    pub bias: i32,
    pub specials: Specials,
}

pub const E4M3FN: Minifloat = Minifloat { exp_bits: 4, man_bits: 3, bias: 7, specials: Specials::Fn };
pub const E5M2: Minifloat = Minifloat { exp_bits: 5, man_bits: 2, bias: 15, specials: Specials::Ieee };
pub const E4M3FNUZ: Minifloat = Minifloat { exp_bits: 4, man_bits: 3, bias: 8, specials: Specials::Fnuz };
pub const E5M2FNUZ: Minifloat = Minifloat { exp_bits: 5, man_bits: 2, bias: 16, specials: Specials::Fnuz };

/// How [`e8m0_encode`] rounds a value between two powers of two (ONNX Cast `round_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundMode {
    /// Up when any mantissa bit is set (ONNX's default).
    Up,
    /// Down: the exponent alone.
    Down,
    /// Up when the mantissa is at least 1.5 (as ONNX's reference decides it).
    Nearest,
}

impl RoundMode {
    /// The ONNX attribute spelling: `up`, `down` or `nearest`.
    pub fn from_name(s: &str) -> Option<RoundMode> {
        Some(match s {
            "up" => RoundMode::Up,
            "down" => RoundMode::Down,
            "nearest" => RoundMode::Nearest,
            _ => return None,
        })
    }
}

/// `2^k` for the small `k` the formats need (exact).
fn pow2(k: i32) -> f64 {
    2f64.powi(k)
}

/// `floor(log2(a))` of a positive finite `a` (f64 subnormals give -1023, below every
/// float8 exponent).
fn ilog2(a: f64) -> i32 {
    ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

impl Minifloat {
    /// The minifloat format of a float8 dtype other than E8M0.
    pub fn of(d: DType) -> Option<Minifloat> {
        Some(match d {
            DType::F8E4M3FN => E4M3FN,
            DType::F8E5M2 => E5M2,
            DType::F8E4M3FNUZ => E4M3FNUZ,
            DType::F8E5M2FNUZ => E5M2FNUZ,
            _ => return None,
        })
    }

    fn exp_mask(&self) -> u32 {
        (1 << self.exp_bits) - 1
    }

    fn man_mask(&self) -> u32 {
        (1 << self.man_bits) - 1
    }

    /// The smallest normal exponent.
    fn emin(&self) -> i32 {
        1 - self.bias
    }

    /// The code of the largest finite value (positive).
    pub fn max_code(&self) -> u8 {
        let (e, m) = match self.specials {
            Specials::Ieee => (self.exp_mask() - 1, self.man_mask()),
            Specials::Fn => (self.exp_mask(), self.man_mask() - 1),
            Specials::Fnuz => (self.exp_mask(), self.man_mask()),
        };
        ((e << self.man_bits) | m) as u8
    }

    /// The largest finite value.
    pub fn max_value(&self) -> f64 {
        self.decode(self.max_code())
    }

    /// The NaN code `encode` gives (of the NaN's sign where the format has signed NaNs, as
    /// ml_dtypes does).
    pub fn nan_code(&self, negative: bool) -> u8 {
        let s = if negative { 0x80 } else { 0 };
        match self.specials {
            // The quiet bit: the top mantissa bit.
            Specials::Ieee => s | ((self.exp_mask() << self.man_bits) | (1 << (self.man_bits - 1))) as u8,
            Specials::Fn => s | 0x7f,
            Specials::Fnuz => 0x80,
        }
    }

    /// The value of code `b` (exact).
    pub fn decode(&self, b: u8) -> f64 {
        let b = b as u32;
        let neg = b & 0x80 != 0;
        let e = (b >> self.man_bits) & self.exp_mask();
        let m = b & self.man_mask();
        match self.specials {
            Specials::Fnuz if b == 0x80 => return f64::NAN,
            Specials::Fn if e == self.exp_mask() && m == self.man_mask() => {
                return if neg { -f64::NAN } else { f64::NAN }
            }
            Specials::Ieee if e == self.exp_mask() => {
                let v = if m == 0 { f64::INFINITY } else { f64::NAN };
                return if neg { -v } else { v };
            }
            _ => {}
        }
        let mag = if e == 0 {
            m as f64 * pow2(self.emin() - self.man_bits as i32)
        } else {
            ((1 << self.man_bits) + m) as f64 * pow2(e as i32 - self.bias - self.man_bits as i32)
        };
        if neg {
            -mag
        } else {
            mag
        }
    }

    /// `v` rounded to nearest even; out of range (infinities included) it saturates to the
    /// largest finite value of its sign, or without `saturate` becomes infinity (E5M2) or
    /// NaN (the formats without infinities).
    pub fn encode(&self, v: f64, saturate: bool) -> u8 {
        let neg = v.is_sign_negative();
        if v.is_nan() {
            return self.nan_code(neg);
        }
        let sign: u8 = if neg { 0x80 } else { 0 };
        let overflow = || {
            if saturate {
                sign | self.max_code()
            } else if self.specials == Specials::Ieee {
                sign | (self.exp_mask() << self.man_bits) as u8
            } else {
                self.nan_code(neg)
            }
        };
        let a = v.abs();
        if a.is_infinite() {
            return overflow();
        }
        let man = self.man_bits as i32;
        // The spacing of representable values around `a`: subnormals share emin's.
        let e = if a == 0.0 { self.emin() } else { ilog2(a).max(self.emin()) };
        let q = pow2(e - man);
        let r = (a / q).round_ties_even() * q;
        if r > self.max_value() {
            return overflow();
        }
        if r == 0.0 {
            // FNUZ has no -0 (0x80 is NaN).
            return if self.specials == Specials::Fnuz { 0 } else { sign };
        }
        let code = if r < pow2(self.emin()) {
            (r / pow2(self.emin() - man)) as u32
        } else {
            let e = ilog2(r);
            (((e + self.bias) as u32) << self.man_bits) | ((r / pow2(e - man)) as u32 - (1 << self.man_bits))
        };
        sign | code as u8
    }
}

/// The value of E8M0 code `b`: `2^(b - 127)`, NaN for 0xFF.
pub fn e8m0_decode(b: u8) -> f64 {
    if b == 0xff {
        f64::NAN
    } else {
        pow2(b as i32 - 127)
    }
}

/// `v` (as f32) to E8M0, as ONNX's `to_float8e8m0`: the sign is dropped, NaN and
/// infinities become 0xFF (NaN), zero and f32 subnormals have exponent 0 (then round as any
/// value); `saturate` keeps a value that rounds past 2^127 at 2^127 instead of NaN.
pub fn e8m0_encode(v: f32, saturate: bool, mode: RoundMode) -> u8 {
    let bits = v.to_bits();
    let e = (bits >> 23) & 0xff;
    if e == 0xff {
        return 0xff;
    }
    let round_up = match mode {
        RoundMode::Down => false,
        RoundMode::Up => bits & 0x7f_ffff != 0,
        RoundMode::Nearest => {
            let (g, r, s) = (bits & 0x40_0000 != 0, bits & 0x20_0000 != 0, bits & 0x1f_ffff != 0);
            g && (r || s || e > 0)
        }
    };
    if round_up && !(saturate && e == 0xfe) {
        (e + 1) as u8
    } else {
        e as u8
    }
}

/// bfloat16 from f64, through f32 as ml_dtypes (Eigen) converts (each step rounds to
/// nearest even; NaN stays NaN).
pub fn bf16_from_f64(v: f64) -> half::bf16 {
    half::bf16::from_f32(v as f32)
}

/// Decodes one element of a float8 dtype (`None` for other dtypes).
pub fn float8_decode(d: DType, b: u8) -> Option<f64> {
    if d == DType::F8E8M0 {
        return Some(e8m0_decode(b));
    }
    Minifloat::of(d).map(|f| f.decode(b))
}

/// Encodes `v` as the float8 dtype `d` (`None` for other dtypes); E8M0 rounds by `mode`.
pub fn float8_encode(d: DType, v: f64, saturate: bool, mode: RoundMode) -> Option<u8> {
    if d == DType::F8E8M0 {
        return Some(e8m0_encode(v as f32, saturate, mode));
    }
    Minifloat::of(d).map(|f| f.encode(v, saturate))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORMATS: [(DType, Minifloat); 4] = [
        (DType::F8E4M3FN, E4M3FN),
        (DType::F8E5M2, E5M2),
        (DType::F8E4M3FNUZ, E4M3FNUZ),
        (DType::F8E5M2FNUZ, E5M2FNUZ),
    ];

    /// `ml_dtypes`' decoding of codes 0..=255 (`np.arange(256, dtype=np.uint8).view(t)
    /// .astype(np.float32)`), as f32 bits, per format: generated once from the onnx
    /// reference's environment.
    fn reference_decoded(d: DType) -> Vec<u32> {
        let s = match d {
            DType::F8E4M3FN => REF_E4M3FN,
            DType::F8E5M2 => REF_E5M2,
            DType::F8E4M3FNUZ => REF_E4M3FNUZ,
            DType::F8E5M2FNUZ => REF_E5M2FNUZ,
            _ => REF_E8M0,
        };
        s.split_whitespace().map(|w| u32::from_str_radix(w, 16).unwrap()).collect()
    }

    #[test]
    fn every_float8_code_decodes_as_the_reference_does() {
        for d in DType::FLOAT8 {
            let want = reference_decoded(d);
            assert_eq!(want.len(), 256, "{d}");
            for b in 0..=255u8 {
                let got = float8_decode(d, b).unwrap() as f32;
                let w = f32::from_bits(want[b as usize]);
                if w.is_nan() {
                    assert!(got.is_nan(), "{d} code {b:#04x}: {got}, expected NaN");
                } else {
                    assert_eq!(got.to_bits(), w.to_bits(), "{d} code {b:#04x}: {got}, expected {w}");
                }
            }
        }
    }

    #[test]
    fn every_float8_value_encodes_to_its_own_code() {
        for (d, f) in FORMATS {
            for b in 0..=255u8 {
                let v = f.decode(b);
                let back = f.encode(v, false);
                if v.is_nan() {
                    assert!(f.decode(back).is_nan(), "{d} {b:#04x}");
                } else {
                    assert_eq!(back, b, "{d} {v}");
                }
            }
        }
        // (2^-127 is an f32 subnormal, whose fraction bits round up; down keeps it.)
        for b in 0..=254u8 {
            assert_eq!(e8m0_encode(e8m0_decode(b) as f32, true, RoundMode::Down), b, "e8m0 {b}");
            assert_eq!(e8m0_encode(e8m0_decode(b) as f32, true, RoundMode::Up), b.max(1), "e8m0 {b}");
        }
    }

    #[test]
    fn float8_rounding_and_saturation_match_ml_dtypes() {
        // Values from `np.array(x, np.float32).astype(t)` (saturate=0) and ONNX's
        // `saturate_cast` (saturate=1).
        let x = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, -1e-10, 1e9, -1e9, 464.0, 465.0, -465.0];
        let x2 = [61439.0, 61440.0, 240.0, 248.0, 256.0, 0.5 * 2f64.powi(-9), 0.75 * 2f64.powi(-9), 17.0, 19.0];
        let cases: [(Minifloat, [u8; 19], [u8; 19]); 4] = [
            (
                E4M3FN,
                [
                    0x7f, 0x7f, 0xff, 0x80, 0x80, 0x7f, 0xff, 0x7e, 0x7f, 0xff, 0x7f, 0x7f, 0x77, 0x78, 0x78, 0x00,
                    0x01, 0x58, 0x5a,
                ],
                [
                    0x7f, 0x7e, 0xfe, 0x80, 0x80, 0x7e, 0xfe, 0x7e, 0x7e, 0xfe, 0x7e, 0x7e, 0x77, 0x78, 0x78, 0x00,
                    0x01, 0x58, 0x5a,
                ],
            ),
            (
                E5M2,
                [
                    0x7e, 0x7c, 0xfc, 0x80, 0x80, 0x7c, 0xfc, 0x5f, 0x5f, 0xdf, 0x7b, 0x7c, 0x5c, 0x5c, 0x5c, 0x14,
                    0x16, 0x4c, 0x4d,
                ],
                [
                    0x7e, 0x7b, 0xfb, 0x80, 0x80, 0x7b, 0xfb, 0x5f, 0x5f, 0xdf, 0x7b, 0x7b, 0x5c, 0x5c, 0x5c, 0x14,
                    0x16, 0x4c, 0x4d,
                ],
            ),
            (
                E4M3FNUZ,
                [
                    0x80, 0x80, 0x80, 0x00, 0x00, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f, 0x80, 0x80, 0x01,
                    0x02, 0x60, 0x62,
                ],
                [
                    0x80, 0x7f, 0xff, 0x00, 0x00, 0x7f, 0xff, 0x7f, 0x7f, 0xff, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x01,
                    0x02, 0x60, 0x62,
                ],
            ),
            (
                E5M2FNUZ,
                [
                    0x80, 0x80, 0x80, 0x00, 0x00, 0x80, 0x80, 0x63, 0x63, 0xe3, 0x7f, 0x80, 0x60, 0x60, 0x60, 0x18,
                    0x1a, 0x50, 0x51,
                ],
                [
                    0x80, 0x7f, 0xff, 0x00, 0x00, 0x7f, 0xff, 0x63, 0x63, 0xe3, 0x7f, 0x7f, 0x60, 0x60, 0x60, 0x18,
                    0x1a, 0x50, 0x51,
                ],
            ),
        ];
        for (f, plain, sat) in cases {
            for (i, &v) in x.iter().chain(&x2).enumerate() {
                assert_eq!(f.encode(v, false), plain[i], "{f:?} {v} saturate=0");
                assert_eq!(f.encode(v, true), sat[i], "{f:?} {v} saturate=1");
            }
        }
    }

    #[test]
    fn e8m0_rounds_as_the_reference() {
        // onnx.numpy_helper.to_float8e8m0 on [0, 1, 1.5, 1.25, 3, 0.75, -4, 2^127 * 1.5,
        // inf, nan, 1e-40 (an f32 subnormal)], per (saturate, round_mode).
        let x = [0.0f32, 1.0, 1.5, 1.25, 3.0, 0.75, -4.0, 1.5 * 2f32.powi(127), f32::INFINITY, f32::NAN, 1e-40];
        let cases: [(bool, RoundMode, [u8; 11]); 6] = [
            (true, RoundMode::Up, [0, 127, 128, 128, 129, 127, 129, 254, 255, 255, 1]),
            (false, RoundMode::Up, [0, 127, 128, 128, 129, 127, 129, 255, 255, 255, 1]),
            (true, RoundMode::Down, [0, 127, 127, 127, 128, 126, 129, 254, 255, 255, 0]),
            (false, RoundMode::Down, [0, 127, 127, 127, 128, 126, 129, 254, 255, 255, 0]),
            (true, RoundMode::Nearest, [0, 127, 128, 127, 129, 127, 129, 254, 255, 255, 0]),
            (false, RoundMode::Nearest, [0, 127, 128, 127, 129, 127, 129, 255, 255, 255, 0]),
        ];
        for (sat, mode, want) in cases {
            for (v, w) in x.iter().zip(want) {
                assert_eq!(e8m0_encode(*v, sat, mode), w, "{v} saturate={sat} {mode:?}");
            }
        }
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: even is 1; 1 + 3 * 2^-8 rounds up.
        assert_eq!(bf16_from_f64(1.0 + 2f64.powi(-8)).to_bits(), 0x3f80);
        assert_eq!(bf16_from_f64(1.0 + 3.0 * 2f64.powi(-8)).to_bits(), 0x3f82);
        assert_eq!(bf16_from_f64(f64::INFINITY).to_bits(), 0x7f80);
        assert!(bf16_from_f64(f64::NAN).is_nan());
        assert_eq!(bf16_from_f64(3.4e38).to_bits(), 0x7f80, "rounds past the largest finite value");
    }

    include!("minifloat_ref.rs");
}
