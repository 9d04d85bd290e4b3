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

/// The labels of a record, sorted by key (the order they are served in).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels(Vec<(LabelKey, Box<str>)>);

impl Labels {
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
        let key = key.into();
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
}
