//! The maintenance guard: the door for evictions (`pods/eviction`, the door every drain goes
//! through: kubectl drain, kured, the node maintenance operator, the cluster autoscaler,
//! Cluster API, the machine config operator, the descheduler). The eviction of a pod bound to a
//! node whose gate is not `Clear` is refused with `429 TooManyRequests`, which every drain tool
//! retries, and a message that says what holds it, names the gate and the override.
//!
//! The decision ([`decide`]) is a pure function of what the server holds in memory: the pod's
//! node (the pods' placements, see `inventory::pods`), the node's gate (computed as
//! `kubectl get maintenancegate node.<node>` would read it), and the node's override annotation
//! (the inventory). No call to kube-apiserver is made on the admission path.
//!
//! | the pod | the node's gate | answer |
//! |---|---|---|
//! | not bound to a node, or a mirror pod | — | allowed |
//! | on a node the cluster no longer has | — | allowed |
//! | on a node | `Clear=True` | allowed |
//! | on a node with a maintenance override | not `Clear=True` | allowed, logged, Event, counted |
//! | on a node | `Clear=False` | 429: the operations in flight |
//! | on a node, or its node not known | `Clear=Unknown` | 429 (`GUARD_WHEN_UNKNOWN=deny`), or allowed (`allow`) |
//!
//! What a denial says: node-level facts only. An eviction's caller may not read gates (a
//! namespace's user evicting their own pod on a shared node), so the message says how many
//! operations are in flight on the node, of which kinds and operations, and when they are
//! expected to end, never a subject's namespace or name, nor the reasons detection is not
//! current (which may name objects); the gate, for those who may read it, says the rest.
//! The same facts are all that an unauthenticated caller of the door can learn (see the
//! `admission` module).
//!
//! Two doors, one decision: kube-apiserver asks both (two webhooks), the leader through the
//! Service `ifo-apiserver` and the standby through `ifo-guard` (the `lease` module marks their
//! pods), and refuses the eviction if either refuses. A crashed replica's address refuses
//! connections until kubelet reports it (about a second), which `failurePolicy: Ignore` lets
//! through; with a door on each replica, the other one still answers. Only the leader's door
//! counts its decisions, logs them and writes Events on nodes, so a drain's retries are counted
//! once.

use super::intake::{Caller, Intake};
use super::node_events::{NodeEvents, Why};
use super::reach::Reach;
use super::{REVIEW_DEADLINE, ReviewError};
use crate::config::WhenUnknown;
use crate::gate::{Gates, Judged, Verdict};
use crate::inventory::Inventory;
use crate::inventory::pods::{PodNode, Pods};
use crate::metrics::{AdmissionDoor, AdmissionTimer, GuardReason};
use axum::extract::{Request, State};
use axum::response::Response;
use ifo_model::MAINTENANCE_OVERRIDE_ANNOTATION;
use jiff::Timestamp;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::{DynamicObject, Status};
use std::sync::Arc;

/// Kinds of operation a denial names, at most, before it says how many more.
const KINDS_IN_MESSAGE: usize = 3;

/// The door's state.
pub(crate) struct Evictions {
    /// The facts the nodes' gates are judged on.
    pub(crate) gates: Gates,
    pub(crate) inventory: Arc<Inventory>,
    pub(crate) pods: Arc<Pods>,
    pub(crate) when_unknown: WhenUnknown,
    pub(crate) events: NodeEvents,
    /// Who may call, and the turns of reading (see `intake`): set by the router.
    pub(crate) intake: Arc<Intake>,
    /// What tells the checks that kube-apiserver reaches the doors (see `reach`).
    pub(crate) reach: Reach,
}

/// What the guard knows of a node's gate, as far as a decision needs it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum NodeVerdict {
    /// The cluster has no such node, and nothing in flight names it.
    Gone,
    /// `Clear=True`.
    Clear,
    /// `Clear=False`: `active` operations in flight; the kinds and operations of those the
    /// gate lists (subject kind, operation, expected end), and when all are expected to end.
    InFlight {
        active: u64,
        operations: Vec<(String, String, Option<Timestamp>)>,
        expected_clear: Option<Timestamp>,
    },
    /// `Clear=Unknown`: the resources whose detection is not current (empty: the server is
    /// starting, or cannot tell whether the node exists).
    Unknown { stale: Vec<String> },
}

impl NodeVerdict {
    /// What a node's gate, judged (`None`: it does not exist), tells the guard.
    fn of(judged: Option<Judged>) -> NodeVerdict {
        let Some(Judged {
            verdict,
            members,
            feeds,
            ..
        }) = judged
        else {
            return NodeVerdict::Gone;
        };
        match verdict {
            Verdict::Clear => NodeVerdict::Clear,
            Verdict::InFlight => NodeVerdict::InFlight {
                active: members.active as u64,
                operations: members
                    .operations
                    .iter()
                    .map(|op| {
                        let end = op.clears_at();
                        (op.subject.kind.clone(), op.operation.clone(), end)
                    })
                    .collect(),
                expected_clear: members.expected_clear,
            },
            Verdict::Unknown(_) => NodeVerdict::Unknown {
                stale: feeds.stale.iter().map(|s| s.resource()).collect(),
            },
        }
    }
}

/// What the guard decided on one review.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Decision {
    /// Whether the eviction may go on.
    pub allowed: bool,
    /// Why, from a fixed set (the metric's label).
    pub reason: GuardReason,
    /// The node of the pod, when known.
    pub node: Option<Arc<str>>,
    /// What a denial says (and what an override's log and Event say).
    pub message: String,
}

impl Decision {
    fn allow(reason: GuardReason, node: Option<Arc<str>>) -> Decision {
        Decision {
            allowed: true,
            reason,
            node,
            message: String::new(),
        }
    }
}

/// The decision on an eviction review (see the [module](self)): `pod_node` says where a pod
/// runs, `gate` reads a node's verdict, `override_of` a node's maintenance override.
pub(crate) fn decide(
    request: &AdmissionRequest<DynamicObject>,
    pod_node: impl FnOnce(&str, &str) -> PodNode,
    gate: impl FnOnce(&str) -> NodeVerdict,
    override_of: impl FnOnce(&str) -> Option<Arc<str>>,
    when_unknown: WhenUnknown,
    now: Timestamp,
) -> Decision {
    if !super::review::is_eviction(request) {
        // Never deny what the guard was not configured for.
        return Decision::allow(GuardReason::NotAnEviction, None);
    }
    let namespace = request.namespace.as_deref().unwrap_or_default();
    let pod = format!("{namespace}/{}", request.name);
    let node = match pod_node(namespace, &request.name) {
        PodNode::Bound(node) => node,
        PodNode::Unbound => return Decision::allow(GuardReason::Unbound, None),
        PodNode::Mirror(node) => return Decision::allow(GuardReason::Mirror, Some(node)),
        PodNode::NotSeen => {
            return unknown(
                when_unknown,
                None,
                format!(
                    "the guard has not seen pod {pod} yet, so it cannot tell which node it runs \
                     on; retrying will tell"
                ),
            );
        }
        PodNode::Unknown(why) => {
            return unknown(
                when_unknown,
                None,
                format!("the guard cannot tell which node pod {pod} runs on: {why}"),
            );
        }
    };
    let verdict = gate(&node);
    let held = match &verdict {
        NodeVerdict::Gone => return Decision::allow(GuardReason::NodeGone, Some(node)),
        NodeVerdict::Clear => return Decision::allow(GuardReason::Clear, Some(node)),
        NodeVerdict::InFlight {
            active,
            operations,
            expected_clear,
        } => in_flight_message(&node, *active, operations, *expected_clear, now),
        NodeVerdict::Unknown { stale } => unknown_message(&node, stale),
    };
    if let Some(why) = override_of(&node) {
        return Decision {
            allowed: true,
            reason: GuardReason::Override,
            message: format!(
                "an eviction let through by the node's maintenance override \
                 ({MAINTENANCE_OVERRIDE_ANNOTATION}: {why}) while {held}"
            ),
            node: Some(node),
        };
    }
    let message = format!("{held}; {}", remedy(&node));
    match verdict {
        NodeVerdict::Unknown { .. } => unknown(when_unknown, Some(node), message),
        _ => Decision {
            allowed: false,
            reason: GuardReason::InFlight,
            node: Some(node),
            message,
        },
    }
}

/// The decision when the guard cannot vouch for the node: as `GUARD_WHEN_UNKNOWN` says.
fn unknown(when_unknown: WhenUnknown, node: Option<Arc<str>>, message: String) -> Decision {
    Decision {
        allowed: when_unknown == WhenUnknown::Allow,
        reason: GuardReason::Unknown,
        node,
        message,
    }
}

/// `kubectl get maintenancegate node.w1 says more; to evict anyway, …`.
fn remedy(node: &str) -> String {
    format!(
        "kubectl get maintenancegate node.{node} says more; to evict anyway: kubectl annotate \
         node {node} {MAINTENANCE_OVERRIDE_ANNOTATION}=\"<reason>\""
    )
}

/// `node w1 is not clear for maintenance: 2 operations in flight (VirtualMachine Migrating,
/// expected to end in ~40s; ClusterServiceVersion Installing)`.
fn in_flight_message(
    node: &str,
    active: u64,
    operations: &[(String, String, Option<Timestamp>)],
    expected_clear: Option<Timestamp>,
    now: Timestamp,
) -> String {
    // Grouped by kind and operation, in the gate's order (oldest first).
    let mut kinds: Vec<(&str, &str, usize, Option<Timestamp>)> = Vec::new();
    for (kind, operation, end) in operations {
        match kinds
            .iter_mut()
            .find(|(k, o, _, _)| k == kind && o == operation)
        {
            Some((_, _, count, latest)) => {
                *count += 1;
                *latest = (*latest).max(*end);
            }
            None => kinds.push((kind, operation, 1, *end)),
        }
    }
    let mut parts: Vec<String> = kinds
        .iter()
        .take(KINDS_IN_MESSAGE)
        .map(|(kind, operation, count, end)| {
            let times = if *count > 1 {
                format!("{count}× ")
            } else {
                String::new()
            };
            let end = end
                .map(|t| format!(", {}", expected(t, now)))
                .unwrap_or_default();
            format!("{times}{kind} {operation}{end}")
        })
        .collect();
    if kinds.len() > KINDS_IN_MESSAGE {
        parts.push("others".to_owned());
    }
    let count = if active == 1 {
        "1 operation".to_owned()
    } else {
        format!("{active} operations")
    };
    let clear = expected_clear
        .map(|t| format!("; the node is expected to be clear {}", when(t, now)))
        .unwrap_or_default();
    format!(
        "node {node} is not clear for maintenance: {count} in flight ({}){clear}",
        parts.join("; ")
    )
}

/// `node w1 is not known to be clear for maintenance: …`.
fn unknown_message(node: &str, stale: &[String]) -> String {
    let why = if stale.is_empty() {
        "the server cannot vouch for it yet (it is starting, or cannot list the cluster's nodes)"
            .to_owned()
    } else {
        format!(
            "detection that can reach it is not current ({})",
            stale.join(", ")
        )
    };
    format!(
        "node {node} is not known to be clear for maintenance: {why}, so operations in flight \
         there cannot be ruled out"
    )
}

/// `expected to end in ~40s`, or `overdue by ~2m`.
fn expected(end: Timestamp, now: Timestamp) -> String {
    let seconds = end.as_second() - now.as_second();
    if seconds >= 0 {
        format!("expected to end in {}", approximately(seconds))
    } else {
        format!("overdue by {}", approximately(-seconds))
    }
}

/// `in ~40s`, or `any moment now` for a time past.
fn when(t: Timestamp, now: Timestamp) -> String {
    let seconds = t.as_second() - now.as_second();
    if seconds > 0 {
        format!("in {}", approximately(seconds))
    } else {
        "any moment now".to_owned()
    }
}

fn approximately(seconds: i64) -> String {
    match seconds {
        s if s < 90 => format!("~{s}s"),
        s if s < 90 * 60 => format!("~{}m", (s + 30) / 60),
        s => format!("~{}h", (s + 1800) / 3600),
    }
}

impl Evictions {
    /// The decision on `request`, read from memory; then what follows from it at each door:
    /// the count (by door), a log line, and at the leader's door an Event on the node, each
    /// rate-limited (see `node_events`). Nothing is logged or written for a review that did
    /// not come from kube-apiserver where the doors can tell (`caller`).
    fn answer(
        &self,
        request: &AdmissionRequest<DynamicObject>,
        door: AdmissionDoor,
        caller: Caller,
    ) -> AdmissionResponse {
        if self.reach.is_check(request) {
            // A check that kube-apiserver reaches the doors: answered, and nothing else.
            let mut response = AdmissionResponse::from(request);
            response.warnings = Some(vec![self.reach.answer(door)]);
            return response;
        }
        let decision = decide(
            request,
            |namespace, name| self.pods.node_of(namespace, name),
            |node| NodeVerdict::of(self.gates.node(node)),
            |node| {
                self.inventory
                    .node(node)
                    .and_then(|facts| facts.maintenance_override)
            },
            self.when_unknown,
            Timestamp::now(),
        );
        let mut response = AdmissionResponse::from(request);
        if !decision.allowed {
            response.allowed = false;
            // 429: every drain tool retries it (a 403, the default, aborts the pod's eviction).
            // No Retry-After: client-go would retry by itself first and hide the message from
            // kubectl drain for that long.
            response.result = Status::failure(&decision.message, "TooManyRequests").with_code(429);
        }
        crate::metrics::guard_decision(door, decision.allowed, decision.reason);
        let Some(node) = &decision.node else {
            return response;
        };
        let why = match (decision.allowed, decision.reason) {
            (true, GuardReason::Override) => Why::Overridden,
            (false, GuardReason::InFlight) => Why::Held,
            (false, GuardReason::Unknown) => Why::Unverified,
            _ => return response,
        };
        if request.dry_run {
            return response;
        }
        // Names from the review are the caller's words: logged escaped (`?`), never raw.
        let pod = format!(
            "{}/{}",
            request.namespace.as_deref().unwrap_or_default(),
            request.name
        );
        let user = request.user_info.username.as_deref().unwrap_or_default();
        if door == AdmissionDoor::EvictionsStandby {
            // The standby's refusals hold drains too: said once a minute a node, so that a
            // standby that cannot vouch for a node the leader calls clear is seen.
            if !decision.allowed && self.events.throttled(node, why) {
                tracing::info!(door = "evictions_standby", node = ?node, pod = ?pod, user = ?user, caller = caller.as_str(), reason = decision.reason.as_str(), message = ?decision.message, "eviction held by the standby (logged once a minute a node)");
            }
            return response;
        }
        let uid = self.inventory.node(node).and_then(|facts| facts.uid);
        // Events regard the node and say node-level facts only: never the pod or its tenant.
        let offered = self.events.offer(node, uid, why, || match why {
            Why::Overridden => decision.message.clone(),
            _ => format!("evictions refused: {}", decision.message),
        });
        match why {
            // Every eviction an override lets through is logged: each is let through once, so
            // a drain tool's retries do not repeat it.
            Why::Overridden => {
                tracing::info!(node = ?node, pod = ?pod, user = ?user, caller = caller.as_str(), message = ?decision.message, "maintenance override used")
            }
            _ if offered => {
                tracing::info!(node = ?node, pod = ?pod, user = ?user, caller = caller.as_str(), message = ?decision.message, "eviction held (logged once a minute a node)")
            }
            _ => {}
        }
        response
    }
}

/// `POST /admission/evictions`: an AdmissionReview in, its answer out (an HTTP error when the
/// review cannot be read or answered in time).
pub(super) async fn review(State(guard): State<Arc<Evictions>>, request: Request) -> Response {
    answer_at(AdmissionDoor::Evictions, &guard, request).await
}

/// `POST /admission/evictions/standby`: the same answer, at the second door.
pub(super) async fn review_standby(
    State(guard): State<Arc<Evictions>>,
    request: Request,
) -> Response {
    answer_at(AdmissionDoor::EvictionsStandby, &guard, request).await
}

async fn answer_at(door: AdmissionDoor, guard: &Evictions, request: Request) -> Response {
    let timer = AdmissionTimer::start(door);
    let answered = tokio::time::timeout(REVIEW_DEADLINE, async {
        let (caller, request) = guard.intake.admit(request).await?;
        let peer = Intake::peer(&request);
        // The body's length when known (its Content-Length, as hyper reads it).
        let length = axum::body::HttpBody::size_hint(request.body()).upper();
        let large = super::review::is_large(length);
        let limit = super::review::read_limit(large);
        let mut turn = guard.intake.read_turn(caller, peer, length, limit).await?;
        let bytes = turn
            .read(super::review::read_whole(request.into_body(), limit))
            .await?;
        let review = if large {
            // Parsed in one of a few turns (on the blocking pool past a size); until it has
            // one, what it holds counts among the bodies read, and can be taken back as theirs.
            let _parse = turn.until(guard.intake.parse_turn(caller, peer)).await?;
            turn.settle();
            if bytes.len() <= super::review::INLINE_PARSE_BYTES {
                super::review::parse_skipping(&bytes)?
            } else {
                tokio::task::spawn_blocking(move || super::review::parse_skipping(&bytes))
                    .await
                    .map_err(ReviewError::Failed)??
            }
        } else {
            turn.settle();
            super::review::parse_skipping(&bytes)?
        };
        drop(turn);
        // Never a panic on input: a decision that panics is an error answer, not a dropped
        // connection (kube-apiserver would wait out its timeout).
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            guard.answer(&review, door, caller)
        }))
        .map_err(|_| ReviewError::Panicked)
    })
    .await
    .unwrap_or(Err(ReviewError::TimedOut(REVIEW_DEADLINE)));
    if let Err(e) = &answered {
        crate::metrics::guard_error(door, e.kind());
    }
    let (response, decision) = super::respond(answered);
    timer.finish(decision);
    response
}

#[cfg(test)]
mod agreement_tests;
#[cfg(test)]
mod tests;
