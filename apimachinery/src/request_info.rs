//! What a request asks for, read once from its method, path and query the way kube-apiserver's
//! `RequestInfoFactory` reads it. Authorization derives its attributes from a [`RequestInfo`] and
//! the handlers serve the same [`RequestInfo`], so a request can never be authorized as one
//! thing and served as another (a repeated parameter, an encoded slash, an empty segment).
//!
//! The rules, as in `k8s.io/apiserver/pkg/endpoints/request`:
//! - the path is percent-decoded first (Go's `URL.Path`), then split on `/`, outer slashes
//!   trimmed; empty inner segments are kept (and served as not found);
//! - `/apis/<group>/<version>/…` and `/api/<version>/…` are resource requests, any other path a
//!   non-resource request with the lower-cased method as its verb;
//! - `/watch/` after the version makes the verb `watch`; otherwise the method gives it;
//! - `namespaces/<ns>/<resource>/<name>/<subresource>`;
//! - a `GET` without a name is a `list`, or a `watch` when the first `watch` value says so, and
//!   an exact `metadata.name` field selector names the object it is authorized for;
//! - a `DELETE` without a name is a `deletecollection`.

use super::fields::FieldSelector;
use super::query::Query;
use http::Method;

/// Why a request could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestInfoError {
    /// The percent-decoded path is not UTF-8.
    #[error("the request path is not valid UTF-8 once decoded")]
    PathNotUtf8,
    /// `/watch` with nothing after it.
    #[error("unable to determine kind and namespace from url {0}")]
    NoResource(String),
}

/// One request, parsed once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestInfo {
    /// The decoded path.
    pub path: String,
    /// `get`, `list`, `watch`, `create`, … for resource requests; the lower-cased method for
    /// the others.
    pub verb: String,
    /// The decoded query, first values counting.
    pub query: Query,
    /// What resource the request addresses; `None` for a non-resource request.
    pub resource: Option<ResourceInfo>,
}

/// The resource part of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceInfo {
    /// Empty for the legacy core group (`/api`).
    pub group: String,
    /// The API version (`v1`, `v1alpha1`).
    pub version: String,
    /// `Some` under `/namespaces/<ns>/` (possibly empty, which is served as not found).
    pub namespace: Option<String>,
    /// The resource's plural (`inflightoperations`), as in the path.
    pub resource: String,
    /// The object's name: from the path, or for a list or watch from an exact `metadata.name`
    /// field selector.
    pub name: Option<String>,
    /// Whether the name came from the path (`false` for a name from a field selector).
    pub name_in_path: bool,
    /// `status`, `log`, …: the part after the name; `None` for the object itself.
    pub subresource: Option<String>,
}

/// Namespace subresources: `namespaces/<ns>/status` is the namespace's, not a resource named
/// `status` inside it.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

impl RequestInfo {
    /// Reads a request from its method, raw (still percent-encoded) path and raw query.
    pub fn parse(
        method: &Method,
        raw_path: &str,
        raw_query: Option<&str>,
    ) -> Result<RequestInfo, RequestInfoError> {
        let path = percent_encoding::percent_decode_str(raw_path)
            .decode_utf8()
            .map_err(|_| RequestInfoError::PathNotUtf8)?
            .into_owned();
        let query = Query::parse(raw_query);
        let Some((group, version, mut parts)) = resource_parts(&path) else {
            return Ok(RequestInfo {
                verb: method.as_str().to_ascii_lowercase(),
                path,
                query,
                resource: None,
            });
        };
        let path_watch = parts.first() == Some(&"watch");
        let mut verb = if path_watch {
            if parts.len() < 2 {
                return Err(RequestInfoError::NoResource(path));
            }
            parts.remove(0);
            "watch"
        } else {
            method_verb(method)
        };
        let mut namespace = None;
        if parts.first() == Some(&"namespaces") && parts.len() > 1 {
            namespace = Some(parts[1].to_string());
            if parts.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&parts[2]) {
                parts.drain(..2);
            }
        }
        let resource = parts[0].to_string();
        let mut name = parts.get(1).map(|s| s.to_string());
        let name_in_path = name.is_some();
        let subresource = parts.get(2).map(|s| s.to_string());
        let (group, version) = (group.to_string(), version.to_string());
        if name.is_none() && verb == "delete" {
            verb = "deletecollection";
        }
        if name.is_none() && verb == "get" {
            verb = if query.flag("watch") { "watch" } else { "list" };
            name = query
                .non_empty("fieldSelector")
                .and_then(|s| FieldSelector::parse_any_field(s).ok())
                .and_then(|s| s.exact("metadata.name").map(str::to_string))
                .filter(|n| is_valid_path_segment_name(n));
        }
        Ok(RequestInfo {
            path,
            verb: verb.to_string(),
            query,
            resource: Some(ResourceInfo {
                group,
                version,
                namespace,
                resource,
                name,
                name_in_path,
                subresource,
            }),
        })
    }
}

/// `(group, version, rest)` of a resource request's decoded path, `None` for any other path.
fn resource_parts(path: &str) -> Option<(&str, &str, Vec<&str>)> {
    let trimmed = path.trim_matches('/');
    if trimmed.is_empty() {
        return None;
    }
    let parts: Vec<&str> = trimmed.split('/').collect();
    match parts.as_slice() {
        ["apis", group, version, rest @ ..] if !rest.is_empty() => {
            Some((group, version, rest.to_vec()))
        }
        ["api", version, rest @ ..] if !rest.is_empty() => Some(("", version, rest.to_vec())),
        _ => None,
    }
}

/// The verb of a method on a resource path, before list, watch and deletecollection are told
/// apart.
fn method_verb(method: &Method) -> &'static str {
    match *method {
        Method::POST => "create",
        Method::GET | Method::HEAD => "get",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    }
}

/// apimachinery `path.IsValidPathSegmentName`: a name that can stand in a path.
fn is_valid_path_segment_name(name: &str) -> bool {
    name != "." && name != ".." && !name.contains(['/', '%'])
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "/apis/live.ifo.kubevirt.io/v1alpha1";

    fn parse(method: Method, path: &str, query: Option<&str>) -> RequestInfo {
        RequestInfo::parse(&method, path, query).unwrap()
    }

    fn res(info: &RequestInfo) -> (&str, Option<&str>, &str, Option<&str>, Option<&str>) {
        let r = info.resource.as_ref().expect("a resource request");
        (
            info.verb.as_str(),
            r.namespace.as_deref(),
            r.resource.as_str(),
            r.name.as_deref(),
            r.subresource.as_deref(),
        )
    }

    #[test]
    fn verbs_and_scopes_match_kube_request_info() {
        let ifos = "inflightoperations";
        type Want<'a> = (&'a str, Option<&'a str>, &'a str, Option<&'a str>);
        let cases: &[(Method, String, Option<&str>, Want)] = &[
            (
                Method::GET,
                format!("{P}/{ifos}"),
                Some("limit=500"),
                ("list", None, ifos, None),
            ),
            (
                Method::GET,
                format!("{P}/namespaces/ns1/{ifos}"),
                Some("watch=true&resourceVersion=5"),
                ("watch", Some("ns1"), ifos, None),
            ),
            (
                Method::GET,
                format!("{P}/namespaces/ns1/{ifos}"),
                Some("watch=false"),
                ("list", Some("ns1"), ifos, None),
            ),
            (
                Method::GET,
                format!("{P}/namespaces/ns1/{ifos}/x"),
                None,
                ("get", Some("ns1"), ifos, Some("x")),
            ),
            // A named GET stays a get whatever `watch` says; only the path prefix makes it a watch.
            (
                Method::GET,
                format!("{P}/namespaces/ns1/{ifos}/x"),
                Some("watch=true"),
                ("get", Some("ns1"), ifos, Some("x")),
            ),
            (
                Method::GET,
                format!("{P}/watch/namespaces/ns1/{ifos}/x"),
                None,
                ("watch", Some("ns1"), ifos, Some("x")),
            ),
            (
                Method::GET,
                format!("{P}/namespaces/ns1/{ifos}"),
                Some("watch=1&fieldSelector=metadata.name%3Dx"),
                ("watch", Some("ns1"), ifos, Some("x")),
            ),
            (
                Method::GET,
                format!("{P}/watch/{ifos}"),
                None,
                ("watch", None, ifos, None),
            ),
            (
                Method::DELETE,
                format!("{P}/namespaces/ns1/{ifos}/x"),
                None,
                ("delete", Some("ns1"), ifos, Some("x")),
            ),
            (
                Method::DELETE,
                format!("{P}/namespaces/ns1/{ifos}"),
                None,
                ("deletecollection", Some("ns1"), ifos, None),
            ),
            (
                Method::POST,
                format!("{P}/{ifos}"),
                None,
                ("create", None, ifos, None),
            ),
        ];
        for (method, path, query, (verb, ns, resource, name)) in cases {
            let info = parse(method.clone(), path, *query);
            let (v, n, r, nm, sub) = res(&info);
            assert_eq!(
                (v, n, r, nm, sub),
                (*verb, *ns, *resource, *name, None),
                "{method} {path}?{query:?}"
            );
        }
    }

    #[test]
    fn repeated_parameters_take_their_first_value() {
        let path = format!("{P}/namespaces/ns1/inflightoperations");
        let info = parse(Method::GET, &path, Some("watch=false&watch=true"));
        assert_eq!(info.verb, "list");
        let info = parse(
            Method::GET,
            &path,
            Some("fieldSelector=metadata.name%3Dx&fieldSelector="),
        );
        assert_eq!(res(&info).3, Some("x"));
        let info = parse(
            Method::GET,
            &path,
            Some("fieldSelector=&fieldSelector=metadata.name%3Dx"),
        );
        assert_eq!(res(&info).3, None, "an empty first selector names nothing");
        assert_eq!(info.query.non_empty("fieldSelector"), None);
    }

    #[test]
    fn names_from_selectors_must_be_path_segments() {
        let path = format!("{P}/inflightoperations");
        for bad in ["..", ".", "a%2Fb", "a%252Fb"] {
            let info = parse(
                Method::GET,
                &path,
                Some(&format!("fieldSelector=metadata.name%3D{bad}")),
            );
            assert_eq!(res(&info).3, None, "{bad}");
        }
        let info = parse(Method::GET, &path, Some("fieldSelector=metadata.name!%3Dx"));
        assert_eq!(res(&info).3, None);
        let info = parse(
            Method::GET,
            &path,
            Some("fieldSelector=metadata.name%3Dx%2Cstatus.phase%3DActive"),
        );
        assert_eq!(res(&info).3, Some("x"));
    }

    #[test]
    fn the_path_is_decoded_before_it_is_split() {
        // An encoded slash is a slash: the namespace is `a`, and `b` the resource.
        let info = parse(
            Method::GET,
            &format!("{P}/namespaces/a%2Fb/inflightoperations"),
            None,
        );
        assert_eq!(
            res(&info),
            ("get", Some("a"), "b", Some("inflightoperations"), None)
        );
        let info = parse(
            Method::GET,
            &format!("{P}/namespaces/n%73/inflightoperations"),
            None,
        );
        assert_eq!(
            res(&info),
            ("list", Some("ns"), "inflightoperations", None, None)
        );
        assert_eq!(
            RequestInfo::parse(&Method::GET, &format!("{P}/namespaces/%ff/x"), None),
            Err(RequestInfoError::PathNotUtf8)
        );
    }

    #[test]
    fn empty_segments_are_kept() {
        let info = parse(
            Method::GET,
            &format!("{P}/namespaces//inflightoperations"),
            None,
        );
        assert_eq!(
            res(&info),
            ("list", Some(""), "inflightoperations", None, None)
        );
        let info = parse(
            Method::GET,
            &format!("{P}//namespaces/ns/inflightoperations"),
            None,
        );
        assert_eq!(res(&info).2, "");
        let info = parse(
            Method::GET,
            &format!("{P}/inflightoperations//status"),
            None,
        );
        assert_eq!(
            res(&info),
            ("get", None, "inflightoperations", Some(""), Some("status"))
        );
    }

    #[test]
    fn other_paths_are_non_resource_requests() {
        for path in [
            "/",
            "/apis",
            P,
            "/apis/live.ifo.kubevirt.io",
            "/metrics",
            "/openapi/v2",
            "/api/v1",
        ] {
            let info = parse(Method::GET, path, None);
            assert_eq!(info.resource, None, "{path}");
            assert_eq!(info.verb, "get");
        }
        assert_eq!(parse(Method::POST, "/metrics", None).verb, "post");
        assert_eq!(
            res(&parse(Method::GET, "/api/v1/namespaces/a/pods", None)).2,
            "pods"
        );
        assert!(matches!(
            RequestInfo::parse(&Method::GET, &format!("{P}/watch"), None),
            Err(RequestInfoError::NoResource(_))
        ));
    }

    #[test]
    fn namespace_subresources_belong_to_the_namespace() {
        let info = parse(Method::PUT, &format!("{P}/namespaces/ns1/status"), None);
        assert_eq!(
            res(&info),
            (
                "update",
                Some("ns1"),
                "namespaces",
                Some("ns1"),
                Some("status")
            )
        );
    }
}
