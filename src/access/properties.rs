//! Property tests over hostile requests: reading a request never panics, and what a request is
//! authorized as is exactly what it is served as, for every served resource. Paths and queries
//! are drawn from the pieces an attacker would combine (repeated parameters, encoded slashes, dot
//! segments, empty segments, odd verbs, selectors that do and do not name an object) and the
//! served resources' names.

use crate::api::request::plan;
use crate::api::resource::{Action, GROUP, VERSION};
use crate::api::served::{SERVED, requested};
use crate::auth::Attributes;
use http::Method;
use ifo_apimachinery::RequestInfo;
use ifo_apimachinery::fields::FieldOperator;
use proptest::prelude::*;

/// Path segments besides the served resources' plurals.
const SEGMENTS: &[&str] = &[
    "apis",
    "live.ifo.kubevirt.io",
    "v1alpha1",
    "namespaces",
    "watch",
    "status",
    "",
    ".",
    "..",
    "%2F",
    "%2e%2e",
    "ns1",
    "n%73",
    "a%2Fb",
    "x",
    "cluster",
    "node.x",
    "%ff",
    "%",
    "api",
    "v1",
    "pods",
    "%00",
    "名前",
];

const PARAMS: &[&str] = &[
    "watch=true",
    "watch=false",
    "watch=0",
    "watch=1",
    "watch=",
    "watch",
    "watch=FALSE",
    "fieldSelector=metadata.name%3Dx",
    "fieldSelector=",
    "fieldSelector=metadata.name%21%3Dx",
    "fieldSelector=metadata.name%3D%3Dx",
    "fieldSelector=status.phase%3DActive",
    "fieldSelector=metadata.name%3Dx%2Cstatus.phase%3DActive",
    "fieldSelector=metadata.name%3D..",
    "fieldSelector=metadata.name%3Da%252Fb",
    "fieldSelector=bogus",
    "fieldSelector=%3D",
    "labelSelector=a%3Db",
    "labelSelector=a+in+(b",
    "labelSelector=",
    "resourceVersion=0",
    "resourceVersion=12",
    "resourceVersion=x",
    "resourceVersionMatch=NotOlderThan",
    "sendInitialEvents=true",
    "sendInitialEvents=false",
    "allowWatchBookmarks=true",
    "timeoutSeconds=9223372036854775807",
    "timeoutSeconds=-1",
    "limit=1",
    "limit=-5",
    "continue=abc",
    "includeObject=Object",
    "%ff=%fe",
    "&",
    "=",
];

fn request() -> impl Strategy<Value = (Method, String, Option<String>)> {
    let method = prop::sample::select(vec![
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
        Method::OPTIONS,
    ]);
    let prefix = prop::sample::select(vec![
        "/apis/live.ifo.kubevirt.io/v1alpha1/",
        "/apis/live.ifo.kubevirt.io/v1alpha1/namespaces/ns1/",
        "/apis/live.ifo.kubevirt.io/v1alpha1/watch/",
        "/",
        "//apis/live.ifo.kubevirt.io/v1alpha1/",
    ]);
    let pieces: Vec<&str> = SEGMENTS
        .iter()
        .copied()
        .chain(SERVED.iter().map(|r| r.plural))
        .collect();
    let segments = prop::collection::vec(prop::sample::select(pieces), 0..6);
    let params = prop::collection::vec(prop::sample::select(PARAMS), 0..6);
    (method, prefix, segments, params, any::<bool>()).prop_map(
        |(method, prefix, segments, params, trailing)| {
            let mut path = format!("{prefix}{}", segments.join("/"));
            if trailing {
                path.push('/');
            }
            let query = (!params.is_empty()).then(|| params.join("&"));
            (method, path, query)
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn what_is_authorized_is_what_is_served((method, path, query) in request()) {
        let Ok(info) = RequestInfo::parse(&method, &path, query.as_deref()) else {
            return Ok(()); // a 400 before anything else
        };
        let attributes = Attributes::of(&info);
        let Some(resource) = requested(&info) else {
            return Ok(()); // 404: no served resource is named
        };
        let Ok(plan) = plan(resource, &info) else {
            return Ok(()); // 404, 405 or 400: nothing is served
        };
        let Attributes::Resource { verb, group, version, resource, subresource, namespace, name } =
            attributes
        else {
            panic!("{method} {path}?{query:?} is served but was authorized as a non-resource request");
        };
        prop_assert_eq!(verb.as_str(), plan.action.verb());
        prop_assert_eq!(group.as_str(), GROUP);
        prop_assert_eq!(version.as_str(), VERSION);
        prop_assert_eq!(resource.as_str(), plan.scope.resource.plural);
        prop_assert_eq!(subresource, None);
        prop_assert_eq!(&namespace, &plan.scope.namespace);
        match (&plan.action, name) {
            // A named read is authorized for exactly that name.
            (Action::Get(served), authorized) => prop_assert_eq!(Some(served), authorized.as_ref()),
            // A list or watch authorized for one name selects nothing else: its selector
            // requires that name (terms are ANDed).
            (_, Some(authorized)) => prop_assert!(
                plan.params.fields.requirements().iter().any(|t| t.field == "metadata.name"
                    && t.operator == FieldOperator::Equals
                    && t.value == authorized),
                "{} {}?{:?} authorized for {} serves {}", method, path, query, authorized, plan.params.fields
            ),
            // Authorized for every name of the scope.
            (_, None) => {}
        }
    }

    #[test]
    fn selectors_never_panic(raw in ".{0,200}") {
        let _ = ifo_apimachinery::labels::LabelSelector::parse(&raw);
        for resource in SERVED {
            let _ = ifo_apimachinery::fields::FieldSelector::parse(&raw, resource.selectable);
        }
        let _ = RequestInfo::parse(&Method::GET, &format!("/apis/live.ifo.kubevirt.io/v1alpha1/{raw}"), Some(&raw));
    }
}

/// The list, get and watch paths of every served resource (whose plurals the requests above
/// draw from) are served as what they ask of it: the property is not vacuous for any of them.
#[test]
fn every_served_resource_is_served_at_its_paths() {
    for resource in SERVED {
        let plural = resource.plural;
        let scope = if resource.namespaced {
            "namespaces/ns1/"
        } else {
            ""
        };
        for (path, query, verb) in [
            (format!("{scope}{plural}"), None, "list"),
            (format!("{scope}{plural}/x"), None, "get"),
            (format!("watch/{scope}{plural}/x"), None, "watch"),
            (format!("{scope}{plural}"), Some("watch=true"), "watch"),
        ] {
            let path = format!("/apis/live.ifo.kubevirt.io/v1alpha1/{path}");
            let info = RequestInfo::parse(&Method::GET, &path, query).unwrap();
            let plan = plan(requested(&info).expect("a served resource"), &info)
                .unwrap_or_else(|e| panic!("{path}: {e}"));
            assert_eq!(plan.scope.resource.plural, plural, "{path}");
            assert_eq!(plan.action.verb(), verb, "{path}");
        }
    }
}
