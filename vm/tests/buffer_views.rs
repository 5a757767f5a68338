//! `alloc_tensor` makes the same buffer or image view, or reports the same error, whatever
//! the form of its operands. With constant offset and dims the interpreter checks and
//! measures the view once, when the VM is made (`specialize.rs`; an image's layout once per
//! device), and at run time only checks that it fits its storage; with register operands
//! every check runs on every execution. Each case runs both ways and the two outcomes must
//! be identical.

use rxvm_vm::builder::{ModuleBuilder, Operand};
use rxvm_vm::bytecode::FuncId;
use rxvm_vm::types::{DType, ImageLayout, Scope, Type};
use rxvm_vm::value::Value;
use rxvm_vm::Vm;
use std::sync::Arc;

/// What a case produced: the view's offset, dtype, shape, bytes and image layout, or the
/// error message.
type Outcome = Result<(u64, DType, Vec<i64>, u64, Option<ImageLayout>), String>;

/// `@constant(size)` makes the view with immediate operands in a storage of `size` bytes
/// (a parameter, so the verifier cannot judge the fit); `@registers(size, offset, dims...)`
/// with every operand in a register. `None` for the constant form alone: the module with
/// both when the verifier accepts the constant form.
fn module(dtype: DType, offset: i64, dims: &[i64], scope: Scope, constant: bool) -> Result<rxvm_vm::Module, String> {
    let mut mb = ModuleBuilder::new("views");
    if constant {
        let mut f = mb.function("constant", vec![Type::Int], vec![Type::AnyTensor]);
        let s = f.alloc_storage(f.param(0).into(), None, 0, Scope::Global);
        let ops: Vec<Operand> = dims.iter().map(|&d| Operand::Int(d)).collect();
        let t = f.alloc_tensor(s, Operand::Int(offset), dtype, &ops, scope);
        f.ret(&[t.into()]);
        mb.add_function(f);
    }
    let mut f = mb.function("registers", vec![Type::Int; dims.len() + 2], vec![Type::AnyTensor]);
    let s = f.alloc_storage(f.param(0).into(), None, 0, Scope::Global);
    let ops: Vec<Operand> = (2..dims.len() as u32 + 2).map(|i| f.param(i).into()).collect();
    let t = f.alloc_tensor(s, f.param(1).into(), dtype, &ops, scope);
    f.ret(&[t.into()]);
    mb.add_function(f);
    mb.build().map_err(|e| e.message)
}

fn outcome(vm: &mut Vm, func: u32, args: Vec<Value>) -> Outcome {
    match vm.invoke_values(FuncId(func), args) {
        Ok(v) => match v.as_slice() {
            [Value::Tensor(t)] => Ok((t.offset, t.dtype, t.shape.to_vec(), t.bytes, t.image)),
            other => Err(format!("unexpected results {} values", other.len())),
        },
        Err(e) => Err(without_register_numbers(&e.message)),
    }
}

/// `%r4` -> `%r`: the two forms keep the storage in differently numbered registers.
fn without_register_numbers(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut after_r = false;
    for (i, c) in s.char_indices() {
        if after_r && c.is_ascii_digit() {
            continue;
        }
        after_r = c == 'r' && s[..i].ends_with('%');
        out.push(c);
    }
    out
}

/// `(storage bytes, dtype, offset, dims)` cases of one scope, run both ways on `vm_for`'s
/// VMs; returns how many the verifier let run in both forms.
fn compare(cases: &[(i64, DType, i64, &[i64])], scope: Scope, vm_for: &dyn Fn(rxvm_vm::Module) -> Vm) -> usize {
    let mut compared = 0;
    for &(storage, dtype, offset, dims) in cases {
        let what = format!("{dtype}{dims:?} ({scope}) at {offset} in {storage} bytes");
        let regs: Vec<Value> = [storage, offset].into_iter().chain(dims.iter().copied()).map(Value::Int).collect();
        let m = match module(dtype, offset, dims, scope, true) {
            Ok(m) => m,
            Err(refused) => {
                // The verifier refuses the constant form; the register form must then fail
                // when it runs.
                let m = module(dtype, offset, dims, scope, false).expect("the register form verifies");
                let mut vm = vm_for(m);
                let e = outcome(&mut vm, 0, regs).expect_err(&what);
                eprintln!("{what}: the verifier refuses ({refused}); at run time: {e}");
                continue;
            }
        };
        let mut vm = vm_for(m);
        // Twice each: the first run fills the pool, the second takes the steady-state path.
        for round in 0..2 {
            let constant = outcome(&mut vm, 0, vec![Value::Int(storage)]);
            let registers = outcome(&mut vm, 1, regs.clone());
            assert_eq!(constant, registers, "{what}, round {round}");
        }
        compared += 1;
    }
    compared
}

fn host_vm(m: rxvm_vm::Module) -> Vm {
    Vm::host(Arc::new(m)).expect("a VM")
}

#[test]
fn constant_and_register_operands_make_the_same_views_and_errors() {
    let cases: &[(i64, DType, i64, &[i64])] = &[
        (4096, DType::F32, 0, &[2, 3]),
        (4096, DType::F32, 1024, &[4, 4, 4, 4]),
        (4096, DType::F32, 4096 - 24, &[2, 3]), // ends exactly at the storage's end
        (4096, DType::F32, 4096 - 20, &[2, 3]), // one element past the end
        (4096, DType::F32, 0, &[1, 1, 1, 1, 1, 1]), // more dims than the inline shape holds
        (4096, DType::F32, 0, &[0, 5]),         // empty
        (4096, DType::F16, 2, &[3]),
        (4096, DType::F32, 2, &[3]), // offset not a multiple of the element size
        (4096, DType::F32, 0, &[-1]),
        (4096, DType::F32, -4, &[1]),
        (64, DType::I64, 0, &[1 << 40, 1 << 40]), // bytes overflow u64
        (64, DType::I8, 0, &[]),                  // a scalar
    ];
    let compared = compare(cases, Scope::Global, &host_vm);
    assert!(compared >= 8, "only {compared} cases ran both forms");
}

#[test]
fn constant_and_register_operands_make_the_same_image_views_and_errors() {
    // The host's caps: rows padded to 64 texels, image base 64 bytes, sub-buffer offsets
    // 128 bytes, at most 16384 x 16384 texels.
    let cases: &[(i64, DType, i64, &[i64])] = &[
        (8192, DType::F32, 0, &[1, 2, 30, 4]),         // 30 texels a row, padded to 64
        (8192, DType::F32, 4096, &[1, 2, 30, 4]),      // at a sub-buffer offset
        (8192, DType::F32, 4096 + 64, &[1, 2, 30, 4]), // image-aligned, not sub-buffer aligned
        (8192, DType::F32, 32, &[1, 2, 30, 4]),        // not image-aligned
        (2047, DType::F32, 0, &[1, 2, 30, 4]),         // the padded rows do not fit
        (8192, DType::F16, 0, &[2, 8, 4]),
        (8192, DType::F32, 0, &[2, 3, 5]),        // 5 channels: no image format
        (1 << 30, DType::F32, 0, &[1, 20000, 4]), // wider than the device allows
    ];
    let compared = compare(cases, Scope::Texture, &host_vm);
    assert!(compared >= 5, "only {compared} cases ran both forms");
    // A device without image support refuses every texture view, in both forms.
    let no_images = |m: rxvm_vm::Module| {
        let caps = rxvm_vm::DeviceCaps { image_support: false, ..rxvm_vm::DeviceCaps::host() };
        Vm::with_devices(Arc::new(m), vec![rxvm_vm::memory::DeviceSpec::Host(caps)]).expect("a VM")
    };
    assert!(compare(&cases[..1], Scope::Texture, &no_images) == 1);
}

#[test]
fn a_constant_view_checks_its_storage_register_at_run_time() {
    // The same specialised instruction runs over storages of different sizes: it fits the
    // first and not the second, and the error names the view and the storage.
    let mut mb = ModuleBuilder::new("views");
    let mut f = mb.function("main", vec![Type::Int], vec![Type::AnyTensor]);
    let s = f.alloc_storage(f.param(0).into(), None, 0, Scope::Global);
    let t = f.alloc_tensor(s, Operand::Int(64), DType::F32, &[Operand::Int(4), Operand::Int(4)], Scope::Global);
    f.ret(&[t.into()]);
    mb.add_function(f);
    let mut vm = Vm::host(Arc::new(mb.build().expect("a valid module"))).expect("a VM");
    assert_eq!(outcome(&mut vm, 0, vec![Value::Int(128)]), Ok((64, DType::F32, vec![4, 4], 64, None)));
    let e = outcome(&mut vm, 0, vec![Value::Int(127)]).expect_err("64 bytes at 64 do not fit in 127");
    assert!(e.contains("f32[4, 4] (64 bytes at offset 64) ends past the end of"), "{e}");
    assert!(e.contains("past the end of %r (127 bytes)"), "{e}");
    assert_eq!(outcome(&mut vm, 0, vec![Value::Int(128)]), Ok((64, DType::F32, vec![4, 4], 64, None)));
}
