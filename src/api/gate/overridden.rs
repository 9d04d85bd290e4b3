//! The `Overridden` condition of a node's gate: whether the node's maintenance override lets
//! every eviction through the guard, whatever `Clear` says, since when, why, and until when.
//! Present only while the node carries the override annotation; `Clear` is left as it is (the
//! override says nothing of what is in flight, only that the guard does not hold for it).
//!
//! | the override | `Overridden` | reason | lastTransitionTime |
//! |---|---|---|---|
//! | set, no end | `True` | `OverrideSet` | since when it is set |
//! | set, its end (an RFC 3339 time) ahead | `True` | `OverrideSetUntil` | since when it is set |
//! | set, its end not a time (a duration, which no time on the Node anchors, among them) | `False` (not in force) | `InvalidOverrideEnd` | since when it is set |
//! | its end passed | `False` | `OverrideEnded` | its end |

use ifo_model::{
    GATE_OVERRIDDEN_CONDITION, MAINTENANCE_OVERRIDE_ANNOTATION,
    MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION,
};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::inventory::{End, Override};

/// The `Overridden` condition of the gate of `node`, whose override is `o`, at `now`.
pub(crate) fn condition(node: &str, o: &Override, now: Timestamp) -> Condition {
    let reason = &o.reason;
    let lets_through = format!(
        "evictions of pods on node {node} are let through the maintenance guard whatever Clear \
         says ({MAINTENANCE_OVERRIDE_ANNOTATION}: {reason})"
    );
    let since = second(o.since());
    let (status, why, message, changed) = match (&o.end, o.ends_at()) {
        (End::Invalid(value), _) => (
            "False",
            "InvalidOverrideEnd",
            format!(
                "the override ({reason}) is not in force: {MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION} \
                 \"{value}\" is not an RFC 3339 time (such as 2026-11-22T18:00:00Z); evictions \
                 are held while the node is not clear until it is fixed or removed"
            ),
            since,
        ),
        (End::Relative(value), _) => (
            "False",
            "InvalidOverrideEnd",
            format!(
                "the override ({reason}) is not in force: {MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION} \
                 \"{value}\" is a duration, and an end must be a time no later write to the node \
                 can move: write when it ends as an RFC 3339 time (such as \
                 2026-11-22T18:00:00Z; `date -u -d +2hours +%FT%TZ` gives the time in two \
                 hours); evictions are held while the node is not clear until it is fixed or \
                 removed"
            ),
            since,
        ),
        (_, Some(end)) if !o.in_force(now) => (
            "False",
            "OverrideEnded",
            format!(
                "the override ({reason}) ended at {}: evictions are held again while the node is \
                 not clear; remove {MAINTENANCE_OVERRIDE_ANNOTATION} and \
                 {MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION} from the node",
                second(end)
            ),
            second(end),
        ),
        (End::At(_), Some(end)) => (
            "True",
            "OverrideSetUntil",
            format!("{lets_through}, since {since}, until {}", second(end)),
            since,
        ),
        (End::Never | End::At(_), _) => (
            "True",
            "OverrideSet",
            format!(
                "{lets_through}, since {since}, with no end: remove the annotation when the \
                 maintenance is done, or set {MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION}"
            ),
            since,
        ),
    };
    Condition {
        type_: GATE_OVERRIDDEN_CONDITION.to_owned(),
        status: status.to_owned(),
        reason: why.to_owned(),
        message,
        last_transition_time: Time(changed),
        observed_generation: None,
    }
}

/// Whole seconds, as Kubernetes writes times.
fn second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn at(t: &str) -> Timestamp {
        t.parse().unwrap()
    }

    fn set(end: End) -> Override {
        Override {
            reason: Arc::from("disk failing, INC-4711"),
            end,
            written: Some(at("2026-11-22T08:00:00.5Z")),
            seen: at("2026-11-22T09:00:00Z"),
        }
    }

    #[test]
    fn an_override_shows_in_force_since_it_was_set_until_its_end() {
        let now = at("2026-11-22T10:00:00Z");
        let c = condition("w1", &set(End::Never), now);
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
            ("Overridden", "True", "OverrideSet")
        );
        assert_eq!(c.last_transition_time.0, at("2026-11-22T08:00:00Z"));
        assert_eq!(
            c.message,
            "evictions of pods on node w1 are let through the maintenance guard whatever Clear \
             says (ifo.kubevirt.io/maintenance-override: disk failing, INC-4711), since \
             2026-11-22T08:00:00Z, with no end: remove the annotation when the maintenance is \
             done, or set ifo.kubevirt.io/maintenance-override-until"
        );

        let until = set(End::At(at("2026-11-22T12:00:00Z")));
        let c = condition("w1", &until, now);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "OverrideSetUntil")
        );
        assert!(
            c.message
                .ends_with("since 2026-11-22T08:00:00Z, until 2026-11-22T12:00:00Z"),
            "{}",
            c.message
        );

        // Past its end: False from the end on, saying what to clean up.
        let c = condition("w1", &until, at("2026-11-22T12:00:00Z"));
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "OverrideEnded")
        );
        assert_eq!(c.last_transition_time.0, at("2026-11-22T12:00:00Z"));
        assert!(
            c.message.starts_with(
                "the override (disk failing, INC-4711) ended at 2026-11-22T12:00:00Z: \
                 evictions are held again"
            ),
            "{}",
            c.message
        );
    }

    #[test]
    fn a_duration_is_not_in_force_and_says_what_to_write() {
        let c = condition(
            "w1",
            &set(End::Relative(Arc::from("2h"))),
            at("2026-11-22T10:00:00Z"),
        );
        not_in_force(&c, "\"2h\" is a duration");
        assert!(c.message.contains("as an RFC 3339 time"), "{}", c.message);
    }

    /// `c` says the override is not in force because its end, as `why` says, cannot be read.
    fn not_in_force(c: &Condition, why: &str) {
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "InvalidOverrideEnd")
        );
        let start = format!(
            "the override (disk failing, INC-4711) is not in force: \
             ifo.kubevirt.io/maintenance-override-until {why}"
        );
        assert!(c.message.starts_with(&start), "{}", c.message);
    }

    #[test]
    fn an_end_that_cannot_be_read_leaves_the_override_not_in_force() {
        let now = at("2026-11-22T10:00:00Z");
        let c = condition("w1", &set(End::Invalid(Arc::from("tomorrow"))), now);
        not_in_force(&c, "\"tomorrow\" is not an RFC 3339 time");
    }
}
