//! A test's own names: tests share the cluster, and rulesets, components, nodes and API groups
//! are cluster-wide, so each is named after the test's fresh namespace.

use crate::{Env, vm};
use ifo_dev::User;
use std::fmt;

/// A fresh namespace and the cluster-wide names of one test, made unique by it.
#[derive(Clone, Debug)]
pub struct Scope {
    /// The namespace, named after the test's prefix.
    pub ns: String,
    /// A node's name, `w-<ns>` (no Node object: see [`Env::node`]).
    pub node: String,
    /// A component's name, `c-<ns>`.
    pub component: String,
    /// A ruleset's name, `rs-<ns>`.
    pub rs: String,
    /// An API group, `<ns>.example.com`, for a kind of the test's own (gadgets).
    pub group: String,
}

impl Env {
    /// A [`Scope`]: a fresh namespace named after `prefix`, and names derived from it.
    pub fn scope(&self, prefix: &str) -> Scope {
        let ns = self.namespace(prefix);
        Scope {
            node: format!("w-{ns}"),
            component: format!("c-{ns}"),
            rs: format!("rs-{ns}"),
            group: format!("{ns}.example.com"),
            ns,
        }
    }
}

impl Scope {
    /// Applies `ruleset` (the one named [`Scope::rs`]) and the VirtualMachines `vms` in the
    /// namespace, and waits until the ruleset watches.
    pub fn watch(&self, env: &Env, ruleset: impl fmt::Display, vms: &[&str]) {
        env.apply(&ruleset.to_string());
        for name in vms {
            env.apply(&vm(name, &self.ns));
        }
        env.wait_watching(&self.rs);
    }

    /// Deletes the scope's ruleset.
    pub fn delete_ruleset(&self, env: &Env) {
        env.kubectl(User::Admin, &["delete", "ors", &self.rs])
            .unwrap();
    }
}

/// Rulesets of a test's, deleted when dropped — a failed test's included: a ruleset left over
/// budget, suspended or failing would make the gates it reaches Unknown for the tests after
/// (one failure would show as several).
pub struct DeletedOnDrop<'a> {
    env: &'a Env,
    names: Vec<String>,
}

impl Env {
    /// Deletes the rulesets `names` when what this returns is dropped.
    pub fn delete_on_drop(&self, names: &[&str]) -> DeletedOnDrop<'_> {
        DeletedOnDrop {
            env: self,
            names: names.iter().map(|n| (*n).to_owned()).collect(),
        }
    }
}

impl Drop for DeletedOnDrop<'_> {
    fn drop(&mut self) {
        let mut args = vec!["delete", "ors", "--ignore-not-found", "--wait=false"];
        args.extend(self.names.iter().map(String::as_str));
        let _ = self.env.kubectl(User::Admin, &args);
    }
}
