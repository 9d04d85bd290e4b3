//! How long to wait before trying again after a failure: one exponential backoff for every loop
//! of the server that retries (a supervised task started again, a watch listed again, a
//! persisted copy written again), so that they all back off alike and are tested once.
//!
//! A [`Backoff`] doubles from its first wait up to its longest, and starts over when the run
//! that failed lasted long enough to count as healthy (as kube-runtime's `ResetTimerBackoff`,
//! but measured from when the run began, so that the wait before it does not count as health);
//! a jitter spreads the retries of writes that failed together. kube-runtime's own backoff (on
//! the `backon` crate) measures health from the last wait and adds its jitter on one side only,
//! so each of its users would change how it retries; these few lines keep every one as it was.

use std::time::Duration;

use tokio::time::Instant;

/// The backoff of the server's loops that start something again (a supervised task, a watch
/// that lists again): 1 s doubling to 30 s, started over by a run of a minute.
pub(crate) const RESTART: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30))
    .healthy_after(Duration::from_secs(60));

/// An exponential backoff: the waits it gives double from `first` up to `longest`.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    first: Duration,
    longest: Duration,
    /// A run that lasted this long before it failed starts the waits over.
    healthy_after: Option<Duration>,
    /// Each wait is multiplied by a random factor within `1 ± jitter`.
    jitter: f64,
    /// Failures in a row: the next wait is the `failures + 1`th.
    failures: u32,
    /// When the run under way began ([`Backoff::begin`]).
    began: Option<Instant>,
}

impl Backoff {
    /// Waits doubling from `first` up to `longest`, never started over, without jitter.
    pub(crate) const fn new(first: Duration, longest: Duration) -> Backoff {
        Backoff {
            first,
            longest,
            healthy_after: None,
            jitter: 0.0,
            failures: 0,
            began: None,
        }
    }

    /// The waits start over after a run (from [`Backoff::begin`] to [`Backoff::failed`]) of at
    /// least `healthy`.
    pub(crate) const fn healthy_after(mut self, healthy: Duration) -> Backoff {
        self.healthy_after = Some(healthy);
        self
    }

    /// Each wait is multiplied by a random factor within `1 ± fraction`, so that what failed
    /// together does not retry together.
    pub(crate) const fn jitter(mut self, fraction: f64) -> Backoff {
        self.jitter = fraction;
        self
    }

    /// The wait after `failures` failures in a row (the first failure: 1; 0 waits as 1 does),
    /// whatever the state of this backoff.
    pub(crate) fn wait(&self, failures: u32) -> Duration {
        let doubled = self
            .first
            .saturating_mul(1 << failures.saturating_sub(1).min(20));
        let wait = doubled.min(self.longest);
        if self.jitter == 0.0 {
            wait
        } else {
            wait.mul_f64(1.0 - self.jitter + 2.0 * self.jitter * fastrand::f64())
        }
    }

    /// A run begins now: a failure at least [`Backoff::healthy_after`] from now starts the
    /// waits over.
    pub(crate) fn begin(&mut self) {
        self.began = Some(Instant::now());
    }

    /// The run failed: how long to wait before the next one.
    pub(crate) fn failed(&mut self) -> Duration {
        let healthy = match (self.began.take(), self.healthy_after) {
            (Some(began), Some(healthy)) => began.elapsed() >= healthy,
            _ => false,
        };
        if healthy {
            self.failures = 0;
        }
        self.failures = self.failures.saturating_add(1);
        self.wait(self.failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn secs(waits: &[Duration]) -> Vec<u64> {
        waits.iter().map(Duration::as_secs).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn waits_double_up_to_the_longest() {
        let mut backoff = RESTART;
        let waits: Vec<Duration> = (0..8)
            .map(|_| {
                backoff.begin();
                backoff.failed()
            })
            .collect();
        assert_eq!(secs(&waits), [1, 2, 4, 8, 16, 30, 30, 30]);
        // However many failures in a row.
        for _ in 0..100 {
            backoff.failed();
        }
        assert_eq!(backoff.failed(), 30 * SECOND);
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_that_lasted_long_enough_starts_the_waits_over() {
        let mut backoff = RESTART;
        for _ in 0..4 {
            backoff.begin();
            backoff.failed();
        }
        // Just short of healthy: the waits go on doubling.
        backoff.begin();
        tokio::time::advance(59 * SECOND).await;
        assert_eq!(backoff.failed(), 16 * SECOND);
        // Healthy: the first wait again, then doubling from it.
        backoff.begin();
        tokio::time::advance(60 * SECOND).await;
        assert_eq!(backoff.failed(), SECOND);
        backoff.begin();
        assert_eq!(backoff.failed(), 2 * SECOND);
        // The time waited before a run is not health: only the run counts.
        tokio::time::advance(120 * SECOND).await;
        backoff.begin();
        assert_eq!(backoff.failed(), 4 * SECOND);
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_healthy_period_the_waits_never_start_over() {
        let mut backoff = Backoff::new(SECOND, 30 * SECOND);
        backoff.begin();
        tokio::time::advance(3600 * SECOND).await;
        assert_eq!(secs(&[backoff.failed(), backoff.failed()]), [1, 2]);
        backoff.begin();
        tokio::time::advance(3600 * SECOND).await;
        assert_eq!(backoff.failed(), 4 * SECOND);
    }

    #[test]
    fn a_jittered_wait_stays_within_its_fraction() {
        let backoff = Backoff::new(Duration::from_millis(500), 30 * SECOND).jitter(0.2);
        for failures in 0..12 {
            let exact = Backoff::new(Duration::from_millis(500), 30 * SECOND).wait(failures);
            for _ in 0..50 {
                let wait = backoff.wait(failures);
                assert!(
                    wait >= exact.mul_f64(0.8) && wait <= exact.mul_f64(1.2),
                    "{wait:?} for {exact:?}"
                );
            }
        }
        assert_eq!(
            Backoff::new(Duration::from_millis(500), 30 * SECOND).wait(0),
            Duration::from_millis(500)
        );
        assert_eq!(
            Backoff::new(Duration::from_millis(500), 30 * SECOND).wait(11),
            30 * SECOND
        );
    }
}
