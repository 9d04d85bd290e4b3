//! The shipped rules library: every case passes, every ruleset lints clean, and the generated
//! files in deploy/ match the library.

use ifo::evaluate::Engine;
use std::path::PathBuf;

fn library() -> Vec<ifo::library::RuleSetFile> {
    ifo::library::load(&[PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules")]).unwrap()
}

/// A library of its own for one test: `files` (file name, content) written to a folder named
/// after the test, and loaded. The folder goes when this is dropped.
struct TempLibrary {
    dir: PathBuf,
    files: Vec<ifo::library::RuleSetFile>,
}

impl TempLibrary {
    fn new(test: &str, files: &[(&str, &str)]) -> TempLibrary {
        let dir = std::env::temp_dir().join(format!("ifo-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, content) in files {
            std::fs::write(dir.join(name), content).unwrap();
        }
        let files = ifo::library::load(std::slice::from_ref(&dir)).unwrap();
        TempLibrary { dir, files }
    }
}

impl Drop for TempLibrary {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An OperationRuleSet `name` over `resource` of `group`, `v1`, whose one rule `Op` has the
/// expression `expr`, as a YAML file.
fn one_rule(name: &str, group: &str, resource: &str, expr: &str) -> String {
    format!(
        "apiVersion: ifo.kubevirt.io/v1alpha1\nkind: OperationRuleSet\nmetadata: {{name: {name}}}\nspec:\n  target: {{group: {group}, version: v1, resource: {resource}}}\n  rules:\n  - {{operation: Op, expression: \"{expr}\"}}\n"
    )
}

/// `reports` are one for each of `expected`, in order, each starting with its first part and
/// containing the others.
fn assert_reports(reports: &[String], expected: &[(&str, &[&str])]) {
    assert_eq!(reports.len(), expected.len(), "{reports:#?}");
    for (report, (start, parts)) in reports.iter().zip(expected) {
        assert!(
            report.starts_with(start) && parts.iter().all(|p| report.contains(p)),
            "{report:?} does not start with {start:?} and hold {parts:?}"
        );
    }
}

#[test]
fn every_case_of_the_library_passes() {
    let files = library();
    assert!(
        files.len() >= 40,
        "the library has {} rulesets",
        files.len()
    );
    let (count, failures) = ifo::library::run_cases(&Engine::new(), &files).unwrap();
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

/// The compile-time cost limits leave the shipped rules well inside them, so that authors have
/// room and the limits can catch what is really too expensive.
#[test]
fn the_library_stays_well_inside_the_cost_limits() {
    use ifo::evaluate::estimate::{MAX_COMPREHENSION_DEPTH, MAX_ESTIMATED_COST};
    let engine = Engine::new();
    let (mut count, mut costliest, mut deepest) = (0, (0u64, String::new()), 0usize);
    for file in library() {
        let compiled = ifo::ruleset::compile(&engine, &file.name, None, &file.spec).unwrap();
        let rules = compiled.exprs.rules.iter().flat_map(|r| {
            [
                Some(&r.matches),
                r.message.as_ref(),
                r.outcome.as_ref(),
                r.start_time.as_ref(),
            ]
            .into_iter()
            .flatten()
        });
        let labels = compiled.exprs.label_expressions.iter().map(|(_, e)| e);
        for expr in rules.chain(labels) {
            count += 1;
            if expr.estimated_cost() > costliest.0 {
                costliest = (
                    expr.estimated_cost(),
                    format!("{}: {}", file.name, expr.source()),
                );
            }
            deepest = deepest.max(expr.comprehension_depth());
        }
    }
    println!(
        "{count} expressions; costliest estimate {} ({}); deepest nesting {deepest}",
        costliest.0, costliest.1
    );
    assert!(count >= 181, "{count} expressions");
    assert!(
        costliest.0 * 10 <= MAX_ESTIMATED_COST,
        "within a tenth of the limit: {} ({})",
        costliest.0,
        costliest.1
    );
    assert!(deepest < MAX_COMPREHENSION_DEPTH, "nesting {deepest}");
}

#[test]
fn every_ruleset_lints_clean() {
    let problems = ifo::library::lint(&Engine::new(), &library());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Against the schemas of the CRDs the tests install (`tests/cluster/crds`): every path a rule
/// reads where a schema lists its fields is one it has, and every result is of its role's type.
#[test]
fn every_ruleset_lints_clean_against_the_test_crds() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let schemas = ifo::library::load_schemas(&[root.join("tests/cluster/crds")]).unwrap();
    assert!(schemas.len() >= 40, "{} schemas", schemas.len());
    let files = library();
    let problems = ifo::library::lint_with_schemas(&Engine::new(), &files, &schemas);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The annotation a shipped ruleset carries when no upstream schema of a target it reads is
/// pinned under tests/schemas, saying why.
const UNPINNED: &str = "lint.ifo.kubevirt.io/unpinned-schema";

/// The real schemas of the library's targets, pinned (tests/schemas: the upstream CRDs, and
/// kube-apiserver's OpenAPI documents of the built-in types, see its README).
fn pinned_schemas() -> ifo::ruleset::schema_check::SchemaSet {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    ifo::library::load_schemas(&[root.join("tests/schemas")]).unwrap()
}

/// Why `file` says a target's schema is not pinned, if it says so.
fn unpinned_because(file: &ifo::library::RuleSetFile) -> Option<String> {
    let manifest: serde_json::Value = serde_saphyr::from_str(&file.text).unwrap();
    manifest["metadata"]["annotations"][UNPINNED]
        .as_str()
        .map(str::to_owned)
}

/// Against the real upstream schemas of every target (tests/schemas): every path a rule reads
/// is one its target's schema has, and every target has a pinned schema, or its ruleset says
/// why not.
#[test]
fn every_ruleset_lints_clean_against_the_pinned_upstream_schemas() {
    let schemas = pinned_schemas();
    let files = library();
    let problems = ifo::library::lint_with_schemas(&Engine::new(), &files, &schemas);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let mut unpinned = Vec::new();
    let mut without_why = Vec::new();
    for file in &files {
        let targets = std::iter::once(&file.spec.target)
            .chain(file.spec.related.iter().map(|part| &part.target));
        for target in targets {
            if schemas.get(target).is_some() {
                continue;
            }
            match unpinned_because(file) {
                Some(why) => unpinned.push(format!("{target}: {why}")),
                None => without_why.push(format!("{}: {target}", file.path.display())),
            }
        }
    }
    println!(
        "{} rulesets, {} targets unpinned:\n{}",
        files.len(),
        unpinned.len(),
        unpinned.join("\n")
    );
    assert!(
        without_why.is_empty(),
        "no pinned schema, and the ruleset does not say why ({UNPINNED}):\n{}",
        without_why.join("\n")
    );
}

/// A copy of three shipped rulesets, each with one field misspelt, fails the lint against the
/// pinned schemas, each with the field it meant: a CRD target's (Velero's Backup), a built-in
/// type's (a Job's `status.succeeded`), and one read in a list's elements (a Cluster API
/// Machine condition's `message`).
#[test]
fn a_broken_copy_of_the_library_fails_against_the_pinned_schemas() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules");
    let broken = |file: &str, field: &str, typo: &str| {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert!(text.contains(field), "{file} reads no {field}");
        text.replacen(field, typo, 1)
    };
    let library = TempLibrary::new(
        "pinned-broken",
        &[
            (
                "backup.yaml",
                &broken(
                    "oadp/velero-backup-rules.yaml",
                    "object.status.phase ==",
                    "object.status.phaze ==",
                ),
            ),
            (
                "job.yaml",
                &broken(
                    "kubernetes/job-rules.yaml",
                    "object.?status.?succeeded",
                    "object.?status.?succeded",
                ),
            ),
            (
                "machine.yaml",
                &broken(
                    "cluster-api/capi-machine-rules.yaml",
                    "map(c, ': ' + c.message)",
                    "map(c, ': ' + c.mesage)",
                ),
            ),
        ],
    );
    let problems =
        ifo::library::lint_with_schemas(&Engine::new(), &library.files, &pinned_schemas());
    assert_reports(
        &problems,
        &[
            (
                "",
                &["backup.yaml", "has no field phaze; did you mean phase?"],
            ),
            (
                "",
                &["job.yaml", "has no field succeded; did you mean succeeded?"],
            ),
            (
                "",
                &[
                    "machine.yaml",
                    "object.status.conditions[] has no field mesage; did you mean message?",
                ],
            ),
        ],
    );
}

/// Which workloads hold their nodes is the admin's to grant, namespace by namespace: the two
/// rulesets that let pods hold nodes ship for `kube-system` alone, where only cluster
/// administrators create pods, so that no tenant holds a node of an install as shipped.
#[test]
fn pods_hold_their_nodes_only_where_the_admin_lists_as_shipped_kube_system() {
    let files = library();
    for name in ["pod-rules", "protected-pod-rules"] {
        let ruleset = files
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("{name} is not in the library"));
        assert_eq!(ruleset.spec.namespaces, ["kube-system"], "{name}");
    }
}

#[test]
fn generated_deploy_files_are_current() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let files = library();
    let bundle = std::fs::read_to_string(root.join("deploy/rules/bundle.yaml")).unwrap();
    assert_eq!(
        bundle,
        ifo::library::bundle(&files),
        "deploy/rules/bundle.yaml is stale: run `ifo-apiserver rules bundle rules > deploy/rules/bundle.yaml`"
    );
    let rbac = std::fs::read_to_string(root.join("deploy/rbac/rule-targets.yaml")).unwrap();
    let generated = ifo::library::rbac(&files, "ifo-apiserver:rule-targets");
    assert!(
        rbac.starts_with(&generated),
        "deploy/rbac/rule-targets.yaml is stale: regenerate it with `ifo-apiserver rules rbac rules`"
    );
}

#[test]
fn lint_catches_unguarded_paths_and_bad_cel() {
    let manifest = |name: &str, expr: &str| one_rule(name, "apps", "deployments", expr);
    let library = TempLibrary::new(
        "lint",
        &[
            ("broken.yaml", &manifest("broken", "object.status ==")),
            (
                "unguarded.yaml",
                &manifest("unguarded", "object.status.replicas > 0"),
            ),
            (
                "guarded.yaml",
                &manifest("guarded", "object.?status.?replicas.orValue(0) > 0"),
            ),
        ],
    );
    let problems = ifo::library::lint(&Engine::new(), &library.files);
    assert_reports(
        &problems,
        &[
            ("", &["broken.yaml", "rules[0] (Op).expression", "1:"]),
            ("", &["unguarded.yaml", "guard the path"]),
        ],
    );
}

#[test]
fn lint_checks_paths_against_a_crd_schema_and_results_against_their_role() {
    let manifest = |name: &str, expr: &str| one_rule(name, "example.io", "widgets", expr);
    let library = TempLibrary::new(
        "lint-schemas",
        &[
            (
                "typo.yaml",
                &manifest("typo", "object.?status.?phsae.orValue('') == 'Running'"),
            ),
            ("literal.yaml", &manifest("literal", "'Running'")),
            (
                "fine.yaml",
                &manifest("fine", "object.?status.?phase.orValue('') == 'Running'"),
            ),
        ],
    );
    let crds = std::env::temp_dir().join(format!("ifo-lint-crds-{}", std::process::id()));
    std::fs::create_dir_all(&crds).unwrap();
    std::fs::write(
        crds.join("widgets.yaml"),
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.io}\nspec:\n  group: example.io\n  names: {kind: Widget, plural: widgets}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          status: {type: object, properties: {phase: {type: string}}}\n",
    )
    .unwrap();
    let schemas = ifo::library::load_schemas(std::slice::from_ref(&crds)).unwrap();
    let _ = std::fs::remove_dir_all(&crds);
    let problems = ifo::library::lint_with_schemas(&Engine::new(), &library.files, &schemas);
    assert_reports(
        &problems,
        &[
            (
                "",
                &[
                    "literal.yaml",
                    "rules[0] (Op).expression",
                    "a rule must give a bool",
                ],
            ),
            ("", &["literal.yaml", "expected bool, got string"]),
            (
                "",
                &["typo.yaml", "object.?status.?phsae", "did you mean phase?"],
            ),
        ],
    );
    // Without the schema, only the type.
    let problems = ifo::library::lint(&Engine::new(), &library.files);
    assert_reports(
        &problems,
        &[
            ("", &["literal.yaml", "a rule must give a bool"]),
            ("", &["literal.yaml", "expected bool, got string"]),
        ],
    );
}

/// In an `exclusive` ruleset a subject is in at most one operation at a time: a case on which
/// two of its rules match fails, naming both.
#[test]
fn cases_of_an_exclusive_ruleset_fail_where_two_rules_match() {
    let library = TempLibrary::new(
        "exclusive",
        &[
            (
                "phases.yaml",
                "apiVersion: ifo.kubevirt.io/v1alpha1\nkind: OperationRuleSet\nmetadata: {name: phases}\n\
                 spec:\n  target: {group: apps, version: v1, resource: deployments}\n  exclusive: true\n  rules:\n\
                 \x20 - {operation: A, expression: \"object.?status.?phase.orValue('') == 'A'\"}\n\
                 \x20 - {operation: Any, expression: \"object.?status.?phase.orValue('') != ''\"}\n",
            ),
            (
                "phases.cases.yaml",
                "cases:\n- name: overlap\n  object: {status: {phase: A}}\n  expect: {active: [A, Any]}\n\
                 - name: alone\n  object: {status: {phase: B}}\n  expect: {active: [Any]}\n",
            ),
        ],
    );
    assert!(library.files[0].spec.exclusive);
    let (count, failures) = ifo::library::run_cases(&Engine::new(), &library.files).unwrap();
    assert_eq!(count, 2);
    let report: Vec<String> = failures.iter().map(ToString::to_string).collect();
    assert_reports(
        &report,
        &[("phases / overlap: exclusive ruleset", &["\"A\", \"Any\""])],
    );
}

/// Resources kube-apiserver serves itself that the library targets: (group, version, resource,
/// kind, namespaced). They need no CRD in the test cluster.
const BUILT_IN_TARGETS: &[(&str, &str, &str, &str, bool)] = &[
    (
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        true,
    ),
    ("", "v1", "pods", "Pod", true),
    ("apps", "v1", "deployments", "Deployment", true),
    ("batch", "v1", "jobs", "Job", true),
    ("batch", "v1", "cronjobs", "CronJob", true),
];

/// A served version of a resource: (kind, namespaced, status subresource).
type Served = (String, bool, bool);

/// Every (group, version, plural) the CRDs of `tests/cluster/crds` serve.
fn test_cluster_crds() -> std::collections::HashMap<(String, String, String), Served> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cluster/crds");
    let mut served = std::collections::HashMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for crd in docs
            .iter()
            .filter(|d| d["kind"] == "CustomResourceDefinition")
        {
            let spec = &crd["spec"];
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
            for version in spec["versions"].as_array().into_iter().flatten() {
                if version["served"] != true {
                    continue;
                }
                served.insert(
                    (
                        text(&spec["group"]),
                        text(&version["name"]),
                        text(&spec["names"]["plural"]),
                    ),
                    (
                        text(&spec["names"]["kind"]),
                        spec["scope"] == "Namespaced",
                        version["subresources"]["status"].is_object(),
                    ),
                );
            }
        }
    }
    served
}

/// The test cluster serves every target of the library, with the kind and scope the cases use,
/// so the end-to-end tests can create and drive any subject the rules are written for.
#[test]
fn every_target_of_the_library_is_served_by_the_test_cluster() {
    let crds = test_cluster_crds();
    let mut problems = Vec::new();
    for file in library() {
        let t = &file.spec.target;
        let key = (t.group.clone(), t.version.clone(), t.resource.clone());
        let built_in = BUILT_IN_TARGETS
            .iter()
            .find(|(g, v, r, _, _)| (*g, *v, *r) == (&*key.0, &*key.1, &*key.2))
            .map(|(_, _, _, kind, namespaced)| (kind.to_string(), *namespaced));
        let (kind, namespaced) = match (built_in, crds.get(&key)) {
            (Some(_), Some(_)) => {
                problems.push(format!(
                    "{}: {t} is built in, it needs no CRD in tests/cluster/crds",
                    file.name
                ));
                continue;
            }
            (Some(served), None) => served,
            (None, Some((kind, namespaced, status))) => {
                if !status {
                    problems.push(format!(
                        "{}: the CRD for {t} has no status subresource",
                        file.name
                    ));
                }
                (kind.clone(), *namespaced)
            }
            (None, None) => {
                problems.push(format!(
                    "{}: no CRD in tests/cluster/crds serves {t}, and it is not a built-in resource",
                    file.name
                ));
                continue;
            }
        };
        // The cases' objects say what a subject of the target looks like.
        let cases_path = file.path.with_extension("cases.yaml");
        let cases: serde_json::Value =
            serde_saphyr::from_str(&std::fs::read_to_string(&cases_path).unwrap()).unwrap();
        let api_version = if t.group.is_empty() {
            t.version.clone()
        } else {
            format!("{}/{}", t.group, t.version)
        };
        for case in cases["cases"].as_array().into_iter().flatten() {
            let object = &case["object"];
            let name = case["name"].as_str().unwrap_or("?");
            if object["apiVersion"] != api_version.as_str() || object["kind"] != kind.as_str() {
                problems.push(format!(
                    "{}: case '{name}' is a {} {}, the test cluster serves {t} as {api_version} {kind}",
                    file.name, object["apiVersion"], object["kind"]
                ));
            }
            if object["metadata"]["namespace"].is_string() != namespaced {
                problems.push(format!(
                    "{}: case '{name}' {} a namespace, the test cluster serves {t} {}",
                    file.name,
                    if namespaced { "lacks" } else { "has" },
                    if namespaced {
                        "namespaced"
                    } else {
                        "cluster-scoped"
                    }
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A case may give the related objects of a ruleset's related parts: the labels it expects are
/// those the operations get (own label expressions above the related ones, an empty value
/// giving way), a related object that is not where `match` says fails, and the RBAC of the
/// library covers related targets.
#[test]
fn cases_check_the_labels_related_objects_give_and_rbac_covers_their_targets() {
    let rollouts = "apiVersion: ifo.kubevirt.io/v1alpha1\nkind: OperationRuleSet\nmetadata: {name: rollouts}\n\
         spec:\n  target: {group: apps, version: v1, resource: deployments}\n\
         \x20 labelExpressions:\n\
         \x20 - {key: ifo.kubevirt.io/node, expression: \"object.?spec.?pinned.orValue('')\"}\n\
         \x20 related:\n\
         \x20 - target: {group: example.com, version: v1, resource: placements}\n\
         \x20   match: SameName\n\
         \x20   labelExpressions:\n\
         \x20   - {key: ifo.kubevirt.io/node, expression: \"object.?status.?node.orValue('')\"}\n\
         \x20 rules:\n\
         \x20 - {operation: Rollout, expression: 'true'}\n";
    let object = |pinned: &str| {
        format!(
            "{{apiVersion: apps/v1, kind: Deployment, metadata: {{name: web, namespace: a}}, spec: {{pinned: '{pinned}'}}}}"
        )
    };
    let placement =
        |name: &str| format!("{{metadata: {{name: {name}, namespace: a}}, status: {{node: n1}}}}");
    let cases = format!(
        "cases:\n\
             - name: related\n  object: {}\n  related: [{}]\n  expect: {{active: [Rollout], labels: {{ifo.kubevirt.io/node: n1}}}}\n\
             - name: own wins\n  object: {}\n  related: [{}]\n  expect: {{active: [Rollout], labels: {{ifo.kubevirt.io/node: n2}}}}\n\
             - name: wrong value\n  object: {}\n  related: [{}]\n  expect: {{active: [Rollout], labels: {{ifo.kubevirt.io/node: n9}}}}\n\
             - name: not the same name\n  object: {}\n  related: [{}]\n  expect: {{active: [Rollout]}}\n",
        object(""),
        placement("web"),
        object("n2"),
        placement("web"),
        object(""),
        placement("web"),
        object(""),
        placement("other"),
    );
    let library = TempLibrary::new(
        "related",
        &[("rollouts.yaml", rollouts), ("rollouts.cases.yaml", &cases)],
    );
    let files = &library.files;
    let (count, failures) = ifo::library::run_cases(&Engine::new(), files).unwrap();
    let lint = ifo::library::lint(&Engine::new(), files);
    let rbac = ifo::library::rbac(files, "test");
    assert_eq!(count, 4);
    assert!(lint.is_empty(), "{lint:#?}");
    let report: Vec<String> = failures.iter().map(ToString::to_string).collect();
    assert_reports(
        &report,
        &[
            (
                "rollouts / wrong value: label ifo.kubevirt.io/node",
                &["\"n9\"", "\"n1\""],
            ),
            (
                "rollouts / not the same name: related[0]: a SameName related object",
                &[],
            ),
        ],
    );
    assert!(
        rbac.contains("apiGroups: [\"example.com\"]\n    resources: [\"placements\"]"),
        "{rbac}"
    );
}

/// The targets of the library's related objects are served by the test cluster too, so that
/// the end-to-end tests watch them as a real cluster would.
#[test]
fn every_related_target_of_the_library_is_served_by_the_test_cluster() {
    let crds = test_cluster_crds();
    for file in library() {
        for related in &file.spec.related {
            let t = &related.target;
            let key = (t.group.clone(), t.version.clone(), t.resource.clone());
            let built_in = BUILT_IN_TARGETS
                .iter()
                .any(|(g, v, r, _, _)| (*g, *v, *r) == (&*key.0, &*key.1, &*key.2));
            assert!(
                built_in || crds.contains_key(&key),
                "{}: no CRD in tests/cluster/crds serves the related target {t}",
                file.name
            );
        }
    }
}
