//! An OpenAPI v3 schema, as the checker walks it: a CRD's `openAPIV3Schema`, or a built-in
//! type's schema from kube-apiserver's `/openapi/v3` (with its `$ref`s into
//! `components.schemas`).
//!
//! A field is *known* when a `properties` entry names it (in the schema, or in one of its
//! `allOf`/`anyOf`/`oneOf` branches), or when `additionalProperties` describes the values of a
//! map. Below `x-kubernetes-preserve-unknown-fields`, or in an object that lists no properties
//! at all, any field may be there: the schema is *open* and nothing is checked. Only an object
//! that lists its properties and takes nothing else is *closed*: a field it does not list is
//! never there (kube-apiserver prunes it), so a rule that reads it reads nothing. The object's
//! `apiVersion`, `kind` and `metadata` are known whatever its schema lists, and so are an
//! embedded object's (`x-kubernetes-embedded-resource`).

use serde_json::Value;
use std::sync::{Arc, LazyLock};

/// Most `$ref`s followed in a row: a cycle, or a schema built to make the walk costly, stops
/// there (as unknown, never as an error).
const MAX_REFS: usize = 16;

/// Most nested `allOf`/`anyOf`/`oneOf` levels looked into.
const MAX_BRANCH_DEPTH: usize = 4;

/// The schema of a target's objects.
#[derive(Debug, Clone)]
pub struct Schema {
    /// The object's schema.
    root: Value,
    /// What `$ref`s point into (`#/components/schemas/...`): the OpenAPI document, for a
    /// built-in type's schema (shared by the schemas of its types).
    document: Arc<Value>,
    /// Where it comes from, as the ruleset's status says it.
    origin: String,
}

impl Schema {
    /// A CRD version's `openAPIV3Schema` (self-contained).
    pub fn crd(open_api_v3_schema: Value) -> Schema {
        Schema {
            root: open_api_v3_schema,
            document: Arc::new(Value::Null),
            origin: "a CustomResourceDefinition".to_owned(),
        }
    }

    /// The schema named `name` in an OpenAPI v3 document of kube-apiserver's `/openapi/v3`
    /// (`io.k8s.api.core.v1.Pod` in `/openapi/v3/api/v1`), `None` when the document has none.
    pub fn open_api(document: Value, name: &str) -> Option<Schema> {
        Schema::open_api_shared(Arc::new(document), name)
    }

    /// [`Schema::open_api`], in a document shared with other schemas.
    pub(crate) fn open_api_shared(document: Arc<Value>, name: &str) -> Option<Schema> {
        let root = document
            .get("components")?
            .get("schemas")?
            .get(name)?
            .clone();
        Some(Schema {
            root,
            document,
            origin: format!("the OpenAPI schema {name}"),
        })
    }

    /// This schema, said to come from `origin` (`the CustomResourceDefinition
    /// widgets.example.com (v1)`).
    pub(crate) fn from(mut self, origin: String) -> Schema {
        self.origin = origin;
        self
    }

    /// Where it comes from.
    pub(crate) fn origin(&self) -> &str {
        &self.origin
    }

    /// Its size as JSON, in bytes: what keeping it weighs.
    pub fn json_bytes(&self) -> u64 {
        /// Counts what is written, keeps nothing.
        struct Count(u64);
        impl std::io::Write for Count {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0 += buf.len() as u64;
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut count = Count(0);
        let _ = serde_json::to_writer(&mut count, &self.root);
        let _ = serde_json::to_writer(&mut count, &*self.document);
        count.0
    }

    /// Where the walk starts: the object, whose `apiVersion`, `kind` and `metadata` are known
    /// whatever its schema says of them.
    pub(super) fn root(&self) -> Node<'_> {
        Node {
            schema: &self.root,
            document: &self.document,
            root: true,
        }
    }
}

/// The keys of a schema the checker reads: a schema held for checking keeps these alone
/// (descriptions, validations, formats and defaults are most of a CRD's bytes).
pub(super) const WALKED: [&str; 11] = [
    "type",
    "properties",
    "items",
    "additionalProperties",
    "allOf",
    "anyOf",
    "oneOf",
    "$ref",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-embedded-resource",
];

/// Deepest a schema is kept when pruned: below, it is kept open (anything may be there, nothing
/// is checked), so that no schema, however deep, costs more than this much stack to prune or to
/// walk.
const MAX_PRUNED_DEPTH: usize = 64;

/// `schema` with only what the checker reads ([`WALKED`]), in it and in every schema below it
/// down to [`MAX_PRUNED_DEPTH`]: what a schema held for checking keeps. The check of a pruned
/// schema finds what the check of the whole one finds (but below that depth, where it finds
/// nothing).
pub(crate) fn pruned(schema: &Value) -> Value {
    pruned_at(schema, 0)
}

fn pruned_at(schema: &Value, depth: usize) -> Value {
    let Value::Object(fields) = schema else {
        return schema.clone();
    };
    if depth >= MAX_PRUNED_DEPTH {
        return serde_json::json!({"x-kubernetes-preserve-unknown-fields": true});
    }
    let below = |s: &Value| pruned_at(s, depth + 1);
    let mut kept = serde_json::Map::new();
    for (key, value) in fields {
        if !WALKED.contains(&key.as_str()) {
            continue;
        }
        let value = match (key.as_str(), value) {
            ("properties", Value::Object(properties)) => Value::Object(
                properties
                    .iter()
                    .map(|(name, s)| (name.clone(), below(s)))
                    .collect(),
            ),
            ("allOf" | "anyOf" | "oneOf", Value::Array(branches)) => {
                Value::Array(branches.iter().map(below).collect())
            }
            ("items", Value::Array(tuple)) => Value::Array(tuple.iter().map(below).collect()),
            ("items" | "additionalProperties", s) => below(s),
            // A keyword's own value (`type`, `$ref`, a flag): never a structure to copy whole.
            (_, v) if !v.is_object() && !v.is_array() => v.clone(),
            _ => continue,
        };
        kept.insert(key.clone(), value);
    }
    Value::Object(kept)
}

/// A place in a schema.
#[derive(Debug, Clone, Copy)]
pub(super) struct Node<'s> {
    schema: &'s Value,
    document: &'s Value,
    /// The object itself.
    root: bool,
}

/// What a schema says of a value's type, where it says one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SchemaType {
    Boolean,
    String,
    Integer,
    Number,
    Array,
    Object,
}

impl SchemaType {
    pub(super) fn name(self) -> &'static str {
        match self {
            SchemaType::Boolean => "boolean",
            SchemaType::String => "string",
            SchemaType::Integer => "integer",
            SchemaType::Number => "number",
            SchemaType::Array => "array",
            SchemaType::Object => "object",
        }
    }
}

/// What the schema says of one field of an object.
#[derive(Debug)]
pub(super) enum Field<'s> {
    /// Listed: its schema.
    Known(Node<'s>),
    /// The schema does not say: below `x-kubernetes-preserve-unknown-fields`, or in an object
    /// that lists no properties.
    Open,
    /// Not there: the object lists its fields (these) and takes no others.
    Missing(Vec<&'s str>),
    /// The value is not an object: a field of it is never there.
    NotAnObject(SchemaType),
}

impl<'s> Node<'s> {
    fn at(self, schema: &'s Value) -> Node<'s> {
        Node {
            schema,
            document: self.document,
            root: false,
        }
    }

    /// This node with its `$ref`s followed (a `$ref` that leads nowhere: an empty, open schema).
    fn resolved(self) -> Node<'s> {
        let mut node = self;
        for _ in 0..MAX_REFS {
            let Some(reference) = node.schema.get("$ref").and_then(Value::as_str) else {
                return node;
            };
            let target = reference
                .strip_prefix('#')
                .and_then(|pointer| node.document.pointer(pointer));
            match target {
                Some(schema) => node = Node { schema, ..node },
                None => return node.at(&EMPTY),
            }
        }
        node.at(&EMPTY)
    }

    /// The branches of `allOf`, `anyOf` and `oneOf`, resolved.
    fn branches(self) -> impl Iterator<Item = Node<'s>> {
        ["allOf", "anyOf", "oneOf"]
            .into_iter()
            .filter_map(move |k| self.schema.get(k).and_then(Value::as_array))
            .flatten()
            .map(move |s| self.at(s).resolved())
    }

    fn flag(self, name: &str) -> bool {
        self.schema.get(name).and_then(Value::as_bool) == Some(true)
    }

    /// Whether any field may be there without the schema listing it.
    fn preserves_unknown(self) -> bool {
        self.flag("x-kubernetes-preserve-unknown-fields")
    }

    /// The value's type, where the schema (or all of its branches) says one; `None` for
    /// int-or-string, and where it does not say.
    pub(super) fn schema_type(self) -> Option<SchemaType> {
        self.schema_type_at(0)
    }

    fn schema_type_at(self, depth: usize) -> Option<SchemaType> {
        let node = self.resolved();
        if node.flag("x-kubernetes-int-or-string") {
            return None;
        }
        let own = match node.schema.get("type").and_then(Value::as_str) {
            Some("boolean") => Some(SchemaType::Boolean),
            Some("string") => Some(SchemaType::String),
            Some("integer") => Some(SchemaType::Integer),
            Some("number") => Some(SchemaType::Number),
            Some("array") => Some(SchemaType::Array),
            Some("object") => Some(SchemaType::Object),
            _ => None,
        };
        if own.is_some() || depth >= MAX_BRANCH_DEPTH {
            return own;
        }
        // No type of its own: one its branches agree on (`allOf: [{$ref: ...}]`).
        let mut agreed = None;
        for branch in node.branches() {
            let t = branch.schema_type_at(depth + 1)?;
            if agreed.is_some_and(|a| a != t) {
                return None;
            }
            agreed = Some(t);
        }
        agreed
    }

    /// The schema of field `name` of this object.
    pub(super) fn field(self, name: &str) -> Field<'s> {
        // The object, and an object embedded in it (`x-kubernetes-embedded-resource`, as a
        // template), have these whatever their properties say.
        if self.root || self.resolved().flag("x-kubernetes-embedded-resource") {
            match name {
                "apiVersion" | "kind" => return Field::Known(self.at(&STRING)),
                "metadata" => return Field::Known(self.at(&OBJECT_META)),
                _ => {}
            }
        }
        let node = self.resolved();
        let mut listed = Vec::new();
        match node.field_at(name, 0, &mut listed) {
            Some(found) => found,
            None if listed.is_empty() => match node.schema_type() {
                Some(t) if t != SchemaType::Object => Field::NotAnObject(t),
                _ => Field::Open,
            },
            None => {
                if self.root || node.flag("x-kubernetes-embedded-resource") {
                    listed.extend(["apiVersion", "kind", "metadata"]);
                }
                listed.sort_unstable();
                listed.dedup();
                Field::Missing(listed)
            }
        }
    }

    /// `Some` when this node (or a branch) knows the field, or is open; `None` when it does not
    /// know it, with the fields it does list added to `listed`.
    fn field_at(self, name: &str, depth: usize, listed: &mut Vec<&'s str>) -> Option<Field<'s>> {
        let node = self.resolved();
        if let Some(properties) = node.schema.get("properties").and_then(Value::as_object) {
            if let Some(schema) = properties.get(name) {
                return Some(Field::Known(node.at(schema)));
            }
            listed.extend(properties.keys().map(String::as_str));
        }
        if node.preserves_unknown() {
            return Some(Field::Open);
        }
        match node.schema.get("additionalProperties") {
            Some(Value::Bool(true)) => return Some(Field::Open),
            Some(schema @ Value::Object(_)) => return Some(Field::Known(node.at(schema))),
            _ => {}
        }
        if depth < MAX_BRANCH_DEPTH {
            for branch in node.branches() {
                if let Some(found) = branch.field_at(name, depth + 1, listed) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// The schema of the elements of this array, or of the values of this map.
    pub(super) fn element(self) -> Option<Node<'s>> {
        if self.root {
            return None;
        }
        let node = self.resolved();
        if let Some(items) = node.schema.get("items").filter(|i| i.is_object()) {
            return Some(node.at(items));
        }
        if node.preserves_unknown() {
            return None;
        }
        match node.schema.get("additionalProperties") {
            Some(schema @ Value::Object(_)) => Some(node.at(schema)),
            _ => node.branches().find_map(|b| b.element()),
        }
    }

    /// Whether this is an object whose fields are listed: its keys, iterated, are field names.
    pub(super) fn is_map_or_object(self) -> bool {
        self.root || self.schema_type() == Some(SchemaType::Object)
    }
}

/// An empty schema: anything.
static EMPTY: Value = Value::Null;

static STRING: LazyLock<Value> = LazyLock::new(|| serde_json::json!({"type": "string"}));

/// `metadata` of every object: kube-apiserver's ObjectMeta, which a CRD's schema does not
/// spell out. `managedFields[].fieldsV1` is open.
static OBJECT_META: LazyLock<Value> = LazyLock::new(|| {
    let string = serde_json::json!({"type": "string"});
    let map = serde_json::json!({"type": "object", "additionalProperties": {"type": "string"}});
    serde_json::json!({
        "type": "object",
        "properties": {
            "annotations": map,
            "creationTimestamp": string,
            "deletionGracePeriodSeconds": {"type": "integer"},
            "deletionTimestamp": string,
            "finalizers": {"type": "array", "items": string},
            "generateName": string,
            "generation": {"type": "integer"},
            "labels": map,
            "managedFields": {"type": "array", "items": {"type": "object", "properties": {
                "apiVersion": string,
                "fieldsType": string,
                "fieldsV1": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "manager": string,
                "operation": string,
                "subresource": string,
                "time": string,
            }}},
            "name": string,
            "namespace": string,
            "ownerReferences": {"type": "array", "items": {"type": "object", "properties": {
                "apiVersion": string,
                "blockOwnerDeletion": {"type": "boolean"},
                "controller": {"type": "boolean"},
                "kind": string,
                "name": string,
                "uid": string,
            }}},
            "resourceVersion": string,
            "selfLink": string,
            "uid": string,
        }
    })
});
