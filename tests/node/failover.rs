//! The leader goes away: its container crashes (killed by containerd, as an OOM kill or a panic
//! would), or its pod is deleted (graceful: SIGTERM, the Lease released first). Another replica
//! must serve a correct list through kube-apiserver → Service within 10 s after a crash (kubelet
//! reports the container ended: the Lease is taken without waiting for it to expire), and within
//! 5 s after a graceful stop; operations that began in the gap are there, a watch started
//! afterwards shows the current state, and the replicas' own logs show at most one serving at
//! any time.

use anyhow::{Context, Result, ensure};
use ifo_dev::User;
use ifo_dev::install::NAMESPACE;
use std::time::{Duration, Instant};

use super::Ctx;
use super::terms::{Follow, at_most_one_leader, log, terms};
use super::workload::{median_max, set_vm, settled, until_listed, watch_shows};

/// How many times each failover is measured: `IFO_FAILOVER_RUNS`, default 1.
fn runs() -> usize {
    std::env::var("IFO_FAILOVER_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

#[derive(Clone, Copy)]
enum Loss {
    Crash,
    Delete,
}

impl Loss {
    fn label(self) -> &'static str {
        match self {
            Loss::Crash => "crash",
            Loss::Delete => "delete",
        }
    }

    fn limit(self) -> Duration {
        match self {
            // Well under the lease duration (15 s): kubelet's report of the end is the proof.
            Loss::Crash => Duration::from_secs(10),
            Loss::Delete => Duration::from_secs(5),
        }
    }
}

pub(crate) fn crashed_leader(ctx: &Ctx) -> Result<()> {
    measure(ctx, Loss::Crash)
}

pub(crate) fn deleted_leader_pod(ctx: &Ctx) -> Result<()> {
    measure(ctx, Loss::Delete)
}

fn measure(ctx: &Ctx, loss: Loss) -> Result<()> {
    let mut samples = Vec::new();
    for run in 0..runs() {
        samples.push(once(ctx, loss, run)?);
    }
    let (median, max) = median_max(samples.clone());
    println!(
        "  failover after a {} ({} runs): median {median:.1}s, max {max:.1}s; each: {:?}",
        loss.label(),
        samples.len(),
        samples
            .iter()
            .map(|d| format!("{:.1}", d.as_secs_f64()))
            .collect::<Vec<_>>()
    );
    Ok(())
}

/// One failover: the time from losing the leader to the first correct list.
fn once(ctx: &Ctx, loss: Loss, run: usize) -> Result<Duration> {
    let pods = settled(ctx, Duration::from_secs(180))?;
    let leader = pods[0].clone();
    let before = format!("before-{}-{run}", loss.label());
    let gap = format!("gap-{}-{run}", loss.label());
    set_vm(ctx, &before, "Migrating")?;
    until_listed(
        ctx,
        &[(&before, "Migrating")],
        Instant::now(),
        Duration::from_secs(30),
    )?;

    let followed = Follow::start(ctx, &leader.name)?;
    let lost = Instant::now();
    match loss {
        Loss::Crash => ctx
            .cluster
            .node()
            .as_ref()
            .context("no node")?
            .kill_container(&leader.container_id)?,
        Loss::Delete => {
            ctx.cluster.kubectl_run(
                User::Admin,
                &[
                    "-n",
                    NAMESPACE,
                    "delete",
                    "pod",
                    &leader.name,
                    "--wait=false",
                ],
                None,
            )?;
        }
    }
    // The crashed process is gone once the kill returned.
    let killed_at = jiff::Timestamp::now();
    // An operation that begins while no replica serves.
    set_vm(ctx, &gap, "Starting")?;
    let expected = [(before.as_str(), "Migrating"), (gap.as_str(), "Starting")];
    let took = until_listed(ctx, &expected, lost, Duration::from_secs(60))?;
    println!(
        "  {}: leader {} lost, correct list after {:.1}s",
        loss.label(),
        leader.name,
        took.as_secs_f64()
    );
    ensure!(
        took <= loss.limit(),
        "after a {} of the leader the first correct list came after {took:?}, over {:?}",
        loss.label(),
        loss.limit()
    );
    watch_shows(ctx, &expected, Duration::from_secs(3))?;

    let after = settled(ctx, Duration::from_secs(180))?;
    // The lost leader's term ends with its log, or at the crash (a killed process writes
    // nothing); every other replica's log is read now.
    let lost_log = followed.stop()?;
    let mut all = terms(
        &format!("{} (lost)", leader.name),
        &lost_log,
        match loss {
            Loss::Crash => killed_at,
            Loss::Delete => jiff::Timestamp::now(),
        },
    );
    for pod in &after {
        all.extend(terms(
            &pod.name,
            &log(ctx, &pod.name)?,
            jiff::Timestamp::now(),
        ));
    }
    let checked = at_most_one_leader(all)?;
    println!(
        "  {}: at most one replica served at any time ({checked} terms in the replicas' logs)",
        loss.label()
    );
    if let Loss::Crash = loss {
        // The crashed pod came back as a container of the same pod (kubelet restarts it).
        let again = after
            .iter()
            .find(|p| p.uid == leader.uid)
            .context("the crashed leader's pod is gone; kubelet should have restarted it")?;
        ensure!(
            again.restarts > leader.restarts,
            "the crashed container was not restarted: {again:?}"
        );
    } else {
        ensure!(
            after.iter().all(|p| p.uid != leader.uid),
            "the deleted pod is still there: {after:?}"
        );
    }
    Ok(took)
}
