//! `plan`: the earliest time from which a node, a component, a namespace or the cluster is
//! expected to be clear for as long as asked, read off its gate's `status.nextWindow` (p90) or
//! `status.nextWindowP50` (p50) and its scheduled operations (`status.scheduled`), with the
//! search the gate's own window is found by ([`ifo_model::fit`]), so the plugin and the gate
//! agree. A window is counted from now at the earliest, and ends where the gate's list of
//! scheduled runs ends (`scheduledThrough`). Exit 0 with a window; 1 when none can be promised
//! now (an operation in flight without an expected end, one overdue, or the last expected end
//! passed while operations are still in flight; a window that would reach past the listed
//! runs); 2 when the server cannot
//! vouch for the scope (as `check`), the scope does not exist, or the server computes no window.
//! A node's answer also names the operations the cluster's gate announces, which a node's gate
//! cannot place (where they will run is not known until they start).

use anyhow::{Result, anyhow};
use ifo_apimachinery::duration::human_duration;
use ifo_model::{Fit, GateScheduled, GateWindow, MaintenanceGate, WindowReason};
use jiff::{SignedDuration, Timestamp};
use serde_json::json;

use super::{Context, emit};
use crate::Exit;
use crate::cli::Confidence;
use crate::format::{self, Output};
use crate::gate;
use crate::sanitize;

/// Whether `plan` gives a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Promise {
    /// A window (exit 0).
    Window,
    /// None can be promised now (exit 1).
    NoWindow,
    /// The server cannot vouch for the scope (exit 2, as `check`).
    Unknown,
}

/// What `plan` answers of one gate: whether it promises, and what it prints.
#[derive(Debug, PartialEq)]
pub(crate) struct Answer {
    pub(crate) promise: Promise,
    /// The window's start, when one is promised.
    pub(crate) start: Option<Timestamp>,
    /// When a scheduled operation is expected to close it.
    pub(crate) end: Option<Timestamp>,
    /// The window's reason as served, or [`WindowReason::RunningLate`] for a start that has
    /// passed.
    pub(crate) reason: String,
    /// One line, in words (sanitised: it carries names from the cluster).
    pub(crate) text: String,
}

/// `plan` of the gate `name` for `duration` at `confidence`.
pub(crate) async fn run(
    cx: &Context<'_>,
    name: &str,
    duration: SignedDuration,
    confidence: Confidence,
) -> Result<Exit> {
    let g = gate::get(cx.client, name).await.map_err(|e| match &e {
        kube::Error::Api(s) if s.code == 404 => gate::missing_error(name, s),
        _ => gate::explain(&e, "get"),
    })?;
    // A node's gate lists no announced operation (where one will run is not known before it
    // starts): the cluster's lists them, and the answer names those it cannot place.
    let cluster = if name.starts_with("node.") {
        Some(gate::get(cx.client, "cluster").await.ok())
    } else {
        None
    };
    let mut answer = answer(&g, duration, confidence, cx.now)?;
    if let Some(cluster) = cluster {
        answer.text.push_str(&unplaced(cluster.as_ref(), cx.now));
    }
    match cx.output {
        Output::Json | Output::Yaml => {
            let v = json!({
                "gate": name,
                "confidence": confidence.as_str(),
                "forSeconds": duration.as_secs(),
                "start": answer.start.map(|t| t.to_string()),
                "end": answer.end.map(|t| t.to_string()),
                "reason": answer.reason,
                "message": window(&g, confidence).map(|w| w.message.clone()),
            });
            emit(&if cx.output == Output::Json {
                format::to_json(&v)
            } else {
                format::to_yaml(&v)
            });
        }
        Output::Table | Output::Wide | Output::Name if answer.promise != Promise::Unknown => {
            emit(&format!("{}\n", answer.text));
        }
        _ => {}
    }
    match answer.promise {
        Promise::Window => Ok(Exit::Done),
        Promise::NoWindow => Ok(Exit::InFlight),
        Promise::Unknown => Err(anyhow!(
            "{}; the server cannot vouch for the scope:\n  {}",
            answer.text,
            gate::unknown_reasons(&g).join("\n  ")
        )),
    }
}

fn window(g: &MaintenanceGate, confidence: Confidence) -> Option<&GateWindow> {
    match confidence {
        Confidence::P90 => g.status.next_window.as_ref(),
        Confidence::P50 => g.status.next_window_p50.as_ref(),
    }
}

/// What `plan` says of `g` at `now`: an error only when the gate has no window at all (a server
/// that does not compute them).
pub(crate) fn answer(
    g: &MaintenanceGate,
    duration: SignedDuration,
    confidence: Confidence,
    now: Timestamp,
) -> Result<Answer> {
    let name = g.metadata.name.as_deref().unwrap_or_default();
    let place = place(name);
    let c = confidence.as_str();
    let w = window(g, confidence).ok_or_else(|| {
        anyhow!(
            "the server computes no window for gate {name} (no status.nextWindow): it is older than this plugin"
        )
    })?;
    let message = sanitize::line(&w.message);
    let start = w.start.as_ref().map(|t| t.0);
    let for_ = human_duration(duration);
    let none = |promise, reason: &str, why: String| Answer {
        promise,
        start: None,
        end: None,
        reason: reason.to_owned(),
        text: format!("No window of {for_} can be promised {place} ({c}): {why}"),
    };
    // A reason a later server adds reads as none of ours.
    let reason = w.reason.parse::<WindowReason>().ok();
    let from = match (start, reason) {
        (_, Some(WindowReason::ScopeUnknown)) => {
            return Ok(none(Promise::Unknown, &w.reason, message));
        }
        (Some(t), Some(WindowReason::ExpectedEnds)) if t <= now => {
            return Ok(none(
                Promise::NoWindow,
                WindowReason::RunningLate.as_str(),
                format!(
                    "the last expected end ({t}) has passed while {} still in flight; {message}",
                    in_flight(g.status.active_operations)
                ),
            ));
        }
        (Some(t), _) => t,
        (None, _) => return Ok(none(Promise::NoWindow, &w.reason, message)),
    };
    // Time already gone is no part of a window: it is counted from now at the earliest.
    let since = from;
    let from = from.max(now);
    let scheduled = &g.status.scheduled;
    let p90 = confidence == Confidence::P90;
    Ok(match ifo_model::fit(from, scheduled, p90, duration) {
        Fit::UnknownStart(s) => none(
            Promise::NoWindow,
            WindowReason::ScheduleUnknown.as_str(),
            format!(
                "scheduled {} may start at any time: {}",
                scheduled_op(s),
                sanitize::line(&s.message)
            ),
        ),
        Fit::NoDuration(s) => none(
            Promise::NoWindow,
            WindowReason::NoExpectedEnd.as_str(),
            format!(
                "scheduled {} starts before a window of {for_} opens, and its rule has not learned how long its operations take",
                scheduled_op(s)
            ),
        ),
        Fit::Window { start, next, after } => {
            let end = next.and_then(GateScheduled::start);
            let until = match (next, end) {
                (Some(s), Some(e)) => {
                    format!(" until {e} (when scheduled {} starts)", scheduled_op(s))
                }
                _ => String::new(),
            };
            let through = g.status.scheduled_through.as_ref().map(|t| t.0);
            match through {
                // Past the end of the list, a run may start that it does not show: promised
                // only as far as the list goes. A window longer than time can hold reaches past
                // it too.
                Some(t)
                    if end.is_none() && start.checked_add(duration).ok().is_none_or(|e| e > t) =>
                {
                    return Ok(none(
                        Promise::NoWindow,
                        WindowReason::NotListed.as_str(),
                        format!(
                            "a window from {start} would reach past {t}, up to when the gate lists the operations announced to start; what starts after it is not known"
                        ),
                    ));
                }
                _ => {}
            }
            let (reason, text) = match after {
                Some(s) => (
                    WindowReason::AfterScheduled.to_string(),
                    format!(
                        "Expected clear {place} for {for_} from {start} (in {}, {c}){until}: after scheduled {} is expected to end",
                        human_duration(start.duration_since(now)),
                        scheduled_op(s)
                    ),
                ),
                None if reason == Some(WindowReason::NothingInFlight) => (
                    w.reason.clone(),
                    format!(
                        "Clear now {place} for {for_}{} ({c}): nothing in flight since {since}{}",
                        if end.is_none() { " and on" } else { "" },
                        if until.is_empty() && name.starts_with("node.") {
                            ", and no operation is known to start on it".to_owned()
                        } else if until.is_empty() {
                            ", and no operation is known to start".to_owned()
                        } else {
                            format!(";{until}")
                        }
                    ),
                ),
                None => (
                    w.reason.clone(),
                    format!(
                        "Expected clear {place} for {for_} from {start} (in {}, {c}){until}: {message}",
                        human_duration(start.duration_since(now))
                    ),
                ),
            };
            Answer {
                promise: Promise::Window,
                start: Some(start),
                end,
                reason,
                text,
            }
        }
    })
}

/// What a node's answer adds of the operations the cluster's gate announces (`cluster`: its
/// gate, `None` when it could not be read): a node's gate cannot hold them, for where they will
/// run is not known until they start.
pub(crate) fn unplaced(cluster: Option<&MaintenanceGate>, now: Timestamp) -> String {
    let Some(cluster) = cluster else {
        return " (the operations announced in the cluster could not be read: any of them may \
                start on this node)"
            .to_owned();
    };
    let upcoming: Vec<&GateScheduled> = cluster
        .status
        .scheduled
        .iter()
        .filter(|s| s.start().is_none_or(|t| t >= now))
        .collect();
    match upcoming.first() {
        None => String::new(),
        Some(next) => {
            let more = match upcoming.len() - 1 {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            format!(
                "; not counted: {} announced in the cluster, whose node is not known until it \
                 starts (next: {}{more}; `kubectl ifo plan -A` counts them)",
                if upcoming.len() == 1 {
                    "1 operation".to_owned()
                } else {
                    format!("{} operations", upcoming.len())
                },
                scheduled_op(next)
            )
        }
    }
}

/// `CronJob billing/nightly Running (at 2026-11-27T02:00:00Z)`, sanitised.
fn scheduled_op(s: &GateScheduled) -> String {
    let at = s.start().map(|t| format!(" (at {t})")).unwrap_or_default();
    let name = s.subject.reference();
    sanitize::line(&format!("{} {name} {}{at}", s.subject.kind, s.operation))
}

/// `1 operation is`, `3 operations are`.
fn in_flight(n: u64) -> String {
    if n == 1 {
        "1 operation is".to_owned()
    } else {
        format!("{n} operations are")
    }
}

/// `on node worker-1`, `for component kubevirt`, `in namespace vms`, `in the cluster`.
fn place(gate: &str) -> String {
    let gate = sanitize::line(gate);
    match gate.split_once('.') {
        Some(("node", n)) => format!("on node {n}"),
        Some(("component", c)) => format!("for component {c}"),
        Some(("namespace", ns)) => format!("in namespace {ns}"),
        _ => "in the cluster".to_owned(),
    }
}

#[cfg(test)]
mod tests;
