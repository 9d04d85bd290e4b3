//! The related values: per ruleset, the label values its related parts (`spec.related`) gave
//! for each related object, by the namespace and name of the subject it relates to. What
//! labels a subject's operations below the subject's own label expressions.
//!
//! Only the values are kept, never the objects (no full-object cache), and only the values
//! that set a label: an empty value sets none, and an object none of whose values is set is
//! not held at all. So the table holds at most one entry per object of each related target in
//! the namespaces its ruleset covers (a VirtualMachine ruleset's part on
//! VirtualMachineInstances: one per running VMI, each a few short strings).

use std::collections::{BTreeMap, HashMap, HashSet};

/// Where a subject is: its namespace (`""` for a cluster-scoped one) and name.
pub(super) type Place = (String, String);

/// One related object, as a related part of a ruleset saw it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RelatedObject<'a> {
    /// Its namespace (`None`: cluster-scoped).
    pub namespace: Option<&'a str>,
    /// Its name.
    pub name: &'a str,
    /// Its uid, by which it is deleted.
    pub uid: &'a str,
}

/// What one related object gave.
#[derive(Debug, Clone, PartialEq)]
struct Held {
    uid: String,
    /// Label keys and non-empty values, in the order of the part's expressions, each key once.
    values: Vec<(String, String)>,
}

/// The objects one related part holds values of.
#[derive(Debug, Default)]
struct Part {
    /// By namespace (`""`: cluster-scoped), then name: the subject they label.
    by_place: HashMap<String, HashMap<String, Held>>,
    /// The place of each object held, by uid (deletions name only the uid).
    by_uid: HashMap<String, Place>,
}

impl Part {
    fn get(&self, namespace: &str, name: &str) -> Option<&Held> {
        self.by_place.get(namespace)?.get(name)
    }

    fn remove(&mut self, (namespace, name): &Place) {
        if let Some(names) = self.by_place.get_mut(namespace) {
            if let Some(held) = names.remove(name) {
                self.by_uid.remove(&held.uid);
            }
            if names.is_empty() {
                self.by_place.remove(namespace);
            }
        }
    }
}

/// The related values of every ruleset's subjects (see the module's documentation).
#[derive(Debug, Default)]
pub(crate) struct RelatedValues {
    /// By ruleset, then part (its index in `spec.related`).
    rulesets: HashMap<String, BTreeMap<usize, Part>>,
}

fn place(namespace: Option<&str>, name: &str) -> Place {
    (namespace.unwrap_or_default().to_owned(), name.to_owned())
}

impl RelatedValues {
    /// The labels `ruleset`'s related parts give the subject `name` in `namespace`, each key
    /// once: a later part's value wins over an earlier one's, as a later label expression's
    /// does. Empty for a ruleset without related parts (one lookup).
    pub(crate) fn get(
        &self,
        ruleset: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Vec<(&str, &str)> {
        let mut out: Vec<(&str, &str)> = Vec::new();
        let Some(parts) = self.rulesets.get(ruleset) else {
            return out;
        };
        let namespace = namespace.unwrap_or_default();
        for held in parts.values().filter_map(|p| p.get(namespace, name)) {
            for (key, value) in &held.values {
                match out.iter_mut().find(|(k, _)| k == key) {
                    Some(slot) => slot.1 = value,
                    None => out.push((key, value)),
                }
            }
        }
        out
    }

    /// [`RelatedValues::get`], owned.
    pub(crate) fn get_owned(
        &self,
        ruleset: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Vec<(String, String)> {
        self.get(ruleset, namespace, name)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    /// Part `part` of `ruleset` evaluated `object`: `values` are its label expressions'
    /// results, in order; `None` where the expression failed, which keeps the value it had
    /// (unknown is not "no label"). Returns the subject's place when what it gets changed.
    pub(crate) fn set(
        &mut self,
        ruleset: &str,
        part: usize,
        object: RelatedObject<'_>,
        values: Vec<(String, Option<String>)>,
    ) -> Option<Place> {
        let at = place(object.namespace, object.name);
        let before = self.get_owned(ruleset, object.namespace, object.name);
        let held = self
            .rulesets
            .get(ruleset)
            .and_then(|p| p.get(&part)?.get(&at.0, &at.1));
        // A new object under the same name starts afresh: nothing of the old one is kept.
        let previous = held.filter(|h| h.uid == object.uid);
        let mut resolved: Vec<(String, String)> = Vec::with_capacity(values.len());
        for (key, value) in values {
            let value = match value {
                Some(value) => value,
                None => previous
                    .and_then(|h| h.values.iter().find(|(k, _)| *k == key))
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default(),
            };
            resolved.retain(|(k, _)| *k != key);
            resolved.push((key, value));
        }
        resolved.retain(|(_, v)| !v.is_empty());
        let parts = self.rulesets.entry(ruleset.to_owned()).or_default();
        let objects = parts.entry(part).or_default();
        objects.remove(&at);
        if !resolved.is_empty() {
            objects.by_uid.insert(object.uid.to_owned(), at.clone());
            objects.by_place.entry(at.0.clone()).or_default().insert(
                at.1.clone(),
                Held {
                    uid: object.uid.to_owned(),
                    values: resolved,
                },
            );
        }
        self.tidy(ruleset);
        self.changed(ruleset, at, before)
    }

    /// The related object `uid` of part `part` of `ruleset` is gone. Returns the place of the
    /// subject it labelled, when what that gets changed.
    pub(crate) fn remove(&mut self, ruleset: &str, part: usize, uid: &str) -> Option<Place> {
        let at = self
            .rulesets
            .get(ruleset)?
            .get(&part)?
            .by_uid
            .get(uid)?
            .clone();
        let before = self.get_owned(ruleset, Some(&at.0), &at.1);
        if let Some(objects) = self
            .rulesets
            .get_mut(ruleset)
            .and_then(|p| p.get_mut(&part))
        {
            objects.remove(&at);
        }
        self.tidy(ruleset);
        self.changed(ruleset, at, before)
    }

    /// A list of part `part` of `ruleset` in `namespace` (`None`: everywhere) saw exactly the
    /// objects `present` (by uid): those held there that it did not see are gone. Returns the
    /// places of the subjects whose values changed.
    pub(crate) fn resync(
        &mut self,
        ruleset: &str,
        part: usize,
        namespace: Option<&str>,
        present: &HashSet<String>,
    ) -> Vec<Place> {
        let gone: Vec<String> = self
            .rulesets
            .get(ruleset)
            .and_then(|p| p.get(&part))
            .map(|objects| {
                objects
                    .by_uid
                    .iter()
                    .filter(|(uid, (ns, _))| {
                        namespace.is_none_or(|n| n == ns) && !present.contains(*uid)
                    })
                    .map(|(uid, _)| uid.clone())
                    .collect()
            })
            .unwrap_or_default();
        gone.iter()
            .filter_map(|uid| self.remove(ruleset, part, uid))
            .collect()
    }

    /// `ruleset` now has `parts` related parts: what the others held is forgotten. Its
    /// subjects get the change at their next evaluation (a ruleset that changes is listed
    /// again).
    pub(crate) fn retain_parts(&mut self, ruleset: &str, parts: usize) {
        if let Some(held) = self.rulesets.get_mut(ruleset) {
            held.retain(|index, _| *index < parts);
        }
        self.tidy(ruleset);
    }

    /// `ruleset` is gone: everything it held is forgotten.
    pub(crate) fn forget(&mut self, ruleset: &str) {
        self.rulesets.remove(ruleset);
    }

    /// How many related objects are held, over every ruleset and part.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.rulesets
            .values()
            .flat_map(|parts| parts.values())
            .map(|p| p.by_uid.len())
            .sum()
    }

    /// Drops what holds nothing any more, so that a ruleset without values costs nothing.
    fn tidy(&mut self, ruleset: &str) {
        if let Some(parts) = self.rulesets.get_mut(ruleset) {
            parts.retain(|_, p| !p.by_uid.is_empty());
            if parts.is_empty() {
                self.rulesets.remove(ruleset);
            }
        }
    }

    fn changed(&self, ruleset: &str, at: Place, before: Vec<(String, String)>) -> Option<Place> {
        (self.get_owned(ruleset, Some(&at.0), &at.1) != before).then_some(at)
    }
}

/// The labels an operation gets below the built-in and static ones, lowest precedence first
/// (a later duplicate key wins in `build_labels`): the related values, then the subject's own
/// label expressions. An own value that is empty leaves its key to a related value, if any:
/// an empty value means "no label".
pub(super) fn merge_labels<'a>(
    related: &[(&'a str, &'a str)],
    own: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut out: Vec<(&str, &str)> = related.to_vec();
    out.extend(
        own.iter()
            .filter(|(key, value)| !value.is_empty() || !related.iter().any(|(k, _)| k == key)),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: &str = "ifo.kubevirt.io/node";
    const TARGET: &str = "ifo.kubevirt.io/target-node";

    fn vmi<'a>(name: &'a str, uid: &'a str) -> RelatedObject<'a> {
        RelatedObject {
            namespace: Some("vms"),
            name,
            uid,
        }
    }

    fn values(pairs: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_owned)))
            .collect()
    }

    fn place_of(name: &str) -> Option<Place> {
        Some(("vms".to_owned(), name.to_owned()))
    }

    #[test]
    fn values_are_kept_per_subject_and_only_what_sets_a_label() {
        let mut table = RelatedValues::default();
        assert_eq!(
            table.set(
                "vm-rules",
                0,
                vmi("vm1", "u1"),
                values(&[(NODE, Some("node-a")), (TARGET, Some(""))])
            ),
            place_of("vm1")
        );
        assert_eq!(
            table.get("vm-rules", Some("vms"), "vm1"),
            [(NODE, "node-a")]
        );
        assert!(table.get("vm-rules", Some("vms"), "vm2").is_empty());
        assert!(table.get("other", Some("vms"), "vm1").is_empty());
        assert!(table.get("vm-rules", Some("elsewhere"), "vm1").is_empty());

        // The same values again change nothing.
        let same = values(&[(NODE, Some("node-a")), (TARGET, Some(""))]);
        assert_eq!(table.set("vm-rules", 0, vmi("vm1", "u1"), same), None);

        // An object whose values are all empty is not held at all.
        let none = values(&[(NODE, Some("")), (TARGET, Some(""))]);
        assert_eq!(
            table.set("vm-rules", 0, vmi("vm1", "u1"), none.clone()),
            place_of("vm1")
        );
        assert_eq!(table.len(), 0);
        assert_eq!(table.set("vm-rules", 0, vmi("vm2", "u2"), none), None);
        assert_eq!(table.len(), 0);
        assert!(table.rulesets.is_empty(), "nothing left behind");
    }

    #[test]
    fn a_failed_expression_keeps_its_value_and_a_new_object_starts_afresh() {
        let mut table = RelatedValues::default();
        let at = |n: &str, t: &str| values(&[(NODE, Some(n)), (TARGET, Some(t))]);
        table.set("vm-rules", 0, vmi("vm1", "u1"), at("node-a", "node-b"));
        // The migration target failed to evaluate: unknown, not gone.
        let failed = values(&[(NODE, Some("node-a")), (TARGET, None)]);
        assert_eq!(table.set("vm-rules", 0, vmi("vm1", "u1"), failed), None);
        assert_eq!(
            table.get("vm-rules", Some("vms"), "vm1"),
            [(NODE, "node-a"), (TARGET, "node-b")]
        );
        // The VMI was recreated (another uid): nothing of the old one's values stays.
        let failed = values(&[(NODE, Some("node-c")), (TARGET, None)]);
        assert_eq!(
            table.set("vm-rules", 0, vmi("vm1", "u9"), failed),
            place_of("vm1")
        );
        assert_eq!(
            table.get("vm-rules", Some("vms"), "vm1"),
            [(NODE, "node-c")]
        );
        // Deleting the old uid does not touch the new object.
        assert_eq!(table.remove("vm-rules", 0, "u1"), None);
        assert_eq!(table.remove("vm-rules", 0, "u9"), place_of("vm1"));
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn a_later_part_wins_and_a_relist_drops_what_it_did_not_see() {
        let mut table = RelatedValues::default();
        table.set(
            "rs",
            0,
            vmi("vm1", "u1"),
            values(&[(NODE, Some("a")), ("example.com/x", Some("1"))]),
        );
        table.set("rs", 1, vmi("vm1", "p1"), values(&[(NODE, Some("b"))]));
        assert_eq!(
            table.get("rs", Some("vms"), "vm1"),
            [(NODE, "b"), ("example.com/x", "1")]
        );
        table.set("rs", 0, vmi("vm2", "u2"), values(&[(NODE, Some("c"))]));
        table.set(
            "rs",
            0,
            RelatedObject {
                namespace: Some("other"),
                name: "vm3",
                uid: "u3",
            },
            values(&[(NODE, Some("d"))]),
        );
        assert_eq!(table.len(), 4);

        // A relist of namespace vms by part 0 saw only u1: vm2's values are gone, vm3 (in
        // another namespace) and part 1 are not concerned.
        let present: HashSet<String> = ["u1".to_owned()].into();
        assert_eq!(
            table.resync("rs", 0, Some("vms"), &present),
            vec![("vms".to_owned(), "vm2".to_owned())]
        );
        assert_eq!(table.len(), 3);
        // A part removed from the ruleset: its values are forgotten.
        table.retain_parts("rs", 1);
        assert_eq!(
            table.get("rs", Some("vms"), "vm1"),
            [(NODE, "a"), ("example.com/x", "1")]
        );
        table.forget("rs");
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn own_labels_win_over_related_ones_except_where_they_are_empty() {
        let related = [(NODE, "node-a"), (TARGET, "node-b")];
        let own = [(NODE, "pinned"), (TARGET, ""), ("example.com/vm", "vm1")];
        let merged = merge_labels(&related, &own);
        // build_labels lets a later duplicate win: the own node, the related target.
        assert_eq!(
            merged,
            [
                (NODE, "node-a"),
                (TARGET, "node-b"),
                (NODE, "pinned"),
                ("example.com/vm", "vm1")
            ]
        );
        // Without a related value, an empty own value is kept as it always was.
        assert_eq!(merge_labels(&[], &[(TARGET, "")]), [(TARGET, "")]);
    }
}
