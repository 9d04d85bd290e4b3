//! Server-side printing: the `meta.k8s.io` Table kubectl shows for `get` and `get -w`.

use super::duration::table_age;
use super::params::IncludeObject;
use crate::index::Stored;
use serde_json::{Value, json};

fn column(name: &str, type_: &str, format: &str, description: &str, priority: u8) -> Value {
    json!({"name": name, "type": type_, "format": format, "description": description, "priority": priority})
}

/// The same definitions for list and watch, so kubectl never re-prints its header.
pub fn columns() -> Value {
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
    ])
}

/// The `PartialObjectMetadata` form of a wire object.
pub fn partial_metadata(object: &Value, meta_api_version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": meta_api_version,
        "metadata": object.get("metadata").cloned().unwrap_or(Value::Null),
    })
}

/// One row; `object` is the wire object to embed (it may carry a different resourceVersion than
/// the stored one, e.g. for a DELETED event).
pub fn row(
    stored: &Stored,
    object: &Value,
    include: IncludeObject,
    meta_api_version: &str,
    now: jiff::Timestamp,
) -> Value {
    let op = &stored.op;
    let mut row = json!({
        "cells": [
            op.name,
            op.subject.kind,
            op.subject.name,
            op.operation,
            op.phase.as_str(),
            table_age(Some(op.created), now),
            op.message.as_deref().unwrap_or(""),
            op.component,
            op.ruleset,
            op.outcome.map(|o| o.as_str()).unwrap_or(""),
            op.completed.map(|c| table_age(Some(c), now)).unwrap_or_default(),
        ],
    });
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => row["object"] = partial_metadata(object, meta_api_version),
        IncludeObject::Object => row["object"] = object.clone(),
    }
    row
}

pub fn table(
    rows: Vec<Value>,
    meta_api_version: &str,
    resource_version: &str,
    continue_token: Option<String>,
) -> Value {
    let mut metadata = json!({"resourceVersion": resource_version});
    if let Some(token) = continue_token {
        metadata["continue"] = json!(token);
    }
    json!({
        "kind": "Table",
        "apiVersion": meta_api_version,
        "metadata": metadata,
        "columnDefinitions": columns(),
        "rows": rows,
    })
}
