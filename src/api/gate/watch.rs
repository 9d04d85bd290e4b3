//! Watches of gates, in the operations' resourceVersion space: a gate changes at the RV of the
//! operation change (or change of the feeds' freshness) that moved it. The watch follows the
//! index's event stream with the same resume, 410, bookmark and `sendInitialEvents` rules as
//! the operations' watches; on each event it recomputes the gates the event touches and sends
//! those whose verdict changed.
//!
//! A gate is recomputed from the index as it is when the event is read, which may already be
//! past the event: it is sent stamped with the event's RV all the same, so a client resuming
//! from there misses nothing, and the later events that made it so change nothing more.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::header;
use axum::response::Response;
use bytes::Bytes;
use ifo_model::{GATE_KIND, GateStatus};

use super::verdict::{Gate, ServedOp};
use tokio::sync::{broadcast, mpsc};

use super::table;
use super::{Page, Selected, Selection};
use crate::api::ApiState;
use crate::api::negotiate::Representation;
use crate::api::params::IncludeObject;
use crate::api::respond::meta_api_version;
use crate::api::status::ApiError;
use crate::api::watch_frames::{
    BOOKMARK_EVERY, CHANNEL, REPLAY_CHUNK, STALLED_CLIENT, bookmark_frame, error_frame, expired,
    fell_behind, frame, lifetime, stalled,
};
use crate::index::{Event, EventKind, GateScope, MAX_GATE_OPERATIONS, Replay};

/// Starts a watch of the gates `selection` names for `user`, or refuses it with 429 when a
/// limit on open watches is reached.
pub fn serve(
    state: Arc<ApiState>,
    user: &str,
    selection: Selection,
    repr: Representation,
) -> Result<Response, ApiError> {
    let bytes = super::super::watch_slots::WATCH_BASE_BYTES
        + selection.params.labels.heap_bytes()
        + selection.params.fields.heap_bytes();
    let slot = state.watch_slots.acquire(user, bytes)?;
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(CHANNEL);
    let timeout = lifetime(selection.params.timeout_seconds);
    let start = start(&state, &selection);
    let mut ends = state.watch_generation.subscribe();
    let generation = *ends.borrow_and_update();
    if !state.is_serving() {
        return Err(ApiError::not_leader());
    }
    tokio::spawn(async move {
        let _slot = slot;
        let watcher = Watcher {
            state,
            selection,
            repr,
            tx,
            sent: BTreeMap::new(),
            shown: BTreeMap::new(),
            knows_client: false,
        };
        tokio::select! {
            _ = watcher.run(start, timeout) => {}
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
    /// The selected gates at `rv` as ADDED (then the `initial-events-end` bookmark when
    /// `bookmark`), then the events after them.
    Initial {
        rv: u64,
        gates: Vec<Gate>,
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

/// Where a watch starts: the same rules as the operations' watches.
fn start(state: &ApiState, selection: &Selection) -> Start {
    let params = &selection.params;
    let initial = params.send_initial_events;
    match params.resource_version {
        Some(rv) if rv != 0 && initial != Some(true) => match state.index.watch_from(rv) {
            Ok((replay, live)) => Start::Resume { replay, live },
            Err(e) => Start::Failed(expired(e)),
        },
        _ if initial == Some(false) => Start::Live(state.index.subscribe()),
        _ => {
            let Selected { rv, gates, .. } =
                selection.gates(state, MAX_GATE_OPERATIONS, &Page::default());
            match state.index.watch_from(rv) {
                Ok((replay, live)) => Start::Initial {
                    rv,
                    gates,
                    bookmark: initial == Some(true),
                    replay,
                    live,
                },
                Err(e) => Start::Failed(expired(e)),
            }
        }
    }
}

struct Watcher {
    state: Arc<ApiState>,
    selection: Selection,
    repr: Representation,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    /// The status last sent of each gate the client holds (as far as this watch knows).
    sent: BTreeMap<String, GateStatus<ServedOp>>,
    /// For a Table of rows alone (no embedded object): what each row last sent showed.
    shown: BTreeMap<String, String>,
    /// Whether `sent` is all the client holds (the watch began with the initial gates), or the
    /// client resumed with gates this watch never sent.
    knows_client: bool,
}

impl Watcher {
    async fn run(mut self, start: Start, timeout: Duration) {
        let mut live = match start {
            Start::Failed(err) => {
                let _ = self.send(error_frame(&err)).await;
                return;
            }
            Start::Initial {
                rv,
                gates,
                bookmark,
                replay,
                live,
            } => {
                self.knows_client = true;
                for gate in gates {
                    let shown = self.shown_of(&gate);
                    if !self.emit("ADDED", gate, shown).await {
                        return;
                    }
                }
                if bookmark && !self.send(bookmark_frame(GATE_KIND, rv, true)).await {
                    return;
                }
                if !self.replay(replay).await {
                    return;
                }
                live
            }
            Start::Resume { replay, live } => {
                if !self.replay(replay).await {
                    return;
                }
                live
            }
            Start::Live(live) => live,
        };
        let bookmarks = self.selection.params.allow_bookmarks
            && !matches!(self.repr, Representation::Table { .. });
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last_rv = 0u64;
        let mut ticker =
            tokio::time::interval_at(tokio::time::Instant::now() + BOOKMARK_EVERY, BOOKMARK_EVERY);
        loop {
            tokio::select! {
                event = live.recv() => match event {
                    Ok(event) => {
                        last_rv = event.rv;
                        if !self.event(&event).await {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::info!(missed, resource = GATE_KIND, "cutting a watcher that fell behind");
                        crate::metrics::watcher_cut("lagging");
                        let _ = self.send(error_frame(&fell_behind(missed))).await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = ticker.tick(), if bookmarks && last_rv > 0 => {
                    if !self.send(bookmark_frame(GATE_KIND, last_rv, false)).await {
                        return;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => return,
                _ = self.tx.closed() => return,
            }
        }
    }

    /// Sends what the history events of `replay` change, a chunk at a time.
    async fn replay(&mut self, mut replay: Replay) -> bool {
        while !replay.is_done() {
            let events = match self.state.index.replay(&mut replay, REPLAY_CHUNK) {
                Ok(events) => events,
                Err(e) => {
                    let _ = self.send(error_frame(&expired(e))).await;
                    return false;
                }
            };
            for event in &events {
                if !self.event(event).await {
                    return false;
                }
            }
        }
        true
    }

    /// The gates `event` may have changed, among those this watch selects.
    fn touched(&self, event: &Event) -> BTreeSet<GateScope> {
        let mut scopes = BTreeSet::new();
        if event.kind == EventKind::FeedsChanged {
            // Every gate's verdict may change: those the client holds, and those listed now.
            scopes.extend(
                self.sent
                    .keys()
                    .filter_map(|name| GateScope::parse(name).ok()),
            );
            match &self.selection.named {
                Some(scope) => {
                    scopes.insert(scope.clone());
                }
                None => {
                    scopes.insert(GateScope::Cluster);
                    scopes.extend(
                        self.state
                            .index
                            .gates_in_flight(0)
                            .1
                            .into_iter()
                            .map(|m| m.scope),
                    );
                }
            }
        } else {
            for stored in event.object.iter().chain(event.previous.iter()) {
                scopes.extend(GateScope::of(&stored.op));
            }
        }
        if let Some(named) = &self.selection.named {
            scopes.retain(|s| s == named);
        }
        scopes
    }

    /// Sends the gates `event` changed, stamped with its resourceVersion.
    async fn event(&mut self, event: &Event) -> bool {
        let scopes = self.touched(event);
        let gates = super::current_gates(&self.state, scopes.iter().cloned());
        for (scope, (mut gate, existence)) in scopes.into_iter().zip(gates) {
            let name = scope.to_string();
            // A gate that stops existing (its node deleted) is DELETED, one that begins to (a
            // node created) ADDED, as a gate that leaves or joins the selection.
            let included = self.selection.includes(
                &scope,
                gate.status.active_operations as usize,
                existence.is_served(),
            );
            let held = self.sent.contains_key(&name);
            gate.metadata.resource_version = Some(event.rv.to_string());
            let shown = self.shown_of(&gate);
            let type_ = match (held, included) {
                (true, true) if self.sent.get(&name) == Some(&gate.status) => continue,
                // A change the client's rows would not show (`kubectl get gates -w`).
                (true, true) if shown.is_some() && self.shown.get(&name) == shown.as_ref() => {
                    self.sent.insert(name, gate.status);
                    continue;
                }
                (true, true) => "MODIFIED",
                (false, true) if self.knows_client => "ADDED",
                // A resumed client may hold it already: an update of what it has, or an add.
                (false, true) => "MODIFIED",
                (true, false) => "DELETED",
                // A resumed client may hold a gate that just cleared and left the list.
                (false, false) if !self.knows_client && gate.status.active_operations == 0 => {
                    "DELETED"
                }
                (false, false) => continue,
            };
            if !self.emit(type_, gate, shown).await {
                return false;
            }
        }
        true
    }

    /// What the client's row of `gate` shows, when it reads rows alone (a Table that embeds no
    /// object); `None` otherwise.
    fn shown_of(&self, gate: &Gate) -> Option<String> {
        (matches!(self.repr, Representation::Table { .. })
            && self.selection.params.include_object != IncludeObject::Object)
            .then(|| table::shown(gate, jiff::Timestamp::now()))
    }

    /// Sends one gate event and notes what the client now holds (`shown`: its row, see
    /// [`Self::shown_of`]).
    async fn emit(&mut self, type_: &str, gate: Gate, shown: Option<String>) -> bool {
        let name = gate.metadata.name.clone().unwrap_or_default();
        let bytes = self.line(type_, &gate);
        if type_ == "DELETED" {
            self.sent.remove(&name);
            self.shown.remove(&name);
        } else {
            if let Some(shown) = shown {
                self.shown.insert(name.clone(), shown);
            }
            self.sent.insert(name, gate.status);
        }
        self.send(bytes).await
    }

    fn line(&self, type_: &str, gate: &Gate) -> Bytes {
        match self.repr {
            Representation::Object => frame(type_, gate),
            Representation::PartialObjectMetadata { .. } => frame(
                type_,
                &table::PartialMetadata::of(gate, meta_api_version(self.repr)),
            ),
            Representation::Table { .. } => {
                let v = meta_api_version(self.repr);
                let row = table::row(
                    gate,
                    self.selection.params.include_object,
                    v,
                    jiff::Timestamp::now(),
                );
                let metadata = crate::api::wire::ListMeta {
                    resource_version: gate.metadata.resource_version.clone().unwrap_or_default(),
                    continue_token: None,
                };
                frame(type_, &table::table(vec![row], v, metadata))
            }
        }
    }

    /// Sends `bytes`; false when the client is gone or has stopped reading (then it is told so
    /// where the connection still takes it, and the watch ends).
    async fn send(&self, bytes: Bytes) -> bool {
        match tokio::time::timeout(STALLED_CLIENT, self.tx.send(Ok(bytes))).await {
            Ok(Ok(())) => true,
            Ok(Err(_)) => false,
            Err(_) => {
                tracing::info!(resource = GATE_KIND, stalled_for = ?STALLED_CLIENT, "cutting a watcher that stopped reading");
                crate::metrics::watcher_cut("stalled");
                let _ = self.tx.try_send(Ok(error_frame(&stalled())));
                false
            }
        }
    }
}
