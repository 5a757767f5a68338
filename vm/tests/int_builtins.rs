//! The two-operand int builtins give the same results and the same errors whatever the
//! form of their operands. Register-register and register-immediate calls run on the
//! interpreter's specialised fast path (`specialize.rs`); an immediate first operand, or a
//! constant too large for an immediate, runs the general builtin path. Each is compared
//! with the builtin's definition in Rust.

use rxvm_vm::builder::{ModuleBuilder, Operand};
use rxvm_vm::types::Type;
use rxvm_vm::{HostValue, Vm};
use std::sync::Arc;

/// A builtin's definition: its result, or `None` for an overflow or a division by zero.
type Definition = fn(i64, i64) -> Option<i64>;

const BUILTINS: [(&str, Definition); 13] = [
    ("iadd", |a, b| a.checked_add(b)),
    ("isub", |a, b| a.checked_sub(b)),
    ("imul", |a, b| a.checked_mul(b)),
    ("idiv", |a, b| a.checked_div(b)),
    ("irem", |a, b| a.checked_rem(b)),
    ("imin", |a, b| Some(a.min(b))),
    ("imax", |a, b| Some(a.max(b))),
    ("ieq", |a, b| Some((a == b) as i64)),
    ("ine", |a, b| Some((a != b) as i64)),
    ("ilt", |a, b| Some((a < b) as i64)),
    ("ile", |a, b| Some((a <= b) as i64)),
    ("igt", |a, b| Some((a > b) as i64)),
    ("ige", |a, b| Some((a >= b) as i64)),
];

const VALUES: [i64; 9] = [0, 1, -1, 7, -7, 1 << 29, i64::MAX, i64::MIN, 3_000_000_000];

/// `@rr(a, b)`, `@ri_<b>(a)` and `@ir_<a>(b)` for one builtin and one pair of values.
fn module(name: &str, a: i64, b: i64) -> rxvm_vm::Module {
    let mut mb = ModuleBuilder::new("ints");
    let mut f = mb.function("rr", vec![Type::Int, Type::Int], vec![Type::Int]);
    let (x, y) = (f.param(0), f.param(1));
    let r = f.call_builtin(name, &[x.into(), y.into()]).expect("a builtin")[0];
    f.ret(&[r.into()]);
    mb.add_function(f);
    let mut f = mb.function("ri", vec![Type::Int], vec![Type::Int]);
    let x = f.param(0);
    let r = f.call_builtin(name, &[x.into(), Operand::Int(b)]).expect("a builtin")[0];
    f.ret(&[r.into()]);
    mb.add_function(f);
    let mut f = mb.function("ir", vec![Type::Int], vec![Type::Int]);
    let y = f.param(0);
    let r = f.call_builtin(name, &[Operand::Int(a), y.into()]).expect("a builtin")[0];
    f.ret(&[r.into()]);
    mb.add_function(f);
    mb.build().expect("a valid module")
}

fn outcome(r: Result<Vec<HostValue>, rxvm_vm::VmError>) -> Result<i64, String> {
    match r {
        Ok(v) => match v.as_slice() {
            [HostValue::Int(x)] => Ok(*x),
            other => Err(format!("unexpected results {other:?}")),
        },
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn int_builtins_agree_across_operand_forms_and_with_their_definition() {
    for (name, def) in BUILTINS {
        for a in VALUES {
            for b in VALUES {
                let mut vm = Vm::host(Arc::new(module(name, a, b))).expect("a VM");
                let rr = outcome(vm.invoke("rr", &[HostValue::Int(a), HostValue::Int(b)]));
                let ri = outcome(vm.invoke("ri", &[HostValue::Int(a)]));
                let ir = outcome(vm.invoke("ir", &[HostValue::Int(b)]));
                match def(a, b) {
                    Some(v) => assert_eq!(rr, Ok(v), "{name}({a}, {b}) with registers"),
                    None => {
                        let e = rr.as_ref().expect_err("an overflow or a division by zero");
                        assert!(e.contains(&format!("@vm.{name}: ")), "{name}({a}, {b}): {e}");
                    }
                }
                // The same error text, apart from the function it happened in.
                let strip = |r: Result<i64, String>| r.map_err(|e| e.lines().next().unwrap_or("").to_string());
                assert_eq!(strip(ri), strip(rr.clone()), "{name}({a}, {b}) with an immediate");
                assert_eq!(strip(ir), strip(rr), "{name}({a}, {b}) with the first operand constant");
            }
        }
    }
}

/// A specialised call counts as one instruction, so the instruction limit still stops a
/// loop of them at the same point.
#[test]
fn specialised_instructions_count_against_the_instruction_limit() {
    let mut mb = ModuleBuilder::new("count");
    let mut f = mb.function("main", vec![Type::Int], vec![Type::Int]);
    let n = f.param(0);
    let i = f.int(0);
    let head = f.label();
    let done = f.label();
    f.place(head);
    let next = f.call_builtin("iadd", &[i.into(), Operand::Int(1)]).expect("iadd")[0];
    f.mov(i, next);
    let more = f.call_builtin("ilt", &[i.into(), n.into()]).expect("ilt")[0];
    f.br_if(more, head, done);
    f.place(done);
    f.ret(&[i.into()]);
    mb.add_function(f);
    let mut vm = Vm::host(Arc::new(mb.build().expect("a valid module"))).expect("a VM");
    // 1 (int) + 4 per iteration + 1 (ret): 100 iterations need 402 instructions.
    vm.limits.max_instructions = Some(402);
    assert_eq!(vm.invoke("main", &[HostValue::Int(100)]).expect("within the limit"), [HostValue::Int(100)]);
    vm.limits.max_instructions = Some(401);
    let e = vm.invoke("main", &[HostValue::Int(100)]).expect_err("one instruction short").to_string();
    assert!(e.contains("instruction limit of 401 reached"), "{e}");
}
