//! The rulesets door: its decision on typed reviews, and its handler on raw bodies.

use super::decide;
use crate::admission::{Intake, MAX_REVIEW_BYTES, RULESETS_PATH, router};
use crate::evaluate::Engine;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use serde_json::{Value, json};
use std::sync::{Arc, LazyLock};
use tower::ServiceExt;

static ENGINE: LazyLock<Engine> = LazyLock::new(Engine::new);

const UID: &str = "705ab4f5-6393-11e8-b7cc-42010a800002";

/// A VirtualMachine ruleset with these rules.
fn ruleset(name: &str, rules: Value) -> Value {
    json!({
        "apiVersion": "ifo.kubevirt.io/v1alpha1",
        "kind": "OperationRuleSet",
        "metadata": {"name": name, "generation": 1},
        "spec": {
            "component": "kubevirt",
            "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
            "rules": rules,
        }
    })
}

/// An `admission.k8s.io/v1` AdmissionReview as kube-apiserver sends it, of `operation` on
/// `resource` (group, version, plural) with `object` and `old`.
fn review_of(
    operation: &str,
    resource: (&str, &str, &str),
    object: Option<Value>,
    old: Option<Value>,
) -> Value {
    let (group, version, plural) = resource;
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": UID,
            "kind": {"group": group, "version": version, "kind": "OperationRuleSet"},
            "resource": {"group": group, "version": version, "resource": plural},
            "requestKind": {"group": group, "version": version, "kind": "OperationRuleSet"},
            "requestResource": {"group": group, "version": version, "resource": plural},
            "name": "rs",
            "operation": operation,
            "userInfo": {"username": "admin", "groups": ["system:masters", "system:authenticated"]},
            "object": object,
            "oldObject": old,
            "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        }
    })
}

const RULESETS: (&str, &str, &str) = ("ifo.kubevirt.io", "v1alpha1", "operationrulesets");

fn request(review: Value) -> AdmissionRequest<DynamicObject> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(review).unwrap();
    review.try_into().unwrap()
}

fn decided(review: Value) -> AdmissionResponse {
    decide(&ENGINE, &request(review)).expect("a decision")
}

fn create(object: Value) -> AdmissionResponse {
    decided(review_of("CREATE", RULESETS, Some(object), None))
}

fn assert_denied(response: &AdmissionResponse) -> &str {
    assert!(!response.allowed, "{response:?}");
    assert_eq!(response.uid, UID);
    assert_eq!(response.result.code, 422, "{response:?}");
    assert_eq!(response.result.reason, "Invalid");
    &response.result.message
}

#[test]
fn a_ruleset_that_compiles_is_allowed() {
    let response = create(ruleset(
        "vms",
        json!([{
            "operation": "Migrating",
            "expression": "object.?status.?printableStatus.orValue('') == 'Migrating'",
            "message": "'to ' + object.status.migrationTarget",
        }]),
    ));
    assert!(response.allowed, "{response:?}");
    assert_eq!(response.uid, UID);
}

/// The review's answer, with `looked` as the schemas the door found.
fn create_looked(object: Value, looked: &super::Found) -> AdmissionResponse {
    super::decide_with(
        &ENGINE,
        &request(review_of("CREATE", RULESETS, Some(object), None)),
        looked,
    )
    .expect("a decision")
}

fn vms() -> crate::ruleset::Target {
    crate::ruleset::Target::of("kubevirt.io", "v1", "virtualmachines")
}

/// The door found `schema` for VirtualMachines.
fn found_vm_schema(schema: Value) -> super::Found {
    let mut looked = super::Found::default();
    looked.by_target.insert(
        vms(),
        super::Lookup::Found(std::sync::Arc::new(
            crate::ruleset::schema_check::Schema::crd(schema),
        )),
    );
    looked
}

#[test]
fn a_rule_that_cannot_give_a_bool_is_denied_without_a_schema() {
    let response = create(ruleset(
        "literal",
        json!([{"operation": "Starting", "expression": "'not a boolean'", "message": "1"}]),
    ));
    let message = assert_denied(&response);
    assert_eq!(
        message,
        "rules[0] (Starting).expression: the result is of type string; a rule must give a bool; \
         rules[0] (Starting).message: the result is of type int; a message must give a string"
    );
}

#[test]
fn a_field_a_closed_schema_does_not_have_is_denied_with_the_nearest_one() {
    let looked = found_vm_schema(json!({"type": "object", "properties": {
        "status": {"type": "object", "properties": {"printableStatus": {"type": "string"}}},
    }}));
    let rule = |expression: &str| json!([{"operation": "Migrating", "expression": expression}]);
    let response = create_looked(
        ruleset(
            "typo",
            rule("object.?status.?printableStatsu.orValue('') == 'Migrating'"),
        ),
        &looked,
    );
    assert_eq!(
        assert_denied(&response),
        "rules[0] (Migrating).expression: object.?status.?printableStatsu: the schema of \
         object.status has no field printableStatsu; did you mean printableStatus?"
    );
    let response = create_looked(
        ruleset(
            "fine",
            rule("object.?status.?printableStatus.orValue('') == 'Migrating'"),
        ),
        &looked,
    );
    assert!(
        response.allowed && response.warnings.is_none(),
        "{response:?}"
    );
}

#[test]
fn what_could_not_be_checked_is_allowed_with_a_warning() {
    let rules = json!([{"operation": "Migrating", "expression": "object.status.anything == 'x'"}]);
    // An open schema.
    let open =
        found_vm_schema(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    let response = create_looked(ruleset("open", rules.clone()), &open);
    assert!(response.allowed, "{response:?}");
    assert_eq!(
        response.warnings.unwrap(),
        [
            "kubevirt.io/v1/virtualmachines: the schema takes any field in object (open: \
          x-kubernetes-preserve-unknown-fields, or no properties listed), so the fields read \
          there are not checked"
        ]
    );
    // No CRD.
    let mut absent = super::Found::default();
    absent.by_target.insert(
        vms(),
        super::Lookup::Absent(
            "no CustomResourceDefinition virtualmachines.kubevirt.io is installed".into(),
        ),
    );
    let response = create_looked(ruleset("absent", rules.clone()), &absent);
    assert!(response.allowed, "{response:?}");
    assert_eq!(
        response.warnings.unwrap(),
        [
            "the fields read from kubevirt.io/v1/virtualmachines are not checked: no \
          CustomResourceDefinition virtualmachines.kubevirt.io is installed"
        ]
    );
}

#[test]
fn targets_are_read_from_the_spec_as_sent() {
    let mut object = ruleset("related", json!([]));
    object["spec"]["related"] = json!([
        {"target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachineinstances"}},
        {"target": "not a target"},
    ]);
    assert_eq!(
        super::targets_of(&object),
        [
            vms(),
            crate::ruleset::Target::of("kubevirt.io", "v1", "virtualmachineinstances")
        ]
    );
}

#[test]
fn invalid_cel_is_denied_with_every_problem_and_its_caret() {
    let mut object = ruleset(
        "broken",
        json!([
            {"operation": "Ok", "expression": "true"},
            {"operation": "Broken", "expression": "object.status.printableStatus =="},
            {"operation": "Quoted", "expression": "true", "message": "object.status.phase == Running"},
        ]),
    );
    object["spec"]["labelExpressions"] = json!([{"key": "node", "expression": "object.spec.("}]);
    let response = create(object);
    let message = assert_denied(&response);
    // Every problem, each with where it is, as the ruleset's InvalidRule condition says them.
    let problems: Vec<&str> = message.split("; ").collect();
    assert_eq!(problems.len(), 3, "{message}");
    let starts = [
        "rules[1] (Broken).expression: ERROR: <input>:1:33",
        "rules[2] (Quoted).message: ERROR: <input>:1:24",
        "labelExpressions[0] (node): ERROR:",
    ];
    for (problem, start) in problems.iter().zip(starts) {
        assert!(problem.starts_with(start), "{start}: {message}");
    }
    let undeclared = "undeclared reference to 'Running'";
    assert!(problems[1].contains(undeclared), "{message}");
    // The source line and a caret under the place.
    let caret = format!("| {}^", ".".repeat(32));
    for shown in ["| object.status.printableStatus ==\n", &caret] {
        assert!(message.contains(shown), "{shown:?}: {message}");
    }
}

#[test]
fn an_update_that_breaks_a_ruleset_is_denied() {
    let old = ruleset(
        "vms",
        json!([{"operation": "Running", "expression": "true"}]),
    );
    let new = ruleset(
        "vms",
        json!([{"operation": "Running", "expression": "object.status.phase == Running"}]),
    );
    let response = decided(review_of("UPDATE", RULESETS, Some(new), Some(old)));
    let message = assert_denied(&response);
    assert!(
        message.starts_with("rules[0] (Running).expression:"),
        "{message}"
    );
}

#[test]
fn what_the_spec_lacks_or_has_wrong_is_denied() {
    let mut no_rules = ruleset("empty", json!([]));
    no_rules["spec"]["target"]["version"] = json!("");
    let message = assert_denied(&create(no_rules)).to_owned();
    assert_eq!(
        message,
        "rules: at least one rule is required; target: version and resource are required"
    );

    let mut unreadable = ruleset("unreadable", json!([]));
    unreadable["spec"].as_object_mut().unwrap().remove("target");
    let response = create(unreadable);
    let message = assert_denied(&response);
    assert!(
        message.starts_with("spec: missing field `target`"),
        "{message}"
    );

    let mut no_spec = ruleset("nospec", json!([]));
    no_spec.as_object_mut().unwrap().remove("spec");
    assert_eq!(assert_denied(&create(no_spec)), "spec: Required value");
}

#[test]
fn over_the_cost_estimate_is_denied_as_the_controller_would() {
    let response = create(ruleset(
        "costly",
        json!([{
            "operation": "Costly",
            "expression": "lists.range(5000).all(i, lists.range(5000).all(j, i + j >= 0))",
        }]),
    ));
    let message = assert_denied(&response);
    assert!(message.contains("exceeds the limit"), "{message}");
}

/// A rule whose result type cannot be seen without the schema (a field read where none was
/// found) compiles, and shows at run time (`RuleErrors` on the ruleset), not at the door.
#[test]
fn a_rule_of_a_type_not_seen_is_left_to_run_time() {
    let response = create(ruleset(
        "strings",
        json!([{"operation": "Wrong", "expression": "object.status.printableStatus"}]),
    ));
    assert!(response.allowed, "{response:?}");
}

#[test]
fn deletes_and_other_resources_are_allowed_whatever_they_hold() {
    let broken = ruleset(
        "broken",
        json!([{"operation": "Broken", "expression": "object.status =="}]),
    );
    let delete = decided(review_of("DELETE", RULESETS, None, Some(broken.clone())));
    assert!(delete.allowed, "{delete:?}");
    assert_eq!(delete.uid, UID);

    for resource in [
        ("", "v1", "configmaps"),
        ("ifo.kubevirt.io", "v1alpha1", "inflightoperations"),
        ("ifo.kubevirt.io", "v1beta1", "operationrulesets"),
    ] {
        let other = decided(review_of("CREATE", resource, Some(broken.clone()), None));
        assert!(other.allowed, "{resource:?}: {other:?}");
    }

    let mut status = review_of("UPDATE", RULESETS, Some(broken.clone()), Some(broken));
    status["request"]["subResource"] = json!("status");
    assert!(decided(status).allowed);
}

/// Reviews come from anyone who reaches the port: a spec too large to compile cheaply is let
/// through with a warning, and its status tells (the controller compiles it all the same).
#[test]
fn a_spec_too_large_to_compile_here_is_let_through_with_a_warning() {
    let broken = json!({"operation": "Broken", "expression": "object.status =="});
    let response = create(ruleset("huge", Value::Array(vec![broken; 10_000])));
    assert!(response.allowed, "{response:?}");
    let warnings = response.warnings.expect("a warning");
    assert!(
        warnings[0].starts_with("not validated: the spec is "),
        "{warnings:?}"
    );
}

#[test]
fn a_create_without_its_object_is_malformed() {
    let review = review_of("CREATE", RULESETS, None, None);
    assert!(decide(&ENGINE, &request(review)).is_err());
}

// ---- the handler ------------------------------------------------------------------------------

/// POSTs `body` to the door; (status, body).
async fn post(body: impl Into<Body>) -> (StatusCode, Vec<u8>) {
    call(Method::POST, body.into()).await
}

async fn call(method: Method, body: Body) -> (StatusCode, Vec<u8>) {
    let response = router(
        ENGINE.clone(),
        None,
        std::sync::Arc::new(Intake::open()),
        None,
    )
    .oneshot(
        Request::builder()
            .method(method)
            .uri(RULESETS_PATH)
            .header("content-type", "application/json")
            .body(body)
            .unwrap(),
    )
    .await
    .unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, body.to_vec())
}

/// The handler's answer to the review of the creation of `object`.
async fn answer_to_create(object: Value) -> Value {
    let (status, body) = post(review_of("CREATE", RULESETS, Some(object), None).to_string()).await;
    assert_eq!(status, StatusCode::OK);
    serde_json::from_slice(&body).unwrap()
}

#[tokio::test]
async fn the_handler_answers_a_review_with_a_review() {
    let valid = json!([{"operation": "Running", "expression": "true"}]);
    let answer = answer_to_create(ruleset("vms", valid)).await;
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["response"]["uid"], UID);
    assert_eq!(answer["response"]["allowed"], true);

    let broken = json!([{"operation": "Broken", "expression": "object.status =="}]);
    let answer = answer_to_create(ruleset("broken", broken)).await;
    assert_eq!(answer["response"]["uid"], UID);
    assert_eq!(answer["response"]["allowed"], false);
    let result = &answer["response"]["status"];
    assert_eq!(result["code"], 422);
    assert_eq!(result["reason"], "Invalid");
    assert_eq!(result["status"], "Failure");
    assert!(
        result["message"]
            .as_str()
            .unwrap()
            .starts_with("rules[0] (Broken).expression: ERROR: <input>:1:"),
        "{result}"
    );
}

#[tokio::test]
async fn what_is_not_a_v1_review_is_a_400_that_says_why() {
    let (status, body) = post("{not json").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let text = String::from_utf8(body).unwrap();
    assert!(text.starts_with("malformed AdmissionReview: "), "{text}");

    let mut old = review_of("CREATE", RULESETS, None, None);
    old["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let (status, body) = post(old.to_string()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let text = String::from_utf8(body).unwrap();
    assert!(text.contains("admission.k8s.io/v1beta1"), "{text}");

    let (status, body) =
        post(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).to_string())
            .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        String::from_utf8(body).unwrap(),
        "malformed AdmissionReview: no request"
    );

    let (status, _) = post(review_of("CREATE", RULESETS, None, None).to_string()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // An object nested deeper than serde_json's limit is refused, not a stack overflow.
    let mut deep = review_of("CREATE", RULESETS, Some(json!({"spec": "DEEP"})), None).to_string();
    deep = deep.replace(
        "\"DEEP\"",
        &format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
    );
    let (status, body) = post(deep).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let text = String::from_utf8(body).unwrap();
    assert!(text.contains("recursion limit exceeded"), "{text}");
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_unread() {
    let (status, body) = post(vec![b' '; MAX_REVIEW_BYTES + 1]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        String::from_utf8(body)
            .unwrap()
            .contains(&MAX_REVIEW_BYTES.to_string())
    );
}

#[tokio::test]
async fn only_post_is_served() {
    for method in [Method::GET, Method::PUT, Method::DELETE] {
        let (status, _) = call(method.clone(), Body::empty()).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
    }
}

/// The doors' port serves reviews and nothing else: a request for any other path is 404, any
/// other method at a door 405, and the connection that sent it (not kube-apiserver's, which
/// sends nothing but reviews) gives its place to any newcomer from then on, busy or not.
#[tokio::test]
async fn anything_but_a_review_at_the_doors_is_refused_and_its_connection_gives_way() {
    use crate::auth::budget::{Budget, ConnectionSeat, Limits, Port, Refused};
    use crate::auth::connection::Activity;
    use std::net::{IpAddr, Ipv4Addr};
    let budget = Budget::new(
        Limits {
            proven: 1,
            anonymous: 1,
        },
        Port::Admission,
    );
    let peer = |last| IpAddr::V4(Ipv4Addr::new(10, 0, 0, last));
    for (method, path, status) in [
        (
            Method::GET,
            "/apis/live.ifo.kubevirt.io/v1alpha1",
            StatusCode::NOT_FOUND,
        ),
        (Method::GET, RULESETS_PATH, StatusCode::METHOD_NOT_ALLOWED),
    ] {
        // The pool's one place, held by a connection with a request in flight.
        let activity = Arc::new(Activity::default());
        let seat = budget.admit(peer(1), activity.clone()).unwrap();
        let _busy = activity.begin();
        let newcomer = Arc::new(Activity::default());
        assert_eq!(
            budget.admit(peer(2), newcomer.clone()).err(),
            Some(Refused::Anonymous)
        );
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .unwrap();
        // Held beside the request too, as its connection's service holds it.
        let held = ConnectionSeat::new(seat);
        request.extensions_mut().insert(held.clone());
        let response = router(ENGINE.clone(), None, Arc::new(Intake::open()), None)
            .oneshot(request)
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{path}");
        let _newcomer = budget.admit(peer(2), newcomer).unwrap();
        assert!(activity.is_displaced(), "{path}: the connection gives way");
    }
}
