//! Shape inference shared by many operators.

use crate::ir::attrs::*;
use crate::ir::schema::*;

/// The input at `i`, or an error naming it.
pub fn input<'a>(ins: &'a [Option<TensorInfo<'a>>], i: usize, op: &str) -> Result<&'a TensorInfo<'a>, String> {
    ins.get(i).and_then(|x| x.as_ref()).ok_or_else(|| format!("{op}: input {} is required", i + 1))
}

/// One output with the first input's dtype and shape (unary elementwise operators).
pub fn same_as_first(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "operator")?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

/// The numpy broadcast of two shapes.
pub fn broadcast(a: &[i64], b: &[i64]) -> Result<Vec<i64>, String> {
    let r = a.len().max(b.len());
    let mut out = vec![0; r];
    for i in 0..r {
        let da = if i + a.len() >= r { a[i + a.len() - r] } else { 1 };
        let db = if i + b.len() >= r { b[i + b.len() - r] } else { 1 };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return Err(format!("shapes {a:?} and {b:?} do not broadcast (dimension {i}: {da} vs {db})")),
        };
    }
    Ok(out)
}

/// Two inputs of one dtype broadcast to one output.
pub fn broadcast2(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (a, b) = (input(ins, 0, "operator")?, input(ins, 1, "operator")?);
    if a.dtype != b.dtype {
        return Err(format!("inputs have different dtypes: {} and {}", a.dtype, b.dtype));
    }
    Ok(vec![(a.dtype, broadcast(a.shape, b.shape)?)])
}

/// Row-major strides of `shape` aligned to rank `r`, with 0 for broadcast dimensions.
pub fn broadcast_strides(shape: &[i64], out: &[i64]) -> Vec<usize> {
    let r = out.len();
    let mut strides = vec![0usize; r];
    let mut s = 1usize;
    for i in (0..shape.len()).rev() {
        let o = i + r - shape.len();
        strides[o] = if shape[i] == 1 && out[o] != 1 { 0 } else { s };
        s *= shape[i].max(0) as usize;
    }
    strides
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast(&[2, 1, 4], &[3, 1]).unwrap(), vec![2, 3, 4]);
        assert_eq!(broadcast(&[], &[5]).unwrap(), vec![5]);
        assert!(broadcast(&[2, 3], &[4]).unwrap_err().contains("do not broadcast"));
        assert_eq!(broadcast_strides(&[3, 1], &[2, 3, 4]), vec![0, 1, 0]);
    }
}
