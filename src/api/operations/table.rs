//! Operations as kubectl prints them (through the Table writer, [`crate::api::table`]): Name,
//! Kind, Subject, Operation, Phase, Age, Message; with `-o wide`, Progress, Expected, Stalled.
//! Ten columns at most with `-A` (kubectl adds Namespace): the rest of an operation (component,
//! ruleset, outcome, completion) is in `kubectl ifo get`, `-o custom-columns` and the object
//! (docs/api.md).

use crate::api::table::{Column, Printed};
use crate::index::Stored;
use ifo_apimachinery::duration::{human_duration, table_age};
use jiff::SignedDuration;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// The cells of [`COLUMNS`].
type Cells<'a> = (
    &'a str,
    &'a str,
    &'a str,
    &'a str,
    &'a str,
    String,
    Cow<'a, str>,
    String,
    String,
    &'a str,
);

impl Printed for Stored {
    type Cells<'a> = Cells<'a>;
    type Object = RawValue;
    type Metadata = RawValue;
    const COLUMNS: &'static [Column] = &[
            Column::new(
                "Name",
                "string",
                "name",
                "Name must be unique within a namespace. Deterministic: subject, operation and a short hash of subject UID, ruleset and operation."),
            Column::new("Kind", "string", "", "Kind of the subject."),
            Column::new("Subject", "string", "", "Name of the subject."),
            Column::new("Operation", "string", "", "The operation in flight."),
            Column::new(
                "Phase",
                "string",
                "",
                "Active while detected (and during the debounce grace); Completed after.",
            ),
            Column::new("Age", "date", "", "Time since the operation started."),
            Column::new("Message", "string", "", "What the operation is doing now."),
            Column::new(
                "Progress",
                "string",
                "",
                "How far along the operation is, as its rule reports it.").wide(),
            Column::new(
                "Expected",
                "string",
                "",
                "Time left until the operation is expected to end (status.expectedEnd), or how long it is overdue.",
            )
            .wide(),
            Column::new(
                "Stalled",
                "string",
                "",
                "Why the operation is stalled, if it is (the Stalled condition's reason).",
            )
            .wide(),
    ];

    fn cells(&self, now: jiff::Timestamp) -> Cells<'_> {
        let op = &self.op;
        let message = op.message.as_deref().unwrap_or("");
        // An operation in its grace says so where every reader looks: the message (and `-o
        // wide`'s Expected, the same clock).
        let message = match op.ending_at() {
            None => Cow::Borrowed(message),
            Some(at) => {
                let left = human_duration(at.duration_since(now).max(SignedDuration::ZERO));
                if message.is_empty() {
                    Cow::Owned(format!("ending in {left}"))
                } else {
                    Cow::Owned(format!("ending in {left}: {message}"))
                }
            }
        };
        (
            op.name.as_str(),
            op.subject.kind.as_str(),
            op.subject.name.as_str(),
            op.operation.as_str(),
            op.phase.as_str(),
            table_age(Some(op.created), now),
            message,
            op.progress().map(percent).unwrap_or_default(),
            op.expectation
                .as_ref()
                .map(|e| expected(e.end, e.p90_end, now))
                .unwrap_or_default(),
            op.stall().map_or("", |s| s.reason.as_str()),
        )
    }

    fn object(&self) -> &RawValue {
        Stored::object(self)
    }

    fn metadata(&self) -> &RawValue {
        Stored::metadata(self)
    }

    fn resource_version(&self) -> String {
        self.rv.to_string()
    }
}

/// `45%`, `45.5%`: a progress as people read it.
pub(super) fn percent(progress: f64) -> String {
    let tenths = (progress * 10.0).round() / 10.0;
    format!("{tenths}%")
}

/// `~4m` until an expected end, with the band's far edge where it reads otherwise (`~2m (≤5m)`),
/// `overdue 2m` past it.
pub(super) fn expected(
    end: jiff::Timestamp,
    p90: Option<jiff::Timestamp>,
    now: jiff::Timestamp,
) -> String {
    if end < now {
        return format!("overdue {}", table_age(Some(end), now));
    }
    let left = table_age(Some(now), end);
    match p90.map(|p90| table_age(Some(now), p90.max(end))) {
        Some(far) if far != left => format!("~{left} (≤{far})"),
        _ => format!("~{left}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::params::IncludeObject;
    use crate::api::table::row;
    use crate::operation::Ending;
    use crate::operation::test_record;
    use serde_json::Value;
    use std::sync::Arc;

    fn cells(stored: &Stored, now: jiff::Timestamp) -> Value {
        serde_json::to_value(row(stored, IncludeObject::None, "meta.k8s.io/v1", now)).unwrap()
            ["cells"]
            .clone()
    }

    #[test]
    fn an_ending_operation_says_so_in_its_message_and_its_expected_end() {
        let now: jiff::Timestamp = "2026-11-22T10:00:05Z".parse().unwrap();
        let mut op = (*test_record("vm1")).clone();
        op.message = Some("copying".into());
        let active = Stored::new(1, Arc::new(op.clone()));
        assert_eq!(cells(&active, now)[6], "copying");
        assert_eq!(cells(&active, now)[8], "");

        let at = "2026-11-22T10:00:30Z".parse().unwrap();
        op.ending = Some(Ending { since: now, at });
        // As history makes it: the expected end of an ending operation is its grace's end.
        op.expectation = Some(crate::operation::Expectation {
            end: at,
            basis: crate::operation::EstimateBasis::Grace,
            p90_end: None,
            overdue: None,
        });
        let ending = Stored::new(2, Arc::new(op.clone()));
        let shown = cells(&ending, now);
        assert_eq!(shown[4], "Active", "the phase stays Active");
        assert_eq!(shown[6], "ending in 25s: copying");
        assert_eq!(shown[8], "~25s");
        // Past the end (the grace not completed yet): never a negative time.
        let late = cells(&ending, "2026-11-22T10:01:00Z".parse().unwrap());
        assert_eq!(late[6], "ending in 0s: copying");

        op.message = None;
        let silent = Stored::new(3, Arc::new(op));
        assert_eq!(cells(&silent, now)[6], "ending in 25s");
    }

    #[test]
    fn a_history_estimate_shows_its_band_where_it_reads_otherwise() {
        let now: jiff::Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        let end = at("2026-11-22T10:02:00Z");
        assert_eq!(
            expected(end, Some(at("2026-11-22T10:05:00Z")), now),
            "~2m (≤5m)"
        );
        assert_eq!(
            expected(end, Some(at("2026-11-22T10:02:20Z")), now),
            "~2m (≤2m20s)"
        );
        // The same, none, or the edge before the end: the estimate alone.
        for p90 in [Some(end), None, Some(at("2026-11-22T10:01:00Z"))] {
            assert_eq!(expected(end, p90, now), "~2m");
        }
        assert_eq!(
            expected(
                at("2026-11-22T09:58:00Z"),
                Some(at("2026-11-22T10:05:00Z")),
                now
            ),
            "overdue 2m"
        );
    }
}
