//! The maintenance guard on the real node, installed as `apiservice/with-guard/` and
//! `certs/out/guard-webhook.yaml` ship it: `kubectl drain` of the node holds while an operation
//! is in flight there, printing the guard's message on each retry, and completes within about
//! one of kubectl's retries (5 s) once the node's gate is Clear; the node's maintenance override
//! lets it through at once; a gate that is Unknown holds it. Then evictions every 200 ms through
//! a failover, as shipped (`failurePolicy: Ignore`): the leader's pod deleted, every one is
//! answered 429 and none is allowed while the operation is in flight; the leader's container
//! killed, the same (the standby's door answers while the leader's address refuses
//! connections), and the live API keeps answering for a minute afterwards. Each replica's check
//! finds that kube-apiserver reaches the door it stands behind.

use anyhow::{Context, Result, bail, ensure};
use ifo_dev::User;
use serde_json::json;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::Ctx;
use super::workload::{holds, list, metrics_of, set_vm_status, settled};

/// The rulesets of these steps.
const RULESET: &str = "node-guard";
const BLIND_RULESET: &str = "node-guard-blind";

pub(crate) fn node_name(ctx: &Ctx) -> Result<String> {
    Ok(ctx
        .cluster
        .node()
        .as_ref()
        .context("no node")?
        .name()
        .to_owned())
}

fn admin(ctx: &Ctx, args: &[&str]) -> Result<String> {
    ctx.cluster.kubectl_run(User::Admin, args, None)
}

/// A ruleset for the steps' VirtualMachines that puts each on the node in `status.nodeName`;
/// `rule` says when it is `Migrating`.
pub(crate) fn ruleset(ctx: &Ctx, name: &str, rule: &str) -> Result<()> {
    ctx.cluster.apply(
        &json!({
            "apiVersion": "ifo.kubevirt.io/v1alpha1", "kind": "OperationRuleSet",
            "metadata": {"name": name},
            "spec": {
                "component": name,
                "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
                "namespaces": [ctx.ns],
                "labelExpressions": [{"key": "ifo.kubevirt.io/node",
                    "expression": "object.?status.?nodeName.orValue('')"}],
                "rules": [{"operation": "Migrating", "expression": rule}],
            }
        })
        .to_string(),
    )
}

/// A VirtualMachine of the steps on `node`, in `state`.
pub(crate) fn vm_on(ctx: &Ctx, name: &str, node: &str, state: &str) -> Result<()> {
    set_vm_status(
        ctx,
        name,
        json!({"nodeName": node, "printableStatus": state}),
    )
}

/// A pod of the pause image running on the node, labelled `app=<app>`; waits until it runs.
pub(crate) fn pod(ctx: &Ctx, name: &str, app: &str) -> Result<()> {
    ctx.cluster.apply(
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ctx.ns, "labels": {"app": app}},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "pause", "image": ifo_dev::NodeBinaries::PAUSE_IMAGE,
                    "imagePullPolicy": "Never"}],
            }
        })
        .to_string(),
    )?;
    admin(
        ctx,
        &[
            "-n",
            &ctx.ns,
            "wait",
            "--for=condition=Ready",
            &format!("pod/{name}"),
            "--timeout=60s",
        ],
    )
    .map(|_| ())
}

fn clear(ctx: &Ctx, node: &str) -> Result<String> {
    admin(
        ctx,
        &[
            "get",
            "gate",
            &format!("node.{node}"),
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Clear\")].status}",
        ],
    )
}

pub(crate) fn until_clear_is(ctx: &Ctx, node: &str, status: &str) -> Result<Instant> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = clear(ctx, node).unwrap_or_default();
        if now == status {
            return Ok(Instant::now());
        }
        if Instant::now() > deadline {
            bail!("gate node.{node} is Clear={now}, not {status}, after 60s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `kubectl drain` of the node for the pods labelled `app=<app>`, running; its stderr goes to
/// a file.
struct Drain {
    child: Child,
    stderr: PathBuf,
    started: Instant,
}

impl Drain {
    fn start(ctx: &Ctx, node: &str, app: &str) -> Result<Drain> {
        let stderr = ctx.cluster.dir().join(format!("drain-{app}.err"));
        let child = ctx
            .cluster
            .kubectl(User::Admin)
            .args([
                "drain",
                node,
                "--ignore-daemonsets",
                // The steps' pods have no controller.
                "--force",
                &format!("--pod-selector=app={app}"),
                "--timeout=180s",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr)?)
            .spawn()
            .context("starting kubectl drain")?;
        Ok(Drain {
            child,
            stderr,
            started: Instant::now(),
        })
    }

    fn said(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits until its stderr holds `text`.
    fn until_said(&mut self, text: &str, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let said = self.said();
            if said.contains(text) {
                return Ok(said);
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("kubectl drain ended ({status}) without saying {text:?}: {said}");
            }
            if Instant::now() > deadline {
                bail!("kubectl drain did not say {text:?} within {timeout:?}: {said}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until it ends; its success and when.
    fn ended(&mut self, timeout: Duration) -> Result<(bool, Instant)> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok((status.success(), Instant::now()));
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                bail!(
                    "kubectl drain still running after {timeout:?}: {}",
                    self.said()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The node schedulable again, whatever happened.
struct Uncordon<'a>(&'a Ctx, String);

impl Drop for Uncordon<'_> {
    fn drop(&mut self) {
        if let Err(e) = admin(self.0, &["uncordon", &self.1]) {
            eprintln!("could not uncordon {}: {e:#}", self.1);
        }
    }
}

pub(crate) fn drain_waits_while_the_node_is_not_clear(ctx: &Ctx) -> Result<()> {
    // The guard turned on in the running install, as docs/operating.md says.
    ctx.install.enable_guard(&ctx.cluster)?;
    let node = node_name(ctx)?;
    let _uncordon = Uncordon(ctx, node.clone());
    ruleset(
        ctx,
        RULESET,
        "object.?status.?printableStatus.orValue('') == 'Migrating'",
    )?;
    pod(ctx, "drained", "drained")?;
    vm_on(ctx, "vm-guard", &node, "Migrating")?;
    until_clear_is(ctx, &node, "False")?;

    // Held: kubectl prints the guard's message on each retry, the pod keeps running.
    let mut drain = Drain::start(ctx, &node, "drained")?;
    let said = drain.until_said("will retry after 5s", Duration::from_secs(30))?;
    // Either door's refusal (kube-apiserver asks both and says the first it gets).
    for text in [
        "admission webhook \"ifo-maintenance-guard",
        ".ifo.kubevirt.io\" denied the request",
        &format!("node {node} is not clear for maintenance: 1 operation in flight"),
        "VirtualMachine Migrating",
        &format!("kubectl get maintenancegate node.{node}"),
    ] {
        ensure!(
            said.contains(text),
            "kubectl drain did not print {text:?}: {said}"
        );
    }
    std::thread::sleep(Duration::from_secs(6));
    let phase = admin(
        ctx,
        &[
            "-n",
            &ctx.ns,
            "get",
            "pod",
            "drained",
            "-o",
            "jsonpath={.status.phase}",
        ],
    )?;
    ensure!(phase == "Running", "the held pod is {phase}");
    let retries = drain.said().matches("will retry after 5s").count();
    println!(
        "  drain held for {:.0}s ({retries} retries), printing: {}",
        drain.started.elapsed().as_secs_f64(),
        said.lines()
            .find(|l| l.contains("not clear"))
            .unwrap_or_default()
    );

    // The operation ends: once the gate is Clear (grace included), the drain completes within
    // about one retry.
    vm_on(ctx, "vm-guard", &node, "Running")?;
    let cleared = until_clear_is(ctx, &node, "True")?;
    let (ok, ended) = drain.ended(Duration::from_secs(30))?;
    ensure!(ok, "kubectl drain failed: {}", drain.said());
    let after = ended.duration_since(cleared);
    println!(
        "  drain completed {:.1}s after the node's gate cleared",
        after.as_secs_f64()
    );
    ensure!(
        after <= Duration::from_secs(8),
        "the drain took {after:?} after the gate cleared"
    );
    admin(ctx, &["uncordon", &node])?;

    // The override: the drain goes through at once, and the node says so.
    pod(ctx, "overridden", "overridden")?;
    vm_on(ctx, "vm-guard", &node, "Migrating")?;
    until_clear_is(ctx, &node, "False")?;
    admin(
        ctx,
        &[
            "annotate",
            "node",
            &node,
            "ifo.kubevirt.io/maintenance-override=node test",
        ],
    )?;
    std::thread::sleep(Duration::from_secs(1));
    let mut drain = Drain::start(ctx, &node, "overridden")?;
    let (ok, ended) = drain.ended(Duration::from_secs(30))?;
    admin(
        ctx,
        &[
            "annotate",
            "node",
            &node,
            "ifo.kubevirt.io/maintenance-override-",
        ],
    )?;
    ensure!(
        ok,
        "kubectl drain failed with the override: {}",
        drain.said()
    );
    let took = ended.duration_since(drain.started);
    ensure!(
        !drain.said().contains("will retry"),
        "held despite the override: {}",
        drain.said()
    );
    println!(
        "  with the override the drain completed in {:.1}s",
        took.as_secs_f64()
    );
    let described = admin(ctx, &["describe", "node", &node])?;
    ensure!(
        described.contains("MaintenanceOverride"),
        "no override Event on the node:\n{described}"
    );
    admin(ctx, &["uncordon", &node])?;

    // Unknown holds too: a ruleset whose rule fails on an object of the node.
    vm_on(ctx, "vm-guard", &node, "Running")?;
    // (It passes the ruleset door, which sees a bool; it fails on every object: a VM name is no
    // number.)
    ruleset(ctx, BLIND_RULESET, "int(object.metadata.name) > 0")?;
    until_clear_is(ctx, &node, "Unknown")?;
    pod(ctx, "unverified", "unverified")?;
    let mut drain = Drain::start(ctx, &node, "unverified")?;
    drain.until_said(
        "is not known to be clear for maintenance",
        Duration::from_secs(30),
    )?;
    admin(ctx, &["delete", "ors", BLIND_RULESET])?;
    until_clear_is(ctx, &node, "True")?;
    let (ok, _) = drain.ended(Duration::from_secs(30))?;
    ensure!(ok, "kubectl drain failed: {}", drain.said());
    both_doors_reached(ctx)
}

/// Each replica's check finds that kube-apiserver reaches the door it stands behind (the
/// leader's through the Service `ifo-apiserver`, the standby's through `ifo-guard`, both at the
/// pods' port 9443): `ifo_guard_reached` 1 on both, within two of the checks' 30 s.
fn both_doors_reached(ctx: &Ctx) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(100);
    loop {
        let pods = settled(ctx, Duration::from_secs(60))?;
        let mut read = Vec::new();
        for pod in &pods {
            let metrics = metrics_of(ctx, pod)?;
            let reached = metrics
                .lines()
                .find_map(|l| l.strip_prefix("ifo_guard_reached "))
                .and_then(|v| v.trim().parse::<f64>().ok());
            read.push((pod.name.clone(), pod.leader, reached));
        }
        if read.iter().all(|(_, _, reached)| *reached == Some(1.0)) {
            println!("kube-apiserver reaches both doors: {read:?}");
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("ifo_guard_reached (pod, leader, value): {read:?}");
        }
        std::thread::sleep(Duration::from_secs(5));
    }
}

/// One eviction of `pod` as kubectl drain sends it: `Ok(true)` allowed, `Ok(false)` refused by
/// the guard (429), `Err` anything else.
pub(crate) fn evict(ctx: &Ctx, pod: &str) -> Result<bool> {
    let file = ctx.cluster.dir().join(format!("eviction-{pod}.json"));
    if !file.exists() {
        std::fs::write(
            &file,
            json!({"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": pod, "namespace": ctx.ns}})
            .to_string(),
        )?;
    }
    let out = ctx
        .cluster
        .kubectl(User::Admin)
        .args([
            "create",
            "--raw",
            &format!("/api/v1/namespaces/{}/pods/{pod}/eviction", ctx.ns),
            "-f",
            &file.display().to_string(),
            "--request-timeout=10s",
        ])
        .stdin(Stdio::null())
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        Ok(true)
    } else if stderr.contains("TooManyRequests") && stderr.contains("ifo-maintenance-guard") {
        Ok(false)
    } else {
        bail!("{}", stderr.trim())
    }
}

/// What evictions of `pod`, one every 200 ms for `for_`, got while `lose` ran after 3 s: how
/// many the guard held, when (after `lose`) one was allowed, and those not answered with when
/// and why. An allowed eviction ends the evictions: the pod is gone.
struct Evictions {
    held: usize,
    allowed: Option<Duration>,
    failed: Vec<String>,
}

fn evictions_through(
    ctx: &Ctx,
    pod: &str,
    for_: Duration,
    lose: impl FnOnce() -> Result<()>,
) -> Result<Evictions> {
    let started = Instant::now();
    let mut lose = Some(lose);
    let mut lost = None;
    let mut seen = Evictions {
        held: 0,
        allowed: None,
        failed: Vec::new(),
    };
    while started.elapsed() < for_ {
        if started.elapsed() >= Duration::from_secs(3)
            && let Some(lose) = lose.take()
        {
            lose()?;
            lost = Some(Instant::now());
        }
        let asked = Instant::now();
        match evict(ctx, pod) {
            Ok(false) => seen.held += 1,
            Ok(true) => {
                seen.allowed =
                    Some(lost.map_or(Duration::ZERO, |l| asked.saturating_duration_since(l)));
                break;
            }
            Err(e) => seen
                .failed
                .push(format!("{:.1}s: {e:#}", started.elapsed().as_secs_f64())),
        }
        std::thread::sleep(Duration::from_millis(200).saturating_sub(asked.elapsed()));
    }
    Ok(seen)
}

/// Lists every second for `for_`: each must hold `expected` (the live API keeps answering
/// through kube-apiserver, the Service and the leader after a failover).
fn keeps_listing(ctx: &Ctx, expected: &[(&str, &str)], for_: Duration) -> Result<()> {
    let started = Instant::now();
    let mut wrong = Vec::new();
    while started.elapsed() < for_ {
        let asked = Instant::now();
        match list(ctx) {
            Ok(names) if holds(&names, expected) => {}
            Ok(names) => wrong.push(format!(
                "{:.0}s: listed {names:?}",
                started.elapsed().as_secs_f64()
            )),
            Err(e) => wrong.push(format!("{:.0}s: {e:#}", started.elapsed().as_secs_f64())),
        }
        std::thread::sleep(Duration::from_secs(1).saturating_sub(asked.elapsed()));
    }
    ensure!(
        wrong.is_empty(),
        "the live API did not keep answering after the failover: {} of {:.0} lists wrong: {wrong:#?}\n{}\n{}",
        wrong.len(),
        for_.as_secs_f64(),
        admin(
            ctx,
            &[
                "get",
                "apiservice",
                "v1alpha1.live.ifo.kubevirt.io",
                "-o",
                "jsonpath={.status.conditions}"
            ]
        )
        .unwrap_or_default(),
        admin(
            ctx,
            &[
                "-n",
                ifo_dev::install::NAMESPACE,
                "get",
                "pods,endpointslices",
                "--show-labels",
                "-o",
                "wide"
            ]
        )
        .unwrap_or_default()
    );
    Ok(())
}

/// Every eviction tried `during` something was answered by the guard (none in `failed`) and
/// refused: none allowed (`allowed` says when one was).
pub(crate) fn all_refused(allowed: Option<String>, failed: &[String], during: &str) -> Result<()> {
    ensure!(
        allowed.is_none(),
        "an eviction was allowed {} {during}, while the node had an operation in flight",
        allowed.unwrap_or_default()
    );
    ensure!(
        failed.is_empty(),
        "evictions not answered by the guard {during}: {failed:#?}"
    );
    Ok(())
}

/// Evictions of `pod` every 200 ms for 20 s while `lose` (named `what`) takes the leader away
/// after 3 s: every one answered 429 by the guard, none allowed, none unanswered.
fn all_held_through(ctx: &Ctx, what: &str, lose: impl FnOnce() -> Result<()>) -> Result<()> {
    let seen = evictions_through(ctx, "kept", Duration::from_secs(20), lose)?;
    println!(
        "  evictions every 200 ms through {what}: {} held by the guard, {}, {} not answered",
        seen.held,
        seen.allowed.map_or("none allowed".to_string(), |d| format!(
            "one allowed {:.1}s after it",
            d.as_secs_f64()
        )),
        seen.failed.len()
    );
    all_refused(
        seen.allowed
            .map(|d| format!("{:.1}s after {what}", d.as_secs_f64())),
        &seen.failed,
        &format!("through {what}"),
    )?;
    ensure!(seen.held >= 50, "only {} evictions in 20 s", seen.held);
    Ok(())
}

pub(crate) fn guard_answers_through_a_failover(ctx: &Ctx) -> Result<()> {
    let node = node_name(ctx)?;
    vm_on(ctx, "vm-guard", &node, "Migrating")?;
    until_clear_is(ctx, &node, "False")?;
    let expected = [("vm-guard", "Migrating")];

    // The leader's pod deleted (a rollout, a drain of its node): as shipped, failurePolicy
    // Ignore. The deleted pod leaves the Service's endpoints while it still answers (its
    // shutdown delay), and the standby answers from its own index: no window.
    pod(ctx, "kept", "kept")?;
    let leader = settled(ctx, Duration::from_secs(180))?[0].clone();
    all_held_through(ctx, "the deletion of the leader's pod", || {
        admin(
            ctx,
            &[
                "-n",
                ifo_dev::install::NAMESPACE,
                "delete",
                "pod",
                &leader.name,
                "--wait=false",
            ],
        )
        .map(|_| ())
    })?;
    keeps_listing(ctx, &expected, Duration::from_secs(10))?;

    // The leader's container killed (an OOM kill): until kubelet reports it and its endpoint
    // leaves the Service, kube-apiserver's connections to the leader's door are refused, which
    // failurePolicy Ignore lets through; the standby's door answers all the while. None may be
    // let through, and the live API must keep answering afterwards.
    let leader = settled(ctx, Duration::from_secs(180))?[0].clone();
    all_held_through(ctx, "a crash of the leader's container", || {
        ctx.cluster
            .node()
            .as_ref()
            .context("no node")?
            .kill_container(&leader.container_id)
    })?;
    let after = settled(ctx, Duration::from_secs(180))?;
    ensure!(
        after
            .iter()
            .any(|p| p.uid == leader.uid && p.restarts > leader.restarts),
        "the crashed container was not restarted in its pod: {after:?}"
    );
    keeps_listing(ctx, &expected, Duration::from_secs(60))?;

    vm_on(ctx, "vm-guard", &node, "Running")?;
    admin(ctx, &["delete", "ors", RULESET])?;
    admin(
        ctx,
        &[
            "-n",
            &ctx.ns,
            "delete",
            "pod",
            "kept",
            "--wait=false",
            "--ignore-not-found",
        ],
    )
    .map(|_| ())
}
