//! The schemas of the types kube-apiserver serves itself (`batch/v1` Jobs, core `v1` Pods) and
//! of aggregated APIs: their group-version's document of `/openapi/v3`.
//!
//! kube-apiserver's index (`/openapi/v3`) names each group-version's document by a URL that
//! carries the hash of its content, so a document read is kept until the index names another:
//! it is read once per version of it, not once per review. The index is read again when older
//! than [`INDEX_KEPT_FOR`]. A document is pruned to what the checker walks as it is read, in one
//! pass (`document`: core `v1`, 1.6 MB as served by 1.36.3, is kept in 84 KB), and the documents
//! kept weigh at most [`MAX_KEPT_BYTES`]. Only group-versions the index names are read: whoever
//! sends a ruleset can make the server read at most each of the cluster's documents once per
//! change of it, and learns only what any authenticated user reads at `/openapi/v3`.

use super::Schema;
use super::document::Document;
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
        let body = self.get("/openapi/v3").await?;
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
        let text = self.get_text(url).await?;
        let served_bytes = text.len();
        let document =
            Document::read(&text).map_err(|e| format!("{url} is not an OpenAPI document: {e}"))?;
        drop(text);
        tracing::info!(
            url,
            served_bytes,
            kept_bytes = document.bytes,
            resources = document.targets.len(),
            "read an OpenAPI document to check rulesets against"
        );
        Ok(Arc::new(document))
    }

    /// The JSON at `url`.
    async fn get(&self, url: &str) -> Result<Value, String> {
        let text = self.get_text(url).await?;
        serde_json::from_str(&text).map_err(|e| format!("{url} is not JSON: {e}"))
    }

    /// The text at `url`, at most [`MAX_DOCUMENT_BYTES`].
    async fn get_text(&self, url: &str) -> Result<String, String> {
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
        Ok(text)
    }
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

    #[test]
    fn the_core_group_and_named_groups_have_their_index_paths() {
        assert_eq!(group_version_path(&Target::of("", "v1", "pods")), "api/v1");
        assert_eq!(
            group_version_path(&Target::of("batch", "v1", "jobs")),
            "apis/batch/v1"
        );
    }
}
