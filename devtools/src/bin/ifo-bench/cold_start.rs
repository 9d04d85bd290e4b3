//! `--pods --cold-start LEVELS`: how the server's cold start grows with the pods. The pods of
//! the pod workload (see `pods.rs`) grow to each count in turn; at each, the server is started
//! again `--cold-starts` times with every pod there, and each start is measured (process start
//! → `/readyz`, and the server's own `ifo_initial_sync_seconds{stage="complete"}`), beside
//! kube-apiserver streaming the same pods to a client that only reads them through, just before
//! with the running server idle: the floor.
//! The report ends with the growth per 10,000 pods (a least-squares line through each count's
//! median start), which a linear cold start keeps from one count to the next.

use crate::local::{self, ColdStart};
use crate::pods::{self, Layout};
use crate::{Cli, floor, pod_bench, usage};
use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject};
use serde::Serialize;
use std::time::Duration;

/// The longest the benchmark waits for the running server to be idle before it measures.
const SETTLE: Duration = Duration::from_secs(120);

/// One count of pods and the starts measured there.
#[derive(Debug, Serialize)]
struct Level {
    pods: usize,
    starts: Vec<ColdStart>,
    /// kube-apiserver streaming every pod, before each start (the running server idle).
    stream_floor_seconds: Vec<f64>,
    /// The bytes of that stream's events: what a cold start reads and decodes.
    streamed_mib: f64,
}

impl Level {
    fn median_ready(&self) -> f64 {
        median(self.starts.iter().map(|s| s.ready_seconds))
    }

    fn median_floor(&self) -> f64 {
        median(self.stream_floor_seconds.iter().copied())
    }
}

pub(crate) fn run(cli: &Cli) -> Result<()> {
    let args = &cli.pod;
    let levels = &args.cold_start;
    let Some(&largest) = levels.last() else {
        bail!("--cold-start needs at least one count of pods");
    };
    if levels.windows(2).any(|w| w[0] >= w[1]) || levels[0] <= args.nodes {
        bail!("--cold-start takes counts of pods in increasing order, each above --nodes");
    }
    let layout = Layout {
        nodes: args.nodes,
        pods: largest,
        namespaces: args.namespaces,
        job_nodes: 0,
    };
    eprintln!("starting the local cluster ...");
    let local = local::Local::start()?;
    let settings = pod_bench::settings(cli, layout);
    eprintln!("starting ifo-apiserver with the shipped pod rules ...");
    let mut server = local.serve(settings.clone())?.pid;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let client = kube::Client::try_from(runtime.block_on(crate::kube_config(&local.kubeconfig))?)?;
    let everywhere: Api<DynamicObject> =
        Api::all_with(client.clone(), &ApiResource::erase::<Pod>(&()));
    let mut measured: Vec<Level> = Vec::new();
    let mut created = 0;
    for &count in levels {
        runtime.block_on(pods::create(
            &client,
            layout,
            created..count,
            args.setup_concurrency,
            false,
        ))?;
        created = count;
        let mut level = Level {
            pods: count,
            starts: Vec::new(),
            stream_floor_seconds: Vec::new(),
            streamed_mib: 0.0,
        };
        for k in 1..=args.cold_starts {
            // The floor first, with the running server idle: after its ready, a server still
            // lists the pods for the guard, which would take from kube-apiserver's stream.
            runtime.block_on(usage::settled(server, SETTLE))?;
            let (floor, bytes) = runtime.block_on(floor::streamed(&everywhere))?;
            let floor = floor.as_secs_f64();
            level.streamed_mib = bytes as f64 / (1024.0 * 1024.0);
            eprintln!(
                "{count} pods: kube-apiserver alone streams them ({:.1} MiB) in {floor:.2} s; \
                 restarting the server (cold start {k} of {}) ...",
                level.streamed_mib, args.cold_starts
            );
            let started = local.serve(settings.clone())?;
            server = started.pid;
            let start = started.cold_start;
            eprintln!(
                "{count} pods: ready after {:.2} s, every target listed after {:.2} s, RSS \
                 then {}",
                start.ready_seconds,
                start.complete_seconds,
                crate::report::mib(start.rss_mib),
            );
            level.starts.push(start);
            level.stream_floor_seconds.push(floor);
        }
        measured.push(level);
    }
    drop(runtime);
    print(&measured, layout);
    let slope = slope(&measured);
    crate::write_json(
        &cli.json,
        &serde_json::json!({
            "workload": "pods-cold-start",
            "nodes": layout.nodes,
            "namespaces": layout.namespaces,
            "levels": measured,
            "ready_seconds_per_10000_pods": slope,
        }),
    )?;
    drop(local);
    Ok(())
}

fn print(levels: &[Level], layout: Layout) {
    println!(
        "\ncold start with every pod there ({} nodes, {} namespaces), each start measured:",
        layout.nodes, layout.namespaces
    );
    println!(
        "  {:>8}   {:<24} {:<24} {:<28} RSS then",
        "pods", "ready (s)", "every target listed (s)", "kube-apiserver streams (s)"
    );
    for level in levels {
        let list = |values: Vec<f64>| {
            values
                .iter()
                .map(|v| format!("{v:.2}"))
                .collect::<Vec<_>>()
                .join(" / ")
        };
        println!(
            "  {:>8}   {:<24} {:<24} {:<28} {}",
            level.pods,
            list(level.starts.iter().map(|s| s.ready_seconds).collect()),
            list(level.starts.iter().map(|s| s.complete_seconds).collect()),
            format!(
                "{} ({:.0} MiB)",
                list(level.stream_floor_seconds.clone()),
                level.streamed_mib
            ),
            level
                .starts
                .iter()
                .map(|s| crate::report::mib(s.rss_mib))
                .collect::<Vec<_>>()
                .join(" / "),
        );
    }
    if let Some(slope) = slope(levels) {
        let floor = fit(levels.iter().map(|l| (l.pods as f64, l.median_floor())));
        println!(
            "  growth of the median start: {slope:.2} s per 10,000 pods (kube-apiserver's own \
             stream: {})",
            floor.map_or("n/a".into(), |f| format!("{f:.2} s per 10,000 pods"))
        );
    }
}

/// Seconds per 10,000 pods of the median ready time, fitted by least squares (`None` below
/// two counts).
fn slope(levels: &[Level]) -> Option<f64> {
    fit(levels.iter().map(|l| (l.pods as f64, l.median_ready())))
}

/// The slope of the least-squares line through `points`, per 10,000 of x.
fn fit(points: impl Iterator<Item = (f64, f64)>) -> Option<f64> {
    let points: Vec<(f64, f64)> = points.collect();
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
    let (sxy, sxx) = points.iter().fold((0.0, 0.0), |(sxy, sxx), p| {
        (sxy + (p.0 - mx) * (p.1 - my), sxx + (p.0 - mx).powi(2))
    });
    (sxx > 0.0).then(|| sxy / sxx * 10_000.0)
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slope_of_a_line_is_its_growth_per_ten_thousand() {
        let points = [(20_000.0, 4.0), (80_000.0, 16.0), (150_000.0, 30.0)];
        let slope = fit(points.into_iter()).expect("three points");
        assert!((slope - 2.0).abs() < 1e-9, "{slope}");
        assert_eq!(fit([(1.0, 1.0)].into_iter()), None);
    }

    #[test]
    fn the_median_of_an_even_count_is_between_its_middle_two() {
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), 2.0);
        assert_eq!(median([4.0, 1.0, 2.0, 3.0].into_iter()), 2.5);
    }
}
