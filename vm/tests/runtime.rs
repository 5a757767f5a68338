//! The VM's memory model and run-time checks, driven through the Rust API
//! (`ModuleBuilder`), independent of the assembler.

use rxvm_vm::builder::{ModuleBuilder, Operand};
use rxvm_vm::bytecode::FuncId;
use rxvm_vm::module::ConstData;
use rxvm_vm::types::{DType, Dim, Scope, Type};
use rxvm_vm::{read_module, write_module, DeviceCaps, HostTensor, HostValue, Vm};
use std::sync::Arc;

fn f32s(dims: &[i64]) -> Type {
    Type::Tensor { dtype: DType::F32, dims: dims.iter().map(|&d| Dim::Known(d)).collect() }
}

fn int(v: i64) -> Operand {
    Operand::Int(v)
}

/// `main(n)`: allocate, view, fill and kill a storage of `size` bytes `n` times.
fn alloc_loop(size: i64) -> rxvm_vm::Module {
    let mut mb = ModuleBuilder::new("loop");
    let mut f = mb.function("main", vec![Type::Int], vec![]);
    let n = f.param(0);
    let i = f.int(0);
    let head = f.label();
    let body = f.label();
    let done = f.label();
    f.br(head);
    f.place(head);
    let more = f.call_builtin("ilt", &[i.into(), n.into()]).unwrap()[0];
    f.br_if(more, body, done);
    f.place(body);
    let s = f.alloc_storage(int(size), None, 0, Scope::Global);
    let t = f.alloc_tensor(s, int(0), DType::F32, &[int(size / 4)], Scope::Global);
    f.call_builtin("fill", &[t.into(), Operand::Float(1.0)]).unwrap();
    f.kill(t);
    f.kill(s);
    let next = f.call_builtin("iadd", &[i.into(), int(1)]).unwrap()[0];
    f.mov(i, next);
    f.br(head);
    f.place(done);
    f.ret(&[]);
    mb.add_function(f);
    mb.build().unwrap()
}

#[test]
fn a_loop_of_1000_allocations_hits_the_pool_999_times() {
    let mut vm = Vm::host(Arc::new(alloc_loop(4096))).unwrap();
    vm.invoke("main", &[HostValue::Int(1000)]).unwrap();
    let s = vm.stats();
    assert_eq!((s.fresh_allocations, s.pool_hits), (1, 999));
    assert_eq!((s.live_bytes, s.peak_bytes, s.live_storages, s.live_views), (0, 4096, 0, 0));
    assert_eq!(s.storages_created, 1000);
    assert!(vm.pool_free_bytes() >= 4096);
    vm.release_pool();
    assert_eq!(vm.pool_free_bytes(), 0);
}

#[test]
fn builder_modules_survive_the_binary_format() {
    let m = alloc_loop(256);
    let bytes = write_module(&m);
    assert_eq!(read_module(&bytes).unwrap(), m);
    assert_eq!(write_module(&read_module(&bytes).unwrap()), bytes);
}

/// `main(off, w)`: a texture view f32[1, 1, w, 4] at byte offset `off` of a 4 KiB storage.
fn texture_at() -> rxvm_vm::Module {
    let mut mb = ModuleBuilder::new("tex");
    let mut f = mb.function("main", vec![Type::Int, Type::Int], vec![Type::AnyTensor]);
    let (off, w) = (f.param(0), f.param(1));
    let s = f.alloc_storage(int(4096), None, 0, Scope::Global);
    let t = f.alloc_tensor(s, off.into(), DType::F32, &[int(1), int(1), w.into(), int(4)], Scope::Texture);
    f.ret(&[t.into()]);
    mb.add_function(f);
    mb.build().unwrap()
}

fn run_err(vm: &mut Vm, args: &[HostValue]) -> String {
    match vm.invoke("main", args) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn texture_views_check_pitch_alignment_and_limits_at_run_time() {
    let m = Arc::new(texture_at());
    let mut vm = Vm::host(m.clone()).unwrap();
    // 30 texels pad to 64: one row of 64 * 16 bytes.
    let ok = vm.invoke("main", &[HostValue::Int(0), HostValue::Int(30)]).unwrap();
    assert!(matches!(&ok[0], HostValue::Tensor(t) if t.shape == vec![1, 1, 30, 4]));
    let e = run_err(&mut vm, &[HostValue::Int(32), HostValue::Int(30)]);
    assert!(e.contains("image view offset 32 is not a multiple of the image base-address alignment"), "{e}");
    // 3072 + 1024 fits exactly; 3200 + 1024 does not (3200 meets the 128-byte sub-buffer alignment).
    vm.invoke("main", &[HostValue::Int(3072), HostValue::Int(30)]).unwrap();
    let e = run_err(&mut vm, &[HostValue::Int(64), HostValue::Int(30)]);
    assert!(e.contains("needs a sub-buffer there") && e.contains("(128 bytes)"), "{e}");
    let e = run_err(&mut vm, &[HostValue::Int(3200), HostValue::Int(30)]);
    assert!(e.contains("ends past the end of") && e.contains("rows padded to 64 texels"), "{e}");
    let caps = DeviceCaps::host().with_overrides("max-width=16,pitch=1").unwrap();
    let mut small = Vm::new(m, vec![caps]).unwrap();
    let e = run_err(&mut small, &[HostValue::Int(0), HostValue::Int(30)]);
    assert!(e.contains("image of 30x1 texels") && e.contains("larger than device `host` allows (16x16384)"), "{e}");
}

#[test]
fn storage_beyond_device_memory_is_an_error_not_an_abort() {
    let mut mb = ModuleBuilder::new("big");
    let mut f = mb.function("main", vec![Type::Int], vec![]);
    let n = f.param(0);
    let s = f.alloc_storage(n.into(), None, 0, Scope::Global);
    f.kill(s);
    f.ret(&[]);
    mb.add_function(f);
    let caps = DeviceCaps::host().with_overrides("mem=1M").unwrap();
    let mut vm = Vm::new(Arc::new(mb.build().unwrap()), vec![caps]).unwrap();
    vm.invoke("main", &[HostValue::Int(1 << 20)]).unwrap();
    let e = run_err(&mut vm, &[HostValue::Int((1 << 20) + 1)]);
    assert!(e.contains("out of device memory on `host`"), "{e}");
    let e = run_err(&mut vm, &[HostValue::Int(-5)]);
    assert!(e.contains("storage size must be >= 0, found %r0 = -5"), "{e}");
    assert_eq!(vm.stats().live_bytes, 0);
}

#[test]
fn recursion_and_instruction_limits_stop_runaway_programs() {
    let mut mb = ModuleBuilder::new("rec");
    let fid = mb.declare("spin", vec![Type::Int], vec![Type::Int]);
    let mut f = mb.function("spin", vec![Type::Int], vec![Type::Int]);
    let r = f.call(fid, 1, &[f.param(0).into()]);
    f.ret(&[r[0].into()]);
    mb.add_function(f);
    let mut g = mb.function("main", vec![], vec![]);
    let l = g.label();
    g.place(l);
    g.call_builtin("nop", &[]).unwrap();
    g.br(l);
    mb.add_function(g);
    let m = Arc::new(mb.build().unwrap());
    let mut vm = Vm::host(m).unwrap();
    vm.limits.max_call_depth = 100;
    let e = vm.invoke("spin", &[HostValue::Int(1)]).unwrap_err();
    assert!(e.message.contains("call depth limit of 100 reached calling @spin"), "{e}");
    assert_eq!(e.stack.len(), 100);
    vm.limits.max_instructions = Some(1000);
    let e = vm.invoke("main", &[]).unwrap_err();
    assert!(e.message.contains("instruction limit of 1000 reached"), "{e}");
}

#[test]
fn constants_are_read_only_and_typed_parameters_are_checked() {
    let mut mb = ModuleBuilder::new("c");
    let w = mb.constant("w", DType::F32, &[2], ConstData::Fill(3.0));
    let mut f = mb.function("main", vec![f32s(&[2])], vec![]);
    f.call_builtin("fill", &[Operand::Const(w), Operand::Float(1.0)]).unwrap();
    f.ret(&[]);
    mb.add_function(f);
    let mut vm = Vm::host(Arc::new(mb.build().unwrap())).unwrap();
    let bad = HostTensor::from_f32(&[3], &[1.0, 2.0, 3.0]).unwrap();
    let e = vm.invoke("main", &[HostValue::Tensor(bad)]).unwrap_err();
    assert_eq!(e.message, "argument 1 of @main: expected f32[2], found f32[3]");
    let good = HostTensor::from_f32(&[2], &[1.0, 2.0]).unwrap();
    let e = vm.invoke("main", &[HostValue::Tensor(good)]).unwrap_err();
    assert_eq!(e.message, "@vm.fill cannot write to a constant tensor");
    let s = vm.stats();
    assert_eq!((s.live_storages, s.live_views, s.live_bytes), (1, 1, 0), "only the constant is left");
}

#[test]
fn unverified_modules_never_reach_the_interpreter() {
    let mut m = alloc_loop(64);
    m.funcs[FuncId(0)].code.pop();
    let e = Vm::host(Arc::new(m)).err().expect("refused");
    assert!(e.message.starts_with("invalid module:"), "{e}");
}

/// `main(size)`: a new storage of `size` bytes, returned.
fn new_storage() -> Arc<rxvm_vm::Module> {
    let mut mb = ModuleBuilder::new("storage");
    let mut f = mb.function("main", vec![Type::Int], vec![Type::Storage]);
    let size = f.param(0);
    let s = f.alloc_storage(size.into(), None, 0, Scope::Global);
    f.ret(&[s.into()]);
    mb.add_function(f);
    Arc::new(mb.build().unwrap())
}

fn storage_of(vm: &mut Vm, size: i64) -> rxvm_vm::shared::Shared<rxvm_vm::memory::Storage> {
    let main = vm.module().func_by_name("main").unwrap();
    match vm.invoke_values(main, vec![rxvm_vm::value::Value::Int(size)]).unwrap().pop() {
        Some(rxvm_vm::value::Value::Storage(s)) => s,
        _ => panic!("main returns a storage"),
    }
}

#[test]
fn a_dead_storage_comes_back_renamed_with_its_memory_for_a_request_of_its_class() {
    let mut vm = Vm::host(new_storage()).unwrap();
    let a = storage_of(&mut vm, 4000);
    let (a_id, a_mem) = (a.id, a.host_ptr());
    drop(a);
    assert_eq!(vm.stats().live_storages, 0);
    assert_eq!(vm.pool_free_bytes(), 4096, "kept with its 4096-byte block (size class of 4000)");
    let b = storage_of(&mut vm, 3900);
    assert_ne!(b.id, a_id, "a new storage to the program and the ledger");
    assert_eq!((b.host_ptr(), b.size, b.capacity()), (a_mem, 3900, 4096));
    assert_eq!(vm.pool_free_bytes(), 0);
    let s = vm.stats();
    assert_eq!((s.fresh_allocations, s.pool_hits, s.live_storages, s.live_bytes), (1, 1, 1, 3900));
    // Another class gets another block; the live one is not handed out twice.
    let c = storage_of(&mut vm, 4000);
    assert_ne!(c.host_ptr(), b.host_ptr());
    drop((b, c));
    assert_eq!(vm.pool_free_bytes(), 2 * 4096);
    vm.release_pool();
    assert_eq!(vm.pool_free_bytes(), 0);
    assert!(!storage_of(&mut vm, 64).host_ptr().is_null());
    assert_eq!(vm.stats().fresh_allocations, 3);
}

#[test]
fn a_storage_outlives_its_vm_and_dies_with_the_runtime_it_kept() {
    let mut vm = Vm::host(new_storage()).unwrap();
    let kept = storage_of(&mut vm, 256);
    drop(storage_of(&mut vm, 256));
    let rt = std::rc::Rc::downgrade(vm.runtime());
    drop(vm);
    // The live storage keeps the runtime (and the dead storage parked in it).
    assert!(rt.upgrade().is_some());
    // SAFETY of the check: the block is still the storage's, readable and writable.
    unsafe { kept.host_ptr().write_bytes(7, 256) };
    assert_eq!(kept.device_state().pool_free_bytes(), 256);
    drop(kept);
    assert!(rt.upgrade().is_none(), "a parked storage must not keep its runtime alive");
}

/// `main()`: views of constant geometry (registers hold them without view objects when
/// nothing tracks objects) filled, added, passed to a typed parameter and returned.
fn views_through_calls(param: &[i64]) -> rxvm_vm::Module {
    let mut mb = ModuleBuilder::new("slices");
    let double = mb.declare("double", vec![f32s(param)], vec![f32s(param)]);
    let mut g = mb.function("double", vec![f32s(param)], vec![f32s(param)]);
    let x = g.param(0);
    g.call_builtin("add", &[x.into(), x.into(), x.into()]).unwrap();
    g.ret(&[x.into()]);
    mb.add_function(g);
    let mut f = mb.function("main", vec![], vec![f32s(&[4]), Type::Int]);
    let s = f.alloc_storage(int(64), None, 0, Scope::Global);
    let a = f.alloc_tensor(s, int(0), DType::F32, &[int(4)], Scope::Global);
    let b = f.alloc_tensor(s, int(16), DType::F32, &[int(4)], Scope::Global);
    f.call_builtin("iota", &[a.into(), Operand::Float(1.0), Operand::Float(1.0)]).unwrap();
    f.call_builtin("fill", &[b.into(), Operand::Float(10.0)]).unwrap();
    f.call_builtin("add", &[a.into(), b.into(), b.into()]).unwrap();
    let twice = f.call(double, 1, &[b.into()])[0];
    let n = f.call_builtin("numel", &[a.into()]).unwrap()[0];
    f.kill(a);
    f.ret(&[twice.into(), n.into()]);
    mb.add_function(f);
    mb.build().unwrap()
}

#[test]
fn views_without_objects_behave_as_view_objects_do() {
    let run = |track: bool| {
        let mut vm = Vm::host(Arc::new(views_through_calls(&[4]))).unwrap();
        vm.runtime().objects.track.set(track);
        let out = vm.invoke("main", &[]).unwrap();
        let [HostValue::Tensor(t), HostValue::Int(n)] = &out[..] else { panic!("{out:?}") };
        let s = vm.stats();
        (t.to_f64(), *n, s.views_created, s.live_views, s.live_storages)
    };
    let tracked = run(true);
    assert_eq!(tracked, (vec![22.0, 24.0, 26.0, 28.0], 4, 2, 0, 0));
    assert_eq!(run(false), tracked, "the same results and counts without view objects");
    // A typed parameter checks a view that has no object as it checks one that has.
    for track in [true, false] {
        let mut vm = Vm::host(Arc::new(views_through_calls(&[5]))).unwrap();
        vm.runtime().objects.track.set(track);
        let e = vm.invoke("main", &[]).unwrap_err();
        assert!(e.message.contains("expected f32[5], found f32[4]"), "track {track}: {e}");
    }
}

/// Each VM's `Limits::max_live_bytes` holds for its own invocations, when VMs share a
/// runtime (whose devices hold the limit in force) and take turns.
#[test]
fn vms_sharing_a_runtime_each_run_under_their_own_live_limit() {
    let module = Arc::new(alloc_loop(8192));
    let mut limited = Vm::host(module.clone()).unwrap();
    let mut free = Vm::with_runtime(module, limited.runtime().clone()).unwrap();
    limited.limits.max_live_bytes = Some(4096);
    for round in 0..3 {
        let e = limited.invoke("main", &[HostValue::Int(2)]).expect_err("8192 bytes over a 4096-byte limit");
        assert!(e.message.contains("exceed the limit of 4096 bytes"), "round {round}: {}", e.message);
        free.invoke("main", &[HostValue::Int(2)]).unwrap_or_else(|e| panic!("round {round}: {}", e.message));
    }
    limited.limits.max_live_bytes = None;
    limited.invoke("main", &[HostValue::Int(2)]).expect("the limit lifted");
}

/// A function's results are checked against its declared types when it returns, to the
/// caller of `invoke` and to a calling function alike. The check remembers the type it
/// last admitted per result (signature.rs): a value of another shape after one that
/// passed must still be refused, and one that matches again must pass.
#[test]
fn results_are_checked_against_their_declared_types() {
    let mut mb = ModuleBuilder::new("results");
    let inner = mb.declare("inner", vec![Type::AnyTensor], vec![f32s(&[2])]);
    let mut f = mb.function("main", vec![Type::AnyTensor, Type::Int], vec![f32s(&[2])]);
    let (x, nested) = (f.param(0), f.param(1));
    let (direct, call) = (f.label(), f.label());
    f.br_if(nested, call, direct);
    f.place(direct);
    f.ret(&[x.into()]);
    f.place(call);
    let y = f.call(inner, 1, &[x.into()])[0];
    f.ret(&[y.into()]);
    mb.add_function(f);
    let mut g = mb.function("inner", vec![Type::AnyTensor], vec![f32s(&[2])]);
    let x = g.param(0);
    g.ret(&[x.into()]);
    mb.add_function(g);
    let mut vm = Vm::host(Arc::new(mb.build().unwrap())).unwrap();

    let two = HostValue::Tensor(HostTensor::from_f32(&[2], &[1.0, 2.0]).unwrap());
    let three = HostValue::Tensor(HostTensor::from_f32(&[3], &[1.0, 2.0, 3.0]).unwrap());
    for (nested, who) in [(0, "@main"), (1, "@inner")] {
        for _ in 0..2 {
            let out = vm.invoke("main", &[two.clone(), HostValue::Int(nested)]).unwrap();
            assert_eq!(out, std::slice::from_ref(&two));
            let e = vm.invoke("main", &[three.clone(), HostValue::Int(nested)]).unwrap_err();
            assert_eq!(e.message, format!("result 1 of {who}: expected f32[2], found f32[3]"));
        }
        let e = vm.invoke("main", &[HostValue::Int(7), HostValue::Int(nested)]).unwrap_err();
        assert!(e.message.contains("argument 1 of @main: expected tensor"), "{e}");
    }
}
