//! A gate's next window (`status.nextWindow`, `status.nextWindowP50`): the earliest time from
//! which its scope is expected to be clear, or why none can be promised, from what the gate
//! already holds: its `Clear` condition and the ends of its operations, which the index reads in
//! the pass that finds the expected clear time (see [`crate::index::ScopeEnds`]).
//!
//! - Never while the scope is `Unknown`: what is in flight there is not known.
//! - Clear: the window is open, since the scope last cleared (the `Clear` condition's
//!   `lastTransitionTime`, not the time of the request: a gate changes only with what is in
//!   flight).
//! - Otherwise when the last operation is expected to end, at p90 from each operation's
//!   `expectedEndP90` (the end of its grace while it is ending, and its end extrapolated from
//!   its progress, which has no band), at p50 from its `expectedEnd`; rounded up to the second.
//!   None while an operation has no end (the oldest such is named), or is overdue by history:
//!   its expected end has passed and nothing says when it ends. An operation running late but
//!   not yet overdue moves the window with it: its expected ends move later as it runs (see
//!   `history::expectation`).
//! - Then among the scheduled operations of the scope (`status.scheduled`, see
//!   [`crate::schedule`]): the window closes (`end`) when the first of them after it is expected
//!   to start; one that starts before the window opens pushes it past its own expected end (its
//!   rule's p90 or median duration), and one whose duration is not known yet promises nothing
//!   from its start on; one whose next start is not known (its schedule cannot be read)
//!   promises nothing at all. The same search as `kubectl ifo plan --for` ([`ifo_model::fit`]).

use std::sync::Arc;

use ifo_model::{Fit, GateScheduled, GateWindow, WindowReason};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::gate::Verdict;
use crate::index::{GateEntry, LatestEnd, ScopeEnds};

/// A gate's verdict, and since when it holds (its `Clear` condition's `lastTransitionTime`).
#[derive(Clone, Debug)]
pub(super) struct Since {
    pub verdict: Verdict,
    pub since: Time,
}

/// The windows at p90 and at p50 of a gate whose `Clear` condition is `clear`, with `active`
/// operations in flight whose ends say `ends`, and `scheduled` operations (soonest first).
pub(super) fn windows(
    clear: &Since,
    active: usize,
    ends: &ScopeEnds<Arc<GateEntry>>,
    scheduled: &[GateScheduled],
) -> (GateWindow, GateWindow) {
    (
        among_scheduled(window("p90", clear, active, &ends.p90), scheduled),
        among_scheduled(window("p50", clear, active, &ends.p50), scheduled),
    )
}

/// `w`, the window after the operations in flight, moved past the `scheduled` operations that
/// start before it opens, and closed by the first that starts after.
fn among_scheduled(w: GateWindow, scheduled: &[GateScheduled]) -> GateWindow {
    let Some(from) = w.start.as_ref().map(|t| t.0) else {
        return w;
    };
    let p90 = w.confidence == "p90";
    let what = |s: &GateScheduled| {
        let start = s
            .start()
            .map(|t| format!(" (scheduled at {t})"))
            .unwrap_or_default();
        let name = s.subject.reference();
        format!("{} {name} {}{start}", s.subject.kind, s.operation)
    };
    match ifo_model::fit(from, scheduled, p90, SignedDuration::ZERO) {
        Fit::Window {
            start,
            next,
            after: None,
        } => GateWindow {
            end: next.and_then(GateScheduled::start).map(Time),
            start: Some(Time(start)),
            ..w
        },
        Fit::Window {
            start,
            next,
            after: Some(s),
        } => GateWindow {
            start: Some(Time(round_up(start))),
            end: next.and_then(GateScheduled::start).map(Time),
            reason: WindowReason::AfterScheduled.to_string(),
            message: format!(
                "when scheduled {} is expected to end, by its rule's {} duration",
                what(s),
                if p90 { "p90" } else { "median" }
            ),
            ..w
        },
        Fit::UnknownStart(s) => GateWindow {
            start: None,
            end: None,
            reason: WindowReason::ScheduleUnknown.to_string(),
            message: format!(
                "no window can be promised: scheduled {} may start at any time: {}",
                what(s),
                s.message
            ),
            ..w
        },
        Fit::NoDuration(s) => GateWindow {
            start: None,
            end: None,
            reason: WindowReason::NoExpectedEnd.to_string(),
            message: format!(
                "no window can be promised: scheduled {} starts before one opens, and its rule has not learned how long its operations take",
                what(s)
            ),
            ..w
        },
    }
}

/// The window at `confidence` (`p90` or `p50`) after the operations in flight.
pub(super) fn window(
    confidence: &str,
    clear: &Since,
    active: usize,
    end: &LatestEnd<Arc<GateEntry>>,
) -> GateWindow {
    let made = |start: Option<Time>, reason: WindowReason, message: String| GateWindow {
        confidence: confidence.to_owned(),
        start,
        end: None,
        reason: reason.to_string(),
        message,
    };
    match clear.verdict {
        Verdict::Clear => {
            return made(
                Some(clear.since.clone()),
                WindowReason::NothingInFlight,
                "nothing in flight: clear since the window started".to_owned(),
            );
        }
        Verdict::InFlight => {}
        Verdict::Unknown(_) => {
            return made(
                None,
                WindowReason::ScopeUnknown,
                format!(
                    "no window while the scope is Unknown ({}): what is in flight there is not known (see the Clear condition)",
                    clear.verdict.reason()
                ),
            );
        }
    }
    let what = |e: &GateEntry| {
        format!(
            "{} {} {}",
            e.subject.kind,
            e.subject.reference(),
            e.operation
        )
    };
    match end {
        LatestEnd::At(at, e) => made(
            Some(Time(round_up(*at))),
            WindowReason::ExpectedEnds,
            format!(
                "when the last of {} in flight is expected to end, by its {} end: {}",
                operations(active),
                if confidence == "p50" { "median" } else { "p90" },
                what(e)
            ),
        ),
        LatestEnd::Missing(e) => {
            let why = if e.clears_at().is_some() {
                "has an expected end but no p90 end"
            } else {
                "has no expected end (its rule has not learned enough durations, and it reports no progress)"
            };
            made(
                None,
                WindowReason::NoExpectedEnd,
                format!("no window can be promised: {} {why}", what(e)),
            )
        }
        LatestEnd::Overdue(e) => made(
            None,
            WindowReason::RunningLate,
            format!(
                "no window can be promised: {} runs past what its rule's operations take, and nothing says when it ends{}",
                what(e),
                e.stall()
                    .map(|s| format!(" ({})", s.message))
                    .unwrap_or_default()
            ),
        ),
        LatestEnd::Nothing => made(
            None,
            WindowReason::NoExpectedEnd,
            "no window can be promised: no expected end is known of the operations in flight"
                .to_owned(),
        ),
    }
}

/// `1 operation`, `3 operations`.
fn operations(n: usize) -> String {
    if n == 1 {
        "1 operation".to_owned()
    } else {
        format!("{n} operations")
    }
}

/// `t` rounded up to the second: a window does not start before the end it waits for.
fn round_up(t: Timestamp) -> Timestamp {
    let s = t.as_second() + i64::from(t.subsec_nanosecond() > 0);
    Timestamp::from_second(s).unwrap_or(t)
}

#[cfg(test)]
mod tests;
