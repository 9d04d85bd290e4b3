//! Who may use the server: the page a browser opened from the printed URL. Every request must
//! name this server in its Host header (a DNS-rebound name does not: the page cannot be read
//! through another origin), and cross-site requests (Origin or Sec-Fetch-Site of another site)
//! are refused. The page itself (`/`, its script and style sheet) is served to anyone who passes
//! those checks; everything else (`/config.json`, the API under `/k8s/`) needs this run's random
//! token in the [`TOKEN_HEADER`] request header.
//!
//! The token never travels in a cookie: cookies are not told apart by port, so a browser sends a
//! cookie of `127.0.0.1:8001` to every other service on 127.0.0.1 too, which could replay it.
//! The printed URL carries it in its fragment (`/#token=…`), which browsers never send to any
//! server; the page takes it from there, removes it from the address bar and keeps it in this
//! origin's `sessionStorage` (per scheme, host *and* port, per tab), and sends it as the header,
//! which no other origin can add to a request here: a custom header needs a CORS preflight, and
//! this server answers none.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The request header that carries the token.
pub(super) const TOKEN_HEADER: &str = "x-ifo-ui-token";

/// What is served without the token: the page, which holds nothing of the cluster's.
const PUBLIC: [&str; 3] = ["/", "/app.js", "/app.css"];

/// Headers every answer carries: the page may load from this origin only, never in a frame.
const SECURITY_HEADERS: [(&str, &str); 5] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
         img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-store"),
];

/// The token and the names this server answers to.
#[derive(Debug)]
pub(super) struct PageAccess {
    token: String,
    /// Host header values that name this server; empty when it listens on every address
    /// (`--accept-remote` with 0.0.0.0 or ::): then the token alone protects it.
    hosts: Vec<String>,
}

impl PageAccess {
    /// Access control with a fresh random token, for a server listening on `local`.
    pub(super) fn new(local: SocketAddr) -> anyhow::Result<PageAccess> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|e| anyhow::anyhow!("no random numbers for the access token: {e}"))?;
        let token = bytes.iter().fold(String::with_capacity(64), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        });
        let port = local.port();
        let hosts = if local.ip().is_unspecified() {
            Vec::new()
        } else {
            let mut hosts = vec![
                format!("localhost:{port}"),
                format!("127.0.0.1:{port}"),
                format!("[::1]:{port}"),
            ];
            let own = local.to_string();
            if !hosts.contains(&own) {
                hosts.push(own);
            }
            hosts
        };
        Ok(PageAccess { token, hosts })
    }

    /// The token, for the printed URL's fragment.
    pub(super) fn token(&self) -> &str {
        &self.token
    }

    fn host_ok(&self, headers: &HeaderMap) -> bool {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        match host {
            Some(host) => self.hosts.is_empty() || self.hosts.iter().any(|h| h == host),
            None => false,
        }
    }

    /// No request from another site: a present Origin must be this server, a present
    /// Sec-Fetch-Site must be same-origin or none (typed into the address bar).
    fn same_origin(&self, headers: &HeaderMap) -> bool {
        let origin_ok = match headers.get(header::ORIGIN).map(HeaderValue::to_str) {
            None => true,
            Some(Ok(origin)) => origin.strip_prefix("http://").is_some_and(|host| {
                self.hosts.is_empty()
                    || self.hosts.iter().any(|h| h == host)
                    || headers.get(header::HOST).and_then(|h| h.to_str().ok()) == Some(host)
            }),
            Some(Err(_)) => false,
        };
        let site_ok = match headers.get("sec-fetch-site").map(HeaderValue::to_str) {
            None => true,
            Some(Ok(site)) => matches!(site, "same-origin" | "none"),
            Some(Err(_)) => false,
        };
        origin_ok && site_ok
    }

    /// Whether the request carries the token in [`TOKEN_HEADER`] (once: two values are refused).
    fn has_token(&self, headers: &HeaderMap) -> bool {
        let mut values = headers.get_all(TOKEN_HEADER).iter();
        match (values.next(), values.next()) {
            (Some(value), None) => value.to_str().is_ok_and(|v| self.matches(v)),
            _ => false,
        }
    }

    /// Compares in time independent of where the first difference is.
    fn matches(&self, candidate: &str) -> bool {
        let (a, b) = (self.token.as_bytes(), candidate.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// The middleware: refuses what does not come from the page (another host name, another
/// site, no token where one is needed), and adds the security headers to every answer.
pub(super) async fn check(
    State(access): State<Arc<PageAccess>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let public = PUBLIC.contains(&request.uri().path());
    let mut response = if !access.host_ok(headers) {
        (
            StatusCode::MISDIRECTED_REQUEST,
            "this server answers to localhost and its own address only\n",
        )
            .into_response()
    } else if !access.same_origin(headers) {
        (StatusCode::FORBIDDEN, "cross-origin requests are refused\n").into_response()
    } else if public || access.has_token(headers) {
        next.run(request).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            "open the URL `kubectl ifo ui` printed: it holds this run's access token\n",
        )
            .into_response()
    };
    for (name, value) in SECURITY_HEADERS {
        response
            .headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, HeaderValue::from_static(v));
        }
        map
    }

    #[test]
    fn only_this_servers_names_are_accepted() {
        let access = PageAccess::new("127.0.0.1:8001".parse().unwrap()).unwrap();
        assert!(access.host_ok(&headers(&[("host", "127.0.0.1:8001")])));
        assert!(access.host_ok(&headers(&[("host", "localhost:8001")])));
        assert!(!access.host_ok(&headers(&[("host", "evil.example:8001")])));
        assert!(!access.host_ok(&headers(&[("host", "localhost:8002")])));
        assert!(!access.host_ok(&headers(&[])));
    }

    #[test]
    fn cross_site_requests_are_refused() {
        let access = PageAccess::new("127.0.0.1:8001".parse().unwrap()).unwrap();
        assert!(access.same_origin(&headers(&[("origin", "http://127.0.0.1:8001")])));
        assert!(!access.same_origin(&headers(&[("origin", "http://evil.example")])));
        assert!(!access.same_origin(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(access.same_origin(&headers(&[("sec-fetch-site", "same-origin")])));
    }

    #[test]
    fn the_token_is_random_and_compared_whole() {
        let a = PageAccess::new("127.0.0.1:8001".parse().unwrap()).unwrap();
        let b = PageAccess::new("127.0.0.1:8001".parse().unwrap()).unwrap();
        assert_ne!(a.token(), b.token());
        assert_eq!(a.token().len(), 64);
        assert!(a.matches(a.token()));
        assert!(!a.matches(&a.token()[..63]));
        assert!(!a.matches(b.token()));
        let with = |token: &str| {
            let mut map = HeaderMap::new();
            map.insert(TOKEN_HEADER, HeaderValue::from_str(token).unwrap());
            map
        };
        assert!(a.has_token(&with(a.token())));
        assert!(!b.has_token(&with(a.token())));
        assert!(!a.has_token(&with("")));
        assert!(!a.has_token(&HeaderMap::new()));
        // Twice is refused, even with the right one among them.
        let mut twice = with(b.token());
        twice.append(TOKEN_HEADER, HeaderValue::from_str(a.token()).unwrap());
        assert!(!a.has_token(&twice));
        // Not in a cookie, nor in the query: the header only.
        let cookie = format!("ifo-ui-8001={}", a.token());
        let mut map = HeaderMap::new();
        map.insert(header::COOKIE, HeaderValue::from_str(&cookie).unwrap());
        assert!(!a.has_token(&map));
    }

    /// The middleware in front of a stand-in of the server's routes.
    async fn answer(access: &Arc<PageAccess>, path: &str, extra: &[(&str, &str)]) -> Response {
        use axum::routing::get;
        use tower::ServiceExt as _;
        let app = axum::Router::new()
            .route("/", get(|| async { "the page" }))
            .route("/config.json", get(|| async { "{}" }))
            .route("/k8s/{*path}", get(|| async { "the cluster's data" }))
            .layer(axum::middleware::from_fn_with_state(access.clone(), check));
        let mut request = axum::http::Request::get(path);
        if !extra.iter().any(|(k, _)| *k == "host") {
            request = request.header("host", "127.0.0.1:8001");
        }
        for (k, v) in extra {
            request = request.header(*k, *v);
        }
        app.oneshot(request.body(axum::body::Body::empty()).unwrap())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn the_api_needs_the_token_header_and_no_cookie_is_ever_set() {
        let access = Arc::new(PageAccess::new("127.0.0.1:8001".parse().unwrap()).unwrap());
        let token = access.token().to_owned();
        let api = "/k8s/apis/live.ifo.kubevirt.io/v1alpha1/maintenancegates";
        let cookie = format!("ifo-ui-8001={token}");
        let api_with_query = format!("{api}?token={token}");
        let page_with_query = format!("/?token={token}");
        type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, StatusCode);
        let cases: Vec<Case> = vec![
            // The page itself needs nothing.
            ("/", vec![], StatusCode::OK),
            // The API and the page's configuration need the header.
            (api, vec![], StatusCode::UNAUTHORIZED),
            ("/config.json", vec![], StatusCode::UNAUTHORIZED),
            (api, vec![("cookie", &cookie)], StatusCode::UNAUTHORIZED),
            (&api_with_query, vec![], StatusCode::UNAUTHORIZED),
            (api, vec![(TOKEN_HEADER, "0")], StatusCode::UNAUTHORIZED),
            (api, vec![(TOKEN_HEADER, &token)], StatusCode::OK),
            ("/config.json", vec![(TOKEN_HEADER, &token)], StatusCode::OK),
            // The URL's old form exchanges nothing.
            (&page_with_query, vec![], StatusCode::OK),
            // With the token still: not from another site, nor a rebound name.
            (
                api,
                vec![(TOKEN_HEADER, &token), ("origin", "http://127.0.0.1:9999")],
                StatusCode::FORBIDDEN,
            ),
            (
                api,
                vec![(TOKEN_HEADER, &token), ("sec-fetch-site", "same-site")],
                StatusCode::FORBIDDEN,
            ),
            (
                "/",
                vec![("host", "rebound.example:8001")],
                StatusCode::MISDIRECTED_REQUEST,
            ),
        ];
        for (path, extra, want) in cases {
            let response = answer(&access, path, &extra).await;
            assert_eq!(response.status(), want, "{path} {extra:?}");
            assert!(
                response.headers().get(header::SET_COOKIE).is_none(),
                "{path} sets a cookie"
            );
            assert!(
                response
                    .headers()
                    .keys()
                    .all(|k| !k.as_str().starts_with("access-control-")),
                "{path} answers with CORS headers"
            );
            assert!(response.headers().contains_key("content-security-policy"));
        }
    }
}
