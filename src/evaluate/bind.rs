//! Binding a Kubernetes object (`serde_json::Value`) as the CEL variable `object`.
//!
//! The obvious route, `Context::add_variable(&json)`, goes through serde: it deep-copies the
//! object twice per bind and turns every non-negative JSON integer into a CEL `uint`, after which
//! `object.metadata.generation + 1` fails (`uint + int` has no overload) and
//! `type(object.metadata.generation) == int` is false. Kubernetes (cel-go over unstructured JSON)
//! sees those integers as `int`.
//!
//! Instead, objects and arrays are wrapped in [`JsonVal`], a CEL `map`/`list` that reads the
//! `serde_json::Value` in place and converts only what an expression touches, at the moment it
//! touches it:
//! * a scalar is converted when selected: integers to `int` (`uint` only above `i64::MAX`,
//!   `double` for the rest), strings to a `CelString` *borrowing* the JSON text;
//! * a nested object or array becomes another `JsonVal`, which is just a reference;
//! * the elements of an array (and the keys of an object) are converted once, when the node is
//!   first iterated, because CEL iterators lend out references and need something to lend.
//!
//! Binding is therefore O(1) whatever the size of the object, and a rule reading five fields of a
//! 5 KB object costs five small conversions. Only the public `Val` capability traits are used
//! (`Indexer`, `Iterable`, `Container`, `Sizer`, `Zeroer`, `Adder`), none of the crate's
//! doc-hidden hooks, so that an upgrade of `cel` cannot silently change the behaviour.

use std::fmt;
use std::sync::OnceLock;

use cel::ExecutionError;
use cel::common::traits::{self, Adder, Container, Indexer, Iterable, Sizer, Zeroer};
use cel::common::types::{
    self, CelBool, CelDouble, CelInt, CelList, CelNull, CelString, CelUInt, Kind, Type,
};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use serde_json::Value as Json;

/// A JSON object or array seen as a CEL `map` or `list`, without copying it.
///
/// Invariant: `json` is an `Object` or an `Array`; scalars are converted to the built-in CEL
/// types by [`to_val`] instead, so that every string function and operator works on them.
pub(crate) struct JsonVal<'a> {
    json: &'a Json,
    /// Arrays: the converted elements. Objects: the keys, as `CelString`s. Filled on first
    /// iteration (or `in`/equality on an array), then reused while this node lives.
    items: OnceLock<Vec<Box<dyn Val + 'a>>>,
}

impl<'a> JsonVal<'a> {
    fn new(json: &'a Json) -> Self {
        debug_assert!(json.is_object() || json.is_array());
        JsonVal {
            json,
            items: OnceLock::new(),
        }
    }

    fn len(&self) -> usize {
        match self.json {
            Json::Array(a) => a.len(),
            Json::Object(o) => o.len(),
            _ => 0,
        }
    }

    /// The elements of an array, or the keys of an object, converted once.
    fn items(&self) -> &[Box<dyn Val + 'a>] {
        self.items.get_or_init(|| match self.json {
            Json::Array(a) => a.iter().map(to_val).collect(),
            Json::Object(o) => o
                .keys()
                .map(|k| Box::new(CelString::from(k.as_str())) as Box<dyn Val + 'a>)
                .collect(),
            _ => Vec::new(),
        })
    }
}

/// Converts one JSON value: scalars to the built-in CEL types, containers to a [`JsonVal`].
pub(crate) fn to_val<'a>(json: &'a Json) -> Box<dyn Val + 'a> {
    match json {
        Json::Null => Box::new(CelNull),
        Json::Bool(b) => Box::new(CelBool::from(*b)),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Box::new(CelInt::from(i))
            } else if let Some(u) = n.as_u64() {
                Box::new(CelUInt::from(u))
            } else {
                Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN)))
            }
        }
        Json::String(s) => Box::new(CelString::from(s.as_str())),
        Json::Array(_) | Json::Object(_) => Box::new(JsonVal::new(json)),
    }
}

impl fmt::Debug for JsonVal<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.json)
    }
}

impl Val for JsonVal<'_> {
    fn get_type(&self) -> &Type {
        if self.json.is_array() {
            &types::LIST_TYPE
        } else {
            &types::MAP_TYPE
        }
    }

    /// A `JsonVal` is a map or a list depending on the value, so there is no static type; this is
    /// only consulted when a Rust type is named in an overload macro, which never happens here.
    fn cel_type() -> &'static Type {
        &types::DYN_TYPE
    }

    fn as_adder<'b, 'v>(&'b self) -> Option<&'b (dyn Adder + 'v)>
    where
        Self: 'v,
    {
        self.json.is_array().then_some(self as &dyn Adder)
    }

    fn as_container(&self) -> Option<&dyn Container> {
        Some(self)
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn into_indexer<'v>(self: Box<Self>) -> Option<Box<dyn Indexer + 'v>>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        Some(self)
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        Some(self)
    }

    /// Structural equality with any CEL list or map (another `JsonVal` or a literal), with CEL's
    /// numeric equality for the leaves (`1 == 1.0`). Note that the built-in `CelList`/`CelMap`
    /// only compare equal to their own kind, so `[1] == object.x` is false while
    /// `object.x == [1]` is true: write the object side first.
    fn equals(&self, other: &dyn Val) -> bool {
        match self.json {
            Json::Array(a) => {
                if !sized_like(other, Kind::List, a.len()) {
                    return false;
                }
                let Some(iterable) = other.as_iterable() else {
                    return false;
                };
                let mut theirs = iterable.iter();
                for mine in self.items() {
                    match theirs.next() {
                        Some(t) if mine.equals(t) => {}
                        _ => return false,
                    }
                }
                true
            }
            Json::Object(o) => {
                if !sized_like(other, Kind::Map, o.len()) {
                    return false;
                }
                let Some(indexer) = other.as_indexer() else {
                    return false;
                };
                o.iter().all(|(k, v)| {
                    indexer
                        .get(&CelString::from(k.as_str()))
                        .is_ok_and(|theirs| to_val(v).equals(theirs.as_ref()))
                })
            }
            _ => false,
        }
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        // A fresh node: the element cache is rebuilt on demand, which is cheaper than copying it.
        Box::new(JsonVal::new(self.json))
    }
}

fn value_of(v: &dyn Val) -> cel::Value {
    cel::Value::try_from(v).unwrap_or(cel::Value::Null)
}

/// What a missing map key reports, as the built-in map does: `has()` turns it into `false`.
fn no_such_key(key: &dyn Val) -> ExecutionError {
    let name = if let Some(s) = key.downcast_ref::<CelString>() {
        s.inner().to_owned()
    } else {
        match value_of(key) {
            cel::Value::Int(i) => i.to_string(),
            cel::Value::UInt(u) => u.to_string(),
            cel::Value::Float(f) => f.to_string(),
            cel::Value::Bool(b) => b.to_string(),
            other => format!("{other:?}"),
        }
    };
    ExecutionError::no_such_key(&name)
}

/// Whether `key` is of a type a CEL map can be looked up with (a JSON object only has string
/// keys, so the others simply miss).
fn is_lookup_key(key: &dyn Val) -> bool {
    matches!(
        key.get_type().kind(),
        Kind::String | Kind::Int | Kind::UInt | Kind::Boolean | Kind::Double
    )
}

/// A list position from an `int`, `uint` or whole `double` index, as the built-in list accepts.
fn list_index(idx: &dyn Val) -> Result<Option<usize>, ExecutionError> {
    if let Some(i) = idx.downcast_ref::<CelInt>() {
        Ok(usize::try_from(*i.inner()).ok())
    } else if let Some(u) = idx.downcast_ref::<CelUInt>() {
        Ok(usize::try_from(*u.inner()).ok())
    } else if let Some(d) = idx.downcast_ref::<CelDouble>() {
        let d = *d.inner();
        if d.fract() == 0.0 && d >= 0.0 && d < usize::MAX as f64 {
            Ok(Some(d as usize))
        } else if d.fract() == 0.0 {
            Ok(None)
        } else {
            Err(ExecutionError::UnexpectedType {
                got: format!("double {d}"),
                want: "whole number index".to_owned(),
            })
        }
    } else {
        Err(ExecutionError::UnexpectedType {
            got: idx.get_type().name().to_owned(),
            want: "int|uint|double".to_owned(),
        })
    }
}

impl<'a> Indexer for JsonVal<'a> {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        match self.json {
            Json::Object(o) => match idx.downcast_ref::<CelString>() {
                Some(key) => match o.get(key.inner()) {
                    Some(v) => Ok(CowVal::Owned(to_val(v))),
                    None => Err(no_such_key(idx)),
                },
                None if is_lookup_key(idx) => Err(no_such_key(idx)),
                None => Err(ExecutionError::UnexpectedType {
                    got: idx.get_type().name().to_owned(),
                    want: "map key".to_owned(),
                }),
            },
            Json::Array(a) => {
                let out_of_bounds = || ExecutionError::IndexOutOfBounds(value_of(idx));
                let i = list_index(idx)?.ok_or_else(out_of_bounds)?;
                if i >= a.len() {
                    return Err(out_of_bounds());
                }
                // Borrow the element if the list was already converted, else convert just it.
                match self.items.get() {
                    Some(items) => Ok(CowVal::Borrowed(items[i].as_ref())),
                    None => Ok(CowVal::Owned(to_val(&a[i]))),
                }
            }
            _ => Err(ExecutionError::UnexpectedType {
                got: "scalar".to_owned(),
                want: "map or list".to_owned(),
            }),
        }
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

/// Lends out the converted elements (or keys) of a [`JsonVal`].
struct ItemIter<'b, 'a> {
    items: std::slice::Iter<'b, Box<dyn Val + 'a>>,
}

impl<'b, 'a: 'w, 'w> traits::Iterator<'b, 'w> for ItemIter<'b, 'a> {
    fn next(&mut self) -> Option<&'b (dyn Val + 'w)> {
        self.items.next().map(|v| v.as_ref() as &(dyn Val + 'w))
    }
}

impl<'a> Iterable for JsonVal<'a> {
    fn iter<'b, 'v>(&'b self) -> Box<dyn traits::Iterator<'b, 'v> + 'b>
    where
        Self: 'v,
    {
        Box::new(ItemIter {
            items: self.items().iter(),
        })
    }
}

impl Container for JsonVal<'_> {
    fn contains(&self, value: &dyn Val) -> Result<bool, ExecutionError> {
        match self.json {
            Json::Object(o) => match value.downcast_ref::<CelString>() {
                Some(key) => Ok(o.contains_key(key.inner())),
                None if is_lookup_key(value) => Ok(false),
                None => Err(ExecutionError::UnsupportedKeyType(value_of(value))),
            },
            Json::Array(_) => Ok(self.items().iter().any(|item| item.equals(value))),
            _ => Ok(false),
        }
    }
}

impl Sizer for JsonVal<'_> {
    fn size(&self) -> CelInt {
        CelInt::from(self.len() as i64)
    }
}

impl Zeroer for JsonVal<'_> {
    fn is_zero_value(&self) -> bool {
        self.len() == 0
    }
}

/// List concatenation (`object.spec.a + ['x']`), as the built-in list supports.
impl Adder for JsonVal<'_> {
    fn add<'b, 'v>(&'b self, rhs: &(dyn Val + 'v)) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        let Some(rhs_items) = rhs
            .as_iterable()
            .filter(|_| rhs.get_type().kind() == Kind::List)
        else {
            return Err(ExecutionError::no_such_overload(
                "_+_",
                vec!["list".to_owned(), rhs.get_type().name().to_owned()],
            ));
        };
        let mut out: Vec<Box<dyn Val + 'v>> = self
            .items()
            .iter()
            .map(|item| item.clone_as_boxed())
            .collect();
        let mut it = rhs_items.iter();
        while let Some(item) = it.next() {
            out.push(item.clone_as_boxed());
        }
        Ok(CowVal::owned(CelList::from(out)))
    }
}

/// Lends the bound object to every context that evaluates against it, without copying.
pub(crate) struct ObjectResolver<'a> {
    json: &'a Json,
    root: Box<dyn Val + 'a>,
}

impl VariableResolver for ObjectResolver<'_> {
    /// The interpreter asks for the longest dotted name first (`object.status.phase`, then
    /// `object.status`, then `object`), probing each candidate against every scope and the type
    /// registry. Answering the whole path at once, by walking the JSON, skips those probes.
    /// A path that does not fully exist is declined, so the interpreter falls back to selecting
    /// field by field and reports the missing key exactly as it would otherwise.
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        if variable == "object" {
            return Some(CowVal::Borrowed(self.root.as_ref()));
        }
        let path = variable.strip_prefix("object.")?;
        let mut node = self.json;
        for field in path.split('.') {
            node = node.as_object()?.get(field)?;
        }
        Some(CowVal::Owned(to_val(node)))
    }
}

/// A Kubernetes object converted once (JSON integers → int, strings borrowed), then evaluated by
/// any number of expressions without further conversion.
///
/// Binding is O(1): nothing is converted until an expression reads it (see the module docs).
pub struct Bound<'a> {
    pub(crate) resolver: ObjectResolver<'a>,
}

impl<'a> Bound<'a> {
    /// Binds `object`, normally a JSON object. JSON `null` is bound as an empty object, as an
    /// unstructured nil object is to cel-go: `has(object.status)` is then false, not an error.
    pub fn new(object: &'a Json) -> Bound<'a> {
        static EMPTY: std::sync::LazyLock<Json> =
            std::sync::LazyLock::new(|| Json::Object(serde_json::Map::new()));
        let object = if object.is_null() { &*EMPTY } else { object };
        Bound {
            resolver: ObjectResolver {
                json: object,
                root: to_val(object),
            },
        }
    }
}

impl fmt::Debug for Bound<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bound")
            .field("object", &self.resolver.root)
            .finish()
    }
}

/// Whether `other` is a value of `kind` (a list or a map) with `len` elements.
fn sized_like(other: &dyn Val, kind: Kind, len: usize) -> bool {
    other.get_type().kind() == kind
        && other.as_sizer().map(|s| *s.size().inner()) == Some(len as i64)
}
