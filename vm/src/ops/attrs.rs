//! Operator attributes: `{ strides = [2, 2], alpha = 0.5, mode = "constant" }`.

use std::fmt;

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
