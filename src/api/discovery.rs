//! Discovery documents for `live.ifo.kubevirt.io/v1alpha1`: the resources of [`super::served`].
//! Static: built once at start, so the aggregator's availability check and discovery refresh
//! (5 s deadlines, every minute) are answered in microseconds and never depend on the index or on
//! remote calls.

use std::fmt::Write as _;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIGroupList, APIResource, APIResourceList, GroupVersionForDiscovery,
};
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::resource::{GROUP, GROUP_VERSION, VERSION};
use super::served::SERVED;

/// A serialized document and its entity tag.
pub(crate) struct Document {
    pub body: Vec<u8>,
    pub etag: String,
}

impl Document {
    pub(crate) fn new(value: &impl Serialize) -> Document {
        let body = serde_json::to_vec(value).expect("discovery documents serialize");
        let etag = format!("\"{}\"", hex(&Sha256::digest(&body)));
        Document { body, etag }
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

/// Every discovery document, built once.
pub(crate) struct Discovery {
    pub resource_list: Document,
    pub group: Document,
    pub group_list: Document,
    pub aggregated_v2: Document,
    pub aggregated_v2beta1: Document,
}

fn group_version_for_discovery() -> GroupVersionForDiscovery {
    GroupVersionForDiscovery {
        group_version: GROUP_VERSION.to_owned(),
        version: VERSION.to_owned(),
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|&s| s.to_owned()).collect()
}

fn api_group() -> APIGroup {
    APIGroup {
        name: GROUP.to_owned(),
        versions: vec![group_version_for_discovery()],
        preferred_version: Some(group_version_for_discovery()),
        server_address_by_client_cidrs: None,
    }
}

/// `/apis`: k8s-openapi writes `apiVersion` and `kind` on every `APIGroup`, list items included,
/// where kube-apiserver leaves them off the items; they are taken off again so that the list
/// reads exactly like kube-apiserver's.
fn api_group_list() -> Value {
    let mut list = serde_json::to_value(APIGroupList {
        groups: vec![api_group()],
    })
    .expect("discovery documents serialize");
    for group in list["groups"].as_array_mut().into_iter().flatten() {
        if let Some(group) = group.as_object_mut() {
            group.remove("apiVersion");
            group.remove("kind");
        }
    }
    list
}

/// `/apis/<group>/<version>`.
fn api_resource_list() -> APIResourceList {
    APIResourceList {
        group_version: GROUP_VERSION.to_owned(),
        resources: SERVED
            .iter()
            .map(|r| APIResource {
                name: r.plural.to_owned(),
                singular_name: r.singular.to_owned(),
                namespaced: r.namespaced,
                kind: r.kind.to_owned(),
                verbs: strings(r.verbs),
                short_names: Some(strings(r.short_names)),
                categories: (!r.categories.is_empty()).then(|| strings(r.categories)),
                group: None,
                version: None,
                storage_version_hash: None,
            })
            .collect(),
    }
}

/// The aggregated discovery document (`apidiscovery.k8s.io`, `v2` or `v2beta1`). Built as JSON:
/// k8s-openapi has no `apidiscovery` types, and kube-core's write no `kind` or `apiVersion` and
/// always write `subresources`.
fn aggregated(api_version: &str) -> Value {
    let resources: Vec<Value> = SERVED
        .iter()
        .map(|r| {
            let mut resource = json!({
                "resource": r.plural,
                "responseKind": {"group": GROUP, "version": VERSION, "kind": r.kind},
                "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                "singularResource": r.singular,
                "verbs": r.verbs,
                "shortNames": r.short_names,
            });
            if !r.categories.is_empty() {
                resource["categories"] = json!(r.categories);
            }
            resource
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": api_version,
        "metadata": {},
        "items": [{
            "metadata": {"name": GROUP},
            "versions": [{"version": VERSION, "resources": resources, "freshness": "Current"}],
        }],
    })
}

impl Discovery {
    pub(crate) fn new() -> Discovery {
        Discovery {
            resource_list: Document::new(&api_resource_list()),
            group: Document::new(&api_group()),
            group_list: Document::new(&api_group_list()),
            aggregated_v2: Document::new(&aggregated("apidiscovery.k8s.io/v2")),
            aggregated_v2beta1: Document::new(&aggregated("apidiscovery.k8s.io/v2beta1")),
        }
    }
}

impl Default for Discovery {
    fn default() -> Self {
        Discovery::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn parse(doc: &Document) -> Value {
        serde_json::from_slice(&doc.body).unwrap()
    }

    fn resources_v1() -> Value {
        json!([
            {"name": "inflightoperations", "singularName": "inflightoperation",
             "namespaced": true, "kind": "InFlightOperation", "verbs": ["get", "list", "watch"],
             "shortNames": ["ifo", "ifos"], "categories": ["inflight"]},
            {"name": "inflightclusteroperations", "singularName": "inflightclusteroperation",
             "namespaced": false, "kind": "InFlightClusterOperation",
             "verbs": ["get", "list", "watch"], "shortNames": ["ifco", "ifcos"],
             "categories": ["inflight"]},
            {"name": "maintenancegates", "singularName": "maintenancegate",
             "namespaced": false, "kind": "MaintenanceGate",
             "verbs": ["get", "list", "watch"], "shortNames": ["gate", "gates"]},
        ])
    }

    fn group_fields() -> Value {
        let gv = json!({"groupVersion": "live.ifo.kubevirt.io/v1alpha1", "version": "v1alpha1"});
        json!({"name": "live.ifo.kubevirt.io", "versions": [gv], "preferredVersion": gv})
    }

    #[test]
    fn legacy_documents() {
        let d = Discovery::new();
        assert_eq!(
            parse(&d.resource_list),
            json!({"kind": "APIResourceList", "apiVersion": "v1",
                   "groupVersion": "live.ifo.kubevirt.io/v1alpha1", "resources": resources_v1()})
        );
        let mut group = group_fields();
        group["kind"] = json!("APIGroup");
        group["apiVersion"] = json!("v1");
        assert_eq!(parse(&d.group), group);
        assert_eq!(
            parse(&d.group_list),
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group_fields()]})
        );
    }

    #[test]
    fn aggregated_documents() {
        let d = Discovery::new();
        let resource = |plural: &str, singular: &str, kind: &str, scope: &str, short: [&str; 2]| {
            json!({"resource": plural,
                   "responseKind": {"group": "live.ifo.kubevirt.io", "version": "v1alpha1",
                                    "kind": kind},
                   "scope": scope, "singularResource": singular,
                   "verbs": ["get", "list", "watch"], "shortNames": short,
                   "categories": ["inflight"]})
        };
        let items = json!([{
            "metadata": {"name": "live.ifo.kubevirt.io"},
            "versions": [{"version": "v1alpha1", "freshness": "Current", "resources": [
                resource("inflightoperations", "inflightoperation", "InFlightOperation",
                         "Namespaced", ["ifo", "ifos"]),
                resource("inflightclusteroperations", "inflightclusteroperation",
                         "InFlightClusterOperation", "Cluster", ["ifco", "ifcos"]),
                {"resource": "maintenancegates",
                 "responseKind": {"group": "live.ifo.kubevirt.io", "version": "v1alpha1",
                                  "kind": "MaintenanceGate"},
                 "scope": "Cluster", "singularResource": "maintenancegate",
                 "verbs": ["get", "list", "watch"], "shortNames": ["gate", "gates"]},
            ]}],
        }]);
        for (doc, api_version) in [
            (&d.aggregated_v2, "apidiscovery.k8s.io/v2"),
            (&d.aggregated_v2beta1, "apidiscovery.k8s.io/v2beta1"),
        ] {
            assert_eq!(
                parse(doc),
                json!({"kind": "APIGroupDiscoveryList", "apiVersion": api_version,
                       "metadata": {}, "items": items})
            );
        }
    }

    #[test]
    fn etags_name_the_bytes() {
        let d = Discovery::new();
        let body = &d.group.body;
        assert_eq!(d.group.etag, format!("\"{}\"", hex(&Sha256::digest(body))));
        assert_eq!(hex(&[0x00, 0xab, 0x7f]), "00ab7f");
    }
}
