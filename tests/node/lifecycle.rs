//! What an installation lives through: a rollout, a certificate rotation, the uninstall.

use anyhow::{Context, Result, bail, ensure};
use ifo_dev::User;
use ifo_dev::install::{APISERVICE, NAMESPACE};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::Ctx;
use super::workload::{holds, list, pods, set_vm, settled, until_listed};

/// Whether the APIService reports `Available=True` now.
fn apiservice_available(ctx: &Ctx) -> bool {
    apiservice_condition(ctx).is_ok()
}

/// `Ok` when the APIService reports `Available=True` now; else what it reports instead (the
/// condition's status, reason and message), or why it could not be read.
fn apiservice_condition(ctx: &Ctx) -> Result<(), String> {
    let read = ctx.cluster.kubectl_run(
        User::Admin,
        &[
            "get",
            APISERVICE,
            "-o",
            "jsonpath={range .status.conditions[?(@.type==\"Available\")]}\
             {.status} {.reason}: {.message}{end}",
        ],
        None,
    );
    match read {
        Ok(s) if s.trim().starts_with("True ") => Ok(()),
        Ok(s) => Err(s.trim().to_owned()),
        Err(e) => Err(format!("not read: {e:#}")),
    }
}

/// `kubectl rollout restart` while a client lists every second (retrying a failed list once, as
/// clients do) and the APIService's condition is read as often as kubectl can: no list fails
/// twice in a row, every list is correct, and the APIService reads unavailable for under a
/// second at a time at most (while the leader's label moves to the new leader's pod, the
/// Service has no endpoint: the old pod left it when it began terminating).
pub(crate) fn rollout_restart(ctx: &Ctx) -> Result<()> {
    let before = settled(ctx, Duration::from_secs(120))?;
    set_vm(ctx, "rollout", "Migrating")?;
    let expected = [("rollout", "Migrating")];
    until_listed(ctx, &expected, Instant::now(), Duration::from_secs(30))?;

    let stop = Arc::new(AtomicBool::new(false));
    let lists = AtomicUsize::new(0);
    let first_failures = AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::<String>::new());
    let checks = std::sync::Mutex::new(Vec::<(Instant, Result<(), String>)>::new());
    std::thread::scope(|s| -> Result<()> {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                lists.fetch_add(1, Ordering::Relaxed);
                let attempt = || list(ctx).map(|names| holds(&names, &expected));
                match attempt() {
                    Ok(true) => {}
                    first => {
                        first_failures.fetch_add(1, Ordering::Relaxed);
                        match attempt() {
                            Ok(true) => {}
                            again => failures.lock().unwrap().push(format!(
                                "{first:?} then {again:?}",
                                first = first.map_err(|e| e.to_string()),
                                again = again.map_err(|e| e.to_string())
                            )),
                        }
                    }
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let available = apiservice_condition(ctx);
                checks.lock().unwrap().push((Instant::now(), available));
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let result = (|| {
            ctx.cluster.kubectl_run(
                User::Admin,
                &[
                    "-n",
                    NAMESPACE,
                    "rollout",
                    "restart",
                    "deployment/ifo-apiserver",
                ],
                None,
            )?;
            ctx.install
                .wait_available(&ctx.cluster, Duration::from_secs(240))?;
            settled(ctx, Duration::from_secs(120))
        })();
        // A few more lists against the new pods.
        std::thread::sleep(Duration::from_secs(3));
        stop.store(true, Ordering::Relaxed);
        let after = result?;
        ensure!(
            after.iter().all(|p| before.iter().all(|b| b.uid != p.uid)),
            "the rollout did not replace both pods: before {before:?}, after {after:?}"
        );
        Ok(())
    })?;
    let failures = failures.into_inner().unwrap();
    let checks = checks.into_inner().unwrap();
    let unavailable = longest_unavailable(&checks);
    println!(
        "  rollout restart: {} lists, {} failed once and succeeded on retry, {} failed twice; \
         APIService read unavailable in {} of {} checks, for {:.2}s at most",
        lists.load(Ordering::Relaxed),
        first_failures.load(Ordering::Relaxed),
        failures.len(),
        checks.iter().filter(|(_, c)| c.is_err()).count(),
        checks.len(),
        unavailable.as_secs_f64()
    );
    // What the APIService said when it read unavailable: the cause of either failure below.
    let mut reported: Vec<&str> = checks
        .iter()
        .filter_map(|(_, c)| c.as_ref().err().map(String::as_str))
        .collect();
    reported.dedup();
    ensure!(
        failures.is_empty(),
        "lists failed even after a retry during the rollout: {failures:#?}; the APIService said {reported:#?}"
    );
    ensure!(
        unavailable < Duration::from_secs(1),
        "the APIService was unavailable for {unavailable:?} during the rollout; it said {reported:#?}"
    );
    Ok(())
}

/// The longest time between a check that found the APIService unavailable and the next one
/// that found it available (to the end, if none did).
fn longest_unavailable(checks: &[(Instant, Result<(), String>)]) -> Duration {
    let mut longest = Duration::ZERO;
    let mut since: Option<Instant> = None;
    for (at, condition) in checks {
        let at = *at;
        match (condition.is_ok(), since) {
            (false, None) => since = Some(at),
            (true, Some(start)) => {
                longest = longest.max(at - start);
                since = None;
            }
            _ => {}
        }
    }
    if let (Some(start), Some((end, _))) = (since, checks.last()) {
        let end = *end;
        longest = longest.max(end - start);
    }
    longest
}

/// The certificate a pod serves on 8443 (from the host, which reaches pod IPs over the bridge).
fn served_certificate(ip: &str) -> Result<String> {
    let out = Command::new("openssl")
        .args(["s_client", "-connect", &format!("{ip}:8443"), "-servername"])
        .arg(format!("ifo-apiserver.{NAMESPACE}.svc"))
        .stdin(std::process::Stdio::null())
        .output()
        .context("running openssl s_client")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let start = text
        .find("-----BEGIN CERTIFICATE-----")
        .context("no certificate from the pod")?;
    let end = text[start..]
        .find("-----END CERTIFICATE-----")
        .context("a truncated certificate from the pod")?
        + start
        + "-----END CERTIFICATE-----".len();
    Ok(text[start..end].to_string())
}

/// `certs/generate.sh --renew` and the Secret applied again: every pod serves the new certificate
/// within kubelet's volume sync and the server's reload, without a restart, and requests keep
/// working throughout.
pub(crate) fn certificate_rotation(ctx: &Ctx) -> Result<()> {
    let before = settled(ctx, Duration::from_secs(120))?;
    let old = String::from_utf8(ctx.install.serving_certificate()?)?;
    for pod in &before {
        ensure!(
            served_certificate(&pod.ip)?.trim() == old.trim(),
            "pod {} does not serve the installed certificate",
            pod.name
        );
    }
    ctx.install.rotate_certificate(&ctx.cluster)?;
    let new = String::from_utf8(ctx.install.serving_certificate()?)?;
    ensure!(new != old, "--renew did not issue a new certificate");
    let rotated = Instant::now();
    let mut failed = Vec::new();
    loop {
        if let Err(e) = list(ctx) {
            failed.push(format!("{e:#}"));
        }
        let serving: Vec<bool> = before
            .iter()
            .map(|p| served_certificate(&p.ip).is_ok_and(|c| c.trim() == new.trim()))
            .collect();
        if serving.iter().all(|&s| s) {
            break;
        }
        if rotated.elapsed() > Duration::from_secs(120) {
            bail!("the pods did not serve the new certificate within 120 s ({serving:?})");
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    println!(
        "  certificate rotation: both pods served the new certificate after {:.1}s",
        rotated.elapsed().as_secs_f64()
    );
    let after = pods(ctx)?;
    for pod in &before {
        let now = after
            .iter()
            .find(|p| p.uid == pod.uid)
            .context("a pod was replaced during the rotation")?;
        ensure!(
            now.restarts == pod.restarts,
            "pod {} restarted during the rotation",
            pod.name
        );
    }
    ensure!(
        failed.is_empty(),
        "requests failed during the rotation: {failed:#?}"
    );
    ensure!(
        apiservice_available(ctx),
        "the APIService is not Available after the rotation"
    );
    Ok(())
}

/// Uninstall as the README says: everything `deploy/` made is gone, no namespace is stuck
/// Terminating (a namespace deleted afterwards goes too), and discovery is clean again.
pub(crate) fn uninstall(ctx: &Ctx) -> Result<()> {
    ctx.install.uninstall(&ctx.cluster)?;
    let admin = |args: &[&str]| ctx.cluster.kubectl_run(User::Admin, args, None);
    let gone = |args: &[&str]| admin(args).is_ok_and(|out| out.trim().is_empty());
    let deploy = ifo_dev::source_dir().join("deploy/").display().to_string();
    let left = admin(&["get", "-k", &deploy, "--ignore-not-found", "-o", "name"])?;
    ensure!(left.trim().is_empty(), "left after the uninstall: {left}");
    ensure!(
        gone(&["get", APISERVICE, "--ignore-not-found", "-o", "name"]),
        "the APIService is still there"
    );
    // Discovery answers without errors, and namespaces are deleted.
    admin(&["api-resources", "-o", "name"]).context("discovery fails after the uninstall")?;
    admin(&["delete", "namespace", &ctx.ns, "--timeout=60s"])
        .context("a namespace could not be deleted after the uninstall")?;
    Ok(())
}
