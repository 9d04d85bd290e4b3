//! The opaque `continue` token of paginated lists (`?limit=N&continue=...`).
//!
//! A token pins the snapshot a paginated list is read from (`rv`, the first page's
//! resourceVersion, which every page reports) and where the next page starts (`start`, the
//! `<namespace>/<name>` key of its first item; items are ordered by namespace, then name;
//! cluster-scoped objects have an empty namespace). It is base64url (no padding) of
//! `{"rv":N,"start":"ns/name"}`, like kube-apiserver's own tokens, so clients treat it as opaque
//! and it survives URL query encoding untouched. A token that does not decode answers
//! `400 BadRequest` (`invalid continue token: ...`).
//!
//! Maintenance gates are computed on the spot, not read from a snapshot, so their token
//! ([`GateContinueToken`]) pins nothing: it holds the last name a page returned, and the next
//! page is read at the state of the moment, from the first gate after that name. Its fields
//! differ from the operations' token, so neither list accepts the other's (`400`).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

/// Decoded `continue` token.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct ContinueToken {
    /// resourceVersion of the snapshot the listing reads from.
    pub rv: u64,
    /// `<namespace>/<name>` of the first item of the next page (inclusive).
    pub start: String,
}

/// Why a `continue` token was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ContinueTokenError {
    #[error("continue key is not valid: {0}")]
    Malformed(String),
    #[error(
        "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
    )]
    InvalidResourceVersion,
    #[error("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")]
    EmptyStartKey,
    #[error("continue key is not valid: start key must be <namespace>/<name>")]
    InvalidStartKey,
    #[error("continue key is not valid: {0}")]
    NotAGate(crate::index::GateNameError),
}

impl ContinueToken {
    /// A token resuming at the object `namespace/name` (namespace empty when cluster-scoped).
    pub(crate) fn new(rv: u64, namespace: &str, name: &str) -> Self {
        Self {
            rv,
            start: format!("{namespace}/{name}"),
        }
    }

    /// The opaque string for `metadata.continue`.
    pub(crate) fn encode(&self) -> String {
        opaque(self)
    }

    /// Parses a `continue` query parameter.
    pub(crate) fn decode(token: &str) -> Result<Self, ContinueTokenError> {
        let decoded = read(token, |t: &Self| (t.rv, t.start.as_str()))?;
        match decoded.start.split_once('/') {
            Some((_, name)) if !name.is_empty() && !name.contains('/') => Ok(decoded),
            _ => Err(ContinueTokenError::InvalidStartKey),
        }
    }

    /// `(namespace, name)` of the first item of the next page, for comparing against the
    /// `(namespace, name)` list order (comparing the joined string would order `a-b/x` before
    /// `a/x`).
    pub(crate) fn start_key(&self) -> (&str, &str) {
        self.start.split_once('/').unwrap_or(("", &self.start))
    }
}

/// A token's opaque string: its JSON in URL-safe base64. Serializing a struct of a u64 and a
/// String cannot fail.
fn opaque(token: &impl Serialize) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(token).unwrap_or_default())
}

/// The token [`opaque`] wrote into `token`, refused when its resourceVersion is 0 or where the
/// next page starts is empty (`position` reads both off the token).
fn read<T: serde::de::DeserializeOwned>(
    token: &str,
    position: fn(&T) -> (u64, &str),
) -> Result<T, ContinueTokenError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|e| ContinueTokenError::Malformed(e.to_string()))?;
    let decoded: T =
        serde_json::from_slice(&bytes).map_err(|e| ContinueTokenError::Malformed(e.to_string()))?;
    match position(&decoded) {
        (0, _) => Err(ContinueTokenError::InvalidResourceVersion),
        (_, "") => Err(ContinueTokenError::EmptyStartKey),
        _ => Ok(decoded),
    }
}

/// Decoded `continue` token of a list of maintenance gates (see the [module](self)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GateContinueToken {
    /// The resourceVersion of the page that issued it (each page reports its own).
    pub rv: u64,
    /// The name of the last gate of that page: the next page starts after it.
    pub after: String,
}

impl GateContinueToken {
    /// The opaque string for `metadata.continue`.
    pub(crate) fn encode(&self) -> String {
        opaque(self)
    }

    /// Parses a `continue` query parameter: what [`GateContinueToken::encode`] wrote, after a
    /// well-formed gate name.
    pub(crate) fn decode(token: &str) -> Result<Self, ContinueTokenError> {
        let decoded = read(token, |t: &Self| (t.rv, t.after.as_str()))?;
        crate::index::GateScope::parse(&decoded.after).map_err(ContinueTokenError::NotAGate)?;
        Ok(decoded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_token_round_trips_and_neither_list_takes_the_others_token() {
        let t = GateContinueToken {
            rv: 42,
            after: "node.w-1".into(),
        };
        let s = t.encode();
        assert_eq!(GateContinueToken::decode(&s).unwrap(), t);
        let json = URL_SAFE_NO_PAD.decode(&s).unwrap();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&json).unwrap(),
            serde_json::json!({"rv": 42, "after": "node.w-1"})
        );
        let operations = ContinueToken::new(42, "", "node.w-1").encode();
        assert!(matches!(
            GateContinueToken::decode(&operations),
            Err(ContinueTokenError::Malformed(_))
        ));
        assert!(matches!(
            ContinueToken::decode(&s),
            Err(ContinueTokenError::Malformed(_))
        ));
    }

    #[test]
    fn a_gate_token_that_does_not_decode_is_refused() {
        let enc = |s: &str| URL_SAFE_NO_PAD.encode(s.as_bytes());
        for bad in ["%%%", "", "e30"] {
            assert!(
                matches!(
                    GateContinueToken::decode(bad),
                    Err(ContinueTokenError::Malformed(_))
                ),
                "{bad}"
            );
        }
        assert_eq!(
            GateContinueToken::decode(&enc(r#"{"rv":0,"after":"cluster"}"#)),
            Err(ContinueTokenError::InvalidResourceVersion)
        );
        assert_eq!(
            GateContinueToken::decode(&enc(r#"{"rv":1,"after":""}"#)),
            Err(ContinueTokenError::EmptyStartKey)
        );
        let err = GateContinueToken::decode(&enc(r#"{"rv":1,"after":"pod.x"}"#)).unwrap_err();
        assert!(matches!(err, ContinueTokenError::NotAGate(_)), "{err:?}");
        assert!(
            err.to_string()
                .starts_with("continue key is not valid: \"pod.x\" is not a maintenance gate"),
            "{err}"
        );
    }

    #[test]
    fn round_trip() {
        let t = ContinueToken::new(1_721_630_000_000_042, "default", "vm-a-migrating");
        let s = t.encode();
        assert!(!s.contains('='), "no padding: {s}");
        assert!(
            s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "URL-safe: {s}"
        );
        let d = ContinueToken::decode(&s).unwrap();
        assert_eq!(d, t);
        assert_eq!(d.start_key(), ("default", "vm-a-migrating"));
    }

    #[test]
    fn wire_format() {
        let t = ContinueToken::new(7, "ns", "n");
        let json = URL_SAFE_NO_PAD.decode(t.encode()).unwrap();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&json).unwrap(),
            serde_json::json!({"rv": 7, "start": "ns/n"})
        );
        let hand = URL_SAFE_NO_PAD.encode(br#"{"rv":9,"start":"/cluster-op"}"#);
        let d = ContinueToken::decode(&hand).unwrap();
        assert_eq!(d.rv, 9);
        assert_eq!(d.start_key(), ("", "cluster-op"));
    }

    #[test]
    fn cluster_scoped() {
        let t = ContinueToken::new(3, "", "x");
        assert_eq!(t.start, "/x");
        assert_eq!(
            ContinueToken::decode(&t.encode()).unwrap().start_key(),
            ("", "x")
        );
    }

    #[test]
    fn rejects_garbage() {
        let enc = |s: &str| URL_SAFE_NO_PAD.encode(s.as_bytes());
        assert!(matches!(
            ContinueToken::decode("%%%"),
            Err(ContinueTokenError::Malformed(_))
        ));
        assert!(matches!(
            ContinueToken::decode(""),
            Err(ContinueTokenError::Malformed(_))
        ));
        // Standard base64 with padding is not this encoding.
        let padded =
            base64::engine::general_purpose::STANDARD.encode(br#"{"rv":1,"start":"a/b"}x"#);
        assert!(ContinueToken::decode(&padded).is_err());
        assert!(matches!(
            ContinueToken::decode(&enc("not json")),
            Err(ContinueTokenError::Malformed(_))
        ));
        assert!(matches!(
            ContinueToken::decode(&enc(r#"{"rv":1}"#)),
            Err(ContinueTokenError::Malformed(_))
        ));
        assert!(matches!(
            ContinueToken::decode(&enc(r#"{"rv":-1,"start":"a/b"}"#)),
            Err(ContinueTokenError::Malformed(_))
        ));
        assert_eq!(
            ContinueToken::decode(&enc(r#"{"rv":0,"start":"a/b"}"#)),
            Err(ContinueTokenError::InvalidResourceVersion)
        );
        assert_eq!(
            ContinueToken::decode(&enc(r#"{"rv":1,"start":""}"#)),
            Err(ContinueTokenError::EmptyStartKey)
        );
        for bad in ["ab", "a/", "a/b/c"] {
            assert_eq!(
                ContinueToken::decode(&enc(&format!(r#"{{"rv":1,"start":"{bad}"}}"#))),
                Err(ContinueTokenError::InvalidStartKey),
                "{bad}"
            );
        }
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            ContinueTokenError::InvalidResourceVersion.to_string(),
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        );
        assert!(
            ContinueToken::decode("%%%")
                .unwrap_err()
                .to_string()
                .starts_with("continue key is not valid: ")
        );
    }
}
