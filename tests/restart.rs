//! Restarting the server: kube-apiserver routes to it again, it serves the same operations under
//! the same names and uids, and a watch resumed from before the restart is told to relist.
//!
//! A test binary of its own (with its own cluster and server): it stops the server, which would
//! disturb the tests that share the one in `e2e`.

use ifo_dev::User;
use ifo_test_support::{
    MIGRATING, Rule, RuleSet, Stop, busy_gadgets, env, eventually, gadget_crd, replicas, vm,
};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// VM migrations whose start time is read from the subject, so the occurrence (and its uid) is
/// the same whenever it is detected.
fn migration_ruleset(name: &str, namespace: &str) -> String {
    RuleSet::vms_of(name, "kubevirt", namespace)
        .rule(
            Rule::new("Migrating", MIGRATING)
                .start_time("object.metadata.?creationTimestamp.orValue('')"),
        )
        .to_string()
}

/// `(name, uid)` of each operation in `namespace`, as kubectl reads them through kube-apiserver.
fn identities(items: &[serde_json::Value]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|o| {
            let meta = &o["metadata"];
            (
                meta["name"].as_str().unwrap_or_default().to_string(),
                meta["uid"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The list's own resourceVersion (`kubectl get -o json` rewraps items in a `List` without it).
fn list_rv(namespace: &str) -> u64 {
    let path =
        format!("/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{namespace}/inflightoperations");
    let raw = env()
        .kubectl(User::Admin, &["get", "--raw", &path])
        .unwrap();
    let list: serde_json::Value = serde_json::from_str(&raw).unwrap();
    list["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_else(|| panic!("list without a resourceVersion: {list}"))
}

#[test]
fn after_a_restart_the_same_operations_are_served_and_old_watches_relist() {
    let env = env();
    let (ns, rs) = env.namespace_with_ruleset("restart", "migrations", migration_ruleset);
    env.apply(&vm("vm1", &ns));
    env.wait_watching(&rs);
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Migrating"}));
    let before = eventually(WAIT, "the migration in flight", || {
        Some(identities(&env.ifos(&ns))).filter(|ops| ops.len() == 1)
    });
    let mut old_rv = list_rv(&ns);

    for how in [Stop::Term, Stop::Kill] {
        // On SIGTERM: /readyz fails first while requests are still served, then open watches
        // end cleanly (the stream closes without an error), so clients resume elsewhere.
        let graceful = matches!(how, Stop::Term).then(|| {
            let cert = env.client_cert_args(User::Admin);
            let watch = std::process::Command::new("curl")
                .args(["-sN", "--max-time", "60", "-o", "/dev/null", "--cacert"])
                .arg(env.cluster.dir().join("pki/serving-ca.crt"))
                .args(&cert)
                .arg(format!(
                    "https://127.0.0.1:{}/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{ns}/inflightoperations?watch=1",
                    env.port
                ))
                .spawn()
                .unwrap();
            let probes = std::thread::spawn(|| {
                let mut seen = Vec::new();
                for _ in 0..100 {
                    let (code, _) = ifo_test_support::env().direct("/readyz", &["--max-time", "1"]);
                    if seen.last() != Some(&code) {
                        seen.push(code.clone());
                    }
                    if code == "000" {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                seen
            });
            std::thread::sleep(Duration::from_secs(1));
            (watch, probes)
        });
        env.stop_server(how);
        if let Some((mut watch, probes)) = graceful {
            let ended = watch.wait().unwrap();
            assert!(
                ended.success(),
                "the watch did not end cleanly: curl {ended}"
            );
            let seen = probes.join().unwrap();
            assert_eq!(seen.first().map(String::as_str), Some("200"), "{seen:?}");
            assert!(
                seen.contains(&"503".to_string()),
                "/readyz never failed: {seen:?}"
            );
        }
        let down = eventually(WAIT, "requests to fail while the server is down", || {
            env.kubectl(User::Admin, &["get", "ifos", "-n", &ns]).err()
        });
        assert!(
            down.to_string()
                .contains("the server is currently unable to handle the request"),
            "{how:?}: {down}"
        );

        env.restart_server().unwrap();
        eventually(WAIT, "/readyz ok after the restart", || {
            Some(env.direct("/readyz", &[])).filter(|(code, _)| code == "200")
        });
        env.wait_served();
        // Ready means synced: the first list that gets through already has the operation.
        let items = eventually(WAIT, "kube-apiserver reaching the server again", || {
            env.kubectl(User::Admin, &["get", "ifos", "-n", &ns, "-o", "json"])
                .ok()
        });
        let items: serde_json::Value = serde_json::from_str(&items).unwrap();
        assert_eq!(
            identities(items["items"].as_array().unwrap()),
            before,
            "{how:?}: same name and uid after the restart"
        );

        // resourceVersions keep rising, and one from before the restart is too old to resume.
        let new_rv = list_rv(&ns);
        assert!(new_rv > old_rv, "{how:?}: {new_rv} after {old_rv}");
        let watch = env.watch(&format!(
            "/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{ns}/inflightoperations?watch=1&resourceVersion={old_rv}"
        ));
        let events = watch.until(WAIT, "the watch's first event", |_| true);
        let status = &events[0];
        assert_eq!(status["type"], "ERROR", "{how:?}: {events:#?}");
        assert_eq!(status["object"]["code"], 410, "{how:?}: {status}");
        assert_eq!(status["object"]["reason"], "Expired", "{how:?}: {status}");
        old_rv = new_rv;
    }
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

/// How many subjects the starting replica's first list brings.
const SUBJECTS: usize = 150;

#[test]
fn a_replica_that_just_started_and_leads_never_serves_a_partial_index_without_a_warning() {
    let env = env();
    // One namespace whose subjects are all in flight, one whose only target cannot be listed
    // (the server has no right to read it): its first list fails, and so do its retries.
    let ns = env.namespace("sync");
    let rs = format!("up-{ns}");
    env.apply(
        &RuleSet::vms_of(&rs, "kubevirt", &ns)
            .rule(Rule::new("Up", "object.spec.?running.orValue(false)"))
            .to_string(),
    );
    let items: Vec<String> = (0..SUBJECTS).map(|i| vm(&format!("vm{i}"), &ns)).collect();
    env.apply(&format!(
        r#"{{"apiVersion":"v1","kind":"List","items":[{}]}}"#,
        items.join(",")
    ));
    let forbidden_ns = env.namespace("sync-forbidden");
    let group = format!("{forbidden_ns}.example.com");
    env.apply(&gadget_crd(&group));
    let forbidden_rs = format!("gadgets-{forbidden_ns}");
    env.apply(&busy_gadgets(
        &forbidden_rs,
        "gadgets",
        &group,
        &forbidden_ns,
    ));
    eventually(WAIT, "the running server serving every operation", || {
        (env.ifos(&ns).len() == SUBJECTS).then_some(())
    });

    // A replica starts and leads at once (a Lease of its own); it is asked from the moment it
    // listens.
    let lease = format!("ifo-sync-{}", std::process::id());
    let replica = replicas::replica(env, &lease, 0);
    let certs = env.client_cert_args(User::Admin);
    let certs: Vec<&str> = certs.iter().map(String::as_str).collect();
    let path = |ns: &str| {
        format!("/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{ns}/inflightoperations")
    };
    let (mut served, mut warned, mut silent_partial) = (0, 0, Vec::new());
    let started = std::time::Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the replica never served the whole index without a warning"
        );
        let (code, warnings, body) = env.direct_warned(replica.port, &path(&ns), &certs);
        if code != "200" {
            continue;
        }
        served += 1;
        let list: serde_json::Value = serde_json::from_str(&body).unwrap();
        let count = list["items"].as_array().unwrap().len();
        if !warnings.is_empty() {
            warned += 1;
            continue;
        }
        if count < SUBJECTS {
            silent_partial.push(count);
            continue;
        }
        break;
    }
    println!(
        "{served} answers until the index was whole, {warned} of them with a warning; \
         partial answers without one: {silent_partial:?}"
    );
    assert!(
        silent_partial.is_empty(),
        "partial answers without a warning (operations of {SUBJECTS}): {silent_partial:?}"
    );
    // The target that cannot be listed does not hold readiness back (its retries are not
    // waited for) and every answer it feeds says it is not watched.
    eventually(WAIT, "the replica ready", || {
        (replicas::get(env, replica.port, "/readyz").0 == "200").then_some(())
    });
    let (code, warnings, _) = env.direct_warned(replica.port, &path(&forbidden_ns), &certs);
    assert_eq!(code, "200");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(&format!("gadgets.{group}/v1 is not being watched"))),
        "{warnings:?}"
    );
    drop(replica);
    for ruleset in [&rs, &forbidden_rs] {
        env.kubectl(User::Admin, &["delete", "ors", ruleset])
            .unwrap();
    }
    env.kubectl(User::Admin, &["delete", "crd", &format!("gadgets.{group}")])
        .unwrap();
}
