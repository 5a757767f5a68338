//! The layering check: builds the file-level import graph of `vm/src`, `asm/src` and
//! `src` from the `crate::`, `super::` and `self::` paths in their code (use trees and
//! paths in expressions and types alike, re-exports followed to the file that defines the
//! item) and fails on any cycle between files and on any edge from a lower layer to a
//! higher one. The layers are the table in `LAYERS` below; docs/architecture.md draws it.
//! Unit tests (`#[cfg(test)]` modules) sit above every layer and are left out.
//!
//! `RXVM_PRINT_LAYERS=1 cargo test --test layers -- --nocapture` prints the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// One crate's layers, lowest first: a file may import files of its own layer (without
/// cycles) and of the layers before it, never of a later one. A file matches the first
/// entry whose prefix it starts with (paths relative to the crate's `src/`).
struct Crate {
    dir: &'static str,
    layers: &'static [(&'static str, &'static [&'static str])],
}

const LAYERS: &[Crate] = &[
    Crate {
        dir: "vm/src",
        layers: &[
            ("ir", &["ir/"]),
            ("runtime", &["runtime/"]),
            ("backends and kernels", &["opencl/", "ops/"]),
            ("interp", &["interp/"]),
            ("api", &["lib.rs"]),
        ],
    },
    Crate {
        dir: "asm/src",
        layers: &[
            ("syntax", &["lexer.rs", "ast.rs", "diag.rs", "syntax.rs", "parser.rs"]),
            ("lowering", &["assemble/", "assemble.rs", "printer.rs"]),
            ("api", &["lib.rs"]),
        ],
    },
    Crate {
        dir: "src",
        layers: &[
            ("plan", &["plan/"]),
            ("model", &["graph.rs", "onnx.rs", "npy.rs", "inputs.rs"]),
            ("compiler", &["compile/"]),
            ("tools", &["report.rs", "stats.rs", "conformance.rs", "session.rs", "bench.rs"]),
            ("front", &["cli.rs", "repl/"]),
            ("api", &["lib.rs", "main.rs"]),
        ],
    },
];

/// Upward edges that are known and scheduled to go, each with what removes it: the check
/// allows exactly these, and fails when one of them is gone (delete its line then), so the
/// list only shrinks. `(crate dir, importer, imported, why)`.
const KNOWN_DEBTS: &[(&str, &str, &str, &str)] = &[];

/// A crate's sources: path relative to `src/` -> text.
type Sources = BTreeMap<String, String>;

fn read_sources(dir: &Path) -> Sources {
    fn walk(root: &Path, dir: &Path, out: &mut Sources) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(root, &p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
                out.insert(rel, std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    let mut out = Sources::new();
    walk(dir, dir, &mut out);
    out
}

/// The module path of a file: `lib.rs` -> [], `a/mod.rs` and `a.rs` -> [a], `a/b.rs` -> [a, b].
/// `main.rs` is a crate root of its own (the binary); it is given the path ["<main>"]
/// so its `crate::` paths resolve among its own items only.
fn module_of(file: &str) -> Vec<String> {
    if file == "main.rs" {
        return vec!["<main>".into()];
    }
    let stem = file.strip_suffix(".rs").unwrap();
    let mut parts: Vec<String> = stem.split('/').map(String::from).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// What one file (with its inline modules) defines and imports, by module path.
#[derive(Default)]
struct Module {
    file: String,
    /// Names of items defined here (fns, types, consts, statics, traits, macros, inline mods).
    items: BTreeSet<String>,
    /// `use` aliases: visible name -> the path as written (re-exports and private imports
    /// alike: a path through a private import cannot compile, so following it does no harm).
    uses: BTreeMap<String, Vec<String>>,
    /// `use a::b::*` targets, as written.
    globs: Vec<Vec<String>>,
}

/// Where the inherent methods and associated items of a type are defined: `impl T { fn f }`
/// in another file than `T` makes `T::f` a use of that file.
type ImplItems = BTreeMap<(String, String), String>;

/// A path found in a file, as written, with the module it appears in.
struct Reference {
    file: String,
    scope: Vec<String>,
    path: Vec<String>,
    line: usize,
}

struct Collector<'a> {
    file: &'a str,
    impl_items: &'a mut ImplItems,
    /// The module path of the innermost module being visited.
    scope: Vec<String>,
    modules: &'a mut BTreeMap<Vec<String>, Module>,
    refs: &'a mut Vec<Reference>,
    macros_exported: &'a mut BTreeMap<String, String>,
}

impl Collector<'_> {
    fn module(&mut self) -> &mut Module {
        let file = self.file.to_string();
        self.modules.entry(self.scope.clone()).or_insert_with(|| Module { file, ..Default::default() })
    }

    fn reference(&mut self, path: Vec<String>, line: usize) {
        self.refs.push(Reference { file: self.file.to_string(), scope: self.scope.clone(), path, line });
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, line: usize) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree, line);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.use_name(prefix, n.ident.to_string(), n.ident.to_string(), line),
            syn::UseTree::Rename(r) => self.use_name(prefix, r.ident.to_string(), r.rename.to_string(), line),
            syn::UseTree::Glob(_) => {
                self.reference(prefix.clone(), line);
                self.module().globs.push(prefix.clone());
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t, line);
                }
            }
        }
    }

    fn use_name(&mut self, prefix: &[String], name: String, alias: String, line: usize) {
        let mut segs = prefix.to_vec();
        if name != "self" {
            segs.push(name);
        }
        let alias = if alias == "self" { segs.last().cloned().unwrap_or_default() } else { alias };
        self.reference(segs.clone(), line);
        self.module().uses.insert(alias, segs);
    }
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test"))
}

fn line_of(span: proc_macro2::Span) -> usize {
    span.start().line
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let line = line_of(u.use_token.span);
        if u.leading_colon.is_none() {
            self.use_tree(&mut Vec::new(), &u.tree, line);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // Unit tests sit above every layer (a kernel's test may run it through the
        // registry): `#[cfg(test)]` modules are not part of the graph.
        if is_cfg_test(&m.attrs) {
            return;
        }
        let name = m.ident.to_string();
        self.module().items.insert(name.clone());
        if m.content.is_some() {
            self.scope.push(name);
            self.module();
            syn::visit::visit_item_mod(self, m);
            self.scope.pop();
        }
    }

    fn visit_item(&mut self, item: &'ast syn::Item) {
        let name = match item {
            syn::Item::Const(i) => Some(i.ident.to_string()),
            syn::Item::Enum(i) => Some(i.ident.to_string()),
            syn::Item::Fn(i) => Some(i.sig.ident.to_string()),
            syn::Item::Static(i) => Some(i.ident.to_string()),
            syn::Item::Struct(i) => Some(i.ident.to_string()),
            syn::Item::Trait(i) => Some(i.ident.to_string()),
            syn::Item::Type(i) => Some(i.ident.to_string()),
            syn::Item::Union(i) => Some(i.ident.to_string()),
            syn::Item::Macro(i) => {
                let name = i.ident.as_ref().map(|n| n.to_string());
                if let Some(n) = &name {
                    if i.attrs.iter().any(|a| a.path().is_ident("macro_export")) {
                        self.macros_exported.insert(n.clone(), self.file.to_string());
                    }
                }
                name
            }
            _ => None,
        };
        if let Some(n) = name {
            self.module().items.insert(n);
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() && p.segments.len() > 1 {
            let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            let line = p.segments.first().map(|s| line_of(s.ident.span())).unwrap_or(0);
            self.reference(segs, line);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if i.trait_.is_none() {
            if let syn::Type::Path(t) = &*i.self_ty {
                if let Some(ty) = t.path.segments.last() {
                    for item in &i.items {
                        let name = match item {
                            syn::ImplItem::Fn(f) => f.sig.ident.to_string(),
                            syn::ImplItem::Const(c) => c.ident.to_string(),
                            _ => continue,
                        };
                        self.impl_items.entry((ty.ident.to_string(), name)).or_insert_with(|| self.file.to_string());
                    }
                }
            }
        }
        syn::visit::visit_item_impl(self, i);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        // Paths inside macro bodies (`vec![crate::x::y()]`, `matches!`, ...) are code too.
        self.visit_path(&m.path);
        let tokens: Vec<proc_macro2::TokenTree> = m.tokens.clone().into_iter().collect();
        self.scan_tokens(&tokens);
    }
}

impl Collector<'_> {
    /// Finds `a :: b :: c` sequences in raw tokens (macro bodies).
    fn scan_tokens(&mut self, tokens: &[proc_macro2::TokenTree]) {
        use proc_macro2::TokenTree as T;
        let colons = |j: usize| matches!((tokens.get(j), tokens.get(j + 1)), (Some(T::Punct(a)), Some(T::Punct(b))) if a.as_char() == ':' && b.as_char() == ':');
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                T::Group(g) => {
                    let inner: Vec<T> = g.stream().into_iter().collect();
                    self.scan_tokens(&inner);
                    i += 1;
                }
                T::Ident(id) if !(i >= 2 && colons(i - 2)) => {
                    let line = line_of(id.span());
                    let mut segs = vec![id.to_string()];
                    let mut j = i + 1;
                    while colons(j) {
                        match tokens.get(j + 2) {
                            Some(T::Ident(n)) => {
                                segs.push(n.to_string());
                                j += 3;
                            }
                            _ => break,
                        }
                    }
                    if segs.len() > 1 {
                        self.reference(segs, line);
                    }
                    i = j;
                }
                _ => i += 1,
            }
        }
    }
}

/// A file-level edge: importer -> imported, with the first line that makes it.
type Edges = BTreeMap<(String, String), usize>;

struct Resolver {
    modules: BTreeMap<Vec<String>, Module>,
    macros: BTreeMap<String, String>,
    impl_items: ImplItems,
}

impl Resolver {
    /// Makes a path as written in module `scope` absolute: `crate::`, `self::`, `super::`,
    /// a child module, or a name the module imports. None for anything else (other crates,
    /// std, locals, generic parameters).
    fn absolute(&self, scope: &[String], segs: &[String], depth: usize) -> Option<Vec<String>> {
        let first = segs.first()?;
        let main = scope.first().is_some_and(|s| s == "<main>");
        match first.as_str() {
            "crate" => Some(
                if main { vec!["<main>".to_string()] } else { vec![] }
                    .into_iter()
                    .chain(segs[1..].iter().cloned())
                    .collect(),
            ),
            "self" => Some(scope.iter().chain(&segs[1..]).cloned().collect()),
            "super" => {
                let mut base = scope.to_vec();
                let mut rest = segs;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                Some(base.into_iter().chain(rest.iter().cloned()).collect())
            }
            _ => {
                let child: Vec<String> = scope.iter().chain(std::iter::once(first)).cloned().collect();
                let local = self.modules.get(scope).is_some_and(|m| m.items.contains(first));
                if local || self.modules.contains_key(&child) {
                    return Some(scope.iter().chain(segs).cloned().collect());
                }
                if depth > 8 {
                    return None;
                }
                let m = self.modules.get(scope)?;
                let target = m.uses.get(first)?;
                if target.len() == 1 && target[0] == *first {
                    return None; // `use foo;` of an external crate
                }
                let base = self.absolute(scope, target, depth + 1)?;
                Some(base.into_iter().chain(segs[1..].iter().cloned()).collect())
            }
        }
    }

    /// The file that defines what the absolute `path` names, following `use` re-exports.
    fn resolve(&self, path: &[String], depth: usize) -> Option<String> {
        if depth > 16 {
            return None;
        }
        // The longest prefix that is a module; then the next segment within it.
        for split in (0..=path.len()).rev() {
            let Some(m) = self.modules.get(&path[..split]) else { continue };
            let Some(name) = path.get(split) else { return Some(m.file.clone()) };
            if m.items.contains(name) {
                // `T::f` where `impl T { fn f }` is in another file: a use of that file.
                if let Some(f) = path.get(split + 1).and_then(|f| self.impl_items.get(&(name.clone(), f.clone()))) {
                    return Some(f.clone());
                }
                return Some(m.file.clone());
            }
            if let Some(target) = m.uses.get(name) {
                // A name imported from another crate (`pub use rxvm_vm as vm`) is no file here.
                let base = self.absolute(&path[..split], target, 0)?;
                let full: Vec<String> = base.into_iter().chain(path[split + 1..].iter().cloned()).collect();
                return self.resolve(&full, depth + 1).or_else(|| Some(m.file.clone()));
            }
            for g in &m.globs {
                if let Some(base) = self.absolute(&path[..split], g, 0) {
                    let full: Vec<String> = base.into_iter().chain(path[split..].iter().cloned()).collect();
                    if let Some(f) = self.resolve(&full, depth + 1) {
                        return Some(f);
                    }
                }
            }
            if split == 0 || (split == 1 && path[0] == "<main>") {
                if let Some(f) = self.macros.get(name) {
                    return Some(f.clone());
                }
            }
            return Some(m.file.clone());
        }
        None
    }
}

fn import_graph(sources: &Sources) -> Result<Edges, String> {
    let mut modules: BTreeMap<Vec<String>, Module> = BTreeMap::new();
    let mut macros = BTreeMap::new();
    let mut refs: Vec<Reference> = Vec::new();
    let mut impl_items = ImplItems::new();
    for (file, text) in sources {
        let ast = syn::parse_file(text).map_err(|e| format!("{file}: {e}"))?;
        let mut c = Collector {
            file,
            impl_items: &mut impl_items,
            scope: module_of(file),
            modules: &mut modules,
            refs: &mut refs,
            macros_exported: &mut macros,
        };
        c.module();
        c.visit_file(&ast);
    }
    let krate = Resolver { modules, macros, impl_items };
    let mut edges = Edges::new();
    for r in refs {
        let Some(abs) = krate.absolute(&r.scope, &r.path, 0) else { continue };
        if let Some(to) = krate.resolve(&abs, 0) {
            if to != r.file {
                edges.entry((r.file, to)).or_insert(r.line);
            }
        }
    }
    Ok(edges)
}

fn layer_of(krate: &Crate, file: &str) -> Option<usize> {
    krate
        .layers
        .iter()
        .position(|(_, prefixes)| prefixes.iter().any(|p| file == *p || (p.ends_with('/') && file.starts_with(p))))
}

/// Every violation of the layering in one crate: files in no layer, upward edges, cycles.
fn violations(krate: &Crate, sources: &Sources) -> Vec<String> {
    let mut out = Vec::new();
    let edges = match import_graph(sources) {
        Ok(e) => e,
        Err(e) => return vec![e],
    };
    for file in sources.keys() {
        if layer_of(krate, file).is_none() {
            out.push(format!("{}/{file}: in no layer (add it to LAYERS in tests/layers.rs)", krate.dir));
        }
    }
    for ((from, to), line) in &edges {
        if let (Some(a), Some(b)) = (layer_of(krate, from), layer_of(krate, to)) {
            let known = KNOWN_DEBTS.iter().any(|d| d.0 == krate.dir && d.1 == from && d.2 == to);
            if b > a && !known {
                out.push(format!(
                    "{dir}/{from}:{line}: imports {dir}/{to}, which is in a higher layer ({} -> {})",
                    krate.layers[a].0,
                    krate.layers[b].0,
                    dir = krate.dir
                ));
            }
        }
    }
    for d in KNOWN_DEBTS.iter().filter(|d| d.0 == krate.dir && sources.contains_key(d.1)) {
        if !edges.contains_key(&(d.1.to_string(), d.2.to_string())) {
            out.push(format!("{}/{} no longer imports {}: remove it from KNOWN_DEBTS", d.0, d.1, d.2));
        }
    }
    for (cycle, knot) in cycles(sources.keys(), &edges) {
        let path: Vec<String> = cycle
            .windows(2)
            .map(|w| format!("{} (line {})", w[0], edges[&(w[0].clone(), w[1].clone())]))
            .chain(cycle.last().cloned())
            .collect();
        let more = if knot.len() + 1 > cycle.len() {
            format!(" (one of the cycles among {})", knot.join(", "))
        } else {
            String::new()
        };
        out.push(format!("{}: import cycle: {}{more}", krate.dir, path.join(" -> ")));
    }
    out
}

/// One cycle through each strongly connected component of more than one file, as a list
/// of files that starts and ends with the same file, and the component's files.
fn cycles<'a>(files: impl Iterator<Item = &'a String>, edges: &Edges) -> Vec<(Vec<String>, Vec<String>)> {
    let files: Vec<&String> = files.collect();
    let index: BTreeMap<&String, usize> = files.iter().enumerate().map(|(i, f)| (*f, i)).collect();
    let mut succ = vec![Vec::new(); files.len()];
    for (from, to) in edges.keys() {
        if let (Some(&a), Some(&b)) = (index.get(from), index.get(to)) {
            succ[a].push(b);
        }
    }
    // Tarjan's algorithm (recursion depth is at most the number of files).
    struct Tarjan<'s> {
        succ: &'s [Vec<usize>],
        idx: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        comps: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: usize) {
            self.idx[v] = Some(self.next);
            self.low[v] = self.next;
            self.next += 1;
            self.stack.push(v);
            self.on[v] = true;
            for &w in &self.succ[v] {
                match self.idx[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(i) if self.on[w] => self.low[v] = self.low[v].min(i),
                    _ => {}
                }
            }
            if Some(self.low[v]) == self.idx[v] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    self.comps.push(comp);
                }
            }
        }
    }
    let n = files.len();
    let mut t = Tarjan {
        succ: &succ,
        idx: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: vec![],
        next: 0,
        comps: vec![],
    };
    for v in 0..n {
        if t.idx[v].is_none() {
            t.visit(v);
        }
    }
    // Within a component, a shortest cycle through its first file (breadth-first).
    t.comps
        .iter()
        .map(|comp| {
            let inside: BTreeSet<usize> = comp.iter().copied().collect();
            let start = *comp.iter().min().unwrap();
            let mut prev = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([start]);
            'bfs: while let Some(v) = queue.pop_front() {
                for &w in &succ[v] {
                    if !inside.contains(&w) || prev.contains_key(&w) {
                        continue;
                    }
                    prev.insert(w, v);
                    if w == start {
                        break 'bfs;
                    }
                    queue.push_back(w);
                }
            }
            let mut cycle = vec![start];
            let mut v = prev[&start];
            while v != start {
                cycle.push(v);
                v = prev[&v];
            }
            cycle.push(start);
            cycle.reverse();
            let names = |ids: &mut dyn Iterator<Item = usize>| ids.map(|i| files[i].clone()).collect::<Vec<_>>();
            (names(&mut cycle.into_iter()), names(&mut inside.into_iter()))
        })
        .collect()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn layers_have_one_direction_and_no_cycles() {
    let mut all = Vec::new();
    for krate in LAYERS {
        let sources = read_sources(&root().join(krate.dir));
        if std::env::var_os("RXVM_PRINT_LAYERS").is_some() {
            for ((from, to), line) in import_graph(&sources).unwrap() {
                println!("{}/{from}:{line} -> {to}", krate.dir);
            }
        }
        all.extend(violations(krate, &sources));
    }
    assert!(all.is_empty(), "the layering is broken:\n{}", all.join("\n"));
}

/// The check itself: a deliberately added upward import (the IR importing the
/// interpreter), and a cycle between two files of one layer, make it fail with the file,
/// the line and the layers named.
#[test]
fn an_upward_import_or_a_cycle_fails_the_check() {
    let krate = &LAYERS[0];
    let mut sources = read_sources(&root().join(krate.dir));
    let (ir_file, ir_text) = sources.iter_mut().find(|(f, _)| f.starts_with("ir/")).expect("an ir/ file");
    let ir_file = ir_file.clone();
    let lines = ir_text.lines().count();
    ir_text.push_str("\n#[allow(unused_imports)]\nuse crate::interp::Vm;\n");
    let found = violations(krate, &sources);
    let expected = format!("vm/src/{ir_file}:{}: imports vm/src/interp/", lines + 3);
    assert!(
        found.iter().any(|v| v.starts_with(&expected) && v.ends_with("which is in a higher layer (ir -> interp)")),
        "expected a violation starting {expected:?}, found {found:#?}"
    );

    let mut synthetic = Sources::new();
    synthetic.insert("lib.rs".into(), "mod a;\nmod b;\n".into());
    synthetic.insert("ir/a.rs".into(), "use super::b::B;\npub struct A;\n".into());
    synthetic.insert("ir/b.rs".into(), "pub struct B;\nfn f() -> crate::ir::a::A { super::a::A }\n".into());
    synthetic.insert("ir/mod.rs".into(), "pub mod a;\npub mod b;\n".into());
    let found = violations(krate, &synthetic);
    assert_eq!(found, vec!["vm/src: import cycle: ir/a.rs (line 1) -> ir/b.rs (line 2) -> ir/a.rs".to_string()]);
}

/// Re-exports are followed to the defining file, so a `pub use` in a parent module does
/// not count as the parent: `use crate::ir::B` (re-exported by `ir/mod.rs`) is an edge to `ir/b.rs`.
#[test]
fn re_exports_resolve_to_the_defining_file() {
    let mut s = Sources::new();
    s.insert("lib.rs".into(), "pub mod ir;\npub mod interp;\n".into());
    s.insert("ir/mod.rs".into(), "mod b;\npub use b::B;\n".into());
    s.insert("ir/b.rs".into(), "pub struct B;\n".into());
    s.insert("interp/mod.rs".into(), "use crate::ir::B;\nfn f(_: B) {}\n".into());
    let edges = import_graph(&s).unwrap();
    assert!(edges.contains_key(&("interp/mod.rs".to_string(), "ir/b.rs".to_string())), "{edges:?}");
    assert!(!edges.contains_key(&("interp/mod.rs".to_string(), "ir/mod.rs".to_string())), "{edges:?}");
}

/// A method or associated const of a type, defined in an `impl` block of another file, is
/// a use of that file: `OpId::from_name` with `impl OpId { fn from_name }` in the registry.
#[test]
fn inherent_items_resolve_to_their_impl_block() {
    let mut s = Sources::new();
    s.insert("lib.rs".into(), "pub mod ir;\npub mod ops;\n".into());
    s.insert("ir/mod.rs".into(), "pub struct OpId(pub u32);\nfn f() { let _ = OpId::from_name(\"Relu\"); }\n".into());
    s.insert("ops/mod.rs".into(), "use crate::ir::OpId;\nimpl OpId { pub fn from_name(_: &str) {} }\n".into());
    let edges = import_graph(&s).unwrap();
    assert!(edges.contains_key(&("ir/mod.rs".to_string(), "ops/mod.rs".to_string())), "{edges:?}");
}
