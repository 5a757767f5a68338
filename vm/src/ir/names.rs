//! Function ids by name, for [`crate::Vm::invoke`]: every call by name looks its function
//! up, so the lookup is part of an empty invocation's cost.
//!
//! A compiled model has a few functions: a linear scan beats hashing the name. Each name is
//! kept as its length and one word of its bytes ([`key`]) that, for names of up to 8
//! bytes, is equal for two names of the same length only when they are the same: comparing
//! a name is then two compares, with no byte loop and no call to `bcmp`. Modules with
//! more than [`LINEAR`] functions use a hash map.

use crate::ir::bytecode::{EntityRef, FuncId};
use crate::ir::module::Module;
use rustc_hash::FxHashMap;

/// The most functions looked up by a scan.
const LINEAR: usize = 8;

pub(crate) enum FuncNames {
    /// Per function, in order: its name's length and [`key`].
    Scan(Box<[(usize, u64)]>),
    Hashed(FxHashMap<Box<str>, FuncId>),
}

impl FuncNames {
    pub(crate) fn new(module: &Module) -> FuncNames {
        if module.funcs.len() > LINEAR {
            FuncNames::Hashed(module.funcs.iter().map(|(id, f)| (f.name.as_str().into(), id)).collect())
        } else {
            FuncNames::Scan(module.funcs.values().map(|f| (f.name.len(), key(f.name.as_bytes()))).collect())
        }
    }

    /// The function called `name` (a leading `@` allowed) in `module`, the module this
    /// table was made from.
    #[inline]
    pub(crate) fn find(&self, module: &Module, name: &str) -> Option<FuncId> {
        let name = name.strip_prefix('@').unwrap_or(name);
        match self {
            FuncNames::Scan(keys) => {
                let (n, k) = (name.len(), key(name.as_bytes()));
                // Up to 8 bytes the key and length are the name; beyond, compare the rest.
                let same = |i: usize, &(len, key): &(usize, u64)| {
                    len == n && key == k && (n <= 8 || module.funcs.get(FuncId::new(i)).is_some_and(|f| f.name == name))
                };
                keys.iter().enumerate().position(|(i, e)| same(i, e)).map(FuncId::new)
            }
            FuncNames::Hashed(index) => index.get(name).copied(),
        }
    }
}

/// One word of a name's bytes: up to 8 bytes, every byte of it (with its length, the
/// name itself); beyond, its first 8. Loads overlap instead of looping: 4 to 8 bytes are
/// its first and last 4, 1 to 3 its first, middle and last byte.
#[inline(always)]
fn key(b: &[u8]) -> u64 {
    let n = b.len();
    let word = |at: usize| b.get(at..at + 4).map_or(0, |w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as u64);
    if n >= 8 {
        word(0) | word(4) << 32
    } else if n >= 4 {
        word(0) | word(n - 4) << 32
    } else if n > 0 {
        b[0] as u64 | (b[n / 2] as u64) << 8 | (b[n - 1] as u64) << 16
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(names: &[&str]) -> Module {
        let mut mb = crate::ir::builder::ModuleBuilder::new("names");
        for name in names {
            let mut f = mb.function(name, vec![], vec![]);
            f.ret(&[]);
            mb.add_function(f);
        }
        mb.build().expect("a module")
    }

    #[test]
    fn finds_every_function_by_its_whole_name_scanned_or_hashed() {
        // Names sharing their first 8 bytes, short names, a name that is a prefix of another.
        let few = ["forward_a", "forward_b", "main", "m", "mai", "forward_"];
        let many: Vec<String> = (0..20).map(|i| format!("function_{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        for names in [&few[..], &many[..]] {
            let m = module(names);
            let table = FuncNames::new(&m);
            assert_eq!(matches!(table, FuncNames::Scan(_)), names.len() <= LINEAR);
            for (i, name) in names.iter().enumerate() {
                assert_eq!(table.find(&m, name), Some(FuncId(i as u32)), "{name}");
                assert_eq!(table.find(&m, &format!("@{name}")), Some(FuncId(i as u32)), "@{name}");
            }
            for absent in ["", "ma", "forward_c", "forward_ab", "function_20", "@"] {
                assert_eq!(table.find(&m, absent), None, "{absent:?}");
            }
        }
    }

    #[test]
    fn names_of_up_to_8_bytes_have_keys_as_distinct_as_they_are() {
        let names = ["", "a", "b", "ab", "ba", "abc", "acb", "main", "mair", "main2", "maim2", "abcdefgh", "abcdefgi"];
        for a in names {
            for b in names {
                let same_key = a.len() == b.len() && key(a.as_bytes()) == key(b.as_bytes());
                assert_eq!(same_key, a == b, "{a:?} and {b:?}");
            }
        }
    }
}
