//! List bodies, serialised straight from the stored wire objects they borrow.

use serde::Serialize;

/// `metadata` of a list or Table.
#[derive(Serialize)]
pub(super) struct ListMeta {
    #[serde(rename = "resourceVersion")]
    pub resource_version: String,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// `<Kind>List` and `PartialObjectMetadataList`.
#[derive(Serialize)]
pub(super) struct List<'a, T> {
    pub kind: &'a str,
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    pub metadata: ListMeta,
    pub items: Vec<T>,
}
