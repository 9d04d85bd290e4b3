//! Which node each pod of the cluster is bound to, for the eviction guard: an eviction names
//! only the pod (the AdmissionReview holds the Eviction, not the pod), and the guard answers
//! from memory, without a call to kube-apiserver on the admission path, so that a drain tool
//! retrying in a tight loop costs kube-apiserver nothing more and a guard never waits on it.
//!
//! A pod is decoded as its name, namespace, uid, resourceVersion, whether it carries the mirror
//! annotation, and `spec.nodeName`: everything else (labels, the other annotations,
//! `managedFields`, the rest of the spec, the status) is skipped by the decoder without being
//! built, and it is kept as its node's name and whether it is a mirror pod: some tens of bytes a
//! pod. A cluster's every pod passes through this decoder at each list. The watch is kept as the inventory's are (see `follow`):
//! until a list has completed, or while the watch fails, the guard cannot tell a pod's node
//! and says so ([`PodNode::Unknown`]).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::ApiResource;
use kube::runtime::watcher;
use kube::{Api, Client};
use parking_lot::RwLock;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess};

use super::Sync;
use super::follow::{self, Keeper};

/// The annotation the kubelet puts on the API's copy of a static pod.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// A pod as decoded for its placement (see the [module](self)): what kube's watcher reads of
/// any object (name, namespace, uid, resourceVersion) in `metadata`, and the two facts kept.
#[derive(Clone, Debug, Deserialize)]
#[serde(from = "Decoded")]
pub(crate) struct PodPlacement {
    metadata: ObjectMeta,
    node_name: Option<String>,
    mirror: bool,
}

/// The fields of a pod that are decoded; serde skips the others unbuilt.
#[derive(Deserialize)]
struct Decoded {
    #[serde(default)]
    metadata: DecodedMeta,
    #[serde(default)]
    spec: DecodedSpec,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DecodedMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    #[serde(
        default,
        rename = "annotations",
        deserialize_with = "has_mirror_annotation"
    )]
    mirror: bool,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DecodedSpec {
    node_name: Option<String>,
}

impl From<Decoded> for PodPlacement {
    fn from(d: Decoded) -> PodPlacement {
        PodPlacement {
            metadata: ObjectMeta {
                name: d.metadata.name,
                namespace: d.metadata.namespace,
                uid: d.metadata.uid,
                resource_version: d.metadata.resource_version,
                ..ObjectMeta::default()
            },
            node_name: d.spec.node_name,
            mirror: d.metadata.mirror,
        }
    }
}

/// Whether an annotations map (or `null`) holds [`MIRROR_ANNOTATION`]; its keys are compared
/// where they lie and its values skipped: nothing is built.
fn has_mirror_annotation<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    struct Keys;
    impl<'de> de::Visitor<'de> for Keys {
        type Value = bool;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map of annotations")
        }

        fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
            Ok(false)
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
            let mut found = false;
            while let Some(mirror) = map.next_key_seed(IsMirror)? {
                map.next_value::<IgnoredAny>()?;
                found |= mirror;
            }
            Ok(found)
        }
    }
    d.deserialize_any(Keys)
}

/// Whether a key is [`MIRROR_ANNOTATION`], read without a copy.
struct IsMirror;

impl<'de> DeserializeSeed<'de> for IsMirror {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl de::Visitor<'_> for IsMirror {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an annotation's key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        Ok(key == MIRROR_ANNOTATION)
    }
}

crate::watch::dynamic_resource!(PodPlacement);

/// What is kept of one pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    /// `spec.nodeName`, when bound.
    node: Option<Arc<str>>,
    /// A mirror of a static pod: the kubelet runs it whatever the API says.
    mirror: bool,
}

/// Where a pod runs, as far as the server knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PodNode {
    /// Bound to this node.
    Bound(Arc<str>),
    /// Not bound to a node yet.
    Unbound,
    /// A mirror pod of a static pod on this node: evicting it removes nothing from the node.
    Mirror(Arc<str>),
    /// The pods are listed and watched, and this one is not among them (created a moment ago,
    /// or already gone).
    NotSeen,
    /// The pods are not listed yet, or their watch fails: why.
    Unknown(String),
}

/// The pods' placements (see the [module](self)).
#[derive(Debug, Default)]
pub(crate) struct Pods {
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    /// By `namespace/name`.
    pods: HashMap<Box<str>, Placement>,
    sync: Sync,
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl Pods {
    /// Where the pod `namespace/name` runs. While the pods' watch is not current, no pod can
    /// be placed now (one that was pending may have been bound since, one of the same name
    /// may run elsewhere): every answer is [`PodNode::Unknown`], saying where it was last seen.
    pub(crate) fn node_of(&self, namespace: &str, name: &str) -> PodNode {
        let state = self.state.read();
        let seen = state.pods.get(key(namespace, name).as_str());
        if let Sync::Failing(why) = &state.sync {
            let last = match seen {
                Some(Placement {
                    node: Some(node), ..
                }) => format!("; it was last seen on node {node}"),
                Some(Placement { node: None, .. }) => {
                    "; it was last seen not yet bound to a node".to_owned()
                }
                None => String::new(),
            };
            return PodNode::Unknown(format!(
                "the watch of the cluster's pods is failing: {why}{last}"
            ));
        }
        match seen {
            Some(Placement {
                node: Some(node),
                mirror: true,
            }) => PodNode::Mirror(node.clone()),
            Some(Placement {
                node: Some(node), ..
            }) => PodNode::Bound(node.clone()),
            Some(Placement { node: None, .. }) => PodNode::Unbound,
            None => match &state.sync {
                Sync::Listed => PodNode::NotSeen,
                Sync::NotListed => {
                    PodNode::Unknown("the cluster's pods have not been listed yet".to_owned())
                }
                Sync::Failing(why) => {
                    PodNode::Unknown(format!("the watch of the cluster's pods is failing: {why}"))
                }
            },
        }
    }

    /// Keeps the placements up to date for as long as it runs (see `follow`).
    pub(crate) async fn follow(self: Arc<Self>, client: Client) {
        let api = Api::<PodPlacement>::all_with(client, &ApiResource::erase::<Pod>(&()));
        follow::follow(self.as_ref(), api, watcher::Config::default()).await;
    }

    /// Sets the pods, `(namespace, name, node, mirror)`, as a list would (for tests and
    /// benchmarks).
    pub(crate) fn set(&self, pods: &[(&str, &str, Option<&str>, bool)]) {
        let entries = pods
            .iter()
            .map(|(namespace, name, node, mirror)| {
                (
                    key(namespace, name).into(),
                    Placement {
                        node: node.map(Arc::from),
                        mirror: *mirror,
                    },
                )
            })
            .collect();
        Keeper::<PodPlacement>::listed(self, entries);
    }
}

impl Keeper<PodPlacement> for Pods {
    type Entry = Placement;

    fn resource(&self) -> &'static str {
        "pods"
    }

    fn entry(&self, pod: &PodPlacement) -> Option<(Box<str>, Placement)> {
        let meta = &pod.metadata;
        let placement = Placement {
            node: pod.node_name.as_deref().map(Arc::from),
            mirror: pod.mirror,
        };
        Some((
            key(meta.namespace.as_deref()?, meta.name.as_deref()?).into(),
            placement,
        ))
    }

    fn listed(&self, entries: HashMap<Box<str>, Placement>) {
        let mut state = self.state.write();
        state.pods = entries;
        state.sync = Sync::Listed;
    }

    fn applied(&self, key: Box<str>, entry: Placement) {
        self.state.write().pods.insert(key, entry);
    }

    fn deleted(&self, key: &str) {
        self.state.write().pods.remove(key);
    }

    fn failed(&self, why: String) {
        self.state.write().sync = Sync::Failing(why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;

    #[test]
    fn a_pods_node_is_unknown_until_listed() {
        let pods = Pods::default();
        assert_eq!(
            pods.node_of("demo", "p"),
            PodNode::Unknown("the cluster's pods have not been listed yet".into())
        );
        pods.set(&[
            ("demo", "p", Some("w1"), false),
            ("demo", "pending", None, false),
            ("kube-system", "etcd-w1", Some("w1"), true),
        ]);
        assert_eq!(pods.node_of("demo", "p"), PodNode::Bound("w1".into()));
        assert_eq!(pods.node_of("demo", "pending"), PodNode::Unbound);
        assert_eq!(
            pods.node_of("kube-system", "etcd-w1"),
            PodNode::Mirror("w1".into())
        );
        assert_eq!(pods.node_of("other", "p"), PodNode::NotSeen);
        // While the watch fails, nothing is placed from what was last seen.
        Keeper::<PodPlacement>::failed(&pods, "list failed: pods is forbidden".into());
        for (pod, last) in [
            ("p", "last seen on node w1"),
            ("pending", "last seen not yet bound"),
            ("q", "forbidden"),
        ] {
            assert!(
                matches!(pods.node_of("demo", pod), PodNode::Unknown(why) if why.contains("forbidden") && why.contains(last)),
                "{pod}: {:?}",
                pods.node_of("demo", pod)
            );
        }
    }

    #[test]
    fn a_pods_metadata_keeps_what_the_watcher_reads_and_nothing_else() {
        let text = r#"{"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "demo", "uid": "u-1", "resourceVersion": "42",
                "labels": {"app": "x"}, "annotations": {"a\u002fb": "1", "c": {"d": [1]}},
                "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}"#;
        let pod: PodPlacement = serde_json::from_str(text).unwrap();
        assert_eq!(pod.meta().name.as_deref(), Some("p"));
        assert_eq!(pod.meta().uid.as_deref(), Some("u-1"));
        assert_eq!(pod.meta().resource_version.as_deref(), Some("42"));
        assert_eq!(pod.meta().labels, None);
        assert_eq!(pod.meta().managed_fields, None);
        assert!(!pod.mirror, "other annotations are no mirror's");
        let (_, placement) = Pods::default().entry(&pod).unwrap();
        assert_eq!(
            placement,
            Placement {
                node: None,
                mirror: false
            }
        );
        // A key written with an escape is the same key.
        let text = r#"{"metadata": {"name": "p", "namespace": "d",
            "annotations": {"kubernetes.io\/config.mirror": "x"}}}"#;
        assert!(serde_json::from_str::<PodPlacement>(text).unwrap().mirror);
        for annotations in ["null", "{}"] {
            let text = format!(
                r#"{{"metadata": {{"name": "p", "namespace": "d", "annotations": {annotations}}}}}"#
            );
            let pod: PodPlacement = serde_json::from_str(&text).unwrap();
            assert!(!pod.mirror, "{annotations}");
        }
    }

    #[test]
    fn only_the_node_and_the_mirror_annotation_are_read() {
        let pod: PodPlacement = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "demo",
                "annotations": {"kubernetes.io/config.mirror": "abc"}},
            "spec": {"nodeName": "w1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running"}
        }))
        .unwrap();
        let (key, placement) = Pods::default().entry(&pod).unwrap();
        assert_eq!(&*key, "demo/p");
        assert_eq!(
            placement,
            Placement {
                node: Some("w1".into()),
                mirror: true
            }
        );
    }
}
