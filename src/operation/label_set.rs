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
    pub const SUBJECT_UID: &str = "ifo.kubevirt.io/subject-uid";
    pub const SUBJECT_NAME: &str = "ifo.kubevirt.io/subject-name";
    pub const SUBJECT_NAMESPACE: &str = "ifo.kubevirt.io/subject-namespace";
    pub const SUBJECT_KIND: &str = "ifo.kubevirt.io/subject-kind";
    pub const OPERATION: &str = "ifo.kubevirt.io/operation";
    pub const COMPONENT: &str = "ifo.kubevirt.io/component";
    pub const RULESET: &str = "ifo.kubevirt.io/ruleset";
    pub const OWNER_UID: &str = "ifo.kubevirt.io/owner-uid";
    pub const OWNER_NAME: &str = "ifo.kubevirt.io/owner-name";
    pub const OWNER_KIND: &str = "ifo.kubevirt.io/owner-kind";
    pub const OWNER_GROUP: &str = "ifo.kubevirt.io/owner-group";
    pub const OWNER_VERSION: &str = "ifo.kubevirt.io/owner-version";
}

/// The keys records share: the built-in ones, and the well-known node keys rules set on nearly
/// every record and the maintenance gates read. A `static`, so that each is one string at one
/// address: [`Labels`] keeps every key equal to one of them as that very string, which is what
/// lets [`Labels::shared`] find one by its address.
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

/// One of the keys records share, to look up with [`Labels::shared`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedKey(usize);

impl SharedKey {
    /// `ifo.kubevirt.io/node`.
    pub const NODE: SharedKey = SharedKey(12);
    /// `ifo.kubevirt.io/target-node`.
    pub const TARGET_NODE: SharedKey = SharedKey(13);

    fn key(self) -> &'static str {
        SHARED[self.0]
    }
}

/// `key` as a record keeps it: a key built at run time (a rule's, a persisted copy's) that is
/// one of [`SHARED`] as the shared string, so that records do not each hold its text; a static
/// key as it is, unless it is one that [`Labels::shared`] finds by address (two length
/// comparisons: every record's built-in keys pass here).
pub(super) fn shared_key(key: impl Into<LabelKey>) -> LabelKey {
    let found = |key: &str| SHARED.iter().find(|k| **k == key).copied();
    match key.into() {
        LabelKey::Owned(key) => found(&key).map_or(LabelKey::Owned(key), LabelKey::Borrowed),
        LabelKey::Borrowed(key) => LabelKey::Borrowed(
            [SharedKey::NODE, SharedKey::TARGET_NODE]
                .map(SharedKey::key)
                .into_iter()
                .find(|k| *k == key)
                .unwrap_or(key),
        ),
    }
}

/// The labels of a record, sorted by key (the order they are served in).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels(Vec<(LabelKey, Box<str>)>);

impl Labels {
    /// The value of one of the shared keys, if set: found by the key's address, with no text
    /// compared (every key equal to one of them is kept as it, see [`shared_key`]). What the
    /// index reads of every record it keeps in the maintenance gates, on every change.
    pub fn shared(&self, key: SharedKey) -> Option<&str> {
        let key = key.key();
        self.0
            .iter()
            .find(|(k, _)| matches!(k, Cow::Borrowed(b) if std::ptr::eq(*b, key)))
            .map(|(_, v)| &**v)
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        let i = self.position(key).ok()?;
        Some(&self.0[i].1)
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
        match self.position(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (key, value));
                None
            }
        }
    }

    /// Unsets `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Box<str>> {
        let i = self.position(key).ok()?;
        Some(self.0.remove(i).1)
    }

    /// Every label, by key.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    /// How many labels are set.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no label is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Gives back the room left over from building: a record keeps its labels as they are.
    pub(crate) fn shrink(&mut self) {
        self.0.shrink_to_fit();
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(key))
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
    /// the shared string and found by address; an unset one is not found.
    #[test]
    fn shared_keys_are_found_however_they_were_set() {
        let built = String::from("ifo.kubevirt.io/") + "node";
        let mut labels: Labels = [(built, "w1"), ("a".to_owned(), "x")].into_iter().collect();
        assert_eq!(labels.shared(SharedKey::NODE), Some("w1"));
        assert_eq!(labels.shared(SharedKey::TARGET_NODE), None);
        labels.insert("ifo.kubevirt.io/target-node", "w2");
        assert_eq!(labels.shared(SharedKey::TARGET_NODE), Some("w2"));
        assert_eq!(labels.get(ifo_model::TARGET_NODE_LABEL), Some("w2"));
        labels.remove(ifo_model::NODE_LABEL);
        assert_eq!(labels.shared(SharedKey::NODE), None);
        for k in SHARED {
            assert!(matches!(shared_key(k.to_owned()), LabelKey::Borrowed(_)));
        }
    }
}
