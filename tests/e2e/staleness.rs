//! Saying when the data is stale: a rule target that cannot be listed any more (its CRD deleted
//! while a ruleset watches it) is named in a `Warning` on every answer it feeds, `kubectl ifo
//! check` refuses to answer (exit 2), and both clear once the target can be listed again.

use ifo_dev::User;
use ifo_test_support::{busy_gadgets, env, eventually, gadget};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
/// A failed watch is retried with a fresh list after a backoff (at once on a CRD change).
const RECOVER: Duration = Duration::from_secs(90);

/// The gadgets of test-support, under the names the other modules use.
pub(crate) use ifo_test_support::{create_gadget_crd as create_crd, grant_gadgets as grant_read};

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
    env.apply(&busy_gadgets(&rs, "gadgets", &group, &ns));
    env.wait_watching(&rs);
    env.apply(&gadget(&group, "g1", &ns, json!({"busy": true})));
    eventually(WAIT, "a Busy operation", || {
        env.ifos(&ns)
            .into_iter()
            .find(|o| o["spec"]["operation"] == "Busy")
    });
    let warning =
        format!("Warning: operations may be incomplete: gadgets.{group}/v1 is not being watched: ");
    let run = env.run_kubectl(User::Admin, &["get", "ifos", "-n", &ns]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains(&warning), "{}", run.stderr);
    assert_eq!(
        env.run_kubectl(User::Admin, &["ifo", "check", "-n", &ns])
            .code,
        1
    );

    env.kubectl(
        User::Admin,
        &["delete", "crd", &format!("gadgets.{group}"), "--wait=true"],
    )
    .unwrap();
    let run = eventually(RECOVER, "a warning naming the target", || {
        Some(env.run_kubectl(User::Admin, &["get", "ifos", "-n", &ns]))
            .filter(|r| r.stderr.contains(&warning))
    });
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Through a watch too (the header comes with the watch's response).
    let run = env.run_kubectl(
        User::Admin,
        &["get", "ifos", "-n", &ns, "-w", "--request-timeout=3s"],
    );
    assert!(run.stderr.contains(&warning), "{}", run.stderr);
    // The plugin: check cannot say what is in flight, and says why; list answers and warns.
    let run = env.run_kubectl(User::Admin, &["ifo", "check", "-n", &ns]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("the server's answer may be incomplete")
            && run
                .stderr
                .contains(&format!("gadgets.{group}/v1 is not being watched: ")),
        "{}",
        run.stderr
    );
    let run = env.run_kubectl(User::Admin, &["ifo", "wait", "-n", &ns, "--timeout", "5s"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("is not being watched"),
        "{}",
        run.stderr
    );
    let run = env.run_kubectl(User::Admin, &["ifo", "list", "-n", &ns]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains(&warning), "{}", run.stderr);
    // A namespace the ruleset does not cover is not affected.
    let run = env.run_kubectl(User::Admin, &["get", "ifos", "-n", &other]);
    assert!(!run.stderr.contains(&warning), "{}", run.stderr);

    // Restored: listed again, and the warning goes.
    create_crd(env, &group);
    eventually(RECOVER, "the warning to go", || {
        Some(env.run_kubectl(User::Admin, &["get", "ifos", "-n", &ns]))
            .filter(|r| r.code == 0 && !r.stderr.contains(&warning))
    });
    // The gadget went with its CRD: the relist ended its operation.
    let run = eventually(WAIT, "check to find nothing in flight", || {
        Some(env.run_kubectl(User::Admin, &["ifo", "check", "-n", &ns])).filter(|r| r.code == 0)
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
        Some(env.run_kubectl(User::Admin, &["get", "ifos", "-n", &ns]))
            .filter(|r| r.stderr.contains(&warning))
    });
    assert!(run.stderr.contains("forbidden"), "{}", run.stderr);
    assert_eq!(
        env.run_kubectl(User::Admin, &["ifo", "check", "-n", &ns])
            .code,
        2
    );
    grant_read(env, &ns, &group);
    eventually(RECOVER, "the warning to go again", || {
        Some(env.run_kubectl(User::Admin, &["ifo", "check", "-n", &ns])).filter(|r| r.code == 0)
    });

    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
    env.kubectl(User::Admin, &["delete", "crd", &format!("gadgets.{group}")])
        .unwrap();
}
