//! Rendering the VM's memory for the REPL: `:regs`, `:storages`, `:views` and `:mem`.
//!
//! Every function here only reads the VM (the registers of the run under the debugger, the
//! ledger of live storages and views, the device counters) and returns text whose lines end
//! in `\n`. The text holds no addresses and no timings, so REPL transcripts snapshot stably.

use rxvm_vm::bytecode::{EntityRef, FuncId, Reg};
use rxvm_vm::memory::{Site, StorageInfo, ViewInfo};
use rxvm_vm::module::{Function, Module};
use rxvm_vm::types::ImageLayout;
use rxvm_vm::value::Value;
use rxvm_vm::Vm;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Columns of the `:mem` bar, whatever the storage's size, so bars compare at a glance.
const BAR_WIDTH: u64 = 64;

/// The registers of frame `frame` (an index into [`Vm::debug_frames`], outermost first),
/// one line each in register order: `%name = value`.
pub fn regs(vm: &Vm, frame: usize) -> String {
    let frames = vm.debug_frames();
    let Some(info) = frames.get(frame) else {
        return match frames.len() {
            0 => "nothing is running\n".to_string(),
            n => format!("no frame {frame}: the frames are 0 to {}\n", n - 1),
        };
    };
    let Some(func) = vm.module().func(info.func) else {
        return format!("frame {frame} runs an unknown function #{}\n", info.func.0);
    };
    if func.num_regs == 0 {
        return format!("@{} has no registers\n", func.name);
    }
    let devices: Vec<String> = vm.devices().map(|d| d.name.clone()).collect();
    let (storages, views) = live(vm);
    let consts = constant_names(vm.module(), &storages, &views);
    let names: Vec<String> = (0..func.num_regs).map(|r| format!("%{}", func.reg_name(Reg(r)))).collect();
    let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for (r, name) in (0..func.num_regs).zip(&names) {
        let value = match vm.debug_reg(frame, Reg(r)) {
            Some(v) => describe(v, func, &devices, &consts),
            None => "unavailable".to_string(),
        };
        line(&mut out, format_args!("{name:<width$} = {value}"));
    }
    out
}

/// The live storages, oldest first: a table, or `no live storages`.
pub fn storages(vm: &Vm, scratch: &[(String, Value)]) -> String {
    let (storages, views) = live(vm);
    if storages.is_empty() {
        return "no live storages\n".to_string();
    }
    let module = vm.module();
    let holders = Holders::of(vm, scratch);
    let consts = constant_names(module, &storages, &views);
    let devices: Vec<String> = vm.devices().map(|d| d.name.clone()).collect();
    let rows = storages
        .iter()
        .map(|s| {
            vec![
                format!("#{}", s.id),
                device_label(&devices, s.device),
                s.size.to_string(),
                s.capacity.to_string(),
                s.align.to_string(),
                s.scope.name().to_string(),
                views.iter().filter(|v| v.storage == s.id).count().to_string(),
                holders.of_storage(s.id),
                storage_origin(module, s, &consts),
            ]
        })
        .collect::<Vec<_>>();
    table(
        &[
            ("storage", Align::Left),
            ("device", Align::Left),
            ("size", Align::Right),
            ("capacity", Align::Right),
            ("align", Align::Right),
            ("scope", Align::Left),
            ("views", Align::Right),
            ("held by", Align::Left),
            ("created at", Align::Left),
        ],
        &rows,
    )
}

/// The live views, oldest first: a table, or `no live views`.
pub fn views(vm: &Vm, scratch: &[(String, Value)]) -> String {
    let (storages, views) = live(vm);
    if views.is_empty() {
        return "no live views\n".to_string();
    }
    let module = vm.module();
    let holders = Holders::of(vm, scratch);
    let consts = constant_names(module, &storages, &views);
    let rows = views
        .iter()
        .map(|v| {
            let origin = match storages.iter().find(|s| s.id == v.storage) {
                Some(s) if s.constant => storage_origin(module, s, &consts),
                _ => site(module, v.site),
            };
            vec![
                format!("#{}", v.id),
                holders.of_view(v.id),
                format!("#{}", v.storage),
                v.offset.to_string(),
                format!("{}{:?}", v.dtype, v.shape),
                v.scope.name().to_string(),
                v.bytes.to_string(),
                v.image.map_or_else(|| "-".to_string(), |i| image(&i)),
                origin,
            ]
        })
        .collect::<Vec<_>>();
    table(
        &[
            ("view", Align::Left),
            ("held by", Align::Left),
            ("storage", Align::Left),
            ("offset", Align::Right),
            ("type", Align::Left),
            ("scope", Align::Left),
            ("bytes", Align::Right),
            ("image", Align::Left),
            ("created at", Align::Left),
        ],
        &rows,
    )
}

/// Device memory, then a map of each live storage (constants aside): which byte ranges
/// which live views cover, as ranges and as a bar (`#` one view, `%` overlapping views,
/// `.` free), so aliasing and unused space stand out. Constants get one summary line.
pub fn mem(vm: &Vm, scratch: &[(String, Value)]) -> String {
    let mut out = String::new();
    for (d, caps) in vm.devices().enumerate() {
        if let Some((live, peak)) = vm.device_bytes(d) {
            line(&mut out, format_args!("device {d} {}: live {live} B, peak {peak} B", caps.name));
        }
    }
    let (storages, views) = live(vm);
    let holders = Holders::of(vm, scratch);
    let (constants, buffers): (Vec<&StorageInfo>, Vec<&StorageInfo>) = storages.iter().partition(|s| s.constant);
    // Pad the `storage #N  SIZE B` prefixes alike so the maps start in one column.
    let ids: Vec<String> = buffers.iter().map(|s| format!("#{}", s.id)).collect();
    let sizes: Vec<String> = buffers.iter().map(|s| format!("{} B", s.size)).collect();
    let id_width = ids.iter().map(String::len).max().unwrap_or(0);
    let size_width = sizes.iter().map(String::len).max().unwrap_or(0);
    for ((s, id), size) in buffers.iter().zip(&ids).zip(&sizes) {
        let mine: Vec<&ViewInfo> = views.iter().filter(|v| v.storage == s.id).collect();
        let spans: Vec<(u64, u64)> =
            mine.iter().map(|v| (v.offset.min(s.size), v.offset.saturating_add(v.bytes).min(s.size))).collect();
        let labels: Vec<String> = mine.iter().map(|v| holders.label(v.id)).collect();
        let segments = segments(s.size, &spans);
        let map = segments
            .iter()
            .map(|g| {
                let who = match g.views.as_slice() {
                    [] => "free".to_string(),
                    [one] => labels.get(*one).cloned().unwrap_or_default(),
                    many => {
                        let names: Vec<&str> = many.iter().filter_map(|i| labels.get(*i)).map(String::as_str).collect();
                        format!("{} (overlap)", names.join(", "))
                    }
                };
                format!("[{}, {}) {who}", g.start, g.end)
            })
            .collect::<Vec<_>>()
            .join(" | ");
        let map = if map.is_empty() { "empty".to_string() } else { map };
        line(&mut out, format_args!("storage {id:<id_width$}  {size:>size_width$}  {map}"));
        if s.size > 0 {
            line(&mut out, format_args!("  |{}|", bar(s.size, &segments)));
        }
    }
    if !constants.is_empty() {
        let bytes: u64 = constants.iter().map(|s| s.size).sum();
        let plural = if constants.len() == 1 { "" } else { "s" };
        line(&mut out, format_args!("constants: {} storage{plural}, {bytes} B", constants.len()));
    } else if buffers.is_empty() {
        out.push_str("no live storages\n");
    }
    if buffers.iter().any(|s| s.size > 0) {
        out.push_str("bars: # one view, % overlapping views, . free\n");
    }
    out
}

/// A register's value on one line: `int 5`, `tensor #7 f32[2, 3] "global" at storage #3 +512`.
/// `consts` names constants by storage id ([`constant_names`]).
fn describe(v: &Value, func: &Function, devices: &[String], consts: &BTreeMap<u64, String>) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Killed(pc) => match func.loc(*pc as usize).line {
            0 => format!("killed (at instruction {pc})"),
            l => format!("killed (at instruction {pc}, line {l})"),
        },
        Value::Int(i) => format!("int {i}"),
        // `{:?}` keeps the point of whole floats (`1.0`), so they do not read as ints.
        Value::Float(f) => format!("float {f:?}"),
        Value::Shape(s) => format!("shape {:?}", &s[..]),
        Value::Storage(s) => {
            let name = devices.get(s.device as usize).map_or("?", String::as_str);
            format!("storage #{} ({} B on device {} `{name}`)", s.id, s.size, s.device)
        }
        // The REPL tracks objects, so its registers hold view objects; a slice is shown as one.
        Value::Slice(..) => match v.materialized() {
            Ok(t) => describe(&t, func, devices, consts),
            Err(e) => format!("tensor ({e})"),
        },
        Value::Tensor(t) => {
            let mut d = format!(
                "tensor #{} {}{:?} \"{}\" at storage #{} +{}",
                t.id,
                t.dtype,
                &t.shape[..],
                t.scope,
                t.storage.id,
                t.offset
            );
            if let Some(i) = &t.image {
                let _ = write!(d, ", image {}x{} texels, pitch {} B", i.width, i.height, i.row_pitch_bytes());
            }
            if t.storage.is_constant() {
                match consts.get(&t.storage.id) {
                    Some(name) => {
                        let _ = write!(d, ", constant @{name}");
                    }
                    None => d.push_str(", constant"),
                }
            }
            d
        }
    }
}

/// Snapshots of the ledger, oldest first (the borrow ends here, before any rendering).
fn live(vm: &Vm) -> (Vec<StorageInfo>, Vec<ViewInfo>) {
    let ledger = vm.ledger();
    (ledger.storages(), ledger.views())
}

/// `@main:4 (line 12)`: the function and instruction index that created an object;
/// `api` for objects the embedding made (inputs), `prompt` for those typed at the REPL.
fn site(module: &Module, site: Site) -> String {
    match site {
        Site::API => return "api".to_string(),
        Site::PROMPT => return "prompt".to_string(),
        _ => {}
    }
    let Some(f) = module.funcs.get(FuncId::new(site.func as usize)) else {
        return format!("function #{}:{}", site.func, site.pc);
    };
    match f.loc(site.pc as usize).line {
        0 => format!("@{}:{}", f.name, site.pc),
        l => format!("@{}:{} (line {l})", f.name, site.pc),
    }
}

/// Where a storage came from: `constant @w` for constants, else its creating instruction.
fn storage_origin(module: &Module, s: &StorageInfo, consts: &BTreeMap<u64, String>) -> String {
    match (s.constant, consts.get(&s.id)) {
        (true, Some(name)) => format!("constant @{name}"),
        (true, None) => "constant".to_string(),
        (false, _) => site(module, s.site),
    }
}

/// The module's constant names by storage id. The VM makes one storage with one view per
/// constant, in module order, when it is created; the ledger does not name them, so they
/// are matched in order, and only when every count, dtype and shape agrees (a runtime
/// shared with another VM also holds that VM's constants: then nothing is named).
fn constant_names(module: &Module, storages: &[StorageInfo], views: &[ViewInfo]) -> BTreeMap<u64, String> {
    let constants: Vec<&StorageInfo> = storages.iter().filter(|s| s.constant).collect();
    if constants.len() != module.consts.len() {
        return BTreeMap::new();
    }
    let mut names = BTreeMap::new();
    for (s, c) in constants.iter().zip(module.consts.values()) {
        match views.iter().find(|v| v.storage == s.id) {
            Some(v) if v.dtype == c.dtype && v.shape[..] == c.shape[..] => {
                names.insert(s.id, c.name.clone());
            }
            _ => return BTreeMap::new(),
        }
    }
    names
}

/// `0 host`.
fn device_label(devices: &[String], device: u8) -> String {
    match devices.get(device as usize) {
        Some(name) => format!("{device} {name}"),
        None => device.to_string(),
    }
}

/// `30x2 pitch 1024 B`: texels and the bytes from one image row to the next.
fn image(i: &ImageLayout) -> String {
    format!("{}x{} pitch {} B", i.width, i.height, i.row_pitch_bytes())
}

/// The registers of the run under the debugger that hold each view and each storage.
struct Holders {
    views: BTreeMap<u64, Vec<String>>,
    storages: BTreeMap<u64, Vec<String>>,
}

impl Holders {
    /// Scans every frame, innermost first, so the names the user sees at the current
    /// instruction come first: `%x` there, `@main:%a` in callers; then the registers of
    /// the REPL's scratch frame (instructions typed at the prompt).
    fn of(vm: &Vm, scratch: &[(String, Value)]) -> Holders {
        let mut h = Holders { views: BTreeMap::new(), storages: BTreeMap::new() };
        let frames = vm.debug_frames();
        let module = vm.module();
        for (i, info) in frames.iter().enumerate().rev() {
            let Some(func) = module.func(info.func) else { continue };
            for r in 0..func.num_regs {
                let (map, id) = match vm.debug_reg(i, Reg(r)) {
                    Some(Value::Tensor(t)) => (&mut h.views, t.id),
                    Some(Value::Storage(s)) => (&mut h.storages, s.id),
                    _ => continue,
                };
                let name = if i + 1 == frames.len() {
                    format!("%{}", func.reg_name(Reg(r)))
                } else {
                    format!("@{}:%{}", func.name, func.reg_name(Reg(r)))
                };
                map.entry(id).or_default().push(name);
            }
        }
        for (name, v) in scratch {
            let (map, id) = match v {
                Value::Tensor(t) => (&mut h.views, t.id),
                Value::Storage(s) => (&mut h.storages, s.id),
                _ => continue,
            };
            map.entry(id).or_default().push(format!("%{name}"));
        }
        h
    }

    fn of_view(&self, id: u64) -> String {
        self.views.get(&id).map_or_else(|| "-".to_string(), |n| n.join(", "))
    }

    fn of_storage(&self, id: u64) -> String {
        self.storages.get(&id).map_or_else(|| "-".to_string(), |n| n.join(", "))
    }

    /// A view in the memory map: `%a #5` (`%a/%b #5` when several registers hold it), or
    /// `view #5` when no register does.
    fn label(&self, id: u64) -> String {
        match self.views.get(&id) {
            Some(names) => format!("{} #{id}", names.join("/")),
            None => format!("view #{id}"),
        }
    }
}

/// A byte range of a storage and the views (indices into the spans) that cover all of it.
struct Segment {
    start: u64,
    end: u64,
    views: Vec<usize>,
}

/// Cuts `[0, size)` at every span's ends and merges neighbours covered by the same views.
/// Spans are `[start, end)` within `[0, size)`.
fn segments(size: u64, spans: &[(u64, u64)]) -> Vec<Segment> {
    let mut cuts: Vec<u64> = spans.iter().flat_map(|&(s, e)| [s, e]).chain([0, size]).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut out: Vec<Segment> = Vec::new();
    for w in cuts.windows(2) {
        let [start, end] = [w[0], w[1]];
        let views: Vec<usize> =
            spans.iter().enumerate().filter(|(_, &(s, e))| s <= start && end <= e).map(|(i, _)| i).collect();
        match out.last_mut() {
            Some(last) if last.views == views => last.end = end,
            _ => out.push(Segment { start, end, views }),
        }
    }
    out
}

/// [`BAR_WIDTH`] columns over `[0, size)`; a column shows the most views covering any
/// byte in it, so a small view or a small overlap is not rounded away.
fn bar(size: u64, segments: &[Segment]) -> String {
    (0..BAR_WIDTH)
        .map(|c| {
            // u128: `c * size` overflows u64 for storages past 2^58 bytes.
            let at = |c: u64| (c as u128 * size as u128 / BAR_WIDTH as u128) as u64;
            let lo = at(c);
            let hi = at(c + 1).max(lo + 1);
            let depth =
                segments.iter().filter(|g| g.start < hi && lo < g.end).map(|g| g.views.len()).max().unwrap_or(0);
            match depth {
                0 => '.',
                1 => '#',
                _ => '%',
            }
        })
        .collect()
}

#[derive(Clone, Copy)]
enum Align {
    Left,
    Right,
}

/// A table with a header row; columns two spaces apart, numbers right-aligned, no
/// trailing spaces.
fn table(columns: &[(&str, Align)], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = columns.iter().map(|(h, _)| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = columns.iter().map(|(h, _)| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut text = String::new();
        for ((cell, (_, align)), width) in row.iter().zip(columns).zip(&widths) {
            if !text.is_empty() {
                text.push_str("  ");
            }
            let _ = match align {
                Align::Left => write!(text, "{cell:<width$}"),
                Align::Right => write!(text, "{cell:>width$}"),
            };
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

/// Appends one line. Writing to a `String` cannot fail.
fn line(out: &mut String, args: std::fmt::Arguments<'_>) {
    let _ = out.write_fmt(args);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host VM that keeps the table of live objects from the start (its constants too).
    fn tracked_vm(module: Module) -> Vm {
        let rt = rxvm_vm::memory::Runtime::new(vec![rxvm_vm::memory::DeviceSpec::Host(rxvm_vm::DeviceCaps::host())])
            .unwrap();
        rt.objects.track.set(true);
        Vm::with_runtime(Arc::new(module), rt).unwrap()
    }
    use rxvm_vm::builder::{ModuleBuilder, Operand};
    use rxvm_vm::bytecode::Instr;
    use rxvm_vm::types::{DType, Scope, Type};
    use rxvm_vm::HostTensor;
    use std::sync::Arc;

    /// @main allocates an arena with three views (the last two overlap), a texture and a
    /// scratch storage it kills, then calls @inner with a view; @inner holds it under
    /// another name. With a constant and an input tensor (made by the API).
    const PROGRAM: &str = "\
module inspect

const @w: f32[4] = fill(0.5)

func @inner(%v: f32[64]) -> int {
  %k = int 7
  ret %k
}

func @main(%x: f32[2], %n: int) -> int {
  %s = alloc_storage 1024
  %a = alloc_tensor %s, 0, f32[64]
  %b = alloc_tensor %s, 512, f32[4, 16]
  %c = alloc_tensor %s, 640, f32[32]
  %t = alloc_storage 4096
  %img = alloc_tensor %t, 0, f32[1, 2, 30, 4], scope \"global.texture\"
  %tmp = alloc_storage 64
  kill %tmp
  %f = float 1.0
  %sh = shape [2, 3]
  %wc = const @w
  %r = call @inner(%a)
  ret %r
}
";

    /// A VM paused in @main before its call of @inner (one frame), or after it, at the
    /// first instruction of @inner (two frames).
    fn paused(in_inner: bool) -> Vm {
        let module = rxvm_asm::assemble(PROGRAM, "inspect.rxa").unwrap();
        let mut vm = tracked_vm(module);
        let main = vm.module().func_by_name("main").unwrap();
        let x = vm.upload(&HostTensor::from_f32(&[2], &[1.0, 2.0]).unwrap()).unwrap();
        vm.debug_start(main, vec![x, Value::Int(3)]).unwrap();
        assert!(vm.debug_resume(&mut |p| matches!(p.instr, Instr::Call { .. })).unwrap().is_none());
        if in_inner {
            assert!(vm.debug_step().unwrap().is_none());
        }
        assert_eq!(vm.debug_frames().len(), 1 + in_inner as usize);
        vm
    }

    #[test]
    fn regs_of_a_caller_and_a_callee() {
        let vm = paused(true);
        insta::assert_snapshot!("regs_main", regs(&vm, 0));
        insta::assert_snapshot!("regs_inner", regs(&vm, 1));
        assert_eq!(regs(&vm, 2), "no frame 2: the frames are 0 to 1\n");
    }

    #[test]
    fn storages_table() {
        insta::assert_snapshot!(storages(&paused(false), &[]));
    }

    /// In @inner: its own registers plain, the caller's qualified with the function.
    #[test]
    fn views_table_names_registers_of_every_frame() {
        insta::assert_snapshot!(views(&paused(true), &[]));
    }

    #[test]
    fn mem_shows_overlap_and_free_space() {
        let out = mem(&paused(false), &[]);
        assert!(out.contains("[640, 768) %b #3, %c #4 (overlap)"), "{out}");
        insta::assert_snapshot!(out);
    }

    /// Built without names or source lines: registers print as `%rN`, sites without lines.
    #[test]
    fn a_stripped_module_after_a_kill() {
        let mut mb = ModuleBuilder::new("stripped");
        let mut f = mb.function("main", vec![], vec![]);
        let s = f.alloc_storage(Operand::Int(256), None, 0, Scope::Global);
        let x = f.alloc_tensor(s, Operand::Int(0), DType::F32, &[Operand::Int(16)], Scope::Global);
        let y = f.alloc_tensor(s, Operand::Int(64), DType::F32, &[Operand::Int(8)], Scope::Global);
        f.kill(x);
        f.kill(y);
        f.kill(s);
        f.ret(&[]);
        mb.add_function(f);
        let mut vm = tracked_vm(mb.build().unwrap());
        let main = vm.module().func_by_name("main").unwrap();
        vm.debug_start(main, vec![]).unwrap();
        // Paused before `kill %r2`: %r1 is killed, %r2 still holds its view.
        assert!(vm.debug_resume(&mut |p| p.pc == 4).unwrap().is_none());
        let out = format!("{}\n{}\n{}\n{}", regs(&vm, 0), storages(&vm, &[]), views(&vm, &[]), mem(&vm, &[]));
        insta::assert_snapshot!(out);
    }

    #[test]
    fn nothing_running() {
        let mut mb = ModuleBuilder::new("idle");
        let mut f = mb.function("main", vec![Type::Int], vec![Type::Int]);
        let p = f.param(0);
        f.ret(&[p.into()]);
        mb.add_function(f);
        let vm = tracked_vm(mb.build().unwrap());
        let out = format!("{}\n{}\n{}\n{}", regs(&vm, 0), storages(&vm, &[]), views(&vm, &[]), mem(&vm, &[]));
        insta::assert_snapshot!(out);
    }

    #[test]
    fn segments_merge_neighbours_and_bars_keep_small_views() {
        let g = segments(100, &[(0, 10), (10, 20), (50, 50)]);
        let ranges: Vec<(u64, u64, usize)> = g.iter().map(|g| (g.start, g.end, g.views.len())).collect();
        assert_eq!(ranges, vec![(0, 10, 1), (10, 20, 1), (20, 100, 0)]);
        // One byte of a megabyte still shows; a zero-sized storage has one free segment.
        assert!(bar(1 << 20, &segments(1 << 20, &[(5, 6)])).starts_with("#."));
        assert!(segments(0, &[]).is_empty());
        let expected = ["#".repeat(16), "%".repeat(16), "#".repeat(16), ".".repeat(16)].concat();
        assert_eq!(bar(4, &segments(4, &[(0, 2), (1, 3)])), expected);
    }
}
