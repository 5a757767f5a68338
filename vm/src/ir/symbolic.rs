//! Integer expressions over dimension symbols (`%n`, `%s`): the sizes, dimensions and
//! byte offsets of a program that serves every shape are expressions in its symbols,
//! computed in bytecode at entry (docs/symbolic-shapes.md).
//!
//! An [`Expr`] is kept in one canonical form, so that equal expressions compare equal
//! (`n*3 + n == 4*n`): a sum of integer multiples of monomials, each a sorted product of
//! atoms with powers. Atoms are the symbols and what a polynomial cannot say: floor
//! division and remainder by a positive constant, max and min. Floor division takes out
//! what divides exactly (`(4*n + 2) // 2 == 2*n + 1`, `(4*n + 3) // 2 == 2*n + 1 + 1 // 2`
//! folded to `2*n + 1`), which keeps the common shapes (`n*c`, `(s + 2p - k) // st + 1`)
//! small. Arithmetic is checked: an operation that would overflow `i64` gives `None`.

use std::cmp::Ordering;
use std::fmt;

/// A dimension symbol: an index into the program's symbol table.
pub type SymId = u32;

/// What a polynomial term multiplies: a symbol, or an operation polynomials cannot
/// express.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Atom {
    Sym(SymId),
    /// `⌊e / d⌋` with `d > 1` and `e` reduced: no term of `e` is a multiple of `d`.
    FloorDiv(Box<Expr>, i64),
    /// `e mod d` (in `0..d`) with `d > 1` and `e` reduced as for `FloorDiv`.
    Mod(Box<Expr>, i64),
    /// The larger of two expressions whose difference is not a constant (ordered).
    Max(Box<Expr>, Box<Expr>),
    /// The smaller of two such expressions (ordered).
    Min(Box<Expr>, Box<Expr>),
}

/// A product of atoms with positive powers, sorted by atom; empty for the constant 1.
type Monomial = Vec<(Atom, u32)>;

/// An integer expression in canonical form: `Σ coefficient · monomial`, sorted by
/// monomial, no zero coefficient, each monomial once.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Expr {
    terms: Vec<(Monomial, i64)>,
}

impl Expr {
    pub fn constant(c: i64) -> Expr {
        let terms = if c == 0 { Vec::new() } else { vec![(Vec::new(), c)] };
        Expr { terms }
    }

    pub fn sym(s: SymId) -> Expr {
        Expr::atom(Atom::Sym(s))
    }

    fn atom(a: Atom) -> Expr {
        Expr { terms: vec![(vec![(a, 1)], 1)] }
    }

    /// The value when the expression is a constant.
    pub fn as_const(&self) -> Option<i64> {
        match self.terms.as_slice() {
            [] => Some(0),
            [(m, c)] if m.is_empty() => Some(*c),
            _ => None,
        }
    }

    /// The symbol when the expression is exactly one symbol.
    pub fn as_sym(&self) -> Option<SymId> {
        match self.terms.as_slice() {
            [(m, 1)] => match m.as_slice() {
                [(Atom::Sym(s), 1)] => Some(*s),
                _ => None,
            },
            _ => None,
        }
    }

    /// The terms, `(monomial, coefficient)`: each monomial a sorted product of atoms with
    /// their powers (empty for the constant term). For code that evaluates the expression
    /// another way (the compiler emits it as integer instructions).
    pub fn terms(&self) -> impl Iterator<Item = (&[(Atom, u32)], i64)> + '_ {
        self.terms.iter().map(|(m, c)| (m.as_slice(), *c))
    }

    /// One term with coefficient 1 (`%n`, `%n*%s`): printed without parentheses.
    fn is_simple(&self) -> bool {
        matches!(self.terms.as_slice(), [(_, 1)])
    }

    /// Every symbol the expression reads, sorted, once each.
    pub fn symbols(&self) -> Vec<SymId> {
        let mut out = Vec::new();
        self.collect_symbols(&mut out);
        out.sort_unstable();
        out.dedup();
        out
    }

    fn collect_symbols(&self, out: &mut Vec<SymId>) {
        for (m, _) in &self.terms {
            for (a, _) in m {
                match a {
                    Atom::Sym(s) => out.push(*s),
                    Atom::FloorDiv(e, _) | Atom::Mod(e, _) => e.collect_symbols(out),
                    Atom::Max(a, b) | Atom::Min(a, b) => {
                        a.collect_symbols(out);
                        b.collect_symbols(out);
                    }
                }
            }
        }
    }

    /// Builds the canonical form of a list of terms (any order, repeats, zeros).
    fn from_terms(mut terms: Vec<(Monomial, i64)>) -> Option<Expr> {
        terms.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(Monomial, i64)> = Vec::with_capacity(terms.len());
        for (m, c) in terms {
            match out.last_mut() {
                Some((lm, lc)) if *lm == m => *lc = lc.checked_add(c)?,
                _ => out.push((m, c)),
            }
        }
        out.retain(|(_, c)| *c != 0);
        Some(Expr { terms: out })
    }

    pub fn add(&self, o: &Expr) -> Option<Expr> {
        Expr::from_terms(self.terms.iter().chain(&o.terms).cloned().collect())
    }

    pub fn sub(&self, o: &Expr) -> Option<Expr> {
        self.add(&o.scale(-1)?)
    }

    /// `c · self`.
    pub fn scale(&self, c: i64) -> Option<Expr> {
        let terms = self.terms.iter().map(|(m, k)| Some((m.clone(), k.checked_mul(c)?))).collect::<Option<_>>()?;
        Expr::from_terms(terms)
    }

    pub fn mul(&self, o: &Expr) -> Option<Expr> {
        let mut terms = Vec::with_capacity(self.terms.len() * o.terms.len());
        for (ma, ca) in &self.terms {
            for (mb, cb) in &o.terms {
                terms.push((mul_monomials(ma, mb)?, ca.checked_mul(*cb)?));
            }
        }
        Expr::from_terms(terms)
    }

    /// Splits `self` into `d · q + r` where every coefficient of `r` is in `1..d`
    /// (`d > 0`): the form floor division and remainder reduce to.
    fn split(&self, d: i64) -> (Expr, Expr) {
        let (mut q, mut r) = (Vec::new(), Vec::new());
        for (m, c) in &self.terms {
            let (k, c2) = (c.div_euclid(d), c.rem_euclid(d));
            if k != 0 {
                q.push((m.clone(), k));
            }
            if c2 != 0 {
                r.push((m.clone(), c2));
            }
        }
        (Expr { terms: q }, Expr { terms: r })
    }

    /// `⌊self / d⌋`; `None` when `d <= 0` or on overflow.
    pub fn floor_div(&self, d: i64) -> Option<Expr> {
        if d <= 0 {
            return None;
        }
        if d == 1 {
            return Some(self.clone());
        }
        let (q, r) = self.split(d);
        // ⌊(d·q + r) / d⌋ = q + ⌊r / d⌋ for integer q; a constant r is in 0..d.
        if r.as_const().is_some() {
            return Some(q);
        }
        q.add(&Expr::atom(Atom::FloorDiv(Box::new(r), d)))
    }

    /// `self mod d` (in `0..d`, as Python's `%`); `None` when `d <= 0`.
    pub fn rem(&self, d: i64) -> Option<Expr> {
        if d <= 0 {
            return None;
        }
        if d == 1 {
            return Some(Expr::default());
        }
        let (_, r) = self.split(d);
        if r.as_const().is_some() {
            return Some(r);
        }
        Some(Expr::atom(Atom::Mod(Box::new(r), d)))
    }

    /// `⌈self / d⌉`.
    pub fn ceil_div(&self, d: i64) -> Option<Expr> {
        self.add(&Expr::constant(d.checked_sub(1)?))?.floor_div(d)
    }

    pub fn maximum(&self, o: &Expr) -> Option<Expr> {
        self.extreme(o, true)
    }

    pub fn minimum(&self, o: &Expr) -> Option<Expr> {
        self.extreme(o, false)
    }

    fn extreme(&self, o: &Expr, max: bool) -> Option<Expr> {
        if let Some(d) = self.sub(o)?.as_const() {
            let self_wins = if max { d >= 0 } else { d <= 0 };
            return Some(if self_wins { self.clone() } else { o.clone() });
        }
        let (a, b) = match self.cmp(o) {
            Ordering::Greater => (o.clone(), self.clone()),
            _ => (self.clone(), o.clone()),
        };
        Some(Expr::atom(if max { Atom::Max(Box::new(a), Box::new(b)) } else { Atom::Min(Box::new(a), Box::new(b)) }))
    }

    /// The value with each symbol's value from `value`; `None` when a symbol has none or
    /// the arithmetic overflows.
    pub fn eval(&self, value: &dyn Fn(SymId) -> Option<i64>) -> Option<i64> {
        let mut acc: i64 = 0;
        for (m, c) in &self.terms {
            let mut t = *c;
            for (a, p) in m {
                let v = a.eval(value)?;
                for _ in 0..*p {
                    t = t.checked_mul(v)?;
                }
            }
            acc = acc.checked_add(t)?;
        }
        Some(acc)
    }

    /// The text syntax with each symbol named by `name` (`2*%n*%s + 1`, `(%s + 1) // 2`).
    pub fn display<'a>(&'a self, name: &'a dyn Fn(SymId) -> String) -> impl fmt::Display + 'a {
        Shown { e: self, name }
    }
}

impl Atom {
    fn eval(&self, value: &dyn Fn(SymId) -> Option<i64>) -> Option<i64> {
        match self {
            Atom::Sym(s) => value(*s),
            Atom::FloorDiv(e, d) => Some(e.eval(value)?.div_euclid(*d)),
            Atom::Mod(e, d) => Some(e.eval(value)?.rem_euclid(*d)),
            Atom::Max(a, b) => Some(a.eval(value)?.max(b.eval(value)?)),
            Atom::Min(a, b) => Some(a.eval(value)?.min(b.eval(value)?)),
        }
    }
}

fn mul_monomials(a: &Monomial, b: &Monomial) -> Option<Monomial> {
    let mut out: Monomial = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.0 == y.0 => {
                out.push((x.0.clone(), x.1.checked_add(y.1)?));
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x.0 < y.0 => {
                out.push(x.clone());
                i += 1;
            }
            (Some(_), Some(y)) | (None, Some(y)) => {
                out.push(y.clone());
                j += 1;
            }
            (Some(x), None) => {
                out.push(x.clone());
                i += 1;
            }
            (None, None) => break,
        }
    }
    Some(out)
}

impl From<i64> for Expr {
    fn from(c: i64) -> Expr {
        Expr::constant(c)
    }
}

struct Shown<'a> {
    e: &'a Expr,
    name: &'a dyn Fn(SymId) -> String,
}

impl Shown<'_> {
    fn sub<'b>(&'b self, e: &'b Expr) -> Shown<'b> {
        Shown { e, name: self.name }
    }

    fn atom(&self, f: &mut fmt::Formatter<'_>, a: &Atom) -> fmt::Result {
        match a {
            Atom::Sym(s) => f.write_str(&(self.name)(*s)),
            Atom::FloorDiv(e, d) if e.is_simple() => write!(f, "{} // {d}", self.sub(e)),
            Atom::FloorDiv(e, d) => write!(f, "({}) // {d}", self.sub(e)),
            Atom::Mod(e, d) if e.is_simple() => write!(f, "{} % {d}", self.sub(e)),
            Atom::Mod(e, d) => write!(f, "({}) % {d}", self.sub(e)),
            Atom::Max(a, b) => write!(f, "max({}, {})", self.sub(a), self.sub(b)),
            Atom::Min(a, b) => write!(f, "min({}, {})", self.sub(a), self.sub(b)),
        }
    }
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.e.terms.is_empty() {
            return f.write_str("0");
        }
        // Highest-degree terms first reads naturally (`2*n + 1`): the constant is last.
        let mut terms: Vec<&(Monomial, i64)> = self.e.terms.iter().collect();
        terms.sort_by_key(|(m, _)| std::cmp::Reverse(m.iter().map(|(_, p)| *p).sum::<u32>()));
        for (k, (m, c)) in terms.into_iter().enumerate() {
            let (neg, mag) = (*c < 0, c.unsigned_abs());
            match (k, neg) {
                (0, true) => f.write_str("-")?,
                (0, false) => {}
                (_, true) => f.write_str(" - ")?,
                (_, false) => f.write_str(" + ")?,
            }
            if m.is_empty() {
                write!(f, "{mag}")?;
                continue;
            }
            if mag != 1 {
                write!(f, "{mag}*")?;
            }
            for (i, (a, p)) in m.iter().enumerate() {
                if i > 0 {
                    f.write_str("*")?;
                }
                self.atom(f, a)?;
                if *p > 1 {
                    write!(f, "^{p}")?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn name(s: SymId) -> String {
        ["%n", "%s", "%h"].get(s as usize).map_or_else(|| format!("%s{s}"), |n| n.to_string())
    }

    fn show(e: &Expr) -> String {
        e.display(&name).to_string()
    }

    fn n() -> Expr {
        Expr::sym(0)
    }

    fn s() -> Expr {
        Expr::sym(1)
    }

    fn c(v: i64) -> Expr {
        Expr::constant(v)
    }

    #[test]
    fn equal_expressions_have_one_form() {
        let a = n().scale(3).unwrap().add(&n()).unwrap();
        assert_eq!(a, n().scale(4).unwrap());
        let b = n().add(&s()).unwrap().mul(&n().add(&s()).unwrap()).unwrap();
        let b2 = n()
            .mul(&n())
            .unwrap()
            .add(&n().mul(&s()).unwrap().scale(2).unwrap())
            .unwrap()
            .add(&s().mul(&s()).unwrap())
            .unwrap();
        assert_eq!(b, b2);
        assert_eq!(show(&b), "2*%n*%s + %n^2 + %s^2");
        assert_eq!(n().sub(&n()).unwrap().as_const(), Some(0));
    }

    #[test]
    fn floor_division_takes_out_what_divides() {
        let e = n().scale(4).unwrap().add(&c(2)).unwrap();
        assert_eq!(e.floor_div(2).unwrap(), n().scale(2).unwrap().add(&c(1)).unwrap());
        let e = n().scale(4).unwrap().add(&c(3)).unwrap();
        assert_eq!(show(&e.floor_div(2).unwrap()), "2*%n + 1");
        // A convolution's output size over a symbolic height: (h + 2·1 - 3) // 2 + 1.
        let h = Expr::sym(2).add(&c(2 - 3)).unwrap().floor_div(2).unwrap().add(&c(1)).unwrap();
        assert_eq!(show(&h), "(%h + 1) // 2");
        assert_eq!(h.eval(&|_| Some(224)), Some(112));
        assert_eq!(show(&n().rem(4).unwrap()), "%n % 4");
        assert_eq!(n().scale(8).unwrap().rem(4).unwrap().as_const(), Some(0));
        assert_eq!(n().floor_div(0), None);
    }

    #[test]
    fn max_and_min_decide_when_the_difference_is_constant() {
        assert_eq!(n().add(&c(3)).unwrap().maximum(&n()).unwrap(), n().add(&c(3)).unwrap());
        assert_eq!(n().minimum(&n().add(&c(3)).unwrap()).unwrap(), n());
        assert_eq!(n().maximum(&s()).unwrap(), s().maximum(&n()).unwrap(), "commutative");
        assert_eq!(show(&n().maximum(&s()).unwrap()), "max(%n, %s)");
    }

    #[test]
    fn overflow_is_refused_not_wrapped() {
        let big = c(i64::MAX);
        assert_eq!(big.add(&c(1)), None);
        assert_eq!(n().scale(i64::MAX).unwrap().scale(2), None);
        assert_eq!(n().scale(i64::MAX).unwrap().eval(&|_| Some(2)), None);
        assert_eq!(n().eval(&|_| None), None, "an unbound symbol has no value");
    }

    /// A random expression tree, and its value computed directly.
    #[derive(Clone, Debug)]
    enum Tree {
        C(i64),
        S(SymId),
        Add(Box<Tree>, Box<Tree>),
        Sub(Box<Tree>, Box<Tree>),
        Mul(Box<Tree>, Box<Tree>),
        Div(Box<Tree>, i64),
        Rem(Box<Tree>, i64),
        Max(Box<Tree>, Box<Tree>),
        Min(Box<Tree>, Box<Tree>),
    }

    impl Tree {
        fn expr(&self) -> Option<Expr> {
            Some(match self {
                Tree::C(v) => c(*v),
                Tree::S(s) => Expr::sym(*s),
                Tree::Add(a, b) => a.expr()?.add(&b.expr()?)?,
                Tree::Sub(a, b) => a.expr()?.sub(&b.expr()?)?,
                Tree::Mul(a, b) => a.expr()?.mul(&b.expr()?)?,
                Tree::Div(a, d) => a.expr()?.floor_div(*d)?,
                Tree::Rem(a, d) => a.expr()?.rem(*d)?,
                Tree::Max(a, b) => a.expr()?.maximum(&b.expr()?)?,
                Tree::Min(a, b) => a.expr()?.minimum(&b.expr()?)?,
            })
        }

        fn value(&self, env: &[i64]) -> i128 {
            match self {
                Tree::C(v) => *v as i128,
                Tree::S(s) => env[*s as usize] as i128,
                Tree::Add(a, b) => a.value(env) + b.value(env),
                Tree::Sub(a, b) => a.value(env) - b.value(env),
                Tree::Mul(a, b) => a.value(env) * b.value(env),
                Tree::Div(a, d) => a.value(env).div_euclid(*d as i128),
                Tree::Rem(a, d) => a.value(env).rem_euclid(*d as i128),
                Tree::Max(a, b) => a.value(env).max(b.value(env)),
                Tree::Min(a, b) => a.value(env).min(b.value(env)),
            }
        }
    }

    fn tree() -> impl Strategy<Value = Tree> {
        let leaf = prop_oneof![(-20i64..20).prop_map(Tree::C), (0u32..3).prop_map(Tree::S)];
        leaf.prop_recursive(4, 24, 2, |t| {
            prop_oneof![
                (t.clone(), t.clone()).prop_map(|(a, b)| Tree::Add(Box::new(a), Box::new(b))),
                (t.clone(), t.clone()).prop_map(|(a, b)| Tree::Sub(Box::new(a), Box::new(b))),
                (t.clone(), t.clone()).prop_map(|(a, b)| Tree::Mul(Box::new(a), Box::new(b))),
                (t.clone(), 1i64..6).prop_map(|(a, d)| Tree::Div(Box::new(a), d)),
                (t.clone(), 1i64..6).prop_map(|(a, d)| Tree::Rem(Box::new(a), d)),
                (t.clone(), t.clone()).prop_map(|(a, b)| Tree::Max(Box::new(a), Box::new(b))),
                (t.clone(), t).prop_map(|(a, b)| Tree::Min(Box::new(a), Box::new(b))),
            ]
        })
    }

    proptest! {
        /// The canonical form has the value of the expression it was built from, at
        /// every point, and building it twice gives the same form.
        #[test]
        fn canonical_form_keeps_the_value(t in tree(), env in proptest::collection::vec(-30i64..30, 3)) {
            let e = t.expr().expect("small values do not overflow");
            let got = e.eval(&|s| env.get(s as usize).copied());
            prop_assert_eq!(got.map(i128::from), Some(t.value(&env)), "{}", show(&e));
            prop_assert_eq!(t.expr(), Some(e));
        }
    }
}
