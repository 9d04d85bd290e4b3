//! OpenAPI v2 and v3 documents for `live.ifo.kubevirt.io/v1alpha1`: what `kubectl explain`
//! reads. Built once at start, like discovery, and served with ETags.
//!
//! Who reads them: the aggregator downloads `/openapi/v2` (as `system:aggregator`, every minute,
//! `If-None-Match`) and merges it into the cluster's document, which `kubectl explain
//! --output=plaintext-openapiv2` reads; it downloads the `/openapi/v3` root the same way, and
//! proxies `/openapi/v3/apis/live.ifo.kubevirt.io/v1alpha1` to us live, as the end user, when
//! `kubectl explain` (v3 by default) asks kube-apiserver for it.

mod definitions;
mod paths;
pub(crate) mod schema;
mod serve;
#[cfg(test)]
mod tests;
mod v3;

pub(crate) use serve::{v2_document, v3_group_document, v3_root_document};

use super::discovery::Document;
use super::resource::{GROUP, GROUP_VERSION, VERSION};
use serde_json::{Map, Value, json};

/// The key of our group version in the v3 root, and its document's path under `/openapi/v3/`.
fn v3_group_path() -> String {
    format!("apis/{GROUP_VERSION}")
}

/// Every OpenAPI document, built once.
pub(crate) struct OpenApi {
    /// Swagger 2.0, for the aggregator's merged `/openapi/v2`.
    pub v2: Document,
    /// The v3 discovery document: where the group version's document is, with its hash.
    pub v3_root: Document,
    /// The OpenAPI 3.0 document of our group version.
    pub v3_group: Document,
    /// The `hash` query parameter of the v3 document's current URL (its ETag, unquoted).
    pub v3_hash: String,
}

fn build_v2() -> Value {
    json!({
        "swagger": "2.0",
        "info": {"title": GROUP, "version": VERSION},
        "paths": paths::v2(),
        "definitions": definitions::all(),
    })
}

fn build_v3() -> Value {
    let schemas: Map<String, Value> = definitions::all()
        .iter()
        .map(|(name, schema)| (name.clone(), v3::schema(schema)))
        .collect();
    json!({
        "openapi": "3.0.0",
        "info": {"title": GROUP, "version": VERSION},
        "paths": paths::v3(),
        "components": {"schemas": schemas},
    })
}

impl OpenApi {
    pub(crate) fn new() -> OpenApi {
        let v3_group = Document::new(&build_v3());
        let v3_hash = v3_group.etag.trim_matches('"').to_owned();
        let path = v3_group_path();
        let url = format!("/openapi/v3/{path}?hash={v3_hash}");
        let v3_root = Document::new(&json!({"paths": {path: {"serverRelativeURL": url}}}));
        OpenApi {
            v2: Document::new(&build_v2()),
            v3_root,
            v3_group,
            v3_hash,
        }
    }
}

impl Default for OpenApi {
    fn default() -> Self {
        OpenApi::new()
    }
}
