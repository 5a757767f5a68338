//! The OpenCL device on three real runtimes: PoCL (images, no image2d-from-buffer), the
//! Intel CPU runtime (image2d-from-buffer, 64-texel pitch) and Oclgrind (a simulator that
//! reports invalid memory accesses). `scripts/setup-opencl.sh` installs them and
//! `source scripts/opencl-env.sh` selects them. A platform named in
//! `RXVM_REQUIRE_OPENCL` (e.g. `pocl,intel,oclgrind`, as CI sets it) must be present;
//! others are skipped when absent.

use rxvm::asm::{assemble, assemble_file};
use rxvm::vm::memory::DeviceSpec;
use rxvm::vm::opencl::{find_device, ClDeviceInfo};
use rxvm::vm::types::{Dim, Type};
use rxvm::vm::{DeviceCaps, HostTensor, HostValue, Module, Vm};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rxvm_test_support::devices::opencl_platform as platform;

fn vm_on(m: &Arc<Module>, info: Option<&ClDeviceInfo>) -> Vm {
    let spec = match info {
        Some(i) => DeviceSpec::OpenCl(i.clone()),
        None => DeviceSpec::Host(DeviceCaps::host()),
    };
    let mut vm = Vm::with_devices(m.clone(), vec![spec]).expect("a VM");
    vm.capture_output();
    vm
}

fn inputs(m: &Module) -> Vec<HostValue> {
    let f = &m.funcs[m.func_by_name("main").expect("@main")];
    f.params
        .iter()
        .enumerate()
        .map(|(i, t)| match t {
            Type::Int => HostValue::Int(6),
            Type::Float => HostValue::Float(0.25),
            Type::Shape => HostValue::Shape(vec![2, 3]),
            Type::Tensor { dtype, dims } => {
                let shape: Vec<i64> = dims.iter().map(|d| if let Dim::Known(v) = d { *v } else { 3 }).collect();
                HostValue::Tensor(HostTensor::random(*dtype, &shape, 11 + i as u64).expect("input"))
            }
            other => panic!("@main takes a {other}"),
        })
        .collect()
}

/// Runs `@main`; the results and what it printed.
fn run(m: &Arc<Module>, info: Option<&ClDeviceInfo>) -> Result<(Vec<HostValue>, String), String> {
    let mut vm = vm_on(m, info);
    let r = vm.invoke("main", &inputs(m)).map_err(|e| e.to_string())?;
    Ok((r, vm.take_output()))
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-6 * a.abs().max(b.abs()) || (a.is_nan() && b.is_nan())
}

fn assert_same(name: &str, host: &[HostValue], dev: &[HostValue]) {
    assert_eq!(host.len(), dev.len(), "{name}");
    for (h, d) in host.iter().zip(dev) {
        match (h, d) {
            (HostValue::Tensor(h), HostValue::Tensor(d)) if h.dtype.is_float() => {
                assert_eq!((h.dtype, &h.shape), (d.dtype, &d.shape), "{name}");
                for (x, y) in h.to_f64().iter().zip(d.to_f64()) {
                    assert!(close(*x, y), "{name}: host {x} vs device {y}");
                }
            }
            (HostValue::Float(x), HostValue::Float(y)) => assert!(close(*x, *y), "{name}: {x} vs {y}"),
            _ => assert_eq!(h, d, "{name}"),
        }
    }
}

fn programs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut v = Vec::new();
    for dir in ["examples", "tests/programs"] {
        for e in std::fs::read_dir(root.join(dir)).expect("dir") {
            let p = e.expect("entry").path();
            if p.extension().is_some_and(|x| x == "rxa") {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

/// The error a device without image2d-from-buffer gives when bytes written through one
/// kind of view are read through the other.
const COMPAT_REFUSAL: &str =
    "has no cl_khr_image2d_from_buffer, so texture views do not share memory with buffer views";

#[test]
fn every_program_matches_the_host_on_each_platform() {
    for name in ["intel", "pocl"] {
        let Some(info) = platform(name) else { continue };
        for p in programs() {
            let m = Arc::new(assemble_file(&p).unwrap_or_else(|d| panic!("{}", d.render())));
            let label = format!("{} on {name}", p.display());
            let (host, host_out) = match run(&m, None) {
                Ok(r) => r,
                // A program with its own OpenCL kernel runs only on OpenCL devices; its
                // results are checked by `user_kernel_example_computes_saxpy`.
                Err(e) if e.contains("is an OpenCL kernel") => {
                    run(&m, Some(&info)).unwrap_or_else(|e| panic!("{label}: {e}"));
                    continue;
                }
                Err(e) => panic!("{label} (host): {e}"),
            };
            match run(&m, Some(&info)) {
                Ok((dev, dev_out)) => {
                    assert_same(&label, &host, &dev);
                    assert_eq!(host_out, dev_out, "{label}: printed output");
                }
                // texture_alias.rxa reads image-written bytes through a buffer view.
                Err(e) if !info.caps.image_from_buffer && p.ends_with("texture_alias.rxa") => {
                    assert!(e.contains(COMPAT_REFUSAL), "{label}: {e}");
                }
                Err(e) => panic!("{label}: {e}"),
            }
        }
    }
}

/// Writes through one view and reads the same bytes through the other: a buffer view of
/// two full pitched rows (64 texels each) and a 30x2 RGBA image view at the same offset.
const ALIAS: &str = r#"
func @main() -> (f32[1, 2, 30, 4], f32[2, 64, 4]) {
  %s = alloc_storage 4096
  %buf = alloc_tensor %s, 0, f32[2, 64, 4]
  %img = alloc_tensor %s, 0, f32[1, 2, 30, 4], scope "global.texture"
  call @vm.iota(%buf, 0.0, 1.0)            ; write through the buffer
  %o1s = alloc_storage 960
  %o1 = alloc_tensor %o1s, 0, f32[1, 2, 30, 4]
  call @vm.copy(%img, %o1)                 ; read through the image
  call @vm.iota(%img, 1000.0, 1.0)         ; write through the image
  %o2s = alloc_storage 2048
  %o2 = alloc_tensor %o2s, 0, f32[2, 64, 4]
  call @vm.copy(%buf, %o2)                 ; read through the buffer
  ret %o1, %o2
}
"#;

fn check_alias_results(label: &str, r: &[HostValue]) {
    let (HostValue::Tensor(img), HostValue::Tensor(buf)) = (&r[0], &r[1]) else { panic!("{label}: two tensors") };
    let img = img.to_f64();
    let buf = buf.to_f64();
    for y in 0..2 {
        for x in 0..30 {
            for c in 0..4 {
                let i = (y * 30 + x) * 4 + c;
                let b = (y * 64 + x) * 4 + c;
                assert_eq!(img[i], b as f64, "{label}: image texel ({x}, {y}) channel {c} sees buffer element {b}");
                assert_eq!(buf[b], 1000.0 + i as f64, "{label}: buffer element {b} sees image element {i}");
            }
        }
    }
}

#[test]
fn buffer_and_image_views_share_bytes_with_a_padded_pitch() {
    let m = Arc::new(assemble(ALIAS, "alias.rxa").unwrap_or_else(|d| panic!("{}", d.render())));
    // The host emulates the same pitch (64 texels), so it is the reference.
    let (host, _) = run(&m, None).expect("host run");
    check_alias_results("host", &host);
    if let Some(intel) = platform("intel") {
        assert!(intel.caps.image_from_buffer && intel.caps.image_pitch_align_px == 64, "{:?}", intel.caps);
        let mut vm = vm_on(&m, Some(&intel));
        let r = vm.invoke("main", &[]).expect("intel run");
        check_alias_results("intel", &r);
        let stats: std::collections::HashMap<_, _> = vm.cl_stats().into_iter().collect();
        assert_eq!(stats["compat_images"], 0);
        assert!(stats["cl_images_created"] >= 1);
    }
    if let Some(pocl) = platform("pocl") {
        assert!(!pocl.caps.image_from_buffer);
        let e = run(&m, Some(&pocl)).expect_err("PoCL cannot alias images and buffers");
        assert!(e.contains(COMPAT_REFUSAL), "{e}");
        assert!(e.contains("written through a buffer view"), "{e}");
    }
}

/// Sub-buffer views (offset 128), a (buffer, offset) view (offset 32), image views and
/// kernels: everything a second run could create again.
const STEADY: &str = r#"
func @main(%x: f32[16]) -> f32[16] {
  %s = alloc_storage 8192
  %a = alloc_tensor %s, 128, f32[16]
  %b = alloc_tensor %s, 32, f32[16]
  %t = alloc_tensor %s, 4096, f32[1, 1, 4, 4], scope "global.texture"
  call @vm.relu(%x, %a)
  call @vm.add(%a, %x, %b)
  call @vm.copy(%b, %t)
  %out = alloc_storage 64
  %y = alloc_tensor %out, 0, f32[16]
  call @vm.copy(%t, %y)
  kill %s
  ret %y
}
"#;

#[test]
fn a_second_run_creates_no_cl_mem_objects() {
    let m = Arc::new(assemble(STEADY, "steady.rxa").unwrap_or_else(|d| panic!("{}", d.render())));
    let (host, _) = run(&m, None).expect("host");
    for name in ["intel", "pocl"] {
        let Some(info) = platform(name) else { continue };
        let mut vm = vm_on(&m, Some(&info));
        let args = inputs(&m);
        let first = vm.invoke("main", &args).expect("first run");
        assert_same(name, &host, &first);
        let before: std::collections::HashMap<_, _> = vm.cl_stats().into_iter().collect();
        assert!(before["cl_sub_buffers_created"] >= 1, "{name}: {before:?}");
        let second = vm.invoke("main", &args).expect("second run");
        assert_eq!(first, second);
        let after: std::collections::HashMap<_, _> = vm.cl_stats().into_iter().collect();
        for k in
            ["cl_buffers_created", "cl_sub_buffers_created", "cl_images_created", "cl_kernels_built", "live_cl_mem"]
        {
            assert_eq!(before[k], after[k], "{name}: {k} changed on the second run ({before:?} -> {after:?})");
        }
        assert!(vm.stats().pool_hits >= 3, "{name}: {:?}", vm.stats());
        vm.release_pool();
        let released: std::collections::HashMap<_, _> = vm.cl_stats().into_iter().collect();
        assert!(released["live_cl_mem"] < after["live_cl_mem"], "{name}: releasing the pool frees cl_mem objects");
    }
}

fn run_err(src: &str, info: &ClDeviceInfo) -> String {
    let m = Arc::new(assemble(src, "err.rxa").unwrap_or_else(|d| panic!("{}", d.render())));
    run(&m, Some(info)).expect_err("must fail")
}

#[test]
fn device_limits_give_clear_errors() {
    let Some(intel) = platform("intel") else { return };
    // 64 meets the image base-address alignment (64 B) but not the sub-buffer alignment
    // (CL_DEVICE_MEM_BASE_ADDR_ALIGN, 128 B) that an image at a non-zero offset needs.
    let e = run_err(
        "func @main() {\n  %s = alloc_storage 8192\n  %o = int 64\n  %t = alloc_tensor %s, %o, f32[1, 2, 30, 4], scope \"global.texture\"\n  ret\n}\n",
        &intel,
    );
    assert!(
        e.contains("requires sub-buffer offsets to be multiples of CL_DEVICE_MEM_BASE_ADDR_ALIGN (128 bytes)"),
        "{e}"
    );
    let e = run_err(
        "func @main() {\n  %s = alloc_storage 1024\n  %n = int 300\n  %t = alloc_tensor %s, 0, f32[%n]\n  ret\n}\n",
        &intel,
    );
    assert!(e.contains("ends past the end of %s (1024 bytes)"), "{e}");
    let e = run_err(
        "func @main() {\n  %s = alloc_storage 1048576\n  %w = int 16385\n  %t = alloc_tensor %s, 0, f32[1, 1, %w, 4], scope \"global.texture\"\n  ret\n}\n",
        &intel,
    );
    assert!(e.contains("image of 16385x1 texels") && e.contains("(16384x16384)"), "{e}");
    let e = run_err(
        "func @main() {\n  %g = int 1073741824\n  %n = call @vm.imul(%g, 64)\n  %s = alloc_storage %n\n  ret\n}\n",
        &intel,
    );
    assert!(e.contains("exceeds the largest allocation of device `Intel(R) OpenCL"), "{e}");
    let e = run_err("func @main() {\n  %s = alloc_storage 64, align 256\n  ret\n}\n", &intel);
    assert!(e.contains("alignment 256 is too large: device"), "{e}");
}

#[test]
fn out_of_device_memory_is_an_error() {
    // Oclgrind's device has 128 MiB: two live 100 MB storages do not fit.
    let Some(grind) = platform("oclgrind") else { return };
    assert!(grind.caps.global_mem < 200_000_000, "{:?}", grind.caps);
    let e =
        run_err("func @main() {\n  %a = alloc_storage 100000000\n  %b = alloc_storage 100000000\n  ret\n}\n", &grind);
    assert!(e.contains("out of device memory on `Oclgrind"), "{e}");
}

#[test]
fn oclgrind_finds_no_invalid_accesses_in_the_kernels() {
    let Some(_) = platform("oclgrind") else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (file, inputs) in [
        ("examples/mlp.rxa", vec!["x=random:2"]),
        ("examples/tiny.rxa", vec!["x=random:3"]),
        ("examples/storage_reuse.rxa", vec!["x=random:4"]),
        ("examples/calls.rxa", vec!["x=random:5"]),
        ("examples/dynamic_loop.rxa", vec!["n=3"]),
        ("examples/texture_cnn.rxa", vec!["x=random:1", "w=random:2", "b=random:3", "dw=random:4"]),
    ] {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_rxvm"));
        cmd.current_dir(root).args(["run", file, "--device", "opencl:oclgrind"]);
        for i in &inputs {
            cmd.args(["--input", i]);
        }
        let out = cmd.output().expect("run rxvm");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{file}: {stderr}");
        for bad in ["Invalid", "invalid read", "invalid write", "out-of-bounds", "Uninitialized"] {
            assert!(!stderr.contains(bad), "{file}: Oclgrind reported `{bad}`:\n{stderr}");
        }
        let host = std::process::Command::new(env!("CARGO_BIN_EXE_rxvm"))
            .current_dir(root)
            .args(["run", file])
            .args(inputs.iter().flat_map(|i| ["--input", i]))
            .output()
            .expect("run rxvm");
        let (h, d) = (String::from_utf8_lossy(&host.stdout), String::from_utf8_lossy(&out.stdout));
        let words = |s: &str| {
            s.split(|c: char| c.is_whitespace() || ",[]".contains(c))
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let (hw, dw) = (words(&h), words(&d));
        assert_eq!(hw.len(), dw.len(), "{file}:\n{h}\n{d}");
        for (a, b) in hw.iter().zip(&dw) {
            match (a.parse::<f64>(), b.parse::<f64>()) {
                (Ok(x), Ok(y)) => assert!(close(x, y), "{file}: host {x} vs Oclgrind {y}"),
                _ => assert_eq!(a, b, "{file}"),
            }
        }
    }
}

/// Not a test on its own: with `RXVM_OOB_PROBE=1` it runs a kernel that writes past its
/// buffer on Oclgrind, for the test below to watch from outside (Oclgrind reports on the
/// process's stderr).
#[test]
fn oob_probe() {
    if std::env::var("RXVM_OOB_PROBE").is_err() {
        return;
    }
    let info = find_device("oclgrind").expect("oclgrind");
    let dev = rxvm::vm::opencl::ClDevice::open(&info).expect("open");
    let (block, _) = dev.alloc(64).expect("64 bytes");
    let k = dev.kernel("__kernel void k(__global float* p) { p[get_global_id(0) + 100] = 1.0f; }").expect("build");
    let _ = dev.launch(k, &[rxvm::vm::opencl::KernelArg::Mem(block.raw())], 1);
}

/// Oclgrind does report invalid accesses here (so a clean run below means something).
#[test]
fn oclgrind_reports_an_out_of_bounds_write() {
    let Some(_) = platform("oclgrind") else { return };
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args(["--exact", "oob_probe", "--nocapture", "--test-threads=1"])
        .env("RXVM_OOB_PROBE", "1")
        .output()
        .expect("run the probe");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Invalid write"), "Oclgrind did not report the probe's write:\n{stderr}");
}

/// Every operator kernel, on the ONNX cases' shapes, under Oclgrind: same results as the
/// reference outputs and no invalid memory access reported.
#[test]
fn operator_kernels_run_clean_under_oclgrind() {
    let Some(_) = platform("oclgrind") else { return };
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/onnx/wheel/onnx/backend/test/data");
    if !data.join("pytorch-converted").is_dir() {
        assert!(std::env::var("RXVM_REQUIRE_ONNX_DATA").is_err(), "ONNX test data is missing");
        return;
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rxvm"))
        .arg("conformance")
        .arg(data.join("pytorch-converted"))
        .arg(data.join("pytorch-operator"))
        .args(["--device", "opencl:oclgrind"])
        .output()
        .expect("run rxvm");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(stdout.ends_with("117 passed, 0 failed, 0 skipped\n"), "{stdout}\n{stderr}");
    assert!(!stderr.contains("Invalid") && !stderr.contains("invalid"), "Oclgrind reported:\n{stderr}");
}

/// `y[i] = a * x[i] + y[i]` as a user kernel with a 1-D global range.
fn saxpy_module() -> Module {
    use rxvm::vm::builder::{ModuleBuilder, Operand};
    use rxvm::vm::types::{DType, Scope};
    let mut mb = ModuleBuilder::new("saxpy");
    let k = mb.kernel(
        "saxpy",
        "saxpy",
        "__kernel void saxpy(__global const float* x, __global float* y, float a, long n) {\n  long i = get_global_id(0);\n  if (i < n) y[i] = a * x[i] + y[i];\n}\n",
    );
    let t = Type::Tensor { dtype: DType::F32, dims: vec![Dim::Known(8)] };
    let mut f = mb.function("main", vec![t.clone()], vec![t]);
    let x = f.param(0);
    let s = f.alloc_storage(Operand::Int(32), None, 0, Scope::Global);
    let y = f.alloc_tensor(s, Operand::Int(0), DType::F32, &[Operand::Int(8)], Scope::Global);
    f.call_builtin("fill", &[y.into(), Operand::Float(1.0)]).expect("fill");
    f.call_kernel(k, &[x.into(), y.into(), Operand::Float(2.0), Operand::Int(8)], &[Operand::Int(8)]);
    f.ret(&[y.into()]);
    mb.add_function(f);
    mb.build().expect("valid")
}

#[test]
fn user_kernels_run_on_opencl_and_are_refused_on_the_host() {
    let m = Arc::new(saxpy_module());
    let e = run(&m, None).expect_err("the host cannot run OpenCL C");
    assert!(e.contains("@cl.saxpy is an OpenCL kernel, but its tensors are on `host`"), "{e}");
    for name in ["intel", "pocl", "oclgrind"] {
        let Some(info) = platform(name) else { continue };
        let (out, _) = run(&m, Some(&info)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let HostValue::Tensor(y) = &out[0] else { panic!("a tensor") };
        let HostValue::Tensor(x) = &inputs(&m)[0] else { panic!("a tensor") };
        let want: Vec<f64> = x.to_f64().iter().map(|v| ((2.0 * *v as f32) + 1.0) as f64).collect();
        let got = y.to_f64();
        for (g, w) in got.iter().zip(&want) {
            assert!(close(*g, *w), "{name}: {got:?} vs {want:?}");
        }
    }
}

#[test]
fn user_kernel_example_computes_saxpy() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rxvm = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_rxvm")).current_dir(root).args(args).output().expect("rxvm")
    };
    let out = rxvm(&["run", "examples/user_kernel.rxa", "--input", "x=zeros"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("@cl.saxpy is an OpenCL kernel"), "{err}");
    let x = std::env::temp_dir().join(format!("rxvm-saxpy-{}.npy", std::process::id()));
    let xs: Vec<f32> = (0..8).map(|i| i as f32 - 2.5).collect();
    rxvm::npy::write_npy(&x, &HostTensor::from_f32(&[8], &xs).expect("x")).expect("write x");
    let input = format!("x={}", x.display());
    for name in ["intel", "pocl"] {
        if platform(name).is_none() {
            continue;
        }
        let out = rxvm(&["run", "examples/user_kernel.rxa", "--input", &input, "--device", &format!("opencl:{name}")]);
        let text = String::from_utf8_lossy(&out.stdout);
        // y = 2 x + 1
        assert_eq!(
            text,
            "result 0: f32[8] [-4.0, -2.0, 0.0, 2.0, 4.0, 6.0, 8.0, 10.0]\n",
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A storage reused by textures of different sizes (the compiler's image slots on PoCL):
/// a smaller texture written over the start of a larger one is the last writer of those
/// bytes, so reading it back is allowed; bytes only the larger one wrote stay its own.
const SLOT_REUSE: &str = r#"
func @main() -> (f32[1, 1, 2, 2, 4], f32[1, 1, 4, 4, 4]) {
  %s = alloc_storage 4096
  %big = alloc_tensor %s, 0, f32[1, 1, 4, 4, 4], scope "global.texture"
  call @vm.fill(%big, 1.0)
  %o1s = alloc_storage 256
  %o1 = alloc_tensor %o1s, 0, f32[1, 1, 4, 4, 4]
  call @vm.copy(%big, %o1)                  ; the big texture reads its own bytes
  kill %big
  %small = alloc_tensor %s, 0, f32[1, 1, 2, 2, 4], scope "global.texture"
  call @vm.fill(%small, 2.0)
  %o2s = alloc_storage 64
  %o2 = alloc_tensor %o2s, 0, f32[1, 1, 2, 2, 4]
  call @vm.copy(%small, %o2)                ; the small one reads what it wrote
  ret %o2, %o1
}
"#;

#[test]
fn a_smaller_texture_reusing_a_storage_is_the_last_writer_of_its_bytes() {
    let m = Arc::new(assemble(SLOT_REUSE, "slot.rxa").unwrap_or_else(|d| panic!("{}", d.render())));
    let (host, _) = run(&m, None).expect("host run");
    for dev in ["pocl", "intel"].into_iter().filter_map(platform) {
        let mut vm = vm_on(&m, Some(&dev));
        let r = vm.invoke("main", &[]).unwrap_or_else(|e| panic!("{}: {e}", dev.caps.name));
        assert_eq!(r, host, "{}", dev.caps.name);
    }
    let HostValue::Tensor(small) = &host[0] else { panic!("a tensor") };
    assert!(small.to_f64().iter().all(|&v| v == 2.0));
}

/// A user kernel that writes past its tensor: under Oclgrind the report fails the run
/// (`rxvm` points Oclgrind's log at a file it reads after each launch), naming the kernel
/// and the invalid write, instead of exiting 0 with the report lost on stderr.
#[test]
fn an_invalid_access_reported_by_oclgrind_fails_the_run() {
    let Some(_) = platform("oclgrind") else { return };
    let dir = std::env::temp_dir().join(format!("rxvm-oob-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("oob.rxa");
    std::fs::write(
        &file,
        "kernel @k = opencl(\"k\", \"__kernel void k(__global float* y) { y[get_global_id(0) + 100000] = 1.0f; }\")\n\n\
         func @main() -> f32[8] {\n  %s = alloc_storage 32\n  %y = alloc_tensor %s, 0, f32[8]\n  \
         call @vm.fill(%y, 0.0)\n  call @cl.k(%y) global [8]\n  ret %y\n}\n",
    )
    .expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rxvm"))
        .arg("run")
        .arg(&file)
        .args(["--device", "opencl:oclgrind"])
        .env_remove("OCLGRIND_LOG")
        .output()
        .expect("run rxvm");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the run succeeded:\n{stderr}");
    assert!(stderr.contains("@cl.k: Oclgrind reported an invalid operation in this kernel"), "{stderr}");
    assert!(stderr.contains("Invalid write of size 4"), "{stderr}");
    assert!(stderr.contains("more reports like it"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
