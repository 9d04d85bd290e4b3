//! The served object and `ifo_model::InFlightOperation` (the type the plugin reads it into) are
//! the same shape: what the server writes reads into the model field for field, and the model
//! writes it back unchanged. A field added to one side only breaks this test, not a client.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::{Ending, InFlightOperation, Outcome, Phase, RuleSetInfo, Subject, test_ruleset};

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn ruleset() -> RuleSetInfo {
    test_ruleset("kubevirt", "virt")
        .with_labels(&[("example.com/team", "virt")])
        .at_generation(2)
}

/// A subject with owners and a generation (namespaced) or without either (cluster-scoped).
fn subject(namespace: Option<&str>) -> Subject {
    let owned = namespace.is_some();
    Subject {
        api_version: if owned { "kubevirt.io/v1" } else { "v1" }.into(),
        kind: if owned {
            "VirtualMachineInstance"
        } else {
            "Node"
        }
        .into(),
        name: "s1".into(),
        namespace: namespace.map(str::to_owned),
        uid: "uid-1".into(),
        generation: owned.then_some(4),
        owner_references: if owned {
            vec![OwnerReference {
                api_version: "kubevirt.io/v1".into(),
                kind: "VirtualMachine".into(),
                name: "s1".into(),
                uid: "owner-1".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]
        } else {
            Vec::new()
        },
    }
}

/// Active, ending and completed records of a namespaced and a cluster-scoped subject; the
/// active ones with and without a message.
fn records() -> Vec<InFlightOperation> {
    let mut out = Vec::new();
    for namespace in [Some("ns1"), None] {
        let (active, _) = InFlightOperation::new_active(
            &ruleset(),
            "Migrating",
            &subject(namespace),
            ts("2026-11-22T10:30:00.250Z"),
            ts("2026-11-22T10:31:00Z"),
            namespace.map(|_| "copying memory".to_owned()),
            [("example.com/node", "node-9")],
        );
        let mut ending = active.clone();
        ending.ending = Some(Ending {
            since: ts("2026-11-22T10:31:05Z"),
            at: ts("2026-11-22T10:31:35Z"),
        });
        out.push(ending);
        let mut completed = active.clone();
        completed.phase = Phase::Completed;
        completed.outcome = Some(Outcome::SubjectDeleted);
        completed.completed = Some(ts("2026-11-22T10:40:00.900Z"));
        completed.detected_by.push("kubevirt-extra".into());
        out.extend([active, completed]);
    }
    out
}

#[test]
fn the_wire_form_round_trips_through_the_model() {
    for record in records() {
        let served = record.to_json(1234);
        let model: ifo_model::InFlightOperation =
            serde_json::from_value(served.clone()).expect("the served object reads");
        assert_eq!(
            serde_json::to_value(&model).unwrap(),
            served,
            "{} did not round-trip",
            record.name
        );
    }
}

#[test]
fn the_model_reads_what_the_record_holds() {
    for record in records() {
        let model: ifo_model::InFlightOperation =
            serde_json::from_value(record.to_json(7)).unwrap();
        let whole_seconds = |t: Timestamp| ts(&super::format_time(t));

        assert_eq!(model.api_version, ifo_model::GROUP_VERSION);
        assert_eq!(model.kind, record.kind());
        let m = &model.metadata;
        assert_eq!(m.name.as_deref(), Some(record.name.as_str()));
        assert_eq!(m.namespace, record.namespace);
        assert_eq!(m.uid.as_deref(), Some(record.uid.as_str()));
        assert_eq!(m.resource_version.as_deref(), Some("7"));
        assert_eq!(
            m.creation_timestamp.as_ref().map(|t| t.0),
            Some(whole_seconds(record.created))
        );
        let served: Vec<(&str, &str)> = m
            .labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(served, record.labels.iter().collect::<Vec<_>>());
        let owner = &m.owner_references.as_deref().unwrap()[0];
        assert_eq!(
            (&owner.kind, &owner.uid),
            (&record.subject.kind, &record.subject.uid)
        );

        let spec = &model.spec;
        assert_eq!(spec.operation, record.operation);
        assert_eq!(spec.rule_set, record.ruleset);
        assert_eq!(spec.component, record.component);
        assert_eq!(spec.subject.kind, record.subject.kind);
        assert_eq!(spec.subject.namespace, record.subject.namespace);
        assert_eq!(
            spec.subject.owner_references,
            record.subject.owner_references
        );

        let status = &model.status;
        assert_eq!(status.phase, record.phase.as_str());
        assert_eq!(status.message, record.message);
        assert_eq!(
            status.outcome.as_deref(),
            record.outcome.map(Outcome::as_str)
        );
        assert_eq!(
            status.last_detected.as_ref().map(|t| t.0),
            Some(whole_seconds(record.last_detected))
        );
        assert_eq!(
            status.completed.as_ref().map(|t| t.0),
            record.completed.map(whole_seconds)
        );
        assert_eq!(status.detected_by, record.detected_by);
        assert_eq!(status.subject_generation, record.subject_generation);
        assert_eq!(
            status.grace_period_end.as_ref().map(|t| t.0),
            record.ending_at().map(whole_seconds)
        );
        match &record.ending {
            None => assert!(status.conditions.is_empty()),
            Some(ending) => {
                let [detected] = &status.conditions[..] else {
                    panic!("one condition: {:?}", status.conditions)
                };
                assert_eq!(
                    (detected.type_.as_str(), detected.status.as_str()),
                    ("Detected", "False")
                );
                assert_eq!(detected.reason, "GracePeriod");
                assert_eq!(detected.last_transition_time.0, whole_seconds(ending.since));
                assert!(
                    detected.message.contains("2026-11-22T10:31:35Z"),
                    "{}",
                    detected.message
                );
            }
        }
    }
}
