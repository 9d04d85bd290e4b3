//! The middleware that puts `auth` in front of every route of `api`: it reads the request once
//! ([`RequestInfo`]), authenticates the caller, authorizes what the request asks for, answers a
//! refusal as a Kubernetes `Status`, and hands the handlers the user and that same reading.
//! The only module that knows both `auth` and `api`, which know nothing of each other.

use crate::api::status::{ApiError, Forbidden, ForbiddenTarget, GroupResource};
use crate::auth::PeerCertificates;
use crate::auth::{Attributes, AuthError, Authenticator, Authorization, Authorizer};
use axum::Extension;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ifo_apimachinery::RequestInfo;
use std::sync::Arc;

/// Who may call the API, and what for: the authenticator and the authorizer every request goes
/// through.
pub(crate) struct AccessControl {
    pub authenticator: Authenticator,
    pub authorizer: Authorizer,
}

fn forbidden(user: &str, attrs: &Attributes, reason: String) -> ApiError {
    let (verb, target) = match attrs {
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            namespace,
            name,
            ..
        } => (
            verb.clone(),
            ForbiddenTarget::Resource {
                resource: GroupResource::new(group.clone(), resource.clone()),
                subresource: subresource.clone().unwrap_or_default(),
                namespace: namespace.clone().unwrap_or_default(),
                name: name.clone().unwrap_or_default(),
            },
        ),
        Attributes::NonResource { verb, path } => (
            verb.clone(),
            ForbiddenTarget::NonResource { path: path.clone() },
        ),
    };
    ApiError::Forbidden(Box::new(Forbidden {
        user: user.to_string(),
        verb,
        target,
        reason,
    }))
}

/// Reads the request once ([`RequestInfo`]), authenticates the caller, authorizes what the
/// request asks for, and hands the handlers both the user and that same [`RequestInfo`].
///
/// Every request is counted and timed (`ifo_api_requests_total`), refusals included.
pub(crate) async fn control(
    State(access): State<Arc<AccessControl>>,
    peer: Option<Extension<PeerCertificates>>,
    req: Request,
    next: Next,
) -> Response {
    let timer = crate::metrics::RequestTimer::start();
    let info = RequestInfo::parse(req.method(), req.uri().path(), req.uri().query());
    let labels = crate::metrics::request_labels(
        info.as_ref().ok(),
        req.method(),
        crate::api::served::plural,
    );
    let response = match info {
        Ok(info) => authorize_and_run(&access, peer, Arc::new(info), req, next).await,
        Err(e) => ApiError::BadRequest(e.to_string()).into_response(),
    };
    timer.finish(labels, response.status());
    response
}

async fn authorize_and_run(
    access: &AccessControl,
    peer: Option<Extension<PeerCertificates>>,
    info: Arc<RequestInfo>,
    mut req: Request,
    next: Next,
) -> Response {
    let peer = peer.map(|Extension(p)| p).unwrap_or_default();
    let user = match access
        .authenticator
        .authenticate(req.headers_mut(), &peer)
        .await
    {
        Ok(user) => user,
        Err(AuthError::Unauthorized) => return ApiError::Unauthorized.into_response(),
        Err(e @ AuthError::TokenReview(_)) => {
            tracing::error!(error = %e, "authentication failed");
            return ApiError::internal(e).into_response();
        }
    };
    let attrs = Attributes::of(&info);
    match access.authorizer.authorize(&user, &attrs).await {
        Ok(Authorization::Allow) => {}
        Ok(Authorization::Deny(reason)) => {
            tracing::debug!(user = %user.name, ?attrs, "forbidden");
            return forbidden(&user.name, &attrs, reason).into_response();
        }
        Err(e) => {
            tracing::error!(user = %user.name, ?attrs, error = %e, "authorization failed");
            return ApiError::internal(e).into_response();
        }
    }
    req.extensions_mut().insert(user);
    req.extensions_mut().insert(info);
    next.run(req).await
}

#[cfg(test)]
mod properties;
