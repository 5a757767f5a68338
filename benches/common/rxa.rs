//! The generator of the assembler benchmark's program: a deterministic `.rxa` text in the
//! style of `rxvm compile` output (see benches/assembler.rs), which `counts` also assembles.

use std::collections::HashMap;
use std::fmt::Write;

/// Size of the generated program under `cargo bench` (and `counts`).
pub const BENCH_BYTES: usize = 10 << 20;

/// A small deterministic generator (64-bit LCG, high bits).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
    fn below(&mut self, n: u32) -> u32 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u32) as usize]
    }
    /// A float in about [-0.25, 0.25) with up to 9 significant digits, as the compiler prints
    /// bias values.
    fn float_text(&mut self) -> String {
        let v = (self.next() as f64 / (1u64 << 31) as f64 - 0.5) * 0.5;
        format!("{}", v as f32)
    }
}

/// A function the drivers may call: name, input `f32[1, c, h, h]`, output shape.
#[derive(Clone)]
struct Callee {
    name: String,
    input: [i64; 4],
    output: Vec<i64>,
}

struct Gen {
    rng: Rng,
    /// Constant declarations, in order of first use.
    consts: String,
    const_names: HashMap<String, ()>,
    funcs: String,
    callees: Vec<Callee>,
    nfunc: usize,
}

fn dims(out: &mut String, d: &[i64]) {
    for (i, x) in d.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{x}");
    }
}

/// `f32[a, b, ...]`
fn ty(d: &[i64]) -> String {
    let mut s = String::from("f32[");
    dims(&mut s, d);
    s.push(']');
    s
}

/// Bytes of a view, images with rows padded to 1 KiB (64 RGBA f32 texels, Intel's pitch).
fn view_bytes(d: &[i64], texture: bool) -> i64 {
    if texture {
        let w = d[d.len() - 2];
        let rows: i64 = d[..d.len() - 2].iter().product();
        rows * ((w * 16 + 1023) / 1024 * 1024)
    } else {
        d.iter().product::<i64>() * 4
    }
}

/// Per-function emitter: register names, the arena bump allocator and the live tensors.
struct Body {
    text: String,
    next_reg: usize,
    textures: bool,
    /// Bytes allocated in `%arena` so far.
    arena: i64,
    /// Shape of each tensor register (logical NCHW) by name.
    shapes: HashMap<String, Vec<i64>>,
}

impl Body {
    fn new(textures: bool) -> Body {
        Body { text: String::new(), next_reg: 0, textures, arena: 0, shapes: HashMap::new() }
    }

    fn line(&mut self, s: &str) {
        self.text.push_str("  ");
        self.text.push_str(s);
        self.text.push('\n');
    }

    /// The view type of a logical NCHW shape: blocked `[N, C/4, H, W, 4]` in a texture.
    fn view_dims(&self, s: &[i64]) -> Vec<i64> {
        if self.textures && s.len() == 4 {
            vec![s[0], (s[1] + 3) / 4, s[2], s[3], 4]
        } else {
            s.to_vec()
        }
    }

    /// `%rN = alloc_tensor %arena, OFF, TYPE[, scope ...]`; returns the register.
    fn tensor(&mut self, shape: &[i64], comment: Option<&str>) -> String {
        let name = format!("r{}", self.next_reg);
        self.next_reg += 1;
        self.tensor_named(&name, shape, comment);
        name
    }

    fn tensor_named(&mut self, name: &str, shape: &[i64], comment: Option<&str>) {
        let tex = self.textures && shape.len() == 4;
        let vd = self.view_dims(shape);
        let align = if tex { 4096 } else { 128 };
        let off = (self.arena + align - 1) / align * align;
        self.arena = off + view_bytes(&vd, tex);
        let mut l = format!("%{name} = alloc_tensor %arena, {off}, {}", ty(&vd));
        if tex {
            l.push_str(", scope \"global.texture\"");
        }
        if let Some(c) = comment {
            let _ = write!(l, "   ; {c}");
        }
        self.line(&l);
        self.shapes.insert(name.to_string(), shape.to_vec());
    }

    fn op(&mut self, op: &str, ins: &[&str], outs: &[&str], attrs: &str) {
        let mut l = format!("call @onnx.{op}(");
        for (i, x) in ins.iter().enumerate() {
            if i > 0 {
                l.push_str(", ");
            }
            l.push_str(x);
        }
        l.push_str(") -> (");
        for (i, y) in outs.iter().enumerate() {
            if i > 0 {
                l.push_str(", ");
            }
            l.push('%');
            l.push_str(y);
        }
        l.push(')');
        if !attrs.is_empty() {
            l.push_str(" { ");
            l.push_str(attrs);
            l.push_str(" }");
        }
        self.line(&l);
    }

    fn kill(&mut self, r: &str) {
        self.line(&format!("kill %{r}"));
    }
}

fn conv_out(h: i64, k: i64, pad: i64, stride: i64) -> i64 {
    (h + 2 * pad - k) / stride + 1
}

impl Gen {
    fn new(seed: u64) -> Gen {
        Gen {
            rng: Rng(seed),
            consts: String::new(),
            const_names: HashMap::new(),
            funcs: String::new(),
            callees: Vec::new(),
            nfunc: 0,
        }
    }

    /// `@w_MxCxK` (fill) and `@b_M` (a list of M floats), declared on first use.
    fn conv_consts(&mut self, m: i64, c: i64, k: i64) -> (String, String) {
        let w = format!("w_{m}x{c}x{k}");
        if self.const_names.insert(w.clone(), ()).is_none() {
            let _ = writeln!(self.consts, "const @{w}: f32[{m}, {c}, {k}, {k}] = fill(0.02)");
        }
        let b = format!("b_{m}");
        if self.const_names.insert(b.clone(), ()).is_none() {
            let vals: Vec<String> = (0..m).map(|_| self.rng.float_text()).collect();
            let _ = writeln!(self.consts, "const @{b}: f32[{m}] = [{}]", vals.join(", "));
        }
        (format!("@{w}"), format!("@{b}"))
    }

    /// A per-channel constant `f32[c]` filled with `v` (BatchNormalization parameters).
    fn channel_const(&mut self, what: &str, c: i64, v: &str) -> String {
        let n = format!("bn_{what}_{c}");
        if self.const_names.insert(n.clone(), ()).is_none() {
            let _ = writeln!(self.consts, "const @{n}: f32[{c}] = fill({v})");
        }
        format!("@{n}")
    }

    fn header(&mut self, name: &str, params: &str, result: &str, comment: &str) {
        let _ = write!(self.funcs, "\n; {comment}\nfunc @{name}({params}) -> {result} {{\n");
    }

    /// Converts the input buffer `%x` to a texture when the block runs on textures.
    fn input(&mut self, b: &mut Body, shape: &[i64]) -> String {
        if b.textures {
            let t = "x_blocked";
            b.tensor_named(t, shape, Some("layout conversion"));
            b.line(&format!("call @vm.to_blocked(%x, %{t})"));
            t.to_string()
        } else {
            b.shapes.insert("x".to_string(), shape.to_vec());
            "x".to_string()
        }
    }

    /// Ends a block: the output back to a buffer, `kill %arena`, `ret`. Emits the function.
    fn finish(&mut self, mut b: Body, name: &str, input: [i64; 4], out: String, comment: &str) {
        let shape = b.shapes[&out].clone();
        let out = if b.textures && shape.len() == 4 {
            let was_tex = b.textures;
            b.textures = false;
            let y = b.tensor(&shape, Some("output, back to NCHW"));
            b.textures = was_tex;
            b.line(&format!("call @vm.from_blocked(%{out}, %{y})"));
            b.kill(&out);
            y
        } else {
            out
        };
        b.kill("arena");
        b.line(&format!("ret %{out}"));
        let total = (b.arena + 4095) / 4096 * 4096;
        let params = format!("%x: {}", ty(&input));
        self.header(name, &params, &ty(&shape), comment);
        let _ = writeln!(self.funcs, "  %arena = alloc_storage {total}, align 64   ; {} bytes planned", b.arena);
        self.funcs.push_str(&b.text);
        self.funcs.push_str("}\n");
        self.callees.push(Callee { name: name.to_string(), input, output: shape });
    }

    fn conv(&mut self, b: &mut Body, x: &str, m: i64, k: i64, stride: i64, act: &str) -> String {
        let s = b.shapes[x].clone();
        let pad = k / 2;
        let ho = conv_out(s[2], k, pad, stride);
        let (w, bias) = self.conv_consts(m, s[1], k);
        let y = b.tensor(&[s[0], m, ho, ho], None);
        let xs = format!("%{x}");
        b.op(
            "Conv",
            &[&xs, &w, &bias],
            &[&y],
            &format!("strides = [{stride}, {stride}], pads = [{pad}, {pad}, {pad}, {pad}], kernel_shape = [{k}, {k}]"),
        );
        if act.is_empty() {
            return y;
        }
        let z = b.tensor(&[s[0], m, ho, ho], None);
        let attrs = match act {
            "LeakyRelu" => "alpha = 0.1",
            "Clip" => "min = 0.0, max = 6.0",
            _ => "",
        };
        b.op(act, &[&format!("%{y}")], &[&z], attrs);
        b.kill(&y);
        z
    }

    /// A squeezenet fire module: squeeze 1x1, expand 1x1 and 3x3, concat, maybe max pool.
    fn fire(&mut self) {
        let c = self.rng.pick(&[16i64, 32, 64, 128]);
        let h = self.rng.pick(&[13i64, 27, 55]);
        let sq = (c / 4).max(8);
        let e = self.rng.pick(&[16i64, 32, 64]);
        let pool = self.rng.below(3) == 0;
        let textures = self.rng.below(2) == 0;
        let name = format!("fire{}", self.nfunc);
        let mut b = Body::new(textures);
        let input = [1, c, h, h];
        let x = self.input(&mut b, &input);
        let s = self.conv(&mut b, &x, sq, 1, 1, "Relu");
        if textures {
            b.kill(&x);
        }
        let e1 = self.conv(&mut b, &s, e, 1, 1, "Relu");
        let e3 = self.conv(&mut b, &s, e, 3, 1, "Relu");
        b.kill(&s);
        let cat = b.tensor(&[1, 2 * e, h, h], None);
        b.op("Concat", &[&format!("%{e1}"), &format!("%{e3}")], &[&cat], "axis = 1");
        b.kill(&e1);
        b.kill(&e3);
        let out = if pool {
            let ho = conv_out(h, 3, 0, 2);
            let p = b.tensor(&[1, 2 * e, ho, ho], None);
            b.op(
                "MaxPool",
                &[&format!("%{cat}")],
                &[&p],
                "strides = [2, 2], pads = [0, 0, 0, 0], kernel_shape = [3, 3]",
            );
            b.kill(&cat);
            p
        } else {
            cat
        };
        let comment = format!(
            "fire module {}: squeeze {c} -> {sq}, expand {sq} -> {e} + {e}{}",
            self.nfunc,
            if textures { " (textures)" } else { "" }
        );
        self.finish(b, &name, input, out, &comment);
    }

    /// A residual block: conv-BN-act, conv-BN, add the input, act.
    fn residual(&mut self) {
        let c = self.rng.pick(&[16i64, 32, 64]);
        let h = self.rng.pick(&[14i64, 28, 56]);
        let act = self.rng.pick(&["Relu", "LeakyRelu", "Clip"]);
        let textures = self.rng.below(2) == 0;
        let name = format!("res{}", self.nfunc);
        let mut b = Body::new(textures);
        let input = [1, c, h, h];
        let x = self.input(&mut b, &input);
        let a = self.conv(&mut b, &x, c, 3, 1, "");
        let scale = self.channel_const("scale", c, "1.0");
        let bias = self.channel_const("bias", c, "0.0");
        let mean = self.channel_const("mean", c, "0.0");
        let var = self.channel_const("var", c, "1.0");
        let bn = |g: &mut Body, t: &str| {
            let y = g.tensor(&[1, c, h, h], None);
            g.op(
                "BatchNormalization",
                &[&format!("%{t}"), &scale, &bias, &mean, &var],
                &[&y],
                "epsilon = 1e-05, momentum = 0.9",
            );
            g.kill(t);
            y
        };
        let a = bn(&mut b, &a);
        let r = b.tensor(&[1, c, h, h], None);
        let attrs = match act {
            "LeakyRelu" => "alpha = 0.1",
            "Clip" => "min = 0.0, max = 6.0",
            _ => "",
        };
        b.op(act, &[&format!("%{a}")], &[&r], attrs);
        b.kill(&a);
        let d = self.conv(&mut b, &r, c, 3, 1, "");
        b.kill(&r);
        let d = bn(&mut b, &d);
        let sum = b.tensor(&[1, c, h, h], Some("residual"));
        b.op("Add", &[&format!("%{d}"), &format!("%{x}")], &[&sum], "");
        b.kill(&d);
        if textures {
            b.kill(&x);
        }
        let y = b.tensor(&[1, c, h, h], None);
        b.op("Relu", &[&format!("%{sum}")], &[&y], "");
        b.kill(&sum);
        let comment = format!(
            "residual block {}: {c} channels, {h}x{h}, {act}{}",
            self.nfunc,
            if textures { " (textures)" } else { "" }
        );
        self.finish(b, &name, input, y, &comment);
    }

    /// A classifier head on buffers: global pool, flatten, fc, softmax, reshape.
    fn head(&mut self) {
        let c = self.rng.pick(&[64i64, 128, 256, 512]);
        let h = self.rng.pick(&[7i64, 13]);
        let k = self.rng.pick(&[10i64, 100, 1000]);
        let name = format!("head{}", self.nfunc);
        let mut b = Body::new(false);
        let input = [1, c, h, h];
        let x = self.input(&mut b, &input);
        let g = b.tensor(&[1, c, 1, 1], None);
        b.op("GlobalAveragePool", &[&format!("%{x}")], &[&g], "");
        let f = b.tensor(&[1, c], None);
        b.op("Flatten", &[&format!("%{g}")], &[&f], "axis = 1");
        b.kill(&g);
        let w = format!("fc_w_{k}x{c}");
        if self.const_names.insert(w.clone(), ()).is_none() {
            let _ = writeln!(self.consts, "const @{w}: f32[{k}, {c}] = fill(0.001)");
        }
        let bias = format!("fc_b_{k}");
        if self.const_names.insert(bias.clone(), ()).is_none() {
            let _ = writeln!(self.consts, "const @{bias}: f32[{k}] = fill(0.0)");
        }
        let fc = b.tensor(&[1, k], None);
        b.op(
            "Gemm",
            &[&format!("%{f}"), &format!("@{w}"), &format!("@{bias}")],
            &[&fc],
            "alpha = 1.0, beta = 1.0, transB = 1",
        );
        b.kill(&f);
        let sm = b.tensor(&[1, k], None);
        b.op("Softmax", &[&format!("%{fc}")], &[&sm], "axis = 1");
        b.kill(&fc);
        let shape = format!("shape_1_{k}_1_1");
        if self.const_names.insert(shape.clone(), ()).is_none() {
            let _ = writeln!(self.consts, "const @{shape}: i64[4] = [1, {k}, 1, 1]");
        }
        let y = b.tensor(&[1, k, 1, 1], Some("the output, NCHW"));
        b.op("Reshape", &[&format!("%{sm}"), &format!("@{shape}")], &[&y], "");
        b.kill(&sm);
        let comment = format!("classifier head {}: {c} channels -> {k} classes", self.nfunc);
        self.finish(b, &name, input, y, &comment);
    }

    /// A loop over dynamically sized storages (as `examples/dynamic_loop.rxa`).
    fn dynamic_loop(&mut self) {
        let n = self.nfunc;
        let step = self.rng.pick(&[8i64, 16, 32, 64]);
        let start = self.rng.float_text();
        let inc = self.rng.pick(&["0.5", "1.0", "1e-3", "2.5e-1"]);
        let cap = self.rng.pick(&[1_073_741_824i64, 4_294_967_296, 1 << 40]);
        let f = &mut self.funcs;
        let _ = write!(
            f,
            "\n; loop {n}: iteration %i sums a fresh f32[(%i + 1) * {step}]\n\
             func @loop{n}(%n: int, %scale: float) -> float {{\n\
             \x20 %i = int 0\n\
             \x20 %total = float 0.0\n\
             \x20 br head\n\
             head:\n\
             \x20 %more = call @vm.ilt(%i, %n)\n\
             \x20 br_if %more, body, done\n\
             body:\n\
             \x20 %k = call @vm.iadd(%i, 1)\n\
             \x20 %len = call @vm.imul(%k, {step})\n\
             \x20 %bytes = call @vm.imul(%len, 4)\n\
             \x20 %bytes = call @vm.imin(%bytes, {cap})   ; a literal-pool integer\n\
             \x20 %s = alloc_storage %bytes, align 64\n\
             \x20 %t = alloc_tensor %s, 0, f32[%len]\n\
             \x20 call @vm.iota(%t, {start}, {inc})\n\
             \x20 %part = call @vm.sum(%t)\n\
             \x20 %part = call @vm.fmul(%part, %scale)\n\
             \x20 %total = call @vm.fadd(%total, %part)\n\
             \x20 kill %t\n\
             \x20 kill %s\n\
             \x20 %i = mov %k\n\
             \x20 br head\n\
             done:\n\
             \x20 ret %total\n\
             }}\n"
        );
    }

    /// Calls a few earlier blocks on a zero-filled input and inspects the results.
    fn driver(&mut self) {
        let n = self.nfunc;
        let callee = self.callees[self.rng.below(self.callees.len() as u32) as usize].clone();
        let loops = self.nfunc.saturating_sub(1);
        let mut f = String::new();
        let bytes = view_bytes(&callee.input, false);
        let _ = write!(
            f,
            "\n; driver {n}: runs @{} and reports its output's size\n\
             func @drive{n}(%rounds: int) -> (int, float) {{\n\
             \x20 %in = alloc_storage {bytes}, align 128\n\
             \x20 %x = alloc_tensor %in, 0, {}\n\
             \x20 call @vm.fill(%x, 0.5)\n\
             \x20 %y = call @{}(%x)\n\
             \x20 %sh = call @vm.shape_of(%y)\n\
             \x20 %c = call @vm.dim(%sh, 1)\n\
             \x20 %r = call @vm.rank(%sh)\n\
             \x20 %n = call @vm.numel(%y)\n\
             \x20 %want = shape [1, %c, {}, {}]\n\
             \x20 %sum = call @vm.sum(%y)\n",
            callee.name,
            ty(&callee.input),
            callee.name,
            callee.output.get(2).copied().unwrap_or(1),
            callee.output.get(3).copied().unwrap_or(1),
        );
        if loops > 0 && self.rng.below(2) == 0 {
            let _ = write!(f, "  %acc = call @loop{loops}(%rounds, 0.25)\n  %sum = call @vm.fadd(%sum, %acc)\n");
        }
        let _ = write!(
            f,
            "  call @vm.print(%n, %r, %sum)\n\
             \x20 kill %x\n\
             \x20 kill %in\n\
             \x20 ret %n, %sum\n\
             }}\n"
        );
        self.funcs.push_str(&f);
    }

    fn generate(mut self, target: usize) -> String {
        while self.funcs.len() + self.consts.len() < target {
            // A loop right before a driver, so that drivers may call `@loop{n-1}`.
            match self.nfunc % 8 {
                0 | 3 | 5 => self.fire(),
                1 | 4 => self.residual(),
                2 => self.head(),
                6 => self.dynamic_loop(),
                _ => self.driver(),
            }
            self.nfunc += 1;
        }
        let mut out = String::with_capacity(self.funcs.len() + self.consts.len() + 512);
        out.push_str(
            "; generated by benches/assembler.rs: a compiled-model-like program\n\
             ; memory plan: one arena per function, buffer views 128-byte aligned, textures 4 KiB\n\
             module bench_model\n\n",
        );
        out.push_str(&self.consts);
        out.push_str(&self.funcs);
        out
    }
}

/// The benchmark program: deterministic, about `target` bytes.
pub fn program(target: usize) -> String {
    Gen::new(0x5eed_2024).generate(target)
}
