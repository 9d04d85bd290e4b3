//! The doors' key: a secret in the path kube-apiserver calls the admission doors at
//! (`/admission/<key>/evictions`), which proves a review is kube-apiserver's where nothing else
//! can — a managed control plane presents no client certificate to webhooks. The server makes it
//! with its serving certificate (`SERVING_CERTIFICATE_SECRET`), keeps it in the same Secret, and
//! writes it into the path of each webhook whose `caBundle` it writes: only kube-apiserver, and
//! whoever may read the Secret or the webhook configurations (cluster administrators), knows it.
//! While the server has a key, a review at any other path of a door is refused before its body
//! is read, unless its caller proved itself with a client certificate.

use std::fmt;
use std::sync::Arc;

/// The first segment of every door's path.
const PREFIX: &str = "/admission/";

/// Random bytes in a key: 240 bits, 60 hex digits, within the 63 characters of a DNS label.
const KEY_BYTES: usize = 30;

/// The doors' key (see the [module](self)): [`KEY_BYTES`] random bytes in lowercase hex, as a
/// webhook's Service path takes a segment (kube-apiserver refuses any segment that is not a
/// lowercase RFC 1123 subdomain: no capitals, no `_`).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct DoorKey(Arc<str>);

impl fmt::Debug for DoorKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DoorKey(…)")
    }
}

/// `bytes` bytes of the system's random source, in lower-case hex.
pub(crate) fn random_hex(bytes: usize) -> anyhow::Result<String> {
    use ring::rand::SecureRandom as _;
    let mut random = vec![0u8; bytes];
    ring::rand::SystemRandom::new()
        .fill(&mut random)
        .map_err(|_| anyhow::anyhow!("the system's random source failed"))?;
    Ok(random
        .iter()
        .fold(String::with_capacity(2 * bytes), |mut hex, b| {
            use std::fmt::Write as _;
            let _ = write!(hex, "{b:02x}");
            hex
        }))
}

impl DoorKey {
    /// A new key, from the system's random source.
    pub(crate) fn generate() -> anyhow::Result<DoorKey> {
        Ok(DoorKey(random_hex(KEY_BYTES)?.into()))
    }

    /// A key as kept; `None` when `text` is not one.
    pub(crate) fn parse(text: &str) -> Option<DoorKey> {
        (text.len() == 2 * KEY_BYTES
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| DoorKey(text.into()))
    }

    /// As kept and written in paths.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `path` is a door's path under this key (`/admission/<key>/…`), compared in time
    /// that does not depend on where a wrong key differs.
    pub(crate) fn opens(&self, path: &str) -> bool {
        let Some(segment) = path
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once('/'))
            .map(|(segment, _)| segment)
        else {
            return false;
        };
        let (a, b) = (segment.as_bytes(), self.0.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    /// `path`, a door's path with or without a key (`/admission/evictions`,
    /// `/admission/<old key>/evictions`), with this key; `None` for a path that is not a door's.
    pub(crate) fn in_path(&self, path: &str, doors: &[&str]) -> Option<String> {
        let rest = path.strip_prefix(PREFIX)?;
        let door = match rest.split_once('/') {
            Some((first, after)) if !doors.contains(&first) => after,
            _ => rest,
        };
        let first = door.split('/').next().unwrap_or_default();
        doors
            .contains(&first)
            .then(|| format!("{PREFIX}{}/{door}", self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOORS: &[&str] = &["rulesets", "evictions"];

    #[test]
    fn a_key_is_random_and_read_back_as_kept() {
        let a = DoorKey::generate().unwrap();
        let b = DoorKey::generate().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 60);
        assert_eq!(DoorKey::parse(a.as_str()), Some(a.clone()));
        let upper = a.as_str().to_uppercase();
        for wrong in [
            "",
            "short",
            "evictions",
            &format!("{}a", a.as_str()),
            &upper,
        ] {
            assert_eq!(DoorKey::parse(wrong), None, "{wrong}");
        }
        assert_eq!(format!("{a:?}"), "DoorKey(…)", "never logged");
    }

    #[test]
    fn only_its_own_paths_open_the_doors() {
        let key = DoorKey::generate().unwrap();
        let k = key.as_str();
        assert!(key.opens(&format!("/admission/{k}/evictions")));
        assert!(key.opens(&format!("/admission/{k}/evictions/standby")));
        assert!(key.opens(&format!("/admission/{k}/rulesets")));
        let other = DoorKey::generate().unwrap();
        for path in [
            "/admission/evictions".to_owned(),
            "/admission/evictions/standby".to_owned(),
            format!("/admission/{}/evictions", other.as_str()),
            format!("/admission/{k}"),
            format!("/admission/{}/evictions", &k[..59]),
            format!("/apis/{k}/evictions"),
        ] {
            assert!(!key.opens(&path), "{path}");
        }
    }

    /// kube-apiserver takes a webhook's Service path only if each of its segments is a lowercase
    /// RFC 1123 subdomain (`[a-z0-9]([-a-z0-9]*[a-z0-9])?`, dot-separated, at most 253; each
    /// label kept within 63 here, as DNS has it).
    #[test]
    fn a_keyed_path_is_one_kube_apiserver_takes_for_a_service() {
        let label = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        for _ in 0..100 {
            let key = DoorKey::generate().unwrap();
            for path in ["/admission/evictions/standby", "/admission/rulesets"] {
                let keyed = key.in_path(path, DOORS).unwrap();
                for segment in keyed.trim_start_matches('/').split('/') {
                    assert!(
                        segment.len() <= 253 && segment.split('.').all(label),
                        "{segment} of {keyed}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_doors_path_takes_the_key_in_place_of_any_other() {
        let key = DoorKey::generate().unwrap();
        let k = key.as_str();
        let old = DoorKey::generate().unwrap();
        for (path, keyed) in [
            (
                "/admission/evictions".to_owned(),
                format!("/admission/{k}/evictions"),
            ),
            (
                "/admission/evictions/standby".to_owned(),
                format!("/admission/{k}/evictions/standby"),
            ),
            (
                "/admission/rulesets".to_owned(),
                format!("/admission/{k}/rulesets"),
            ),
            (
                format!("/admission/{}/evictions/standby", old.as_str()),
                format!("/admission/{k}/evictions/standby"),
            ),
            (
                format!("/admission/{k}/rulesets"),
                format!("/admission/{k}/rulesets"),
            ),
        ] {
            assert_eq!(key.in_path(&path, DOORS), Some(keyed), "{path}");
        }
        for other in [
            "/validate",
            "/admission/other",
            "/admission/x/other",
            "/admission/",
        ] {
            assert_eq!(key.in_path(other, DOORS), None, "{other}");
        }
    }
}
