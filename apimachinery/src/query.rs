//! The query string of a request, decoded once.
//!
//! A parameter may be repeated (`?watch=false&watch=true`). Go's `url.Values.Get` and the
//! apimachinery conversions behind `ListOptions` read the **first** value, so kube-apiserver
//! authorizes and serves a request by its first values. Everything here does the same, and
//! authorization and handling both read this one decoded form, so they can never disagree about
//! what a request asks for.

/// Decoded `key=value` pairs in request order (`+` is a space, as Go's `url.ParseQuery` has it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Decodes `raw` (the part after `?`, if any).
    pub fn parse(raw: Option<&str>) -> Query {
        let pairs = raw
            .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
            .unwrap_or_default();
        Query { pairs }
    }

    /// The first value of `key` (which may be empty), like Go's `url.Values.Get`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The first value of `key` unless it is absent or empty: what `ListOptions` decoding treats
    /// as "not set".
    pub fn non_empty(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.is_empty())
    }

    /// A boolean the way apimachinery converts a query value to `bool`: absent is false; a
    /// first value of `0` or `false` (any case) is false; anything else, the empty string
    /// included, is true.
    pub fn flag(&self, key: &str) -> bool {
        self.get(key)
            .is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_value_of_a_repeated_parameter_counts() {
        let q = Query::parse(Some(
            "watch=false&watch=true&fieldSelector=metadata.name%3Dx&fieldSelector=",
        ));
        assert!(!q.flag("watch"));
        assert_eq!(q.get("fieldSelector"), Some("metadata.name=x"));
        let q = Query::parse(Some("fieldSelector=&fieldSelector=metadata.name%3Dx"));
        assert_eq!(q.get("fieldSelector"), Some(""));
        assert_eq!(q.non_empty("fieldSelector"), None);
    }

    #[test]
    fn flags_follow_apimachinery_conversion() {
        for (raw, want) in [
            ("", false),
            ("watch=0", false),
            ("watch=false", false),
            ("watch=FALSE", false),
            ("watch=False", false),
            ("watch=", true),
            ("watch=1", true),
            ("watch=true", true),
            ("watch=yes", true),
            ("watch", true),
        ] {
            assert_eq!(Query::parse(Some(raw)).flag("watch"), want, "{raw}");
        }
        assert!(!Query::parse(None).flag("watch"));
    }

    #[test]
    fn values_are_decoded_once() {
        let q = Query::parse(Some("labelSelector=a+in+(b%2Cc)&x=%2541"));
        assert_eq!(q.get("labelSelector"), Some("a in (b,c)"));
        assert_eq!(q.get("x"), Some("%41"));
    }
}
