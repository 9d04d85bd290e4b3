//! The pod workload's run (`--pods`): the local cluster, and its server with the shipped pod
//! rules (and the maintenance guard, unless `--evictions 0`); the workload set up; one phase of
//! churn, flips and probes; the report, as a table and as JSON.

use crate::flips::Flips;
use crate::pods::{self, Layout};
use crate::report::PodPhase;
use crate::{Cli, Pids, jobs, kwok, local, probes, usage};
use anyhow::{Context, Result};
use std::time::Duration;
use tokio::time::Instant;

/// How long the server may take to show the first flip after the setup.
const CATCH_UP: Duration = Duration::from_secs(300);

pub(crate) fn run(cli: &Cli) -> Result<()> {
    let args = &cli.pod;
    if !(args.jobs.is_finite() && args.jobs >= 0.0) || (args.jobs > 0.0 && args.nodes < 2) {
        anyhow::bail!(
            "--jobs takes a rate of 0 or more, and with one needs at least 2 nodes: Jobs run on the last tenth of them, flips on the others"
        );
    }
    let layout = Layout {
        nodes: args.nodes,
        pods: args.pod_count,
        namespaces: args.namespaces,
        job_nodes: if args.jobs > 0.0 {
            (args.nodes / 10).max(1)
        } else {
            0
        },
    };
    eprintln!("starting the local cluster ...");
    let local = local::Local::start()?;
    let settings = settings(cli, layout);
    let kwok = if args.kwok {
        eprintln!("starting KWOK ...");
        Some(kwok::start(&local.kubeconfig, args.kwok_workers)?)
    } else {
        None
    };
    eprintln!("starting ifo-apiserver with the shipped pod rules ...");
    let server = local.serve(settings.clone())?;
    let pids = Pids {
        server: Some(server.pid),
        apiserver: Some(local.apiserver_pid),
        etcd: Some(local.etcd_pid),
    };
    let kwok_pid = kwok.as_ref().map(ifo_dev::Process::pid);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut phase = runtime
        .block_on(phase(cli, layout, &local.kubeconfig, pids, kwok_pid))
        .inspect_err(|_| crate::print_log_tail(&server.log))?;
    drop(runtime);
    eprintln!("restarting the server with every pod there (a cold start) ...");
    phase.cold_start = Some(local.serve(settings)?.cold_start);
    phase.print();
    let output = serde_json::json!({
        "workload": "pods",
        "debounce_seconds": cli.debounce.as_secs_f64(),
        "hold_seconds": args.hold.as_secs_f64(),
        "phase": phase,
    });
    crate::write_json(&cli.json, &output)?;
    drop(kwok);
    drop(local);
    Ok(())
}

/// How the server runs for the pod workload: the shipped pod rules, `protected-pod-rules`
/// granted every namespace of `layout`, and the guard unless `--evictions 0`.
pub(crate) fn settings(cli: &Cli, layout: Layout) -> local::Settings {
    local::Settings {
        debounce: cli.debounce,
        persist: false,
        env: cli.server_env.clone(),
        all_rules: false,
        slow_rule: false,
        pod_rules: Some(
            (0..layout.namespaces)
                .map(|k| layout.namespace(k))
                .collect(),
        ),
        guard: cli.pod.evictions > 0.0,
    }
}

async fn phase(
    cli: &Cli,
    layout: Layout,
    kubeconfig: &std::path::Path,
    pids: Pids,
    kwok_pid: Option<u32>,
) -> Result<PodPhase> {
    let args = &cli.pod;
    let config = crate::kube_config(kubeconfig).await?;
    let client = kube::Client::try_from(config.clone())?;
    // The guard's answers as they are: kube's client would retry a 429 by itself.
    let mut config = config;
    config.default_retry = false;
    let evicting = kube::Client::try_from(config)?;
    eprintln!(
        "creating {} namespaces, {} nodes and {} pods ({} requests at a time) ...",
        layout.namespaces, layout.nodes, layout.pods, args.setup_concurrency
    );
    let mut server = usage::Meter::new(pids.server);
    server.begin()?;
    let began = Instant::now();
    let mut setup = pods::create(
        &client,
        layout,
        0..layout.pods,
        args.setup_concurrency,
        args.kwok,
    )
    .await?;
    let set_up = Instant::now();
    setup.server = server.end((set_up - began).as_secs_f64())?;
    eprintln!(
        "pods created{} in {:.1} s ({:.0}/s){}; waiting for the server to show a first flip ...",
        if args.kwok {
            " and bound"
        } else {
            ", bound and their status written"
        },
        setup.pods_seconds,
        setup.pods_per_second,
        setup
            .started_by_kwok_seconds
            .map_or(String::new(), |t| format!(
                ", every one started by KWOK {t:.1} s after the first was created"
            ))
    );
    let flips = Flips::new(client.clone(), layout, args.hold);
    let mut watches = tokio::task::JoinSet::new();
    flips.watch(&mut watches).await?;
    // Node 0's pod is a Job's: its start and its return to waiting are checked on the way.
    let shown = flips
        .first(0, CATCH_UP)
        .await
        .context("the first flip, after the setup")?;
    setup.caught_up_seconds = shown.map(|at| (at - set_up).as_secs_f64());

    let mut apiserver = usage::Meter::new(pids.apiserver);
    let mut etcd = usage::Meter::new(pids.etcd);
    let mut kwok = usage::Meter::new(kwok_pid);
    server.begin()?;
    apiserver.begin()?;
    etcd.begin()?;
    kwok.begin()?;
    let server_rss_start_mib = pids
        .server
        .map(usage::read)
        .transpose()?
        .map(|r| r.rss_bytes as f64 / (1024.0 * 1024.0));
    eprintln!(
        "updating pods at {}/s, flipping {}/s, reading {} gates/s and evicting {}/s (dry run) for {:?} ...",
        cli.rate, args.flips, args.gate_reads, args.evictions, cli.duration
    );
    let began = Instant::now();
    let evictions = async {
        if args.evictions > 0.0 {
            Some(probes::evictions(evicting, layout, args.evictions, cli.duration).await)
        } else {
            None
        }
    };
    let (churn, flipped, gate_reads, evictions, jobs) = tokio::join!(
        pods::churn(client.clone(), layout, cli.rate, cli.duration),
        flips.drive(args.flips, cli.duration),
        probes::gate_reads(client.clone(), layout, args.gate_reads, cli.duration),
        evictions,
        jobs::run(client.clone(), layout, args.jobs, cli.duration),
    );
    let wall = began.elapsed().as_secs_f64();
    let (server, apiserver, etcd, kwok) = (
        server.end(wall)?,
        apiserver.end(wall)?,
        etcd.end(wall)?,
        kwok.end(wall)?,
    );
    eprintln!("waiting for the last flips to show and clear ...");
    let settle = cli.debounce + args.hold + Duration::from_secs(30);
    let flips = flips.report(args.flips, flipped, settle).await;
    watches.abort_all();
    Ok(PodPhase {
        nodes: layout.nodes,
        pods: layout.pods,
        namespaces: layout.namespaces,
        setup,
        duration_seconds: cli.duration.as_secs_f64(),
        churn,
        flips,
        gate_reads,
        evictions,
        jobs,
        server_rss_start_mib,
        server,
        apiserver,
        etcd,
        kwok,
        kwok_workers: args.kwok.then_some(args.kwok_workers),
        cold_start: None,
    })
}
