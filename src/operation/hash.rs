//! Short content hashes used to keep shortened names and label values distinct.

use std::fmt::Write as _;

/// First 8 hex digits of the SHA-256 of `input`.
///
/// 32 bits are plenty to tell apart the few values that share a truncated prefix, and short
/// enough to keep names readable.
pub(crate) fn hash8(input: &str) -> String {
    let digest = <sha2::Sha256 as sha2::Digest>::digest(input.as_bytes());
    digest[..4]
        .iter()
        .fold(String::with_capacity(8), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash8_is_stable_lowercase_hex() {
        // sha256("abc") = ba7816bf...
        assert_eq!(hash8("abc"), "ba7816bf");
        assert_eq!(hash8("abc"), hash8("abc"));
        assert_ne!(hash8("abc"), hash8("abd"));
    }
}
