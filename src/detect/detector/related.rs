//! Where the detector treats the ruleset of a related part (`spec.related`, see
//! `ruleset::related`) apart from any other: it is watched, evaluated within its budget and
//! reported on like every ruleset, but what it evaluates labels its ruleset's subjects (the
//! tracker's related values) instead of making operations; and its health shows on its
//! ruleset's status.

use super::{Detector, nodes_of, now};
use crate::detect::{RuleSetHealth, WatchState};
use crate::evaluate::{EvalError, Evaluation};
use crate::operation::Subject;
use crate::ruleset::{CompiledRuleSet, RelatedPart, Target};
use crate::track::{RelatedObject, Tracker};
use std::collections::BTreeSet;

/// The related parts of a loaded ruleset: the name and target of each.
pub(super) type Parts = Vec<(String, Target)>;

impl Detector {
    /// `rs`, the ruleset of `part`, evaluated the related `object` (`evaluation`): its label
    /// values go to the related values of the subject it relates to, whose active operations
    /// are labelled again if they change.
    pub(super) fn relate(&self, part: &RelatedPart, object: &Subject, evaluation: &Evaluation) {
        let values = evaluation
            .labels
            .iter()
            .map(|(key, value)| (key.clone(), value.as_ref().ok().cloned()))
            .collect();
        let related = RelatedObject {
            namespace: object.namespace.as_deref(),
            name: &object.name,
            uid: &object.uid,
        };
        let at = now();
        self.with_tracker(|t| t.relate(&part.ruleset, part.index, related, values, at));
    }

    /// `rs` was loaded (a new generation, after [`Detector::reset_ruleset`]): its related parts
    /// are what [`Detector::reset_ruleset`] and [`Detector::ruleset_health`] cover from now on,
    /// and what parts it no longer has gave is forgotten.
    pub(crate) fn related_loaded(&self, rs: &CompiledRuleSet) {
        let parts: Parts = rs
            .related
            .iter()
            .map(|p| (p.info.name.clone(), p.target.clone()))
            .collect();
        self.tracker
            .lock()
            .retain_related(&rs.info.name, parts.len());
        if parts.is_empty() {
            self.related_parts.lock().remove(&rs.info.name);
        } else {
            self.related_parts
                .lock()
                .insert(rs.info.name.clone(), parts);
        }
    }

    /// The parts of `ruleset` as last loaded, forgotten: their health is reset with it.
    pub(super) fn take_parts(&self, ruleset: &str) -> Parts {
        self.related_parts
            .lock()
            .remove(ruleset)
            .unwrap_or_default()
    }

    /// What is known of `ruleset`, for its status: its own health, with that of its related
    /// parts folded in (their watches, errors, skipped objects and suspensions are its own).
    pub(crate) fn ruleset_health(&self, ruleset: &str) -> RuleSetHealth {
        let reader = self.health_reader();
        let mut health = reader.ruleset(ruleset);
        let parts = self
            .related_parts
            .lock()
            .get(ruleset)
            .cloned()
            .unwrap_or_default();
        for (index, (name, target)) in parts.iter().enumerate() {
            fold_part(&mut health, index, target, reader.ruleset(name));
        }
        health
    }
}

/// How far a watch state is from running, so that the worst of a ruleset's watches shows.
fn severity(state: &WatchState) -> u8 {
    match state {
        WatchState::Active => 0,
        WatchState::Starting => 1,
        WatchState::InvalidTarget(_) => 2,
        WatchState::Failed(_) => 3,
    }
}

/// Folds the health of related part `index` (of `target`) into its ruleset's `health`.
fn fold_part(health: &mut RuleSetHealth, index: usize, target: &Target, part: RuleSetHealth) {
    let about = |what: &str| format!("related[{index}] ({target}): {what}");
    if severity(&part.watch) > severity(&health.watch) {
        health.watch = match part.watch {
            WatchState::InvalidTarget(m) => WatchState::InvalidTarget(about(&m)),
            WatchState::Failed(m) => WatchState::Failed(about(&m)),
            other => other,
        };
    }
    health.evaluation_errors += part.evaluation_errors;
    if health.last_error.is_none() {
        health.last_error = part.last_error.map(|e| about(&e));
    }
    health.over_budget += part.over_budget;
    if health.last_over_budget.is_none() {
        health.last_over_budget = part.last_over_budget.map(|e| about(&e));
    }
    health.suspended.extend(part.suspended);
    health.skipped.extend(part.skipped);
    health.skipped_more += part.skipped_more;
}

/// The nodes `subject`'s operations would be labelled with by `rs` (see `nodes_of`), its
/// related values included: a node key its own labels leave empty takes the related value.
/// `tracker`: held by the caller.
pub(super) fn subject_nodes(
    rs: &CompiledRuleSet,
    tracker: &Tracker,
    subject: &Subject,
    labels: &[(String, Result<String, EvalError>)],
) -> Option<BTreeSet<String>> {
    if rs.related.is_empty() {
        return nodes_of(rs, labels);
    }
    let related =
        tracker
            .related()
            .get_owned(&rs.info.name, subject.namespace.as_deref(), &subject.name);
    nodes_of(rs, &with_related(labels, &related))
}

/// `labels` (a ruleset's own results) with `related` values below them: an own value that is
/// empty gives way to the related one, a key only related values give is added.
fn with_related(
    labels: &[(String, Result<String, EvalError>)],
    related: &[(String, String)],
) -> Vec<(String, Result<String, EvalError>)> {
    let mut out: Vec<(String, Result<String, EvalError>)> = labels
        .iter()
        .map(|(key, value)| {
            let from_related = related.iter().find(|(k, _)| k == key);
            match (value, from_related) {
                (Ok(v), Some((_, r))) if v.is_empty() => (key.clone(), Ok(r.clone())),
                _ => (key.clone(), value.clone()),
            }
        })
        .collect();
    for (key, value) in related {
        if !labels.iter().any(|(k, _)| k == key) {
            out.push((key.clone(), Ok(value.clone())));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{Health, Limits, Reach};
    use crate::evaluate::Engine;
    use crate::index::IndexReader;
    use crate::index::{GateScope, Index};
    use crate::track::Settings;
    use serde_json::json;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    const NODE: &str = "ifo.kubevirt.io/node";
    const TARGET: &str = "ifo.kubevirt.io/target-node";

    fn vmis() -> Target {
        Target {
            group: "kubevirt.io".into(),
            version: "v1".into(),
            resource: "virtualmachineinstances".into(),
        }
    }

    #[test]
    fn own_node_labels_win_and_empty_ones_give_way_to_related_ones() {
        let failed = EvalError::Execution("no such key".into());
        let own = vec![
            (NODE.to_owned(), Ok(String::new())),
            ("example.com/vm".to_owned(), Ok("vm1".to_owned())),
        ];
        let related = vec![
            (NODE.to_owned(), "node-a".to_owned()),
            (TARGET.to_owned(), "node-b".to_owned()),
        ];
        assert_eq!(
            with_related(&own, &related),
            [
                (NODE.to_owned(), Ok("node-a".to_owned())),
                ("example.com/vm".to_owned(), Ok("vm1".to_owned())),
                (TARGET.to_owned(), Ok("node-b".to_owned())),
            ]
        );
        // An own node label that fails stays failed: which node is unknown.
        let own = vec![(NODE.to_owned(), Err(failed.clone()))];
        assert_eq!(with_related(&own, &related)[0].1, Err(failed));
    }

    #[test]
    fn a_part_s_worst_watch_errors_and_skips_show_on_its_ruleset() {
        let mut health = RuleSetHealth {
            watch: WatchState::Active,
            ..RuleSetHealth::default()
        };
        let part = RuleSetHealth {
            watch: WatchState::Failed("list failed: forbidden".into()),
            evaluation_errors: 2,
            last_error: Some("label ifo.kubevirt.io/node: no such key".into()),
            skipped: [("u1".to_owned(), "vms/vm1: over budget".to_owned())].into(),
            ..RuleSetHealth::default()
        };
        fold_part(&mut health, 0, &vmis(), part);
        assert_eq!(
            health.watch,
            WatchState::Failed(
                "related[0] (kubevirt.io/v1/virtualmachineinstances): list failed: forbidden"
                    .into()
            )
        );
        assert_eq!(health.evaluation_errors, 2);
        assert!(health.last_error.as_deref().is_some_and(|e| {
            e.starts_with("related[0] (kubevirt.io/v1/virtualmachineinstances): label")
        }));
        assert_eq!(health.skipped.len(), 1);

        // A part that runs does not hide its ruleset's own trouble.
        let mut health = RuleSetHealth {
            watch: WatchState::Starting,
            ..RuleSetHealth::default()
        };
        let part = RuleSetHealth {
            watch: WatchState::Active,
            ..RuleSetHealth::default()
        };
        fold_part(&mut health, 0, &vmis(), part);
        assert_eq!(health.watch, WatchState::Starting);
    }

    /// VM rules whose node comes from the VMI of the same name (`node` reads `status.nodeName`
    /// as given: a VMI without it makes the expression fail).
    fn vm_rules(node: &str) -> Arc<CompiledRuleSet> {
        let spec = serde_json::from_value(json!({
            "component": "kubevirt",
            "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
            "labelExpressions": [{"key": "example.com/vm", "expression": "object.metadata.name"}],
            "rules": [{"operation": "Stopping",
                       "expression": "object.?status.?printableStatus.orValue('') == 'Stopping'"}],
            "related": [{
                "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachineinstances"},
                "match": "SameName",
                "labelExpressions": [
                    {"key": NODE, "expression": node},
                    {"key": TARGET, "expression": "object.?status.?migrationState.?targetNode.orValue('')"},
                ],
            }],
        }))
        .unwrap();
        Arc::new(crate::ruleset::compile(&Engine::new(), "vm-rules", Some(1), &spec).unwrap())
    }

    fn detector() -> (IndexReader, Arc<Health>, Detector) {
        let index = Index::new(1, 16, 16).into_handles();
        let health = Arc::new(Health::default());
        let tracker = Tracker::new(Settings {
            debounce: jiff::SignedDuration::ZERO,
            retain_completed: false,
            completed_retention: jiff::SignedDuration::ZERO,
            max_completed: 0,
        });
        let detector = Detector::new(tracker, index.writer, health.clone(), Limits::default());
        (index.reader, health, detector)
    }

    fn vm(status: &str) -> serde_json::Value {
        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
               "metadata": {"name": "vm1", "namespace": "vms", "uid": "vm-uid"},
               "status": {"printableStatus": status}})
    }

    fn vmi(status: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
               "metadata": {"name": "vm1", "namespace": "vms", "uid": "vmi-uid"},
               "status": status})
    }

    /// The node labels of the one operation in `index`.
    fn nodes(index: &IndexReader) -> (Option<String>, Option<String>) {
        let snapshot = index.snapshot();
        let [stored] = snapshot.items.as_slice() else {
            panic!("one operation: {}", snapshot.items.len())
        };
        let get = |k: &str| stored.op.labels.get(k).map(str::to_owned);
        (get(NODE), get(TARGET))
    }

    #[test]
    fn a_related_object_labels_its_subject_s_operation_and_moves_it() {
        let (index, _, detector) = detector();
        let rs = vm_rules("object.?status.?nodeName.orValue('')");
        detector.ruleset_loaded("vm-rules", rs.generation);
        detector.related_loaded(&rs);
        let part = rs.related[0].clone();

        detector.apply(&part, &vmi(json!({"nodeName": "node-a"})));
        assert_eq!(index.len(), 0, "a related object makes no operation");
        detector.apply(&rs, &vm("Stopping"));
        assert_eq!(nodes(&index), (Some("node-a".into()), None));
        assert_eq!(index.snapshot().items[0].op.ruleset, "vm-rules");

        // Migrating: both nodes; then on node-b alone. Each is a change of the index.
        let before = index.snapshot().rv;
        detector.apply(
            &part,
            &vmi(json!({"nodeName": "node-a", "migrationState": {"targetNode": "node-b"}})),
        );
        assert_eq!(
            nodes(&index),
            (Some("node-a".into()), Some("node-b".into()))
        );
        assert!(index.snapshot().rv > before);
        detector.apply(&part, &vmi(json!({"nodeName": "node-b"})));
        assert_eq!(nodes(&index), (Some("node-b".into()), None));

        // The VMI is gone: the operation is on no node.
        detector.delete(std::slice::from_ref(&part), "vmi-uid");
        assert_eq!(nodes(&index), (None, None));
    }

    #[test]
    fn a_related_node_label_that_fails_makes_node_gates_unknown_until_reset() {
        let (_, health, detector) = detector();
        let rs = vm_rules("object.status.nodeName");
        let part = rs.related[0].clone();
        detector.ruleset_loaded("vm-rules", rs.generation);
        detector.related_loaded(&rs);
        health.watching(&part.target, None);
        health.reaches(
            &part.target,
            BTreeMap::from([(part.info.name.clone(), Reach::of(&part))]),
        );
        health.resolved(&part.target, true, &[None]);
        health.listed(&part.target, &None, jiff::Timestamp::UNIX_EPOCH);
        let reader = detector.health_reader();
        let node = GateScope::Node("node-a".into());
        assert!(reader.stale_for_gate(&node).is_empty());

        detector.apply(&part, &vmi(json!({"phase": "Pending"})));
        let stale = reader.stale_for_gate(&node);
        assert_eq!(stale.len(), 1, "{stale:?}");
        assert!(
            stale[0].reason.to_string().contains("vm-rules/related[0]"),
            "{}",
            stale[0].reason
        );
        assert_eq!(detector.ruleset_health("vm-rules").evaluation_errors, 1);

        // A new generation forgets it, with its ruleset.
        detector.reset_ruleset("vm-rules");
        assert!(reader.stale_for_gate(&node).is_empty());

        // The related target's watch failing: node labels are unknown, node gates too.
        assert!(Reach::of(&part).nodes && Reach::of(&rs).nodes);
        health.failed(&part.target, &None, "list failed: forbidden".into());
        let stale = reader.stale_for_gate(&node);
        assert_eq!(stale.len(), 1, "{stale:?}");
        assert_eq!(stale[0].target, part.target);
    }
}
