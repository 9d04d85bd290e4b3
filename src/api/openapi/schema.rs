//! What the OpenAPI definitions of the served kinds are made of: references to our types and to
//! apimachinery's, and the object and list every kind is served as. Each kind's own definitions
//! are its module's (the entry of [`crate::api::served`] names them).

use crate::api::resource::{GROUP, VERSION};
use serde_json::{Map, Value, json};

/// The definition-name prefix of our types: the group reversed, as Kubernetes names them.
pub(crate) const PREFIX: &str = "io.kubevirt.ifo.live.v1alpha1.";
pub(crate) const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.";

/// A `$ref` to a definition, in v2 form (`v3::convert` rewrites it).
pub(crate) fn reference(name: &str) -> String {
    format!("#/definitions/{name}")
}

/// A `$ref` to a definition of ours.
pub(crate) fn ours(name: &str) -> String {
    reference(&format!("{PREFIX}{name}"))
}

/// A `$ref` to an apimachinery definition.
pub(crate) fn meta(name: &str) -> String {
    reference(&format!("{META}{name}"))
}

/// An object whose properties are all strings, each with its description; `required` names
/// those that are always set.
pub(crate) fn strings(description: &str, properties: &[(&str, &str)], required: &[&str]) -> Value {
    let properties: Map<String, Value> = properties
        .iter()
        .map(|(name, description)| {
            let property = json!({"description": description, "type": "string"});
            (name.to_string(), property)
        })
        .collect();
    let mut schema =
        json!({"description": description, "type": "object", "properties": properties});
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    schema
}

/// `x-kubernetes-group-version-kind` of a definition (a list: one Go type may serve several).
fn group_version_kind(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "kind": kind, "version": version}])
}

const API_VERSION_DESCRIPTION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESCRIPTION: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// The definition of an object of `kind`: `apiVersion`, `kind`, `metadata` described as
/// `metadata`, and its own `properties` (its spec, its status).
pub(crate) fn object(
    kind: &str,
    description: &str,
    metadata: &str,
    properties: Map<String, Value>,
) -> Value {
    let mut object = json!({
        "description": description,
        "type": "object",
        "properties": {
            "apiVersion": {"description": API_VERSION_DESCRIPTION, "type": "string"},
            "kind": {"description": KIND_DESCRIPTION, "type": "string"},
            "metadata": {"$ref": meta("ObjectMeta"), "description": metadata},
        },
        "x-kubernetes-group-version-kind": group_version_kind(GROUP, VERSION, kind),
    });
    if let Some(all) = object["properties"].as_object_mut() {
        all.extend(properties);
    }
    object
}

/// The definition of a list of `kind`.
pub(crate) fn list(kind: &str) -> Value {
    json!({
        "description": format!("{kind}List is a list of {kind}s."),
        "type": "object",
        "properties": {
            "apiVersion": {"description": API_VERSION_DESCRIPTION, "type": "string"},
            "kind": {"description": KIND_DESCRIPTION, "type": "string"},
            "metadata": {
                "$ref": meta("ListMeta"),
                "description": "Standard list metadata. Its resourceVersion can be passed to a watch to receive every change after this list. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
            },
            "items": {
                "description": format!("The {kind}s."),
                "type": "array",
                "items": {"$ref": ours(kind)},
            },
        },
        "required": ["items"],
        "x-kubernetes-group-version-kind": group_version_kind(GROUP, VERSION, &format!("{kind}List")),
    })
}
