//! Rulesets are checked against what they read when applied: the ruleset door checks the
//! fields read against the target's schema as the server holds it (a CRD's, from its watch of
//! CRDs; a built-in type's, from kube-apiserver's `/openapi/v3`) and refuses a field the schema
//! does not have (with the nearest one), and a rule that cannot give a bool whatever the
//! schema; where the schema is open (`x-kubernetes-preserve-unknown-fields`) or there is no
//! CRD, the ruleset is applied and kubectl prints what was not checked. A server-side dry run
//! says the same.

use ifo_dev::User;
use ifo_test_support::{
    Env, accepted, apply, closed_gadget_crd, denied_by, door_open, env, establish_gadget_crd,
    job_ruleset, not_created, refused, ruleset, ruleset_over, said_all, stored,
};
use serde_json::{Value, json};

const GROUP: &str = "schema-check.ifo.test";

/// A ruleset in `ns` over `resource` of the test group with `rules`.
fn gadget_ruleset(name: &str, ns: &str, resource: &str, rules: Value) -> String {
    let target = json!({"group": GROUP, "version": "v1", "resource": resource});
    ruleset_over(name, ns, target, rules)
}

/// The closed CRD, established.
fn install_closed_crd(env: &Env) {
    establish_gadget_crd(env, GROUP, &closed_gadget_crd(GROUP));
}

#[test]
fn a_field_the_crd_does_not_have_and_a_rule_that_is_not_a_bool_are_refused() {
    let env = env();
    let ns = door_open(env, "schema-closed");
    install_closed_crd(env);

    let rs = format!("gadget-typo-{ns}");
    let typo = gadget_ruleset(
        &rs,
        &ns,
        "gadgets",
        json!([{
            "operation": "Assembling",
            "expression": "object.?status.?phsae.orValue('') == 'Assembling'",
            "message": "object.status.conditions.filter(c, c.type == 'Ready').map(c, c.mesage)[?0].orValue('')",
        }]),
    );
    let wanted = [
        "rules[0] (Assembling).expression: object.?status.?phsae: the schema of object.status \
         has no field phsae; did you mean phase?",
        "rules[0] (Assembling).message: c.mesage: the schema of object.status.conditions[] has \
         no field mesage; did you mean message?",
    ];
    // The server holds the CRD once its watch of CRDs brings it, moments after it is created.
    let stderr = ifo_test_support::eventually(
        std::time::Duration::from_secs(10),
        "the CRD's schema seen by the door",
        || {
            let out = apply(env, &typo, &["--dry-run=server"]);
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            stderr.contains("did you mean").then_some(stderr)
        },
    );
    println!("kubectl apply --dry-run=server said:\n{stderr}");
    said_all(&stderr, &wanted);
    let stderr = refused(env, &typo);
    println!("kubectl apply said:\n{stderr}");
    said_all(&stderr, &[denied_by().as_str()]);
    said_all(&stderr, &wanted);
    not_created(env, &rs);

    // Not a bool, whatever the schema: a string-typed field, a literal.
    let rs = format!("gadget-string-{ns}");
    let strings = gadget_ruleset(
        &rs,
        &ns,
        "gadgets",
        json!([
            {"operation": "Phase", "expression": "object.?status.?phase.orValue('')"},
            {"operation": "Literal", "expression": "'not a boolean'"},
        ]),
    );
    for extra in [&["--dry-run=server"][..], &[]] {
        let out = apply(env, &strings, extra);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{extra:?} succeeded: {stderr}");
        said_all(
            &stderr,
            &[
                "rules[0] (Phase).expression: the result is object.status.phase, of type string; \
                 a rule must give a bool",
                "rules[1] (Literal).expression: the result is of type string; a rule must give a \
                 bool",
            ],
        );
    }
    not_created(env, &rs);
}

#[test]
fn where_the_schema_is_open_or_absent_the_ruleset_applies_with_a_warning() {
    let env = env();
    let ns = door_open(env, "schema-open");

    // The test cluster's VirtualMachine CRD takes any field.
    let rs = format!("vm-open-{ns}");
    let open = ruleset(
        &rs,
        &ns,
        json!([{"operation": "Migrating", "expression": "object.?status.?printableStatsu.orValue('') == 'Migrating'"}]),
    );
    let warning = "Warning: kubevirt.io/v1/virtualmachines: the schema takes any field in object";
    for extra in [&["--dry-run=server"][..], &[]] {
        let stderr = accepted(env, &open, extra);
        println!("kubectl apply {extra:?} said:\n{stderr}");
        assert!(stderr.contains(warning), "{extra:?}: {stderr}");
    }
    assert!(stored(env, &rs).is_some(), "the ruleset was created");
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();

    // No CRD for the target: checked by a dry run only (a ruleset applied for it would keep
    // its target unknown, and the gates it reaches with it).
    let absent = gadget_ruleset(
        &format!("absent-{ns}"),
        &ns,
        "nonexistents",
        json!([{"operation": "Any", "expression": "object.?status.?phase.orValue('') == 'x'"}]),
    );
    let stderr = accepted(env, &absent, &["--dry-run=server"]);
    println!("kubectl apply --dry-run=server said:\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "Warning: the fields read from {GROUP}/v1/nonexistents are not checked: no \
             CustomResourceDefinition nonexistents.{GROUP} is installed"
        )),
        "{stderr}"
    );
}

/// A built-in type's fields are checked as a CRD's, against kube-apiserver's own schema of it:
/// a Job rule reading `status.succeded` is refused with the field it meant; one reading
/// `status.succeeded` applies, and its status says what it was checked against.
#[test]
fn a_built_in_types_fields_are_checked_against_kube_apiservers_schema() {
    let env = env();
    let ns = door_open(env, "schema-builtin");
    let rs = format!("job-typo-{ns}");
    let typo = job_ruleset(&rs, &ns, "object.?status.?succeded.orValue(0) == 0");
    let stderr = refused(env, &typo);
    println!("kubectl apply said:\n{stderr}");
    said_all(
        &stderr,
        &[
            denied_by().as_str(),
            "rules[0] (Running).expression: object.?status.?succeded: the schema of object.status \
             has no field succeded; did you mean succeeded?",
        ],
    );
    not_created(env, &rs);

    let fixed = job_ruleset(&rs, &ns, "object.?status.?succeeded.orValue(0) == 0");
    accepted(env, &fixed, &[]);
    let checked = env.wait_ruleset_condition(
        &rs,
        "SchemaChecked",
        "True",
        std::time::Duration::from_secs(60),
    );
    println!("checked: {checked}");
    assert!(
        checked["message"].as_str().unwrap().contains(
            "every field read is in the schema of io.k8s.api.batch.v1.Job (kube-apiserver's \
             OpenAPI document of apis/batch/v1)"
        ),
        "{checked}"
    );
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

/// A CRD of the test group, `widgets`, whose status is open (any field) or closed (`phase`).
fn widgets_crd(closed: bool) -> String {
    let status = if closed {
        json!({"type": "object", "properties": {"phase": {"type": "string"}}})
    } else {
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
    };
    ifo_test_support::crd_serving(
        GROUP,
        "Widget",
        json!({
            "name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "metadata": {"type": "object"}, "status": status,
            }}},
        }),
    )
}

/// The ruleset's status says what its fields were checked against, and the check runs again
/// when the target's CRD changes: a typo the door could not see (the schema was open where the
/// rule reads) shows as `SchemaChecked=False` with the nearest field once the CRD closes it,
/// and `True` again once the ruleset is fixed.
#[test]
fn the_ruleset_status_says_what_was_checked_and_a_changed_crd_is_checked_again() {
    let env = env();
    let ns = door_open(env, "schema-recheck");
    let timeout = std::time::Duration::from_secs(60);
    env.apply(&widgets_crd(false));
    env.kubectl(
        User::Admin,
        &[
            "wait",
            "--for=condition=Established",
            &format!("crd/widgets.{GROUP}"),
            "--timeout=60s",
        ],
    )
    .unwrap();
    let rs = format!("widget-typo-{ns}");
    let typo = gadget_ruleset(
        &rs,
        &ns,
        "widgets",
        json!([{"operation": "Spinning", "expression": "object.?status.?phsae.orValue('') == 'Spinning'"}]),
    );
    // The server holds the CRD once its watch of CRDs brings it, moments after it is created.
    ifo_test_support::eventually(
        std::time::Duration::from_secs(10),
        "the ruleset applied over the open schema",
        || apply(env, &typo, &[]).status.success().then_some(()),
    );
    let checked = env.wait_ruleset_condition(&rs, "SchemaChecked", "True", timeout);
    println!("over the open schema: {checked}");
    assert_eq!(checked["reason"], "FieldsInSchema", "{checked}");
    let message = checked["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("CustomResourceDefinition widgets.{GROUP} (v1)"))
            && message.contains("not checked")
            && message.contains("takes any field in object.status"),
        "{checked}"
    );

    // The CRD closes its status: checked again, the typo named with the nearest field.
    env.apply(&widgets_crd(true));
    let found = env.wait_ruleset_condition(&rs, "SchemaChecked", "False", timeout);
    println!("once the CRD is closed: {found}");
    assert_eq!(found["reason"], "NotInSchema", "{found}");
    assert!(
        found["message"].as_str().unwrap().contains(
            "rules[0] (Spinning).expression: object.?status.?phsae: the schema of object.status \
             has no field phsae; did you mean phase?"
        ),
        "{found}"
    );

    // Fixed: in the schema, nothing left unchecked.
    let fixed = gadget_ruleset(
        &rs,
        &ns,
        "widgets",
        json!([{"operation": "Spinning", "expression": "object.?status.?phase.orValue('') == 'Spinning'"}]),
    );
    accepted(env, &fixed, &[]);
    let checked = env.wait_ruleset_condition(&rs, "SchemaChecked", "True", timeout);
    assert!(
        checked["message"]
            .as_str()
            .unwrap()
            .starts_with("every field read is in the schema of"),
        "{checked}"
    );
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}
