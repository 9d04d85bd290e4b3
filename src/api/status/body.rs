//! The `Status` body an error is written as, in kube-apiserver's field order.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::core::response::{StatusCause, StatusDetails, StatusSummary};
use serde::Serialize;
use serde_json::Value;

use super::ApiError;

impl ApiError {
    fn details(&self) -> Option<StatusDetails> {
        let mut d = StatusDetails {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes: Vec::new(),
            retry_after_seconds: 0,
        };
        match self {
            ApiError::Forbidden(f) => {
                let (gr, name) = f.group_resource_and_name();
                name.clone_into(&mut d.name);
                d.group = gr.group;
                d.kind = gr.resource;
            }
            ApiError::NotFound { resource, name }
            | ApiError::NotFoundBecause { resource, name, .. } => {
                d.name.clone_from(name);
                d.group.clone_from(&resource.group);
                d.kind.clone_from(&resource.resource);
            }
            ApiError::PathNotFound => {}
            ApiError::MethodNotAllowed { resource, .. } => {
                d.group.clone_from(&resource.group);
                d.kind.clone_from(&resource.resource);
            }
            ApiError::ResourceVersionTooLarge { .. } => {
                d.causes.push(cause(
                    "ResourceVersionTooLarge",
                    "Too large resource version",
                ));
                d.retry_after_seconds = 1;
            }
            ApiError::Internal(e) => d.causes.push(cause("", &e.to_string())),
            _ => return None,
        }
        Some(d)
    }

    fn status(&self) -> Status {
        let continue_token = match self {
            ApiError::ContinueExpired { continue_token } => continue_token.clone(),
            _ => None,
        };
        Status {
            kind: "Status",
            api_version: "v1",
            metadata: ListMeta {
                continue_: continue_token,
                ..ListMeta::default()
            },
            status: StatusSummary::Failure,
            message: self.message(),
            reason: self.reason(),
            details: self.details(),
            code: self.code(),
        }
    }

    /// The `Status` object as JSON.
    pub(crate) fn to_status(&self) -> Value {
        serde_json::to_value(self.status()).unwrap_or(Value::Null)
    }

    /// The `Status` object serialized with kube-apiserver's field order
    /// (`kind, apiVersion, metadata, status, message, reason, details, code`).
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(&self.status()).unwrap_or_default()
    }
}

/// The body. Its fields are `meta/v1` `Status`'s, but neither k8s-openapi's `Status` (fields in
/// alphabetical order) nor kube-core's (no `kind` or `apiVersion`) writes them in
/// kube-apiserver's order, which this keeps; the parts inside are kube-core's, whose order and
/// omissions are kube-apiserver's.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    kind: &'static str,
    api_version: &'static str,
    metadata: ListMeta,
    status: StatusSummary,
    message: String,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<StatusDetails>,
    code: u16,
}

fn cause(reason: &str, message: &str) -> StatusCause {
    StatusCause {
        reason: reason.to_owned(),
        message: message.to_owned(),
        field: String::new(),
    }
}
