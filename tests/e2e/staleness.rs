//! Saying when the data is stale: a rule target that cannot be listed any more (its CRD deleted
//! while a ruleset watches it) is named in a `Warning` on every answer it feeds, `kubectl ifo
//! check` refuses to answer (exit 2), and both clear once the target can be listed again.

use ifo_dev::User;
use ifo_test_support::{Scope, create_gadget_crd, env, eventually, grant_gadgets};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
/// A failed watch is retried with a fresh list after a backoff (at once on a CRD change).
const RECOVER: Duration = Duration::from_secs(90);

#[test]
fn a_target_that_cannot_be_listed_is_warned_about_until_it_can() {
    let env = env();
    let scope = env.gadget_scope("stale");
    let Scope { ns, group, .. } = &scope;
    let other = env.namespace("stale-other");
    scope.watch(env, scope.busy_gadgets(), &[]);
    env.apply(&scope.gadget("g1", json!({"busy": true})));
    env.wait_ifo(ns, "a Busy operation", |o| o["spec"]["operation"] == "Busy");
    let warning =
        format!("Warning: operations may be incomplete: gadgets.{group}/v1 is not being watched: ");
    let run = env.run_kubectl(User::Admin, &["get", "ifos", "-n", ns]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains(&warning), "{}", run.stderr);
    assert_eq!(
        env.run_kubectl(User::Admin, &["ifo", "check", "-n", ns])
            .code,
        1
    );

    env.kubectl(
        User::Admin,
        &["delete", "crd", &format!("gadgets.{group}"), "--wait=true"],
    )
    .unwrap();
    let run = eventually(RECOVER, "a warning naming the target", || {
        Some(env.run_kubectl(User::Admin, &["get", "ifos", "-n", ns]))
            .filter(|r| r.stderr.contains(&warning))
    });
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Through a watch too (the header comes with the watch's response).
    let run = env.run_kubectl(
        User::Admin,
        &["get", "ifos", "-n", ns, "-w", "--request-timeout=3s"],
    );
    assert!(run.stderr.contains(&warning), "{}", run.stderr);
    // The plugin: check cannot say what is in flight, and says why; list answers and warns.
    let run = env.run_kubectl(User::Admin, &["ifo", "check", "-n", ns]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("the server's answer may be incomplete")
            && run
                .stderr
                .contains(&format!("gadgets.{group}/v1 is not being watched: ")),
        "{}",
        run.stderr
    );
    let run = env.run_kubectl(User::Admin, &["ifo", "wait", "-n", ns, "--timeout", "5s"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("is not being watched"),
        "{}",
        run.stderr
    );
    let run = env.run_kubectl(User::Admin, &["ifo", "list", "-n", ns]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains(&warning), "{}", run.stderr);
    // A namespace the ruleset does not cover is not affected.
    let run = env.run_kubectl(User::Admin, &["get", "ifos", "-n", &other]);
    assert!(!run.stderr.contains(&warning), "{}", run.stderr);

    // Restored: listed again, and the warning goes.
    create_gadget_crd(env, group);
    eventually(RECOVER, "the warning to go", || {
        Some(env.run_kubectl(User::Admin, &["get", "ifos", "-n", ns]))
            .filter(|r| r.code == 0 && !r.stderr.contains(&warning))
    });
    // The gadget went with its CRD: the relist ended its operation.
    let run = eventually(WAIT, "check to find nothing in flight", || {
        Some(env.run_kubectl(User::Admin, &["ifo", "check", "-n", ns])).filter(|r| r.code == 0)
    });
    assert!(!run.stderr.contains("Warning"), "{}", run.stderr);

    // The server's read access revoked: its open watch goes on silently, the liveness probe
    // notices.
    env.kubectl(
        User::Admin,
        &["delete", "rolebinding", "read-gadgets", "-n", ns],
    )
    .unwrap();
    let run = eventually(RECOVER, "a warning that the target is forbidden", || {
        Some(env.run_kubectl(User::Admin, &["get", "ifos", "-n", ns]))
            .filter(|r| r.stderr.contains(&warning))
    });
    assert!(run.stderr.contains("forbidden"), "{}", run.stderr);
    assert_eq!(
        env.run_kubectl(User::Admin, &["ifo", "check", "-n", ns])
            .code,
        2
    );
    grant_gadgets(env, ns, group);
    eventually(RECOVER, "the warning to go again", || {
        Some(env.run_kubectl(User::Admin, &["ifo", "check", "-n", ns])).filter(|r| r.code == 0)
    });

    scope.delete_gadgets(env);
}
