//! Forwards the page's reads of the live API to kube-apiserver, as the user. Nothing else goes
//! through: the path must be a list, get or watch of the live group's three resources, the
//! query keeps only the list and watch parameters, the only method is GET and the answer is
//! JSON. Each request is parsed once (`Target::parse`) and the forwarded request is built from
//! that parse alone. A watch is what kube-apiserver reads as one (apimachinery's `RequestInfo`,
//! `watch=True` and `watch=yes` included): it is forwarded as `watch=true` and ends within
//! [`MAX_WATCH_SECONDS`].

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::Method;
use http_body_util::BodyExt;
use ifo_apimachinery::RequestInfo;
use kube::Client;
use thiserror::Error;
use tokio::sync::Semaphore;

use crate::op::{CLUSTER_PLURAL, GROUP, NAMESPACED_PLURAL, VERSION};

/// The resources the page reads.
const RESOURCES: [&str; 3] = [NAMESPACED_PLURAL, CLUSTER_PLURAL, "maintenancegates"];

/// Query parameters of a list or watch; any other is dropped.
const PARAMETERS: [&str; 9] = [
    "watch",
    "resourceVersion",
    "resourceVersionMatch",
    "allowWatchBookmarks",
    "timeoutSeconds",
    "labelSelector",
    "fieldSelector",
    "limit",
    "continue",
];

/// Requests forwarded at once (a page holds up to fifteen watches open: the operations', the
/// gate list's, and up to twelve of gates by name).
const MAX_IN_FLIGHT: usize = 64;
/// How long kube-apiserver may take to answer (a watch: to start).
const DEADLINE: Duration = Duration::from_secs(30);
/// The longest watch: the page resumes from its last resourceVersion after it.
const MAX_WATCH_SECONDS: u64 = 300;

/// Why a request is not forwarded.
#[derive(Debug, Error, PartialEq, Eq)]
pub(super) enum Refused {
    /// The path is not a read of the live API's resources.
    #[error("only lists, gets and watches of {GROUP}/{VERSION} operations and gates are forwarded")]
    Path,
    /// A query parameter value is too long or not a number where one is needed.
    #[error("query parameter {0} is not valid")]
    Parameter(&'static str),
}

/// A request the page may make: one resource of the live group, in a namespace or not, one
/// object or the collection, with the list and watch parameters.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Target {
    namespace: Option<String>,
    resource: &'static str,
    name: Option<String>,
    query: Vec<(&'static str, String)>,
}

/// A DNS subdomain (RFC 1123), as namespace and object names are: no `..`, no empty label.
fn dns_name(s: &str) -> bool {
    let label = |l: &str| {
        let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        let bytes = l.as_bytes();
        bytes.first().is_some_and(|b| alnum(*b))
            && bytes.last().is_some_and(|b| alnum(*b))
            && bytes.iter().all(|b| alnum(*b) || *b == b'-')
    };
    s.len() <= 253 && s.split('.').all(label)
}

impl Target {
    /// Parses `path` (after `/k8s/`) and the raw query.
    pub(super) fn parse(path: &str, query: Option<&str>) -> Result<Target, Refused> {
        let prefix = format!("apis/{GROUP}/{VERSION}/");
        let rest = path.strip_prefix(&prefix).ok_or(Refused::Path)?;
        let parts: Vec<&str> = rest.split('/').collect();
        let (namespace, resource, name) = match parts.as_slice() {
            ["namespaces", ns, r] => (Some(*ns), *r, None),
            ["namespaces", ns, r, n] => (Some(*ns), *r, Some(*n)),
            [r] => (None, *r, None),
            [r, n] => (None, *r, Some(*n)),
            _ => return Err(Refused::Path),
        };
        let resource = RESOURCES
            .into_iter()
            .find(|r| *r == resource)
            .ok_or(Refused::Path)?;
        if namespace.is_some() && resource != NAMESPACED_PLURAL
            || !namespace.is_none_or(dns_name)
            || !name.is_none_or(dns_name)
        {
            return Err(Refused::Path);
        }
        let mut params = Vec::new();
        for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            let Some(key) = PARAMETERS.into_iter().find(|p| *p == key) else {
                continue;
            };
            if value.len() > 1024 || params.iter().any(|(k, _)| *k == key) {
                return Err(Refused::Parameter(key));
            }
            params.push((key, value.into_owned()));
        }
        let mut target = Target {
            namespace: namespace.map(str::to_owned),
            resource,
            name: name.map(str::to_owned),
            query: Vec::new(),
        };
        // A watch is what kube-apiserver reads as one (`watch=1`, `=True`, `=yes`, `=`, a bare
        // `watch`…, on a collection only): its own reading, not a spelling of ours. The forwarded
        // query then says `watch=true` for a watch and nothing for anything else, so what is
        // capped and what is served cannot differ. (The path is built from DNS names: reading it
        // cannot fail, and would refuse the request if it did.)
        let watching = RequestInfo::parse(&Method::GET, &target.path(), query)
            .map_err(|_| Refused::Path)?
            .verb
            == "watch";
        params.retain(|(k, _)| *k != "watch");
        if watching {
            params.insert(0, ("watch", "true".to_owned()));
            // Every watch ends: at most MAX_WATCH_SECONDS.
            let asked = params.iter().find(|(k, _)| *k == "timeoutSeconds");
            let seconds = match asked {
                Some((_, v)) => v
                    .parse::<u64>()
                    .map_err(|_| Refused::Parameter("timeoutSeconds"))?
                    .min(MAX_WATCH_SECONDS),
                None => MAX_WATCH_SECONDS,
            };
            params.retain(|(k, _)| *k != "timeoutSeconds");
            params.push(("timeoutSeconds", seconds.to_string()));
        }
        target.query = params;
        Ok(target)
    }

    /// Whether kube-apiserver serves this request as a watch.
    #[cfg(test)]
    fn watching(&self) -> bool {
        self.query.first().is_some_and(|(k, _)| *k == "watch")
    }

    /// The path to send to kube-apiserver.
    fn path(&self) -> String {
        let mut uri = format!("/apis/{GROUP}/{VERSION}/");
        if let Some(ns) = &self.namespace {
            uri.push_str("namespaces/");
            uri.push_str(ns);
            uri.push('/');
        }
        uri.push_str(self.resource);
        if let Some(name) = &self.name {
            uri.push('/');
            uri.push_str(name);
        }
        uri
    }

    /// The path and query to send to kube-apiserver.
    fn uri(&self) -> String {
        let mut uri = self.path();
        if !self.query.is_empty() {
            let mut query = form_urlencoded::Serializer::new(String::new());
            for (k, v) in &self.query {
                query.append_pair(k, v);
            }
            uri.push('?');
            uri.push_str(&query.finish());
        }
        uri
    }
}

/// The client and the bound on requests in flight.
pub(super) struct Proxy {
    client: Client,
    in_flight: Arc<Semaphore>,
}

impl Proxy {
    pub(super) fn new(client: Client) -> Proxy {
        Proxy {
            client,
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
        }
    }
}

fn plain(status: StatusCode, text: String) -> Response {
    (status, text + "\n").into_response()
}

/// The handler of `/k8s/{*path}`.
pub(super) async fn forward(
    State(proxy): State<Arc<Proxy>>,
    Path(path): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let target = match Target::parse(&path, query.as_deref()) {
        Ok(t) => t,
        Err(e) => return plain(StatusCode::FORBIDDEN, e.to_string()),
    };
    let Ok(permit) = proxy.in_flight.clone().try_acquire_owned() else {
        return plain(
            StatusCode::TOO_MANY_REQUESTS,
            "too many requests in flight".into(),
        );
    };
    let request = http::Request::builder()
        .uri(target.uri())
        .header(header::ACCEPT, "application/json")
        .body(kube::client::Body::empty());
    let request = match request {
        Ok(r) => r,
        Err(e) => return plain(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let answer = match tokio::time::timeout(DEADLINE, proxy.client.send(request)).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => return plain(StatusCode::BAD_GATEWAY, format!("kube-apiserver: {e}")),
        Err(_) => {
            return plain(
                StatusCode::GATEWAY_TIMEOUT,
                format!("kube-apiserver did not answer within {DEADLINE:?}"),
            );
        }
    };
    let (parts, body) = answer.into_parts();
    // The permit is held until the body (a watch: its stream) ends.
    let stream = body.into_data_stream().map(move |chunk| {
        let _held = &permit;
        chunk
    });
    let mut response = Response::new(Body::from_stream(stream));
    *response.status_mut() = parts.status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for warning in parts.headers.get_all(header::WARNING) {
        headers.append(header::WARNING, warning.clone());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(path: &str, query: Option<&str>) -> Result<String, Refused> {
        Target::parse(path, query).map(|t| t.uri())
    }

    #[test]
    fn reads_of_the_live_api_are_forwarded() {
        assert_eq!(
            uri(
                "apis/live.ifo.kubevirt.io/v1alpha1/inflightoperations",
                None
            )
            .unwrap(),
            "/apis/live.ifo.kubevirt.io/v1alpha1/inflightoperations"
        );
        assert_eq!(
            uri(
                "apis/live.ifo.kubevirt.io/v1alpha1/namespaces/ns-1/inflightoperations",
                Some("watch=1&resourceVersion=12&allowWatchBookmarks=true&timeoutSeconds=60")
            )
            .unwrap(),
            "/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/ns-1/inflightoperations?watch=true&resourceVersion=12&allowWatchBookmarks=true&timeoutSeconds=60"
        );
        assert_eq!(
            uri(
                "apis/live.ifo.kubevirt.io/v1alpha1/maintenancegates/node.worker-1",
                Some("pretty=true&dryRun=All")
            )
            .unwrap(),
            "/apis/live.ifo.kubevirt.io/v1alpha1/maintenancegates/node.worker-1"
        );
        // A watch always ends.
        assert_eq!(
            uri(
                "apis/live.ifo.kubevirt.io/v1alpha1/maintenancegates",
                Some("watch=true&timeoutSeconds=99999")
            )
            .unwrap(),
            "/apis/live.ifo.kubevirt.io/v1alpha1/maintenancegates?watch=true&timeoutSeconds=300"
        );
    }

    /// Every spelling kube-apiserver reads as a watch is one here too, and capped: the proxy
    /// asks apimachinery's reading (`watch=True` once held a watch open for as long as asked).
    #[test]
    fn every_spelling_of_a_watch_is_capped() {
        let gates = "apis/live.ifo.kubevirt.io/v1alpha1/maintenancegates";
        let capped = format!("/{gates}?watch=true&timeoutSeconds=300");
        for query in [
            "watch=1&timeoutSeconds=99999",
            "watch=true&timeoutSeconds=99999",
            "watch=True&timeoutSeconds=99999",
            "watch=TRUE&timeoutSeconds=99999",
            "watch=yes&timeoutSeconds=99999",
            "watch=&timeoutSeconds=99999",
            "watch&timeoutSeconds=99999",
            "timeoutSeconds=99999&watch=%54rue",
            "watch=1",
            "watch=True",
        ] {
            let target = Target::parse(gates, Some(query)).unwrap();
            assert!(target.watching(), "{query}");
            assert_eq!(target.uri(), capped, "{query}");
        }
        // What kube-apiserver reads as no watch is forwarded as none: a list, a get.
        for query in ["watch=0", "watch=false", "watch=False", "watch=FALSE"] {
            let target = Target::parse(gates, Some(query)).unwrap();
            assert!(!target.watching(), "{query}");
            assert_eq!(target.uri(), format!("/{gates}"), "{query}");
        }
        let named = Target::parse(&format!("{gates}/cluster"), Some("watch=True")).unwrap();
        assert!(!named.watching());
        assert_eq!(named.uri(), format!("/{gates}/cluster"));
        // A name in a field selector keeps a watch a watch.
        let by_name = Target::parse(
            gates,
            Some("watch=True&fieldSelector=metadata.name%3Dnamespace.a"),
        )
        .unwrap();
        assert_eq!(
            by_name.uri(),
            format!(
                "/{gates}?watch=true&fieldSelector=metadata.name%3Dnamespace.a&timeoutSeconds=300"
            )
        );
    }

    #[test]
    fn nothing_else_is_forwarded() {
        for path in [
            "api/v1/secrets",
            "api/v1/namespaces/default/secrets",
            "apis/ifo.kubevirt.io/v1alpha1/operationrulesets",
            "apis/live.ifo.kubevirt.io/v1alpha1/namespaces/a/maintenancegates",
            "apis/live.ifo.kubevirt.io/v1alpha1/inflightoperations/x/status",
            "apis/live.ifo.kubevirt.io/v1alpha1/namespaces/../inflightoperations",
            "apis/live.ifo.kubevirt.io/v1alpha1/namespaces/A/inflightoperations",
            "apis/live.ifo.kubevirt.io/v1alpha1/inflightoperations/%2e%2e",
            "apis/live.ifo.kubevirt.io/v1alpha1/",
            "apis/live.ifo.kubevirt.io/v1alpha1/../../../api/v1/secrets",
        ] {
            assert_eq!(uri(path, None), Err(Refused::Path), "{path}");
        }
        assert_eq!(
            uri(
                "apis/live.ifo.kubevirt.io/v1alpha1/inflightoperations",
                Some("watch=1&timeoutSeconds=soon")
            ),
            Err(Refused::Parameter("timeoutSeconds"))
        );
        assert_eq!(
            uri(
                "apis/live.ifo.kubevirt.io/v1alpha1/inflightoperations",
                Some("limit=1&limit=2")
            ),
            Err(Refused::Parameter("limit"))
        );
    }
}
