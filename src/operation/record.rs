//! The `InFlightOperation` record.

use jiff::Timestamp;
use serde_json::Value;

use super::LabelWarning;
use super::label_set::Labels;
use super::labels::build_labels;
use super::name::{object_name, occurrence_uid};
use super::phase::{Outcome, Phase};
use super::progress::{EstimateBasis, Expectation, Stall};
use super::ruleset::RuleSetInfo;
use super::subject::Subject;

pub(crate) use ifo_model::SELECTABLE_FIELDS;

/// `group/version` of the served records.
pub(super) const API_VERSION: &str = ifo_model::GROUP_VERSION;
/// Kind of operations on namespaced subjects (served in the subject's namespace).
pub(super) const NAMESPACED_KIND: &str = ifo_model::NAMESPACED_KIND;
/// Kind of operations on cluster-scoped subjects.
pub(super) const CLUSTER_KIND: &str = ifo_model::CLUSTER_KIND;

/// One visible state of one operation occurrence.
///
/// Immutable once built and shared as `Arc`: a change produces a new record, which lets the
/// index hand the same record to every watcher and serialise it once per resourceVersion.
#[derive(Debug, Clone, PartialEq)]
pub struct InFlightOperation {
    /// `metadata.name`, see [`object_name`].
    pub name: String,
    /// `metadata.uid`, see [`occurrence_uid`].
    pub uid: String,
    /// The subject's namespace; `None` makes this an `InFlightClusterOperation`.
    pub namespace: Option<String>,
    /// `metadata.creationTimestamp`: when the operation started.
    pub created: Timestamp,
    /// Labels: the rules' label expressions plus `ifo.kubevirt.io/*` ones.
    pub labels: Labels,
    /// The object the operation is about.
    pub subject: Subject,
    /// The operation's name from its rule (e.g. `Migrating`).
    pub operation: String,
    /// The OperationRuleSet whose rule detected it.
    pub ruleset: String,
    /// The ruleset's component (e.g. `kubevirt`).
    pub component: String,
    /// `Active` while detected (or within the debounce), then `Completed`.
    pub phase: Phase,
    /// The rule's message expression, as last evaluated.
    pub message: Option<String>,
    /// Set once completed.
    pub outcome: Option<Outcome>,
    /// When a rule last detected it.
    pub last_detected: Timestamp,
    /// When it completed.
    pub completed: Option<Timestamp>,
    /// The subject's `metadata.generation` when last evaluated.
    pub subject_generation: Option<i64>,
    /// The rulesets that detected it (the operator's `status.detectedBy`).
    pub detected_by: Vec<String>,
    /// The rule's `progress` expression, as last evaluated (percent, 0 to 100). Read it with
    /// [`Self::progress`].
    pub progress: Option<f64>,
    /// The rule's `stalled` expression, as last evaluated. What the object shows is
    /// [`Self::stall`]: this, or a stall judged from history.
    pub stalled: Option<Stall>,
    /// The expected end and any overdue stall, from the durations learned for its rule (see
    /// `history`); set on active operations only.
    pub expectation: Option<Expectation>,
    /// Set while no rule detects it and the debounce grace runs: it is still `Active`, but
    /// ending.
    pub ending: Option<Ending>,
}

/// An `Active` operation that no rule detects any more, within its debounce grace: it completes
/// at `at` unless a rule detects it again before. Served as the `Detected=False` condition
/// (reason `GracePeriod`) and `status.gracePeriodEnd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ending {
    /// When its rules stopped matching: its completion time if none matches again.
    pub since: Timestamp,
    /// When the grace runs out and it turns `Completed`.
    pub at: Timestamp,
}

impl InFlightOperation {
    /// A new `Active` occurrence that started at `start` and was last seen at `now`.
    ///
    /// `dynamic_labels` are the label expression results to apply (see [`build_labels`]);
    /// warnings about label keys that could not be used are returned with the record.
    pub fn new_active<'a>(
        ruleset: &RuleSetInfo,
        operation: &str,
        subject: &Subject,
        start: Timestamp,
        now: Timestamp,
        message: Option<String>,
        dynamic_labels: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (InFlightOperation, Vec<LabelWarning>) {
        let (labels, warnings) = build_labels(subject, ruleset, operation, dynamic_labels);
        let record = InFlightOperation {
            name: object_name(&subject.name, operation, &subject.uid, &ruleset.name),
            uid: occurrence_uid(&subject.uid, &ruleset.name, operation, start),
            namespace: subject.namespace.clone(),
            created: start,
            labels,
            subject: subject.clone(),
            operation: operation.to_owned(),
            ruleset: ruleset.name.clone(),
            component: ruleset.component.clone(),
            phase: Phase::Active,
            message,
            outcome: None,
            last_detected: now,
            completed: None,
            subject_generation: subject.generation,
            detected_by: vec![ruleset.name.clone()],
            progress: None,
            stalled: None,
            expectation: None,
            ending: None,
        };
        (record, warnings)
    }

    /// How far along it is, in percent (0 to 100), when its rule reports it.
    pub fn progress(&self) -> Option<f64> {
        self.progress
    }

    /// When it is expected to end, once its rule has enough history (or reports progress).
    pub fn expected_end(&self) -> Option<Timestamp> {
        self.expectation.as_ref().map(|e| e.end)
    }

    /// Why it is stalled, if it is: what its rule reports, else running past what its rule's
    /// operations normally take (reason `OverdueByHistory`). Only active operations stall.
    pub fn stall(&self) -> Option<&Stall> {
        if self.phase != Phase::Active {
            return None;
        }
        self.stalled
            .as_ref()
            .or_else(|| self.expectation.as_ref()?.overdue.as_ref())
    }

    /// Whether it is stalled (see [`Self::stall`]).
    pub fn is_stalled(&self) -> bool {
        self.stall().is_some()
    }

    /// When an operation in its debounce grace turns `Completed` unless detected again; `None`
    /// while a rule detects it (or once completed). For a verdict this is the operation's
    /// expected end: it is ending, not in flight.
    pub fn ending_at(&self) -> Option<Timestamp> {
        self.ending.map(|e| e.at)
    }

    /// When it stops holding up a maintenance gate, as far as the server can tell: the end of
    /// its debounce grace while no rule detects it, else its expected end; `None` without an
    /// estimate.
    pub fn clears_at(&self) -> Option<Timestamp> {
        self.ending_at().or_else(|| self.expected_end())
    }

    /// [`Self::clears_at`] read at the far edge of the band: the end of its debounce grace while
    /// no rule detects it, else its `status.expectedEndP90` when its end comes from history, else
    /// its end extrapolated from its progress (which has no band); `None` without an estimate.
    pub fn clears_at_p90(&self) -> Option<Timestamp> {
        if let Some(end) = self.ending_at() {
            return Some(end);
        }
        let e = self.expectation.as_ref()?;
        match e.basis {
            EstimateBasis::History => e.p90_end,
            EstimateBasis::Progress | EstimateBasis::Grace => Some(e.end),
        }
    }

    /// Whether it runs past what its rule's operations take (stalled `OverdueByHistory`): its
    /// expected end is then the overdue limit, which has passed, and nothing says when it ends.
    pub fn is_overdue(&self) -> bool {
        self.ending_at().is_none()
            && self
                .expectation
                .as_ref()
                .is_some_and(|e| e.overdue.is_some())
    }

    /// About how many bytes this record holds in memory together with the JSON a list or watch
    /// serialises and keeps of it: what bounds the event history by size. An estimate from the
    /// text it carries (which both forms hold once each, the JSON with its field names), not
    /// an allocator's count; `benches/memory.rs` measures the real figure.
    pub fn approx_bytes(&self) -> usize {
        let subject = &self.subject;
        let owners: usize = subject
            .owner_references
            .iter()
            .map(|o| o.api_version.len() + o.kind.len() + o.name.len() + o.uid.len() + 160)
            .sum();
        let text = self.name.len()
            + self.uid.len()
            + 2 * self.namespace.as_ref().map_or(0, String::len)
            + subject.api_version.len()
            + subject.kind.len()
            + subject.name.len()
            + subject.uid.len()
            + self.operation.len()
            + self.ruleset.len()
            + self.component.len()
            + self.message.as_ref().map_or(0, String::len)
            + self.detected_by.iter().map(String::len).sum::<usize>()
            + self
                .stalled
                .as_ref()
                .map_or(0, |s| s.reason.len() + s.message.len())
            + owners;
        let labels: usize = self
            .labels
            .iter()
            .map(|(k, v)| k.len() + v.len() + 24)
            .sum();
        // The fixed parts: the struct itself and the JSON's field names and timestamps.
        std::mem::size_of::<Self>() + 2 * (text + labels) + 300
    }

    /// `InFlightOperation` or `InFlightClusterOperation`, by the subject's scope.
    pub fn kind(&self) -> &'static str {
        if self.namespace.is_some() {
            NAMESPACED_KIND
        } else {
            CLUSTER_KIND
        }
    }

    /// The value of a selectable field (`SELECTABLE_FIELDS` of the API), as it appears in the
    /// API object; `None` where the object has no such field.
    pub fn field(&self, path: &str) -> Option<&str> {
        match path {
            "metadata.name" => Some(&self.name),
            "metadata.namespace" => self.namespace.as_deref(),
            "spec.operation" => Some(&self.operation),
            "spec.ruleSet" => Some(&self.ruleset),
            "spec.component" => Some(&self.component),
            "spec.subject.kind" => Some(&self.subject.kind),
            "spec.subject.name" => Some(&self.subject.name),
            "spec.subject.namespace" => self.subject.namespace.as_deref(),
            "status.phase" => Some(self.phase.as_str()),
            "status.outcome" => self.outcome.map(|o| o.as_str()),
            _ => None,
        }
    }

    /// The full API object at `resource_version`, as a value (see [`Self::wire`]).
    pub fn to_json(&self, resource_version: u64) -> Value {
        to_value(&self.wire(resource_version))
    }
}

fn to_value(wire: &impl serde::Serialize) -> Value {
    serde_json::to_value(wire).expect("the wire form has string keys only")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::test_ruleset;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use serde_json::json;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn subject(namespace: Option<&str>) -> Subject {
        Subject {
            api_version: "kubevirt.io/v1".into(),
            kind: "VirtualMachineInstance".into(),
            name: "vm1".into(),
            namespace: namespace.map(str::to_owned),
            uid: "uid-1".into(),
            generation: Some(4),
            owner_references: vec![OwnerReference {
                api_version: "kubevirt.io/v1".into(),
                kind: "VirtualMachine".into(),
                name: "vm1".into(),
                uid: "owner-1".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }],
        }
    }

    fn ruleset() -> RuleSetInfo {
        test_ruleset("kubevirt", "virt")
    }

    #[test]
    fn namespaced_object_json() {
        let (mut op, _) = InFlightOperation::new_active(
            &ruleset(),
            "Migrating",
            &subject(Some("ns1")),
            ts("2026-11-22T10:30:00.250Z"),
            ts("2026-11-22T10:31:00Z"),
            Some("copying memory".into()),
            [],
        );
        assert_eq!(op.kind(), "InFlightOperation");
        let v = op.to_json(1234);
        assert_eq!(v["apiVersion"], "live.ifo.kubevirt.io/v1alpha1");
        assert_eq!(v["kind"], "InFlightOperation");
        let m = &v["metadata"];
        assert_eq!(m["name"], json!(op.name));
        assert_eq!(m["namespace"], "ns1");
        assert_eq!(m["uid"], json!(op.uid));
        assert_eq!(m["resourceVersion"], "1234");
        assert_eq!(m["creationTimestamp"], "2026-11-22T10:30:00Z");
        assert_eq!(m["labels"]["ifo.kubevirt.io/operation"], "Migrating");
        assert_eq!(
            m["ownerReferences"],
            json!([{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                    "name": "vm1", "uid": "uid-1"}])
        );
        assert_eq!(v["spec"]["operation"], "Migrating");
        assert_eq!(v["spec"]["ruleSet"], "kubevirt");
        assert_eq!(v["spec"]["component"], "virt");
        let s = &v["spec"]["subject"];
        assert_eq!(s["namespace"], "ns1");
        assert_eq!(s["ownerReferences"][0]["controller"], true);
        assert_eq!(s["ownerReferences"][0]["uid"], "owner-1");
        let st = &v["status"];
        assert_eq!(st["phase"], "Active");
        assert_eq!(st["message"], "copying memory");
        assert!(st.get("outcome").is_none());
        assert!(st.get("completed").is_none());
        assert_eq!(st["lastDetected"], "2026-11-22T10:31:00Z");
        assert_eq!(st["detectedBy"], json!(["kubevirt"]));
        assert_eq!(st["subjectGeneration"], 4);
        assert_eq!(st["conditions"], json!([]));

        op.phase = Phase::Completed;
        op.outcome = Some(Outcome::Succeeded);
        op.completed = Some(ts("2026-11-22T10:40:00Z"));
        op.message = None;
        let st = op.to_json(1).get("status").cloned().unwrap();
        assert_eq!(st["phase"], "Completed");
        assert_eq!(st["outcome"], "Succeeded");
        assert_eq!(st["completed"], "2026-11-22T10:40:00Z");
        assert!(st.get("message").is_none());
    }

    #[test]
    fn cluster_scoped_object_json() {
        let mut s = subject(None);
        s.owner_references.clear();
        s.generation = None;
        let now = ts("2026-11-22T10:30:00Z");
        let (op, _) = InFlightOperation::new_active(&ruleset(), "Draining", &s, now, now, None, []);
        assert_eq!(op.kind(), "InFlightClusterOperation");
        let v = op.to_json(7);
        assert_eq!(v["kind"], "InFlightClusterOperation");
        assert!(v["metadata"].get("namespace").is_none());
        assert!(v["spec"]["subject"].get("namespace").is_none());
        assert!(v["spec"]["subject"].get("ownerReferences").is_none());
        assert!(v["status"].get("subjectGeneration").is_none());
    }

    #[test]
    fn selectable_fields_read_what_the_object_shows() {
        let now = ts("2026-11-22T10:30:00Z");
        let (mut completed, _) = InFlightOperation::new_active(
            &ruleset(),
            "Migrating",
            &subject(Some("ns1")),
            now,
            now,
            None,
            [],
        );
        completed.phase = Phase::Completed;
        completed.outcome = Some(Outcome::Succeeded);
        let (cluster, _) = InFlightOperation::new_active(
            &ruleset(),
            "Draining",
            &subject(None),
            now,
            now,
            None,
            [],
        );
        for op in [completed, cluster] {
            let object = op.to_json(1);
            for path in SELECTABLE_FIELDS {
                let shown = path
                    .split('.')
                    .try_fold(&object, |v, key| v.get(key))
                    .and_then(Value::as_str);
                assert_eq!(op.field(path), shown, "{path} of {}", op.name);
            }
        }
    }
}
