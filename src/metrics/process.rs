//! The standard `process_*` series, read from `/proc/self` at scrape time (Linux, where the
//! server runs): CPU time, resident and virtual memory, open and allowed file descriptors, start
//! time. A few reads per scrape rather than a dependency; on another OS, or when `/proc` is
//! not mounted, the series are simply absent.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Clock ticks per second of `/proc/<pid>/stat` times: `USER_HZ`, 100 in the Linux ABI on
/// every architecture Kubernetes runs on.
const TICKS_PER_SECOND: f64 = 100.0;

#[derive(Debug)]
pub(super) struct Process;

/// What one scrape reads.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Sample {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<f64>,
    pub virtual_bytes: Option<f64>,
    pub start_time_seconds: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
}

impl Sample {
    fn read() -> Sample {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let mut sample = read("/proc/self/stat")
            .as_deref()
            .map(parse_stat)
            .unwrap_or_default();
        if let (Some(since_boot), Some(boot)) = (
            sample.start_time_seconds,
            read("/proc/stat").as_deref().and_then(boot_time),
        ) {
            sample.start_time_seconds = Some(boot + since_boot);
        } else {
            sample.start_time_seconds = None;
        }
        sample.resident_bytes = read("/proc/self/status")
            .as_deref()
            .and_then(resident_bytes);
        sample.max_fds = read("/proc/self/limits").as_deref().and_then(max_fds);
        #[allow(clippy::cast_precision_loss)] // a count of descriptors
        {
            sample.open_fds = std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|d| d.count() as f64);
        }
        sample
    }
}

/// CPU seconds, virtual bytes and start time (seconds after boot) from `/proc/self/stat`.
pub(super) fn parse_stat(stat: &str) -> Sample {
    // The command name (field 2) may hold spaces and parentheses: fields restart after the
    // last `)`, at field 3.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return Sample::default();
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field n (1-based, as in proc(5)) is fields[n - 3].
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok());
    Sample {
        cpu_seconds: field(14)
            .zip(field(15))
            .map(|(user, system)| (user + system) / TICKS_PER_SECOND),
        start_time_seconds: field(22).map(|ticks| ticks / TICKS_PER_SECOND),
        virtual_bytes: field(23),
        ..Sample::default()
    }
}

/// `btime` of `/proc/stat`: the boot time, Unix seconds.
fn boot_time(stat: &str) -> Option<f64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// `VmRSS` of `/proc/self/status`, in bytes.
pub(super) fn resident_bytes(status: &str) -> Option<f64> {
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024.0)
}

/// The soft limit of open files from `/proc/self/limits`.
pub(super) fn max_fds(limits: &str) -> Option<f64> {
    limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = Sample::read();
        if let Some(v) = s.cpu_seconds {
            let c = ConstCounter::new(v);
            c.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                c.metric_type(),
            )?)?;
        }
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                s.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                s.virtual_bytes,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                s.start_time_seconds,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                s.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                s.max_fds,
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(v) = value {
                let g = ConstGauge::new(v);
                g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
            }
        }
        Ok(())
    }
}
