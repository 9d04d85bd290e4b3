//! The watch engine, one for every served resource (operations, cluster operations, gates): where
//! a watch starts per the resourceVersion and `sendInitialEvents` rules, the initial items, the
//! history replayed a chunk at a time, live events, bookmarks, `timeoutSeconds`, and a clean cut
//! with 410 Expired for a watcher that falls behind or stops reading.
//!
//! A resource says only what its items are and what an event of the index makes of them, as a
//! [`Watched`]: the operations' in `operations::watch`, the gates' in `gate::watch`.

mod frames;
pub(super) mod slots;

pub(super) use frames::frame;

use super::ApiState;
use super::negotiate::Representation;
use super::params::Params;
use super::status::ApiError;
use crate::index::{Event, Replay};
use axum::body::Body;
use axum::http::header;
use axum::response::Response;
use bytes::Bytes;
use frames::{
    BOOKMARK_EVERY, CHANNEL, REPLAY_CHUNK, STALLED_CLIENT, bookmark_frame, error_frame, expired,
    fell_behind, lifetime, stalled,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// What a served resource tells the engine: which of its items a watcher starts with, and the
/// events the index's events make for it, encoded as the watcher asked.
pub(super) trait Watched: Send + 'static {
    /// Frames still to send, of the initial items or of one index event, drawn one at a time by
    /// [`Watched::next`] (so that nothing is encoded before the client takes the frame before).
    type Pending: Send;

    /// The request's parameters: where the watch starts, how long it lasts, its bookmarks and
    /// selectors.
    fn params(&self) -> &Params;

    /// The kind its bookmarks name.
    fn kind(&self) -> &'static str;

    /// The items at the current resourceVersion, which it returns first, to send as ADDED.
    fn initial(&mut self, state: &ApiState) -> (u64, Self::Pending);

    /// What an index event changes for this watcher.
    fn event(&mut self, state: &ApiState, event: &Event) -> Self::Pending;

    /// The next frame of `pending`; `None` once all are sent.
    fn next(&mut self, pending: &mut Self::Pending) -> Option<Bytes>;
}

/// Starts a watch of `watched` for `user`, or refuses it with 429 when a limit on open watches
/// is reached.
pub(super) fn serve<W: Watched>(
    state: Arc<ApiState>,
    user: &str,
    repr: Representation,
    mut watched: W,
) -> Result<Response, ApiError> {
    let params = watched.params();
    let bytes = slots::WATCH_BASE_BYTES + params.labels.heap_bytes() + params.fields.heap_bytes();
    let slot = state.watch_slots.acquire(user, bytes)?;
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(CHANNEL);
    let timeout = lifetime(params.timeout_seconds);
    let bookmarks = params.allow_bookmarks && !matches!(repr, Representation::Table { .. });
    // Start from the index now, before answering, so no event between list and watch is missed.
    let start = start(&state, &mut watched);
    let mut ends = state.watch_generation.subscribe();
    let generation = *ends.borrow_and_update();
    if !state.is_serving() {
        // Leadership ended between the check before routing and the subscription above (its
        // end was signalled before this watch could hear it).
        return Err(ApiError::not_leader());
    }
    // A client's watch is a task of its own for as long as the client keeps it: it ends with
    // its stream (the client goes, its timeout passes, the term ends), and nothing restarts it
    // (the client watches again).
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move {
        // Held until the watch ends, however it ends.
        let _slot = slot;
        let out = Out {
            tx,
            kind: watched.kind(),
        };
        tokio::select! {
            _ = run(state, watched, start, bookmarks, &out, timeout) => {}
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

enum Start<P> {
    /// The initial items at `rv` (shared with lists and other watches where the resource keeps
    /// snapshots) to send as ADDED, then the events after them; `bookmark` marks the end of
    /// initial events.
    Initial {
        rv: u64,
        items: P,
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
fn start<W: Watched>(state: &ApiState, watched: &mut W) -> Start<W::Pending> {
    let params = watched.params();
    let initial = params.send_initial_events;
    match params.resource_version {
        Some(rv) if rv != 0 && initial != Some(true) => match state.index.watch_from(rv) {
            Ok((replay, live)) => Start::Resume { replay, live },
            Err(e) => Start::Failed(expired(e)),
        },
        _ if initial == Some(false) => Start::Live(state.index.subscribe()),
        _ => {
            let (rv, items) = watched.initial(state);
            match state.index.watch_from(rv) {
                Ok((replay, live)) => Start::Initial {
                    rv,
                    items,
                    bookmark: initial == Some(true),
                    replay,
                    live,
                },
                Err(e) => Start::Failed(expired(e)),
            }
        }
    }
}

/// Where a watch writes.
struct Out {
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    /// The kind watched, for the logs.
    kind: &'static str,
}

impl Out {
    /// Sends `bytes`; false when the client is gone or has stopped reading. A client that stops
    /// reading for [`STALLED_CLIENT`] is gone as far as we are concerned: it is told so where
    /// the connection still takes it, counted, and the watch ends.
    async fn send(&self, bytes: Bytes) -> bool {
        match tokio::time::timeout(STALLED_CLIENT, self.tx.send(Ok(bytes))).await {
            Ok(Ok(())) => true,
            Ok(Err(_)) => false, // the client is gone
            Err(_) => {
                tracing::info!(resource = self.kind, stalled_for = ?STALLED_CLIENT, "cutting a watcher that stopped reading");
                crate::metrics::watcher_cut("stalled");
                let _ = self.tx.try_send(Ok(error_frame(&stalled())));
                false
            }
        }
    }

    /// Sends every frame of `pending`; false when the watch must end.
    async fn drain<W: Watched>(&self, watched: &mut W, mut pending: W::Pending) -> bool {
        while let Some(bytes) = watched.next(&mut pending) {
            if !self.send(bytes).await {
                return false;
            }
        }
        true
    }

    /// Sends what the history events of `replay` make for the watcher, a chunk at a time.
    async fn replay<W: Watched>(
        &self,
        state: &ApiState,
        watched: &mut W,
        mut replay: Replay,
    ) -> bool {
        while !replay.is_done() {
            let events = match state.index.replay(&mut replay, REPLAY_CHUNK) {
                Ok(events) => events,
                Err(e) => {
                    let _ = self.send(error_frame(&expired(e))).await;
                    return false;
                }
            };
            for event in &events {
                let pending = watched.event(state, event);
                if !self.drain(watched, pending).await {
                    return false;
                }
            }
        }
        true
    }
}

async fn run<W: Watched>(
    state: Arc<ApiState>,
    mut watched: W,
    start: Start<W::Pending>,
    bookmarks: bool,
    out: &Out,
    timeout: Duration,
) {
    let kind = out.kind;
    let mut live = match start {
        Start::Failed(err) => {
            let _ = out.send(error_frame(&err)).await;
            return;
        }
        Start::Initial {
            rv,
            items,
            bookmark,
            replay,
            live,
        } => {
            if !out.drain(&mut watched, items).await {
                return;
            }
            if bookmark && !out.send(bookmark_frame(kind, rv, true)).await {
                return;
            }
            if !out.replay(&state, &mut watched, replay).await {
                return;
            }
            live
        }
        Start::Resume { replay, live } => {
            if !out.replay(&state, &mut watched, replay).await {
                return;
            }
            live
        }
        Start::Live(live) => live,
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last_rv = 0u64;
    let mut ticker =
        tokio::time::interval_at(tokio::time::Instant::now() + BOOKMARK_EVERY, BOOKMARK_EVERY);
    loop {
        tokio::select! {
            event = live.recv() => match event {
                Ok(event) => {
                    last_rv = event.rv;
                    let pending = watched.event(&state, &event);
                    if !out.drain(&mut watched, pending).await {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::info!(missed, resource = kind, "cutting a watcher that fell behind");
                    crate::metrics::watcher_cut("lagging");
                    let _ = out.send(error_frame(&fell_behind(missed))).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = ticker.tick(), if bookmarks && last_rv > 0 => {
                if !out.send(bookmark_frame(kind, last_rv, false)).await {
                    return;
                }
            }
            _ = tokio::time::sleep_until(deadline) => return,
            _ = out.tx.closed() => return,
        }
    }
}
