//! Operators: the classic-ML family (TfIdfVectorizer, Binarizer, ArrayFeatureExtractor,
//! TreeEnsemble): the host kernels and their `HOST` table (the schemas are in
//! `crate::ir::operators::ml`).

use super::host::HostFn;
use super::host::{prepare, req};
use super::loss::{floats, ints, put};
use super::Attrs;
use crate::ir::host_tensor::HostTensor;
use crate::ir::operators::ml::*;
use crate::ir::operators::Operator;
use crate::ir::types::DType;

/// This family's host kernels.
pub(crate) static HOST: &[(Operator, HostFn)] = &[
    (Operator::TfIdfVectorizer, tfidf_vectorizer),
    (Operator::Binarizer, binarizer),
    (Operator::ArrayFeatureExtractor, array_feature_extractor),
    (Operator::TreeEnsemble, tree_ensemble),
];

/// The counts of one row's n-grams into `out` (the output row), as ONNX's reference
/// counts them: unigrams once (at skip distance 1), longer n-grams at every skip distance.
pub(crate) fn count_row(p: &TfIdf, row: &[i64], out: &mut [f64]) {
    let c = row.len();
    for skip in 1..=p.skip + 1 {
        let lo = if skip == 1 { p.min } else { p.min.max(2) };
        if lo > p.max {
            break;
        }
        for start in 0..c {
            for n in lo..=p.max {
                if start + skip * (n - 1) >= c {
                    break;
                }
                let found = p.grams.iter().find(|(g, _)| g.len() == n && (0..n).all(|k| g[k] == row[start + k * skip]));
                if let Some((_, col)) = found {
                    if let Some(o) = out.get_mut(*col) {
                        *o += 1.0;
                    }
                }
            }
        }
    }
    for (i, o) in out.iter_mut().enumerate() {
        let w = p.weights.as_ref().and_then(|w| w.get(i).copied());
        *o = match p.mode {
            0 => *o,
            1 => {
                if *o > 0.0 {
                    w.unwrap_or(1.0)
                } else {
                    0.0
                }
            }
            _ => w.unwrap_or(1.0) * *o,
        };
    }
}

fn tfidf_vectorizer(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, out, infer_tfidf)?;
    let p = tfidf(a)?;
    let x = req(ins, 0)?;
    let xs = ints(x);
    let c = x.shape.last().copied().unwrap_or(0) as usize;
    let rows = if x.shape.len() == 2 { x.shape[0] as usize } else { 1 };
    let mut y = vec![0.0; rows * p.size];
    for r in 0..rows {
        let row = xs.get(r * c..(r + 1) * c).unwrap_or(&[]);
        count_row(&p, row, &mut y[r * p.size..(r + 1) * p.size]);
    }
    put(&mut out[0], &y);
    Ok(())
}

fn binarizer(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, out, infer_binarizer)?;
    let t = a.float("threshold", 0.0);
    let x = req(ins, 0)?;
    let y: Vec<f64> = if x.dtype.is_float() {
        floats(x).iter().map(|&v| if v > t { 1.0 } else { 0.0 }).collect()
    } else {
        ints(x).iter().map(|&v| if (v as f64) > t { 1.0 } else { 0.0 }).collect()
    };
    put(&mut out[0], &y);
    Ok(())
}

fn array_feature_extractor(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, out, infer_array_feature_extractor)?;
    let (x, y) = (req(ins, 0)?, req(ins, 1)?);
    let (outer, c, k, _) = afe_dims(&x.shape, &y.shape)?;
    let idx = ints(y);
    check_features(&idx, c)?;
    let es = x.dtype.size();
    let o = &mut out[0];
    for r in 0..outer {
        for (j, &i) in idx.iter().enumerate().take(k) {
            let src = (r * c + i as usize) * es;
            let dst = (r * k + j) * es;
            if let (Some(s), Some(d)) = (x.data.get(src..src + es), o.data.get_mut(dst..dst + es)) {
                d.copy_from_slice(s);
            }
        }
    }
    Ok(())
}

/// The leaf a tree reaches for row `x`.
pub(crate) fn leaf_of(t: &Trees, root: (bool, usize), x: &[f64]) -> usize {
    let (mut leaf, mut i) = root;
    let mut steps = 0;
    while !leaf && steps <= t.feature.len() {
        let v = x.get(t.feature[i]).copied().unwrap_or(f64::NAN);
        let s = t.split[i];
        let go = if v.is_nan() && t.nan_true[i] {
            true
        } else {
            match t.mode[i] {
                0 => v <= s,
                1 => v < s,
                2 => v >= s,
                3 => v > s,
                4 => v == s,
                5 => v != s,
                _ => {
                    let (a, b) = t.members[i];
                    t.member_values.get(a..b).unwrap_or(&[]).contains(&v)
                }
            }
        };
        (leaf, i) = if go { t.yes[i] } else { t.no[i] };
        steps += 1;
    }
    i
}

/// The largest finite value of a float dtype.
pub(crate) fn max_finite(d: DType) -> f64 {
    match d {
        DType::F16 => 65504.0,
        DType::F64 => f64::MAX,
        _ => f32::MAX as f64,
    }
}

/// The initial value of an aggregate for dtype maxima `big` (min: `big`, max: `-big`).
pub(crate) fn agg_init(aggregate: u8, big: f64) -> f64 {
    match aggregate {
        2 => big,
        3 => -big,
        _ => 0.0,
    }
}

fn tree_ensemble(ins: &[Option<&HostTensor>], a: &Attrs, out: &mut [HostTensor]) -> Result<(), String> {
    prepare(ins, a, out, infer_tree_ensemble)?;
    let t = trees(a)?;
    let x = req(ins, 0)?;
    let xs = floats(x);
    let (n, f) = (x.shape[0] as usize, x.shape[1] as usize);
    let big = max_finite(x.dtype);
    let nt = t.roots.len() as f64;
    let mut y = vec![agg_init(t.aggregate, big); n * t.targets];
    for r in 0..n {
        let row = xs.get(r * f..(r + 1) * f).unwrap_or(&[]);
        for &root in &t.roots {
            let l = leaf_of(&t, root, row);
            let (tg, w) = (t.leaf_target[l], t.leaf_weight[l]);
            let o = &mut y[r * t.targets + tg];
            *o = match t.aggregate {
                0 => *o + w / nt,
                1 => *o + w,
                2 => o.min(w),
                _ => o.max(w),
            };
        }
    }
    put(&mut out[0], &y);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::attrs::AttrValue;
    use crate::ops::host::testing::{attrs, tensor};

    fn run(op: &str, ins: &[Option<HostTensor>], a: &Attrs) -> Result<Vec<f64>, String> {
        let def = crate::ops::OPS.iter().find(|o| o.name == op).unwrap();
        (def.validate)(a)?;
        let refs: Vec<Option<&HostTensor>> = ins.iter().map(Option::as_ref).collect();
        let inferred = (def.infer)(&crate::ops::host::infos(&refs)?, a)?;
        let mut out: Vec<HostTensor> = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s).unwrap()).collect();
        (def.op.id().host_kernel().unwrap())(&refs, a, &mut out)?;
        Ok(floats(&out[0]))
    }

    fn i64s(shape: &[i64], v: &[i64]) -> HostTensor {
        HostTensor::new(DType::I64, shape.to_vec(), v.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap()
    }

    fn ints(v: &[i64]) -> AttrValue {
        AttrValue::Ints(v.to_vec())
    }

    #[test]
    fn tfidf_by_hand() {
        // Unigram 7 (column 0), bigram (7, 8) (column 1), in [7, 8, 7, 9, 8].
        let a = attrs(&[
            ("mode", AttrValue::Str("TF".into())),
            ("min_gram_length", AttrValue::Int(1)),
            ("max_gram_length", AttrValue::Int(2)),
            ("max_skip_count", AttrValue::Int(1)),
            ("ngram_counts", ints(&[0, 1])),
            ("ngram_indexes", ints(&[0, 1])),
            ("pool_int64s", ints(&[7, 7, 8])),
        ]);
        let x = i64s(&[5], &[7, 8, 7, 9, 8]);
        // 7 twice; (7, 8) at skip 1 once, at skip 2 (7, _, 7)? no, (7, 9)? no; positions
        // 2 and 4: (7, 8) at skip 2 once.
        assert_eq!(run("TfIdfVectorizer", &[Some(x.clone())], &a).unwrap(), vec![2.0, 2.0]);
        let mut idf = a.clone();
        idf.0[0].1 = AttrValue::Str("TFIDF".into());
        idf.0.push(("weights".into(), AttrValue::Floats(vec![0.5, 3.0])));
        assert_eq!(run("TfIdfVectorizer", &[Some(x.clone())], &idf).unwrap(), vec![1.0, 6.0]);
        let mut bad = a.clone();
        bad.0[0].1 = AttrValue::Str("XX".into());
        assert!(run("TfIdfVectorizer", &[Some(x)], &bad).unwrap_err().contains("`mode`"));
    }

    #[test]
    fn binarizer_and_array_feature_extractor_by_hand() {
        let x = tensor(DType::F32, &[2, 3], &[0.5, 1.5, -1.0, 2.0, 1.0, 3.0]);
        let a = attrs(&[("threshold", AttrValue::Float(1.0))]);
        assert_eq!(run("Binarizer", &[Some(x.clone())], &a).unwrap(), vec![0.0, 1.0, 0.0, 1.0, 0.0, 1.0]);
        let y = run("ArrayFeatureExtractor", &[Some(x.clone()), Some(i64s(&[2], &[2, 0]))], &Attrs::default()).unwrap();
        assert_eq!(y, vec![-1.0, 0.5, 3.0, 2.0]);
        let e = run("ArrayFeatureExtractor", &[Some(x), Some(i64s(&[1], &[3]))], &Attrs::default()).unwrap_err();
        assert!(e.contains("index 3 is outside"), "{e}");
    }

    fn tree_attrs() -> Attrs {
        // Node 0: x0 ≤ 1 → node 1, else leaf 2 (target 0, 100). Node 1: x1 ∈ {5, 6} →
        // leaf 0 (target 1, 10), else leaf 1 (target 0, 1).
        attrs(&[
            ("n_targets", AttrValue::Int(2)),
            ("nodes_featureids", ints(&[0, 1])),
            ("nodes_modes", ints(&[0, 6])),
            ("nodes_splits", AttrValue::Floats(vec![1.0, 0.0])),
            ("nodes_truenodeids", ints(&[1, 0])),
            ("nodes_trueleafs", ints(&[0, 1])),
            ("nodes_falsenodeids", ints(&[2, 1])),
            ("nodes_falseleafs", ints(&[1, 1])),
            ("membership_values", AttrValue::Floats(vec![5.0, 6.0, f64::NAN])),
            ("leaf_targetids", ints(&[1, 0, 0])),
            ("leaf_weights", AttrValue::Floats(vec![10.0, 1.0, 100.0])),
            ("tree_roots", ints(&[0, 0])),
        ])
    }

    #[test]
    fn tree_ensemble_by_hand() {
        let x = tensor(DType::F32, &[3, 2], &[0.0, 5.0, 0.0, 7.0, 2.0, 5.0]);
        // Two copies of the tree, summed.
        let y = run("TreeEnsemble", &[Some(x.clone())], &tree_attrs()).unwrap();
        assert_eq!(y, vec![0.0, 20.0, 2.0, 0.0, 200.0, 0.0]);
        let mut max = tree_attrs();
        max.0.push(("aggregate_function".into(), AttrValue::Int(3)));
        let y = run("TreeEnsemble", &[Some(x.clone())], &max).unwrap();
        assert_eq!(y[1], 10.0);
        assert_eq!(y[0], -(f32::MAX as f64));
        // A cycle and a missing member list are errors.
        let mut cyc = tree_attrs();
        cyc.0[4].1 = ints(&[1, 1]);
        cyc.0[5].1 = ints(&[0, 0]);
        assert!(run("TreeEnsemble", &[Some(x.clone())], &cyc).unwrap_err().contains("cycle"));
        let mut nomem = tree_attrs();
        nomem.0[8].1 = AttrValue::Floats(vec![5.0]);
        assert!(run("TreeEnsemble", &[Some(x)], &nomem).unwrap_err().contains("membership_values"));
    }
}
