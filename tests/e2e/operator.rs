//! What differs for the scripts of people coming from the InFlightOperations operator, as the
//! README's "Coming from the InFlightOperations operator" says, tried as such a user would with
//! kubectl: operations are namespaced (a label-selected `kubectl get ifo` lists the current
//! namespace only), read-only, and rulesets carry no finalizer (one the operator left is deleted
//! once it is removed).

use std::process::Stdio;
use std::time::Duration;

use ifo_dev::User;
use serde_json::json;

use ifo_test_support::{Env, env, eventually, vm, vm_ruleset};

const WAIT: Duration = Duration::from_secs(30);

struct Run {
    success: bool,
    stdout: String,
    stderr: String,
}

fn kubectl(env: &Env, args: &[&str]) -> Run {
    let out = env
        .cluster
        .kubectl(User::Admin)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Run {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A namespace of this test's own with one VirtualMachine migrating under a watching ruleset.
/// Returns (namespace, ruleset, VM).
fn migrating_vm(env: &Env, prefix: &str) -> (String, String, String) {
    let ns = env.namespace(prefix);
    let (rs, name) = (format!("rs-{ns}"), format!("vm-{ns}"));
    env.apply(&vm_ruleset(&rs, &ns));
    env.apply(&vm(&name, &ns));
    env.wait_watching(&rs);
    env.set_vm_status(&ns, &name, json!({"printableStatus": "Migrating"}));
    eventually(WAIT, "the migration in flight", || {
        Some(env.ifos(&ns)).filter(|o| o.len() == 1)
    });
    (ns, rs, name)
}

#[test]
fn a_label_selected_get_lists_the_current_namespace_only() {
    let env = env();
    let (ns, _, name) = migrating_vm(env, "operator-ns");
    let selector = format!("ifo.kubevirt.io/subject-name={name}");

    // As the operator's users wrote it: its objects were cluster-scoped, ours are namespaced.
    let here = kubectl(env, &["get", "ifo", "-l", &selector]);
    assert!(here.success, "{}", here.stderr);
    assert!(
        here.stdout.is_empty()
            && here
                .stderr
                .contains("No resources found in default namespace"),
        "the context's namespace only: {:?} {:?}",
        here.stdout,
        here.stderr
    );
    for scope in [["-A", ""], ["-n", ns.as_str()]] {
        let args: Vec<&str> = ["get", "ifo", "-l", &selector]
            .into_iter()
            .chain(scope.into_iter().filter(|a| !a.is_empty()))
            .collect();
        let found = kubectl(env, &args);
        assert!(
            found.success && found.stdout.contains(&name) && found.stdout.contains("Migrating"),
            "{args:?}: {:?} {:?}",
            found.stdout,
            found.stderr
        );
    }
}

#[test]
fn operations_cannot_be_deleted_and_stay_until_they_complete() {
    let env = env();
    let (ns, _, _) = migrating_vm(env, "operator-delete");
    // The operator's e2e cleanup did this.
    let delete = kubectl(env, &["delete", "ifo", "--all", "-n", &ns]);
    assert!(
        !delete.success && delete.stderr.contains("MethodNotAllowed"),
        "{:?} {:?}",
        delete.stdout,
        delete.stderr
    );
    assert_eq!(env.ifos(&ns).len(), 1, "the operation is still served");
}

#[test]
fn rulesets_carry_no_finalizer_and_one_the_operator_left_goes_once_removed() {
    let env = env();
    let (ns, rs, _) = migrating_vm(env, "operator-finalizer");
    let finalizers = kubectl(
        env,
        &["get", "ors", &rs, "-o", "jsonpath={.metadata.finalizers}"],
    );
    assert!(
        finalizers.success && finalizers.stdout.is_empty(),
        "finalizers: {:?}",
        finalizers.stdout
    );
    let deleted = kubectl(env, &["delete", "ors", &rs, "--timeout=20s"]);
    assert!(deleted.success, "deleted at once: {}", deleted.stderr);
    eventually(WAIT, "the ruleset's operation completed and gone", || {
        env.ifos(&ns).is_empty().then_some(())
    });

    // A ruleset as the operator left it: with its finalizer, which nothing here removes.
    let left = format!("left-{ns}");
    let mut manifest: serde_json::Value = serde_json::from_str(&vm_ruleset(&left, &ns)).unwrap();
    manifest["metadata"]["finalizers"] = json!(["ifo.kubevirt.io/finalizer"]);
    env.apply(&manifest.to_string());
    env.wait_watching(&left);
    let waiting = kubectl(env, &["delete", "ors", &left, "--timeout=3s"]);
    assert!(
        !waiting.success,
        "the finalizer holds it: {:?}",
        waiting.stdout
    );
    let held = kubectl(
        env,
        &[
            "get",
            "ors",
            &left,
            "-o",
            "jsonpath={.metadata.deletionTimestamp} {.metadata.finalizers}",
        ],
    );
    assert!(
        held.success && held.stdout.contains("ifo.kubevirt.io/finalizer"),
        "{:?} {:?}",
        held.stdout,
        held.stderr
    );
    // The README's command.
    let patch = kubectl(
        env,
        &[
            "patch",
            "ors",
            &left,
            "--type=json",
            r#"-p=[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ],
    );
    assert!(patch.success, "{}", patch.stderr);
    eventually(WAIT, "the ruleset gone", || {
        let get = kubectl(env, &["get", "ors", &left]);
        (!get.success && get.stderr.contains("NotFound")).then_some(())
    });
}
