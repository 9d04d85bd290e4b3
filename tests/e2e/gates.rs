//! Maintenance gates with nothing but kubectl, as the README shows them:
//!
//! ```sh
//! kubectl wait --for=condition=Clear=True gate/node.worker-1 --timeout=30m && kubectl drain worker-1
//! kubectl get gates
//! kubectl get gate component.kubevirt -o jsonpath='{.status.expectedClearTime}'
//! ```
//!
//! Each test uses its own node, component and namespace names: tests share the cluster. Only the
//! gates of what the cluster has exist, so a test's node is a Node object of its own
//! ([`Env::node`]), and its component is declared by its ruleset.

use std::process::Child;
use std::time::{Duration, Instant};

use ifo_dev::User;
use serde_json::json;

use ifo_test_support::{
    Env, clear_status, create_gadget_crd, env, eventually, grant_gadgets, node_vm_ruleset, start,
};

const WAIT: Duration = Duration::from_secs(30);

/// A namespace, a node and a component of this test's own ([`Env::scope`]), with `vms` under a
/// watching ruleset. Returns (namespace, node, component, ruleset).
fn scene(env: &Env, prefix: &str, vms: &[&str]) -> (String, String, String, String) {
    let scene = env.scope(prefix);
    let ruleset = node_vm_ruleset(&scene.rs, &scene.ns, &scene.component);
    scene.watch(env, ruleset, vms);
    (scene.ns, scene.node, scene.component, scene.rs)
}

/// Sets VirtualMachine `vm`'s state (`printableStatus`) to `state`, on `node`.
fn on_node(env: &Env, ns: &str, vm: &str, state: &str, node: &str) {
    env.set_vm_status(ns, vm, json!({"printableStatus": state, "nodeName": node}));
}

/// Waits until the gate of `node` counts `active` operations in flight (`what`, for a timeout).
fn active_on(env: &Env, node: &str, active: u64, what: &str) {
    eventually(WAIT, what, || {
        Some(env.gate(&format!("node.{node}")))
            .filter(|g| g["status"]["activeOperations"] == active)
    });
}

fn wait_for_exit(
    child: &mut Child,
    timeout: Duration,
) -> Option<(std::process::ExitStatus, Instant)> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some((status, Instant::now()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn kubectl_wait_on_a_node_gate_returns_when_its_last_operation_ends() {
    let env = env();
    let (ns, node, component, rs) = scene(env, "gate-wait", &["vm-0", "vm-1"]);
    let _node = env.node(&node);
    // A node with nothing in flight answers, and is clear.
    let run = env.wait_clear(&format!("node.{node}"), "30s");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    run.assert_stdout_has("condition met");

    for vm in ["vm-0", "vm-1"] {
        on_node(env, &ns, vm, "Migrating", &node);
    }
    let gate = eventually(
        WAIT,
        "the node gate to be blocked by two migrations",
        || {
            // Tests share the server: a verdict read while another test's target goes current
            // is Unknown for that read (see `FeedsBefore`); the gate settles on False.
            Some(env.gate(&format!("node.{node}")))
                .filter(|g| g["status"]["activeOperations"] == 2 && clear_status(g) == "False")
        },
    );
    let message = gate["status"]["conditions"][0]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("VirtualMachine {ns}/vm-")) && message.contains("Migrating"),
        "{message}"
    );

    // The three lines of the README.
    let mut wait = start(env.wait_clear_cmd(&format!("node.{node}"), "120s"));
    // Asked again while another test's new ruleset leaves a gate Unknown (see above).
    let run = eventually(WAIT, "kubectl get gates to tell", || {
        let run = env.run_kubectl(User::Admin, &["get", "gates"]);
        let told = |name: &str| {
            run.stdout.lines().any(|l| {
                let mut cells = l.split_whitespace();
                cells.next() == Some(name) && cells.next() != Some("Unknown")
            })
        };
        (run.code != 0 || told(&format!("node.{node}")) && told(&format!("component.{component}")))
            .then_some(run)
    });
    assert_eq!(run.code, 0, "{}", run.stderr);
    let header: Vec<&str> = run
        .stdout
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "CLEAR", "ACTIVE", "EXPECTED", "OLDEST", "MESSAGE"]
    );
    let row = |name: &str| {
        run.stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>())
    };
    assert_eq!(
        row(&format!("node.{node}")),
        Some(vec![format!("node.{node}").as_str(), "False", "2"]),
        "{}",
        run.stdout
    );
    assert_eq!(
        row(&format!("component.{component}")).map(|r| r[1].to_owned()),
        Some("False".to_owned())
    );
    assert!(row("cluster").is_some(), "{}", run.stdout);
    let run = env.run_kubectl(
        User::Admin,
        &[
            "get",
            "gate",
            &format!("component.{component}"),
            "-o",
            "jsonpath={.status.expectedClearTime}",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.is_empty() || run.stdout.parse::<jiff::Timestamp>().is_ok(),
        "{}",
        run.stdout
    );

    // One migration ends: the node is still blocked by the other.
    on_node(env, &ns, "vm-0", "Running", &node);
    active_on(env, &node, 1, "one migration left");
    assert!(
        wait.try_wait().unwrap().is_none(),
        "kubectl wait returned while vm-1 still migrates"
    );

    // The last one ends: the wait returns within 2 s of the operation ending (its record
    // turning Completed, after the debounce).
    let ifos = env.watch(&format!(
        "/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{ns}/inflightoperations?watch=true&fieldSelector=spec.subject.name%3Dvm-1"
    ));
    on_node(env, &ns, "vm-1", "Running", &node);
    ifos.until(WAIT, "vm-1's operation to end", |e| {
        e["type"] == "DELETED" || e["object"]["status"]["phase"] == "Completed"
    });
    let ended = Instant::now();
    let (status, returned) =
        wait_for_exit(&mut wait, Duration::from_secs(10)).expect("kubectl wait to return");
    let out = wait.wait_with_output().unwrap();
    assert!(status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("condition met"));
    let late = returned.saturating_duration_since(ended);
    assert!(
        late <= Duration::from_secs(2),
        "kubectl wait returned {late:?} after the operation ended"
    );
    assert_eq!(
        clear_status(&env.gate_of(&format!("node.{node}"), &[&ns])),
        "True"
    );

    // The plugin reads the same gate. (Tests share the cluster: while another test's new
    // ruleset that can reach any node has not listed its namespace yet, every node's gate is
    // Unknown, and `check` says it cannot tell, exit 2: asked again then.)
    let check = || {
        eventually(WAIT, "kubectl ifo check to tell", || {
            let run = env.run_kubectl(User::Admin, &["ifo", "check", "-A", "--node", &node]);
            (run.code != 2).then_some(run)
        })
    };
    let run = check();
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    on_node(env, &ns, "vm-1", "Migrating", &node);
    env.wait_gate(&format!("node.{node}"), "False", WAIT);
    let run = check();
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    run.assert_stderr_has("not clear: 1 operation");
    run.assert_stdout_has("vm-1");
    // Asked again while another test's new ruleset leaves the gate Unknown, as `check` is.
    let run = eventually(WAIT, "kubectl ifo gates to tell", || {
        let run = env.run_kubectl(User::Admin, &["ifo", "gates", &format!("node.{node}")]);
        (!run.stdout.contains("   Unknown   ")).then_some(run)
    });
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.assert_stdout_has(&format!("node.{node}   False   1"));

    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn a_gate_fed_by_a_target_that_is_not_watched_is_unknown_and_never_clear() {
    let env = env();
    let scope = env.scope("gate-stale");
    let (ns, group, component) = (&scope.ns, &scope.group, &scope.component);
    create_gadget_crd(env, group);
    // The server may not read gadgets (nothing grants it): its watch fails.
    env.apply(&scope.busy_gadgets().to_string());
    let gate = format!("component.{component}");
    let json = env.wait_gate(&gate, "Unknown", WAIT);
    let condition = &json["status"]["conditions"][0];
    assert_eq!(condition["reason"], "Stale");
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .contains(&format!("gadgets.{group}/v1 is not being watched")),
        "{condition}"
    );
    assert_eq!(
        json["status"]["staleTargets"][0]["resource"],
        format!("gadgets.{group}/v1")
    );

    // Unknown never satisfies Clear=True.
    let run = env.wait_clear(&gate, "3s");
    assert_ne!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let run = env.run_kubectl(User::Admin, &["get", "gate", &gate]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let row: Vec<&str> = run
        .stdout
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(row[..3], [gate.as_str(), "Unknown", "0"], "{}", run.stdout);
    run.assert_stdout_has("not being watched");
    let run = env.run_kubectl(
        User::Admin,
        &["ifo", "check", "-A", "--component", component],
    );
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    run.assert_stderr_has("is not being watched");
    // Other components' gates do not depend on this target: one of VirtualMachines settles on
    // a verdict (tests share the server: it may read Unknown while another test's ruleset
    // restarts the VirtualMachines' watch, never for long).
    let other = format!("rs-other-{ns}");
    env.apply(&node_vm_ruleset(&other, ns, &format!("other-{ns}")));
    env.wait_watching(&other);
    eventually(WAIT, "another component's gate not to be Unknown", || {
        Some(env.gate(&format!("component.other-{ns}"))).filter(|g| clear_status(g) != "Unknown")
    });
    env.kubectl(User::Admin, &["delete", "ors", &other])
        .unwrap();

    // Once the server may read gadgets, the gate clears: a running wait sees it.
    let mut wait = start(env.wait_clear_cmd(&gate, "120s"));
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        wait.try_wait().unwrap().is_none(),
        "kubectl wait returned on an Unknown gate"
    );
    grant_gadgets(env, ns, group);
    let (status, _) =
        wait_for_exit(&mut wait, Duration::from_secs(100)).expect("the gate to clear");
    assert!(status.success());

    scope.delete_gadgets(env);
}

#[test]
fn a_namespace_viewer_is_refused_and_the_gate_reader_role_grants_gates() {
    let env = env();
    let ns = env.namespace("gate-rbac");
    env.grant_alice_view(&ns);
    // Alice reads her namespace's operations, but no gate: a gate shows every namespace.
    eventually(WAIT, "alice to read her namespace", || {
        env.kubectl(User::Alice, &["get", "ifos", "-n", &ns]).ok()
    });
    for args in [
        vec!["get", "gates"],
        vec!["get", "gate", "cluster"],
        vec!["get", "gate", &format!("namespace.{ns}")],
        vec![
            "wait",
            "--for=condition=Clear=True",
            &format!("gate/namespace.{ns}"),
            "--timeout=5s",
        ],
    ] {
        let run = env.run_kubectl(User::Alice, &args);
        assert_ne!(run.code, 0, "{args:?}: {}", run.stdout);
        assert!(run.stderr.contains("forbidden"), "{args:?}: {}", run.stderr);
    }
    // The shipped ClusterRole grants them.
    let reader = format!("gate-reader-{ns}");
    env.kubectl(
        User::Admin,
        &[
            "create",
            "clusterrolebinding",
            &reader,
            "--clusterrole=ifo-maintenancegate-reader",
            &format!("--user={reader}"),
        ],
    )
    .unwrap();
    let get_as_reader = || {
        env.run_kubectl(
            User::Admin,
            &["get", "gate", &format!("namespace.{ns}"), "--as", &reader],
        )
    };
    let deadline = Instant::now() + WAIT;
    let mut run = get_as_reader();
    while run.code != 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        run = get_as_reader();
    }
    assert_eq!(run.code, 0, "{}", run.stderr);

    run.assert_stdout_has(&format!("namespace.{ns}"));
    let run = env.run_kubectl(User::Admin, &["get", "ifos", "-A", "--as", &reader]);
    assert_ne!(run.code, 0, "the gate role grants gates only");
    // Malformed names are refused with the valid scopes.
    let run = env.run_kubectl(User::Admin, &["get", "gate", "pod.x"]);
    assert_ne!(run.code, 0);
    run.assert_stderr_has("node.<node>");
    // Documented: `kubectl explain` (once the aggregator has our OpenAPI document).
    let out = eventually(
        Duration::from_secs(90),
        "kubectl explain gates.status",
        || env.kubectl(User::Admin, &["explain", "gates.status"]).ok(),
    );
    assert!(out.contains("activeOperations"), "{out}");

    env.kubectl(User::Admin, &["delete", "clusterrolebinding", &reader])
        .unwrap();
}

/// `kubectl get gate <name>` fails with NotFound, saying why; `kubectl wait` on it fails; a list
/// by name answers without it.
fn assert_not_found(env: &Env, gate: &str, why: &str) {
    let run = env.run_kubectl(User::Admin, &["get", "gate", gate]);
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stderr.contains(&format!(
            "Error from server (NotFound): maintenancegates.live.ifo.kubevirt.io \"{gate}\" not found: {why}"
        )),
        "{}",
        run.stderr
    );
    let run = env.wait_clear(gate, "5s");
    assert_ne!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let list: serde_json::Value = serde_json::from_str(
        &env.kubectl(
            User::Admin,
            &[
                "get",
                "--raw",
                &format!("{GATES}?fieldSelector=metadata.name%3D{gate}"),
            ],
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(list["items"], json!([]), "{list}");
}

/// Until the gate answers, then waits for it to be clear: `kubectl wait` exits 0.
fn wait_clear(env: &Env, gate: &str) {
    eventually(WAIT, &format!("the gate {gate} to exist"), || {
        env.kubectl(User::Admin, &["get", "gate", gate, "-o", "name"])
            .ok()
    });
    let run = env.wait_clear(gate, "60s");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
}

const GATES: &str = "/apis/live.ifo.kubevirt.io/v1alpha1/maintenancegates";

#[test]
fn the_gate_of_a_node_namespace_or_component_the_cluster_does_not_have_is_not_found() {
    let env = env();
    let ns = env.namespace("gate-exist");
    // A typo of a node: no gate, and a wait for it to be clear fails instead of succeeding.
    let node = format!("nx-{ns}");
    let gate = format!("node.{node}");
    assert_not_found(env, &gate, &format!("the cluster has no node {node}"));
    // The node appears: its gate exists, and clears.
    let created = env.node(&node);
    wait_clear(env, &gate);
    // And goes with it.
    drop(created);
    eventually(WAIT, "the node's gate to be gone", || {
        (env.run_kubectl(User::Admin, &["get", "gate", &gate]).code != 0).then_some(())
    });
    assert_not_found(env, &gate, &format!("the cluster has no node {node}"));

    // A namespace the cluster does not have, then has.
    let missing = format!("nx-{ns}");
    let gate = format!("namespace.{missing}");
    assert_not_found(
        env,
        &gate,
        &format!("the cluster has no namespace {missing}"),
    );
    env.kubectl(User::Admin, &["create", "namespace", &missing])
        .unwrap();
    wait_clear(env, &gate);
    env.kubectl(
        User::Admin,
        &["delete", "namespace", &missing, "--wait=false"],
    )
    .unwrap();

    // A component no ruleset declares, then one does.
    let (component, rs) = (format!("c-{ns}"), format!("rs-{ns}"));
    let gate = format!("component.{component}");
    assert_not_found(
        env,
        &gate,
        &format!("no ruleset declares component {component}"),
    );
    env.apply(&node_vm_ruleset(&rs, &ns, &component));
    env.wait_watching(&rs);
    wait_clear(env, &gate);
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn a_list_of_gates_is_paged_by_limit_and_continue() {
    let env = env();
    // Operations in flight: the list holds at least this test's four gates besides the cluster's.
    let (ns, node, component, rs) = scene(env, "gate-pages", &["vm-0"]);
    let _node = env.node(&node);
    on_node(env, &ns, "vm-0", "Migrating", &node);
    active_on(env, &node, 1, "the node gate to be blocked");
    let page = |query: &str| -> serde_json::Value {
        serde_json::from_str(
            &env.kubectl(User::Admin, &["get", "--raw", &format!("{GATES}?{query}")])
                .unwrap(),
        )
        .unwrap()
    };
    let first = page("limit=1");
    assert_eq!(first["items"].as_array().unwrap().len(), 1, "{first}");
    assert_eq!(first["items"][0]["metadata"]["name"], "cluster");
    assert!(first["metadata"].get("remainingItemCount").is_none());
    let mut token = first["metadata"]["continue"]
        .as_str()
        .expect("a continue token")
        .to_owned();
    // Following the tokens: each page one gate after the last, in name order, to the end.
    let mut names = vec!["cluster".to_owned()];
    loop {
        let next = page(&format!("limit=1&continue={token}"));
        let items = next["items"].as_array().unwrap();
        assert!(items.len() <= 1, "{next}");
        if let Some(gate) = items.first() {
            let name = gate["metadata"]["name"].as_str().unwrap().to_owned();
            assert!(names.last().unwrap() < &name, "{name} after {names:?}");
            names.push(name);
        }
        match next["metadata"]["continue"].as_str() {
            Some(t) => t.clone_into(&mut token),
            None => break,
        }
    }
    for gate in [
        format!("component.{component}"),
        format!("namespace.{ns}"),
        format!("node.{node}"),
    ] {
        assert!(names.contains(&gate), "{gate} not in {names:?}");
    }
    // kubectl pages too (limit=500 by default; --chunk-size asks for smaller pages).
    let out = env
        .kubectl(
            User::Admin,
            &["get", "gates", "--chunk-size=1", "-o", "name"],
        )
        .unwrap();
    assert!(
        out.lines()
            .any(|l| l == format!("maintenancegate.live.ifo.kubevirt.io/node.{node}")),
        "{out}"
    );
    // A token that is not one of a gate list is refused.
    let run = env.run_kubectl(
        User::Admin,
        &["get", "--raw", &format!("{GATES}?limit=1&continue=garbage")],
    );
    assert_ne!(run.code, 0);
    run.assert_stderr_has("BadRequest");

    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

/// A node whose name is longer than a label value may be (a valid DNS subdomain of 74
/// characters): its operation's label value is shortened, but its gate is the node's, by its
/// real name, and `kubectl ifo check --node` with that name sees the migration.
#[test]
fn a_node_whose_name_no_label_value_can_hold_keeps_its_own_gate() {
    let env = env();
    let (ns, short, _, _) = scene(env, "gate-long", &["vm-0"]);
    let name = format!("{short}.rack-07.datacenter-north.example.com");
    let name = format!("{}{name}", "n".repeat(74usize.saturating_sub(name.len())));
    assert!(name.len() >= 74, "{name}");
    let _node = env.node(&name);
    on_node(env, &ns, "vm-0", "Migrating", &name);
    let gate = env.wait_gate(&format!("node.{name}"), "False", WAIT);
    assert_eq!(gate["status"]["activeOperations"], 1, "{gate}");
    // The label is a valid label value standing for it, not the name.
    let op = &env.ifos(&ns)[0];
    let label = op["metadata"]["labels"]["ifo.kubevirt.io/node"]
        .as_str()
        .unwrap();
    assert!(label.len() <= 63 && label != name, "{label}");
    // Another test's new ruleset makes every node's gate Unknown for a moment: check again.
    let run = eventually(WAIT, "kubectl ifo check --node to answer", || {
        Some(env.run_kubectl(User::Admin, &["ifo", "check", "--node", &name]))
            .filter(|r| r.code != 2)
    });
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    run.assert_stdout_has("vm-0");

    env.set_vm_status(&ns, "vm-0", json!({"printableStatus": "Running"}));
    env.wait_gate(&format!("node.{name}"), "True", WAIT);
}

/// The Flux health check of docs/operating.md (`healthCheckExprs`), evaluated as Flux evaluates
/// it (CEL, the object's top-level fields as variables) on gates the server serves: `current`
/// holds for a clear gate, `inProgress` for one with an operation in flight, and never both.
#[test]
fn the_documented_flux_health_check_reads_served_gates() {
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operating.md"),
    )
    .unwrap();
    let expression = |key: &str| {
        docs.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{key}: status.conditions")))
            .map(|rest| format!("status.conditions{rest}"))
            .unwrap_or_else(|| panic!("docs/operating.md has no Flux `{key}` expression"))
    };
    let (current, in_progress) = (expression("current"), expression("inProgress"));
    let holds = |expr: &str, gate: &serde_json::Value| -> bool {
        let program = cel::Program::compile(expr).unwrap();
        let mut context = cel::Context::default();
        for field in ["apiVersion", "kind", "metadata", "status"] {
            context.add_variable(field, gate[field].clone()).unwrap();
        }
        match program.execute(&context).unwrap() {
            cel::Value::Bool(b) => b,
            other => panic!("{expr} is {other:?}"),
        }
    };

    let env = env();
    let (ns, node, _, rs) = scene(env, "gate-flux", &["vm-0"]);
    let _node = env.node(&node);
    let gate = format!("node.{node}");
    // As Flux polls it: clear once every feed of the node is current (another test's ruleset
    // on the shared VirtualMachine target restarts its watch, and the gate is Unknown until the
    // target is listed again).
    let clear = env.wait_gate(&gate, "True", WAIT);
    assert!(holds(&current, &clear) && !holds(&in_progress, &clear));

    on_node(env, &ns, "vm-0", "Migrating", &node);
    let busy = env.wait_gate(&gate, "False", WAIT);
    assert!(!holds(&current, &busy) && holds(&in_progress, &busy));
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}
