//! Memory pools: which storage each planned buffer lives in.
//!
//! Every buffer belongs to a class — a graph **input**, an **activation**, or a graph
//! **output** (a buffer that holds any output) — and each class, or a single tensor, maps to
//! a named pool. Each pool becomes its own storage; reuse and packing happen only within a
//! pool. Inputs are not planned by default (they stay in the caller's memory); with
//! `--inputs-in-arena` they join the activations' pool, live from entry to their last
//! reader, so their bytes are reused afterwards (the input data is overwritten).
//!
//! Who allocates a pool: the program (`alloc_storage`), unless the pool holds an input or —
//! with `--io caller` — an output; then it is a storage parameter of `@main` that the caller
//! provides, and inputs in it are placed parameters ([`rxvm_vm::module::Placement`]).

use std::collections::HashMap;

/// Who owns the memory of the outputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Io {
    /// The program allocates its outputs (in the `arena` pool unless mapped elsewhere).
    #[default]
    Vm,
    /// Outputs are views in a storage the caller passes (the `outputs` pool unless mapped
    /// elsewhere): results land in the caller's memory with no copy.
    Caller,
}

impl Io {
    pub fn from_name(s: &str) -> Result<Io, String> {
        match s {
            "vm" => Ok(Io::Vm),
            "caller" => Ok(Io::Caller),
            _ => Err(format!("expected `vm` or `caller`, found `{s}`")),
        }
    }
}

/// Which graph inputs are planned in the activations' pool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum InputsInArena {
    #[default]
    None,
    All,
    Names(Vec<String>),
}

impl InputsInArena {
    /// `all` or a comma-separated list of input names.
    pub fn parse(s: &str) -> InputsInArena {
        if s == "all" {
            InputsInArena::All
        } else {
            InputsInArena::Names(s.split(',').filter(|n| !n.is_empty()).map(str::to_string).collect())
        }
    }
}

/// The class of a planned buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Input,
    Activation,
    Output,
}

/// The pool of the activations unless `--pool activations=NAME` says otherwise.
pub const DEFAULT_POOL: &str = "arena";

/// The mapping from classes and tensors to pool names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolMap {
    /// `--pool KEY=POOL` in the order given (a later one for the same key wins).
    pub rules: Vec<(String, String)>,
    pub inputs_in_arena: InputsInArena,
    pub io: Io,
}

impl PoolMap {
    /// Parses `KEY=POOL` (`KEY` a class — inputs, activations, outputs — or a tensor name).
    pub fn parse_rule(s: &str) -> Result<(String, String), String> {
        let (k, v) = s.split_once('=').ok_or_else(|| format!("`{s}`: expected CLASS_OR_TENSOR=POOL"))?;
        if k.is_empty() {
            return Err(format!("`{s}`: the class or tensor name is empty"));
        }
        if k == "constants" {
            return Err(format!(
                "`{s}`: constants are not planned: each VM loads the module's constants once, into storages of their own on device 0"
            ));
        }
        if v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
            return Err(format!("`{s}`: a pool name is letters, digits, `_` and `.`, found `{v}`"));
        }
        Ok((k.to_string(), v.to_string()))
    }

    fn rule(&self, key: &str) -> Option<&str> {
        self.rules.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The pool of the activations.
    pub fn activations(&self) -> &str {
        self.rule("activations").unwrap_or(DEFAULT_POOL)
    }

    /// The pool of a buffer of `class` whose tensors are `names` (the defining tensor first),
    /// or `None` for an input left in the caller's memory.
    pub fn pool_of(&self, class: Class, names: &[&str]) -> Option<String> {
        if let Some(p) = names.iter().find_map(|n| self.rule(n)) {
            return Some(p.to_string());
        }
        match class {
            Class::Activation => Some(self.activations().to_string()),
            Class::Output => Some(
                self.rule("outputs")
                    .unwrap_or(if self.io == Io::Caller { "outputs" } else { self.activations() })
                    .to_string(),
            ),
            Class::Input => {
                if let Some(p) = self.rule("inputs") {
                    return Some(p.to_string());
                }
                let planned = match &self.inputs_in_arena {
                    InputsInArena::None => false,
                    InputsInArena::All => true,
                    InputsInArena::Names(v) => v.iter().any(|n| n == names[0]),
                };
                planned.then(|| self.activations().to_string())
            }
        }
    }

    /// Checks that every tensor rule and `--inputs-in-arena` name refers to a tensor of the
    /// program (`inputs` are the graph inputs, `tensors` every planned tensor).
    pub fn check_names(&self, inputs: &[&str], tensors: &HashMap<String, usize>) -> Result<(), String> {
        for (k, _) in &self.rules {
            if !matches!(k.as_str(), "inputs" | "activations" | "outputs")
                && !inputs.contains(&k.as_str())
                && !tensors.contains_key(k)
            {
                return Err(format!(
                    "--pool {k}=...: `{k}` is neither a class (inputs, activations, outputs) nor a tensor the program computes"
                ));
            }
        }
        if let InputsInArena::Names(v) = &self.inputs_in_arena {
            for n in v {
                if !inputs.contains(&n.as_str()) {
                    return Err(format!(
                        "--inputs-in-arena: `{n}` is not a graph input; the inputs are: {}",
                        inputs.join(", ")
                    ));
                }
            }
        }
        Ok(())
    }

    /// Whether the caller provides the pool (it holds an input, or an output under
    /// `--io caller`).
    pub fn is_parameter(&self, holds_input: bool, holds_output: bool) -> bool {
        holds_input || (holds_output && self.io == Io::Caller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_rules_and_defaults() {
        let mut m = PoolMap::default();
        assert_eq!(m.pool_of(Class::Input, &["x"]), None);
        assert_eq!(m.pool_of(Class::Activation, &["a"]).as_deref(), Some("arena"));
        assert_eq!(m.pool_of(Class::Output, &["y"]).as_deref(), Some("arena"));
        m.io = Io::Caller;
        assert_eq!(m.pool_of(Class::Output, &["y"]).as_deref(), Some("outputs"));
        m.inputs_in_arena = InputsInArena::parse("x");
        assert_eq!(m.pool_of(Class::Input, &["x"]).as_deref(), Some("arena"));
        assert_eq!(m.pool_of(Class::Input, &["z"]), None);
        m.rules.push(PoolMap::parse_rule("activations=act").unwrap());
        m.rules.push(PoolMap::parse_rule("conv1=side").unwrap());
        assert_eq!(m.pool_of(Class::Input, &["x"]).as_deref(), Some("act"));
        assert_eq!(m.pool_of(Class::Activation, &["conv1"]).as_deref(), Some("side"));
        // A view's name counts too.
        assert_eq!(m.pool_of(Class::Activation, &["c", "conv1"]).as_deref(), Some("side"));
        assert!(PoolMap::parse_rule("constants=w").unwrap_err().contains("not planned"));
        assert!(PoolMap::parse_rule("inputs").unwrap_err().contains("CLASS_OR_TENSOR=POOL"));
        assert!(PoolMap::parse_rule("inputs=a b").unwrap_err().contains("pool name"));
    }
}
