//! The walk over a compiled expression: what each node reads from `object` and what type of
//! value it gives, as far as can be seen without running it.
//!
//! A value is known by its schema (what it reads from `object`, through field selections,
//! `has()`, `.?`, `[?k]`, indexing and the variables of comprehensions), by its type (a
//! literal, what an operator or function returns), or not at all. Anything not known is taken
//! to be right: the checker refuses only what it can see is wrong.

use super::schema::{Field, Node, SchemaType};
use super::suggest::nearest;
use super::ty::{Kind, Ty, numeric};
use cel::common::ast::{EntryExpr, Expr as Ast, IdedExpr, LiteralValue};

/// What one expression's walk found.
#[derive(Debug, Default)]
pub(super) struct Found {
    /// Fields read that the schema says are never there, and fields read of values that are
    /// not objects, each one line.
    pub problems: Vec<String>,
    /// Where the schema is open, so reads below it were not checked (`object.status`), once
    /// each.
    pub open: Vec<String>,
}

/// Walks one expression; `object` is described by `root` (`None`: no schema, only types).
pub(super) struct Walk<'s, 'e> {
    root: Option<Node<'s>>,
    scope: Vec<(&'e str, Ty<'s>)>,
    pub found: Found,
}

/// Most problems reported for one expression.
const MAX_PROBLEMS: usize = 8;

/// Longest text of an expression quoted in a message.
const MAX_QUOTED_CHARS: usize = 120;

impl<'s, 'e> Walk<'s, 'e> {
    pub(super) fn new(root: Option<Node<'s>>) -> Self {
        Walk {
            root,
            scope: Vec::new(),
            found: Found::default(),
        }
    }

    fn problem(&mut self, message: String) {
        if self.found.problems.len() < MAX_PROBLEMS && !self.found.problems.contains(&message) {
            self.found.problems.push(message);
        }
    }

    fn open(&mut self, path: &str) {
        if self.found.open.len() < MAX_PROBLEMS && !self.found.open.iter().any(|p| p == path) {
            self.found.open.push(path.to_owned());
        }
    }

    /// What `expr` gives, recording what it reads wrong.
    pub(super) fn ty(&mut self, expr: &'e IdedExpr) -> Ty<'s> {
        match &expr.expr {
            Ast::Literal(literal) => Ty::Kind(match literal {
                LiteralValue::Boolean(_) => Kind::Bool,
                LiteralValue::Bytes(_) => Kind::Bytes,
                LiteralValue::Double(_) => Kind::Double,
                LiteralValue::Int(_) => Kind::Int,
                LiteralValue::Null => Kind::Null,
                LiteralValue::String(_) => Kind::String,
                LiteralValue::UInt(_) => Kind::Uint,
            }),
            Ast::Ident(name) => {
                if let Some((_, ty)) = self.scope.iter().rev().find(|(n, _)| n == name) {
                    ty.clone()
                } else if name == "object" {
                    self.root
                        .map_or(Ty::Unknown, |root| Ty::Schema(root, "object".to_owned()))
                } else {
                    Ty::Unknown
                }
            }
            Ast::Select(select) => {
                let operand = self.ty(&select.operand);
                let field = self.field(operand, &select.field, expr);
                if select.test {
                    Ty::Kind(Kind::Bool)
                } else {
                    field
                }
            }
            Ast::Call(call) => self.call(expr, call),
            Ast::List(list) => {
                let mut element = Ty::Unknown;
                for (i, e) in list.elements.iter().enumerate() {
                    let t = self.ty(e);
                    element = if i == 0 { t } else { element.or(t) };
                }
                Ty::List(Box::new(element))
            }
            Ast::Map(cel::common::ast::MapExpr { entries, .. })
            | Ast::Struct(cel::common::ast::StructExpr { entries, .. }) => {
                for entry in entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(e) => {
                            self.ty(&e.key);
                            self.ty(&e.value);
                        }
                        EntryExpr::StructField(f) => {
                            self.ty(&f.value);
                        }
                    }
                }
                if matches!(expr.expr, Ast::Map(_)) {
                    Ty::Kind(Kind::Map)
                } else {
                    Ty::Unknown
                }
            }
            Ast::Comprehension(c) => {
                let range = self.ty(&c.iter_range);
                let element = self.element(&range);
                let init = self.ty(&c.accu_init);
                let depth = self.scope.len();
                self.scope.push((&c.iter_var, element));
                if let Some(second) = &c.iter_var2 {
                    self.scope.push((second, Ty::Unknown));
                }
                self.scope.push((&c.accu_var, init.clone()));
                self.ty(&c.loop_cond);
                // The accumulator as the step leaves it: `filter` and `map` append to a list
                // built empty, so their elements are known from the step.
                let step = self.ty(&c.loop_step);
                let accu = self.scope.len() - 1;
                self.scope[accu].1 = init.or_known(step);
                let result = self.ty(&c.result);
                self.scope.truncate(depth);
                result
            }
            Ast::Unspecified => Ty::Unknown,
        }
    }

    /// A field of `operand`; `expr` is the selection, for the message.
    fn field(&mut self, operand: Ty<'s>, name: &str, expr: &IdedExpr) -> Ty<'s> {
        match operand {
            Ty::Optional(inner) => Ty::Optional(Box::new(self.field(*inner, name, expr))),
            Ty::Schema(node, path) => match node.field(name) {
                Field::Known(child) => Ty::Schema(child, format!("{path}.{name}")),
                Field::Open => {
                    self.open(&path);
                    Ty::Unknown
                }
                Field::Missing(listed) => {
                    let hint = nearest(name, &listed)
                        .map(|n| format!("; did you mean {n}?"))
                        .unwrap_or_default();
                    self.problem(format!(
                        "{}: the schema of {path} has no field {name}{hint}",
                        quoted(expr)
                    ));
                    Ty::Unknown
                }
                Field::NotAnObject(t) => {
                    self.problem(format!(
                        "{}: {path} is {} {}, it has no field {name}",
                        quoted(expr),
                        article(t.name()),
                        t.name()
                    ));
                    Ty::Unknown
                }
            },
            _ => Ty::Unknown,
        }
    }

    /// An element of `operand` (`[key]`), `key` being the key's expression.
    fn index(&mut self, operand: Ty<'s>, key: &'e IdedExpr, expr: &IdedExpr) -> Ty<'s> {
        self.ty(key);
        match operand {
            Ty::Optional(inner) => self.index(*inner, key, expr),
            Ty::List(element) => *element,
            Ty::Schema(node, path) => {
                if let Ast::Literal(LiteralValue::String(name)) = &key.expr
                    && node.is_map_or_object()
                {
                    return self.field(Ty::Schema(node, path), name.inner(), expr);
                }
                match node.element() {
                    Some(element) => Ty::Schema(element, format!("{path}[]")),
                    None => {
                        self.open(&path);
                        Ty::Unknown
                    }
                }
            }
            _ => Ty::Unknown,
        }
    }

    /// What the variable of a comprehension over `range` holds: an element of a list, a key
    /// of a map.
    fn element(&mut self, range: &Ty<'s>) -> Ty<'s> {
        match range {
            Ty::List(element) => (**element).clone(),
            Ty::Kind(Kind::Map) => Ty::Kind(Kind::String),
            Ty::Schema(node, path) => match node.schema_type() {
                Some(SchemaType::Array) => match node.element() {
                    Some(element) => Ty::Schema(element, format!("{path}[]")),
                    None => {
                        self.open(path);
                        Ty::Unknown
                    }
                },
                Some(SchemaType::Object) => Ty::Kind(Kind::String),
                _ => Ty::Unknown,
            },
            _ => Ty::Unknown,
        }
    }

    fn call(&mut self, expr: &'e IdedExpr, call: &'e cel::common::ast::CallExpr) -> Ty<'s> {
        let args = call.args.as_slice();
        let name = call.func_name.as_str();
        // `optional.of(x)`, `lists.range(n)`: a namespace, not a value.
        let namespace = call.target.as_deref().and_then(|t| match &t.expr {
            Ast::Ident(n) if !self.scope.iter().any(|(s, _)| s == n) && n != "object" => {
                Some(n.as_str())
            }
            _ => None,
        });
        match (namespace, name, args) {
            (_, "_?._", [operand, field]) => {
                let operand = self.ty(operand).unwrapped();
                let Ast::Literal(LiteralValue::String(field)) = &field.expr else {
                    return Ty::Unknown;
                };
                return Ty::Optional(Box::new(self.field(operand, field.inner(), expr)));
            }
            (_, "_[_]" | "_[?_]", [operand, key]) => {
                let operand = self.ty(operand);
                let element = self.index(operand, key, expr);
                return if name == "_[?_]" {
                    Ty::Optional(Box::new(element.unwrapped()))
                } else {
                    element
                };
            }
            // The meter's wrapper of a comprehension's range passes it through.
            (_, "@cost_range", [range, _]) => return self.ty(range),
            (Some("optional"), "of" | "ofNonZeroValue", [value]) => {
                let value = self.ty(value);
                return Ty::Optional(Box::new(value));
            }
            (Some("optional"), "none", []) => return Ty::Optional(Box::new(Ty::Unknown)),
            _ => {}
        }
        let target = match (namespace, call.target.as_deref()) {
            (None, Some(t)) => Some(self.ty(t)),
            _ => None,
        };
        let mut types: Vec<Ty<'s>> = args.iter().map(|a| self.ty(a)).collect();
        let kind = |t: &Ty<'s>| t.kind();
        match name {
            "_==_"
            | "_!=_"
            | "_<_"
            | "_<=_"
            | "_>_"
            | "_>=_"
            | "@in"
            | "_&&_"
            | "_||_"
            | "!_"
            | "@not_strictly_false"
            | "has"
            | "startsWith"
            | "endsWith"
            | "contains"
            | "matches"
            | "hasValue"
            | "exists"
            | "all"
            | "exists_one"
            | "isSorted" => Ty::Kind(Kind::Bool),
            "_?_:_" if types.len() == 3 => {
                let otherwise = types.pop().unwrap_or(Ty::Unknown);
                let then = types.pop().unwrap_or(Ty::Unknown);
                then.or(otherwise)
            }
            "orValue" => match (target, types.pop()) {
                (Some(Ty::Optional(inner)), Some(default)) => inner.or(default),
                _ => Ty::Unknown,
            },
            "value" => target.map_or(Ty::Unknown, Ty::unwrapped),
            "or" => target.unwrap_or(Ty::Unknown),
            "_+_" => match (types.first().and_then(kind), types.get(1).and_then(kind)) {
                (Some(Kind::String), Some(Kind::String)) => Ty::Kind(Kind::String),
                (Some(Kind::List), Some(Kind::List)) => {
                    let b = types.pop().unwrap_or(Ty::Unknown);
                    let a = types.pop().unwrap_or(Ty::Unknown);
                    match (a, b) {
                        (Ty::List(x), Ty::List(y)) => Ty::List(Box::new(x.or_known(*y))),
                        _ => Ty::Kind(Kind::List),
                    }
                }
                (Some(a), Some(b)) if a == b && numeric(a) => Ty::Kind(a),
                (Some(Kind::Timestamp), Some(Kind::Duration)) => Ty::Kind(Kind::Timestamp),
                _ => Ty::Unknown,
            },
            "_-_" | "_*_" | "_/_" | "_%_" => {
                match (types.first().and_then(kind), types.get(1).and_then(kind)) {
                    (Some(a), Some(b)) if a == b && numeric(a) => Ty::Kind(a),
                    _ => Ty::Unknown,
                }
            }
            "-_" => match types.first().and_then(kind) {
                Some(k) if numeric(k) => Ty::Kind(k),
                _ => Ty::Unknown,
            },
            "size" | "int" | "indexOf" | "lastIndexOf" => Ty::Kind(Kind::Int),
            "uint" => Ty::Kind(Kind::Uint),
            "double" => Ty::Kind(Kind::Double),
            "string" | "lowerAscii" | "upperAscii" | "trim" | "substring" | "charAt" | "format"
            | "join" | "@replace" | "quote" => Ty::Kind(Kind::String),
            "bool" => Ty::Kind(Kind::Bool),
            "timestamp" => Ty::Kind(Kind::Timestamp),
            "duration" => Ty::Kind(Kind::Duration),
            "type" => Ty::Kind(Kind::Type),
            "split" => Ty::List(Box::new(Ty::Kind(Kind::String))),
            "@lists_range" => Ty::List(Box::new(Ty::Kind(Kind::Int))),
            "dyn" => types.pop().unwrap_or(Ty::Unknown),
            _ => Ty::Unknown,
        }
    }
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// The text of a field read (`object.status.?phase`, `d.name`, `object.spec.x['k']`), bounded;
/// `…` for any part that is not a read.
pub(super) fn quoted(expr: &IdedExpr) -> String {
    let mut text = String::new();
    write_read(expr, &mut text);
    if text.chars().count() > MAX_QUOTED_CHARS {
        let cut: String = text.chars().take(MAX_QUOTED_CHARS).collect();
        return format!("{cut}…");
    }
    text
}

fn write_read(expr: &IdedExpr, out: &mut String) {
    if out.len() > MAX_QUOTED_CHARS * 4 {
        return;
    }
    match &expr.expr {
        Ast::Ident(name) => out.push_str(name),
        Ast::Select(s) => {
            write_read(&s.operand, out);
            out.push('.');
            out.push_str(&s.field);
        }
        Ast::Call(call) => match (call.func_name.as_str(), call.args.as_slice()) {
            ("_?._", [operand, field]) => {
                write_read(operand, out);
                out.push_str(".?");
                match &field.expr {
                    Ast::Literal(LiteralValue::String(f)) => out.push_str(f.inner()),
                    _ => out.push('…'),
                }
            }
            (op @ ("_[_]" | "_[?_]"), [operand, key]) => {
                write_read(operand, out);
                out.push_str(if op == "_[_]" { "[" } else { "[?" });
                match &key.expr {
                    Ast::Literal(LiteralValue::String(k)) => {
                        out.push('\'');
                        out.push_str(k.inner());
                        out.push('\'');
                    }
                    Ast::Literal(LiteralValue::Int(i)) => out.push_str(&i.inner().to_string()),
                    _ => out.push('…'),
                }
                out.push(']');
            }
            ("@cost_range", [range, _]) => write_read(range, out),
            _ => out.push('…'),
        },
        _ => out.push('…'),
    }
}
