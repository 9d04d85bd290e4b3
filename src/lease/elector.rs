//! Takes and keeps the Lease, publishes the [`Role`], and releases the Lease on shutdown.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::decide::{LeaseStep, Observation, decide};
use super::proof::{ContainerEnd, holder_pod, proves_gone};
use super::{Error, Role};

/// Where the Lease is and how it is kept (the `--leader-elect-*` flags).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This replica's identity in `spec.holderIdentity`.
    pub identity: String,
    /// How long others wait after the last renewal they saw before they take the lease.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops serving.
    pub renew_deadline: Duration,
    /// Time between two looks at the Lease.
    pub retry_period: Duration,
    /// The container that runs the server in a holder's pod. With it, followers watch the
    /// holder's pod and take the Lease as soon as kubelet reports that container ended after the
    /// holder took the Lease, instead of waiting for the Lease to expire.
    pub container: Option<String>,
}

/// Runs the election for one replica.
pub(crate) struct Elector {
    api: Api<Lease>,
    pods: Api<Pod>,
    settings: Settings,
    role: watch::Sender<Role>,
    seen: Option<Observation>,
    /// The pod of the holder to watch (none while we hold the Lease or nobody does).
    holder_pod: watch::Sender<Option<String>>,
    /// The latest end of that pod's server container kubelet reported.
    holder_ended: watch::Receiver<Option<ContainerEnd>>,
    holder_ended_tx: watch::Sender<Option<ContainerEnd>>,
    /// The replica to hand the lead over to while leading (a newer one: see `successor`), if
    /// any.
    successor: watch::Receiver<Option<String>>,
}

/// The Lease's annotation naming the pod a leader released it to.
pub(super) const SUCCESSOR_ANNOTATION: &str = "ifo.kubevirt.io/successor";

impl Elector {
    /// An elector that has not looked at the Lease yet, and the role it will publish (starting
    /// as [`Role::Following`]).
    pub(crate) fn new(
        client: kube::Client,
        settings: Settings,
    ) -> (Elector, watch::Receiver<Role>) {
        let (role, receiver) = watch::channel(Role::Following);
        let (holder_ended_tx, holder_ended) = watch::channel(None);
        let elector = Elector {
            api: Api::namespaced(client.clone(), &settings.namespace),
            pods: Api::namespaced(client, &settings.namespace),
            settings,
            role,
            seen: None,
            holder_pod: watch::channel(None).0,
            holder_ended,
            holder_ended_tx,
            successor: watch::channel(None).1,
        };
        (elector, receiver)
    }

    /// Hands the lead over, while leading, to the pod `successor` names (see `successor`).
    pub(crate) fn hand_over_to(mut self, successor: watch::Receiver<Option<String>>) -> Elector {
        self.successor = successor;
        self
    }

    fn lease_name(&self) -> String {
        format!("{}/{}", self.settings.namespace, self.settings.name)
    }

    fn leading(&self) -> bool {
        *self.role.borrow() == Role::Leading
    }

    /// Looks at the Lease every retry period, and at once when a watch sees it change, until
    /// `stop` fires (or its sender is dropped);
    /// then, if leading, stops leading first and releases the Lease, so another replica takes
    /// over at its next look instead of after a whole lease duration.
    pub(crate) async fn run(mut self, mut stop: oneshot::Receiver<()>) {
        let mut renewed = Instant::now();
        let changed = std::sync::Arc::new(tokio::sync::Notify::new());
        // Aborted when this ends, however it ends (a panic included).
        let mut watching = tokio::task::JoinSet::new();
        watching.spawn(watch_changes(
            self.api.clone(),
            self.settings.name.clone(),
            changed.clone(),
        ));
        if let Some(container) = self.settings.container.clone() {
            watching.spawn(super::holder_pod::watch(
                self.pods.clone(),
                container,
                self.holder_pod.subscribe(),
                self.holder_ended_tx.clone(),
                changed.clone(),
            ));
        }
        loop {
            let started = Instant::now();
            let budget = if self.leading() {
                self.settings
                    .renew_deadline
                    .saturating_sub(started.duration_since(renewed))
            } else {
                self.settings.renew_deadline
            };
            let attempt = tokio::time::timeout(budget, self.try_acquire_or_renew()).await;
            let result = attempt.unwrap_or_else(|_| Err(Error::Timeout(self.lease_name())));
            match result {
                Ok(true) => {
                    renewed = Instant::now();
                    if !self.leading() {
                        tracing::info!(lease = %self.lease_name(), identity = %self.settings.identity, "became the leader");
                        self.role.send_replace(Role::Leading);
                    }
                    // Test builds: lets a test make the elector fail (the server is then not live).
                    fail::fail_point!("leader-elector");
                }
                Ok(false) => {
                    if self.leading() {
                        tracing::warn!(lease = %self.lease_name(), holder = ?self.seen.as_ref().and_then(|s| s.holder.clone()), "another replica holds the lease: not leading any more");
                        self.role.send_replace(Role::Following);
                    }
                }
                Err(e) => {
                    let late =
                        Instant::now().duration_since(renewed) >= self.settings.renew_deadline;
                    if self.leading() && late {
                        tracing::warn!(error = %e, deadline = ?self.settings.renew_deadline, "could not renew the lease within the renew deadline: not leading any more");
                        self.role.send_replace(Role::Following);
                    } else {
                        tracing::warn!(error = %e, "looking at the lease failed; trying again");
                    }
                }
            }
            let pause = if self.leading() {
                self.settings.retry_period
            } else {
                // Followers spread their looks out, as client-go's jitter does.
                self.settings
                    .retry_period
                    .mul_f64(1.0 + 0.2 * fastrand::f64())
            };
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                // A follower looks again at once when the Lease changes: a released Lease is
                // taken in the time of one request (a rollout hands over at once), and the last
                // renewal is seen when it happens, so a crashed leader's Lease expires by the
                // follower's clock a lease duration after its last renewal, not a retry
                // period later. It also looks at once when kubelet reports the holder's
                // container ended.
                () = changed.notified(), if !self.leading() => {}
                Ok(()) = self.successor.changed(), if self.leading() => {
                    let named = self.successor.borrow_and_update().clone();
                    if let Some(successor) = named {
                        self.hand_over(&successor).await;
                    }
                }
                _ = &mut stop => break,
            }
        }
        watching.abort_all();
        if self.leading() {
            self.role.send_replace(Role::HandingOver);
            let release = tokio::time::timeout(self.settings.retry_period, self.release()).await;
            match release {
                Ok(Ok(())) => {
                    tracing::info!(lease = %self.lease_name(), "released the lease");
                    self.await_successor().await;
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "releasing the lease failed; others take it when it expires")
                }
                Err(_) => {
                    tracing::warn!(lease = %self.lease_name(), "releasing the lease took too long; others take it when it expires")
                }
            }
        }
    }

    fn observe(&mut self, lease: &Lease) {
        let spec = lease.spec.as_ref();
        let duration = spec
            .and_then(|s| s.lease_duration_seconds)
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.settings.lease_duration, Duration::from_secs);
        let holder = spec.and_then(|s| s.holder_identity.clone());
        // The holder's pod to watch: another replica's, never our own.
        let pod = holder
            .as_deref()
            .filter(|h| *h != self.settings.identity)
            .and_then(holder_pod)
            .map(str::to_owned);
        self.holder_pod.send_if_modified(|watched| {
            let changed = *watched != pod;
            if changed {
                watched.clone_from(&pod);
            }
            changed
        });
        let successor = lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SUCCESSOR_ANNOTATION))
            .cloned();
        self.seen = Some(Observation::update(
            self.seen.as_ref(),
            holder,
            lease.metadata.resource_version.clone(),
            duration,
            successor,
            Instant::now(),
        ));
    }

    /// What proves the Lease's holder gone, if anything: an end of its container that kubelet
    /// reported after the holder took the Lease (its `acquireTime`).
    fn holder_gone(&self, lease: &Lease) -> Option<ContainerEnd> {
        let spec = lease.spec.as_ref()?;
        let holder = spec.holder_identity.as_deref()?;
        let acquired = spec.acquire_time.as_ref()?.0;
        let end = self.holder_ended.borrow();
        let end = end.as_ref()?;
        (holder != self.settings.identity && proves_gone(holder, acquired, end))
            .then(|| end.clone())
    }

    fn api_error(&self, source: kube::Error) -> Error {
        Error::Api {
            name: self.lease_name(),
            source,
        }
    }

    /// One look: `Ok(true)` when this replica holds the Lease afterwards.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, Error> {
        let now = MicroTime(jiff::Timestamp::now());
        let duration_seconds =
            i32::try_from(self.settings.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let existing = self
            .api
            .get_opt(&self.settings.name)
            .await
            .map_err(|e| self.api_error(e))?;
        let Some(mut lease) = existing else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.settings.name.clone()),
                    namespace: Some(self.settings.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.settings.identity.clone()),
                    lease_duration_seconds: Some(duration_seconds),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(&created);
                    Ok(true)
                }
                // Another replica created it first.
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(self.api_error(e)),
            };
        };
        self.observe(&lease);
        let gone = self.holder_gone(&lease);
        let seen = self.seen.as_ref().expect("observed just now");
        let decision = decide(
            &self.settings.identity,
            holder_pod(&self.settings.identity),
            seen,
            gone.is_some(),
            Instant::now(),
        );
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        match decision {
            LeaseStep::Wait { .. } => return Ok(false),
            LeaseStep::Take => {
                if let Some(end) = &gone {
                    tracing::info!(
                        lease = %self.lease_name(),
                        holder = ?spec.holder_identity,
                        acquired = ?spec.acquire_time.as_ref().map(|t| t.0),
                        pod = %end.pod,
                        container_id = %end.container_id,
                        finished_at = %end.finished_at,
                        "the holder's container ended after it took the lease: taking the lease without waiting for it to expire"
                    );
                }
                let had_holder = spec
                    .holder_identity
                    .as_deref()
                    .is_some_and(|h| !h.is_empty());
                spec.holder_identity = Some(self.settings.identity.clone());
                spec.acquire_time = Some(now.clone());
                if let Some(annotations) = lease.metadata.annotations.as_mut() {
                    annotations.remove(SUCCESSOR_ANNOTATION);
                }
                if had_holder {
                    spec.lease_transitions =
                        Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
                }
            }
            LeaseStep::Renew => {}
        }
        spec.renew_time = Some(now);
        spec.lease_duration_seconds = Some(duration_seconds);
        // The resourceVersion read above makes this conditional: a replica that wrote meanwhile
        // wins, and we look again next time.
        match self
            .api
            .replace(&self.settings.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.observe(&written);
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(self.api_error(e)),
        }
    }

    /// After releasing: waits (two retry periods at most) until another replica holds the
    /// Lease, so that the caller closes its connections only once there is a leader for
    /// clients to reconnect to.
    async fn await_successor(&self) {
        let deadline = Instant::now() + self.settings.retry_period * 2;
        while Instant::now() < deadline {
            let holder = tokio::time::timeout(
                self.settings.retry_period,
                self.api.get_opt(&self.settings.name),
            )
            .await
            .ok()
            .and_then(Result::ok)
            .flatten()
            .and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty());
            if let Some(holder) = holder {
                tracing::info!(lease = %self.lease_name(), %holder, "another replica leads");
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tracing::info!(lease = %self.lease_name(), "no other replica took the lease yet");
    }

    /// Hands the lead over to the pod `successor` (a newer replica, Ready: a rollout's): stops
    /// leading, then releases the Lease naming it, for a whole lease duration, so that it (and
    /// no other follower) takes the Lease at its next look; meanwhile this replica is handing
    /// over (its pod keeps the leader's mark until the successor takes it), then follows. A
    /// rollout thus moves the lead to a new pod while the old one still runs, and the Service
    /// always has a Ready endpoint. If the successor does not take the Lease within a lease
    /// duration, any replica may.
    async fn hand_over(&mut self, successor: &str) {
        tracing::info!(lease = %self.lease_name(), %successor, "handing the lead over to a newer replica");
        self.role.send_replace(Role::HandingOver);
        let released =
            tokio::time::timeout(self.settings.retry_period, self.release_to(successor)).await;
        match released {
            Ok(Ok(())) => self.await_successor().await,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, %successor, "handing the lease over failed; it is taken when it expires")
            }
            Err(_) => {
                tracing::warn!(lease = %self.lease_name(), %successor, "handing the lease over took too long; it is taken when it expires")
            }
        }
        self.role.send_replace(Role::Following);
    }

    /// Releases the Lease to `successor`: no holder, the annotation naming it, and the lease
    /// duration the others wait before they may take it anyway.
    async fn release_to(&mut self, successor: &str) -> Result<(), Error> {
        let duration = self.settings.lease_duration;
        self.give_up(duration, Some(successor)).await
    }

    /// Gives the Lease up: no holder, a one-second duration, as client-go's release does.
    async fn release(&mut self) -> Result<(), Error> {
        self.give_up(Duration::from_secs(1), None).await
    }

    /// Writes the Lease we hold with no holder, `duration`, and the successor's annotation
    /// (`None`: no successor): nothing if another replica holds it.
    async fn give_up(&mut self, duration: Duration, successor: Option<&str>) -> Result<(), Error> {
        let Some(mut lease) = self
            .api
            .get_opt(&self.settings.name)
            .await
            .map_err(|e| self.api_error(e))?
        else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.settings.identity.as_str()) {
            return Ok(());
        }
        let now = MicroTime(jiff::Timestamp::now());
        spec.holder_identity = None;
        spec.lease_duration_seconds =
            Some(i32::try_from(duration.as_secs().max(1)).unwrap_or(i32::MAX));
        spec.renew_time = Some(now.clone());
        spec.acquire_time = Some(now);
        if let Some(successor) = successor {
            lease
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(SUCCESSOR_ANNOTATION.to_owned(), successor.to_owned());
        }
        let written = self
            .api
            .replace(&self.settings.name, &PostParams::default(), &lease)
            .await
            .map_err(|e| self.api_error(e))?;
        self.observe(&written);
        Ok(())
    }
}

/// Watches the Lease and wakes the follower on every change (a renewal, a release, a new
/// holder). Best effort: when the watch fails, followers still look every retry period.
async fn watch_changes(
    api: Api<Lease>,
    name: String,
    changed: std::sync::Arc<tokio::sync::Notify>,
) {
    use futures::StreamExt as _;
    use kube::runtime::{WatchStreamExt as _, watcher};
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut leases = std::pin::pin!(
        watcher::watcher(api, config)
            .default_backoff()
            .applied_objects()
    );
    while let Some(event) = leases.next().await {
        if event.is_ok() {
            changed.notify_one();
        }
    }
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "a test's tasks end with the test's runtime"
)]
mod tests;
