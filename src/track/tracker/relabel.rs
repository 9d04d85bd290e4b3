//! What the related parts of a ruleset (`spec.related`) tell the debounce table: the label
//! values each related object gives, kept in the table's [`RelatedValues`] so that they are
//! read under the same lock as the operations they label. When what a subject gets changes
//! (its VirtualMachineInstance moved to another node, a migration started), its active
//! operations are labelled again at once, each an `Upsert` at a new resourceVersion, so that
//! the node gates follow.

use super::super::related_values::{RelatedObject, RelatedValues, merge_labels};
use super::{Change, State, Tracker};
use crate::operation::{InFlightOperation, RuleSetInfo, build_labels};
use jiff::Timestamp;
use std::collections::HashSet;
use std::sync::Arc;

impl Tracker {
    /// Part `part` of `ruleset` evaluated the related `object`: `values` are its label
    /// expressions' results, in order (`None`: the expression failed; its value is kept).
    /// Returns the record changes: the subject's active operations labelled again, if what it
    /// gets changed. An evaluation by a ruleset that is not loaded, or by an older generation
    /// of it, changes nothing.
    pub(crate) fn relate(
        &mut self,
        ruleset: &RuleSetInfo,
        part: usize,
        object: RelatedObject<'_>,
        values: Vec<(String, Option<String>)>,
        now: Timestamp,
    ) -> Vec<Change> {
        let mut changes = self.tick(now);
        if self.accepts(ruleset)
            && let Some(at) = self.related.set(&ruleset.name, part, object, values)
        {
            self.relabel(ruleset, at, &mut changes);
        }
        changes
    }

    /// The related object `uid` of part `part` of `ruleset` was deleted: what it gave is gone.
    pub(crate) fn related_gone(
        &mut self,
        ruleset: &RuleSetInfo,
        part: usize,
        uid: &str,
        now: Timestamp,
    ) -> Vec<Change> {
        let mut changes = self.tick(now);
        if self.accepts(ruleset)
            && let Some(at) = self.related.remove(&ruleset.name, part, uid)
        {
            self.relabel(ruleset, at, &mut changes);
        }
        changes
    }

    /// A list of part `part` of `ruleset` in `namespace` (`None`: everywhere) saw exactly the
    /// related objects `present` (by uid): what the others gave is gone.
    pub(crate) fn related_resync(
        &mut self,
        ruleset: &RuleSetInfo,
        part: usize,
        namespace: Option<&str>,
        present: &HashSet<String>,
        now: Timestamp,
    ) -> Vec<Change> {
        let mut changes = self.tick(now);
        if self.accepts(ruleset) {
            for at in self.related.resync(&ruleset.name, part, namespace, present) {
                self.relabel(ruleset, at, &mut changes);
            }
        }
        changes
    }

    /// `ruleset` was loaded with `parts` related parts: what its other parts gave is
    /// forgotten (its subjects are evaluated again as its watchers restart).
    pub(crate) fn retain_related(&mut self, ruleset: &str, parts: usize) {
        self.related.retain_parts(ruleset, parts);
    }

    /// The labels related objects give subjects now.
    pub(crate) fn related(&self) -> &RelatedValues {
        &self.related
    }

    /// How many related objects the table holds values of.
    #[cfg(test)]
    pub(crate) fn related_len(&self) -> usize {
        self.related.len()
    }

    /// Makes the labels of `ruleset`'s active operations on the subject at `(namespace,
    /// name)` (`""`: cluster-scoped) again, from their own label values and the related ones
    /// now; each whose labels change is an `Upsert`. Completed records keep the labels they
    /// ended with. A scan of the ruleset's operations, done only when a subject's related
    /// values change.
    fn relabel(
        &mut self,
        ruleset: &RuleSetInfo,
        (namespace, name): (String, String),
        changes: &mut Vec<Change>,
    ) {
        let namespace = (!namespace.is_empty()).then_some(namespace.as_str());
        let related = self.related.get(&ruleset.name, namespace, &name);
        let start = super::Key::new(&ruleset.name, "", "");
        for (key, entry) in self
            .entries
            .range_mut(start..)
            .take_while(|(k, _)| k.ruleset == ruleset.name)
        {
            let record = &entry.record;
            if !matches!(entry.state, State::Active { .. })
                || record.subject.name != name
                || record.subject.namespace.as_deref() != namespace
            {
                continue;
            }
            // Restored and not evaluated since: its own values are not known; its next
            // evaluation labels it.
            let Some(own) = &entry.own else {
                continue;
            };
            let own: Vec<(&str, &str)> =
                own.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let (labels, _) = build_labels(
                &record.subject,
                ruleset,
                &key.operation,
                merge_labels(&related, &own),
            );
            if labels != record.labels {
                tracing::debug!(
                    ruleset = %ruleset.name,
                    subject = %record.subject.reference(),
                    operation = %key.operation,
                    "related values changed: operation labelled again"
                );
                entry.record = Arc::new(InFlightOperation {
                    labels,
                    ..(**record).clone()
                });
                changes.push(Change::Upsert(entry.record.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluate::{EvalError, Evaluation, RuleResult};
    use crate::operation::{Subject, test_ruleset};
    use crate::track::Settings;
    use jiff::SignedDuration;

    const NODE: &str = "ifo.kubevirt.io/node";
    const TARGET: &str = "ifo.kubevirt.io/target-node";

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn tracker() -> Tracker {
        let mut tr = Tracker::new(Settings {
            debounce: SignedDuration::from_secs(30),
            retain_completed: false,
            completed_retention: SignedDuration::ZERO,
            max_completed: 0,
        });
        tr.ruleset_loaded("vm-rules", Some(2));
        tr
    }

    fn ruleset(generation: i64) -> RuleSetInfo {
        test_ruleset("vm-rules", "kubevirt")
            .with_labels(&[("example.com/team", "virt")])
            .at_generation(generation)
    }

    fn vm(name: &str) -> Subject {
        Subject {
            api_version: "kubevirt.io/v1".into(),
            kind: "VirtualMachine".into(),
            name: name.into(),
            namespace: Some("vms".into()),
            uid: format!("uid-{name}"),
            generation: Some(1),
            owner_references: vec![],
        }
    }

    fn vmi<'a>(name: &'a str, uid: &'a str) -> RelatedObject<'a> {
        RelatedObject {
            namespace: Some("vms"),
            name,
            uid,
        }
    }

    fn on(node: &str, target: Option<&str>) -> Vec<(String, Option<String>)> {
        vec![
            (NODE.into(), Some(node.into())),
            (TARGET.into(), Some(target.unwrap_or_default().into())),
        ]
    }

    /// One rule, matching, with the subject's own label expressions giving `labels`.
    fn stopping(labels: &[(&str, Result<&str, ()>)]) -> Evaluation {
        Evaluation {
            rules: vec![RuleResult::Active {
                message: None,
                start_time: None,
                progress: None,
                stalled: None,
            }],
            labels: labels
                .iter()
                .map(|(k, v)| {
                    let v = v
                        .map(str::to_owned)
                        .map_err(|()| EvalError::Execution("no such key".into()));
                    (k.to_string(), v)
                })
                .collect(),
            starts: vec![],
            over_budget: None,
        }
    }

    fn observe(tr: &mut Tracker, subject: &Subject, e: &Evaluation, now: Timestamp) -> Vec<Change> {
        tr.observe(&ruleset(2), &["Stopping".into()], subject, e, now)
            .changes
    }

    fn label<'a>(change: &'a Change, key: &str) -> Option<&'a str> {
        change.record().labels.get(key)
    }

    #[test]
    fn a_subject_evaluated_gets_the_related_values_of_now() {
        let mut tr = tracker();
        assert!(
            tr.relate(&ruleset(2), 0, vmi("vm1", "i1"), on("node-a", None), t(0))
                .is_empty()
        );
        let changes = observe(
            &mut tr,
            &vm("vm1"),
            &stopping(&[("example.com/vm", Ok("vm1"))]),
            t(1),
        );
        let [created] = changes.as_slice() else {
            panic!("{changes:?}")
        };
        assert_eq!(label(created, NODE), Some("node-a"));
        assert_eq!(label(created, TARGET), None, "an empty value sets no label");
        assert_eq!(label(created, "example.com/vm"), Some("vm1"));
        assert_eq!(label(created, "example.com/team"), Some("virt"));
        // Another VM does not get vm1's values.
        let other = observe(&mut tr, &vm("vm2"), &stopping(&[]), t(1));
        assert_eq!(label(&other[0], NODE), None);
    }

    #[test]
    fn related_values_that_change_relabel_the_active_operations_at_once() {
        let mut tr = tracker();
        observe(
            &mut tr,
            &vm("vm1"),
            &stopping(&[("example.com/vm", Ok("vm1"))]),
            t(0),
        );
        // The VMI appears on node-a: the operation moves there.
        let changes = tr.relate(&ruleset(2), 0, vmi("vm1", "i1"), on("node-a", None), t(1));
        let [moved] = changes.as_slice() else {
            panic!("{changes:?}")
        };
        assert!(matches!(moved, Change::Upsert(_)));
        assert_eq!(label(moved, NODE), Some("node-a"));
        assert_eq!(
            label(moved, "example.com/vm"),
            Some("vm1"),
            "own labels stay"
        );
        assert_eq!(moved.record().last_detected, t(0), "not a detection");
        // The same values again: nothing to do.
        assert!(
            tr.relate(&ruleset(2), 0, vmi("vm1", "i1"), on("node-a", None), t(2))
                .is_empty()
        );
        // A migration starts: target-node too.
        let changes = tr.relate(
            &ruleset(2),
            0,
            vmi("vm1", "i1"),
            on("node-a", Some("node-b")),
            t(3),
        );
        assert_eq!(label(&changes[0], TARGET), Some("node-b"));
        // The VMI is deleted: the labels go.
        let changes = tr.related_gone(&ruleset(2), 0, "i1", t(4));
        assert_eq!(
            (label(&changes[0], NODE), label(&changes[0], TARGET)),
            (None, None)
        );
        assert_eq!(tr.related_len(), 0);
    }

    #[test]
    fn own_and_static_labels_take_precedence_and_an_old_generation_is_ignored() {
        let mut tr = tracker();
        tr.relate(
            &ruleset(2),
            0,
            vmi("vm1", "i1"),
            on("node-a", Some("node-b")),
            t(0),
        );
        let own = stopping(&[
            (NODE, Ok("pinned")),
            (TARGET, Ok("")),
            ("example.com/team", Ok("ignored")),
        ]);
        let changes = observe(&mut tr, &vm("vm1"), &own, t(1));
        assert_eq!(label(&changes[0], NODE), Some("pinned"), "own wins");
        assert_eq!(
            label(&changes[0], TARGET),
            Some("node-b"),
            "empty own yields"
        );
        assert_eq!(
            label(&changes[0], "example.com/team"),
            Some("virt"),
            "static wins"
        );
        // A relist of the VMIs that no longer has i1: the related target goes, own stays.
        let changes = tr.related_resync(&ruleset(2), 0, Some("vms"), &HashSet::new(), t(2));
        assert_eq!(label(&changes[0], NODE), Some("pinned"));
        assert_eq!(label(&changes[0], TARGET), Some(""));
        // A watcher still running generation 1 changes nothing.
        assert!(
            tr.relate(&ruleset(1), 0, vmi("vm1", "i1"), on("node-z", None), t(3))
                .is_empty()
        );
        assert_eq!(tr.related_len(), 0);
    }

    #[test]
    fn a_failed_own_label_keeps_its_own_value_not_a_related_one() {
        let mut tr = tracker();
        observe(
            &mut tr,
            &vm("vm1"),
            &stopping(&[(NODE, Ok("own-node"))]),
            t(0),
        );
        tr.relate(&ruleset(2), 0, vmi("vm1", "i1"), on("node-a", None), t(1));
        let changes = observe(&mut tr, &vm("vm1"), &stopping(&[(NODE, Err(()))]), t(2));
        assert!(changes.is_empty(), "unchanged: {changes:?}");
        // Own empty now: the related node shows.
        let changes = observe(&mut tr, &vm("vm1"), &stopping(&[(NODE, Ok(""))]), t(3));
        assert_eq!(label(&changes[0], NODE), Some("node-a"));
    }

    #[test]
    fn a_removed_ruleset_forgets_its_related_values() {
        let mut tr = tracker();
        tr.relate(&ruleset(2), 0, vmi("vm1", "i1"), on("node-a", None), t(0));
        tr.relate(&ruleset(2), 1, vmi("vm1", "p1"), on("node-b", None), t(0));
        assert_eq!(tr.related_len(), 2);
        tr.retain_related("vm-rules", 1);
        assert_eq!(
            tr.related().get_owned("vm-rules", Some("vms"), "vm1"),
            [(NODE.to_owned(), "node-a".to_owned())]
        );
        tr.ruleset_removed("vm-rules", t(1));
        assert_eq!(tr.related_len(), 0);
    }
}
