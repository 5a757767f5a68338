//! What a convolution does to its output after the products: the bias first, and
//! after the last products FusedConv's residual `+ Z` and activation. The GEMM applies
//! them to each block of its output while the block is in registers and cache, instead
//! of passes over the whole output before and after.

use super::simd::{arr, arr_mut};

/// A FusedConv activation (`p` its `activation_params`), with the formulas of the unfused
/// operators' f32 kernels, so the results are the same.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Activation {
    Identity,
    Relu,
    LeakyRelu(f32),
    Clip(f32, f32),
    Sigmoid,
    Tanh,
    HardSigmoid(f32, f32),
}

impl Activation {
    pub(super) fn new(name: &str, p: &[f64]) -> Activation {
        let p = |i: usize| p.get(i).copied().unwrap_or(0.0) as f32;
        match name {
            "Relu" => Activation::Relu,
            "LeakyRelu" => Activation::LeakyRelu(p(0)),
            "Clip" => Activation::Clip(p(0), p(1)),
            "Sigmoid" => Activation::Sigmoid,
            "Tanh" => Activation::Tanh,
            "HardSigmoid" => Activation::HardSigmoid(p(0), p(1)),
            _ => Activation::Identity,
        }
    }

    #[inline(always)]
    pub(super) fn apply(self, v: f32) -> f32 {
        match self {
            Activation::Identity => v,
            Activation::Relu => v.max(0.0),
            Activation::LeakyRelu(a) => {
                if v > 0.0 {
                    v
                } else {
                    v * a
                }
            }
            // NaN stays NaN; a > b gives b, as Clip.
            Activation::Clip(a, b) => {
                let v = if v < a { a } else { v };
                if v > b {
                    b
                } else {
                    v
                }
            }
            Activation::Sigmoid => {
                if v >= 0.0 {
                    1.0 / (1.0 + (-v).exp())
                } else {
                    let e = v.exp();
                    e / (1.0 + e)
                }
            }
            Activation::Tanh => v.tanh(),
            Activation::HardSigmoid(a, b) => (a * v + b).clamp(0.0, 1.0),
        }
    }

    /// `y = act(y + z)` (`act(y)` without `z`) over f32s, the loop compiled for each
    /// activation so that it vectorises. (Inlined: the GEMM calls it on each row of a
    /// micro-tile.)
    #[inline]
    pub(super) fn epilogue(self, y: &mut [f32], z: Option<&[f32]>) {
        fn run(y: &mut [f32], z: Option<&[f32]>, f: impl Fn(f32) -> f32) {
            match z {
                Some(z) => y.iter_mut().zip(z).for_each(|(o, &v)| *o = f(*o + v)),
                None => y.iter_mut().for_each(|o| *o = f(*o)),
            }
        }
        match self {
            Activation::Identity if z.is_none() => {}
            Activation::Identity => run(y, z, |v| v),
            Activation::Relu => run(y, z, |v| v.max(0.0)),
            act => run(y, z, move |v| act.apply(v)),
        }
    }
}

/// What a GEMM does with C beyond adding the product: with `overwrite`, the first block
/// of k writes C (`bias + A B`, the bits of adding to C filled with the bias) instead of
/// adding to what it held; after the last block, `c = act(c + z)` (FusedConv's
/// epilogue). Rows and columns count from `(r0, c0)` of `bias` and `z`.
#[derive(Clone, Copy)]
pub(super) struct Epilogue<'a> {
    pub(super) overwrite: bool,
    pub(super) bias: Option<&'a [f32]>,
    pub(super) act: Activation,
    pub(super) z: Option<&'a [&'a [f32]]>,
    pub(super) r0: usize,
    pub(super) c0: usize,
}

impl<'a> Epilogue<'a> {
    /// `C += A B`, nothing else.
    pub(super) const ADD: Epilogue<'static> =
        Epilogue { overwrite: false, bias: None, act: Activation::Identity, z: None, r0: 0, c0: 0 };

    /// C written as `bias + A B`, then `act(c + z)`.
    pub(super) fn write(bias: Option<&'a [f32]>, act: Activation, z: Option<&'a [&'a [f32]]>) -> Epilogue<'a> {
        Epilogue { overwrite: true, bias, act, z, r0: 0, c0: 0 }
    }

    /// This epilogue for the part of C from row `r` and column `c`.
    pub(super) fn at(self, r: usize, c: usize) -> Epilogue<'a> {
        Epilogue { r0: self.r0 + r, c0: self.c0 + c, ..self }
    }

    /// Whether anything follows the last block.
    pub(super) fn post(&self) -> bool {
        self.z.is_some() || self.act != Activation::Identity
    }

    /// What row `i` of C starts from when it is written.
    #[inline(always)]
    pub(super) fn start(&self, i: usize) -> f32 {
        self.bias.map_or(0.0, |b| b[self.r0 + i])
    }

    /// `row = act(row + z)` for row `i` of C, its columns from `j`.
    #[inline(always)]
    pub(super) fn finish(&self, i: usize, j: usize, row: &mut [f32]) {
        let z = self.z.map(|z| &z[self.r0 + i][self.c0 + j..][..row.len()]);
        self.act.epilogue(row, z);
    }

    /// Adds a micro-tile row of products `acc` to row `i` of C, columns from `j`: `row =
    /// start + alpha * acc` when `first` (the row's [`Epilogue::start`]), `row + alpha *
    /// acc` otherwise, and when `last` then [`Epilogue::finish`], in one pass. (Storing
    /// the row and reading it back for the finish stalled: half of a wide store does not
    /// forward to a narrower load on every core.) The same operations in the same order
    /// as the separate passes: the same bits.
    #[inline(always)]
    pub(super) fn store<const NR: usize>(
        &self,
        (i, j): (usize, usize),
        row: &mut [f32],
        acc: &[f32; NR],
        alpha: f32,
        (first, last): (bool, bool),
    ) {
        let z = if last { self.z.map(|z| &z[self.r0 + i][self.c0 + j..][..row.len()]) } else { None };
        let act = if last { self.act } else { Activation::Identity };
        #[inline(always)]
        fn run<const NR: usize>(
            row: &mut [f32],
            acc: &[f32; NR],
            z: Option<&[f32]>,
            base: Option<f32>,
            alpha: f32,
            f: impl Fn(f32) -> f32,
        ) {
            // A whole row of the micro-tile: computed in a local array and stored at once.
            // (In place over `row`, each store might alias the next read of `acc` for all
            // the compiler knows, and the loop stayed scalar: a quarter of a GEMM with a
            // short k, such as Winograd's products over 16 channels.)
            let full: Result<&mut [f32; NR], _> = row.try_into();
            match full {
                Ok(row) => {
                    // In vectors of 8 lanes: a fixed-width block the compiler keeps in one
                    // register (whole rows of 16 or 32 came out as odd mixes of widths).
                    let z = z.map(|z| &z[..NR]);
                    for (i, (r8, a8)) in row.chunks_exact_mut(8).zip(acc.chunks_exact(8)).enumerate() {
                        let (r8, a8): (&mut [f32; 8], &[f32; 8]) = (arr_mut(r8), arr(a8));
                        let mut out = [0f32; 8];
                        match base {
                            Some(b) => out.iter_mut().zip(a8).for_each(|(o, &v)| *o = b + alpha * v),
                            None => out.iter_mut().zip(a8).zip(r8.iter()).for_each(|((o, &v), &c)| *o = c + alpha * v),
                        }
                        match z {
                            Some(z) => {
                                let z8: &[f32; 8] = arr(&z[i * 8..i * 8 + 8]);
                                out.iter_mut().zip(z8).for_each(|(o, &zv)| *o = f(*o + zv));
                            }
                            None => out.iter_mut().for_each(|o| *o = f(*o)),
                        }
                        *r8 = out;
                    }
                    let tail = NR / 8 * 8;
                    each(&mut row[tail..], &acc[tail..], z.map(|z| &z[tail..]), base, alpha, f);
                }
                Err(_) => each(row, acc, z, base, alpha, f),
            }
        }
        #[inline(always)]
        fn each(
            row: &mut [f32],
            acc: &[f32],
            z: Option<&[f32]>,
            base: Option<f32>,
            alpha: f32,
            f: impl Fn(f32) -> f32,
        ) {
            let sum = |o: f32, v: f32| base.unwrap_or(o) + alpha * v;
            match z {
                Some(z) => row.iter_mut().zip(acc).zip(z).for_each(|((o, &v), &zv)| *o = f(sum(*o, v) + zv)),
                None => row.iter_mut().zip(acc).for_each(|(o, &v)| *o = f(sum(*o, v))),
            }
        }
        let base = first.then(|| self.start(i));
        match act {
            Activation::Identity => run(row, acc, z, base, alpha, |v| v),
            Activation::Relu => run(row, acc, z, base, alpha, |v| v.max(0.0)),
            act => run(row, acc, z, base, alpha, move |v| act.apply(v)),
        }
    }
}

/// FusedConv's epilogue over a whole f32 output: `y = act(y + z)` (`act(y)` without `z`).
#[derive(Clone, Copy)]
pub(super) struct Post<'a> {
    pub(super) act: Activation,
    pub(super) z: Option<&'a [f32]>,
}

impl<'a> Post<'a> {
    /// Nothing after the convolution.
    pub(super) const NONE: Post<'static> = Post { act: Activation::Identity, z: None };

    /// Whether there is anything to do.
    pub(super) fn any(&self) -> bool {
        self.z.is_some() || self.act != Activation::Identity
    }

    /// Applies it to `y`, the output from element `at` on.
    pub(super) fn apply(&self, at: usize, y: &mut [f32]) {
        self.act.epilogue(y, self.z.map(|z| &z[at..][..y.len()]));
    }
}
