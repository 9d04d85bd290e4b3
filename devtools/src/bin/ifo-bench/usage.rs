//! CPU time and memory of the processes under test (the server, kube-apiserver, etcd), from
//! `/proc`.

use anyhow::{Context, Result};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// One reading of a process.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reading {
    /// User + system CPU seconds since the process started.
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    /// Peak resident set since the process started (`VmHWM`).
    pub peak_rss_bytes: u64,
}

pub(crate) fn read(pid: u32) -> Result<Reading> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat (is process {pid} running?)"))?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("malformed /proc stat")?
        .1
        .split_whitespace()
        .collect();
    let ticks = |i: usize| -> Result<f64> {
        Ok(fields.get(i).context("short /proc stat")?.parse::<u64>()? as f64)
    };
    // utime and stime are fields 14 and 15 of stat(5); `fields` starts at field 3.
    // SAFETY: sysconf has no preconditions.
    // SAFETY: sysconf reads a constant of the system.
    #[allow(unsafe_code)]
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let cpu_seconds = (ticks(11)? + ticks(12)?) / hz;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    Ok(Reading {
        cpu_seconds,
        rss_bytes: kib("VmRSS:"),
        peak_rss_bytes: kib("VmHWM:"),
    })
}

/// Waits (at most `limit`) until process `pid` used less than a tenth of a core over a second:
/// what it was doing (a list after its start) no longer takes from what is measured next. Says
/// so when it gives up waiting.
pub(crate) async fn settled(pid: u32, limit: Duration) -> Result<()> {
    let began = tokio::time::Instant::now();
    loop {
        let before = read(pid)?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let after = read(pid)?;
        let share = share_of_one_core(&before, &after, 1.0);
        if share < 10.0 {
            return Ok(());
        }
        if began.elapsed() > limit {
            eprintln!(
                "warning: process {pid} still used {share:.0} % of a core after {limit:?}; measuring beside it"
            );
            return Ok(());
        }
    }
}

/// Samples the resident set in the background and keeps the highest value since the last
/// [`RssSampler::take_max`], since a phase's peak is not what `VmHWM` (the lifetime peak) says.
pub(crate) struct RssSampler {
    max: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    pub(crate) fn start(pid: u32) -> RssSampler {
        let max = Arc::new(AtomicU64::new(0));
        let sink = max.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                if let Ok(r) = read(pid) {
                    sink.fetch_max(r.rss_bytes, Ordering::Relaxed);
                }
            }
        });
        RssSampler { max, task }
    }

    pub(crate) fn take_max(&self) -> u64 {
        self.max.swap(0, Ordering::Relaxed)
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// CPU seconds used between two readings of one process per second of `wall_seconds`, as a
/// percentage of one core (200 is two cores busy); 0 for no time or a counter that went back.
pub(crate) fn share_of_one_core(before: &Reading, after: &Reading, wall_seconds: f64) -> f64 {
    let used = after.cpu_seconds - before.cpu_seconds;
    if wall_seconds <= 0.0 || used <= 0.0 {
        return 0.0;
    }
    100.0 * used / wall_seconds
}

/// What one process used over a phase.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Usage {
    pub cpu_seconds: f64,
    /// CPU seconds per second of the phase, as a percentage of one core.
    pub cpu_percent_of_one_core: f64,
    /// The highest resident set sampled during the phase (every 250 ms, and at its end).
    pub rss_max_mib: f64,
    /// The resident set at the phase's end, once its operations have completed.
    pub rss_end_mib: f64,
    pub rss_peak_lifetime_mib: f64,
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// One measured process (nothing when its pid is unknown): its reading at the start of a
/// phase, and its resident set sampled throughout.
pub(crate) struct Meter {
    pid: Option<u32>,
    rss: Option<RssSampler>,
    start: Option<Reading>,
}

impl Meter {
    /// Starts sampling; call within the runtime.
    pub(crate) fn new(pid: Option<u32>) -> Meter {
        Meter {
            pid,
            rss: pid.map(RssSampler::start),
            start: None,
        }
    }

    /// The start of a phase.
    pub(crate) fn begin(&mut self) -> Result<()> {
        self.start = self.pid.map(read).transpose()?;
        if let Some(rss) = &self.rss {
            rss.take_max();
        }
        Ok(())
    }

    /// The end of a phase that lasted `wall_seconds`: what the process used since
    /// [`Meter::begin`].
    pub(crate) fn end(&mut self, wall_seconds: f64) -> Result<Option<Usage>> {
        let (Some(pid), Some(start)) = (self.pid, self.start.take()) else {
            return Ok(None);
        };
        let now = read(pid)?;
        let rss_max = self.rss.as_ref().map_or(0, RssSampler::take_max);
        Ok(Some(Usage {
            cpu_seconds: (now.cpu_seconds - start.cpu_seconds).max(0.0),
            cpu_percent_of_one_core: share_of_one_core(&start, &now, wall_seconds),
            rss_max_mib: mib(rss_max.max(now.rss_bytes)),
            rss_end_mib: mib(now.rss_bytes),
            rss_peak_lifetime_mib: mib(now.peak_rss_bytes),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(cpu_seconds: f64) -> Reading {
        Reading {
            cpu_seconds,
            rss_bytes: 0,
            peak_rss_bytes: 0,
        }
    }

    #[test]
    fn cpu_share_is_cpu_seconds_per_wall_second_in_percent_of_a_core() {
        assert_eq!(share_of_one_core(&at(10.0), &at(13.0), 60.0), 5.0);
        assert_eq!(share_of_one_core(&at(0.0), &at(30.0), 20.0), 150.0);
        assert_eq!(share_of_one_core(&at(1.0), &at(1.0), 10.0), 0.0);
        // No time measured, or a process whose counter went back (another process).
        assert_eq!(share_of_one_core(&at(0.0), &at(5.0), 0.0), 0.0);
        assert_eq!(share_of_one_core(&at(9.0), &at(2.0), 10.0), 0.0);
    }

    #[test]
    fn reads_this_process() {
        let r = read(std::process::id()).unwrap();
        assert!(r.rss_bytes > 0 && r.peak_rss_bytes >= r.rss_bytes);
        assert!(r.cpu_seconds >= 0.0);
    }
}
