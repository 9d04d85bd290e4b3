//! A ruleset's `SchemaChecked` condition: what the fields its expressions read were checked
//! against, the same check as the rulesets' admission door (`ruleset::schema_check`), run by
//! the controller when a ruleset's generation loads and again when one of its targets' CRDs
//! appears, changes or goes. So a ruleset applied before its target's CRD was installed (or
//! past the door: a webhook that failed open) shows the typo the door could not see, once the
//! CRD is there.

use crate::evaluate::{MAX_MESSAGE_CHARS, truncated};
use crate::ruleset::schema_check::{Lookup, Schemas, check_against};
use crate::ruleset::{CompiledRuleSet, Target};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The condition's type.
pub(super) const SCHEMA_CHECKED: &str = "SchemaChecked";

/// What the check found, for the condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SchemaCheck {
    /// Not checked yet: the generation just loaded, or a target's CRD changed.
    Pending,
    /// Every field read is in the target's schema and every result of its role's type; what
    /// was not checked (open parts of the schema, related targets without one), if anything.
    Checked {
        against: String,
        unchecked: Vec<String>,
    },
    /// What is wrong, `<place>: <what>` each.
    Problems(Vec<String>),
    /// The target's schema is not to be had (why): only the results' types were checked.
    Unavailable(String),
}

/// The CRDs (`<resource>.<group>`) whose schemas `ruleset` is checked against: its target's and
/// its related parts'.
pub(super) fn crds_of(ruleset: &CompiledRuleSet) -> impl Iterator<Item = String> + '_ {
    targets_of(ruleset).map(Target::crd_name)
}

fn targets_of(ruleset: &CompiledRuleSet) -> impl Iterator<Item = &Target> {
    std::iter::once(&ruleset.target).chain(ruleset.related.iter().map(|p| &p.target))
}

/// Checks `ruleset` against its targets' schemas as the server holds them now.
pub(super) async fn check(schemas: &Schemas, ruleset: &CompiledRuleSet) -> SchemaCheck {
    let targets: Vec<Target> = targets_of(ruleset).cloned().collect();
    let found = schemas.lookup(&targets).await;
    let own = found.schema(&ruleset.target);
    let report = check_against(ruleset, |target| found.schema(target));
    if !report.is_ok() {
        return SchemaCheck::Problems(report.problems);
    }
    let absent = |t: &Target| match found.by_target.get(t) {
        Some(Lookup::Absent(why)) => Some(why.clone()),
        Some(Lookup::Found(_)) => None,
        None => Some(format!("{t} was not looked up")),
    };
    let Some(own) = own else {
        return SchemaCheck::Unavailable(
            absent(&ruleset.target).unwrap_or_else(|| format!("no schema of {}", ruleset.target)),
        );
    };
    let mut unchecked: Vec<String> = ruleset
        .related
        .iter()
        .filter_map(|p| {
            absent(&p.target).map(|why| format!("the fields read from {}: {why}", p.target))
        })
        .collect();
    unchecked.extend(report.unchecked);
    SchemaCheck::Checked {
        against: own.origin().to_owned(),
        unchecked,
    }
}

/// The condition for `check`.
pub(super) fn condition(check: &SchemaCheck, generation: Option<i64>) -> Condition {
    let (status, reason, message) = match check {
        SchemaCheck::Pending => (
            "Unknown",
            "Checking",
            "the fields read are being checked against the target's schema".to_owned(),
        ),
        SchemaCheck::Checked { against, unchecked } => (
            "True",
            "FieldsInSchema",
            if unchecked.is_empty() {
                format!(
                    "every field read is in the schema of {against}, and every result of its role's type"
                )
            } else {
                format!(
                    "the fields read are in the schema of {against}, and every result of its role's type; not checked: {}",
                    unchecked.join("; ")
                )
            },
        ),
        SchemaCheck::Problems(problems) => ("False", "NotInSchema", problems.join("; ")),
        SchemaCheck::Unavailable(why) => (
            "Unknown",
            "SchemaUnavailable",
            format!(
                "{why}: only the results' types were checked; the fields read are checked when the target's schema appears or changes"
            ),
        ),
    };
    Condition {
        type_: SCHEMA_CHECKED.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: truncated(message, MAX_MESSAGE_CHARS),
        observed_generation: generation,
        last_transition_time: Time(jiff::Timestamp::now()),
    }
}
