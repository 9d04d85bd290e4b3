//! The subjects: VirtualMachines whose `/status` the benchmark moves through the states the
//! shipped `vm-lifecycle-rules` detect, the way KubeVirt's controllers would.

use crate::ledger::Ledger;
use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// The subjects' namespace (`--compare-persist` gives each run one of its own).
pub(crate) const NAMESPACE: &str = "ifo-bench";

/// One lifecycle: each state with the operation the rules detect in it.
pub(crate) const SCRIPT: [(&str, Option<&str>); 6] = [
    ("Starting", Some("Starting")),
    ("Running", None),
    ("Migrating", Some("Migrating")),
    ("Running", None),
    ("Stopping", Some("Stopping")),
    ("Stopped", None),
];
const STOPPED: usize = 5;
const MIGRATING: usize = 2;

/// Requests in flight at once; enough for kube-apiserver to keep up at the benchmark's rates.
const CONCURRENCY: usize = 64;

/// KubeVirt's VirtualMachines, the kind the benchmark's subjects are.
pub(crate) fn virtual_machines() -> ApiResource {
    ApiResource {
        group: "kubevirt.io".into(),
        version: "v1".into(),
        api_version: "kubevirt.io/v1".into(),
        kind: "VirtualMachine".into(),
        plural: "virtualmachines".into(),
    }
}

pub(crate) fn name(i: usize) -> String {
    format!("bench-vm-{i:05}")
}

/// The subjects and their states, and the status writes that move them.
pub(crate) struct Subjects {
    pub api: Api<DynamicObject>,
    /// The same resource across all namespaces, as the server's watchers list it.
    everywhere: Api<DynamicObject>,
    namespace: String,
    ledger: Arc<Ledger>,
    /// Index into [`SCRIPT`] per subject, as last written.
    states: Mutex<Vec<usize>>,
    in_flight: Arc<Semaphore>,
}

impl Subjects {
    pub(crate) fn new(client: kube::Client, ledger: Arc<Ledger>, namespace: &str) -> Subjects {
        let resource = virtual_machines();
        Subjects {
            everywhere: Api::all_with(client.clone(), &resource),
            api: Api::namespaced_with(client, namespace, &resource),
            namespace: namespace.to_string(),
            ledger,
            states: Mutex::new(Vec::new()),
            in_flight: Arc::new(Semaphore::new(CONCURRENCY)),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.states.lock().unwrap().len()
    }

    /// The subjects across all namespaces, as the server's watchers read them (see
    /// [`crate::floor`]).
    pub(crate) fn everywhere(&self) -> &Api<DynamicObject> {
        &self.everywhere
    }

    /// Creates subjects until there are `total` (their status empty: nothing in flight).
    pub(crate) async fn grow(&self, total: usize) -> Result<()> {
        let from = self.len();
        futures::stream::iter(from..total)
            .map(|i| async move {
                let vm: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                    "metadata": {"name": name(i), "namespace": self.namespace},
                    // Stopped, as their first state says: the rules take a VM created to run
                    // (and without a status yet) to be starting.
                    "spec": {"runStrategy": "Halted"},
                }))?;
                match self.api.create(&PostParams::default(), &vm).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                    Err(e) => Err(e).with_context(|| format!("creating {}", name(i))),
                }
            })
            .buffer_unordered(CONCURRENCY)
            .try_collect::<()>()
            .await
            .context("creating the subjects (is the kubevirt.io VirtualMachine CRD installed?)")?;
        self.states.lock().unwrap().resize(total, STOPPED);
        Ok(())
    }

    /// Moves subjects `range` one step each, round robin, `rate` per second for `duration`.
    /// Returns the rate achieved.
    pub(crate) async fn drive(&self, range: Range<usize>, rate: f64, duration: Duration) -> f64 {
        let began = Instant::now();
        let every = Duration::from_secs_f64(1.0 / rate);
        let mut sent = 0u64;
        let mut next = range.clone().cycle();
        while began.elapsed() < duration {
            tokio::time::sleep_until(began + every.mul_f64(sent as f64)).await;
            let i = next.next().expect("a non-empty range");
            let step = (self.states.lock().unwrap()[i] + 1) % SCRIPT.len();
            self.write(i, step).await;
            sent += 1;
        }
        self.drain().await;
        sent as f64 / began.elapsed().as_secs_f64()
    }

    /// Moves subjects `range` into a state with an operation and leaves them there.
    pub(crate) async fn hold(&self, range: Range<usize>) {
        for i in range {
            self.write(i, MIGRATING).await;
        }
        self.drain().await;
    }

    /// Ends every operation of subjects `range`, at `rate` writes per second so the end of a
    /// phase loads kube-apiserver no more than the phase itself.
    pub(crate) async fn settle(&self, range: Range<usize>, rate: f64) {
        let began = Instant::now();
        let every = Duration::from_secs_f64(1.0 / rate);
        let mut sent = 0u32;
        for i in range {
            if SCRIPT[self.states.lock().unwrap()[i]].1.is_some() {
                tokio::time::sleep_until(began + every * sent).await;
                self.write(i, STOPPED).await;
                sent += 1;
            }
        }
        self.drain().await;
    }

    /// Sends one status write (waiting only for a free request slot), recording in the ledger
    /// the operation it ends and the one it starts.
    async fn write(&self, i: usize, step: usize) {
        let permit = self
            .in_flight
            .clone()
            .acquire_owned()
            .await
            .expect("never closed");
        let previous = std::mem::replace(&mut self.states.lock().unwrap()[i], step);
        let (state, operation) = SCRIPT[step];
        let now = Instant::now();
        self.ledger.state((name(i), state.to_string()), now);
        if let Some(ended) = SCRIPT[previous].1.filter(|_| previous != step) {
            self.ledger.end((name(i), ended.to_string()), now);
        }
        let starts = operation.filter(|_| previous != step);
        if let Some(op) = starts {
            self.ledger.start((name(i), op.to_string()), now);
        }
        let api = self.api.clone();
        let ledger = self.ledger.clone();
        let patch = json!({"status": {"printableStatus": state, "ready": state == "Running"}});
        tokio::spawn(async move {
            let sent = Instant::now();
            let result = api
                .patch_status(&name(i), &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            if let Err(e) = &result {
                tracing::warn!(subject = %name(i), error = %e, "status write failed");
            }
            ledger.wrote(result.is_ok(), starts.is_some(), sent.elapsed());
            drop(permit);
        });
    }

    /// Deletes every subject and waits until they are gone, so a following run starts on a
    /// cluster without them.
    pub(crate) async fn remove_all(&self) -> Result<()> {
        self.api
            .delete_collection(&Default::default(), &Default::default())
            .await
            .context("deleting the subjects")?;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let left = self
                .api
                .list_metadata(&Default::default())
                .await?
                .items
                .len();
            if left == 0 {
                self.states.lock().unwrap().clear();
                return Ok(());
            }
            if Instant::now() > deadline {
                anyhow::bail!("{left} subjects still there 120 s after deleting them");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Waits until every write sent has been answered.
    async fn drain(&self) {
        let _all = self
            .in_flight
            .acquire_many(CONCURRENCY as u32)
            .await
            .expect("never closed");
    }
}
