//! A device written against the runtime's `Device` trait alone: it keeps its blocks in
//! vectors and records every allocation, view, read and write it is asked for. The nine
//! model-zoo CNNs, compiled and run on it with no-op kernels, ask it for exactly what their
//! memory plans say: one block per pool of the plan's size, one view per planned tensor,
//! one write per input and one read per output, and nothing more on the next inference
//! (the runtime's pool serves it). No line of the interpreter names this device.

use rxvm::compile::{compile, Options};
use rxvm::session::ramp;
use rxvm::vm::bytecode::Instr;
use rxvm::vm::device::{AllocSource, DeviceCaps};
use rxvm::vm::memory::{Backend, Runtime};
use rxvm::vm::runtime::backend::{Device, DeviceBlock, ViewHandle, ViewKind};
use rxvm::vm::types::{DType, ImageLayout};
use rxvm::vm::{Kernels, Vm};
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::c_void;
use std::rc::{Rc, Weak};
use std::sync::Arc;

/// What the device was asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Record {
    /// Sizes of the blocks asked for, in order.
    allocs: Vec<u64>,
    /// Blocks handed back with `release` (a storage died while its runtime lived).
    releases: u64,
    /// Blocks dropped: released ones, and the runtime's pooled ones when it goes.
    freed: u64,
    views: u64,
    reads: u64,
    read_bytes: u64,
    writes: u64,
    write_bytes: u64,
}

/// The device's state, shared with the test that reads the record.
#[derive(Default)]
struct State {
    record: RefCell<Record>,
    blocks: RefCell<HashMap<usize, Weak<RefCell<Vec<u8>>>>>,
    next: Cell<usize>,
}

struct Recording(Rc<State>);

/// A block owns its bytes; the device finds them by the id in a view's handle.
struct Block {
    id: usize,
    capacity: u64,
    _bytes: Rc<RefCell<Vec<u8>>>,
    state: Rc<State>,
}

impl Drop for Block {
    fn drop(&mut self) {
        self.state.record.borrow_mut().freed += 1;
    }
}

impl DeviceBlock for Block {
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

impl Recording {
    fn bytes(&self, h: &ViewHandle) -> Rc<RefCell<Vec<u8>>> {
        self.0.blocks.borrow()[&(h.mem as usize)].upgrade().expect("a view of a live block")
    }
}

impl Device for Recording {
    fn alloc(&self, size: u64) -> Result<(Box<dyn DeviceBlock>, AllocSource), String> {
        self.0.record.borrow_mut().allocs.push(size);
        let id = self.0.next.get() + 1;
        self.0.next.set(id);
        let bytes = Rc::new(RefCell::new(vec![0; size as usize]));
        self.0.blocks.borrow_mut().insert(id, Rc::downgrade(&bytes));
        Ok((Box::new(Block { id, capacity: size, _bytes: bytes, state: self.0.clone() }), AllocSource::Fresh))
    }

    fn release(&self, block: Box<dyn DeviceBlock>) {
        let b = block.into_any().downcast::<Block>().expect("a block of this device");
        assert!(self.0.blocks.borrow()[&b.id].strong_count() == 1, "a released block is live");
        self.0.record.borrow_mut().releases += 1;
    }

    fn view(
        &self,
        block: &dyn DeviceBlock,
        offset: u64,
        _: DType,
        image: Option<&ImageLayout>,
    ) -> Result<ViewHandle, String> {
        let b = block.as_any().downcast_ref::<Block>().ok_or("a block of another device")?;
        self.0.record.borrow_mut().views += 1;
        let kind = if image.is_some() { ViewKind::Image } else { ViewKind::Buffer };
        Ok(ViewHandle { mem: b.id as *mut c_void, offset, kind })
    }

    fn read(&self, h: &ViewHandle, image: Option<&ImageLayout>, out: &mut [u8]) -> Result<(), String> {
        assert!(image.is_none(), "the compiled CNNs use buffer views only");
        let bytes = self.bytes(h);
        let at = h.offset as usize;
        out.copy_from_slice(&bytes.borrow()[at..at + out.len()]);
        let mut r = self.0.record.borrow_mut();
        r.reads += 1;
        r.read_bytes += out.len() as u64;
        Ok(())
    }

    fn write(&self, h: &ViewHandle, image: Option<&ImageLayout>, data: &[u8]) -> Result<(), String> {
        assert!(image.is_none(), "the compiled CNNs use buffer views only");
        let bytes = self.bytes(h);
        let at = h.offset as usize;
        bytes.borrow_mut()[at..at + data.len()].copy_from_slice(data);
        let mut r = self.0.record.borrow_mut();
        r.writes += 1;
        r.write_bytes += data.len() as u64;
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The record's change from `before` to `after`.
fn since(before: &Record, after: &Record) -> Record {
    Record {
        allocs: after.allocs[before.allocs.len()..].to_vec(),
        releases: after.releases - before.releases,
        freed: after.freed - before.freed,
        views: after.views - before.views,
        reads: after.reads - before.reads,
        read_bytes: after.read_bytes - before.read_bytes,
        writes: after.writes - before.writes,
        write_bytes: after.write_bytes - before.write_bytes,
    }
}

#[test]
fn a_device_of_the_trait_alone_is_asked_for_what_the_plans_say() {
    let Some(dir) = rxvm_test_support::models::light_dir() else {
        assert!(std::env::var_os("RXVM_REQUIRE_ONNX_DATA").is_none(), "the ONNX test data is missing");
        eprintln!("skipping: the ONNX test data is missing (scripts/fetch-onnx-data.sh)");
        return;
    };
    for name in rxvm_test_support::models::NAMES {
        let graph = rxvm::onnx::read_model(&dir.join(format!("light_{name}.onnx"))).expect("the model reads");
        let shapes: Vec<Vec<i64>> =
            graph.inputs.iter().map(|i| i.dims.iter().map(|d| d.fixed().unwrap_or(1)).collect()).collect();
        let input = ramp(graph.inputs[0].dtype, &shapes[0]).expect("an input");
        let compiled = compile(&graph, &shapes, &Options::default()).expect("compiles");
        let plan = compiled.report.clone();
        let module = Arc::new(compiled.module);
        let main = module.func_by_name("main").expect("@main");
        let code = &module.funcs[main].code;
        let alloc_tensors = code.iter().filter(|i| matches!(i, Instr::AllocTensor { .. })).count() as u64;
        let outputs = module.funcs[main].results.len() as u64;

        let state = Rc::new(State::default());
        let caps = DeviceCaps { name: "recording".into(), ..DeviceCaps::host() };
        let rt = Runtime::with_backends(vec![(caps, Backend::Device(Box::new(Recording(state.clone()))))]);
        let mut vm = Vm::with_runtime(module.clone(), rt).expect("a VM");
        vm.kernels = Kernels::Noop;
        let snapshot = || state.record.borrow().clone();

        // The constants: one block, one view and one write each.
        let made = snapshot();
        let nconst = module.consts.len() as u64;
        assert_eq!((made.allocs.len() as u64, made.views, made.writes), (nconst, nconst, nconst), "{name}: constants");

        let x = vm.upload(&input).expect("upload");
        let uploaded = since(&made, &snapshot());
        assert_eq!(uploaded.allocs, vec![input.data.len() as u64], "{name}: the input's block");
        assert_eq!((uploaded.writes, uploaded.write_bytes), (1, input.data.len() as u64), "{name}: the input's write");

        for run in 0..2 {
            let before = snapshot();
            let results = vm.invoke_values(main, vec![x.clone()]).expect("runs");
            let inferred = since(&before, &snapshot());
            // The first inference asks for one block per pool of the plan, of its size;
            // the second gets them back from the runtime's pool and asks for none.
            let mut pools: Vec<u64> = plan.pools.iter().filter(|p| !p.parameter).map(|p| p.bytes).collect();
            let mut got = inferred.allocs.clone();
            pools.sort_unstable();
            got.sort_unstable();
            if run == 0 {
                assert_eq!(got, pools, "{name}: the blocks of the first inference are the plan's pools");
                assert_eq!(got.iter().sum::<u64>(), plan.arena_bytes, "{name}: arena bytes");
            } else {
                assert!(got.is_empty(), "{name}: a second inference asks for no memory, got {got:?}");
            }
            // One view per tensor the plan places, every inference; no kernel moves bytes.
            assert_eq!(inferred.views, alloc_tensors, "{name}: views");
            assert!(inferred.views >= plan.tensors as u64, "{name}: every planned tensor has a view");
            assert_eq!((inferred.writes, inferred.freed), (0, 0), "{name}: inference writes and frees nothing");
            // Reading the outputs back: one read each.
            let before = snapshot();
            let mut out_bytes = 0;
            for r in &results {
                out_bytes += vm.download(r).expect("downloads").data.len() as u64;
            }
            let read = since(&before, &snapshot());
            assert_eq!((read.reads, read.read_bytes), (outputs, out_bytes), "{name}: outputs read back");
        }
        drop(x);
        drop(vm);
        let end = snapshot();
        assert_eq!(end.freed, end.allocs.len() as u64, "{name}: every block is freed with the runtime");
        // Constants are never pooled: their blocks are handed back when they die.
        assert_eq!(end.releases, nconst, "{name}: the constants' blocks are released");
        assert!(state.blocks.borrow().values().all(|b| b.strong_count() == 0), "{name}: no block outlives the runtime");
    }
}

/// The builtins' host loops address host memory: on a device that has no kernels for
/// them, a builtin is refused with the device's name instead of touching its blocks.
#[test]
fn builtins_on_a_device_without_their_kernels_are_refused() {
    let src = "func @main() {\n  %s = alloc_storage 64\n  %t = alloc_tensor %s, 0, f32[4]\n  call @vm.fill(%t, 1.5)\n  ret\n}\n";
    let module = Arc::new(rxvm_asm::assemble(src, "fill.rxa").expect("assembles"));
    let state = Rc::new(State::default());
    let caps = DeviceCaps { name: "recording".into(), ..DeviceCaps::host() };
    let rt = Runtime::with_backends(vec![(caps, Backend::Device(Box::new(Recording(state.clone()))))]);
    let mut vm = Vm::with_runtime(module, rt).expect("a VM");
    let e = vm.invoke("main", &[]).expect_err("refused").to_string();
    assert!(e.contains("@vm.fill on device `recording`: the device has no builtin kernels"), "{e}");
    assert_eq!(state.record.borrow().writes, 0, "nothing was written");
}

/// The same for operators and user kernels: the interpreter hands a device its operands
/// through the trait, and a device without kernels refuses them with its name.
#[test]
fn operators_and_user_kernels_on_a_device_without_kernels_are_refused() {
    let run = |src: &str| {
        let module = Arc::new(rxvm_asm::assemble(src, "op.rxa").unwrap_or_else(|d| panic!("{}", d.render())));
        let state = Rc::new(State::default());
        let caps = DeviceCaps { name: "recording".into(), ..DeviceCaps::host() };
        let rt = Runtime::with_backends(vec![(caps, Backend::Device(Box::new(Recording(state.clone()))))]);
        let mut vm = Vm::with_runtime(module, rt).expect("a VM");
        let e = vm.invoke("main", &[]).expect_err("refused").to_string();
        assert_eq!(state.record.borrow().writes, 0, "nothing was written: {e}");
        e
    };
    let relu = "func @main() {\n  %s = alloc_storage 64\n  %x = alloc_tensor %s, 0, f32[4]\n  \
                %y = alloc_tensor %s, 16, f32[4]\n  call @onnx.Relu(%x) -> (%y)\n  ret\n}\n";
    let e = run(relu);
    assert!(e.contains("@onnx.Relu has no kernel yet on `recording`"), "{e}");
    let user = "kernel @k = opencl(\"k\", \"__kernel void k(__global float* x) { x[0] = 1.0f; }\")\n\
                func @main() {\n  %s = alloc_storage 64\n  %x = alloc_tensor %s, 0, f32[4]\n  \
                call @cl.k(%x) global [1]\n  ret\n}\n";
    let e = run(user);
    assert!(e.contains("@cl.k: cannot run the OpenCL C kernel `k`"), "{e}");
}
