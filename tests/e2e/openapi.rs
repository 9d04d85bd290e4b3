//! OpenAPI through the aggregation layer: `kubectl explain` (v3 by default, and v2) prints our
//! descriptions, for an admin and for a user with no rights on the resources.

use ifo_dev::User;
use ifo_test_support::{env, eventually};
use serde_json::Value;
use std::time::Duration;

/// The aggregator downloads OpenAPI documents in the background, some time after the APIService
/// becomes available.
const WAIT: Duration = Duration::from_secs(120);

const GROUP_VERSION_PATH: &str = "apis/live.ifo.kubevirt.io/v1alpha1";

/// kubectl output with its line wrapping and indentation undone, so phrases can be looked for.
fn squash(out: &str) -> String {
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `kubectl explain <args>` as `user`, once it finds what it looks for.
fn explain(user: User, args: &[&str]) -> String {
    let env = env();
    let mut all = vec!["explain"];
    all.extend(args);
    let what = format!("kubectl {} as {}", all.join(" "), user.name());
    squash(&eventually(WAIT, &what, || env.kubectl(user, &all).ok()))
}

fn assert_has(out: &str, phrases: &[&str]) {
    for phrase in phrases {
        assert!(out.contains(phrase), "{phrase:?} missing from:\n{out}");
    }
}

#[test]
fn explain_prints_our_descriptions() {
    for user in [User::Admin, User::Alice] {
        let out = explain(user, &["ifos"]);
        assert_has(
            &out,
            &[
                "GROUP: live.ifo.kubevirt.io",
                "KIND: InFlightOperation",
                "VERSION: v1alpha1",
                "an operation in flight on a namespaced Kubernetes object",
                "spec <InFlightOperationSpec>",
                "status <InFlightOperationStatus>",
                "metadata <ObjectMeta>",
            ],
        );

        let out = explain(user, &["ifos.status"]);
        assert_has(
            &out,
            &[
                "FIELD: status <InFlightOperationStatus>",
                "Where the operation stands",
                "phase <string> -required- enum: Active, Completed",
                "lastDetected <string>",
                "When the operation ended: when its rule first stopped matching",
            ],
        );

        let out = explain(user, &["ifcos.spec"]);
        assert_has(
            &out,
            &[
                "KIND: InFlightClusterOperation",
                "FIELD: spec <InFlightOperationSpec>",
                "ruleSet <string> -required-",
                "Name of the OperationRuleSet whose rule detected the operation",
                "subject <InFlightOperationSubject> -required-",
            ],
        );

        let out = explain(user, &["ifos.status.outcome"]);
        assert_has(
            &out,
            &[
                "FIELD: outcome <string>",
                "ENUM: Succeeded Failed Canceled Superseded SubjectDeleted RuleSetRemoved Unknown",
                "How the operation ended; absent while it is Active",
            ],
        );

        let out = explain(user, &["ifos.spec.subject.ownerReferences"]);
        assert_has(
            &out,
            &[
                "FIELD: ownerReferences <[]OwnerReference>",
                "The subject's owner references at its latest observation",
                "controller <boolean>",
            ],
        );
    }
}

#[test]
fn explain_works_with_openapi_v2() {
    for user in [User::Admin, User::Alice] {
        let out = explain(user, &["ifos.status", "--output=plaintext-openapiv2"]);
        assert_has(
            &out,
            &[
                "KIND: InFlightOperation",
                "VERSION: live.ifo.kubevirt.io/v1alpha1",
                "Where the operation stands",
                "outcome <string>",
                "How the operation ended; absent while it is Active",
            ],
        );
        let out = explain(
            user,
            &["ifcos.spec.subject", "--output=plaintext-openapiv2"],
        );
        assert_has(
            &out,
            &[
                "KIND: InFlightClusterOperation",
                "The Kubernetes object the operation happens to",
                "ownerReferences <[]Object>",
            ],
        );
    }
}

fn raw(user: User, path: &str) -> Option<Value> {
    let out = env().kubectl(user, &["get", "--raw", path]).ok()?;
    serde_json::from_str(&out).ok()
}

#[test]
fn openapi_v3_lists_our_group_version_through_kube_apiserver() {
    let url = eventually(WAIT, "our group version in /openapi/v3", || {
        let root = raw(User::Alice, "/openapi/v3")?;
        root["paths"][GROUP_VERSION_PATH]["serverRelativeURL"]
            .as_str()
            .map(str::to_owned)
    });
    assert!(
        url.starts_with(&format!("/openapi/v3/{GROUP_VERSION_PATH}?hash=")),
        "{url}"
    );
    // kube-apiserver proxies the document to us as the requesting user.
    let doc = raw(User::Alice, &url).expect("the group version document");
    assert_eq!(doc["openapi"], "3.0.0");
    let object = &doc["components"]["schemas"]["io.kubevirt.ifo.live.v1alpha1.InFlightOperation"];
    assert_eq!(
        object["x-kubernetes-group-version-kind"],
        serde_json::json!([{"group": "live.ifo.kubevirt.io", "kind": "InFlightOperation", "version": "v1alpha1"}])
    );
    let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
    assert!(
        paths
            .iter()
            .all(|p| p.starts_with("/apis/live.ifo.kubevirt.io/v1alpha1/")),
        "{paths:?}"
    );
}

#[test]
fn openapi_v2_has_only_our_paths_and_is_merged_by_the_aggregator() {
    let env = env();
    let out = env
        .kubectl_direct(User::Alice, &["get", "--raw", "/openapi/v2"])
        .unwrap();
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["swagger"], "2.0");
    let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
    assert_eq!(paths.len(), 15, "{paths:?}");
    assert!(
        paths
            .iter()
            .all(|p| p.starts_with("/apis/live.ifo.kubevirt.io/v1alpha1/")),
        "{paths:?}"
    );

    // The cluster's document carries our paths and kinds once the aggregator has merged it.
    eventually(WAIT, "our paths in the cluster's /openapi/v2", || {
        let merged = raw(User::Alice, "/openapi/v2")?;
        let path = &merged["paths"]["/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{namespace}/inflightoperations/{name}"];
        (path["get"]["x-kubernetes-action"] == "get"
            && merged["definitions"]["io.kubevirt.ifo.live.v1alpha1.InFlightClusterOperation"]
                .is_object())
        .then_some(())
    });
}
