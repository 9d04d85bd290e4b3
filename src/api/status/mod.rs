//! Kubernetes `Status` error bodies (`metav1.Status`), as apimachinery `api/errors` builds them.
//!
//! Clients branch on `reason` and `code` (kube-rs relists on `410 Expired`, client-go retries a
//! `504 Timeout` after `retryAfterSeconds`, kubectl prints `Error from server (<reason>):
//! <message>`), so each error carries the same reason, code, message wording and `details` as
//! kube-apiserver's. The HTTP status of the response must equal [`ApiError::code`], with
//! `Content-Type: application/json`, and a `Retry-After` header when
//! [`ApiError::retry_after_seconds`] is set.

mod body;
mod error;
mod forbidden;
mod group_resource;

pub(crate) use error::ApiError;
pub(crate) use forbidden::{Forbidden, ForbiddenTarget};
pub(crate) use group_resource::GroupResource;

#[cfg(test)]
mod tests;
