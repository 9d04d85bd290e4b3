use super::*;

const NOW: &str = "2026-11-25T10:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

/// The review kube-apiserver sends for `kubectl drain`'s eviction of `namespace/pod`.
fn review(
    resource: &str,
    sub_resource: Option<&str>,
    operation: &str,
) -> AdmissionRequest<DynamicObject> {
    let mut request = serde_json::json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": resource},
        "requestKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "requestResource": {"group": "", "version": "v1", "resource": resource},
        "name": "virt-launcher-vm-0-abcde",
        "namespace": "demo",
        "operation": operation,
        "userInfo": {"username": "alice"},
        "object": {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": "virt-launcher-vm-0-abcde", "namespace": "demo"}},
        "dryRun": false
    });
    if let Some(sub) = sub_resource {
        request["subResource"] = sub.into();
        request["requestSubResource"] = sub.into();
    }
    let body = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request
    });
    crate::admission::review::parse_skipping(&serde_json::to_vec(&body).unwrap()).unwrap()
}

/// The review of `kubectl drain`'s eviction of a pod.
pub(super) fn eviction() -> AdmissionRequest<DynamicObject> {
    review("pods", Some("eviction"), "CREATE")
}

fn on(node: &str) -> impl FnOnce(&str, &str) -> PodNode {
    let node = node.to_owned();
    move |namespace, name| {
        assert_eq!((namespace, name), ("demo", "virt-launcher-vm-0-abcde"));
        PodNode::Bound(node.into())
    }
}

/// The decision on the eviction of the pod at [`now`].
fn evict(
    pod_node: impl FnOnce(&str, &str) -> PodNode,
    gate: impl FnOnce(&str) -> NodeVerdict,
    override_of: impl FnOnce(&str) -> Option<Arc<str>>,
    when_unknown: WhenUnknown,
) -> Decision {
    decide(
        &eviction(),
        pod_node,
        gate,
        override_of,
        when_unknown,
        now(),
    )
}

fn no_override(_: &str) -> Option<Arc<str>> {
    None
}

fn migrating() -> NodeVerdict {
    let end = now() + jiff::SignedDuration::from_secs(40);
    NodeVerdict::InFlight {
        active: 3,
        operations: vec![
            ("VirtualMachine".into(), "Migrating".into(), Some(end)),
            ("ClusterServiceVersion".into(), "Installing".into(), None),
            ("VirtualMachine".into(), "Migrating".into(), None),
        ],
        expected_clear: Some(end),
    }
}

#[test]
fn a_clear_node_lets_the_eviction_through() {
    let d = evict(
        on("w1"),
        |_| NodeVerdict::Clear,
        no_override,
        WhenUnknown::Deny,
    );
    assert!(d.allowed);
    assert_eq!(d.reason, GuardReason::Clear);
}

#[test]
fn operations_in_flight_hold_it_with_what_and_when_but_no_names() {
    let gate = |node: &str| {
        assert_eq!(node, "w1");
        migrating()
    };
    let d = evict(on("w1"), gate, no_override, WhenUnknown::Allow);
    assert!(!d.allowed);
    assert_eq!(d.reason, GuardReason::InFlight);
    assert_eq!(
        d.message,
        "node w1 is not clear for maintenance: 3 operations in flight (2× VirtualMachine \
         Migrating, expected to end in ~40s; ClusterServiceVersion Installing); the node is \
         expected to be clear in ~40s; kubectl get maintenancegate node.w1 says more; to evict \
         anyway: kubectl annotate node w1 ifo.kubevirt.io/maintenance-override=\"<reason>\""
    );
}

#[test]
fn an_unknown_gate_holds_it_unless_set_to_allow() {
    let unknown = || NodeVerdict::Unknown {
        stale: vec!["virtualmachineinstances.kubevirt.io".into()],
    };
    let d = evict(on("w1"), |_| unknown(), no_override, WhenUnknown::Deny);
    assert!(!d.allowed);
    assert_eq!(d.reason, GuardReason::Unknown);
    assert!(
        d.message.starts_with(
            "node w1 is not known to be clear for maintenance: detection that can reach it is \
             not current (virtualmachineinstances.kubevirt.io)"
        ),
        "{}",
        d.message
    );
    assert!(d.message.contains("kubectl get maintenancegate node.w1"));
    let d = evict(on("w1"), |_| unknown(), no_override, WhenUnknown::Allow);
    assert!(d.allowed);
    assert_eq!(d.reason, GuardReason::Unknown);
}

#[test]
fn a_pod_whose_node_is_not_known_is_held_as_unknown() {
    for (pod, said) in [
        (
            PodNode::NotSeen,
            "has not seen pod demo/virt-launcher-vm-0-abcde yet",
        ),
        (
            PodNode::Unknown("the cluster's pods have not been listed yet".into()),
            "cannot tell which node pod demo/virt-launcher-vm-0-abcde runs on: the cluster's pods",
        ),
    ] {
        let d = evict(
            |_, _| pod.clone(),
            |_| panic!("no node to read"),
            no_override,
            WhenUnknown::Deny,
        );
        assert!(!d.allowed);
        assert_eq!(d.reason, GuardReason::Unknown);
        assert!(d.message.contains(said), "{}", d.message);
    }
}

#[test]
fn the_override_lets_it_through_and_says_why() {
    let d = evict(
        on("w1"),
        |_| migrating(),
        |node| (node == "w1").then(|| "disk failing, INC-4711".into()),
        WhenUnknown::Deny,
    );
    assert!(d.allowed);
    assert_eq!(d.reason, GuardReason::Override);
    assert!(
        d.message
            .contains("maintenance-override: disk failing, INC-4711")
            && d.message.contains("3 operations in flight"),
        "{}",
        d.message
    );
    // It goes into an Event on the node, which other tenants may read: no pod named.
    assert!(!d.message.contains("virt-launcher"), "{}", d.message);
    // A clear node needs no override: not counted as one.
    let d = evict(
        on("w1"),
        |_| NodeVerdict::Clear,
        |_| Some("x".into()),
        WhenUnknown::Deny,
    );
    assert_eq!(d.reason, GuardReason::Clear);
}

#[test]
fn pods_off_any_node_mirror_pods_and_gone_nodes_pass() {
    let cases: [(PodNode, NodeVerdict, GuardReason); 3] = [
        (PodNode::Unbound, NodeVerdict::Clear, GuardReason::Unbound),
        (
            PodNode::Mirror("w1".into()),
            migrating(),
            GuardReason::Mirror,
        ),
        (
            PodNode::Bound("w9".into()),
            NodeVerdict::Gone,
            GuardReason::NodeGone,
        ),
    ];
    for (pod, verdict, reason) in cases {
        let d = evict(|_, _| pod, |_| verdict, no_override, WhenUnknown::Deny);
        assert!(d.allowed);
        assert_eq!(d.reason, reason);
    }
}

#[test]
fn nothing_but_the_creation_of_an_eviction_is_ever_denied() {
    for request in [
        review("pods", None, "CREATE"),
        review("pods", Some("status"), "CREATE"),
        review("pods", None, "DELETE"),
        review("configmaps", Some("eviction"), "CREATE"),
        review("pods", Some("eviction"), "UPDATE"),
    ] {
        let d = decide(
            &request,
            |_, _| panic!("not read"),
            |_| panic!("not read"),
            no_override,
            WhenUnknown::Deny,
            now(),
        );
        assert!(d.allowed);
        assert_eq!(d.reason, GuardReason::NotAnEviction);
    }
}

#[test]
fn expected_ends_read_as_people_say_them() {
    assert_eq!(approximately(40), "~40s");
    assert_eq!(approximately(150), "~3m");
    assert_eq!(approximately(3 * 3600), "~3h");
    let t = now() - jiff::SignedDuration::from_secs(120);
    assert_eq!(expected(t, now()), "overdue by ~2m");
    assert_eq!(when(t, now()), "any moment now");
}
