//! The middleware that puts authentication and authorization in front of every API route.

use super::tls::PeerCertificates;
use super::{Attributes, AuthError, Authenticator, Authorizer, Decision};
use crate::api::status_response;
use axum::Extension;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;

pub struct Guard {
    pub authenticator: Authenticator,
    pub authorizer: Authorizer,
}

fn forbidden_message(user: &str, attrs: &Attributes, reason: &str) -> String {
    let base = match attrs {
        Attributes::Resource {
            verb,
            group,
            resource,
            namespace,
            name,
            ..
        } => {
            let scope = match namespace {
                Some(ns) => format!("in the namespace \"{ns}\""),
                None => "at the cluster scope".to_string(),
            };
            let target = match name {
                Some(n) => format!("{resource}.{group} \"{n}\""),
                None => format!("{resource}.{group}"),
            };
            format!(
                "{target} is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{group}\" {scope}"
            )
        }
        Attributes::NonResource { verb, path } => {
            format!("forbidden: User \"{user}\" cannot {verb} path \"{path}\"")
        }
    };
    if reason.is_empty() {
        base
    } else {
        format!("{base}: {reason}")
    }
}

pub async fn guard(
    State(guard): State<Arc<Guard>>,
    peer: Option<Extension<PeerCertificates>>,
    mut req: Request,
    next: Next,
) -> Response {
    let peer = peer.map(|Extension(p)| p).unwrap_or_default();
    let user = match guard
        .authenticator
        .authenticate(req.headers_mut(), &peer)
        .await
    {
        Ok(user) => user,
        Err(AuthError::Unauthorized) => {
            return status_response(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
        }
        Err(e @ AuthError::Internal(_)) => {
            tracing::error!(error = %e, "authentication failed");
            return status_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                &e.to_string(),
            );
        }
    };
    let attrs = Attributes::from_request(req.method(), req.uri().path(), req.uri().query());
    match guard.authorizer.authorize(&user, &attrs).await {
        Ok(Decision::Allow) => {}
        Ok(Decision::Deny(reason)) => {
            tracing::debug!(user = %user.name, ?attrs, "forbidden");
            return status_response(
                StatusCode::FORBIDDEN,
                "Forbidden",
                &forbidden_message(&user.name, &attrs, &reason),
            );
        }
        Err(e) => {
            tracing::error!(user = %user.name, ?attrs, error = %e, "authorization failed");
            return status_response(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", &e);
        }
    }
    req.extensions_mut().insert(user);
    next.run(req).await
}
