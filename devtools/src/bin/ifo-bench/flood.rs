//! `--flood`: one VirtualMachine, in a namespace of its own, changed many times a second while a
//! phase drives the subjects, as a tenant patching her object in a loop; a rule added to the
//! subjects' ruleset ([`SLOW_RULE`]) is slow on it and detects nothing. What it measures is what
//! the other subjects' detections suffer from one object's changes: the phase's start → event
//! latency, beside the flood's own figures.

use anyhow::{Context, Result};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// The flooded object's namespace.
pub(crate) const NAMESPACE: &str = "ifo-bench-flood";

/// The flooded object.
const NAME: &str = "flooded";

/// The rule added to the subjects' ruleset: it iterates `spec.n` times, and matches nothing. The
/// subjects have no `spec.n`: on them it costs nothing.
pub(crate) const SLOW_RULE: &str = "lists.range(object.spec.?n.orValue(0)).exists(i, i < 0)";

/// Changes in flight at once.
const CONCURRENCY: usize = 8;

/// What a phase's flood did.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Report {
    pub rate_requested: f64,
    /// Changes sent, and those that failed.
    pub changes: u64,
    pub failed: u64,
    pub rate_achieved: f64,
    /// `spec.n` of the object: the iterations of [`SLOW_RULE`] on it.
    pub cost: u64,
}

/// The flooded object.
pub(crate) struct Flood {
    api: Api<DynamicObject>,
    cost: u64,
}

impl Flood {
    /// Creates the namespace and the object, on which [`SLOW_RULE`] iterates `cost` times.
    pub(crate) async fn prepare(client: kube::Client, cost: u64) -> Result<Flood> {
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        let ns = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) | Err(kube::Error::Api(_)) => {}
            Err(e) => return Err(e).context("creating the flood's namespace"),
        }
        let resource = crate::subjects::virtual_machines();
        let api = Api::namespaced_with(client, NAMESPACE, &resource);
        let vm: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {"runStrategy": "Halted", "n": cost},
        }))?;
        match api.create(&PostParams::default(), &vm).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let patch = json!({"spec": {"n": cost}});
                api.patch(NAME, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .context("setting the flooded object's cost")?;
            }
            Err(e) => return Err(e).context("creating the flooded object"),
        }
        Ok(Flood { api, cost })
    }

    /// Changes the object (an annotation) `rate` times a second for `duration`.
    pub(crate) async fn run(self: Arc<Self>, rate: f64, duration: Duration) -> Report {
        let in_flight = Arc::new(Semaphore::new(CONCURRENCY));
        let failed = Arc::new(AtomicU64::new(0));
        let began = Instant::now();
        let every = Duration::from_secs_f64(1.0 / rate);
        let mut sent = 0u64;
        while began.elapsed() < duration {
            tokio::time::sleep_until(began + every.mul_f64(sent as f64)).await;
            let permit = in_flight
                .clone()
                .acquire_owned()
                .await
                .expect("never closed");
            let (api, failed) = (self.api.clone(), failed.clone());
            let patch =
                json!({"metadata": {"annotations": {"example.com/round": sent.to_string()}}});
            tokio::spawn(async move {
                if let Err(e) = api
                    .patch(NAME, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    tracing::warn!(error = %e, "a change of the flooded object failed");
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                drop(permit);
            });
            sent += 1;
        }
        let _all = in_flight
            .acquire_many(CONCURRENCY as u32)
            .await
            .expect("never closed");
        Report {
            rate_requested: rate,
            changes: sent,
            failed: failed.load(Ordering::Relaxed),
            rate_achieved: sent as f64 / began.elapsed().as_secs_f64(),
            cost: self.cost,
        }
    }
}
