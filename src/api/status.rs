//! Kubernetes `Status` error bodies (`metav1.Status`), as apimachinery `api/errors` builds them.
//!
//! Clients branch on `reason` and `code` (kube-rs relists on `410 Expired`, client-go retries a
//! `504 Timeout` after `retryAfterSeconds`, kubectl prints `Error from server (<reason>):
//! <message>`), so each error carries the same reason, code, message wording and `details` as
//! kube-apiserver's. The HTTP status of the response must equal [`ApiError::code`], with
//! `Content-Type: application/json`, and a `Retry-After` header when
//! [`ApiError::retry_after_seconds`] is set.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::core::response::{StatusCause, StatusDetails, StatusSummary};
use serde::Serialize;
use serde_json::Value;

use crate::apimachinery::goquote::go_quote;

/// A group and resource (`inflightoperations` in `live.ifo.kubevirt.io`), displayed as
/// `resource.group` (just `resource` for the core group), as `schema.GroupResource`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct GroupResource {
    /// The API group; empty for the core group.
    pub group: String,
    /// The resource's plural.
    pub resource: String,
}

impl GroupResource {
    /// `resource` in `group`.
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }

    fn is_empty(&self) -> bool {
        self.group.is_empty() && self.resource.is_empty()
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// What a denied request tried to reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForbiddenTarget {
    /// A resource request. `namespace` empty means cluster scope (e.g. `kubectl get -A`);
    /// `name` empty means a collection (unless a `metadata.name` field selector named one).
    Resource {
        /// The resource the request named.
        resource: GroupResource,
        /// `status`, `log`, …; empty for the object or collection itself.
        subresource: String,
        /// The namespace of the request; empty for cluster scope.
        namespace: String,
        /// The object's name; empty for a collection.
        name: String,
    },
    /// A non-resource path such as `/openapi/v2`.
    NonResource {
        /// The request's path, as authorized.
        path: String,
    },
}

/// An authorization denial, rendered like the apiserver's authorization filter
/// (`responsewriters.Forbidden`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forbidden {
    /// The user name as authenticated.
    pub user: String,
    /// The authorization verb (`get`, `list`, `watch`, ...).
    pub verb: String,
    /// What the request tried to reach: decides the wording, and `details` of the body.
    pub target: ForbiddenTarget,
    /// The authorizer's reason (SubjectAccessReview `status.reason`); appended after `: `
    /// when not empty.
    pub reason: String,
}

impl Forbidden {
    fn message(&self) -> String {
        let who = go_quote(&self.user);
        let verb = &self.verb;
        let inner = match &self.target {
            ForbiddenTarget::NonResource { path } => {
                format!("User {who} cannot {verb} path {}", go_quote(path))
            }
            ForbiddenTarget::Resource {
                resource,
                subresource,
                namespace,
                ..
            } => {
                let mut res = resource.resource.clone();
                if !subresource.is_empty() {
                    res = format!("{res}/{subresource}");
                }
                let group = go_quote(&resource.group);
                if namespace.is_empty() {
                    format!(
                        "User {who} cannot {verb} resource {} in API group {group} at the cluster scope",
                        go_quote(&res)
                    )
                } else {
                    format!(
                        "User {who} cannot {verb} resource {} in API group {group} in the namespace {}",
                        go_quote(&res),
                        go_quote(namespace)
                    )
                }
            }
        };
        // The apiserver escapes HTML metacharacters of this part (it echoes the request).
        let inner = inner
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        let err = if self.reason.is_empty() {
            inner
        } else {
            format!("{inner}: {}", self.reason)
        };
        let (gr, name) = self.group_resource_and_name();
        if gr.is_empty() {
            format!("forbidden: {err}")
        } else if name.is_empty() {
            format!("{gr} is forbidden: {err}")
        } else {
            format!("{gr} {} is forbidden: {err}", go_quote(name))
        }
    }

    fn group_resource_and_name(&self) -> (GroupResource, &str) {
        match &self.target {
            ForbiddenTarget::Resource { resource, name, .. } => (resource.clone(), name),
            ForbiddenTarget::NonResource { .. } => (GroupResource::default(), ""),
        }
    }
}

/// An error the API answers with a `Status` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// 400 `BadRequest`: invalid selector, parameter or continue token.
    BadRequest(String),
    /// 401 `Unauthorized`: no acceptable credentials.
    Unauthorized,
    /// 403 `Forbidden`.
    Forbidden(Box<Forbidden>),
    /// 404 `NotFound` for a named object.
    NotFound {
        /// The resource looked in.
        resource: GroupResource,
        /// The name not found.
        name: String,
    },
    /// 404 `NotFound` for a named object, saying why it does not exist (a computed object whose
    /// subject the cluster does not have: the gate of a node that does not exist).
    NotFoundBecause {
        /// The resource looked in.
        resource: GroupResource,
        /// The name not found.
        name: String,
        /// Why, after `not found: `.
        why: String,
    },
    /// 404 `NotFound` for a path the server does not serve.
    PathNotFound,
    /// 405 `MethodNotAllowed`: `verb` (e.g. `create`) is not supported on `resource`.
    MethodNotAllowed {
        /// The resource the request named.
        resource: GroupResource,
        /// The verb it is not served for.
        verb: String,
    },
    /// 406 `NotAcceptable`: no acceptable media type.
    NotAcceptable {
        /// The media types that are served, for the message.
        accepted: Vec<String>,
    },
    /// 410 `Expired`: a watch resourceVersion older than the retained history.
    TooOldResourceVersion {
        /// The resourceVersion asked for.
        requested: u64,
        /// The oldest resourceVersion a watch can still start from.
        oldest: u64,
    },
    /// 410 `Expired` with a custom message (e.g. a watcher that fell too far behind).
    Expired(String),
    /// 410 `Expired`: a `continue` token whose snapshot is gone.
    ContinueExpired {
        /// When set, lets the client finish the listing inconsistently (sent as
        /// `metadata.continue`).
        continue_token: Option<String>,
    },
    /// 504 `Timeout`: a resourceVersion newer than the server's current one; retry in 1 s.
    ResourceVersionTooLarge {
        /// The resourceVersion asked for.
        requested: u64,
        /// The server's current resourceVersion.
        current: u64,
    },
    /// 500 `InternalError`, e.g. the authorizer (SubjectAccessReview) failed.
    Internal(String),
    /// 503 `ServiceUnavailable`: this replica does not serve now (a standby, or a leader that
    /// just lost its lease). Sent with `Retry-After: 1`, so client-go (kubectl, informers)
    /// retries on its own and reaches the new leader once the Service routes to it.
    ServiceUnavailable(String),
    /// 429 `TooManyRequests`: a limit on concurrent requests (open watches) is reached; retry
    /// in 1 s, as kube-apiserver's max-in-flight filter answers.
    TooManyRequests(String),
}

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.";
const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

impl ApiError {
    /// 406 for this server, which only encodes `application/json`.
    pub fn not_acceptable() -> Self {
        ApiError::NotAcceptable {
            accepted: vec![super::negotiate::APPLICATION_JSON.to_owned()],
        }
    }

    /// 503 from a standby replica: its resourceVersions are not the leader's, so it answers
    /// nothing a client could mix with the leader's answers. Clients retry; the Service routes
    /// to the leader.
    pub fn not_leader() -> Self {
        ApiError::ServiceUnavailable(
            "this replica is not the leader; another replica serves (retry)".into(),
        )
    }

    /// The HTTP status code (also the `code` field).
    pub fn code(&self) -> u16 {
        match self {
            ApiError::BadRequest(_) => 400,
            ApiError::Unauthorized => 401,
            ApiError::Forbidden(_) => 403,
            ApiError::NotFound { .. }
            | ApiError::NotFoundBecause { .. }
            | ApiError::PathNotFound => 404,
            ApiError::MethodNotAllowed { .. } => 405,
            ApiError::NotAcceptable { .. } => 406,
            ApiError::TooOldResourceVersion { .. }
            | ApiError::Expired(_)
            | ApiError::ContinueExpired { .. } => 410,
            ApiError::ResourceVersionTooLarge { .. } => 504,
            ApiError::Internal(_) => 500,
            ApiError::ServiceUnavailable(_) => 503,
            ApiError::TooManyRequests(_) => 429,
        }
    }

    /// [`ApiError::code`] as an `http::StatusCode`.
    pub fn status_code(&self) -> http::StatusCode {
        http::StatusCode::from_u16(self.code()).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The `metav1.StatusReason`.
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Unauthorized => "Unauthorized",
            ApiError::Forbidden(_) => "Forbidden",
            ApiError::NotFound { .. }
            | ApiError::NotFoundBecause { .. }
            | ApiError::PathNotFound => "NotFound",
            ApiError::MethodNotAllowed { .. } => "MethodNotAllowed",
            ApiError::NotAcceptable { .. } => "NotAcceptable",
            ApiError::TooOldResourceVersion { .. }
            | ApiError::Expired(_)
            | ApiError::ContinueExpired { .. } => "Expired",
            ApiError::ResourceVersionTooLarge { .. } => "Timeout",
            ApiError::Internal(_) => "InternalError",
            ApiError::ServiceUnavailable(_) => "ServiceUnavailable",
            ApiError::TooManyRequests(_) => "TooManyRequests",
        }
    }

    /// The human-readable message (what kubectl prints after `Error from server (...)`).
    pub fn message(&self) -> String {
        match self {
            ApiError::BadRequest(m)
            | ApiError::Expired(m)
            | ApiError::ServiceUnavailable(m)
            | ApiError::TooManyRequests(m) => m.clone(),
            ApiError::Unauthorized => "Unauthorized".to_owned(),
            ApiError::Forbidden(f) => f.message(),
            ApiError::NotFound { resource, name } => {
                format!("{resource} {} not found", go_quote(name))
            }
            ApiError::NotFoundBecause {
                resource,
                name,
                why,
            } => format!("{resource} {} not found: {why}", go_quote(name)),
            ApiError::PathNotFound => "the server could not find the requested resource".to_owned(),
            ApiError::MethodNotAllowed { resource, verb } => format!(
                "{verb} is not supported on resources of kind {}",
                go_quote(&resource.to_string())
            ),
            ApiError::NotAcceptable { accepted } => format!(
                "only the following media types are accepted: {}",
                accepted.join(", ")
            ),
            ApiError::TooOldResourceVersion { requested, oldest } => {
                format!("too old resource version: {requested} ({oldest})")
            }
            ApiError::ContinueExpired { continue_token } => if continue_token.is_some() {
                INCONSISTENT_CONTINUE
            } else {
                CONTINUE_EXPIRED
            }
            .to_owned(),
            ApiError::ResourceVersionTooLarge { requested, current } => {
                format!("Timeout: Too large resource version: {requested}, current: {current}")
            }
            ApiError::Internal(m) => format!("Internal error occurred: {m}"),
        }
    }

    /// Seconds the client should wait before retrying (also sent as `Retry-After`).
    pub fn retry_after_seconds(&self) -> Option<u32> {
        match self {
            ApiError::ResourceVersionTooLarge { .. }
            | ApiError::TooManyRequests(_)
            | ApiError::ServiceUnavailable(_) => Some(1),
            _ => None,
        }
    }

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
            ApiError::Internal(m) => d.causes.push(cause("", m)),
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
    pub fn to_status(&self) -> Value {
        serde_json::to_value(self.status()).unwrap_or(Value::Null)
    }

    /// The `Status` object serialized with kube-apiserver's field order
    /// (`kind, apiVersion, metadata, status, message, reason, details, code`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.status()).unwrap_or_default()
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for ApiError {}

impl From<super::negotiate::NotAcceptable> for ApiError {
    fn from(_: super::negotiate::NotAcceptable) -> Self {
        ApiError::not_acceptable()
    }
}

impl From<crate::apimachinery::selector::SelectorError> for ApiError {
    fn from(e: crate::apimachinery::selector::SelectorError) -> Self {
        ApiError::BadRequest(e.message().to_owned())
    }
}

impl From<super::continue_token::ContinueTokenError> for ApiError {
    fn from(e: super::continue_token::ContinueTokenError) -> Self {
        ApiError::BadRequest(format!("invalid continue token: {e}"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ifo() -> GroupResource {
        GroupResource::new("live.ifo.kubevirt.io", "inflightoperations")
    }

    fn forbidden(namespace: &str, name: &str, reason: &str) -> ApiError {
        ApiError::Forbidden(Box::new(Forbidden {
            user: "bob".into(),
            verb: "list".into(),
            target: ForbiddenTarget::Resource {
                resource: ifo(),
                subresource: String::new(),
                namespace: namespace.into(),
                name: name.into(),
            },
            reason: reason.into(),
        }))
    }

    #[test]
    fn bad_request() {
        let e = ApiError::BadRequest("field label not supported: spec.foo".into());
        assert_eq!(e.code(), 400);
        assert_eq!(
            e.to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"field label not supported: spec.foo","reason":"BadRequest","code":400})
        );
    }

    #[test]
    fn unauthorized() {
        let e = ApiError::Unauthorized;
        assert_eq!(e.code(), 401);
        assert_eq!(
            e.to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"Unauthorized","reason":"Unauthorized","code":401})
        );
    }

    #[test]
    fn forbidden_namespaced_and_cluster() {
        let e = forbidden("ns1", "", "");
        assert_eq!(e.code(), 403);
        assert_eq!(
            e.to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"inflightoperations.live.ifo.kubevirt.io is forbidden: User \"bob\" cannot list resource \"inflightoperations\" in API group \"live.ifo.kubevirt.io\" in the namespace \"ns1\"",
                   "reason":"Forbidden",
                   "details":{"group":"live.ifo.kubevirt.io","kind":"inflightoperations"},
                   "code":403})
        );
        assert_eq!(
            forbidden("", "", "").message(),
            "inflightoperations.live.ifo.kubevirt.io is forbidden: User \"bob\" cannot list resource \"inflightoperations\" in API group \"live.ifo.kubevirt.io\" at the cluster scope"
        );
        let named = forbidden("ns1", "x", "no RBAC policy matched");
        assert_eq!(
            named.message(),
            "inflightoperations.live.ifo.kubevirt.io \"x\" is forbidden: User \"bob\" cannot list resource \"inflightoperations\" in API group \"live.ifo.kubevirt.io\" in the namespace \"ns1\": no RBAC policy matched"
        );
        assert_eq!(
            named.to_status()["details"],
            json!({"name":"x","group":"live.ifo.kubevirt.io","kind":"inflightoperations"})
        );
    }

    #[test]
    fn forbidden_subresource_and_path() {
        let e = ApiError::Forbidden(Box::new(Forbidden {
            user: "system:serviceaccount:a:b".into(),
            verb: "get".into(),
            target: ForbiddenTarget::Resource {
                resource: GroupResource::new("", "pods"),
                subresource: "log".into(),
                namespace: "default".into(),
                name: "p".into(),
            },
            reason: String::new(),
        }));
        assert_eq!(
            e.message(),
            "pods \"p\" is forbidden: User \"system:serviceaccount:a:b\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"default\""
        );
        let e = ApiError::Forbidden(Box::new(Forbidden {
            user: "x".into(),
            verb: "get".into(),
            target: ForbiddenTarget::NonResource {
                path: "/openapi/v2".into(),
            },
            reason: String::new(),
        }));
        assert_eq!(
            e.to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"forbidden: User \"x\" cannot get path \"/openapi/v2\"",
                   "reason":"Forbidden","details":{},"code":403})
        );
        let e = ApiError::Forbidden(Box::new(Forbidden {
            user: "x".into(),
            verb: "get".into(),
            target: ForbiddenTarget::NonResource {
                path: "/<script>&".into(),
            },
            reason: String::new(),
        }));
        assert_eq!(
            e.message(),
            "forbidden: User \"x\" cannot get path \"/&lt;script&gt;&amp;\""
        );
    }

    #[test]
    fn not_found() {
        let e = ApiError::NotFound {
            resource: ifo(),
            name: "x".into(),
        };
        assert_eq!(e.code(), 404);
        assert_eq!(
            e.to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"inflightoperations.live.ifo.kubevirt.io \"x\" not found",
                   "reason":"NotFound",
                   "details":{"name":"x","group":"live.ifo.kubevirt.io","kind":"inflightoperations"},
                   "code":404})
        );
        let core = ApiError::NotFound {
            resource: GroupResource::new("", "pods"),
            name: "p".into(),
        };
        assert_eq!(core.message(), "pods \"p\" not found");
        assert_eq!(
            ApiError::PathNotFound.to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"the server could not find the requested resource",
                   "reason":"NotFound","details":{},"code":404})
        );
    }

    #[test]
    fn method_not_allowed() {
        let e = ApiError::MethodNotAllowed {
            resource: ifo(),
            verb: "create".into(),
        };
        assert_eq!(e.code(), 405);
        assert_eq!(
            e.to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"create is not supported on resources of kind \"inflightoperations.live.ifo.kubevirt.io\"",
                   "reason":"MethodNotAllowed",
                   "details":{"group":"live.ifo.kubevirt.io","kind":"inflightoperations"},
                   "code":405})
        );
    }

    #[test]
    fn not_acceptable() {
        let e = ApiError::from(crate::api::negotiate::NotAcceptable);
        assert_eq!(e.code(), 406);
        assert_eq!(
            e.to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"only the following media types are accepted: application/json",
                   "reason":"NotAcceptable","code":406})
        );
        let e = ApiError::NotAcceptable {
            accepted: vec!["application/json".into(), "application/yaml".into()],
        };
        assert_eq!(
            e.message(),
            "only the following media types are accepted: application/json, application/yaml"
        );
    }

    #[test]
    fn expired() {
        let e = ApiError::TooOldResourceVersion {
            requested: 12,
            oldest: 1500,
        };
        assert_eq!(e.code(), 410);
        assert_eq!(
            e.to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"too old resource version: 12 (1500)","reason":"Expired","code":410})
        );
        assert_eq!(ApiError::Expired("slow".into()).reason(), "Expired");
        let e = ApiError::ContinueExpired {
            continue_token: Some("abc".into()),
        };
        let s = e.to_status();
        assert_eq!(s["code"], 410);
        assert_eq!(s["reason"], "Expired");
        assert_eq!(s["metadata"], json!({"continue":"abc"}));
        assert!(
            s["message"]
                .as_str()
                .unwrap()
                .contains("or use the continue token in this response")
        );
        let e = ApiError::ContinueExpired {
            continue_token: None,
        };
        assert_eq!(e.to_status()["metadata"], json!({}));
        assert!(e.message().ends_with("without the continue parameter."));
    }

    #[test]
    fn too_large_resource_version() {
        let e = ApiError::ResourceVersionTooLarge {
            requested: 105,
            current: 100,
        };
        assert_eq!(e.code(), 504);
        assert_eq!(e.retry_after_seconds(), Some(1));
        assert_eq!(
            e.to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"Timeout: Too large resource version: 105, current: 100",
                   "reason":"Timeout",
                   "details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],
                              "retryAfterSeconds":1},
                   "code":504})
        );
    }

    #[test]
    fn internal_and_unavailable() {
        let e = ApiError::Internal("subjectaccessreviews failed: timeout".into());
        assert_eq!(e.code(), 500);
        assert_eq!(e.retry_after_seconds(), None);
        assert_eq!(
            e.to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"Internal error occurred: subjectaccessreviews failed: timeout",
                   "reason":"InternalError",
                   "details":{"causes":[{"message":"subjectaccessreviews failed: timeout"}]},
                   "code":500})
        );
        let e = ApiError::not_leader();
        assert_eq!(e.code(), 503);
        assert_eq!(e.reason(), "ServiceUnavailable");
        assert_eq!(e.retry_after_seconds(), Some(1));
    }

    #[test]
    fn field_order_and_http_status() {
        let e = ApiError::NotFound {
            resource: ifo(),
            name: "x".into(),
        };
        assert_eq!(
            e.to_json(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"inflightoperations.live.ifo.kubevirt.io \"x\" not found","reason":"NotFound","details":{"name":"x","group":"live.ifo.kubevirt.io","kind":"inflightoperations"},"code":404}"#
        );
        assert_eq!(e.status_code(), http::StatusCode::NOT_FOUND);
        assert_eq!(e.to_string(), e.message());
    }

    #[test]
    fn a_not_found_that_says_why() {
        let e = ApiError::NotFoundBecause {
            resource: GroupResource::new("live.ifo.kubevirt.io", "maintenancegates"),
            name: "node.worker1".into(),
            why: "the cluster has no node worker1".into(),
        };
        assert_eq!(e.code(), 404);
        assert_eq!(
            e.to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"maintenancegates.live.ifo.kubevirt.io \"node.worker1\" not found: the cluster has no node worker1",
                   "reason":"NotFound",
                   "details":{"name":"node.worker1","group":"live.ifo.kubevirt.io","kind":"maintenancegates"},
                   "code":404})
        );
    }

    #[test]
    fn conversions() {
        let sel =
            crate::apimachinery::fields::FieldSelector::parse("spec.foo=1", &["metadata.name"])
                .unwrap_err();
        let e = ApiError::from(sel);
        assert_eq!(e.code(), 400);
        assert_eq!(e.message(), "field label not supported: spec.foo");
        let tok = crate::api::continue_token::ContinueToken::decode("%%%").unwrap_err();
        let e = ApiError::from(tok);
        assert_eq!(e.code(), 400);
        assert!(
            e.message()
                .starts_with("invalid continue token: continue key is not valid")
        );
    }

    #[test]
    fn group_resource_display() {
        assert_eq!(ifo().to_string(), "inflightoperations.live.ifo.kubevirt.io");
        assert_eq!(GroupResource::new("", "pods").to_string(), "pods");
    }
}
