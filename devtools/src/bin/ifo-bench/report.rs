//! What a run measured: a table for people, JSON for tools.

use crate::ledger::Counts;
use crate::stats::Summary;
use crate::writes::Writes;
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct Phase {
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
    /// How long after `end + debounce threshold` each ended operation was shown `Completed`.
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
    pub duplicates: u64,
    pub unexpected: u64,
    pub relists: u64,
    pub events: u64,
    pub server: Option<Server>,
    pub apiserver_writes: Vec<WriteRow>,
    /// Writes of InFlightOperation resources by anyone (0 in the default, in-memory mode).
    pub operation_writes: u64,
}

#[derive(Debug, Serialize)]
pub struct Server {
    pub cpu_seconds: f64,
    /// CPU seconds per second of the phase, as a percentage of one core.
    pub cpu_percent_of_one_core: f64,
    pub rss_max_mib: f64,
    pub rss_peak_lifetime_mib: f64,
}

#[derive(Debug, Serialize)]
pub struct WriteRow {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub total: u64,
    /// The benchmark's own status writes; the rest are the server's and the controllers'.
    pub by_benchmark: u64,
}

pub fn write_rows(writes: &Writes, benchmark_status_writes: u64) -> Vec<WriteRow> {
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

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

pub fn server(cpu_seconds: f64, wall_seconds: f64, rss_max: u64, peak: u64) -> Server {
    Server {
        cpu_seconds,
        cpu_percent_of_one_core: 100.0 * cpu_seconds / wall_seconds.max(f64::EPSILON),
        rss_max_mib: mib(rss_max),
        rss_peak_lifetime_mib: mib(peak),
    }
}

fn latency(s: &Summary) -> String {
    format!(
        "p50 {:>7.1} ms   p90 {:>7.1} ms   p99 {:>7.1} ms   max {:>7.1} ms   (n={})",
        s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms, s.count
    )
}

fn verdict(ok: bool) -> &'static str {
    if ok { "ok" } else { "MISSED" }
}

impl Phase {
    pub fn print(&self) {
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
        match &self.server {
            Some(s) => println!(
                "  server              {:.1} CPU s ({:.0}% of one core)   RSS max {:.1} MiB (lifetime peak {:.1} MiB)",
                s.cpu_seconds, s.cpu_percent_of_one_core, s.rss_max_mib, s.rss_peak_lifetime_mib
            ),
            None => println!("  server              not measured (no --server-pid)"),
        }
        println!("  kube-apiserver writes during the phase:");
        for w in &self.apiserver_writes {
            let resource = [
                w.group.as_str(),
                w.resource.as_str(),
                w.subresource.as_str(),
            ]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("/");
            println!(
                "    {:<7} {:<50} {:>8}   (benchmark {}, others {})",
                w.verb,
                resource,
                w.total,
                w.by_benchmark,
                w.total - w.by_benchmark
            );
        }
        println!("  InFlightOperation writes {}", self.operation_writes);
        println!(
            "  targets             p99 ≤ 50 ms: {}   0 lost: {}   0 operation writes: {}",
            verdict(self.start_latency.p99_ms <= 50.0),
            verdict(self.lost_starts + self.lost_completions == 0),
            verdict(self.operation_writes == 0)
        );
    }
}

/// The `--scale` summary: one line per level.
pub fn print_scale(phases: &[Phase]) {
    println!("\n  subjects   active ops   server RSS max   start→event p99   lost");
    for p in phases {
        let rss = p
            .server
            .as_ref()
            .map_or("n/a".to_string(), |s| format!("{:.1} MiB", s.rss_max_mib));
        println!(
            "  {:>8}   {:>10}   {:>14}   {:>12.1} ms   {}",
            p.subjects,
            p.held_active,
            rss,
            p.start_latency.p99_ms,
            p.lost_starts + p.lost_completions
        );
    }
}
