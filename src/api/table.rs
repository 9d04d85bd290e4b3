//! Server-side printing: the `meta.k8s.io` Table kubectl shows for `get` and `get -w`, and the
//! `PartialObjectMetadata` form.
//!
//! Both borrow the stored wire objects and are serialised straight to the response: a list of
//! 10,000 rows copies no object, it only writes them out.

use super::params::IncludeObject;
use super::wire::ListMeta;
use crate::apimachinery::duration::{human_duration, table_age};
use crate::index::Stored;
use jiff::SignedDuration;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::borrow::Cow;
use std::sync::LazyLock;

fn column(name: &str, type_: &str, format: &str, description: &str, priority: u8) -> Value {
    json!({"name": name, "type": type_, "format": format, "description": description, "priority": priority})
}

/// The same definitions for list and watch, so kubectl never re-prints its header. Built once.
static COLUMNS: LazyLock<Value> = LazyLock::new(|| {
    json!([
        column(
            "Name",
            "string",
            "name",
            "Name must be unique within a namespace. Deterministic: subject, operation and a short hash of subject UID, ruleset and operation.",
            0
        ),
        column("Kind", "string", "", "Kind of the subject.", 0),
        column("Subject", "string", "", "Name of the subject.", 0),
        column("Operation", "string", "", "The operation in flight.", 0),
        column(
            "Phase",
            "string",
            "",
            "Active while detected (and during the debounce grace); Completed after.",
            0
        ),
        column("Age", "date", "", "Time since the operation started.", 0),
        column(
            "Message",
            "string",
            "",
            "What the operation is doing now.",
            0
        ),
        column(
            "Progress",
            "string",
            "",
            "How far along the operation is, as its rule reports it.",
            1
        ),
        column(
            "Expected",
            "string",
            "",
            "Time left until the operation is expected to end (status.expectedEnd), or how long it is overdue.",
            1
        ),
        column(
            "Stalled",
            "string",
            "",
            "Why the operation is stalled, if it is (the Stalled condition's reason).",
            1
        ),
    ])
});

/// The `PartialObjectMetadata` form of a wire object.
#[derive(Serialize)]
pub struct PartialMetadata<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    metadata: &'a RawValue,
}

impl<'a> PartialMetadata<'a> {
    pub fn of(stored: &'a Stored, meta_api_version: &'static str) -> Self {
        PartialMetadata {
            kind: "PartialObjectMetadata",
            api_version: meta_api_version,
            metadata: stored.metadata(),
        }
    }
}

/// What a row embeds, per `includeObject`.
#[derive(Serialize)]
#[serde(untagged)]
enum RowObject<'a> {
    Metadata(PartialMetadata<'a>),
    Object(&'a RawValue),
}

/// Name, Kind, Subject, Operation, Phase, Age, Message; with `-o wide`, Progress, Expected,
/// Stalled. Ten columns at most with `-A` (kubectl adds Namespace): the rest of an operation
/// (component, ruleset, outcome, completion) is in `kubectl ifo get`, `-o custom-columns` and
/// the object (docs/api.md).
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

/// One row of a Table.
#[derive(Serialize)]
pub struct Row<'a> {
    cells: Cells<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    object: Option<RowObject<'a>>,
}

/// One row, embedding as much of the object as `include` asks for.
pub fn row<'a>(
    stored: &'a Stored,
    include: IncludeObject,
    meta_api_version: &'static str,
    now: jiff::Timestamp,
) -> Row<'a> {
    let op = &stored.op;
    let message = op.message.as_deref().unwrap_or("");
    // An operation in its grace says so where every reader looks: the message (and `-o wide`'s
    // Expected, the same clock).
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
    let cells = (
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
    );
    let object = match include {
        IncludeObject::None => None,
        IncludeObject::Metadata => Some(RowObject::Metadata(PartialMetadata::of(
            stored,
            meta_api_version,
        ))),
        IncludeObject::Object => Some(RowObject::Object(stored.object())),
    };
    Row { cells, object }
}

/// `45%`, `45.5%`: a progress as people read it.
pub fn percent(progress: f64) -> String {
    let tenths = (progress * 10.0).round() / 10.0;
    format!("{tenths}%")
}

/// `~4m` until an expected end, with the band's far edge where it reads otherwise (`~2m (≤5m)`),
/// `overdue 2m` past it.
pub fn expected(
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

/// A `meta.k8s.io` Table.
#[derive(Serialize)]
pub struct Table<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    metadata: ListMeta,
    #[serde(rename = "columnDefinitions")]
    column_definitions: &'static Value,
    rows: Vec<Row<'a>>,
}

pub fn table<'a>(
    rows: Vec<Row<'a>>,
    meta_api_version: &'static str,
    metadata: ListMeta,
) -> Table<'a> {
    Table {
        kind: "Table",
        api_version: meta_api_version,
        metadata,
        column_definitions: &COLUMNS,
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::Ending;
    use crate::operation::test_record;
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
        assert_eq!(
            expected(
                at("2026-11-22T10:02:00Z"),
                Some(at("2026-11-22T10:05:00Z")),
                now
            ),
            "~2m (≤5m)"
        );
        assert_eq!(
            expected(
                at("2026-11-22T10:02:00Z"),
                Some(at("2026-11-22T10:02:20Z")),
                now
            ),
            "~2m (≤2m20s)"
        );
        // The same, none, or the edge before the end: the estimate alone.
        for p90 in [
            Some(at("2026-11-22T10:02:00Z")),
            None,
            Some(at("2026-11-22T10:01:00Z")),
        ] {
            assert_eq!(expected(at("2026-11-22T10:02:00Z"), p90, now), "~2m");
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
