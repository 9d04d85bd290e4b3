//! Checking a compiled ruleset against what it reads: every path an expression reads from
//! `object` against the OpenAPI v3 schema of the target, and the type each expression gives
//! against what its role needs (a rule a bool, a message a string, ...).
//!
//! The checker refuses only what it can see is wrong, never what it cannot know:
//! * a field read under a *closed* schema (an object that lists its properties and takes no
//!   others) that the schema does not list, with the nearest listed one; a field read of a
//!   value the schema says is a string, a number, a boolean or a list;
//! * an expression whose result is, whatever the object, of a type its role refuses: a
//!   literal, a path whose schema has that type, what an operator or a function returns.
//!
//! Reads under an *open* schema (`x-kubernetes-preserve-unknown-fields`, an object that lists
//! no properties) are not checked, and are said to be so; without a schema only types are
//! checked.
//!
//! What is read: field selections, `has()`, `.?`, `[?'k']`, indexing of lists and maps, and
//! the variables of the macros (`exists`, `all`, `exists_one`, `map`, `filter`): an element of
//! a list, a key of a map, so that `object.spec.disks.exists(d, d.nmae == 'x')` checks `nmae`
//! against the schema of the list's items.

mod crd;
mod document;
mod lookup;
mod open_api;
mod schema;
mod suggest;
mod ty;
mod walk;

#[cfg(test)]
mod tests;

pub use crd::{SchemaSet, of_crd};
pub(crate) use lookup::{Found, Lookup, Schemas};
pub use schema::Schema;

use super::{CompiledRuleSet, Target};
use crate::evaluate::{Expr, ScheduleExprs};
use ty::{Kind, Ty};
use walk::Walk;

/// What an expression is for, and so what it must give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A rule's `expression`: a bool.
    Rule,
    /// `message`: a string.
    Message,
    /// `outcome`: a string (the outcome's name).
    Outcome,
    /// `startTime`: an RFC 3339 string or a timestamp.
    StartTime,
    /// `progress`: a number or a string.
    Progress,
    /// `stalled`: a bool or a string (the reason).
    Stalled,
    /// A label expression: a string.
    Label,
    /// `schedule.cron` or `schedule.timeZone`: a string.
    Schedule,
}

impl Role {
    fn accepts(self, kind: Kind) -> bool {
        match self {
            Role::Rule => kind == Kind::Bool,
            Role::Message | Role::Outcome | Role::Label | Role::Schedule => kind == Kind::String,
            Role::StartTime => matches!(kind, Kind::String | Kind::Timestamp),
            Role::Progress => matches!(kind, Kind::Int | Kind::Uint | Kind::Double | Kind::String),
            Role::Stalled => matches!(kind, Kind::Bool | Kind::String),
        }
    }

    fn wants(self) -> &'static str {
        match self {
            Role::Rule => "a rule must give a bool",
            Role::Message => "a message must give a string",
            Role::Outcome => "an outcome must give a string",
            Role::Label => "a label expression must give a string",
            Role::Schedule => "a cron schedule and its time zone must give strings",
            Role::StartTime => "a start time must give a string or a timestamp",
            Role::Progress => "a progress must give a number or a string",
            Role::Stalled => "stalled must give a bool or a string (the reason)",
        }
    }
}

/// What checking one expression found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ExprCheck {
    /// What is wrong, one line each.
    pub problems: Vec<String>,
    /// Where the schema is open (`object.status`): reads below were not checked.
    pub open: Vec<String>,
}

/// Checks `expr`, of `role`, against the schema of `object` (`None`: types only).
pub fn check_expr(expr: &Expr, role: Role, schema: Option<&Schema>) -> ExprCheck {
    let mut walk = Walk::new(schema.map(Schema::root));
    let result = walk.ty(expr.ast());
    let mut found = walk.found;
    if let Some(kinds) = result.kinds()
        && let Some(wrong) = kinds.iter().find(|k| !role.accepts(**k))
    {
        let what = match (&result, wrong) {
            (Ty::Schema(_, path), _) => format!("is {path}, of type {}", wrong.name()),
            (Ty::Either(_), _) => format!("may be of type {}", wrong.name()),
            (_, Kind::Optional) => {
                "is an optional (end the chain with .orValue(...) or .hasValue())".to_owned()
            }
            (_, k) => format!("is of type {}", k.name()),
        };
        found
            .problems
            .push(format!("the result {what}; {}", role.wants()));
    }
    ExprCheck {
        problems: found.problems,
        open: found.open,
    }
}

/// What checking a ruleset found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Every problem, `<place>: <what>` (`rules[0] (Migrating).expression: ...`), in the order
    /// of the spec.
    pub problems: Vec<String>,
    /// What was not checked, one line each: the targets whose schema is open where the
    /// expressions read.
    pub unchecked: Vec<String>,
}

impl Report {
    /// Whether anything is wrong.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// [`check_ruleset`] against the schemas `schema_of` has of its target and of each related
/// part's.
pub fn check_against<'s>(
    ruleset: &CompiledRuleSet,
    schema_of: impl Fn(&Target) -> Option<&'s Schema>,
) -> Report {
    let related: Vec<_> = ruleset
        .related
        .iter()
        .map(|part| schema_of(&part.target))
        .collect();
    check_ruleset(ruleset, schema_of(&ruleset.target), &related)
}

/// Checks every expression of `ruleset`: those over its target against `own`, the label
/// expressions of each related part against its schema in `related` (in the order of
/// `spec.related`; `None`, or a part left out: types only).
pub fn check_ruleset(
    ruleset: &CompiledRuleSet,
    own: Option<&Schema>,
    related: &[Option<&Schema>],
) -> Report {
    let mut report = Report::default();
    let mut open = Vec::new();
    for (i, rule) in ruleset.exprs.rules.iter().enumerate() {
        let at = |field: &str| format!("rules[{i}] ({}).{field}", rule.operation);
        let all = [
            ("expression", Some(&rule.matches), Role::Rule),
            ("message", rule.message.as_ref(), Role::Message),
            ("outcome", rule.outcome.as_ref(), Role::Outcome),
            ("startTime", rule.start_time.as_ref(), Role::StartTime),
            ("progress", rule.progress.as_ref(), Role::Progress),
            ("stalled", rule.stalled.as_ref(), Role::Stalled),
        ];
        for (field, expr, role) in all {
            if let Some(expr) = expr {
                check_into(&mut report, &mut open, at(field), expr, role, own);
            }
        }
        for (field, expr) in rule.schedule.iter().flat_map(ScheduleExprs::fields) {
            // `at` and `from` are times; `cron` and `timeZone` strings.
            let role = if matches!(field, "at" | "from") {
                Role::StartTime
            } else {
                Role::Schedule
            };
            let place = at(&format!("schedule.{field}"));
            check_into(&mut report, &mut open, place, expr, role, own);
        }
    }
    for (i, (key, expr)) in ruleset.exprs.label_expressions.iter().enumerate() {
        let place = format!("labelExpressions[{i}] ({key})");
        check_into(&mut report, &mut open, place, expr, Role::Label, own);
    }
    if own.is_some() && !open.is_empty() {
        report
            .unchecked
            .push(open_note(&ruleset.target.to_string(), &open));
    }
    for (index, part) in ruleset.related.iter().enumerate() {
        let schema = related.get(index).copied().flatten();
        let mut open = Vec::new();
        for (i, (key, expr)) in part.exprs.label_expressions.iter().enumerate() {
            let place = format!("related[{index}].labelExpressions[{i}] ({key})");
            check_into(&mut report, &mut open, place, expr, Role::Label, schema);
        }
        if schema.is_some() && !open.is_empty() {
            let what = format!("related[{index}] ({})", part.target);
            report.unchecked.push(open_note(&what, &open));
        }
    }
    report
}

/// Checks one expression, adding its problems (at `place`) to `report` and where it found the
/// schema open to `open`.
fn check_into(
    report: &mut Report,
    open: &mut Vec<String>,
    place: String,
    expr: &Expr,
    role: Role,
    schema: Option<&Schema>,
) {
    let found = check_expr(expr, role, schema);
    report
        .problems
        .extend(found.problems.into_iter().map(|p| format!("{place}: {p}")));
    for path in found.open {
        if !open.contains(&path) {
            open.push(path);
        }
    }
}

/// Most open places named in one note.
const MAX_OPEN_NAMED: usize = 4;

fn open_note(what: &str, open: &[String]) -> String {
    let mut named = open
        .iter()
        .take(MAX_OPEN_NAMED)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if open.len() > MAX_OPEN_NAMED {
        named = format!("{named} and {} more", open.len() - MAX_OPEN_NAMED);
    }
    format!(
        "{what}: the schema takes any field in {named} (open: x-kubernetes-preserve-unknown-fields, \
         or no properties listed), so the fields read there are not checked"
    )
}
