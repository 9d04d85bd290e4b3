//! The gates as kubectl prints them: `NAME, CLEAR, ACTIVE, EXPECTED, OLDEST, MESSAGE` (the same
//! columns with `-o wide`: there is nothing more to say in a row), and the
//! `PartialObjectMetadata` form.

use std::sync::LazyLock;

use super::verdict::Gate;
use jiff::Timestamp;
use serde::Serialize;
use serde_json::{Value, json};

use crate::api::params::IncludeObject;
use crate::api::wire::ListMeta;
use crate::apimachinery::duration::{human_duration, table_age};

static COLUMNS: LazyLock<Value> = LazyLock::new(|| {
    let column = |name: &str, type_: &str, format: &str, description: &str| json!({"name": name, "type": type_, "format": format, "description": description, "priority": 0});
    json!([
        column(
            "Name",
            "string",
            "name",
            "The scope: cluster, node.<node>, component.<component> or namespace.<namespace>."
        ),
        column(
            "Clear",
            "string",
            "",
            "True: nothing in flight. False: operations in flight. Unknown: the server cannot vouch for the scope."
        ),
        column(
            "Active",
            "integer",
            "",
            "Operations in flight in the scope."
        ),
        column(
            "Expected",
            "string",
            "",
            "When the last of them is expected to end, from now."
        ),
        column(
            "Oldest",
            "string",
            "",
            "How long the oldest of them has been running."
        ),
        column(
            "Message",
            "string",
            "",
            "What blocks the scope, or why its state is unknown."
        ),
    ])
});

/// `PartialObjectMetadata` of a gate.
#[derive(Serialize)]
pub struct PartialMetadata<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    metadata: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
}

impl<'a> PartialMetadata<'a> {
    pub fn of(gate: &'a Gate, meta_api_version: &'static str) -> Self {
        PartialMetadata {
            kind: "PartialObjectMetadata",
            api_version: meta_api_version,
            metadata: &gate.metadata,
        }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum RowObject<'a> {
    Metadata(PartialMetadata<'a>),
    Object(&'a Gate),
}

/// One row.
#[derive(Serialize)]
pub struct Row<'a> {
    cells: (&'a str, &'a str, u64, String, String, &'a str),
    #[serde(skip_serializing_if = "Option::is_none")]
    object: Option<RowObject<'a>>,
}

/// `~4m` until `at`; `overdue` once it has passed.
pub fn expected_in(at: Timestamp, now: Timestamp) -> String {
    if at <= now {
        "overdue".to_owned()
    } else {
        format!("~{}", human_duration(at.duration_since(now)))
    }
}

pub fn row<'a>(
    gate: &'a Gate,
    include: IncludeObject,
    meta_api_version: &'static str,
    now: Timestamp,
) -> Row<'a> {
    let clear = gate.status.clear();
    let cells = (
        gate.metadata.name.as_deref().unwrap_or_default(),
        clear.map_or("Unknown", |c| c.status.as_str()),
        gate.status.active_operations,
        gate.status
            .expected_clear_time
            .as_ref()
            .map(|t| expected_in(t.0, now))
            .unwrap_or_default(),
        gate.status
            .operations
            .first()
            .map(|op| table_age(Some(op.start_time()), now))
            .unwrap_or_default(),
        clear.map_or("", |c| c.message.as_str()),
    );
    let object = match include {
        IncludeObject::None => None,
        IncludeObject::Metadata => Some(RowObject::Metadata(PartialMetadata::of(
            gate,
            meta_api_version,
        ))),
        IncludeObject::Object => Some(RowObject::Object(gate)),
    };
    Row { cells, object }
}

/// What a row shows of `gate` at `now`, as text: a Table watch sends a change of a gate only
/// when it differs (`kubectl get gates -w` prints a row for every event it is sent).
pub fn shown(gate: &Gate, now: Timestamp) -> String {
    serde_json::to_string(&row(gate, IncludeObject::None, "", now).cells).unwrap_or_default()
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

    #[test]
    fn expected_times_read_from_now() {
        let now: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        assert_eq!(
            expected_in("2026-11-22T10:04:00Z".parse().unwrap(), now),
            "~4m"
        );
        assert_eq!(
            expected_in("2026-11-22T09:59:00Z".parse().unwrap(), now),
            "overdue"
        );
    }
}
