//! Watches: initial events per the resourceVersion rules, then live events through this watcher's
//! own filter (an object entering or leaving the selectors is an ADDED or DELETED for it),
//! bookmarks, `timeoutSeconds`, and a clean cut with 410 Expired for a watcher that falls behind.

use super::ApiState;
use super::negotiate::Representation;
use super::params::Params;
use super::resources::{Scope, matches, represent};
use super::status::ApiError;
use crate::index::{Event, EventKind, IndexReader, Replay, Snapshot, Stored, WatchError};
use axum::body::Body;
use axum::http::header;
use axum::response::Response;
use bytes::Bytes;
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// kube-apiserver's `--min-request-timeout`: a watch lasts between this and twice this (random,
/// so that watches opened together do not all end together); `timeoutSeconds` only shortens it.
pub(super) const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1800);
pub(super) const BOOKMARK_EVERY: Duration = Duration::from_secs(60);
/// Encoded events buffered per watch before the sender waits on the client.
pub(super) const CHANNEL: usize = 64;
/// How long a watch waits for a client that has stopped reading before closing it.
pub(super) const STALLED_CLIENT: Duration = Duration::from_secs(60);

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
pub(super) fn frame(type_: &str, object: &impl Serialize) -> Bytes {
    let mut line = serde_json::to_vec(&WireEvent { type_, object }).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// An in-stream `ERROR` event carrying a `Status`.
pub(super) fn error_frame(err: &ApiError) -> Bytes {
    frame("ERROR", &err.to_status())
}

impl Encoder {
    fn line(&self, type_: &str, stored: &Stored) -> Bytes {
        frame(type_, &represent(self.repr, stored, self.include))
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
    let object = event.object.as_ref()?;
    let now = matches(scope, params, object);
    let before = event
        .previous
        .as_ref()
        .is_some_and(|p| matches(scope, params, p));
    match event.kind {
        EventKind::Added if now => Some(("ADDED", object.clone())),
        EventKind::Deleted if now => Some(("DELETED", object.clone())),
        EventKind::Modified if now && before => Some(("MODIFIED", object.clone())),
        EventKind::Modified if now => Some(("ADDED", object.clone())),
        EventKind::Modified if before => {
            Some(("DELETED", at_rv(event.previous.as_ref()?, event.rv)))
        }
        _ => None,
    }
}

/// How long a watch lasts: the server's jittered maximum, or less if the client asked for less
/// (`timeoutSeconds` of 0 or absent asks for nothing). Never longer than two
/// [`MIN_REQUEST_TIMEOUT`]s, whatever the client sends.
pub(super) fn lifetime(requested_seconds: Option<u64>) -> Duration {
    let server = MIN_REQUEST_TIMEOUT.mul_f64(1.0 + fastrand::f64());
    match requested_seconds {
        Some(s) if s > 0 => Duration::from_secs(s).min(server),
        _ => server,
    }
}

/// Starts a watch for `user`, or refuses it with 429 when a limit on open watches is reached.
pub fn serve(
    state: Arc<ApiState>,
    user: &str,
    scope: Scope,
    params: Params,
    repr: Representation,
) -> Result<Response, ApiError> {
    let bytes = super::watch_slots::WATCH_BASE_BYTES
        + params.labels.heap_bytes()
        + params.fields.heap_bytes();
    let slot = state.watch_slots.acquire(user, bytes)?;
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(CHANNEL);
    let encoder = Encoder {
        repr,
        include: params.include_object,
    };
    let timeout = lifetime(params.timeout_seconds);
    // Start from the index now, before answering, so no event between list and watch is missed.
    let start = start(&state, &scope, &params);
    let index = state.index.clone();
    let mut ends = state.watch_generation.subscribe();
    let generation = *ends.borrow_and_update();
    if !state.is_serving() {
        // Leadership ended between the check before routing and the subscription above (its
        // end was signalled before this watch could hear it).
        return Err(ApiError::not_leader());
    }
    tokio::spawn(async move {
        // Held until the watch ends, however it ends.
        let _slot = slot;
        tokio::select! {
            _ = run(index, start, scope, params, encoder, tx, timeout) => {}
            // The stream ends without an error: clients resume from their last resourceVersion.
            _ = ends.wait_for(|g| *g != generation) => {}
        }
    });
    Ok(Response::builder()
        .header(header::CONTENT_TYPE, repr.content_type())
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from_stream(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
        .expect("static response"))
}

enum Start {
    /// A snapshot (shared with lists and other watches) to send as ADDED, then the events after
    /// it; `bookmark` marks the end of initial events.
    Snapshot {
        snapshot: Arc<Snapshot>,
        bookmark: bool,
        replay: Replay,
        live: broadcast::Receiver<Event>,
    },
    /// Events after a resourceVersion, then live events.
    Resume {
        replay: Replay,
        live: broadcast::Receiver<Event>,
    },
    /// Live events from now on.
    Live(broadcast::Receiver<Event>),
    Failed(ApiError),
}

/// History events a watch reads from the index at a time (each read holds the index's read
/// lock briefly; none copies the whole history).
pub(super) const REPLAY_CHUNK: usize = 256;

pub(super) fn expired(e: WatchError) -> ApiError {
    match e {
        WatchError::Expired { requested, oldest } => {
            ApiError::TooOldResourceVersion { requested, oldest }
        }
        // In-stream 410 (not 504) for a future version: clients then relist instead of retrying it forever.
        WatchError::TooLarge { requested, current } => ApiError::Expired(format!(
            "too large resource version: {requested}, current: {current}"
        )),
    }
}

/// Where a watch starts, per the resourceVersion and `sendInitialEvents` rules:
///
/// | `sendInitialEvents` | resourceVersion | starts with |
/// |---|---|---|
/// | absent (legacy) | unset or 0 | the current state as ADDED |
/// | absent or false | N | the events after N |
/// | false | unset or 0 | nothing: live events from now |
/// | true | any | the current state as ADDED, then the `initial-events-end` bookmark |
fn start(state: &ApiState, scope: &Scope, params: &Params) -> Start {
    let initial = params.send_initial_events;
    match params.resource_version {
        Some(rv) if rv != 0 && initial != Some(true) => match state.index.watch_from(rv) {
            Ok((replay, live)) => Start::Resume { replay, live },
            Err(e) => Start::Failed(expired(e)),
        },
        _ if initial == Some(false) => Start::Live(state.index.subscribe()),
        _ => {
            let snapshot = super::resources::current_snapshot(state, scope).snapshot;
            match state.index.watch_from(snapshot.rv) {
                Ok((replay, live)) => Start::Snapshot {
                    snapshot,
                    bookmark: initial == Some(true),
                    replay,
                    live,
                },
                Err(e) => Start::Failed(expired(e)),
            }
        }
    }
}

async fn run(
    index: IndexReader,
    start: Start,
    scope: Scope,
    params: Params,
    encoder: Encoder,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    timeout: Duration,
) {
    let kind = scope.resource.kind;
    // A client that stops reading for this long is gone as far as we are concerned: say so
    // where the connection still takes it, count it, and end the watch.
    let send = |bytes: Bytes| {
        let tx = tx.clone();
        async move {
            match tokio::time::timeout(STALLED_CLIENT, tx.send(Ok(bytes))).await {
                Ok(Ok(())) => true,
                Ok(Err(_)) => false, // the client is gone
                Err(_) => {
                    tracing::info!(resource = kind, stalled_for = ?STALLED_CLIENT, "cutting a watcher that stopped reading");
                    crate::metrics::watcher_cut("stalled");
                    let err = ApiError::Expired(format!(
                        "the watcher read nothing for {}s; list again and watch from there",
                        STALLED_CLIENT.as_secs()
                    ));
                    let _ = tx.try_send(Ok(error_frame(&err)));
                    false
                }
            }
        }
    };
    // Sends the history events of `replay` that this watcher should see, a chunk at a time.
    let replay_events = |mut replay: Replay| {
        let index = index.clone();
        let (scope, params, encoder) = (&scope, &params, &encoder);
        let send = &send;
        async move {
            while !replay.is_done() {
                let events = match index.replay(&mut replay, REPLAY_CHUNK) {
                    Ok(events) => events,
                    Err(e) => {
                        let _ = send(error_frame(&expired(e))).await;
                        return false;
                    }
                };
                for event in &events {
                    if let Some((t, stored)) = transition(scope, params, event)
                        && !send(encoder.line(t, &stored)).await
                    {
                        return false;
                    }
                }
            }
            true
        }
    };
    let mut live = match start {
        Start::Failed(err) => {
            let _ = send(error_frame(&err)).await;
            return;
        }
        Start::Snapshot {
            snapshot,
            bookmark,
            replay,
            live,
        } => {
            for stored in snapshot
                .items
                .iter()
                .filter(|s| matches(&scope, &params, s))
            {
                if !send(encoder.line("ADDED", stored)).await {
                    return;
                }
            }
            if bookmark && !send(encoder.bookmark(kind, snapshot.rv, true)).await {
                return;
            }
            if !replay_events(replay).await {
                return;
            }
            live
        }
        Start::Resume { replay, live } => {
            if !replay_events(replay).await {
                return;
            }
            live
        }
        Start::Live(live) => live,
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
                    crate::metrics::watcher_cut("lagging");
                    let err = ApiError::Expired(format!("the watcher fell {missed} events behind; list again and watch from there"));
                    let _ = send(error_frame(&err)).await;
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
