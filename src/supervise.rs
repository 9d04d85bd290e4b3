//! The server's background tasks, owned and watched: none of them may vanish silently.
//!
//! A detached task that panics or returns is simply gone, and the server goes on answering from
//! an index nothing updates any more — the silent staleness a maintenance gate must never serve.
//! So every long-running task runs under a [`Tasks`] set, in one of two ways:
//!
//! - [`Tasks::restarting`]: the task is started again after it ends or panics, with a backoff
//!   ([`crate::backoff::RESTART`]: 1 s doubling to 30 s; a run of a minute starts the backoff
//!   over). The ruleset controller, the deadline ticker and the persistence writer are such
//!   tasks: each starts from what the cluster says, so a fresh start loses nothing. Watchers restart the same way
//!   ([`restarting`], run by their owner).
//! - [`Tasks::essential`]: a task the server cannot redo (the leader elector: a replica whose
//!   elector is gone must not keep serving). When it ends, `/livez` and `/readyz` fail (see
//!   [`Readiness::fail`]), so that the kubelet restarts the pod and the Service moves away.
//!
//! Either way the failure is logged (`task` names it) and counted in `ifo_task_failures_total`.
//! Panics are caught per task (the process is built with `panic = "unwind"`), so one task's bug
//! never takes the others down.
//!
//! Shutdown is one step: [`Tasks::shutdown`] cancels every task and waits for them to end.

use crate::readiness::Readiness;
use futures::FutureExt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How one run of a task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It returned.
    Returned,
    /// It panicked, with the panic's message.
    Panicked(String),
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Returned => f.write_str("it returned"),
            Ended::Panicked(message) => write!(f, "it panicked: {message}"),
        }
    }
}

/// Runs `future` to its end, catching a panic.
async fn run_once(future: impl Future<Output = ()>) -> Ended {
    match AssertUnwindSafe(future).catch_unwind().await {
        Ok(()) => Ended::Returned,
        Err(panic) => Ended::Panicked(
            panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".to_owned()),
        ),
    }
}

/// Logs and counts a task's failure.
fn report(task: &str, ended: &Ended, then: &str) {
    tracing::error!(task, error = %ended, "background task failed; {then}");
    crate::metrics::task_failed(task);
}

/// Runs the task `start` makes for ever: started again, after a backoff, whenever it ends or
/// panics. Dropping the future (aborting its task) stops it.
pub(crate) async fn restarting<F, Fut>(task: &'static str, mut start: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut backoff = crate::backoff::RESTART;
    loop {
        backoff.begin();
        let ended = run_once(start()).await;
        let wait = backoff.failed();
        report(
            task,
            &ended,
            &format!("starting it again in {}s", wait.as_secs()),
        );
        tokio::time::sleep(wait).await;
    }
}

/// The server's background tasks: one set, one cancellation, one shutdown.
pub(crate) struct Tasks {
    set: JoinSet<()>,
    cancel: CancellationToken,
    /// Cancelled when the shutdown sequence begins: from then on essential tasks may end.
    stopping: CancellationToken,
    readiness: Readiness,
}

impl Tasks {
    /// An empty set; essential tasks that end fail `readiness` (and liveness).
    pub(crate) fn new(readiness: Readiness) -> Tasks {
        Tasks {
            set: JoinSet::new(),
            cancel: CancellationToken::new(),
            stopping: CancellationToken::new(),
            readiness,
        }
    }

    /// To cancel when the shutdown sequence begins (before [`Tasks::shutdown`]): essential tasks
    /// asked to stop by it (the elector hands the Lease over) then end without failing the
    /// server.
    pub(crate) fn stopping(&self) -> CancellationToken {
        self.stopping.clone()
    }

    fn spawn(&mut self, future: impl Future<Output = ()> + Send + 'static) {
        let cancel = self.cancel.clone();
        self.set.spawn(async move {
            tokio::select! {
                () = cancel.cancelled() => {}
                () = future => {}
            }
        });
    }

    /// A task that runs until shutdown, started again whenever it ends or panics.
    pub(crate) fn restarting<F, Fut>(&mut self, task: &'static str, start: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.spawn(restarting(task, start));
    }

    /// A task that finishes: its return is its success; a panic is counted and logged, and the
    /// server goes on without it (what it did is retried by the tasks that depend on it).
    pub(crate) fn once(
        &mut self,
        task: &'static str,
        future: impl Future<Output = ()> + Send + 'static,
    ) {
        self.spawn(async move {
            let ended = run_once(future).await;
            if ended != Ended::Returned {
                report(task, &ended, "not started again");
            }
        });
    }

    /// A task the server cannot do without: when it ends before shutdown, `/livez` and
    /// `/readyz` fail from then on, and the pod is restarted.
    pub(crate) fn essential(
        &mut self,
        task: &'static str,
        future: impl Future<Output = ()> + Send + 'static,
    ) {
        let (readiness, stopping) = (self.readiness.clone(), self.stopping.clone());
        self.spawn(async move {
            let ended = run_once(future).await;
            if stopping.is_cancelled() && ended == Ended::Returned {
                return;
            }
            report(task, &ended, "the server is not live any more");
            readiness.fail(format!("background task {task} failed: {ended}"));
        });
    }

    /// Cancels every task and waits until they have ended.
    pub(crate) async fn shutdown(mut self) {
        self.cancel.cancel();
        while self.set.join_next().await.is_some() {}
    }
}

/// What the tests of supervised tasks share.
#[cfg(test)]
pub(crate) mod testing {
    use super::Tasks;
    use crate::readiness::Readiness;
    use std::future::Future;
    use std::sync::Arc;
    use tokio::sync::Notify;

    /// Tasks under a readiness that has nothing left to wait for.
    pub(crate) fn ready_tasks() -> (Readiness, Tasks) {
        let (readiness, listed) = Readiness::new("test");
        listed.done();
        (readiness.clone(), Tasks::new(readiness))
    }

    /// Runs what `start` makes as task `task` of `tasks`, started again as any is; notifying
    /// the `Notify` returned kills the run under way (it panics, as a bug in it would).
    pub(crate) fn restarting_killable<F, Fut>(
        tasks: &mut Tasks,
        task: &'static str,
        mut start: F,
    ) -> Arc<Notify>
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let kill = Arc::new(Notify::new());
        tasks.restarting(task, {
            let kill = kill.clone();
            move || {
                let (run, kill) = (start(), kill.clone());
                async move {
                    tokio::select! {
                        () = run => {}
                        () = kill.notified() => panic!("killed"),
                    }
                }
            }
        });
        kill
    }

    /// How many times task `task` failed, as `ifo_task_failures_total` counts it.
    pub(crate) fn failures(task: &str) -> u64 {
        let series = format!("ifo_task_failures_total{{task=\"{task}\"}} ");
        crate::metrics::render()
            .lines()
            .find_map(|line| line.strip_prefix(series.as_str()))
            .map_or(0, |n| n.trim().parse().expect("a count"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    use testing::ready_tasks;

    #[tokio::test(start_paused = true)]
    async fn a_panicking_task_is_started_again_with_a_backoff() {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let (readiness, mut tasks) = ready_tasks();
        tasks.restarting("test-panics", move || {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            async move {
                assert!(n >= 3, "run {n} fails");
                std::future::pending::<()>().await;
            }
        });
        // Runs at 0 s, 1 s, 3 s (backoff 1 s, then 2 s) and 7 s (then 4 s).
        tokio::time::sleep(Duration::from_millis(6_900)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 4);
        assert!(readiness.liveness().is_ok());
        tasks.shutdown().await;
    }

    #[tokio::test]
    async fn an_essential_task_that_ends_fails_liveness_and_readiness() {
        let (readiness, mut tasks) = ready_tasks();
        tasks.essential("test-essential", async { panic!("gone") });
        let mut waited = 0;
        while readiness.liveness().is_ok() && waited < 100 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            waited += 1;
        }
        let reason = readiness.liveness().unwrap_err();
        assert!(
            reason.contains("test-essential") && reason.contains("gone"),
            "{reason}"
        );
        assert!(!readiness.is_ready());
        tasks.shutdown().await;
    }

    #[tokio::test]
    async fn shutdown_ends_every_task_without_failing_anything() {
        let (readiness, mut tasks) = ready_tasks();
        tasks.essential("test-forever", std::future::pending());
        tasks.restarting("test-forever-too", std::future::pending);
        tasks.shutdown().await;
        assert!(readiness.liveness().is_ok());
    }
}
