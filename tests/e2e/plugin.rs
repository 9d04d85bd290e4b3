//! The `kubectl ifo` plugin against the real cluster: run directly and through `kubectl` (found
//! on PATH), as admin and as a user who may only read one namespace.

use ifo_dev::User;
use ifo_test_support::{Env, OPERATION_COLUMNS, Run, env, eventually, follow, populated, start};
use serde_json::{Value, json};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

fn plugin(env: &Env, user: User, args: &[&str]) -> Run {
    env.plugin_cmd(user, args).output().unwrap().into()
}

/// `kubectl ifo ...` as admin: kubectl finds `kubectl-ifo` on PATH.
fn kubectl_ifo_cmd(env: &Env, args: &[&str]) -> Command {
    let mut all = vec!["ifo"];
    all.extend_from_slice(args);
    env.kubectl_cmd(User::Admin, &all)
}

/// [`kubectl_ifo_cmd`], run to the end.
fn kubectl_ifo(env: &Env, args: &[&str]) -> Run {
    kubectl_ifo_cmd(env, args).output().unwrap().into()
}

/// Reads lines until one satisfies `pred`; panics naming `what` after [`WAIT`].
fn until(rx: &mpsc::Receiver<String>, what: &str, pred: &dyn Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if pred(&line) => return line,
            Ok(line) => seen.push(line),
            Err(e) => panic!("no line for {what} ({e}); seen: {seen:#?}"),
        }
    }
}

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

fn active_count(env: &Env, ns: &str) -> usize {
    env.ifos(ns)
        .iter()
        .filter(|o| o["status"]["phase"] == "Active")
        .count()
}

#[test]
fn plugin_lists_explains_groups_and_counts_operations() {
    let env = env();
    let (ns, rs) = populated(env, "plugin-list");
    eventually(WAIT, "two operations", || {
        (active_count(env, &ns) == 2).then_some(())
    });

    // list is the default; rows sorted by subject.
    let run = plugin(env, User::Admin, &["-n", &ns]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        words(lines[0]).join(" "),
        OPERATION_COLUMNS,
        "{}",
        run.stdout
    );
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    assert_eq!(
        words(lines[1])[1..5],
        ["VirtualMachine", "vm1", "Migrating", "Active"]
    );
    assert!(lines[1].ends_with("to node-9"), "{}", run.stdout);
    assert_eq!(words(lines[2])[2], "vm2");

    // Through kubectl, with filters and every output.
    let run = kubectl_ifo(
        env,
        &["list", "-n", &ns, "--operation", "Migrating", "-o", "wide"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.lines().count(), 2, "{}", run.stdout);
    assert!(
        run.stdout.contains("COMPONENT") && run.stdout.contains(&rs),
        "{}",
        run.stdout
    );

    let run = plugin(env, User::Admin, &["list", "-n", &ns, "-o", "json"]);
    let list: Value = serde_json::from_str(&run.stdout).unwrap();
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["kind"], "InFlightOperation");
    assert_eq!(items[0]["spec"]["subject"]["name"], "vm1");
    let vm1_name = items[0]["metadata"]["name"].as_str().unwrap().to_owned();

    let run = plugin(
        env,
        User::Admin,
        &[
            "-n",
            &ns,
            "--kind",
            "VirtualMachine",
            "-l",
            "ifo.kubevirt.io/operation=Starting",
            "-o",
            "name",
        ],
    );
    assert_eq!(run.stdout.lines().count(), 1, "{}", run.stdout);
    assert!(
        run.stdout
            .starts_with("inflightoperation.live.ifo.kubevirt.io/vm2-starting-"),
        "{}",
        run.stdout
    );

    let run = plugin(env, User::Admin, &["-A", "--component", "kubevirt"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(words(run.stdout.lines().next().unwrap())[0], "NAMESPACE");
    assert!(
        run.stdout
            .lines()
            .any(|l| words(l).first() == Some(&ns.as_str()) && l.contains("vm1")),
        "{}",
        run.stdout
    );

    let run = plugin(env, User::Admin, &["-n", &ns, "--operation", "Nothing"]);
    assert_eq!(run.code, 0);
    assert_eq!(run.stdout, "");
    run.assert_stderr_has("No operations in flight");

    // get: the detail view, by namespace or looked up in every namespace.
    let run = kubectl_ifo(env, &["get", &vm1_name, "-n", &ns]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for want in [
        format!("Name:           {vm1_name}"),
        "Phase:          Active".into(),
        "Message:        to node-9".into(),
        format!("RuleSet:        {rs}"),
        "Subject:\n  Kind:       VirtualMachine\n  Name:       vm1".into(),
        "VirtualMachinePool/pool-1".into(),
        "ifo.kubevirt.io/operation=Migrating".into(),
        "example.com/team=virt".into(),
    ] {
        assert!(run.stdout.contains(&want), "{want:?} in\n{}", run.stdout);
    }
    let run = plugin(env, User::Admin, &["get", &vm1_name, "-A", "-o", "json"]);
    let obj: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(obj["metadata"]["namespace"], ns.as_str());
    let run = plugin(env, User::Admin, &["get", "no-such-op", "-n", &ns]);
    assert_eq!(run.code, 2);
    run.assert_stderr_has("\"no-such-op\" not found");

    // tree and summary.
    let run = kubectl_ifo(env, &["tree", "-n", &ns]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let tree: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(tree[0], "kubevirt", "{}", run.stdout);
    assert_eq!(tree[1], format!("  {ns}"), "{}", run.stdout);
    assert!(
        tree[2].starts_with("    VirtualMachine/vm1  ") && tree[2].contains("  Migrating  "),
        "{}",
        run.stdout
    );
    assert!(
        tree[3].starts_with("    VirtualMachine/vm2  "),
        "{}",
        run.stdout
    );
    // --for: one subject and what hangs under it.
    let run = kubectl_ifo(env, &["tree", "-n", &ns, "--for", "VirtualMachine/vm2"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let subjects: Vec<&str> = run.stdout.lines().skip(2).collect();
    assert_eq!(subjects.len(), 1, "{}", run.stdout);
    assert!(subjects[0].contains("VirtualMachine/vm2"), "{}", run.stdout);
    let run = kubectl_ifo(env, &["tree", "-n", &ns, "--for", "vm2"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    run.assert_stderr_has("Kind/name");

    let run = plugin(env, User::Admin, &["summary", "-n", &ns, "-o", "json"]);
    let s: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(s["active"], 2);
    assert_eq!(s["byOperation"]["Migrating"]["active"], 1);
    assert_eq!(s["byComponent"]["kubevirt"]["total"], 2);
    assert_eq!(s["byNamespace"][&ns]["active"], 2);
    let run = kubectl_ifo(env, &["summary", "-n", &ns]);
    assert!(
        run.stdout
            .contains("COMPONENT   ACTIVE   COMPLETED   TOTAL\nkubevirt    2        0           2"),
        "{}",
        run.stdout
    );

    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn plugin_check_and_wait_answer_whether_maintenance_is_safe() {
    let env = env();
    let (ns, rs) = env.vms_with_ruleset("plugin-wait", &["vm1"]);
    let run = plugin(env, User::Admin, &["check", "-n", &ns]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    run.assert_stdout_has("No operations in flight");

    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Migrating"}));
    eventually(WAIT, "migration", || {
        (active_count(env, &ns) == 1).then_some(())
    });

    // check: exit 1 with the list; through kubectl the exit status is kept.
    let run = plugin(env, User::Admin, &["check", "-n", &ns]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stdout.contains("vm1") && run.stdout.contains("Migrating"),
        "{}",
        run.stdout
    );
    // The namespace's maintenance gate answers.
    run.assert_stderr_has("not clear: 1 operation");
    assert_eq!(kubectl_ifo(env, &["safe", "-n", &ns]).code, 1);
    // Filters narrow what counts.
    assert_eq!(
        plugin(
            env,
            User::Admin,
            &["check", "-n", &ns, "--operation", "Starting"]
        )
        .code,
        0
    );

    // wait gives up after its timeout, saying what is still in flight.
    let started = Instant::now();
    let run = plugin(env, User::Admin, &["wait", "-n", &ns, "--timeout", "2s"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(15));
    run.assert_stderr_has("timed out after 2s");
    run.assert_stdout_has("vm1");

    // wait returns once the migration ends (after the 3 s debounce).
    let waiter = start(env.plugin_cmd(User::Admin, &["wait", "-n", &ns, "--timeout", "60s"]));
    std::thread::sleep(Duration::from_secs(1));
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Running"}));
    let run = Run::from(waiter.wait_with_output().unwrap());
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.assert_stderr_has("waiting for 1 operation to complete");
    run.assert_stdout_has("No operations in flight");
    assert_eq!(kubectl_ifo(env, &["check", "-n", &ns]).code, 0);

    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn plugin_watch_streams_rows_as_operations_change() {
    let env = env();
    let (ns, rs) = env.vms_with_ruleset("plugin-watch", &["vm1"]);
    let (_watch, rx) = follow(env.plugin_cmd(User::Admin, &["-n", &ns, "-w"]));
    until(&rx, "header", &|l| words(l).first() == Some(&"NAME"));
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Migrating"}));
    until(&rx, "migration", &|l| {
        words(l).get(2..5) == Some(&["vm1", "Migrating", "Active"][..])
    });
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Running"}));
    until(&rx, "completion", &|l| {
        words(l).get(2..5) == Some(&["vm1", "Migrating", "Completed"][..])
    });
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn plugin_respects_rbac_with_clear_errors() {
    let env = env();
    let (ns, rs) = env.vms_with_ruleset("plugin-rbac", &["vm1"]);
    let other = env.namespace("plugin-rbac-other");
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Starting"}));
    env.grant_alice_view(&ns);
    let run = eventually(WAIT, "alice sees her namespace's operation", || {
        Some(plugin(env, User::Alice, &["-n", &ns]))
            .filter(|r| r.code == 0 && r.stdout.contains("vm1"))
    });
    run.assert_stdout_has("Starting");
    assert_eq!(plugin(env, User::Alice, &["check", "-n", &ns]).code, 1);

    let run = plugin(env, User::Alice, &["-A"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    run.assert_stderr_has("forbidden: you may not list inflightoperations.live.ifo.kubevirt.io in all namespaces; use -n NAMESPACE");
    let run = plugin(env, User::Alice, &["check", "-n", &other]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    run.assert_stderr_has(&format!(
        "forbidden: you may not list inflightoperations.live.ifo.kubevirt.io in namespace {other:?}"
    ));
    let run = plugin(
        env,
        User::Alice,
        &["wait", "-n", &other, "--timeout", "20s"],
    );
    assert_eq!(run.code, 2, "{}", run.stdout);
    run.assert_stderr_has("forbidden");

    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn plugin_rejects_bad_input_without_panicking() {
    let env = env();
    for args in [
        &["-o", "xml"][..],
        &["wait", "--timeout", "soon"],
        &["tree", "-w"],
        &["get"],
    ] {
        let run = plugin(env, User::Admin, args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{args:?}: {}", run.stderr);
    }
    let run = plugin(env, User::Admin, &["--kubeconfig", "/nonexistent/config"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("cannot read kubeconfig /nonexistent/config"),
        "{}",
        run.stderr
    );
}

/// A shipped ruleset under a name of this test's, watching only `namespace`.
pub(crate) fn shipped_ruleset(file: &str, name: &str, namespace: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let mut ruleset: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    ruleset["metadata"]["name"] = json!(name);
    ruleset["spec"]["namespaces"] = json!([namespace]);
    ruleset
}

/// A VirtualMachineInstance running on `node`, live-migrating to `target`.
fn migrating_vmi(env: &Env, namespace: &str, name: &str, node: &str, target: &str) {
    env.apply(&format!(
        r#"{{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{{"name":"{name}","namespace":"{namespace}"}},"spec":{{}}}}"#
    ));
    env.set_status(
        "vmi",
        namespace,
        name,
        json!({"phase": "Running", "nodeName": node, "migrationState": {
            "sourceNode": node, "targetNode": target, "startTimestamp": "2026-01-01T00:00:00Z"}}),
    );
}

/// Whether `check` or `wait` said the server cannot vouch for its answer (exit 2): a node's gate
/// is cluster-wide, so it is `Unknown` while any target that can feed it is not current, e.g.
/// while another test's new ruleset has not completed its first list.
fn unvouched(run: &Run) -> bool {
    run.code == 2 && run.stderr.contains("cannot tell what is in flight")
}

/// `run()`, again (for up to [`WAIT`]) while the server cannot vouch for the answer.
fn vouched(run: impl Fn() -> Run) -> Run {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = run();
        if !unvouched(&r) || Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Nodes of a test's own (Node objects, nothing runs on them): the node gates answer for nodes
/// the cluster has. Deleted with [`delete_nodes`].
fn create_nodes(env: &Env, names: &[&str]) {
    for name in names {
        env.apply(&format!(
            r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{name}"}}}}"#
        ));
    }
}

fn delete_nodes(env: &Env, names: &[&str]) {
    let mut args = vec!["delete", "node", "--ignore-not-found"];
    args.extend_from_slice(names);
    env.kubectl(User::Admin, &args).unwrap();
}

#[test]
fn plugin_node_finds_operations_on_a_node_and_migrations_into_it() {
    let env = env();
    let ns = env.namespace("plugin-node");
    // check and wait --node look at the whole node, in every namespace: nodes of this test's own.
    let [a, b, c, d, z] = ["a", "b", "c", "d", "z"].map(|n| format!("{n}-{ns}"));
    let nodes = [a.as_str(), &b, &c, &d, &z];
    create_nodes(env, &nodes);
    let rs = format!("vmi-lifecycle-{ns}");
    env.apply(&shipped_ruleset("rules/kubevirt/vmi-lifecycle-rules.yaml", &rs, &ns).to_string());
    env.wait_watching(&rs);
    migrating_vmi(env, &ns, "vmi-a", &a, &b);
    migrating_vmi(env, &ns, "vmi-c", &c, &d);
    eventually(WAIT, "two migrations", || {
        (active_count(env, &ns) == 2).then_some(())
    });

    // The source node and the target node both find a migration; other nodes find nothing.
    for (node, vmi) in [(&a, "vmi-a"), (&b, "vmi-a"), (&d, "vmi-c")] {
        let run = vouched(|| kubectl_ifo(env, &["check", "--node", node]));
        assert_eq!(run.code, 1, "--node {node}: {}{}", run.stdout, run.stderr);
        let rows: Vec<&str> = run.stdout.lines().skip(1).collect();
        assert_eq!(rows.len(), 1, "--node {node}: {}", run.stdout);
        assert!(rows[0].contains(vmi), "--node {node}: {}", run.stdout);
        run.assert_stderr_has("not clear: 1 operation");
        // The operations answer alike when other filters leave no gate to ask.
        let run = vouched(|| {
            kubectl_ifo(
                env,
                &["check", "--node", node, "--kind", "VirtualMachineInstance"],
            )
        });
        assert_eq!(run.code, 1, "--node {node}: {}{}", run.stdout, run.stderr);
        assert!(run.stdout.contains(vmi), "--node {node}: {}", run.stdout);
        run.assert_stderr_has(&format!("node={node}"));
    }
    let run = vouched(|| kubectl_ifo(env, &["check", "--node", &z]));
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    // Listing, --node filters the namespace listed.
    let run = kubectl_ifo(env, &["-n", &ns, "--node", &b, "-o", "name"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.lines().count(), 1, "{}", run.stdout);

    // wait --node times out while a migration into the node runs…
    let run = vouched(|| kubectl_ifo(env, &["wait", "--node", &d, "--timeout", "2s"]));
    assert_eq!(run.code, 1, "{}", run.stderr);
    run.assert_stdout_has("vmi-c");
    // …and returns once the one concerning the node ends, while the other still runs.
    let waiter = start(env.plugin_cmd(User::Admin, &["wait", "--node", &b, "--timeout", "60s"]));
    std::thread::sleep(Duration::from_secs(1));
    env.set_status(
        "vmi",
        &ns,
        "vmi-a",
        json!({"phase": "Running", "nodeName": b, "migrationState": {
            "sourceNode": a, "targetNode": b, "startTimestamp": "2026-01-01T00:00:00Z",
            "endTimestamp": "2026-01-01T00:01:00Z", "completed": true}}),
    );
    let mut run = Run::from(waiter.wait_with_output().unwrap());
    if unvouched(&run) {
        run = vouched(|| kubectl_ifo(env, &["wait", "--node", &b, "--timeout", "30s"]));
    }
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.assert_stdout_has("No operations in flight");
    assert_eq!(
        vouched(|| kubectl_ifo(env, &["check", "--node", &d])).code,
        1
    );

    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
    delete_nodes(env, &nodes);
}

/// The safety question of a drain, asked without -A while the kubeconfig's namespace is
/// `default` and the node's migration runs in another namespace: `check`/`wait --node` look at
/// the whole node, so they never answer "nothing in flight" (`wait --node X && kubectl drain X`
/// would drain during the migration), and a namespace given with --node is refused.
#[test]
fn plugin_check_and_wait_node_look_in_every_namespace() {
    let env = env();
    let ns = env.namespace("plugin-node-all");
    let (node, component, rs) = (format!("w-{ns}"), format!("c-{ns}"), format!("rs-{ns}"));
    create_nodes(env, &[&node]);
    env.apply(&ifo_test_support::node_vm_ruleset(&rs, &ns, &component));
    env.apply(&ifo_test_support::vm("vm1", &ns));
    env.wait_watching(&rs);
    let gate = format!("node.{node}");
    // Nothing in flight yet: clear, in every namespace (the gate is read once it is served:
    // the server may not have seen the node yet).
    env.wait_gate(&gate, "True", WAIT);
    let run = vouched(|| kubectl_ifo(env, &["check", "--node", &node]));
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains(&format!("No operations in flight on node {node}")),
        "{}",
        run.stdout
    );

    env.set_vm_status(
        &ns,
        "vm1",
        json!({"printableStatus": "Migrating", "nodeName": node}),
    );
    env.wait_gate(&gate, "False", WAIT);

    // The kubeconfig's namespace is `default` (no -A): the node's gate answers anyway.
    for run in [
        vouched(|| kubectl_ifo(env, &["check", "--node", &node])),
        vouched(|| plugin(env, User::Admin, &["safe", "--node", &node])),
    ] {
        assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
        run.assert_stdout_has("vm1");
        run.assert_stdout_has(&ns);
        run.assert_stderr_has("not clear: 1 operation");
    }
    // A namespace with --node would narrow the node's question: refused, before asking.
    for args in [
        &["check", "--node", &node, "-n", "default"][..],
        &["wait", "--node", &node, "--namespace", &ns, "--timeout=3s"],
    ] {
        let run = kubectl_ifo(env, args);
        assert_eq!(run.code, 2, "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains(
                "--node asks about the whole node, across every namespace: drop -n/--namespace (or use -A)"
            ),
            "{args:?}: {}",
            run.stderr
        );
    }
    // -A says the same as nothing.
    assert_eq!(
        vouched(|| kubectl_ifo(env, &["check", "-A", "--node", &node])).code,
        1
    );
    // Listing, --node stays a filter within the namespace listed.
    let run = kubectl_ifo(env, &["--node", &node, "-o", "name"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout, "",
        "the default namespace has none of this node's"
    );

    // wait --node does not return 0 while the migration runs.
    let started = Instant::now();
    let run = vouched(|| kubectl_ifo(env, &["wait", "--node", &node, "--timeout=3s"]));
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(started.elapsed() < Duration::from_secs(20));
    run.assert_stderr_has("timed out after 3s");
    run.assert_stdout_has("vm1");

    // It returns 0 once the migration ends.
    let waiter = start(env.plugin_cmd(User::Admin, &["wait", "--node", &node, "--timeout", "60s"]));
    std::thread::sleep(Duration::from_secs(1));
    env.set_vm_status(
        &ns,
        "vm1",
        json!({"printableStatus": "Running", "nodeName": node}),
    );
    let mut run = Run::from(waiter.wait_with_output().unwrap());
    if unvouched(&run) {
        run = vouched(|| kubectl_ifo(env, &["wait", "--node", &node, "--timeout", "30s"]));
    }
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains(&format!("No operations in flight on node {node}")),
        "{}",
        run.stdout
    );

    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
    delete_nodes(env, &[&node]);
}

#[test]
fn plugin_watch_view_redraws_the_current_state() {
    let env = env();
    let (ns, rs) = env.vms_with_ruleset("plugin-live", &["vm1"]);
    // Through kubectl, as users run it; not a terminal here, so each new state is printed once.
    let (_watch, rx) = follow(kubectl_ifo_cmd(env, &["watch", "--tree", "-n", &ns]));
    until(&rx, "the empty view", &|l| {
        l.starts_with("0 operations in flight")
    });
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Migrating"}));
    until(&rx, "a redraw with one operation", &|l| {
        l.starts_with("1 operation in flight")
    });
    until(&rx, "the tree line", &|l| {
        l.starts_with("    VirtualMachine/vm1") && l.contains("Migrating")
    });
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Running"}));
    until(&rx, "the view empty again", &|l| {
        l.starts_with("0 operations in flight")
    });
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

/// kubectl's connection flags: a kubeconfig whose current context points nowhere, used through
/// `--context`, `--cluster`/`--user`; impersonation with `--as`/`--as-group`; a request timeout
/// against a server that never answers; and the original plugin's flags, through kubectl.
#[test]
fn plugin_takes_kubectls_connection_flags_and_the_original_flags() {
    let env = env();
    let (ns, rs) = env.vms_with_ruleset("plugin-flags", &["vm1"]);
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Starting"}));
    eventually(WAIT, "the operation", || {
        (active_count(env, &ns) == 1).then_some(())
    });

    // A server that accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("https://{}", silent.local_addr().unwrap());
    let mut config: Value =
        serde_json::from_slice(&std::fs::read(env.cluster.kubeconfig(User::Admin)).unwrap())
            .unwrap();
    let real = config["clusters"][0]["cluster"].clone();
    config["clusters"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "silent", "cluster": {"server": silent_url, "certificate-authority-data": real["certificate-authority-data"]}}));
    config["contexts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "elsewhere", "context": {"cluster": "silent", "user": "admin"}}));
    config["current-context"] = json!("elsewhere");
    let path = std::env::temp_dir().join(format!("ifo-flags-{ns}.json"));
    std::fs::write(&path, serde_json::to_vec(&config).unwrap()).unwrap();
    let kubeconfig = path.display().to_string();
    let run = |args: &[&str]| {
        let mut all = vec!["--kubeconfig", kubeconfig.as_str()];
        all.extend_from_slice(args);
        let started = Instant::now();
        (plugin(env, User::Bob, &all), started.elapsed())
    };

    // The current context's server never answers: --request-timeout bounds the wait.
    let (r, took) = run(&["-n", &ns, "--request-timeout", "2s"]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(took < Duration::from_secs(20), "took {took:?}");
    // --context, and --cluster with --user, choose the real cluster.
    for args in [
        &["--context", "local"][..],
        &["--cluster", "local", "--user", "admin"][..],
    ] {
        let (r, _) = run(&[args, &["-n", &ns, "-o", "name", "--request-timeout", "30s"]].concat());
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        assert!(r.stdout.contains("vm1-starting-"), "{args:?}: {}", r.stdout);
    }
    // Impersonation: alice may read nothing here, unless she is given a group that may.
    let (r, _) = run(&["--context", "local", "-n", &ns, "--as", "alice"]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    r.assert_stderr_has("forbidden");
    let (r, _) = run(&[
        "--context",
        "local",
        "-n",
        &ns,
        "--as",
        "alice",
        "--as-group",
        "system:masters",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    drop(silent);
    let _ = std::fs::remove_file(&path);

    // The original plugin's flags, hidden, through kubectl.
    let r = kubectl_ifo(
        env,
        &[
            "-n",
            &ns,
            "-c",
            "kubevirt",
            "-k",
            "VirtualMachine",
            "-O",
            "name",
            "--all-phases",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.assert_stdout_has("vm1-starting-");
    let r = kubectl_ifo(env, &["-n", &ns, "-c", "other", "-O", "name"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);

    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

/// One clock for an operation's end: an operation past the end its progress promised stops
/// being detected, and for the rest of its grace every surface says when it ends, and none says
/// "overdue": the served object (`status.estimate: Grace`, its expected end the grace's end, no
/// `Stalled`), `kubectl get ifos -o wide` and `kubectl ifo -o wide`.
#[test]
fn no_surface_says_overdue_during_the_grace() {
    let env = env();
    // A copy, whose progress promises when it ends.
    let (ns, rs, op) = env.copying_vm("one-clock");
    // Half done a second in: the progress says it ends a second later, so it soon runs past
    // that end while active.
    env.copy_progressed(&ns, 50, Duration::from_secs(1));
    eventually(WAIT, "the copy past its expected end", || {
        env.ifos(&ns).into_iter().find(|o| {
            o["status"]["estimate"] == "Progress"
                && o["status"]["expectedEnd"]
                    .as_str()
                    .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                    .is_some_and(|t| t < jiff::Timestamp::now())
        })
    });

    let list = env.get_json(User::Admin, &["get", "ifos", "-n", &ns]);
    let watch = env.watch_ifos(&ns, list["metadata"]["resourceVersion"].as_str().unwrap());
    env.set_vm_status(&ns, "vm-0", json!({"printableStatus": "Running"}));
    let events = watch.until(WAIT, "the copy in its grace", |e| {
        e["object"]["status"]["gracePeriodEnd"].is_string()
    });
    let ending = &events.last().unwrap()["object"];
    assert_eq!(ending["metadata"]["name"], op["metadata"]["name"]);
    let status = &ending["status"];
    assert_eq!(status["estimate"], "Grace", "{ending:#}");
    assert_eq!(
        status["expectedEnd"], status["gracePeriodEnd"],
        "{ending:#}"
    );
    assert!(
        !status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Stalled"),
        "{ending:#}"
    );
    let table = env
        .kubectl(User::Admin, &["get", "ifos", "-n", &ns, "-o", "wide"])
        .unwrap();
    assert!(!table.contains("overdue"), "{table}");
    let list = kubectl_ifo(env, &["list", "-n", &ns, "--all", "-o", "wide"]);
    assert_eq!(list.code, 0, "{}{}", list.stdout, list.stderr);
    assert!(!list.stdout.contains("overdue"), "{}", list.stdout);
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}
