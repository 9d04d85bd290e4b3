//! The in-cluster install. `deploy/` renders with kubectl's kustomize to every manifest of the
//! directory and nothing else, wired together (ServiceAccount, RBAC, Secret, probes, Service); a
//! real kube-apiserver accepts all of it in a server-side dry run (schemas, admission, the Pod
//! Security level of the namespace). The cert-manager overlay renders deploy/ plus its CA,
//! serving certificate, APIService and ruleset validation webhook (cert-manager's CRDs are not
//! installed here, so only its rendering is checked). The output of certs/generate.sh passes a
//! dry run too.
//!
//! The test cluster has its own Service, APIService and webhook of the same names, pointing at
//! the server of these tests: `deploy/` holds no APIService and no webhook, and the dry runs
//! must leave all three untouched. Its webhook is the shipped one but for where it calls.

use ifo_dev::User;
use ifo_test_support::find_object;
use ifo_test_support::{Run, env, files_under};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const APISERVICE: &str = "v1alpha1.live.ifo.kubevirt.io";
const WEBHOOK: &str = ifo_dev::RULESET_WEBHOOK;
const NAMESPACE: &str = "ifo-system";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `kubectl kustomize <dir>`, as a list of objects.
fn kustomize(dir: &str) -> Vec<Value> {
    let path = root().join(dir).display().to_string();
    let text = env()
        .kubectl(User::Admin, &["kustomize", &path])
        .unwrap_or_else(|e| panic!("kubectl kustomize {dir}: {e:#}"));
    serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("kustomize {dir} output: {e}"))
}

type Id = (String, String, String, String);

fn id(o: &Value) -> Id {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        s(&o["apiVersion"]),
        s(&o["kind"]),
        s(&o["metadata"]["namespace"]),
        s(&o["metadata"]["name"]),
    )
}

/// Every object of every YAML file under `dir` but kustomization.yaml, leaving out overlays
/// (folders with a kustomization.yaml of their own, e.g. deploy/persist/) and the Helm chart
/// (its templates are not YAML until rendered; `tests/chart.rs` checks it makes these objects).
fn objects_in(dir: &Path) -> Vec<Value> {
    let skipped = |d: &Path| d.join("kustomization.yaml").exists() || d.join("Chart.yaml").exists();
    let mut objects = Vec::new();
    for path in files_under(dir, |d| !skipped(d)) {
        if path.extension().is_some_and(|e| e == "yaml")
            && path.file_name().is_some_and(|n| n != "kustomization.yaml")
        {
            let text = std::fs::read_to_string(&path).unwrap();
            let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            objects.extend(docs.into_iter().filter(|d| !d.is_null()));
        }
    }
    objects
}

fn all<'a>(objects: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> {
    objects.iter().filter(move |o| o["kind"] == kind)
}

fn env_var<'a>(container: &'a Value, name: &str) -> &'a str {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str())
        .unwrap_or_else(|| panic!("no env {name}"))
}

#[test]
fn deploy_renders_every_manifest_of_the_directory_wired_together() {
    let rendered = kustomize("deploy");
    let ids: BTreeSet<Id> = rendered.iter().map(id).collect();
    assert_eq!(ids.len(), rendered.len(), "duplicate objects");
    let on_disk: BTreeSet<Id> = objects_in(&root().join("deploy")).iter().map(id).collect();
    assert_eq!(
        ids, on_disk,
        "deploy/kustomization.yaml must list every manifest under deploy/"
    );
    for kind in ["APIService", "Secret", "ValidatingWebhookConfiguration"] {
        assert!(
            all(&rendered, kind).next().is_none(),
            "deploy/ must not hold a {kind}: it comes from certs/ or cert-manager"
        );
    }
    let rulesets = all(&rendered, "OperationRuleSet").count();
    assert!(rulesets >= 40, "only {rulesets} rulesets rendered");

    // The Deployment: its identity, certificate, probes, resources and hardening.
    let deployment = find_object(&rendered, "Deployment", "ifo-apiserver");
    assert_eq!(deployment["metadata"]["namespace"], NAMESPACE);
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        0
    );
    let pod = &deployment["spec"]["template"];
    let selector = deployment["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap();
    for (k, v) in selector {
        assert_eq!(&pod["metadata"]["labels"][k], v, "selector label {k}");
    }
    let spec = &pod["spec"];
    let account = spec["serviceAccountName"].as_str().unwrap();
    find_object(&rendered, "ServiceAccount", account);
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        spec["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let containers = spec["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    let image = c["image"].as_str().unwrap();
    assert!(
        image.rsplit('/').next().unwrap().contains(':'),
        "image {image} has no tag"
    );
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(
        c["securityContext"]["capabilities"]["drop"],
        serde_json::json!(["ALL"])
    );
    assert_eq!(c["resources"]["requests"]["cpu"], "50m");
    assert_eq!(c["resources"]["requests"]["memory"], "128Mi");
    assert_eq!(c["resources"]["limits"]["memory"], "256Mi");
    let port = c["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["containerPort"] == 8443)
        .expect("container port 8443");
    assert_eq!(env_var(c, "BIND_ADDRESS"), "0.0.0.0");
    // One leader: the pod's own name and namespace from the downward API.
    assert_eq!(env_var(c, "LEADER_ELECT"), "true");
    let env_from = |name: &str| {
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["valueFrom"]["fieldRef"]["fieldPath"].clone())
    };
    assert_eq!(
        env_from("POD_NAME"),
        Some(serde_json::json!("metadata.name"))
    );
    assert_eq!(
        env_from("POD_NAMESPACE"),
        Some(serde_json::json!("metadata.namespace"))
    );
    let spread = &spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        [0]["podAffinityTerm"];
    assert_eq!(spread["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(
        spread["labelSelector"]["matchLabels"],
        serde_json::json!(selector)
    );
    let budget = find_object(&rendered, "PodDisruptionBudget", "ifo-apiserver");
    assert_eq!(budget["spec"]["minAvailable"], 1);
    assert_eq!(
        budget["spec"]["selector"]["matchLabels"],
        serde_json::json!(selector)
    );
    // A listener of its own, beside the API's: the container port `name`, whose number the
    // server is given as `setting`.
    let own_port = |name: &str, setting: &str| {
        let own = c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("a container port named {name}"))
            .clone();
        assert_ne!(own["containerPort"], port["containerPort"]);
        assert_eq!(
            env_var(c, setting),
            own["containerPort"].to_string(),
            "{setting} is the {name} port"
        );
        own
    };
    // The probes go to their own listener (plain HTTP, `HEALTH_PORT`), never through the
    // https port's connection pools; and so do the admission doors (`ADMISSION_PORT`): what the
    // API's callers hold on its port takes nothing from kube-apiserver's reviews.
    let health = own_port("health", "HEALTH_PORT");
    own_port("admission", "ADMISSION_PORT");
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/livez")] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(get["scheme"], "HTTP", "{probe}");
        assert!(
            get["port"] == health["name"] || get["port"] == health["containerPort"],
            "{probe} port {}",
            get["port"]
        );
    }
    // TLS_CERT_FILE and TLS_PRIVATE_KEY_FILE are files of the mounted Secret.
    let mounts = c["volumeMounts"].as_array().unwrap();
    let volumes = spec["volumes"].as_array().unwrap();
    for (var, key) in [
        ("TLS_CERT_FILE", "tls.crt"),
        ("TLS_PRIVATE_KEY_FILE", "tls.key"),
    ] {
        let file = env_var(c, var);
        let mount = mounts
            .iter()
            .find(|m| {
                file.strip_prefix(m["mountPath"].as_str().unwrap())
                    .is_some_and(|rest| rest.trim_start_matches('/') == key)
            })
            .unwrap_or_else(|| panic!("{var}={file} is not {key} of a mounted volume"));
        assert!(
            mount.get("subPath").is_none(),
            "a subPath never sees renewals"
        );
        let volume = volumes.iter().find(|v| v["name"] == mount["name"]).unwrap();
        assert_eq!(volume["secret"]["secretName"], "ifo-apiserver-tls");
    }

    // The Service: 443 to the container's 8443, selecting the pods, and of them the leader
    // (whose label no template carries: the leader sets it).
    let service = find_object(&rendered, "Service", "ifo-apiserver");
    assert_eq!(service["metadata"]["namespace"], NAMESPACE);
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        if k == "ifo.kubevirt.io/leader" {
            assert_eq!(v, "true");
            assert!(pod["metadata"]["labels"].get(k).is_none());
        } else {
            assert_eq!(&pod["metadata"]["labels"][k], v, "service selector {k}");
        }
    }
    let sport = service["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["port"] == 443)
        .expect("service port 443");
    assert!(sport["targetPort"] == port["name"] || sport["targetPort"] == 8443);

    // RBAC of an extension apiserver, each bound to the Deployment's ServiceAccount.
    let bound_to = |binding: &Value| {
        binding["subjects"].as_array().unwrap().iter().any(|s| {
            s["kind"] == "ServiceAccount" && s["name"] == account && s["namespace"] == NAMESPACE
        })
    };
    let binding = |kind: &str, namespace: &str, role_kind: &str, role: &str| {
        let found = all(&rendered, kind).any(|b| {
            b["metadata"]["namespace"].as_str().unwrap_or_default() == namespace
                && b["roleRef"]["kind"] == role_kind
                && b["roleRef"]["name"] == role
                && bound_to(b)
        });
        assert!(found, "no {kind} of {role_kind} {role} for {account}");
    };
    binding(
        "ClusterRoleBinding",
        "",
        "ClusterRole",
        "system:auth-delegator",
    );
    binding(
        "RoleBinding",
        "kube-system",
        "Role",
        "extension-apiserver-authentication-reader",
    );
    binding(
        "RoleBinding",
        NAMESPACE,
        "Role",
        "ifo-apiserver:leader-election",
    );
    for role in ["ifo-apiserver", "ifo-apiserver:rule-targets"] {
        find_object(&rendered, "ClusterRole", role);
        binding("ClusterRoleBinding", "", "ClusterRole", role);
    }
}

/// The objects `overlay` renders, after checking that they are those of `deploy/` and of
/// `component` (a directory of the tree), no more, no fewer.
fn deploy_with(overlay: &str, component: &str) -> Vec<Value> {
    let base: BTreeSet<Id> = kustomize("deploy").iter().map(id).collect();
    let rendered = kustomize(overlay);
    let ids: BTreeSet<Id> = rendered.iter().map(id).collect();
    let own: BTreeSet<Id> = objects_in(&root().join(component)).iter().map(id).collect();
    assert_eq!(
        ids,
        base.union(&own).cloned().collect(),
        "deploy/ and {component}/"
    );
    rendered
}

#[test]
fn persist_overlay_renders_deploy_with_the_crd_its_rights_and_persistence_on() {
    // A user's overlay: deploy/ with the component.
    let dir = root().join("target/persist-overlay");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("kustomization.yaml"),
        "resources: [../../deploy]\ncomponents: [../../deploy/persist]\n",
    )
    .unwrap();
    let overlay = deploy_with("target/persist-overlay", "deploy/persist");
    let crd = find_object(
        &overlay,
        "CustomResourceDefinition",
        "inflightoperations.ifo.kubevirt.io",
    );
    assert!(
        crd["spec"]["names"].get("shortNames").is_none(),
        "ifos stays the live API"
    );
    let version = &crd["spec"]["versions"][0];
    assert!(
        version.get("subresources").is_none(),
        "no status subresource: one write per create"
    );
    let container = &find_object(&overlay, "Deployment", "ifo-apiserver")["spec"]["template"]["spec"]
        ["containers"][0];
    assert_eq!(env_var(container, "PERSIST"), "true");
    let role = find_object(&overlay, "ClusterRole", "ifo-apiserver:persist");
    assert_eq!(
        role["rules"][0]["resources"],
        serde_json::json!(["inflightoperations"])
    );
}

#[test]
fn cert_manager_overlay_renders_deploy_with_certificates_and_the_apiservice() {
    let base: BTreeSet<Id> = kustomize("deploy").iter().map(id).collect();
    let overlay = kustomize("apiservice/cert-manager");
    let ids: BTreeSet<Id> = overlay.iter().map(id).collect();
    assert!(ids.is_superset(&base), "the overlay must include deploy/");

    // The serving certificate: the Secret the Deployment mounts, for the Service's names.
    let serving = all(&overlay, "Certificate")
        .find(|c| c["spec"]["secretName"] == "ifo-apiserver-tls")
        .expect("a Certificate for the Secret ifo-apiserver-tls");
    assert_eq!(serving["metadata"]["namespace"], NAMESPACE);
    let dns: BTreeSet<&str> = serving["spec"]["dnsNames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for name in [
        "ifo-apiserver.ifo-system.svc",
        "ifo-apiserver.ifo-system.svc.cluster.local",
    ] {
        assert!(dns.contains(name), "dnsNames {dns:?} lack {name}");
    }
    // …issued by a CA Issuer whose CA certificate comes from a self-signed Issuer.
    let issuer = |reference: &Value| -> &Value {
        assert_eq!(reference["kind"], "Issuer");
        let issuer = find_object(&overlay, "Issuer", reference["name"].as_str().unwrap());
        assert_eq!(issuer["metadata"]["namespace"], NAMESPACE);
        issuer
    };
    let ca_issuer = issuer(&serving["spec"]["issuerRef"]);
    let ca_cert = all(&overlay, "Certificate")
        .find(|c| c["spec"]["secretName"] == ca_issuer["spec"]["ca"]["secretName"])
        .expect("the CA Issuer's Certificate");
    assert_eq!(ca_cert["spec"]["isCA"], true);
    let root_issuer = issuer(&ca_cert["spec"]["issuerRef"]);
    assert!(root_issuer["spec"]["selfSigned"].is_object());

    // The APIService: the CA injected from the serving Certificate, otherwise apiservice.yaml.
    let apiservice = find_object(&overlay, "APIService", APISERVICE);
    assert_eq!(
        apiservice["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        format!(
            "{NAMESPACE}/{}",
            serving["metadata"]["name"].as_str().unwrap()
        )
    );
    assert!(apiservice["spec"].get("caBundle").is_none());
    let text = std::fs::read_to_string(root().join("apiservice/apiservice.yaml")).unwrap();
    let mut plain: Value = serde_saphyr::from_str(&text).unwrap();
    plain["spec"].as_object_mut().unwrap().remove("caBundle");
    assert_eq!(apiservice["spec"], plain["spec"]);
    assert_eq!(apiservice["spec"]["groupPriorityMinimum"], 2000);
    assert_eq!(apiservice["spec"]["versionPriority"], 100);
    let target = &apiservice["spec"]["service"];
    let service = find_object(&overlay, "Service", target["name"].as_str().unwrap());
    assert_eq!(service["metadata"]["namespace"], target["namespace"]);
    assert!(
        service["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["port"] == target["port"])
    );

    // The webhook: the same CA injected, otherwise webhook.yaml; it calls that same Service.
    let webhook = find_object(&overlay, "ValidatingWebhookConfiguration", WEBHOOK);
    assert_eq!(
        webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        apiservice["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    );
    let text = std::fs::read_to_string(root().join("apiservice/webhook.yaml")).unwrap();
    let mut plain: Value = serde_saphyr::from_str(&text).unwrap();
    plain["webhooks"][0]["clientConfig"]
        .as_object_mut()
        .unwrap()
        .remove("caBundle");
    assert_eq!(webhook["webhooks"], plain["webhooks"]);
    assert_eq!(
        webhook["webhooks"][0]["clientConfig"]["service"]["name"],
        target["name"]
    );
    // At the Service's port for the doors' own listener, not the API's.
    let port = |name: &str| {
        service["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["targetPort"] == name)
            .unwrap_or_else(|| panic!("the Service has no port to {name}"))["port"]
            .clone()
    };
    assert_eq!(port("https"), target["port"]);
    assert_eq!(
        webhook["webhooks"][0]["clientConfig"]["service"]["port"],
        port("admission")
    );
    assert_ne!(port("admission"), port("https"));
}

/// The test cluster's webhook is `apiservice/webhook.yaml` as shipped but for its clientConfig:
/// what the tests see of the door is what an install gets.
#[test]
fn the_test_clusters_webhook_is_the_shipped_one_but_for_where_it_calls() {
    for (file, name) in [
        ("apiservice/webhook.yaml", WEBHOOK),
        ("apiservice/guard-webhook.yaml", ifo_dev::GUARD_WEBHOOK),
    ] {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        let shipped: Value = serde_saphyr::from_str(&text).unwrap();
        let registered = env().get_json(
            User::Admin,
            &["get", "validatingwebhookconfiguration", name],
        );
        assert_eq!(registered["metadata"]["name"], shipped["metadata"]["name"]);
        let (shipped, registered) = (
            shipped["webhooks"].as_array().unwrap(),
            registered["webhooks"].as_array().unwrap(),
        );
        assert_eq!(registered.len(), shipped.len(), "{file}: the webhooks");
        for (i, (shipped, registered)) in shipped.iter().zip(registered).enumerate() {
            // Every field the manifest sets (kube-apiserver adds defaults of its own).
            for (field, value) in shipped.as_object().unwrap() {
                if field != "clientConfig" {
                    assert_eq!(&registered[field], value, "{file}: webhooks[{i}].{field}");
                }
            }
            let path = shipped["clientConfig"]["service"]["path"].as_str().unwrap();
            let url = registered["clientConfig"]["url"].as_str().unwrap();
            assert!(
                url.starts_with("https://localhost:") && url.ends_with(path),
                "{url}"
            );
        }
    }
}

/// `apiservice/with-guard/`: `deploy/` with the guard's Component: the Service of its second
/// door over the standbys, its rights, and the guard on; the webhook's two doors, one through
/// the leader's Service and one through the standbys'.
#[test]
fn guard_overlay_renders_deploy_with_the_guard_on_behind_both_replicas() {
    let overlay = deploy_with("apiservice/with-guard", "deploy/guard");
    let container = &find_object(&overlay, "Deployment", "ifo-apiserver")["spec"]["template"]["spec"]
        ["containers"][0];
    assert_eq!(env_var(container, "EVICTION_GUARD"), "true");
    let standby = find_object(&overlay, "Service", "ifo-guard");
    assert_eq!(
        standby["spec"]["selector"],
        serde_json::json!({"app.kubernetes.io/name": "ifo-apiserver", "ifo.kubevirt.io/standby": "true"}),
        "the second door's Service selects the standbys"
    );
    let leader = find_object(&overlay, "Service", "ifo-apiserver");
    assert_eq!(leader["spec"]["selector"]["ifo.kubevirt.io/leader"], "true");
    let text = std::fs::read_to_string(root().join("apiservice/guard-webhook.yaml")).unwrap();
    let webhook: Value = serde_saphyr::from_str(&text).unwrap();
    let doors: Vec<(&str, &str)> = webhook["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            let service = &w["clientConfig"]["service"];
            (
                service["name"].as_str().unwrap(),
                service["path"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        doors,
        [
            ("ifo-apiserver", "/admission/evictions"),
            ("ifo-guard", "/admission/evictions/standby")
        ]
    );
    // Each door's Service port leads to the doors' own listener.
    for w in webhook["webhooks"].as_array().unwrap() {
        let called = &w["clientConfig"]["service"];
        let service = find_object(&overlay, "Service", called["name"].as_str().unwrap());
        let to = service["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["port"] == called["port"])
            .unwrap_or_else(|| panic!("{called}: no such port on its Service"));
        assert_eq!(to["targetPort"], "admission", "{called}");
    }
    let role = find_object(&overlay, "ClusterRole", "ifo-apiserver:maintenance-guard");
    assert_eq!(role["rules"][0]["resources"], serde_json::json!(["pods"]));
}

/// The test registration: APIService, Service and webhook, to compare before and after a dry
/// run.
fn registration() -> Vec<Value> {
    let e = env();
    vec![
        e.get_json(User::Admin, &["get", "apiservice", APISERVICE]),
        e.get_json(
            User::Admin,
            &["get", "service", "ifo-apiserver", "-n", NAMESPACE],
        ),
        e.get_json(
            User::Admin,
            &["get", "validatingwebhookconfiguration", WEBHOOK],
        ),
    ]
}

/// Runs kubectl as admin: whether it succeeded, its stdout and stderr.
fn kubectl_admin(args: &[&str]) -> (bool, String, String) {
    let out = env()
        .cluster
        .kubectl(User::Admin)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs kubectl as admin; (stdout, stderr), panicking on failure.
fn kubectl_dry_run(args: &[&str]) -> (String, String) {
    let (ok, stdout, stderr) = kubectl_admin(args);
    assert!(ok, "kubectl {} failed:\n{stderr}", args.join(" "));
    (stdout, stderr)
}

/// `kubectl <args>` as admin that must fail: its stderr.
fn kubectl_dry_run_fails(args: &[&str]) -> String {
    let (ok, _, stderr) = kubectl_admin(args);
    assert!(!ok, "kubectl {} succeeded", args.join(" "));
    stderr
}

fn assert_untouched(before: &[Value]) {
    let after = registration();
    // Not resourceVersion: the aggregator writes the APIService's status on its own.
    for (b, a) in before.iter().zip(&after) {
        let what = format!("{} {}", b["kind"], b["metadata"]["name"]);
        assert_eq!(b["spec"], a["spec"], "a dry run changed {what}");
        assert_eq!(b["webhooks"], a["webhooks"], "a dry run changed {what}");
        for field in ["labels", "annotations"] {
            assert_eq!(
                b["metadata"][field], a["metadata"][field],
                "a dry run changed the {field} of {what}"
            );
        }
    }
}

#[test]
fn deploy_passes_a_server_side_dry_run_and_changes_nothing() {
    let before = registration();
    let dir = root().join("deploy").display().to_string();
    let (stdout, stderr) = kubectl_dry_run(&["apply", "--dry-run=server", "-k", &dir]);
    let violations: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("PodSecurity"))
        .collect();
    assert!(
        violations.is_empty(),
        "the Deployment breaks the namespace's Pod Security level:\n{}",
        violations.join("\n")
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), kustomize("deploy").len(), "{stdout}");
    assert!(
        lines.iter().all(|l| l.ends_with("(server dry run)")),
        "{stdout}"
    );
    assert_untouched(&before);
}

#[test]
fn generated_certificates_pass_a_server_side_dry_run() {
    let before = registration();
    let out = std::env::temp_dir().join(format!("ifo-e2e-certs-{}", std::process::id()));
    Run::of(
        std::process::Command::new("bash")
            .arg(root().join("certs/generate.sh"))
            .arg(&out),
    )
    .assert_success("certs/generate.sh");
    let file = |name: &str| out.join(name).display().to_string();
    let (stdout, _) = kubectl_dry_run(&[
        "apply",
        "--dry-run=server",
        "-f",
        &file("secret.yaml"),
        "-f",
        &file("apiservice.yaml"),
        "-f",
        &file("webhook.yaml"),
    ]);
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.ends_with("(server dry run)"))
            .count(),
        3,
        "{stdout}"
    );
    assert_untouched(&before);
    let _ = std::fs::remove_dir_all(&out);
}

/// `deploy/monitoring/` renders to its own objects (nothing of deploy/), and its RBAC and the
/// scraper's account and token pass a server-side dry run (the ServiceMonitor and PrometheusRule need the Prometheus Operator's
/// CRDs, which this cluster does not have; `tests/monitoring.rs` checks them).
#[test]
fn monitoring_renders_on_its_own_and_its_rbac_passes_a_dry_run() {
    let objects = kustomize("deploy/monitoring");
    let kinds: BTreeSet<String> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "PrometheusRule",
            "Secret",
            "Service",
            "ServiceAccount",
            "ServiceMonitor"
        ]
        .map(String::from)
        .into(),
    );
    let base: BTreeSet<Id> = kustomize("deploy").iter().map(id).collect();
    assert!(objects.iter().all(|o| !base.contains(&id(o))));
    let rbac = root()
        .join("deploy/monitoring/rbac.yaml")
        .display()
        .to_string();
    kubectl_dry_run(&["apply", "--dry-run=server", "-f", &rbac]);
    let service = root()
        .join("deploy/monitoring/service.yaml")
        .display()
        .to_string();
    kubectl_dry_run(&["apply", "--dry-run=server", "-f", &service]);
    let scraper = root()
        .join("deploy/monitoring/scraper.yaml")
        .display()
        .to_string();
    kubectl_dry_run(&["apply", "--dry-run=server", "-f", &scraper]);
}

/// `deploy/network-policy/` admits the server's port on the server's pods only, from
/// kube-apiserver's addresses (named by the admin: as shipped it is refused, so it cannot be
/// applied with a guess) and from Prometheus, and passes a server-side dry run once adapted.
#[test]
fn network_policy_selects_the_servers_pods_and_port_and_passes_a_dry_run() {
    let objects = kustomize("deploy/network-policy");
    assert_eq!(objects.len(), 1);
    let policy = find_object(&objects, "NetworkPolicy", "ifo-apiserver");
    assert_eq!(policy["metadata"]["namespace"], NAMESPACE);
    let deploy = kustomize("deploy");
    let pod = &find_object(&deploy, "Deployment", "ifo-apiserver")["spec"]["template"];
    for (k, v) in policy["spec"]["podSelector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(&pod["metadata"]["labels"][k], v, "pod label {k}");
    }
    let port_names: BTreeSet<&str> = pod["spec"]["containers"][0]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    let rules = policy["spec"]["ingress"].as_array().unwrap();
    assert_eq!(rules.len(), 2);
    for rule in rules {
        for port in rule["ports"].as_array().unwrap() {
            assert!(
                port_names.contains(port["port"].as_str().unwrap()),
                "{port} is not a port of the pod"
            );
        }
    }
    assert_eq!(
        policy["spec"]["policyTypes"],
        serde_json::json!(["Ingress"])
    );
    // No pod CIDR guessed: the one peer of the first rule is kube-apiserver's, to be named.
    assert_eq!(
        rules[0]["from"],
        serde_json::json!([{"ipBlock": {"cidr": "KUBE-APISERVER-CIDR"}}])
    );
    let dir = root().join("deploy/network-policy").display().to_string();
    let unadapted = kubectl_dry_run_fails(&["apply", "--dry-run=server", "-k", &dir]);
    assert!(unadapted.contains("KUBE-APISERVER-CIDR"), "{unadapted}");
    // Adapted as its comments say, in an overlay.
    // (kustomize takes a relative path to a base: the overlay is made two levels below the root.)
    let overlay = root()
        .join("target")
        .join(format!("netpol-overlay-{}", std::process::id()));
    std::fs::create_dir_all(&overlay).unwrap();
    std::fs::write(
        overlay.join("kustomization.yaml"),
        "resources: [../../deploy/network-policy]\npatches:\n- target: {kind: NetworkPolicy, name: ifo-apiserver}\n  patch: |-\n    - op: replace\n      path: /spec/ingress/0/from/0/ipBlock/cidr\n      value: 192.168.10.0/24\n",
    )
    .unwrap();
    let (stdout, _) = kubectl_dry_run(&[
        "apply",
        "--dry-run=server",
        "-k",
        &overlay.display().to_string(),
    ]);
    assert!(stdout.contains("(server dry run)"), "{stdout}");
    let _ = std::fs::remove_dir_all(&overlay);
}
