//! Who may use the server: a browser that opened the printed URL. Every request must name this
//! server in its Host header (a DNS-rebound name does not: the page cannot be read through
//! another origin) and carry this run's random token, in the URL once (`/?token=…`, exchanged
//! for a cookie the browser sends to this origin only, never cross-site) and in the cookie after
//! that. Cross-site requests (Origin or Sec-Fetch-Site of another site) are refused too.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

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
pub(super) struct Guard {
    token: String,
    cookie: String,
    /// Host header values that name this server; empty when it listens on every address
    /// (`--accept-remote` with 0.0.0.0 or ::): then the token alone protects it.
    hosts: Vec<String>,
}

impl Guard {
    /// A guard with a fresh random token, for a server listening on `local`.
    pub(super) fn new(local: SocketAddr) -> anyhow::Result<Guard> {
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
        Ok(Guard {
            token,
            // Cookies are not told apart by port: one name per server.
            cookie: format!("ifo-ui-{port}"),
            hosts,
        })
    }

    /// The token, for the printed URL.
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

    fn has_cookie(&self, headers: &HeaderMap) -> bool {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(name, value)| name == self.cookie && self.matches(value))
    }

    /// The token from `/?token=…`, if that is what the query holds.
    fn query_token_ok(&self, query: Option<&str>) -> bool {
        form_urlencoded::parse(query.unwrap_or_default().as_bytes())
            .any(|(k, v)| k == "token" && self.matches(&v))
    }

    /// Compares in time independent of where the first difference is.
    fn matches(&self, candidate: &str) -> bool {
        let (a, b) = (self.token.as_bytes(), candidate.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// The middleware: refuses what does not come from the page, exchanges the URL's token for the
/// cookie, and adds the security headers to every answer.
pub(super) async fn check(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let mut response = if !guard.host_ok(headers) {
        (
            StatusCode::MISDIRECTED_REQUEST,
            "this server answers to localhost and its own address only\n",
        )
            .into_response()
    } else if !guard.same_origin(headers) {
        (StatusCode::FORBIDDEN, "cross-origin requests are refused\n").into_response()
    } else if request.uri().path() == "/" && guard.query_token_ok(request.uri().query()) {
        let mut response = Redirect::to("/").into_response();
        let cookie = format!(
            "{}={}; Path=/; HttpOnly; SameSite=Strict",
            guard.cookie, guard.token
        );
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().insert(header::SET_COOKIE, value);
        }
        response
    } else if guard.has_cookie(headers) {
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
        let guard = Guard::new("127.0.0.1:8001".parse().unwrap()).unwrap();
        assert!(guard.host_ok(&headers(&[("host", "127.0.0.1:8001")])));
        assert!(guard.host_ok(&headers(&[("host", "localhost:8001")])));
        assert!(!guard.host_ok(&headers(&[("host", "evil.example:8001")])));
        assert!(!guard.host_ok(&headers(&[("host", "localhost:8002")])));
        assert!(!guard.host_ok(&headers(&[])));
    }

    #[test]
    fn cross_site_requests_are_refused() {
        let guard = Guard::new("127.0.0.1:8001".parse().unwrap()).unwrap();
        assert!(guard.same_origin(&headers(&[("origin", "http://127.0.0.1:8001")])));
        assert!(!guard.same_origin(&headers(&[("origin", "http://evil.example")])));
        assert!(!guard.same_origin(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(guard.same_origin(&headers(&[("sec-fetch-site", "same-origin")])));
    }

    #[test]
    fn the_token_is_random_and_compared_whole() {
        let a = Guard::new("127.0.0.1:8001".parse().unwrap()).unwrap();
        let b = Guard::new("127.0.0.1:8001".parse().unwrap()).unwrap();
        assert_ne!(a.token(), b.token());
        assert_eq!(a.token().len(), 64);
        assert!(a.matches(a.token()));
        assert!(!a.matches(&a.token()[..63]));
        assert!(!a.matches(b.token()));
        assert!(a.query_token_ok(Some(&format!("token={}", a.token()))));
        assert!(!a.query_token_ok(Some("token=")));
        let cookie = format!("other=1; ifo-ui-8001={}", a.token());
        let mut map = HeaderMap::new();
        map.insert(header::COOKIE, HeaderValue::from_str(&cookie).unwrap());
        assert!(a.has_cookie(&map));
        assert!(!b.has_cookie(&map));
    }
}
