//! What the walk knows of a value: its CEL type ([`Kind`]), and where it comes from ([`Ty`]):
//! a place in the schema of `object`, a type alone, or nothing known.

use super::schema::{Node, SchemaType};

/// The CEL type of a value, where it is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Bool,
    String,
    Int,
    Uint,
    Double,
    Null,
    Bytes,
    List,
    Map,
    Timestamp,
    Duration,
    Type,
    Optional,
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Bool => "bool",
            Kind::String => "string",
            Kind::Int => "int",
            Kind::Uint => "uint",
            Kind::Double => "double",
            Kind::Null => "null",
            Kind::Bytes => "bytes",
            Kind::List => "list",
            Kind::Map => "map",
            Kind::Timestamp => "timestamp",
            Kind::Duration => "duration",
            Kind::Type => "type",
            Kind::Optional => "optional",
        }
    }
}

/// What is known of a value.
#[derive(Debug, Clone)]
pub(super) enum Ty<'s> {
    Unknown,
    /// Its type, nothing more.
    Kind(Kind),
    /// A list whose elements are known this far.
    List(Box<Ty<'s>>),
    /// A value of the object, described by this schema; `path` says where it was read
    /// (`object.spec.disks[]`).
    Schema(Node<'s>, String),
    /// An optional (`.?`, `[?k]`, `optional.of`) of this.
    Optional(Box<Ty<'s>>),
    /// One of these types (the branches of `?:` differ).
    Either(Vec<Kind>),
}

impl<'s> Ty<'s> {
    /// The CEL type, where known.
    pub(super) fn kind(&self) -> Option<Kind> {
        match self {
            Ty::Unknown | Ty::Either(_) => None,
            Ty::Kind(k) => Some(*k),
            Ty::List(_) => Some(Kind::List),
            Ty::Optional(_) => Some(Kind::Optional),
            Ty::Schema(node, _) => node.schema_type().map(|t| match t {
                SchemaType::Boolean => Kind::Bool,
                SchemaType::String => Kind::String,
                SchemaType::Integer => Kind::Int,
                SchemaType::Number => Kind::Double,
                SchemaType::Array => Kind::List,
                SchemaType::Object => Kind::Map,
            }),
        }
    }

    /// The types the value may have, where all are known.
    pub(super) fn kinds(&self) -> Option<Vec<Kind>> {
        match self {
            Ty::Either(kinds) => Some(kinds.clone()),
            other => other.kind().map(|k| vec![k]),
        }
    }

    /// What an optional holds; anything else as it is.
    pub(super) fn unwrapped(self) -> Ty<'s> {
        match self {
            Ty::Optional(inner) => *inner,
            other => other,
        }
    }

    /// What is known of a value that is either `self` or `other` (the two branches of `?:`).
    pub(super) fn or(self, other: Ty<'s>) -> Ty<'s> {
        match (self, other) {
            (Ty::Unknown, _) | (_, Ty::Unknown) => Ty::Unknown,
            (Ty::List(a), Ty::List(b)) => Ty::List(Box::new(a.or_known(*b))),
            (Ty::Optional(a), Ty::Optional(b)) => Ty::Optional(Box::new(a.or_known(*b))),
            (a, b) => match (a.kinds(), b.kinds()) {
                (Some(x), Some(y)) if x.len() == 1 && x == y => {
                    if matches!(a, Ty::Schema(..)) {
                        a
                    } else {
                        b
                    }
                }
                (Some(mut x), Some(y)) => {
                    for k in y {
                        if !x.contains(&k) {
                            x.push(k);
                        }
                    }
                    Ty::Either(x)
                }
                _ => Ty::Unknown,
            },
        }
    }

    /// Like [`Ty::or`], but an unknown side gives way to the known one (the elements of a list
    /// built empty, then appended to).
    pub(super) fn or_known(self, other: Ty<'s>) -> Ty<'s> {
        match (self, other) {
            (Ty::Unknown, t) | (t, Ty::Unknown) => t,
            (a, b) => a.or(b),
        }
    }
}

pub(super) fn numeric(k: Kind) -> bool {
    matches!(k, Kind::Int | Kind::Uint | Kind::Double)
}
