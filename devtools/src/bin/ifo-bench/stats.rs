//! Latency summaries.

use serde::Serialize;
use std::time::Duration;

/// Percentiles of a set of durations, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub(crate) struct Summary {
    pub count: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Summary {
    pub(crate) fn of(mut samples: Vec<Duration>) -> Summary {
        if samples.is_empty() {
            return Summary::default();
        }
        samples.sort_unstable();
        let at = |q: f64| {
            // Nearest rank: the smallest sample with at least q of all samples at or below it.
            let rank = (q * samples.len() as f64).ceil() as usize;
            samples[rank.clamp(1, samples.len()) - 1].as_secs_f64() * 1000.0
        };
        Summary {
            count: samples.len(),
            p50_ms: at(0.50),
            p90_ms: at(0.90),
            p95_ms: at(0.95),
            p99_ms: at(0.99),
            max_ms: at(1.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s = Summary::of((1..=100).rev().map(Duration::from_millis).collect());
        assert_eq!(
            (s.count, s.p50_ms, s.p90_ms, s.p95_ms, s.p99_ms, s.max_ms),
            (100, 50.0, 90.0, 95.0, 99.0, 100.0)
        );
        assert_eq!(Summary::of(vec![]).count, 0);
    }
}
