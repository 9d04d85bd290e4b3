//! The schemas of the served types, in OpenAPI v2 form (`#/definitions/...`), with the
//! descriptions `kubectl explain` prints: those every served resource's entry gives (see
//! [`crate::api::served`]), and the apimachinery types they reference.
//!
//! The apimachinery types they reference (`ObjectMeta`, `ListMeta`, `Time`, `Condition`,
//! `OwnerReference`, `WatchEvent`, `APIResourceList` and what those use) are copied verbatim from
//! the OpenAPI document of Kubernetes v1.36.3 (`api/openapi-spec/swagger.json`) into
//! `apimachinery.json`: when the aggregator merges our document into the cluster's, definitions
//! identical to its own are shared instead of being renamed.

use super::schema::META;
use crate::api::resource::{GROUP, VERSION};
use crate::api::served::SERVED;
use serde_json::{Map, Value, json};

const APIMACHINERY: &str = include_str!("apimachinery.json");

/// The apimachinery definitions, as Kubernetes publishes them, except `WatchEvent`, which lists
/// the group versions whose watches it describes.
fn apimachinery() -> Map<String, Value> {
    let Ok(Value::Object(mut definitions)) = serde_json::from_str(APIMACHINERY) else {
        unreachable!("apimachinery.json is a JSON object (checked by the tests)");
    };
    if let Some(event) = definitions.get_mut(&format!("{META}WatchEvent")) {
        event["x-kubernetes-group-version-kind"] = json!([
            {"group": "", "kind": "WatchEvent", "version": "v1"},
            {"group": GROUP, "kind": "WatchEvent", "version": VERSION},
        ]);
    }
    definitions
}

/// Every definition the documents need, by name.
pub(super) fn all() -> Map<String, Value> {
    let mut definitions = apimachinery();
    for resource in SERVED {
        definitions.extend((resource.definitions)(resource));
    }
    definitions
}
