//! Persistence mode on the real Deployment, enabled as docs/operating.md says (an overlay with
//! `deploy/persist` as a component): the leader writes the copies, the standby writes nothing.

use anyhow::{Result, bail, ensure};
use ifo_dev::User;
use ifo_dev::install::NAMESPACE;
use std::time::{Duration, Instant};

use super::Ctx;
use super::workload::{Pod, metrics_of, set_vm, settled};

/// The sum of `ifo_persist_writes_total` a pod reports on `/metrics`.
fn writes(ctx: &Ctx, pod: &Pod) -> Result<f64> {
    Ok(metrics_of(ctx, pod)?
        .lines()
        .filter(|l| l.starts_with("ifo_persist_writes_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |sum, n| sum + n))
}

/// The overlay a user writes to turn persistence on, in a directory of its own.
fn overlay(ctx: &Ctx) -> Result<String> {
    let dir = ctx.cluster.dir().join("persist-overlay");
    std::fs::create_dir_all(&dir)?;
    // kustomize takes relative paths only: up to the root, then down to the source tree.
    let up = "../".repeat(dir.components().count() - 1);
    let source = ifo_dev::source_dir();
    let source = source.strip_prefix("/").unwrap_or(&source).display();
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             resources: [{up}{source}/deploy]\ncomponents: [{up}{source}/deploy/persist]\n"
        ),
    )?;
    Ok(dir.display().to_string())
}

pub(crate) fn only_the_leader_writes(ctx: &Ctx) -> Result<()> {
    let overlay = overlay(ctx)?;
    ctx.cluster
        .kubectl_run(User::Admin, &["apply", "-k", &overlay], None)?;
    ctx.install
        .wait_available(&ctx.cluster, Duration::from_secs(240))?;
    let pods = settled(ctx, Duration::from_secs(120))?;
    set_vm(ctx, "persisted", "Migrating")?;
    let started = Instant::now();
    loop {
        let copies = ctx.cluster.kubectl_run(
            User::Admin,
            &["get", "inflightoperations.ifo.kubevirt.io", "-o", "name"],
            None,
        )?;
        if copies.contains("persisted-migrating-") {
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!("no copy of the operation within 60 s: {copies}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let (leader, standby) = (writes(ctx, &pods[0])?, writes(ctx, &pods[1])?);
    println!("  persistence: the leader wrote {leader} times, the standby {standby}");
    ensure!(leader > 0.0, "the leader reports no writes");
    ensure!(standby == 0.0, "the standby wrote {standby} times");

    // Back to the plain install: persistence off, its CRD and rights removed.
    let source = ifo_dev::source_dir();
    let deploy = source.join("deploy/").display().to_string();
    ctx.cluster
        .kubectl_run(User::Admin, &["apply", "-k", &deploy], None)?;
    for file in ["deploy/persist/crd.yaml", "deploy/persist/rbac.yaml"] {
        ctx.cluster.kubectl_run(
            User::Admin,
            &[
                "delete",
                "-f",
                &source.join(file).display().to_string(),
                "--wait=true",
            ],
            None,
        )?;
    }
    ctx.install
        .wait_available(&ctx.cluster, Duration::from_secs(240))?;
    settled(ctx, Duration::from_secs(120)).map(|_| ())?;
    let env = ctx.cluster.kubectl_run(
        User::Admin,
        &[
            "-n",
            NAMESPACE,
            "get",
            "deployment",
            "ifo-apiserver",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].env[*].name}",
        ],
        None,
    )?;
    ensure!(!env.contains("PERSIST"), "persistence is still on: {env}");
    Ok(())
}
