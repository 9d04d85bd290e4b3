use super::*;
use serde_json::json;

fn ifo() -> GroupResource {
    GroupResource::new("live.ifo.kubevirt.io", "inflightoperations")
}

fn forbidden(namespace: &str, name: &str, reason: &str) -> ApiError {
    ApiError::Forbidden(Box::new(Forbidden {
        user: "bob".into(),
        verb: "list".into(),
        target: ForbiddenTarget::Resource {
            resource: ifo(),
            subresource: String::new(),
            namespace: namespace.into(),
            name: name.into(),
        },
        reason: reason.into(),
    }))
}

#[test]
fn bad_request() {
    let e = ApiError::BadRequest("field label not supported: spec.foo".into());
    assert_eq!(e.code(), 400);
    assert_eq!(
        e.to_status(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"field label not supported: spec.foo","reason":"BadRequest","code":400})
    );
}

#[test]
fn unauthorized() {
    let e = ApiError::Unauthorized;
    assert_eq!(e.code(), 401);
    assert_eq!(
        e.to_status(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"Unauthorized","reason":"Unauthorized","code":401})
    );
}

#[test]
fn forbidden_namespaced_and_cluster() {
    let e = forbidden("ns1", "", "");
    assert_eq!(e.code(), 403);
    assert_eq!(
        e.to_status(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"inflightoperations.live.ifo.kubevirt.io is forbidden: User \"bob\" cannot list resource \"inflightoperations\" in API group \"live.ifo.kubevirt.io\" in the namespace \"ns1\"",
               "reason":"Forbidden",
               "details":{"group":"live.ifo.kubevirt.io","kind":"inflightoperations"},
               "code":403})
    );
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
    let e = ApiError::Forbidden(Box::new(Forbidden {
        user: "system:serviceaccount:a:b".into(),
        verb: "get".into(),
        target: ForbiddenTarget::Resource {
            resource: GroupResource::new("", "pods"),
            subresource: "log".into(),
            namespace: "default".into(),
            name: "p".into(),
        },
        reason: String::new(),
    }));
    assert_eq!(
        e.message(),
        "pods \"p\" is forbidden: User \"system:serviceaccount:a:b\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"default\""
    );
    let e = ApiError::Forbidden(Box::new(Forbidden {
        user: "x".into(),
        verb: "get".into(),
        target: ForbiddenTarget::NonResource {
            path: "/openapi/v2".into(),
        },
        reason: String::new(),
    }));
    assert_eq!(
        e.to_status(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"forbidden: User \"x\" cannot get path \"/openapi/v2\"",
               "reason":"Forbidden","details":{},"code":403})
    );
    let e = ApiError::Forbidden(Box::new(Forbidden {
        user: "x".into(),
        verb: "get".into(),
        target: ForbiddenTarget::NonResource {
            path: "/<script>&".into(),
        },
        reason: String::new(),
    }));
    assert_eq!(
        e.message(),
        "forbidden: User \"x\" cannot get path \"/&lt;script&gt;&amp;\""
    );
}

#[test]
fn not_found() {
    let e = ApiError::NotFound {
        resource: ifo(),
        name: "x".into(),
    };
    assert_eq!(e.code(), 404);
    assert_eq!(
        e.to_status(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"inflightoperations.live.ifo.kubevirt.io \"x\" not found",
               "reason":"NotFound",
               "details":{"name":"x","group":"live.ifo.kubevirt.io","kind":"inflightoperations"},
               "code":404})
    );
    let core = ApiError::NotFound {
        resource: GroupResource::new("", "pods"),
        name: "p".into(),
    };
    assert_eq!(core.message(), "pods \"p\" not found");
    assert_eq!(
        ApiError::PathNotFound.to_status(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"the server could not find the requested resource",
               "reason":"NotFound","details":{},"code":404})
    );
}

#[test]
fn method_not_allowed() {
    let e = ApiError::MethodNotAllowed {
        resource: ifo(),
        verb: "create".into(),
    };
    assert_eq!(e.code(), 405);
    assert_eq!(
        e.to_status(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"create is not supported on resources of kind \"inflightoperations.live.ifo.kubevirt.io\"",
               "reason":"MethodNotAllowed",
               "details":{"group":"live.ifo.kubevirt.io","kind":"inflightoperations"},
               "code":405})
    );
}

#[test]
fn not_acceptable() {
    let e = ApiError::from(crate::api::negotiate::NotAcceptable);
    assert_eq!(e.code(), 406);
    assert_eq!(
        e.to_status(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"only the following media types are accepted: application/json",
               "reason":"NotAcceptable","code":406})
    );
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
    let e = ApiError::TooOldResourceVersion {
        requested: 12,
        oldest: 1500,
    };
    assert_eq!(e.code(), 410);
    assert_eq!(
        e.to_status(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"too old resource version: 12 (1500)","reason":"Expired","code":410})
    );
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
fn too_large_resource_version() {
    let e = ApiError::ResourceVersionTooLarge {
        requested: 105,
        current: 100,
    };
    assert_eq!(e.code(), 504);
    assert_eq!(e.retry_after_seconds(), Some(1));
    assert_eq!(
        e.to_status(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"Timeout: Too large resource version: 105, current: 100",
               "reason":"Timeout",
               "details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],
                          "retryAfterSeconds":1},
               "code":504})
    );
}

#[test]
fn internal_and_unavailable() {
    let e = ApiError::Internal("subjectaccessreviews failed: timeout".into());
    assert_eq!(e.code(), 500);
    assert_eq!(e.retry_after_seconds(), None);
    assert_eq!(
        e.to_status(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"Internal error occurred: subjectaccessreviews failed: timeout",
               "reason":"InternalError",
               "details":{"causes":[{"message":"subjectaccessreviews failed: timeout"}]},
               "code":500})
    );
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
fn a_not_found_that_says_why() {
    let e = ApiError::NotFoundBecause {
        resource: GroupResource::new("live.ifo.kubevirt.io", "maintenancegates"),
        name: "node.worker1".into(),
        why: "the cluster has no node worker1".into(),
    };
    assert_eq!(e.code(), 404);
    assert_eq!(
        e.to_status(),
        json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
               "message":"maintenancegates.live.ifo.kubevirt.io \"node.worker1\" not found: the cluster has no node worker1",
               "reason":"NotFound",
               "details":{"name":"node.worker1","group":"live.ifo.kubevirt.io","kind":"maintenancegates"},
               "code":404})
    );
}

#[test]
fn conversions() {
    let sel = crate::apimachinery::fields::FieldSelector::parse("spec.foo=1", &["metadata.name"])
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
