//! kubectl against the live API through kube-apiserver: output, selectors, watches and RBAC.

use ifo_dev::User;
use ifo_test_support::{
    OPERATION_COLUMNS, env, eventually, populated, populated_for_alice, start, vm,
};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

fn lines(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn kubectl_get_prints_tables_lists_and_objects() {
    let env = env();
    let (ns, rs) = populated(env, "get");
    // `kubectl get ifos -n <ns> <args>` as admin.
    let get = |args: &[&str]| {
        env.kubectl(User::Admin, &[&["get", "ifos", "-n", &ns], args].concat())
            .unwrap()
    };

    let out = get(&[]);
    let rows = lines(&out);
    assert_eq!(rows[0].join(" "), OPERATION_COLUMNS, "{out}");
    assert_eq!(rows.len(), 3, "{out}");
    let vm1 = rows
        .iter()
        .find(|r| r.get(2).is_some_and(|s| s == "vm1"))
        .unwrap();
    assert_eq!(&vm1[1..5], ["VirtualMachine", "vm1", "Migrating", "Active"]);
    assert_eq!(vm1[6..], ["to", "node-9"]);

    let wide = get(&["-o", "wide"]);
    assert!(
        lines(&wide)[0].ends_with(&[
            "MESSAGE".into(),
            "PROGRESS".into(),
            "EXPECTED".into(),
            "STALLED".into()
        ]),
        "{wide}"
    );
    // The rest of an operation through custom columns, as docs/api.md shows.
    let custom = get(&[
        "-o",
        "custom-columns=NAME:.metadata.name,RULESET:.spec.ruleSet,OUTCOME:.status.outcome",
    ]);
    assert!(custom.contains(&rs), "{custom}");

    // -A: kubectl takes NAMESPACE from the row objects.
    let all = env.kubectl(User::Admin, &["get", "ifos", "-A"]).unwrap();
    assert_eq!(lines(&all)[0][0], "NAMESPACE");
    assert!(
        lines(&all).iter().any(|r| r[0] == ns && r[3] == "vm1"),
        "{all}"
    );

    let labels = get(&["--show-labels"]);
    assert!(
        labels.contains("ifo.kubevirt.io/operation=Migrating"),
        "{labels}"
    );

    let sorted = get(&["--sort-by=.metadata.name", "-o", "name"]);
    let names: Vec<&str> = sorted.lines().collect();
    let mut expected = names.clone();
    expected.sort_unstable();
    assert_eq!(names, expected);
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("inflightoperation.live.ifo.kubevirt.io/")),
        "{sorted}"
    );

    let yaml = get(&["-o", "yaml"]);
    assert!(yaml.contains("kind: List"), "{yaml}");
    assert!(yaml.contains("kind: InFlightOperation\n"), "{yaml}");
    assert!(
        yaml.contains("apiVersion: live.ifo.kubevirt.io/v1alpha1"),
        "{yaml}"
    );

    let name = env
        .ifos(&ns)
        .into_iter()
        .find(|o| o["spec"]["subject"]["name"] == "vm1")
        .unwrap()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let one = env
        .kubectl(User::Admin, &["get", "ifo", &name, "-n", &ns])
        .unwrap();
    assert!(one.contains(&name) && one.contains("Migrating"), "{one}");
    let missing = env
        .kubectl(User::Admin, &["get", "ifo", "nope", "-n", &ns])
        .unwrap_err()
        .to_string();
    assert!(
        missing.contains("NotFound") && missing.contains("\"nope\" not found"),
        "{missing}"
    );

    let inflight = env
        .kubectl(User::Admin, &["get", "inflight", "-A"])
        .unwrap();
    assert!(inflight.contains(&name), "{inflight}");
    env.kubectl(User::Admin, &["get", "ifco"]).unwrap();
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn label_and_field_selectors_filter_and_bad_ones_are_rejected() {
    let env = env();
    let (ns, rs) = populated(env, "sel");
    // Each selector, and the operations it selects: (subject, operation).
    for (flag, selector, selected) in [
        (
            "-l",
            "ifo.kubevirt.io/operation=Migrating",
            &[("vm1", "Migrating")][..],
        ),
        (
            "-l",
            "ifo.kubevirt.io/operation notin (Migrating)",
            &[("vm2", "Starting")],
        ),
        (
            "--field-selector",
            "spec.operation=Starting,status.phase=Active",
            &[("vm2", "Starting")],
        ),
        ("--field-selector", "status.phase=Completed", &[]),
    ] {
        let list = env.get_json(User::Admin, &["get", "ifos", "-n", &ns, flag, selector]);
        let got: Vec<(&str, &str)> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["spec"]["subject"]["name"].as_str().unwrap(),
                    o["spec"]["operation"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(got, selected, "{flag} {selector}");
    }

    let bad_field = env
        .kubectl(
            User::Admin,
            &["get", "ifos", "-n", &ns, "--field-selector", "spec.bogus=x"],
        )
        .unwrap_err()
        .to_string();
    assert!(
        bad_field.contains("field label not supported: spec.bogus"),
        "{bad_field}"
    );
    let bad_label = env
        .kubectl(User::Admin, &["get", "ifos", "-n", &ns, "-l", "a in (b"])
        .unwrap_err()
        .to_string();
    assert!(
        bad_label.contains("unable to parse requirement")
            || bad_label.contains("BadRequest")
            || bad_label.contains("found"),
        "{bad_label}"
    );
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn kubectl_watch_streams_changes_and_selector_watch_sees_rows_leave() {
    let env = env();
    let (ns, rs) = populated(env, "watch");
    let spawn = |args: &[&str]| start(env.kubectl_cmd(User::Admin, args));
    let all = spawn(&["get", "ifos", "-n", &ns, "-w", "--request-timeout=0"]);
    let active = spawn(&[
        "get",
        "ifos",
        "-n",
        &ns,
        "-w",
        "--field-selector",
        "status.phase=Active",
        "-o",
        "name",
    ]);
    std::thread::sleep(Duration::from_secs(2));
    env.set_vm_status(
        &ns,
        "vm1",
        json!({"printableStatus": "Migrating", "migrationTarget": "node-7"}),
    );
    std::thread::sleep(Duration::from_secs(1));
    env.set_vm_status(&ns, "vm1", json!({"printableStatus": "Running"}));
    // Grace is 3 s: Completed, then removed.
    eventually(WAIT, "vm1's operation removed", || {
        (!env
            .ifos(&ns)
            .iter()
            .any(|o| o["spec"]["subject"]["name"] == "vm1"))
        .then_some(())
    });
    std::thread::sleep(Duration::from_secs(1));
    let stop = |mut child: std::process::Child| {
        let _ = child.kill();
        String::from_utf8_lossy(&child.wait_with_output().unwrap().stdout).into_owned()
    };
    let out = stop(all);
    let rows = lines(&out);
    let vm1: Vec<&Vec<String>> = rows
        .iter()
        .filter(|r| r.get(2).is_some_and(|s| s == "vm1"))
        .collect();
    // Initial row, message change, Completed row (then the deletion prints the last state again).
    assert!(
        vm1.iter()
            .any(|r| r.ends_with(&["to".into(), "node-9".into()])),
        "{out}"
    );
    assert!(
        vm1.iter()
            .any(|r| r.ends_with(&["to".into(), "node-7".into()])),
        "{out}"
    );
    assert!(vm1.iter().any(|r| r[4] == "Completed"), "{out}");
    assert_eq!(
        rows.iter()
            .filter(|r| r.first().is_some_and(|c| c == "NAME"))
            .count(),
        1,
        "header printed again: {out}"
    );
    let vm2_rows = rows
        .iter()
        .filter(|r| r.get(2).is_some_and(|s| s == "vm2"))
        .count();
    assert_eq!(
        vm2_rows, 1,
        "vm2 did not change and must be printed once: {out}"
    );

    let names = stop(active);
    let vm1_name = names.lines().next().map(str::to_string).unwrap_or_default();
    assert!(
        names.lines().count() >= 2,
        "the Active watch must list both and then see vm1 leave: {names}"
    );
    assert!(!vm1_name.is_empty());
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn rbac_is_enforced_per_namespace_through_the_aggregation_layer() {
    let env = env();
    let (ns, rs) = populated(env, "rbac-a");
    let other = env.namespace("rbac-b");
    env.grant_alice_view(&ns);
    // ClusterRole aggregation (view includes the live API) is asynchronous.
    eventually(WAIT, "alice can list ifos", || {
        env.kubectl(User::Alice, &["get", "ifos", "-n", &ns]).ok()
    });
    let list = env.get_json(User::Alice, &["get", "ifos", "-n", &ns]);
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    assert_eq!(
        env.kubectl(User::Alice, &["auth", "can-i", "watch", "ifos", "-n", &ns])
            .unwrap()
            .trim(),
        "yes"
    );

    // What kubectl says when `user` may not read `where_` (`-n <ns>` or `-A`).
    let refused = |user: User, where_: &[&str]| {
        let error = env
            .kubectl(user, &[&["get", "ifos"], where_].concat())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("Forbidden") || error.contains("forbidden"),
            "{error}"
        );
        error
    };
    refused(User::Alice, &["-n", &other]);
    let denied_all = refused(User::Alice, &["-A"]);
    assert!(denied_all.contains("at the cluster scope"), "{denied_all}");
    let can = env.kubectl(
        User::Alice,
        &["auth", "can-i", "list", "ifos", "-n", &other],
    );
    assert!(can.is_err() || can.unwrap().trim() == "no");

    refused(User::Bob, &["-n", &ns]);
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn direct_callers_need_a_token_and_cannot_forge_identity_headers() {
    let env = env();
    let (ns, rs) = populated_for_alice(env, "direct");
    let path = format!("/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{ns}/inflightoperations");
    let curl = |extra: &[&str]| env.direct(&path, extra);
    let (code, body) = curl(&[]);
    assert_eq!(code, "401", "{body}");
    let (code, _) = curl(&[
        "-H",
        "X-Remote-User: admin",
        "-H",
        "X-Remote-Group: system:masters",
    ]);
    assert_eq!(
        code, "401",
        "identity headers without the front-proxy certificate must not be trusted"
    );
    let (code, body) = eventually(WAIT, "alice's token works", || {
        Some(curl(&["-H", "Authorization: Bearer alice-token"])).filter(|(c, _)| c == "200")
    });
    assert_eq!(code, "200");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["items"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let (code, _) = curl(&["-H", "Authorization: Bearer bob-token"]);
    assert_eq!(code, "403");
    let (code, _) = curl(&["-H", "Authorization: Bearer forged"]);
    assert_eq!(code, "401");
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn namespace_deletion_completes_while_the_api_is_registered() {
    let env = env();
    let ns = env.namespace("nsdel");
    env.kubectl(User::Admin, &["delete", "namespace", &ns, "--timeout=60s"])
        .unwrap();
}

#[test]
fn metrics_need_monitoring_rights_while_discovery_is_open_to_authenticated_users() {
    let env = env();
    let discovery = ["get", "--raw", "/apis/live.ifo.kubevirt.io/v1alpha1"];
    let metrics = ["get", "--raw", "/metrics"];
    let listed = env.kubectl_direct(User::Bob, &discovery).unwrap();
    assert!(listed.contains("inflightoperations"), "{listed}");
    let refused = env.kubectl_direct(User::Bob, &metrics).unwrap_err();
    assert!(format!("{refused:#}").contains("Forbidden"), "{refused:#}");
    env.kubectl(
        User::Admin,
        &[
            "create",
            "clusterrolebinding",
            "alice-monitoring",
            "--clusterrole=system:monitoring",
            "--user=alice",
        ],
    )
    .unwrap();
    let text = eventually(WAIT, "alice reads /metrics", || {
        env.kubectl_direct(User::Alice, &metrics).ok()
    });
    assert!(text.contains("# TYPE"), "{text}");
    env.kubectl(
        User::Admin,
        &["delete", "clusterrolebinding", "alice-monitoring"],
    )
    .unwrap();
}

/// The subject name of a watched operation.
fn subject_of(op: &kube::api::DynamicObject) -> String {
    op.data["spec"]["subject"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn kube_rs_watcher_with_streaming_lists_gets_the_initial_state_then_changes() {
    use futures::StreamExt;
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
    use kube::runtime::watcher::{self, Event};

    let env = env();
    let (ns, rs) = populated(env, "kubers");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let kubeconfig =
            kube::config::Kubeconfig::read_from(env.cluster.kubeconfig(User::Admin)).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let gvk = GroupVersionKind::gvk("live.ifo.kubevirt.io", "v1alpha1", "InFlightOperation");
        let resource = ApiResource::from_gvk_with_plural(&gvk, "inflightoperations");
        let api: Api<DynamicObject> = Api::namespaced_with(client, &ns, &resource);
        let mut events =
            watcher::watcher(api, watcher::Config::default().streaming_lists()).boxed();
        let mut seen = Vec::new();
        let mut next = async || -> Event<DynamicObject> {
            let event = tokio::time::timeout(WAIT, events.next())
                .await
                .unwrap_or_else(|_| panic!("no watch event within {WAIT:?}; before: {seen:#?}"))
                .expect("the watcher does not end")
                .unwrap_or_else(|e| panic!("watch error: {e}"));
            seen.push(format!("{event:?}"));
            event
        };

        // The initial state, streamed (no list request) and closed by the initial-events-end bookmark.
        assert!(matches!(next().await, Event::Init));
        let mut initial = Vec::new();
        loop {
            match next().await {
                Event::InitApply(op) => initial.push(subject_of(&op)),
                Event::InitDone => break,
                other => panic!("unexpected before InitDone: {other:?}"),
            }
        }
        initial.sort();
        assert_eq!(initial, ["vm1", "vm2"]);

        // A new operation.
        env.apply(&vm("vm3", &ns));
        env.set_vm_status(&ns, "vm3", json!({"printableStatus": "Starting"}));
        loop {
            match next().await {
                Event::Apply(op) if subject_of(&op) == "vm3" => {
                    assert_eq!(op.data["spec"]["operation"], "Starting");
                    break;
                }
                Event::Apply(_) => {}
                other => panic!("unexpected while waiting for vm3: {other:?}"),
            }
        }

        // vm2's operation ends: shown as ending during its grace, once as Completed, then
        // deleted.
        env.set_vm_status(&ns, "vm2", json!({"printableStatus": "Running"}));
        let mut completed = None;
        loop {
            match next().await {
                Event::Apply(op)
                    if subject_of(&op) == "vm2" && op.data["status"]["phase"] == "Active" =>
                {
                    assert!(op.data["status"]["gracePeriodEnd"].is_string(), "{op:?}");
                    assert!(completed.is_none(), "ending after it completed");
                }
                Event::Apply(op) if subject_of(&op) == "vm2" => {
                    assert_eq!(op.data["status"]["phase"], "Completed");
                    completed = op.metadata.name.clone();
                }
                Event::Apply(_) => {}
                Event::Delete(op) => {
                    assert_eq!(subject_of(&op), "vm2");
                    assert!(completed.is_some(), "deleted before shown as Completed");
                    assert_eq!(op.metadata.name, completed);
                    break;
                }
                other => panic!("unexpected while waiting for vm2 to end: {other:?}"),
            }
        }
    });
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}
