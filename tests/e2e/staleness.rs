//! Saying when the data is stale: a rule target that cannot be listed any more (its CRD deleted
//! while a ruleset watches it) is named in a `Warning` on every answer it feeds, `kubectl ifo
//! check` refuses to answer (exit 2), and both clear once the target can be listed again.

use ifo_dev::User;
use ifo_test_support::{Env, env, eventually};
use std::process::Stdio;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
/// A failed watch is retried with a fresh list after a backoff (at once on a CRD change).
const RECOVER: Duration = Duration::from_secs(90);

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// kubectl as admin; with the plugin's directory on PATH, so `kubectl ifo` finds it.
fn kubectl(env: &Env, args: &[&str]) -> Run {
    let plugin = ifo_test_support::plugin_binary();
    let dir = plugin.parent().unwrap();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = env
        .cluster
        .kubectl(User::Admin)
        .env("PATH", path)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn crd(group: &str) -> String {
    format!(
        r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{{"name":"gadgets.{group}"}},
"spec":{{"group":"{group}","scope":"Namespaced","names":{{"kind":"Gadget","plural":"gadgets","singular":"gadget","listKind":"GadgetList"}},
 "versions":[{{"name":"v1","served":true,"storage":true,
   "schema":{{"openAPIV3Schema":{{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}}]}}}}"#
    )
}

/// Lets the server read gadgets in `ns` (it may only read what it is granted, as in a cluster).
pub(crate) fn grant_read(env: &Env, ns: &str, group: &str) {
    env.apply(&format!(
        r#"{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{{"name":"read-gadgets","namespace":"{ns}"}},
"rules":[{{"apiGroups":["{group}"],"resources":["gadgets"],"verbs":["get","list","watch"]}}]}}"#
    ));
    env.apply(&format!(
        r#"{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{{"name":"read-gadgets","namespace":"{ns}"}},
"roleRef":{{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"read-gadgets"}},
"subjects":[{{"kind":"ServiceAccount","name":"ifo-apiserver","namespace":"ifo-system"}}]}}"#
    ));
}

pub(crate) fn create_crd(env: &Env, group: &str) {
    env.apply(&crd(group));
    env.kubectl(
        User::Admin,
        &[
            "wait",
            "--for=condition=Established",
            &format!("crd/gadgets.{group}"),
            "--timeout=30s",
        ],
    )
    .unwrap();
}

#[test]
fn a_target_that_cannot_be_listed_is_warned_about_until_it_can() {
    let env = env();
    let ns = env.namespace("stale");
    let other = env.namespace("stale-other");
    // Cluster-scoped objects are unique to this test: tests share the cluster.
    let group = format!("{ns}.stale.example.com");
    let rs = format!("gadgets-{ns}");
    create_crd(env, &group);
    grant_read(env, &ns, &group);
    env.apply(&format!(
        r#"{{"apiVersion":"ifo.kubevirt.io/v1alpha1","kind":"OperationRuleSet","metadata":{{"name":"{rs}"}},
"spec":{{"component":"gadgets","target":{{"group":"{group}","version":"v1","resource":"gadgets"}},"namespaces":["{ns}"],
 "rules":[{{"operation":"Busy","expression":"object.?status.?busy.orValue(false)"}}]}}}}"#
    ));
    env.wait_watching(&rs);
    env.apply(&format!(
        r#"{{"apiVersion":"{group}/v1","kind":"Gadget","metadata":{{"name":"g1","namespace":"{ns}"}},"status":{{"busy":true}}}}"#
    ));
    eventually(WAIT, "a Busy operation", || {
        env.ifos(&ns)
            .into_iter()
            .find(|o| o["spec"]["operation"] == "Busy")
    });
    let warning =
        format!("Warning: operations may be incomplete: gadgets.{group}/v1 is not being watched: ");
    let run = kubectl(env, &["get", "ifos", "-n", &ns]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains(&warning), "{}", run.stderr);
    assert_eq!(kubectl(env, &["ifo", "check", "-n", &ns]).code, 1);

    env.kubectl(
        User::Admin,
        &["delete", "crd", &format!("gadgets.{group}"), "--wait=true"],
    )
    .unwrap();
    let run = eventually(RECOVER, "a warning naming the target", || {
        Some(kubectl(env, &["get", "ifos", "-n", &ns])).filter(|r| r.stderr.contains(&warning))
    });
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Through a watch too (the header comes with the watch's response).
    let run = kubectl(
        env,
        &["get", "ifos", "-n", &ns, "-w", "--request-timeout=3s"],
    );
    assert!(run.stderr.contains(&warning), "{}", run.stderr);
    // The plugin: check cannot say what is in flight, and says why; list answers and warns.
    let run = kubectl(env, &["ifo", "check", "-n", &ns]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("the server's answer may be incomplete")
            && run
                .stderr
                .contains(&format!("gadgets.{group}/v1 is not being watched: ")),
        "{}",
        run.stderr
    );
    let run = kubectl(env, &["ifo", "wait", "-n", &ns, "--timeout", "5s"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("is not being watched"),
        "{}",
        run.stderr
    );
    let run = kubectl(env, &["ifo", "list", "-n", &ns]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains(&warning), "{}", run.stderr);
    // A namespace the ruleset does not cover is not affected.
    let run = kubectl(env, &["get", "ifos", "-n", &other]);
    assert!(!run.stderr.contains(&warning), "{}", run.stderr);

    // Restored: listed again, and the warning goes.
    create_crd(env, &group);
    eventually(RECOVER, "the warning to go", || {
        Some(kubectl(env, &["get", "ifos", "-n", &ns]))
            .filter(|r| r.code == 0 && !r.stderr.contains(&warning))
    });
    // The gadget went with its CRD: the relist ended its operation.
    let run = eventually(WAIT, "check to find nothing in flight", || {
        Some(kubectl(env, &["ifo", "check", "-n", &ns])).filter(|r| r.code == 0)
    });
    assert!(!run.stderr.contains("Warning"), "{}", run.stderr);

    // The server's read access revoked: its open watch goes on silently, the liveness probe
    // notices.
    env.kubectl(
        User::Admin,
        &["delete", "rolebinding", "read-gadgets", "-n", &ns],
    )
    .unwrap();
    let run = eventually(RECOVER, "a warning that the target is forbidden", || {
        Some(kubectl(env, &["get", "ifos", "-n", &ns])).filter(|r| r.stderr.contains(&warning))
    });
    assert!(run.stderr.contains("forbidden"), "{}", run.stderr);
    assert_eq!(kubectl(env, &["ifo", "check", "-n", &ns]).code, 2);
    grant_read(env, &ns, &group);
    eventually(RECOVER, "the warning to go again", || {
        Some(kubectl(env, &["ifo", "check", "-n", &ns])).filter(|r| r.code == 0)
    });

    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
    env.kubectl(User::Admin, &["delete", "crd", &format!("gadgets.{group}")])
        .unwrap();
}
