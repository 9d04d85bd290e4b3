//! One group-version's OpenAPI v3 document of kube-apiserver (`/openapi/v3/apis/batch/v1`), as
//! the checker keeps it: the schemas of `components.schemas`, pruned to what the checker walks,
//! and which of them each resource's objects have, from the document's object paths.
//!
//! Read in one pass that keeps only that: descriptions, examples, every operation but an
//! object's `get`, and every keyword the checker does not read are skipped as they are read, so
//! reading core/v1 (1.6 MB as served by 1.36) costs about what is kept, not the whole document
//! as a tree.

use super::Schema;
use super::schema::{WALKED, pruned};
use crate::ruleset::Target;
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// One group-version's document, pruned.
#[derive(Debug)]
pub(super) struct Document {
    /// `components.schemas`, pruned, as `$ref`s point into it.
    pub(super) components: Arc<Value>,
    /// The schema of each resource's objects (`batch/v1/jobs` → `io.k8s.api.batch.v1.Job`).
    pub(super) targets: HashMap<Target, String>,
    /// The size of what is kept, as JSON.
    pub(super) bytes: u64,
}

/// What is read of a whole document.
#[derive(Deserialize)]
struct Whole {
    #[serde(default)]
    paths: HashMap<String, PathItem>,
    #[serde(default)]
    components: Components,
}

#[derive(Deserialize, Default)]
struct Components {
    #[serde(default)]
    schemas: BTreeMap<String, Walked>,
}

#[derive(Deserialize)]
struct PathItem {
    get: Option<Get>,
}

#[derive(Deserialize)]
struct Get {
    #[serde(default)]
    responses: HashMap<String, Response>,
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    content: HashMap<String, Media>,
}

#[derive(Deserialize)]
struct Media {
    schema: Option<Reference>,
}

/// A response's schema: a `$ref`, or an `allOf` of one.
#[derive(Deserialize)]
struct Reference {
    #[serde(rename = "$ref")]
    reference: Option<String>,
    #[serde(rename = "allOf", default)]
    all_of: Vec<Reference>,
}

impl Reference {
    fn name(&self) -> Option<&str> {
        self.reference
            .as_deref()
            .or_else(|| self.all_of.first().and_then(|r| r.reference.as_deref()))
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
    }
}

/// A schema with only the keywords the checker reads ([`WALKED`]), read as such.
struct Walked(Value);

impl<'de> Deserialize<'de> for Walked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Walked, D::Error> {
        deserializer.deserialize_any(WalkedVisitor)
    }
}

struct WalkedVisitor;

impl<'de> Visitor<'de> for WalkedVisitor {
    type Value = Walked;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a schema")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Walked, A::Error> {
        let mut kept = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = match key.as_str() {
                "properties" => {
                    let properties: BTreeMap<String, Walked> = map.next_value()?;
                    Value::Object(properties.into_iter().map(|(k, w)| (k, w.0)).collect())
                }
                "items" | "additionalProperties" => map.next_value::<Walked>()?.0,
                "allOf" | "anyOf" | "oneOf" => {
                    let branches: Vec<Walked> = map.next_value()?;
                    Value::Array(branches.into_iter().map(|w| w.0).collect())
                }
                // The other keywords walked (`type`, `$ref`, the flags) are values of their own.
                walked if WALKED.contains(&walked) => map.next_value::<Value>()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            kept.insert(key, value);
        }
        Ok(Walked(Value::Object(kept)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Walked, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Walked>()? {
            items.push(item.0);
        }
        Ok(Walked(Value::Array(items)))
    }

    fn visit_bool<E>(self, b: bool) -> Result<Walked, E> {
        Ok(Walked(Value::Bool(b)))
    }

    fn visit_str<E>(self, _: &str) -> Result<Walked, E> {
        Ok(Walked(Value::Null))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Walked, E> {
        Ok(Walked(Value::Null))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Walked, E> {
        Ok(Walked(Value::Null))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Walked, E> {
        Ok(Walked(Value::Null))
    }

    fn visit_unit<E>(self) -> Result<Walked, E> {
        Ok(Walked(Value::Null))
    }
}

impl Document {
    /// The document in `text` (JSON), read in one pass.
    pub(super) fn read(text: &str) -> serde_json::Result<Document> {
        Ok(Document::from(serde_json::from_str::<Whole>(text)?))
    }

    /// The document `whole`, already read (a pinned copy in a file).
    pub(super) fn of(whole: &Value) -> Document {
        Whole::deserialize(whole).map_or_else(
            |_| {
                Document::from(Whole {
                    paths: HashMap::new(),
                    components: Components::default(),
                })
            },
            Document::from,
        )
    }
}

impl From<Whole> for Document {
    /// The schema of each resource's objects, as the path of one of them answers a `get`
    /// (`/apis/batch/v1/namespaces/{namespace}/jobs/{name}` → `io.k8s.api.batch.v1.Job`), and
    /// the schemas, pruned (to a bounded depth).
    fn from(whole: Whole) -> Document {
        let mut targets = HashMap::new();
        for (path, item) in &whole.paths {
            let Some(target) = object_path(path) else {
                continue;
            };
            let name = item
                .get
                .as_ref()
                .and_then(|get| get.responses.get("200"))
                .and_then(|ok| ok.content.get("application/json"))
                .and_then(|json| json.schema.as_ref())
                .and_then(Reference::name);
            if let Some(name) = name {
                targets.insert(target, name.to_owned());
            }
        }
        let schemas: serde_json::Map<String, Value> = whole
            .components
            .schemas
            .into_iter()
            .map(|(name, walked)| (name, pruned(&walked.0)))
            .collect();
        let components = serde_json::json!({"components": {"schemas": schemas}});
        let bytes = serde_json::to_vec(&components).map_or(0, |json| json.len() as u64);
        Document {
            components: Arc::new(components),
            targets,
            bytes,
        }
    }
}

/// The target whose objects `path` reads, when it is one object's path:
/// `/apis/<group>/<version>[/namespaces/{namespace}]/<resource>/{name}` (or `/api/v1/...`), not
/// a subresource's, a watch's or a list's.
fn object_path(path: &str) -> Option<Target> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    match rest {
        [resource, "{name}"] | ["namespaces", "{namespace}", resource, "{name}"] => Some(Target {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: (*resource).to_owned(),
        }),
        _ => None,
    }
}

/// The schema of each object path's resource in `whole`, an OpenAPI v3 document of
/// kube-apiserver (as `/openapi/v3/apis/batch/v1` serves it, or a copy of one): what
/// `rules lint --schemas` reads from a pinned document.
pub(crate) fn schemas_of(whole: &Value) -> Vec<(Target, Schema)> {
    let document = Document::of(whole);
    document
        .targets
        .iter()
        .filter_map(|(target, name)| {
            let schema = Schema::open_api_shared(document.components.clone(), name)?;
            Some((target.clone(), schema.from(name.clone())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_document_gives_each_resource_its_schema_pruned_to_what_is_walked() {
        let job_ref = json!({"$ref": "#/components/schemas/io.k8s.api.batch.v1.Job"});
        let whole = json!({
            "paths": {
                "/apis/batch/v1/namespaces/{namespace}/jobs/{name}": {"get": {"responses": {"200": {
                    "content": {"application/json": {"schema": job_ref}}}}}},
                "/apis/batch/v1/namespaces/{namespace}/jobs/{name}/status": {"get": {"responses": {"200": {
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/other"}}}}}}},
                "/apis/batch/v1/cronjobs/{name}": {"get": {"responses": {"200": {
                    "content": {"application/json": {"schema": {"allOf": [
                        {"$ref": "#/components/schemas/io.k8s.api.batch.v1.CronJob"}]}}}}}}},
                "/apis/batch/v1/jobs": {"get": {}},
                "/apis/batch/v1/watch/namespaces/{namespace}/jobs/{name}": {"get": {"responses": {"200": {
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/watch"}}}}}}},
            },
            "components": {"schemas": {
                "io.k8s.api.batch.v1.Job": {
                    "description": "Job represents ...",
                    "type": "object",
                    "properties": {
                        "description": {"type": "string", "description": "a field so named"},
                        "status": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.batch.v1.JobStatus"}],
                                   "default": {}},
                    },
                },
                "io.k8s.api.batch.v1.JobStatus": {"type": "object", "properties": {
                    "succeeded": {"type": "integer", "format": "int32"}}},
            }},
        });
        let document = Document::of(&whole);
        assert_eq!(
            document.targets,
            HashMap::from([
                (
                    Target::of("batch", "v1", "jobs"),
                    "io.k8s.api.batch.v1.Job".to_owned()
                ),
                (
                    Target::of("batch", "v1", "cronjobs"),
                    "io.k8s.api.batch.v1.CronJob".to_owned()
                ),
            ])
        );
        assert_eq!(
            document.components["components"]["schemas"]["io.k8s.api.batch.v1.Job"],
            json!({"type": "object", "properties": {
                "description": {"type": "string"},
                "status": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.batch.v1.JobStatus"}]},
            }})
        );
        assert_eq!(
            document.components["components"]["schemas"]["io.k8s.api.batch.v1.JobStatus"],
            json!({"type": "object", "properties": {"succeeded": {"type": "integer"}}})
        );
        assert!(document.bytes > 0);
    }

    #[test]
    fn only_the_paths_of_one_object_name_a_target() {
        for (path, target) in [
            ("/api/v1/nodes/{name}", Some(("", "v1", "nodes"))),
            ("/api/v1/namespaces/{name}", Some(("", "v1", "namespaces"))),
            (
                "/api/v1/namespaces/{namespace}/pods/{name}",
                Some(("", "v1", "pods")),
            ),
            (
                "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
                Some(("apps", "v1", "deployments")),
            ),
            (
                "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale",
                None,
            ),
            ("/api/v1/watch/nodes/{name}", None),
            (
                "/apis/apps/v1/watch/namespaces/{namespace}/deployments/{name}",
                None,
            ),
            ("/apis/apps/v1/deployments", None),
            ("/version/{name}", None),
        ] {
            let wanted = target.map(|(g, v, r)| Target::of(g, v, r));
            assert_eq!(object_path(path), wanted, "{path}");
        }
    }

    #[test]
    fn a_document_read_from_its_text_is_the_one_read_as_a_tree() {
        let node_ref = json!({"$ref": "#/components/schemas/io.k8s.api.core.v1.Node"});
        let get = json!({"description": "read", "responses": {"200": {
            "description": "OK", "content": {"application/json": {"schema": node_ref}}}}});
        let taint = json!({"type": "object", "required": ["key"],
            "properties": {"key": {"type": "string"}}});
        let node = json!({
            "description": "Node is a worker", "type": "object",
            "x-kubernetes-group-version-kind": [{"group": "", "kind": "Node", "version": "v1"}],
            "properties": {"spec": {"type": "object", "properties": {
                "taints": {"type": "array", "items": taint}}}},
        });
        let whole = json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.36.3"},
            "paths": {"/api/v1/nodes/{name}": {"get": get, "parameters": [{"name": "name"}]}},
            "components": {"schemas": {"io.k8s.api.core.v1.Node": node}},
        });
        let from_text = Document::read(&whole.to_string()).unwrap();
        let from_tree = Document::of(&whole);
        assert_eq!(from_text.targets, from_tree.targets);
        assert_eq!(from_text.components, from_tree.components);
        assert_eq!(
            from_text.components["components"]["schemas"]["io.k8s.api.core.v1.Node"],
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "taints": {"type": "array", "items": {"type": "object", "properties": {"key": {"type": "string"}}}}}}}})
        );
        assert!(Document::read("{\"paths\": 3}").is_err());
    }
}
