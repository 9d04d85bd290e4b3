//! The `OperationRuleSet` resource (`ifo.kubevirt.io/v1alpha1`, cluster-scoped), as read from and
//! written to kube-apiserver.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::core::{ApiResource, GroupVersionKind, Object};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub(super) const GROUP: &str = "ifo.kubevirt.io";
pub(super) const VERSION: &str = "v1alpha1";
pub(super) const KIND: &str = "OperationRuleSet";
pub(super) const PLURAL: &str = "operationrulesets";

/// An `OperationRuleSet` object, with kube's metadata handling.
pub(crate) type OperationRuleSet = Object<RuleSetSpec, RuleSetStatus>;

/// The resource for kube's dynamic API calls (list, watch, status patches).
pub(crate) fn api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, KIND), PLURAL)
}

/// `spec` of an `OperationRuleSet`, as its authors write it (see
/// `deploy/crds/operationrulesets.yaml` for the schema kube-apiserver enforces).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RuleSetSpec {
    /// Component that owns the operations, copied to each one and its `ifo.kubevirt.io/component`
    /// label.
    #[serde(default)]
    pub component: String,
    /// The resource type whose objects the rules are evaluated against.
    pub target: Target,
    /// A subject is in at most one of the rules' operations at a time (rules that follow one
    /// status field, such as a phase): when another rule starts matching, the previous
    /// operation completes at once, with the outcome it had then, instead of after the grace.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive: bool,
    /// The rules, each detecting one operation.
    pub rules: Vec<Rule>,
    /// Namespaces to watch; empty means all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// Static labels added to every operation of this ruleset.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Labels computed from the object by CEL expressions returning string.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub label_expressions: Vec<LabelExpression>,
    /// Objects of other resource types whose label expressions label this ruleset's
    /// operations (a VirtualMachine's node, from its VirtualMachineInstance).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<Related>,
}

/// An object related to each subject, of another resource type, that labels the subject's
/// operations: the server watches its target too and keeps, per related object, only the
/// values its label expressions give.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Related {
    /// The related object's resource type; not the ruleset's own target.
    pub target: Target,
    /// How a subject finds its related object. `SameName` (the only one so far, and the
    /// default): the object of the subject's namespace and name. Read as text, so that a value
    /// this server does not know makes the ruleset invalid rather than undecodable.
    #[serde(rename = "match", default = "same_name")]
    pub matching: String,
    /// Labels computed from the related object by CEL expressions returning string (`object`
    /// is the related object); an empty value sets no label.
    #[serde(default)]
    pub label_expressions: Vec<LabelExpression>,
}

/// The default (and only) `related[].match`.
pub(super) const SAME_NAME: &str = "SameName";

fn same_name() -> String {
    SAME_NAME.to_owned()
}

/// The resource type the rules are evaluated against.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// API version (`v1`).
    pub version: String,
    /// Plural resource name (`virtualmachines`).
    pub resource: String,
}

impl Target {
    /// The name its CustomResourceDefinition has (or would have): `<resource>.<group>`.
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.resource, self.group)
    }
}

#[cfg(test)]
impl Target {
    /// `resource` of API `group` (empty: the core group) and `version`.
    pub(crate) fn of(group: &str, version: &str, resource: &str) -> Target {
        Target {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }
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

/// One operation to detect, and how to describe it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// Name of the operation detected while the expression is true (`Migrating`).
    pub operation: String,
    /// CEL over `object`, returning bool: true while the operation is in flight.
    pub expression: String,
    /// CEL returning string: a live message, re-evaluated on every event while active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// CEL returning `Succeeded`, `Failed`, `Canceled`, `Superseded` or `Unknown`, evaluated on the
    /// object when the rule stops matching.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// CEL returning a timestamp (or RFC 3339 string): when the operation started. Default: first
    /// detection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// CEL returning a number from 0 to 100, or a string such as `"45.5%"`: how far along the
    /// operation is, re-evaluated on every event while active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// CEL returning bool, or a string that is the reason (empty: not stalled): whether the
    /// operation is stuck, re-evaluated on every event while active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalled: Option<String>,
    /// When the rule's next operation is expected to start, read off the object: the
    /// operation is announced before it starts (see `schedule`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<RuleSchedule>,
    /// A label of the operation (one of the ruleset's `labelExpressions`, or its related
    /// parts') whose value names the object, in the subject's namespace, whose durations the operation counts
    /// toward and is expected to take, for subjects that never repeat but belong to one that
    /// does: a Velero Backup's `velero.io/schedule-name` names its Schedule. Without it, or
    /// while the label is empty, the subject's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durations_by: Option<String>,
}

/// `rules[].schedule`: when the next operation of a rule starts, from a cron schedule the
/// object carries (a CronJob's, a Velero Schedule's) or a time it names (a Forklift cutover).
/// Exactly one of `cron` and `at`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RuleSchedule {
    /// CEL returning string: a cron schedule as Kubernetes CronJobs take it (five fields, or
    /// `@hourly`, `@daily`, ...; a `CRON_TZ=` or `TZ=` prefix names its time zone); an empty
    /// string announces nothing (a suspended CronJob).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// CEL returning string: the IANA time zone `cron` is read in (`Europe/Berlin`); empty
    /// or absent: UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// CEL returning a timestamp (or RFC 3339 string): when the last run was (a CronJob's
    /// `status.lastScheduleTime`, else its creation), which an `@every <duration>` schedule
    /// counts its runs from; other schedules do not read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// CEL returning a timestamp (or RFC 3339 string): when the next operation starts; an
    /// empty string announces nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// Whose learned durations the announced operations are expected to take; default: this
    /// rule's own. For a rule whose object schedules what another ruleset detects (a Velero
    /// Schedule's backups are Backup objects).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durations_of: Option<DurationsOf>,
}

/// `rules[].schedule.durationsOf`: a rule operation of another ruleset.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DurationsOf {
    /// The ruleset's name.
    pub rule_set: String,
    /// The operation of one of its rules.
    pub operation: String,
}

/// One label computed per operation.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct LabelExpression {
    /// The label key.
    pub key: String,
    /// CEL over `object` returning the label's value.
    pub expression: String,
}

/// `status` of an `OperationRuleSet`, written by the server so that rule authors see whether their
/// rules run.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RuleSetStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Whether the target is being watched.
    #[serde(default)]
    pub watch_active: bool,
    /// How many operations this ruleset has active now.
    #[serde(default)]
    pub active_operations: i64,
    /// When the rules were last evaluated. The server keeps what it finds there and does not set
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_evaluation_time: Option<String>,
    /// `Ready`, `RuleErrors`, `CostExceeded`, …: what is wrong, if anything, with the generation
    /// observed.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// How long each operation of the ruleset took when it succeeded, as learned from the
    /// operations completed so far; read back at start, so what was learned survives restarts.
    #[serde(default)]
    pub operation_durations: Vec<OperationDurations>,
}

/// The learned durations of one operation of a ruleset (`status.operationDurations[]`).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct OperationDurations {
    /// The operation (a rule's `operation`).
    pub operation: String,
    /// Completed operations with outcome `Succeeded`, all those learned from; the quantiles are
    /// of the most recent of them (see `history`).
    pub count: u64,
    /// Median duration, in seconds.
    pub p50_seconds: f64,
    /// 90th percentile, in seconds.
    pub p90_seconds: f64,
    /// 99th percentile, in seconds.
    pub p99_seconds: f64,
    /// Completed operations with any other outcome, by outcome (not in the quantiles).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other_outcomes: BTreeMap<String, u64>,
    /// How often the recent ends came by the estimates first published for them, once one was
    /// judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<ObservedCoverage>,
}

/// How often a rule operation's expected ends came true (`status.operationDurations[].coverage`):
/// of its last ends that succeeded and had an estimate from history, the shares that ended by
/// their first `expectedEnd` and by their first `expectedEndP90`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ObservedCoverage {
    /// Ends judged (the last 100 at most).
    pub ends: u64,
    /// Share of them (0 to 1) that ended by their expected end (the median).
    pub p50: f64,
    /// Share of them (0 to 1) that ended by the band's far edge (p90).
    pub p90: f64,
}
