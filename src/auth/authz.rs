//! Authorization by SubjectAccessReview, with the attributes kube-apiserver's RequestInfo would
//! give the same request, so `kubectl auth can-i` and our answers agree. Reviews are cached for
//! 10 s (allow and deny alike) and identical concurrent reviews are made once.

use super::UserInfo;
use super::cache::ReviewCache;
use crate::api::fields::FieldSelector;
use crate::api::params::SELECTABLE_FIELDS;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};
use std::time::Duration;

/// What a request asks to do.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Attributes {
    Resource {
        verb: String,
        group: String,
        version: String,
        resource: String,
        namespace: Option<String>,
        name: Option<String>,
    },
    /// Discovery, OpenAPI, health and other paths outside any resource.
    NonResource { verb: String, path: String },
}

impl Attributes {
    /// Reads the attributes of a request to `path?query` under `/apis/<group>/<version>/`, as
    /// kube-apiserver's RequestInfo does.
    pub fn from_request(method: &http::Method, path: &str, query: Option<&str>) -> Attributes {
        let non_resource = || Attributes::NonResource {
            verb: method.as_str().to_ascii_lowercase(),
            path: path.to_string(),
        };
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        if parts.len() < 4 || parts[0] != "apis" {
            return non_resource();
        }
        let (group, version) = (parts[1].to_string(), parts[2].to_string());
        let mut rest = &parts[3..];
        let watch_prefix = rest.first() == Some(&"watch");
        if watch_prefix {
            rest = &rest[1..];
        }
        let mut namespace = None;
        if rest.len() >= 3 && rest[0] == "namespaces" {
            namespace = Some(rest[1].to_string());
            rest = &rest[2..];
        }
        let (resource, mut name) = match rest {
            [resource] => (resource.to_string(), None),
            [resource, name, ..] => (resource.to_string(), Some(name.to_string())),
            _ => return non_resource(),
        };
        let params: Vec<(String, String)> = query
            .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
            .unwrap_or_default();
        let param = |k: &str| {
            params
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        let watch = watch_prefix || param("watch").is_some_and(|v| v != "false" && v != "0");
        let verb = match (method.as_str(), name.is_some()) {
            ("GET" | "HEAD", true) => {
                if watch {
                    "watch"
                } else {
                    "get"
                }
            }
            ("GET" | "HEAD", false) => {
                // A list or watch of one name is authorized as that name.
                name = param("fieldSelector").and_then(single_name);
                if watch { "watch" } else { "list" }
            }
            _ => match write_verb(method, name.is_some()) {
                Some(verb) => verb,
                None => {
                    return Attributes::NonResource {
                        verb: method.as_str().to_ascii_lowercase(),
                        path: path.to_string(),
                    };
                }
            },
        };
        Attributes::Resource {
            verb: verb.to_string(),
            group,
            version,
            resource,
            namespace,
            name,
        }
    }
}

/// The `metadata.name` a field selector requires, parsed as the API parses it (escapes included).
fn single_name(selector: &str) -> Option<String> {
    FieldSelector::parse(selector, SELECTABLE_FIELDS)
        .ok()?
        .exact("metadata.name")
        .map(str::to_string)
}

/// The verb of a request that would change a resource (`named`: it addresses one object), as
/// kube-apiserver's RequestInfo names it; `None` for reads and unknown methods.
pub fn write_verb(method: &http::Method, named: bool) -> Option<&'static str> {
    match (method.as_str(), named) {
        ("POST", _) => Some("create"),
        ("PUT", _) => Some("update"),
        ("PATCH", _) => Some("patch"),
        ("DELETE", true) => Some("delete"),
        ("DELETE", false) => Some("deletecollection"),
        _ => None,
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Denied, with the authorizer's reason (may be empty).
    Deny(String),
}

pub struct Authorizer {
    client: Client,
    cache: ReviewCache<(UserInfo, Attributes), Decision>,
}

const MASTERS: &str = "system:masters";

impl Authorizer {
    pub fn new(client: Client) -> Self {
        Authorizer {
            client,
            cache: ReviewCache::new(Duration::from_secs(10), 8192),
        }
    }

    /// `Err` when the review itself failed (kube-apiserver answers 500 then, not 403).
    pub async fn authorize(&self, user: &UserInfo, attrs: &Attributes) -> Result<Decision, String> {
        if user.in_group(MASTERS) {
            return Ok(Decision::Allow);
        }
        // Discovery and OpenAPI are reviewed too: clusters grant them to every authenticated
        // user through `system:discovery`, and an administrator may narrow that; `/metrics`
        // needs what kube-apiserver's does (`system:monitoring`).
        let (resource_attributes, non_resource_attributes) = match attrs {
            Attributes::Resource {
                verb,
                group,
                version,
                resource,
                namespace,
                name,
            } => (
                Some(ResourceAttributes {
                    verb: Some(verb.clone()),
                    group: Some(group.clone()),
                    version: Some(version.clone()),
                    resource: Some(resource.clone()),
                    namespace: namespace.clone(),
                    name: name.clone(),
                    ..Default::default()
                }),
                None,
            ),
            Attributes::NonResource { verb, path } => (
                None,
                Some(NonResourceAttributes {
                    verb: Some(verb.clone()),
                    path: Some(path.clone()),
                }),
            ),
        };
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.clone().into_iter().collect()),
                resource_attributes,
                non_resource_attributes,
            },
            ..Default::default()
        };
        let client = self.client.clone();
        self.cache
            .get_or_fetch((user.clone(), attrs.clone()), || async move {
                let api: Api<SubjectAccessReview> = Api::all(client);
                let answer = api
                    .create(&PostParams::default(), &review)
                    .await
                    .map_err(|e| format!("SubjectAccessReview failed: {e}"))?;
                let status = answer.status.unwrap_or_default();
                Ok(if status.allowed && status.denied != Some(true) {
                    Decision::Allow
                } else {
                    Decision::Deny(status.reason.unwrap_or_default())
                })
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn res(verb: &str, ns: Option<&str>, name: Option<&str>) -> Attributes {
        Attributes::Resource {
            verb: verb.into(),
            group: "live.ifo.kubevirt.io".into(),
            version: "v1alpha1".into(),
            resource: "inflightoperations".into(),
            namespace: ns.map(Into::into),
            name: name.map(Into::into),
        }
    }

    #[test]
    fn verbs_and_scopes_match_kube_request_info() {
        let p = "/apis/live.ifo.kubevirt.io/v1alpha1";
        let a = |m: Method, path: &str, q: Option<&str>| Attributes::from_request(&m, path, q);
        assert_eq!(
            a(
                Method::GET,
                &format!("{p}/inflightoperations"),
                Some("limit=500")
            ),
            res("list", None, None)
        );
        assert_eq!(
            a(
                Method::GET,
                &format!("{p}/namespaces/ns1/inflightoperations"),
                Some("watch=true&resourceVersion=5")
            ),
            res("watch", Some("ns1"), None)
        );
        assert_eq!(
            a(
                Method::GET,
                &format!("{p}/namespaces/ns1/inflightoperations"),
                Some("watch=false")
            ),
            res("list", Some("ns1"), None)
        );
        assert_eq!(
            a(
                Method::GET,
                &format!("{p}/namespaces/ns1/inflightoperations/x"),
                None
            ),
            res("get", Some("ns1"), Some("x"))
        );
        assert_eq!(
            a(
                Method::GET,
                &format!("{p}/namespaces/ns1/inflightoperations"),
                Some("watch=1&fieldSelector=metadata.name%3Dx")
            ),
            res("watch", Some("ns1"), Some("x"))
        );
        assert_eq!(
            a(Method::GET, &format!("{p}/watch/inflightoperations"), None),
            res("watch", None, None)
        );
        assert_eq!(
            a(
                Method::DELETE,
                &format!("{p}/namespaces/ns1/inflightoperations/x"),
                None
            ),
            res("delete", Some("ns1"), Some("x"))
        );
        assert_eq!(
            a(Method::GET, p, None),
            Attributes::NonResource {
                verb: "get".into(),
                path: p.into()
            }
        );
    }
}
