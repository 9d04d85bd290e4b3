//! What a run measured: a table for people, JSON for tools.

use crate::ledger::Counts;
use crate::stats::Summary;
use crate::usage::Usage;
use crate::writes::Writes;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize)]
pub(crate) struct Phase {
    pub subjects: usize,
    /// Subjects driven through the script in this phase.
    pub driven: usize,
    /// Operations held active on the other subjects throughout.
    pub held_active: usize,
    pub watchers: usize,
    pub duration_seconds: f64,
    pub rate_requested: f64,
    pub rate_achieved: f64,
    pub transitions: Counts,
    /// Transition → the operation's first watch event, over all watchers.
    pub start_latency: Summary,
    /// How long after `end + debounce threshold` each ended operation was shown `Completed`
    /// (or deleted).
    pub completion_delay: Summary,
    /// Status write request → response (kube-apiserver and etcd).
    pub write_latency: Summary,
    /// Status write → the subject's own watch event from kube-apiserver: the floor under
    /// `start_latency`, which adds the server and the aggregation layer.
    pub subject_event_latency: Summary,
    /// Operations started but never seen, summed over watchers (must be 0).
    pub lost_starts: u64,
    /// Operations seen but never seen completing, summed over watchers (must be 0).
    pub lost_completions: u64,
    /// Completions seen as the operation's DELETE, without a completed phase before it,
    /// summed over watchers.
    pub completed_by_delete: u64,
    pub duplicates: u64,
    pub unexpected: u64,
    pub relists: u64,
    pub events: u64,
    /// The server under test, kube-apiserver and etcd over the phase (from `/proc`).
    pub server: Option<Usage>,
    pub apiserver: Option<Usage>,
    pub etcd: Option<Usage>,
    pub apiserver_writes: Vec<WriteRow>,
    /// Writes of InFlightOperation resources by anyone (0 in the default, in-memory mode).
    pub operation_writes: u64,
    /// Operation lifecycles (start → completion) the phase drove: the operations it started,
    /// all of which it ends.
    pub lifecycles: u64,
    /// `operation_writes` per 1,000 lifecycles (`null` without lifecycles).
    pub operation_writes_per_1000_lifecycles: Option<f64>,
    /// Writes of the rulesets' status (`operationrulesets/status`, by the server), and per
    /// minute of the phase.
    pub ruleset_status_writes: u64,
    pub ruleset_status_writes_per_minute: f64,
    /// `--scale`: the local server restarted after the phase, with the phase's subjects.
    pub cold_start: Option<crate::local::ColdStart>,
    /// `--flood`: the changes of the flooded object meanwhile.
    pub flood: Option<crate::flood::Report>,
}

#[derive(Debug, Serialize)]
pub(crate) struct WriteRow {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub total: u64,
    /// The benchmark's own status writes; the rest are the server's and the controllers'.
    pub by_benchmark: u64,
}

impl WriteRow {
    /// `group/resource/subresource`, empty parts left out.
    fn resource_path(&self) -> String {
        [
            self.group.as_str(),
            self.resource.as_str(),
            self.subresource.as_str(),
        ]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("/")
    }
}

pub(crate) fn write_rows(writes: &Writes, benchmark_status_writes: u64) -> Vec<WriteRow> {
    writes
        .0
        .iter()
        .map(|((verb, group, resource, subresource), &total)| {
            let ours = verb == "PATCH"
                && group == "kubevirt.io"
                && resource == "virtualmachines"
                && subresource == "status";
            WriteRow {
                verb: verb.clone(),
                group: group.clone(),
                resource: resource.clone(),
                subresource: subresource.clone(),
                total,
                by_benchmark: if ours {
                    benchmark_status_writes.min(total)
                } else {
                    0
                },
            }
        })
        .collect()
}

/// The writes of the rulesets' status among `writes`.
pub(crate) fn ruleset_status_writes(writes: &Writes) -> u64 {
    writes
        .0
        .iter()
        .filter(|((_, group, resource, subresource), _)| {
            group == "ifo.kubevirt.io" && resource == "operationrulesets" && subresource == "status"
        })
        .map(|(_, n)| n)
        .sum()
}

/// `writes` per 1,000 operation lifecycles; `None` without lifecycles.
pub(crate) fn per_thousand(writes: u64, lifecycles: u64) -> Option<f64> {
    (lifecycles > 0).then(|| 1000.0 * writes as f64 / lifecycles as f64)
}

fn latency(s: &Summary) -> String {
    format!(
        "p50 {:>7.1} ms   p90 {:>7.1} ms   p95 {:>7.1} ms   p99 {:>7.1} ms   max {:>7.1} ms   (n={})",
        s.p50_ms, s.p90_ms, s.p95_ms, s.p99_ms, s.max_ms, s.count
    )
}

fn verdict(ok: bool) -> &'static str {
    if ok { "ok" } else { "MISSED" }
}

impl Phase {
    pub(crate) fn print(&self) {
        println!(
            "\n{} subjects ({} driven, {} operations held active), {} watcher(s)",
            self.subjects, self.driven, self.held_active, self.watchers
        );
        println!(
            "  transitions         {:.1}/s requested, {:.1}/s achieved over {:.0} s; {} status writes ({} failed), {} operations started",
            self.rate_requested,
            self.rate_achieved,
            self.duration_seconds,
            self.transitions.writes,
            self.transitions.failed,
            self.transitions.started
        );
        if let Some(f) = &self.flood {
            println!(
                "  flood               {} changes of one object in namespace {} ({:.1}/s requested, {:.1}/s achieved, {} failed), a rule iterating {} times on it",
                f.changes,
                crate::flood::NAMESPACE,
                f.rate_requested,
                f.rate_achieved,
                f.failed,
                f.cost
            );
        }
        println!("  start → event       {}", latency(&self.start_latency));
        println!("  completion delay    {}", latency(&self.completion_delay));
        println!("  status write        {}", latency(&self.write_latency));
        println!(
            "  subject's own event {}",
            latency(&self.subject_event_latency)
        );
        println!(
            "  lost                {} starts, {} completions   duplicates {}   unexpected {}   relists {}   events {}",
            self.lost_starts,
            self.lost_completions,
            self.duplicates,
            self.unexpected,
            self.relists,
            self.events
        );
        if self.completed_by_delete > 0 {
            println!(
                "  completed by DELETE {} (deleted without a completed phase first)",
                self.completed_by_delete
            );
        }
        print_usage(&self.server, &self.apiserver, &self.etcd);
        println!("  kube-apiserver writes during the phase:");
        for w in &self.apiserver_writes {
            println!(
                "    {:<7} {:<50} {:>8}   (benchmark {}, others {})",
                w.verb,
                w.resource_path(),
                w.total,
                w.by_benchmark,
                w.total - w.by_benchmark
            );
        }
        println!(
            "  ruleset status writes {} ({:.1} per minute)",
            self.ruleset_status_writes, self.ruleset_status_writes_per_minute
        );
        println!(
            "  InFlightOperation writes {} ({} per 1,000 operation lifecycles, {} lifecycles)",
            self.operation_writes,
            optional(self.operation_writes_per_1000_lifecycles, 1),
            self.lifecycles
        );
        println!(
            "  targets             p99 ≤ 50 ms: {}   0 lost: {}   0 operation writes: {}",
            verdict(self.start_latency.p99_ms <= 50.0),
            verdict(self.lost_starts + self.lost_completions == 0),
            verdict(self.operation_writes == 0)
        );
    }
}

/// The CPU and memory lines of the server, kube-apiserver and etcd.
fn print_usage(server: &Option<Usage>, apiserver: &Option<Usage>, etcd: &Option<Usage>) {
    for (name, usage, flag) in [
        ("server", server, "--server-pid"),
        ("kube-apiserver", apiserver, "--apiserver-pid"),
        ("etcd", etcd, "--etcd-pid"),
    ] {
        match usage {
            Some(u) => println!(
                "  {name:<19} {:.1} CPU s ({:.0}% of one core)   RSS max {:.1} MiB, at the end {:.1} MiB (lifetime peak {:.1} MiB)",
                u.cpu_seconds,
                u.cpu_percent_of_one_core,
                u.rss_max_mib,
                u.rss_end_mib,
                u.rss_peak_lifetime_mib
            ),
            None => println!("  {name:<19} n/a (no {flag})"),
        }
    }
}

/// The pod workload's phase (`--pods`).
#[derive(Debug, Serialize)]
pub(crate) struct PodPhase {
    pub nodes: usize,
    pub pods: usize,
    /// Namespaces of the pods, all of them granted protection.
    pub namespaces: usize,
    pub setup: crate::pods::Setup,
    /// How long the churn, flips and probes ran.
    pub duration_seconds: f64,
    pub churn: crate::pods::Churn,
    pub flips: crate::flips::Report,
    pub gate_reads: crate::probes::GateReads,
    /// `None` with `--evictions 0`.
    pub evictions: Option<crate::probes::Evictions>,
    /// The Jobs started and deleted (`--jobs`; all zero without).
    pub jobs: crate::jobs::Jobs,
    /// The server's resident memory as the phase began (every pod created and evaluated).
    pub server_rss_start_mib: Option<f64>,
    /// Over the driving (not the flips' settling after it).
    pub server: Option<Usage>,
    pub apiserver: Option<Usage>,
    pub etcd: Option<Usage>,
    /// KWOK's controller (`--kwok`), which keeps the nodes' Leases and statuses meanwhile.
    pub kwok: Option<Usage>,
    /// KWOK's workers per pool (`--kwok-workers`; `None` without KWOK).
    pub kwok_workers: Option<u16>,
    /// The server restarted after the phase, with every pod there.
    pub cold_start: Option<crate::local::ColdStart>,
}

impl PodPhase {
    pub(crate) fn print(&self) {
        let s = &self.setup;
        println!(
            "\n{} pods on {} nodes in {} namespaces (shipped pod rules, protection granted to every namespace)",
            self.pods, self.nodes, self.namespaces
        );
        println!(
            "  setup               namespaces and nodes {:.1} s; pods created{} {:.1} s ({:.0}/s); the first flip shown {} after",
            s.namespaces_and_nodes_seconds,
            if s.started_by_kwok_seconds.is_some() {
                " and bound"
            } else {
                ", bound and their status written"
            },
            s.pods_seconds,
            s.pods_per_second,
            s.caught_up_seconds
                .map_or("not within 300 s".to_string(), |t| format!("{t:.2} s"))
        );
        if let Some(t) = s.started_by_kwok_seconds {
            println!(
                "  KWOK                every pod started {t:.1} s after the first was created ({} workers per pool)",
                self.kwok_workers.unwrap_or_default()
            );
        }
        if let Some(u) = &s.server {
            println!(
                "  server meanwhile    {:.1} CPU s ({:.0}% of one core)   RSS max {:.1} MiB, at the end {:.1} MiB",
                u.cpu_seconds, u.cpu_percent_of_one_core, u.rss_max_mib, u.rss_end_mib
            );
        }
        let c = &self.churn;
        println!(
            "  churn               {:.1}/s requested, {:.1}/s achieved over {:.0} s; {} pod updates ({} failed)",
            c.rate_requested, c.rate_achieved, self.duration_seconds, c.updates, c.failed
        );
        println!("  pod update          {}", latency(&c.update_latency));
        let f = &self.flips;
        println!(
            "  flips               {:.1}/s requested, {:.1}/s achieved; {} flips ({} failed, {} ticks with no clear node), {} seen on their gate",
            f.rate_requested, f.rate_achieved, f.flips, f.failed, f.no_clear_node, f.seen_on_gate
        );
        println!("  write → pod's event {}", latency(&f.write_to_pod_event));
        println!("  pod's event → gate  {}", latency(&f.pod_event_to_gate));
        println!("  write → gate        {}", latency(&f.write_to_gate));
        println!("  release → clear     {}", latency(&f.release_to_clear));
        println!(
            "  gate watch          {} node gate events, {} Unknown; {} relists",
            f.gate_events, f.unknown_gate_events, f.relists
        );
        if let Some(why) = f
            .first_unknown
            .as_ref()
            .or(self.gate_reads.first_unknown.as_ref())
        {
            println!("  the first Unknown   {why}");
        }
        let g = &self.gate_reads;
        println!(
            "  gate reads          {} ({:.1}/s): {} Clear, {} held, {} Unknown, {} failed",
            g.reads, g.rate_achieved, g.clear, g.held, g.unknown, g.failed
        );
        println!("  gate read           {}", latency(&g.latency));
        let j = &self.jobs;
        if j.rate_requested > 0.0 {
            println!(
                "  Jobs                {:.1}/s requested, {:.1}/s achieved; {} started, {} deleted, {} failed; left at the end: {}",
                j.rate_requested,
                j.rate_achieved,
                j.started,
                j.deleted,
                j.failed,
                j.phases_at_end
                    .as_ref()
                    .map_or("not listed".to_string(), |phases| {
                        phases
                            .iter()
                            .map(|(phase, n)| format!("{n} {phase}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
            );
        }
        match &self.evictions {
            Some(e) => {
                println!(
                    "  guard (dry-run evictions) {} ({:.1}/s): {} allowed, {} held, {} failed",
                    e.allowed + e.held + e.failed,
                    e.rate_achieved,
                    e.allowed,
                    e.held,
                    e.failed
                );
                println!("  eviction            {}", latency(&e.latency));
            }
            None => println!("  guard               off (--evictions 0)"),
        }
        println!(
            "  server RSS at the phase's start {}",
            mib(self.server_rss_start_mib)
        );
        print_usage(&self.server, &self.apiserver, &self.etcd);
        if let Some(u) = &self.kwok {
            println!(
                "  {:<19} {:.1} CPU s ({:.0}% of one core)   RSS max {:.1} MiB",
                "kwok", u.cpu_seconds, u.cpu_percent_of_one_core, u.rss_max_mib
            );
        }
        if let Some(c) = &self.cold_start {
            println!(
                "  cold start          ready {:.2} s, every target listed {:.2} s; RSS then {} (peak {})",
                c.ready_seconds,
                c.complete_seconds,
                mib(c.rss_mib),
                mib(c.peak_rss_mib)
            );
        }
        println!(
            "  targets             never Unknown: {}   every flip seen: {}",
            verdict(f.unknown_gate_events + g.unknown == 0),
            verdict(f.seen_on_gate == f.flips)
        );
    }
}

fn optional(value: Option<f64>, decimals: usize) -> String {
    value.map_or("n/a".to_string(), |v| format!("{v:.decimals$}"))
}

fn cpu(usage: &Option<Usage>) -> String {
    usage.as_ref().map_or("n/a".to_string(), |u| {
        format!("{:.1}% ({:.1} s)", u.cpu_percent_of_one_core, u.cpu_seconds)
    })
}

fn rss(usage: &Option<Usage>) -> String {
    mib(usage.as_ref().map(|u| u.rss_max_mib))
}

/// `12.3 MiB`, or `n/a`.
pub(crate) fn mib(size: Option<f64>) -> String {
    size.map_or("n/a".to_string(), |m| format!("{m:.1} MiB"))
}

/// `--compare-persist`: the same phase without and with persistence, side by side.
pub(crate) fn print_comparison(off: &[Phase], on: &[Phase]) {
    for (a, b) in off.iter().zip(on) {
        println!(
            "\npersistence off / on: {} subjects ({} driven, {} operations held active), {} watcher(s), {:.0} s at {}/s",
            a.subjects, a.driven, a.held_active, a.watchers, a.duration_seconds, a.rate_requested
        );
        let writes = write_pairs(&a.apiserver_writes, &b.apiserver_writes);
        let labels: Vec<String> = writes
            .keys()
            .map(|(verb, resource)| format!("  {verb:<7} {resource}"))
            .collect();
        let width = labels
            .iter()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0)
            .max(36);
        let row =
            |name: &str, off: String, on: String| println!("  {name:<width$} {off:>18} {on:>18}");
        row("", "persist off".into(), "persist on".into());
        for (name, figure) in COMPARED {
            row(name, figure(a), figure(b));
        }
        println!("  kube-apiserver writes by verb and resource:");
        for (label, (off, on)) in labels.iter().zip(writes.values()) {
            row(label, off.to_string(), on.to_string());
        }
    }
}

/// How a row's figure is read off a phase.
type Figure = fn(&Phase) -> String;

/// The rows of [`print_comparison`]: a label and how to read its figure off a phase.
const COMPARED: &[(&str, Figure)] = &[
    ("live API start → event p50", |p| {
        ms(p.start_latency.p50_ms)
    }),
    ("live API start → event p99", |p| {
        ms(p.start_latency.p99_ms)
    }),
    ("live API start → event max", |p| {
        ms(p.start_latency.max_ms)
    }),
    ("completion delay p99", |p| ms(p.completion_delay.p99_ms)),
    ("lost starts / completions", |p| {
        format!("{} / {}", p.lost_starts, p.lost_completions)
    }),
    ("operation lifecycles", |p| p.lifecycles.to_string()),
    ("InFlightOperation writes", |p| {
        p.operation_writes.to_string()
    }),
    ("  per 1,000 lifecycles", |p| {
        optional(p.operation_writes_per_1000_lifecycles, 1)
    }),
    ("server CPU (% of one core)", |p| cpu(&p.server)),
    ("server RSS max", |p| rss(&p.server)),
    ("kube-apiserver CPU (% of one core)", |p| cpu(&p.apiserver)),
    ("kube-apiserver RSS max", |p| rss(&p.apiserver)),
    ("etcd CPU (% of one core)", |p| cpu(&p.etcd)),
    ("etcd RSS max", |p| rss(&p.etcd)),
];

fn ms(value: f64) -> String {
    format!("{value:.1} ms")
}

/// The writes of two runs by `(verb, resource)`, each with both runs' totals (0 where a run
/// made none).
fn write_pairs(a: &[WriteRow], b: &[WriteRow]) -> BTreeMap<(String, String), (u64, u64)> {
    let mut pairs: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for w in a {
        pairs
            .entry((w.verb.clone(), w.resource_path()))
            .or_default()
            .0 += w.total;
    }
    for w in b {
        pairs
            .entry((w.verb.clone(), w.resource_path()))
            .or_default()
            .1 += w.total;
    }
    pairs
}

/// The `--scale` summary: one line per level.
pub(crate) fn print_scale(phases: &[Phase]) {
    println!(
        "\n  subjects   active ops   server RSS max   start→event p99   lost   cold start: ready / every target listed"
    );
    for p in phases {
        let rss = rss(&p.server);
        let cold_start = p.cold_start.map_or("n/a".to_string(), |c| {
            // All of the process's memory over its operations: an upper bound of a record's.
            let per_operation = c
                .rss_mib
                .filter(|_| p.held_active > 0)
                .map_or("n/a".to_string(), |m| {
                    format!("{:.1} KiB", m * 1024.0 / p.held_active as f64)
                });
            let floor = |f: Option<f64>| f.map_or("n/a".to_string(), |f| format!("{f:.2} s"));
            let (streamed, paged) = (
                floor(c.stream_floor_seconds),
                floor(c.list_floor_seconds),
            );
            format!(
                "{:.2} s / {:.2} s (kube-apiserver alone: {streamed} streamed, {paged} in pages), RSS then {} ({per_operation} per active operation)",
                c.ready_seconds,
                c.complete_seconds,
                mib(c.rss_mib)
            )
        });
        println!(
            "  {:>8}   {:>10}   {:>14}   {:>12.1} ms   {:>4}   {}",
            p.subjects,
            p.held_active,
            rss,
            p.start_latency.p99_ms,
            p.lost_starts + p.lost_completions,
            cold_start
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_per_thousand_lifecycles() {
        assert_eq!(per_thousand(0, 6_001), Some(0.0));
        // Create, update on completion, delete: three writes per lifecycle.
        assert_eq!(per_thousand(18_003, 6_001), Some(3000.0));
        assert_eq!(per_thousand(5, 2_000), Some(2.5));
        assert_eq!(per_thousand(7, 0), None);
    }

    #[test]
    fn write_pairs_union_both_runs() {
        let row = |verb: &str, group: &str, resource: &str, total| WriteRow {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: String::new(),
            total,
            by_benchmark: 0,
        };
        let off = [row("PATCH", "kubevirt.io", "virtualmachines", 10)];
        let on = [
            row("PATCH", "kubevirt.io", "virtualmachines", 12),
            row("POST", "ifo.kubevirt.io", "inflightoperations", 4),
        ];
        let pairs: Vec<_> = write_pairs(&off, &on).into_iter().collect();
        assert_eq!(
            pairs,
            vec![
                (
                    ("PATCH".into(), "kubevirt.io/virtualmachines".into()),
                    (10, 12)
                ),
                (
                    ("POST".into(), "ifo.kubevirt.io/inflightoperations".into()),
                    (0, 4)
                ),
            ]
        );
    }
}
