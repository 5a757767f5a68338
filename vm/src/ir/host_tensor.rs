//! Tensors and values in host memory, as the embedding API passes them in and out.

use crate::ir::minifloat::{bf16_from_f64, float8_decode, float8_encode, RoundMode};
use crate::ir::types::DType;
use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex};

/// A tensor's element bytes, shared with it rather than copied: a module built from a
/// compiler's tensors holds its weights once.
pub fn shared_data(t: &Arc<HostTensor>) -> bytes::Bytes {
    struct Elements(Arc<HostTensor>);
    impl AsRef<[u8]> for Elements {
        fn as_ref(&self) -> &[u8] {
            &self.0.data
        }
    }
    bytes::Bytes::from_owner(Elements(t.clone()))
}

/// A dense row-major tensor in host memory (little-endian elements).
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub data: Vec<u8>,
}

/// A value passed to or returned from [`crate::Vm::invoke`].
#[derive(Clone, Debug, PartialEq)]
pub enum HostValue {
    Int(i64),
    Float(f64),
    Shape(Vec<i64>),
    Tensor(HostTensor),
    /// A storage returned by a function: its id and size (its bytes stay on the device).
    Storage {
        id: u64,
        size: u64,
    },
}

impl HostValue {
    pub fn kind_name(&self) -> &'static str {
        match self {
            HostValue::Int(_) => "int",
            HostValue::Float(_) => "float",
            HostValue::Shape(_) => "shape",
            HostValue::Tensor(_) => "tensor",
            HostValue::Storage { .. } => "storage",
        }
    }
}

/// Reads element `i`'s bytes as f64.
pub fn load_f64(dtype: DType, b: &[u8]) -> f64 {
    match dtype {
        DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        DType::F16 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
        DType::F64 => f64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])),
        DType::BF16 => half::bf16::from_le_bytes([b[0], b[1]]).to_f64(),
        d if d.is_float8() => float8_decode(d, b[0]).unwrap_or(f64::NAN),
        _ => load_i64(dtype, b) as f64,
    }
}

/// Reads element bytes as i64 (floats truncate toward zero).
pub fn load_i64(dtype: DType, b: &[u8]) -> i64 {
    match dtype {
        DType::I8 => b[0] as i8 as i64,
        DType::U8 | DType::Bool => b[0] as i64,
        DType::I16 => i16::from_le_bytes([b[0], b[1]]) as i64,
        DType::U16 => u16::from_le_bytes([b[0], b[1]]) as i64,
        DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
        DType::U32 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
        DType::I64 | DType::U64 => i64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])),
        DType::F32 | DType::F16 | DType::F64 | DType::BF16 => load_f64(dtype, b) as i64,
        DType::F8E4M3FN | DType::F8E5M2 | DType::F8E4M3FNUZ | DType::F8E5M2FNUZ | DType::F8E8M0 => {
            load_f64(dtype, b) as i64
        }
    }
}

/// Writes `v` converted to `dtype` (floats round to nearest, ints truncate, bool is v != 0;
/// float8 saturates as ONNX's Cast does by default, E8M0 rounds up).
pub fn store_f64(dtype: DType, v: f64, out: &mut [u8]) {
    match dtype {
        DType::F32 => out[..4].copy_from_slice(&(v as f32).to_le_bytes()),
        DType::F16 => out[..2].copy_from_slice(&half::f16::from_f64(v).to_le_bytes()),
        DType::F64 => out[..8].copy_from_slice(&v.to_le_bytes()),
        DType::BF16 => out[..2].copy_from_slice(&bf16_from_f64(v).to_le_bytes()),
        d if d.is_float8() => out[0] = float8_encode(d, v, true, RoundMode::Up).unwrap_or(0),
        DType::Bool => out[0] = (v != 0.0) as u8,
        _ => store_i64(dtype, v as i64, out),
    }
}

/// Writes `v` converted to `dtype` (wrapping to the width of integer types).
pub fn store_i64(dtype: DType, v: i64, out: &mut [u8]) {
    match dtype {
        DType::I8 | DType::U8 => out[0] = v as u8,
        DType::Bool => out[0] = (v != 0) as u8,
        DType::I16 | DType::U16 => out[..2].copy_from_slice(&(v as u16).to_le_bytes()),
        DType::I32 | DType::U32 => out[..4].copy_from_slice(&(v as u32).to_le_bytes()),
        DType::I64 | DType::U64 => out[..8].copy_from_slice(&v.to_le_bytes()),
        DType::F32 | DType::F16 | DType::F64 | DType::BF16 => store_f64(dtype, v as f64, out),
        DType::F8E4M3FN | DType::F8E5M2 | DType::F8E4M3FNUZ | DType::F8E5M2FNUZ | DType::F8E8M0 => {
            store_f64(dtype, v as f64, out)
        }
    }
}

impl HostTensor {
    /// Checks that `data` holds exactly the shape's elements.
    pub fn new(dtype: DType, shape: Vec<i64>, data: Vec<u8>) -> Result<HostTensor, String> {
        let n = numel(&shape).ok_or_else(|| format!("invalid shape {shape:?}"))?;
        let need = n.checked_mul(dtype.size() as u64).ok_or("tensor too large")?;
        if data.len() as u64 != need {
            return Err(format!("{dtype}{shape:?} needs {need} bytes, found {}", data.len()));
        }
        Ok(HostTensor { dtype, shape, data })
    }

    pub fn zeros(dtype: DType, shape: &[i64]) -> Result<HostTensor, String> {
        let n = numel(shape).ok_or_else(|| format!("invalid shape {shape:?}"))?;
        let bytes = usize::try_from(n * dtype.size() as u64).map_err(|_| "tensor too large".to_string())?;
        HostTensor::new(dtype, shape.to_vec(), vec![0; bytes])
    }

    /// Uniform values in [-1, 1) (floats) or [0, 100) (integers) from a fixed generator, so
    /// the same seed gives the same tensor everywhere.
    pub fn random(dtype: DType, shape: &[i64], seed: u64) -> Result<HostTensor, String> {
        let mut t = HostTensor::zeros(dtype, shape)?;
        let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
        let es = dtype.size();
        for chunk in t.data.chunks_mut(es) {
            // splitmix64
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            if dtype.is_float() {
                let u = (z >> 11) as f64 / (1u64 << 53) as f64;
                store_f64(dtype, u * 2.0 - 1.0, chunk);
            } else {
                store_i64(dtype, (z % 100) as i64, chunk);
            }
        }
        Ok(t)
    }

    pub fn from_f32(shape: &[i64], values: &[f32]) -> Result<HostTensor, String> {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        HostTensor::new(DType::F32, shape.to_vec(), data)
    }

    pub fn numel(&self) -> u64 {
        numel(&self.shape).unwrap_or(0)
    }

    /// Every element converted to f64.
    pub fn to_f64(&self) -> Vec<f64> {
        TensorRef::from(self).to_f64()
    }

    /// Every element converted to i64.
    pub fn to_i64(&self) -> Vec<i64> {
        self.data.chunks(self.dtype.size()).map(|c| load_i64(self.dtype, c)).collect()
    }
}

/// A tensor's bytes borrowed where they are (a host view's memory, or a [`HostTensor`]'s):
/// an input of an in-place kernel.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    pub dtype: DType,
    pub shape: &'a [i64],
    pub data: &'a [u8],
    /// Set when the tensor is a view of a constant: its bytes never change while it lives,
    /// so what a kernel derives from them can be kept.
    pub constant: Option<ConstOperand<'a>>,
}

/// What kernels derive once from a constant (its weights packed for the GEMM) and keep for
/// as long as the constant lives: each constant's storage holds one. A kernel keeps a form
/// here only when it uses it instead of the bytes on every call, so the memory it adds is
/// that form's, once per constant, not per call.
#[derive(Default)]
pub struct Derived {
    items: Mutex<Vec<(DerivedKey, Arc<dyn Any + Send + Sync>)>>,
}

/// What a [`Derived`] item is: its kind, where in the storage the operand it comes from
/// starts (bytes), which part of the operand (a kernel-defined index, such as a
/// convolution's group) and the dims the kernel derived it for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DerivedKey {
    pub kind: &'static str,
    pub at: u64,
    pub part: u64,
    pub dims: [u64; 2],
}

impl Derived {
    /// The item `key` as `T`, made by `make` the first time.
    pub fn get_or_make<T: Any + Send + Sync>(&self, key: DerivedKey, make: impl FnOnce() -> T) -> Arc<T> {
        let find = |items: &[(DerivedKey, Arc<dyn Any + Send + Sync>)]| {
            items.iter().find(|(k, _)| *k == key).and_then(|(_, v)| v.clone().downcast::<T>().ok())
        };
        let lock = || self.items.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(v) = find(&lock()) {
            return v;
        }
        // Made without the lock: making may run on the worker pool, whose workers may be
        // running kernels that wait for it. Two threads may both make it; one is kept.
        let made = Arc::new(make());
        let mut items = lock();
        if let Some(v) = find(&items) {
            return v;
        }
        items.push((key, made.clone()));
        made
    }

    /// How many items are kept.
    pub fn len(&self) -> usize {
        self.items.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Debug for Derived {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Derived({} items)", self.len())
    }
}

/// A constant operand's [`Derived`] store, and where the operand starts in its storage.
#[derive(Clone, Copy, Debug)]
pub struct ConstOperand<'a> {
    pub derived: &'a Derived,
    pub offset: u64,
}

impl ConstOperand<'_> {
    /// [`Derived::get_or_make`] for part `part` of the operand (the kernel says what its
    /// parts are).
    pub fn get_or_make<T: Any + Send + Sync>(
        &self,
        kind: &'static str,
        part: u64,
        dims: [u64; 2],
        make: impl FnOnce() -> T,
    ) -> Arc<T> {
        self.derived.get_or_make(DerivedKey { kind, at: self.offset, part, dims }, make)
    }
}

/// A tensor's bytes borrowed mutably where they are: an output of an in-place kernel,
/// holding whatever the memory held before (the kernel writes every element).
#[derive(Debug)]
pub struct TensorMut<'a> {
    pub dtype: DType,
    pub shape: &'a [i64],
    pub data: &'a mut [u8],
}

impl<'a> TensorRef<'a> {
    /// Every element converted to f64.
    pub fn to_f64(&self) -> Vec<f64> {
        self.data.chunks(self.dtype.size()).map(|c| load_f64(self.dtype, c)).collect()
    }
}

impl<'a> From<&'a HostTensor> for TensorRef<'a> {
    fn from(t: &'a HostTensor) -> Self {
        TensorRef { dtype: t.dtype, shape: &t.shape, data: &t.data, constant: None }
    }
}

impl HostTensor {
    /// The tensor's bytes borrowed mutably.
    pub fn view_mut(&mut self) -> TensorMut<'_> {
        TensorMut { dtype: self.dtype, shape: &self.shape, data: &mut self.data }
    }
}

pub fn numel(shape: &[i64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |a, &d| a.checked_mul(u64::try_from(d).ok()?))
}

/// Formats one element for printing: floats with their shortest round-trip form.
pub fn format_elem(dtype: DType, b: &[u8], out: &mut String) {
    use std::fmt::Write;
    if dtype.is_float() {
        let v = load_f64(dtype, b);
        if dtype == DType::F32 {
            let _ = write!(out, "{:?}", v as f32);
        } else {
            let _ = write!(out, "{v:?}");
        }
    } else if dtype == DType::U64 {
        let _ = write!(out, "{}", load_i64(dtype, b) as u64);
    } else {
        let _ = write!(out, "{}", load_i64(dtype, b));
    }
}

impl fmt::Display for HostTensor {
    /// `f32[2, 2] [[1.0, 2.0], [3.0, 4.0]]`, nested by dimension.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        s.push_str(self.dtype.name());
        s.push('[');
        for (i, d) in self.shape.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            s.push_str(&d.to_string());
        }
        s.push_str("] ");
        format_nested(self.dtype, &self.shape, &self.data, &mut s);
        f.write_str(&s)
    }
}

/// Tensors of more than this many elements print summarised by default
/// ([`HostTensor::summary`]).
pub const SUMMARY_THRESHOLD: u64 = 100;

/// Entries shown at each end of a summarised axis (numpy's `edgeitems`).
pub const SUMMARY_EDGE: usize = 3;

impl HostTensor {
    /// The tensor as [`Display`](fmt::Display) prints it, but with more than
    /// [`SUMMARY_THRESHOLD`] elements summarised as numpy does: each axis longer than
    /// `2 * SUMMARY_EDGE` shows its first and last [`SUMMARY_EDGE`] entries with `...`
    /// between them, e.g. `f32[1, 1000] [[0.0, 0.001, 0.002, ..., 0.997, 0.998, 0.999]]`.
    pub fn summary(&self) -> String {
        if self.numel() <= SUMMARY_THRESHOLD {
            return self.to_string();
        }
        let mut s = format!("{}{:?} ", self.dtype.name(), self.shape);
        format_nested_edges(self.dtype, &self.shape, &self.data, Some(SUMMARY_EDGE), &mut s);
        s
    }
}

/// Appends `[[..], [..]]` for row-major `data` of `shape`.
pub fn format_nested(dtype: DType, shape: &[i64], data: &[u8], out: &mut String) {
    format_nested_edges(dtype, shape, data, None, out)
}

/// [`format_nested`], with each axis longer than `2 * edge` shown as its first and last
/// `edge` entries and `...` between them.
pub fn format_nested_edges(dtype: DType, shape: &[i64], data: &[u8], edge: Option<usize>, out: &mut String) {
    let es = dtype.size();
    // No elements: `[]`, whatever the other dims. Nesting `[[], [], ...]` for a leading
    // dim of 10^12 would take time and memory bounded by the shape, not by the data.
    if !shape.is_empty() && shape.iter().any(|&d| d <= 0) {
        out.push_str("[]");
        return;
    }
    // Fewer bytes than the shape needs (never from a view read, which sizes its data by
    // the shape): print what there is rather than index past the end.
    let bytes = shape.iter().try_fold(es, |a, &d| a.checked_mul(d as usize));
    if bytes.is_none_or(|b| data.len() < b) {
        out.push_str("[...]");
        return;
    }
    if shape.is_empty() {
        if data.len() >= es {
            format_elem(dtype, &data[..es], out);
        }
        return;
    }
    let inner: usize = shape[1..].iter().map(|&d| d.max(0) as usize).product::<usize>() * es;
    let n = shape[0].max(0) as usize;
    // The entries shown: all, or `edge` at each end with a gap after entry `edge - 1`.
    let gap = edge.filter(|&e| n > 2 * e);
    out.push('[');
    for i in 0..n {
        if let Some(e) = gap {
            if i == e {
                out.push_str(", ...");
            }
            if i >= e && i < n - e {
                continue;
            }
        }
        if i > 0 {
            out.push_str(", ");
        }
        let start = i * inner;
        if shape.len() == 1 {
            format_elem(dtype, &data[start..start + es], out);
        } else {
            format_nested_edges(dtype, &shape[1..], &data[start..start + inner], edge, out);
        }
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_nests_by_dimension() {
        let t = HostTensor::from_f32(&[2, 2], &[1.0, 2.5, -3.0, 4.0]).unwrap();
        assert_eq!(t.to_string(), "f32[2, 2] [[1.0, 2.5], [-3.0, 4.0]]");
        let s = HostTensor::new(DType::I32, vec![], 7i32.to_le_bytes().to_vec()).unwrap();
        assert_eq!(s.to_string(), "i32[] 7");
    }

    #[test]
    fn summary_shows_the_ends_of_long_axes() {
        let v: Vec<f32> = (0..1000).map(|i| i as f32).collect();
        let t = HostTensor::from_f32(&[1, 1000], &v).unwrap();
        assert_eq!(t.summary(), "f32[1, 1000] [[0.0, 1.0, 2.0, ..., 997.0, 998.0, 999.0]]");
        let t = HostTensor::from_f32(&[10, 20], &v[..200]).unwrap();
        assert_eq!(
            t.summary(),
            "f32[10, 20] [[0.0, 1.0, 2.0, ..., 17.0, 18.0, 19.0], [20.0, 21.0, 22.0, ..., 37.0, 38.0, 39.0], \
             [40.0, 41.0, 42.0, ..., 57.0, 58.0, 59.0], ..., [140.0, 141.0, 142.0, ..., 157.0, 158.0, 159.0], \
             [160.0, 161.0, 162.0, ..., 177.0, 178.0, 179.0], [180.0, 181.0, 182.0, ..., 197.0, 198.0, 199.0]]"
        );
        // Up to the threshold, and axes of at most 2 * SUMMARY_EDGE entries, print whole.
        let t = HostTensor::from_f32(&[100], &v[..100]).unwrap();
        assert_eq!(t.summary(), t.to_string());
        let t = HostTensor::from_f32(&[101], &v[..101]).unwrap();
        assert_eq!(t.summary(), "f32[101] [0.0, 1.0, 2.0, ..., 98.0, 99.0, 100.0]");
        let t = HostTensor::from_f32(&[17, 6], &v[..102]).unwrap();
        assert!(t.summary().starts_with("f32[17, 6] [[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [6.0,"), "{}", t.summary());
    }

    #[test]
    fn a_tensor_without_elements_prints_in_constant_time() {
        let mut out = String::new();
        format_nested(DType::F32, &[1_000_000_000_000, 0], &[], &mut out);
        assert_eq!(out, "[]");
        let mut out = String::new();
        format_nested(DType::F32, &[2, 2], &[0; 8], &mut out);
        assert_eq!(out, "[...]", "too few bytes for the shape");
    }

    #[test]
    fn conversions_round_trip_per_dtype() {
        for d in DType::ALL {
            let mut b = [0u8; 8];
            store_f64(d, 3.0, &mut b);
            // f8e8m0 holds powers of two: 3 rounds up to 4, as ONNX's Cast does.
            let want = match d {
                DType::Bool => 1.0,
                DType::F8E8M0 => 4.0,
                _ => 3.0,
            };
            assert_eq!(load_f64(d, &b), want, "{d}");
        }
        let mut b = [0u8; 1];
        store_i64(DType::I8, -2, &mut b);
        assert_eq!(load_i64(DType::I8, &b), -2);
    }

    #[test]
    fn random_is_deterministic_and_in_range() {
        let a = HostTensor::random(DType::F32, &[64], 7).unwrap();
        assert_eq!(a, HostTensor::random(DType::F32, &[64], 7).unwrap());
        assert_ne!(a, HostTensor::random(DType::F32, &[64], 8).unwrap());
        assert!(a.to_f64().iter().all(|v| (-1.0..1.0).contains(v)));
    }
}
