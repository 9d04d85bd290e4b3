//! The Helm chart (`deploy/chart/`) with the pinned `helm` (`tests/cluster/build-helm.sh`):
//!
//! - `helm lint --strict` finds nothing, and a value the chart does not know (a typo in a key, a
//!   setting the server does not have, a rule family the library does not have) fails the
//!   install before anything is made (`values.schema.json`).
//! - One source of truth: what the chart makes is what the kustomize install makes
//!   (`deploy/`, `apiservice/with-guard/`, `deploy/monitoring/`, `deploy/persist/`), object for
//!   object, but for Helm's labels, the caBundles it fills in and the Namespace Helm makes; the
//!   settings it accepts are the server's flags.
//! - The certificate it makes is for the Services, signed by the CA the registrations trust.
//! - Against a real kube-apiserver: every option's objects are accepted (`--dry-run=server`);
//!   an install, an upgrade with a changed setting (the CA and the certificate kept), an
//!   upgrade when the certificate is near its end (renewed under the same CA), and an uninstall
//!   that removes the registrations and keeps the CRD and the CA. A real node's install,
//!   upgrade under load and uninstall are in `tests/node/`.

use ifo_dev::helm;
use ifo_dev::{Cluster, User};
use ifo_test_support::find_object;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The chart's directory, as a helm argument.
fn chart() -> String {
    helm::chart().display().to_string()
}

/// The objects of a YAML stream, empty documents left out.
fn objects(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .unwrap_or_else(|e| panic!("{e}: {text}"))
        .into_iter()
        .filter(|d| d.is_object())
        .collect()
}

/// `helm template` of the chart into ifo-system with `args` (`--set …`), as objects.
fn template(args: &[&str]) -> Vec<Value> {
    objects(&rendered(&chart(), args))
}

/// `helm template` of `chart` (a directory or a packaged archive) into ifo-system with `args`,
/// as the text it prints.
fn rendered(chart: &str, args: &[&str]) -> String {
    let mut all = vec![
        "template",
        "ifo",
        chart,
        "-n",
        "ifo-system",
        "--include-crds",
    ];
    all.extend_from_slice(args);
    helm::offline(&all).unwrap_or_else(|e| panic!("helm template {args:?}: {e:#}"))
}

/// `helm template` with `--set set` fails on the values' schema, saying `said`.
fn refused_by_the_schema(set: &str, said: &str) {
    let Err(err) = helm::offline(&["template", "ifo", &chart(), "--set", set]) else {
        panic!("--set {set} was accepted");
    };
    let err = format!("{err:#}");
    assert!(
        err.contains("values don't meet the specifications of the schema") && err.contains(said),
        "--set {set}: {err}"
    );
}

fn kubectl() -> PathBuf {
    ifo_dev::Binaries::ensure().unwrap().kubectl
}

/// `kubectl kustomize DIR` with the files after it, as objects.
fn kustomize(dir: &str, files: &[&str]) -> Vec<Value> {
    let out = Command::new(kubectl())
        .args(["kustomize", &root().join(dir).display().to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "kubectl kustomize {dir}: {out:?}");
    let mut all = objects(&String::from_utf8(out.stdout).unwrap());
    for file in files {
        all.extend(objects(
            &std::fs::read_to_string(root().join(file)).unwrap(),
        ));
    }
    all
}

/// Who an object is.
fn key(o: &Value) -> String {
    format!(
        "{}/{}/{}",
        o["kind"].as_str().unwrap_or_default(),
        o["metadata"]["namespace"].as_str().unwrap_or_default(),
        o["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// The labels and annotations Helm's install adds to objects of deploy/.
const HELM_LABELS: &[&str] = &[
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
    "helm.sh/chart",
];

/// The chart's object as the kustomize install writes it: without what Helm adds where the
/// kustomize object does not have it, and without caBundles (a placeholder there).
fn as_kustomize_writes(mut chart: Value, kustomize: &Value) -> Value {
    for (field, added) in [
        ("labels", HELM_LABELS),
        ("annotations", &["helm.sh/resource-policy"][..]),
    ] {
        let theirs = &kustomize["metadata"][field];
        let Some(metadata) = chart.get_mut("metadata").and_then(Value::as_object_mut) else {
            continue;
        };
        if let Some(map) = metadata.get_mut(field).and_then(Value::as_object_mut) {
            map.retain(|k, v| !added.contains(&k.as_str()) || theirs.get(k) == Some(v));
            if map.is_empty() && theirs.is_null() {
                metadata.remove(field);
            }
        }
    }
    chart
}

fn without_ca_bundles(mut o: Value) -> Value {
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("caBundle");
    }
    if let Some(hooks) = o.get_mut("webhooks").and_then(Value::as_array_mut) {
        for hook in hooks {
            if let Some(config) = hook.get_mut("clientConfig").and_then(Value::as_object_mut) {
                config.remove("caBundle");
            }
        }
    }
    o
}

/// Every object of `expected` (but a Namespace) is in `rendered`, the same but for what Helm
/// adds; `rendered` has nothing else but the chart's Secrets.
fn same_objects(what: &str, rendered: Vec<Value>, expected: Vec<Value>) {
    let mut chart: BTreeMap<String, Value> = rendered
        .into_iter()
        .map(|o| (key(&o), without_ca_bundles(o)))
        .collect();
    let mut missing = Vec::new();
    for o in expected {
        if o["kind"] == "Namespace" {
            continue;
        }
        let k = key(&o);
        let o = without_ca_bundles(o);
        match chart.remove(&k) {
            Some(c) => {
                let c = as_kustomize_writes(c, &o);
                assert_eq!(
                    c,
                    o,
                    "{what}: the chart's {k} is not the kustomize install's:\n--- chart\n{}\n--- kustomize\n{}",
                    serde_json::to_string_pretty(&c).unwrap(),
                    serde_json::to_string_pretty(&o).unwrap()
                );
            }
            None => missing.push(k),
        }
    }
    assert!(
        missing.is_empty(),
        "{what}: the chart does not make {missing:?}"
    );
    chart.retain(|k, _| !k.starts_with("Secret/ifo-system/ifo-apiserver-"));
    assert!(
        chart.is_empty(),
        "{what}: the chart makes what the kustomize install does not: {:?}",
        chart.keys().collect::<Vec<_>>()
    );
}

#[test]
fn helm_lint_finds_nothing() {
    let chart = chart();
    let out = helm::offline(&["lint", "--strict", &chart]).unwrap();
    assert!(out.contains("0 chart(s) failed"), "{out}");
    let out = helm::offline(&[
        "lint",
        "--strict",
        &chart,
        "--set",
        "guard.enabled=true,persistence.enabled=true,monitoring.serviceMonitor.enabled=true,\
         monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true,\
         networkPolicy.enabled=true,networkPolicy.apiServerCIDRs[0]=192.0.2.10/32",
    ])
    .unwrap();
    assert!(out.contains("0 chart(s) failed"), "{out}");
}

#[test]
fn a_value_the_chart_does_not_know_fails_before_anything_is_made() {
    let chart = chart();
    for (set, said) in [
        ("guard.enabeld=true", "'enabeld' not allowed"),
        (
            "settings.DEBOUNCE_TRESHOLD=1m",
            "'DEBOUNCE_TRESHOLD' not allowed",
        ),
        ("settings.PERSIST=true", "'PERSIST' not allowed"),
        ("rules.families[0]=kubevrit", "/rules/families/0"),
        ("guard.whenUnknown=maybe", "/guard/whenUnknown"),
        ("replicas=0", "/replicas"),
        // A key of a Kubernetes type misspelt, and values of the wrong kind.
        ("resources.limit.memory=1Gi", "'limit' not allowed"),
        ("resources.limits.memory=lots", "/resources/limits/memory"),
        ("tolerations[0].operatr=Exists", "'operatr' not allowed"),
        ("tolerations[0].effect=NoSchedul", "/tolerations/0/effect"),
        (
            "settings.DEBOUNCE_THRESHOLD=banana",
            "/settings/DEBOUNCE_THRESHOLD",
        ),
        ("settings.MAX_WATCHES=-1", "/settings/MAX_WATCHES"),
        ("settings.STREAMING_LISTS=yes", "/settings/STREAMING_LISTS"),
        (
            "podDisruptionBudget.unhealthyPodEvictionPolicy=Never",
            "/podDisruptionBudget/unhealthyPodEvictionPolicy",
        ),
    ] {
        refused_by_the_schema(set, said);
    }
    // A policy without kube-apiserver's addresses would shut it out: refused, saying so; and
    // one that is not an address range would be refused by kube-apiserver at install.
    for (set, said) in [
        ("networkPolicy.enabled=true", "networkPolicy.apiServerCIDRs"),
        (
            "networkPolicy.enabled=true,networkPolicy.apiServerCIDRs[0]=not-a-cidr",
            "/networkPolicy/apiServerCIDRs/0",
        ),
    ] {
        let err = helm::offline(&["template", "ifo", &chart, "--set", set])
            .expect_err("a NetworkPolicy that would shut kube-apiserver out was made");
        assert!(format!("{err:#}").contains(said), "{set}: {err:#}");
    }
    for cidr in ["10.0.0.0/8", "192.168.1.10/32", "fd00::/8"] {
        helm::offline(&[
            "template",
            "ifo",
            &chart,
            "--set",
            &format!("networkPolicy.enabled=true,networkPolicy.apiServerCIDRs[0]={cidr}"),
        ])
        .unwrap_or_else(|e| panic!("{cidr} refused: {e:#}"));
    }
}

/// Each setting's type is the server's: a value the server would refuse at start (and crash
/// loop on) is refused by the schema at install, and every default the server documents is
/// accepted, written as a values file writes it.
#[test]
fn the_schema_refuses_a_setting_the_server_would_refuse() {
    use clap::Args;
    let serve = ifo::config::ServeArgs::augment_args(clap::Command::new("serve"));
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(helm::chart().join("values.schema.json")).unwrap(),
    )
    .unwrap();
    let settings = schema["properties"]["settings"]["properties"]
        .as_object()
        .unwrap();
    let server_takes = |env: &str, value: &str| {
        let arg = serve
            .get_arguments()
            .find(|a| a.get_env().is_some_and(|e| e == env))
            .unwrap_or_else(|| panic!("no flag reads {env}"));
        let flag = format!("--{}", arg.get_long().unwrap());
        // With the flags the server cannot start without, as the chart sets them.
        let args = [
            "serve",
            "--tls-cert-file",
            "/tls/tls.crt",
            "--tls-private-key-file",
            "/tls/tls.key",
            flag.as_str(),
            value,
        ];
        match serve.clone().try_get_matches_from(args) {
            Ok(_) => true,
            Err(e) => {
                use clap::error::ErrorKind;
                assert!(
                    matches!(
                        e.kind(),
                        ErrorKind::ValueValidation | ErrorKind::InvalidValue
                    ),
                    "{flag} {value}: {e}"
                );
                false
            }
        }
    };
    let chart = chart();
    let mut defaults = Vec::new();
    std::thread::scope(|scope| {
        let mut checks = Vec::new();
        for env in settings.keys() {
            let arg = serve
                .get_arguments()
                .find(|a| a.get_env().is_some_and(|e| e == env.as_str()))
                .unwrap();
            if let Some(default) = arg.get_default_values().first() {
                defaults.push(format!("settings.{env}={}", default.to_string_lossy()));
            }
            let refused_by_server = !server_takes(env, "banana");
            let chart = chart.as_str();
            checks.push(scope.spawn(move || {
                let set = format!("settings.{env}=banana");
                let refused_by_schema =
                    helm::offline(&["template", "ifo", chart, "--set-string", &set]).is_err();
                (env, refused_by_server, refused_by_schema)
            }));
        }
        for check in checks {
            let (env, server, schema) = check.join().unwrap();
            assert_eq!(
                schema, server,
                "{env}=banana: refused by the server {server}, by the schema {schema}"
            );
        }
    });
    // Every default at once, typed as --set (and a values file) types them.
    helm::offline(&["template", "ifo", &chart, "--set", &defaults.join(",")])
        .unwrap_or_else(|e| panic!("the server's defaults refused: {e:#}"));
}

/// The values files of `ci/` (as chart-testing's `ct lint` runs them): each lints strictly and
/// renders; with one replica there is no PodDisruptionBudget.
#[test]
fn every_ci_values_file_lints_and_renders() {
    let chart = chart();
    let mut files: Vec<PathBuf> = std::fs::read_dir(helm::chart().join("ci"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    for file in files {
        let values = file.display().to_string();
        let out = helm::offline(&["lint", "--strict", &chart, "-f", &values])
            .unwrap_or_else(|e| panic!("{values}: {e:#}"));
        assert!(out.contains("0 chart(s) failed"), "{values}: {out}");
        let rendered = template(&["-f", &values]);
        assert!(
            rendered.iter().any(|o| o["kind"] == "Deployment"),
            "{values}: no Deployment"
        );
        let budget = rendered.iter().any(|o| o["kind"] == "PodDisruptionBudget");
        assert_eq!(
            budget,
            !values.ends_with("single-replica-values.yaml"),
            "{values}: a PodDisruptionBudget {}",
            if budget { "made" } else { "missing" }
        );
    }
}

/// The PodDisruptionBudget keeps one replica of two or more through drains, and never exists
/// for one replica (it would hold the drain of its node for good); a replica that is not Ready
/// never holds a drain.
#[test]
fn the_disruption_budget_never_holds_a_drain_of_a_lone_replica() {
    let pdb = |args: &[&str]| {
        template(args)
            .into_iter()
            .find(|o| o["kind"] == "PodDisruptionBudget")
    };
    assert_eq!(
        pdb(&["--set", "replicas=1"]),
        None,
        "a budget for one replica"
    );
    for replicas in ["2", "3", "5"] {
        let made = pdb(&["--set", &format!("replicas={replicas}")])
            .unwrap_or_else(|| panic!("no budget for {replicas} replicas"));
        assert_eq!(made["spec"]["minAvailable"], 1, "{made:#}");
        assert_eq!(made["spec"]["unhealthyPodEvictionPolicy"], "AlwaysAllow");
    }
    let made = pdb(&["--set", "replicas=3,podDisruptionBudget.maxUnavailable=1"]).unwrap();
    assert_eq!(made["spec"]["maxUnavailable"], 1, "{made:#}");
    assert!(made["spec"].get("minAvailable").is_none(), "{made:#}");
    assert_eq!(pdb(&["--set", "podDisruptionBudget.enabled=false"]), None);
}

/// A CA's PEM, made for a test (its key is not needed: the chart renders only what trusts it).
fn a_ca_pem() -> String {
    String::from_utf8(ifo_dev::KeyPair::new_rsa_ca("test-ca").unwrap().cert_pem).unwrap()
}

/// GitOps tools (Argo CD, Flux) render the chart with `helm template` and apply what it gives:
/// in the certificate modes they are told to use, two renders are the same byte for byte, so an
/// Application is in sync and a self-healing sync rotates nothing.
#[test]
fn renders_are_the_same_every_time_with_server_cert_manager_or_own_certificates() {
    let chart = chart();
    let ca = tempdir("stable-renders").join("ca.pem");
    std::fs::write(&ca, a_ca_pem()).unwrap();
    let ca_file = format!("certificates.secret.caBundle={}", ca.display());
    let modes: [&[&str]; 3] = [
        &["--set", "certificates.source=server"],
        &["--set", "certificates.source=cert-manager"],
        &[
            "--set",
            "certificates.source=secret,certificates.secret.name=my-tls",
            "--set-file",
            &ca_file,
        ],
    ];
    for mode in modes {
        let render = || {
            let on = [
                "--set",
                "guard.enabled=true,monitoring.serviceMonitor.enabled=true",
            ];
            rendered(&chart, &[&on[..], mode].concat())
        };
        let (first, second) = (render(), render());
        assert!(first == second, "{mode:?}: two renders differ");
    }
}

/// With a Secret of one's own, the server mounts it, kube-apiserver trusts the CA given (the
/// APIService and every webhook), Prometheus verifies with it, and the chart makes no
/// certificate; without the CA, or the name, the schema refuses the values.
#[test]
fn a_secret_of_ones_own_is_mounted_and_its_ca_trusted() {
    let pem = a_ca_pem();
    let ca = tempdir("own-secret").join("ca.pem");
    std::fs::write(&ca, &pem).unwrap();
    let objects = template(&[
        "--set",
        "certificates.source=secret,certificates.secret.name=my-tls,guard.enabled=true,monitoring.serviceMonitor.enabled=true",
        "--set-file",
        &format!("certificates.secret.caBundle={}", ca.display()),
    ]);
    assert!(
        !objects.iter().any(|o| o["kind"] == "Secret"
            && o["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("ifo-apiserver")),
        "the chart made a certificate"
    );
    let deployment = find_object(&objects, "Deployment", "ifo-apiserver");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"],
        "my-tls"
    );
    let trusted = String::from_utf8(decode(
        &find_object(&objects, "APIService", "v1alpha1.live.ifo.kubevirt.io")["spec"]["caBundle"],
    ))
    .unwrap();
    assert_eq!(trusted.trim(), pem.trim());
    for name in ["ifo-ruleset-validation", "ifo-maintenance-guard"] {
        let configuration = find_object(&objects, "ValidatingWebhookConfiguration", name);
        for webhook in configuration["webhooks"].as_array().unwrap() {
            assert_eq!(
                String::from_utf8(decode(&webhook["clientConfig"]["caBundle"]))
                    .unwrap()
                    .trim(),
                pem.trim(),
                "{name}"
            );
        }
    }
    let monitor = find_object(&objects, "ServiceMonitor", "ifo-apiserver");
    assert_eq!(
        monitor["spec"]["endpoints"][0]["tlsConfig"]["ca"]["secret"]["name"],
        "my-tls"
    );

    for (set, said) in [
        ("certificates.source=secret", "/certificates"),
        (
            "certificates.source=secret,certificates.secret.name=my-tls",
            "caBundle",
        ),
        (
            "certificates.source=secret,certificates.secret.name=my-tls,certificates.secret.caBundle=not-a-pem",
            "/certificates/secret/caBundle",
        ),
    ] {
        refused_by_the_schema(set, said);
    }
}

/// With the server's own certificates, no manifest holds a key or a CA: the server is told
/// where to keep them, for which names, and where kube-apiserver is to trust its CA, and may
/// write that Secret and those registrations (in the release's namespace), and mounts no
/// Secret; the registrations carry no caBundle for an upgrade to reset.
#[test]
fn with_the_servers_own_certificates_no_manifest_holds_a_key() {
    let objects = template(&[
        "--set",
        "certificates.source=server,guard.enabled=true",
        "-n",
        "elsewhere",
    ]);
    for o in &objects {
        let text = o.to_string();
        assert!(
            !text.contains("PRIVATE KEY") && !text.contains("caBundle"),
            "{} {} holds a key or a caBundle",
            o["kind"],
            o["metadata"]["name"]
        );
        assert!(o["kind"] != "Secret", "the chart made a Secret");
    }
    let deployment = find_object(&objects, "Deployment", "ifo-apiserver");
    let pod = &deployment["spec"]["template"]["spec"];
    let env: BTreeMap<&str, &str> = pod["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| Some((e["name"].as_str()?, e["value"].as_str()?)))
        .collect();
    assert_eq!(env["SERVING_CERTIFICATE_SECRET"], "ifo-apiserver-tls");
    // The CA the chart's own certificates kept, taken over by an upgrade from them.
    assert_eq!(env["SERVING_CERTIFICATE_CA_FROM"], "ifo-apiserver-ca");
    assert_eq!(
        env["SERVING_CERTIFICATE_NAMES"],
        "ifo-apiserver.elsewhere.svc,ifo-apiserver.elsewhere.svc.cluster.local,\
         ifo-guard.elsewhere.svc,ifo-guard.elsewhere.svc.cluster.local"
    );
    assert_eq!(
        env["CA_BUNDLE_TARGETS"],
        "apiservice/v1alpha1.live.ifo.kubevirt.io,\
         validatingwebhookconfiguration/ifo-ruleset-validation,\
         validatingwebhookconfiguration/ifo-maintenance-guard"
    );
    assert_eq!(pod["volumes"][0]["emptyDir"]["medium"], "Memory");
    let role = find_object(&objects, "Role", "ifo-apiserver:serving-certificate");
    assert_eq!(role["metadata"]["namespace"], "elsewhere");
    let binding = find_object(&objects, "ClusterRoleBinding", "ifo-apiserver:ca-bundles");
    assert_eq!(binding["subjects"][0]["namespace"], "elsewhere");
    // Without the guard, its registration is none of the server's business.
    let objects = template(&["--set", "certificates.source=server"]);
    let deployment = find_object(&objects, "Deployment", "ifo-apiserver");
    let targets = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "CA_BUNDLE_TARGETS")
        .unwrap()["value"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!targets.contains("ifo-maintenance-guard"), "{targets}");
}

/// The OperationRuleSet CRD's revision is raised with every change of its spec: the chart
/// compares revisions to refuse an upgrade over an older CRD, so a change without a new
/// revision would go unseen.
#[test]
fn the_crds_revision_moves_with_its_spec() {
    use sha2::Digest as _;
    let crd: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(root().join("deploy/crds/operationrulesets.yaml")).unwrap(),
    )
    .unwrap();
    let spec = serde_json::to_string(&crd["spec"]).unwrap();
    let sha = format!("{:x}", sha2::Sha256::digest(spec.as_bytes()));
    let annotations = &crd["metadata"]["annotations"];
    assert_eq!(
        annotations["ifo.kubevirt.io/spec-sha256"], sha,
        "deploy/crds/operationrulesets.yaml changed: raise ifo.kubevirt.io/revision (now {}) and \
         set ifo.kubevirt.io/spec-sha256 to {sha}",
        annotations["ifo.kubevirt.io/revision"]
    );
}

/// The Kubernetes types the values take as they are (`affinity`, `podSecurityContext`,
/// `securityContext`, `topologySpreadConstraints`), by their schemas' names.
const KUBERNETES_TYPES: &[&str] = &[
    "io.k8s.api.core.v1.Affinity",
    "io.k8s.api.core.v1.PodSecurityContext",
    "io.k8s.api.core.v1.SecurityContext",
    "io.k8s.api.core.v1.TopologySpreadConstraint",
];

/// `schema`, an OpenAPI v3 schema of kube-apiserver's, as a JSON Schema that refuses a field
/// Kubernetes does not have (`additionalProperties: false` where the fields are listed), with
/// its references (recorded in `refs`) into the values schema's `definitions`.
fn as_values_schema(schema: &Value, refs: &mut Vec<String>) -> Value {
    use serde_json::json;
    let reference = schema["$ref"]
        .as_str()
        .or_else(|| schema["allOf"][0]["$ref"].as_str());
    if let Some(name) = reference.and_then(|r| r.strip_prefix("#/components/schemas/")) {
        if !refs.iter().any(|r| r == name) {
            refs.push(name.to_owned());
        }
        return json!({"$ref": format!("#/definitions/{name}")});
    }
    if schema["x-kubernetes-int-or-string"] == true {
        return json!({"type": ["integer", "string"]});
    }
    if let Some(properties) = schema["properties"].as_object() {
        let properties: serde_json::Map<String, Value> = properties
            .iter()
            .map(|(name, s)| (name.clone(), as_values_schema(s, refs)))
            .collect();
        return json!({"type": "object", "additionalProperties": false, "properties": properties});
    }
    if schema["additionalProperties"].is_object() {
        let values = as_values_schema(&schema["additionalProperties"], refs);
        return json!({"type": "object", "additionalProperties": values});
    }
    if schema["items"].is_object() {
        return json!({"type": "array", "items": as_values_schema(&schema["items"], refs)});
    }
    match schema["type"].as_str() {
        Some(t) => json!({"type": t}),
        None => json!({}),
    }
}

/// The values schema's definitions of [`KUBERNETES_TYPES`] and all they refer to, from the
/// pinned OpenAPI document of Kubernetes' core/v1 (tests/schemas).
fn kubernetes_definitions() -> serde_json::Map<String, Value> {
    let document: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/schemas/openapi/api__v1_openapi.json"))
            .unwrap(),
    )
    .unwrap();
    let schemas = &document["components"]["schemas"];
    let mut refs: Vec<String> = KUBERNETES_TYPES.iter().map(|t| (*t).to_owned()).collect();
    let mut definitions = serde_json::Map::new();
    let mut next = 0;
    while next < refs.len() {
        let name = refs[next].clone();
        next += 1;
        let schema = schemas.get(&name).unwrap_or_else(|| panic!("no {name}"));
        let converted = as_values_schema(schema, &mut refs);
        definitions.insert(name, converted);
    }
    definitions
}

/// The pod's Kubernetes-typed values are checked as Kubernetes checks them: the values schema's
/// definitions of them are those of Kubernetes' own OpenAPI schemas (the pinned 1.36.3
/// document), so a misspelt key fails the install instead of being dropped by kube-apiserver.
/// `IFO_UPDATE_DOCS=1` writes them.
#[test]
fn the_pods_kubernetes_values_are_checked_by_kubernetes_own_schemas() {
    let path = helm::chart().join("values.schema.json");
    let mut schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let wanted = kubernetes_definitions();
    if std::env::var_os("IFO_UPDATE_DOCS").is_some() {
        let definitions = schema["definitions"].as_object_mut().unwrap();
        definitions.retain(|name, _| !name.starts_with("io.k8s."));
        definitions.extend(wanted.clone());
        std::fs::write(&path, serde_json::to_string_pretty(&schema).unwrap() + "\n").unwrap();
    }
    for (name, definition) in &wanted {
        assert_eq!(
            &schema["definitions"][name], definition,
            "values.schema.json's {name} is not Kubernetes' (IFO_UPDATE_DOCS=1 writes it)"
        );
    }
    for (set, said) in [
        ("affinity.nodeAfinity.x=1", "'nodeAfinity' not allowed"),
        ("podSecurityContext.runAsUsr=1", "'runAsUsr' not allowed"),
        (
            "securityContext.readOnlyRootFileSystem=true",
            "'readOnlyRootFileSystem' not allowed",
        ),
        (
            "topologySpreadConstraints[0].maxSkw=1",
            "'maxSkw' not allowed",
        ),
        ("podLabels.app=1", "/podLabels/app"),
    ] {
        refused_by_the_schema(set, said);
    }
}

/// The pod-level values reach the pods: labels and annotations beside the chart's own, and
/// affinity, security contexts and spread constraints in place of `deploy/`'s.
#[test]
fn the_pod_level_values_reach_the_pods() {
    let objects = template(&[
        "--set",
        "podLabels.team=infra,podAnnotations.example\\.com/owner=ops,\
         affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=role,\
         affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists,\
         podSecurityContext.runAsUser=1000,securityContext.privileged=false,\
         topologySpreadConstraints[0].maxSkew=1,topologySpreadConstraints[0].topologyKey=zone,\
         topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway,clusterDomain=example.internal",
    ]);
    let deployment = find_object(&objects, "Deployment", "ifo-apiserver");
    let pod_template = &deployment["spec"]["template"];
    assert_eq!(pod_template["metadata"]["labels"]["team"], "infra");
    assert_eq!(
        pod_template["metadata"]["labels"]["app.kubernetes.io/name"],
        "ifo-apiserver"
    );
    assert_eq!(
        pod_template["metadata"]["annotations"]["example.com/owner"],
        "ops"
    );
    let pod = &pod_template["spec"];
    assert_eq!(
        pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["key"],
        "role"
    );
    assert!(
        pod["affinity"].get("podAntiAffinity").is_none(),
        "{}",
        pod["affinity"]
    );
    assert_eq!(
        pod["securityContext"],
        serde_json::json!({"runAsUser": 1000})
    );
    assert_eq!(
        pod["containers"][0]["securityContext"],
        serde_json::json!({"privileged": false})
    );
    assert_eq!(pod["topologySpreadConstraints"][0]["topologyKey"], "zone");
    // The selector is the chart's alone: a pod label never changes what the Services select.
    assert_eq!(
        deployment["spec"]["selector"],
        serde_json::json!({"matchLabels": {"app.kubernetes.io/name": "ifo-apiserver"}})
    );
    // The certificates name the cluster's own domain.
    let objects = template(&[
        "--set",
        "certificates.source=server,clusterDomain=example.internal",
    ]);
    let env = &find_object(&objects, "Deployment", "ifo-apiserver")["spec"]["template"]["spec"]["containers"]
        [0]["env"];
    let names = env
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "SERVING_CERTIFICATE_NAMES")
        .unwrap()["value"]
        .as_str()
        .unwrap();
    assert!(
        names.contains("ifo-apiserver.ifo-system.svc.example.internal")
            && !names.contains("cluster.local"),
        "{names}"
    );
    // Without them, deploy/'s own: the spread over nodes and the restricted security contexts.
    let objects = template(&[]);
    let pod = &find_object(&objects, "Deployment", "ifo-apiserver")["spec"]["template"]["spec"];
    assert!(pod["affinity"]["podAntiAffinity"].is_object());
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"],
        true
    );
}

/// What users install is the packaged chart (`helm package`, its linked files copied in): it
/// renders what the tree renders, object for object.
#[test]
fn the_packaged_chart_renders_what_the_tree_renders() {
    let archive = helm::package(&tempdir("package")).unwrap();
    let render = |chart: &str| {
        objects(&rendered(
            chart,
            &[
                "--set",
                "certificates.source=server,guard.enabled=true,persistence.enabled=true,\
                 monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true,\
                 monitoring.dashboard.enabled=true",
            ],
        ))
    };
    let packaged = render(&archive.display().to_string());
    assert!(packaged.len() > 60, "{} objects", packaged.len());
    assert_eq!(packaged, render(&chart()));
}

/// The chart renders for the oldest minor upstream supports (1.35) and every later one, and
/// refuses older ones with Helm's message (its `kubeVersion`); that oldest minor is the one the
/// smoke run on the real node runs (`tests/cluster/kubernetes-oldest/go.mod`).
#[test]
fn the_chart_refuses_kubernetes_older_than_the_oldest_supported_minor() {
    let oldest = ifo_dev::oldest_release().unwrap();
    let oldest = oldest.as_str();
    let minor = oldest.split('.').take(2).collect::<Vec<_>>().join(".");
    let chart_yaml = std::fs::read_to_string(root().join("deploy/chart/Chart.yaml")).unwrap();
    assert!(
        chart_yaml.contains(&format!("kubeVersion: \">= {}.0-0\"", &minor[1..])),
        "the chart's kubeVersion is not the smoke run's minor, {minor}"
    );
    // What `helm template` assumes without a cluster (Helm's release build: its client-go's).
    assert!(!template(&[]).is_empty());
    for version in [oldest, "v1.35.0", "v1.36.3", "v1.37.2", "v1.38.0"] {
        assert!(
            !template(&["--kube-version", version]).is_empty(),
            "{version}"
        );
    }
    for version in ["v1.34.9", "v1.30.0"] {
        let Err(err) = helm::offline(&["template", "ifo", &chart(), "--kube-version", version])
        else {
            panic!("the chart rendered for Kubernetes {version}");
        };
        assert!(
            format!("{err:#}").contains("chart requires kubeVersion: >= 1.35.0-0"),
            "{version}: {err:#}"
        );
    }
}

/// As a dependency of an umbrella chart, with no values of its own: Helm passes it `global`,
/// which the schema takes.
#[test]
fn a_parent_chart_with_empty_values_renders_it() {
    let parent = tempdir("parent");
    std::fs::write(
        parent.join("Chart.yaml"),
        "apiVersion: v2\nname: platform\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(parent.join("values.yaml"), "global: {}\n").unwrap();
    std::fs::create_dir(parent.join("charts")).unwrap();
    std::os::unix::fs::symlink(helm::chart(), parent.join("charts").join("ifo")).unwrap();
    let out = helm::offline(&["template", "platform", &parent.display().to_string()])
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(
        objects(&out)
            .iter()
            .any(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "ifo-apiserver"),
        "{out}"
    );
}

/// The settings `values.schema.json` accepts are the server's flags' environment variables, but
/// those the chart sets from its own values.
#[test]
fn the_settings_the_chart_takes_are_the_servers_flags() {
    use clap::Args;
    const SET_BY_THE_CHART: &[&str] = &[
        "BIND_ADDRESS",
        "SECURE_PORT",
        "ADMISSION_PORT",
        "HEALTH_PORT",
        "TLS_CERT_FILE",
        "TLS_PRIVATE_KEY_FILE",
        "KUBECONFIG_FILE",
        "PERSIST",
        "EVICTION_GUARD",
        "GUARD_WHEN_UNKNOWN",
        "LEADER_ELECT",
        "POD_NAME",
        "POD_NAMESPACE",
        "SERVING_CERTIFICATE_SECRET",
        "SERVING_CERTIFICATE_NAMES",
        "SERVING_CERTIFICATE_LIFETIME",
        "SERVING_CERTIFICATE_CA_FROM",
        "CA_BUNDLE_TARGETS",
    ];
    let flags: Vec<String> = ifo::config::ServeArgs::augment_args(clap::Command::new("serve"))
        .get_arguments()
        .filter_map(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()))
        .filter(|e| !SET_BY_THE_CHART.contains(&e.as_str()))
        .collect();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(helm::chart().join("values.schema.json")).unwrap(),
    )
    .unwrap();
    let mut accepted: Vec<String> = schema["properties"]["settings"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let mut flags = flags;
    flags.sort();
    accepted.sort();
    assert_eq!(
        accepted, flags,
        "values.schema.json's settings are not the flags of `ifo-apiserver serve` (src/config.rs) \
         but those the chart sets"
    );
}

#[test]
fn the_chart_makes_what_the_kustomize_install_makes() {
    // deploy/ mounts the certificate of a Secret made beside it, as the chart's own
    // certificates do.
    same_objects(
        "deploy/",
        template(&["--set", "certificates.source=chart"]),
        kustomize(
            "deploy",
            &["apiservice/apiservice.yaml", "apiservice/webhook.yaml"],
        ),
    );
    same_objects(
        "apiservice/with-guard/",
        template(&["--set", "certificates.source=chart,guard.enabled=true"]),
        kustomize(
            "apiservice/with-guard",
            &[
                "apiservice/apiservice.yaml",
                "apiservice/webhook.yaml",
                "apiservice/guard-webhook.yaml",
            ],
        ),
    );
    // Persistence mode and the server's own certificates: deploy/ with the component
    // deploy/persist/ or deploy/certificates/, each from an overlay of its own. (kustomize takes
    // relative paths only.)
    for (component, set) in [
        (
            "persist",
            "certificates.source=chart,persistence.enabled=true",
        ),
        ("certificates", "certificates.source=server"),
    ] {
        let overlay = tempdir(&format!("{component}-overlay"));
        let up = "../".repeat(overlay.components().count() - 1);
        let deploy = format!("{up}{}", root().join("deploy").display()).replace("//", "/");
        std::fs::write(
            overlay.join("kustomization.yaml"),
            format!("resources: [{deploy}]\ncomponents: [{deploy}/{component}]\n"),
        )
        .unwrap();
        same_objects(
            &format!("deploy/ with deploy/{component}/"),
            template(&["--set", set]),
            kustomize(
                &overlay.display().to_string(),
                &["apiservice/apiservice.yaml", "apiservice/webhook.yaml"],
            ),
        );
    }
    // Monitoring: deploy/monitoring/ beside deploy/.
    let mut expected = kustomize(
        "deploy",
        &["apiservice/apiservice.yaml", "apiservice/webhook.yaml"],
    );
    expected.extend(kustomize("deploy/monitoring", &[]));
    same_objects(
        "deploy/monitoring/",
        template(&[
            "--set",
            "certificates.source=chart,monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true",
        ]),
        expected,
    );
}

/// A directory of its own under the system's temporary directory, empty.
fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ifo-chart-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn decode(b64: &Value) -> Vec<u8> {
    openssl::base64::decode_block(b64.as_str().unwrap()).unwrap()
}

/// The chart's serving certificate names both Services (in the release's namespace), is signed
/// by the CA in the Secret, and every registration trusts that CA.
fn check_certificate(objects: &[Value], namespace: &str) -> (Vec<u8>, Vec<u8>) {
    let tls = find_object(objects, "Secret", "ifo-apiserver-tls");
    let ca_pem = decode(&tls["data"]["ca.crt"]);
    let cert_pem = decode(&tls["data"]["tls.crt"]);
    let cert = openssl::x509::X509::from_pem(&cert_pem).unwrap();
    let ca = openssl::x509::X509::from_pem(&ca_pem).unwrap();
    assert!(
        cert.verify(&ca.public_key().unwrap()).unwrap(),
        "the serving certificate is not signed by the CA"
    );
    let names: Vec<String> = cert
        .subject_alt_names()
        .unwrap()
        .iter()
        .filter_map(|n| n.dnsname().map(str::to_owned))
        .collect();
    for service in ["ifo-apiserver", "ifo-guard"] {
        let name = format!("{service}.{namespace}.svc");
        assert!(names.contains(&name), "{name} not among {names:?}");
    }
    let private =
        openssl::pkey::PKey::private_key_from_pem(&decode(&tls["data"]["tls.key"])).unwrap();
    assert!(
        cert.public_key().unwrap().public_eq(&private),
        "the key is not the certificate's"
    );
    let ca_secret = find_object(objects, "Secret", "ifo-apiserver-ca");
    assert_eq!(decode(&ca_secret["data"]["tls.crt"]), ca_pem);
    for o in objects {
        let bundles: Vec<&Value> = match o["kind"].as_str() {
            Some("APIService") => vec![&o["spec"]["caBundle"]],
            Some("ValidatingWebhookConfiguration") => o["webhooks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| &w["clientConfig"]["caBundle"])
                .collect(),
            _ => continue,
        };
        for bundle in bundles {
            assert_eq!(decode(bundle), ca_pem, "{} trusts another CA", key(o));
        }
    }
    (ca_pem, cert_pem)
}

#[test]
fn the_certificate_the_chart_makes_is_for_the_services_and_trusted_by_the_registrations() {
    check_certificate(
        &template(&["--set", "certificates.source=chart,guard.enabled=true"]),
        "ifo-system",
    );
    let chart = chart();
    let elsewhere = objects(
        &helm::offline(&[
            "template",
            "ifo",
            &chart,
            "-n",
            "maintenance",
            "--set",
            "certificates.source=chart",
        ])
        .unwrap(),
    );
    check_certificate(&elsewhere, "maintenance");
    // Everything that names the server's namespace names the release's.
    for o in &elsewhere {
        let text = o.to_string();
        assert!(
            !text.contains("ifo-system"),
            "{} still names ifo-system: {text}",
            key(o)
        );
    }
}

/// Runs kubectl as the administrator with `stdin`.
fn kubectl_in(cluster: &Cluster, args: &[&str], stdin: &str) -> anyhow::Result<String> {
    cluster.kubectl_run(User::Admin, args, Some(stdin))
}

#[test]
fn kube_apiserver_takes_every_option_and_the_release_lives_through_upgrades_and_uninstall() {
    let cluster = Cluster::start(None).unwrap();
    let admin = |args: &[&str]| cluster.kubectl_run(User::Admin, args, None);
    let chart = chart();
    let source = |p: &str| root().join(p).display().to_string();
    // The tests' cluster comes with deploy/'s RBAC and CRDs applied, and Helm takes over no object
    // it did not make: removed, for a cluster without the product.
    admin(&[
        "delete",
        "--wait",
        "-f",
        &source("deploy/rbac"),
        "-f",
        &source("deploy/guard/rbac.yaml"),
        "-f",
        &source("deploy/crds"),
    ])
    .unwrap();
    admin(&["apply", "-f", &source("tests/chart/foreign-crds.yaml")]).unwrap();
    admin(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/servicemonitors.monitoring.coreos.com",
        "crd/prometheusrules.monitoring.coreos.com",
        "crd/issuers.cert-manager.io",
        "crd/certificates.cert-manager.io",
    ])
    .unwrap();

    // An install (no node here: nothing runs; the objects are what is checked).
    let install = |set: &str| {
        let args = [
            "install",
            "ifo",
            &chart,
            "-n",
            "ifo-system",
            "--create-namespace",
        ];
        helm::run(&cluster, &[&args[..], &["--set", set]].concat())
    };
    let notes = install("certificates.source=chart,guard.enabled=true").unwrap();
    // Its notes say what was installed, how to check it and how to let a drain through.
    for said in [
        "is installed in namespace ifo-system",
        "kubectl get apiservice v1alpha1.live.ifo.kubevirt.io",
        "The maintenance guard is on",
        "kubectl ifo override <node> --for 2h",
    ] {
        assert!(
            notes.contains(said),
            "the notes do not say {said:?}: {notes}"
        );
    }
    let secret = |name: &str| -> Value {
        serde_json::from_str(
            &admin(&["-n", "ifo-system", "get", "secret", name, "-o", "json"]).unwrap(),
        )
        .unwrap()
    };
    let registrations = || -> Vec<Value> {
        [
            "apiservice/v1alpha1.live.ifo.kubevirt.io",
            "validatingwebhookconfiguration/ifo-ruleset-validation",
            "validatingwebhookconfiguration/ifo-maintenance-guard",
        ]
        .into_iter()
        .map(|what| serde_json::from_str(&admin(&["get", what, "-o", "json"]).unwrap()).unwrap())
        .collect()
    };
    let installed = || -> Vec<Value> {
        let mut all = vec![secret("ifo-apiserver-tls"), secret("ifo-apiserver-ca")];
        all.extend(registrations());
        all
    };
    let (ca, cert) = check_certificate(&installed(), "ifo-system");
    let shipped = admin(&["get", "operationrulesets", "-o", "name"]).unwrap();
    assert!(
        shipped.lines().count() >= 40 && shipped.contains("kubevirt-rules"),
        "the shipped rulesets are not installed: {shipped}"
    );

    // Every option, as kube-apiserver validates it: the chart's CRDs, and its rulesets against
    // the CRD the install made.
    let everything = "guard.enabled=true,guard.failurePolicy=Fail,persistence.enabled=true,\
        monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true,\
        monitoring.dashboard.enabled=true,networkPolicy.enabled=true,\
        networkPolicy.apiServerCIDRs[0]=192.0.2.10/32,settings.DEBOUNCE_THRESHOLD=1m,\
        replicas=3,logFormat=json,nodeSelector.disk=ssd";
    for set in [
        everything,
        "certificates.source=cert-manager,guard.enabled=true",
        "certificates.source=server,guard.enabled=true",
        "replicas=1,guard.enabled=true,rules.families[0]=kubevirt",
    ] {
        let rendered = helm::run(
            &cluster,
            &["template", "ifo", &chart, "-n", "ifo-system", "--set", set],
        )
        .unwrap();
        let out = kubectl_in(
            &cluster,
            &["apply", "--dry-run=server", "-f", "-"],
            &rendered,
        )
        .unwrap_or_else(|e| panic!("kube-apiserver refused the chart with {set}: {e:#}"));
        assert!(out.contains("(server dry run)"), "{out}");
    }

    // `helm upgrade` with the values as they are and `set`: what helm said; and the same that
    // must go through, with the CA and certificate after it.
    let upgrading = |set: &[&str]| {
        let mut args = vec![
            "upgrade",
            "ifo",
            &chart,
            "-n",
            "ifo-system",
            "--reset-then-reuse-values",
        ];
        args.extend_from_slice(set);
        helm::run(&cluster, &args)
    };
    let upgrade = |set: &[&str]| {
        upgrading(set).unwrap();
        check_certificate(&installed(), "ifo-system")
    };

    // An upgrade with a changed setting keeps the CA and the certificate.
    let (ca_after, cert_after) = upgrade(&["--set", "settings.DEBOUNCE_THRESHOLD=45s"]);
    assert_eq!(ca_after, ca, "an upgrade changed the CA");
    assert_eq!(
        cert_after, cert,
        "an upgrade renewed a certificate far from its end"
    );
    let debounce = admin(&[
        "-n",
        "ifo-system",
        "get",
        "deployment",
        "ifo-apiserver",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].env[?(@.name==\"DEBOUNCE_THRESHOLD\")].value}",
    ])
    .unwrap();
    assert_eq!(debounce, "45s");

    // A certificate within its renewal time (as if years had passed) is renewed by the next
    // upgrade, under the same CA, so the registrations stay as they are.
    let soon = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 86_400;
    admin(&[
        "-n",
        "ifo-system",
        "annotate",
        "--overwrite",
        "secret/ifo-apiserver-tls",
        &format!("ifo.kubevirt.io/not-after={soon}"),
    ])
    .unwrap();
    let (ca_renewed, cert_renewed) = upgrade(&[]);
    assert_eq!(ca_renewed, ca, "the renewal changed the CA");
    assert_ne!(
        cert_renewed, cert,
        "a certificate near its end was not renewed"
    );

    // An older CRD (as a release before `schedule` left it: Helm never upgrades crds/): the
    // upgrade is refused, saying what to do; done, it goes through, and the new field is kept.
    let crd = "crd/operationrulesets.ifo.kubevirt.io";
    admin(&[
        "patch",
        crd,
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/rules/items/properties/schedule"},
            {"op":"replace","path":"/metadata/annotations/ifo.kubevirt.io~1revision","value":"0"}]"#,
    ])
    .unwrap();
    let refused = upgrading(&[]).expect_err("an upgrade over an older CRD went through");
    let refused = format!("{refused:#}");
    assert!(
        refused.contains("is revision 0, older than this chart's")
            && refused.contains("kubectl apply --server-side --force-conflicts -f <chart>/crds/"),
        "{refused}"
    );
    admin(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        // As the message says it (a directory: the trailing slash follows the chart's link).
        &format!("{}/", helm::chart().join("crds").display()),
    ])
    .unwrap();
    upgrade(&[]);
    let scheduled = serde_json::json!({
        "apiVersion": "ifo.kubevirt.io/v1alpha1", "kind": "OperationRuleSet",
        "metadata": {"name": "scheduled-after-upgrade"},
        "spec": {
            "target": {"group": "batch", "version": "v1", "resource": "cronjobs"},
            "rules": [{"operation": "Running", "expression": "false",
                       "schedule": {"cron": "object.spec.schedule"}}],
        },
    });
    kubectl_in(&cluster, &["apply", "-f", "-"], &scheduled.to_string()).unwrap();
    let kept = admin(&[
        "get",
        "ors",
        "scheduled-after-upgrade",
        "-o",
        "jsonpath={.spec.rules[0].schedule.cron}",
    ])
    .unwrap();
    assert_eq!(kept, "object.spec.schedule", "the CRD pruned the new field");
    admin(&["delete", "ors", "scheduled-after-upgrade"]).unwrap();

    // From the chart's own certificates to the server's (the default since): the registrations
    // keep the caBundle kube-apiserver trusts (nothing runs here to write the server's, which
    // would hold that CA: it takes it over), and the server may read the CA the chart kept.
    upgrading(&["--set", "certificates.source=server"]).unwrap();
    for o in &registrations() {
        let bundles: Vec<&Value> = match o["kind"].as_str() {
            Some("APIService") => vec![&o["spec"]["caBundle"]],
            _ => o["webhooks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| &w["clientConfig"]["caBundle"])
                .collect(),
        };
        for bundle in bundles {
            assert_eq!(
                decode(bundle),
                ca,
                "the upgrade to the server's certificates changed what {} {} trusts",
                o["kind"],
                o["metadata"]["name"]
            );
        }
    }
    let may_read = admin(&[
        "auth",
        "can-i",
        "get",
        "secret/ifo-apiserver-ca",
        "-n",
        "ifo-system",
        "--as=system:serviceaccount:ifo-system:ifo-apiserver",
    ])
    .unwrap();
    assert_eq!(may_read.trim(), "yes");

    // The uninstall: the registrations and the server are gone; the CRD (with anyone's own
    // rulesets) and the CA stay.
    helm::run(
        &cluster,
        &["uninstall", "ifo", "-n", "ifo-system", "--wait"],
    )
    .unwrap();
    for what in [
        "apiservice/v1alpha1.live.ifo.kubevirt.io",
        "validatingwebhookconfiguration/ifo-ruleset-validation",
        "validatingwebhookconfiguration/ifo-maintenance-guard",
        "deployment/ifo-apiserver",
        "operationrulesets",
    ] {
        let left = admin(&[
            "-n",
            "ifo-system",
            "get",
            what,
            "--ignore-not-found",
            "-o",
            "name",
        ])
        .unwrap();
        assert_eq!(left.trim(), "", "{what} is left after the uninstall");
    }
    admin(&["get", "crd", "operationrulesets.ifo.kubevirt.io"])
        .expect("the CRD went with the release");
    admin(&["-n", "ifo-system", "get", "secret", "ifo-apiserver-ca"])
        .expect("the CA went with the release");

    // With the server's own certificates, the server writes the doors' key into the webhooks'
    // paths (as it would: nothing runs here); an upgrade keeps what it wrote, where putting the
    // plain path back would have kube-apiserver's reviews refused until the server wrote it again.
    install("certificates.source=server,guard.enabled=true").unwrap();
    let path = |i: usize| {
        admin(&[
            "get",
            "validatingwebhookconfiguration",
            "ifo-maintenance-guard",
            "-o",
            &format!("jsonpath={{.webhooks[{i}].clientConfig.service.path}}"),
        ])
        .unwrap()
    };
    let keyed = format!(
        "/admission/{}/evictions",
        "0123456789abcdef".repeat(4)[..60].to_owned()
    );
    admin(&[
        "patch",
        "validatingwebhookconfiguration",
        "ifo-maintenance-guard",
        "--type=json",
        "-p",
        &format!(
            r#"[{{"op":"replace","path":"/webhooks/0/clientConfig/service/path","value":"{keyed}"}}]"#
        ),
    ])
    .unwrap();
    upgrading(&["--set", "settings.DEBOUNCE_THRESHOLD=50s"]).unwrap();
    assert_eq!(path(0), keyed, "the upgrade put the plain path back");
    assert_eq!(
        path(1),
        "/admission/evictions/standby",
        "a path the server did not write"
    );
    helm::run(
        &cluster,
        &["uninstall", "ifo", "-n", "ifo-system", "--wait"],
    )
    .unwrap();
    cluster.shutdown();
}
