//! Why a pod that could hold its node (a pod of a Job, or one labelled
//! `ifo.kubevirt.io/protect-from-maintenance`) holds nothing: what `check` says when it is asked
//! about such a pod and finds nothing in flight. The shipped pod rules decide; this only tells
//! their reasons, in their order, from the pod as the user reads it (see docs/rules.md, "Who can
//! hold a node").

use serde_json::Value;

/// The label that asks for a pod's node to be held (`protected-pod-rules`).
const PROTECT: &str = "ifo.kubevirt.io/protect-from-maintenance";

/// Why `pod` (as kube-apiserver returns it) holds no node; `None` when it is not a pod that could
/// hold one, or when nothing in the pod itself says why.
pub fn why_not_held(pod: &Value) -> Option<String> {
    let meta = &pod["metadata"];
    let owned_by = |kind: &str, api_version: &str| {
        meta["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|o| o["kind"] == kind && o["apiVersion"] == api_version)
    };
    let protected = meta["labels"][PROTECT]
        .as_str()
        .is_some_and(|v| v != "false");
    let job = owned_by("Job", "batch/v1");
    if !protected && !job {
        return None;
    }
    if owned_by("DaemonSet", "apps/v1") {
        return Some(
            "it belongs to a DaemonSet: drains skip DaemonSet pods, so they never hold their node"
                .to_owned(),
        );
    }
    let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    if node.is_empty() {
        return Some("it is not on a node yet".to_owned());
    }
    if !started(pod) {
        return Some(format!(
            "it has not started on node {node}: only what runs holds its node (a pod waiting \
             for its image, its volumes or a node that can run it protects no work)"
        ));
    }
    protected.then(|| {
        format!(
            "it is labelled {PROTECT}, but the label holds a node only in the namespaces an admin \
             opted in (protected-pod-rules' spec.namespaces), and the server shows no Protected \
             operation for it: namespace {} is not one of them, or the ruleset is not installed",
            meta["namespace"].as_str().unwrap_or_default()
        )
    })
}

/// Whether `pod` has started on its node: phase `Running`, or `Pending` with a container (init
/// containers included) running or having run.
fn started(pod: &Value) -> bool {
    let status = &pod["status"];
    let ran = |c: &Value| {
        c["state"].get("running").is_some()
            || c["state"].get("terminated").is_some()
            || c["lastState"].get("terminated").is_some()
    };
    let containers = ["initContainerStatuses", "containerStatuses"]
        .into_iter()
        .filter_map(|field| status[field].as_array())
        .flatten();
    match status["phase"].as_str() {
        Some("Running") => true,
        Some("Pending") => containers.into_iter().any(ran),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(labels: Value, owners: Value, spec: Value, status: Value) -> Value {
        json!({"metadata": {"name": "p", "namespace": "team-a", "labels": labels,
                            "ownerReferences": owners},
               "spec": spec, "status": status})
    }

    fn job() -> Value {
        json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "etl"}])
    }

    #[test]
    fn each_reason_in_the_rules_order() {
        let running = json!({"phase": "Running"});
        let on = json!({"nodeName": "w1"});
        let protected = json!({PROTECT: "true"});

        // Not a pod that could hold: nothing to say.
        assert_eq!(
            why_not_held(&pod(json!({}), json!([]), on.clone(), running.clone())),
            None
        );
        assert_eq!(
            why_not_held(&pod(
                json!({PROTECT: "false"}),
                json!([]),
                on.clone(),
                running.clone()
            )),
            None
        );

        let ds = json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"}]);
        let why = why_not_held(&pod(protected.clone(), ds, on.clone(), running.clone())).unwrap();
        assert!(why.starts_with("it belongs to a DaemonSet"), "{why}");

        let why = why_not_held(&pod(
            json!({}),
            job(),
            json!({}),
            json!({"phase": "Pending"}),
        ));
        assert_eq!(why.as_deref(), Some("it is not on a node yet"));

        let pulling = json!({"phase": "Pending", "containerStatuses": [
            {"name": "c", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]});
        let why = why_not_held(&pod(json!({}), job(), on.clone(), pulling)).unwrap();
        assert!(why.starts_with("it has not started on node w1"), "{why}");
        // Started (an init container runs), however it was placed: nothing in the pod says
        // why (whether its node was cordoned before it started is the node's gate's to say).
        let init_ran = json!({"phase": "Pending", "initContainerStatuses": [
            {"name": "i", "state": {"running": {}}}]});
        assert_eq!(
            why_not_held(&pod(json!({}), job(), on.clone(), init_ran)),
            None
        );
        assert_eq!(
            why_not_held(&pod(json!({}), job(), on.clone(), running.clone())),
            None
        );

        let why = why_not_held(&pod(protected, json!([]), on, running)).unwrap();
        assert!(why.contains("namespace team-a is not one of them"), "{why}");
    }
}
