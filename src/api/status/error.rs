//! The errors the API answers with, and what kube-apiserver says of each: its code, reason and
//! message, and when to retry.

use std::fmt;
use std::sync::Arc;

use super::{Forbidden, GroupResource};
use ifo_apimachinery::goquote::go_quote;

/// An error the API answers with a `Status` body.
#[derive(Debug, Clone)]
pub(crate) enum ApiError {
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
    /// 500 `InternalError`, e.g. the authorizer (SubjectAccessReview) failed: the error, kept
    /// as the cause (its message is the answer's).
    Internal(Arc<dyn std::error::Error + Send + Sync>),
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
    /// 500 for `cause`: an error, or a message saying what failed.
    pub(crate) fn internal(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        ApiError::Internal(Arc::from(cause.into()))
    }

    /// 406 for this server, which only encodes `application/json`.
    pub(crate) fn not_acceptable() -> Self {
        ApiError::NotAcceptable {
            accepted: vec![crate::api::negotiate::APPLICATION_JSON.to_owned()],
        }
    }

    /// 503 from a standby replica: its resourceVersions are not the leader's, so it answers
    /// nothing a client could mix with the leader's answers. Clients retry; the Service routes
    /// to the leader.
    pub(crate) fn not_leader() -> Self {
        ApiError::ServiceUnavailable(
            "this replica is not the leader; another replica serves (retry)".into(),
        )
    }

    /// The HTTP status code (also the `code` field).
    pub(crate) fn code(&self) -> u16 {
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
    pub(crate) fn status_code(&self) -> http::StatusCode {
        http::StatusCode::from_u16(self.code()).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The `metav1.StatusReason`.
    pub(crate) fn reason(&self) -> &'static str {
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
    pub(crate) fn message(&self) -> String {
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
            ApiError::Internal(cause) => format!("Internal error occurred: {cause}"),
        }
    }

    /// Seconds the client should wait before retrying (also sent as `Retry-After`).
    pub(crate) fn retry_after_seconds(&self) -> Option<u32> {
        match self {
            ApiError::ResourceVersionTooLarge { .. }
            | ApiError::TooManyRequests(_)
            | ApiError::ServiceUnavailable(_) => Some(1),
            _ => None,
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for ApiError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ApiError::Internal(cause) => Some(&**cause),
            _ => None,
        }
    }
}

impl From<crate::api::negotiate::NotAcceptable> for ApiError {
    fn from(_: crate::api::negotiate::NotAcceptable) -> Self {
        ApiError::not_acceptable()
    }
}

impl From<ifo_apimachinery::selector::SelectorError> for ApiError {
    fn from(e: ifo_apimachinery::selector::SelectorError) -> Self {
        ApiError::BadRequest(e.message().to_owned())
    }
}

impl From<crate::api::continue_token::ContinueTokenError> for ApiError {
    fn from(e: crate::api::continue_token::ContinueTokenError) -> Self {
        ApiError::BadRequest(format!("invalid continue token: {e}"))
    }
}
