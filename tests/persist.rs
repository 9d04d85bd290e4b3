//! Persistence mode on a real cluster: every live operation has a cluster-scoped
//! `inflightoperations.ifo.kubevirt.io` copy that matches it field by field, that the operator's
//! field selectors find, and that goes with it; a `kill -9` keeps identities; a kube-apiserver
//! outage is caught up; objects of others are never touched; of two replicas with leader
//! election, only the leader writes.
//!
//! A test binary of its own (with its own cluster and a server in persistence mode). The tests
//! kill the server and freeze kube-apiserver, so they run one at a time (`SERIAL`).

use ifo_dev::User;
use ifo_test_support::{Env, Stop, WatchStream, completion, eventually, replicas};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);
const COPIES: &str = "inflightoperations.ifo.kubevirt.io";

/// This binary's environment: the server in persistence mode.
fn env() -> &'static Env {
    Env::builder().persist(true).start()
}

/// The tests stop the server or kube-apiserver: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The copies of operations on subjects of `namespace`, by name (found with the operator's
/// field selector).
fn copies(env: &Env, namespace: &str) -> BTreeMap<String, Value> {
    let selector = format!("spec.subject.namespace={namespace}");
    let list = env.get_json(User::Admin, &["get", COPIES, "--field-selector", &selector]);
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_owned(),
                o.clone(),
            )
        })
        .collect()
}

/// The live operations of `namespace`, by name.
fn live(env: &Env, namespace: &str) -> BTreeMap<String, Value> {
    env.ifos(namespace)
        .into_iter()
        .map(|o| (o["metadata"]["name"].as_str().unwrap().to_owned(), o))
        .collect()
}

/// Whether the copy holds what the live object shows: same spec and status, its labels, and
/// the live uid and start time. The operator's schema has no place for an ending operation's
/// `gracePeriodEnd` and `Detected` condition: the copy is written without them.
fn mirrors(copy: &Value, live: &Value) -> bool {
    let labels = live["metadata"]["labels"].as_object().unwrap();
    let mut status = live["status"].clone();
    if let Some(fields) = status.as_object_mut()
        && fields.remove("gracePeriodEnd").is_some()
    {
        fields.insert("conditions".into(), json!([]));
    }
    copy["spec"] == live["spec"]
        && copy["status"] == status
        && labels
            .iter()
            .all(|(k, v)| &copy["metadata"]["labels"][k] == v)
        && copy["metadata"]["annotations"]["ifo.kubevirt.io/uid"] == live["metadata"]["uid"]
}

/// Waits until the copies of `namespace` are exactly the live operations, each mirroring its
/// live object; returns them.
fn converged(env: &Env, namespace: &str, timeout: Duration) -> BTreeMap<String, Value> {
    converged_among(env, namespace, timeout, &[])
}

/// [`converged`] where more servers write copies: the replicas listening on `writers` beside
/// the environment's server. Each detects an operation at its own moment, so each gives it a
/// uid of its own, and the copy holds the uid of the server that wrote it last: a copy may
/// mirror the live object of any of them.
fn converged_among(
    env: &Env,
    namespace: &str,
    timeout: Duration,
    writers: &[u16],
) -> BTreeMap<String, Value> {
    let mut last = (BTreeMap::new(), BTreeMap::new());
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        eventually(timeout, "copies equal to the live operations", || {
            let (copies, live) = (copies(env, namespace), live(env, namespace));
            let theirs: Vec<_> = writers
                .iter()
                .filter_map(|&port| live_at(env, port, namespace))
                .collect();
            let same = copies.len() == live.len()
                && live.iter().all(|(name, l)| {
                    copies.get(name).is_some_and(|c| {
                        mirrors(c, l)
                            || theirs
                                .iter()
                                .any(|other| other.get(name).is_some_and(|o| mirrors(c, o)))
                    })
                });
            last = (copies.clone(), live);
            same.then_some(copies)
        })
    }));
    waited.unwrap_or_else(|_| {
        // What the server answers when asked directly, not through the aggregation layer.
        let direct = live_at(env, env.port, namespace).map(|l| l.into_keys().collect::<Vec<_>>());
        panic!(
            "copies did not converge:\ncopies: {:#?}\nlive: {:#?}\nthe server's own list: \
             {direct:?}\nserver log:\n{}",
            last.0,
            last.1,
            env.server_log_tail(40)
        )
    })
}

fn watch_copies(env: &Env, namespace: &str) -> WatchStream {
    env.watch(&format!(
        "/apis/ifo.kubevirt.io/v1alpha1/inflightoperations?watch=true&fieldSelector=spec.subject.namespace%3D{namespace}"
    ))
}

#[test]
fn copies_mirror_the_live_operations_and_go_with_them() {
    let _serial = serial();
    let env = env();
    let (ns, _) = env.vms_with_ruleset("mirror", &["vm1"]);
    let events = watch_copies(env, &ns);
    env.set_vm_status(
        &ns,
        "vm1",
        json!({"printableStatus": "Migrating", "migrationTarget": "node-2"}),
    );
    let copies_now = converged(env, &ns, WAIT);
    assert_eq!(copies_now.len(), 1);
    let (name, copy) = copies_now.iter().next().unwrap();
    assert_eq!(copy["status"]["phase"], "Active");
    assert_eq!(copy["status"]["message"], "to node-2");
    assert!(
        copy["metadata"].get("namespace").is_none(),
        "cluster-scoped"
    );
    assert_eq!(
        copy["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "ifo-apiserver"
    );

    // The operator's plugin's selectors, and the printer columns of its CRD.
    let table = env
        .kubectl(
            User::Admin,
            &[
                "get",
                COPIES,
                "--field-selector",
                &format!(
                    "status.phase=Active,spec.subject.namespace={ns},spec.operation=Migrating"
                ),
            ],
        )
        .unwrap();
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "KIND",
            "NAMESPACE",
            "SUBJECT",
            "OPERATION",
            "PHASE",
            "STARTED",
            "COMPLETED"
        ]
    );
    assert!(table.contains(name.as_str()), "{table}");
    let none = env
        .kubectl(
            User::Admin,
            &[
                "get",
                COPIES,
                "--field-selector",
                &format!("status.phase=Completed,spec.subject.namespace={ns}"),
            ],
        )
        .unwrap();
    assert!(!none.contains(name.as_str()), "{none}");
    // `ifos` is still the live API with the CRD installed.
    let live_kind = env.get_json(User::Admin, &["get", "ifos", "-n", &ns]);
    assert_eq!(
        live_kind["items"][0]["apiVersion"],
        "live.ifo.kubevirt.io/v1alpha1"
    );

    // It ends: the copy shows the completion and its outcome, then goes with the live object.
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Running"}));
    let seen = events.until(WAIT, "the copy deleted", |e| e["type"] == "DELETED");
    assert_eq!(completion(&seen)["outcome"], "Succeeded");
    assert!(live(env, &ns).is_empty());
    assert!(copies(env, &ns).is_empty());
    let writes: Vec<&str> = seen.iter().map(|e| e["type"].as_str().unwrap()).collect();
    println!("copy events of one lifecycle: {writes:?}");
    assert_eq!(writes, ["ADDED", "MODIFIED", "DELETED"], "one write each");
}

#[test]
fn after_a_kill_the_same_operations_continue_and_those_that_ended_complete() {
    let _serial = serial();
    let env = env();
    let (ns, _) = env.vms_with_ruleset("kill", &["vm1", "vm2", "vm3"]);
    for vm in ["vm1", "vm2", "vm3"] {
        env.set_vm_status(&ns, vm, json!({"printableStatus": "Starting"}));
    }
    eventually(WAIT, "three operations", || {
        (live(env, &ns).len() == 3).then_some(())
    });
    let before = converged(env, &ns, WAIT);
    assert_eq!(before.len(), 3);
    let identity = |o: &Value| {
        (
            o["metadata"]["name"].clone(),
            o["metadata"]["uid"].clone(),
            o["metadata"]["creationTimestamp"].clone(),
        )
    };
    let live_before = live(env, &ns);
    let subject_of = |o: &Value| o["spec"]["subject"]["name"].as_str().unwrap().to_owned();

    env.stop_server(Stop::Kill);
    // vm2 finishes starting while nobody watches.
    env.set_vm_status(&ns, "vm2", json!({"printableStatus": "Running"}));
    let events = watch_copies(env, &ns);
    env.restart_server().unwrap();
    env.wait_served();

    // The two still in flight are the same objects as before the kill: same name, uid and
    // start, from the first answer on and after the restored operations are swept.
    let still = |live: &BTreeMap<String, Value>| {
        let mut subjects: Vec<String> = live.values().map(subject_of).collect();
        subjects.sort_unstable();
        subjects == ["vm1", "vm3"]
    };
    let after = eventually(WAIT, "vm1's and vm3's operations served again", || {
        let live = live(env, &ns);
        still(&live).then_some(live)
    });
    for op in after.values() {
        let was = &live_before[op["metadata"]["name"].as_str().unwrap()];
        assert_eq!(identity(op), identity(was), "same name, uid and start");
    }
    // vm2's copy shows it completed, how unknown, then goes.
    let vm2 = before.values().find(|o| subject_of(o) == "vm2").unwrap();
    let vm2_name = vm2["metadata"]["name"].as_str().unwrap().to_owned();
    let seen = events.until(WAIT, "vm2's copy deleted", |e| {
        e["type"] == "DELETED" && e["object"]["metadata"]["name"] == vm2_name.as_str()
    });
    assert!(
        seen.iter()
            .any(|e| e["object"]["metadata"]["name"] == vm2_name.as_str()
                && e["object"]["status"]["phase"] == "Completed"
                && e["object"]["status"]["outcome"] == "Unknown"),
        "{seen:#?}"
    );
    // Past the sweep of restored operations nothing confirmed (a debounce threshold after the
    // initial sync): still the same two objects, Active.
    std::thread::sleep(Duration::from_secs(5));
    let later = live(env, &ns);
    assert!(still(&later), "{later:#?}");
    for op in later.values() {
        let was = &live_before[op["metadata"]["name"].as_str().unwrap()];
        assert_eq!(identity(op), identity(was), "same name, uid and start");
        assert_eq!(op["status"]["phase"], "Active");
    }
    // No duplicates: one copy each, the same objects as before the kill.
    let copies_after = converged(env, &ns, WAIT);
    assert_eq!(
        copies_after.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (name, copy) in &copies_after {
        assert_eq!(
            copy["metadata"]["uid"], before[name]["metadata"]["uid"],
            "the copy was kept, not recreated"
        );
    }
}

#[test]
fn copies_catch_up_after_kube_apiserver_was_unavailable() {
    let _serial = serial();
    let env = env();
    let vms = ["vm1", "vm2", "vm3", "vm4", "vm5"];
    let (ns, _) = env.vms_with_ruleset("outage", &vms);
    for vm in &vms[..3] {
        env.set_vm_status(&ns, vm, json!({"printableStatus": "Starting"}));
    }
    eventually(WAIT, "three operations", || {
        (live(env, &ns).len() == 3).then_some(())
    });
    // A new message for each, so that writes are due while kube-apiserver hangs.
    for vm in &vms[..3] {
        env.set_vm_status(
            &ns,
            vm,
            json!({"printableStatus": "Migrating", "migrationTarget": "node-7"}),
        );
    }
    env.cluster.freeze_apiserver(true).unwrap();
    // The live API keeps serving what it knows (asked directly, as a system:masters user
    // whose client certificate needs no review).
    let path = format!("/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{ns}/inflightoperations");
    let admin = env.client_cert_args(User::Admin);
    let admin: Vec<&str> = admin.iter().map(String::as_str).collect();
    let (code, body) = env.direct(&path, &admin);
    std::thread::sleep(Duration::from_secs(30));
    let (code_late, body_late) = env.direct(&path, &admin);
    env.cluster.freeze_apiserver(false).unwrap();
    assert_eq!(code, "200", "{body}");
    assert_eq!(code_late, "200", "{body_late}");
    let served: Value = serde_json::from_str(&body_late).unwrap();
    assert_eq!(served["items"].as_array().unwrap().len(), 3, "{served}");

    // Back: two end, two start; the copies follow exactly.
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Running"}));
    env.set_vm_status(&ns, "vm2", json!({"printableStatus": "Running"}));
    env.set_vm_status(&ns, "vm4", json!({"printableStatus": "Starting"}));
    env.set_vm_status(&ns, "vm5", json!({"printableStatus": "Starting"}));
    eventually(
        Duration::from_secs(90),
        "vm1 and vm2 done, vm4 and vm5 started",
        || {
            let mut subjects: Vec<String> = live(env, &ns)
                .values()
                .map(|o| o["spec"]["subject"]["name"].as_str().unwrap().to_owned())
                .collect();
            subjects.sort_unstable();
            (subjects == ["vm3", "vm4", "vm5"]).then_some(())
        },
    );
    let copies_now = converged(env, &ns, Duration::from_secs(90));
    let mut subjects: Vec<&str> = copies_now
        .values()
        .map(|c| c["spec"]["subject"]["name"].as_str().unwrap())
        .collect();
    subjects.sort_unstable();
    assert_eq!(subjects, ["vm3", "vm4", "vm5"]);
}

#[test]
fn objects_of_others_are_left_alone() {
    let _serial = serial();
    let env = env();
    let (ns, rs) = env.vms_with_ruleset("foreign", &["vm1"]);
    let vm = env.get_json(User::Admin, &["get", "vm", "vm1", "-n", &ns]);
    let uid = vm["metadata"]["uid"].as_str().unwrap();
    // Someone else's object under the very name our copy of vm1's migration would have, and
    // one of the operator's, with a random name.
    let taken = ifo::operation::object_name("vm1", "Migrating", uid, &rs);
    let theirs = |name: &str| {
        json!({"apiVersion": "ifo.kubevirt.io/v1alpha1", "kind": "InFlightOperation",
            "metadata": {"name": name, "labels": {"ifo.kubevirt.io/operation": "Migrating"}},
            "spec": {"operation": "Migrating", "ruleSet": "theirs", "component": "",
                "subject": {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                    "name": "vm1", "namespace": ns}},
            "status": {"phase": "Active"}})
        .to_string()
    };
    let operators = format!("vm1-{}", &uid[..5]);
    env.apply(&theirs(&taken));
    env.apply(&theirs(&operators));
    let rv = |name: &str| {
        env.get_json(User::Admin, &["get", COPIES, name])["metadata"]["resourceVersion"].clone()
    };
    let before = (rv(&taken), rv(&operators));

    env.set_vm_status(
        &ns,
        "vm1",
        json!({"printableStatus": "Migrating", "migrationTarget": "node-3"}),
    );
    eventually(WAIT, "the live operation", || {
        live(env, &ns).contains_key(&taken).then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Running"}));
    eventually(WAIT, "the live operation gone", || {
        live(env, &ns).is_empty().then_some(())
    });
    assert!(
        env.server_log_tail(400).contains("is not ours"),
        "the clash is logged"
    );
    // A restart reads only our copies back.
    env.stop_server(Stop::Term);
    env.restart_server().unwrap();
    env.wait_served();
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!((rv(&taken), rv(&operators)), before, "never written");
    for name in [&taken, &operators] {
        env.kubectl(User::Admin, &["delete", COPIES, name]).unwrap();
    }
}

/// The sum of `ifo_persist_writes_total` (every verb and result) a replica reports.
fn persist_writes(env: &Env, replica: &replicas::Replica) -> f64 {
    let (code, body) = replicas::get(env, replica.port, "/metrics");
    assert_eq!(code, "200", "{body}");
    body.lines()
        .filter(|l| l.starts_with("ifo_persist_writes_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn only_the_leader_writes_copies() {
    let _serial = serial();
    let env = env();
    let lease = format!("ifo-persist-{}", std::process::id());
    let settings = [("PERSIST", "true"), ("PERSIST_INTERVAL", "1s")];
    let (replicas, leader) = replicas::elected_pair(env, &lease, &settings);
    let standby = &replicas[1 - leader];
    let (ns, _) = env.vms_with_ruleset("leader", &["vm1"]);
    env.set_vm_status(
        &ns,
        "vm1",
        json!({"printableStatus": "Migrating", "migrationTarget": "node-2"}),
    );
    // The environment's server writes copies too (it runs without leader election).
    let writers = [replicas[leader].port];
    converged_among(env, &ns, WAIT, &writers);
    // The leader writes its copy too (or finds it written: a conflict it resolves by reading).
    eventually(WAIT, "the leader writing", || {
        (persist_writes(env, &replicas[leader]) > 0.0).then_some(())
    });
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Running"}));
    converged_among(env, &ns, WAIT, &writers);
    assert_eq!(persist_writes(env, standby), 0.0, "the standby wrote");
}

#[test]
fn a_new_leader_completes_copies_written_after_its_start_for_operations_it_no_longer_has() {
    let _serial = serial();
    let env = env();
    // The standby read the copies back at its start, before any of this test's existed.
    let (_restart, replicas, leader) = replicas_alone(env, "failover");
    let (ns, _) = env.vms_with_ruleset("failover", &["vm1"]);
    env.set_vm_status(
        &ns,
        "vm1",
        json!({"printableStatus": "Migrating", "migrationTarget": "node-2"}),
    );
    let copy = eventually(WAIT, "the leader's copy", || {
        copies(env, &ns).into_values().next()
    });
    let name = copy["metadata"]["name"].as_str().unwrap().to_owned();
    println!(
        "copy written by the leader: {name}, phase {}",
        copy["status"]["phase"]
    );

    // The leader crashes, and the operation ends (its subject deleted) before the standby takes
    // over: the standby no longer has it, and never read its copy.
    replicas[leader].process.kill();
    env.kubectl(User::Admin, &["delete", "vm", "vm1", "-n", &ns])
        .unwrap();
    let started = std::time::Instant::now();
    eventually(
        replicas::LEASE_DURATION + WAIT,
        "the new leader to complete and delete the copy",
        || copies(env, &ns).is_empty().then_some(()),
    );
    println!(
        "copy reconciled {:?} after the leader's crash",
        started.elapsed()
    );
}

/// The shared server stopped (started again when the first value drops) and two persisting
/// replicas in its place, electing a leader on a lease of their own (`ifo-persist-<name>-..`):
/// only they write copies. Returns once the standby is ready too, with the leader's index.
fn replicas_alone(env: &'static Env, name: &str) -> (RestartAfter, [replicas::Replica; 2], usize) {
    env.stop_server(Stop::Term);
    let restart = RestartAfter(env);
    let lease = format!("ifo-persist-{name}-{}", std::process::id());
    let settings = [
        ("PERSIST", "true"),
        ("PERSIST_INTERVAL", "1s"),
        ("DEBOUNCE_THRESHOLD", "3s"),
    ];
    let (replicas, leader) = replicas::elected_pair(env, &lease, &settings);
    let standby = &replicas[1 - leader];
    eventually(WAIT, "the standby ready", || {
        (replicas::get(env, standby.port, "/readyz").0 == "200").then_some(())
    });
    (restart, replicas, leader)
}

/// Starts the shared server again when dropped (also when the test fails).
struct RestartAfter(&'static Env);

impl Drop for RestartAfter {
    fn drop(&mut self) {
        self.0.restart_server().unwrap();
        self.0.wait_served();
    }
}

/// The live operations of `namespace` as the replica on `port` serves them, by name.
fn live_at(env: &Env, port: u16, namespace: &str) -> Option<BTreeMap<String, Value>> {
    let path =
        format!("/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{namespace}/inflightoperations");
    let (code, body) = replicas::get(env, port, &path);
    if code != "200" {
        return None;
    }
    let list: Value = serde_json::from_str(&body).ok()?;
    Some(
        list["items"]
            .as_array()?
            .iter()
            .map(|o| {
                (
                    o["metadata"]["name"].as_str().unwrap().to_owned(),
                    o.clone(),
                )
            })
            .collect(),
    )
}

#[test]
fn after_the_leader_is_killed_the_new_leader_keeps_the_identities_it_served() {
    let _serial = serial();
    let env = env();
    let (_restart, replicas, leader) = replicas_alone(env, "identity");
    let standby = 1 - leader;
    // Three operations begin while both replicas run: each replica sees them start.
    let vms = ["vm1", "vm2", "vm3"];
    let (ns, _) = env.vms_with_ruleset("identity", &vms);
    for vm in vms {
        env.set_vm_status(&ns, vm, json!({"printableStatus": "Starting"}));
    }
    let served = eventually(WAIT, "three operations served", || {
        live_at(env, replicas[leader].port, &ns).filter(|l| l.len() == 3)
    });
    eventually(WAIT, "their copies", || {
        let copies = copies(env, &ns);
        (copies.len() == 3
            && served
                .iter()
                .all(|(name, l)| copies.get(name).is_some_and(|c| mirrors(c, l))))
        .then_some(())
    });
    let identity = |o: &Value| {
        (
            o["metadata"]["name"].clone(),
            o["metadata"]["uid"].clone(),
            o["metadata"]["creationTimestamp"].clone(),
        )
    };
    let subject_of = |o: &Value| o["spec"]["subject"]["name"].as_str().unwrap().to_owned();

    // The leader crashes; vm2 finishes starting before the standby takes over.
    replicas[leader].process.kill();
    env.set_vm_status(&ns, "vm2", json!({"printableStatus": "Running"}));
    let after = eventually(
        replicas::LEASE_DURATION + WAIT,
        "the new leader serving vm1's and vm3's operations",
        || {
            let live = live_at(env, replicas[standby].port, &ns)?;
            let mut subjects: Vec<String> = live.values().map(subject_of).collect();
            subjects.sort_unstable();
            (subjects == ["vm1", "vm3"]).then_some(live)
        },
    );
    for (name, op) in &after {
        assert_eq!(
            identity(op),
            identity(&served[name]),
            "the new leader serves the uid and start the old one served"
        );
    }
    // The copies follow: vm1's and vm3's unchanged, vm2's completed and gone.
    eventually(WAIT, "copies equal to what the new leader serves", || {
        let copies = copies(env, &ns);
        let live = live_at(env, replicas[standby].port, &ns)?;
        (copies.len() == 2
            && live
                .iter()
                .all(|(name, l)| copies.get(name).is_some_and(|c| mirrors(c, l))))
        .then_some(())
    });
}
