//! Operator call sites whose register operands the code fixes: at every run, each holds a
//! buffer view of the same dtype, shape and offset on a storage of the same device.
//!
//! A site's check (inferring its output types and comparing them with its output views)
//! then gives the same answer at every run, so once it has passed, a run with no-op kernels
//! has nothing left to do there (`Vm::memo_covers_site`). The analysis runs when the VM is
//! made, over the specialised code: in a function that is one straight-line block (what the
//! compiler emits), a register holds a fixed view from its `alloc_tensor` of constant
//! geometry (`Op::AllocBufferConst`) over a storage from an `alloc_storage` of constant
//! device (`Op::AllocStorageConst`) until it is written or killed. Parameters, and
//! anything else, are not fixed; nor is any register of a function with branches (its
//! sites keep their per-run checks).

use crate::interp::specialize::Op;
use crate::ir::bytecode::EntityRef;
use crate::ir::bytecode::{ArgKind, Instr};
use crate::ir::module::Module;
use crate::ir::verify::{accesses, Access};
use crate::runtime::memory::{ConstAlloc, NO_BIN};

/// What the code fixes about a register at a point of a straight-line function.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Held {
    /// Nothing fixed (not yet written, a parameter, killed, or written by anything else).
    Unknown,
    /// A storage on this device.
    Storage { device: u8 },
    /// A buffer view of geometry `geom` (an index of the VM's constant geometries) over a
    /// storage on `device`.
    View { geom: u32, device: u8 },
}

/// Per operator call site (in `Op::CallOpSite` numbering), whether every register operand
/// is a fixed view. `allocs` are the VM's constant storage requests.
pub(crate) fn fixed_sites(m: &Module, ops: &[Box<[Op]>], allocs: &[ConstAlloc], nsites: usize) -> Vec<bool> {
    let mut fixed = vec![false; nsites];
    for (f, code) in m.funcs.values().zip(ops) {
        let n = f.code.len();
        let straight = n > 0 && !f.code[..n - 1].iter().any(Instr::is_terminator);
        if !straight || code.len() != n {
            continue;
        }
        let mut held = vec![Held::Unknown; f.num_regs as usize];
        for (pc, op) in code.iter().enumerate() {
            match *op {
                Op::AllocStorageConst(x) => {
                    let device = allocs.get(x.alloc as usize).filter(|c| c.bin != NO_BIN).map(|c| c.device);
                    set(&mut held, x.dst.0, device.map_or(Held::Unknown, |device| Held::Storage { device }));
                }
                Op::AllocBufferConst(x) => {
                    let view = match held.get(x.storage.index()) {
                        Some(Held::Storage { device }) => Held::View { geom: x.geom, device: *device },
                        _ => Held::Unknown,
                    };
                    set(&mut held, x.dst.0, view);
                }
                Op::CallOpSite(site) => {
                    if let (Some(slot), Instr::CallOp { list, nout, nin, .. }) =
                        (fixed.get_mut(site as usize), f.code[pc])
                    {
                        let items = f.args.get(list as usize..).and_then(|a| a.get(..nin as usize + nout as usize));
                        *slot = items.is_some_and(|items| {
                            items.iter().all(|a| match a.kind() {
                                ArgKind::Reg(r) => matches!(held.get(r.index()), Some(Held::View { .. })),
                                _ => true,
                            })
                        });
                    }
                }
                // Whatever else writes or kills a register unfixes it.
                _ => {
                    let _ = accesses::<(), _>(f, pc, &mut |_, a| {
                        if let Access::Def(r) | Access::Kill(r) = a {
                            set(&mut held, r.0, Held::Unknown);
                        }
                        Ok(())
                    });
                }
            }
        }
    }
    fixed
}

fn set(held: &mut [Held], r: u32, h: Held) {
    if let Some(slot) = held.get_mut(r as usize) {
        *slot = h;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::devices::DeviceSpec;
    use crate::ir::builder::{ModuleBuilder, Operand};
    use crate::ir::types::{DType, Dim, Scope, Type};
    use crate::runtime::memory::Runtime;
    use crate::DeviceCaps;

    fn f32s(dims: &[i64]) -> Type {
        Type::Tensor { dtype: DType::F32, dims: dims.iter().map(|&d| Dim::Known(d)).collect() }
    }

    /// The fixed flags of `m`'s sites, as a host VM would compute them.
    fn fixed_of(m: &Module) -> Vec<bool> {
        let sp = crate::interp::specialize::specialize(m);
        let rt = Runtime::new(vec![DeviceSpec::Host(DeviceCaps::host())]).expect("a runtime");
        let allocs: Vec<ConstAlloc> = sp
            .storages
            .iter()
            .map(|r| rt.const_alloc(r.device, r.size, r.align, r.scope).expect("a valid request"))
            .collect();
        fixed_sites(m, &sp.ops, &allocs, sp.op_sites.len())
    }

    #[test]
    fn views_of_constant_geometry_fix_a_site_and_anything_else_unfixes_it() {
        let mut mb = ModuleBuilder::new("m");
        let mut f = mb.function("main", vec![f32s(&[4])], vec![]);
        let x = f.param(0);
        let s = f.alloc_storage(Operand::Int(64), None, 0, Scope::Global);
        let a = f.alloc_tensor(s, Operand::Int(0), DType::F32, &[Operand::Int(4)], Scope::Global);
        let b = f.alloc_tensor(s, Operand::Int(16), DType::F32, &[Operand::Int(4)], Scope::Global);
        f.call_op("Relu", &[a.into()], &[b], Default::default()).unwrap(); // fixed
        f.call_op("Relu", &[x.into()], &[b], Default::default()).unwrap(); // a parameter
        f.mov(a, b);
        f.call_op("Relu", &[a.into()], &[b], Default::default()).unwrap(); // after a `mov`
        let n = f.int(4);
        let c = f.alloc_tensor(s, Operand::Int(32), DType::F32, &[n.into()], Scope::Global);
        f.call_op("Relu", &[c.into()], &[b], Default::default()).unwrap(); // dims in a register
        f.kill(b);
        let b2 = f.alloc_tensor(s, Operand::Int(16), DType::F32, &[Operand::Int(4)], Scope::Global);
        f.call_op("Relu", &[c.into()], &[b2], Default::default()).unwrap(); // c: still not fixed
        f.call_op("Relu", &[b2.into()], &[b2], Default::default()).unwrap(); // fixed again
        f.ret(&[]);
        mb.add_function(f);
        let m = mb.build().expect("verifies");
        assert_eq!(fixed_of(&m), [true, false, false, false, false, true]);
    }

    #[test]
    fn no_site_of_a_function_with_branches_is_fixed() {
        let mut mb = ModuleBuilder::new("m");
        let mut f = mb.function("main", vec![Type::Int], vec![]);
        let k = f.param(0);
        let s = f.alloc_storage(Operand::Int(64), None, 0, Scope::Global);
        let a = f.alloc_tensor(s, Operand::Int(0), DType::F32, &[Operand::Int(4)], Scope::Global);
        let b = f.alloc_tensor(s, Operand::Int(16), DType::F32, &[Operand::Int(4)], Scope::Global);
        let (yes, done) = (f.label(), f.label());
        f.br_if(k, yes, done);
        f.place(yes);
        f.call_op("Relu", &[a.into()], &[b], Default::default()).unwrap();
        f.br(done);
        f.place(done);
        f.ret(&[]);
        mb.add_function(f);
        assert_eq!(fixed_of(&mb.build().expect("verifies")), [false]);
    }
}
