//! Events on a Node about what the eviction guard did there, so that `kubectl describe node`
//! shows why its drain waits (or that an override let it through), also where a drain tool
//! drops the guard's message (Karpenter, the node maintenance operator).
//!
//! Drain tools retry a refused eviction every few seconds, some in a tight loop, so one Event
//! is written per node and reason at most once per [`EVENT_INTERVAL`], with the latest message:
//! the decisions themselves are counted in metrics. The admission path only offers an Event
//! to a bounded queue ([`QUEUE`]) and never waits: a full queue drops it (counted), and one
//! task writes them, each call with the server's deadline.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Least time between two Events of one node and reason.
pub(crate) const EVENT_INTERVAL: Duration = Duration::from_secs(60);

/// Events waiting to be written, at most.
const QUEUE: usize = 64;

/// Namespace of Events about cluster-scoped objects (where `kubectl describe node` looks).
const EVENT_NAMESPACE: &str = "default";

/// The controller Events are reported by.
const REPORTING_CONTROLLER: &str = "ifo.kubevirt.io/maintenance-guard";

/// Longest note of an Event (the API's limit is 1 kB).
const MAX_NOTE_BYTES: usize = 1000;

/// Why an Event is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Why {
    /// Evictions are refused: operations are in flight on the node.
    Held,
    /// Evictions are refused: the server cannot vouch that nothing is in flight there.
    Unverified,
    /// Evictions are let through by the node's maintenance override while it is not clear.
    Overridden,
}

impl Why {
    fn reason(self) -> &'static str {
        match self {
            Why::Held => "MaintenanceHeld",
            Why::Unverified => "MaintenanceUnverified",
            Why::Overridden => "MaintenanceOverride",
        }
    }
}

/// One Event to write.
#[derive(Debug)]
struct Pending {
    node: Arc<str>,
    uid: Option<Arc<str>>,
    why: Why,
    note: String,
}

/// Offers Events to the writer (see the [module](self)).
#[derive(Debug)]
pub(crate) struct NodeEvents {
    queue: mpsc::Sender<Pending>,
    /// When the last Event of each node and reason was offered.
    last: Throttle,
    /// When the standby last logged a refusal of each node and reason.
    logged: Throttle,
}

/// Once per [`EVENT_INTERVAL`] per node and reason.
#[derive(Debug, Default)]
struct Throttle(Mutex<HashMap<(Arc<str>, Why), Instant>>);

impl Throttle {
    /// Whether `node`'s `why` is due (and, if so, that it is no longer until the interval
    /// passed).
    fn due(&self, node: &Arc<str>, why: Why) -> bool {
        let now = Instant::now();
        let mut last = self.0.lock();
        let key = (node.clone(), why);
        if last
            .get(&key)
            .is_some_and(|at| now.duration_since(*at) < EVENT_INTERVAL)
        {
            return false;
        }
        // Forget what is past its interval, so the map holds only recent nodes.
        if last.len() >= 1024 {
            last.retain(|_, at| now.duration_since(*at) < EVENT_INTERVAL);
        }
        last.insert(key, now);
        true
    }
}

impl NodeEvents {
    /// The offering side and the writer, which runs until the offering side is gone.
    pub(crate) fn new(
        client: Client,
        instance: String,
        deadline: Duration,
    ) -> (NodeEvents, impl Future<Output = ()> + Send + 'static) {
        let (queue, pending) = mpsc::channel(QUEUE);
        let events = NodeEvents {
            queue,
            last: Throttle::default(),
            logged: Throttle::default(),
        };
        (events, write(client, instance, deadline, pending))
    }

    /// Events that go nowhere (each offered one is counted as dropped): for benchmarks.
    pub(crate) fn nowhere() -> NodeEvents {
        let (queue, _) = mpsc::channel(1);
        NodeEvents {
            queue,
            last: Throttle::default(),
            logged: Throttle::default(),
        }
    }

    /// Whether a log line about `node`'s `why` is due (once per [`EVENT_INTERVAL`]): for the
    /// standby's door, which writes no Event.
    pub(crate) fn throttled(&self, node: &Arc<str>, why: Why) -> bool {
        self.logged.due(node, why)
    }

    /// Offers an Event about `node` (its `uid`, for `kubectl describe` to find it), unless one
    /// of the same reason was offered within [`EVENT_INTERVAL`]. Returns whether it was.
    pub(crate) fn offer(
        &self,
        node: &Arc<str>,
        uid: Option<Arc<str>>,
        why: Why,
        note: impl FnOnce() -> String,
    ) -> bool {
        if !self.last.due(node, why) {
            return false;
        }
        let pending = Pending {
            node: node.clone(),
            uid,
            why,
            note: truncate(note()),
        };
        match self.queue.try_send(pending) {
            Ok(()) => true,
            Err(_) => {
                crate::metrics::guard_event_dropped();
                false
            }
        }
    }
}

fn truncate(mut note: String) -> String {
    if note.len() > MAX_NOTE_BYTES {
        let mut end = MAX_NOTE_BYTES - 3;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push_str("...");
    }
    note
}

/// Writes the Events offered, one at a time, each within `deadline`.
async fn write(
    client: Client,
    instance: String,
    deadline: Duration,
    mut pending: mpsc::Receiver<Pending>,
) {
    let api = Api::<Event>::namespaced(client, EVENT_NAMESPACE);
    while let Some(p) = pending.recv().await {
        let event = event(&p, &instance);
        let written = tokio::time::timeout(deadline, api.create(&PostParams::default(), &event))
            .await
            .map_err(|_| format!("no answer within {deadline:?}"))
            .and_then(|r| r.map_err(|e| e.to_string()));
        match written {
            Ok(_) => tracing::debug!(node = %p.node, reason = p.why.reason(), "event written"),
            Err(error) => {
                crate::metrics::guard_event_dropped();
                tracing::warn!(node = %p.node, reason = p.why.reason(), %error, "cannot write the guard's event on the node");
            }
        }
    }
}

/// Longest name of an object (a DNS subdomain).
const MAX_NAME: usize = 253;

/// As kubectl and kube's recorder name them: the object's name and a unique suffix; a node's
/// name too long for that is cut (node names are DNS subdomains, so the cut name is one too,
/// once its trailing dots or dashes are gone).
fn event_name(node: &str, now: jiff::Timestamp) -> String {
    let suffix = format!(".{:x}", now.as_nanosecond());
    let room = MAX_NAME - suffix.len();
    let mut prefix = &node[..node.len().min(room)];
    while !node.is_char_boundary(prefix.len()) {
        prefix = &node[..prefix.len() - 1];
    }
    let prefix = prefix.trim_end_matches(['.', '-']);
    format!("{prefix}{suffix}")
}

fn event(p: &Pending, instance: &str) -> Event {
    let now = jiff::Timestamp::now();
    Event {
        metadata: ObjectMeta {
            name: Some(event_name(&p.node, now)),
            namespace: Some(EVENT_NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(now)),
        action: Some("Evict".to_owned()),
        reason: Some(p.why.reason().to_owned()),
        note: Some(p.note.clone()),
        type_: Some("Warning".to_owned()),
        regarding: Some(ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Node".to_owned()),
            name: Some(p.node.to_string()),
            uid: p.uid.as_deref().map(str::to_owned),
            ..ObjectReference::default()
        }),
        reporting_controller: Some(REPORTING_CONTROLLER.to_owned()),
        reporting_instance: Some(instance.to_owned()),
        ..Event::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events() -> (NodeEvents, mpsc::Receiver<Pending>) {
        let (queue, pending) = mpsc::channel(QUEUE);
        (
            NodeEvents {
                queue,
                last: Throttle::default(),
                logged: Throttle::default(),
            },
            pending,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn one_event_per_node_and_reason_per_interval() {
        let (events, mut pending) = events();
        let w1: Arc<str> = "w1".into();
        let w2: Arc<str> = "w2".into();
        assert!(events.offer(&w1, None, Why::Held, || "held".into()));
        assert!(!events.offer(&w1, None, Why::Held, || "held again".into()));
        assert!(events.offer(&w1, None, Why::Overridden, || "override".into()));
        assert!(events.offer(&w2, None, Why::Held, || "held".into()));
        tokio::time::advance(EVENT_INTERVAL).await;
        assert!(events.offer(&w1, None, Why::Held, || "held later".into()));
        let mut notes = Vec::new();
        while let Ok(p) = pending.try_recv() {
            notes.push(format!("{} {} {}", p.node, p.why.reason(), p.note));
        }
        assert_eq!(
            notes,
            [
                "w1 MaintenanceHeld held",
                "w1 MaintenanceOverride override",
                "w2 MaintenanceHeld held",
                "w1 MaintenanceHeld held later"
            ]
        );
    }

    #[test]
    fn every_node_name_makes_a_valid_event_name() {
        let now: jiff::Timestamp = "2026-11-25T10:00:00Z".parse().unwrap();
        assert_eq!(
            event_name("w1", now),
            format!("w1.{:x}", now.as_nanosecond())
        );
        // The longest node names: 253 characters, cut wherever the suffix needs room.
        let dashed = format!("{}a", "a-".repeat(126));
        let dotted = format!("{}a", "a.".repeat(126));
        for node in [dashed.as_str(), dotted.as_str(), &"n".repeat(253)] {
            let name = event_name(node, now);
            assert!(name.len() <= MAX_NAME, "{} characters", name.len());
            assert!(
                !name.contains("..") && !name.contains("-.") && !name.starts_with('.'),
                "{name}"
            );
            assert!(name.starts_with(&node[..200]), "{name}");
        }
    }

    #[test]
    fn a_long_note_is_cut_on_a_character() {
        let note = truncate("é".repeat(800));
        assert!(note.len() <= MAX_NOTE_BYTES);
        assert!(note.ends_with("..."));
    }

    #[test]
    fn the_event_regards_the_node_by_uid() {
        let e = event(
            &Pending {
                node: "w1".into(),
                uid: Some("u-1".into()),
                why: Why::Held,
                note: "n".into(),
            },
            "ifo-apiserver-0",
        );
        let regarding = e.regarding.unwrap();
        assert_eq!(regarding.kind.as_deref(), Some("Node"));
        assert_eq!(regarding.uid.as_deref(), Some("u-1"));
        assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(e.reason.as_deref(), Some("MaintenanceHeld"));
    }
}
