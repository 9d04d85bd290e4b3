//! The monitoring manifests (`deploy/monitoring/`) and the series they and the docs name.
//!
//! - The ServiceMonitor finds the metrics Service (every replica, not the leader alone) by its
//!   labels and port, verifies the serving certificate against the CA of the Secret the
//!   Deployment mounts, and scrapes `/metrics`.
//! - Every alert has a severity, a summary and a description, and every `ifo_` series it (or
//!   the README and the docs) names is one the server exports; the table of
//!   `docs/operating.md` lists exactly those.
//! - The alert rules pass `promtool check rules`, and `promtool test rules` runs the scenarios of
//!   `tests/monitoring/alerts.test.yaml` on them (promtool is built by `tests/prereqs.sh`).

use ifo_test_support::Run;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn yaml(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

fn one(path: &str) -> Value {
    let mut docs = yaml(path);
    assert_eq!(docs.len(), 1, "{path} holds one object");
    docs.remove(0)
}

/// Makes one series of every family exist: a family without series is not exposed.
fn exercise() {
    use ifo::metrics::*;
    let target = ifo::ruleset::Target {
        group: "kubevirt.io".into(),
        version: "v1".into(),
        resource: "virtualmachines".into(),
    };
    set_target_watch_up(&target, true);
    set_target_last_list(&target, 1);
    set_target_detection(&target, true, 0);
    target_watch_failure(&target);
    task_failed("ruleset-controller");
    set_watches(1);
    object_event("virtualmachines.kubevirt.io");
    rule_error("rs");
    cost_exceeded("rs");
    ruleset_suspended("rs");
    evaluation_event_dropped("rs");
    ruleset_status_written("rs");
    EvaluationTimer::new("rs").time(|| ());
    EvaluationLag::new("rs").set(std::time::Duration::ZERO);
    RequestTimer::start().finish(("get", ""), http::StatusCode::OK);
    open_watches(0);
    connection_refused("admission", "anonymous");
    connection_displaced("admission");
    persist_write("create", "ok");
    set_persist_pending(0, std::time::Duration::ZERO);
    set_operations(0);
    started(StartStage::Ready, std::time::Duration::from_secs(1));
    started(StartStage::Complete, std::time::Duration::from_secs(2));
    let subject = ifo::operation::Subject {
        kind: "VirtualMachine".into(),
        name: "vm".into(),
        uid: "uid".into(),
        ..Default::default()
    };
    let now = jiff::Timestamp::now();
    let (mut op, _) = ifo::operation::InFlightOperation::new_active(
        &ifo::operation::RuleSetInfo::default(),
        "Migrating",
        &subject,
        now,
        now,
        None,
        [],
    );
    op.phase = ifo::operation::Phase::Completed;
    op.outcome = Some(ifo::operation::Outcome::Succeeded);
    op.completed = Some(now);
    operation_completed(&op);
    let mut stalled = StalledCounts::default();
    stalled.add("kubevirt", "Migrating", "VirtualMachine", "history");
    set_stalled(stalled);
    let durations = std::sync::Arc::new(ifo::history::Durations::default());
    for _ in 0..ifo::history::MIN_SAMPLES {
        durations.completed(&op);
    }
    // One end judged against the estimate its operation showed.
    let mut active = op.clone();
    active.phase = ifo::operation::Phase::Active;
    let shown = ifo::history::refreshed(&std::sync::Arc::new(active), &durations, now)
        .expect("an estimate from history");
    durations.shown(&shown);
    durations.completed(&op);
    serve_learned_from(durations);
}

/// The `ifo_*` (and `process_*`) families the server exports, as `# TYPE` lines name them,
/// counters with their `_total`.
fn exported() -> BTreeSet<String> {
    exercise();
    ifo::metrics::render()
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let mut parts = l.split(' ');
            let name = parts.next().unwrap_or_default();
            match parts.next() {
                Some("counter") => format!("{name}_total"),
                _ => name.to_string(),
            }
        })
        .collect()
}

/// The `ifo_` series names in `text` (histogram suffixes taken off).
fn named_in(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, _) in text.match_indices("ifo_") {
        let preceded = text[..i]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        if preceded {
            continue;
        }
        let name: String = text[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let name = ["_bucket", "_count", "_sum"]
            .iter()
            .find_map(|s| name.strip_suffix(s).map(str::to_owned))
            .unwrap_or(name);
        names.insert(name);
    }
    names
}

#[test]
fn the_kustomization_holds_every_manifest_of_the_folder() {
    let kustomization = one("deploy/monitoring/kustomization.yaml");
    let listed: BTreeSet<String> = kustomization["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    let present: BTreeSet<String> = std::fs::read_dir(root().join("deploy/monitoring"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    assert_eq!(listed, present);
    // deploy/ itself does not include it: it needs the Prometheus Operator's CRDs.
    let base = one("deploy/kustomization.yaml");
    assert!(
        !base["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.as_str().unwrap().starts_with("monitoring"))
    );
}

#[test]
fn the_service_monitor_scrapes_the_deployed_service_with_its_ca() {
    let monitor = one("deploy/monitoring/servicemonitor.yaml");
    let service = one("deploy/monitoring/service.yaml");
    let serving = one("deploy/server/service.yaml");
    let deployment = one("deploy/server/deployment.yaml");
    // Every replica, not the leader alone: the metrics Service selects the pods of the
    // Deployment and nothing more.
    assert_eq!(
        service["spec"]["selector"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(service["spec"]["clusterIP"], "None");
    assert_eq!(monitor["kind"], "ServiceMonitor");
    assert_eq!(
        monitor["metadata"]["namespace"],
        service["metadata"]["namespace"]
    );
    let selector = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap();
    for (k, v) in selector {
        assert_eq!(&service["metadata"]["labels"][k], v, "Service label {k}");
    }
    let endpoints = monitor["spec"]["endpoints"].as_array().unwrap();
    assert_eq!(endpoints.len(), 1);
    let endpoint = &endpoints[0];
    let ports: Vec<&Value> = service["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["name"])
        .collect();
    assert!(ports.contains(&&endpoint["port"]), "{ports:?}");
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(endpoint["path"], "/metrics");
    let tls = &endpoint["tlsConfig"];
    // The serving certificate is for the serving Service's name.
    assert_eq!(
        tls["serverName"],
        format!(
            "{}.{}.svc",
            serving["metadata"]["name"].as_str().unwrap(),
            serving["metadata"]["namespace"].as_str().unwrap()
        )
    );
    // Only the metrics Service matches: the serving one reaches the leader alone.
    assert!(
        selector
            .iter()
            .any(|(k, v)| &serving["metadata"]["labels"][k] != v),
        "the ServiceMonitor also selects the leader-only Service"
    );
    let mounted = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|v| v["secret"]["secretName"].as_str())
        .unwrap();
    assert_eq!(tls["ca"]["secret"]["name"], mounted);
    assert_eq!(tls["ca"]["secret"]["key"], "ca.crt");
    // Prometheus may read /metrics.
    let rbac = yaml("deploy/monitoring/rbac.yaml");
    let role = rbac.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
    assert_eq!(role["rules"][0]["nonResourceURLs"][0], "/metrics");
    assert_eq!(role["rules"][0]["verbs"][0], "get");
    // It scrapes with a token the operator reads from a Secret in the ServiceMonitor's namespace
    // (no file of Prometheus' pod: refused under arbitraryFSAccessThroughSMs.deny), the token of
    // an account bound to that role.
    assert!(endpoint.get("bearerTokenFile").is_none(), "{endpoint}");
    let authorization = &endpoint["authorization"];
    assert_eq!(authorization["type"], "Bearer");
    let scraper = yaml("deploy/monitoring/scraper.yaml");
    let token = scraper
        .iter()
        .find(|o| {
            o["kind"] == "Secret" && o["metadata"]["name"] == authorization["credentials"]["name"]
        })
        .expect("the credentials' Secret");
    assert_eq!(token["type"], "kubernetes.io/service-account-token");
    assert_eq!(authorization["credentials"]["key"], "token");
    assert_eq!(
        token["metadata"]["namespace"],
        monitor["metadata"]["namespace"]
    );
    let account = &token["metadata"]["annotations"]["kubernetes.io/service-account.name"];
    assert!(
        scraper
            .iter()
            .any(|o| o["kind"] == "ServiceAccount" && &o["metadata"]["name"] == account),
        "no ServiceAccount {account}"
    );
    let binding = rbac
        .iter()
        .find(|o| o["kind"] == "ClusterRoleBinding")
        .unwrap();
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert!(
        binding["subjects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| &s["name"] == account && s["namespace"] == token["metadata"]["namespace"]),
        "{binding}"
    );
}

/// The rule groups of the PrometheusRule, as a promtool rules file holds them.
fn rule_groups() -> Value {
    let rule = one("deploy/monitoring/prometheusrule.yaml");
    assert_eq!(rule["kind"], "PrometheusRule");
    rule["spec"].clone()
}

fn alerts() -> Vec<Value> {
    rule_groups()["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .filter(|r| r.get("alert").is_some())
        .collect()
}

#[test]
fn every_alert_tells_on_call_what_and_where_using_exported_series() {
    let exported = exported();
    let alerts = alerts();
    let names: Vec<&str> = alerts
        .iter()
        .map(|a| a["alert"].as_str().unwrap())
        .collect();
    for wanted in [
        "IFOServerDown",
        "IFOAPIServiceUnavailable",
        "IFOTargetNotWatching",
        "IFORuleEvaluationErrors",
        "IFOOperationStuck",
    ] {
        assert!(names.contains(&wanted), "{wanted} missing: {names:?}");
    }
    for alert in &alerts {
        let name = alert["alert"].as_str().unwrap();
        let severity = alert["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            // `info`: an alert for tools that hold maintenance on it (kured), not for people.
            ["critical", "warning", "info"].contains(&severity),
            "{name}: severity {severity:?}"
        );
        for field in ["summary", "description"] {
            let text = alert["annotations"][field].as_str().unwrap_or_default();
            assert!(text.len() > 20, "{name}: {field} {text:?}");
        }
        let expr = alert["expr"].as_str().unwrap();
        for series in named_in(expr) {
            assert!(
                exported.contains(&series),
                "{name}: {series} is not exported"
            );
        }
    }
}

#[test]
fn the_docs_list_exactly_the_exported_series() {
    let operating = std::fs::read_to_string(root().join("docs/operating.md")).unwrap();
    let section = operating
        .split("### Series")
        .nth(1)
        .and_then(|s| s.split("\n### ").next())
        .expect("docs/operating.md has a Monitoring / Series section");
    let table: BTreeSet<String> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('|').nth(1))
        .flat_map(|cell| {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    let exported = exported();
    assert_eq!(table, exported, "docs/operating.md's table vs /metrics");
    // The pages that name series (development.md names the `ifo_*` shell functions of
    // tests/prereqs.sh instead).
    for page in [
        "README.md",
        "docs/api.md",
        "docs/architecture.md",
        "docs/operating.md",
        "docs/performance.md",
        "docs/rules.md",
    ] {
        let text = std::fs::read_to_string(root().join(page)).unwrap();
        let unknown: Vec<String> = named_in(&text).difference(&exported).cloned().collect();
        assert!(
            unknown.is_empty(),
            "{page} names series that do not exist: {unknown:?}"
        );
    }
}

/// promtool: `IFO_PROMTOOL`, as `tests/prereqs.sh` sets it.
fn promtool() -> PathBuf {
    match std::env::var_os("IFO_PROMTOOL") {
        Some(p) if Path::new(&p).is_file() => PathBuf::from(p),
        _ => panic!(
            "IFO_PROMTOOL does not name promtool: run the tests with tests/run.sh (tests/prereqs.sh \
             builds promtool from the Go module proxy into ~/.cache/ifo/promtool/), or set \
             IFO_PROMTOOL=$(source tests/prereqs.sh && ifo_promtool && echo $IFO_PROMTOOL)"
        ),
    }
}

#[test]
fn the_alerts_pass_promtool_check_and_test_rules() {
    let promtool = promtool();
    let dir = std::env::temp_dir().join(format!("ifo-alerts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = serde_json::to_string_pretty(&rule_groups()).unwrap();
    // JSON is YAML: promtool reads it as is.
    std::fs::write(dir.join("rules.yaml"), rules).unwrap();
    std::fs::copy(
        root().join("tests/monitoring/alerts.test.yaml"),
        dir.join("alerts.test.yaml"),
    )
    .unwrap();
    for args in [
        vec!["check", "rules", "rules.yaml"],
        vec!["test", "rules", "alerts.test.yaml"],
    ] {
        Run::of(Command::new(&promtool).args(&args).current_dir(&dir))
            .assert_success(&format!("promtool {}", args.join(" ")));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
