//! The OpenAPI handlers: content negotiation, ETags, and the v3 `hash` contract.
//!
//! kube-openapi serves a v3 document whose `hash` matches as immutable (clients may cache it
//! for a year), and redirects a stale `hash` to the current URL. We cannot redirect: the
//! aggregator proxies this document and, by default (`--aggregator-reject-forwarding-redirect`),
//! turns any redirect from an aggregated server into a 502. So a stale or missing `hash` gets
//! the current document without the immutable headers, which is what a client following the
//! redirect would have received.

use crate::api::negotiate::{self, APPLICATION_JSON};
use crate::api::status::ApiError;
use crate::api::{ApiState, document};
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// How long a client may keep a document fetched by its hash: a year, as kube-openapi says.
const IMMUTABLE_FOR: jiff::SignedDuration = jiff::SignedDuration::from_hours(24 * 365);

/// `GET /openapi/v2`. Only JSON exists: a client that accepts only protobuf gets 406 (the
/// aggregator asks for JSON; kubectl asks kube-apiserver, which converts the merged document).
pub(crate) async fn v2_document(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
) -> Response {
    let accept = negotiate::accept_header(&headers);
    if negotiate::negotiate_openapi(accept.as_deref()).is_err() {
        return ApiError::not_acceptable().into_response();
    }
    document(&state.openapi.v2, APPLICATION_JSON, &headers)
}

/// `GET /openapi/v3`: JSON whatever the `Accept` header says, as kube-openapi answers it.
pub(crate) async fn v3_root_document(
    State(state): State<Arc<ApiState>>,
    headers: HeaderMap,
) -> Response {
    document(&state.openapi.v3_root, APPLICATION_JSON, &headers)
}

/// `GET /openapi/v3/apis/live.ifo.kubevirt.io/v1alpha1[?hash=...]`.
pub(crate) async fn v3_group_document(
    State(state): State<Arc<ApiState>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let accept = negotiate::accept_header(&headers);
    if negotiate::negotiate_openapi(accept.as_deref()).is_err() {
        return ApiError::not_acceptable().into_response();
    }
    let openapi = &state.openapi;
    let mut response = document(&openapi.v3_group, APPLICATION_JSON, &headers);
    if requested_hash(query.as_deref()).is_some_and(|h| h == openapi.v3_hash) {
        mark_immutable(response.headers_mut());
    }
    response
}

/// The `hash` query parameter, if any (the first one, as Go's `Query().Get`).
fn requested_hash(query: Option<&str>) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes())
        .find(|(key, _)| key == "hash")
        .map(|(_, value)| value.into_owned())
}

fn mark_immutable(headers: &mut HeaderMap) {
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, immutable"),
    );
    let expires = jiff::Timestamp::now()
        .checked_add(IMMUTABLE_FOR)
        .ok()
        .and_then(|t| {
            jiff::fmt::rfc2822::DateTimePrinter::new()
                .timestamp_to_rfc9110_string(&t)
                .ok()
        })
        .and_then(|date| HeaderValue::from_str(&date).ok());
    if let Some(expires) = expires {
        headers.insert(header::EXPIRES, expires);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    async fn get(path: &str, headers: &[(header::HeaderName, &str)]) -> Response {
        let index = crate::index::Index::new(1, 16, 16).into_handles();
        let (readiness, pending) = crate::readiness::Readiness::new("test");
        pending.done();
        let app = crate::api::router(Arc::new(ApiState::new(
            index.reader.clone(),
            readiness,
            Default::default(),
        )));
        let mut request = Request::get(path);
        for (name, value) in headers {
            request = request.header(name, *value);
        }
        app.oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap()
    }

    async fn json(response: Response) -> serde_json::Value {
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        serde_json::from_slice(&body).unwrap()
    }

    #[tokio::test]
    async fn v2_answers_json_with_an_etag_and_revalidates() {
        let response = get("/openapi/v2", &[(header::ACCEPT, "application/json")]).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
        let etag = response.headers()[header::ETAG]
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(json(response).await["swagger"], "2.0");

        let again = get("/openapi/v2", &[(header::IF_NONE_MATCH, &etag)]).await;
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        let stale = get("/openapi/v2", &[(header::IF_NONE_MATCH, "\"old\"")]).await;
        assert_eq!(stale.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn protobuf_only_clients_get_406() {
        let proto = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
        let response = get("/openapi/v2", &[(header::ACCEPT, proto)]).await;
        assert_eq!(response.status(), StatusCode::NOT_ACCEPTABLE);
        assert_eq!(json(response).await["reason"], "NotAcceptable");
        let proto = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf";
        let path = "/openapi/v3/apis/live.ifo.kubevirt.io/v1alpha1";
        let response = get(path, &[(header::ACCEPT, proto)]).await;
        assert_eq!(response.status(), StatusCode::NOT_ACCEPTABLE);
    }

    #[tokio::test]
    async fn v3_is_immutable_only_at_its_current_hash() {
        let root = json(get("/openapi/v3", &[]).await).await;
        let url = root["paths"]["apis/live.ifo.kubevirt.io/v1alpha1"]["serverRelativeURL"]
            .as_str()
            .unwrap()
            .to_owned();
        let hash = url.split_once("?hash=").unwrap().1.to_owned();

        let current = get(&url, &[]).await;
        assert_eq!(current.status(), StatusCode::OK);
        assert_eq!(
            current.headers()[header::CACHE_CONTROL],
            "public, immutable"
        );
        assert!(current.headers().contains_key(header::EXPIRES));
        assert_eq!(current.headers()[header::ETAG], format!("\"{hash}\""));
        assert_eq!(json(current).await["openapi"], "3.0.0");

        let etag = format!("\"{hash}\"");
        let revalidated = get(&url, &[(header::IF_NONE_MATCH, &etag)]).await;
        assert_eq!(revalidated.status(), StatusCode::NOT_MODIFIED);

        let path = "/openapi/v3/apis/live.ifo.kubevirt.io/v1alpha1";
        for stale in [format!("{path}?hash=0000"), path.to_owned()] {
            let response = get(&stale, &[]).await;
            assert_eq!(response.status(), StatusCode::OK, "{stale}");
            assert!(!response.headers().contains_key(header::CACHE_CONTROL));
            assert!(!response.headers().contains_key(header::EXPIRES));
        }
        let other = get("/openapi/v3/apis/apps/v1", &[]).await;
        assert_eq!(other.status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn hash_is_read_from_the_query() {
        assert_eq!(requested_hash(Some("hash=AB12")), Some("AB12".into()));
        assert_eq!(
            requested_hash(Some("x=1&hash=AB&hash=CD")),
            Some("AB".into())
        );
        assert_eq!(requested_hash(Some("x=1")), None);
        assert_eq!(requested_hash(None), None);
    }

    #[test]
    fn immutable_headers_carry_an_http_date() {
        let mut headers = HeaderMap::new();
        mark_immutable(&mut headers);
        assert_eq!(headers[header::CACHE_CONTROL], "public, immutable");
        let expires = headers[header::EXPIRES].to_str().unwrap();
        assert!(expires.ends_with(" GMT"), "{expires}");
    }
}
