//! A record's labels, kept small: every record has a dozen or more (the built-ins name its
//! subject, owner, operation, component and ruleset), and tens of thousands of records may be in
//! memory at once. As a `BTreeMap<String, String>` they cost about 2.3 KB a record (its nodes
//! are sized for eleven entries each, and every key is a string of its own); as one sorted
//! vector whose built-in keys are static strings, under half that.

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeMap, Serializer};

/// A label key: the built-in ones are static strings shared by every record; the ruleset's own
/// keys are owned.
pub type LabelKey = Cow<'static, str>;

/// The built-in label keys, `ifo.kubevirt.io/` and a name.
pub(crate) mod key {
    pub(crate) const SUBJECT_UID: &str = "ifo.kubevirt.io/subject-uid";
    pub(crate) const SUBJECT_NAME: &str = "ifo.kubevirt.io/subject-name";
    pub(crate) const SUBJECT_NAMESPACE: &str = "ifo.kubevirt.io/subject-namespace";
    pub(crate) const SUBJECT_KIND: &str = "ifo.kubevirt.io/subject-kind";
    pub(crate) const OPERATION: &str = "ifo.kubevirt.io/operation";
    pub(crate) const COMPONENT: &str = "ifo.kubevirt.io/component";
    pub(crate) const RULESET: &str = "ifo.kubevirt.io/ruleset";
    pub(crate) const OWNER_UID: &str = "ifo.kubevirt.io/owner-uid";
    pub(crate) const OWNER_NAME: &str = "ifo.kubevirt.io/owner-name";
    pub(crate) const OWNER_KIND: &str = "ifo.kubevirt.io/owner-kind";
    pub(crate) const OWNER_GROUP: &str = "ifo.kubevirt.io/owner-group";
    pub(crate) const OWNER_VERSION: &str = "ifo.kubevirt.io/owner-version";
}

/// The keys records share: the built-in ones, and the well-known node keys rules set on nearly
/// every record and the maintenance gates read. A record keeps every key equal to one of them as
/// the one static string, so that records do not each hold its text.
static SHARED: [&str; 14] = [
    key::SUBJECT_UID,
    key::SUBJECT_NAME,
    key::SUBJECT_NAMESPACE,
    key::SUBJECT_KIND,
    key::OPERATION,
    key::COMPONENT,
    key::RULESET,
    key::OWNER_UID,
    key::OWNER_NAME,
    key::OWNER_KIND,
    key::OWNER_GROUP,
    key::OWNER_VERSION,
    ifo_model::NODE_LABEL,
    ifo_model::TARGET_NODE_LABEL,
];

/// One of the node keys, whose place [`Labels`] keeps: to look up with [`Labels::node`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeKey(usize);

impl NodeKey {
    /// `ifo.kubevirt.io/node`.
    pub const NODE: NodeKey = NodeKey(0);
    /// `ifo.kubevirt.io/target-node`.
    pub const TARGET_NODE: NodeKey = NodeKey(1);

    /// The node key `key` is, if it is one.
    pub(crate) fn of(key: &str) -> Option<NodeKey> {
        [ifo_model::NODE_LABEL, ifo_model::TARGET_NODE_LABEL]
            .iter()
            .position(|k| *k == key)
            .map(NodeKey)
    }
}

/// `key` as a record keeps it: a key built at run time (a rule's, a persisted copy's) that is
/// one of [`SHARED`] as the shared string; any other as it is.
pub(super) fn shared_key(key: impl Into<LabelKey>) -> LabelKey {
    match key.into() {
        LabelKey::Owned(key) => SHARED
            .iter()
            .find(|k| **k == key)
            .map_or(LabelKey::Owned(key), |k| LabelKey::Borrowed(k)),
        borrowed => borrowed,
    }
}

/// Where a node key sits among the labels when it is not set.
const UNSET: u32 = u32::MAX;

/// The labels of a record, sorted by key (the order they are served in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels {
    entries: Vec<(LabelKey, Box<str>)>,
    /// Where each node key sits in `entries` (by [`NodeKey`]; [`UNSET`]: not set), kept as
    /// labels are set and unset: the index reads both node keys of every record it applies (the
    /// active counts and the maintenance gates), and a search would read most of the labels to
    /// find one or learn it is not set. In 32 bits, the room a `Vec`'s alignment leaves anyway:
    /// a record holds nowhere near 2^32 labels, at 40 bytes each.
    nodes: [u32; 2],
    /// The node names behind node keys whose label value had to be shortened or changed to be
    /// a valid label value (a node name may be 253 characters, a label value 63): the gates key
    /// on the node's name, never on a value that merely stands for it. Boxed and rare: most
    /// node names are valid label values.
    names: Option<Box<[Option<Box<str>>; 2]>>,
}

impl Default for Labels {
    fn default() -> Labels {
        Labels {
            entries: Vec::new(),
            nodes: [UNSET; 2],
            names: None,
        }
    }
}

impl Labels {
    /// The node a node key names, if set: the node's own name (see [`Labels::set_node_name`]),
    /// else the label's value, read at its place, with no label searched.
    pub fn node(&self, key: NodeKey) -> Option<&str> {
        let at = self.nodes[key.0];
        if at == UNSET {
            return None;
        }
        match self.names.as_ref().and_then(|n| n[key.0].as_deref()) {
            Some(name) => Some(name),
            None => Some(&self.entries[at as usize].1),
        }
    }

    /// The node key `key`, set, stands for the node `name`, which its label value could not hold
    /// as it is: [`Labels::node`] answers `name`. Cleared when the key is set again or unset.
    pub(crate) fn set_node_name(&mut self, key: NodeKey, name: &str) {
        if self.nodes[key.0] != UNSET {
            self.names.get_or_insert_with(Default::default)[key.0] = Some(name.into());
        }
    }

    fn forget_node_name(&mut self, key: NodeKey) {
        if let Some(names) = &mut self.names {
            names[key.0] = None;
            if names.iter().all(Option::is_none) {
                self.names = None;
            }
        }
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        let i = self.position(key).ok()?;
        Some(&self.entries[i].1)
    }

    /// Whether `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// Sets `key` to `value`, returning the value it replaced.
    pub fn insert(
        &mut self,
        key: impl Into<LabelKey>,
        value: impl Into<Box<str>>,
    ) -> Option<Box<str>> {
        let key = shared_key(key);
        let value = value.into();
        if let Some(node) = NodeKey::of(&key) {
            self.forget_node_name(node);
        }
        match self.position(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                let node = NodeKey::of(&key);
                self.entries.insert(i, (key, value));
                for at in self.nodes.iter_mut().filter(|at| **at != UNSET) {
                    if *at as usize >= i {
                        *at += 1;
                    }
                }
                if let Some(node) = node {
                    self.nodes[node.0] = i as u32;
                }
                None
            }
        }
    }

    /// Unsets `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Box<str>> {
        let i = self.position(key).ok()?;
        if let Some(node) = NodeKey::of(key) {
            self.forget_node_name(node);
        }
        for at in self.nodes.iter_mut().filter(|at| **at != UNSET) {
            match (*at as usize).cmp(&i) {
                std::cmp::Ordering::Equal => *at = UNSET,
                std::cmp::Ordering::Greater => *at -= 1,
                std::cmp::Ordering::Less => {}
            }
        }
        Some(self.entries.remove(i).1)
    }

    /// Every label, by key.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.entries.iter().map(|(k, v)| (&**k, &**v))
    }

    /// How many labels are set.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no label is set.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Gives back the room left over from building: a record keeps its labels as they are.
    pub(crate) fn shrink(&mut self) {
        self.entries.shrink_to_fit();
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| (**k).cmp(key))
    }
}

impl std::ops::Index<&str> for Labels {
    type Output = str;

    /// The value of `key`; panics when it is not set, like a map's index.
    fn index(&self, key: &str) -> &str {
        self.get(key).unwrap_or_else(|| panic!("no label {key:?}"))
    }
}

impl<K: Into<LabelKey>, V: Into<Box<str>>> FromIterator<(K, V)> for Labels {
    /// The labels of `pairs`; of two with the same key, the later wins.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Labels {
        let mut labels = Labels::default();
        for (k, v) in pairs {
            labels.insert(k, v);
        }
        labels.shrink();
        labels
    }
}

impl Serialize for Labels {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_sorted_with_the_last_value_of_a_key() {
        let mut labels: Labels = [("b", "1"), ("a", "2"), ("b", "3")].into_iter().collect();
        assert_eq!(labels.iter().collect::<Vec<_>>(), [("a", "2"), ("b", "3")]);
        assert_eq!(labels.insert("c".to_string(), "4"), None);
        assert_eq!(labels.insert("a", "5").as_deref(), Some("2"));
        assert_eq!(labels.get("a"), Some("5"));
        assert_eq!(&labels["c"], "4");
        assert!(labels.contains_key("b") && !labels.contains_key("d"));
        assert_eq!(labels.remove("b").as_deref(), Some("3"));
        assert_eq!(labels.remove("b"), None);
        assert_eq!(labels.len(), 2);
        assert_eq!(
            serde_json::to_string(&labels).unwrap(),
            r#"{"a":"5","c":"4"}"#
        );
    }

    /// However a shared key is given (a literal, a string built at run time), it is kept as
    /// the shared string; a node key is found at its place, however labels were set and unset
    /// around it.
    #[test]
    fn shared_keys_are_kept_once_and_node_keys_found_however_labels_change() {
        for k in SHARED {
            assert!(matches!(shared_key(k.to_owned()), LabelKey::Borrowed(_)));
        }
        let built = String::from("ifo.kubevirt.io/") + "node";
        let mut labels: Labels = [(built, "w1"), ("a".to_owned(), "x")].into_iter().collect();
        assert_eq!(labels.node(NodeKey::NODE), Some("w1"));
        assert_eq!(labels.node(NodeKey::TARGET_NODE), None);

        // Keys sorting before, between and after the node keys, set and unset at random: each
        // node key's place always names its value, as a search by text finds it.
        let keys = [
            "a",
            ifo_model::NODE_LABEL,
            "ifo.kubevirt.io/operation",
            ifo_model::TARGET_NODE_LABEL,
            "z",
            "ifo.kubevirt.io/o",
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        for step in 0..2_000 {
            let key = keys[rng.usize(..keys.len())];
            if rng.bool() {
                labels.insert(key.to_owned(), format!("v{step}"));
            } else {
                labels.remove(key);
            }
            for (node, text) in [
                (NodeKey::NODE, ifo_model::NODE_LABEL),
                (NodeKey::TARGET_NODE, ifo_model::TARGET_NODE_LABEL),
            ] {
                assert_eq!(labels.node(node), labels.get(text), "step {step}");
            }
        }
    }

    #[test]
    fn a_node_key_names_the_node_whose_name_its_value_could_not_hold() {
        let long = format!("{}.example.com", "n".repeat(60));
        let mut labels: Labels = [(ifo_model::NODE_LABEL, "short-hash")]
            .into_iter()
            .collect();
        labels.set_node_name(NodeKey::NODE, &long);
        assert_eq!(labels.node(NodeKey::NODE), Some(long.as_str()));
        assert_eq!(labels.get(ifo_model::NODE_LABEL), Some("short-hash"));
        // Not set: nothing to name.
        labels.set_node_name(NodeKey::TARGET_NODE, &long);
        assert_eq!(labels.node(NodeKey::TARGET_NODE), None);
        // Set again, the value is the node again.
        labels.insert(ifo_model::NODE_LABEL, "w1");
        assert_eq!(labels.node(NodeKey::NODE), Some("w1"));
        labels.set_node_name(NodeKey::NODE, &long);
        labels.remove(ifo_model::NODE_LABEL);
        assert_eq!(labels.node(NodeKey::NODE), None);
        assert!(labels.names.is_none());
    }
}
