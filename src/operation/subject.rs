//! The Kubernetes object an operation happens to.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::Value;

/// The identifying parts of a subject, kept after its object has been evaluated and dropped.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Subject {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `None` for cluster-scoped subjects.
    pub namespace: Option<String>,
    /// `metadata.uid`: keys the operation, so that a subject deleted and recreated under the same
    /// name starts new operations.
    pub uid: String,
    /// `metadata.generation` when evaluated, served as `status.subjectGeneration` so that clients
    /// can tell which spec the operation reflects.
    pub generation: Option<i64>,
    /// `metadata.ownerReferences` (well-formed ones only), served so that tools can walk up to what
    /// the user manages.
    pub owner_references: Vec<OwnerReference>,
}

impl Subject {
    /// `namespace/name`, or `name` alone when cluster-scoped: how logs name a subject.
    pub fn reference(&self) -> String {
        ifo_model::reference(self.namespace.as_deref(), &self.name)
    }

    /// Extracts the subject from an object as received from a watch.
    ///
    /// `None` when `metadata.name` or `metadata.uid` is missing or empty: without a uid an
    /// operation can't be keyed, and without a name it can't be shown. An empty namespace means
    /// cluster-scoped. Malformed owner references (no name or uid) are skipped rather than failing the whole
    /// subject (they are informational).
    pub fn from_object(object: &Value) -> Option<Subject> {
        let metadata = object.get("metadata")?;
        let text = |v: &Value, key: &str| -> Option<String> {
            v.get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let name = text(metadata, "name")?;
        let uid = text(metadata, "uid")?;
        let owner_references = metadata
            .get("ownerReferences")
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .filter_map(|r| serde_json::from_value::<OwnerReference>(r.clone()).ok())
                    .filter(|r| !r.uid.is_empty() && !r.name.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Some(Subject {
            api_version: text(object, "apiVersion").unwrap_or_default(),
            kind: text(object, "kind").unwrap_or_default(),
            name,
            namespace: text(metadata, "namespace"),
            uid,
            generation: metadata.get("generation").and_then(Value::as_i64),
            owner_references,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn from_object_reads_identity_and_owners() {
        let obj = json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {
                "name": "vm1", "namespace": "ns1", "uid": "u-1", "generation": 7,
                "ownerReferences": [
                    {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": "vm1",
                     "uid": "o-1", "controller": true},
                    {"bogus": 1}
                ]
            }
        });
        let s = Subject::from_object(&obj).unwrap();
        assert_eq!(s.api_version, "kubevirt.io/v1");
        assert_eq!(s.kind, "VirtualMachineInstance");
        assert_eq!(s.name, "vm1");
        assert_eq!(s.namespace.as_deref(), Some("ns1"));
        assert_eq!(s.uid, "u-1");
        assert_eq!(s.generation, Some(7));
        assert_eq!(s.owner_references.len(), 1);
        assert_eq!(s.owner_references[0].uid, "o-1");
    }

    #[test]
    fn cluster_scoped_and_missing_identity() {
        let node = json!({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": "n1", "namespace": "", "uid": "u"}});
        assert_eq!(Subject::from_object(&node).unwrap().namespace, None);
        assert!(Subject::from_object(&json!({"metadata": {"name": "x"}})).is_none());
        assert!(Subject::from_object(&json!({"metadata": {"uid": "x"}})).is_none());
        assert!(Subject::from_object(&json!({"metadata": {"name": "", "uid": "x"}})).is_none());
        assert!(Subject::from_object(&json!("nope")).is_none());
    }
}
