//! Chaining functions (of one module or several) so that each stage's outputs are the next
//! stage's inputs without copies where the memory allows ([`Chain`]).

use crate::interp::error::VmError;
use crate::interp::io::*;
use crate::interp::vm::Vm;
use crate::ir::bytecode::{FuncId, Reg};
use crate::ir::host_tensor::{HostTensor, HostValue};
use crate::ir::module::Module;
use crate::ir::types::Type;
use crate::runtime::counters::Copies;
use crate::runtime::memory::Runtime;
use crate::runtime::value::Value;
use std::rc::Rc;
use std::sync::Arc;

/// Compiled modules run one after another on one runtime: the tensor results of stage `k`
/// are the tensor parameters of stage `k + 1`, in order, read in place when the next stage
/// can (it shares the devices, so a view is just passed on). Every storage parameter is
/// allocated once, when the chain is made, with the bytes its code needs, and reused by
/// every run: with `--io caller`, stage `k`'s output storage is where stage `k + 1` reads
/// its input.
pub struct Chain {
    stages: Vec<Stage>,
}

struct Stage {
    vm: Vm,
    func: FuncId,
    /// By parameter index: the storage the chain passes.
    storages: Vec<Option<Value>>,
}

/// What one run of a chain produced and moved.
#[derive(Clone, Debug)]
pub struct ChainRun {
    /// The last stage's tensor results, read back to the host.
    pub outputs: Vec<HostTensor>,
    /// Each stage's copies and fallbacks (the upload of the inputs is stage 0's, the
    /// read-back of the outputs is not in any stage).
    pub stages: Vec<IoReport>,
    /// Every copy of the run, uploads and read-backs included.
    pub copies: Copies,
}

impl Chain {
    /// A chain of `func` of each module on the devices of `rt`.
    pub fn new(rt: Rc<Runtime>, modules: Vec<Arc<Module>>, func: &str) -> Result<Chain, VmError> {
        if modules.is_empty() {
            return Err(VmError::api("a chain needs at least one module"));
        }
        let mut stages = Vec::with_capacity(modules.len());
        for (k, m) in modules.into_iter().enumerate() {
            let mut vm = Vm::with_runtime(m, rt.clone())?;
            let func = vm.module().func_by_name(func).ok_or_else(|| {
                VmError::api(format!("stage {k}: module `{}` has no function @{func}", vm.module().name))
            })?;
            let needs = vm.storage_needs(func);
            let mut storages = Vec::with_capacity(needs.len());
            for need in needs.iter() {
                storages.push(match need {
                    Some(bytes) => Some(vm.new_storage(0, *bytes)?),
                    None => None,
                });
            }
            stages.push(Stage { vm, func, storages });
        }
        Ok(Chain { stages })
    }

    /// Passes `storage` (e.g. one the caller made with [`Vm::new_storage`]) as storage
    /// parameter `%param` of stage `stage` from now on.
    pub fn bind_storage(&mut self, stage: usize, param: &str, storage: Value) -> Result<(), VmError> {
        let s = self.stages.get_mut(stage).ok_or_else(|| VmError::api(format!("no stage {stage}")))?;
        let module = s.vm.module().clone();
        let f = &module.funcs[s.func];
        let i = (0..f.params.len())
            .find(|&i| matches!(f.params[i], Type::Storage) && f.reg_name(Reg(i as u32)) == param)
            .ok_or_else(|| VmError::api(format!("stage {stage}: @{} has no storage parameter %{param}", f.name)))?;
        if !matches!(storage, Value::Storage(_)) {
            return Err(VmError::api(format!("%{param} takes a storage, found {}", storage.describe())));
        }
        s.storages[i] = Some(storage);
        Ok(())
    }

    /// The VM of stage `k`.
    pub fn vm(&self, k: usize) -> Option<&Vm> {
        self.stages.get(k).map(|s| &s.vm)
    }

    /// Runs every stage on `inputs` (stage 0's tensor parameters, in order).
    pub fn run(&mut self, inputs: &[HostTensor]) -> Result<ChainRun, VmError> {
        let start = self.stages[0].vm.runtime().counters.copies.get();
        let mut reports = Vec::with_capacity(self.stages.len());
        let mut values: Vec<Value> = Vec::new();
        for (k, s) in self.stages.iter_mut().enumerate() {
            let (args, uploads) = if k == 0 {
                let host: Vec<HostValue> = inputs.iter().cloned().map(HostValue::Tensor).collect();
                let before = s.vm.runtime().counters.copies.get();
                let args = s.vm.host_args(s.func, &host, &s.storages)?;
                (args, s.vm.runtime().counters.copies.get().since(&before))
            } else {
                let module = s.vm.module().clone();
                let f = &module.funcs[s.func];
                let mut prev = std::mem::take(&mut values).into_iter().filter(|v| matches!(v, Value::Tensor(_)));
                let mut args = Vec::with_capacity(f.params.len());
                for (i, t) in f.params.iter().enumerate() {
                    args.push(match (t, s.storages.get(i).cloned().flatten()) {
                        (Type::Storage, Some(v)) => v,
                        (Type::Storage, None) => {
                            return Err(VmError::api(format!(
                                "stage {k}: the size of %{} is not fixed by the code; bind it with Chain::bind_storage",
                                f.reg_name(Reg(i as u32))
                            )))
                        }
                        _ => prev.next().ok_or_else(|| {
                            VmError::api(format!(
                                "stage {k}: @{} takes more tensors than stage {} returns",
                                f.name,
                                k - 1
                            ))
                        })?,
                    });
                }
                (args, Copies::default())
            };
            values = s.vm.invoke_values(s.func, args)?;
            let mut r = s.vm.last_io().clone();
            r.copies = add(&r.copies, &uploads);
            reports.push(r);
        }
        let last = &self.stages[self.stages.len() - 1].vm;
        let outputs = values
            .iter()
            .filter(|v| matches!(v, Value::Tensor(_)))
            .map(|v| last.download(v))
            .collect::<Result<_, _>>()?;
        let copies = last.runtime().counters.copies.get().since(&start);
        Ok(ChainRun { outputs, stages: reports, copies })
    }
}

fn add(a: &Copies, b: &Copies) -> Copies {
    Copies {
        h2d: a.h2d + b.h2d,
        d2h: a.d2h + b.d2h,
        d2d: a.d2d + b.d2d,
        bytes_h2d: a.bytes_h2d + b.bytes_h2d,
        bytes_d2h: a.bytes_d2h + b.bytes_d2h,
        bytes_d2d: a.bytes_d2d + b.bytes_d2d,
    }
}
