//! Requests at a fixed pace, and at most so many of them in flight at once.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// Calls `tick(n)` for n = 0, 1, … `rate` times a second for `duration`: the n-th call is due
/// at the start + n / `rate`, and is made once the call before it has returned (a tick that
/// only hands its request to [`InFlight::spawn`] keeps the pace). Returns the calls made per
/// second of the time it took.
pub(crate) async fn paced<F, Fut>(rate: f64, duration: Duration, mut tick: F) -> f64
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = ()>,
{
    let began = Instant::now();
    let every = Duration::from_secs_f64(1.0 / rate);
    let mut made = 0u64;
    while began.elapsed() < duration {
        tokio::time::sleep_until(began + every.mul_f64(made as f64)).await;
        tick(made).await;
        made += 1;
    }
    made as f64 / began.elapsed().as_secs_f64()
}

/// A bound on the requests in flight: each runs as a task of its own once a slot is free.
#[derive(Clone)]
pub(crate) struct InFlight {
    slots: Arc<Semaphore>,
    limit: u32,
}

impl InFlight {
    pub(crate) fn new(limit: usize) -> InFlight {
        InFlight {
            slots: Arc::new(Semaphore::new(limit)),
            limit: limit as u32,
        }
    }

    /// Waits for a free slot, then runs `request` in a task that holds the slot until it ends.
    pub(crate) async fn spawn(&self, request: impl Future<Output = ()> + Send + 'static) {
        let slot = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .expect("never closed");
        tokio::spawn(async move {
            request.await;
            drop(slot);
        });
    }

    /// Waits until every request spawned has ended.
    pub(crate) async fn drain(&self) {
        let _all = self
            .slots
            .acquire_many(self.limit)
            .await
            .expect("never closed");
    }
}
