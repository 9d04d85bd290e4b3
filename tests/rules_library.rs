//! The shipped rules library: every case passes, every ruleset lints clean, and the generated
//! files in deploy/ match the library.

use ifo::evaluate::Engine;
use std::path::PathBuf;

fn library() -> Vec<ifo::rules::RuleSetFile> {
    ifo::rules::load(&[PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules")]).unwrap()
}

#[test]
fn every_case_of_the_library_passes() {
    let files = library();
    assert!(
        files.len() >= 40,
        "the library has {} rulesets",
        files.len()
    );
    let (count, failures) = ifo::rules::run_cases(&Engine::new(), &files).unwrap();
    let report: Vec<String> = failures.iter().map(ToString::to_string).collect();
    assert!(
        failures.is_empty(),
        "{} of {count} cases failed:\n{}",
        failures.len(),
        report.join("\n")
    );
    assert!(
        count >= files.len() * 3,
        "every ruleset needs positive, settled and status-less cases"
    );
}

#[test]
fn every_ruleset_lints_clean() {
    let problems = ifo::rules::lint(&Engine::new(), &library());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn generated_deploy_files_are_current() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let files = library();
    let bundle = std::fs::read_to_string(root.join("deploy/rules/bundle.yaml")).unwrap();
    assert_eq!(
        bundle,
        ifo::rules::bundle(&files),
        "deploy/rules/bundle.yaml is stale: run `ifo-apiserver rules bundle rules > deploy/rules/bundle.yaml`"
    );
    let rbac = std::fs::read_to_string(root.join("deploy/rbac/rule-targets.yaml")).unwrap();
    let generated = ifo::rules::rbac(&files, "ifo-apiserver:rule-targets");
    assert!(
        rbac.starts_with(&generated),
        "deploy/rbac/rule-targets.yaml is stale: regenerate it with `ifo-apiserver rules rbac rules`"
    );
}

#[test]
fn lint_catches_unguarded_paths_and_bad_cel() {
    let dir = std::env::temp_dir().join(format!("ifo-lint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = |name: &str, expr: &str| {
        format!(
            "apiVersion: ifo.kubevirt.io/v1alpha1\nkind: OperationRuleSet\nmetadata: {{name: {name}}}\nspec:\n  target: {{group: apps, version: v1, resource: deployments}}\n  rules:\n  - {{operation: Op, expression: \"{expr}\"}}\n"
        )
    };
    std::fs::write(
        dir.join("broken.yaml"),
        manifest("broken", "object.status =="),
    )
    .unwrap();
    std::fs::write(
        dir.join("unguarded.yaml"),
        manifest("unguarded", "object.status.replicas > 0"),
    )
    .unwrap();
    std::fs::write(
        dir.join("guarded.yaml"),
        manifest("guarded", "object.?status.?replicas.orValue(0) > 0"),
    )
    .unwrap();
    let files = ifo::rules::load(std::slice::from_ref(&dir)).unwrap();
    let problems = ifo::rules::lint(&Engine::new(), &files);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].contains("broken.yaml")
            && problems[0].contains("rules[0] (Op).expression")
            && problems[0].contains("1:"),
        "{problems:?}"
    );
    assert!(
        problems[1].contains("unguarded.yaml") && problems[1].contains("guard the path"),
        "{problems:?}"
    );
}
