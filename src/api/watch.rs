//! Watches: initial events per the resourceVersion rules, then live events through this watcher's
//! own filter (an object entering or leaving the selectors is an ADDED or DELETED for it),
//! bookmarks, `timeoutSeconds`, and a clean cut with 410 Expired for a watcher that falls behind.

use super::ApiState;
use super::negotiate::Representation;
use super::params::Params;
use super::resources::{Scope, matches, represent};
use super::status::ApiError;
use crate::index::{Event, EventKind, Stored, WatchError};
use axum::body::Body;
use axum::http::header;
use axum::response::Response;
use bytes::Bytes;
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// Without `timeoutSeconds`, a watch lasts 30–60 minutes, as kube-apiserver's do.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
/// Encoded events buffered per watch before the sender waits on the client.
const CHANNEL: usize = 64;
/// How long a watch waits for a client that has stopped reading before closing it.
const STALLED_CLIENT: Duration = Duration::from_secs(60);

#[derive(Serialize)]
struct WireEvent<'a, T> {
    #[serde(rename = "type")]
    type_: &'a str,
    object: &'a T,
}

struct Encoder {
    repr: Representation,
    include: super::params::IncludeObject,
}

/// One watch event on the wire: `{"type":..,"object":..}` and a newline.
fn frame(type_: &str, object: &impl Serialize) -> Bytes {
    let mut line = serde_json::to_vec(&WireEvent { type_, object }).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

impl Encoder {
    fn line(&self, type_: &str, stored: &Stored) -> Bytes {
        frame(type_, &represent(self.repr, stored, self.include))
    }

    fn error(&self, err: &ApiError) -> Bytes {
        frame("ERROR", &err.to_status())
    }

    fn bookmark(&self, kind: &str, rv: u64, initial_events_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        frame(
            "BOOKMARK",
            &json!({"kind": kind, "apiVersion": super::discovery::GROUP_VERSION, "metadata": metadata}),
        )
    }
}

/// The record as of `rv` (a filter-DELETED event carries the previous state at the new RV).
fn at_rv(stored: &Arc<Stored>, rv: u64) -> Arc<Stored> {
    if stored.rv == rv {
        return stored.clone();
    }
    Arc::new(Stored::new(rv, stored.op.clone()))
}

/// What this watcher should see of an index event, if anything.
fn transition(
    scope: &Scope,
    params: &Params,
    event: &Event,
) -> Option<(&'static str, Arc<Stored>)> {
    let now = matches(scope, params, &event.object);
    let before = event
        .previous
        .as_ref()
        .is_some_and(|p| matches(scope, params, p));
    match event.kind {
        EventKind::Added if now => Some(("ADDED", event.object.clone())),
        EventKind::Deleted if now => Some(("DELETED", event.object.clone())),
        EventKind::Modified if now && before => Some(("MODIFIED", event.object.clone())),
        EventKind::Modified if now => Some(("ADDED", event.object.clone())),
        EventKind::Modified if before => {
            Some(("DELETED", at_rv(event.previous.as_ref()?, event.rv)))
        }
        _ => None,
    }
}

pub fn serve(state: Arc<ApiState>, scope: Scope, params: Params, repr: Representation) -> Response {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(CHANNEL);
    let encoder = Encoder {
        repr,
        include: params.include_object,
    };
    let timeout = params
        .timeout_seconds
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT);
    // Start from the index now, before answering, so no event between list and watch is missed.
    let start = start(&state, &params);
    crate::metrics::open_watches(1);
    tokio::spawn(async move {
        run(start, scope, params, encoder, tx, timeout).await;
        crate::metrics::open_watches(-1);
    });
    Response::builder()
        .header(header::CONTENT_TYPE, super::negotiate::APPLICATION_JSON)
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from_stream(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
        .expect("static response")
}

enum Start {
    /// A snapshot to send as ADDED, then live events; `bookmark` marks the end of initial events.
    Snapshot {
        items: Vec<Arc<Stored>>,
        rv: u64,
        bookmark: bool,
        live: broadcast::Receiver<Event>,
    },
    /// Events after a resourceVersion, then live events.
    Resume {
        replay: Vec<Event>,
        live: broadcast::Receiver<Event>,
    },
    Failed(ApiError),
}

fn start(state: &ApiState, params: &Params) -> Start {
    let initial = params.send_initial_events == Some(true);
    match params.resource_version {
        Some(rv) if rv != 0 && !initial => match state.index.watch_from(rv) {
            Ok((replay, live)) => Start::Resume { replay, live },
            Err(WatchError::Expired { requested, oldest }) => {
                Start::Failed(ApiError::TooOldResourceVersion { requested, oldest })
            }
            // In-stream 410 (not 504) for a future version: clients then relist instead of retrying it forever.
            Err(WatchError::TooLarge { requested, current }) => Start::Failed(ApiError::Expired(
                format!("too large resource version: {requested}, current: {current}"),
            )),
        },
        _ => {
            let (snapshot, live) = state.index.subscribe_with_snapshot();
            Start::Snapshot {
                items: snapshot.items,
                rv: snapshot.rv,
                bookmark: initial,
                live,
            }
        }
    }
}

async fn run(
    start: Start,
    scope: Scope,
    params: Params,
    encoder: Encoder,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    timeout: Duration,
) {
    let kind = scope.resource.kind;
    // A client that stops reading for this long is gone as far as we are concerned.
    let send = |bytes: Bytes| {
        let tx = tx.clone();
        async move {
            matches!(
                tokio::time::timeout(STALLED_CLIENT, tx.send(Ok(bytes))).await,
                Ok(Ok(()))
            )
        }
    };
    let mut live = match start {
        Start::Failed(err) => {
            let _ = send(encoder.error(&err)).await;
            return;
        }
        Start::Snapshot {
            items,
            rv,
            bookmark,
            live,
        } => {
            for stored in items.iter().filter(|s| matches(&scope, &params, s)) {
                if !send(encoder.line("ADDED", stored)).await {
                    return;
                }
            }
            if bookmark && !send(encoder.bookmark(kind, rv, true)).await {
                return;
            }
            live
        }
        Start::Resume { replay, live } => {
            for event in &replay {
                if let Some((t, stored)) = transition(&scope, &params, event)
                    && !send(encoder.line(t, &stored)).await
                {
                    return;
                }
            }
            live
        }
    };
    let bookmarks = params.allow_bookmarks && !matches!(encoder.repr, Representation::Table { .. });
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last_rv = 0u64;
    let mut ticker =
        tokio::time::interval_at(tokio::time::Instant::now() + BOOKMARK_EVERY, BOOKMARK_EVERY);
    loop {
        tokio::select! {
            event = live.recv() => match event {
                Ok(event) => {
                    last_rv = event.rv;
                    if let Some((t, stored)) = transition(&scope, &params, &event)
                        && !send(encoder.line(t, &stored)).await
                    {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::info!(missed, resource = kind, "cutting a watcher that fell behind");
                    let err = ApiError::Expired(format!("the watcher fell {missed} events behind; list again and watch from there"));
                    let _ = send(encoder.error(&err)).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = ticker.tick(), if bookmarks && last_rv > 0 => {
                if !send(encoder.bookmark(kind, last_rv, false)).await {
                    return;
                }
            }
            _ = tokio::time::sleep_until(deadline) => return,
            _ = tx.closed() => return,
        }
    }
}
