//! Robustness under faults: subjects of two kinds move through operations at a steady rate and a
//! ruleset is created, changed and deleted, while clients use the live API through
//! kube-apiserver (watchers that resume from their last resourceVersion after every disconnect,
//! lists a page at a time, `kubectl wait` on node gates) and faults are injected at random: the
//! server killed (SIGKILL) or stopped (SIGTERM) and started again, the leader of two replicas
//! killed or stopped, kube-apiserver or etcd frozen (SIGSTOP) and thawed, or restarted, a watcher
//! that stops reading, a ruleset made invalid and fixed. Then
//! every client's history is checked against what the API promises:
//!
//! - within a watch and across its resumptions, resourceVersions strictly increase and no event
//!   comes twice; a resumed watch either continues or gets `410 Expired` (and the client lists
//!   again); once faults stop, every watcher's picture equals a fresh list (a lost event shows);
//! - pages of a list never repeat an object;
//! - once faults stop and the debounce passes, the Active operations are exactly what the rules
//!   say of the subjects' final states (computed here from the subjects, not read from the
//!   server), and the node gates say the same;
//! - outside faults, no operation stays Active longer than the debounce plus a bound after its
//!   rule stopped matching;
//! - every answer served while a feed was down (after the time the server is allowed to notice)
//!   carried the Warning, and no `kubectl wait` for a clear gate succeeded then;
//! - the persisted copies equal the live objects (name, uid, start) and none is left Active.
//!
//! A report is printed: traffic, faults by kind, histories checked, violations (must be 0) and
//! recovery times. Faults are seeded: the seed is printed, `IFO_ROBUSTNESS_SEED=<seed>` replays
//! it. The short profile (the default) injects faults for 2.5 minutes; `IFO_ROBUSTNESS=long` for
//! at least 20 minutes and 100 faults.
//!
//! A test binary of its own: it kills and freezes what other tests share.

use ifo_dev::User;
use ifo_test_support::{Env, Stop, eventually, vm};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

/// The server's debounce grace (the default of `ifo_test_support::Env`).
const DEBOUNCE: Duration = Duration::from_secs(3);
/// How often the server probes its watches here (a stalled watch is noticed within this plus
/// the request timeout).
const PROBE_INTERVAL: &str = "2s";
/// How long after a feed went down the server may take to say so: a probe interval, the
/// probe's timeout (`K8S_API_TIMEOUT`, 10 s) and some slack.
const NOTICE: Duration = Duration::from_secs(2 + 10 + 3);
/// How long past the debounce an operation whose rule stopped matching may stay Active.
const END_BOUND: Duration = Duration::from_secs(6);
/// The longest a fault may take to recover from before it counts as a violation.
const RECOVERY_LIMIT: Duration = Duration::from_secs(120);
const VMS: usize = 6;
const CONFIGMAPS: usize = 6;
const NODES: usize = 3;
const LIVE: &str = "/apis/live.ifo.kubevirt.io/v1alpha1";

/// What the test injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    KillServer,
    TermServer,
    FreezeApiserver,
    FreezeEtcd,
    StalledWatcher,
    InvalidRuleset,
    KillLeader,
    TermLeader,
    RestartApiserver,
    RestartEtcd,
}

impl Fault {
    const ALL: [Fault; 10] = [
        Fault::KillServer,
        Fault::TermServer,
        Fault::FreezeApiserver,
        Fault::FreezeEtcd,
        Fault::StalledWatcher,
        Fault::InvalidRuleset,
        Fault::KillLeader,
        Fault::TermLeader,
        Fault::RestartApiserver,
        Fault::RestartEtcd,
    ];

    /// Whether the server's feeds are down while it lasts (answers must carry the Warning).
    fn feeds_down(self) -> bool {
        matches!(
            self,
            Fault::FreezeApiserver
                | Fault::FreezeEtcd
                | Fault::RestartApiserver
                | Fault::RestartEtcd
        )
    }
}

/// One injected fault: when it started and ended, and how long until all was well again.
#[derive(Debug, Clone)]
struct Injected {
    fault: Fault,
    start: Instant,
    end: Instant,
    recovery: Option<Duration>,
}

/// Everything the checks found wrong.
#[derive(Default)]
struct Violations(Mutex<Vec<String>>);

impl Violations {
    fn add(&self, what: String) {
        eprintln!("VIOLATION: {what}");
        self.0.lock().unwrap().push(what);
    }
}

/// The test's namespaces and rulesets.
struct World {
    vm_ns: String,
    cm_ns: String,
    vm_rules: String,
    cm_rules: String,
    churn_rules: String,
}

fn vm_ruleset(name: &str, ns: &str) -> String {
    format!(
        r#"{{"apiVersion":"ifo.kubevirt.io/v1alpha1","kind":"OperationRuleSet","metadata":{{"name":"{name}"}},
"spec":{{"component":"kubevirt","target":{{"group":"kubevirt.io","version":"v1","resource":"virtualmachines"}},
 "namespaces":["{ns}"],
 "labelExpressions":[{{"key":"ifo.kubevirt.io/node","expression":"object.?status.?nodeName.orValue('none')"}}],
 "rules":[
  {{"operation":"Starting","expression":"object.?status.?printableStatus.orValue('') == 'Starting'"}},
  {{"operation":"Migrating","expression":"object.?status.?printableStatus.orValue('') == 'Migrating'"}}]}}}}"#
    )
}

/// The ConfigMap ruleset; `busy` is the Busy rule's expression (made invalid by a fault).
fn cm_ruleset(name: &str, ns: &str, busy: &str) -> String {
    json!({"apiVersion": "ifo.kubevirt.io/v1alpha1", "kind": "OperationRuleSet",
        "metadata": {"name": name},
        "spec": {"component": "config", "target": {"group": "", "version": "v1", "resource": "configmaps"},
            "namespaces": [ns],
            "rules": [
                {"operation": "Busy", "expression": busy},
                {"operation": "Draining", "expression": "object.?data.?phase.orValue('') == 'Draining'"}]}})
    .to_string()
}

const BUSY: &str = "object.?data.?phase.orValue('') == 'Busy'";
const BUSY_INVALID: &str = "object.?data.?phase.orValue('') ==";

/// The churned ruleset: `Flagged` when `data.flag` is `value`.
fn churn_ruleset(name: &str, ns: &str, value: &str) -> String {
    json!({"apiVersion": "ifo.kubevirt.io/v1alpha1", "kind": "OperationRuleSet",
        "metadata": {"name": name},
        "spec": {"component": "flags", "target": {"group": "", "version": "v1", "resource": "configmaps"},
            "namespaces": [ns],
            "rules": [{"operation": "Flagged",
                "expression": format!("object.?data.?flag.orValue('') == '{value}'")}]}})
    .to_string()
}

/// kubectl as admin with a deadline (kube-apiserver may be frozen).
fn kubectl(env: &Env, args: &[&str]) -> Result<String, String> {
    let mut all = vec!["--request-timeout=5s"];
    all.extend(args);
    env.kubectl(User::Admin, &all).map_err(|e| format!("{e:#}"))
}

fn rv_of(v: &Value) -> Option<u64> {
    v["metadata"]["resourceVersion"].as_str()?.parse().ok()
}

/// `(subject kind, subject name, operation)` of an operation.
type OpKey = (String, String, String);

fn op_key(o: &Value) -> OpKey {
    let s = &o["spec"]["subject"];
    (
        s["kind"].as_str().unwrap_or_default().to_owned(),
        s["name"].as_str().unwrap_or_default().to_owned(),
        o["spec"]["operation"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

// ---------------------------------------------------------------------------------------------
// Traffic

/// A write the traffic made: when it was acknowledged (or, if unknown whether it applied, when
/// it was sent), to which subject, and the state it set.
#[derive(Clone, Debug)]
struct Write {
    at: Instant,
    kind: &'static str,
    name: String,
    state: String,
    certain: bool,
}

/// Whether `state` of a subject of `kind` matches a rule of the fixed rulesets, and which.
fn fixed_operation(kind: &str, state: &str) -> Option<&'static str> {
    match (kind, state) {
        ("VirtualMachine", "Starting") => Some("Starting"),
        ("VirtualMachine", "Migrating") => Some("Migrating"),
        ("ConfigMap", "Busy") => Some("Busy"),
        ("ConfigMap", "Draining") => Some("Draining"),
        _ => None,
    }
}

fn traffic(env: &Env, world: &World, seed: u64, stop: &AtomicBool, log: &Mutex<Vec<Write>>) {
    let mut rng = fastrand::Rng::with_seed(seed);
    while !stop.load(Ordering::SeqCst) {
        let sent = Instant::now();
        let (kind, name, state, result) = if rng.bool() {
            let name = format!("vm{}", rng.usize(..VMS));
            let state = ["Running", "Starting", "Migrating", "Stopped"][rng.usize(..4)];
            let node = format!("rob-{}", rng.usize(..NODES));
            let patch = json!({"status": {"printableStatus": state, "nodeName": node}}).to_string();
            let r = kubectl(
                env,
                &[
                    "patch",
                    "vm",
                    &name,
                    "-n",
                    &world.vm_ns,
                    "--subresource=status",
                    "--type=merge",
                    "-p",
                    &patch,
                ],
            );
            ("VirtualMachine", name, state.to_owned(), r)
        } else {
            let name = format!("cm{}", rng.usize(..CONFIGMAPS));
            let (field, state) = if rng.usize(..4) == 0 {
                ("flag", ["on", "yes", "off"][rng.usize(..3)])
            } else {
                ("phase", ["Idle", "Busy", "Draining"][rng.usize(..3)])
            };
            let patch = json!({"data": {field: state}}).to_string();
            let r = kubectl(
                env,
                &[
                    "patch",
                    "configmap",
                    &name,
                    "-n",
                    &world.cm_ns,
                    "--type=merge",
                    "-p",
                    &patch,
                ],
            );
            let state = if field == "flag" {
                format!("flag={state}")
            } else {
                state.to_owned()
            };
            ("ConfigMap", name, state, r)
        };
        let write = match result {
            Ok(_) => Write {
                at: Instant::now(),
                kind,
                name,
                state,
                certain: true,
            },
            // It may or may not have applied.
            Err(_) => Write {
                at: sent,
                kind,
                name,
                state,
                certain: false,
            },
        };
        log.lock().unwrap().push(write);
        std::thread::sleep(Duration::from_millis(150 + rng.u64(..200)));
    }
}

/// The churned ruleset's versions over time: `None` while it does not exist.
fn churn(env: &Env, world: &World, seed: u64, stop: &AtomicBool, changes: &AtomicUsize) {
    let mut rng = fastrand::Rng::with_seed(seed);
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_secs(4 + rng.u64(..6)));
        let next = ["on", "yes"][rng.usize(..2)];
        let result = if rng.usize(..3) == 0 {
            kubectl(
                env,
                &["delete", "ors", &world.churn_rules, "--ignore-not-found"],
            )
            .map(|_| ())
        } else {
            env.cluster
                .apply(&churn_ruleset(&world.churn_rules, &world.cm_ns, next))
                .map_err(|e| format!("{e:#}"))
        };
        if result.is_ok() {
            changes.fetch_add(1, Ordering::SeqCst);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Clients

/// What one watcher saw.
#[derive(Default)]
struct WatchHistory {
    events: usize,
    streams: usize,
    expired: usize,
    lists: usize,
    /// Its picture of the namespace: name → (uid, phase).
    state: BTreeMap<String, (String, String)>,
}

/// Lists `path` through kube-apiserver: its items and resourceVersion.
fn list(env: &Env, path: &str) -> Result<(Vec<Value>, u64), String> {
    let raw = kubectl(env, &["get", "--raw", path])?;
    let list: Value = serde_json::from_str(&raw).map_err(|e| e.to_string())?;
    let rv = rv_of(&list).ok_or("list without a resourceVersion")?;
    Ok((list["items"].as_array().cloned().unwrap_or_default(), rv))
}

fn picture(items: &[Value]) -> BTreeMap<String, (String, String)> {
    items
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                (
                    o["metadata"]["uid"].as_str().unwrap_or_default().to_owned(),
                    o["status"]["phase"].as_str().unwrap_or_default().to_owned(),
                ),
            )
        })
        .collect()
}

/// Watches the operations of `namespace` through kube-apiserver, resuming from the last
/// resourceVersion after every disconnect and listing again after a 410, checking the history
/// as it comes.
fn watcher(
    env: &Env,
    namespace: &str,
    stop: &AtomicBool,
    history: &Mutex<WatchHistory>,
    violations: &Violations,
) {
    let path = format!("{LIVE}/namespaces/{namespace}/inflightoperations");
    let mut rv: Option<u64> = None;
    let mut seen: HashSet<(String, String, String, u64)> = HashSet::new();
    while !stop.load(Ordering::SeqCst) {
        let from = match rv {
            Some(rv) => rv,
            None => match list(env, &path) {
                Ok((items, list_rv)) => {
                    let mut h = history.lock().unwrap();
                    h.lists += 1;
                    h.state = picture(&items);
                    rv = Some(list_rv);
                    list_rv
                }
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(500));
                    continue;
                }
            },
        };
        history.lock().unwrap().streams += 1;
        let stream = env.watch(&format!(
            "{path}?watch=1&allowWatchBookmarks=true&resourceVersion={from}"
        ));
        let mut last = from;
        loop {
            let event = match stream.next(Duration::from_millis(300)) {
                Ok((_, event)) => event,
                Err(mpsc::RecvTimeoutError::Timeout) if !stop.load(Ordering::SeqCst) => continue,
                Err(_) => break,
            };
            let kind = event["type"].as_str().unwrap_or_default().to_owned();
            if kind == "ERROR" {
                if event["object"]["code"] == 410 {
                    // Too old to resume: list again.
                    history.lock().unwrap().expired += 1;
                    rv = None;
                } else {
                    violations.add(format!("watch of {namespace}: unexpected error {event}"));
                }
                break;
            }
            let object = &event["object"];
            let Some(event_rv) = rv_of(object) else {
                violations.add(format!(
                    "watch of {namespace}: event without a resourceVersion {event}"
                ));
                continue;
            };
            // Events strictly increase; a bookmark says everything up to its resourceVersion
            // was sent, so it may repeat the last one.
            if event_rv < last || (event_rv == last && kind != "BOOKMARK") {
                violations.add(format!(
                    "watch of {namespace}: resourceVersion {event_rv} after {last} ({kind})"
                ));
            }
            last = last.max(event_rv);
            rv = Some(last);
            if kind == "BOOKMARK" {
                continue;
            }
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let uid = object["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if !seen.insert((kind.clone(), name.clone(), uid.clone(), event_rv)) {
                violations.add(format!(
                    "watch of {namespace}: {kind} {name} at {event_rv} twice"
                ));
            }
            let mut h = history.lock().unwrap();
            h.events += 1;
            match kind.as_str() {
                "ADDED" | "MODIFIED" => {
                    let phase = object["status"]["phase"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    h.state.insert(name, (uid, phase));
                }
                "DELETED" => {
                    h.state.remove(&name);
                }
                other => violations.add(format!("watch of {namespace}: event type {other}")),
            }
        }
        drop(stream);
        if rv.is_some() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Lists every operation two at a time through kube-apiserver; no page repeats an object of an
/// earlier page.
fn pager(env: &Env, stop: &AtomicBool, lists: &AtomicUsize, violations: &Violations) {
    while !stop.load(Ordering::SeqCst) {
        let mut names = HashSet::new();
        let mut token: Option<String> = None;
        let complete = loop {
            let path = match &token {
                None => format!("{LIVE}/inflightoperations?limit=2"),
                Some(t) => format!("{LIVE}/inflightoperations?limit=2&continue={t}"),
            };
            let Ok(raw) = kubectl(env, &["get", "--raw", &path]) else {
                break false;
            };
            let Ok(page) = serde_json::from_str::<Value>(&raw) else {
                break false;
            };
            for item in page["items"].as_array().into_iter().flatten() {
                let name = format!(
                    "{}/{}",
                    item["metadata"]["namespace"].as_str().unwrap_or_default(),
                    item["metadata"]["name"].as_str().unwrap_or_default()
                );
                if !names.insert(name.clone()) {
                    violations.add(format!("paged list: {name} on two pages"));
                }
            }
            match page["metadata"]["continue"].as_str() {
                Some(t) if !t.is_empty() => token = Some(t.to_owned()),
                _ => break true,
            }
        };
        if complete {
            lists.fetch_add(1, Ordering::SeqCst);
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// An answer of the server, asked directly (what was served, whether it carried a Warning).
struct Sample {
    at: Instant,
    warned: bool,
    /// Active operations: (kind, subject, operation).
    active: BTreeSet<OpKey>,
}

/// Asks the server directly (not through kube-apiserver, which may be frozen) for the test's
/// operations, recording every answer.
fn sampler(env: &Env, world: &World, stop: &AtomicBool, samples: &Mutex<Vec<Sample>>) {
    let certs = env.client_cert_args(User::Admin);
    let certs: Vec<&str> = certs.iter().map(String::as_str).collect();
    while !stop.load(Ordering::SeqCst) {
        let mut active = BTreeSet::new();
        let mut warned = false;
        let mut ok = true;
        for ns in [&world.vm_ns, &world.cm_ns] {
            let (code, warnings, body) = env.direct_warned(
                env.port,
                &format!("{LIVE}/namespaces/{ns}/inflightoperations"),
                &certs,
            );
            if code != "200" {
                ok = false;
                break;
            }
            warned |= !warnings.is_empty();
            let list: Value = serde_json::from_str(&body).unwrap_or_default();
            for o in list["items"].as_array().into_iter().flatten() {
                if o["status"]["phase"] == "Active" {
                    active.insert(op_key(o));
                }
            }
        }
        if ok {
            samples.lock().unwrap().push(Sample {
                at: Instant::now(),
                warned,
                active,
            });
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `kubectl wait` for node gates to be clear; records when each wait succeeded.
fn gate_waiter(
    env: &Env,
    seed: u64,
    stop: &AtomicBool,
    waits: &AtomicUsize,
    cleared: &Mutex<Vec<(Instant, Instant)>>,
) {
    let mut rng = fastrand::Rng::with_seed(seed);
    while !stop.load(Ordering::SeqCst) {
        let gate = format!("gate/node.rob-{}", rng.usize(..NODES));
        let asked = Instant::now();
        let ok = env
            .kubectl(
                User::Admin,
                &["wait", "--for=condition=Clear=True", &gate, "--timeout=4s"],
            )
            .is_ok();
        waits.fetch_add(1, Ordering::SeqCst);
        if ok {
            cleared.lock().unwrap().push((asked, Instant::now()));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

// ---------------------------------------------------------------------------------------------
// Faults

/// Until the server answers a list of the test's namespaces without a Warning, and
/// kube-apiserver routes to it: how long that took.
fn recovery(env: &Env, world: &World, since: Instant) -> Option<Duration> {
    let certs = env.client_cert_args(User::Admin);
    let certs: Vec<&str> = certs.iter().map(String::as_str).collect();
    while since.elapsed() < RECOVERY_LIMIT {
        let direct = [&world.vm_ns, &world.cm_ns].iter().all(|ns| {
            let (code, warnings, _) = env.direct_warned(
                env.port,
                &format!("{LIVE}/namespaces/{ns}/inflightoperations"),
                &certs,
            );
            code == "200" && warnings.is_empty()
        });
        if direct
            && kubectl(
                env,
                &[
                    "get",
                    "--raw",
                    &format!("{LIVE}/namespaces/{}/inflightoperations", world.vm_ns),
                ],
            )
            .is_ok()
        {
            return Some(since.elapsed());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

fn inject(
    env: &'static Env,
    world: &World,
    pair: &mut Pair,
    fault: Fault,
    rng: &mut fastrand::Rng,
) -> Injected {
    let start = Instant::now();
    match fault {
        Fault::KillServer | Fault::TermServer => {
            env.stop_server(if fault == Fault::KillServer {
                Stop::Kill
            } else {
                Stop::Term
            });
            std::thread::sleep(Duration::from_millis(rng.u64(200..3000)));
            env.restart_server().unwrap();
        }
        Fault::FreezeApiserver | Fault::FreezeEtcd => {
            let pid = if fault == Fault::FreezeApiserver {
                env.cluster.apiserver_pid()
            } else {
                env.cluster.etcd_pid()
            };
            signal(pid, libc::SIGSTOP);
            std::thread::sleep(NOTICE + Duration::from_secs(rng.u64(3..8)));
            signal(pid, libc::SIGCONT);
        }
        Fault::RestartApiserver => env.cluster.restart_apiserver().unwrap(),
        Fault::RestartEtcd => env.cluster.restart_etcd().unwrap(),
        Fault::StalledWatcher => {
            // A watch whose client never reads: the server must not wait for it.
            let mut child = env
                .cluster
                .kubectl(User::Admin)
                .args([
                    "get",
                    "--raw",
                    &format!("{LIVE}/inflightoperations?watch=1"),
                    "--request-timeout=0",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_secs(rng.u64(5..15)));
            let _ = child.kill();
            let _ = child.wait();
        }
        Fault::KillLeader | Fault::TermLeader => {
            pair.fault(env, fault == Fault::KillLeader, rng);
            let end = Instant::now();
            return Injected {
                fault,
                start,
                end,
                recovery: pair.recovery(env, end),
            };
        }
        Fault::InvalidRuleset => {
            let _ = env
                .cluster
                .apply(&cm_ruleset(&world.cm_rules, &world.cm_ns, BUSY_INVALID));
            std::thread::sleep(Duration::from_secs(rng.u64(3..8)));
            eventually(Duration::from_secs(60), "the ruleset fixed", || {
                env.cluster
                    .apply(&cm_ruleset(&world.cm_rules, &world.cm_ns, BUSY))
                    .ok()
            });
        }
    }
    let end = Instant::now();
    Injected {
        fault,
        start,
        end,
        recovery: recovery(env, world, end),
    }
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: signalling a child process of the test cluster.
    #[allow(unsafe_code)]
    let r = unsafe { libc::kill(pid as libc::pid_t, signal) };
    assert_eq!(r, 0, "signal {signal} to {pid}");
}

// ---------------------------------------------------------------------------------------------
// Two replicas with leader election

/// One run of a replica's process.
struct Incarnation {
    port: u16,
    process: ifo_dev::Process,
    log: std::path::PathBuf,
    /// When it was killed (its term, if any, ended then at the latest).
    killed: Option<jiff::Timestamp>,
}

/// Two replicas sharing a Lease of their own (without persistence: the main server writes the
/// copies), every run of each logging its terms to a file of its own.
struct Pair {
    lease: String,
    replicas: [Vec<Incarnation>; 2],
}

impl Pair {
    fn start(env: &Env) -> Pair {
        let lease = format!("ifo-robustness-{}", std::process::id());
        for n in 0..2 {
            ifo_test_support::replicas::replica_pod(env, &format!("{lease}-{n}"));
        }
        let mut pair = Pair {
            lease,
            replicas: [Vec::new(), Vec::new()],
        };
        for n in 0..2 {
            pair.spawn(env, n);
        }
        pair
    }

    fn spawn(&mut self, env: &Env, n: usize) {
        let run = self.replicas[n].len();
        let log = format!("{}-{n}.{run}.log", self.lease);
        let pod = format!("{}-{n}", self.lease);
        let (port, process) = ifo_test_support::replicas::spawn(
            env,
            &self.lease,
            &pod,
            &log,
            &[
                ("DEBOUNCE_THRESHOLD", "3s"),
                ("WATCH_PROBE_INTERVAL", PROBE_INTERVAL),
                ("LOG_FORMAT", "json"),
                ("LOG_LEVEL", "info"),
            ],
        );
        self.replicas[n].push(Incarnation {
            port,
            process,
            log: env.cluster.dir().join(log),
            killed: None,
        });
    }

    fn current(&self, n: usize) -> &Incarnation {
        self.replicas[n].last().unwrap()
    }

    /// Which replica answers lists now, if one does.
    fn serving(&self, env: &Env, certs: &[&str]) -> Option<usize> {
        (0..2).find(|&n| {
            env.direct_warned(
                self.current(n).port,
                &format!("{LIVE}/inflightoperations"),
                certs,
            )
            .0 == "200"
        })
    }

    /// Kills (or stops with SIGTERM) the leader, or a replica at random if none leads now, and
    /// starts it again.
    fn fault(&mut self, env: &Env, kill: bool, rng: &mut fastrand::Rng) {
        let certs = env.client_cert_args(User::Admin);
        let certs: Vec<&str> = certs.iter().map(String::as_str).collect();
        let n = self.serving(env, &certs).unwrap_or_else(|| rng.usize(..2));
        let current = self.replicas[n].last_mut().unwrap();
        if kill {
            current.process.kill();
            current.killed = Some(jiff::Timestamp::now());
        } else {
            current.process.stop(Duration::from_secs(15));
        }
        std::thread::sleep(Duration::from_millis(rng.u64(200..2000)));
        self.spawn(env, n);
    }

    /// Until one replica serves again.
    fn recovery(&self, env: &Env, since: Instant) -> Option<Duration> {
        let certs = env.client_cert_args(User::Admin);
        let certs: Vec<&str> = certs.iter().map(String::as_str).collect();
        while since.elapsed() < RECOVERY_LIMIT {
            if self.serving(env, &certs).is_some() {
                return Some(since.elapsed());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        None
    }

    /// Every term of every run of replica `n`, from its own log: `[start, end)`.
    fn terms(&self, n: usize) -> Vec<(jiff::Timestamp, jiff::Timestamp)> {
        let now = jiff::Timestamp::now();
        let mut out = Vec::new();
        for run in &self.replicas[n] {
            let text = std::fs::read_to_string(&run.log).unwrap_or_default();
            let mut open: Option<jiff::Timestamp> = None;
            for line in text.lines() {
                let Ok(entry) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                let Some(at) = entry["timestamp"]
                    .as_str()
                    .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                else {
                    continue;
                };
                let message = entry["fields"]["message"].as_str().unwrap_or_default();
                if message == "serving as the leader" {
                    open = Some(at);
                } else if message.starts_with("not serving")
                    && let Some(start) = open.take()
                {
                    out.push((start, at));
                }
            }
            // A term its log does not end: it ended when the process was killed, or it still
            // runs (or the process stopped without saying so: it ended at the latest now).
            if let Some(start) = open {
                out.push((start, run.killed.unwrap_or(now)));
            }
        }
        out
    }

    /// Terms of the two replicas that overlap: two leaders at once.
    fn overlapping_terms(&self) -> Vec<String> {
        let (a, b) = (self.terms(0), self.terms(1));
        let mut out = Vec::new();
        for (s0, e0) in &a {
            for (s1, e1) in &b {
                if s0 < e1 && s1 < e0 {
                    out.push(format!(
                        "replica 0 served {s0}..{e0} and replica 1 {s1}..{e1}"
                    ));
                }
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Endings

/// Operations served Active past the debounce plus [`END_BOUND`] after their rule stopped
/// matching (by the last write to their subject, which must have applied) or after the server
/// was back from the faults since, whichever is later: how many endings were checked, and the
/// late ones.
fn late_endings(
    samples: &[Sample],
    writes: &[Write],
    injected: &[Injected],
) -> (usize, Vec<String>) {
    // When the server is back from every fault that began before `at` (`None`: one is still
    // going on at `at`).
    let back_by = |at: Instant| -> Option<Option<Instant>> {
        let mut latest = None;
        for f in injected.iter().filter(|f| f.start <= at) {
            let back = f.end + f.recovery.unwrap_or(RECOVERY_LIMIT);
            if back > at {
                return None;
            }
            latest = latest.max(Some(back));
        }
        Some(latest)
    };
    let subjects: BTreeSet<(&str, &str)> =
        writes.iter().map(|w| (w.kind, w.name.as_str())).collect();
    let mut checked = 0;
    let mut late = Vec::new();
    for sample in samples {
        for (kind, name) in &subjects {
            // The last write to the subject's phase before the sample (it must have applied).
            let Some(last) = writes
                .iter()
                .rev()
                .filter(|w| w.kind == *kind && w.name == *name && !w.state.starts_with("flag="))
                .find(|w| w.at <= sample.at)
            else {
                continue;
            };
            // It must be over by the debounce plus a bound after its rule stopped matching, or
            // after the server was back from the faults since, whichever is later.
            let Some(back) = back_by(sample.at) else {
                continue;
            };
            let since = back.map_or(last.at, |b| b.max(last.at));
            if !last.certain || sample.at < since + DEBOUNCE + END_BOUND {
                continue;
            }
            let operations: &[&str] = if *kind == "VirtualMachine" {
                &["Starting", "Migrating"]
            } else {
                &["Busy", "Draining"]
            };
            for operation in operations {
                if fixed_operation(kind, &last.state) == Some(*operation) {
                    continue;
                }
                checked += 1;
                let key = (
                    (*kind).to_owned(),
                    (*name).to_owned(),
                    (*operation).to_owned(),
                );
                if sample.active.contains(&key) {
                    late.push(format!(
                        "{kind} {name}: {operation} still Active {:.1}s after its rule stopped matching ({})",
                        sample.at.duration_since(last.at).as_secs_f64(),
                        last.state
                    ));
                }
            }
        }
    }
    (checked, late)
}

#[test]
fn late_endings_are_found() {
    let t0 = Instant::now();
    let at = |secs: u64| t0 + Duration::from_secs(secs);
    let write = |secs, state: &str| Write {
        at: at(secs),
        kind: "VirtualMachine",
        name: "vm0".into(),
        state: state.into(),
        certain: true,
    };
    let writes = [write(0, "Starting"), write(10, "Running")];
    let sample = |secs, active: bool| Sample {
        at: at(secs),
        warned: false,
        active: active
            .then(|| ("VirtualMachine".into(), "vm0".into(), "Starting".into()))
            .into_iter()
            .collect(),
    };
    // Ended in time: checked, not late.
    let (checked, late) = late_endings(&[sample(12, true), sample(20, false)], &writes, &[]);
    assert_eq!((checked, late.len()), (2, 0), "{late:?}");
    // Still Active 15 s after its rule stopped matching.
    let (_, late) = late_endings(&[sample(25, true)], &writes, &[]);
    assert_eq!(late.len(), 1, "{late:?}");
    // Unless the server was down meanwhile: the bound counts from when it was back.
    let fault = Injected {
        fault: Fault::KillServer,
        start: at(11),
        end: at(13),
        recovery: Some(Duration::from_secs(5)),
    };
    let (_, late) = late_endings(&[sample(25, true)], &writes, std::slice::from_ref(&fault));
    assert!(late.is_empty(), "{late:?}");
    let (_, late) = late_endings(&[sample(30, true)], &writes, &[fault]);
    assert_eq!(late.len(), 1, "{late:?}");
}

// ---------------------------------------------------------------------------------------------
// Expectations from the subjects' final states

/// The operations the rules say are in flight, from the subjects as they are now.
fn expected(env: &Env, world: &World) -> BTreeSet<OpKey> {
    let mut out = BTreeSet::new();
    let vms = env.get_json(User::Admin, &["get", "vm", "-n", &world.vm_ns]);
    for vm in vms["items"].as_array().unwrap() {
        let state = vm["status"]["printableStatus"].as_str().unwrap_or_default();
        if let Some(op) = fixed_operation("VirtualMachine", state) {
            out.insert((
                "VirtualMachine".into(),
                vm["metadata"]["name"].as_str().unwrap().into(),
                op.into(),
            ));
        }
    }
    let churn = env
        .kubectl(
            User::Admin,
            &["get", "ors", &world.churn_rules, "-o", "json"],
        )
        .ok()
        .and_then(|raw| serde_json::from_str::<Value>(&raw).ok());
    let flag_value = churn.as_ref().and_then(|rs| {
        let expr = rs["spec"]["rules"][0]["expression"].as_str()?;
        ["on", "yes"]
            .into_iter()
            .find(|v| expr.ends_with(&format!("'{v}'")))
    });
    let cms = env.get_json(User::Admin, &["get", "configmap", "-n", &world.cm_ns]);
    for cm in cms["items"].as_array().unwrap() {
        let name = cm["metadata"]["name"].as_str().unwrap();
        if !name.starts_with("cm") {
            continue;
        }
        let phase = cm["data"]["phase"].as_str().unwrap_or_default();
        if let Some(op) = fixed_operation("ConfigMap", phase) {
            out.insert(("ConfigMap".into(), name.into(), op.into()));
        }
        if flag_value.is_some_and(|v| cm["data"]["flag"] == v) {
            out.insert(("ConfigMap".into(), name.into(), "Flagged".into()));
        }
    }
    out
}

/// The node gates the expected operations close.
fn busy_nodes(env: &Env, world: &World, expected: &BTreeSet<OpKey>) -> BTreeSet<String> {
    let vms = env.get_json(User::Admin, &["get", "vm", "-n", &world.vm_ns]);
    vms["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|vm| {
            let name = vm["metadata"]["name"].as_str().unwrap();
            expected
                .iter()
                .any(|(k, n, _)| k == "VirtualMachine" && n == name)
        })
        .filter_map(|vm| vm["status"]["nodeName"].as_str().map(str::to_owned))
        .collect()
}

fn live_active(env: &Env, world: &World) -> Option<(BTreeSet<OpKey>, Vec<Value>)> {
    let mut active = BTreeSet::new();
    let mut all = Vec::new();
    for ns in [&world.vm_ns, &world.cm_ns] {
        let (items, _) = list(env, &format!("{LIVE}/namespaces/{ns}/inflightoperations")).ok()?;
        for o in &items {
            if o["status"]["phase"] == "Active" {
                active.insert(op_key(o));
            }
        }
        all.extend(items);
    }
    Some((active, all))
}

// ---------------------------------------------------------------------------------------------

#[test]
fn robustness() {
    let long = std::env::var("IFO_ROBUSTNESS").is_ok_and(|v| v == "long");
    let faulting = if long {
        Duration::from_secs(20 * 60)
    } else {
        Duration::from_secs(150)
    };
    let seed: u64 = std::env::var("IFO_ROBUSTNESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..1_000_000));
    println!(
        "robustness: {} profile, seed {seed} (replay with IFO_ROBUSTNESS_SEED={seed})",
        if long { "long" } else { "short" }
    );
    // Without the admission door: it would refuse the invalid ruleset of the InvalidRuleset
    // fault (or not, whenever the server is down), and the fault is the ruleset getting in.
    let env = Env::builder()
        .persist(true)
        .settings(&[("WATCH_PROBE_INTERVAL", PROBE_INTERVAL)])
        .ruleset_webhook(false)
        .start();

    let vm_ns = env.namespace("rob-vms");
    let cm_ns = env.namespace("rob-cms");
    let world = World {
        vm_rules: format!("rob-vms-{vm_ns}"),
        cm_rules: format!("rob-cms-{cm_ns}"),
        churn_rules: format!("rob-flags-{cm_ns}"),
        vm_ns,
        cm_ns,
    };
    // The server may read ConfigMaps in that namespace only (as an operator would grant it).
    env.apply(&format!(
        r#"{{"apiVersion":"v1","kind":"List","items":[
{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{{"name":"ifo-read-configmaps","namespace":"{ns}"}},
 "rules":[{{"apiGroups":[""],"resources":["configmaps"],"verbs":["get","list","watch"]}}]}},
{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{{"name":"ifo-read-configmaps","namespace":"{ns}"}},
 "roleRef":{{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"ifo-read-configmaps"}},
 "subjects":[{{"kind":"ServiceAccount","name":"ifo-apiserver","namespace":"ifo-system"}}]}}]}}"#,
        ns = world.cm_ns
    ));
    // The nodes the VMs run on: the gate of a node the cluster does not have does not exist.
    let _nodes: Vec<_> = (0..NODES).map(|n| env.node(&format!("rob-{n}"))).collect();
    env.apply(&vm_ruleset(&world.vm_rules, &world.vm_ns));
    env.apply(&cm_ruleset(&world.cm_rules, &world.cm_ns, BUSY));
    for i in 0..VMS {
        env.apply(&vm(&format!("vm{i}"), &world.vm_ns));
    }
    for i in 0..CONFIGMAPS {
        env.apply(
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm{i}"), "namespace": world.cm_ns},
                "data": {"phase": "Idle"}})
            .to_string(),
        );
    }
    env.wait_watching(&world.vm_rules);
    env.wait_watching(&world.cm_rules);

    let stop = AtomicBool::new(false);
    let violations = Violations::default();
    let writes = Mutex::new(Vec::new());
    let churn_changes = AtomicUsize::new(0);
    let histories: Vec<(String, Mutex<WatchHistory>)> = [&world.vm_ns, &world.cm_ns, &world.vm_ns]
        .iter()
        .map(|ns| ((*ns).clone(), Mutex::new(WatchHistory::default())))
        .collect();
    let paged = AtomicUsize::new(0);
    let samples = Mutex::new(Vec::new());
    let waits = AtomicUsize::new(0);
    let cleared = Mutex::new(Vec::new());
    let mut injected: Vec<Injected> = Vec::new();
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut pair = Pair::start(env);

    let client_stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| traffic(env, &world, seed + 1, &stop, &writes));
        s.spawn(|| churn(env, &world, seed + 2, &stop, &churn_changes));
        for (ns, history) in &histories {
            let (client_stop, violations) = (&client_stop, &violations);
            s.spawn(move || watcher(env, ns, client_stop, history, violations));
        }
        s.spawn(|| pager(env, &client_stop, &paged, &violations));
        s.spawn(|| sampler(env, &world, &client_stop, &samples));
        s.spawn(|| gate_waiter(env, seed + 3, &client_stop, &waits, &cleared));

        let began = Instant::now();
        // The long profile: at least 20 minutes and at least 100 faults.
        while began.elapsed() < faulting || (long && injected.len() < 100) {
            std::thread::sleep(Duration::from_millis(rng.u64(1000..10_000)));
            let fault = Fault::ALL[rng.usize(..Fault::ALL.len())];
            println!("{:>6.1}s  {fault:?}", began.elapsed().as_secs_f64());
            let done = inject(env, &world, &mut pair, fault, &mut rng);
            match done.recovery {
                Some(r) => println!("         recovered in {:.1}s", r.as_secs_f64()),
                None => violations.add(format!(
                    "{fault:?} at {:.1}s: not recovered within {RECOVERY_LIMIT:?}",
                    done.start.duration_since(began).as_secs_f64()
                )),
            }
            injected.push(done);
        }
        // Faults and traffic stop; the clients go on until the checks are done.
        stop.store(true, Ordering::SeqCst);
        std::thread::sleep(DEBOUNCE + END_BOUND + Duration::from_secs(2));

        // The Active operations are what the rules say of the subjects' final states.
        let settled = Instant::now();
        let want = expected(env, &world);
        let mut got = BTreeSet::new();
        let mut live = Vec::new();
        let converged = (0..300).any(|_| {
            if let Some((active, all)) = live_active(env, &world) {
                (got, live) = (active, all);
                if got == want {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(200));
            false
        });
        if !converged {
            violations.add(format!(
                "Active operations differ from the rules' verdict on the subjects' final states:\n  \
                 expected, not served: {:?}\n  served, not expected: {:?}",
                want.difference(&got).collect::<Vec<_>>(),
                got.difference(&want).collect::<Vec<_>>()
            ));
        }
        println!(
            "final state: {} operations Active as expected, settled {:.1}s after the traffic stopped",
            want.len(),
            settled.elapsed().as_secs_f64()
                + (DEBOUNCE + END_BOUND + Duration::from_secs(2)).as_secs_f64()
        );

        // The replicas' leader serves the same.
        let certs = env.client_cert_args(User::Admin);
        let certs: Vec<&str> = certs.iter().map(String::as_str).collect();
        let leader_agrees = (0..150).any(|_| {
            let served = pair.serving(env, &certs).and_then(|n| {
                let mut active = BTreeSet::new();
                for ns in [&world.vm_ns, &world.cm_ns] {
                    let (code, _, body) = env.direct_warned(
                        pair.current(n).port,
                        &format!("{LIVE}/namespaces/{ns}/inflightoperations"),
                        &certs,
                    );
                    let list: Value = serde_json::from_str(&body).ok()?;
                    if code != "200" {
                        return None;
                    }
                    for o in list["items"].as_array()? {
                        if o["status"]["phase"] == "Active" {
                            active.insert(op_key(o));
                        }
                    }
                }
                Some(active)
            });
            if served.as_ref() == Some(&want) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
            false
        });
        if !leader_agrees {
            violations.add("the replicas' leader does not serve what the rules say".into());
        }

        // Every watcher's picture is a fresh list's.
        for (ns, history) in &histories {
            let path = format!("{LIVE}/namespaces/{ns}/inflightoperations");
            let same = (0..100).any(|_| {
                let fresh = list(env, &path).map(|(items, _)| picture(&items));
                if fresh.is_ok_and(|f| f == history.lock().unwrap().state) {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(300));
                false
            });
            if !same {
                let fresh = list(env, &path).map(|(items, _)| picture(&items));
                violations.add(format!(
                    "watcher of {ns} ends with {:?}, a list shows {fresh:?}",
                    history.lock().unwrap().state
                ));
            }
        }

        // Node gates say what the operations say.
        let busy = busy_nodes(env, &world, &want);
        for n in 0..NODES {
            let node = format!("rob-{n}");
            let condition = if busy.contains(&node) {
                "False"
            } else {
                "True"
            };
            let waited = env.kubectl(
                User::Admin,
                &[
                    "wait",
                    &format!("--for=condition=Clear={condition}"),
                    &format!("gate/node.{node}"),
                    "--timeout=30s",
                ],
            );
            if let Err(e) = waited {
                violations.add(format!("gate node.{node} is not Clear={condition}: {e:#}"));
            }
        }

        // The copies are the live objects.
        let by_name: BTreeMap<&str, &Value> = live
            .iter()
            .map(|o| (o["metadata"]["name"].as_str().unwrap(), o))
            .collect();
        let ours = || -> Vec<Value> {
            let all = env.get_json(User::Admin, &["get", "inflightoperations.ifo.kubevirt.io"]);
            all["items"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| {
                    let ns = c["spec"]["subject"]["namespace"]
                        .as_str()
                        .unwrap_or_default();
                    ns == world.vm_ns || ns == world.cm_ns
                })
                .cloned()
                .collect()
        };
        let mirrors = |c: &Value| {
            let name = c["metadata"]["name"].as_str().unwrap_or_default();
            by_name.get(name).is_some_and(|l| {
                let started = c["metadata"]["annotations"]["ifo.kubevirt.io/started"]
                    .as_str()
                    .and_then(|s| s.parse::<jiff::Timestamp>().ok())
                    .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
                c["metadata"]["annotations"]["ifo.kubevirt.io/uid"] == l["metadata"]["uid"]
                    && started.as_deref() == l["metadata"]["creationTimestamp"].as_str()
                    && c["status"]["phase"] == l["status"]["phase"]
            })
        };
        let copies_same = (0..150).any(|_| {
            let copies = ours();
            if copies.len() == by_name.len() && copies.iter().all(mirrors) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
            false
        });
        if !copies_same {
            let copies = ours();
            violations.add(format!(
                "persisted copies differ from the live operations: copies {:?}, live {:?}",
                copies
                    .iter()
                    .map(|c| (
                        &c["metadata"]["name"],
                        &c["metadata"]["annotations"],
                        &c["status"]["phase"]
                    ))
                    .collect::<Vec<_>>(),
                live.iter()
                    .map(|l| (
                        &l["metadata"]["name"],
                        &l["metadata"]["uid"],
                        &l["metadata"]["creationTimestamp"]
                    ))
                    .collect::<Vec<_>>()
            ));
        }
        client_stop.store(true, Ordering::SeqCst);
    });

    // Answers while a feed was down (once the server may have noticed) carried the Warning,
    // and no wait for a clear gate succeeded then.
    let down: Vec<(Instant, Instant)> = injected
        .iter()
        .filter(|f| f.fault.feeds_down())
        .map(|f| (f.start + NOTICE, f.end))
        .collect();
    let samples = samples.into_inner().unwrap();
    let mut checked_down = 0;
    for sample in &samples {
        if down
            .iter()
            .any(|(from, to)| sample.at >= *from && sample.at <= *to)
        {
            checked_down += 1;
            if !sample.warned {
                violations.add("an answer served while a feed was down carried no Warning".into());
            }
        }
    }
    for (asked, done) in cleared.lock().unwrap().iter() {
        if down.iter().any(|(from, to)| asked >= from && done <= to) {
            violations.add("kubectl wait saw a node gate Clear while a feed was down".into());
        }
    }

    // Outside faults, an operation whose rule stopped matching is not Active past the debounce
    // plus a bound.
    let writes = writes.into_inner().unwrap();
    let (lag_checked, late) = late_endings(&samples, &writes, &injected);
    for v in late {
        violations.add(v);
    }

    // Never two leaders, by each replica's own log of its terms.
    let terms = pair.terms(0).len() + pair.terms(1).len();
    for overlap in pair.overlapping_terms() {
        violations.add(format!("two leaders at once: {overlap}"));
    }

    // The report.
    let histories: Vec<(String, WatchHistory)> = histories
        .into_iter()
        .map(|(ns, h)| (ns, h.into_inner().unwrap()))
        .collect();
    let mut by_kind: BTreeMap<Fault, Vec<Duration>> = BTreeMap::new();
    for f in &injected {
        by_kind
            .entry(f.fault)
            .or_default()
            .push(f.recovery.unwrap_or(RECOVERY_LIMIT));
    }
    let violations = violations.0.into_inner().unwrap();
    println!(
        "\n=== robustness report (seed {seed}, {} profile) ===",
        if long { "long" } else { "short" }
    );
    println!(
        "traffic: {} subject writes ({} unconfirmed), {} ruleset changes, {} paged lists, {} kubectl waits on gates",
        writes.len(),
        writes.iter().filter(|w| !w.certain).count(),
        churn_changes.load(Ordering::SeqCst),
        paged.load(Ordering::SeqCst),
        waits.load(Ordering::SeqCst)
    );
    println!("faults: {} in {:?}", injected.len(), faulting);
    for (fault, recoveries) in &by_kind {
        let mut sorted = recoveries.clone();
        sorted.sort();
        println!(
            "  {fault:?}: {} injected; recovery median {:.1}s, max {:.1}s",
            sorted.len(),
            sorted[sorted.len() / 2].as_secs_f64(),
            sorted.last().unwrap().as_secs_f64()
        );
    }
    for (ns, h) in &histories {
        println!(
            "watcher of {ns}: {} events over {} streams, {} resumed with 410 and listed again, {} lists",
            h.events, h.streams, h.expired, h.lists
        );
    }
    println!(
        "answers sampled directly: {} ({} while a feed was down, all checked for the Warning); \
         {lag_checked} operation endings checked against the debounce",
        samples.len(),
        checked_down
    );
    println!(
        "replicas: {terms} terms as leader over {} runs, checked for overlap",
        pair.replicas[0].len() + pair.replicas[1].len()
    );
    println!("violations: {}", violations.len());
    for v in &violations {
        println!("  - {v}");
    }
    assert!(
        violations.is_empty(),
        "{} violations (seed {seed})",
        violations.len()
    );
}
