//! The schemas of the types kube-apiserver serves itself (`batch/v1` Jobs, core `v1` Pods) and
//! of aggregated APIs: their group-version's document of `/openapi/v3`.
//!
//! kube-apiserver's index (`/openapi/v3`) names each group-version's document by a URL that
//! carries the hash of its content, so a document read is kept until the index names another:
//! it is read once per version of it, not once per review. The index is read again when older
//! than [`INDEX_KEPT_FOR`]. A document is pruned to what the checker walks as it is read (core
//! `v1`, 2.1 MB as served by 1.36, is kept in a few hundred kilobytes), and the documents kept
//! weigh at most [`MAX_KEPT_BYTES`]. Only group-versions the index names are read: whoever
//! sends a ruleset can make the server read at most each of the cluster's documents once per
//! change of it, and learns only what any authenticated user reads at `/openapi/v3`.

use super::Schema;
use super::schema::pruned;
use crate::ruleset::Target;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How long the index is used before it is read again: a group-version installed or changed
/// since is seen after this at most.
pub(crate) const INDEX_KEPT_FOR: Duration = Duration::from_secs(30);

/// Most bytes of documents kept (pruned, as JSON; their size in memory is a few times that).
pub(crate) const MAX_KEPT_BYTES: u64 = 16 << 20;

/// Largest document read (core `v1` is 2.1 MB).
const MAX_DOCUMENT_BYTES: usize = 16 << 20;

/// One group-version's document, pruned.
#[derive(Debug)]
struct Document {
    /// `components.schemas`, pruned, as `$ref`s point into it.
    components: Arc<Value>,
    /// The schema of each resource's objects (`batch/v1/jobs` → `io.k8s.api.batch.v1.Job`).
    targets: HashMap<Target, String>,
    bytes: u64,
}

/// The index: each group-version's document (`apis/batch/v1` → its URL).
struct Index {
    read_at: Instant,
    urls: Arc<HashMap<String, String>>,
}

/// Reads and keeps the documents of `/openapi/v3`.
pub(crate) struct OpenApi {
    client: kube::Client,
    /// Read by one lookup at a time; the others wait for it.
    index: tokio::sync::Mutex<Option<Index>>,
    documents: moka::future::Cache<String, Arc<Document>>,
}

/// What the index says of a target's group-version.
pub(crate) enum Served {
    /// kube-apiserver serves no such group-version.
    No,
    /// Its schema.
    Schema(Schema),
    /// Served, but not to be had (why).
    Unknown(String),
}

impl OpenApi {
    pub(crate) fn new(client: kube::Client) -> OpenApi {
        OpenApi {
            client,
            index: tokio::sync::Mutex::new(None),
            documents: moka::future::Cache::builder()
                .max_capacity(MAX_KEPT_BYTES)
                .weigher(|_, d: &Arc<Document>| u32::try_from(d.bytes).unwrap_or(u32::MAX))
                .build(),
        }
    }

    /// The schema of `target`'s objects as its group-version's document gives it.
    pub(crate) async fn schema(&self, target: &Target) -> Served {
        let urls = match self.index().await {
            Ok(urls) => urls,
            Err(why) => return Served::Unknown(why),
        };
        let Some(url) = urls.get(&group_version_path(target)) else {
            return Served::No;
        };
        let document = self
            .documents
            .try_get_with(url.clone(), self.read_document(url))
            .await;
        let document = match document {
            Ok(document) => document,
            Err(why) => return Served::Unknown((*why).clone()),
        };
        let group_version = group_version_path(target);
        let Some(name) = document.targets.get(target) else {
            return Served::Unknown(format!(
                "kube-apiserver's OpenAPI document of {group_version} has no resource {}",
                target.resource
            ));
        };
        match Schema::open_api_shared(document.components.clone(), name) {
            Some(schema) => Served::Schema(schema.from(format!(
                "{name} (kube-apiserver's OpenAPI document of {group_version})"
            ))),
            None => Served::Unknown(format!(
                "kube-apiserver's OpenAPI document of {group_version} has no schema {name}"
            )),
        }
    }

    /// The index, read again when older than [`INDEX_KEPT_FOR`].
    async fn index(&self) -> Result<Arc<HashMap<String, String>>, String> {
        let mut index = self.index.lock().await;
        if let Some(kept) = index.as_ref()
            && kept.read_at.elapsed() < INDEX_KEPT_FOR
        {
            return Ok(kept.urls.clone());
        }
        let (body, _) = self.get("/openapi/v3").await?;
        let urls: HashMap<String, String> = body["paths"]
            .as_object()
            .map(|paths| {
                paths
                    .iter()
                    .filter_map(|(path, entry)| {
                        let url = entry["serverRelativeURL"].as_str()?;
                        Some((path.clone(), url.to_owned()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let urls = Arc::new(urls);
        *index = Some(Index {
            read_at: Instant::now(),
            urls: urls.clone(),
        });
        Ok(urls)
    }

    async fn read_document(&self, url: &str) -> Result<Arc<Document>, String> {
        let (whole, served_bytes) = self.get(url).await?;
        let document = Document::of(&whole);
        tracing::info!(
            url,
            served_bytes,
            kept_bytes = document.bytes,
            resources = document.targets.len(),
            "read an OpenAPI document to check rulesets against"
        );
        Ok(Arc::new(document))
    }

    /// The JSON at `url`, and its size.
    async fn get(&self, url: &str) -> Result<(Value, usize), String> {
        let request = http::Request::get(url)
            .body(Vec::new())
            .map_err(|e| format!("{url}: {e}"))?;
        let text = self
            .client
            .request_text(request)
            .await
            .map_err(|e| format!("{url} could not be read: {}", short(&e.to_string())))?;
        if text.len() > MAX_DOCUMENT_BYTES {
            return Err(format!(
                "{url} is {} bytes, over the {MAX_DOCUMENT_BYTES} read",
                text.len()
            ));
        }
        let value = serde_json::from_str(&text).map_err(|e| format!("{url} is not JSON: {e}"))?;
        Ok((value, text.len()))
    }
}

impl Document {
    /// The parts of a whole document the checker reads: the schemas (pruned), and the schema
    /// of each resource's objects, as the path of one of them answers a `get`
    /// (`/apis/batch/v1/namespaces/{namespace}/jobs/{name}` → `io.k8s.api.batch.v1.Job`).
    fn of(whole: &Value) -> Document {
        let mut targets = HashMap::new();
        for (path, item) in whole["paths"].as_object().into_iter().flatten() {
            let Some(target) = object_path(path) else {
                continue;
            };
            let schema = &item["get"]["responses"]["200"]["content"]["application/json"]["schema"];
            let reference = schema["$ref"]
                .as_str()
                .or_else(|| schema["allOf"][0]["$ref"].as_str());
            if let Some(name) = reference.and_then(|r| r.strip_prefix("#/components/schemas/")) {
                targets.insert(target, name.to_owned());
            }
        }
        let schemas: serde_json::Map<String, Value> = whole["components"]["schemas"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, schema)| (name.clone(), pruned(schema)))
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

/// The index's name of `target`'s group-version: `api/v1` for the core group, else
/// `apis/<group>/<version>`.
fn group_version_path(target: &Target) -> String {
    if target.group.is_empty() {
        format!("api/{}", target.version)
    } else {
        format!("apis/{}/{}", target.group, target.version)
    }
}

fn short(text: &str) -> String {
    crate::evaluate::truncated(text.to_owned(), 120)
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
    fn the_core_group_and_named_groups_have_their_index_paths() {
        assert_eq!(group_version_path(&Target::of("", "v1", "pods")), "api/v1");
        assert_eq!(
            group_version_path(&Target::of("batch", "v1", "jobs")),
            "apis/batch/v1"
        );
    }
}
