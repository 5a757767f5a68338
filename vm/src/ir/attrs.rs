//! Operator attributes: `{ strides = [2, 2], alpha = 0.5, mode = "constant" }`.

use std::fmt;
use std::hash::Hasher;

/// One attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    Int(i64),
    Float(f64),
    Ints(Vec<i64>),
    Floats(Vec<f64>),
    Str(String),
}

impl AttrValue {
    pub fn describe(&self) -> String {
        match self {
            AttrValue::Int(v) => format!("the integer {v}"),
            AttrValue::Float(v) => format!("the float {v:?}"),
            AttrValue::Ints(v) => format!("the integer list {v:?}"),
            AttrValue::Floats(v) => format!("the float list {v:?}"),
            AttrValue::Str(s) => format!("the string {s:?}"),
        }
    }
}

impl fmt::Display for AttrValue {
    /// The assembly form: `3`, `0.5`, `[1, 2]`, `[0.5, 1.0]`, `"text"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let float = |v: f64| {
            let s = format!("{v:?}");
            if s.contains(['.', 'e', 'n', 'i']) {
                s
            } else {
                format!("{s}.0")
            }
        };
        match self {
            AttrValue::Int(v) => write!(f, "{v}"),
            AttrValue::Float(v) => f.write_str(&float(*v)),
            AttrValue::Ints(v) => {
                let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
                write!(f, "[{}]", parts.join(", "))
            }
            AttrValue::Floats(v) => {
                let parts: Vec<String> = v.iter().map(|x| float(*x)).collect();
                write!(f, "[{}]", parts.join(", "))
            }
            AttrValue::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// What an attribute accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrKind {
    Int,
    /// A float; an integer literal is accepted too.
    Float,
    Ints,
    Floats,
    Str,
}

impl AttrKind {
    pub fn accepts(self, v: &AttrValue) -> bool {
        matches!(
            (self, v),
            (AttrKind::Int, AttrValue::Int(_))
                | (AttrKind::Float, AttrValue::Float(_) | AttrValue::Int(_))
                | (AttrKind::Ints, AttrValue::Ints(_))
                | (AttrKind::Floats, AttrValue::Floats(_) | AttrValue::Ints(_))
                | (AttrKind::Str, AttrValue::Str(_))
        )
    }

    pub fn describe(self) -> &'static str {
        match self {
            AttrKind::Int => "an integer",
            AttrKind::Float => "a float",
            AttrKind::Ints => "a list of integers",
            AttrKind::Floats => "a list of floats",
            AttrKind::Str => "a string",
        }
    }
}

/// An attribute in an operator's schema.
#[derive(Clone, Copy, Debug)]
pub struct AttrSpec {
    pub name: &'static str,
    pub kind: AttrKind,
}

/// The attributes of one call, in the order written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attrs(pub Vec<(String, AttrValue)>);

impl Attrs {
    pub fn iter(&self) -> impl Iterator<Item = (&str, &AttrValue)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Whether the two sets are the same, names, order and values, floats bit for bit
    /// (`-0.0` and `0.0` differ, NaN equals the same NaN): sets that behave and print
    /// alike, which may therefore be shared by their call sites.
    pub fn same_bits(&self, other: &Attrs) -> bool {
        let same = |a: &AttrValue, b: &AttrValue| match (a, b) {
            (AttrValue::Int(x), AttrValue::Int(y)) => x == y,
            (AttrValue::Float(x), AttrValue::Float(y)) => x.to_bits() == y.to_bits(),
            (AttrValue::Ints(x), AttrValue::Ints(y)) => x == y,
            (AttrValue::Floats(x), AttrValue::Floats(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(a, b)| a.to_bits() == b.to_bits())
            }
            (AttrValue::Str(x), AttrValue::Str(y)) => x == y,
            _ => false,
        };
        self.0.len() == other.0.len() && self.0.iter().zip(&other.0).all(|((n, a), (m, b))| n == m && same(a, b))
    }

    /// Hashes what [`Attrs::same_bits`] compares.
    pub fn hash_bits<H: Hasher>(&self, h: &mut H) {
        h.write_usize(self.0.len());
        for (name, v) in &self.0 {
            h.write(name.as_bytes());
            match v {
                AttrValue::Int(x) => h.write_u64(*x as u64),
                AttrValue::Float(x) => h.write_u64(x.to_bits()),
                AttrValue::Ints(xs) => {
                    h.write_usize(xs.len());
                    xs.iter().for_each(|x| h.write_u64(*x as u64));
                }
                AttrValue::Floats(xs) => {
                    h.write_usize(xs.len());
                    xs.iter().for_each(|x| h.write_u64(x.to_bits()));
                }
                AttrValue::Str(s) => h.write(s.as_bytes()),
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<&AttrValue> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    pub fn int(&self, name: &str, default: i64) -> i64 {
        match self.get(name) {
            Some(AttrValue::Int(v)) => *v,
            _ => default,
        }
    }

    pub fn float(&self, name: &str, default: f64) -> f64 {
        match self.get(name) {
            Some(AttrValue::Float(v)) => *v,
            Some(AttrValue::Int(v)) => *v as f64,
            _ => default,
        }
    }

    pub fn ints(&self, name: &str) -> Option<&[i64]> {
        match self.get(name) {
            Some(AttrValue::Ints(v)) => Some(v),
            _ => None,
        }
    }

    pub fn floats(&self, name: &str) -> Option<Vec<f64>> {
        match self.get(name) {
            Some(AttrValue::Floats(v)) => Some(v.clone()),
            Some(AttrValue::Ints(v)) => Some(v.iter().map(|&x| x as f64).collect()),
            _ => None,
        }
    }

    pub fn str(&self, name: &str) -> Option<&str> {
        match self.get(name) {
            Some(AttrValue::Str(s)) => Some(s),
            _ => None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Attrs {
    /// `{ a = 1, b = [2, 3] }`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{ ")?;
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{k} = {v}")?;
        }
        f.write_str(" }")
    }
}

/// Stores a module's attribute sets once each: call sites with equal attributes (see
/// [`Attrs::same_bits`]) share one set, so a model's hundreds of
/// `{ kernel_shape = [3, 3], ... }` are stored, written, loaded and verified once. The
/// assembler and the module builder both number sets with it, so a module reads the
/// same however it was made and survives a disassembly round trip.
#[derive(Default)]
pub struct AttrTable {
    /// Ids (1-based) by content hash.
    by_content: rustc_hash::FxHashMap<u64, smallvec::SmallVec<[u32; 1]>>,
}

impl AttrTable {
    /// The id of `set` among `sets` (1-based; 0 for an empty set): an equal set's if
    /// `sets` has one, else `set` is added. `None` when `sets` has no room for another id.
    pub fn intern(&mut self, sets: &mut Vec<Attrs>, set: Attrs) -> Option<u32> {
        if set.is_empty() {
            return Some(0);
        }
        let mut h = rustc_hash::FxHasher::default();
        set.hash_bits(&mut h);
        let key = h.finish();
        let equal = |id: &&u32| sets.get(**id as usize - 1).is_some_and(|s| s.same_bits(&set));
        if let Some(&id) = self.by_content.get(&key).and_then(|ids| ids.iter().find(equal)) {
            return Some(id);
        }
        let id = u32::try_from(sets.len() + 1).ok()?;
        sets.push(set);
        self.by_content.entry(key).or_default().push(id);
        Some(id)
    }
}
