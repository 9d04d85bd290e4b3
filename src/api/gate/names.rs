//! How a gate's messages name the subject of an operation.

use crate::operation::InFlightOperation;

/// `ns/name`, or `name` for a cluster-scoped subject.
pub(super) fn subject_name(op: &InFlightOperation) -> String {
    match &op.subject.namespace {
        Some(ns) => format!("{ns}/{}", op.subject.name),
        None => op.subject.name.clone(),
    }
}
