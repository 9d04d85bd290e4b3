//! The router as a client sees it: list bodies in each representation, paging, get, and `/readyz`.

use super::*;
use crate::index::Index;
use crate::operation::{InFlightOperation, test_active, test_subject};
use crate::readiness::Readiness;
use crate::track::Change;
use axum::http::Request;
use serde_json::{Value, json};
use tower::ServiceExt;

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
const PARTIAL: &str = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";
const IFOS: &str = "/apis/live.ifo.kubevirt.io/v1alpha1/inflightoperations";

fn op(namespace: Option<&str>, subject: &str) -> Arc<InFlightOperation> {
    let vm = test_subject("kubevirt.io/v1", "VirtualMachine", namespace, subject);
    let mut record = test_active(&vm, ("vms", "kubevirt"), "Migrating", &[]);
    record.message = Some(format!("moving {subject}"));
    Arc::new(record)
}

/// Three operations in two namespaces and one cluster-scoped one.
fn state(readiness: Readiness) -> Arc<ApiState> {
    let index = Index::new(100, 16, 16).into_handles();
    index.writer.apply(
        [
            op(Some("a"), "vm1"),
            op(Some("a"), "vm2"),
            op(Some("b"), "vm3"),
            op(None, "node1"),
        ]
        .into_iter()
        .map(Change::Upsert)
        .collect(),
    );
    Arc::new(ApiState::new(
        index.reader.clone(),
        readiness,
        Default::default(),
    ))
}

fn ready() -> Readiness {
    let (readiness, synced) = Readiness::new("test records");
    synced.done();
    readiness
}

/// The names of a Table's columns.
pub(super) fn column_names(table: &Value) -> Vec<&str> {
    table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect()
}

/// What `app` answers a GET of `uri` with, asking for `accept`.
pub(super) async fn answer(app: Router, uri: &str, accept: Option<&str>) -> Response {
    let mut request = Request::get(uri);
    if let Some(accept) = accept {
        request = request.header(header::ACCEPT, accept);
    }
    app.oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap()
}

/// The status and body of what `app` answers a GET of `uri` with.
pub(super) async fn call(app: Router, uri: &str, accept: Option<&str>) -> (StatusCode, String) {
    let response = answer(app, uri, accept).await;
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

async fn get_json(app: Router, uri: &str, accept: Option<&str>) -> Value {
    let (status, body) = call(app, uri, accept).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn subjects(items: &[Value], path: &str) -> Vec<String> {
    items
        .iter()
        .map(|i| i.pointer(path).and_then(Value::as_str).unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn list_across_namespaces_is_the_stored_objects_in_order() {
    let state = state(ready());
    let list = get_json(router(state.clone()), IFOS, None).await;
    assert_eq!(list["kind"], "InFlightOperationList");
    assert_eq!(list["apiVersion"], "live.ifo.kubevirt.io/v1alpha1");
    assert_eq!(list["metadata"], json!({"resourceVersion": "104"}));
    let items = list["items"].as_array().unwrap();
    assert_eq!(subjects(items, "/spec/subject/name"), ["vm1", "vm2", "vm3"]);
    let stored = state
        .index
        .get(Some("a"), &op(Some("a"), "vm1").name)
        .unwrap();
    assert_eq!(items[0], stored.to_json());
}

#[tokio::test]
async fn table_rows_carry_cells_and_partial_metadata() {
    let app = router(state(ready()));
    let uri = "/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/a/inflightoperations";
    let table = get_json(app.clone(), uri, Some(TABLE)).await;
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(table["metadata"]["resourceVersion"], "104");
    let columns = column_names(&table);
    assert_eq!(columns.len(), 10);
    assert_eq!(columns[6..], ["Message", "Progress", "Expected", "Stalled"]);
    assert_eq!(
        &columns[..5],
        ["Name", "Kind", "Subject", "Operation", "Phase"]
    );
    let rows = table["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let cells = rows[0]["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 10);
    assert_eq!(
        cells[1..5],
        ["VirtualMachine", "vm1", "Migrating", "Active"]
    );
    assert_eq!(cells[6], "moving vm1");
    assert_eq!(cells[7..], ["", "", ""]);
    let object = &rows[0]["object"];
    assert_eq!(object["kind"], "PartialObjectMetadata");
    assert_eq!(object["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(object["metadata"]["namespace"], "a");
    assert_eq!(object["metadata"]["resourceVersion"], "101");
    assert!(object.get("spec").is_none());

    let with_object = get_json(
        app.clone(),
        &format!("{uri}?includeObject=Object"),
        Some(TABLE),
    )
    .await;
    assert_eq!(
        with_object["rows"][0]["object"]["kind"],
        "InFlightOperation"
    );
    assert_eq!(
        with_object["rows"][0]["object"]["spec"]["subject"]["name"],
        "vm1"
    );
    let without = get_json(app, &format!("{uri}?includeObject=None"), Some(TABLE)).await;
    assert!(without["rows"][0].get("object").is_none());
}

#[tokio::test]
async fn metadata_lists_and_gets() {
    let app = router(state(ready()));
    let list = get_json(app.clone(), IFOS, Some(PARTIAL)).await;
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(list["items"][2]["kind"], "PartialObjectMetadata");
    assert_eq!(list["items"][2]["metadata"]["namespace"], "b");

    let name = op(Some("b"), "vm3").name.clone();
    let uri = format!("/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/b/inflightoperations/{name}");
    let one = get_json(app.clone(), &uri, None).await;
    assert_eq!(one["metadata"]["name"], json!(name));
    let row = get_json(app, &uri, Some(TABLE)).await;
    assert_eq!(row["kind"], "Table");
    assert_eq!(row["metadata"]["resourceVersion"], "103");
    assert_eq!(row["rows"][0]["cells"][2], "vm3");
}

#[tokio::test]
async fn pages_follow_continue_tokens_to_the_end() {
    let app = router(state(ready()));
    let first = get_json(app.clone(), &format!("{IFOS}?limit=2"), None).await;
    assert_eq!(
        subjects(first["items"].as_array().unwrap(), "/spec/subject/name"),
        ["vm1", "vm2"]
    );
    let token = first["metadata"]["continue"].as_str().unwrap();
    let second = get_json(
        app.clone(),
        &format!("{IFOS}?limit=2&continue={token}"),
        None,
    )
    .await;
    assert_eq!(
        subjects(second["items"].as_array().unwrap(), "/spec/subject/name"),
        ["vm3"]
    );
    assert!(second["metadata"].get("continue").is_none());
    assert_eq!(second["metadata"]["resourceVersion"], "104");

    let table = get_json(app, &format!("{IFOS}?limit=1"), Some(TABLE)).await;
    assert_eq!(table["rows"].as_array().unwrap().len(), 1);
    assert!(table["metadata"]["continue"].is_string());
}

#[tokio::test]
async fn readyz_answers_503_with_the_reason_until_ready() {
    let (readiness, synced) = Readiness::new("the list of OperationRuleSets");
    let state = state(readiness);
    let health = health_router(state.clone());
    let (status, body) = call(health.clone(), "/readyz", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        body,
        "initial sync: waiting for the list of OperationRuleSets"
    );
    // Everything else is served meanwhile.
    assert_eq!(call(health.clone(), "/livez", None).await.0, StatusCode::OK);
    assert_eq!(
        call(router(state.clone()), IFOS, None).await.0,
        StatusCode::OK
    );
    let discovery = "/apis/live.ifo.kubevirt.io/v1alpha1";
    assert_eq!(call(router(state), discovery, None).await.0, StatusCode::OK);

    synced.done();
    assert_eq!(
        call(health, "/readyz", None).await,
        (StatusCode::OK, "ok".to_owned())
    );
}
