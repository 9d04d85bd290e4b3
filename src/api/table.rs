//! Server-side printing: the `meta.k8s.io` Table kubectl shows for `get` and `get -w`, and the
//! `PartialObjectMetadata` form.
//!
//! Both borrow the stored wire objects and are serialised straight to the response: a list of
//! 10,000 rows copies no object, it only writes them out.

use super::params::IncludeObject;
use super::wire::ListMeta;
use crate::apimachinery::duration::table_age;
use crate::index::Stored;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
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
            "Component",
            "string",
            "",
            "Component that owns the operation.",
            1
        ),
        column(
            "RuleSet",
            "string",
            "",
            "OperationRuleSet that detected the operation.",
            1
        ),
        column("Outcome", "string", "", "How the operation ended.", 1),
        column(
            "Completed",
            "date",
            "",
            "Time since the operation completed.",
            1
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

/// Name, Kind, Subject, Operation, Phase, Age, Message, Component, RuleSet, Outcome, Completed,
/// Progress, Expected, Stalled.
type Cells<'a> = (
    &'a str,
    &'a str,
    &'a str,
    &'a str,
    &'a str,
    String,
    &'a str,
    &'a str,
    &'a str,
    &'a str,
    String,
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
    let cells = (
        op.name.as_str(),
        op.subject.kind.as_str(),
        op.subject.name.as_str(),
        op.operation.as_str(),
        op.phase.as_str(),
        table_age(Some(op.created), now),
        op.message.as_deref().unwrap_or(""),
        op.component.as_str(),
        op.ruleset.as_str(),
        op.outcome.map(|o| o.as_str()).unwrap_or(""),
        op.completed
            .map(|c| table_age(Some(c), now))
            .unwrap_or_default(),
        op.progress().map(percent).unwrap_or_default(),
        op.expected_end()
            .map(|end| expected(end, now))
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

/// `~4m` until an expected end, `overdue 2m` past it.
pub fn expected(end: jiff::Timestamp, now: jiff::Timestamp) -> String {
    if end >= now {
        format!("~{}", table_age(Some(now), end))
    } else {
        format!("overdue {}", table_age(Some(end), now))
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
