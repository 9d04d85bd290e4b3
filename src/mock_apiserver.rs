//! A mock kube-apiserver for the unit tests of the code that talks to kube-apiserver (test
//! builds only), as kube's own `mock_tests.rs`: a [`kube::Client`] whose requests go to a
//! script instead of a network. The script is a function of each request (and of what it keeps
//! of the ones before): a test says what kube-apiserver answers, then checks what its code asked
//! and what it made of the answers. Beside the real-cluster end-to-end tests, never instead of
//! them: these reach on demand the answers a real cluster gives rarely (a 409 at the moment of a
//! renewal, a 410 in the middle of a watch, a stream cut, a request that gets no answer).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use ifo_apimachinery::RequestInfo;
use parking_lot::Mutex;
use serde_json::{Value, json};

/// One request as the mock received it.
#[derive(Clone, Debug)]
pub(crate) struct Asked {
    /// What kube-apiserver reads of it: the verb (`get`, `list`, `watch`, `create`, `update`,
    /// `delete`), the resource and name, the query.
    pub(crate) info: RequestInfo,
    /// Its body, when it has one (a create, a replace, a delete's options).
    pub(crate) body: Option<Value>,
    /// How many requests of each verb the mock had received when this one came, this one
    /// included.
    counts: HashMap<String, usize>,
}

impl Asked {
    /// `get`, `list`, `watch`, `create`, `update` or `delete`.
    pub(crate) fn verb(&self) -> &str {
        &self.info.verb
    }

    /// The value of the query parameter `key`.
    pub(crate) fn param(&self, key: &str) -> Option<&str> {
        self.info.query.get(key)
    }

    /// How many requests of `verb` the mock had received when this one came, this one
    /// included (what a script answers by, such as "the first list").
    pub(crate) fn count(&self, verb: &str) -> usize {
        self.counts.get(verb).copied().unwrap_or(0)
    }
}

/// What the mock answers to one request.
pub(crate) enum Reply {
    /// 200 with this object (or list, or review).
    Object(Value),
    /// A failure `Status` with this code, as kube-apiserver answers it (`reason` after the
    /// code: `Conflict`, `Expired`, `Invalid`, …).
    Status(u16),
    /// A watch: these events (see [`event`]), then the stream as [`End`] says.
    Watch(Vec<String>, End),
    /// Nothing: after this long the call fails, as the server's client fails a request that
    /// got no answer within its deadline.
    NoAnswer(Duration),
}

/// How a watch's stream goes on after its events.
pub(crate) enum End {
    /// It stays open, sending nothing.
    Open,
    /// The connection breaks in the middle of the stream.
    Cut,
}

/// A mock kube-apiserver: what it was asked, in order.
#[derive(Clone, Default)]
pub(crate) struct MockApiServer {
    asked: Arc<Mutex<Vec<Asked>>>,
}

impl MockApiServer {
    /// A client whose requests `script` answers, and the mock that records them.
    pub(crate) fn start(
        script: impl FnMut(&Asked) -> Reply + Send + 'static,
    ) -> (kube::Client, MockApiServer) {
        let mock = MockApiServer::default();
        let script = Arc::new(Mutex::new(script));
        let asked = mock.asked.clone();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let (script, asked) = (script.clone(), asked.clone());
            async move {
                let (parts, body) = request.into_parts();
                let body = body
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                let info = RequestInfo::parse(&parts.method, parts.uri.path(), parts.uri.query())
                    .expect("a request kube-apiserver can read");
                let request = {
                    let mut asked = asked.lock();
                    let mut counts = asked.last().map(|a| a.counts.clone()).unwrap_or_default();
                    *counts.entry(info.verb.clone()).or_default() += 1;
                    let request = Asked {
                        info,
                        body: serde_json::from_slice(&body).ok(),
                        counts,
                    };
                    asked.push(request.clone());
                    request
                };
                let reply = (script.lock())(&request);
                answer(reply).await
            }
        });
        (kube::Client::new(service, "default"), mock)
    }

    /// Every request so far.
    pub(crate) fn asked(&self) -> Vec<Asked> {
        self.asked.lock().clone()
    }

    /// The verbs of the requests so far.
    pub(crate) fn verbs(&self) -> Vec<String> {
        self.asked
            .lock()
            .iter()
            .map(|a| a.info.verb.clone())
            .collect()
    }

    /// How many requests so far had the verb `verb`.
    pub(crate) fn count(&self, verb: &str) -> usize {
        self.asked
            .lock()
            .iter()
            .filter(|a| a.verb() == verb)
            .count()
    }

    /// Waits until `count(verb)` reaches `n` (a test that waits longer than a minute of the
    /// test's clock fails).
    pub(crate) async fn asked_for(&self, verb: &str, n: usize) {
        until(
            Duration::from_secs(60),
            || self.count(verb) >= n,
            || format!("asked {n} {verb}; asked only {:?}", self.verbs()),
        )
        .await;
    }
}

/// Waits on the test's clock, looking every 10 ms, until `done` holds; a test that waits
/// longer than `limit` fails, saying `not_done()`.
pub(crate) async fn until(
    limit: Duration,
    done: impl Fn() -> bool,
    not_done: impl FnOnce() -> String,
) {
    let waiting = async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let done = tokio::time::timeout(limit, waiting).await;
    assert!(done.is_ok(), "{}", not_done());
}

/// The answer to a list in two pages at `resource_version`: `first` (with the token `page-2`),
/// then `rest`; `None` to a request that is not a list.
pub(crate) fn two_pages(
    asked: &Asked,
    kind: &str,
    resource_version: &str,
    first: Vec<Value>,
    rest: Vec<Value>,
) -> Option<Reply> {
    let page = match (asked.verb(), asked.param("continue")) {
        ("list", None) => list(kind, resource_version, Some("page-2"), first),
        ("list", Some(_)) => list(kind, resource_version, None, rest),
        _ => return None,
    };
    Some(Reply::Object(page))
}

/// What a reply is on the wire.
async fn answer(reply: Reply) -> Result<http::Response<axum::body::Body>, std::io::Error> {
    let json = |code: u16, value: Value| {
        http::Response::builder()
            .status(code)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(axum::body::Body::from(value.to_string()))
            .expect("a valid response")
    };
    Ok(match reply {
        Reply::Object(value) => json(200, value),
        Reply::Status(code) => json(code, status(code)),
        Reply::Watch(events, end) => {
            let lines = events
                .into_iter()
                .map(|e| Ok::<_, std::io::Error>(Bytes::from(e + "\n")));
            let lines = futures::stream::iter(lines);
            let body = match end {
                End::Open => axum::body::Body::from_stream(futures::StreamExt::chain(
                    lines,
                    futures::stream::pending(),
                )),
                End::Cut => axum::body::Body::from_stream(futures::StreamExt::chain(
                    lines,
                    futures::stream::once(async {
                        Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset))
                    }),
                )),
            };
            http::Response::new(body)
        }
        Reply::NoAnswer(after) => {
            tokio::time::sleep(after).await;
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("kube-apiserver did not answer within {after:?}"),
            ));
        }
    })
}

/// A failure `Status` of `code`, as kube-apiserver writes it.
pub(crate) fn status(code: u16) -> Value {
    let reason = match code {
        400 => "BadRequest",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        422 => "Invalid",
        429 => "TooManyRequests",
        _ => "InternalError",
    };
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("the mock answers {code} {reason}"),
        "reason": reason,
        "code": code,
    })
}

/// A watch event of `kind` (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`), its `type`
/// first as kube-apiserver writes it (kube reads an event's object without buffering it only
/// then).
pub(crate) fn event(kind: &str, object: Value) -> String {
    format!(r#"{{"type":{},"object":{object}}}"#, Value::from(kind))
}

/// The watch event that says the watch's resourceVersion is too old (410 Gone).
pub(crate) fn watch_expired() -> String {
    event("ERROR", status(410))
}

/// The bookmark that ends a streamed list's initial events, at `resource_version`.
pub(crate) fn initial_events_end(api_version: &str, kind: &str, resource_version: &str) -> String {
    event(
        "BOOKMARK",
        json!({
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {
                "resourceVersion": resource_version,
                "annotations": {"k8s.io/initial-events-end": "true"},
            },
        }),
    )
}

/// A list of `items` at `resource_version`, with `continue_token` when more pages follow.
pub(crate) fn list(
    kind: &str,
    resource_version: &str,
    continue_token: Option<&str>,
    items: Vec<Value>,
) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"resourceVersion": resource_version, "continue": continue_token},
        "items": items,
    })
}
