//! Operators: the linear-algebra family (Einsum, Det): the host kernels and their `HOST`
//! table (the schemas are in `crate::ir::operators::linalg`).

use super::host::HostFn;
use super::host::{first, prepare, req};
use super::{Attrs, TensorInfo};
use crate::ir::host_tensor::{store_f64, store_i64, HostTensor};
use crate::ir::operators::linalg::*;
use crate::ir::operators::Operator;

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[(Operator::Einsum, einsum), (Operator::Det, det)];

/// Calls `f(k, offsets)` for every position `k` of the row-major index space `sizes`, with
/// each operand's offset (`strides[j][d]` per dim) at that position.
fn each(sizes: &[usize], strides: &[Vec<usize>], mut f: impl FnMut(usize, &[usize])) {
    let n: usize = sizes.iter().product();
    let mut idx = vec![0usize; sizes.len()];
    let mut offs = vec![0usize; strides.len()];
    for k in 0..n {
        f(k, &offs);
        for d in (0..sizes.len()).rev() {
            idx[d] += 1;
            for (o, s) in offs.iter_mut().zip(strides) {
                *o += s[d];
            }
            if idx[d] < sizes[d] {
                break;
            }
            for (o, s) in offs.iter_mut().zip(strides) {
                *o -= s[d] * sizes[d];
            }
            idx[d] = 0;
        }
    }
}

/// Einsum over values of type `T` (f64 for floats, wrapping i64 for integers).
fn einsum_as<T: Copy + Default>(
    plan: &EinsumPlan,
    inputs: &[Vec<T>],
    shapes: &[&[i64]],
    mul: impl Fn(T, T) -> T,
    add: impl Fn(T, T) -> T,
) -> Vec<T> {
    let strides = plan.strides(shapes);
    let summed = plan.summed();
    let out_sizes: Vec<usize> = plan.output.iter().map(|&l| plan.sizes[l]).collect();
    let sum_sizes: Vec<usize> = summed.iter().map(|&l| plan.sizes[l]).collect();
    let per = |labels: &[usize]| -> Vec<Vec<usize>> {
        strides.iter().map(|st| labels.iter().map(|&l| st[l]).collect()).collect()
    };
    let (out_st, sum_st) = (per(&plan.output), per(&summed));
    let mut y = vec![T::default(); out_sizes.iter().product()];
    each(&out_sizes, &out_st, |k, base| {
        let mut acc = T::default();
        each(&sum_sizes, &sum_st, |_, offs| {
            let mut p: Option<T> = None;
            for ((v, b), o) in inputs.iter().zip(base).zip(offs) {
                let x = v[b + o];
                p = Some(match p {
                    None => x,
                    Some(q) => mul(q, x),
                });
            }
            acc = add(acc, p.unwrap_or_default());
        });
        y[k] = acc;
    });
    y
}

fn einsum(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_einsum)?;
    let list: Vec<&HostTensor> = (0..ins.len()).map(|i| req(ins, i)).collect::<Result<_, _>>()?;
    let infos: Vec<Option<TensorInfo>> =
        list.iter().map(|t| Some(TensorInfo { dtype: t.dtype, shape: &t.shape, value: None })).collect();
    let (d, plan) = einsum_plan(&infos, attrs)?;
    let shapes: Vec<&[i64]> = list.iter().map(|t| &t.shape[..]).collect();
    let out = first(outs)?;
    let es = d.size();
    if d.is_float() {
        let v: Vec<Vec<f64>> = list.iter().map(|t| t.to_f64()).collect();
        let y = einsum_as(&plan, &v, &shapes, |a, b| a * b, |a, b| a + b);
        for (c, x) in out.data.chunks_exact_mut(es).zip(y) {
            store_f64(d, x, c);
        }
    } else {
        let v: Vec<Vec<i64>> = list.iter().map(|t| t.to_i64()).collect();
        let y = einsum_as(&plan, &v, &shapes, i64::wrapping_mul, i64::wrapping_add);
        for (c, x) in out.data.chunks_exact_mut(es).zip(y) {
            store_i64(d, x, c);
        }
    }
    Ok(())
}

/// The determinant of the `m`×`m` row-major matrix `a` (overwritten), by LU with partial
/// pivoting.
pub(crate) fn det_lu(a: &mut [f64], m: usize) -> f64 {
    let mut det = 1.0;
    for c in 0..m {
        let mut p = c;
        let mut best = a[c * m + c].abs();
        for r in c + 1..m {
            if a[r * m + c].abs() > best {
                best = a[r * m + c].abs();
                p = r;
            }
        }
        if best == 0.0 {
            return 0.0;
        }
        if p != c {
            for k in 0..m {
                a.swap(c * m + k, p * m + k);
            }
            det = -det;
        }
        let piv = a[c * m + c];
        det *= piv;
        for r in c + 1..m {
            let f = a[r * m + c] / piv;
            for k in c + 1..m {
                a[r * m + k] -= f * a[c * m + k];
            }
        }
    }
    det
}

fn det(ins: &[Option<&HostTensor>], attrs: &Attrs, outs: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, attrs, outs, infer_det)?;
    let x = req(ins, 0)?;
    let v = x.to_f64();
    let m = *x.shape.last().unwrap_or(&0) as usize;
    let out = first(outs)?;
    let d = out.dtype;
    for (b, c) in out.data.chunks_exact_mut(d.size()).enumerate() {
        let mut a = v.get(b * m * m..(b + 1) * m * m).map(<[f64]>::to_vec).unwrap_or_default();
        store_f64(d, det_lu(&mut a, m), c);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ir::types::DType;
    use crate::ops::bitwise::tests::{attrs, f, ok, run, tensor};

    fn eq(e: &str) -> Attrs {
        attrs(&[("equation", AttrValue::Str(e.into()))])
    }

    fn seq(shape: &[i64]) -> HostTensor {
        let n: i64 = shape.iter().product();
        f(shape, &(0..n).map(|v| v as f32).collect::<Vec<_>>())
    }

    #[test]
    fn einsum_forms() {
        let x = seq(&[2, 3]);
        assert_eq!(ok("Einsum", &[&x], &eq("ij->ji")), f(&[3, 2], &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]));
        assert_eq!(ok("Einsum", &[&x], &eq("ij->i")), f(&[2], &[3.0, 12.0]));
        assert_eq!(ok("Einsum", &[&x], &eq("ij")), x);
        // Implicit output: letters used once, sorted: "ba" → "ab", a transpose.
        assert_eq!(ok("Einsum", &[&x], &eq("ba")), f(&[3, 2], &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]));
        assert_eq!(ok("Einsum", &[&x], &eq("ij->")), f(&[], &[15.0]));
        // Matmul, inner product, outer product, trace, diagonal, batch diagonal.
        let y = seq(&[3, 2]);
        assert_eq!(ok("Einsum", &[&x, &y], &eq("ij,jk")), f(&[2, 2], &[10.0, 13.0, 28.0, 40.0]));
        let v = seq(&[3]);
        assert_eq!(ok("Einsum", &[&v, &v], &eq("i,i")), f(&[], &[5.0]));
        assert_eq!(ok("Einsum", &[&v, &seq(&[2])], &eq("i,j->ij")), f(&[3, 2], &[0.0, 0.0, 0.0, 1.0, 0.0, 2.0]));
        let sq = seq(&[3, 3]);
        assert_eq!(ok("Einsum", &[&sq], &eq("ii")), f(&[], &[12.0]));
        assert_eq!(ok("Einsum", &[&sq], &eq("ii->i")), f(&[3], &[0.0, 4.0, 8.0]));
        let b = seq(&[2, 2, 2]);
        assert_eq!(ok("Einsum", &[&b], &eq("...ii ->...i")), f(&[2, 2], &[0.0, 3.0, 4.0, 7.0]));
        // Implicit: "i" is repeated, so it is summed: the traces.
        assert_eq!(ok("Einsum", &[&b], &eq("...ii")), f(&[2], &[3.0, 11.0]));
        // Ellipses broadcast: [2, 1, 2] and [3, 2] → [2, 3].
        let p = seq(&[2, 1, 2]);
        let q = seq(&[3, 2]);
        assert_eq!(ok("Einsum", &[&p, &q], &eq("...j,...j->...")), f(&[2, 3], &[1.0, 3.0, 5.0, 3.0, 13.0, 23.0]));
        // Three inputs, and integers wrapping.
        assert_eq!(ok("Einsum", &[&v, &v, &v], &eq("i,i,i->")), f(&[], &[9.0]));
        let i = tensor(DType::I8, &[2], &[100i8, 100]);
        assert_eq!(ok("Einsum", &[&i, &i], &eq("i,i")), tensor(DType::I8, &[], &[32i8]));
        let s = tensor(DType::F64, &[], &[5.0f64]);
        assert_eq!(ok("Einsum", &[&s], &eq("->")), s);
    }

    #[test]
    fn einsum_errors() {
        let x = seq(&[2, 3]);
        let e = |eqn: &str, ins: &[&HostTensor]| run("Einsum", ins, &eq(eqn)).unwrap_err();
        assert_eq!(e("ij,jk", &[&x]), "Einsum: equation \"ij,jk\" has 2 input terms but there are 1 inputs");
        assert_eq!(e("ijk", &[&x]), "Einsum: input term 1 \"ijk\" names 3 dims, but input 1 has rank 2");
        assert_eq!(
            e("i1", &[&x]),
            "Einsum: input term 1 \"i1\" has the character '1'; terms hold letters and at most one \"...\""
        );
        assert_eq!(e("ij->k", &[&x]), "Einsum: output index 'k' appears in no input term");
        assert_eq!(e("ij->ii", &[&x]), "Einsum: output index 'i' appears more than once");
        assert_eq!(e("ii", &[&x]), "Einsum: index 'i' has size 2 in one place and 3 in input 1");
        assert_eq!(e("i..j", &[&x]), "Einsum: input term 1 \"i..j\" has a '.' that is not part of an ellipsis \"...\"");
        assert_eq!(e("i->i->i", &[&x]), "Einsum: equation \"i->i->i\" has more than one \"->\"");
        assert!(e("...j->j", &[&x]).contains("has no \"...\""));
        assert!(run("Einsum", &[&x], &Attrs::default()).unwrap_err().contains("needs the `equation` attribute"));
    }

    #[test]
    fn det_of_batches() {
        let x = f(&[2, 2], &[0.0, 1.0, 2.0, 3.0]);
        assert_eq!(ok("Det", &[&x], &Attrs::default()), f(&[], &[-2.0]));
        let x = f(&[3, 2, 2], &[1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 2.0, 1.0, 1.0, 3.0, 3.0, 1.0]);
        assert_eq!(ok("Det", &[&x], &Attrs::default()), f(&[3], &[-2.0, -3.0, -8.0]));
        let x = f(&[3, 3], &[2.0, 0.0, 1.0, 1.0, 3.0, 2.0, 1.0, 1.0, 2.0]);
        assert_eq!(ok("Det", &[&x], &Attrs::default()), f(&[], &[6.0]));
        let sing = f(&[2, 2], &[1.0, 2.0, 2.0, 4.0]);
        assert_eq!(ok("Det", &[&sing], &Attrs::default()), f(&[], &[0.0]));
        assert_eq!(ok("Det", &[&f(&[0, 0], &[])], &Attrs::default()), f(&[], &[1.0]));
        assert_eq!(
            run("Det", &[&f(&[2, 3], &[0.0; 6])], &Attrs::default()).unwrap_err(),
            "Det needs square matrices in the last two dims, found shape [2, 3]"
        );
    }
}
