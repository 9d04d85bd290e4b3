//! Who can hold a node, as a tenant and the admin see it through the real cluster with the
//! maintenance guard on: alice (`edit` in two namespaces of her own, nothing else) against the
//! shipped `pod-rules` and `protected-pod-rules` (from `deploy/rules/bundle.yaml`, as shipped but
//! for their names and `spec.namespaces`: the admin lets the Jobs of both her namespaces hold
//! their nodes (`pod-rules`), and protection in one of them (`protected-pod-rules`).
//!
//! Only what runs holds, and on a cordoned node only what started before the cordon: pods she
//! places on nodes of her choice that never start (one of them an admin's cordoned and tainted
//! node), a pod of her Job that started on the cordoned node (placed there by her own
//! `spec.nodeName`, or by the scheduler because it tolerates the cordon), whatever she then writes
//! on it, a pod whose image does not pull, a DaemonSet's pod, and a protected pod where
//! protection was not granted hold nothing, and drains of those nodes go through. Her protected
//! pod that runs in the namespace the admin opted in holds its node; the
//! admin's override lets the drain through, shows on the gate and in `/metrics`, and ends by
//! itself at its `-until` time, after which the guard holds again.
//!
//! No kubelet or scheduler runs: the admin binds pods to Node objects of the test's own as the
//! scheduler does (their `binding` subresource) unless alice places them herself
//! (`spec.nodeName`), and writes their status (`/status`) as a kubelet would.

use ifo_dev::User;
use ifo_test_support::{
    Env, Run, TestNode, clear_status, env, eventually, unknown_only_for_others_first_lists,
};
use jiff::Timestamp;
use serde_json::{Value, json};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// Alice's two namespaces and the shipped pod rulesets over them (deleted when dropped).
struct Tenancy {
    env: &'static Env,
    /// Hers, not opted in to protection.
    own: String,
    /// Hers, opted in by the admin (listed in `protected-pod-rules`' namespaces).
    granted: String,
    rulesets: Vec<String>,
}

impl Tenancy {
    fn new(prefix: &str) -> Tenancy {
        let env = env();
        let own = env.namespace(&format!("{prefix}-own"));
        let granted = env.namespace(&format!("{prefix}-granted"));
        for ns in [&own, &granted] {
            env.tenant("alice", ns);
        }
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/rules/bundle.yaml");
        let shipped: Vec<Value> =
            serde_saphyr::from_multiple(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut rulesets = Vec::new();
        for (name, namespaces) in [
            ("pod-rules", vec![own.clone(), granted.clone()]),
            ("protected-pod-rules", vec![granted.clone()]),
        ] {
            let mut ruleset = shipped
                .iter()
                .find(|r| r["metadata"]["name"] == name)
                .unwrap_or_else(|| panic!("{name} is not in {path}"))
                .clone();
            let applied = format!("{name}-{own}");
            ruleset["metadata"]["name"] = json!(applied);
            ruleset["spec"]["namespaces"] = json!(namespaces);
            env.apply(&ruleset.to_string());
            rulesets.push(applied);
        }
        for rs in &rulesets {
            env.wait_watching(rs);
        }
        Tenancy {
            env,
            own,
            granted,
            rulesets,
        }
    }

    /// A Node of the test's own, named after it.
    fn node(&self, n: usize) -> TestNode<'static> {
        self.env.node(&format!("{}-n{n}", self.own))
    }

    /// Alice creates the pod `name` in `ns`, with `metadata` merged in (labels, owners), and
    /// the scheduler binds it to `node`.
    fn alice_pod(&self, ns: &str, name: &str, node: &str, metadata: Value) {
        self.alice_creates(ns, name, None, metadata);
        self.env.bind(ns, name, node);
    }

    /// Alice creates the pod `name` in `ns`, placed by herself on `node` (its `spec.nodeName`,
    /// past the scheduler, cordons and NoSchedule taints), with `metadata` merged in.
    fn alice_places_pod(&self, ns: &str, name: &str, node: &str, metadata: Value) {
        self.alice_creates(ns, name, Some(node), metadata);
    }

    /// Alice creates the pod `name` in `ns`, on `node` if she names it, with `metadata` merged
    /// in.
    fn alice_creates(&self, ns: &str, name: &str, node: Option<&str>, metadata: Value) {
        let mut meta = json!({"name": name, "namespace": ns});
        for (k, v) in metadata.as_object().into_iter().flatten() {
            meta[k] = v.clone();
        }
        let mut spec = json!({"restartPolicy": "Never",
                              "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]});
        if let Some(node) = node {
            spec["nodeName"] = node.into();
        }
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec});
        self.env
            .create_as(User::Alice, &pod)
            .unwrap_or_else(|e| panic!("alice could not create pod {ns}/{name}: {e:#}"));
    }

    /// Alice's pod `name` in `ns` ([`Self::alice_pod`]), bound to `node`, runs there.
    fn alice_runs_pod(&self, ns: &str, name: &str, node: &str, metadata: Value) {
        self.alice_pod(ns, name, node, metadata);
        self.runs(ns, name);
    }

    /// What a kubelet would write: the pod runs (its container started).
    fn runs(&self, ns: &str, name: &str) {
        self.env.set_status(
            "pod",
            ns,
            name,
            json!({"phase": "Running", "startTime": Timestamp::now().to_string(),
                   "containerStatuses": [container(json!({"running": {"startedAt": Timestamp::now().to_string()}}))]}),
        );
    }
}

impl Drop for Tenancy {
    fn drop(&mut self) {
        for rs in &self.rulesets {
            let _ = self
                .env
                .kubectl(User::Admin, &["delete", "ors", rs, "--ignore-not-found"]);
        }
    }
}

/// The status of the pod's one container, in `state`.
fn container(state: Value) -> Value {
    json!({"name": "c", "image": "registry.k8s.io/pause:3.10", "imageID": "", "ready": false,
           "restartCount": 0, "state": state})
}

/// A Job of alice's as a pod's owner.
fn job_owner(job: &str) -> Value {
    json!([{"apiVersion": "batch/v1", "kind": "Job", "name": job,
            "uid": "2f4e6a8c-0b1d-5f3e-9a7c-5e1d3b9f7a2c", "controller": true}])
}

const PROTECT: &str = "ifo.kubevirt.io/protect-from-maintenance";

/// The eviction of `pod` in `ns` by the admin, as `kubectl drain` sends it: whether it went
/// through, and kubectl's stderr.
fn evict(env: &Env, ns: &str, pod: &str) -> (bool, String) {
    let e = crate::guard::evict(env, User::Admin, ns, pod);
    (e.ok, e.stderr)
}

/// The operations a gate lists, as `<kind> <namespace>/<name> <operation>`.
fn holders(gate: &Value) -> Vec<String> {
    ifo_test_support::gate_operations(gate)
        .into_iter()
        .map(|[kind, namespace, name, operation]| format!("{kind} {namespace}/{name} {operation}"))
        .collect()
}

/// The gate's condition of type `type_`, `Null` when it has none.
fn condition<'a>(gate: &'a Value, type_: &str) -> &'a Value {
    static NONE: Value = Value::Null;
    gate["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .unwrap_or(&NONE)
}

/// Pods alice places on nodes she chooses, a cordoned and tainted one among them, hold nothing
/// until they run, and her Job's pod she placed herself on the cordoned node holds nothing even
/// running; her DaemonSet's pods, and a protected pod in a namespace the admin did not opt in,
/// hold nothing even running. Drains of those nodes go through. What she runs where she may
/// hold nodes does hold them (seen first, so that what holds nothing was seen too).
#[test]
fn pods_that_never_ran_daemonset_pods_and_protection_not_granted_hold_no_node() {
    let t = Tenancy::new("tenancy-nothing");
    let env = t.env;
    let (own, granted) = (t.own.clone(), t.granted.clone());
    let nodes: Vec<TestNode<'static>> = (1..=4).map(|n| t.node(n)).collect();
    let name = |n: usize| nodes[n - 1].name().to_owned();
    // The admin cordons and taints node 1 for maintenance: alice has no workload there.
    env.kubectl(User::Admin, &["cordon", &name(1)]).unwrap();
    env.kubectl(
        User::Admin,
        &["taint", "node", &name(1), "maintenance=planned:NoSchedule"],
    )
    .unwrap();

    // Placed by her own spec.nodeName, past the scheduler, cordon and taint: never started.
    let protected_job = json!({"labels": {PROTECT: "true"}, "ownerReferences": job_owner("etl")});
    t.alice_places_pod(&own, "never-1", &name(1), protected_job.clone());
    t.alice_places_pod(&granted, "never-2", &name(2), protected_job.clone());
    // A pod of her Job placed on the cordoned node by herself, and running there (a kubelet runs
    // what is bound to it, cordoned or not): it started after the cordon, and holds nothing.
    std::thread::sleep(Duration::from_millis(1_100));
    t.alice_places_pod(
        &own,
        "placed-1",
        &name(1),
        json!({"ownerReferences": job_owner("etl")}),
    );
    t.runs(&own, "placed-1");
    // Its image never pulls (the kubelet says so; it never started).
    t.alice_pod(&granted, "pull-3", &name(3), protected_job.clone());
    env.set_status(
        "pod",
        &granted,
        "pull-3",
        json!({"phase": "Pending", "containerStatuses": [container(json!({"waiting": {
            "reason": "ImagePullBackOff", "message": "Back-off pulling image"}}))]}),
    );
    // Her DaemonSet, labelled protected: its pod runs on node 3, and holds nothing.
    let daemonset = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": granted},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent", PROTECT: "true"}},
                              "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}},
    });
    env.create_as(User::Alice, &daemonset).unwrap();
    let ds = env.get_json(User::Alice, &["get", "daemonset", "agent", "-n", &granted]);
    t.alice_runs_pod(
        &granted,
        "agent-3",
        &name(3),
        json!({"labels": {"app": "agent", PROTECT: "true"},
               "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                    "uid": ds["metadata"]["uid"], "controller": true}]}),
    );
    // Labelled protected where protection was not granted, running on node 3.
    t.alice_runs_pod(
        &own,
        "ledger-3",
        &name(3),
        json!({"labels": {PROTECT: "true"}}),
    );

    // What she may hold, and runs, holds node 4: seen after all of the above by each ruleset.
    t.alice_runs_pod(
        &own,
        "etl-4",
        &name(4),
        json!({"ownerReferences": job_owner("etl")}),
    );
    t.alice_runs_pod(&granted, "ledger-4", &name(4), protected_job);
    let wanted = [
        format!("Pod {own}/etl-4 JobRunning"),
        format!("Pod {granted}/ledger-4 JobRunning"),
        format!("Pod {granted}/ledger-4 Protected"),
    ];
    eventually(
        WAIT,
        &format!("node.{} held by {wanted:?}", name(4)),
        || {
            let gate = env.gate(&format!("node.{}", name(4)));
            let held = holders(&gate);
            (clear_status(&gate) == "False" && wanted.iter().all(|w| held.contains(w)))
                .then_some(())
        },
    );

    // Nothing else holds: nodes 1 to 3 are clear, and stay clear (or, for a moment, unknown
    // only while another test's new ruleset lists its own namespace for the first time).
    let hers = [own.as_str(), granted.as_str()];
    for _ in 0..3 {
        for n in 1..=3 {
            let gate = env.gate(&format!("node.{}", name(n)));
            assert!(
                clear_status(&gate) == "True" || unknown_only_for_others_first_lists(&gate, &hers),
                "node {n}: {gate:#}"
            );
            assert!(holders(&gate).is_empty(), "node {n}: {gate:#}");
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    for n in 1..=3 {
        env.wait_gate(&format!("node.{}", name(n)), "True", WAIT);
    }
    // Asked about one of her pods that holds nothing, `kubectl ifo check` says why.
    for (ns, pod, why) in [
        (
            &own,
            "ledger-3",
            "it is labelled ifo.kubevirt.io/protect-from-maintenance, but the label holds a node \
             only in the namespaces an admin opted in",
        ),
        (&granted, "agent-3", "it belongs to a DaemonSet"),
        (&granted, "pull-3", "it has not started on node"),
    ] {
        let run: Run = env
            .plugin_cmd(
                User::Alice,
                &["check", "-n", ns, "-k", "Pod", "--subject", pod],
            )
            .output()
            .unwrap()
            .into();
        assert_eq!(run.code, 0, "{pod}: {run:?}");
        let note = format!("note: pod {ns}/{pod} holds no node: {why}");
        assert!(run.stderr.contains(&note), "{pod}: {}", run.stderr);
    }
    // The drains of nodes 1 to 3 go through: each of her pods there is evicted.
    for (ns, pod) in [
        (&own, "never-1"),
        (&own, "placed-1"),
        (&granted, "never-2"),
        (&granted, "pull-3"),
        (&own, "ledger-3"),
    ] {
        // As a drain retries: another test's new ruleset, not listed yet, makes every node's
        // gate Unknown for a moment (held then, as not known to be clear); held for anything
        // else, it fails at once.
        eventually(WAIT, &format!("the eviction of {ns}/{pod}"), || {
            let (ok, stderr) = evict(env, ns, pod);
            assert!(
                ok || stderr.contains("is not known to be clear"),
                "the eviction of {ns}/{pod} was refused: {stderr}"
            );
            ok.then_some(())
        });
    }
    // Node 4's is held by what runs there.
    let (ok, stderr) = evict(env, &own, "etl-4");
    assert!(!ok && stderr.contains("TooManyRequests"), "{stderr}");
}

/// On a node the admin cordoned, what alice's Jobs started there before the cordon holds it, and
/// nothing she starts there after does, however it got there — placed by her own
/// `spec.nodeName`, or by the scheduler because it tolerates the cordon — and whatever she
/// writes on her pods afterwards (her `managedFields` erased). The node's gate says how many it
/// does not count; its drain waits only for what holds it.
#[test]
fn on_a_cordoned_node_only_what_started_before_the_cordon_holds_it_whatever_she_writes() {
    let t = Tenancy::new("tenancy-cordon");
    let env = t.env;
    let own = t.own.clone();
    let nodes: Vec<TestNode<'static>> = (1..=2).map(|n| t.node(n)).collect();
    let name = |n: usize| nodes[n - 1].name().to_owned();
    let job = || json!({"ownerReferences": job_owner("etl")});
    // Before the cordon: her Job's pod, placed by the scheduler, runs on node 1.
    t.alice_runs_pod(&own, "early-1", &name(1), job());
    env.wait_gate(&format!("node.{}", name(1)), "False", WAIT);
    // Times are kept to the second: the cordon comes in a later one.
    std::thread::sleep(Duration::from_millis(1_100));
    for n in 1..=2 {
        env.kubectl(User::Admin, &["cordon", &name(n)]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1_100));
    // After it: a pod that tolerates every taint, the cordon among them, which the scheduler
    // places on node 1; and one she places herself on node 2.
    let mut tolerant = job();
    tolerant["name"] = json!("tolerant-1");
    tolerant["namespace"] = json!(own);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": tolerant,
                     "spec": {"restartPolicy": "Never", "tolerations": [{"operator": "Exists"}],
                              "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}});
    env.create_as(User::Alice, &pod).unwrap();
    env.bind(&own, "tolerant-1", &name(1));
    t.runs(&own, "tolerant-1");
    t.alice_places_pod(&own, "placed-2", &name(2), job());
    t.runs(&own, "placed-2");
    // She erases what records who placed them: nothing changes.
    for pod in ["tolerant-1", "placed-2"] {
        env.kubectl(
            User::Alice,
            &[
                "patch",
                "pod",
                pod,
                "-n",
                &own,
                "--type=merge",
                "-p",
                r#"{"metadata":{"managedFields":[{}]}}"#,
            ],
        )
        .unwrap();
    }
    // Both are in flight in her namespace, and neither holds its node.
    eventually(WAIT, "both of her new pods to be seen running", || {
        let ops = env.get_json(User::Alice, &["get", "ifos", "-n", &own]);
        let subjects: Vec<&str> = ops["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o["spec"]["subject"]["name"].as_str())
            .collect();
        ["early-1", "tolerant-1", "placed-2"]
            .iter()
            .all(|p| subjects.contains(p))
            .then_some(())
    });
    let not_counted =
        "1 operation started on the node after it was cordoned: it holds nothing there";
    let hers = [own.as_str()];
    for _ in 0..3 {
        let one = env.gate_of(&format!("node.{}", name(1)), &hers);
        assert_eq!(clear_status(&one), "False", "{one:#}");
        assert_eq!(
            holders(&one),
            [format!("Pod {own}/early-1 JobRunning")],
            "{one:#}"
        );
        assert!(
            condition(&one, "Clear")["message"]
                .as_str()
                .unwrap()
                .contains(not_counted),
            "{one:#}"
        );
        let two = env.gate_of(&format!("node.{}", name(2)), &hers);
        assert_eq!(clear_status(&two), "True", "{two:#}");
        assert!(holders(&two).is_empty(), "{two:#}");
        assert!(
            condition(&two, "Clear")["message"]
                .as_str()
                .unwrap()
                .contains(not_counted),
            "{two:#}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Node 2's drain goes through; node 1's waits for what started before its cordon.
    eventually(WAIT, "the eviction of placed-2", || {
        let (ok, stderr) = evict(env, &own, "placed-2");
        assert!(
            ok || stderr.contains("is not known to be clear"),
            "{stderr}"
        );
        ok.then_some(())
    });
    let (ok, stderr) = evict(env, &own, "tolerant-1");
    assert!(!ok && stderr.contains("TooManyRequests"), "{stderr}");
    // Her early pod ends: node 1 is clear, and its drain goes through, the tolerant pod still
    // running.
    env.set_status("pod", &own, "early-1", json!({"phase": "Succeeded"}));
    env.wait_gate(&format!("node.{}", name(1)), "True", WAIT);
    let (ok, stderr) = evict(env, &own, "tolerant-1");
    assert!(ok, "{stderr}");
}

/// In the namespace the admin opted in, alice's protected pod that runs holds its node: the
/// drain waits. The admin's override lets it through and shows on the node's gate and in
/// `/metrics`; an end that cannot be read leaves it not in force, saying why, and so does a
/// duration, which no later write could be kept from moving; a time ends it by itself, where the
/// admin put it whatever is written to the Node meanwhile, and the guard holds again with no
/// other change to the Node.
#[test]
fn a_running_protected_pod_where_granted_holds_its_node_until_the_override_ends() {
    let t = Tenancy::new("tenancy-override");
    let env = t.env;
    let granted = t.granted.clone();
    let node = t.node(1);
    let node_name = node.name().to_owned();
    let gate_name = format!("node.{node_name}");
    t.alice_runs_pod(
        &granted,
        "ledger",
        &node_name,
        json!({"labels": {PROTECT: "true"}}),
    );
    env.wait_gate(&gate_name, "False", WAIT);
    for pod in ["app-1", "app-2", "app-3"] {
        t.alice_pod(&granted, pod, &node_name, json!({}));
    }
    let (ok, stderr) = evict(env, &granted, "app-1");
    assert!(!ok && stderr.contains("TooManyRequests"), "{stderr}");
    assert!(
        condition(&env.gate(&gate_name), "Overridden").is_null(),
        "no override yet"
    );

    let annotate = |args: &[&str]| {
        let mut all = vec!["annotate", "--overwrite", "node", node_name.as_str()];
        all.extend(args);
        env.kubectl(User::Admin, &all).unwrap();
    };
    // An end that cannot be read: not in force (the admin meant it to end), and the gate says
    // why.
    annotate(&[
        "ifo.kubevirt.io/maintenance-override=disk failing, INC-4711",
        "ifo.kubevirt.io/maintenance-override-until=tomorrow",
    ]);
    let warned = eventually(
        WAIT,
        "the gate to say the override's end is invalid",
        || {
            let gate = env.gate_of(&gate_name, &[&granted]);
            (condition(&gate, "Overridden")["reason"] == "InvalidOverrideEnd").then_some(gate)
        },
    );
    let overridden = condition(&warned, "Overridden");
    assert_eq!(overridden["status"], "False", "{warned:#}");
    let message = overridden["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "the override (disk failing, INC-4711) is not in force: \
             ifo.kubevirt.io/maintenance-override-until \"tomorrow\" is not an RFC 3339 time"
        ),
        "{message}"
    );
    // The verdict is unchanged: her pod is still protected there, and the drain held.
    assert_eq!(clear_status(&warned), "False");
    assert!(holders(&warned).contains(&format!("Pod {granted}/ledger Protected")));
    let (ok, stderr) = evict(env, &granted, "app-1");
    assert!(
        !ok && stderr.contains("TooManyRequests"),
        "let through by an override whose end cannot be read: {stderr}"
    );

    // A duration: not in force either, and the gate says what to write instead.
    annotate(&["ifo.kubevirt.io/maintenance-override-until=40s"]);
    let relative = eventually(WAIT, "the gate to refuse a duration as an end", || {
        let gate = env.gate(&gate_name);
        let message = condition(&gate, "Overridden")["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        message.contains("\"40s\" is a duration").then_some(gate)
    });
    assert_eq!(
        condition(&relative, "Overridden")["reason"],
        "InvalidOverrideEnd"
    );
    let (ok, stderr) = evict(env, &granted, "app-1");
    assert!(
        !ok && stderr.contains("TooManyRequests"),
        "let through by an override whose end is a duration: {stderr}"
    );

    // A valid end, half a minute ahead, as `kubectl ifo override` writes it (the time it
    // ends): in force until then.
    let run: Run = env
        .plugin_cmd(
            User::Admin,
            &[
                "override",
                &node_name,
                "--for",
                "30s",
                "--reason",
                "disk failing, INC-4711",
                "-o",
                "json",
            ],
        )
        .output()
        .unwrap()
        .into();
    assert_eq!(run.code, 0, "{run:?}");
    let written: Value = serde_json::from_str(&run.stdout).unwrap();
    let until: Timestamp = written["until"].as_str().unwrap().parse().unwrap();
    let set = eventually(WAIT, "the gate to show the override's end", || {
        let gate = env.gate(&gate_name);
        (condition(&gate, "Overridden")["reason"] == "OverrideSetUntil").then_some(gate)
    });
    let message = condition(&set, "Overridden")["message"].as_str().unwrap();
    assert!(message.ends_with(&format!("until {until}")), "{message}");
    // Unrelated writes to the Node by the same hand (which move its managedFields' times) leave
    // the end where it is.
    annotate(&["example.com/unrelated=after-the-override"]);
    env.kubectl(
        User::Admin,
        &[
            "label",
            "--overwrite",
            "node",
            &node_name,
            "example.com/unrelated=after-the-override",
        ],
    )
    .unwrap();
    let moved = env.gate(&gate_name);
    let message = condition(&moved, "Overridden")["message"].as_str().unwrap();
    assert!(message.ends_with(&format!("until {until}")), "{message}");
    let series = format!("ifo_guard_override_active{{node=\"{node_name}\"}}");
    assert_eq!(env.metric(&series), 1.0);
    let (ok, stderr) = evict(env, &granted, "app-2");
    assert!(ok, "held despite the override: {stderr}");

    // The end passes: the gate's watch sees it (kubectl wait watches), and the guard holds
    // again, the annotations still on the Node.
    let waited = env.run_kubectl(
        User::Admin,
        &[
            "wait",
            "--for=condition=Overridden=False",
            &format!("gate/{gate_name}"),
            "--timeout=90s",
        ],
    );
    waited.assert_success("kubectl wait for the override to end");
    assert!(Timestamp::now() >= until, "ended before its time");
    let ended = env.gate(&gate_name);
    assert_eq!(condition(&ended, "Overridden")["reason"], "OverrideEnded");
    let (ok, stderr) = evict(env, &granted, "app-3");
    assert!(
        !ok && stderr.contains("TooManyRequests") && stderr.contains("clear for maintenance"),
        "the eviction after the override's end: {stderr}"
    );
    assert!(
        !env.metrics().contains(&series),
        "the override is still counted after its end"
    );
    let run: Run = env
        .plugin_cmd(User::Admin, &["override", &node_name, "--remove"])
        .output()
        .unwrap()
        .into();
    assert_eq!(run.code, 0, "{run:?}");
    eventually(
        WAIT,
        "the Overridden condition to go with the annotations",
        || {
            condition(&env.gate(&gate_name), "Overridden")
                .is_null()
                .then_some(())
        },
    );
}
