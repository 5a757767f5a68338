//! `.npy` files for `--input` and `--output`, through the `npyz` crate.

use rxvm_vm::host_tensor::HostTensor;
use rxvm_vm::types::DType;
use std::io::{BufReader, BufWriter};
use std::path::Path;

/// Runs `$body` with `$T` the Rust type of a dtype `.npy` files hold (every numeric
/// dtype numpy has, and bool).
macro_rules! for_each_dtype {
    ($d:expr, $T:ident => $body:expr) => {
        rxvm_vm::with_dtype!($d, $T => $body; [
            F32: f32, F16: half::f16, F64: f64, I8: i8, I16: i16, I32: i32, I64: i64,
            U8: u8, U16: u16, U32: u32, U64: u64, Bool: bool,
        ], d => return Err(no_numpy_dtype(d)))
    };
}

/// Why a dtype numpy lacks has no `.npy` form: ml_dtypes saves bfloat16 and float8 arrays
/// as raw void bytes (`<V2`, `<V1`), which do not say which format they hold.
fn no_numpy_dtype(d: DType) -> String {
    format!(
        "{d} tensors have no .npy form (numpy has no {d} dtype; ml_dtypes saves one as untyped void bytes); \
         Cast it to f32 for .npy I/O"
    )
}

/// The dtype of a numpy type string such as `<f4` or `|b1`.
fn dtype_of(descr: &str) -> Option<DType> {
    let body = descr.trim_start_matches(['<', '|', '=']);
    Some(match body {
        "f4" => DType::F32,
        "f2" => DType::F16,
        "f8" => DType::F64,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "u1" => DType::U8,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        "b1" => DType::Bool,
        _ => return None,
    })
}

/// Reads a C-order `.npy` file of one of the VM's dtypes.
pub fn read_npy(path: &Path) -> Result<HostTensor, String> {
    let show = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open {show}: {e}"))?;
    let npy = npyz::NpyFile::new(BufReader::new(file)).map_err(|e| format!("{show} is not a valid .npy file: {e}"))?;
    let descr = match npy.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => return Err(format!("{show}: structured dtype {other:?} is not supported")),
    };
    if descr.starts_with('>') && !descr.ends_with('1') {
        return Err(format!("{show}: big-endian data ({descr}) is not supported"));
    }
    let dtype = dtype_of(&descr).ok_or_else(|| {
        if descr.trim_start_matches(['<', '|', '=']).starts_with('V') {
            format!(
                "{show}: dtype {descr} (untyped void bytes, as ml_dtypes saves bfloat16 and float8 arrays) is not \
                 supported; save the array as float32"
            )
        } else {
            format!("{show}: dtype {descr} is not supported")
        }
    })?;
    if npy.order() == npyz::Order::Fortran && npy.shape().len() > 1 {
        return Err(format!("{show}: Fortran-order arrays are not supported; save with C order"));
    }
    let shape: Vec<i64> = npy.shape().iter().map(|&d| d as i64).collect();
    let mut data = Vec::new();
    for_each_dtype!(dtype, T => {
        let v: Vec<T> = npy.into_vec::<T>().map_err(|e| format!("{show}: {e}"))?;
        for x in v {
            data.extend_from_slice(&to_le(x));
        }
    });
    HostTensor::new(dtype, shape, data).map_err(|e| format!("{show}: {e}"))
}

trait LeBytes {
    fn le(self) -> Vec<u8>;
}
macro_rules! le_impl {
    ($($t:ty),*) => {$(impl LeBytes for $t { fn le(self) -> Vec<u8> { self.to_le_bytes().to_vec() } })*};
}
le_impl!(f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, half::f16);
impl LeBytes for bool {
    fn le(self) -> Vec<u8> {
        vec![self as u8]
    }
}
fn to_le<T: LeBytes>(x: T) -> Vec<u8> {
    x.le()
}

trait FromLe: Sized {
    fn from_le(b: &[u8]) -> Self;
}
macro_rules! from_le_impl {
    ($($t:ty),*) => {$(impl FromLe for $t {
        fn from_le(b: &[u8]) -> Self {
            let mut a = [0u8; std::mem::size_of::<$t>()];
            a.copy_from_slice(b);
            <$t>::from_le_bytes(a)
        }
    })*};
}
from_le_impl!(f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, half::f16);
impl FromLe for bool {
    fn from_le(b: &[u8]) -> Self {
        b[0] != 0
    }
}

/// Writes a tensor as a C-order `.npy` file.
/// The shape of the array in an `.npy` file, from its header alone.
pub fn npy_shape(path: &Path) -> Result<Vec<i64>, String> {
    let show = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open {show}: {e}"))?;
    let npy = npyz::NpyFile::new(BufReader::new(file)).map_err(|e| format!("{show} is not a valid .npy file: {e}"))?;
    npy.shape()
        .iter()
        .map(|&d| i64::try_from(d).map_err(|_| format!("{show}: dimension {d} does not fit i64")))
        .collect()
}

pub fn write_npy(path: &Path, t: &HostTensor) -> Result<(), String> {
    use npyz::WriterBuilder;
    let show = path.display();
    let file = std::fs::File::create(path).map_err(|e| format!("cannot create {show}: {e}"))?;
    let shape: Vec<u64> = t.shape.iter().map(|&d| d as u64).collect();
    let es = t.dtype.size();
    for_each_dtype!(t.dtype, T => {
        let mut w = npyz::WriteOptions::<T>::new()
            .default_dtype()
            .shape(&shape)
            .writer(BufWriter::new(file))
            .begin_nd()
            .map_err(|e| format!("cannot write {show}: {e}"))?;
        w.extend(t.data.chunks(es).map(<T as FromLe>::from_le)).map_err(|e| format!("cannot write {show}: {e}"))?;
        w.finish().map_err(|e| format!("cannot write {show}: {e}"))?;
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trips_every_dtype() {
        let dir = std::env::temp_dir().join(format!("rxvm-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for d in DType::ALL {
            let t = HostTensor::random(d, &[2, 3], 5).unwrap();
            let p = dir.join(format!("{d}.npy"));
            if d == DType::BF16 || d.is_float8() {
                let e = write_npy(&p, &t).unwrap_err();
                assert!(e.contains("have no .npy form") && e.contains("Cast it to f32"), "{e}");
                continue;
            }
            write_npy(&p, &t).unwrap();
            assert_eq!(read_npy(&p).unwrap(), t, "{d}");
        }
        // ml_dtypes' bf16 array (`np.save` of `np.array([1, 2], ml_dtypes.bfloat16)`) is void bytes.
        let mut v2 = b"\x93NUMPY\x01\x00v\x00{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }".to_vec();
        v2.resize(10 + 0x76 - 1, b' ');
        v2.push(b'\n');
        v2.extend_from_slice(&[0x80, 0x3f, 0x00, 0x40]);
        std::fs::write(dir.join("bf16.npy"), &v2).unwrap();
        let e = read_npy(&dir.join("bf16.npy")).unwrap_err();
        assert!(e.contains("V2"), "{e}");
        std::fs::write(dir.join("bad.npy"), b"not numpy").unwrap();
        assert!(read_npy(&dir.join("bad.npy")).unwrap_err().contains("not a valid .npy"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
