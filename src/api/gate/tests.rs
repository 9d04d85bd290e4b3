//! Gates as a client sees them through the router: get, list, Table, and watches by name.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::Value;

use crate::api::{ApiState, router};
use crate::detect::Health;
use crate::index::Index;
use crate::inventory::{Inventory, Kind};
use crate::operation::{InFlightOperation, test_active, test_subject};
use crate::readiness::Readiness;
use crate::ruleset::Target;
use crate::track::Change;

pub(super) const GATES: &str = "/apis/live.ifo.kubevirt.io/v1alpha1/maintenancegates";
pub(super) const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// A live migration of VM `namespace/vm` from `node` to `target` (none: empty).
pub(super) fn migration(
    namespace: &str,
    vm: &str,
    node: &str,
    target: &str,
) -> Arc<InFlightOperation> {
    let subject = test_subject("kubevirt.io/v1", "VirtualMachine", Some(namespace), vm);
    let labels = [
        ("ifo.kubevirt.io/node", node),
        ("ifo.kubevirt.io/target-node", target),
    ];
    Arc::new(test_active(
        &subject,
        ("vms", "kubevirt"),
        "Migrating",
        &labels,
    ))
}

/// What the API serves from `index`, with detection's health `targets` and the cluster's
/// `inventory`, its initial sync done.
pub(super) fn served_state(
    index: &crate::index::Handles,
    targets: &Arc<Health>,
    inventory: &Arc<Inventory>,
) -> Arc<ApiState> {
    let (readiness, synced) = Readiness::new("test records");
    synced.done();
    Arc::new(
        ApiState::new(index.reader.clone(), readiness, Default::default())
            .with_detection(targets.reader())
            .with_inventory(inventory.clone()),
    )
}

struct Fixture {
    index: crate::index::Handles,
    state: Arc<ApiState>,
    targets: Arc<Health>,
    inventory: Arc<Inventory>,
}

fn fixture() -> Fixture {
    let index = Index::new(100, 64, 64).into_handles();
    index.writer.apply(vec![
        Change::Upsert(migration("demo", "vm-0", "w1", "w2")),
        Change::Upsert(migration("demo", "vm-1", "w3", "")),
    ]);
    let targets = Arc::new(Health::default());
    // The cluster's nodes and namespaces: more than have operations in flight.
    let inventory = Arc::new(Inventory::default());
    inventory.listed(Kind::Node, ["w1", "w2", "w3", "w9", "idle"]);
    inventory.listed(Kind::Namespace, ["demo", "other"]);
    let state = served_state(&index, &targets, &inventory);
    Fixture {
        index,
        state,
        targets,
        inventory,
    }
}

async fn call(state: &Arc<ApiState>, uri: &str, accept: Option<&str>) -> (StatusCode, Value) {
    let (status, body) = crate::api::tests::call(router(state.clone()), uri, accept).await;
    (status, serde_json::from_str(&body).unwrap())
}

/// A list of the gate named `name` (by a field selector, as `kubectl wait` lists).
async fn list_named(state: &Arc<ApiState>, name: &str) -> (StatusCode, Value) {
    let uri = format!("{GATES}?fieldSelector=metadata.name%3D{name}");
    call(state, &uri, None).await
}

fn message(error: &Value) -> &str {
    error["message"].as_str().unwrap()
}

fn resource_version(event: &Value) -> &str {
    event["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
}

/// The names of a list's items, in order.
fn names(list: &Value) -> Vec<&str> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["metadata"]["name"].as_str().unwrap())
        .collect()
}

/// The gates of the fixture in name order: the cluster's and those of what is in flight.
const FIXTURE_GATES: [&str; 6] = [
    "cluster",
    "component.kubevirt",
    "namespace.demo",
    "node.w1",
    "node.w2",
    "node.w3",
];

fn clear(gate: &Value) -> (&str, &str) {
    let c = &gate["status"]["conditions"][0];
    assert_eq!(c["type"], "Clear");
    (
        c["status"].as_str().unwrap(),
        c["message"].as_str().unwrap(),
    )
}

#[tokio::test]
async fn the_gate_of_anything_the_cluster_has_answers_and_a_malformed_name_is_a_400() {
    let f = fixture();
    let (status, gate) = call(&f.state, &format!("{GATES}/node.w2"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(gate["kind"], "MaintenanceGate");
    assert_eq!(
        clear(&gate),
        ("False", "VirtualMachine demo/vm-0 Migrating (target)")
    );
    assert_eq!(gate["status"]["activeOperations"], 1);
    assert_eq!(gate["status"]["operations"][0]["namespace"], "demo");
    assert!(gate["metadata"].get("generation").is_none());

    let (status, gate) = call(&f.state, &format!("{GATES}/node.idle"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(clear(&gate), ("True", "nothing in flight"));
    assert_eq!(gate["status"]["activeOperations"], 0);

    for bad in ["pod.x", "node.Not_A_Node", "clusters"] {
        let (status, error) = call(&f.state, &format!("{GATES}/{bad}"), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        let expected = "cluster, node.<node>, component.<component> or namespace.<namespace>";
        assert!(message(&error).contains(expected), "{error}");
    }
    let (status, _) = list_named(&f.state, "pod.x").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = call(&f.state, &format!("{GATES}?fieldSelector=spec.x%3Dy"), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_gate_of_what_the_cluster_does_not_have_is_a_404_and_unknown_until_names_are_known() {
    let f = fixture();
    for (name, why) in [
        ("node.worker1", "the cluster has no node worker1"),
        ("namespace.gone", "the cluster has no namespace gone"),
        (
            "component.kubevrit",
            "no ruleset declares component kubevrit",
        ),
    ] {
        let (status, error) = call(&f.state, &format!("{GATES}/{name}"), None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{name}: {error}");
        assert_eq!(error["reason"], "NotFound");
        assert_eq!(
            error["message"],
            format!("maintenancegates.live.ifo.kubevirt.io \"{name}\" not found: {why}")
        );
        assert_eq!(
            error["details"],
            serde_json::json!({"name": name, "group": "live.ifo.kubevirt.io", "kind": "maintenancegates"})
        );
        // A list by name answers without it, as kubectl wait expects after a 404.
        let (status, list) = list_named(&f.state, name).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(list["items"], serde_json::json!([]), "{name}");
    }
    // A component with operations in flight exists even if no ruleset declares it any more.
    let (status, _) = call(&f.state, &format!("{GATES}/component.kubevirt"), None).await;
    assert_eq!(status, StatusCode::OK);

    // A node that is gone keeps its gate while operations name it.
    f.inventory.deleted(Kind::Node, "w3");
    let (status, gate) = call(&f.state, &format!("{GATES}/node.w3"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(clear(&gate).0, "False");

    // The node appears: its gate exists.
    f.inventory
        .applied(Kind::Node, "worker1", Default::default());
    let (status, gate) = call(&f.state, &format!("{GATES}/node.worker1"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(clear(&gate), ("True", "nothing in flight"));

    // While the names' watch fails: Unknown for a name not known, never a 404 or Clear.
    f.inventory.failed(
        Kind::Node,
        "list failed: nodes is forbidden: User cannot list resource".into(),
    );
    let (status, gate) = call(&f.state, &format!("{GATES}/node.worker2"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        clear(&gate),
        (
            "Unknown",
            "cannot vouch for this scope: whether node worker2 exists is not known: the watch of the cluster's nodes is failing: list failed: nodes is forbidden: User cannot list resource"
        )
    );
    assert_eq!(
        gate["status"]["conditions"][0]["reason"],
        "ExistenceUnknown"
    );
    let (_, list) = list_named(&f.state, "node.worker2").await;
    assert_eq!(clear(&list["items"][0]).0, "Unknown");
    // Never listed at all: Unknown too.
    let fresh = Arc::new(
        ApiState::new(
            f.index.reader.clone(),
            f.state.readiness.clone(),
            Default::default(),
        )
        .with_detection(f.targets.reader()),
    );
    let (status, gate) = call(&fresh, &format!("{GATES}/namespace.demo2"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        clear(&gate)
            .1
            .ends_with("the cluster's namespaces have not been listed yet"),
        "{gate}"
    );
}

#[tokio::test]
async fn a_watch_by_name_sees_a_gate_appear_and_go_with_its_node() {
    let f = fixture();
    let mut events = watch(&f.state, "fieldSelector=metadata.name%3Dnode.new").await;
    f.inventory.applied(Kind::Node, "new", Default::default());
    f.index.scopes.scopes_changed();
    let added = events.next().await;
    assert_eq!(added["type"], "ADDED");
    assert_eq!(clear(&added["object"]).0, "True");
    f.inventory.deleted(Kind::Node, "new");
    let rv = f.index.scopes.scopes_changed();
    let deleted = events.next().await;
    assert_eq!(deleted["type"], "DELETED");
    assert_eq!(resource_version(&deleted), rv.to_string());
}

#[tokio::test]
async fn a_list_is_paged_by_limit_and_continue_in_name_order() {
    let f = fixture();
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let uri = match &token {
            Some(t) => format!("{GATES}?limit=4&continue={t}"),
            None => format!("{GATES}?limit=4"),
        };
        let (status, list) = call(&f.state, &uri, None).await;
        assert_eq!(status, StatusCode::OK, "{list}");
        assert!(list["metadata"].get("remainingItemCount").is_none());
        let page = names(&list);
        assert!(page.len() <= 4);
        seen.extend(page.into_iter().map(str::to_owned));
        pages += 1;
        match list["metadata"]["continue"].as_str() {
            Some(t) => {
                // A gate that starts in between, after the last name: the next page has it.
                if pages == 1 {
                    f.index
                        .writer
                        .apply(vec![Change::Upsert(migration("demo", "vm-7", "w1x", ""))]);
                }
                token = Some(t.to_owned());
            }
            None => break,
        }
    }
    assert_eq!(pages, 2);
    let mut expected = [FIXTURE_GATES.as_slice(), &["node.w1x"]].concat();
    expected.sort_unstable();
    assert_eq!(seen, expected);
    // A table pages the same way.
    let (_, table) = call(&f.state, &format!("{GATES}?limit=1"), Some(TABLE)).await;
    assert_eq!(table["rows"].as_array().unwrap().len(), 1);
    assert!(table["metadata"]["continue"].is_string(), "{table}");
    // Exactly as many as there are: no continue.
    let (_, list) = call(&f.state, &format!("{GATES}?limit=7"), None).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 7);
    assert!(list["metadata"].get("continue").is_none(), "{list}");

    // A token that is not a gate list's is a 400, never a panic.
    let operations = crate::api::continue_token::ContinueToken::new(5, "", "node.w1").encode();
    for bad in ["%%%", "bm90IGpzb24", operations.as_str()] {
        let (status, error) =
            call(&f.state, &format!("{GATES}?limit=1&continue={bad}"), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {error}");
        let expected = "invalid continue token: continue key is not valid";
        assert!(message(&error).starts_with(expected), "{error}");
    }
}

#[tokio::test]
async fn a_list_holds_the_cluster_and_every_gate_in_flight_and_always_the_named_one() {
    let f = fixture();
    let (_, list) = call(&f.state, GATES, None).await;
    assert_eq!(list["kind"], "MaintenanceGateList");
    assert_eq!(names(&list), FIXTURE_GATES);
    assert_eq!(list["metadata"]["resourceVersion"], "102");

    let (_, list) = list_named(&f.state, "node.idle").await;
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["metadata"]["name"], "node.idle");
    assert_eq!(clear(&items[0]).0, "True");

    let (_, table) = call(&f.state, GATES, Some(TABLE)).await;
    let columns = crate::api::tests::column_names(&table);
    assert_eq!(
        columns,
        ["Name", "Clear", "Active", "Expected", "Oldest", "Message"]
    );
    let cluster = &table["rows"][0]["cells"];
    assert_eq!(cluster[0], "cluster");
    assert_eq!(cluster[1], "False");
    assert_eq!(cluster[2], 2);
}

#[tokio::test]
async fn a_stale_target_makes_gates_unknown_until_it_is_current() {
    let f = fixture();
    let t = Target::of("kubevirt.io", "v1", "virtualmachines");
    f.targets.watching(&t, None);
    f.targets.resolved(&t, true, &[None]);
    let (_, gate) = call(&f.state, &format!("{GATES}/node.idle"), None).await;
    assert_eq!(clear(&gate).0, "Unknown");
    assert_eq!(gate["status"]["conditions"][0]["reason"], "Stale");
    assert_eq!(
        gate["status"]["staleTargets"][0]["resource"],
        "virtualmachines.kubevirt.io/v1"
    );
    f.targets.listed(&t, &None, jiff::Timestamp::now());
    let (_, gate) = call(&f.state, &format!("{GATES}/node.idle"), None).await;
    assert_eq!(clear(&gate).0, "True");
    assert!(gate["status"].get("staleTargets").is_none());
}

/// What the guard decides from (the judged verdict of a node's gate) is what the API serves of
/// that gate, for every node the cluster has, some that it does not, in flight, clear, stale,
/// and while the cluster's nodes are not listed.
#[tokio::test]
async fn the_guard_reads_the_verdict_the_api_serves() {
    let f = fixture();
    let nodes = ["w1", "w2", "w3", "w9", "idle", "gone"];
    let agree = |when: &'static str| {
        let state = f.state.clone();
        async move {
            for node in nodes {
                let judged = state.gates().node(node);
                let (status, gate) = call(&state, &format!("{GATES}/node.{node}"), None).await;
                match judged {
                    None => assert_eq!(status, StatusCode::NOT_FOUND, "{when}: {node}"),
                    Some(j) => {
                        assert_eq!(status, StatusCode::OK, "{when}: {node}");
                        let c = &gate["status"]["conditions"][0];
                        assert_eq!(c["status"], j.verdict.status(), "{when}: {node}");
                        assert_eq!(c["reason"], j.verdict.reason(), "{when}: {node}");
                        assert_eq!(
                            gate["status"]["activeOperations"], j.members.active,
                            "{when}: {node}"
                        );
                    }
                }
            }
        }
    };
    agree("current").await;
    let t = Target::of("kubevirt.io", "v1", "virtualmachines");
    f.targets.watching(&t, None);
    f.targets.resolved(&t, true, &[None]);
    agree("a target not listed yet").await;
    f.targets.listed(&t, &None, jiff::Timestamp::now());
    f.inventory
        .failed(Kind::Node, "nodes is forbidden".to_owned());
    agree("the nodes not known").await;
}

/// Reads watch events from a streaming body, one JSON document per line.
pub(super) struct Events(axum::body::BodyDataStream, Vec<u8>);

impl Events {
    /// The events of a watch's `response`.
    pub(super) fn of(response: axum::response::Response) -> Events {
        Events(response.into_body().into_data_stream(), Vec::new())
    }

    async fn next(&mut self) -> Value {
        serde_json::from_str(&self.line().await).unwrap()
    }

    /// The next event as sent, its newline included.
    pub(super) async fn line(&mut self) -> String {
        use futures::StreamExt;
        loop {
            if let Some(end) = self.1.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.1.drain(..=end).collect();
                return String::from_utf8(line).unwrap();
            }
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(5), self.0.next())
                .await
                .expect("an event within 5 s")
                .expect("the stream stays open")
                .unwrap();
            self.1.extend_from_slice(&chunk);
        }
    }

    /// The next `n` events as `<type> <name>`, sorted (the gates an event changes come in no
    /// set order).
    async fn next_sorted(&mut self, n: usize) -> Vec<String> {
        let mut events = Vec::new();
        for _ in 0..n {
            let e = self.next().await;
            events.push(format!(
                "{} {}",
                e["type"].as_str().unwrap(),
                e["object"]["metadata"]["name"].as_str().unwrap()
            ));
        }
        events.sort();
        events
    }
}

async fn watch(state: &Arc<ApiState>, query: &str) -> Events {
    watch_as(state, query, None).await
}

async fn watch_as(state: &Arc<ApiState>, query: &str, accept: Option<&str>) -> Events {
    let uri = format!("{GATES}?watch=true&{query}");
    let response = crate::api::tests::answer(router(state.clone()), &uri, accept).await;
    assert_eq!(response.status(), StatusCode::OK);
    Events::of(response)
}

/// `kubectl get gates -w` prints a row for every event: a Table watch sends a gate's change
/// only when its row shows it, while a watch of the objects sends every change of them.
#[tokio::test]
async fn a_table_watch_sends_only_changes_its_rows_show() {
    let f = fixture();
    let query = "fieldSelector=metadata.name%3Dnode.w1";
    let mut objects = watch(&f.state, query).await;
    let mut rows = watch_as(&f.state, query, Some(TABLE)).await;
    assert_eq!(objects.next().await["type"], "ADDED");
    assert_eq!(rows.next().await["type"], "ADDED");
    // The migration on w1 reports progress: the gate lists it with it, no cell changes.
    let mut progressed = (*migration("demo", "vm-0", "w1", "w2")).clone();
    progressed.progress = Some(40.0);
    f.index
        .writer
        .apply(vec![Change::Upsert(Arc::new(progressed))]);
    let changed = objects.next().await;
    assert_eq!(changed["type"], "MODIFIED");
    assert_eq!(
        changed["object"]["status"]["operations"][0]["progress"],
        40.0
    );
    // It ends: the row changes, and that is the next row event.
    f.index
        .writer
        .apply(vec![Change::Remove(migration("demo", "vm-0", "w1", "w2"))]);
    let cleared = rows.next().await;
    assert_eq!(cleared["type"], "MODIFIED");
    assert_eq!(
        cleared["object"]["rows"][0]["cells"][1], "True",
        "{cleared}"
    );
}

#[tokio::test]
async fn a_watch_by_name_sees_the_gate_clear_at_the_rv_of_the_change() {
    let f = fixture();
    let mut events = watch(&f.state, "fieldSelector=metadata.name%3Dnode.w1").await;
    let added = events.next().await;
    assert_eq!(added["type"], "ADDED");
    assert_eq!(clear(&added["object"]).0, "False");
    // Unrelated operations start and end: nothing for node.w1.
    let other = migration("demo", "vm-9", "w9", "");
    f.index.writer.apply(vec![Change::Upsert(other.clone())]);
    f.index.writer.apply(vec![Change::Remove(other)]);
    f.index
        .writer
        .apply(vec![Change::Remove(migration("demo", "vm-0", "w1", "w2"))]);
    let modified = events.next().await;
    assert_eq!(modified["type"], "MODIFIED");
    assert_eq!(clear(&modified["object"]), ("True", "nothing in flight"));
    assert_eq!(resource_version(&modified), "105");
    // A target goes stale: Unknown, at the RV of that change.
    let t = Target::of("", "v1", "pods");
    f.targets.watching(&t, None);
    let rv = f.index.feeds.feeds_changed(false);
    let unknown = events.next().await;
    assert_eq!(unknown["type"], "MODIFIED");
    assert_eq!(clear(&unknown["object"]).0, "Unknown");
    assert_eq!(resource_version(&unknown), rv.to_string());
}

#[tokio::test]
async fn a_list_watch_adds_and_deletes_gates_as_scopes_fill_and_empty() {
    let f = fixture();
    let query = "sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan";
    let mut events = watch(&f.state, query).await;
    let mut initial = Vec::new();
    loop {
        let e = events.next().await;
        if e["type"] == "BOOKMARK" {
            assert_eq!(
                e["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
                "true"
            );
            break;
        }
        initial.push(e["object"]["metadata"]["name"].as_str().unwrap().to_owned());
    }
    assert_eq!(initial.len(), 6);
    let steps = [
        (
            "an operation in a namespace and on a node with none",
            Change::Upsert(migration("other", "vm-5", "w5", "")),
            [
                "ADDED namespace.other",
                "ADDED node.w5",
                "MODIFIED cluster",
                "MODIFIED component.kubevirt",
            ],
        ),
        (
            "the last operation on w3 ends",
            Change::Remove(migration("demo", "vm-1", "w3", "")),
            [
                "DELETED node.w3",
                "MODIFIED cluster",
                "MODIFIED component.kubevirt",
                "MODIFIED namespace.demo",
            ],
        ),
    ];
    for (step, change, expected) in steps {
        f.index.writer.apply(vec![change]);
        assert_eq!(events.next_sorted(4).await, expected, "{step}");
    }
}

#[tokio::test]
async fn a_watch_resumes_from_a_resource_version_and_an_expired_one_is_a_410() {
    let f = fixture();
    // From 101: the second migration (RV 102) is replayed as changes of the gates it touches.
    let query = "fieldSelector=metadata.name%3Dnode.w3&resourceVersion=101";
    let mut events = watch(&f.state, query).await;
    let e = events.next().await;
    assert_eq!(e["type"], "MODIFIED");
    assert_eq!(resource_version(&e), "102");
    assert_eq!(clear(&e["object"]).0, "False");
    // Before the index's history: expired.
    let mut events = watch(&f.state, "resourceVersion=5").await;
    let e = events.next().await;
    assert_eq!(e["type"], "ERROR");
    assert_eq!(e["object"]["code"], 410);
}

/// The conditions of `gate` by type: (status, reason, message).
fn condition<'a>(gate: &'a Value, type_: &str) -> Option<(&'a str, &'a str, &'a str)> {
    gate["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap(),
                c["reason"].as_str().unwrap(),
                c["message"].as_str().unwrap(),
            )
        })
}

#[tokio::test]
async fn a_node_gate_says_whether_its_override_is_in_force_and_watches_see_it_change() {
    use crate::inventory::Kept;
    let f = fixture();
    let now = jiff::Timestamp::now();
    let hour = jiff::SignedDuration::from_hours(1);
    let mut events = watch(&f.state, "fieldSelector=metadata.name%3Dnode.w1").await;
    let added = events.next().await;
    assert_eq!(condition(&added["object"], "Overridden"), None);

    f.inventory.applied(
        Kind::Node,
        "w1",
        Kept::overridden(
            "disk failing, INC-4711",
            Some(&(now + hour).to_string()),
            now,
        ),
    );
    f.index.scopes.scopes_changed();
    let modified = events.next().await;
    assert_eq!(modified["type"], "MODIFIED");
    let (status, reason, message) = condition(&modified["object"], "Overridden").unwrap();
    assert_eq!((status, reason), ("True", "OverrideSetUntil"));
    assert!(message.contains("disk failing, INC-4711"), "{message}");
    // The verdict is the verdict: a migration is still in flight on w1.
    assert_eq!(clear(&modified["object"]).0, "False");

    // Past its end (set in the past here): False, and the guard holds again.
    f.inventory.applied(
        Kind::Node,
        "w9",
        Kept::overridden(
            "firmware",
            Some(&(now - hour).to_string()),
            now - hour - hour,
        ),
    );
    let (_, ended) = call(&f.state, &format!("{GATES}/node.w9"), None).await;
    let (status, reason, _) = condition(&ended, "Overridden").unwrap();
    assert_eq!((status, reason), ("False", "OverrideEnded"));
    // Other nodes, and other scopes, say nothing of it.
    for other in ["node.w2", "cluster", "namespace.demo"] {
        let (_, gate) = call(&f.state, &format!("{GATES}/{other}"), None).await;
        assert_eq!(condition(&gate, "Overridden"), None, "{other}");
    }
}
