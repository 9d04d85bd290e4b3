//! CPU time and memory of the server process under test, from `/proc`.

use anyhow::{Context, Result};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// One reading of a process.
#[derive(Clone, Copy, Debug)]
pub struct Reading {
    /// User + system CPU seconds since the process started.
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    /// Peak resident set since the process started (`VmHWM`).
    pub peak_rss_bytes: u64,
}

pub fn read(pid: u32) -> Result<Reading> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat (is the server running?)"))?;
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

/// Samples the resident set in the background and keeps the highest value since the last
/// [`RssSampler::take_max`], since a phase's peak is not what `VmHWM` (the lifetime peak) says.
pub struct RssSampler {
    max: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    pub fn start(pid: u32) -> RssSampler {
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

    pub fn take_max(&self) -> u64 {
        self.max.swap(0, Ordering::Relaxed)
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}
