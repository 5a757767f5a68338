//! Scope assignment: which run-time tensors live in textures, and the schedule of steps the
//! program runs — the graph's nodes plus the layout conversions at the edges between
//! buffer and texture operators.
//!
//! With [`Textures::Auto`] a node runs on textures when the operator has a blocked-texture
//! form (`rxvm_vm::ops::blocked`), its activations and its output are 4-D f32 tensors whose
//! images fit the target's limits, and it has a texture neighbour (an activation made by
//! such a node, or a consumer that is one), so a lone operator does not pay two conversions.
//! A texture tensor holds the blocked layout `[N, ceil(C/4), H, W, 4]`; a buffer operator
//! that reads it gets a copy made by `@vm.from_blocked` right before its first such reader,
//! and a texture operator that reads a buffer tensor gets one made by `@vm.to_blocked`.

use crate::graph::{Analysis, Graph};
use rxvm_vm::ops::blocked::{self, activation_inputs, blocked_shape};
use rxvm_vm::ops::Operator;
use rxvm_vm::ops::{OpId, TensorInfo};
use rxvm_vm::types::{DType, ImageLayout, Scope};
use rxvm_vm::DeviceCaps;
use std::collections::{HashMap, HashSet};

/// Whether the compiler may put activations in textures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Textures {
    /// Every tensor is a buffer.
    #[default]
    None,
    /// Texture operators keep their 4-D f32 activations in `global.texture` images.
    Auto,
}

impl Textures {
    pub fn from_name(s: &str) -> Result<Textures, String> {
        match s {
            "none" => Ok(Textures::None),
            "auto" => Ok(Textures::Auto),
            _ => Err(format!("unknown texture mode `{s}`; expected `none` or `auto`")),
        }
    }
}

/// Where a run-time tensor lives: its view type and scope, and the bytes and offset
/// alignment it needs in an arena.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub dtype: DType,
    /// The view's shape: blocked `[N, C/4, H, W, 4]` for textures.
    pub shape: Vec<i64>,
    pub scope: Scope,
    /// Dense bytes for buffers, the pitched image size for textures.
    pub bytes: u64,
    pub align: u64,
}

/// What a step runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// Node `i` of the graph.
    Node(usize),
    /// `@vm.to_blocked`: a buffer tensor to its texture copy.
    ToBlocked,
    /// `@vm.from_blocked`: a texture tensor to its buffer copy.
    FromBlocked,
}

/// One step of the schedule, over tensor names after scope assignment (an input of a
/// node may be renamed to the copy of the tensor in the scope the node needs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub kind: StepKind,
    /// `""` for an omitted optional input or output.
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
}

/// The steps a program runs and where each run-time tensor lives.
#[derive(Clone, Debug, Default)]
pub struct Schedule {
    pub steps: Vec<Step>,
    /// Graph inputs and every tensor a step defines.
    pub tensors: HashMap<String, Placement>,
    /// What the program returns, in the order of the graph's outputs.
    pub outputs: Vec<String>,
    /// Why textures were not used although asked for (e.g. the target has no images).
    pub note: Option<String>,
    /// Tensors whose shapes only the run knows ([`Analysis::run_time`]): buffers the
    /// program allocates when a step makes them, not placed here.
    pub run_time: HashSet<String>,
    /// Outputs written in place over a donated input, by the input they are
    /// (`super::donation`): not planned.
    pub aliases: HashMap<String, String>,
}

impl Schedule {
    /// Tensors that live in textures.
    pub fn textures(&self) -> usize {
        self.tensors.values().filter(|p| p.scope.is_texture()).count()
    }

    /// Layout conversions the program runs.
    pub fn conversions(&self) -> usize {
        self.steps.iter().filter(|s| !matches!(s.kind, StepKind::Node(_))).count()
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let (a, b) = (a.max(1), b.max(1));
    a / gcd(a, b) * b
}

/// Bytes of a dense tensor; `None` for a negative dim or on overflow. The VM's rule for a
/// buffer view (`alloc_tensor`): the element size times each dim in order must not
/// overflow, even when a later dim is 0 — so a tensor the compiler accepts is one the VM
/// can view (`[2^62, 0]` has no elements, and still no view).
pub(crate) fn dense_bytes(dtype: DType, shape: &[i64]) -> Option<u64> {
    rxvm_vm::types::dense_bytes(dtype, shape)
}

/// The placement of a buffer tensor.
fn buffer(dtype: DType, shape: &[i64], target: &DeviceCaps) -> Result<Placement, String> {
    let bytes = dense_bytes(dtype, shape).ok_or_else(|| format!("{shape:?} is too large"))?;
    Ok(Placement {
        dtype,
        shape: shape.to_vec(),
        scope: Scope::Global,
        bytes,
        align: target.mem_base_addr_align.max(1),
    })
}

/// The placement of the blocked texture of a logical `[N, C, H, W]` f32 tensor, if its image
/// fits the target.
fn texture(logical: &[i64], target: &DeviceCaps) -> Option<Placement> {
    let shape = blocked_shape(logical);
    let img = ImageLayout::new(Scope::Texture, DType::F32, &shape, target.image_pitch_align_px).ok()?;
    let bytes = img.byte_size()?;
    let fits =
        img.width <= target.max_image2d_width && img.height <= target.max_image2d_height && bytes <= target.max_alloc;
    // A view at a non-zero offset is an image over a sub-buffer: both alignments apply.
    let align = lcm(target.mem_base_addr_align, target.image_base_align);
    fits.then_some(Placement { dtype: DType::F32, shape, scope: Scope::Texture, bytes, align })
}

/// Which of a node's `n` inputs are activations on textures (the first, for operators with
/// no texture form).
fn roles(op: &str, n: usize) -> Vec<bool> {
    match Operator::from_name(op) {
        Some(op) => activation_inputs(op, n),
        None => (0..n).map(|i| i == 0).collect(),
    }
}

/// True when node `n` can run on textures for `target` (whatever its neighbours do).
fn texture_capable(g: &Graph, a: &Analysis, n: usize, target: &DeviceCaps) -> bool {
    let node = &g.nodes[n];
    if a.folded[n] || !blocked::supports(&node.op) || node.outputs.iter().skip(1).any(|o| !o.is_empty()) {
        return false;
    }
    let is_4d_f32 = |x: &str| a.types.get(x).is_some_and(|(d, s)| *d == DType::F32 && s.len() == 4);
    let Some(out) = node.outputs.first().filter(|o| is_4d_f32(o)) else { return false };
    let Some(out_tex) = texture(&a.types[out.as_str()].1, target) else { return false };
    let roles = roles(&node.op, node.inputs.len());
    let mut infos = Vec::with_capacity(node.inputs.len());
    let mut blocked_shapes = Vec::with_capacity(node.inputs.len());
    for (x, &act) in node.inputs.iter().zip(&roles) {
        if x.is_empty() {
            blocked_shapes.push(None);
            continue;
        }
        if act {
            // Activations are run-time 4-D f32 tensors (a constant would need a texture
            // copy of its own) whose images fit.
            if a.consts.contains_key(x.as_str()) || !is_4d_f32(x) {
                return false;
            }
            match texture(&a.types[x.as_str()].1, target) {
                Some(p) => blocked_shapes.push(Some(p.shape)),
                None => return false,
            }
        } else {
            blocked_shapes.push(None);
        }
    }
    // Concat joins whole channel blocks: every input but the last fills its blocks.
    if node.op == "Concat" {
        let inputs = &node.inputs[..node.inputs.len().saturating_sub(1)];
        if inputs.iter().any(|x| a.types.get(x.as_str()).is_none_or(|(_, s)| s[1] % blocked::BLOCK != 0)) {
            return false;
        }
    }
    for (i, x) in node.inputs.iter().enumerate() {
        infos.push(if x.is_empty() {
            None
        } else {
            let (dtype, shape) = &a.types[x.as_str()];
            let shape = blocked_shapes[i].as_deref().unwrap_or(shape);
            Some(TensorInfo { dtype: *dtype, shape, value: a.const_value(x) })
        });
    }
    let Some(op) = OpId::from_name(&node.op) else { return false };
    let textured_in: Vec<bool> = blocked_shapes.iter().map(Option::is_some).collect();
    // The VM checks texture calls with this function; the compiler asks it too, so it never
    // emits a call the verifier refuses.
    blocked::infer(op.def(), &infos, &textured_in, &[Some(true)], &node.attrs).is_ok_and(|c| c.out.1 == out_tex.shape)
}

/// A name for a copy of `base` not used by any tensor of the graph.
fn fresh(base: &str, suffix: &str, a: &Analysis, taken: &HashMap<String, Placement>) -> String {
    let mut name = format!("{base}.{suffix}");
    let mut k = 1;
    while a.types.contains_key(name.as_str()) || taken.contains_key(&name) {
        k += 1;
        name = format!("{base}.{suffix}{k}");
    }
    name
}

/// Assigns scopes and builds the schedule of `g` for `target`.
pub fn schedule(g: &Graph, a: &Analysis, target: &DeviceCaps, mode: Textures) -> Result<Schedule, String> {
    let mut s = Schedule::default();
    for inp in g.inputs.iter().filter(|i| !a.run_time.contains(i.name.as_str())) {
        let (dtype, shape) = &a.types[inp.name.as_str()];
        s.tensors
            .insert(inp.name.clone(), buffer(*dtype, shape, target).map_err(|e| format!("input `{}`: {e}", inp.name))?);
    }
    let use_textures = mode == Textures::Auto && target.image_support;
    if mode == Textures::Auto && !target.image_support {
        s.note = Some(format!("target `{}` has no images: every tensor is a buffer", target.name));
    }
    let capable: Vec<bool> = (0..g.nodes.len()).map(|n| use_textures && texture_capable(g, a, n, target)).collect();
    // Producer of each tensor and whether any of its readers is texture-capable.
    let mut producer: HashMap<&str, usize> = HashMap::new();
    let mut capable_reader: HashMap<&str, bool> = HashMap::new();
    for (n, node) in g.nodes.iter().enumerate() {
        for x in &node.inputs {
            *capable_reader.entry(x.as_str()).or_default() |= capable[n];
        }
        for o in &node.outputs {
            producer.insert(o.as_str(), n);
        }
    }
    let textured: Vec<bool> = (0..g.nodes.len())
        .map(|n| {
            let node = &g.nodes[n];
            let roles = roles(&node.op, node.inputs.len());
            let fed = node
                .inputs
                .iter()
                .zip(&roles)
                .any(|(x, &act)| act && producer.get(x.as_str()).is_some_and(|&p| capable[p]));
            capable[n] && (fed || capable_reader.get(node.outputs[0].as_str()).copied().unwrap_or(false))
        })
        .collect();

    // The copy of each tensor in the other scope, once made.
    let mut copies: HashMap<String, String> = HashMap::new();
    for (n, node) in g.nodes.iter().enumerate() {
        if a.folded[n] {
            continue;
        }
        let roles = roles(&node.op, node.inputs.len());
        let mut inputs = Vec::with_capacity(node.inputs.len());
        for (i, x) in node.inputs.iter().enumerate() {
            let want_texture = textured[n] && roles[i];
            let here = s.tensors.get(x).map(|p| p.scope.is_texture());
            inputs.push(match here {
                Some(is_tex) if is_tex != want_texture => convert(&mut s, &mut copies, a, x, want_texture, target)?,
                _ => x.clone(),
            });
        }
        let mut outputs = Vec::with_capacity(node.outputs.len());
        for (k, o) in node.outputs.iter().enumerate() {
            if a.run_time.contains(o.as_str()) {
                s.run_time.insert(o.clone());
            } else if !o.is_empty() {
                let (dtype, shape) =
                    a.types.get(o.as_str()).ok_or_else(|| format!("node `{}`: output `{o}` has no type", node.name))?;
                let p = match (textured[n] && k == 0).then(|| texture(shape, target)).flatten() {
                    Some(p) => p,
                    None => {
                        buffer(*dtype, shape, target).map_err(|e| format!("node `{}`: output `{o}` {e}", node.name))?
                    }
                };
                s.tensors.insert(o.clone(), p);
            }
            outputs.push(o.clone());
        }
        s.steps.push(Step { kind: StepKind::Node(n), inputs, outputs });
    }
    for o in &g.outputs {
        let name = match s.tensors.get(o).map(|p| p.scope.is_texture()) {
            Some(true) => convert(&mut s, &mut copies, a, o, false, target)?,
            _ => o.clone(),
        };
        s.outputs.push(name);
    }
    Ok(s)
}

/// The copy of `x` in the other scope, made by a conversion step now if it does not exist.
fn convert(
    s: &mut Schedule,
    copies: &mut HashMap<String, String>,
    a: &Analysis,
    x: &str,
    to_texture: bool,
    target: &DeviceCaps,
) -> Result<String, String> {
    if let Some(c) = copies.get(x) {
        return Ok(c.clone());
    }
    let (dtype, logical) = a.types.get(x).ok_or_else(|| format!("tensor `{x}` has no type"))?;
    let (name, p, kind) = if to_texture {
        let p = texture(logical, target).ok_or_else(|| format!("internal: `{x}` has no texture form"))?;
        (fresh(x, "blocked", a, &s.tensors), p, StepKind::ToBlocked)
    } else {
        (fresh(x, "nchw", a, &s.tensors), buffer(*dtype, logical, target)?, StepKind::FromBlocked)
    };
    s.tensors.insert(name.clone(), p);
    s.steps.push(Step { kind, inputs: vec![x.to_string()], outputs: vec![name.clone()] });
    copies.insert(x.to_string(), name.clone());
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{analyze, GraphInput, InputDim, Node};
    use rxvm_vm::ops::{AttrValue, Attrs};

    fn node(op: &str, ins: &[&str], out: &str, attrs: Attrs) -> Node {
        Node {
            name: format!("n_{out}"),
            op: op.into(),
            inputs: ins.iter().map(|s| s.to_string()).collect(),
            outputs: vec![out.into()],
            attrs,
        }
    }

    fn graph(c: i64, w: i64, nodes: Vec<Node>, outputs: &[&str]) -> Graph {
        let mut g = Graph::new("g".into());
        g.inputs.push(GraphInput {
            name: "x".into(),
            dtype: DType::F32,
            dims: vec![InputDim::Fixed(1), InputDim::Fixed(c), InputDim::Fixed(4), InputDim::Fixed(w)],
        });
        g.nodes = nodes;
        g.outputs = outputs.iter().map(|s| s.to_string()).collect();
        g
    }

    fn sched(g: &Graph, target: &DeviceCaps) -> Schedule {
        let shape: Vec<i64> = g.inputs[0].dims.iter().map(|d| d.fixed().unwrap()).collect();
        let a = analyze(g, &[shape]).unwrap();
        schedule(g, &a, target, Textures::Auto).unwrap()
    }

    fn scope_of(s: &Schedule, t: &str) -> Scope {
        s.tensors[t].scope
    }

    #[test]
    fn chains_live_in_textures_with_conversions_at_the_edges() {
        let g = graph(
            6,
            5,
            vec![
                node("Relu", &["x"], "a", Attrs::default()),
                node("Sigmoid", &["a"], "b", Attrs::default()),
                node("Softmax", &["b"], "y", Attrs::default()),
            ],
            &["y", "a"],
        );
        let s = sched(&g, &DeviceCaps::host());
        assert_eq!(
            (scope_of(&s, "a"), scope_of(&s, "b"), scope_of(&s, "y")),
            (Scope::Texture, Scope::Texture, Scope::Global)
        );
        let kinds: Vec<(StepKind, &str)> = s.steps.iter().map(|st| (st.kind, st.outputs[0].as_str())).collect();
        assert_eq!(
            kinds,
            [
                (StepKind::ToBlocked, "x.blocked"),
                (StepKind::Node(0), "a"),
                (StepKind::Node(1), "b"),
                (StepKind::FromBlocked, "b.nchw"),
                (StepKind::Node(2), "y"),
                (StepKind::FromBlocked, "a.nchw"),
            ]
        );
        // A graph output in a texture is returned through its buffer copy.
        assert_eq!(s.outputs, ["y", "a.nchw"]);
        // Blocked [1, 2, 4, 5, 4], rows padded to 64 texels of 16 bytes, 8 rows.
        assert_eq!(s.tensors["a"].shape, [1, 2, 4, 5, 4]);
        assert_eq!((s.tensors["a"].bytes, s.tensors["a"].align), (64 * 16 * 8, 128));
        assert_eq!(s.conversions(), 3);
    }

    #[test]
    fn a_lone_texture_operator_stays_in_buffers() {
        let g = graph(
            4,
            5,
            vec![node("Softmax", &["x"], "a", Attrs::default()), node("Relu", &["a"], "b", Attrs::default())],
            &["b"],
        );
        let s = sched(&g, &DeviceCaps::host());
        assert_eq!(s.textures(), 0);
        assert_eq!(s.conversions(), 0);
    }

    #[test]
    fn images_beyond_the_targets_limits_stay_in_buffers() {
        let g = graph(
            4,
            40,
            vec![node("Relu", &["x"], "a", Attrs::default()), node("Relu", &["a"], "b", Attrs::default())],
            &["b"],
        );
        assert_eq!(sched(&g, &DeviceCaps::host()).textures(), 3);
        let narrow = DeviceCaps::host().with_overrides("max-width=32").unwrap();
        assert_eq!(sched(&g, &narrow).textures(), 0);
    }

    #[test]
    fn concat_of_partial_channel_blocks_stays_in_buffers() {
        let axis = Attrs(vec![("axis".into(), AttrValue::Int(1))]);
        let nodes = || {
            vec![
                node("Relu", &["x"], "a", Attrs::default()),
                node("Relu", &["x"], "b", Attrs::default()),
                node("Concat", &["a", "b"], "y", axis.clone()),
                node("Relu", &["y"], "z", Attrs::default()),
            ]
        };
        // 8 channels: two whole blocks each side, Concat on textures.
        let s = sched(&graph(8, 5, nodes(), &["z"]), &DeviceCaps::host());
        assert_eq!(scope_of(&s, "y"), Scope::Texture);
        // 6 channels: `a` ends in a half-filled block, so Concat runs on buffers.
        let s = sched(&graph(6, 5, nodes(), &["z"]), &DeviceCaps::host());
        assert_eq!(scope_of(&s, "y"), Scope::Global);
        assert_eq!(scope_of(&s, "z"), Scope::Global, "Relu after it has no texture neighbour");
    }
}
