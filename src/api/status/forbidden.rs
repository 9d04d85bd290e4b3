//! An authorization denial, and the message kube-apiserver's authorization filter words it with.

use super::GroupResource;
use ifo_apimachinery::goquote::go_quote;

/// What a denied request tried to reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ForbiddenTarget {
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
pub(crate) struct Forbidden {
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
    pub(super) fn message(&self) -> String {
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

    pub(super) fn group_resource_and_name(&self) -> (GroupResource, &str) {
        match &self.target {
            ForbiddenTarget::Resource { resource, name, .. } => (resource.clone(), name),
            ForbiddenTarget::NonResource { .. } => (GroupResource::default(), ""),
        }
    }
}
