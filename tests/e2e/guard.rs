//! The maintenance guard through the real Eviction API: kube-apiserver sends every eviction to
//! the server's two doors (the webhook `ifo-maintenance-guard`, as `apiservice/guard-webhook.yaml`
//! registers it), which refuse, with 429 and a message, the eviction of a pod on a node whose
//! gate is not Clear. No kubelet is needed: a pod bound with `spec.nodeName` to a Node object
//! of the test's own is evicted as `kubectl drain` would evict it.
//!
//! Each test has its own namespaces and node: tests share the cluster.

use std::time::{Duration, Instant};

use ifo_dev::User;
use ifo_test_support::{Env, Rule, RuleSet, env, eventually, node_vm_ruleset, vm};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

pub(crate) use ifo_test_support::{Evicted, evict, evict_with, pod_on};

/// The Events in `default` about the object named `node` (`selector`: more field selectors, as
/// `,reason=MaintenanceHeld`), printed as `output` (kubectl's `-o`) with no headers; `None`
/// when kubectl fails.
pub(crate) fn node_events(env: &Env, node: &str, selector: &str, output: &str) -> Option<String> {
    env.kubectl(
        User::Admin,
        &[
            "get",
            "events",
            "-n",
            "default",
            "--field-selector",
            &format!("involvedObject.name={node}{selector}"),
            "-o",
            output,
            "--no-headers",
        ],
    )
    .ok()
}

/// A VM of `ns` migrating on `node`, or not.
fn migrating(env: &Env, ns: &str, name: &str, node: &str, on: bool) {
    let state = if on { "Migrating" } else { "Running" };
    env.set_vm_status(
        ns,
        name,
        json!({"nodeName": node, "printableStatus": state}),
    );
}

/// A refusal as every drain tool retries it: 429, from either door of the guard's webhook
/// (kube-apiserver asks both and says the first refusal it gets).
fn assert_held(e: &Evicted, saying: &[&str]) {
    assert!(!e.ok, "the eviction went through");
    assert!(
        e.stderr.contains("TooManyRequests")
            && (e
                .stderr
                .contains("admission webhook \"ifo-maintenance-guard.ifo.kubevirt.io\"")
                || e.stderr.contains(
                    "admission webhook \"ifo-maintenance-guard-standby.ifo.kubevirt.io\""
                )),
        "not a 429 of the guard: {}",
        e.stderr
    );
    for s in saying {
        assert!(e.stderr.contains(s), "{:?} not in {}", s, e.stderr);
    }
}

/// Waits until the guard holds `user`'s eviction of `pod` in `ns` saying `why`, checks that its
/// refusal says each of `saying` ([`assert_held`]), and returns it.
fn held(env: &Env, user: User, ns: &str, pod: &str, why: &str, saying: &[&str]) -> Evicted {
    let held = eventually(
        WAIT,
        &format!("the guard to hold the eviction of {pod}"),
        || {
            let e = evict(env, user, ns, pod);
            (!e.ok && e.stderr.contains(why)).then_some(e)
        },
    );
    assert_held(&held, saying);
    held
}

/// An operation in another namespace holds the eviction of a tenant's pod on the same node,
/// with a message that names the node, the gate and the override, and no other namespace's
/// names; once the operation ends (grace included), the same eviction goes through.
#[test]
fn an_eviction_waits_while_its_node_has_an_operation_in_flight() {
    let env = env();
    let ops = env.namespace("guard-ops");
    let tenant = env.namespace("guard-tenant");
    let node_name = format!("gn-{}", tenant.rsplit('-').next().unwrap_or("0"));
    let node_name = format!("{node_name}-{}", std::process::id() % 10_000);
    let _node = env.node(&node_name);
    let rs = format!("rs-{ops}");
    env.apply(&node_vm_ruleset(&rs, &ops, &format!("c-{ops}")));
    env.apply(&vm("secret-vm", &ops));
    env.wait_watching(&rs);
    env.kubectl(
        User::Admin,
        &[
            "create",
            "rolebinding",
            "alice-edit",
            "--clusterrole=edit",
            "--user=alice",
            "-n",
            &tenant,
        ],
    )
    .unwrap();
    pod_on(env, &tenant, "app", &node_name);
    migrating(env, &ops, "secret-vm", &node_name, true);
    env.wait_gate(&format!("node.{node_name}"), "False", WAIT);
    let denied = |door: &str| {
        env.metric(&format!(
            "ifo_admission_reviews_total{{door=\"{door}\",decision=\"denied\"}}"
        ))
    };
    let before = (denied("evictions"), denied("evictions_standby"));

    let held = held(
        env,
        User::Alice,
        &tenant,
        "app",
        "not clear",
        &[
            &format!("node {node_name} is not clear for maintenance: 1 operation in flight"),
            "VirtualMachine Migrating",
            &format!("kubectl get maintenancegate node.{node_name}"),
            &format!("kubectl annotate node {node_name} ifo.kubevirt.io/maintenance-override="),
        ],
    );
    // Both doors were asked, and both refused (other tests add their own refusals).
    assert!(
        denied("evictions") > before.0 && denied("evictions_standby") > before.1,
        "not refused at both doors: {before:?} then {:?}",
        (denied("evictions"), denied("evictions_standby"))
    );
    // The standby's refusals are counted as the guard's decisions, by door.
    assert!(
        env.metric(
            "ifo_guard_decisions_total{door=\"evictions_standby\",decision=\"denied\",reason=\"in_flight\"}"
        ) >= 1.0
    );
    // What alice may not read stays unsaid: the other namespace and its VM.
    assert!(
        !held.stderr.contains(&ops) && !held.stderr.contains("secret-vm"),
        "{}",
        held.stderr
    );
    // The pod is still there.
    env.kubectl(User::Admin, &["get", "pod", "app", "-n", &tenant])
        .unwrap();

    // The migration ends: once the node is clear (after the grace), the eviction goes through.
    migrating(env, &ops, "secret-vm", &node_name, false);
    env.wait_gate(&format!("node.{node_name}"), "True", WAIT);
    let cleared = Instant::now();
    // As a drain retries: on the shared cluster, another test's new ruleset may make every
    // node's gate unknown for the moment its first list takes.
    let e = loop {
        let e = evict(env, User::Alice, &tenant, "app");
        let unknown = e.stderr.contains("is not known to be clear");
        if e.ok || !unknown || cleared.elapsed() >= Duration::from_secs(5) {
            break e;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(e.ok, "held after the node cleared: {}", e.stderr);
    assert!(cleared.elapsed() < Duration::from_secs(5));
    eventually(WAIT, "the evicted pod to be gone", || {
        env.kubectl(User::Admin, &["get", "pod", "app", "-n", &tenant])
            .is_err()
            .then_some(())
    });
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

/// A node whose gate is Unknown holds evictions too (what is not being watched may be in
/// flight there), and the node's maintenance override lets them through, with an Event on the
/// node that `kubectl describe node` shows.
#[test]
fn an_unknown_node_holds_evictions_and_the_override_lets_them_through() {
    let env = env();
    let ns = env.namespace("guard-unknown");
    let node_name = format!(
        "gu-{}-{}",
        ns.rsplit('-').next().unwrap_or("0"),
        std::process::id() % 10_000
    );
    let _node = env.node(&node_name);
    // A rule that reads a field no VirtualMachine has: it compiles (the schema is open, so the
    // door cannot refuse it), and fails on every object, so the node its object is on cannot be
    // vouched for.
    let rs = format!("rs-{ns}");
    env.apply(
        &RuleSet::vms_of(&rs, &format!("c-{ns}"), &ns)
            .label_expression(
                "ifo.kubevirt.io/node",
                "object.?status.?nodeName.orValue('')",
            )
            .rule(Rule::new("Busy", "object.spec.noSuchField == true"))
            .to_string(),
    );
    env.apply(&vm("vm-0", &ns));
    env.wait_watching(&rs);
    env.set_vm_status(&ns, "vm-0", json!({"nodeName": node_name}));
    pod_on(env, &ns, "p1", &node_name);
    pod_on(env, &ns, "p2", &node_name);
    env.wait_gate(&format!("node.{node_name}"), "Unknown", WAIT);
    held(
        env,
        User::Admin,
        &ns,
        "p1",
        "not known to be clear",
        &[
            &format!("node {node_name} is not known to be clear for maintenance"),
            "virtualmachines.kubevirt.io",
            &format!("kubectl get maintenancegate node.{node_name}"),
        ],
    );

    let annotate = |annotation: &str| {
        env.kubectl(User::Admin, &["annotate", "node", &node_name, annotation])
            .unwrap()
    };
    annotate("ifo.kubevirt.io/maintenance-override=firmware recall INC-4711");
    eventually(WAIT, "the override to let the eviction through", || {
        evict(env, User::Admin, &ns, "p1").ok.then_some(())
    });
    // Held before the override, let through by it: both on the node, by reason.
    let events = eventually(WAIT, "the guard's events on the node", || {
        let out = node_events(
            env,
            &node_name,
            ",involvedObject.kind=Node",
            "custom-columns=REASON:.reason,MESSAGE:.message",
        )?;
        (out.contains("MaintenanceUnverified") && out.contains("MaintenanceOverride"))
            .then_some(out)
    });
    assert!(events.contains("firmware recall INC-4711"), "{events}");
    let described = env
        .kubectl(User::Admin, &["describe", "node", &node_name])
        .unwrap();
    assert!(described.contains("MaintenanceOverride"), "{described}");

    // Without the override, held again.
    annotate("ifo.kubevirt.io/maintenance-override-");
    eventually(WAIT, "the guard to hold again", || {
        let e = evict(env, User::Admin, &ns, "p2");
        (!e.ok).then_some(())
    });
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

/// What the door answers that is not an eviction of a known pod: a pod on no node passes; a
/// malformed review is an HTTP error (kube-apiserver applies the failure policy), never a
/// denial.
#[test]
fn the_guard_lets_pass_what_it_cannot_hold() {
    let env = env();
    let ns = env.namespace("guard-pass");
    env.apply(
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "pending", "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
        })
        .to_string(),
    );
    eventually(WAIT, "an unbound pod's eviction to pass", || {
        evict(env, User::Admin, &ns, "pending").ok.then_some(())
    });
    let errors = |kind: &str| {
        env.metric(&format!(
            "ifo_guard_decisions_total{{door=\"evictions\",decision=\"error\",reason=\"{kind}\"}}"
        ))
    };
    // As kube-apiserver (its webhook client certificate): a malformed review, and 100 KiB of
    // nothing (read in a large review's turn, not refused for its size), are HTTP errors.
    let pki = env.cluster.dir().join("pki");
    let cert = pki.join("webhook-client.crt").display().to_string();
    let key = pki.join("webhook-client.key").display().to_string();
    let malformed = errors("malformed");
    let (code, body) = env.door(
        "/admission/evictions",
        &["-X", "POST", "--cert", &cert, "--key", &key, "--data", "{}"],
    );
    assert_eq!(code, "400", "{body}");
    let big = format!("@{}", {
        let path = env.cluster.dir().join("big-review.json");
        std::fs::write(&path, vec![b' '; 100 << 10]).unwrap();
        path.display().to_string()
    });
    let (code, body) = env.door(
        "/admission/evictions",
        &[
            "-X",
            "POST",
            "--cert",
            &cert,
            "--key",
            &key,
            "--data-binary",
            &big,
        ],
    );
    assert_eq!(code, "400", "{body}");
    // Each counted as an error of the guard, by its kind (other tests may add their own).
    assert!(errors("malformed") >= malformed + 2.0);
}
