//! Linting rulesets: CEL that does not compile (with its position); what the schema checker
//! refuses (fields the target's schema does not have, given the CRDs' schemas, and results of
//! the wrong type, with or without them: see `ruleset::schema_check`); and field paths that
//! error on a typical object, found by evaluating every expression against a bare object of
//! the target (metadata only, no spec or status), which every rule must survive; the label
//! expressions of each related part (`spec.related`) against a bare object of its own target.

use super::load::RuleSetFile;
use crate::evaluate::{Bound, Engine, RuleResult, evaluate};
use crate::ruleset::schema_check::{SchemaSet, check_against};
use crate::ruleset::{Target, compile};

/// Problems, one line each, prefixed by the file; results types checked, no schema.
pub fn lint(engine: &Engine, files: &[RuleSetFile]) -> Vec<String> {
    lint_with_schemas(engine, files, &SchemaSet::default())
}

/// [`lint`], with the paths read checked against the schemas of `schemas` where they have the
/// target's.
pub fn lint_with_schemas(
    engine: &Engine,
    files: &[RuleSetFile],
    schemas: &SchemaSet,
) -> Vec<String> {
    let mut problems = Vec::new();
    for file in files {
        let at = file.path.display();
        let compiled = match compile(engine, &file.name, None, &file.spec) {
            Ok(c) => c,
            Err(errors) => {
                problems.extend(errors.problems.iter().map(|e| format!("{at}: {e}")));
                continue;
            }
        };
        let checked = check_against(&compiled, |target| schemas.get(target));
        problems.extend(checked.problems.iter().map(|p| format!("{at}: {p}")));
        let bare = bare_object(&file.spec.target);
        let ev = evaluate(&compiled.exprs, &Bound::new(&bare));
        for (op, result) in compiled.operations.iter().zip(&ev.rules) {
            match result {
                RuleResult::Error(e) => problems.push(format!(
                    "{at}: rule {op} errors on an object without spec/status (guard the path with has() or .?): {e}"
                )),
                RuleResult::Inactive { outcome: Some(Err(e)) } => {
                    problems.push(format!("{at}: outcome of {op} errors on an object without status: {e}"))
                }
                _ => {}
            }
        }
        for (op, start) in compiled.operations.iter().zip(&ev.starts) {
            if let Some(Err(e)) = start {
                problems.push(format!(
                    "{at}: schedule of {op} errors on an object without spec/status: {e}"
                ));
            }
        }
        for (key, value) in &ev.labels {
            if let Err(e) = value {
                problems.push(format!(
                    "{at}: label expression {key} errors on an object without status: {e}"
                ));
            }
        }
        // Each related part, on a bare object of its own target.
        for (index, part) in compiled.related.iter().enumerate() {
            let bare = bare_object(&part.target);
            for (key, value) in &evaluate(&part.exprs, &Bound::new(&bare)).labels {
                if let Err(e) = value {
                    problems.push(format!(
                        "{at}: related[{index}] label expression {key} errors on an object without status: {e}"
                    ));
                }
            }
        }
        for key in file
            .spec
            .labels
            .keys()
            .chain(file.spec.label_expressions.iter().map(|l| &l.key))
        {
            for msg in ifo_apimachinery::validation::is_qualified_name(key) {
                problems.push(format!("{at}: label key {key:?} is not valid: {msg}"));
            }
        }
    }
    problems
}

/// An object of `target` with metadata only (no spec, no status): what every expression must
/// survive.
fn bare_object(target: &Target) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": format!("{}/{}", target.group, target.version).trim_start_matches('/'),
        "kind": "Object",
        "metadata": {"name": "lint", "namespace": "lint", "uid": "00000000-0000-0000-0000-000000000000"},
    })
}
