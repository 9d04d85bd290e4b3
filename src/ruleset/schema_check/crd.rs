//! The schemas CustomResourceDefinitions give their resources (one per version, by the target
//! rules name: `group/version/resource`), and sets of them read from files, with the schemas of
//! kube-apiserver's OpenAPI documents: what `rules lint --schemas` checks against.

use super::Schema;
use crate::ruleset::Target;
use serde_json::Value;
use std::collections::HashMap;

/// The schemas of a set of CRDs and OpenAPI documents, by target.
#[derive(Debug, Default, Clone)]
pub struct SchemaSet {
    by_target: HashMap<Target, Schema>,
}

impl SchemaSet {
    /// Adds the schema of each version of `document` that has one, when it is an
    /// `apiextensions.k8s.io/v1` CustomResourceDefinition (as JSON), or of each resource of an
    /// OpenAPI v3 document of kube-apiserver (`/openapi/v3/apis/batch/v1`); anything else is
    /// ignored. How many were added.
    pub fn add(&mut self, document: &Value) -> usize {
        let found = if document.get("openapi").is_some() {
            super::document::schemas_of(document)
        } else {
            of_crd(document)
        };
        let added = found.len();
        self.by_target.extend(found);
        added
    }

    /// The schema of `target`'s objects, when a CRD gave one.
    pub fn get(&self, target: &Target) -> Option<&Schema> {
        self.by_target.get(target)
    }

    /// How many targets have a schema.
    pub fn len(&self) -> usize {
        self.by_target.len()
    }

    /// Whether no target has one.
    pub fn is_empty(&self) -> bool {
        self.by_target.is_empty()
    }
}

/// The target and schema of each version of `crd` that has a schema.
pub fn of_crd(crd: &Value) -> Vec<(Target, Schema)> {
    if crd.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
        return Vec::new();
    }
    let spec = &crd["spec"];
    let (Some(group), Some(resource)) = (spec["group"].as_str(), spec["names"]["plural"].as_str())
    else {
        return Vec::new();
    };
    let versions = spec["versions"].as_array().map_or(&[][..], Vec::as_slice);
    versions
        .iter()
        .filter_map(|v| {
            let schema = v.get("schema")?.get("openAPIV3Schema")?;
            let target = Target {
                group: group.to_owned(),
                version: v.get("name")?.as_str()?.to_owned(),
                resource: resource.to_owned(),
            };
            Some((target, Schema::crd(schema.clone())))
        })
        .collect()
}
