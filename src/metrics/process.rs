//! The standard `process_*` series, read from `/proc` at scrape time with `procfs` (Linux,
//! where the server runs): CPU time, resident and virtual memory, open and allowed file
//! descriptors, start time. A series whose file cannot be read (another OS, `/proc` not
//! mounted) is simply absent.

use procfs::process::{LimitValue, Process as Proc};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

#[derive(Debug)]
pub(super) struct Process;

impl Collector for Process {
    #[allow(clippy::cast_precision_loss)] // ticks, bytes and descriptors, far below 2^53
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Ok(me) = Proc::myself() else {
            return Ok(());
        };
        let stat = me.stat().ok();
        let ticks = procfs::ticks_per_second() as f64;
        if let Some(stat) = &stat {
            let c = ConstCounter::new((stat.utime + stat.stime) as f64 / ticks);
            c.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                c.metric_type(),
            )?)?;
        }
        let resident = me.status().ok().and_then(|s| s.vmrss);
        let started = stat
            .as_ref()
            .zip(procfs::boot_time_secs().ok())
            .map(|(s, boot)| boot as f64 + s.starttime as f64 / ticks);
        let max_fds = me
            .limits()
            .ok()
            .and_then(|l| match l.max_open_files.soft_limit {
                LimitValue::Value(n) => Some(n as f64),
                LimitValue::Unlimited => None,
            });
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                resident.map(|kib| kib as f64 * 1024.0),
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                stat.as_ref().map(|s| s.vsize as f64),
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                started,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                me.fd_count().ok().map(|n| n as f64),
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                max_fds,
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
