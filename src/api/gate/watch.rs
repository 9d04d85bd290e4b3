//! Watches of gates, in the operations' resourceVersion space: a gate changes at the RV of the
//! operation change (or change of the feeds' state) that moved it. The watch engine
//! ([`crate::api::watch`]) follows the index's event stream with the same resume, 410, bookmark
//! and `sendInitialEvents` rules as for operations; on each event this watcher recomputes the
//! gates the event touches and sends those whose verdict changed.
//!
//! A gate is recomputed from the index as it is when the event is read, which may already be
//! past the event: it is sent stamped with the event's RV all the same, so a client resuming
//! from there misses nothing, and the later events that made it so change nothing more.

use std::collections::{BTreeMap, BTreeSet, btree_set};
use std::sync::Arc;

use axum::response::Response;
use bytes::Bytes;
use ifo_model::{GATE_KIND, GateStatus};

use super::table;
use super::verdict::{Gate, ServedOp};
use super::{Page, Selected, Selection};
use crate::api::ApiState;
use crate::api::negotiate::Representation;
use crate::api::params::{IncludeObject, Params};
use crate::api::status::ApiError;
use crate::api::table::represent;
use crate::api::watch::{self, Watched, frame};
use crate::gate::Existence;
use crate::index::{Event, EventKind, GateScope, MAX_GATE_OPERATIONS};

/// Starts a watch of the gates `selection` names for `user`, or refuses it with 429 when a
/// limit on open watches is reached.
pub(super) fn serve(
    state: Arc<ApiState>,
    user: &str,
    selection: Selection,
    repr: Representation,
) -> Result<Response, ApiError> {
    let watcher = Watcher {
        selection,
        repr,
        sent: BTreeMap::new(),
        shown: BTreeMap::new(),
        knows_client: false,
    };
    watch::serve(state, user, repr, watcher)
}

struct Watcher {
    selection: Selection,
    repr: Representation,
    /// The status last sent of each gate the client holds (as far as this watch knows).
    sent: BTreeMap<String, GateStatus<ServedOp>>,
    /// For a Table of rows alone (no embedded object): what each row last sent showed.
    shown: BTreeMap<String, String>,
    /// Whether `sent` is all the client holds (the watch began with the initial gates), or the
    /// client resumed with gates this watch never sent.
    knows_client: bool,
}

/// What is left to send of the initial gates or of one event.
enum Pending {
    /// The selected gates, as ADDED.
    Initial(std::vec::IntoIter<Gate>),
    /// The gates an event touched, recomputed, to send those that changed stamped with its `rv`.
    Event {
        rv: u64,
        gates:
            std::iter::Zip<btree_set::IntoIter<GateScope>, std::vec::IntoIter<(Gate, Existence)>>,
    },
}

impl Watched for Watcher {
    type Pending = Pending;

    fn params(&self) -> &Params {
        &self.selection.params
    }

    fn kind(&self) -> &'static str {
        GATE_KIND
    }

    fn initial(&mut self, state: &ApiState) -> (u64, Pending) {
        let Selected { rv, gates, .. } =
            self.selection
                .gates(state, MAX_GATE_OPERATIONS, &Page::default());
        self.knows_client = true;
        (rv, Pending::Initial(gates.into_iter()))
    }

    fn event(&mut self, state: &ApiState, event: &Event) -> Pending {
        let scopes = self.touched(state, event);
        let gates = super::current_gates(state, scopes.iter().cloned());
        Pending::Event {
            rv: event.rv,
            gates: scopes.into_iter().zip(gates),
        }
    }

    fn next(&mut self, pending: &mut Pending) -> Option<Bytes> {
        match pending {
            Pending::Initial(gates) => {
                let gate = gates.next()?;
                let shown = self.shown_of(&gate);
                Some(self.emit("ADDED", gate, shown))
            }
            Pending::Event { rv, gates } => loop {
                let (scope, (gate, existence)) = gates.next()?;
                if let Some(bytes) = self.changed(*rv, &scope, gate, &existence) {
                    return Some(bytes);
                }
            },
        }
    }
}

impl Watcher {
    /// The gates `event` may have changed, among those this watch selects.
    fn touched(&self, state: &ApiState, event: &Event) -> BTreeSet<GateScope> {
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
                        state
                            .index
                            .gates_in_flight(0, |_| None)
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

    /// The event of the gate of `scope`, recomputed for an index event at `rv`, if the client
    /// is to see one.
    fn changed(
        &mut self,
        rv: u64,
        scope: &GateScope,
        mut gate: Gate,
        existence: &Existence,
    ) -> Option<Bytes> {
        let name = scope.to_string();
        // A gate that stops existing (its node deleted) is DELETED, one that begins to (a
        // node created) ADDED, as a gate that leaves or joins the selection.
        let included = self.selection.includes(
            scope,
            gate.status.active_operations as usize,
            existence.is_served(),
        );
        let held = self.sent.contains_key(&name);
        gate.metadata.resource_version = Some(rv.to_string());
        let shown = self.shown_of(&gate);
        let type_ = match (held, included) {
            (true, true) if self.sent.get(&name) == Some(&gate.status) => return None,
            // A change the client's rows would not show (`kubectl get gates -w`).
            (true, true) if shown.is_some() && self.shown.get(&name) == shown.as_ref() => {
                self.sent.insert(name, gate.status);
                return None;
            }
            (true, true) => "MODIFIED",
            (false, true) if self.knows_client => "ADDED",
            // A resumed client may hold it already: an update of what it has, or an add.
            (false, true) => "MODIFIED",
            (true, false) => "DELETED",
            // A resumed client may hold a gate that just cleared and left the list.
            (false, false) if !self.knows_client && gate.status.active_operations == 0 => "DELETED",
            (false, false) => return None,
        };
        Some(self.emit(type_, gate, shown))
    }

    /// What the client's row of `gate` shows, when it reads rows alone (a Table that embeds no
    /// object); `None` otherwise.
    fn shown_of(&self, gate: &Gate) -> Option<String> {
        (matches!(self.repr, Representation::Table { .. })
            && self.selection.params.include_object != IncludeObject::Object)
            .then(|| table::shown(gate, jiff::Timestamp::now()))
    }

    /// One gate event, noting what the client then holds (`shown`: its row, see
    /// [`Self::shown_of`]).
    fn emit(&mut self, type_: &str, gate: Gate, shown: Option<String>) -> Bytes {
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
        bytes
    }

    fn line(&self, type_: &str, gate: &Gate) -> Bytes {
        let include = self.selection.params.include_object;
        frame(type_, &represent(self.repr, gate, include))
    }
}
