//! A gate never reads Clear while detection that can reach it is blind, against the real
//! cluster and `kubectl wait`, as a script that drains after the wait would use it:
//!
//! ```sh
//! kubectl wait --for=condition=Clear=True gate/node.worker-1 && kubectl drain worker-1
//! ```
//!
//! Each blind spot a user can cause — an object a ruleset skips for its cost, a ruleset
//! suspended in a namespace for going over its budget there, a rule that fails on an object, a
//! ruleset that does not compile — makes the gates it can reach Unknown, naming the ruleset and
//! the remedy, and the wait does not succeed; fixing the cause brings Clear=True back within seconds, at a new resourceVersion,
//! and the wait succeeds. A tenant's objects that are slow to evaluate, changed in a loop, make
//! her own namespace's and nodes' gates Unknown, and no one else's. A busy CPU is no blind
//! spot: a server held to a twentieth of a core is late, not blind.
//!
//! A test binary of its own (with its own cluster and server): a ruleset that does not compile
//! makes every node's gate Unknown while it lasts, which would hold the node gates of every other
//! test sharing the cluster. The tests here take turns for the same reason. Its cluster sends
//! rulesets to no admission door (`ruleset_webhook(false)`), so a ruleset that does not compile
//! gets in, as it does in an install whose server is down when the ruleset is applied; what
//! that ruleset's own status says is checked here too.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ifo_dev::User;
use ifo_test_support::{
    Env, HEAVY, MIGRATING, Rule, RuleSet, TestNode, clear_condition, eventually, heavy_vm, slow_vm,
    vm,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

/// This binary's environment: without the admission door, which would refuse the rulesets that
/// do not compile.
fn env() -> &'static Env {
    Env::builder().ruleset_webhook(false).start()
}

/// One test at a time: some of them blind every node's gate.
static TURN: Mutex<()> = Mutex::new(());

/// This binary's environment, once it is the calling test's turn; the turn lasts as long as the
/// guard.
fn turn() -> (MutexGuard<'static, ()>, &'static Env) {
    (TURN.lock().unwrap_or_else(|e| e.into_inner()), env())
}

/// A ruleset for VirtualMachines in `ns` that labels each operation with the node in
/// `status.nodeName` (as the shipped rules do) and detects `Busy` with `rule`.
fn ruleset(name: &str, ns: &str, rule: &str) -> String {
    ruleset_in(name, &[ns], rule)
}

/// [`ruleset`] for VirtualMachines in `namespaces` (its component is named after the first).
fn ruleset_in(name: &str, namespaces: &[&str], rule: &str) -> String {
    RuleSet::new(name)
        .component(&format!("c-{}", namespaces[0]))
        .vms()
        .namespaces(namespaces)
        .label_expression(
            "ifo.kubevirt.io/node",
            "object.?status.?nodeName.orValue('')",
        )
        .rule(Rule::new("Busy", rule))
        .to_string()
}

/// A namespace and a Node of this test's own, and a ruleset watching the namespace with `rule`.
/// Returns (namespace, node, ruleset, the node's gate).
fn scene<'a>(env: &'a Env, prefix: &str, rule: &str) -> (String, TestNode<'a>, String, String) {
    let ns = env.namespace(prefix);
    let node = env.node(&format!("n-{ns}"));
    let rs = format!("rs-{ns}");
    env.apply(&ruleset(&rs, &ns, rule));
    let gate = format!("node.{}", node.name());
    (ns, node, rs, gate)
}

/// Creates the VirtualMachine `vm_name` in `ns`, and once ruleset `rs` watches it, puts it on
/// `node`.
fn vm_on_node(env: &Env, ns: &str, rs: &str, vm_name: &str, node: &TestNode) {
    env.apply(&vm(vm_name, ns));
    env.wait_watching(rs);
    on_node(env, ns, vm_name, node.name());
}

/// The gate's `Clear` condition and its resourceVersion.
fn clear(env: &Env, gate: &str) -> (Value, u64) {
    let g = env.gate(gate);
    let rv = g["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_default();
    (clear_condition(&g).clone(), rv)
}

/// Waits until the gate reads Unknown with a message containing every one of `naming`; checks
/// that `kubectl wait` for Clear does not succeed then. Returns the resourceVersion it read.
fn unknown_naming(env: &Env, gate: &str, naming: &[&str]) -> u64 {
    let (condition, rv) = eventually(WAIT, &format!("{gate} Unknown naming {naming:?}"), || {
        let (c, rv) = clear(env, gate);
        let message = c["message"].as_str().unwrap_or_default();
        (c["status"] == "Unknown" && naming.iter().all(|n| message.contains(n))).then_some((c, rv))
    });
    assert_eq!(condition["reason"], "Stale", "{condition}");
    let wait = env.wait_clear(gate, "3s");
    assert_ne!(
        wait.code, 0,
        "kubectl wait succeeded on {gate} while it is {condition}: {}",
        wait.stdout
    );
    rv
}

/// Waits until the gate reads Clear=True at a resourceVersion after `after`, within seconds,
/// and checks that `kubectl wait` then succeeds at once.
fn clear_again(env: &Env, gate: &str, after: u64) {
    eventually(
        Duration::from_secs(15),
        &format!("{gate} Clear again"),
        || {
            let (c, rv) = clear(env, gate);
            (c["status"] == "True" && rv > after).then_some(())
        },
    );
    let wait = env.wait_clear(gate, "10s");
    assert_eq!(wait.code, 0, "{}{}", wait.stdout, wait.stderr);
}

fn on_node(env: &Env, ns: &str, vm_name: &str, node: &str) {
    env.set_vm_status(ns, vm_name, json!({"nodeName": node}));
}

#[test]
fn an_object_skipped_for_its_cost_makes_its_nodes_gate_unknown() {
    let (_turn, env) = turn();
    let (ns, node, rs, gate) = scene(env, "skipped", HEAVY);
    vm_on_node(env, &ns, &rs, "small", &node);
    clear_again(env, &gate, 0);

    // The VM on the node is too costly to evaluate: whether it is migrating off it is unknown.
    env.apply(&heavy_vm("big", &ns));
    on_node(env, &ns, "big", node.name());
    let rv = unknown_naming(env, &gate, &[&format!("{ns}/big"), &rs, "budget"]);
    // A node it is known not to be on is not held by it.
    let elsewhere = env.node(&format!("n-other-{ns}"));
    clear_again(env, &format!("node.{}", elsewhere.name()), 0);

    env.kubectl(User::Admin, &["delete", "vm", "big", "-n", &ns])
        .unwrap();
    clear_again(env, &gate, rv);
}

/// One tenant's costly objects suspend an admin's ruleset in the tenant's namespace only: it goes
/// on detecting in another namespace, and of the node gates only those of the nodes where the
/// tenant's objects changed unseen are Unknown.
#[test]
fn a_ruleset_suspended_in_one_namespace_goes_on_detecting_in_another() {
    let (_turn, env) = turn();
    let tenant = env.namespace("tenant");
    let other = env.namespace("other");
    let (theirs, busy) = (
        env.node(&format!("n-{tenant}")),
        env.node(&format!("n-{other}")),
    );
    let rs = format!("rs-{tenant}");
    env.apply(&ruleset_in(
        &rs,
        &[&tenant, &other],
        &format!("{MIGRATING} || {HEAVY}"),
    ));
    env.apply(&vm("vm-0", &other));
    env.wait_watching(&rs);

    // Over budget on five objects the tenant creates (she edits her namespace, nothing else):
    // suspended there.
    let user = format!("user-{tenant}");
    env.tenant(&user, &tenant);
    for i in 0..5 {
        env.kubectl_as(
            &user,
            &["apply", "--server-side", "-f", "-"],
            Some(&heavy_vm(&format!("heavy-{i}"), &tenant)),
        )
        .unwrap();
    }
    let rv = unknown_naming(
        env,
        &format!("namespace.{tenant}"),
        &[&rs, &format!("suspended in namespace {tenant}")],
    );

    // Another namespace's migration is still detected, and holds its node.
    env.set_vm_status(
        &other,
        "vm-0",
        json!({"printableStatus": "Migrating", "nodeName": busy.name()}),
    );
    let held = eventually(WAIT, "the other namespace's migration on its node", || {
        let (c, _) = clear(env, &format!("node.{}", busy.name()));
        (c["status"] == "False").then_some(c)
    });
    assert!(held["message"].as_str().unwrap().contains("vm-0"), "{held}");
    let (c, _) = clear(env, &format!("namespace.{other}"));
    assert_eq!(c["status"], "False", "{c}");

    // A tenant's object that changes on a node while suspended: that node's gate cannot tell.
    on_node(env, &tenant, "heavy-0", theirs.name());
    unknown_naming(
        env,
        &format!("node.{}", theirs.name()),
        &[&format!("{tenant}/heavy-0"), "suspended"],
    );

    // A cheaper rule (a new generation) resumes it everywhere.
    env.apply(&ruleset_in(&rs, &[&tenant, &other], MIGRATING));
    clear_again(env, &format!("namespace.{tenant}"), rv);
    clear_again(env, &format!("node.{}", theirs.name()), 0);
}

#[test]
fn a_rule_that_fails_on_an_object_makes_its_nodes_gate_unknown() {
    let (_turn, env) = turn();
    // A rule that returns a string: it compiles, and fails on every object.
    let (ns, node, rs, gate) = scene(env, "failing", "object.metadata.name");
    vm_on_node(env, &ns, &rs, "vm-0", &node);
    let rv = unknown_naming(env, &gate, &[&format!("{ns}/vm-0"), &rs, "rule Busy"]);

    env.apply(&ruleset(&rs, &ns, "object.metadata.name == 'nothing'"));
    clear_again(env, &gate, rv);
}

#[test]
fn a_ruleset_that_does_not_compile_makes_every_node_gate_unknown() {
    let (_turn, env) = turn();
    let (ns, _node, rs, gate) = scene(env, "invalid", "object.spec.(");
    let rv = unknown_naming(env, &gate, &[&rs, "do not compile"]);

    env.apply(&ruleset(&rs, &ns, "false"));
    clear_again(env, &gate, rv);
}

/// A ruleset that got past the admission door and does not compile says why on its status (the
/// rule and the position), and runs none of its rules, not even those that compile.
#[test]
fn a_ruleset_past_the_door_that_does_not_compile_says_why_and_runs_nothing() {
    let (_turn, env) = turn();
    let (ns, rs) = env.namespace_with_ruleset("norun", "broken", |rs, ns| {
        RuleSet::new(rs)
            .vms()
            .namespaces(&[ns])
            .rule(Rule::new("Ok", "true"))
            .rule(Rule::new("Broken", "object.status.printableStatus =="))
            .to_string()
    });
    let invalid = env.wait_ruleset_condition(&rs, "InvalidRule", "True", WAIT);
    let message = invalid["message"].as_str().unwrap();
    assert!(
        message.contains("rules[1] (Broken).expression: ERROR: <input>:1:33"),
        "{message}"
    );
    assert!(message.contains('^'), "no caret in: {message}");
    let ready = env.ruleset_condition(&rs, "Ready").unwrap();
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "InvalidRule");
    env.apply(&vm("vm1", &ns));
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        env.ifos(&ns).is_empty(),
        "the valid rule of an invalid ruleset must not run"
    );
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

/// The lag bound of this binary's server (`EVALUATION_LAG_BOUND`, its default).
const LAG_BOUND: Duration = Duration::from_secs(5);

/// Her VirtualMachines of [`a_tenants_slow_objects_changed_in_a_loop_leave_other_gates_clear`]:
/// this many, each [`HER_N`] iterations slow, changed together in a loop.
const HERS: usize = 1000;

/// Iterations of the slow rule on each of her objects: a few milliseconds each in the test's
/// (unoptimised) server, a twentieth of the budget, so that only a very busy machine puts them
/// over it (then the ruleset is suspended in her namespace: her blind spot all the same).
const HER_N: u64 = 5_000;

/// How long, at least, the other gates are read during her flood.
const HELD_FOR: Duration = Duration::from_secs(15);

/// A VirtualMachine `name` of `namespace` on `node` (`spec.node`, read by the ruleset's node
/// label), `n` iterations slow to evaluate, at change `round`.
fn vm_on(namespace: &str, name: &str, node: &str, n: u64, round: usize) -> Value {
    let round = json!({"example.com/round": round.to_string()});
    let mut vm = slow_vm(name, namespace, n, round);
    vm["spec"]["node"] = json!(node);
    vm
}

/// `count` VirtualMachines of `namespace` (`churn-0`, …) on `node`, each `n` iterations slow, at
/// change `round`, as one List to apply.
fn churning_vms(namespace: &str, node: &str, count: usize, n: u64, round: usize) -> String {
    let items: Vec<Value> = (0..count)
        .map(|i| vm_on(namespace, &format!("churn-{i}"), node, n, round))
        .collect();
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// A ruleset `rs` for VirtualMachines in `namespaces` whose node label reads `spec.node` (as
/// [`vm_on`] sets it) and whose `Churning` rule iterates `spec.n` times: slow to evaluate, never
/// true.
fn churning_ruleset(rs: &str, namespaces: &[&str]) -> RuleSet {
    RuleSet::new(rs)
        .component(&format!("c-{rs}"))
        .vms()
        .namespaces(namespaces)
        .label_expression(ifo_model::NODE_LABEL, "object.?spec.?node.orValue('')")
        .rule(Rule::new(
            "Churning",
            "lists.range(object.spec.?n.orValue(0)).exists(i, i < 0)",
        ))
}

/// The `Clear` condition of gate `gate`, read by the admin; `None` while it has none.
fn clear_of(env: &Env, gate: &str) -> Option<Value> {
    Some(clear_condition(&env.gate(gate)).clone()).filter(|c| !c.is_null())
}

/// The lag attack, as a tenant mounts it with her own rights (`edit` in her namespace): her
/// VirtualMachines, slow to evaluate yet within the budget, on a node she named, changed
/// together in a loop, under a ruleset that also sees another namespace's VirtualMachine on
/// another node. Her lag is her own: her namespace's gate and her node's read `Unknown` naming
/// the lag, while the other node's gate and the other namespace's stay `Clear` throughout and
/// show that namespace's migration promptly. Before, one lane in arrival order: the other
/// namespace's change waited behind all of hers, and every node's gate the ruleset reaches read
/// `Unknown`, so with `GUARD_WHEN_UNKNOWN=deny` every drain of the cluster was refused. (Here,
/// rather than with the tests that share a cluster: while her namespace is late, answers about
/// every namespace are incomplete, by design.)
#[test]
fn a_tenants_slow_objects_changed_in_a_loop_leave_other_gates_clear() {
    let (_turn, env) = turn();
    let theirs = env.namespace("lag-tenant");
    let ours = env.namespace("lag-other");
    let tenant_user = format!("tenant-{theirs}");
    env.tenant(&tenant_user, &theirs);
    let her_node_guard = env.node(&format!("{theirs}-hers"));
    let other_node_guard = env.node(&format!("{ours}-theirs"));
    let (her_node, other_node) = (
        her_node_guard.name().to_owned(),
        other_node_guard.name().to_owned(),
    );
    let rs = format!("lag-{theirs}");
    let _cleanup = env.delete_on_drop(&[&rs]);
    env.apply(
        &churning_ruleset(&rs, &[&theirs, &ours])
            .rule(Rule::new("Migrating", MIGRATING))
            .to_string(),
    );
    env.apply(&vm_on(&ours, "vm-0", &other_node, 0, 0).to_string());
    let hers = {
        let (theirs, her_node) = (theirs.clone(), her_node.clone());
        move |round: usize| churning_vms(&theirs, &her_node, HERS, HER_N, round)
    };
    env.kubectl_as(
        &tenant_user,
        &["apply", "--server-side", "-f", "-"],
        Some(&hers(0)),
    )
    .unwrap();
    env.wait_watching(&rs);
    let gates = [format!("node.{other_node}"), format!("namespace.{ours}")];
    for gate in &gates {
        eventually(WAIT, &format!("gate/{gate} Clear"), || {
            clear_of(env, gate).filter(|c| c["status"] == "True")
        });
    }

    let stop = Arc::new(AtomicBool::new(false));
    let flood = std::thread::spawn({
        let (stop, tenant_user) = (stop.clone(), tenant_user.clone());
        move || {
            let mut round = 1;
            while !stop.load(Ordering::Acquire) {
                env.kubectl_as(
                    &tenant_user,
                    &["apply", "--server-side", "-f", "-"],
                    Some(&hers(round)),
                )
                .unwrap();
                round += 1;
            }
            round
        }
    });

    // Until her lag shows on her own gates (and for at least [`HELD_FOR`]), the other gates are
    // read every 200 ms: never anything but Clear=True (or, once made, the migration).
    let started = Instant::now();
    let (her_gate, her_node_gate) = (format!("namespace.{theirs}"), format!("node.{her_node}"));
    let mut hers_late: Option<(Duration, String)> = None;
    let mut her_node_late = None;
    let mut migrated_at = None;
    let mut detected = None;
    let mut reads = 0;
    while started.elapsed() < HELD_FOR + WAIT {
        for gate in &gates {
            let condition = clear_of(env, gate).unwrap_or(Value::Null);
            let seen_migration = condition["status"] == "False"
                && condition["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("vm-0"));
            assert!(
                condition["status"] == "True" || seen_migration,
                "gate/{gate} is not Clear while a tenant's objects are late in {theirs}, {:?} \
                 into the flood: {condition}",
                started.elapsed()
            );
            if seen_migration && detected.is_none() {
                detected = Some(started.elapsed());
            }
        }
        reads += 1;
        // Her blind spot: late, or (on a machine too busy for her objects' budget) suspended.
        let late = |gate: &str| {
            clear_of(env, gate)
                .filter(|c| c["status"] == "Unknown")
                .and_then(|c| c["message"].as_str().map(str::to_owned))
                .filter(|m| {
                    m.contains(&theirs)
                        && (m.contains("evaluated late") || m.contains("is suspended"))
                })
        };
        if hers_late.is_none() {
            hers_late = late(&her_gate).map(|m| (started.elapsed(), m));
        }
        if her_node_late.is_none() {
            her_node_late = late(&her_node_gate).map(|_| started.elapsed());
        }
        if hers_late.is_some() && migrated_at.is_none() {
            env.set_vm_status(&ours, "vm-0", json!({"printableStatus": "Migrating"}));
            migrated_at = Some(started.elapsed());
        }
        if detected.is_some() && her_node_late.is_some() && started.elapsed() > HELD_FOR {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Release);
    let rounds = flood.join().unwrap();
    let (_, message) = hers_late.expect("her namespace's gate reads Unknown, naming her lag");
    println!(
        "{rounds} rounds of {HERS} slow VirtualMachines changed by the tenant; {reads} reads of \
         the other gates, all Clear; her node Unknown after {her_node_late:?}; the other \
         namespace's migration (made at {migrated_at:?}) seen at {detected:?}; her namespace: \
         {message}"
    );
    assert!(message.contains(&rs), "{message}");
    assert!(
        her_node_late.is_some(),
        "her node's gate reads Unknown while her changes are late"
    );
    let (migrated_at, detected) = (migrated_at.unwrap(), detected.expect("migration seen"));
    assert!(
        detected.saturating_sub(migrated_at) <= LAG_BOUND,
        "the other namespace's migration was seen {:?} after it was made",
        detected.saturating_sub(migrated_at)
    );
}

/// The starvation test's VirtualMachines: this many, each [`STARVED_N`] iterations slow.
const STARVED_VMS: usize = 20;

/// Iterations of the slow rule on each of them: about ten milliseconds of CPU in the test's
/// (unoptimised) server, a tenth of the budget, so that held to 5 % of a core an evaluation
/// takes longer than the whole budget by the clock while using a tenth of it.
const STARVED_N: u64 = 20_000;

/// How long the server is held to 5 % of a core.
const STARVED_FOR: Duration = Duration::from_secs(60);

/// The server process held to a share of a core by a CPU cgroup (cgroup v1's `cpu`
/// controller: `cpu.cfs_quota_us` of every `cpu.cfs_period_us`), as a busy neighbour and a
/// small CPU request hold it on a node; released when dropped, a failed test included.
struct Starved {
    dir: std::path::PathBuf,
    pid: u32,
}

/// Where the CPU controller is mounted.
const CPU_CGROUP: &str = "/sys/fs/cgroup/cpu";

impl Starved {
    /// Holds `pid` to `percent` of one core.
    fn hold(pid: u32, percent: u64) -> Starved {
        let root = std::path::Path::new(CPU_CGROUP);
        let dir = root.join(format!("ifo-starved-{pid}"));
        let made = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join("cpu.cfs_period_us"), "100000"))
            .and_then(|()| {
                std::fs::write(dir.join("cpu.cfs_quota_us"), (percent * 1000).to_string())
            })
            .and_then(|()| std::fs::write(dir.join("cgroup.procs"), pid.to_string()));
        if let Err(e) = made {
            panic!(
                "cannot hold the server to {percent}% of a core with a CPU cgroup under \
                 {CPU_CGROUP} (this test needs cgroup v1's cpu controller, writable, as root): {e}"
            );
        }
        Starved { dir, pid }
    }
}

impl Drop for Starved {
    fn drop(&mut self) {
        let root = std::path::Path::new(CPU_CGROUP);
        let _ = std::fs::write(root.join("cgroup.procs"), self.pid.to_string());
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A busy CPU is not a blind one. The server held to 5 % of a core for a minute (a cgroup's CPU
/// quota, as a busy neighbour and a small CPU request hold a replica) while twenty
/// VirtualMachines that take about ten milliseconds of CPU each to evaluate change every
/// second: each evaluation takes longer than the whole budget by the clock (the evaluation waits
/// for the CPU most of the time), yet none counts as over the budget, the ruleset is never
/// suspended, and once released the node's and the namespace's gates read Clear=True,
/// straight from the server, within 5 s. Before the budget counted CPU time, the clock's time
/// was counted, and a starved replica skipped every object as too costly: their nodes' gates
/// Unknown until each object changed again.
#[test]
fn a_starved_server_is_late_but_not_blind() {
    let (_turn, env) = turn();
    let ns = env.namespace("starved");
    let node = env.node(&format!("n-{ns}"));
    let rs = format!("rs-{ns}");
    let _cleanup = env.delete_on_drop(&[&rs]);
    env.apply(&churning_ruleset(&rs, &[&ns]).to_string());
    let apply = |round: usize| {
        env.apply(&churning_vms(
            &ns,
            node.name(),
            STARVED_VMS,
            STARVED_N,
            round,
        ));
    };
    apply(0);
    env.wait_watching(&rs);
    let gates = [format!("node.{}", node.name()), format!("namespace.{ns}")];
    // Read straight from the server: kube-apiserver's view of a starved aggregated API is not
    // what is measured here.
    let certs = env.client_cert_args(User::Admin);
    let certs: Vec<&str> = certs.iter().map(String::as_str).collect();
    let clear_direct = |gate: &str| -> Option<Value> {
        let path = format!("/apis/live.ifo.kubevirt.io/v1alpha1/maintenancegates/{gate}");
        let (code, body) = env.direct(&path, &certs);
        let gate: Value = serde_json::from_str(&body).ok().filter(|_| code == "200")?;
        Some(clear_condition(&gate).clone()).filter(|c| !c.is_null())
    };
    for gate in &gates {
        eventually(WAIT, &format!("gate/{gate} Clear"), || {
            clear_direct(gate).filter(|c| c["status"] == "True")
        });
    }
    let over_budget = || {
        let wanted = format!("ruleset=\"{rs}\"");
        env.metrics()
            .lines()
            .filter(|l| {
                (l.starts_with("ifo_evaluation_cost_exceeded_total{")
                    || l.starts_with("ifo_ruleset_suspensions_total{"))
                    && l.contains(&wanted)
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let before = over_budget();

    let starved = Starved::hold(env.server_pid(), 5);
    let began = Instant::now();
    let mut rounds = 0;
    while began.elapsed() < STARVED_FOR {
        rounds += 1;
        apply(rounds);
        std::thread::sleep(Duration::from_secs(1));
    }
    drop(starved);
    let released = Instant::now();
    let mut late = Vec::new();
    for gate in &gates {
        let condition = eventually(
            Duration::from_secs(30),
            &format!("gate/{gate} Clear"),
            || clear_direct(gate).filter(|c| c["status"] == "True"),
        );
        late.push((gate.clone(), released.elapsed(), condition));
    }
    let over = over_budget() - before;
    println!(
        "{rounds} rounds of {STARVED_VMS} VirtualMachines ({STARVED_N} iterations each) changed \
         while the server was held to 5% of a core for {STARVED_FOR:?}; evaluations counted \
         over the budget or suspensions: {over}; gates Clear after the release: {:?}",
        late.iter().map(|(g, t, _)| (g, t)).collect::<Vec<_>>()
    );
    assert_eq!(
        over,
        0.0,
        "evaluations that only waited for the CPU were counted over the budget (or the ruleset \
         was suspended): {}",
        env.server_log_tail(40)
    );
    for (gate, after, condition) in late {
        assert!(
            after <= Duration::from_secs(5),
            "gate/{gate} read Clear=True only {after:?} after the server was released: {condition}"
        );
    }
}
