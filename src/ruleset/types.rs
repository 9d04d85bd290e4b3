//! The `OperationRuleSet` resource (`ifo.kubevirt.io/v1alpha1`, cluster-scoped), as read from and
//! written to kube-apiserver.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::core::{ApiResource, GroupVersionKind, Object};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const GROUP: &str = "ifo.kubevirt.io";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "OperationRuleSet";
pub const PLURAL: &str = "operationrulesets";

pub type OperationRuleSet = Object<RuleSetSpec, RuleSetStatus>;

pub fn api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, KIND), PLURAL)
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RuleSetSpec {
    #[serde(default)]
    pub component: String,
    pub target: Target,
    pub rules: Vec<Rule>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub label_expressions: Vec<LabelExpression>,
}

/// The resource type the rules are evaluated against.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    #[serde(default)]
    pub group: String,
    pub version: String,
    pub resource: String,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.resource)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.resource)
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    pub operation: String,
    pub expression: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct LabelExpression {
    pub key: String,
    pub expression: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RuleSetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub watch_active: bool,
    #[serde(default)]
    pub active_operations: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_evaluation_time: Option<String>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
