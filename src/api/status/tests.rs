use super::*;
use serde_json::{Value, json};

fn ifo() -> GroupResource {
    GroupResource::new("live.ifo.kubevirt.io", "inflightoperations")
}

fn forbidden_to(user: &str, verb: &str, target: ForbiddenTarget, reason: &str) -> ApiError {
    ApiError::Forbidden(Box::new(Forbidden {
        user: user.into(),
        verb: verb.into(),
        target,
        reason: reason.into(),
    }))
}

fn forbidden(namespace: &str, name: &str, reason: &str) -> ApiError {
    let target = ForbiddenTarget::Resource {
        resource: ifo(),
        subresource: String::new(),
        namespace: namespace.into(),
        name: name.into(),
    };
    forbidden_to("bob", "list", target, reason)
}

fn path(path: &str) -> ForbiddenTarget {
    ForbiddenTarget::NonResource { path: path.into() }
}

/// A `Status` of a failure; `details` only when it has some.
fn failure(code: u16, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut status = json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                            "message":message,"reason":reason,"code":code});
    if let Some(details) = details {
        status["details"] = details;
    }
    status
}

/// (what, the error, its code, reason and message, the details of its `Status`)
type Case = (
    &'static str,
    ApiError,
    u16,
    &'static str,
    &'static str,
    Option<Value>,
);

#[test]
fn each_error_is_the_status_kubernetes_sends() {
    let ifo_details = json!({"group":"live.ifo.kubevirt.io","kind":"inflightoperations"});
    let x_details = json!({"name":"x","group":"live.ifo.kubevirt.io","kind":"inflightoperations"});
    let cases: Vec<Case> = vec![
        (
            "bad request",
            ApiError::BadRequest("field label not supported: spec.foo".into()),
            400,
            "BadRequest",
            "field label not supported: spec.foo",
            None,
        ),
        (
            "unauthorized",
            ApiError::Unauthorized,
            401,
            "Unauthorized",
            "Unauthorized",
            None,
        ),
        (
            "forbidden in a namespace",
            forbidden("ns1", "", ""),
            403,
            "Forbidden",
            "inflightoperations.live.ifo.kubevirt.io is forbidden: User \"bob\" cannot list resource \"inflightoperations\" in API group \"live.ifo.kubevirt.io\" in the namespace \"ns1\"",
            Some(ifo_details.clone()),
        ),
        (
            "forbidden path",
            forbidden_to("x", "get", path("/openapi/v2"), ""),
            403,
            "Forbidden",
            "forbidden: User \"x\" cannot get path \"/openapi/v2\"",
            Some(json!({})),
        ),
        (
            "not found",
            ApiError::NotFound {
                resource: ifo(),
                name: "x".into(),
            },
            404,
            "NotFound",
            "inflightoperations.live.ifo.kubevirt.io \"x\" not found",
            Some(x_details),
        ),
        (
            "path not found",
            ApiError::PathNotFound,
            404,
            "NotFound",
            "the server could not find the requested resource",
            Some(json!({})),
        ),
        (
            "not found, saying why",
            ApiError::NotFoundBecause {
                resource: GroupResource::new("live.ifo.kubevirt.io", "maintenancegates"),
                name: "node.worker1".into(),
                why: "the cluster has no node worker1".into(),
            },
            404,
            "NotFound",
            "maintenancegates.live.ifo.kubevirt.io \"node.worker1\" not found: the cluster has no node worker1",
            Some(
                json!({"name":"node.worker1","group":"live.ifo.kubevirt.io","kind":"maintenancegates"}),
            ),
        ),
        (
            "method not allowed",
            ApiError::MethodNotAllowed {
                resource: ifo(),
                verb: "create".into(),
            },
            405,
            "MethodNotAllowed",
            "create is not supported on resources of kind \"inflightoperations.live.ifo.kubevirt.io\"",
            Some(ifo_details),
        ),
        (
            "not acceptable",
            ApiError::from(crate::api::negotiate::NotAcceptable),
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json",
            None,
        ),
        (
            "expired",
            ApiError::TooOldResourceVersion {
                requested: 12,
                oldest: 1500,
            },
            410,
            "Expired",
            "too old resource version: 12 (1500)",
            None,
        ),
        (
            "internal",
            ApiError::internal("subjectaccessreviews failed: timeout"),
            500,
            "InternalError",
            "Internal error occurred: subjectaccessreviews failed: timeout",
            Some(json!({"causes":[{"message":"subjectaccessreviews failed: timeout"}]})),
        ),
        (
            "too large resource version",
            ApiError::ResourceVersionTooLarge {
                requested: 105,
                current: 100,
            },
            504,
            "Timeout",
            "Timeout: Too large resource version: 105, current: 100",
            Some(
                json!({"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],
                       "retryAfterSeconds":1}),
            ),
        ),
    ];
    for (name, e, code, reason, message, details) in cases {
        assert_eq!(e.code(), code, "case {name}");
        assert_eq!(
            e.to_status(),
            failure(code, reason, message, details),
            "case {name}"
        );
    }
}

#[test]
fn forbidden_namespaced_and_cluster() {
    assert_eq!(
        forbidden("", "", "").message(),
        "inflightoperations.live.ifo.kubevirt.io is forbidden: User \"bob\" cannot list resource \"inflightoperations\" in API group \"live.ifo.kubevirt.io\" at the cluster scope"
    );
    let named = forbidden("ns1", "x", "no RBAC policy matched");
    assert_eq!(
        named.message(),
        "inflightoperations.live.ifo.kubevirt.io \"x\" is forbidden: User \"bob\" cannot list resource \"inflightoperations\" in API group \"live.ifo.kubevirt.io\" in the namespace \"ns1\": no RBAC policy matched"
    );
    assert_eq!(
        named.to_status()["details"],
        json!({"name":"x","group":"live.ifo.kubevirt.io","kind":"inflightoperations"})
    );
}

#[test]
fn forbidden_subresource_and_path() {
    let log = ForbiddenTarget::Resource {
        resource: GroupResource::new("", "pods"),
        subresource: "log".into(),
        namespace: "default".into(),
        name: "p".into(),
    };
    assert_eq!(
        forbidden_to("system:serviceaccount:a:b", "get", log, "").message(),
        "pods \"p\" is forbidden: User \"system:serviceaccount:a:b\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"default\""
    );
    assert_eq!(
        forbidden_to("x", "get", path("/<script>&"), "").message(),
        "forbidden: User \"x\" cannot get path \"/&lt;script&gt;&amp;\""
    );
}

#[test]
fn not_found() {
    let core = ApiError::NotFound {
        resource: GroupResource::new("", "pods"),
        name: "p".into(),
    };
    assert_eq!(core.message(), "pods \"p\" not found");
}

#[test]
fn not_acceptable() {
    let e = ApiError::NotAcceptable {
        accepted: vec!["application/json".into(), "application/yaml".into()],
    };
    assert_eq!(
        e.message(),
        "only the following media types are accepted: application/json, application/yaml"
    );
}

#[test]
fn expired() {
    assert_eq!(ApiError::Expired("slow".into()).reason(), "Expired");
    let e = ApiError::ContinueExpired {
        continue_token: Some("abc".into()),
    };
    let s = e.to_status();
    assert_eq!(s["code"], 410);
    assert_eq!(s["reason"], "Expired");
    assert_eq!(s["metadata"], json!({"continue":"abc"}));
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains("or use the continue token in this response")
    );
    let e = ApiError::ContinueExpired {
        continue_token: None,
    };
    assert_eq!(e.to_status()["metadata"], json!({}));
    assert!(e.message().ends_with("without the continue parameter."));
}

#[test]
fn retry_after() {
    let too_large = ApiError::ResourceVersionTooLarge {
        requested: 105,
        current: 100,
    };
    assert_eq!(too_large.retry_after_seconds(), Some(1));
    let internal = ApiError::internal("subjectaccessreviews failed: timeout");
    assert_eq!(internal.retry_after_seconds(), None);
    let e = ApiError::not_leader();
    assert_eq!(e.code(), 503);
    assert_eq!(e.reason(), "ServiceUnavailable");
    assert_eq!(e.retry_after_seconds(), Some(1));
}

#[test]
fn field_order_and_http_status() {
    let e = ApiError::NotFound {
        resource: ifo(),
        name: "x".into(),
    };
    assert_eq!(
        e.to_json(),
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"inflightoperations.live.ifo.kubevirt.io \"x\" not found","reason":"NotFound","details":{"name":"x","group":"live.ifo.kubevirt.io","kind":"inflightoperations"},"code":404}"#
    );
    assert_eq!(e.status_code(), http::StatusCode::NOT_FOUND);
    assert_eq!(e.to_string(), e.message());
}

#[test]
fn conversions() {
    let sel = ifo_apimachinery::fields::FieldSelector::parse("spec.foo=1", &["metadata.name"])
        .unwrap_err();
    let e = ApiError::from(sel);
    assert_eq!(e.code(), 400);
    assert_eq!(e.message(), "field label not supported: spec.foo");
    let tok = crate::api::continue_token::ContinueToken::decode("%%%").unwrap_err();
    let e = ApiError::from(tok);
    assert_eq!(e.code(), 400);
    assert!(
        e.message()
            .starts_with("invalid continue token: continue key is not valid")
    );
}

#[test]
fn group_resource_display() {
    assert_eq!(ifo().to_string(), "inflightoperations.live.ifo.kubevirt.io");
    assert_eq!(GroupResource::new("", "pods").to_string(), "pods");
}

/// A 500 keeps what failed as its cause: its message is the answer's, and the error itself is
/// there for whoever handles it.
#[test]
fn an_internal_error_keeps_its_cause() {
    let e = ApiError::internal(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "subjectaccessreviews failed: timeout",
    ));
    assert_eq!(
        e.message(),
        "Internal error occurred: subjectaccessreviews failed: timeout"
    );
    let cause = std::error::Error::source(&e).expect("a cause");
    assert_eq!(
        cause
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind),
        Some(std::io::ErrorKind::TimedOut)
    );
}
