//! Saying when detection is not happening, and not letting one object stop it: an object too
//! deep for a JSON parser's default limit is evaluated like any other; one deeper still is
//! skipped and named (`Warning`, ruleset condition, `kubectl ifo check` exit 2) while the rest of
//! its target is detected; a ruleset over budget on one object's data is charged to that object
//! and keeps detecting on the others, while one over budget everywhere is suspended and said so;
//! a huge string in an object is served as a bounded message.

use ifo_dev::User;
use ifo_test_support::{BUSY, Env, Rule, RuleSet, Scope, env, eventually, heavy_vm, rss_kib};
use serde_json::{Value, json};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// The scope's ruleset detecting `Busy` gadgets, with their `status.note` as message.
fn busy_ruleset(scope: &Scope) -> String {
    scope
        .gadgets_ruleset()
        .rule(Rule::new("Busy", BUSY).message("object.?status.?note.orValue('')"))
        .to_string()
}

/// `kubectl create` (a client-side apply keeps a copy of the object in an annotation, which
/// big objects do not fit).
fn create(env: &Env, object: &Value) {
    env.create_as(User::Admin, object).unwrap();
}

/// A busy gadget whose `spec.tree` is nested `depth` levels deep.
fn nested_gadget(group: &str, ns: &str, name: &str, depth: usize) -> Value {
    let mut tree = json!("leaf");
    for _ in 0..depth {
        tree = json!({ "a": tree });
    }
    json!({
        "apiVersion": format!("{group}/v1"), "kind": "Gadget",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"tree": tree},
        "status": {"busy": true},
    })
}

fn names(ops: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = ops
        .iter()
        .map(|o| {
            o["spec"]["subject"]["name"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn a_deep_object_never_blinds_its_target() {
    let env = env();
    let scope = env.gadget_scope("deep");
    let Scope { ns, group, rs, .. } = &scope;
    // 200 levels: beyond serde_json's default limit (128), well within kube-apiserver's.
    create(env, &nested_gadget(group, ns, "deep", 200));
    create(env, &nested_gadget(group, ns, "shallow", 2));
    env.apply(&busy_ruleset(&scope));
    let ops = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        eventually(WAIT, "both gadgets busy", || {
            Some(env.ifos(ns)).filter(|o| o.len() == 2)
        })
    }))
    .unwrap_or_else(|_| {
        let run = env.run_kubectl(User::Admin, &["get", "ifos", "-n", ns]);
        panic!("not detected; kubectl says:\n{}{}", run.stdout, run.stderr)
    });
    assert_eq!(names(&ops), ["deep", "shallow"]);
    let run = env.run_kubectl(User::Admin, &["get", "ifos", "-n", ns]);
    assert!(!run.stderr.contains("Warning"), "{}", run.stderr);
    assert_eq!(
        env.run_kubectl(User::Admin, &["ifo", "check", "-n", ns])
            .code,
        1
    );

    // Deeper than the server evaluates: skipped and named; the rest goes on.
    create(env, &nested_gadget(group, ns, "abyss", 2_000));
    create(env, &nested_gadget(group, ns, "later", 1));
    let warning = format!(
        "Warning: operations may be incomplete: gadgets.{group}/v1 object {ns}/abyss is skipped: \
         it cannot be decoded: nested deeper than 512 levels"
    );
    let run = eventually(WAIT, "a warning naming the object", || {
        Some(env.run_kubectl(User::Admin, &["get", "ifos", "-n", ns]))
            .filter(|r| r.stderr.contains(&warning))
    });
    println!("{}", run.stderr.trim());
    let ops = eventually(WAIT, "the gadget created after it detected", || {
        Some(env.ifos(ns)).filter(|o| o.len() == 3)
    });
    assert_eq!(names(&ops), ["deep", "later", "shallow"]);
    let run = env.run_kubectl(User::Admin, &["ifo", "check", "-n", ns]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let skipped = env.wait_ruleset_condition(rs, "ObjectsSkipped", "True", WAIT);
    let message = skipped["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{ns}/abyss: cannot be decoded")),
        "{message}"
    );
    let labels = format!(
        "ifo_target_objects_skipped{{group=\"{group}\",version=\"v1\",resource=\"gadgets\"}} 1"
    );
    assert!(env.metrics().contains(&labels), "{labels} missing");
    // Another namespace is not affected.
    let other = env.namespace("deep-other");
    let run = env.run_kubectl(User::Admin, &["get", "ifos", "-n", &other]);
    assert!(!run.stderr.contains(&warning), "{}", run.stderr);

    // Gone: nothing is skipped any more.
    env.kubectl(User::Admin, &["delete", "gadget", "abyss", "-n", ns])
        .unwrap();
    eventually(WAIT, "check to answer again", || {
        Some(env.run_kubectl(User::Admin, &["ifo", "check", "-n", ns])).filter(|r| r.code == 1)
    });
    env.wait_ruleset_condition(rs, "ObjectsSkipped", "False", WAIT);
    scope.delete_gadgets(env);
}

#[test]
fn a_huge_string_is_served_as_a_bounded_message() {
    const HUGE: usize = 1_000_000;
    const LIMIT: usize = 32_768;
    let env = env();
    let scope = env.gadget_scope("huge");
    let Scope { ns, group, .. } = &scope;
    scope.watch(env, busy_ruleset(&scope), &[]);
    let pid = env.server_pid();
    let before = rss_kib(pid);
    for i in 0..30 {
        create(
            env,
            &json!({
                "apiVersion": format!("{group}/v1"), "kind": "Gadget",
                "metadata": {"name": format!("g{i}"), "namespace": ns},
                "status": {"busy": true, "note": format!("é{}", "x".repeat(HUGE - 1))},
            }),
        );
    }
    let ops = eventually(Duration::from_secs(60), "30 operations", || {
        Some(env.ifos(ns)).filter(|o| o.len() == 30)
    });
    let after = rss_kib(pid);
    println!(
        "server RSS: {before} KiB before, {after} KiB after 30 objects with a {HUGE}-character \
         string ({:+} KiB)",
        after as i64 - before as i64
    );
    for op in &ops {
        let message = op["status"]["message"].as_str().unwrap_or_default();
        let chars = message.chars().count();
        assert!(chars <= LIMIT, "a message of {chars} characters");
        assert!(message.starts_with("éxx"), "{}", &message[..20]);
        assert!(
            message.ends_with("[truncated]"),
            "…{}",
            &message[message.len() - 20..]
        );
    }
    scope.delete_gadgets(env);
}

/// A ruleset for VirtualMachines in `namespace` detecting `Migrating` after a check whose cost
/// grows with `object.spec.n` (nothing for most VMs; over any budget at 60,000 with a large
/// annotation).
fn costly_ruleset(name: &str, namespace: &str) -> String {
    RuleSet::vms_of(name, "test", namespace)
        .rule(Rule::new(
            "Migrating",
            "lists.range(object.spec.?n.orValue(0)).all(i, \
             !object.metadata.annotations['example.com/big'].contains(string(i))) && \
             object.?status.?printableStatus.orValue('') == 'Migrating'",
        ))
        .to_string()
}

/// A [`heavy_vm`] changed in `round` (an annotation), so each round is an event.
fn costly_vm(name: &str, namespace: &str, round: usize) -> String {
    let mut vm: Value = serde_json::from_str(&heavy_vm(name, namespace)).unwrap();
    vm["metadata"]["annotations"]["example.com/round"] = json!(round.to_string());
    vm.to_string()
}

#[test]
fn one_costly_object_is_charged_to_itself_and_the_ruleset_goes_on() {
    let env = env();
    let (ns, rs) = env.namespace_with_ruleset("charge", "costly", costly_ruleset);
    let _cleanup = env.delete_on_drop(&[&rs]);
    env.apply(&ifo_test_support::vm("vm1", &ns));
    env.wait_watching(&rs);
    // One tenant's object, costly on every one of its events.
    for round in 0..8 {
        env.apply(&costly_vm("tenant", &ns, round));
    }
    env.wait_ruleset_condition(&rs, "CostExceeded", "True", WAIT);
    // The ruleset goes on for everyone else.
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Migrating"}));
    let detected = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        eventually(WAIT, "vm1 Migrating", || {
            env.ifos(&ns)
                .into_iter()
                .find(|o| o["spec"]["subject"]["name"] == "vm1")
        })
    }));
    let cost = env.ruleset_condition(&rs, "CostExceeded").unwrap();
    assert!(detected.is_ok(), "vm1 not detected; CostExceeded: {cost:#}");
    assert_ne!(cost["reason"], "Suspended");
    // The object is named, on the ruleset and in every answer for its namespace.
    let skipped = env.wait_ruleset_condition(&rs, "ObjectsSkipped", "True", WAIT);
    let message = skipped["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "VirtualMachine {ns}/tenant: over the evaluation budget"
        )),
        "{message}"
    );
    let warning = format!(
        "Warning: operations may be incomplete: virtualmachines.kubevirt.io/v1 object {ns}/tenant is skipped: over the evaluation budget of ruleset {rs}"
    );
    let run = env.run_kubectl(User::Admin, &["get", "ifos", "-n", &ns]);
    assert!(run.stderr.contains(&warning), "{}", run.stderr);
    println!("{}", run.stderr.trim());
    assert_eq!(
        env.run_kubectl(User::Admin, &["ifo", "check", "-n", &ns])
            .code,
        2
    );
    // Its data fixed (the apply drops the costly fields), it is evaluated again, and nothing is
    // skipped.
    env.apply(&ifo_test_support::vm("tenant", &ns));
    env.wait_ruleset_condition(&rs, "ObjectsSkipped", "False", WAIT);
    let run = env.run_kubectl(User::Admin, &["get", "ifos", "-n", &ns]);
    assert!(!run.stderr.contains("Warning"), "{}", run.stderr);
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn a_suspended_ruleset_is_warned_about_and_check_exits_2() {
    let env = env();
    let (ns, rs) = env.namespace_with_ruleset("suspended", "costly", costly_ruleset);
    let _cleanup = env.delete_on_drop(&[&rs]);
    env.wait_watching(&rs);
    // Costly on every object: suspended.
    for i in 0..10 {
        env.apply(&costly_vm(&format!("heavy-{i}"), &ns, 0));
    }
    eventually(WAIT, "the ruleset suspended", || {
        env.ruleset_condition(&rs, "CostExceeded")
            .filter(|c| c["reason"] == "Suspended")
    });
    let suspended = format!(
        "Warning: operations may be incomplete: virtualmachines.kubevirt.io/v1 is not evaluated by ruleset {rs}: it is suspended"
    );
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        eventually(WAIT, "a warning that the ruleset is suspended", || {
            Some(env.run_kubectl(User::Admin, &["get", "ifos", "-n", &ns]))
                .filter(|r| r.stderr.contains(&suspended))
        })
    }))
    .unwrap_or_else(|_| {
        let run = env.run_kubectl(User::Admin, &["get", "ifos", "-n", &ns]);
        let check = env.run_kubectl(User::Admin, &["ifo", "check", "-n", &ns]);
        panic!(
            "no warning; kubectl get says:\n{}{}\nkubectl ifo check exits {}",
            run.stdout, run.stderr, check.code
        )
    });
    println!("{}", run.stderr.trim());
    let run = env.run_kubectl(User::Admin, &["ifo", "check", "-n", &ns]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("is suspended"), "{}", run.stderr);
    let run = env.run_kubectl(User::Admin, &["ifo", "wait", "-n", &ns, "--timeout", "5s"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let current = "ifo_target_detection_current{group=\"kubevirt.io\",version=\"v1\",resource=\"virtualmachines\"} 0";
    assert!(env.metrics().contains(current), "{current} missing");
    // Another namespace is not affected.
    let other = env.namespace("suspended-other");
    assert!(
        !env.run_kubectl(User::Admin, &["get", "ifos", "-n", &other])
            .stderr
            .contains(&suspended)
    );

    // A new generation runs again, and the warning goes.
    env.apply(&ifo_test_support::vm_ruleset(&rs, &ns));
    eventually(WAIT, "check to answer again", || {
        Some(env.run_kubectl(User::Admin, &["ifo", "check", "-n", &ns])).filter(|r| r.code != 2)
    });
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}
