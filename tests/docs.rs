//! Every complete program in the documentation (fenced as ```rxa) assembles and runs on the
//! host device, so the docs cannot drift from the implementation. Examples whose `@main`
//! takes storage parameters get them from the VM, sized by the code (`docs/memory.md`).

use rxvm::asm::assemble;
use rxvm::vm::types::{Dim, Type};
use rxvm::vm::{HostTensor, HostValue, Vm};
use std::path::Path;
use std::sync::Arc;

fn rxa_blocks(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match &mut cur {
            None if line.trim_start() == "```rxa" => cur = Some((i + 1, String::new())),
            Some(_) if line.trim_start() == "```" => out.extend(cur.take()),
            Some((_, s)) => {
                s.push_str(line);
                s.push('\n');
            }
            None => {}
        }
    }
    out
}

fn default_input(t: &Type) -> HostValue {
    match t {
        Type::Int => HostValue::Int(3),
        Type::Float => HostValue::Float(1.5),
        Type::Shape => HostValue::Shape(vec![2, 2]),
        Type::Tensor { dtype, dims } => {
            let shape: Vec<i64> = dims.iter().map(|d| if let Dim::Known(v) = d { *v } else { 2 }).collect();
            HostValue::Tensor(HostTensor::random(*dtype, &shape, 1).expect("input"))
        }
        other => panic!("a documented example takes a {other} parameter; use int, float, shape, tensor or storage"),
    }
}

#[test]
fn documented_programs_assemble_and_run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut total = 0;
    let mut docs: Vec<String> = vec!["README.md".into()];
    for e in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "md") {
            docs.push(format!("docs/{}", p.file_name().and_then(|n| n.to_str()).expect("utf-8 name")));
        }
    }
    docs.sort();
    for doc in &docs {
        let text = std::fs::read_to_string(root.join(doc)).expect("readable doc");
        for (line, src) in rxa_blocks(&text) {
            let name = format!("{doc}:{line}");
            let m = assemble(&src, &name).unwrap_or_else(|d| panic!("{name}:\n{}", d.render()));
            let m = Arc::new(m);
            let Some(fid) = m.func_by_name("main") else { panic!("{name}: a complete example has @main") };
            // Storage parameters are left to the VM, which allocates what the code needs.
            let args: Vec<HostValue> =
                m.funcs[fid].params.iter().filter(|t| !matches!(t, Type::Storage)).map(default_input).collect();
            let mut vm = Vm::host(m).expect("vm");
            vm.capture_output();
            vm.invoke("main", &args).unwrap_or_else(|e| panic!("{name}: {e}"));
            total += 1;
        }
    }
    assert!(total >= 10, "only {total} runnable examples in the docs");
}
