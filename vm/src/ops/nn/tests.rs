use super::epilogue::Activation;
use super::winograd::Wino;
use super::*;
use crate::ir::host_tensor::ConstOperand;
use crate::ir::host_tensor::HostTensor;
use crate::ops::{AttrValue, OpId, TensorInfo};

/// Exact dyadic test values in [-1.375, 1.375]; the generator for the expected values
/// (ONNX's reference evaluator, or naive numpy loops where it falls short) uses the
/// same formula.
fn gen(shape: &[i64], seed: u64) -> HostTensor {
    let n: i64 = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| ((i * 37 + seed as i64 * 13 + 11) % 23 - 11) as f32 * 0.125).collect();
    HostTensor::from_f32(shape, &v).unwrap()
}

fn attrs(list: &[(&str, AttrValue)]) -> Attrs {
    Attrs(list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
}

fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.to_vec())
}

/// Runs an operator as the verifier and interpreter do: attribute check, inference,
/// zeroed outputs of the inferred types, host kernel.
fn run(op: &str, ins: &[Option<&HostTensor>], attrs: &Attrs) -> Result<Vec<HostTensor>, String> {
    let def = OpId::from_name(op).ok_or("unknown operator")?.def();
    def.check_attrs(attrs)?;
    let infos: Vec<Option<TensorInfo>> =
        ins.iter().map(|t| t.map(|t| TensorInfo { dtype: t.dtype, shape: &t.shape, value: Some(t) })).collect();
    let inferred = (def.infer)(&infos, attrs)?;
    let mut outs = inferred.iter().map(|(d, s)| HostTensor::zeros(*d, s)).collect::<Result<Vec<_>, _>>()?;
    (def.op.id().host_kernel().unwrap())(ins, attrs, &mut outs)?;
    Ok(outs)
}

fn err(op: &str, ins: &[&HostTensor], at: &[(&str, AttrValue)]) -> String {
    let ins: Vec<Option<&HostTensor>> = ins.iter().map(|t| Some(*t)).collect();
    match run(op, &ins, &attrs(at)) {
        Ok(_) => panic!("{op} {}: expected an error", attrs(at)),
        Err(e) => e,
    }
}

fn assert_close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: element count");
    for (j, (x, y)) in got.iter().zip(want).enumerate() {
        let tol = 1e-4 * y.abs().max(1.0);
        assert!((x - y).abs() <= tol, "{what}: element {j} is {x}, expected {y}");
    }
}

/// Runs `op` on generated inputs `(shape, seed)` and compares every listed output.
#[allow(clippy::type_complexity)]
fn check(op: &str, ins: &[Option<(&[i64], u64)>], at: &[(&str, AttrValue)], want: &[(&[i64], &[f64])]) {
    let tensors: Vec<Option<HostTensor>> = ins.iter().map(|t| t.map(|(s, seed)| gen(s, seed))).collect();
    let refs: Vec<Option<&HostTensor>> = tensors.iter().map(|t| t.as_ref()).collect();
    let a = attrs(at);
    let outs = run(op, &refs, &a).unwrap_or_else(|e| panic!("{op} {a}: {e}"));
    for (i, (shape, vals)) in want.iter().enumerate() {
        assert_eq!(&outs[i].shape[..], *shape, "{op} {a}: output {i} shape");
        assert_close(&format!("{op} {a}: output {i}"), &outs[i].to_f64(), vals);
    }
}

/// Constant weights are packed once, per group, and kept with the constant: later
/// calls use the kept packing and give the same bits as packing them afresh.
#[test]
fn constant_conv_weights_are_packed_once_and_kept() {
    use crate::ir::host_tensor::Derived;
    let x = HostTensor::random(DType::F32, &[2, 4, 9, 9], 1).unwrap();
    let w = HostTensor::random(DType::F32, &[8, 2, 3, 3], 2).unwrap();
    let attrs =
        Attrs(vec![("group".to_string(), AttrValue::Int(2)), ("pads".to_string(), AttrValue::Ints(vec![1, 1, 1, 1]))]);
    let derived = Derived::default();
    let run = |constant: Option<ConstOperand>| {
        let mut y = HostTensor::zeros(DType::F32, &[2, 8, 9, 9]).unwrap();
        let ins = [Some(TensorRef::from(&x)), Some(TensorRef { constant, ..TensorRef::from(&w) })];
        conv(&ins, &attrs, &mut [y.view_mut()]).unwrap();
        y.data
    };
    let fresh = run(None);
    assert!(derived.is_empty());
    let kept = Some(ConstOperand { derived: &derived, offset: 0 });
    assert_eq!(run(kept), fresh);
    assert_eq!(derived.len(), 2, "one packing per group");
    assert_eq!(run(kept), fresh);
    assert_eq!(derived.len(), 2, "reused, not packed again");
    // The same bytes at another place in their storage are another packing.
    assert_eq!(run(Some(ConstOperand { derived: &derived, offset: 4096 })), fresh);
    assert_eq!(derived.len(), 4);
    assert!(fresh.iter().any(|&b| b != 0));
}

/// The f64 result of a convolution of f32 tensors: the definition, in plain loops.
fn conv_f64_of(x: &HostTensor, w: &HostTensor, b: Option<&HostTensor>, attrs: &Attrs) -> Vec<f64> {
    let wide = |t: &HostTensor| {
        let data = t.to_f64().iter().flat_map(|v| v.to_le_bytes()).collect();
        HostTensor::new(DType::F64, t.shape.clone(), data).unwrap()
    };
    let (x64, w64, b64) = (wide(x), wide(w), b.map(wide));
    let cd = conv_dims(&x.shape, &w.shape, b.map(|b| &b.shape[..]), attrs).unwrap();
    let mut want = HostTensor::zeros(DType::F64, &cd.out_shape).unwrap();
    let ins = [Some((&x64).into()), Some((&w64).into()), b64.as_ref().map(|b| b.into())];
    conv(&ins, attrs, &mut [want.view_mut()]).unwrap();
    want.to_f64()
}

/// Winograd F(2x2, 3x3) and F(4x4, 3x3) take 3x3 convolutions with unit strides and agree
/// with the f64 definition: odd and even planes, pads 0-2 on either side, groups and
/// batches, a single block with its phases split between threads, many blocks split by
/// tile rows; 4x4 tiles on planes of 36 such tiles or more; weights transformed per call
/// and kept with their constant give the same bits.
#[test]
fn winograd_convolutions_match_naive_loops() {
    use crate::ir::host_tensor::Derived;
    // X shape, W shape, group, pads [top, left, bottom, right], output tiles' side.
    type Case<'a> = (&'a [i64], &'a [i64], i64, [i64; 4], usize);
    let cases: &[Case] = &[
        (&[1, 32, 9, 11], &[16, 32, 3, 3], 1, [1, 1, 1, 1], 2),
        (&[2, 32, 10, 10], &[20, 32, 3, 3], 1, [0, 0, 0, 0], 2),
        (&[1, 64, 13, 7], &[32, 32, 3, 3], 2, [2, 0, 1, 2], 2),
        (&[1, 48, 14, 14], &[64, 48, 3, 3], 1, [0, 2, 2, 1], 2),
        (&[1, 32, 57, 45], &[16, 32, 3, 3], 1, [1, 1, 1, 1], 4),
        // The fewest input channels it takes (squeezenet's first expand layers).
        (&[1, 16, 21, 19], &[64, 16, 3, 3], 1, [1, 1, 1, 1], 2),
        // 4x4 tiles: odd planes and uneven pads, the fewest tiles (one block), groups and
        // batches, many blocks.
        (&[1, 32, 30, 27], &[24, 32, 3, 3], 1, [0, 2, 1, 0], 4),
        (&[1, 32, 24, 24], &[32, 32, 3, 3], 1, [1, 1, 1, 1], 4),
        (&[2, 64, 26, 25], &[32, 32, 3, 3], 2, [2, 1, 0, 2], 4),
        (&[1, 16, 122, 66], &[16, 16, 3, 3], 1, [1, 2, 2, 1], 4),
    ];
    // Eight input channels are too few: im2col + GEMM is faster.
    let few = conv_dims(&[1, 8, 56, 56], &[32, 8, 3, 3], None, &Attrs(vec![])).unwrap();
    assert!(Wino::new(&few).is_none());
    for (case, &(xs, ws, group, pads, side)) in cases.iter().enumerate() {
        let seed = 10 * case as u64;
        let x = HostTensor::random(DType::F32, xs, seed).unwrap();
        let w = HostTensor::random(DType::F32, ws, seed + 1).unwrap();
        let b = HostTensor::random(DType::F32, &ws[..1], seed + 2).unwrap();
        let attrs = Attrs(vec![
            ("group".to_string(), AttrValue::Int(group)),
            ("pads".to_string(), AttrValue::Ints(pads.to_vec())),
        ]);
        let cd = conv_dims(xs, ws, Some(&ws[..1]), &attrs).unwrap();
        let wi = Wino::new(&cd).unwrap_or_else(|| panic!("case {case}: Winograd should take it"));
        assert_eq!(wi.side(), side, "case {case}: output tiles");
        let want = conv_f64_of(&x, &w, Some(&b), &attrs);
        let derived = Derived::default();
        let run = |constant: Option<ConstOperand>| {
            let mut y = HostTensor::zeros(DType::F32, &cd.out_shape).unwrap();
            // Whatever the output held before is overwritten.
            y.data.fill(0x7f);
            let ins =
                [Some(TensorRef::from(&x)), Some(TensorRef { constant, ..TensorRef::from(&w) }), Some((&b).into())];
            conv(&ins, &attrs, &mut [y.view_mut()]).unwrap();
            y
        };
        let fresh = run(None);
        assert_close(&format!("case {case} ({wi:?})"), &fresh.to_f64(), &want);
        let kept = Some(ConstOperand { derived: &derived, offset: 0 });
        assert_eq!(run(kept).data, fresh.data, "case {case}: kept weights");
        assert_eq!(derived.len(), group as usize, "case {case}: one transform per group");
        assert_eq!(run(kept).data, fresh.data, "case {case}: kept weights, again");
        assert_eq!(derived.len(), group as usize, "case {case}: reused");
        assert!(want.iter().filter(|v| v.abs() > 1.0).count() > want.len() / 4, "case {case}: outputs of size O(1)");
    }
}

/// FusedConv applies `+ Z` and its activation inside the convolution, to each block of
/// the output as it is finished; the bits are those of the convolution followed by the
/// epilogue over the whole output, on every path: Winograd (many blocks, and one block
/// split in phases), pointwise GEMMs split by rows and by columns, im2col, and the
/// direct loops of a depthwise convolution.
#[test]
fn fused_conv_epilogues_inside_the_kernels_give_the_separate_pass_bits() {
    // X shape, W shape, group, kernel pads.
    type Case<'a> = (&'a [i64], &'a [i64], i64, i64);
    let cases: &[Case] = &[
        (&[1, 32, 40, 36], &[24, 32, 3, 3], 1, 1),
        (&[1, 64, 14, 14], &[48, 64, 3, 3], 1, 1),
        (&[1, 64, 7, 7], &[256, 64, 1, 1], 1, 0),
        (&[1, 48, 30, 30], &[40, 48, 1, 1], 1, 0),
        (&[2, 8, 11, 9], &[12, 8, 5, 5], 1, 2),
        (&[1, 16, 12, 12], &[16, 1, 3, 3], 16, 1),
    ];
    let acts: &[(&str, &[f64])] = &[("Relu", &[]), ("LeakyRelu", &[0.1]), ("Clip", &[-0.5, 0.75]), ("Identity", &[])];
    for (case, &(xs, ws, group, pad)) in cases.iter().enumerate() {
        let x = HostTensor::random(DType::F32, xs, 3 * case as u64).unwrap();
        let w = HostTensor::random(DType::F32, ws, 3 * case as u64 + 1).unwrap();
        let b = HostTensor::random(DType::F32, &ws[..1], 3 * case as u64 + 2).unwrap();
        let conv_attrs =
            vec![("group".to_string(), AttrValue::Int(group)), ("pads".to_string(), AttrValue::Ints(vec![pad; 4]))];
        let cd = conv_dims(xs, ws, Some(&ws[..1]), &Attrs(conv_attrs.clone())).unwrap();
        let z = HostTensor::random(DType::F32, &cd.out_shape, 99).unwrap();
        let mut plain = HostTensor::zeros(DType::F32, &cd.out_shape).unwrap();
        let ins = [Some(TensorRef::from(&x)), Some(TensorRef::from(&w)), Some((&b).into())];
        conv(&ins, &Attrs(conv_attrs.clone()), &mut [plain.view_mut()]).unwrap();
        for &(name, params) in acts {
            for with_z in [false, true] {
                let mut attrs = conv_attrs.clone();
                attrs.push(("activation".to_string(), AttrValue::Str(name.to_string())));
                if !params.is_empty() {
                    attrs.push(("activation_params".to_string(), AttrValue::Floats(params.to_vec())));
                }
                let mut want: Vec<f32> = plain.to_f64().iter().map(|&v| v as f32).collect();
                let zv: Vec<f32> = z.to_f64().iter().map(|&v| v as f32).collect();
                Activation::new(name, params).epilogue(&mut want, with_z.then_some(&zv[..]));
                let mut y = HostTensor::zeros(DType::F32, &cd.out_shape).unwrap();
                let ins = [ins[0], ins[1], ins[2], with_z.then(|| TensorRef::from(&z))];
                fused_conv(&ins, &Attrs(attrs), &mut [y.view_mut()]).unwrap();
                let got: Vec<u32> = y.to_f64().iter().map(|&v| (v as f32).to_bits()).collect();
                let want: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, want, "case {case}, {name}, z: {with_z}");
            }
        }
        assert!(plain.to_f64().iter().filter(|v| v.abs() > 1.0).count() > 10, "case {case}: outputs of size O(1)");
    }
}

/// im2col + GEMM (at least 4 output channels, not Winograd's geometry) agrees with the
/// f64 definition over 2-D geometries: strides 1-3, dilations 1-2, pads 0-3 on each side
/// (taps that miss whole rows and columns), kernels up to the padded input's size,
/// column chunks and thread splits that start and end mid-row.
#[test]
fn im2col_convolutions_match_the_f64_definition() {
    let mut seed = 0x2545_f491u64;
    let mut next = |n: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    for case in 0..40 {
        let (mut s, mut d) = ([1 + next(3) as i64, 1 + next(3) as i64], [1 + next(2) as i64, 1 + next(2) as i64]);
        let pads: Vec<i64> = (0..4).map(|_| next(4) as i64).collect();
        let (mut c, m) = (1 + next(3) as i64, 4 + next(6) as i64);
        let (mut h, mut w) = (3 + next(12) as i64, 3 + next(12) as i64);
        // Taps that fit in the padded input: up to (len + pads - 1) / dilation + 1.
        let room = |len: i64, dil: i64, pb: i64, pe: i64| ((len + pb + pe - 1) / dil + 1).clamp(1, 7) as u64;
        let mut kh = 1 + next(room(h, d[0], pads[0], pads[2])) as i64;
        let mut kw = 1 + next(room(w, d[1], pads[1], pads[3])) as i64;
        if case % 4 == 0 {
            // Large: the columns come in chunks (a 5x5-7x7 kernel over 4-6 channels) and
            // are split between threads, both mid-row on odd widths.
            (s, d, c) = ([1, 1], [1, 1], 4 + next(3) as i64);
            (h, w, kh, kw) = (40 + next(23) as i64, 41 + 2 * next(11) as i64, 5 + next(3) as i64, 5 + next(3) as i64);
        }
        let (xs, ws) = ([1, c, h, w], [m, c, kh, kw]);
        let x = HostTensor::random(DType::F32, &xs, 100 + case).unwrap();
        let wt = HostTensor::random(DType::F32, &ws, 200 + case).unwrap();
        let b = HostTensor::random(DType::F32, &[m], 300 + case).unwrap();
        let attrs = Attrs(vec![
            ("strides".to_string(), AttrValue::Ints(s.to_vec())),
            ("dilations".to_string(), AttrValue::Ints(d.to_vec())),
            ("pads".to_string(), AttrValue::Ints(pads.clone())),
        ]);
        let cd = conv_dims(&xs, &ws, Some(&[m]), &attrs).unwrap();
        assert!(Wino::new(&cd).is_none());
        let want = conv_f64_of(&x, &wt, Some(&b), &attrs);
        let mut y = HostTensor::zeros(DType::F32, &cd.out_shape).unwrap();
        y.data.fill(0x7f);
        conv(&[Some((&x).into()), Some((&wt).into()), Some((&b).into())], &attrs, &mut [y.view_mut()]).unwrap();
        let what = format!("case {case}: x {xs:?} w {ws:?} strides {s:?} dilations {d:?} pads {pads:?}");
        assert_close(&what, &y.to_f64(), &want);
    }
}

/// Layers whose threads take output channels, each using its rows of the kept packing:
/// few output positions (7x7, too few to split by columns) and much work (5x5: 3x3
/// kernels go to Winograd), and a 1x1 layer with many channels (512 on 14x14: at least 64 per
/// thread on up to 8 threads). They agree
/// with the f64 convolution.
#[test]
fn layers_split_by_channels_between_threads_match_the_f64_convolution() {
    use crate::ir::host_tensor::Derived;
    type Case<'a> = (&'a [i64], &'a [i64], i64);
    let cases: &[Case] = &[(&[1, 64, 7, 7], &[100, 64, 5, 5], 2), (&[1, 32, 14, 14], &[512, 32, 1, 1], 0)];
    for (case, &(xs, ws, pad)) in cases.iter().enumerate() {
        let x = HostTensor::random(DType::F32, xs, 3 + 2 * case as u64).unwrap();
        let w = HostTensor::random(DType::F32, ws, 4 + 2 * case as u64).unwrap();
        let attrs = Attrs(vec![("pads".to_string(), AttrValue::Ints(vec![pad; 4]))]);
        let wide = |t: &HostTensor| {
            let data = t.to_f64().iter().flat_map(|v| v.to_le_bytes()).collect();
            HostTensor::new(DType::F64, t.shape.clone(), data).unwrap()
        };
        let (x64, w64) = (wide(&x), wide(&w));
        let out = [xs[0], ws[0], xs[2], xs[3]];
        let mut want = HostTensor::zeros(DType::F64, &out).unwrap();
        conv(&[Some((&x64).into()), Some((&w64).into())], &attrs, &mut [want.view_mut()]).unwrap();
        let derived = Derived::default();
        for constant in [None, Some(ConstOperand { derived: &derived, offset: 0 })] {
            let mut y = HostTensor::zeros(DType::F32, &out).unwrap();
            let ins = [Some(TensorRef::from(&x)), Some(TensorRef { constant, ..TensorRef::from(&w) })];
            conv(&ins, &attrs, &mut [y.view_mut()]).unwrap();
            assert_close(&format!("case {case}"), &y.to_f64(), &want.to_f64());
        }
        assert!(want.to_f64().iter().filter(|v| v.abs() > 0.5).count() > 100, "case {case}: outputs of size O(1)");
    }
}

#[test]
fn conv_matches_reference() {
    // 2-D, no padding
    check(
        "Conv",
        &[Some((&[1, 1, 5, 5], 1)), Some((&[1, 1, 3, 3], 2))],
        &[],
        &[(&[1, 1, 3, 3], &[-0.890625, 2.0625, -0.734375, -0.859375, 2.09375, -3.9375, -0.828125, 0.6875, -0.3125])],
    );
    // pads and bias
    check(
        "Conv",
        &[Some((&[1, 2, 5, 5], 1)), Some((&[3, 2, 3, 3], 2)), Some((&[3], 3))],
        &[("pads", AttrValue::Ints(vec![1, 1, 1, 1]))],
        &[(
            &[1, 3, 5, 5],
            &[
                0.375, -1.5625, 1.5, 0.25, -4.015625, 0.921875, -1.40625, 2.796875, -1.625, -1.828125, -2.921875,
                -0.15625, 0.8125, -4.6875, -0.03125, 0.0625, -0.34375, -4.046875, -0.921875, 0.328125, 3.859375,
                -4.90625, -1.046875, 0.296875, -1.3125, 2.125, 0.3125, 2.90625, 1.90625, -2.484375, 2.578125, 0.390625,
                3.890625, -0.15625, -0.5, -1.09375, 1.71875, 2.34375, -3.140625, 1.46875, 2.0625, 1.609375, -2.078125,
                0.703125, 2.0, 5.953125, -2.875, 1.234375, 2.109375, 0.5625, -2.59375, 0.75, -0.359375, 3.921875,
                -3.828125, -1.875, 1.109375, 0.671875, 2.03125, -1.6875, -5.015625, 2.875, -0.078125, -0.515625,
                0.8125, -1.328125, 3.203125, -3.703125, -4.5, 1.875, 3.015625, -0.84375, 0.28125, -2.546875, 1.0,
            ],
        )],
    );
    // strides 2, asymmetric pads
    check(
        "Conv",
        &[Some((&[1, 2, 7, 6], 4)), Some((&[2, 2, 3, 3], 5))],
        &[("strides", AttrValue::Ints(vec![2, 2])), ("pads", AttrValue::Ints(vec![1, 0, 2, 1]))],
        &[(
            &[1, 2, 4, 3],
            &[
                -4.484375, -0.96875, 5.1875, 2.671875, 3.390625, -2.859375, -0.5625, -4.875, -0.90625, -2.25, 5.015625,
                -0.546875, -4.75, -1.09375, 5.234375, 0.078125, 2.625, -2.515625, -0.8125, -2.9375, -0.796875, 0.3125,
                1.25, -0.171875,
            ],
        )],
    );
    // dilations
    check(
        "Conv",
        &[Some((&[1, 1, 7, 7], 6)), Some((&[2, 1, 3, 3], 7))],
        &[("dilations", AttrValue::Ints(vec![2, 2])), ("pads", AttrValue::Ints(vec![2, 2, 2, 2]))],
        &[(
            &[1, 2, 7, 7],
            &[
                0.921875, -0.484375, -1.953125, 1.84375, 0.96875, 1.78125, -1.453125, -1.375, 0.453125, 0.90625,
                1.46875, -1.203125, -1.453125, 1.78125, -0.96875, -1.53125, -0.25, -0.5, 2.484375, -1.296875,
                -1.546875, 1.203125, 0.28125, 2.3125, -3.328125, -1.78125, 2.703125, -0.78125, 1.578125, 1.015625,
                -1.953125, 2.828125, -1.015625, 2.03125, -0.015625, -1.046875, 1.765625, -1.765625, -1.703125, 1.59375,
                -0.765625, 1.65625, -2.203125, -1.1875, 1.546875, -0.1875, 1.671875, -1.421875, -2.234375, -1.421875,
                1.40625, 1.0625, 1.6875, -2.359375, -0.078125, 0.921875, 0.40625, 2.15625, -2.109375, -0.765625,
                1.65625, 0.8125, 0.015625, -0.09375, -0.59375, 3.671875, -1.515625, -3.109375, -0.59375, 0.296875,
                2.15625, -3.015625, -2.8125, 3.140625, -0.25, 1.6875, -1.015625, -1.703125, 2.109375, 0.046875, 0.25,
                -0.265625, -1.0625, 1.984375, -1.078125, -2.296875, 1.84375, -1.265625, 2.8125, -0.671875, -1.5625,
                1.890625, -1.125, 3.078125, -1.828125, -3.140625, 0.640625, 0.828125,
            ],
        )],
    );
    // group 2 with bias, batch 2
    check(
        "Conv",
        &[Some((&[2, 4, 5, 5], 8)), Some((&[6, 2, 3, 3], 9)), Some((&[6], 10))],
        &[("group", AttrValue::Int(2)), ("pads", AttrValue::Ints(vec![0, 1, 0, 1]))],
        &[(
            &[2, 6, 3, 5],
            &[
                0.78125, -1.375, 2.125, -1.921875, -2.1875, 0.703125, -1.484375, 2.015625, -2.03125, -2.375, -2.96875,
                -0.15625, 0.46875, -5.015625, -0.40625, -0.96875, 2.140625, 1.703125, 3.0625, -0.671875, -0.875,
                2.109375, 1.671875, 3.03125, -0.6875, -4.015625, 3.875, 0.921875, 0.484375, 1.8125, -2.0, -0.8125,
                3.078125, 1.578125, -5.625, -2.09375, -0.765625, 3.125, 1.625, -5.46875, -5.0625, 1.4375, 3.171875,
                -0.484375, -2.4375, 0.265625, 4.3125, 1.390625, 1.34375, 4.203125, 0.34375, 1.921875, 4.03125, 2.1875,
                2.375, 0.421875, -1.90625, 5.234375, 0.15625, -0.890625, -0.484375, 2.859375, 0.3125, -0.4375, 3.125,
                -0.59375, 0.546875, 3.03125, 0.84375, 1.46875, -0.703125, -3.203125, 4.3125, -0.75, -1.625, -1.59375,
                -2.1875, 0.671875, -4.015625, 5.28125, -1.53125, -4.0625, 3.828125, -1.9375, 4.15625, -1.46875, -7.375,
                5.546875, -2.734375, 1.59375, -2.578125, -3.203125, -2.578125, -0.15625, -1.984375, -5.53125, -1.15625,
                0.546875, -0.265625, -5.40625, -1.65625, -0.546875, 2.234375, -1.8125, -2.0, 2.34375, -1.0, -3.953125,
                3.875, -1.703125, -0.078125, 1.484375, -0.390625, 4.203125, -4.59375, -3.9375, 2.53125, 1.734375,
                3.09375, -0.65625, 0.796875, -5.265625, -3.53125, 1.4375, 0.375, -1.453125, -2.34375, 0.46875,
                2.203125, -1.984375, -5.140625, -0.859375, 3.03125, 1.53125, -5.78125, 1.46875, 3.578125, -1.140625,
                -1.90625, 4.65625, 1.546875, 0.46875, 0.78125, 1.09375, 4.265625, 0.1875, 4.1875, 1.265625, 1.21875,
                4.234375, 0.5625, 2.25, -2.09375, -3.203125, 3.78125, 0.8125, -0.78125, -0.09375, -0.125, 3.5625,
                -0.375, 3.015625, 0.46875, -0.28125, 3.34375, -1.78125, 4.515625, -2.6875, -7.375, 5.0625, -1.0,
                1.921875, -0.25, -3.859375, 5.375, -1.65625, -2.109375, 0.75, -3.9375, 5.328125,
            ],
        )],
    );
    // depthwise, strides 2
    check(
        "Conv",
        &[Some((&[1, 3, 6, 6], 11)), Some((&[3, 1, 3, 3], 12))],
        &[
            ("group", AttrValue::Int(3)),
            ("strides", AttrValue::Ints(vec![2, 2])),
            ("pads", AttrValue::Ints(vec![1, 1, 1, 1])),
        ],
        &[(
            &[1, 3, 3, 3],
            &[
                -0.78125, 3.90625, -1.875, -0.78125, -2.609375, 0.1875, -0.453125, 0.15625, 2.953125, 0.296875, -1.875,
                0.734375, 0.125, -0.21875, 2.046875, -1.3125, -0.28125, 0.546875, -0.296875, 4.390625, 0.296875,
                0.859375, -2.21875, -0.84375, -0.546875, -1.15625, -0.140625,
            ],
        )],
    );
    // 1-D with stride, dilation, pads
    check(
        "Conv",
        &[Some((&[2, 3, 10], 13)), Some((&[4, 3, 3], 14))],
        &[
            ("strides", AttrValue::Ints(vec![2])),
            ("pads", AttrValue::Ints(vec![1, 2])),
            ("dilations", AttrValue::Ints(vec![2])),
        ],
        &[(
            &[2, 4, 5],
            &[
                -0.046875, 1.0625, -2.65625, 0.453125, 2.15625, 0.6875, -1.875, 1.421875, 3.28125, -1.765625,
                -0.734375, 2.015625, 0.46875, -2.515625, 1.140625, 0.359375, -2.359375, 1.3125, 3.546875, -1.34375,
                1.921875, -5.84375, 2.296875, 1.453125, 0.5625, -5.53125, 3.015625, 1.640625, -0.8125, -1.484375,
                3.546875, -2.140625, -0.09375, 0.515625, 1.140625, -5.703125, 3.125, 2.125, -0.671875, -1.625,
            ],
        )],
    );
    // 3-D
    check(
        "Conv",
        &[Some((&[1, 2, 4, 5, 4], 15)), Some((&[3, 2, 2, 3, 2], 16)), Some((&[3], 17))],
        &[("pads", AttrValue::Ints(vec![1, 0, 1, 0, 1, 1])), ("strides", AttrValue::Ints(vec![1, 2, 1]))],
        &[(
            &[1, 3, 4, 2, 5],
            &[
                -0.3125, 0.03125, -3.171875, 0.453125, -1.203125, -0.71875, -1.515625, -5.4375, 2.140625, -1.625,
                -3.5625, 3.34375, -1.828125, 0.546875, -3.53125, -3.390625, -0.296875, -2.234375, 3.015625, -2.671875,
                0.640625, 0.53125, -3.5625, -7.65625, 2.75, -0.984375, 3.0, -1.8125, -1.953125, -0.703125, -0.546875,
                -9.828125, 3.328125, 0.3125, -0.3125, 0.34375, 0.546875, 0.40625, -4.046875, 2.703125, -0.03125, 2.125,
                1.53125, 1.296875, 1.375, 2.8125, 2.046875, 0.734375, -0.578125, 2.40625, -1.296875, -1.328125,
                -1.28125, -0.15625, 1.171875, -0.734375, 2.28125, -2.703125, 1.296875, 0.625, -2.046875, -0.03125,
                6.125, -1.015625, -1.8125, -3.28125, 1.421875, -1.40625, 0.4375, -1.640625, 5.109375, 1.984375,
                0.59375, -2.234375, 2.390625, -1.875, -0.15625, 4.921875, 0.65625, 0.765625, -2.625, -0.8125, 1.203125,
                -2.890625, 1.4375, -1.5625, 0.578125, 1.875, -0.0625, 0.6875, -0.109375, -2.046875, -0.015625, -3.375,
                -2.75, 3.0, -0.53125, 4.734375, -4.015625, 0.328125, -0.421875, -3.46875, -6.828125, 4.546875,
                -2.421875, 0.890625, -4.109375, 0.078125, 0.671875, -1.859375, -4.328125, 4.09375, 1.453125, 3.84375,
                -3.171875, -0.5, -3.375, -4.578125, 4.640625, -4.40625,
            ],
        )],
    );
    // auto_pad SAME_UPPER, strides 2
    check(
        "Conv",
        &[Some((&[1, 1, 5, 6], 18)), Some((&[2, 1, 3, 3], 19))],
        &[("auto_pad", AttrValue::Str("SAME_UPPER".into())), ("strides", AttrValue::Ints(vec![2, 2]))],
        &[(
            &[1, 2, 3, 3],
            &[
                -2.34375, -1.40625, 2.5625, -0.140625, 3.03125, -2.71875, 0.1875, -1.671875, 0.40625, 3.46875, -1.9375,
                -1.5625, -2.4375, -0.515625, 3.15625, 0.65625, 0.71875, -0.453125,
            ],
        )],
    );
    // auto_pad SAME_LOWER, even kernel
    check(
        "Conv",
        &[Some((&[1, 1, 5, 5], 20)), Some((&[1, 1, 2, 2], 21))],
        &[("auto_pad", AttrValue::Str("SAME_LOWER".into()))],
        &[(
            &[1, 1, 5, 5],
            &[
                -0.765625, 0.4375, 1.140625, -0.671875, 0.75, 0.328125, -0.3125, -0.734375, 0.28125, -0.5, 0.390625,
                -0.265625, -0.6875, 0.328125, -0.453125, 0.453125, -0.21875, -0.640625, 0.375, -0.40625, 0.515625,
                -0.171875, -0.59375, 0.421875, -0.359375,
            ],
        )],
    );
    // auto_pad SAME_UPPER, even kernel
    check(
        "Conv",
        &[Some((&[1, 1, 5, 5], 20)), Some((&[1, 1, 2, 2], 21))],
        &[("auto_pad", AttrValue::Str("SAME_UPPER".into()))],
        &[(
            &[1, 1, 5, 5],
            &[
                -0.3125, -0.734375, 0.28125, -0.5, 0.125, -0.265625, -0.6875, 0.328125, -0.453125, 0.109375, -0.21875,
                -0.640625, 0.375, -0.40625, 0.09375, -0.171875, -0.59375, 0.421875, -0.359375, 0.078125, -0.171875,
                -1.296875, 1.53125, -0.671875, 0.09375,
            ],
        )],
    );
    // auto_pad SAME_LOWER with dilation
    check(
        "Conv",
        &[Some((&[1, 2, 6, 5], 22)), Some((&[2, 2, 2, 3], 23))],
        &[("auto_pad", AttrValue::Str("SAME_LOWER".into())), ("dilations", AttrValue::Ints(vec![2, 1]))],
        &[(
            &[1, 2, 6, 5],
            &[
                0.6875, -1.15625, 1.328125, 0.578125, -2.34375, -5.125, 1.34375, 2.578125, -1.21875, 0.03125,
                -5.046875, 1.40625, 2.640625, -1.15625, 0.15625, -1.734375, 1.46875, 2.703125, -1.09375, 0.28125,
                0.859375, 0.8125, -1.1875, -1.03125, 0.40625, 0.859375, 0.296875, 0.484375, -2.5625, 1.390625, -1.625,
                1.046875, 0.859375, -2.5625, 1.859375, 1.75, 1.4375, -0.15625, -1.03125, 2.328125, 1.625, 1.375,
                -0.21875, -1.09375, 2.25, 2.21875, -1.203125, -0.28125, -1.15625, 2.171875, 2.09375, -4.5, 1.453125,
                -1.21875, 2.09375, 0.578125, -2.0, -1.96875, 0.578125, 0.078125,
            ],
        )],
    );
    // auto_pad VALID, strides
    check(
        "Conv",
        &[Some((&[1, 1, 7, 5], 24)), Some((&[1, 1, 3, 2], 25))],
        &[("auto_pad", AttrValue::Str("VALID".into())), ("strides", AttrValue::Ints(vec![2, 2]))],
        &[(&[1, 1, 3, 2], &[-0.421875, -0.578125, -0.484375, -1.71875, -0.546875, 0.375])],
    );
    // pointwise 1x1 with bias
    check(
        "Conv",
        &[Some((&[2, 4, 3, 3], 26)), Some((&[5, 4, 1, 1], 27)), Some((&[5], 28))],
        &[],
        &[(
            &[2, 5, 3, 3],
            &[
                -2.625, 1.234375, -1.375, 0.328125, 0.234375, -2.375, 1.484375, -1.125, -3.375, 2.1875, 0.78125,
                1.171875, 2.28125, 1.59375, 1.984375, 0.578125, 0.96875, 2.796875, -1.625, 1.765625, -1.3125, 1.0,
                1.515625, -1.5625, 1.828125, -1.25, -1.8125, 1.390625, -3.71875, 1.234375, -0.28125, -3.59375,
                1.359375, -3.75, 1.203125, 1.484375, -0.625, 2.296875, -1.25, 1.671875, 2.796875, -0.75, 2.171875,
                -1.375, -0.25, -3.125, 0.734375, -1.875, 1.984375, 0.453125, -2.875, 0.984375, -1.625, 2.234375,
                2.59375, 1.1875, 1.578125, 0.171875, -1.953125, 2.390625, 0.984375, 1.375, -0.03125, -1.75, 1.640625,
                -1.4375, 1.953125, 1.03125, -1.6875, 1.703125, -1.375, 2.015625, 1.453125, -3.65625, 1.296875, -3.8125,
                -0.296875, 1.421875, -3.6875, 1.265625, -3.84375, -0.375, 2.546875, -1.0, 1.921875, 1.609375, -0.5,
                2.421875, -1.125, 1.796875,
            ],
        )],
    );
    // 1x1 with stride
    check(
        "Conv",
        &[Some((&[1, 2, 5, 5], 29)), Some((&[3, 2, 1, 1], 30))],
        &[("strides", AttrValue::Ints(vec![2, 2]))],
        &[(
            &[1, 3, 3, 3],
            &[
                1.265625, 0.765625, -0.09375, 0.921875, 0.421875, -0.4375, 0.9375, 0.078125, -0.78125, 1.265625, -0.25,
                -0.328125, 1.234375, -0.28125, -0.359375, -0.234375, -0.3125, -0.390625, 1.265625, -1.265625, -0.5625,
                1.546875, -0.984375, -0.28125, -1.40625, -0.703125, 0.0,
            ],
        )],
    );
    // explicit kernel_shape
    check(
        "Conv",
        &[Some((&[1, 2, 4, 4], 31)), Some((&[2, 2, 3, 3], 32))],
        &[("kernel_shape", AttrValue::Ints(vec![3, 3])), ("pads", AttrValue::Ints(vec![1, 1, 1, 1]))],
        &[(
            &[1, 2, 4, 4],
            &[
                4.015625, -3.671875, 1.078125, -0.109375, 0.859375, -0.921875, 2.21875, -0.046875, -2.078125, 1.578125,
                0.765625, -1.203125, 0.265625, -4.421875, 1.484375, -1.5, 0.3125, -2.453125, -1.046875, 2.75, 0.65625,
                -4.453125, 3.734375, -1.90625, 1.234375, 1.703125, -2.328125, 0.8125, -1.265625, -0.84375, 1.71875,
                -4.375,
            ],
        )],
    );
    // kernel larger than input, padded
    check(
        "Conv",
        &[Some((&[1, 1, 2, 2], 33)), Some((&[1, 1, 3, 3], 34))],
        &[("pads", AttrValue::Ints(vec![1, 1, 1, 1])), ("strides", AttrValue::Ints(vec![2, 2]))],
        &[(&[1, 1, 1, 1], &[1.390625])],
    );
}

#[test]
fn conv_transpose_matches_reference() {
    // 2-D basic
    check(
        "ConvTranspose",
        &[Some((&[1, 1, 3, 3], 1)), Some((&[1, 2, 3, 3], 2))],
        &[],
        &[(
            &[1, 2, 5, 5],
            &[
                -0.46875, 1.125, -1.859375, 0.96875, -0.625, 0.578125, 0.65625, -0.46875, 1.875, -1.4375, 0.875,
                -3.78125, 3.125, -0.734375, 0.6875, -0.78125, 0.546875, 1.484375, -3.078125, 0.625, -0.390625,
                1.015625, -1.34375, 1.40625, 0.0, 1.40625, -1.34375, 1.640625, -0.640625, 0.3125, -2.828125, 1.171875,
                1.234375, -1.28125, 1.1875, -0.234375, 1.9375, -6.9375, 1.8125, -0.359375, 1.625, -0.96875, 1.578125,
                1.078125, -2.796875, 0.46875, -0.609375, 1.984375, -1.15625, 1.71875,
            ],
        )],
    );
    // strides and output_padding
    check(
        "ConvTranspose",
        &[Some((&[1, 1, 3, 3], 3)), Some((&[1, 2, 3, 3], 4))],
        &[("strides", AttrValue::Ints(vec![3, 2])), ("output_padding", AttrValue::Ints(vec![1, 1]))],
        &[(
            &[1, 2, 10, 8],
            &[
                -0.65625, 0.328125, -0.546875, -0.328125, 1.015625, 0.09375, -0.34375, 0.0, -0.21875, 0.765625,
                -0.546875, -0.765625, 0.703125, 0.21875, -0.21875, 0.0, 0.21875, 1.203125, -0.546875, -1.203125,
                0.390625, 0.34375, -0.09375, 0.0, -1.03125, 0.515625, -1.609375, -0.140625, -0.046875, 0.28125,
                -1.03125, 0.0, -0.34375, 1.203125, -1.109375, -0.328125, 0.140625, 0.65625, -0.65625, 0.0, 0.34375,
                1.890625, -0.609375, -0.515625, 0.328125, 1.03125, -0.28125, 0.0, 0.75, -0.375, 1.28125, 0.046875,
                -1.109375, 0.46875, -1.71875, 0.0, 0.25, -0.875, 0.84375, 0.109375, -0.421875, 1.09375, -1.09375, 0.0,
                -0.25, -1.375, 0.40625, 0.171875, 0.265625, 1.71875, -0.46875, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                0.0, 0.65625, -0.875, -0.546875, 0.875, 0.078125, -0.25, 0.03125, 0.0, 1.09375, -0.4375, -0.546875,
                0.4375, -0.234375, -0.125, 0.15625, 0.0, -0.984375, 0.0, 1.96875, 0.0, -1.265625, 0.0, 0.28125, 0.0,
                1.03125, -1.375, -0.109375, 0.375, 0.515625, -0.75, 0.09375, 0.0, 1.71875, -0.6875, 0.390625, 0.1875,
                0.703125, -0.375, 0.46875, 0.0, -1.546875, 0.0, 1.96875, 0.0, -1.265625, 0.0, 0.84375, 0.0, -0.75, 1.0,
                -0.03125, -0.125, 0.953125, -1.25, 0.15625, 0.0, -1.25, 0.5, -0.46875, -0.0625, 1.640625, -0.625,
                0.78125, 0.0, 1.125, 0.0, -1.265625, 0.0, -1.265625, 0.0, 1.40625, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                0.0, 0.0,
            ],
        )],
    );
    // pads, strides, bias
    check(
        "ConvTranspose",
        &[Some((&[1, 2, 3, 4], 5)), Some((&[2, 3, 3, 3], 6)), Some((&[3], 7))],
        &[("strides", AttrValue::Ints(vec![2, 2])), ("pads", AttrValue::Ints(vec![1, 2, 0, 1]))],
        &[(
            &[1, 3, 6, 6],
            &[
                0.640625, -1.3125, 0.796875, 0.5625, -0.84375, 0.28125, -3.375, -0.9375, 5.203125, -0.78125, -3.109375,
                2.25, 0.546875, 0.4375, 0.703125, -1.28125, 0.859375, 0.59375, 4.703125, -1.03125, -3.25, -0.875,
                2.09375, -0.71875, 0.453125, -1.40625, 0.609375, 0.46875, -1.03125, 0.1875, -2.21875, -1.28125,
                2.34375, 0.28125, -1.71875, 1.125, -2.125, 0.40625, -2.046875, -1.890625, 0.546875, -2.03125, 0.171875,
                -0.484375, -4.703125, -0.40625, 2.640625, -1.40625, -2.171875, -1.953125, -2.09375, 0.421875,
                -2.015625, -1.875, -3.515625, -0.53125, -0.125, -0.453125, -3.921875, -4.328125, -2.21875, 0.359375,
                -2.140625, -1.9375, 0.453125, -2.078125, -1.65625, 0.484375, -2.203125, -2.125, 1.203125, -1.140625,
                1.21875, -0.75, 1.21875, 1.046875, -0.21875, 1.046875, -2.75, -0.390625, 5.515625, -0.390625, -2.75,
                2.84375, 1.21875, 1.046875, 1.21875, -0.75, 1.21875, 1.046875, 5.515625, -0.390625, -2.75, -0.390625,
                2.640625, -0.03125, 1.21875, -0.75, 1.21875, 1.046875, -0.21875, 1.046875, -1.453125, -0.625, 2.953125,
                0.859375, -0.90625, 1.984375,
            ],
        )],
    );
    // output_shape
    check(
        "ConvTranspose",
        &[Some((&[1, 1, 3, 3], 8)), Some((&[1, 2, 3, 3], 9))],
        &[("strides", AttrValue::Ints(vec![3, 2])), ("output_shape", AttrValue::Ints(vec![10, 8]))],
        &[(
            &[1, 2, 10, 8],
            &[
                -0.34375, 1.203125, -1.109375, -0.328125, 0.140625, 0.65625, -0.65625, 0.0, 0.34375, 1.890625,
                -0.609375, -0.515625, 0.328125, 1.03125, -0.28125, 0.0, 1.03125, -1.375, -0.109375, 0.375, 0.515625,
                -0.75, 0.09375, 0.0, 0.25, -0.875, 0.84375, 0.109375, -0.421875, 1.09375, -1.09375, 0.0, -0.25, -1.375,
                0.40625, 0.171875, 0.265625, 1.71875, -0.46875, 0.0, -0.75, 1.0, -0.03125, -0.125, 0.953125, -1.25,
                0.15625, 0.0, 0.125, -0.4375, 0.28125, 0.546875, -0.265625, -0.984375, 0.984375, 0.0, -0.125, -0.6875,
                0.34375, 0.859375, -0.515625, -1.546875, 0.421875, 0.0, -0.375, 0.5, 0.40625, -0.625, -0.765625, 1.125,
                -0.140625, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.71875, -0.6875, 0.390625, 0.1875, 0.703125,
                -0.375, 0.46875, 0.0, -1.546875, 0.0, 1.96875, 0.0, -1.265625, 0.0, 0.84375, 0.0, -0.859375, 0.6875,
                -1.484375, -0.1875, 0.0, 0.375, -0.9375, 0.0, -1.25, 0.5, -0.46875, -0.0625, 1.640625, -0.625, 0.78125,
                0.0, 1.125, 0.0, -1.265625, 0.0, -1.265625, 0.0, 1.40625, 0.0, 0.625, -0.5, 1.171875, 0.0625, -0.9375,
                0.625, -1.5625, 0.0, -0.625, 0.25, 0.46875, -0.3125, -1.015625, 0.5625, -0.703125, 0.0, 0.5625, 0.0,
                -1.265625, 0.0, 1.96875, 0.0, -1.265625, 0.0, 0.3125, -0.25, 0.234375, 0.3125, -0.078125, -0.5625,
                1.40625, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            ],
        )],
    );
    // output_shape with output_padding
    check(
        "ConvTranspose",
        &[Some((&[1, 1, 3, 3], 8)), Some((&[1, 2, 3, 3], 9))],
        &[
            ("strides", AttrValue::Ints(vec![3, 2])),
            ("output_shape", AttrValue::Ints(vec![10, 8])),
            ("output_padding", AttrValue::Ints(vec![1, 1])),
        ],
        &[(
            &[1, 2, 10, 8],
            &[
                -0.34375, 1.203125, -1.109375, -0.328125, 0.140625, 0.65625, -0.65625, 0.0, 0.34375, 1.890625,
                -0.609375, -0.515625, 0.328125, 1.03125, -0.28125, 0.0, 1.03125, -1.375, -0.109375, 0.375, 0.515625,
                -0.75, 0.09375, 0.0, 0.25, -0.875, 0.84375, 0.109375, -0.421875, 1.09375, -1.09375, 0.0, -0.25, -1.375,
                0.40625, 0.171875, 0.265625, 1.71875, -0.46875, 0.0, -0.75, 1.0, -0.03125, -0.125, 0.953125, -1.25,
                0.15625, 0.0, 0.125, -0.4375, 0.28125, 0.546875, -0.265625, -0.984375, 0.984375, 0.0, -0.125, -0.6875,
                0.34375, 0.859375, -0.515625, -1.546875, 0.421875, 0.0, -0.375, 0.5, 0.40625, -0.625, -0.765625, 1.125,
                -0.140625, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.71875, -0.6875, 0.390625, 0.1875, 0.703125,
                -0.375, 0.46875, 0.0, -1.546875, 0.0, 1.96875, 0.0, -1.265625, 0.0, 0.84375, 0.0, -0.859375, 0.6875,
                -1.484375, -0.1875, 0.0, 0.375, -0.9375, 0.0, -1.25, 0.5, -0.46875, -0.0625, 1.640625, -0.625, 0.78125,
                0.0, 1.125, 0.0, -1.265625, 0.0, -1.265625, 0.0, 1.40625, 0.0, 0.625, -0.5, 1.171875, 0.0625, -0.9375,
                0.625, -1.5625, 0.0, -0.625, 0.25, 0.46875, -0.3125, -1.015625, 0.5625, -0.703125, 0.0, 0.5625, 0.0,
                -1.265625, 0.0, 1.96875, 0.0, -1.265625, 0.0, 0.3125, -0.25, 0.234375, 0.3125, -0.078125, -0.5625,
                1.40625, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            ],
        )],
    );
    // dilations
    check(
        "ConvTranspose",
        &[Some((&[1, 1, 3, 3], 10)), Some((&[1, 1, 2, 2], 11))],
        &[("dilations", AttrValue::Ints(vec![2, 2]))],
        &[(
            &[1, 1, 5, 5],
            &[
                -0.625, 0.46875, 0.265625, -0.375, 0.1875, 0.859375, 0.15625, -1.234375, -0.125, 0.4375, -0.703125,
                0.78125, -1.890625, 0.21875, 0.640625, 1.71875, 0.3125, -0.921875, 0.03125, -0.109375, 1.09375,
                -0.3125, -1.609375, -0.03125, -0.171875,
            ],
        )],
    );
    // auto_pad SAME_UPPER
    check(
        "ConvTranspose",
        &[Some((&[1, 1, 3, 3], 12)), Some((&[1, 2, 3, 3], 13))],
        &[("auto_pad", AttrValue::Str("SAME_UPPER".into())), ("strides", AttrValue::Ints(vec![2, 2]))],
        &[(
            &[1, 2, 6, 6],
            &[
                -0.625, 0.078125, 1.90625, -0.140625, -1.40625, 0.0, -0.3125, 0.390625, -0.140625, -0.703125, 1.265625,
                0.0, -1.125, 0.84375, 1.640625, -1.34375, -0.578125, 0.0625, -0.5625, 0.703125, -0.953125, -0.390625,
                0.453125, 0.3125, 1.25, 1.109375, -2.140625, -0.71875, -0.765625, 0.6875, 0.625, -0.78125, 1.46875,
                -0.078125, -0.359375, 0.625, 0.3125, -0.78125, -0.640625, 1.40625, 0.140625, 0.0, 0.625, -0.46875,
                -0.890625, 0.84375, -0.421875, 0.0, -0.296875, -1.5625, 1.640625, 1.0625, -0.65625, -0.625, 1.125,
                -0.84375, -0.203125, 0.46875, 0.265625, -0.375, -2.171875, 1.28125, 1.9375, 0.3125, -0.71875, -1.375,
                -1.25, 0.9375, -0.59375, 0.09375, 0.953125, -0.75,
            ],
        )],
    );
    // auto_pad SAME_LOWER
    check(
        "ConvTranspose",
        &[Some((&[1, 1, 3, 3], 12)), Some((&[1, 2, 3, 3], 13))],
        &[("auto_pad", AttrValue::Str("SAME_LOWER".into())), ("strides", AttrValue::Ints(vec![2, 2]))],
        &[(
            &[1, 2, 6, 6],
            &[
                0.390625, -0.140625, -0.703125, 1.265625, 0.0, 0.0, 0.84375, 1.640625, -1.34375, -0.578125, 0.0625,
                0.625, 0.703125, -0.953125, -0.390625, 0.453125, 0.3125, -0.5625, 1.109375, -2.140625, -0.71875,
                -0.765625, 0.6875, 0.9375, -0.78125, 1.46875, -0.078125, -0.359375, 0.625, -1.125, -1.40625, 0.78125,
                -0.140625, 0.078125, 1.125, -0.625, -0.46875, -0.890625, 0.84375, -0.421875, 0.0, 0.0, -1.5625,
                1.640625, 1.0625, -0.65625, -0.625, -0.0625, -0.84375, -0.203125, 0.46875, 0.265625, -0.375, 0.1875,
                1.28125, 1.9375, 0.3125, -0.71875, -1.375, 0.3125, 0.9375, -0.59375, 0.09375, 0.953125, -0.75, 0.375,
                0.3125, -0.921875, 0.03125, -1.484375, -0.25, 0.875,
            ],
        )],
    );
    // 1-D
    check(
        "ConvTranspose",
        &[Some((&[1, 2, 5], 14)), Some((&[2, 3, 3], 15))],
        &[("strides", AttrValue::Ints(vec![2])), ("pads", AttrValue::Ints(vec![1, 0]))],
        &[(
            &[1, 3, 10],
            &[
                0.09375, -1.578125, 1.21875, 1.03125, -0.53125, -1.03125, 0.59375, 1.578125, -1.15625, -0.3125,
                -0.078125, -0.078125, -1.0625, 1.90625, 0.46875, -0.78125, -0.515625, 1.203125, 1.015625, -1.375,
                0.109375, 0.703125, 0.25, -1.171875, 0.03125, 0.546875, 0.171875, -1.328125, -0.046875, 0.4375,
            ],
        )],
    );
    // 3-D
    check(
        "ConvTranspose",
        &[Some((&[1, 1, 2, 3, 2], 16)), Some((&[1, 2, 2, 2, 2], 17))],
        &[("strides", AttrValue::Ints(vec![2, 1, 2]))],
        &[(
            &[1, 2, 4, 4, 4],
            &[
                -0.140625, 0.078125, 1.125, -0.625, -0.90625, 0.625, 0.921875, -1.484375, -1.921875, 1.796875,
                -0.09375, -0.3125, -0.6875, 1.71875, -0.125, 0.3125, 0.015625, -0.125, -0.125, 1.0, 0.1875, -0.796875,
                -0.796875, 0.75, 0.734375, -1.65625, -0.25, -0.109375, 1.03125, -0.515625, 0.1875, -0.09375, 0.984375,
                -0.546875, -0.984375, 0.546875, 0.71875, -1.25, 1.109375, 0.234375, -0.296875, -0.078125, 1.53125,
                -2.1875, -0.1875, 0.46875, 0.375, -0.9375, -0.109375, 0.875, 0.109375, -0.875, -0.6875, 0.578125,
                0.484375, 1.046875, -0.140625, -0.28125, -1.125, 1.265625, 0.28125, -0.140625, -0.5625, 0.28125,
                0.171875, 0.03125, -1.375, -0.25, 0.921875, 0.296875, 0.359375, -0.96875, 1.234375, 1.0, 0.671875,
                -0.265625, -1.203125, 1.203125, -0.21875, 0.21875, -0.03125, -0.171875, 0.25, 1.375, -0.140625, -1.125,
                -0.28125, 1.265625, -0.0625, -2.453125, -0.203125, -0.0625, 0.515625, -1.03125, 0.09375, -0.1875,
                -1.203125, -0.21875, 1.203125, 0.21875, 0.421875, -0.828125, -2.65625, 0.421875, 0.734375, -0.125,
                0.171875, -1.390625, -0.328125, 0.328125, 0.65625, -0.65625, 0.21875, 1.203125, -0.21875, -1.203125,
                -0.265625, 1.0, 0.671875, 1.234375, -0.1875, -0.328125, -0.328125, 2.0625, 0.140625, -0.28125,
                -0.28125, 0.5625,
            ],
        )],
    );
    // SAME_UPPER with negative total padding
    check(
        "ConvTranspose",
        &[Some((&[1, 1, 3], 21)), Some((&[1, 1, 1], 22))],
        &[("strides", AttrValue::Ints(vec![2])), ("auto_pad", AttrValue::Str("SAME_UPPER".into()))],
        &[(&[1, 1, 6], &[0.0, -0.46875, 0.0, 1.71875, 0.0, 0.3125])],
    );
    // SAME_LOWER with negative total padding
    check(
        "ConvTranspose",
        &[Some((&[1, 1, 3], 21)), Some((&[1, 1, 1], 22))],
        &[("strides", AttrValue::Ints(vec![2])), ("auto_pad", AttrValue::Str("SAME_LOWER".into()))],
        &[(&[1, 1, 6], &[-0.46875, 0.0, 1.71875, 0.0, 0.3125, 0.0])],
    );
    // batch 2
    check(
        "ConvTranspose",
        &[Some((&[2, 2, 2, 3], 18)), Some((&[2, 2, 2, 2], 19)), Some((&[2], 20))],
        &[("strides", AttrValue::Ints(vec![2, 1])), ("pads", AttrValue::Ints(vec![0, 1, 1, 0]))],
        &[(
            &[2, 2, 3, 3],
            &[
                0.125, 0.046875, 2.078125, -0.921875, 3.015625, -0.375, 0.25, 0.171875, 1.265625, -0.21875, -0.53125,
                -1.078125, 0.171875, 0.640625, -0.296875, 0.28125, -0.03125, -0.265625, 3.140625, 0.1875, 0.625,
                -0.03125, -0.765625, 3.21875, 3.265625, 0.3125, -0.1875, -1.453125, 0.03125, -0.703125, -0.671875,
                -0.203125, -0.625, -0.953125, 0.53125, 0.109375,
            ],
        )],
    );
}

#[test]
fn grouped_conv_transpose_matches_naive() {
    // naive check, group 1
    check(
        "ConvTranspose",
        &[Some((&[1, 2, 3, 3], 1)), Some((&[2, 2, 3, 3], 2)), Some((&[2], 3))],
        &[
            ("strides", AttrValue::Ints(vec![2, 2])),
            ("pads", AttrValue::Ints(vec![1, 0, 0, 1])),
            ("output_padding", AttrValue::Ints(vec![1, 0])),
        ],
        &[(
            &[1, 2, 7, 6],
            &[
                -0.75, 0.515625, -1.265625, -0.125, -1.109375, -1.125, 0.140625, -2.671875, 0.6875, -2.515625,
                -0.078125, -0.203125, -0.921875, -1.765625, -0.796875, -2.765625, -0.28125, 0.1875, -1.28125, 0.3125,
                -1.96875, 0.109375, 0.140625, -2.609375, -0.734375, -0.453125, -1.046875, -1.453125, -0.890625,
                -2.09375, -0.609375, -1.046875, -1.109375, -0.5625, -1.578125, 0.28125, -0.875, -0.875, -0.875, -0.875,
                -0.875, -0.875, -0.546875, 0.71875, 1.484375, 0.9375, 1.5625, 0.796875, -0.78125, 1.796875, -2.984375,
                1.875, 0.40625, 0.15625, 1.859375, 1.015625, 1.71875, 0.875, -1.796875, 0.734375, 1.875, 0.59375,
                2.515625, 0.3125, 0.515625, 1.828125, 0.671875, 0.953125, 1.59375, 0.8125, 1.671875, 1.03125, 0.796875,
                1.078125, 0.8125, 0.625, 2.0625, 0.53125, 0.875, 0.875, 0.875, 0.875, 0.875, 0.875,
            ],
        )],
    );
    // group 2 with bias
    check(
        "ConvTranspose",
        &[Some((&[1, 4, 3, 3], 4)), Some((&[4, 3, 2, 2], 5)), Some((&[6], 6))],
        &[("group", AttrValue::Int(2)), ("strides", AttrValue::Ints(vec![2, 2]))],
        &[(
            &[1, 6, 6, 6],
            &[
                0.46875, 2.625, 1.6875, -0.09375, 0.390625, 2.9375, 0.46875, 0.46875, 2.078125, 1.375, 1.171875,
                -0.234375, 0.53125, 2.375, 1.75, -0.34375, 0.453125, 2.6875, -0.09375, 1.03125, 1.515625, 1.9375,
                0.609375, 0.328125, 1.671875, -0.03125, 1.8125, -0.59375, 0.515625, 2.4375, 2.21875, 1.234375,
                0.953125, 2.5, 0.046875, 0.890625, 1.5, -0.65625, -1.53125, 0.640625, 1.1875, -0.578125, 1.5, -0.65625,
                -1.140625, 1.03125, 1.96875, 0.203125, 1.75, -0.71875, -1.28125, 0.578125, 1.4375, -0.640625, 1.125,
                -1.34375, -1.515625, 0.34375, 1.59375, -0.484375, -1.59375, 0.65625, -1.03125, 0.515625, 1.6875,
                -0.703125, -1.046875, 1.203125, -1.890625, -0.34375, 1.21875, -1.171875, -1.78125, 0.375, -0.796875,
                -2.578125, -2.328125, 0.21875, -1.78125, -1.78125, -0.40625, -1.109375, -1.546875, -2.953125, -1.34375,
                0.5, -0.359375, -2.453125, -1.890625, 0.34375, -1.96875, -0.84375, -0.59375, -0.171875, -1.734375,
                -2.015625, -0.90625, -2.609375, 0.078125, -2.328125, -1.453125, 0.46875, -0.359375, -1.34375, -0.78125,
                0.765625, -1.921875, -1.078125, 2.0625, -0.171875, -0.65625, 1.4375, 2.375, 0.53125, 0.109375, 2.1875,
                1.015625, -0.84375, -0.59375, 1.875, 1.8125, -0.734375, -0.90625, 0.875, 2.125, -0.03125, 0.671875,
                2.4375, 1.578125, -0.59375, -0.03125, 2.125, -0.59375, 1.578125, 2.4375, 0.671875, 1.875, -0.59375,
                0.875, -0.90625, -0.734375, 1.8125, 0.53125, 2.375, -1.171875, 0.90625, 0.125, -1.734375, -1.09375,
                1.375, -1.328125, -1.046875, 0.359375, -0.0625, -0.46875, -1.59375, -1.234375, 0.53125, 0.0625,
                -2.109375, -1.15625, 1.0, -2.015625, -0.609375, -0.328125, 0.375, -1.15625, -1.15625, 0.140625,
                -1.640625, -1.078125, 1.46875, -1.21875, 0.625, 0.53125, -0.171875, -0.296875, -1.703125, -1.84375,
                -0.71875, 2.78125, 0.546875, -0.171875, 1.921875, 2.625, 0.78125, 0.828125, 0.390625, 1.5, 2.15625,
                -0.34375, 1.40625, 2.90625, 0.359375, -0.046875, 1.734375, 2.75, 0.59375, 1.765625, -0.421875, 2.4375,
                1.34375, 0.59375, 0.59375, -0.203125, 1.96875, 2.59375, 0.828125, 2.875, 0.40625, 1.265625, 2.359375,
                -0.578125, 1.609375, 1.53125, -0.21875,
            ],
        )],
    );
    // depthwise-style group 3, batch 2
    check(
        "ConvTranspose",
        &[Some((&[2, 3, 4], 7)), Some((&[3, 1, 3], 8))],
        &[
            ("group", AttrValue::Int(3)),
            ("strides", AttrValue::Ints(vec![2])),
            ("pads", AttrValue::Ints(vec![1, 1])),
            ("dilations", AttrValue::Ints(vec![2])),
        ],
        &[(
            &[2, 3, 9],
            &[
                0.0, 1.671875, 0.0, -1.0625, 0.0, 1.984375, 0.0, -0.609375, 0.0, 0.0, -0.140625, 0.0, -2.53125, 0.0,
                0.765625, 0.0, 1.328125, 0.0, 0.0, 0.9375, 0.0, -1.28125, 0.0, 0.828125, 0.0, 0.765625, 0.0, 0.0,
                0.796875, 0.0, -2.59375, 0.0, 0.453125, 0.0, -0.9375, 0.0, 0.0, 0.984375, 0.0, 0.734375, 0.0, -2.4375,
                0.0, 0.484375, 0.0, 0.0, -0.609375, 0.0, 1.390625, 0.0, -1.53125, 0.0, 1.203125, 0.0,
            ],
        )],
    );
    // output_shape larger than natural (negative pads)
    check(
        "ConvTranspose",
        &[Some((&[1, 1, 3, 3], 9)), Some((&[1, 1, 2, 2], 10))],
        &[("strides", AttrValue::Ints(vec![2, 2])), ("output_shape", AttrValue::Ints(vec![8, 9]))],
        &[(
            &[1, 1, 8, 9],
            &[
                0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.25, 0.1875, 0.875, -0.65625, -0.875, 0.65625, 0.0,
                0.0, 0.0, -0.09375, 0.34375, 0.328125, -1.203125, -0.328125, 1.203125, 0.0, 0.0, 0.0, 0.25, -0.1875,
                1.375, -1.03125, -0.375, 0.28125, 0.0, 0.0, 0.0, 0.09375, -0.34375, 0.515625, -1.890625, -0.140625,
                0.515625, 0.0, 0.0, 0.0, 0.75, -0.5625, -1.0, 0.75, 0.125, -0.09375, 0.0, 0.0, 0.0, 0.28125, -1.03125,
                -0.375, 1.375, 0.046875, -0.171875, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            ],
        )],
    );
    // output_shape SAME_UPPER
    check(
        "ConvTranspose",
        &[Some((&[1, 1, 3, 3], 9)), Some((&[1, 1, 2, 2], 10))],
        &[
            ("strides", AttrValue::Ints(vec![2, 2])),
            ("output_shape", AttrValue::Ints(vec![7, 8])),
            ("auto_pad", AttrValue::Str("SAME_UPPER".into())),
        ],
        &[(
            &[1, 1, 7, 8],
            &[
                0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.25, 0.1875, 0.875, -0.65625, -0.875, 0.65625, 0.0, 0.0,
                -0.09375, 0.34375, 0.328125, -1.203125, -0.328125, 1.203125, 0.0, 0.0, 0.25, -0.1875, 1.375, -1.03125,
                -0.375, 0.28125, 0.0, 0.0, 0.09375, -0.34375, 0.515625, -1.890625, -0.140625, 0.515625, 0.0, 0.0, 0.75,
                -0.5625, -1.0, 0.75, 0.125, -0.09375, 0.0, 0.0, 0.28125, -1.03125, -0.375, 1.375, 0.046875, -0.171875,
                0.0,
            ],
        )],
    );
}

#[test]
fn max_pool_matches_reference() {
    // 2-D, kernel 2
    check(
        "MaxPool",
        &[Some((&[1, 1, 4, 4], 1))],
        &[("kernel_shape", AttrValue::Ints(vec![2, 2]))],
        &[
            (&[1, 1, 3, 3], &[0.5, 0.625, 1.125, 1.25, 0.625, 0.75, 1.375, 1.375, 0.75]),
            (&[1, 1, 3, 3], &[1.0, 6.0, 3.0, 8.0, 6.0, 11.0, 13.0, 13.0, 11.0]),
        ],
    );
    // kernel 3, strides 2, pads 1
    check(
        "MaxPool",
        &[Some((&[1, 1, 5, 5], 2))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![3, 3])),
            ("strides", AttrValue::Ints(vec![2, 2])),
            ("pads", AttrValue::Ints(vec![1, 1, 1, 1])),
        ],
        &[
            (&[1, 1, 3, 3], &[0.5, 1.125, 0.0, 0.75, 1.375, 0.25, 0.875, 1.375, 0.375]),
            (&[1, 1, 3, 3], &[5.0, 7.0, 8.0, 15.0, 17.0, 18.0, 20.0, 17.0, 23.0]),
        ],
    );
    // ceil_mode
    check(
        "MaxPool",
        &[Some((&[1, 1, 5, 5], 3))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![2, 2])),
            ("strides", AttrValue::Ints(vec![2, 2])),
            ("ceil_mode", AttrValue::Int(1)),
        ],
        &[
            (&[1, 1, 3, 3], &[1.0, -0.125, 0.5, 1.25, 0.125, 0.75, 1.375, 0.25, 0.875]),
            (&[1, 1, 3, 3], &[6.0, 7.0, 9.0, 16.0, 17.0, 19.0, 21.0, 22.0, 24.0]),
        ],
    );
    // ceil_mode drops a window starting in the end padding
    check(
        "MaxPool",
        &[Some((&[1, 1, 5, 5], 4))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![2, 2])),
            ("strides", AttrValue::Ints(vec![2, 2])),
            ("pads", AttrValue::Ints(vec![1, 1, 1, 1])),
            ("ceil_mode", AttrValue::Int(1)),
        ],
        &[
            (&[1, 1, 3, 3], &[0.75, 1.375, 0.25, 1.0, -0.125, 0.5, 1.25, 0.125, 0.75]),
            (&[1, 1, 3, 3], &[0.0, 2.0, 3.0, 10.0, 11.0, 13.0, 20.0, 21.0, 23.0]),
        ],
    );
    // dilations
    check(
        "MaxPool",
        &[Some((&[1, 1, 5, 5], 5))],
        &[("kernel_shape", AttrValue::Ints(vec![2, 2])), ("dilations", AttrValue::Ints(vec![2, 2]))],
        &[
            (&[1, 1, 3, 3], &[0.375, 1.25, 1.0, 0.5, 1.375, 1.125, 0.625, -0.5, 1.25]),
            (&[1, 1, 3, 3], &[12.0, 1.0, 14.0, 17.0, 6.0, 19.0, 22.0, 23.0, 24.0]),
        ],
    );
    // dilations, strides, ceil_mode
    check(
        "MaxPool",
        &[Some((&[1, 1, 6, 7], 6))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![2, 3])),
            ("dilations", AttrValue::Ints(vec![2, 1])),
            ("strides", AttrValue::Ints(vec![2, 2])),
            ("ceil_mode", AttrValue::Int(1)),
        ],
        &[
            (&[1, 1, 3, 3], &[1.125, 1.0, 1.25, 1.25, 1.0, 1.375, 1.25, 0.75, 1.375]),
            (&[1, 1, 3, 3], &[0.0, 18.0, 5.0, 28.0, 18.0, 33.0, 28.0, 31.0, 33.0]),
        ],
    );
    // 1-D
    check(
        "MaxPool",
        &[Some((&[1, 2, 9], 7))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![3])),
            ("strides", AttrValue::Ints(vec![2])),
            ("pads", AttrValue::Ints(vec![1, 1])),
        ],
        &[
            (&[1, 2, 5], &[-0.125, 0.5, 1.125, 0.625, 0.625, 1.25, 0.75, 1.375, 1.375, 0.875]),
            (&[1, 2, 5], &[0.0, 2.0, 4.0, 7.0, 7.0, 9.0, 12.0, 14.0, 14.0, 17.0]),
        ],
    );
    // 3-D
    check(
        "MaxPool",
        &[Some((&[1, 1, 4, 4, 4], 8))],
        &[("kernel_shape", AttrValue::Ints(vec![2, 2, 2])), ("strides", AttrValue::Ints(vec![2, 2, 2]))],
        &[
            (&[1, 1, 2, 2, 2], &[0.875, 1.375, 1.25, 1.125, 1.25, 1.125, 1.375, 1.25]),
            (&[1, 1, 2, 2, 2], &[21.0, 18.0, 13.0, 31.0, 36.0, 54.0, 41.0, 59.0]),
        ],
    );
    // 3-D, asymmetric
    check(
        "MaxPool",
        &[Some((&[1, 2, 3, 4, 5], 9))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![2, 3, 2])),
            ("strides", AttrValue::Ints(vec![1, 2, 2])),
            ("pads", AttrValue::Ints(vec![0, 1, 1, 1, 0, 0])),
        ],
        &[
            (
                &[1, 2, 3, 2, 3],
                &[
                    0.875, 1.375, 0.375, 1.125, 1.25, 0.625, 1.375, 1.375, 0.875, 1.375, 0.5, 1.125, 1.375, 0.25,
                    0.875, 1.375, 0.5, 1.125, -0.5, 1.25, 1.375, -0.25, 1.375, 1.375, 0.0, 1.25, 1.25, 0.25, 1.375,
                    1.375, 0.0, 0.625, 1.25, 0.25, 0.875, 1.375,
                ],
            ),
            (
                &[1, 2, 3, 2, 3],
                &[
                    25.0, 22.0, 28.0, 35.0, 17.0, 38.0, 45.0, 22.0, 48.0, 45.0, 56.0, 58.0, 45.0, 46.0, 48.0, 45.0,
                    56.0, 58.0, 85.0, 86.0, 68.0, 95.0, 91.0, 68.0, 105.0, 86.0, 109.0, 115.0, 91.0, 114.0, 105.0,
                    107.0, 109.0, 115.0, 117.0, 114.0,
                ],
            ),
        ],
    );
    // auto_pad SAME_UPPER
    check(
        "MaxPool",
        &[Some((&[1, 1, 5, 5], 10))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![3, 3])),
            ("strides", AttrValue::Ints(vec![2, 2])),
            ("auto_pad", AttrValue::Str("SAME_UPPER".into())),
        ],
        &[
            (&[1, 1, 3, 3], &[0.875, 1.375, 1.375, 1.125, 1.125, 0.625, 1.25, 1.25, 0.75]),
            (&[1, 1, 3, 3], &[6.0, 3.0, 3.0, 16.0, 16.0, 19.0, 21.0, 21.0, 24.0]),
        ],
    );
    // auto_pad SAME_LOWER
    check(
        "MaxPool",
        &[Some((&[1, 1, 5, 5], 11))],
        &[("kernel_shape", AttrValue::Ints(vec![2, 2])), ("auto_pad", AttrValue::Str("SAME_LOWER".into()))],
        &[
            (
                &[1, 1, 5, 5],
                &[
                    0.625, 0.625, 1.25, 1.25, 0.125, 0.75, 0.75, 1.375, 1.375, 0.25, 0.875, 0.875, 1.375, 1.375, 0.375,
                    1.0, 1.0, -0.125, 0.5, 0.5, 1.125, 1.125, 0.0, 0.625, 0.625,
                ],
            ),
            (
                &[1, 1, 5, 5],
                &[
                    0.0, 0.0, 2.0, 2.0, 3.0, 5.0, 5.0, 7.0, 7.0, 8.0, 10.0, 10.0, 7.0, 7.0, 13.0, 15.0, 15.0, 16.0,
                    18.0, 18.0, 20.0, 20.0, 21.0, 23.0, 23.0,
                ],
            ),
        ],
    );
    // auto_pad VALID
    check(
        "MaxPool",
        &[Some((&[1, 1, 5, 6], 12))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![2, 2])),
            ("strides", AttrValue::Ints(vec![2, 2])),
            ("auto_pad", AttrValue::Str("VALID".into())),
        ],
        &[(&[1, 1, 2, 3], &[1.25, 0.75, 1.375, 1.0, 0.875, 0.5]), (&[1, 1, 2, 3], &[6.0, 9.0, 11.0, 19.0, 14.0, 22.0])],
    );
    // batch and channels (Indices are flat over the whole tensor)
    check(
        "MaxPool",
        &[Some((&[2, 2, 4, 4], 13))],
        &[("kernel_shape", AttrValue::Ints(vec![2, 2])), ("strides", AttrValue::Ints(vec![2, 2]))],
        &[
            (
                &[2, 2, 2, 2],
                &[1.125, 0.5, 0.75, 1.375, 0.375, 1.0, 1.125, 0.625, 1.25, 1.375, 0.875, 1.0, 0.5, 1.125, 1.375, 0.75],
            ),
            (
                &[2, 2, 2, 2],
                &[5.0, 3.0, 13.0, 15.0, 21.0, 23.0, 28.0, 31.0, 33.0, 38.0, 41.0, 46.0, 49.0, 51.0, 61.0, 59.0],
            ),
        ],
    );
}

/// An AveragePool whose one window is each whole plane (resnet50's 7x7 over 7x7) takes
/// the global pool's single pass; its outputs are the planes' means, in 1-D and 2-D, with
/// strides and ceil_mode (which change nothing for one window). Windows that only look
/// whole keep the windowed path and their own divisors: pads counted by
/// `count_include_pad`, or not, and a dilated kernel that skips columns.
#[test]
fn average_pools_over_whole_planes_are_the_planes_means() {
    type Want = fn(&[f64]) -> f64;
    type Case<'a> = (&'a [i64], Vec<(&'a str, AttrValue)>, Want);
    let mean: Want = |p| p.iter().sum::<f64>() / p.len() as f64;
    let ints = |v: &[i64]| AttrValue::Ints(v.to_vec());
    let cases: Vec<Case> = vec![
        (&[2, 5, 7, 7], vec![("kernel_shape", ints(&[7, 7]))], mean),
        (&[1, 3, 10], vec![("kernel_shape", ints(&[10])), ("strides", ints(&[3]))], mean),
        (
            &[1, 3, 6, 5],
            vec![("kernel_shape", ints(&[6, 5])), ("strides", ints(&[2, 2])), ("ceil_mode", AttrValue::Int(1))],
            mean,
        ),
        (
            &[1, 3, 10],
            vec![("kernel_shape", ints(&[12])), ("pads", ints(&[1, 1])), ("count_include_pad", AttrValue::Int(1))],
            |p| p.iter().sum::<f64>() / 12.0,
        ),
        (&[1, 3, 10], vec![("kernel_shape", ints(&[12])), ("pads", ints(&[1, 1]))], mean),
        (&[1, 3, 9], vec![("kernel_shape", ints(&[5])), ("dilations", ints(&[2]))], |p| {
            p.iter().step_by(2).sum::<f64>() / 5.0
        }),
    ];
    for (shape, at, want) in cases {
        let x = HostTensor::random(DType::F32, shape, 7).unwrap();
        let a = attrs(&at);
        let outs = run("AveragePool", &[Some(&x)], &a).unwrap();
        let plane = shape[2..].iter().product::<i64>() as usize;
        let want: Vec<f64> = x.to_f64().chunks(plane).map(want).collect();
        let out_shape: Vec<i64> = shape[..2].iter().copied().chain(std::iter::repeat_n(1, shape.len() - 2)).collect();
        assert_eq!(outs[0].shape, out_shape, "{a}");
        assert_close(&format!("{shape:?} {a}"), &outs[0].to_f64(), &want);
        assert!(want.iter().any(|v| v.abs() > 0.05), "{a}: means away from 0");
    }
}

#[test]
fn average_pool_matches_reference() {
    // 2-D kernel 3
    check(
        "AveragePool",
        &[Some((&[1, 1, 5, 5], 1))],
        &[("kernel_shape", AttrValue::Ints(vec![3, 3]))],
        &[(
            &[1, 1, 3, 3],
            &[
                -0.33333334,
                0.45833334,
                0.29166666,
                -0.20833333,
                0.2638889,
                0.097222224,
                -0.083333336,
                0.06944445,
                -0.097222224,
            ],
        )],
    );
    // pads, count_include_pad 0
    check(
        "AveragePool",
        &[Some((&[1, 1, 5, 5], 2))],
        &[("kernel_shape", AttrValue::Ints(vec![3, 3])), ("pads", AttrValue::Ints(vec![1, 1, 1, 1]))],
        &[(
            &[1, 1, 5, 5],
            &[
                -0.125,
                0.27083334,
                0.104166664,
                -0.0625,
                -0.625,
                -0.0625,
                0.33333334,
                0.16666667,
                0.0,
                -0.5625,
                0.0625,
                0.45833334,
                0.29166666,
                0.125,
                -0.4375,
                0.1875,
                0.2638889,
                0.097222224,
                -0.06944445,
                -0.3125,
                0.25,
                0.16666667,
                0.0,
                -0.16666667,
                -0.25,
            ],
        )],
    );
    // pads, count_include_pad 1
    check(
        "AveragePool",
        &[Some((&[1, 1, 5, 5], 2))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![3, 3])),
            ("pads", AttrValue::Ints(vec![1, 1, 1, 1])),
            ("count_include_pad", AttrValue::Int(1)),
        ],
        &[(
            &[1, 1, 5, 5],
            &[
                -0.055555556,
                0.18055555,
                0.06944445,
                -0.041666668,
                -0.2777778,
                -0.041666668,
                0.33333334,
                0.16666667,
                0.0,
                -0.375,
                0.041666668,
                0.45833334,
                0.29166666,
                0.125,
                -0.29166666,
                0.125,
                0.2638889,
                0.097222224,
                -0.06944445,
                -0.20833333,
                0.11111111,
                0.11111111,
                0.0,
                -0.11111111,
                -0.11111111,
            ],
        )],
    );
    // ceil_mode, exclude pad
    check(
        "AveragePool",
        &[Some((&[1, 1, 5, 5], 3))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![2, 2])),
            ("strides", AttrValue::Ints(vec![2, 2])),
            ("ceil_mode", AttrValue::Int(1)),
        ],
        &[(&[1, 1, 3, 3], &[0.0625, -0.75, 0.4375, 0.3125, -0.5, 0.6875, 0.5, -0.3125, 0.875])],
    );
    // ceil_mode, include pad
    check(
        "AveragePool",
        &[Some((&[1, 1, 6, 6], 4))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![3, 3])),
            ("strides", AttrValue::Ints(vec![2, 2])),
            ("pads", AttrValue::Ints(vec![1, 1, 1, 1])),
            ("ceil_mode", AttrValue::Int(1)),
            ("count_include_pad", AttrValue::Int(1)),
        ],
        &[(
            &[1, 1, 4, 4],
            &[
                -0.1388889,
                -0.055555556,
                0.041666668,
                0.125,
                -0.25,
                0.013888889,
                0.0,
                -0.083333336,
                0.013888889,
                0.25,
                -0.083333336,
                -0.125,
                -0.16666667,
                0.104166664,
                -0.0625,
                -0.3125,
            ],
        )],
    );
    // ceil_mode, include pad, exclude pad
    check(
        "AveragePool",
        &[Some((&[1, 1, 6, 6], 4))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![3, 3])),
            ("strides", AttrValue::Ints(vec![2, 2])),
            ("pads", AttrValue::Ints(vec![1, 1, 1, 1])),
            ("ceil_mode", AttrValue::Int(1)),
        ],
        &[(
            &[1, 1, 4, 4],
            &[
                -0.3125,
                -0.083333336,
                0.0625,
                0.375,
                -0.375,
                0.013888889,
                0.0,
                -0.16666667,
                0.020833334,
                0.25,
                -0.083333336,
                -0.25,
                -0.5,
                0.20833333,
                -0.125,
                -1.25,
            ],
        )],
    );
    // strides and dilations
    check(
        "AveragePool",
        &[Some((&[1, 2, 7, 6], 5))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![2, 2])),
            ("strides", AttrValue::Ints(vec![2, 1])),
            ("dilations", AttrValue::Ints(vec![2, 2])),
            ("pads", AttrValue::Ints(vec![1, 0, 1, 1])),
        ],
        &[(
            &[1, 2, 4, 5],
            &[
                0.25, 0.5625, -0.5625, -0.25, -0.25, -0.03125, 0.28125, -0.125, -0.53125, 0.1875, 0.125, -0.28125,
                0.03125, -0.375, -0.375, 0.5625, -0.5625, -0.25, 0.0625, -1.375, 0.4375, -0.6875, 1.0625, -0.0625,
                1.375, 0.15625, -0.25, 0.0625, 0.375, 0.375, -0.40625, 0.625, -0.5, 0.53125, -0.1875, -0.6875, 1.0625,
                -0.0625, 0.25, 0.25,
            ],
        )],
    );
    // 1-D
    check(
        "AveragePool",
        &[Some((&[2, 1, 8], 6))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![3])),
            ("strides", AttrValue::Ints(vec![2])),
            ("pads", AttrValue::Ints(vec![1, 1])),
            ("count_include_pad", AttrValue::Int(1)),
        ],
        &[(&[2, 1, 4], &[0.375, -0.16666667, 0.45833334, 0.125, 0.125, 0.41666666, 0.083333336, -0.25])],
    );
    // 3-D
    check(
        "AveragePool",
        &[Some((&[1, 1, 4, 4, 3], 7))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![2, 2, 2])),
            ("strides", AttrValue::Ints(vec![2, 2, 1])),
            ("pads", AttrValue::Ints(vec![1, 0, 0, 0, 1, 1])),
        ],
        &[(
            &[1, 1, 2, 2, 3],
            &[-0.21875, 0.09375, 0.25, 0.21875, -0.1875, -0.75, 0.015625, -0.03125, 0.125, -0.265625, 0.046875, 0.5625],
        )],
    );
    // SAME_UPPER exclude pad
    check(
        "AveragePool",
        &[Some((&[1, 1, 5, 5], 8))],
        &[("kernel_shape", AttrValue::Ints(vec![2, 2])), ("auto_pad", AttrValue::Str("SAME_UPPER".into()))],
        &[(
            &[1, 1, 5, 5],
            &[
                -0.4375, -0.125, 0.1875, 0.5, -0.0625, -0.3125, 0.0, 0.3125, 0.625, 0.0625, -0.1875, 0.125, 0.4375,
                0.75, 0.1875, -0.0625, 0.25, -0.15625, 0.15625, 0.3125, 0.0, 0.3125, -0.8125, -0.5, 0.375,
            ],
        )],
    );
    // SAME_LOWER include pad
    check(
        "AveragePool",
        &[Some((&[1, 1, 5, 5], 8))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![3, 3])),
            ("strides", AttrValue::Ints(vec![2, 2])),
            ("auto_pad", AttrValue::Str("SAME_LOWER".into())),
            ("count_include_pad", AttrValue::Int(1)),
        ],
        &[(
            &[1, 1, 3, 3],
            &[
                -0.19444445,
                0.18055555,
                0.22222222,
                -0.16666667,
                0.45833334,
                0.45833334,
                -0.027777778,
                0.11111111,
                0.06944445,
            ],
        )],
    );
    // VALID
    check(
        "AveragePool",
        &[Some((&[1, 1, 5, 5], 9))],
        &[
            ("kernel_shape", AttrValue::Ints(vec![3, 2])),
            ("strides", AttrValue::Ints(vec![2, 2])),
            ("auto_pad", AttrValue::Str("VALID".into())),
        ],
        &[(&[1, 1, 2, 2], &[-0.1875, 0.4375, 0.0625, 0.6875])],
    );
}

#[test]
fn global_pools_match_reference() {
    // GlobalAveragePool 2-D
    check(
        "GlobalAveragePool",
        &[Some((&[2, 3, 4, 5], 1))],
        &[],
        &[(&[2, 3, 1, 1], &[-0.00625, 0.0625, -0.0125, -0.0875, -0.01875, 0.05])],
    );
    // GlobalAveragePool 1-D
    check(
        "GlobalAveragePool",
        &[Some((&[2, 2, 7], 2))],
        &[],
        &[(&[2, 2, 1], &[-0.125, 0.21428572, 0.14285715, -0.3392857])],
    );
    // GlobalAveragePool 3-D
    check(
        "GlobalAveragePool",
        &[Some((&[1, 2, 2, 3, 2], 3))],
        &[],
        &[(&[1, 2, 1, 1, 1], &[-0.114583336, 0.041666668])],
    );
    // GlobalMaxPool 2-D
    check(
        "GlobalMaxPool",
        &[Some((&[2, 3, 4, 5], 4))],
        &[],
        &[(&[2, 3, 1, 1], &[1.375, 1.375, 1.375, 1.375, 1.375, 1.375])],
    );
    // GlobalMaxPool 3-D (numpy)
    check("GlobalMaxPool", &[Some((&[1, 2, 2, 3, 2], 5))], &[], &[(&[1, 2, 1, 1, 1], &[1.375, 1.125])]);
    // GlobalMaxPool 1-D (numpy)
    check("GlobalMaxPool", &[Some((&[2, 3, 5], 6))], &[], &[(&[2, 3, 1], &[1.125, 1.25, 1.375, 1.0, 1.125, 1.25])]);
    // GlobalAveragePool 2-D (numpy)
    check(
        "GlobalAveragePool",
        &[Some((&[2, 3, 4, 5], 1))],
        &[],
        &[(&[2, 3, 1, 1], &[-0.00625, 0.0625, -0.0125, -0.0875, -0.01875, 0.05])],
    );
}

#[test]
fn gemm_matches_reference() {
    // plain with C
    check(
        "Gemm",
        &[Some((&[3, 4], 1)), Some((&[4, 5], 2)), Some((&[3, 5], 3))],
        &[],
        &[(
            &[3, 5],
            &[
                -0.640625, 1.390625, -0.171875, -1.015625, 1.015625, -1.296875, 1.578125, -1.296875, -1.296875,
                1.578125, -0.15625, 0.328125, 1.171875, -1.21875, -0.734375,
            ],
        )],
    );
    // transA, alpha, beta, row C
    check(
        "Gemm",
        &[Some((&[4, 3], 4)), Some((&[4, 5], 5)), Some((&[5], 6))],
        &[("transA", AttrValue::Int(1)), ("alpha", AttrValue::Float(0.5)), ("beta", AttrValue::Float(2.0))],
        &[(
            &[3, 5],
            &[
                2.09375, 1.28125, -2.40625, 1.09375, -1.15625, 2.6171875, -0.515625, -2.390625, 2.0234375, -1.6484375,
                1.703125, 1.28125, -2.015625, 0.078125, 0.015625,
            ],
        )],
    );
    // transB, column C
    check(
        "Gemm",
        &[Some((&[3, 4], 7)), Some((&[5, 4], 8)), Some((&[3, 1], 9))],
        &[("transB", AttrValue::Int(1))],
        &[(
            &[3, 5],
            &[
                -1.046875, 2.46875, -0.84375, -0.5625, 1.15625, -0.953125, -1.96875, 2.046875, -2.203125, -1.421875,
                0.9375, 0.0625, -0.453125, 3.703125, -0.046875,
            ],
        )],
    );
    // both transposed, scalar C
    check(
        "Gemm",
        &[Some((&[4, 3], 10)), Some((&[5, 4], 11)), Some((&[], 12))],
        &[("transA", AttrValue::Int(1)), ("transB", AttrValue::Int(1)), ("beta", AttrValue::Float(-1.5))],
        &[(
            &[3, 5],
            &[
                0.765625, 3.15625, 0.15625, 2.546875, -0.453125, 0.875, -0.5625, 0.875, -0.5625, 0.875, -0.453125,
                2.546875, 0.15625, 3.15625, 0.765625,
            ],
        )],
    );
    // [1] C
    check(
        "Gemm",
        &[Some((&[2, 3], 13)), Some((&[3, 2], 14)), Some((&[1], 15))],
        &[("alpha", AttrValue::Float(2.0))],
        &[(&[2, 2], &[-1.71875, -0.875, 2.90625, 0.65625])],
    );
    // no C
    check(
        "Gemm",
        &[Some((&[3, 6], 16)), Some((&[6, 2], 17))],
        &[],
        &[(&[3, 2], &[1.84375, -1.21875, 0.65625, 0.75, -2.6875, 2.359375])],
    );
    // [1, N] C, beta 0
    check(
        "Gemm",
        &[Some((&[5, 4], 18)), Some((&[4, 3], 19)), Some((&[1, 3], 20))],
        &[("beta", AttrValue::Float(0.0))],
        &[(
            &[5, 3],
            &[
                1.671875, 0.1875, -0.9375, 0.28125, -1.4375, 1.875, 1.765625, -0.1875, -0.703125, -1.78125, 1.0625,
                1.75, 1.859375, -0.5625, -0.46875,
            ],
        )],
    );
}

#[test]
fn matmul_matches_reference() {
    // 2-D
    check(
        "MatMul",
        &[Some((&[3, 4], 1)), Some((&[4, 5], 2))],
        &[],
        &[(
            &[3, 5],
            &[
                0.234375, 0.515625, 0.078125, 0.359375, 0.640625, -0.546875, 0.578125, -1.171875, -0.046875, 1.078125,
                0.46875, -0.796875, 1.171875, -0.09375, -1.359375,
            ],
        )],
    );
    // 1-D x 2-D
    check(
        "MatMul",
        &[Some((&[4], 3)), Some((&[4, 5], 4))],
        &[],
        &[(&[5], &[-1.6875, 0.140625, -0.546875, -0.875, 0.953125])],
    );
    // 2-D x 1-D
    check("MatMul", &[Some((&[3, 4], 5)), Some((&[4], 6))], &[], &[(&[3], &[-1.328125, -0.546875, -1.5625])]);
    // 1-D x 1-D
    check("MatMul", &[Some((&[4], 7)), Some((&[4], 8))], &[], &[(&[], &[-1.296875])]);
    // batched
    check(
        "MatMul",
        &[Some((&[2, 3, 4], 9)), Some((&[2, 4, 5], 10))],
        &[],
        &[(
            &[2, 3, 5],
            &[
                0.015625, 0.015625, 0.015625, 0.734375, 0.015625, 0.984375, -0.328125, 0.515625, -2.59375, 0.046875,
                1.234375, -1.390625, 0.296875, 1.625, -0.640625, -0.359375, 2.171875, 0.03125, -0.671875, 0.421875,
                -0.125, 2.171875, -0.203125, -0.0625, -0.28125, -0.609375, -1.78125, 0.640625, -1.609375, 1.890625,
            ],
        )],
    );
    // broadcast batch
    check(
        "MatMul",
        &[Some((&[2, 1, 3, 4], 11)), Some((&[3, 4, 2], 12))],
        &[],
        &[(
            &[2, 3, 3, 2],
            &[
                0.546875, 0.65625, 2.109375, -1.609375, 0.078125, 0.796875, -0.015625, -1.34375, 1.828125, 0.265625,
                0.078125, -1.71875, -0.578125, -1.90625, 1.546875, -0.015625, 0.078125, -1.71875, 1.640625, -1.46875,
                -0.390625, 0.9375, -0.625, 1.90625, 1.921875, -0.109375, 0.171875, -2.09375, -0.859375, 1.671875,
                2.203125, 0.171875, 0.734375, -1.53125, -1.09375, 1.4375,
            ],
        )],
    );
    // shared B
    check(
        "MatMul",
        &[Some((&[2, 3, 4], 13)), Some((&[4, 5], 14))],
        &[],
        &[(
            &[2, 3, 5],
            &[
                -0.171875, -0.3125, -0.09375, -0.234375, -0.015625, -0.125, 0.578125, -0.515625, 0.1875, -0.90625,
                -0.078125, -1.765625, 0.859375, -0.828125, 1.796875, 0.328125, -0.515625, 0.796875, -0.046875,
                1.265625, 0.015625, 0.015625, 0.015625, 0.015625, 0.015625, 0.421875, 1.265625, -0.046875, 0.796875,
                -0.515625,
            ],
        )],
    );
    // shared A
    check(
        "MatMul",
        &[Some((&[3, 4], 15)), Some((&[2, 4, 5], 16))],
        &[],
        &[(
            &[2, 3, 5],
            &[
                0.34375, -1.484375, 1.359375, -0.46875, 1.65625, -0.609375, 1.640625, -1.859375, 0.390625, 1.921875,
                -0.125, -0.265625, -0.046875, -0.1875, 2.546875, 1.15625, -0.671875, 2.171875, 0.34375, -1.484375,
                -1.609375, 0.640625, -1.78125, -0.609375, 1.640625, -0.0625, -0.203125, 2.171875, -0.125, -0.265625,
            ],
        )],
    );
    // 1-D x batched
    check(
        "MatMul",
        &[Some((&[4], 17)), Some((&[2, 4, 3], 18))],
        &[],
        &[(&[2, 3], &[-1.5625, 0.3125, -1.40625, -1.34375, -1.625, 0.25])],
    );
    // batched x 1-D
    check(
        "MatMul",
        &[Some((&[2, 3, 4], 19)), Some((&[4], 20))],
        &[],
        &[(&[2, 3], &[-1.203125, -0.953125, 0.015625, -0.8125, 2.671875, -0.671875])],
    );
}

/// Pseudo-random values for the large cases.
fn rnd(shape: &[i64], seed: u64) -> HostTensor {
    HostTensor::random(DType::F32, shape, seed).unwrap()
}

/// Naive 2-D convolution in f64 straight from the definition.
#[allow(clippy::too_many_arguments)]
fn naive_conv2d(
    x: &HostTensor,
    w: &HostTensor,
    b: Option<&HostTensor>,
    s: [usize; 2],
    d: [usize; 2],
    pb: [usize; 2],
    pe: [usize; 2],
    group: usize,
) -> (Vec<i64>, Vec<f64>) {
    let (xv, wv) = (x.to_f64(), w.to_f64());
    let [n, c, h, wd] = [0, 1, 2, 3].map(|i| x.shape[i] as usize);
    let [m, cg, kh, kw] = [0, 1, 2, 3].map(|i| w.shape[i] as usize);
    let mg = m / group;
    let oh = (h + pb[0] + pe[0] - (kh - 1) * d[0] - 1) / s[0] + 1;
    let ow = (wd + pb[1] + pe[1] - (kw - 1) * d[1] - 1) / s[1] + 1;
    let mut y = vec![0f64; n * m * oh * ow];
    for ni in 0..n {
        for mi in 0..m {
            let g = mi / mg;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = b.map_or(0.0, |b| b.to_f64()[mi]);
                    for ci in 0..cg {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * s[0] + ky * d[0]) as i64 - pb[0] as i64;
                                let ix = (ox * s[1] + kx * d[1]) as i64 - pb[1] as i64;
                                if iy < 0 || ix < 0 || iy >= h as i64 || ix >= wd as i64 {
                                    continue;
                                }
                                let xi = ((ni * c + g * cg + ci) * h + iy as usize) * wd + ix as usize;
                                acc += xv[xi] * wv[((mi * cg + ci) * kh + ky) * kw + kx];
                            }
                        }
                    }
                    y[((ni * m + mi) * oh + oy) * ow + ox] = acc;
                }
            }
        }
    }
    (vec![n as i64, m as i64, oh as i64, ow as i64], y)
}

/// Naive 2-D transposed convolution in f64 (scatter form).
fn naive_conv_transpose2d(x: &HostTensor, w: &HostTensor, s: [usize; 2], pb: [usize; 2], group: usize) -> Vec<f64> {
    let (xv, wv) = (x.to_f64(), w.to_f64());
    let [n, c, h, wd] = [0, 1, 2, 3].map(|i| x.shape[i] as usize);
    let [_, mg, kh, kw] = [0, 1, 2, 3].map(|i| w.shape[i] as usize);
    let (cg, m) = (c / group, mg * group);
    let oh = s[0] * (h - 1) + kh - 2 * pb[0];
    let ow = s[1] * (wd - 1) + kw - 2 * pb[1];
    let mut y = vec![0f64; n * m * oh * ow];
    for ni in 0..n {
        for ci in 0..c {
            let g = ci / cg;
            for iy in 0..h {
                for ix in 0..wd {
                    let xval = xv[((ni * c + ci) * h + iy) * wd + ix];
                    for mi in 0..mg {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let oy = (iy * s[0] + ky) as i64 - pb[0] as i64;
                                let ox = (ix * s[1] + kx) as i64 - pb[1] as i64;
                                if oy < 0 || ox < 0 || oy >= oh as i64 || ox >= ow as i64 {
                                    continue;
                                }
                                let yi = ((ni * m + g * mg + mi) * oh + oy as usize) * ow + ox as usize;
                                y[yi] += xval * wv[((ci * mg + mi) * kh + ky) * kw + kx];
                            }
                        }
                    }
                }
            }
        }
    }
    y
}

fn naive_matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut y = vec![0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            for j in 0..n {
                y[i * n + j] += a[i * k + p] * b[p * n + j];
            }
        }
    }
    y
}

fn transpose(v: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    (0..cols * rows).map(|i| v[(i % rows) * cols + i / rows]).collect()
}

#[test]
fn large_convolutions_match_naive_loops() {
    // (x, w, bias, strides, dilations, pads begin, pads end, group): batch-split threads,
    // column-split threads, depthwise, pointwise, direct loops, im2col in several chunks.
    type Case<'a> = (&'a [i64], &'a [i64], bool, [usize; 2], [usize; 2], [usize; 2], [usize; 2], usize);
    let cases: &[Case] = &[
        (&[2, 16, 20, 18], &[32, 16, 3, 3], true, [1, 2], [1, 2], [1, 1], [1, 1], 1),
        (&[1, 32, 24, 24], &[48, 32, 3, 3], false, [1, 1], [1, 1], [1, 1], [1, 1], 1),
        (&[2, 96, 32, 32], &[96, 1, 3, 3], true, [1, 1], [1, 1], [1, 1], [1, 1], 96),
        (&[1, 64, 62, 62], &[2, 64, 3, 3], false, [1, 1], [1, 1], [1, 1], [1, 1], 1),
        (&[1, 32, 40, 40], &[48, 32, 1, 1], true, [1, 1], [1, 1], [0, 0], [0, 0], 1),
        (&[1, 4, 120, 120], &[3, 4, 3, 3], true, [1, 1], [1, 1], [1, 1], [1, 1], 1),
        (&[1, 64, 30, 30], &[8, 64, 3, 3], true, [1, 1], [1, 1], [1, 1], [1, 1], 1),
        (&[1, 8, 61, 57], &[8, 1, 3, 3], false, [2, 2], [2, 1], [2, 1], [2, 1], 8),
        (&[3, 12, 17, 19], &[12, 3, 5, 3], true, [2, 3], [1, 2], [2, 0], [1, 3], 4),
        // Direct loops over padded planes: strides, dilations, wide pads, two channels
        // per group in and out.
        (&[1, 6, 9, 11], &[6, 1, 3, 3], true, [3, 2], [2, 3], [4, 5], [3, 2], 6),
        (&[2, 6, 13, 10], &[6, 2, 3, 2], true, [1, 2], [1, 1], [0, 1], [2, 0], 3),
        (&[1, 4, 7, 5], &[4, 1, 1, 3], false, [1, 3], [1, 1], [0, 2], [0, 0], 4),
    ];
    for (i, &(xs, ws, bias, s, d, pb, pe, group)) in cases.iter().enumerate() {
        let (x, w, b) = (rnd(xs, 1 + i as u64), rnd(ws, 100 + i as u64), rnd(&[ws[0]], 200 + i as u64));
        let b = bias.then_some(&b);
        let at = attrs(&[
            ("strides", ints(&[s[0] as i64, s[1] as i64])),
            ("dilations", ints(&[d[0] as i64, d[1] as i64])),
            ("pads", ints(&[pb[0] as i64, pb[1] as i64, pe[0] as i64, pe[1] as i64])),
            ("group", AttrValue::Int(group as i64)),
        ]);
        let got = run("Conv", &[Some(&x), Some(&w), b], &at).unwrap();
        let (shape, want) = naive_conv2d(&x, &w, b, s, d, pb, pe, group);
        assert_eq!(got[0].shape, shape, "case {i}");
        assert_close(&format!("conv case {i}"), &got[0].to_f64(), &want);
    }
}

#[test]
fn large_transposed_convolutions_match_naive_loops() {
    type Case<'a> = (&'a [i64], &'a [i64], [usize; 2], [usize; 2], usize);
    let cases: &[Case] = &[
        (&[1, 16, 12, 12], &[16, 8, 4, 4], [2, 2], [1, 1], 1),
        (&[2, 32, 16, 16], &[32, 8, 3, 3], [2, 1], [1, 0], 2),
        (&[1, 8, 9, 7], &[8, 1, 3, 3], [1, 2], [0, 1], 8),
        (&[1, 4, 40, 40], &[4, 16, 3, 3], [1, 1], [0, 0], 1),
    ];
    for (i, &(xs, ws, s, pb, group)) in cases.iter().enumerate() {
        let (x, w) = (rnd(xs, 10 + i as u64), rnd(ws, 20 + i as u64));
        let at = attrs(&[
            ("strides", ints(&[s[0] as i64, s[1] as i64])),
            ("pads", ints(&[pb[0] as i64, pb[1] as i64, pb[0] as i64, pb[1] as i64])),
            ("group", AttrValue::Int(group as i64)),
        ]);
        let got = run("ConvTranspose", &[Some(&x), Some(&w)], &at).unwrap();
        assert_close(
            &format!("conv_transpose case {i}"),
            &got[0].to_f64(),
            &naive_conv_transpose2d(&x, &w, s, pb, group),
        );
    }
}

#[test]
fn large_matrix_products_match_naive_loops() {
    // (m, k, n): packed with row-split threads, few rows (AXPY) with column-split threads,
    // matrix-vector, odd sizes around the block edges.
    for (i, &(m, k, n)) in [(150, 200, 170), (2, 3000, 400), (300, 500, 1), (97, 257, 35), (1, 7, 1)].iter().enumerate()
    {
        let (a, b) = (rnd(&[m, k], 30 + i as u64), rnd(&[k, n], 40 + i as u64));
        let got = run("MatMul", &[Some(&a), Some(&b)], &Attrs::default()).unwrap();
        let want = naive_matmul(&a.to_f64(), &b.to_f64(), m as usize, k as usize, n as usize);
        assert_close(&format!("matmul {m}x{k}x{n}"), &got[0].to_f64(), &want);
    }
    // Batched, split over batches.
    let (a, b) = (rnd(&[8, 40, 60], 50), rnd(&[8, 60, 70], 51));
    let got = run("MatMul", &[Some(&a), Some(&b)], &Attrs::default()).unwrap()[0].to_f64();
    let (av, bv) = (a.to_f64(), b.to_f64());
    for bi in 0..8 {
        let want = naive_matmul(&av[bi * 2400..][..2400], &bv[bi * 4200..][..4200], 40, 60, 70);
        assert_close(&format!("batch {bi}"), &got[bi * 2800..][..2800], &want);
    }
    // Gemm with both transposes (strided packing), alpha, beta and a row bias.
    let (m, k, n) = (40usize, 300usize, 120usize);
    let (a, b, c) = (rnd(&[k as i64, m as i64], 60), rnd(&[n as i64, k as i64], 61), rnd(&[n as i64], 62));
    let at = attrs(&[
        ("transA", AttrValue::Int(1)),
        ("transB", AttrValue::Int(1)),
        ("alpha", AttrValue::Float(0.5)),
        ("beta", AttrValue::Float(-2.0)),
    ]);
    let got = run("Gemm", &[Some(&a), Some(&b), Some(&c)], &at).unwrap();
    let mut want = naive_matmul(&transpose(&a.to_f64(), k, m), &transpose(&b.to_f64(), n, k), m, k, n);
    let cv = c.to_f64();
    for (j, v) in want.iter_mut().enumerate() {
        *v = 0.5 * *v - 2.0 * cv[j % n];
    }
    assert_close("gemm", &got[0].to_f64(), &want);
}

#[test]
fn large_pools_split_over_planes() {
    let x = rnd(&[4, 8, 64, 64], 80);
    let at = attrs(&[("kernel_shape", ints(&[3, 3])), ("pads", ints(&[1, 1, 1, 1])), ("strides", ints(&[1, 1]))]);
    let mx = run("MaxPool", &[Some(&x)], &at).unwrap();
    let avg = run("AveragePool", &[Some(&x)], &at).unwrap();
    let xv = x.to_f64();
    let (ymax, yind, yavg) = (mx[0].to_f64(), mx[1].to_i64(), avg[0].to_f64());
    for plane in 0..32 {
        for oy in 0..64i64 {
            for ox in 0..64i64 {
                let (mut best, mut at, mut sum, mut count) = (f64::NEG_INFINITY, -1i64, 0.0, 0.0);
                for iy in (oy - 1).max(0)..(oy + 2).min(64) {
                    for ix in (ox - 1).max(0)..(ox + 2).min(64) {
                        let i = plane * 4096 + (iy * 64 + ix) as usize;
                        if xv[i] > best {
                            (best, at) = (xv[i], i as i64);
                        }
                        sum += xv[i];
                        count += 1.0;
                    }
                }
                let o = plane * 4096 + (oy * 64 + ox) as usize;
                assert_eq!((ymax[o], yind[o]), (best, at), "max at {o}");
                assert!((yavg[o] - sum / count).abs() < 1e-5, "average at {o}");
            }
        }
    }
}

#[test]
fn f32_views_need_alignment() {
    let buf: Vec<u8> = 1.5f32.to_le_bytes().iter().chain(&2.5f32.to_le_bytes()).copied().collect();
    match f32_view(&buf) {
        Some(v) => assert_eq!(v, [1.5, 2.5]),
        None => assert_ne!(buf.as_ptr() as usize % 4, 0),
    }
    let start = (4 - buf.as_ptr() as usize % 4) % 4 + 1;
    assert!(f32_view(&buf[start..start + 4]).is_none(), "a misaligned view");
    assert!(f32_view(&buf[..3]).is_none(), "a partial element");
    // Misaligned bytes still convert (by copy) and results are stored back correctly.
    let mut t = HostTensor::from_f32(&[2], &[0.0, 0.0]).unwrap();
    fill_f32(&mut t.view_mut(), |v| {
        v.copy_from_slice(&[3.0, -1.0]);
        Ok(())
    })
    .unwrap();
    assert_eq!(t.to_f64(), [3.0, -1.0]);
}

#[test]
fn empty_dims_and_zero_inner_sizes() {
    // Batch 0, K = 0 (the product is 0, Gemm keeps beta * C), 1-D against 1-D.
    let y = run("Conv", &[Some(&gen(&[0, 2, 5, 5], 1)), Some(&gen(&[3, 2, 3, 3], 2))], &Attrs::default()).unwrap();
    assert_eq!(y[0].shape, vec![0, 3, 3, 3]);
    let y = run("MatMul", &[Some(&gen(&[2, 0], 1)), Some(&gen(&[0, 3], 2))], &Attrs::default()).unwrap();
    assert_eq!((y[0].shape.clone(), y[0].to_f64()), (vec![2, 3], vec![0.0; 6]));
    let c = gen(&[3], 3);
    let y = run("Gemm", &[Some(&gen(&[2, 0], 1)), Some(&gen(&[0, 3], 2)), Some(&c)], &Attrs::default()).unwrap();
    assert_eq!(y[0].to_f64(), [c.to_f64(), c.to_f64()].concat());
    let y = run("GlobalAveragePool", &[Some(&gen(&[0, 4, 3, 3], 1))], &Attrs::default()).unwrap();
    assert_eq!(y[0].shape, vec![0, 4, 1, 1]);
    let y = run("MaxPool", &[Some(&gen(&[1, 0, 4, 4], 1))], &attrs(&[("kernel_shape", ints(&[2, 2]))])).unwrap();
    assert_eq!(y[1].shape, vec![1, 0, 3, 3]);
}

#[test]
fn attribute_validation_errors() {
    let conv = OpId::from_name("Conv").unwrap().def();
    let bad = |at: &[(&str, AttrValue)]| conv.check_attrs(&attrs(at)).unwrap_err();
    assert!(bad(&[("pads", ints(&[1, -1, 1, 1]))]).contains("pads must be non-negative"));
    assert!(bad(&[("pads", ints(&[1, 1, 1]))]).contains("even count"));
    assert!(bad(&[("strides", ints(&[1, 0]))]).contains("strides must be positive"));
    assert!(bad(&[("dilations", ints(&[-2]))]).contains("dilations must be positive"));
    assert!(bad(&[("kernel_shape", ints(&[3, 0]))]).contains("kernel_shape must be positive"));
    assert!(bad(&[("group", AttrValue::Int(0))]).contains("group must be at least 1"));
    assert!(bad(&[("auto_pad", AttrValue::Str("SAME".into()))]).contains("auto_pad must be NOTSET"));
    let e = bad(&[("auto_pad", AttrValue::Str("SAME_UPPER".into())), ("pads", ints(&[1, 1, 1, 1]))]);
    assert!(e.contains("cannot be combined with auto_pad"), "{e}");
    let e = bad(&[("strides", ints(&[1, 1, 1])), ("kernel_shape", ints(&[3, 3]))]);
    assert_eq!(e, "strides has 3 values but kernel_shape has 2 values");
    let e = bad(&[("dilations", ints(&[1])), ("pads", ints(&[0, 0, 0, 0]))]);
    assert_eq!(e, "pads has 4 values (2 spatial dims) but dilations has 1 values");
    assert!(bad(&[("alpha", AttrValue::Float(1.0))]).contains("has no attribute `alpha`"));
    let max_pool = OpId::from_name("MaxPool").unwrap().def();
    let bad = |at: &[(&str, AttrValue)]| max_pool.check_attrs(&attrs(at)).unwrap_err();
    assert_eq!(bad(&[("strides", ints(&[2, 2]))]), "kernel_shape is required");
    let k = ("kernel_shape", ints(&[2, 2]));
    assert!(bad(&[k.clone(), ("storage_order", AttrValue::Int(2))]).contains("storage_order must be 0"));
    assert!(bad(&[k.clone(), ("ceil_mode", AttrValue::Int(2))]).contains("ceil_mode must be 0 or 1"));
    let avg = OpId::from_name("AveragePool").unwrap().def();
    assert!(avg.check_attrs(&attrs(&[k, ("count_include_pad", AttrValue::Int(-1))])).unwrap_err().contains("0 or 1"));
    let gemm = OpId::from_name("Gemm").unwrap().def();
    assert!(gemm.check_attrs(&attrs(&[("transB", AttrValue::Int(3))])).unwrap_err().contains("transB must be 0 or 1"));
    let ct = OpId::from_name("ConvTranspose").unwrap().def();
    assert!(ct.check_attrs(&attrs(&[("output_padding", ints(&[-1]))])).unwrap_err().contains("non-negative"));
    assert!(ct.check_attrs(&attrs(&[("output_shape", ints(&[4, -4]))])).unwrap_err().contains("non-negative"));
    for op in ["Conv", "ConvTranspose", "MaxPool", "AveragePool", "Gemm"] {
        let def = OpId::from_name(op).unwrap().def();
        let ok = if op.ends_with("Pool") { attrs(&[("kernel_shape", ints(&[2]))]) } else { Attrs::default() };
        def.check_attrs(&ok).unwrap_or_else(|e| panic!("{op}: {e}"));
    }
}

#[test]
fn shape_errors_name_the_problem() {
    let x8 = gen(&[1, 8, 5, 5], 1);
    let e = err("Conv", &[&x8, &gen(&[6, 2, 3, 3], 2)], &[("group", AttrValue::Int(3))]);
    assert_eq!(e, "group 3 does not divide 8 input channels");
    let e = err("Conv", &[&x8, &gen(&[8, 4, 3, 3], 2)], &[("group", AttrValue::Int(4))]);
    assert_eq!(
        e,
        "weight is f32[8, 4, 3, 3] but the input has 8 channels / group 4 → expected 2 input channels per group"
    );
    let e = err("Conv", &[&x8, &gen(&[6, 2, 3, 3], 2)], &[("group", AttrValue::Int(4))]);
    assert_eq!(e, "group 4 does not divide 6 output channels (the weight is f32[6, 2, 3, 3])");
    let e = err("Conv", &[&gen(&[1, 4, 8, 8], 1), &gen(&[16, 3, 3, 3], 2)], &[]);
    assert_eq!(
        e,
        "weight is f32[16, 3, 3, 3] but the input has 4 channels / group 1 → expected 4 input channels per group"
    );
    let e = err(
        "Conv",
        &[&x8, &gen(&[6, 4, 3, 3], 2)],
        &[("group", AttrValue::Int(2)), ("kernel_shape", ints(&[3, 3, 3]))],
    );
    assert_eq!(e, "kernel_shape has 3 dims but the input has 2 spatial dims");
    let e = err("Conv", &[&x8, &gen(&[6, 8, 3, 3], 2)], &[("kernel_shape", ints(&[3, 2]))]);
    assert!(e.contains("kernel_shape [3, 2] does not match the weight f32[6, 8, 3, 3]"), "{e}");
    let e = err("Conv", &[&x8, &gen(&[6, 8, 3, 3], 2), &gen(&[5], 3)], &[]);
    assert_eq!(e, "bias is f32[5] but there are 6 output channels (expected f32[6])");
    let e = err("Conv", &[&x8, &gen(&[6, 8, 7, 3], 2)], &[]);
    assert!(e.contains("spatial dim 0: the kernel (7) spans 7 but the input is only 5 wide"), "{e}");
    let e = err("Conv", &[&x8, &gen(&[6, 8, 3, 3], 2)], &[("dilations", ints(&[3, 1]))]);
    assert!(e.contains("the kernel (3 with dilation 3) spans 7"), "{e}");
    let e = err("Conv", &[&x8, &gen(&[6, 8, 3], 2)], &[]);
    assert!(e.contains("with the rank of the input"), "{e}");
    let e = err("Conv", &[&gen(&[8, 5], 1), &gen(&[6, 8], 2)], &[]);
    assert!(e.contains("rank 3 or more"), "{e}");
    let e = err("Conv", &[&x8, &gen(&[6, 8, 3, 3], 2)], &[("strides", ints(&[1, 1, 1]))]);
    assert_eq!(e, "strides has 3 values but the input has 2 spatial dims");
    let e = err("Conv", &[&x8, &gen(&[6, 8, 3, 3], 2)], &[("pads", ints(&[1, 1]))]);
    assert!(e.contains("pads has 2 values but the input has 2 spatial dims (expected 4"), "{e}");
    let half = HostTensor::zeros(DType::F16, &[1, 8, 5, 5]).unwrap();
    let e = err("Conv", &[&half, &gen(&[6, 8, 3, 3], 2)], &[]);
    assert_eq!(e, "W is f32[6, 8, 3, 3] but X is f16: they must have one dtype");
    let e = err("Conv", &[&HostTensor::zeros(DType::I32, &[1, 8, 5, 5]).unwrap(), &gen(&[6, 8, 3, 3], 2)], &[]);
    assert_eq!(e, "X must be f32, f16, bf16 or f64, found i32[1, 8, 5, 5]");
    let e = run("Conv", &[Some(&x8), None], &Attrs::default()).unwrap_err();
    assert_eq!(e, "the input W is required");

    let e = err("ConvTranspose", &[&x8, &gen(&[4, 2, 3, 3], 2)], &[]);
    assert!(e.contains("weight is f32[4, 2, 3, 3] but the input has 8 channels"), "{e}");
    let e = err("ConvTranspose", &[&x8, &gen(&[8, 2, 3, 3], 2)], &[("group", AttrValue::Int(3))]);
    assert_eq!(e, "group 3 does not divide 8 input channels");
    let e = err("ConvTranspose", &[&x8, &gen(&[8, 2, 3, 3], 2)], &[("output_padding", ints(&[1, 1]))]);
    assert!(
        e.contains("output_padding 1 on spatial dim 0 must be smaller than the stride (1) or the dilation (1)"),
        "{e}"
    );
    let e = err("ConvTranspose", &[&x8, &gen(&[8, 2, 3, 3], 2)], &[("pads", ints(&[4, 0, 4, 0]))]);
    assert!(e.contains("remove more than the 7 positions"), "{e}");
    let e = err("ConvTranspose", &[&x8, &gen(&[8, 2, 3, 3], 2)], &[("output_shape", ints(&[4, 4, 4]))]);
    assert!(e.contains("output_shape has 3 values"), "{e}");

    let e = err("MaxPool", &[&x8], &[("kernel_shape", ints(&[2]))]);
    assert_eq!(e, "kernel_shape has 1 dims but the input has 2 spatial dims");
    let e = err("AveragePool", &[&x8], &[("kernel_shape", ints(&[6, 2]))]);
    assert!(e.contains("spatial dim 0: the kernel (6) spans 6 but the input is only 5 wide"), "{e}");

    let e = err("Gemm", &[&gen(&[2, 3], 1), &gen(&[4, 5], 2)], &[]);
    assert!(e.contains("inner dimensions 3 and 4 differ"), "{e}");
    let e = err("Gemm", &[&gen(&[2, 3, 1], 1), &gen(&[3, 5], 2)], &[]);
    assert_eq!(e, "A must be a matrix (rank 2), found f32[2, 3, 1]");
    let e = err("Gemm", &[&gen(&[2, 3], 1), &gen(&[3, 5], 2), &gen(&[2], 3)], &[]);
    assert_eq!(e, "C is f32[2] but must broadcast to the output [2, 5]");
    let e = err("MatMul", &[&gen(&[2, 3], 1), &gen(&[4], 2)], &[]);
    assert!(e.contains("inner dimensions 3 and 4 differ"), "{e}");
    let e = err("MatMul", &[&gen(&[2, 2, 3], 1), &gen(&[3, 3, 4], 2)], &[]);
    assert!(e.contains("the batch dims of A f32[2, 2, 3] and B f32[3, 3, 4] do not broadcast"), "{e}");
    let scalar = HostTensor::from_f32(&[], &[1.0]).unwrap();
    assert!(err("MatMul", &[&scalar, &gen(&[3], 2)], &[]).contains("rank 1 or more"));
    assert!(err("GlobalMaxPool", &[&gen(&[4], 1)], &[]).contains("rank 2 or more"));
}

#[test]
fn kernels_reject_mismatched_outputs_and_data() {
    let (x, w) = (gen(&[1, 2, 4, 4], 1), gen(&[3, 2, 3, 3], 2));
    let def = OpId::from_name("Conv").unwrap().def();
    let mut outs = vec![HostTensor::zeros(DType::F32, &[1, 3, 3, 3]).unwrap()];
    let e = (def.op.id().host_kernel().unwrap())(&[Some(&x), Some(&w)], &Attrs::default(), &mut outs).unwrap_err();
    assert!(e.contains("expected f32[1, 3, 2, 2]"), "{e}");
    assert!((def.op.id().host_kernel().unwrap())(&[Some(&x), Some(&w)], &Attrs::default(), &mut []).is_err());
    let broken = HostTensor { dtype: DType::F32, shape: vec![1, 2, 4, 4], data: vec![0; 12] };
    let mut outs = vec![HostTensor::zeros(DType::F32, &[1, 3, 2, 2]).unwrap()];
    assert!((def.op.id().host_kernel().unwrap())(&[Some(&broken), Some(&w)], &Attrs::default(), &mut outs).is_err());
    // MaxPool without its optional Indices output.
    let def = OpId::from_name("MaxPool").unwrap().def();
    let mut outs = vec![HostTensor::zeros(DType::F32, &[1, 2, 2, 2]).unwrap()];
    (def.op.id().host_kernel().unwrap())(&[Some(&x)], &attrs(&[("kernel_shape", ints(&[3, 3]))]), &mut outs).unwrap();
}

#[test]
fn extreme_attributes_never_panic() {
    let big = i64::MAX;
    let x = gen(&[1, 2, 5, 5], 1);
    let w = gen(&[2, 2, 3, 3], 2);
    let lists: &[&[(&str, AttrValue)]] = &[
        &[("strides", ints(&[big, big]))],
        &[("dilations", ints(&[big, 1]))],
        &[("pads", ints(&[big, big, big, big]))],
        &[("pads", ints(&[big, 0, 0, 0])), ("strides", ints(&[big, 1]))],
        &[("group", AttrValue::Int(big))],
        &[("kernel_shape", ints(&[big, big]))],
        &[("output_shape", ints(&[big, big]))],
        &[("output_shape", ints(&[0, 0]))],
        &[("output_padding", ints(&[big - 1, 0])), ("strides", ints(&[big, 1]))],
        &[("auto_pad", AttrValue::Str("SAME_UPPER".into())), ("strides", ints(&[big, big]))],
        &[("auto_pad", AttrValue::Str("SAME_LOWER".into())), ("dilations", ints(&[big, big]))],
        &[("ceil_mode", AttrValue::Int(1)), ("strides", ints(&[big, 3])), ("pads", ints(&[0, 2, big, 2]))],
        &[("count_include_pad", AttrValue::Int(1)), ("pads", ints(&[4, 4, 4, 4]))],
        &[
            ("count_include_pad", AttrValue::Int(1)),
            ("kernel_shape", ints(&[big / 2, big / 2])),
            ("pads", ints(&[0, 0, big / 2, big / 2])),
            ("strides", ints(&[big, big])),
        ],
    ];
    for at in lists {
        for op in ["Conv", "ConvTranspose"] {
            let _ = run(op, &[Some(&x), Some(&w), None], &attrs(at));
        }
        let mut with_k = at.to_vec();
        if !at.iter().any(|(k, _)| *k == "kernel_shape") {
            with_k.push(("kernel_shape", ints(&[3, 3])));
        }
        for op in ["MaxPool", "AveragePool"] {
            let _ = run(op, &[Some(&x)], &attrs(&with_k));
        }
    }
    // Windows entirely inside the padding: max is -inf with index -1, the average 0/0.
    let y =
        run("MaxPool", &[Some(&x)], &attrs(&[("kernel_shape", ints(&[2, 2])), ("pads", ints(&[3, 3, 0, 0]))])).unwrap();
    assert_eq!((y[0].to_f64()[0], y[1].to_i64()[0]), (f64::NEG_INFINITY, -1));
    // No channels at all: any group divides 0.
    let (x0, w0) = (gen(&[2, 0, 5, 5], 1), gen(&[0, 0, 3, 3], 2));
    for op in ["Conv", "ConvTranspose"] {
        let y = run(op, &[Some(&x0), Some(&w0)], &attrs(&[("group", AttrValue::Int(big))])).unwrap();
        assert_eq!(y[0].numel(), 0, "{op}");
    }
    let huge = HostTensor { dtype: DType::F32, shape: vec![big, big, 0], data: vec![] };
    for op in ["GlobalAveragePool", "GlobalMaxPool"] {
        assert!(run(op, &[Some(&huge)], &Attrs::default()).unwrap_err().contains("too large"));
    }
    assert!(run("MatMul", &[Some(&huge), Some(&gen(&[0, 2], 1))], &Attrs::default()).is_err());
    let neg = HostTensor { dtype: DType::F32, shape: vec![-1, 2], data: vec![] };
    assert!(run("Gemm", &[Some(&neg), Some(&gen(&[2, 2], 1))], &Attrs::default()).unwrap_err().contains("negative"));
}

/// `t` converted to dtype `d` (the generated values are exact in every float dtype).
fn cast(t: &HostTensor, d: DType) -> HostTensor {
    let mut o = HostTensor::zeros(d, &t.shape).unwrap();
    for (c, v) in o.data.chunks_exact_mut(d.size()).zip(t.to_f64()) {
        store_f64(d, v, c);
    }
    o
}

/// Conv, ConvTranspose, Gemm and MatMul on f16, bf16 and f64 give the f32 results
/// (exact here: small dyadic values), rounded to the dtype.
#[test]
fn products_on_narrow_and_wide_floats() {
    let cases: Vec<(&str, Vec<HostTensor>, Attrs)> = vec![
        (
            "Conv",
            vec![gen(&[1, 4, 5, 5], 1), gen(&[6, 2, 3, 3], 2), gen(&[6], 3)],
            attrs(&[("group", AttrValue::Int(2)), ("pads", ints(&[1, 0, 1, 2]))]),
        ),
        (
            "Conv",
            vec![gen(&[2, 3, 7], 4), gen(&[2, 3, 2], 5)],
            attrs(&[("strides", ints(&[2])), ("dilations", ints(&[2]))]),
        ),
        (
            "ConvTranspose",
            vec![gen(&[1, 2, 3, 3], 6), gen(&[2, 3, 2, 2], 7), gen(&[3], 8)],
            attrs(&[("strides", ints(&[2, 2]))]),
        ),
        (
            "Gemm",
            vec![gen(&[4, 3], 9), gen(&[5, 4], 10), gen(&[5], 11)],
            attrs(&[
                ("transA", AttrValue::Int(1)),
                ("transB", AttrValue::Int(1)),
                ("alpha", AttrValue::Float(0.5)),
                ("beta", AttrValue::Float(2.0)),
            ]),
        ),
        ("MatMul", vec![gen(&[2, 1, 3, 4], 12), gen(&[3, 4, 5], 13)], Attrs::default()),
        ("MatMul", vec![gen(&[4], 14), gen(&[4, 3], 15)], Attrs::default()),
    ];
    for (op, ins, a) in &cases {
        let refs: Vec<Option<&HostTensor>> = ins.iter().map(Some).collect();
        let want = run(op, &refs, a).unwrap().remove(0);
        for d in [DType::F16, DType::BF16, DType::F64] {
            let cins: Vec<HostTensor> = ins.iter().map(|t| cast(t, d)).collect();
            let crefs: Vec<Option<&HostTensor>> = cins.iter().map(Some).collect();
            let got = run(op, &crefs, a).unwrap_or_else(|e| panic!("{op} {d}: {e}")).remove(0);
            assert_eq!(got, cast(&want, d), "{op} {a} on {d}");
        }
    }
    // Mixed dtypes are an error naming both.
    let e = err("MatMul", &[&gen(&[2, 2], 1), &cast(&gen(&[2, 2], 2), DType::F64)], &[]);
    assert_eq!(e, "B is f64[2, 2] but A is f32: they must have one dtype");
}

#[test]
fn max_pool_column_major_indices_and_bytes() {
    // A 1x1x2x3 plane: the max of the 2x2 windows (stride 1) is at (1, 1) and (0, 2).
    let x = HostTensor::from_f32(&[1, 1, 2, 3], &[1.0, 2.0, 9.0, 4.0, 8.0, 3.0]).unwrap();
    let a = |so: i64| attrs(&[("kernel_shape", ints(&[2, 2])), ("storage_order", AttrValue::Int(so))]);
    let row = run("MaxPool", &[Some(&x)], &a(0)).unwrap();
    assert_eq!(row[1].to_i64(), [4, 2]);
    let col = run("MaxPool", &[Some(&x)], &a(1)).unwrap();
    assert_eq!(col[0], row[0]);
    // Column-major: (h, w) -> h + w * 2.
    assert_eq!(col[1].to_i64(), [3, 4]);
    let xb = cast(&x, DType::U8);
    let outs = run("MaxPool", &[Some(&xb)], &a(1)).unwrap();
    assert_eq!(outs[0], cast(&row[0], DType::U8));
    assert_eq!(outs[1].to_i64(), [3, 4]);
    let e = err("MaxPool", &[&cast(&x, DType::I32)], &[("kernel_shape", ints(&[2, 2]))]);
    assert_eq!(e, "X must be f32, f16, bf16, u8 or i8, found i32[1, 1, 2, 3]");
}
