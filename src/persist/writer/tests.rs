use std::collections::BTreeMap;

use parking_lot::Mutex;
use serde_json::{Value, json};

use super::*;
use crate::index::{Index, OperationsWriter};
use crate::mock_apiserver::{Asked, MockApiServer, Reply};
use crate::operation::InFlightOperation;
use crate::operation::test_record;
use crate::track::Change;

/// The copies kube-apiserver holds, by name: a write carrying a stale resourceVersion is
/// refused with 409, a create of a name it holds too, as kube-apiserver does; and what the test
/// makes it answer instead.
#[derive(Default)]
struct Cluster {
    copies: BTreeMap<String, Value>,
    version: u64,
    /// Writes (creates and updates) of these names answer this status instead of being made.
    refused: BTreeMap<String, u16>,
    /// Requests about these names get no answer.
    unanswered: Vec<String>,
}

impl Cluster {
    fn store(&mut self, mut object: Value) -> Value {
        self.version += 1;
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        object["metadata"]["resourceVersion"] = self.version.to_string().into();
        let uid = self.copies.get(&name).map_or_else(
            || format!("cr-uid-{}", self.version),
            |c| c["metadata"]["uid"].as_str().unwrap().to_owned(),
        );
        object["metadata"]["uid"] = uid.into();
        self.copies.insert(name, object.clone());
        object
    }

    /// The record the copy of `name` holds, if it is one of ours.
    fn record(&self, name: &str) -> Option<Arc<InFlightOperation>> {
        let object = serde_json::from_value(self.copies.get(name)?.clone()).unwrap();
        from_object(&object).ok()
    }

    fn answer(&mut self, asked: &Asked) -> Reply {
        let name = asked
            .body
            .as_ref()
            .and_then(|b| b["metadata"]["name"].as_str().map(str::to_owned))
            .or_else(|| asked.info.resource.as_ref()?.name.clone())
            .unwrap_or_default();
        if self.unanswered.contains(&name) {
            return Reply::NoAnswer(Duration::from_secs(10));
        }
        if let (Some(code), "create" | "update") = (self.refused.get(&name), asked.verb()) {
            return Reply::Status(*code);
        }
        let body = asked.body.clone().unwrap_or_default();
        match asked.verb() {
            "create" if self.copies.contains_key(&name) => Reply::Status(409),
            "create" => Reply::Object(self.store(body)),
            "update" => match self.copies.get(&name) {
                None => Reply::Status(404),
                Some(held)
                    if held["metadata"]["resourceVersion"]
                        != body["metadata"]["resourceVersion"] =>
                {
                    Reply::Status(409)
                }
                Some(_) => Reply::Object(self.store(body)),
            },
            "get" => match self.copies.get(&name) {
                Some(held) => Reply::Object(held.clone()),
                None => Reply::Status(404),
            },
            "delete" => match self.copies.remove(&name) {
                Some(_) => Reply::Object(
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
                ),
                None => Reply::Status(404),
            },
            verb => panic!("the writer does not {verb} copies"),
        }
    }
}

/// A writer of copies of what `index` writes, into `cluster`, each written at most once a second.
fn write_copies(cluster: &Arc<Mutex<Cluster>>, index: &OperationsWriter) -> MockApiServer {
    let cluster = cluster.clone();
    let (client, api) = MockApiServer::start(move |asked| cluster.lock().answer(asked));
    let settings = Settings {
        interval: Duration::from_secs(1),
        qps: 1000.0,
        burst: 1000,
    };
    let writer = Writer::new(super::super::api(client), settings, ReadBack::default());
    tokio::spawn(writer.run(index.reader()));
    api
}

/// Waits (on the test's clock) until `cluster` holds what `done` says.
async fn until(cluster: &Arc<Mutex<Cluster>>, what: &str, done: impl Fn(&Cluster) -> bool) {
    let waiting = async {
        while !done(&cluster.lock()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(120), waiting)
        .await
        .unwrap_or_else(|_| panic!("not {what} after two minutes"));
}

/// The writes (creates, updates, deletes) made so far.
fn writes(api: &MockApiServer) -> Vec<String> {
    api.asked()
        .iter()
        .filter(|a| a.verb() != "get")
        .map(|a| a.verb().to_owned())
        .collect()
}

/// A copy of ours already there under the operation's name (written by the replica that led
/// before, after this one read the copies back): the create is answered 409, and the writer
/// reads the copy and replaces it, conditionally on what it read, with the live record.
#[tokio::test(start_paused = true)]
async fn a_create_answered_409_takes_over_our_copy_there() {
    let cluster = Arc::new(Mutex::new(Cluster::default()));
    let record = test_record("vm-a");
    let mut older = (*record).clone();
    older.message = Some("written by the leader before".into());
    cluster
        .lock()
        .store(serde_json::to_value(to_object(&older, None)).unwrap());
    let index = Index::new(1, 1000, 100).into_handles().writer;
    let api = write_copies(&cluster, &index);
    index.apply(vec![Change::Upsert(record.clone())]);

    until(&cluster, "the live record", |c| {
        c.record(&record.name)
            .is_some_and(|r| r.message == record.message)
    })
    .await;
    assert_eq!(api.verbs(), ["create", "get", "update"]);
    let update = &api.asked()[2];
    assert_eq!(
        update.body.as_ref().unwrap()["metadata"]["resourceVersion"],
        "1",
        "replaced on the resourceVersion it read"
    );
}

/// An object of the operation's name that is not ours (no managed-by label) is never
/// overwritten nor deleted, however long the operation lasts.
#[tokio::test(start_paused = true)]
async fn a_create_answered_409_leaves_an_object_not_ours_alone() {
    let cluster = Arc::new(Mutex::new(Cluster::default()));
    let record = test_record("vm-a");
    let mut foreign = serde_json::to_value(to_object(&record, None)).unwrap();
    foreign["metadata"]["labels"] = json!({"app": "someone-else"});
    cluster.lock().store(foreign.clone());
    let index = Index::new(1, 1000, 100).into_handles().writer;
    let api = write_copies(&cluster, &index);
    index.apply(vec![Change::Upsert(record.clone())]);
    api.asked_for("get", 1).await;

    let mut changed = (*record).clone();
    changed.message = Some("changed".into());
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(5)).await;
        index.apply(vec![Change::Upsert(Arc::new(changed.clone()))]);
    }
    index.apply(vec![Change::Remove(Arc::new(changed))]);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(api.verbs(), ["create", "get"]);
    assert_eq!(
        cluster.lock().copies[&record.name]["metadata"]["labels"],
        foreign["metadata"]["labels"]
    );
}

/// A copy kube-apiserver refuses (422: the CRD installed does not take it) is written again
/// after a backoff that grows (500 ms doubling, with jitter), and once it is taken, no more.
#[tokio::test(start_paused = true)]
async fn a_write_answered_422_is_tried_again_after_a_growing_backoff() {
    let cluster = Arc::new(Mutex::new(Cluster::default()));
    let record = test_record("vm-a");
    cluster.lock().refused.insert(record.name.clone(), 422);
    let index = Index::new(1, 1000, 100).into_handles().writer;
    let api = write_copies(&cluster, &index);
    let start = Instant::now();
    let asked_at = Arc::new(Mutex::new(Vec::new()));
    index.apply(vec![Change::Upsert(record.clone())]);
    for n in 1..=5 {
        api.asked_for("create", n).await;
        asked_at.lock().push(start.elapsed());
    }
    let at = asked_at.lock().clone();
    let gaps: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.windows(2).all(|g| g[1] > g[0]) && gaps[0] >= Duration::from_millis(350),
        "tried again at {at:?}"
    );
    assert!(cluster.lock().copies.is_empty());

    cluster.lock().refused.clear();
    until(&cluster, "written", |c| c.record(&record.name).is_some()).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        api.count("create"),
        6,
        "written once taken: {:?}",
        writes(&api)
    );
}

/// A write that gets no answer (kube-apiserver unresponsive for that object) fails at the
/// client's deadline and is tried again; meanwhile the copies of other operations are written.
#[tokio::test(start_paused = true)]
async fn a_write_that_gets_no_answer_is_tried_again_and_holds_no_other_up() {
    let cluster = Arc::new(Mutex::new(Cluster::default()));
    let (stuck, other) = (test_record("vm-a"), test_record("vm-b"));
    cluster.lock().unanswered.push(stuck.name.clone());
    let index = Index::new(1, 1000, 100).into_handles().writer;
    let api = write_copies(&cluster, &index);
    let start = Instant::now();
    index.apply(vec![Change::Upsert(stuck.clone())]);
    index.apply(vec![Change::Upsert(other.clone())]);
    until(&cluster, "the other copy written", |c| {
        c.record(&other.name).is_some()
    })
    .await;
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "not held up: {:?}",
        start.elapsed()
    );

    api.asked_for("create", 3).await;
    cluster.lock().unanswered.clear();
    until(&cluster, "the stuck copy written", |c| {
        c.record(&stuck.name).is_some()
    })
    .await;
    assert!(
        start.elapsed() >= Duration::from_secs(20),
        "each attempt waited for its deadline: {:?}",
        start.elapsed()
    );
}
