//! Operator schemas of the classic-ML family: TfIdfVectorizer (default domain) and, from
//! the `ai.onnx.ml` domain, Binarizer, ArrayFeatureExtractor and TreeEnsemble (the
//! kernels are in `crate::ops::ml` and `crate::ops::ml_cl`). The importer accepts the
//! latter three only from `ai.onnx.ml` (their names are unique among the VM's operators).

use super::elementwise::{check_dtype, input};
use super::tensor::check_shape;
use crate::ir::attrs::*;
use crate::ir::schema::*;
use crate::ir::types::DType;
use std::collections::HashMap;

/// The operators of the `ai.onnx.ml` domain the VM has.
pub const ML_DOMAIN_OPS: &[&str] = &["Binarizer", "ArrayFeatureExtractor", "TreeEnsemble"];

const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::F64];
const NUMS: &[DType] = &[DType::F32, DType::F16, DType::F64, DType::I32, DType::I64];

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(TfIdfVectorizer, in 1..=1, out 1..=1,
        attrs &[
            attr!("max_gram_length", Int),
            attr!("max_skip_count", Int),
            attr!("min_gram_length", Int),
            attr!("mode", Str),
            attr!("ngram_counts", Ints),
            attr!("ngram_indexes", Ints),
            attr!("pool_int64s", Ints),
            attr!("pool_strings", Str),
            attr!("weights", Floats),
        ],
        validate validate_tfidf, infer infer_tfidf,
        "counts the n-grams of pool_int64s (n from min_gram_length to max_gram_length, items up to \
        max_skip_count apart) in each row of X (i32 or i64, [C] or [B, C]) into f32 [max(ngram_indexes) + 1] or \
        [B, that]; mode TF (counts), IDF (weights or 1 where present) or TFIDF (weights · counts); string pools \
        are not supported"),
    op!(Binarizer, in 1..=1, out 1..=1, attrs &[attr!("threshold", Float)],
        validate validate_binarizer, infer infer_binarizer,
        "ai.onnx.ml: 1 where x > threshold (default 0), else 0, in x's dtype (f16, f32, f64, i32, i64)"),
    op!(ArrayFeatureExtractor, in 2..=2, out 1..=1, attrs &[],
        infer infer_array_feature_extractor,
        "ai.onnx.ml: the elements of X's last axis at indices Y (i64, [k] or [1, k]; an index outside is an error): \
        [..., k] ([1, k] for 1-D X); any dtype"),
    op!(TreeEnsemble, in 1..=1, out 1..=1,
        attrs &[
            attr!("aggregate_function", Int),
            attr!("leaf_targetids", Ints),
            attr!("leaf_weights", Floats),
            attr!("membership_values", Floats),
            attr!("n_targets", Int),
            attr!("nodes_falseleafs", Ints),
            attr!("nodes_falsenodeids", Ints),
            attr!("nodes_featureids", Ints),
            attr!("nodes_hitrates", Floats),
            attr!("nodes_missing_value_tracks_true", Ints),
            attr!("nodes_modes", Ints),
            attr!("nodes_splits", Floats),
            attr!("nodes_trueleafs", Ints),
            attr!("nodes_truenodeids", Ints),
            attr!("post_transform", Int),
            attr!("tree_roots", Ints),
        ],
        validate validate_tree_ensemble, infer infer_tree_ensemble,
        "ai.onnx.ml (opset 5): the trees rooted at tree_roots evaluated on each row of X [N, F] (nodes compare a \
        feature: modes ≤ < ≥ > = ≠ and set membership, NaN going true where nodes_missing_value_tracks_true), their \
        leaves' weights aggregated per target (average, sum, min, max) into [N, n_targets] of X's dtype (f16, f32, \
        f64); post_transform none only"),
];

// ---------------------------------------------------------------------------------------
// TfIdfVectorizer.

/// TfIdfVectorizer's n-grams (each once, a repeated one keeping its last place) with the
/// output column each counts into, and the output size.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TfIdf {
    pub(crate) grams: Vec<(Vec<i64>, usize)>,
    pub(crate) min: usize,
    pub(crate) max: usize,
    pub(crate) skip: usize,
    /// 0 TF, 1 IDF, 2 TFIDF.
    pub(crate) mode: u8,
    pub(crate) weights: Option<Vec<f64>>,
    pub(crate) size: usize,
}

pub(crate) fn tfidf(a: &Attrs) -> Result<TfIdf, String> {
    const OP: &str = "@onnx.TfIdfVectorizer";
    if a.get("pool_strings").is_some() {
        return Err(format!("{OP}: pool_strings (string n-grams, ONNX STRING) are not supported"));
    }
    let mode = match a.str("mode") {
        Some("TF") => 0,
        Some("IDF") => 1,
        Some("TFIDF") => 2,
        other => return Err(format!("attribute `mode` of {OP} must be \"TF\", \"IDF\" or \"TFIDF\", found {other:?}")),
    };
    let (min, max, skip) = (a.int("min_gram_length", 0), a.int("max_gram_length", 0), a.int("max_skip_count", 0));
    if min < 1 || max < min || max > 1 << 16 {
        return Err(format!("{OP}: min_gram_length ({min}) and max_gram_length ({max}) must satisfy 1 ≤ min ≤ max"));
    }
    if !(0..=1 << 16).contains(&skip) {
        return Err(format!("attribute `max_skip_count` of {OP} must be ≥ 0, found {skip}"));
    }
    let pool = a.ints("pool_int64s").ok_or_else(|| format!("{OP}: pool_int64s is required"))?;
    let counts = a.ints("ngram_counts").ok_or_else(|| format!("{OP}: ngram_counts is required"))?;
    let idx = a.ints("ngram_indexes").ok_or_else(|| format!("{OP}: ngram_indexes is required"))?;
    if counts.windows(2).any(|w| w[0] > w[1]) || counts.iter().any(|&c| c < 0 || c as usize > pool.len()) {
        return Err(format!(
            "{OP}: ngram_counts {counts:?} must be non-decreasing starts within the pool of {}",
            pool.len()
        ));
    }
    if idx.iter().any(|&i| !(0..1 << 24).contains(&i)) || idx.is_empty() {
        return Err(format!("{OP}: ngram_indexes must be output columns in [0, 2^24), found {idx:?}"));
    }
    let size = idx.iter().copied().max().unwrap_or(0) as usize + 1;
    let mut id = 0usize;
    let mut grams: Vec<(Vec<i64>, usize)> = Vec::new();
    let mut at: HashMap<Vec<i64>, usize> = HashMap::new();
    for (i, &start) in counts.iter().enumerate() {
        let n = i + 1;
        let end = counts.get(i + 1).map_or(pool.len(), |&e| e as usize);
        let items = pool.get(start as usize..end).unwrap_or(&[]);
        for g in items.chunks_exact(n) {
            if n >= min as usize && n <= max as usize {
                let col = *idx.get(id).ok_or_else(|| {
                    format!("{OP}: ngram_indexes has {} entries, fewer than the pool's n-grams", idx.len())
                })? as usize;
                match at.get(g) {
                    Some(&k) => grams[k].1 = col,
                    None => {
                        at.insert(g.to_vec(), grams.len());
                        grams.push((g.to_vec(), col));
                    }
                }
            }
            id += 1;
        }
    }
    let weights = a.floats("weights");
    if let Some(w) = &weights {
        if w.len() < size {
            return Err(format!("{OP}: weights has {} entries, fewer than the {size} output columns", w.len()));
        }
    }
    Ok(TfIdf { grams, min: min as usize, max: max as usize, skip: skip as usize, mode, weights, size })
}

fn validate_tfidf(a: &Attrs) -> Result<(), String> {
    tfidf(a).map(|_| ())
}

pub(crate) fn infer_tfidf(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    let p = tfidf(a)?;
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", &[DType::I32, DType::I64])?;
    let s = p.size as i64;
    match x.shape {
        [_] => Ok(vec![(DType::F32, vec![s])]),
        [b, _] if *b >= 1 => {
            check_shape(&[*b, s], "TfIdfVectorizer")?;
            Ok(vec![(DType::F32, vec![*b, s])])
        }
        other => Err(format!("TfIdfVectorizer: X must be [C] or [B ≥ 1, C], found shape {other:?}")),
    }
}

// ---------------------------------------------------------------------------------------
// Binarizer, ArrayFeatureExtractor.

fn validate_binarizer(a: &Attrs) -> Result<(), String> {
    let t = a.float("threshold", 0.0);
    if t.is_nan() {
        return Err("attribute `threshold` of @onnx.Binarizer must not be NaN".into());
    }
    Ok(())
}

pub(crate) fn infer_binarizer(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", NUMS)?;
    Ok(vec![(x.dtype, x.shape.to_vec())])
}

/// ArrayFeatureExtractor's view: X as [outer, c], the number of indices, the output shape.
pub(crate) fn afe_dims(x: &[i64], y: &[i64]) -> Result<(usize, usize, usize, Vec<i64>), String> {
    const OP: &str = "ArrayFeatureExtractor";
    let k = match y {
        [k] => *k,
        [1, k] => *k,
        other => return Err(format!("{OP}: the indices Y must be [k] or [1, k], found shape {other:?}")),
    };
    let Some((&c, rest)) = x.split_last() else {
        return Err(format!("{OP}: X must have rank 1 or more, found a scalar"));
    };
    let shape = if rest.is_empty() { vec![1, k] } else { [rest, &[k]].concat() };
    check_shape(x, OP)?;
    check_shape(&shape, OP)?;
    let outer = rest.iter().product::<i64>() as usize;
    Ok((outer, c as usize, k as usize, shape))
}

pub(crate) fn infer_array_feature_extractor(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let x = input(ins, 0, "X")?;
    let y = input(ins, 1, "Y")?;
    check_dtype(y, 1, "Y", &[DType::I64])?;
    let (_, c, _, shape) = afe_dims(x.shape, y.shape)?;
    if let Some(v) = y.value {
        check_features(&v.to_i64(), c)?;
    }
    Ok(vec![(x.dtype, shape)])
}

/// Every index picks an element of the last axis.
pub(crate) fn check_features(idx: &[i64], c: usize) -> Result<(), String> {
    match idx.iter().find(|&&i| i < 0 || i >= c as i64) {
        Some(i) => Err(format!("ArrayFeatureExtractor: index {i} is outside X's last axis of {c}")),
        None => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------
// TreeEnsemble.

/// A checked tree ensemble: per node (feature, mode, split, true and false child (leaf
/// flag, index), NaN goes true, membership range), per leaf (target, weight), the roots
/// (a root that is a leaf as `(true, leaf)`), the members, aggregation and targets.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Trees {
    pub(crate) feature: Vec<usize>,
    pub(crate) mode: Vec<u8>,
    pub(crate) split: Vec<f64>,
    pub(crate) yes: Vec<(bool, usize)>,
    pub(crate) no: Vec<(bool, usize)>,
    pub(crate) nan_true: Vec<bool>,
    pub(crate) members: Vec<(usize, usize)>,
    pub(crate) member_values: Vec<f64>,
    pub(crate) leaf_target: Vec<usize>,
    pub(crate) leaf_weight: Vec<f64>,
    pub(crate) roots: Vec<(bool, usize)>,
    /// 0 average, 1 sum, 2 min, 3 max.
    pub(crate) aggregate: u8,
    pub(crate) targets: usize,
}

pub(crate) fn trees(a: &Attrs) -> Result<Trees, String> {
    const OP: &str = "@onnx.TreeEnsemble";
    let ints = |name: &str| a.ints(name).map(<[i64]>::to_vec).ok_or_else(|| format!("{OP}: `{name}` is required"));
    let floats = |name: &str| a.floats(name).ok_or_else(|| format!("{OP}: `{name}` is required"));
    let (feat, modes, tid, fid) =
        (ints("nodes_featureids")?, ints("nodes_modes")?, ints("nodes_truenodeids")?, ints("nodes_falsenodeids")?);
    let (tl, fl, splits) = (ints("nodes_trueleafs")?, ints("nodes_falseleafs")?, floats("nodes_splits")?);
    let (ltarget, lweight, roots) = (ints("leaf_targetids")?, floats("leaf_weights")?, ints("tree_roots")?);
    let nn = feat.len();
    let nan: Vec<i64> = a.ints("nodes_missing_value_tracks_true").map_or(vec![0; nn], <[i64]>::to_vec);
    let lens = [modes.len(), tid.len(), fid.len(), tl.len(), fl.len(), splits.len(), nan.len()];
    if lens.iter().any(|&l| l != nn) {
        return Err(format!(
            "{OP}: the nodes_* attributes must all have one entry per node ({nn}), found lengths {lens:?}"
        ));
    }
    if let Some(h) = a.floats("nodes_hitrates") {
        if h.len() != nn {
            return Err(format!("{OP}: nodes_hitrates must have {nn} entries, found {}", h.len()));
        }
    }
    let nl = ltarget.len();
    if lweight.len() != nl {
        return Err(format!("{OP}: leaf_targetids ({nl}) and leaf_weights ({}) differ in length", lweight.len()));
    }
    let targets = a.int("n_targets", 0);
    if !(1..=1 << 24).contains(&targets) {
        return Err(format!("{OP}: n_targets must be positive, found {targets}"));
    }
    if let Some(t) = ltarget.iter().find(|&&t| t < 0 || t >= targets) {
        return Err(format!("{OP}: leaf target {t} is outside [0, n_targets = {targets})"));
    }
    let aggregate = a.int("aggregate_function", 1);
    if !(0..=3).contains(&aggregate) {
        return Err(format!(
            "{OP}: aggregate_function must be 0 (average), 1 (sum), 2 (min) or 3 (max), found {aggregate}"
        ));
    }
    let pt = a.int("post_transform", 0);
    if pt != 0 {
        return Err(format!("{OP}: post_transform {pt} is not supported (only 0, none)"));
    }
    if let Some(m) = modes.iter().find(|&&m| !(0..=6).contains(&m)) {
        return Err(format!("{OP}: node mode {m} is not one of 0 (≤) to 6 (member)"));
    }
    if let Some(f) = feat.iter().find(|&&f| !(0..1 << 40).contains(&f)) {
        return Err(format!("{OP}: feature id {f} is negative"));
    }
    let child = |leaf: i64, id: i64| -> Result<(bool, usize), String> {
        let (is_leaf, bound) = (leaf != 0, if leaf != 0 { nl } else { nn });
        if id < 0 || id as usize >= bound {
            return Err(format!(
                "{OP}: {} index {id} is outside the {bound} {}",
                if is_leaf { "leaf" } else { "node" },
                if is_leaf { "leaves" } else { "nodes" }
            ));
        }
        Ok((is_leaf, id as usize))
    };
    let yes = (0..nn).map(|i| child(tl[i], tid[i])).collect::<Result<Vec<_>, _>>()?;
    let no = (0..nn).map(|i| child(fl[i], fid[i])).collect::<Result<Vec<_>, _>>()?;
    // Set members, in node order, each node's list ended by a NaN.
    let mv = a.floats("membership_values").unwrap_or_default();
    let mut members = vec![(0, 0); nn];
    let mut pos = 0;
    for (i, &m) in modes.iter().enumerate() {
        if m == 6 {
            let start = pos;
            while pos < mv.len() && !mv[pos].is_nan() {
                pos += 1;
            }
            if pos >= mv.len() {
                return Err(format!("{OP}: membership_values has no NaN-ended list for set membership node {i}"));
            }
            members[i] = (start, pos);
            pos += 1;
        }
    }
    if mv[pos.min(mv.len())..].iter().any(|v| v.is_nan()) {
        return Err(format!("{OP}: membership_values has more NaN-ended lists than set membership nodes"));
    }
    let mut rs = Vec::with_capacity(roots.len());
    for &r in &roots {
        let i =
            usize::try_from(r).ok().filter(|&i| i < nn).ok_or_else(|| format!("{OP}: tree root {r} is not a node"))?;
        // A root whose branches are the same leaf is that leaf (ONNX's reference: the
        // leaf of the root's index).
        if tl[i] != 0 && fl[i] != 0 && tid[i] == fid[i] {
            rs.push(child(1, r)?);
        } else {
            rs.push((false, i));
        }
    }
    // No cycles: a depth-first walk (an explicit stack, so deep trees cannot overflow the
    // call stack) never meets a node that is still open on its path.
    let mut state = vec![0u8; nn]; // 0 unseen, 1 open, 2 done
    for &(leaf, r) in &rs {
        if leaf || state[r] == 2 {
            continue;
        }
        let mut stack = vec![(r, 0u8)];
        state[r] = 1;
        while let Some(&mut (i, ref mut next)) = stack.last_mut() {
            let c = match *next {
                0 => yes[i],
                1 => no[i],
                _ => {
                    state[i] = 2;
                    stack.pop();
                    continue;
                }
            };
            *next += 1;
            if c.0 {
                continue;
            }
            match state[c.1] {
                1 => return Err(format!("{OP}: the tree rooted at node {r} has a cycle (through node {})", c.1)),
                0 => {
                    state[c.1] = 1;
                    stack.push((c.1, 0));
                }
                _ => {}
            }
        }
    }
    Ok(Trees {
        feature: feat.iter().map(|&f| f as usize).collect(),
        mode: modes.iter().map(|&m| m as u8).collect(),
        split: splits,
        yes,
        no,
        nan_true: nan.iter().map(|&v| v != 0).collect(),
        members,
        member_values: mv,
        leaf_target: ltarget.iter().map(|&t| t as usize).collect(),
        leaf_weight: lweight,
        roots: rs,
        aggregate: aggregate as u8,
        targets: targets as usize,
    })
}

fn validate_tree_ensemble(a: &Attrs) -> Result<(), String> {
    trees(a).map(|_| ())
}

pub(crate) fn infer_tree_ensemble(ins: &[Option<TensorInfo>], a: &Attrs) -> Result<Vec<OutInfo>, String> {
    let t = trees(a)?;
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", FLOATS)?;
    let [n, f] = x.shape else {
        return Err(format!("TreeEnsemble: X must be [N, features], found shape {:?}", x.shape));
    };
    if let Some(m) = t.feature.iter().max() {
        if *m as i64 >= *f {
            return Err(format!("TreeEnsemble: a node reads feature {m}, but X has {f} features"));
        }
    }
    check_shape(&[*n, t.targets as i64], "TreeEnsemble")?;
    Ok(vec![(x.dtype, vec![*n, t.targets as i64])])
}
