//! Persistence mode at start and at each term: the copies read back into the pipeline before
//! anything is evaluated ([`restore`]), and what a copy writer starts from ([`CopyWriter`]).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use crate::config::ServeArgs;
use crate::detect::Detector;
use crate::persist;
use crate::readiness::Readiness;
use crate::supervise::Tasks;

/// Persistence mode: reads the copies back into the pipeline before anything is evaluated, so
/// operations keep their identities; the writer starts later (at once, or with each term as
/// leader). Restored operations that nothing confirmed by a debounce threshold after the
/// initial sync ended while the server was down, and complete then.
pub(super) async fn restore(
    args: &ServeArgs,
    client: &kube::Client,
    detector: &Arc<Detector>,
    readiness: &Readiness,
    tasks: &mut Tasks,
) -> Result<Persistence> {
    let api = persist::api(client.clone());
    let timeout = args.initial_sync_timeout;
    let found = read_back(&api, timeout).await?;
    let refused = detector.restore(found.records.clone());
    tracing::info!(
        copies = found.copies.len(),
        restored = found.records.len() - refused.len(),
        "persisted operations read back"
    );
    let grace = args.debounce_threshold.unsigned_abs();
    tasks.once("restored-operations-sweep", {
        let (detector, readiness) = (detector.clone(), readiness.clone());
        async move {
            readiness.wait().await;
            tokio::time::sleep(grace).await;
            detector.sweep_restored();
        }
    });
    let detector = detector.clone();
    Ok(Persistence {
        writer: CopyWriter {
            api,
            settings: args.persist_settings(),
            timeout,
            detector,
            take_over_timeout: crate::client::api_timeout(args),
        },
        found,
    })
}

/// The copies in the cluster. A missing CRD or a 403 fails at once (they need an admin);
/// anything else is retried for `timeout`.
async fn read_back(
    api: &kube::Api<kube::api::DynamicObject>,
    timeout: Duration,
) -> Result<persist::ReadBack> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match persist::read_back(api).await {
            Ok(found) => return Ok(found),
            Err(e @ (persist::Error::NotInstalled(_) | persist::Error::Forbidden(_))) => {
                return Err(e.into());
            }
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::warn!(error = %e, "retrying in 2s");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Persistence mode, after the copies were read back at start.
pub(super) struct Persistence {
    pub(super) writer: CopyWriter,
    /// The copies read at start: what the writer starts from when it starts at once (without
    /// leader election).
    pub(super) found: persist::ReadBack,
}

/// What a persistence writer starts from.
#[derive(Clone)]
pub(super) struct CopyWriter {
    api: kube::Api<kube::api::DynamicObject>,
    settings: persist::Settings,
    timeout: Duration,
    /// Takes the identities of the copies at the start of a term (see [`CopyWriter::take_over`]).
    detector: Arc<Detector>,
    /// How long the start of a term waits for the copies.
    take_over_timeout: Duration,
}

impl CopyWriter {
    /// At the start of a term as leader, before requests are answered: reads the copies, and
    /// the operations this replica detected on its own take the uids and starts the previous
    /// leader served (and persisted). Returns the copies for the writer to start from; `None`
    /// when they could not be read in time (the term starts all the same, the writer reads
    /// them again).
    pub(super) async fn take_over(&self) -> Option<persist::ReadBack> {
        match tokio::time::timeout(self.take_over_timeout, persist::read_back(&self.api)).await {
            Ok(Ok(found)) => {
                self.detector.adopt(&found.records);
                Some(found)
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot read the persisted copies at the start of the term; operations keep the identities this replica gave them");
                None
            }
            Err(_) => {
                tracing::warn!(timeout = ?self.take_over_timeout, "reading the persisted copies at the start of the term timed out; operations keep the identities this replica gave them");
                None
            }
        }
    }

    /// Writes copies until the index is gone (or the task is aborted), starting from `found`,
    /// or, when `None`, from the copies as they are now. A term as leader always reads them
    /// again: the previous leader wrote after this replica's start, and a copy it wrote for an
    /// operation this replica no longer has must still be completed and deleted.
    pub(super) async fn run(
        self,
        found: Option<persist::ReadBack>,
        index: crate::index::IndexReader,
    ) {
        let found = match found {
            Some(found) => found,
            None => match read_back(&self.api, self.timeout).await {
                Ok(found) => found,
                Err(e) => {
                    // Ends the task: it is started again after a backoff.
                    tracing::error!(error = %e, "cannot read the persisted copies back");
                    return;
                }
            },
        };
        persist::Writer::new(self.api, self.settings, found)
            .run(index)
            .await;
    }
}
