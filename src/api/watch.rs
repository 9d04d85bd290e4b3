//! Watches: initial events per the resourceVersion rules, then live events through this watcher's
//! own filter (an object entering or leaving the selectors is an ADDED or DELETED for it),
//! bookmarks, `timeoutSeconds`, and a clean cut with 410 Expired for a watcher that falls behind.

use super::ApiState;
use super::negotiate::Representation;
use super::params::Params;
use super::resources::{Scope, matches, represent};
use super::status::ApiError;
use super::watch_frames::{
    BOOKMARK_EVERY, CHANNEL, REPLAY_CHUNK, STALLED_CLIENT, bookmark_frame, error_frame, expired,
    fell_behind, frame, lifetime, stalled,
};
use crate::index::{Event, EventKind, IndexReader, Replay, Snapshot, Stored};
use axum::body::Body;
use axum::http::header;
use axum::response::Response;
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

struct Encoder {
    repr: Representation,
    include: super::params::IncludeObject,
}

impl Encoder {
    fn line(&self, type_: &str, stored: &Stored) -> Bytes {
        frame(type_, &represent(self.repr, stored, self.include))
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
                    let _ = tx.try_send(Ok(error_frame(&stalled())));
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
            if bookmark && !send(bookmark_frame(kind, snapshot.rv, true)).await {
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
                    let _ = send(error_frame(&fell_behind(missed))).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = ticker.tick(), if bookmarks && last_rv > 0 => {
                if !send(bookmark_frame(kind, last_rv, false)).await {
                    return;
                }
            }
            _ = tokio::time::sleep_until(deadline) => return,
            _ = tx.closed() => return,
        }
    }
}
