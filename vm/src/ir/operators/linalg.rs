//! Operator schemas of the linear-algebra family: Einsum and Det (the kernels are in
//! `crate::ops::linalg` and `crate::ops::linalg_cl`).

use super::elementwise::{check_dtype, input, same_dtype, FLOATS, NUMERIC};
use super::tensor::check_shape;
use crate::ir::attrs::*;
use crate::ir::schema::*;
use crate::ir::types::DType;

/// This family's operators (their encoding is their place in [`super::Operator`]).
pub static OPS: &[OpDef] = &[
    op!(Einsum, in 1..=64, out 1..=1, attrs &[attr!("equation", Str)], validate validate_einsum,
        infer infer_einsum,
        "Einstein summation over 1 to 64 inputs of one numeric dtype: explicit (`->`) or implicit output, \
        repeated indices (diagonals), `...` broadcasting; floats sum in f64 (f32 without fp64 on OpenCL), \
        integers wrap"),
    op!(Det, in 1..=1, out 1..=1, attrs &[], infer infer_det,
        "determinants of the square matrices in the last two dims, [..., M, M] → [...] (f16, f32, f64; LU with \
        partial pivoting in f64)"),
];

/// A parsed Einsum: every label's size, and each operand's and the output's axes as
/// labels. Labels are the letters in order of appearance, then the dims of the ellipsis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EinsumPlan {
    pub(crate) sizes: Vec<usize>,
    pub(crate) operands: Vec<Vec<usize>>,
    pub(crate) output: Vec<usize>,
}

impl EinsumPlan {
    /// The labels summed over: those not in the output.
    pub(crate) fn summed(&self) -> Vec<usize> {
        (0..self.sizes.len()).filter(|l| !self.output.contains(l)).collect()
    }

    /// Each operand's element stride per label (summed over repeated labels; 0 where the
    /// operand broadcasts a dim of 1), for operand shapes `shapes`.
    pub(crate) fn strides(&self, shapes: &[&[i64]]) -> Vec<Vec<usize>> {
        self.operands
            .iter()
            .zip(shapes)
            .map(|(axes, shape)| {
                let mut st = vec![0usize; self.sizes.len()];
                let mut s = 1usize;
                for (&l, &d) in axes.iter().zip(shape.iter()).rev() {
                    if d != 1 || self.sizes[l] == 1 {
                        st[l] += s;
                    }
                    s *= d.max(0) as usize;
                }
                st
            })
            .collect()
    }

    pub(crate) fn out_shape(&self) -> Vec<i64> {
        self.output.iter().map(|&l| self.sizes[l] as i64).collect()
    }
}

/// One side of a term: its letters and where its ellipsis is (index among the letters).
fn parse_term(t: &str, what: &str) -> Result<(Vec<u8>, Option<usize>), String> {
    let b = t.as_bytes();
    let (mut letters, mut ell, mut i) = (Vec::new(), None, 0);
    while i < b.len() {
        match b[i] {
            c if c.is_ascii_alphabetic() => {
                letters.push(c);
                i += 1;
            }
            b'.' => {
                if b.get(i..i + 3) != Some(b"...") {
                    return Err(format!("Einsum: {what} {t:?} has a '.' that is not part of an ellipsis \"...\""));
                }
                if ell.is_some() {
                    return Err(format!("Einsum: {what} {t:?} has more than one ellipsis"));
                }
                ell = Some(letters.len());
                i += 3;
            }
            c => {
                return Err(format!(
                    "Einsum: {what} {t:?} has the character {:?}; terms hold letters and at most one \"...\"",
                    c as char
                ))
            }
        }
    }
    Ok((letters, ell))
}

/// Parses `equation` for inputs of shapes `shapes`.
pub(crate) fn plan_einsum(equation: &str, shapes: &[&[i64]]) -> Result<EinsumPlan, String> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => {
            if r.contains("->") {
                return Err(format!("Einsum: equation {equation:?} has more than one \"->\""));
            }
            (l, Some(r))
        }
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != shapes.len() {
        return Err(format!(
            "Einsum: equation {equation:?} has {} input terms but there are {} inputs",
            terms.len(),
            shapes.len()
        ));
    }
    // Letters get labels in order of appearance; the ellipsis dims come after.
    let mut letters: Vec<u8> = Vec::new();
    let mut parsed = Vec::with_capacity(terms.len());
    let mut ell_rank = 0usize;
    for (i, (t, shape)) in terms.iter().zip(shapes).enumerate() {
        let (ls, ell) = parse_term(t, &format!("input term {}", i + 1))?;
        let named = ls.len();
        let r = shape.len();
        let e = match ell {
            Some(_) if named <= r => r - named,
            None if named == r => 0,
            _ => {
                return Err(format!(
                    "Einsum: input term {} {t:?} names {named} dims{}, but input {} has rank {r}",
                    i + 1,
                    if ell.is_some() { " besides the ellipsis" } else { "" },
                    i + 1
                ))
            }
        };
        ell_rank = ell_rank.max(e);
        for &c in &ls {
            if !letters.contains(&c) {
                letters.push(c);
            }
        }
        parsed.push((ls, ell, e));
    }
    let nl = letters.len();
    let label = |c: u8| letters.iter().position(|&x| x == c).unwrap_or(0);
    let mut sizes: Vec<Option<usize>> = vec![None; nl + ell_rank];
    let mut operands = Vec::with_capacity(shapes.len());
    for (i, ((ls, ell, e), shape)) in parsed.iter().zip(shapes).enumerate() {
        let mut axes: Vec<usize> = ls.iter().map(|&c| label(c)).collect();
        if let Some(p) = *ell {
            // This operand's ellipsis dims are the last `e` of the broadcast ellipsis.
            let ell_axes = (ell_rank - e..ell_rank).map(|j| nl + j);
            axes.splice(p..p, ell_axes);
        }
        for (&l, &d) in axes.iter().zip(shape.iter()) {
            let d = usize::try_from(d).map_err(|_| format!("Einsum: input {} has a negative dim", i + 1))?;
            let is_ell = l >= nl;
            sizes[l] = match sizes[l] {
                None => Some(d),
                Some(s) if s == d => Some(s),
                Some(s) if is_ell && (s == 1 || d == 1) => Some(s.max(d)),
                Some(s) => {
                    return Err(if is_ell {
                        format!("Einsum: the ellipsis dims of the inputs do not broadcast ({s} and {d})")
                    } else {
                        format!(
                            "Einsum: index {:?} has size {s} in one place and {d} in input {}",
                            letters[l] as char,
                            i + 1
                        )
                    })
                }
            };
        }
        operands.push(axes);
    }
    let sizes: Vec<usize> = sizes.into_iter().map(|s| s.unwrap_or(1)).collect();
    let output = match rhs {
        Some(r) => {
            let (ls, ell) = parse_term(r, "the output term")?;
            let mut out: Vec<usize> = Vec::with_capacity(ls.len() + ell_rank);
            for &c in &ls {
                if !letters.contains(&c) {
                    return Err(format!("Einsum: output index {:?} appears in no input term", c as char));
                }
                if ls.iter().filter(|&&x| x == c).count() > 1 {
                    return Err(format!("Einsum: output index {:?} appears more than once", c as char));
                }
                out.push(label(c));
            }
            match ell {
                Some(p) => {
                    out.splice(p..p, nl..nl + ell_rank);
                }
                None if ell_rank > 0 => {
                    return Err(format!(
                    "Einsum: the inputs' ellipsis stands for {ell_rank} dims, but the output term {r:?} has no \"...\""
                ))
                }
                None => {}
            }
            out
        }
        None => {
            // Implicit: the ellipsis dims, then the letters used once, in ASCII order.
            let mut once: Vec<u8> = letters
                .iter()
                .copied()
                .filter(|&c| parsed.iter().map(|(ls, _, _)| ls.iter().filter(|&&x| x == c).count()).sum::<usize>() == 1)
                .collect();
            once.sort_unstable();
            (nl..nl + ell_rank).chain(once.into_iter().map(label)).collect()
        }
    };
    Ok(EinsumPlan { sizes, operands, output })
}

fn validate_einsum(a: &Attrs) -> Result<(), String> {
    match a.str("equation") {
        Some(_) => Ok(()),
        None => Err("@onnx.Einsum needs the `equation` attribute".into()),
    }
}

/// Einsum's dtype and plan.
pub(crate) fn einsum_plan(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<(DType, EinsumPlan), String> {
    validate_einsum(attrs)?;
    let x = input(ins, 0, "Inputs")?;
    check_dtype(x, 0, "Inputs", NUMERIC)?;
    let mut shapes = Vec::with_capacity(ins.len());
    for i in 0..ins.len() {
        let t = input(ins, i, "Inputs")?;
        same_dtype(i, t.dtype, x.dtype)?;
        check_shape(t.shape, "Einsum")?;
        shapes.push(t.shape);
    }
    let plan = plan_einsum(attrs.str("equation").unwrap_or_default(), &shapes)?;
    check_shape(&plan.out_shape(), "Einsum")?;
    Ok((x.dtype, plan))
}

pub(crate) fn infer_einsum(ins: &[Option<TensorInfo>], attrs: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (d, plan) = einsum_plan(ins, attrs)?;
    Ok(vec![(d, plan.out_shape())])
}

/// Det's batch count and matrix size.
pub(crate) fn det_dims(ins: &[Option<TensorInfo>]) -> Result<(DType, Vec<i64>, usize), String> {
    let x = input(ins, 0, "X")?;
    check_dtype(x, 0, "X", FLOATS)?;
    check_shape(x.shape, "Det")?;
    let r = x.shape.len();
    if r < 2 || x.shape[r - 1] != x.shape[r - 2] {
        return Err(format!("Det needs square matrices in the last two dims, found shape {:?}", x.shape));
    }
    Ok((x.dtype, x.shape[..r - 2].to_vec(), x.shape[r - 1] as usize))
}

pub(crate) fn infer_det(ins: &[Option<TensorInfo>], _: &Attrs) -> Result<Vec<OutInfo>, String> {
    let (d, batch, _) = det_dims(ins)?;
    Ok(vec![(d, batch)])
}
