//! The Helm chart (`deploy/chart/`, packaged as users get it) on the real node, as a newcomer installs it once the
//! kustomize install is gone: `helm install` with the guard and the server's own certificates
//! (`certificates.source=server`, as GitOps installs want it: no manifest holds a key) serves
//! through the Service once the server has made its certificate and written its CA where
//! kube-apiserver trusts it, and holds an eviction while the node is not clear; `helm upgrade` to a changed setting
//! (a rollout of both replicas) while evictions of a held node's pod and lists of every
//! operation are tried every 200 ms and a `-w` client watches and reconnects; `helm uninstall`
//! leaves nothing that blocks: a namespace deleted right after it goes; the same install, upgrade
//! and uninstall with a Secret of one's own and with the chart's own CA; a single replica, which
//! values.yaml says works, never blocks the drain of its own node; and with two replicas on two
//! nodes, each node drains in turn.

use anyhow::{Context, Result, ensure};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ifo_dev::helm;
use ifo_dev::install::{APISERVICE, NAMESPACE};
use ifo_dev::{KeyPair, Usage, User};
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::Ctx;
use super::guard::{all_refused, evict, node_name, pod, ruleset, until_clear_is, vm_on};
use super::workload::{holds, pods, settled, until_listed};

/// The ruleset of these steps.
const RULESET: &str = "node-chart";

/// The chart as users get it: packaged (`helm package`), its linked files copied in.
fn packaged() -> Result<String> {
    let dir = std::env::temp_dir().join(format!("ifo-node-chart-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(helm::package(&dir)?.display().to_string())
}

fn admin(ctx: &Ctx, args: &[&str]) -> Result<String> {
    ctx.cluster.kubectl_run(User::Admin, args, None)
}

/// `helm install` with the guard and the server's own certificates; the live API served
/// through the Service with the CA the server made, and an eviction of a pod on the node
/// refused while a VM migrates there.
pub(crate) fn install(ctx: &Ctx) -> Result<()> {
    installed(
        ctx,
        "the server's own certificates",
        "guard.enabled=true,certificates.source=server",
        &[],
    )?;
    // The certificate is the server's, and kube-apiserver trusts its CA (the live API answered).
    let secret = secret(ctx, "ifo-apiserver-tls")?;
    ensure!(
        secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "ifo-apiserver",
        "the serving certificate was not made by the server: {}",
        secret["metadata"]
    );
    ensure!(
        trusted_ca(ctx)? == secret["data"]["ca.crt"],
        "the APIService does not trust the server's CA"
    );
    listed_and_holding(ctx)
}

/// The chart's other certificate sources, each installed with the guard (the live API listed
/// through the Service, an eviction refused), upgraded under load as in the upgrade step and
/// uninstalled as in the uninstall step: a Secret of one's own (`certificates.source=secret`,
/// made beforehand, its CA given as `caBundle`), then the chart's own CA
/// (`certificates.source=chart`), which the upgrade keeps.
pub(crate) fn other_certificate_sources(ctx: &Ctx) -> Result<()> {
    let dir = ctx.cluster.dir().join("own-certificate");
    std::fs::create_dir_all(&dir)?;
    let ca = KeyPair::new_ca("ifo-own-ca")?;
    let names: Vec<String> = ["ifo-apiserver", "ifo-guard"]
        .iter()
        .flat_map(|service| {
            [
                format!("{service}.{NAMESPACE}.svc"),
                format!("{service}.{NAMESPACE}.svc.cluster.local"),
            ]
        })
        .collect();
    let dns: Vec<&str> = names.iter().map(String::as_str).collect();
    let serving = ca.issue(
        &names[0],
        &[],
        Usage::Server {
            dns: &dns,
            ips: &[],
        },
    )?;
    for (file, pem) in [
        ("tls.crt", &serving.cert_pem),
        ("tls.key", &serving.key_pem),
        ("ca.crt", &ca.cert_pem),
    ] {
        std::fs::write(dir.join(file), pem)?;
    }
    let file = |name: &str| format!("--from-file={name}={}", dir.join(name).display());
    created(ctx, &["create", "namespace", NAMESPACE])?;
    admin(
        ctx,
        &[
            "-n",
            NAMESPACE,
            "create",
            "secret",
            "generic",
            "own-tls",
            "--type=kubernetes.io/tls",
            &file("tls.crt"),
            &file("tls.key"),
            &file("ca.crt"),
        ],
    )?;
    let ca_file = format!(
        "certificates.secret.caBundle={}",
        dir.join("ca.crt").display()
    );
    installed(
        ctx,
        "a Secret of one's own",
        "guard.enabled=true,certificates.source=secret,certificates.secret.name=own-tls",
        &["--set-file", &ca_file],
    )?;
    // The chart trims the PEM it is given before it encodes it.
    let given = BASE64.encode(String::from_utf8(ca.cert_pem.clone())?.trim());
    ensure!(
        trusted_ca(ctx)? == given,
        "the APIService does not trust the CA given as certificates.secret.caBundle"
    );
    listed_and_holding(ctx)?;
    upgrade(ctx)?;
    uninstall(ctx)?;

    installed(
        ctx,
        "the chart's own CA",
        "guard.enabled=true,certificates.source=chart",
        &[],
    )?;
    // The CA the chart made and keeps (Secret ifo-apiserver-ca) is the one kube-apiserver
    // trusts, before the upgrade and after it.
    let kept = || -> Result<serde_json::Value> {
        Ok(secret(ctx, "ifo-apiserver-ca")?["data"]["tls.crt"].clone())
    };
    let before = kept()?;
    ensure!(
        before.as_str().is_some_and(|ca| !ca.is_empty()) && trusted_ca(ctx)? == before,
        "the APIService does not trust the CA the chart made"
    );
    listed_and_holding(ctx)?;
    upgrade(ctx)?;
    ensure!(
        kept()? == before && trusted_ca(ctx)? == before,
        "the upgrade changed the CA the chart made and kube-apiserver trusts"
    );
    uninstall(ctx)
}

/// `admin` running `args`, a `create` that may find its object already there.
fn created(ctx: &Ctx, args: &[&str]) -> Result<()> {
    match admin(ctx, args) {
        Err(e) if !format!("{e:#}").contains("AlreadyExists") => Err(e),
        _ => Ok(()),
    }
}

/// The Secret `name` of the release's namespace.
fn secret(ctx: &Ctx, name: &str) -> Result<serde_json::Value> {
    let json = admin(ctx, &["-n", NAMESPACE, "get", "secret", name, "-o", "json"])?;
    Ok(serde_json::from_str(&json)?)
}

/// The CA the APIService trusts (its `caBundle`, base64).
fn trusted_ca(ctx: &Ctx) -> Result<serde_json::Value> {
    let apiservice: serde_json::Value =
        serde_json::from_str(&admin(ctx, &["get", APISERVICE, "-o", "json"])?)?;
    Ok(apiservice["spec"]["caBundle"].clone())
}

/// `helm install` of the packaged chart with the values `set` (and `args`), Available with two
/// replicas and a leader; `what` names the install in what it prints.
fn installed(ctx: &Ctx, what: &str, set: &str, args: &[&str]) -> Result<()> {
    // The kustomize install's uninstall, or the last chart's, deleted the steps' namespace.
    created(ctx, &["create", "namespace", &ctx.ns])?;
    let t = Instant::now();
    helm_install_with(ctx, set, args)?;
    ctx.install
        .wait_available(&ctx.cluster, Duration::from_secs(240))?;
    settled(ctx, Duration::from_secs(180))?;
    println!(
        "  helm install with the guard and {what}: Available with two replicas and a leader in \
         {:.1}s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A VM migrating on the node, listed through the Service, its node not clear, and an eviction
/// of a pod there refused by the guard the chart installed.
fn listed_and_holding(ctx: &Ctx) -> Result<()> {
    let node = node_name(ctx)?;
    ruleset(
        ctx,
        RULESET,
        "object.?status.?printableStatus.orValue('') == 'Migrating'",
    )?;
    vm_on(ctx, "vm-chart", &node, "Migrating")?;
    until_listed(
        ctx,
        &[("vm-chart", "Migrating")],
        Instant::now(),
        Duration::from_secs(60),
    )?;
    until_clear_is(ctx, &node, "False")?;
    pod(ctx, "held", "held")?;
    ensure!(
        !evict(ctx, "held")?,
        "the guard the chart installed let an eviction through while the node is not clear"
    );
    Ok(())
}

/// What the clients saw during the upgrade.
#[derive(Default)]
struct Seen {
    evictions_held: usize,
    evictions_allowed: usize,
    evictions_failed: Vec<String>,
    lists: usize,
    lists_failed: Vec<String>,
    /// Operation names the watching client printed, and when.
    watched: BTreeSet<String>,
    watch_starts: usize,
}

/// `helm upgrade` to a changed setting while a held node's pod is evicted and every operation
/// listed every 200 ms, and a `kubectl get ifos -w` client (started again whenever it ends)
/// watches operations that begin during the upgrade: no eviction allowed or unanswered, no
/// list failed, every operation seen by the watching client.
pub(crate) fn upgrade(ctx: &Ctx) -> Result<()> {
    let before = settled(ctx, Duration::from_secs(180))?;
    let chart = packaged()?;
    let expected = [("vm-chart", "Migrating")];
    let stop = AtomicBool::new(false);
    let creating_stops = AtomicBool::new(false);
    let seen = Mutex::new(Seen::default());
    let began: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let (upgraded, took) = std::thread::scope(|s| -> Result<(Result<String>, Duration)> {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let asked = Instant::now();
                match evict(ctx, "held") {
                    Ok(false) => seen.lock().evictions_held += 1,
                    Ok(true) => {
                        seen.lock().evictions_allowed += 1;
                        break;
                    }
                    Err(e) => seen.lock().evictions_failed.push(format!("{e:#}")),
                }
                std::thread::sleep(Duration::from_millis(200).saturating_sub(asked.elapsed()));
            }
        });
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let asked = Instant::now();
                let listed = admin(
                    ctx,
                    &["get", "ifos", "-A", "-o", "name", "--request-timeout=10s"],
                );
                let mut seen = seen.lock();
                seen.lists += 1;
                match listed {
                    Ok(text) => {
                        let names: Vec<String> = text
                            .lines()
                            .map(|l| l.rsplit('/').next().unwrap_or(l).to_string())
                            .collect();
                        if !holds(&names, &expected) {
                            seen.lists_failed
                                .push(format!("listed without vm-chart: {names:?}"));
                        }
                    }
                    Err(e) => seen.lists_failed.push(format!("{e:#}")),
                }
                drop(seen);
                std::thread::sleep(Duration::from_millis(200).saturating_sub(asked.elapsed()));
            }
        });
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                seen.lock().watch_starts += 1;
                let child = ctx
                    .cluster
                    .kubectl(User::Admin)
                    .args(["get", "ifos", "-n", &ctx.ns, "-w", "-o", "name"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn();
                let Ok(mut child) = child else { continue };
                let stdout = child.stdout.take().unwrap();
                // Read until the watch ends, or the test stops it.
                let reader = std::thread::spawn({
                    move || {
                        BufReader::new(stdout)
                            .lines()
                            .map_while(Result::ok)
                            .collect::<Vec<String>>()
                    }
                });
                while !stop.load(Ordering::Relaxed) && child.try_wait().ok().flatten().is_none() {
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = child.kill();
                let _ = child.wait();
                let lines = reader.join().unwrap_or_default();
                seen.lock().watched.extend(
                    lines
                        .iter()
                        .map(|l| l.rsplit('/').next().unwrap_or(l).to_string()),
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        // Operations beginning while the replicas are replaced, one a second.
        s.spawn(|| {
            let mut n = 0;
            while !creating_stops.load(Ordering::Relaxed) {
                n += 1;
                let name = format!("w-{n}");
                if vm_on(ctx, &name, "elsewhere", "Migrating").is_ok() {
                    began.lock().push(name);
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        std::thread::sleep(Duration::from_secs(3));
        let t = Instant::now();
        let upgraded = helm::run(
            &ctx.cluster,
            &[
                "upgrade",
                helm::RELEASE,
                &chart,
                "-n",
                NAMESPACE,
                "--reset-then-reuse-values",
                "--set",
                "settings.DEBOUNCE_THRESHOLD=45s",
                "--wait",
                "--timeout=5m",
            ],
        );
        let took = t.elapsed();
        let settled_after = settled(ctx, Duration::from_secs(120));
        // No more operations begin; the clients go on against the new replicas for a while, in
        // which the last one begun is seen too.
        creating_stops.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_secs(5));
        stop.store(true, Ordering::Relaxed);
        settled_after?;
        Ok((upgraded, took))
    })?;
    upgraded.context("helm upgrade")?;
    let after = settled(ctx, Duration::from_secs(60))?;
    ensure!(
        after.iter().all(|p| before.iter().all(|b| b.uid != p.uid)),
        "the upgrade did not replace both pods: before {before:?}, after {after:?}"
    );
    let seen = seen.into_inner();
    let began = began.into_inner();
    let lost: Vec<&String> = began
        .iter()
        .filter(|vm| {
            !seen
                .watched
                .iter()
                .any(|op| op.starts_with(&format!("{vm}-migrating-")))
        })
        .collect();
    println!(
        "  helm upgrade ({:.0}s, both replicas replaced): {} evictions held, {} allowed, {} \
         unanswered; {} lists, {} failed; {} operations began, {} never seen by the watching \
         client ({} watches)",
        took.as_secs_f64(),
        seen.evictions_held,
        seen.evictions_allowed,
        seen.evictions_failed.len(),
        seen.lists,
        seen.lists_failed.len(),
        began.len(),
        lost.len(),
        seen.watch_starts
    );
    all_refused(
        (seen.evictions_allowed > 0).then(|| format!("({})", seen.evictions_allowed)),
        &seen.evictions_failed,
        "during the upgrade",
    )?;
    ensure!(
        seen.lists_failed.is_empty(),
        "lists failed during the upgrade: {:#?}",
        seen.lists_failed
    );
    ensure!(
        lost.is_empty(),
        "operations the watching client never saw: {lost:?}"
    );
    ensure!(
        seen.evictions_held >= 50,
        "only {} evictions",
        seen.evictions_held
    );
    Ok(())
}

/// `helm uninstall`: the registrations and the server are gone, and nothing blocks: a namespace
/// deleted right after it goes, discovery answers, an eviction is not held.
pub(crate) fn uninstall(ctx: &Ctx) -> Result<()> {
    helm_uninstall(ctx)?;
    let t = Instant::now();
    admin(ctx, &["delete", "namespace", &ctx.ns, "--timeout=60s"])
        .context("a namespace could not be deleted right after helm uninstall")?;
    println!(
        "  helm uninstall: a namespace deleted right after it went in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    admin(ctx, &["api-resources", "-o", "name"]).context("discovery fails after the uninstall")?;
    for what in [
        APISERVICE,
        "validatingwebhookconfiguration/ifo-ruleset-validation",
        "validatingwebhookconfiguration/ifo-maintenance-guard",
    ] {
        let left = admin(ctx, &["get", what, "--ignore-not-found", "-o", "name"])?;
        ensure!(
            left.trim().is_empty(),
            "{what} is left after helm uninstall"
        );
    }
    let left = admin(
        ctx,
        &[
            "-n",
            NAMESPACE,
            "get",
            "deployments,services,pods",
            "-o",
            "name",
        ],
    )?;
    ensure!(left.trim().is_empty(), "left after helm uninstall: {left}");
    kept_removed(ctx)
}

/// `helm install` of the packaged chart with the values `set`, waiting until it is ready.
fn helm_install(ctx: &Ctx, set: &str) -> Result<()> {
    helm_install_with(ctx, set, &[])
}

/// `helm install` of the packaged chart with the values `set` and the further `args`, waiting
/// until it is ready.
fn helm_install_with(ctx: &Ctx, set: &str, args: &[&str]) -> Result<()> {
    let chart = packaged()?;
    let mut all = vec![
        "install",
        helm::RELEASE,
        &chart,
        "-n",
        NAMESPACE,
        "--create-namespace",
        "--set",
        set,
        "--wait",
        "--timeout=5m",
    ];
    all.extend_from_slice(args);
    helm::run(&ctx.cluster, &all)?;
    Ok(())
}

/// `helm uninstall`, waiting for what it deletes to go.
fn helm_uninstall(ctx: &Ctx) -> Result<()> {
    helm::run(
        &ctx.cluster,
        &[
            "uninstall",
            helm::RELEASE,
            "-n",
            NAMESPACE,
            "--wait",
            "--timeout=3m",
        ],
    )?;
    Ok(())
}

/// What the chart keeps on purpose (the CRD with anyone's rulesets, the CA), removed by hand as
/// docs/operating.md says.
fn kept_removed(ctx: &Ctx) -> Result<()> {
    admin(
        ctx,
        &[
            "delete",
            "crd",
            "operationrulesets.ifo.kubevirt.io",
            "--timeout=60s",
        ],
    )?;
    admin(ctx, &["delete", "namespace", NAMESPACE, "--timeout=120s"])?;
    Ok(())
}

/// `helm install --set replicas=1` with the guard: no PodDisruptionBudget (one would refuse the
/// only replica's eviction forever), and `kubectl drain` of the server's own node completes: the
/// guard, asked about its own pod's eviction, answers and lets it go while the node is clear
/// (kube-apiserver counts its answers, and no eviction let through unanswered). The chart and
/// its CRD are then removed as in the uninstall step.
pub(crate) fn one_replica_lets_its_node_drain(ctx: &Ctx) -> Result<()> {
    // The guard's own checks (dry-run evictions through kube-apiserver) are put off past the
    // step: kube-apiserver's counts below are the drain's alone.
    helm_install(
        ctx,
        "replicas=1,guard.enabled=true,certificates.source=server,\
         settings.GUARD_REACH_CHECK_INTERVAL=1h",
    )?;
    ctx.install
        .wait_available(&ctx.cluster, Duration::from_secs(240))?;
    let budgets = admin(ctx, &["-n", NAMESPACE, "get", "pdb", "-o", "name"])?;
    ensure!(
        budgets.trim().is_empty(),
        "one replica, and a PodDisruptionBudget that would hold its drain: {budgets}"
    );
    let node = node_name(ctx)?;
    let t = Instant::now();
    drained_by_the_guard(ctx, &node)?;
    println!(
        "  helm install --set replicas=1: its node drained in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    helm_uninstall(ctx)?;
    kept_removed(ctx)
}

/// `helm install` with the chart's two replicas and the guard, on two nodes (a second joins for
/// the step): the replicas spread over both (the chart's anti-affinity), and the
/// PodDisruptionBudget (`minAvailable: 1`) lets `kubectl drain` of each node in turn complete,
/// each replica evicted with the guard's answer once the other is ready, the server Available
/// again before the next drain. The second node is then stopped and removed.
pub(crate) fn two_replicas_let_each_node_drain(ctx: &Ctx) -> Result<()> {
    let image = ctx.cluster.dir().join("ifo-apiserver.oci.tar");
    let drains = (|| -> Result<()> {
        let second = ctx.cluster.start_second_node(&[&image])?;
        helm_install(
            ctx,
            "guard.enabled=true,certificates.source=server,\
             settings.GUARD_REACH_CHECK_INTERVAL=1h",
        )?;
        ctx.install
            .wait_available(&ctx.cluster, Duration::from_secs(240))?;
        let budget = admin(
            ctx,
            &[
                "-n",
                NAMESPACE,
                "get",
                "pdb",
                "-o",
                "jsonpath={.items[*].spec.minAvailable}",
            ],
        )?;
        ensure!(
            budget.trim() == "1",
            "two replicas and no PodDisruptionBudget of minAvailable 1: {budget:?}"
        );
        let first = node_name(ctx)?;
        let mut placed: Vec<String> = pods(ctx)?.into_iter().map(|p| p.node).collect();
        placed.sort_unstable();
        let mut both = vec![first.clone(), second.clone()];
        both.sort_unstable();
        ensure!(
            placed == both,
            "the two replicas are not one on each node: {placed:?}"
        );
        for node in [&first, &second] {
            let t = Instant::now();
            let evicted = drained_by_the_guard(ctx, node)?;
            ctx.install
                .wait_available(&ctx.cluster, Duration::from_secs(240))?;
            println!(
                "  helm install with two replicas on two nodes: {node} drained ({evicted} of the \
                 server's pods evicted) and the server Available again in {:.1}s",
                t.elapsed().as_secs_f64()
            );
        }
        helm_uninstall(ctx)?;
        kept_removed(ctx)
    })();
    let stopped = ctx.cluster.stop_second_node();
    drains.and(stopped)
}

/// `kubectl drain` of `node` (then uncordoned), which must complete and evict at least one of the
/// server's own pods, with the guard answering its evictions and none let through unanswered
/// (kube-apiserver's counts of the guard's answers and of the evictions it let through because
/// the guard did not answer); returns how many of the server's pods it evicted.
fn drained_by_the_guard(ctx: &Ctx, node: &str) -> Result<usize> {
    let guard = |metric: &str| -> Result<f64> {
        let text = admin(ctx, &["get", "--raw", "/metrics"])?;
        Ok(ifo_test_support::attacks::metric_sum(
            &text,
            metric,
            &["name=\"ifo-maintenance-guard.ifo.kubevirt.io\""],
        ))
    };
    let answered = "apiserver_admission_webhook_admission_duration_seconds_count";
    let failed_open = "apiserver_admission_webhook_fail_open_count";
    let (answered_before, failed_open_before) = (guard(answered)?, guard(failed_open)?);
    let drained = admin(
        ctx,
        &[
            "drain",
            node,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=180s",
        ],
    );
    admin(ctx, &["uncordon", node])?;
    let drained = drained.with_context(|| format!("kubectl drain of {node} did not complete"))?;
    let evicted = drained
        .lines()
        .filter(|l| l.starts_with("pod/ifo-apiserver-") && l.ends_with(" evicted"))
        .count();
    ensure!(
        evicted > 0,
        "the drain did not evict the server's pod from {node}: {drained}"
    );
    // The guard let the pods go: it answered, and nothing went through unanswered.
    ensure!(
        guard(answered)? > answered_before,
        "the guard did not answer the drain of {node} (kube-apiserver's count of its answers: \
         {answered_before} before)"
    );
    ensure!(
        guard(failed_open)? == failed_open_before,
        "evictions of the drain of {node} went through unanswered (kube-apiserver's count: \
         {failed_open_before} before)"
    );
    Ok(evicted)
}
