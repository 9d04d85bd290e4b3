use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;

use super::*;
use crate::mock_apiserver::{Asked, End, MockApiServer, Reply, list};

const ME: &str = "ifo-apiserver-0_me";
const OTHER: &str = "ifo-apiserver-1_other";

fn settings() -> Settings {
    Settings {
        namespace: "ifo-system".into(),
        name: "ifo-apiserver".into(),
        identity: ME.into(),
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
        container: None,
    }
}

/// The Lease as kube-apiserver keeps it: a write carrying a stale resourceVersion is refused
/// with 409, as the elector's conditional writes are; what the test makes it answer instead.
#[derive(Default)]
struct Cluster {
    lease: Option<Lease>,
    version: u64,
    /// Updates of the Lease answer this status instead of being made.
    updates_fail: Option<u16>,
    /// The next update is beaten by another replica's: it writes first, this one gets 409.
    beaten_once: bool,
    /// The holder and renewTime of every write the elector made.
    written: Vec<(Option<String>, Option<jiff::Timestamp>)>,
    /// The holder's pod, as kubelet reports it.
    holder_pod: Option<Value>,
}

impl Cluster {
    fn store(&mut self, mut lease: Lease) -> Value {
        self.version += 1;
        lease.metadata.resource_version = Some(self.version.to_string());
        self.lease = Some(lease.clone());
        serde_json::to_value(lease).unwrap()
    }

    /// Another replica holds the Lease and renews it now, with its own clock's `renew_time`.
    fn renewed_by(&mut self, holder: &str, renew_time: jiff::Timestamp) {
        let mut lease = self.lease.clone().unwrap_or_default();
        lease.metadata.name = Some("ifo-apiserver".into());
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(holder.into());
        spec.lease_duration_seconds = Some(15);
        spec.renew_time = Some(MicroTime(renew_time));
        spec.acquire_time.get_or_insert(MicroTime(renew_time));
        self.store(lease);
    }

    fn holder(&self) -> Option<String> {
        self.lease.as_ref()?.spec.as_ref()?.holder_identity.clone()
    }

    fn answer(&mut self, asked: &Asked) -> Reply {
        let resource = asked.info.resource.as_ref().map(|r| r.resource.as_str());
        if resource == Some("pods") {
            // The holder's pod, watched by a follower that knows the server's container.
            return match asked.verb() {
                "list" => Reply::Object(list(
                    "PodList",
                    "1",
                    None,
                    self.holder_pod.iter().cloned().collect(),
                )),
                _ => Reply::Watch(Vec::new(), End::Open),
            };
        }
        match asked.verb() {
            // The watch that wakes a follower when the Lease changes: it hears nothing here, and
            // followers look every retry period.
            "list" => Reply::Object(list("LeaseList", "1", None, Vec::new())),
            "watch" => Reply::Watch(Vec::new(), End::Open),
            "get" => match &self.lease {
                Some(lease) => Reply::Object(serde_json::to_value(lease).unwrap()),
                None => Reply::Status(404),
            },
            "create" | "update" => {
                let lease: Lease = serde_json::from_value(asked.body.clone().unwrap()).unwrap();
                let spec = lease.spec.clone().unwrap_or_default();
                if asked.verb() == "update" {
                    if let Some(code) = self.updates_fail {
                        return Reply::Status(code);
                    }
                    if std::mem::take(&mut self.beaten_once) {
                        self.renewed_by(OTHER, jiff::Timestamp::now());
                    }
                    let current = self
                        .lease
                        .as_ref()
                        .and_then(|l| l.metadata.resource_version.clone());
                    if lease.metadata.resource_version != current {
                        return Reply::Status(409);
                    }
                } else if self.lease.is_some() {
                    return Reply::Status(409);
                }
                self.written
                    .push((spec.holder_identity, spec.renew_time.map(|t| t.0)));
                Reply::Object(self.store(lease))
            }
            verb => panic!("the elector does not {verb} Leases"),
        }
    }
}

/// The elector of [`ME`] running against `cluster`; its role, and what stops it.
fn elect(
    cluster: &Arc<Mutex<Cluster>>,
) -> (
    watch::Receiver<Role>,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
    MockApiServer,
) {
    elect_with(cluster, settings())
}

/// [`elect`] with `settings`.
fn elect_with(
    cluster: &Arc<Mutex<Cluster>>,
    settings: Settings,
) -> (
    watch::Receiver<Role>,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
    MockApiServer,
) {
    let cluster = cluster.clone();
    let (client, api) = MockApiServer::start(move |asked| cluster.lock().answer(asked));
    let (elector, role) = Elector::new(client, settings);
    let (stop, stopped) = oneshot::channel();
    let running = tokio::spawn(elector.run(stopped));
    (role, stop, running, api)
}

/// Waits until the role is `role`; returns how long that took on the test's clock.
async fn becomes(role: &mut watch::Receiver<Role>, wanted: Role) -> Duration {
    let start = Instant::now();
    tokio::time::timeout(Duration::from_secs(600), role.wait_for(|r| *r == wanted))
        .await
        .unwrap_or_else(|_| panic!("not {wanted:?} after ten minutes"))
        .unwrap();
    start.elapsed()
}

/// A leader that cannot renew (kube-apiserver answers 500) goes on leading until its renew
/// deadline, and not a moment after: then another replica may take the Lease once it expires,
/// and two leaders never serve at once.
#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_renew_stops_leading_at_its_renew_deadline() {
    let cluster = Arc::new(Mutex::new(Cluster::default()));
    let (mut role, _stop, _running, _api) = elect(&cluster);
    becomes(&mut role, Role::Leading).await;
    assert_eq!(
        cluster.lock().holder().as_deref(),
        Some(ME),
        "created, holding it"
    );
    becomes(&mut role, Role::Leading).await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    let renewals = cluster.lock().written.len();
    assert!(
        renewals >= 3,
        "renewed every retry period: {renewals} writes in 7 s"
    );

    cluster.lock().updates_fail = Some(500);
    let failing = Instant::now();
    becomes(&mut role, Role::Following).await;
    let led_on = failing.elapsed();
    assert!(
        led_on <= Duration::from_secs(10)
            && led_on > Duration::from_secs(10) - settings().retry_period * 2,
        "stopped leading {led_on:?} after its renewals began to fail (renew deadline 10 s)"
    );
}

/// A renewal beaten by another replica's write (409: the Lease changed since it was read) makes
/// the leader stop leading at once; it then waits while the other replica holds and renews it.
#[tokio::test(start_paused = true)]
async fn a_renewal_answered_409_stops_leading_at_once() {
    let cluster = Arc::new(Mutex::new(Cluster::default()));
    let (mut role, _stop, _running, api) = elect(&cluster);
    becomes(&mut role, Role::Leading).await;
    cluster.lock().beaten_once = true;
    let stepped_down = becomes(&mut role, Role::Following).await;
    assert!(
        stepped_down <= settings().retry_period,
        "at its next renewal: {stepped_down:?}"
    );
    assert_eq!(cluster.lock().holder().as_deref(), Some(OTHER));

    // The other replica renews, every 2 s: this one looks and waits, and writes nothing.
    let writes = cluster.lock().written.len();
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        cluster.lock().renewed_by(OTHER, jiff::Timestamp::now());
        assert_eq!(*role.borrow(), Role::Following);
    }
    assert_eq!(
        cluster.lock().written.len(),
        writes,
        "it never took the Lease back"
    );
    assert!(
        api.count("get") >= 20,
        "it kept looking: {} looks in 60 s",
        api.count("get")
    );
}

/// Expiry is judged by this replica's clock from when it saw the Lease change, never by the
/// holder's timestamps: a holder whose clock is an hour behind (its renewTime an hour old) is
/// not robbed while it renews, and one whose clock is an hour ahead does not keep the Lease an
/// hour after it stops: in both cases the Lease is taken a lease duration after its last change.
#[tokio::test(start_paused = true)]
async fn the_holders_clock_skew_neither_hands_over_nor_keeps_the_lease() {
    for skew in [
        jiff::SignedDuration::from_hours(-1),
        jiff::SignedDuration::from_hours(1),
    ] {
        let cluster = Arc::new(Mutex::new(Cluster::default()));
        let holders_clock = || jiff::Timestamp::now().checked_add(skew).unwrap();
        cluster.lock().renewed_by(OTHER, holders_clock());
        let (mut role, stop, running, _api) = elect(&cluster);
        for _ in 0..30 {
            tokio::time::sleep(Duration::from_secs(2)).await;
            cluster.lock().renewed_by(OTHER, holders_clock());
            assert_eq!(*role.borrow(), Role::Following, "skew {skew}: it renews");
        }

        // The holder stops renewing: taken a lease duration (15 s) after this replica saw the
        // last renewal, by its clock. It sees a renewal at its next look, and takes the Lease at
        // the first look after those 15 s: each of the two up to a retry period (2 s, plus up to
        // 20 % of jitter) late.
        let taken = becomes(&mut role, Role::Leading).await;
        assert!(
            taken >= Duration::from_secs(15) && taken <= Duration::from_millis(15_000 + 2 * 2_400),
            "skew {skew}: taken {taken:?} after the last renewal"
        );
        let (holder, renewed) = cluster.lock().written.last().cloned().unwrap();
        assert_eq!(holder.as_deref(), Some(ME));
        let renewed = renewed.unwrap();
        assert!(
            renewed.duration_since(jiff::Timestamp::now()).abs()
                < jiff::SignedDuration::from_secs(5),
            "it writes its own clock's time, {renewed}"
        );
        drop(stop);
        running.await.unwrap();
    }
}

/// A leader that stops releases the Lease (no holder) so that another replica takes it at once,
/// not a lease duration later, and says it is handing over (its pod keeps the leader's mark for
/// the next leader to take).
#[tokio::test(start_paused = true)]
async fn a_leader_that_stops_releases_the_lease() {
    let cluster = Arc::new(Mutex::new(Cluster::default()));
    let (mut role, stop, running, _api) = elect(&cluster);
    becomes(&mut role, Role::Leading).await;
    stop.send(()).unwrap();
    running.await.unwrap();
    assert_eq!(*role.borrow(), Role::HandingOver);
    let (holder, _) = cluster.lock().written.last().cloned().unwrap();
    assert_eq!(holder, None, "released");
}

/// The holder's pod, its server container ended at `finished_at` as kubelet reports it.
fn pod_ended_at(finished_at: jiff::Timestamp) -> Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ifo-apiserver-1", "namespace": "ifo-system", "resourceVersion": "7"},
        "status": {"containerStatuses": [{
            "name": "server",
            "image": "ifo-apiserver",
            "imageID": "ifo-apiserver@sha256:0",
            "ready": false,
            "restartCount": 1,
            "containerID": "containerd://1",
            "state": {"terminated": {
                "exitCode": 137,
                "containerID": "containerd://1",
                "finishedAt": finished_at.to_string(),
            }},
        }]},
    })
}

/// A holder whose server container kubelet reports ended after it took the Lease is gone: a
/// follower that knows the container takes the Lease at once, not a lease duration later. An
/// end from before the holder took it (the container before a restart) proves nothing: the
/// Lease is taken when it expires.
#[tokio::test(start_paused = true)]
async fn a_holder_whose_container_ended_is_replaced_without_waiting_for_expiry() {
    let acquired = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second()).unwrap();
    for (ended, proof) in [
        (acquired + jiff::SignedDuration::from_secs(2), true),
        (acquired - jiff::SignedDuration::from_secs(60), false),
    ] {
        let cluster = Arc::new(Mutex::new(Cluster::default()));
        cluster.lock().renewed_by(OTHER, acquired);
        cluster.lock().holder_pod = Some(pod_ended_at(ended));
        let settings = Settings {
            container: Some("server".into()),
            ..settings()
        };
        let (mut role, stop, running, _api) = elect_with(&cluster, settings);
        let taken = becomes(&mut role, Role::Leading).await;
        if proof {
            assert!(taken < Duration::from_secs(3), "taken at once: {taken:?}");
        } else {
            assert!(
                taken >= Duration::from_secs(15),
                "taken at expiry: {taken:?}"
            );
        }
        assert_eq!(cluster.lock().holder().as_deref(), Some(ME));
        drop(stop);
        running.await.unwrap();
    }
}

/// A leader told of a newer replica hands the lead over to it: it stops leading (handing over,
/// its pod keeping the leader's mark), releases the Lease naming the successor, and follows;
/// another follower leaves the Lease to the successor, which takes it at once.
#[tokio::test(start_paused = true)]
async fn a_leader_hands_over_to_the_successor_it_is_told_of_and_others_leave_it_the_lease() {
    let cluster = Arc::new(Mutex::new(Cluster::default()));
    let (successor, named) = watch::channel(None);
    let (client, _api) = {
        let cluster = cluster.clone();
        MockApiServer::start(move |asked| cluster.lock().answer(asked))
    };
    let (elector, mut role) = Elector::new(client, settings());
    let elector = elector.hand_over_to(named);
    let (stop, stopped) = oneshot::channel();
    let running = tokio::spawn(elector.run(stopped));
    becomes(&mut role, Role::Leading).await;
    successor.send_replace(Some("ifo-apiserver-9".into()));
    becomes(&mut role, Role::HandingOver).await;
    becomes(&mut role, Role::Following).await;
    let lease = cluster.lock().lease.clone().unwrap();
    assert_eq!(lease.spec.as_ref().unwrap().holder_identity, None);
    assert_eq!(
        lease.metadata.annotations.as_ref().unwrap()[SUCCESSOR_ANNOTATION],
        "ifo-apiserver-9"
    );
    // It does not take the Lease back while it is the successor's.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(*role.borrow(), Role::Following);
    assert_eq!(cluster.lock().holder(), None);
    // The successor takes it, and the annotation goes.
    cluster
        .lock()
        .renewed_by("ifo-apiserver-9_new", jiff::Timestamp::now());
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(*role.borrow(), Role::Following);
    drop(stop);
    running.await.unwrap();

    // The successor's own elector: a Lease released to it is taken at once.
    let cluster = Arc::new(Mutex::new(Cluster::default()));
    cluster.lock().renewed_by(OTHER, jiff::Timestamp::now());
    {
        let mut c = cluster.lock();
        let mut lease = c.lease.clone().unwrap();
        lease.spec.as_mut().unwrap().holder_identity = None;
        lease
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(SUCCESSOR_ANNOTATION.into(), "ifo-apiserver-0".into());
        c.store(lease);
    }
    let (mut role, stop, running, _api) = elect(&cluster);
    let taken = becomes(&mut role, Role::Leading).await;
    assert!(taken < Duration::from_secs(3), "taken at once: {taken:?}");
    let lease = cluster.lock().lease.clone().unwrap();
    assert!(
        lease
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(SUCCESSOR_ANNOTATION)),
        "the successor's name stays on the Lease it took"
    );
    drop(stop);
    running.await.unwrap();
}
