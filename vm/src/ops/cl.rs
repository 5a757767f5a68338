//! OpenCL kernels for operators. Each family registers `(Operator, ClFn)` pairs in its
//! own table (`elementwise_cl::CL`, ...), resolved once into a table indexed by operator
//! (`OpId::cl_kernel`; `ops::cl_fn` by name for tools and tests). A `ClFn`
//! receives the operands as device buffers ([`ClTensor`]: a `cl_mem`, an element offset,
//! dtype, shape), the inputs' [`TensorInfo`] (with host values for small integer inputs such
//! as shapes, pads or indices, read back before the call), the attributes, and the output
//! tensors, whose dtype and shape the interpreter has already checked against the
//! operator's shape inference. It builds its OpenCL C through [`ClCtx::run`], which
//! compiles each distinct source once per device and caches it.

use super::{Attrs, TensorInfo};
use crate::ir::types::DType;
use crate::opencl::device::{ClBlock, ClDevice, ClView, KernelArg, ViewKind};
use opencl3::types::cl_mem;

/// An operand on the device, always a buffer view: `mem` plus an offset in elements.
#[derive(Clone, Debug)]
pub struct ClTensor {
    pub mem: cl_mem,
    pub offset: u64,
    pub dtype: DType,
    pub shape: Vec<i64>,
}

impl ClTensor {
    pub fn numel(&self) -> u64 {
        self.shape.iter().map(|&d| d.max(0) as u64).product()
    }

    /// The two kernel arguments of this operand: the buffer and its element offset.
    pub fn args(&self) -> [KernelArg; 2] {
        [KernelArg::Mem(self.mem), KernelArg::U64(self.offset)]
    }
}

/// A `long` / `ulong` kernel argument.
pub fn long_arg(v: i64) -> KernelArg {
    KernelArg::U64(v as u64)
}

/// A `float` kernel argument.
pub fn float_arg(v: f32) -> KernelArg {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&v.to_ne_bytes());
    KernelArg::Bytes(b, 4)
}

/// What a kernel launcher gets: the device.
pub struct ClCtx<'a> {
    pub dev: &'a ClDevice,
}

impl ClCtx<'_> {
    /// Builds `source` (its kernel must be named `k`; cached per device) and runs it over
    /// `global` work-items with `args`.
    pub fn run(&self, source: &str, args: &[KernelArg], global: usize) -> Result<(), String> {
        let k = self.dev.kernel(source)?;
        self.dev.launch(k, args, global)
    }

    /// As [`ClCtx::run`] over a 1- to 3-dimensional range (`get_global_id(0..3)`).
    pub fn run_nd(&self, source: &str, args: &[KernelArg], global: &[usize]) -> Result<(), String> {
        let k = self.dev.kernel(source)?;
        self.dev.launch_nd(k, args, global)
    }

    /// As [`ClCtx::run_nd`] in work-groups of `local` work-items (for local memory).
    pub fn run_groups(
        &self,
        source: &str,
        args: &[KernelArg],
        global: &[usize],
        local: &[usize],
    ) -> Result<(), String> {
        let k = self.dev.kernel(source)?;
        self.dev.launch_groups(k, args, global, Some(local))
    }

    /// True when the device supports double precision (`cl_khr_fp64`).
    pub fn has_fp64(&self) -> bool {
        self.dev.has_fp64
    }
}

/// Work-items per work-group along a range's first dimension of `n` items, where
/// neighbouring work-items touch neighbouring elements: a multiple of 16 (a vector of
/// floats on AVX-512; on a GPU, whole quarter-waves), at most 64, so that a group is whole
/// vectors whatever `n` is. Left to pick, a runtime must take a divisor of the range, and
/// 196 (14x14), 729 (27x27) or 3025 (55x55) have no factor 16: Intel's compiler then ran
/// part of every group as scalar code. Launches pad the range to whole groups, and the
/// work-items past `n` return.
pub fn vector_group(n: i64) -> usize {
    (n.clamp(1, 64) as usize).div_ceil(16) * 16
}

/// Launches an operator on the device.
pub type ClFn = fn(&ClCtx, &[Option<ClTensor>], &[Option<TensorInfo>], &Attrs, &[ClTensor]) -> Result<(), String>;

/// What a kernel launcher returns.
pub(crate) type Res = Result<(), String>;
/// The inference view of a call's inputs (their values where the interpreter read them).
pub(crate) type Infos<'a, 'b> = &'a [Option<TensorInfo<'b>>];

/// A device scratch buffer of at least `bytes`, released on drop.
pub(crate) struct Scratch<'a> {
    ctx: &'a ClCtx<'a>,
    block: Option<ClBlock>,
}

impl<'a> Scratch<'a> {
    pub(crate) fn new(ctx: &'a ClCtx<'a>, bytes: u64) -> Result<Scratch<'a>, String> {
        let (block, _) = ctx.dev.alloc(bytes.max(8)).map_err(|e| e.to_string())?;
        Ok(Scratch { ctx, block: Some(block) })
    }

    pub(crate) fn arg(&self) -> KernelArg {
        KernelArg::Mem(self.block.as_ref().map(ClBlock::raw).unwrap_or(std::ptr::null_mut()))
    }

    /// A tensor of `dtype` and `shape` at the start of the buffer.
    pub(crate) fn tensor(&self, dtype: DType, shape: &[i64]) -> ClTensor {
        let mem = self.block.as_ref().map(ClBlock::raw).unwrap_or(std::ptr::null_mut());
        ClTensor { mem, offset: 0, dtype, shape: shape.to_vec() }
    }
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        if let Some(b) = self.block.take() {
            self.ctx.dev.release(b);
        }
    }
}

/// Allocates a device buffer holding `data` for the duration of `f`.
pub(crate) fn with_buffer<R>(
    ctx: &ClCtx,
    data: &[u8],
    f: impl FnOnce(KernelArg) -> Result<R, String>,
) -> Result<R, String> {
    let (block, _) = ctx.dev.alloc(data.len().max(8) as u64).map_err(|e| e.to_string())?;
    let view = ClView { mem: block.raw(), offset: 0, kind: ViewKind::Buffer };
    let r = if data.is_empty() { Ok(()) } else { ctx.dev.write(&view, None, data).map_err(|e| e.to_string()) };
    let r = r.and_then(|_| f(KernelArg::Mem(block.raw())));
    ctx.dev.release(block);
    r
}

/// Required input `i`, named `name` in the error.
pub(crate) fn input<'a>(ins: &'a [Option<ClTensor>], i: usize, name: &str) -> Result<&'a ClTensor, String> {
    ins.get(i).and_then(Option::as_ref).ok_or_else(|| format!("input {} ({name}) is required", i + 1))
}

/// Required output `i`.
pub(crate) fn output(outs: &[ClTensor], i: usize) -> Result<&ClTensor, String> {
    outs.get(i).ok_or_else(|| format!("output {} is required", i + 1))
}

/// Input `i` has one of the `allowed` dtypes.
pub(crate) fn check_dtype(t: &ClTensor, i: usize, name: &str, allowed: &[DType]) -> Res {
    if allowed.contains(&t.dtype) {
        Ok(())
    } else {
        let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
        Err(format!("input {} ({name}) must be {} on OpenCL, found {}", i + 1, names.join(" or "), t.dtype))
    }
}

/// An output is of the inferred dtype and shape.
pub(crate) fn check_out(y: &ClTensor, dtype: DType, shape: &[i64]) -> Res {
    if y.dtype != dtype || y.shape != shape {
        return Err(format!("output is {}{:?}, expected {dtype}{shape:?}", y.dtype, y.shape));
    }
    Ok(())
}

/// f64 tensors need a device with `cl_khr_fp64`.
pub(crate) fn need_fp64(ctx: &ClCtx, d: DType) -> Res {
    if d == DType::F64 && !ctx.has_fp64() {
        return Err("the device has no fp64 support (cl_khr_fp64), so it cannot compute f64 tensors".into());
    }
    Ok(())
}

/// The unsigned OpenCL type of an element of `d`'s width, for moving raw bits.
pub(crate) fn raw_type(d: DType) -> &'static str {
    match d.size() {
        1 => "uchar",
        2 => "ushort",
        4 => "uint",
        _ => "ulong",
    }
}

/// OpenCL C element type of a dtype (`half` elements are read with `vload_half`). `bf16`
/// is no OpenCL type but a marker, as `half` is one for the kernels that special-case it:
/// its buffers are `ushort` bit patterns ([`storage_type`]) read and written through
/// `crate::opencl::narrow`, so a kernel that does not handle bf16 fails to build rather
/// than compute on bit patterns. float8 elements are their `uchar` codes (storage only).
pub fn cl_type(d: DType) -> &'static str {
    match d {
        DType::BF16 => "bf16",
        DType::F8E4M3FN | DType::F8E5M2 | DType::F8E4M3FNUZ | DType::F8E5M2FNUZ | DType::F8E8M0 => "uchar",
        DType::F32 => "float",
        DType::F16 => "half",
        DType::F64 => "double",
        DType::I8 => "char",
        DType::I16 => "short",
        DType::I32 => "int",
        DType::I64 => "long",
        DType::U8 | DType::Bool => "uchar",
        DType::U16 => "ushort",
        DType::U32 => "uint",
        DType::U64 => "ulong",
    }
}

/// The OpenCL type a buffer of `d` is declared with: [`cl_type`], but `ushort` for bf16.
pub fn storage_type(d: DType) -> &'static str {
    storage_of(cl_type(d))
}

/// The OpenCL type a buffer of [`cl_type`] `t` is declared with (`ushort` for `bf16`).
pub fn storage_of(t: &str) -> &str {
    if t == "bf16" {
        "ushort"
    } else {
        t
    }
}

/// `#pragma` lines a source needs for `d` (fp64).
pub fn pragmas(d: DType) -> &'static str {
    if d == DType::F64 {
        "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    } else {
        ""
    }
}

/// Test support shared by the OpenCL operator tests: run one operator's kernel on device
/// copies of its inputs and read its outputs back.
#[cfg(test)]
pub(crate) mod testing {
    use super::{ClCtx, ClTensor};
    use crate::ir::host_tensor::HostTensor;
    use crate::opencl::device::{ClBlock, ClDevice, ClView, ViewKind};
    use crate::ops::cl_fn;
    use crate::ops::{Attrs, TensorInfo};

    /// The device the kernel unit tests run on: `RXVM_TEST_CL_DEVICE` (a platform or device
    /// name), else the first one; `None` (the tests skip) without OpenCL.
    pub fn device() -> Option<ClDevice> {
        let needle = std::env::var("RXVM_TEST_CL_DEVICE").unwrap_or_default();
        match crate::opencl::device::find_device(&needle) {
            Ok(info) => Some(ClDevice::open(&info).unwrap()),
            Err(e) => {
                eprintln!("skipping the OpenCL tests: {e}");
                None
            }
        }
    }

    /// A device copy of `t` at a byte offset of 64 (so kernels must honour the offset),
    /// filled with `fill` instead of `t`'s bytes when given.
    pub fn upload(dev: &ClDevice, t: &HostTensor, fill: Option<u8>) -> (ClBlock, ClTensor) {
        let (block, _) = dev.alloc(64 + t.data.len() as u64).unwrap();
        let v = dev.view(&block, 64, t.dtype, None).unwrap();
        if !t.data.is_empty() {
            let data = match fill {
                Some(b) => vec![b; t.data.len()],
                None => t.data.clone(),
            };
            dev.write(&v, None, &data).unwrap();
        }
        let ct =
            ClTensor { mem: v.mem, offset: v.offset / t.dtype.size() as u64, dtype: t.dtype, shape: t.shape.clone() };
        (block, ct)
    }

    /// Runs `name`'s kernel on `ins` (outputs shaped like `want`, pre-filled with 0xA5
    /// so unwritten bytes show) and returns each output's bytes.
    pub fn run_kernel(
        dev: &ClDevice,
        name: &str,
        ins: &[Option<HostTensor>],
        infos: &[Option<TensorInfo>],
        a: &Attrs,
        want: &[HostTensor],
    ) -> Vec<Vec<u8>> {
        let mut keep = Vec::new();
        let mut cl_ins = Vec::new();
        for t in ins {
            cl_ins.push(t.as_ref().map(|t| {
                let (b, ct) = upload(dev, t, None);
                keep.push(b);
                ct
            }));
        }
        let mut cl_outs = Vec::new();
        for t in want {
            let (b, ct) = upload(dev, t, Some(0xA5));
            keep.push(b);
            cl_outs.push(ct);
        }
        let f = cl_fn(name).unwrap_or_else(|| panic!("{name} has no kernel"));
        f(&ClCtx { dev }, &cl_ins, infos, a, &cl_outs).unwrap_or_else(|e| panic!("{name} {a} (OpenCL): {e}"));
        let outs = want
            .iter()
            .zip(&cl_outs)
            .map(|(w, o)| {
                let mut got = vec![0u8; w.data.len()];
                if !got.is_empty() {
                    let v = ClView { mem: o.mem, offset: o.offset * w.dtype.size() as u64, kind: ViewKind::Buffer };
                    dev.read(&v, got.len(), None, &mut got).unwrap();
                }
                got
            })
            .collect();
        for b in keep {
            dev.release(b);
        }
        outs
    }
}
