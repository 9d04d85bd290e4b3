//! Every PromQL expression the project ships — the Grafana dashboard's
//! (deploy/monitoring/grafana-dashboard.json), the alert rules' (deploy/monitoring/
//! prometheusrule.yaml) and the "Is it safe?" queries of docs/operating.md — evaluated by a real Prometheus
//! (built from its Go module, `IFO_PROMETHEUS`) that scrapes the test server and kube-apiserver
//! while operations start, stall, end and a target stops being watched. Each answer is compared
//! with what the live API says at the same time; an expression without a check fails the test.
//!
//! Other tests share the server: every check is on this test's own node, component, namespace,
//! ruleset and target, or compares with the live API's answer of the same moment.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ifo_dev::User;
use serde_json::{Value, json};

use ifo_test_support::{
    Env, Rule, RuleSet, busy_gadgets, clear_status, create_gadget_crd, env, grant_gadgets, vm,
};

const WAIT: Duration = Duration::from_secs(45);
/// A failed watch is retried with a fresh list after a backoff (at once on a CRD change).
const RECOVER: Duration = Duration::from_secs(90);
const VMS: [&str; 6] = ["vm1", "vm2", "vm3", "vm4", "vm5", "vm6"];
/// The README's two gates.
const DRAIN: &str = "sum(ifo_operations_active{node=\"worker-1\"})";
const UPGRADE: &str = "sum(ifo_operations_active{component=\"kubevirt\"})";

type Sample = (BTreeMap<String, String>, f64);

/// A Prometheus server of its own, scraping every second; killed when dropped.
struct Prometheus {
    child: std::process::Child,
    port: u16,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(env: &Env) -> Prometheus {
        let binary = std::env::var("IFO_PROMETHEUS").unwrap_or_else(|_| {
            panic!(
                "IFO_PROMETHEUS is not set: the monitoring queries' test needs a Prometheus server \
                 (bash tests/run.sh builds it; or bash tests/cluster/build-promtool.sh prometheus)"
            )
        });
        let dir = env
            .cluster
            .dir()
            .join(format!("prometheus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cert = env.client_cert_args(User::Admin);
        let (cert_file, key_file) = (&cert[1], &cert[3]);
        let kubeconfig: Value =
            serde_json::from_slice(&std::fs::read(env.cluster.kubeconfig(User::Admin)).unwrap())
                .unwrap();
        let cluster = &kubeconfig["clusters"][0]["cluster"];
        let apiserver = cluster["server"]
            .as_str()
            .unwrap()
            .trim_start_matches("https://");
        use base64::Engine as _;
        let cluster_ca = dir.join("cluster-ca.crt");
        std::fs::write(
            &cluster_ca,
            base64::engine::general_purpose::STANDARD
                .decode(cluster["certificate-authority-data"].as_str().unwrap())
                .unwrap(),
        )
        .unwrap();
        let serving_ca = env.cluster.dir().join("pki/serving-ca.crt");
        let tls = |ca: &std::path::Path| json!({"ca_file": ca, "cert_file": cert_file, "key_file": key_file});
        let config = json!({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {"job_name": "ifo-apiserver", "scheme": "https", "tls_config": tls(&serving_ca),
                 "static_configs": [{"targets": [format!("127.0.0.1:{}", env.port)]}]},
                // kube-apiserver's metrics are large: less often.
                {"job_name": "apiserver", "scheme": "https", "tls_config": tls(&cluster_ca),
                 "scrape_interval": "5s",
                 "static_configs": [{"targets": [apiserver]}]},
            ],
        });
        // JSON is YAML.
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config.to_string()).unwrap();
        let port = ifo_dev::free_port().unwrap();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(&binary)
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {binary}: {e}"));
        let prometheus = Prometheus { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        // Started, and has scraped the server: what happens from now on shows as increases.
        while !prometheus
            .try_query("up{job=\"ifo-apiserver\"} == 1")
            .is_ok_and(|s| s.len() == 1)
        {
            assert!(
                Instant::now() < deadline,
                "Prometheus did not start (see {})",
                dir.display()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        prometheus
    }

    /// An instant query: the samples, or the error Prometheus gave.
    fn try_query(&self, expr: &str) -> Result<Vec<Sample>, String> {
        let out = Command::new("curl")
            .args(["-s", "--max-time", "10", "--data-urlencode"])
            .arg(format!("query={expr}"))
            .arg(format!("http://127.0.0.1:{}/api/v1/query", self.port))
            .output()
            .map_err(|e| e.to_string())?;
        let answer: Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
        if answer["status"] != "success" {
            return Err(format!("{expr}: {}", answer["error"]));
        }
        let number = |v: &Value| v[1].as_str().and_then(|s| s.parse::<f64>().ok());
        let data = &answer["data"];
        Ok(match data["resultType"].as_str() {
            Some("scalar") => vec![(BTreeMap::new(), number(&data["result"]).unwrap_or(f64::NAN))],
            _ => data["result"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| {
                    let labels = r["metric"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                        .collect();
                    (labels, number(&r["value"]).unwrap_or(f64::NAN))
                })
                .collect(),
        })
    }
}

/// Every shipped expression, by where it comes from.
struct Expressions {
    all: Vec<(String, String)>,
    checked: BTreeSet<String>,
}

impl Expressions {
    fn load() -> Expressions {
        let root = env!("CARGO_MANIFEST_DIR");
        let mut all = Vec::new();
        let dashboard: Value = serde_json::from_slice(
            &std::fs::read(format!("{root}/deploy/monitoring/grafana-dashboard.json")).unwrap(),
        )
        .expect("the dashboard is JSON");
        for panel in dashboard["panels"].as_array().unwrap() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                let id = format!(
                    "dashboard: {} {}",
                    panel["title"].as_str().unwrap(),
                    target["refId"].as_str().unwrap()
                );
                all.push((id, target["expr"].as_str().unwrap().to_owned()));
            }
        }
        let rules: Value = serde_saphyr::from_str(
            &std::fs::read_to_string(format!("{root}/deploy/monitoring/prometheusrule.yaml"))
                .unwrap(),
        )
        .unwrap();
        for group in rules["spec"]["groups"].as_array().unwrap() {
            for rule in group["rules"].as_array().unwrap() {
                let id = format!("alert: {}", rule["alert"].as_str().unwrap());
                all.push((id, rule["expr"].as_str().unwrap().trim().to_owned()));
            }
        }
        let readme = std::fs::read_to_string(format!("{root}/docs/operating.md")).unwrap();
        for (n, expr) in readme_queries(&readme).into_iter().enumerate() {
            all.push((format!("README: {n}"), expr));
        }
        Expressions {
            all,
            checked: BTreeSet::new(),
        }
    }

    /// The expression whose text is `needle`, or else the one whose id or text contains it.
    fn find(&self, needle: &str) -> (String, String) {
        if let Some(exact) = self.all.iter().find(|(_, expr)| expr == needle) {
            return exact.clone();
        }
        let found: Vec<_> = self
            .all
            .iter()
            .filter(|(id, expr)| id.contains(needle) || expr.contains(needle))
            .collect();
        assert_eq!(
            found.len(),
            1,
            "{needle:?} names {} expressions: {found:#?}",
            found.len()
        );
        found[0].clone()
    }
}

/// The PromQL of the "Is it safe?" section of docs/operating.md: each `promql` block's expressions (a line
/// that starts with a space continues the one before; comments dropped).
fn readme_queries(readme: &str) -> Vec<String> {
    let Some(start) = readme.find("### Is it safe?") else {
        return Vec::new();
    };
    let section = &readme[start + 3..];
    let end = ["\n## ", "\n### "]
        .iter()
        .filter_map(|h| section.find(h))
        .min()
        .unwrap_or(section.len());
    let section = &section[..end];
    let mut queries: Vec<String> = Vec::new();
    for block in section.split("```promql").skip(1) {
        let block = block.split("```").next().unwrap_or_default();
        let mut continues = false;
        for line in block.lines() {
            let code = line.split(" #").next().unwrap_or_default();
            let code = if code.trim_start().starts_with('#') {
                ""
            } else {
                code
            };
            if code.trim().is_empty() {
                continues = false;
                continue;
            }
            match queries.last_mut() {
                Some(q) if continues && code.starts_with(' ') => {
                    q.push(' ');
                    q.push_str(code.trim());
                }
                _ => queries.push(code.trim().to_owned()),
            }
            continues = true;
        }
    }
    queries
}

/// The test's own names, put into the expressions in place of the dashboard's variables and the
/// README's examples.
struct Scene {
    ns: String,
    node: String,
    component: String,
    rs: String,
    group: String,
}

impl Scene {
    fn substitute(&self, expr: &str) -> String {
        expr.replace("$node", &self.node)
            .replace("$component", &self.component)
            .replace("$__rate_interval", "2m")
            .replace("\"worker-1\"", &format!("\"{}\"", self.node))
            .replace("\"kubevirt\"", &format!("\"{}\"", self.component))
            .replace("\"oadp\"", &format!("\"{}\"", self.component))
    }
}

struct Check<'a> {
    prometheus: &'a Prometheus,
    expressions: Expressions,
    scene: Scene,
}

impl Check<'_> {
    /// Evaluates the expression `needle` names until `expected` (given the samples) holds; marks
    /// it checked. `expected` returns `Err(what was expected)` while it does not hold.
    fn check(
        &mut self,
        needle: &str,
        timeout: Duration,
        expected: impl Fn(&[Sample]) -> Result<(), String>,
    ) {
        let (id, expr) = self.expressions.find(needle);
        let query = self.scene.substitute(&expr);
        let deadline = Instant::now() + timeout;
        loop {
            let samples = self
                .prometheus
                .try_query(&query)
                .unwrap_or_else(|e| panic!("{id} does not evaluate: {e}"));
            match expected(&samples) {
                Ok(()) => break,
                Err(want) => assert!(
                    Instant::now() < deadline,
                    "{id}: `{query}` returned {samples:?}; expected {want}"
                ),
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        self.expressions.checked.insert(id);
    }
}

fn with<'a>(samples: &'a [Sample], labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    samples
        .iter()
        .filter(|(l, _)| {
            labels
                .iter()
                .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .collect()
}

/// The one sample with `labels` has value `want`.
fn value_is(samples: &[Sample], labels: &[(&str, &str)], want: f64) -> Result<(), String> {
    match with(samples, labels).as_slice() {
        [(_, v)] if (v - want).abs() < 1e-6 => Ok(()),
        _ => Err(format!("one sample {labels:?} = {want}")),
    }
}

fn zero_or_none(samples: &[Sample], labels: &[(&str, &str)]) -> Result<(), String> {
    if with(samples, labels).iter().all(|(_, v)| *v == 0.0) {
        Ok(())
    } else {
        Err(format!("0 or no sample with {labels:?}"))
    }
}

fn none_with(samples: &[Sample], labels: &[(&str, &str)]) -> Result<(), String> {
    if with(samples, labels).is_empty() {
        Ok(())
    } else {
        Err(format!("no sample with {labels:?}"))
    }
}

/// No sample at all; else `expected`, what was expected.
fn no_sample(samples: &[Sample], expected: &str) -> Result<(), String> {
    if samples.is_empty() {
        Ok(())
    } else {
        Err(expected.to_owned())
    }
}

fn in_range(
    samples: &[Sample],
    labels: &[(&str, &str)],
    low: f64,
    high: f64,
) -> Result<(), String> {
    match with(samples, labels).as_slice() {
        [(_, v)] if *v > low && *v <= high => Ok(()),
        _ => Err(format!("one sample {labels:?} in ({low}, {high}]")),
    }
}

fn ruleset(rs: &str, ns: &str, component: &str) -> String {
    RuleSet::vms_of(rs, component, ns)
        .label_expression(
            "ifo.kubevirt.io/node",
            "object.?status.?nodeName.orValue('')",
        )
        .rule(
            Rule::new(
                "Migrating",
                "object.?status.?printableStatus.orValue('') == 'Migrating'",
            )
            .set("stalled", "object.?status.?stuck.orValue(false)")
            .outcome(
                "object.?status.?lastMigration.orValue('') == 'Failed' ? 'Failed' : 'Succeeded'",
            ),
        )
        .to_string()
}

/// The live API's view of this test's operations.
struct Live {
    active: usize,
    stalled: usize,
    oldest_start: f64,
}

fn seconds(t: &Value) -> f64 {
    t.as_str()
        .and_then(|s| s.parse::<jiff::Timestamp>().ok())
        .map(|t| t.as_millisecond() as f64 / 1000.0)
        .unwrap_or(f64::NAN)
}

fn live(env: &Env, ns: &str) -> Live {
    let ops = env.get_json(User::Admin, &["get", "ifos", "-n", ns]);
    let ops = ops["items"].as_array().cloned().unwrap_or_default();
    let active: Vec<&Value> = ops
        .iter()
        .filter(|o| o["status"]["phase"] == "Active")
        .collect();
    let stalled = active
        .iter()
        .filter(|o| {
            o["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Stalled" && c["status"] == "True")
            })
        })
        .count();
    let oldest_start = active
        .iter()
        .map(|o| seconds(&o["metadata"]["creationTimestamp"]))
        .fold(f64::INFINITY, f64::min);
    Live {
        active: active.len(),
        stalled,
        oldest_start,
    }
}

fn now() -> f64 {
    jiff::Timestamp::now().as_millisecond() as f64 / 1000.0
}

#[test]
fn every_shipped_query_returns_what_the_live_api_says() {
    let env = env();
    let ns = env.namespace("promql");
    let scene = Scene {
        node: format!("w-{ns}"),
        component: format!("c-{ns}"),
        rs: format!("rs-{ns}"),
        group: format!("{ns}.promql.example.com"),
        ns,
    };
    let (ns, node, component, rs, group) = (
        scene.ns.clone(),
        scene.node.clone(),
        scene.component.clone(),
        scene.rs.clone(),
        scene.group.clone(),
    );
    env.apply(&ruleset(&rs, &ns, &component));
    for name in VMS {
        env.apply(&vm(name, &ns));
    }
    // A target of its own, to stop watching later.
    let gadgets_rs = format!("gadgets-{ns}");
    create_gadget_crd(env, &group);
    grant_gadgets(env, &ns, &group);
    env.apply(&busy_gadgets(
        &gadgets_rs,
        &format!("gadgets-{ns}"),
        &group,
        &ns,
    ));
    env.wait_watching(&rs);
    env.wait_watching(&gadgets_rs);
    let prometheus = Prometheus::start(env);
    let mut c = Check {
        prometheus: &prometheus,
        expressions: Expressions::load(),
        scene,
    };

    // Phase 1: six migrations on the test's node, one of them stalled by its rule.
    for name in VMS {
        let stuck = name == "vm6";
        env.set_vm_status(
            &ns,
            name,
            json!({"printableStatus": "Migrating", "nodeName": node, "stuck": stuck}),
        );
    }
    ifo_test_support::eventually(WAIT, "six active, one stalled", || {
        let l = live(env, &ns);
        (l.active == 6 && l.stalled == 1).then_some(())
    });
    let l = live(env, &ns);
    let (active, stalled) = (l.active as f64, l.stalled as f64);
    let gate_name = format!("node.{node}");
    // Tests share the server: while another test's target is not current, every node's gate
    // is Unknown (any target may feed it); the gate settles on False.
    let gate = env.wait_gate(&gate_name, "False", WAIT);
    let gate_status = clear_status(&gate).to_owned();
    let gate_active = gate["status"]["activeOperations"].as_f64().unwrap();
    assert!(
        gate["status"]["expectedClearTime"].is_null(),
        "no history yet: no estimate"
    );
    let watch = env.watch(&format!(
        "/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/{ns}/inflightoperations?watch=1"
    ));

    let node_l = [("node", node.as_str())];
    let comp_op = [
        ("component", component.as_str()),
        ("operation", "Migrating"),
    ];
    c.check("Operations in flight by node A", WAIT, |s| {
        value_is(s, &node_l, active)
    });
    c.check("Operations in flight by component A", WAIT, |s| {
        value_is(s, &comp_op, active)
    });
    c.check("Stalled operations A", WAIT, |s| {
        value_is(
            s,
            &[
                ("component", &component),
                ("operation", "Migrating"),
                ("cause", "rule"),
            ],
            stalled,
        )
    });
    // One sample `labels` within 5 s of the age of the oldest operation in flight.
    let oldest = l.oldest_start;
    let oldest_age = |s: &[Sample], labels: &[(&str, &str)]| {
        let age = now() - oldest;
        in_range(s, labels, age - 5.0, age + 5.0)
    };
    c.check("Longest in flight A", WAIT, |s| {
        oldest_age(s, &[("component", &component), ("kind", "VirtualMachine")])
    });
    c.check("Gates with operations in flight A", WAIT, |s| {
        value_is(s, &[("gate", &gate_name), ("status", &gate_status)], 1.0)
    });
    c.check("Gates with operations in flight B", WAIT, |s| {
        value_is(s, &[("gate", &gate_name)], gate_active)
    });
    c.check("Gates with operations in flight C", WAIT, |s| {
        none_with(s, &[("gate", &gate_name)])
    });
    c.check("Cluster gate A", WAIT, |s| {
        let status = clear_status(&env.gate("cluster")).to_owned();
        value_is(s, &[("status", &status)], 1.0)
    });
    // The README's gates: not safe while the node (and component) have operations in flight.
    c.check(DRAIN, WAIT, |s| no_sample(s, "nothing"));
    c.check(UPGRADE, WAIT, |s| no_sample(s, "nothing"));
    c.check(
        "sum by (component, operation) (ifo_operations_active{node=",
        WAIT,
        |s| value_is(s, &comp_op, active),
    );
    c.check("sum by (namespace)", WAIT, |s| {
        value_is(s, &[("namespace", &ns)], active)
    });
    c.check(
        "time() - ifo_operations_oldest_active_start_timestamp_seconds",
        WAIT,
        |s| oldest_age(s, &comp_op),
    );
    // The alerts: the stall fires, nothing else about this test's ruleset, target or rule.
    c.check("alert: IFOOperationStalled", WAIT, |s| {
        value_is(
            s,
            &[
                ("component", &component),
                ("operation", "Migrating"),
                ("kind", "VirtualMachine"),
                ("cause", "rule"),
            ],
            stalled,
        )
    });
    c.check("alert: IFOOperationStuck", WAIT, |s| {
        none_with(s, &[("component", &component)])
    });
    c.check("alert: IFOLongOperationStuck", WAIT, |s| {
        none_with(s, &[("component", &component)])
    });
    c.check("alert: IFOServerDown", WAIT, |s| {
        no_sample(s, "nothing: the server is up")
    });
    c.check("alert: IFOAPIServiceUnavailable", WAIT, |s| {
        no_sample(s, "nothing: the APIService is available")
    });
    // Not vacuous: kube-apiserver is scraped and reports the APIService available.
    ifo_test_support::eventually(WAIT, "kube-apiserver's report of the APIService", || {
        prometheus
            .try_query(
                "aggregator_unavailable_apiservice{name=\"v1alpha1.live.ifo.kubevirt.io\"} == 0",
            )
            .ok()
            .filter(|s| s.len() == 1)
    });
    c.check("alert: IFORuleEvaluationErrors", WAIT, |s| {
        none_with(s, &[("ruleset", &rs)])
    });
    // The alert's `increase` misses errors counted before Prometheus's first scrape: the
    // counter itself does not (this test's rules hold for objects without a status too).
    let counted = prometheus.try_query(&format!(
        "ifo_rule_evaluation_errors_total{{ruleset=\"{rs}\"}} > 0"
    ));
    assert_eq!(counted, Ok(vec![]), "rule errors of {rs}");
    c.check("alert: IFORulesetSuspended", WAIT, |s| {
        none_with(s, &[("ruleset", &rs)])
    });
    c.check("alert: IFOEvaluationEventsDropped", WAIT, |s| {
        none_with(s, &[("ruleset", &rs)])
    });
    c.check("alert: IFOEvaluationLagging", WAIT, |s| {
        none_with(s, &[("ruleset", &rs)])
    });
    c.check("alert: IFOBackgroundTaskFailed", WAIT, |s| {
        if s.iter().all(|(l, v)| l.contains_key("task") && *v > 0.0) {
            Ok(())
        } else {
            Err("samples by task".into())
        }
    });
    let target = [("group", group.as_str()), ("resource", "gadgets")];
    c.check("alert: IFOObjectsSkipped", WAIT, |s| none_with(s, &target));
    c.check("alert: IFOTargetNotWatching", WAIT, |s| {
        none_with(s, &target)
    });
    c.check("Targets A", WAIT, |s| value_is(s, &target, 1.0));
    c.check("Targets B", WAIT, |s| value_is(s, &target, 1.0));
    c.check("Targets C", WAIT, |s| value_is(s, &target, 0.0));
    c.check("Targets D", WAIT, |s| in_range(s, &target, -1.0, 600.0));
    c.check("API requests A", WAIT, |s| {
        // Lists of this test's operations, as the dashboard should count them.
        live(env, &ns);
        with(
            s,
            &[
                ("verb", "list"),
                ("resource", "inflightoperations"),
                ("code", "200"),
            ],
        )
        .iter()
        .any(|(_, v)| *v > 0.0)
        .then_some(())
        .ok_or_else(|| "lists of inflightoperations answered 200".into())
    });
    c.check("API latency (p99) A", WAIT, |s| {
        in_range(
            s,
            &[("verb", "list"), ("resource", "inflightoperations")],
            0.0,
            10.0,
        )
    });
    c.check("Open watches A", WAIT, |s| {
        (s.len() == 1 && s[0].1 >= 1.0)
            .then_some(())
            .ok_or_else(|| "at least this test's watch".into())
    });
    c.check("Evaluation latency (p99) A", WAIT, |s| {
        in_range(s, &[("ruleset", &rs)], 0.0, 1.0)
    });
    // The maintenance guard holds evictions of a pod on the node (nothing runs it).
    crate::guard::pod_on(env, &ns, "guarded", &node);
    c.check("Evictions decided by the guard A", WAIT, |s| {
        let held = crate::guard::evict(env, User::Admin, &ns, "guarded");
        assert!(!held.ok, "an eviction on a node in flight went through");
        with(s, &[("decision", "denied"), ("reason", "in_flight")])
            .iter()
            .any(|(_, v)| *v > 0.0)
            .then_some(())
            .ok_or_else(|| "evictions held for operations in flight".into())
    });
    c.check("Guard latency (p99) and failures A", WAIT, |s| {
        in_range(s, &[], 0.0, 1.0)
    });
    // Other tests send the door malformed reviews on purpose: a rate, not necessarily 0.
    c.check("Guard latency (p99) and failures B", WAIT, |s| match s {
        [(_, v)] if *v >= 0.0 => Ok(()),
        _ => Err("one sample: the rate of reviews not answered".into()),
    });
    // kube-apiserver is scraped, and it never let an eviction through for want of an answer.
    c.check("Guard latency (p99) and failures C", WAIT, |s| {
        zero_or_none(s, &[])
    });
    c.check("alert: IFOMaintenanceGuardFailing", WAIT, |s| {
        no_sample(s, "nothing: kube-apiserver reaches the guard")
    });
    // The server's own checks find its door reached: the series scraped at 1, the alert quiet.
    ifo_test_support::eventually(WAIT, "ifo_guard_reached scraped at 1", || {
        let samples = c.prometheus.try_query("ifo_guard_reached").ok()?;
        matches!(samples.as_slice(), [(_, v)] if *v == 1.0).then_some(())
    });
    c.check("alert: IFOMaintenanceGuardUnreached", WAIT, |s| {
        no_sample(s, "nothing: kube-apiserver reaches the server's door")
    });
    c.check("alert: IFOMaintenanceGuardStandbyDisagrees", WAIT, |s| {
        no_sample(s, "nothing: one server answers both doors alike")
    });
    c.check("alert: IFOMaintenanceGateNotClear", WAIT, |s| {
        value_is(s, &[("gate", gate_name.as_str())], 1.0)
    });
    // A maintenance override on a Node of the test's own: scraped, and minutes old, not a day.
    let overridden = env.node(&format!("{node}-overridden"));
    env.kubectl(
        User::Admin,
        &[
            "annotate",
            "node",
            overridden.name(),
            "ifo.kubevirt.io/maintenance-override=prometheus test",
        ],
    )
    .unwrap();
    let started = format!(
        "ifo_guard_override_start_timestamp_seconds{{node=\"{}\"}}",
        overridden.name()
    );
    ifo_test_support::eventually(WAIT, "the override to be scraped", || {
        let samples = prometheus.try_query(&started).ok()?;
        (samples.len() == 1).then_some(())
    });
    c.check("alert: IFOMaintenanceOverrideLeftOn", WAIT, |s| {
        no_sample(s, "nothing: the override was set minutes ago")
    });
    drop(overridden);
    c.check("Rule errors and dropped events A", WAIT, |s| {
        zero_or_none(s, &[("ruleset", &rs)])
    });
    c.check("Rule errors and dropped events B", WAIT, |s| {
        zero_or_none(s, &[("ruleset", &rs)])
    });

    // Phase 2: five succeed, the stalled one fails, and fails again, and one of the five
    // migrates again and succeeds (six succeeded: what a rule needs before it publishes what it
    // learned, MIN_SAMPLES); the node is clear. The first completion of each outcome comes
    // first: a counter's first sample has no increase to show.
    let end = |name: &str, outcome: &str| {
        env.set_vm_status(
            &ns,
            name,
            json!({"printableStatus": "Running", "lastMigration": outcome, "stuck": false}),
        );
    };
    end("vm1", "Succeeded");
    end("vm6", "Failed");
    ifo_test_support::eventually(WAIT, "two ended", || {
        (live(env, &ns).active == 4).then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    for name in ["vm2", "vm3", "vm4", "vm5"] {
        end(name, "Succeeded");
    }
    ifo_test_support::eventually(WAIT, "all ended", || {
        (live(env, &ns).active == 0).then_some(())
    });
    // `name` migrates again, alone, and ends with `outcome`.
    let again = |name: &str, outcome: &str| {
        env.set_vm_status(
            &ns,
            name,
            json!({"printableStatus": "Migrating", "lastMigration": ""}),
        );
        ifo_test_support::eventually(WAIT, &format!("{name} migrating again"), || {
            (live(env, &ns).active == 1).then_some(())
        });
        end(name, outcome);
        ifo_test_support::eventually(WAIT, &format!("{name} ended again"), || {
            (live(env, &ns).active == 0).then_some(())
        });
    };
    again("vm6", "Failed");
    again("vm1", "Succeeded");
    // Completed operations are removed at once: the live API shows their outcomes and ends on
    // the watch, in the objects as they complete.
    let completed = std::cell::RefCell::new(BTreeMap::<String, (String, f64)>::new());
    watch.until(WAIT, "eight completions", |e| {
        let o = &e["object"];
        if o["status"]["phase"] == "Completed" {
            let took =
                seconds(&o["status"]["completed"]) - seconds(&o["metadata"]["creationTimestamp"]);
            let outcome = o["status"]["outcome"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            // One subject's operations may share a name: told apart by their start.
            let name = format!(
                "{}@{}",
                o["metadata"]["name"], o["metadata"]["creationTimestamp"]
            );
            completed.borrow_mut().insert(name, (outcome, took));
        }
        completed.borrow().len() == 8
    });
    let completed = completed.into_inner();
    let outcomes: BTreeSet<String> = completed.values().map(|(o, _)| o.clone()).collect();
    assert_eq!(
        outcomes,
        BTreeSet::from(["Failed".to_owned(), "Succeeded".to_owned()])
    );
    let shown = &outcomes;
    let longest = completed.values().map(|(_, t)| *t).fold(0.0, f64::max);
    // The histogram's buckets: the quantiles lie at or below the bound that holds the longest.
    // The served times are whole seconds, the histogram's durations are not: the longest may
    // have taken up to a second more than its served times say.
    let bound = [1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0]
        .into_iter()
        .find(|b| *b >= longest + 1.0)
        .unwrap();
    c.check("Completions by outcome A", WAIT, |s| {
        let outcomes: BTreeSet<String> = with(s, &comp_op)
            .iter()
            .filter(|(_, v)| *v > 0.0)
            .map(|(l, _)| l["outcome"].clone())
            .collect();
        (&outcomes == shown)
            .then_some(())
            .ok_or_else(|| "the outcomes the API shows".into())
    });
    c.check(
        "Duration of succeeded operations (p50) and the learned expectation A",
        WAIT,
        |s| in_range(s, &comp_op, 0.0, bound),
    );
    c.check("histogram_quantile(0.95", WAIT, |s| {
        in_range(s, &comp_op, 0.0, bound)
    });
    c.check("outcome=\"Failed\"}[1h]", WAIT, |s| {
        in_range(s, &comp_op, 0.0, 1.0)
    });
    // The learned expectation is the one the ruleset's status publishes.
    for (refid, field) in [("B", "p50Seconds"), ("C", "p99Seconds")] {
        c.check(
            &format!("Duration of succeeded operations (p50) and the learned expectation {refid}"),
            WAIT,
            |s| {
                let ors = env.get_json(User::Admin, &["get", "ors", &rs]);
                let learned = ors["status"]["operationDurations"]
                    .as_array()
                    .and_then(|d| d.iter().find(|d| d["operation"] == "Migrating"))
                    .and_then(|d| d[field].as_f64());
                match learned {
                    Some(want) => in_range(s, &comp_op, want * 0.99 - 0.01, want * 1.01 + 0.01),
                    None => Err(format!("the ruleset's {field} (not published yet)")),
                }
            },
        );
    }
    c.check("Gates with operations in flight A", WAIT, |s| {
        none_with(s, &[("gate", &gate_name), ("status", "False")])
    });
    // Safe now, if (and only if) the live API vouches for every target.
    let vouched = |s: &[Sample]| {
        let rulesets = env.get_json(User::Admin, &["get", "ors"]);
        let all_watched = rulesets["items"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|r| r["status"]["watchActive"] == true);
        match (all_watched, s) {
            (true, [(_, v)]) if *v == 0.0 => Ok(()),
            (false, []) => Ok(()),
            (true, _) => Err("one sample 0: every target is watched".into()),
            (false, _) => Err("nothing: a target is not watched".into()),
        }
    };
    c.check(DRAIN, WAIT, vouched);
    c.check(UPGRADE, WAIT, vouched);

    // Phase 3: the target is not watched any more.
    env.kubectl(
        User::Admin,
        &["delete", "crd", &format!("gadgets.{group}"), "--wait=true"],
    )
    .unwrap();
    c.check("alert: IFOTargetNotWatching", RECOVER, |s| {
        value_is(s, &target, 0.0)
    });
    c.check("Targets A", WAIT, |s| value_is(s, &target, 0.0));
    c.check("Targets B", WAIT, |s| value_is(s, &target, 0.0));
    c.check("Watch failures A", RECOVER, |s| {
        in_range(s, &target, 0.0, f64::INFINITY)
    });

    let unchecked: Vec<_> = c
        .expressions
        .all
        .iter()
        .filter(|(id, _)| !c.expressions.checked.contains(id))
        .collect();
    assert!(
        unchecked.is_empty(),
        "expressions without a check: {unchecked:#?}"
    );
    env.kubectl(User::Admin, &["delete", "ors", &rs, &gadgets_rs])
        .unwrap();
}
