//! Since when a node is cordoned (`spec.unschedulable`), for the holds that count only what
//! started on the node before it was cordoned: the operations whose rules set
//! [`ifo_model::NODE_HOLD_LABEL`] to [`ifo_model::STARTED_BEFORE_CORDON`] (a Job's pod, a
//! protected pod). A pod that started on a node already cordoned went there past the cordon
//! — placed by its creator's `spec.nodeName`, or by the scheduler because it tolerates the
//! cordon — and holds nothing there, whatever its owner writes on it: its start time is the
//! kubelet's, in a status its owner cannot write.
//!
//! The time is never earlier than the cordon, so nothing that started before it loses its
//! hold: the latest write of `spec.unschedulable` that the Node's `managedFields` record (the
//! write that cordoned it, or a later one by the same manager; only those who may write Nodes
//! write there), or when this server saw the node cordoned if that is earlier (it saw the
//! change happen, or it has no record to go by); kept while the node stays cordoned.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use kube::core::{ApiResource, NotUsed, Object, ObjectMeta};
use serde::Deserialize;

/// The part of a Node's spec that is decoded: the rest of the spec and the status are skipped
/// by the decoder.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct Schedulable {
    #[serde(default)]
    unschedulable: Option<bool>,
}

/// A Node as the inventory decodes it.
pub(crate) type NodeObject = Object<Schedulable, NotUsed>;

/// The resource [`NodeObject`] is read from.
pub(crate) fn node_resource() -> ApiResource {
    ApiResource::erase::<Node>(&())
}

/// Since when the node `meta` and `spec` describe is cordoned, read at `now`; `None` when it is
/// not.
pub(crate) fn since(meta: &ObjectMeta, spec: &Schedulable, now: Timestamp) -> Option<Timestamp> {
    if spec.unschedulable != Some(true) {
        return None;
    }
    Some(written(meta).map_or(now, |at| at.min(now)))
}

/// The time of the latest write of `spec.unschedulable` that `managedFields` record.
fn written(meta: &ObjectMeta) -> Option<Timestamp> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|entry| {
            entry
                .fields_v1
                .as_ref()
                .is_some_and(|fields| fields.0["f:spec"].get("f:unschedulable").is_some())
        })
        .filter_map(|entry| entry.time.as_ref().map(|t| t.0))
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, Time};
    use serde_json::json;

    fn at(t: &str) -> Timestamp {
        t.parse().unwrap()
    }

    fn entry(manager: &str, time: &str, fields: serde_json::Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Update".into()),
            time: Some(Time(at(time))),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        }
    }

    const NOW: &str = "2026-11-27T10:00:00Z";

    fn cordoned(yes: Option<bool>) -> Schedulable {
        Schedulable { unschedulable: yes }
    }

    #[test]
    fn a_node_not_cordoned_has_no_time() {
        let meta = ObjectMeta::default();
        assert_eq!(since(&meta, &cordoned(None), at(NOW)), None);
        assert_eq!(since(&meta, &cordoned(Some(false)), at(NOW)), None);
    }

    #[test]
    fn the_cordon_is_dated_by_the_latest_write_of_the_field_never_later_than_now() {
        let mut meta = ObjectMeta::default();
        // No record: when it is read.
        assert_eq!(since(&meta, &cordoned(Some(true)), at(NOW)), Some(at(NOW)));
        meta.managed_fields = Some(vec![
            entry(
                "kubelet",
                "2026-11-27T09:59:00Z",
                json!({"f:status": {"f:conditions": {}}}),
            ),
            entry(
                "kubectl-cordon",
                "2026-11-27T09:30:00Z",
                json!({"f:spec": {"f:unschedulable": {}}}),
            ),
            entry(
                "kubectl-label",
                "2026-11-27T09:45:00Z",
                json!({"f:metadata": {"f:labels": {"f:x": {}}}}),
            ),
        ]);
        assert_eq!(
            since(&meta, &cordoned(Some(true)), at(NOW)),
            Some(at("2026-11-27T09:30:00Z")),
            "the cordon's write, not the kubelet's or a label's"
        );
        // A clock ahead of this server's: never later than now.
        assert_eq!(
            since(&meta, &cordoned(Some(true)), at("2026-11-27T09:00:00Z")),
            Some(at("2026-11-27T09:00:00Z"))
        );
    }
}
