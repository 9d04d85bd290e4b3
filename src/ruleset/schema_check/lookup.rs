//! The schemas rules are checked against, held by the server, so that checking a ruleset makes
//! it read nothing a caller chose:
//! * a CRD target's: the `openAPIV3Schema` of every served version of every CRD, from the watch
//!   of CRDs the ruleset controller keeps on every replica ([`Schemas::crd_applied`] and its
//!   siblings), pruned to what the checker walks, at most [`MAX_HELD_CRD_BYTES`] of them;
//! * a type kube-apiserver serves itself, or an aggregated API's: its group-version's document
//!   of `/openapi/v3` ([`OpenApi`]). Which is which is what the cluster says: a group some CRD
//!   defines is a CRD group, any other is looked up in kube-apiserver's index of documents.
//!
//! The rulesets' admission door looks schemas up for every review, whoever the caller; the
//! controller for the rulesets' status, again when a CRD changes. What is not found, or not
//! had in time ([`FETCH_DEADLINE`]), is said (the review's warnings, the ruleset's
//! `SchemaChecked` condition), and the ruleset is not refused for it.

use super::Schema;
use super::open_api::{OpenApi, Served};
use super::schema::pruned;
use crate::ruleset::Target;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Longest the schemas of one check are waited for (the first list of CRDs, a document of
/// `/openapi/v3`): kube-apiserver gives the whole review 5 s.
pub(crate) const FETCH_DEADLINE: Duration = Duration::from_secs(2);

/// Most bytes of CRD schemas held (pruned, as JSON; their size in memory is a few times that).
/// A CRD past it is not held, and its rulesets' fields are said not to be checked.
pub(crate) const MAX_HELD_CRD_BYTES: u64 = 32 << 20;

/// Most targets looked up for one review (its own and its related parts').
pub(crate) const MAX_LOOKUPS: usize = 4;

/// What was found of one target's schema.
#[derive(Debug, Clone)]
pub(crate) enum Lookup {
    Found(Arc<Schema>),
    /// Not to be had: why, as the warning says it.
    Absent(String),
}

/// The schemas found for one review's targets.
#[derive(Debug, Default, Clone)]
pub(crate) struct Found {
    pub by_target: HashMap<Target, Lookup>,
}

impl Found {
    /// The schema of `target`, when found.
    pub(crate) fn schema(&self, target: &Target) -> Option<&Schema> {
        match self.by_target.get(target) {
            Some(Lookup::Found(s)) => Some(s),
            _ => None,
        }
    }
}

/// One CRD, as held.
#[derive(Debug)]
struct HeldCrd {
    group: String,
    /// Its served versions' schemas, by version.
    versions: HashMap<String, Arc<Schema>>,
    bytes: u64,
    /// Not held: it would take the CRD schemas past [`MAX_HELD_CRD_BYTES`].
    too_large: bool,
}

/// The CRDs held, by name (`<resource>.<group>`).
#[derive(Debug, Default)]
struct Crds {
    by_name: HashMap<String, HeldCrd>,
    /// The groups CRDs define, with how many each.
    groups: HashMap<String, usize>,
    bytes: u64,
    /// The names seen by the list under way (after the watch started again).
    relisted: Option<HashSet<String>>,
}

/// The schemas held, and where the others are read.
pub(crate) struct Schemas {
    crds: RwLock<Crds>,
    /// Whether the CRDs were listed once: before, a CRD's absence means nothing.
    listed: tokio::sync::watch::Sender<bool>,
    open_api: Option<OpenApi>,
}

impl Schemas {
    /// CRD schemas as the controller's watch gives them, and the documents of `/openapi/v3`
    /// read with `client` (`None`: CRDs only).
    pub(crate) fn new(client: Option<kube::Client>) -> Schemas {
        Schemas {
            crds: RwLock::new(Crds::default()),
            listed: tokio::sync::watch::Sender::new(false),
            open_api: client.map(OpenApi::new),
        }
    }

    /// The watch of CRDs (re)started its list.
    pub(crate) fn crds_relisting(&self) {
        self.write().relisted = Some(HashSet::new());
    }

    /// The CRD `name`, whose `spec` (as JSON) is this, was listed, created or changed.
    pub(crate) fn crd_applied(&self, name: &str, spec: &Value) {
        if name.is_empty() {
            return;
        }
        let group = spec["group"].as_str().unwrap_or_default().to_owned();
        let versions: HashMap<String, Arc<Schema>> = spec["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["served"].as_bool() == Some(true))
            .filter_map(|v| {
                let version = v["name"].as_str()?;
                let whole = v.get("schema")?.get("openAPIV3Schema")?;
                let schema = Schema::crd(pruned(whole))
                    .from(format!("the CustomResourceDefinition {name} ({version})"));
                Some((version.to_owned(), Arc::new(schema)))
            })
            .collect();
        let bytes = versions.values().map(|s| s.json_bytes()).sum();
        let mut crds = self.write();
        if let Some(seen) = crds.relisted.as_mut() {
            seen.insert(name.to_owned());
        }
        crds.remove(name);
        let too_large = crds.bytes + bytes > MAX_HELD_CRD_BYTES;
        if too_large {
            tracing::warn!(
                crd = name,
                bytes,
                held = crds.bytes,
                "a CRD's schemas are not held for checking rulesets: they would take the schemas held past {MAX_HELD_CRD_BYTES} bytes"
            );
        }
        crds.insert(
            name.to_owned(),
            HeldCrd {
                group,
                versions: if too_large { HashMap::new() } else { versions },
                bytes: if too_large { 0 } else { bytes },
                too_large,
            },
        );
    }

    /// The CRD named `name` was deleted.
    pub(crate) fn crd_deleted(&self, name: &str) {
        self.write().remove(name);
    }

    /// The list under way is complete: the CRDs it did not see are gone, and their names are
    /// returned (their rulesets are checked again).
    pub(crate) fn crds_listed(&self) -> Vec<String> {
        let gone = {
            let mut crds = self.write();
            let seen = crds.relisted.take().unwrap_or_default();
            let gone: Vec<String> = crds
                .by_name
                .keys()
                .filter(|name| !seen.contains(*name))
                .cloned()
                .collect();
            for name in &gone {
                crds.remove(name);
            }
            gone
        };
        self.listed.send_replace(true);
        gone
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Crds> {
        self.crds.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The schemas of `targets` (the first [`MAX_LOOKUPS`]), within [`FETCH_DEADLINE`].
    pub(crate) async fn lookup(&self, targets: &[Target]) -> Found {
        let mut unique: Vec<&Target> = Vec::new();
        for t in targets {
            if !unique.contains(&t) && unique.len() < MAX_LOOKUPS {
                unique.push(t);
            }
        }
        let found = futures::future::join_all(unique.iter().map(|t| async move {
            tokio::time::timeout(FETCH_DEADLINE, self.one(t))
                .await
                .unwrap_or_else(|_| {
                    Lookup::Absent(format!(
                        "the schema of {t} was not had within {FETCH_DEADLINE:?}"
                    ))
                })
        }))
        .await;
        Found {
            by_target: unique.into_iter().cloned().zip(found).collect(),
        }
    }

    async fn one(&self, target: &Target) -> Lookup {
        let mut listed = self.listed.subscribe();
        // Only the first list is waited for (bounded by the caller's deadline).
        let _ = listed.wait_for(|l| *l).await;
        let name = target.crd_name();
        let crd_group = {
            let crds = self.crds.read().unwrap_or_else(|e| e.into_inner());
            if let Some(crd) = crds.by_name.get(&name) {
                return crd.lookup(&name, &target.version);
            }
            crds.groups.contains_key(&target.group)
        };
        if crd_group {
            return Lookup::Absent(format!("no CustomResourceDefinition {name} is installed"));
        }
        let Some(open_api) = &self.open_api else {
            return Lookup::Absent(format!("no CustomResourceDefinition {name} is installed"));
        };
        match open_api.schema(target).await {
            Served::Schema(schema) => Lookup::Found(Arc::new(schema)),
            Served::No => Lookup::Absent(format!(
                "no CustomResourceDefinition {name} is installed, and kube-apiserver serves no \
                 {} {}",
                if target.group.is_empty() {
                    "core"
                } else {
                    &target.group
                },
                target.version
            )),
            Served::Unknown(why) => Lookup::Absent(why),
        }
    }
}

impl Crds {
    fn remove(&mut self, name: &str) {
        if let Some(old) = self.by_name.remove(name) {
            self.bytes -= old.bytes;
            if let Some(count) = self.groups.get_mut(&old.group) {
                *count -= 1;
                if *count == 0 {
                    self.groups.remove(&old.group);
                }
            }
        }
    }

    fn insert(&mut self, name: String, crd: HeldCrd) {
        self.bytes += crd.bytes;
        *self.groups.entry(crd.group.clone()).or_default() += 1;
        self.by_name.insert(name, crd);
    }
}

impl HeldCrd {
    fn lookup(&self, name: &str, version: &str) -> Lookup {
        if self.too_large {
            return Lookup::Absent(format!(
                "the schemas of the CustomResourceDefinition {name} are not held: they would take \
                 the CRD schemas this server holds past {MAX_HELD_CRD_BYTES} bytes"
            ));
        }
        match self.versions.get(version) {
            Some(schema) => Lookup::Found(schema.clone()),
            None => Lookup::Absent(format!(
                "the CustomResourceDefinition {name} serves no version {version} with a schema"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A CRD of `plural` in `group` with `versions` applied to `schemas`, as its watch gives it.
    fn apply(schemas: &Schemas, group: &str, plural: &str, versions: Value) {
        let spec = json!({"group": group, "names": {"plural": plural}, "versions": versions});
        schemas.crd_applied(&format!("{plural}.{group}"), &spec);
    }

    fn closed(field: &str) -> Value {
        json!({"openAPIV3Schema": {"type": "object", "description": "long words", "properties": {
            "status": {"type": "object", "properties": {field: {"type": "string", "pattern": ".*"}}}}}})
    }

    fn found(schemas: &Schemas, target: &Target) -> Lookup {
        // Paused: the wait for a first list ends at once.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime
            .block_on(schemas.lookup(std::slice::from_ref(target)))
            .by_target
            .remove(target)
            .unwrap()
    }

    fn absent(lookup: Lookup) -> String {
        match lookup {
            Lookup::Absent(why) => why,
            Lookup::Found(s) => panic!("found {s:?}"),
        }
    }

    #[test]
    fn served_versions_of_listed_crds_are_held_pruned_and_gone_ones_dropped_at_the_relist() {
        let schemas = Schemas::new(None);
        let widgets = Target::of("example.com", "v1", "widgets");
        let gadgets = Target::of("example.com", "v1", "gadgets");
        // Before the first list, nothing is known, and nothing is said missing after waiting.
        assert!(absent(found(&schemas, &widgets)).contains("within"));

        schemas.crds_relisting();
        apply(
            &schemas,
            "example.com",
            "widgets",
            json!([
                {"name": "v1", "served": true, "schema": closed("phase")},
                {"name": "v0", "served": false, "schema": closed("old")},
            ]),
        );
        apply(
            &schemas,
            "example.com",
            "gadgets",
            json!([{"name": "v1", "served": true, "schema": closed("size")}]),
        );
        assert!(schemas.crds_listed().is_empty());
        let Lookup::Found(schema) = found(&schemas, &widgets) else {
            panic!("widgets not held")
        };
        assert_eq!(
            schema.origin(),
            "the CustomResourceDefinition widgets.example.com (v1)"
        );
        assert!(
            !format!("{schema:?}").contains("long words")
                && !format!("{schema:?}").contains("pattern"),
            "{schema:?}"
        );
        assert_eq!(
            absent(found(&schemas, &Target::of("example.com", "v0", "widgets"))),
            "the CustomResourceDefinition widgets.example.com serves no version v0 with a schema"
        );
        // A group CRDs define: a resource none defines is missing, not looked up elsewhere.
        assert_eq!(
            absent(found(
                &schemas,
                &Target::of("example.com", "v1", "nothings")
            )),
            "no CustomResourceDefinition nothings.example.com is installed"
        );

        // The watch starts again; gadgets was deleted meanwhile.
        schemas.crds_relisting();
        apply(
            &schemas,
            "example.com",
            "widgets",
            json!([{"name": "v1", "served": true, "schema": closed("phase")}]),
        );
        assert_eq!(schemas.crds_listed(), ["gadgets.example.com"]);
        assert!(matches!(found(&schemas, &gadgets), Lookup::Absent(_)));
        schemas.crd_deleted("widgets.example.com");
        assert!(matches!(found(&schemas, &widgets), Lookup::Absent(_)));
        let crds = schemas.crds.read().unwrap();
        assert_eq!((crds.bytes, crds.groups.len()), (0, 0));
    }

    #[test]
    fn a_crd_past_the_bytes_held_is_said_not_held() {
        let schemas = Schemas::new(None);
        let big = "x".repeat(usize::try_from(MAX_HELD_CRD_BYTES).unwrap());
        schemas.crds_relisting();
        apply(
            &schemas,
            "example.com",
            "giants",
            json!([{"name": "v1", "served": true, "schema": closed(&big)}]),
        );
        schemas.crds_listed();
        let why = absent(found(&schemas, &Target::of("example.com", "v1", "giants")));
        assert!(why.contains("are not held"), "{why}");
        assert_eq!(schemas.crds.read().unwrap().bytes, 0);
    }
}
