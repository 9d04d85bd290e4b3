//! Deterministic identity of an operation: `metadata.name` and `metadata.uid`.
//!
//! Names are derived, not generated, so every replica and every restart shows the same name for
//! the same operation, and `kubectl get ifo <name>` keeps working across failovers. The name
//! identifies the (subject, ruleset, operation) slot; the uid identifies one occurrence in that
//! slot, so a re-detected operation is a new object to clients even though its name is reused.

use jiff::Timestamp;
use uuid::Uuid;

use super::hash::hash8;

/// Longest name produced: a DNS-1123 label, so a name also fits in a label value.
pub(super) const MAX_NAME_LEN: usize = 63;

/// UUIDv5 namespace of occurrence uids. Fixed forever: changing it changes every uid.
const OCCURRENCE_NAMESPACE: Uuid = Uuid::from_u128(0x6f1c_2a57_93b4_4d0e_a8c1_5e2f_0b7d_9c43);

/// Operations get at least this many characters when the subject name is long.
const MIN_OPERATION_LEN: usize = 20;

/// `<subject-name>-<operation>-<hash8>`, lowercase, at most 63 characters.
///
/// The hash covers subject uid, ruleset and operation, so two rulesets detecting the same
/// operation on one subject, or a subject re-created under the same name, get distinct names
/// even after the readable parts are shortened.
pub fn object_name(
    subject_name: &str,
    operation: &str,
    subject_uid: &str,
    ruleset: &str,
) -> String {
    let hash = hash8(&format!("{subject_uid}/{ruleset}/{operation}"));
    // Room for "<subject>-<operation>", leaving "-<hash8>".
    let budget = MAX_NAME_LEN - 1 - hash.len();
    let subject = sanitize(subject_name);
    let op = sanitize(operation);
    let (subject, op) = if subject.len() + 1 + op.len() <= budget {
        (subject, op)
    } else {
        let op_len = op
            .len()
            .min(MIN_OPERATION_LEN.max((budget - 1).saturating_sub(subject.len())));
        let subject_len = subject.len().min(budget - 1 - op_len);
        (shorten(&subject, subject_len), shorten(&op, op_len))
    };
    let mut name = String::with_capacity(MAX_NAME_LEN);
    for part in [subject.as_str(), op.as_str()] {
        if !part.is_empty() {
            name.push_str(part);
            name.push('-');
        }
    }
    name.push_str(&hash);
    name
}

/// UUIDv5 of `<subject uid>/<ruleset>/<operation>/<start>`: one uid per occurrence.
///
/// When the start time comes from a `startTime` expression every replica computes the same uid;
/// the start is formatted at full precision so two occurrences within one second still differ.
pub(crate) fn occurrence_uid(
    subject_uid: &str,
    ruleset: &str,
    operation: &str,
    start: Timestamp,
) -> String {
    let input = format!("{subject_uid}/{ruleset}/{operation}/{start}");
    Uuid::new_v5(&OCCURRENCE_NAMESPACE, input.as_bytes()).to_string()
}

/// Lowercase; anything but `[a-z0-9]` becomes `-`; runs of `-` collapse; no `-` at the ends.
fn sanitize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// First `len` characters (all ASCII after `sanitize`), without a trailing `-`.
fn shorten(s: &str, len: usize) -> String {
    s[..len.min(s.len())].trim_end_matches('-').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_dns1123_label(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    }

    #[test]
    fn readable_and_deterministic() {
        let a = object_name("my-vm", "Migrating", "uid-1", "kubevirt");
        assert!(a.starts_with("my-vm-migrating-"), "{a}");
        assert_eq!(a.len(), "my-vm-migrating-".len() + 8);
        assert_eq!(a, object_name("my-vm", "Migrating", "uid-1", "kubevirt"));
        assert!(is_dns1123_label(&a));
    }

    #[test]
    fn distinct_per_ruleset_uid_and_operation() {
        let base = object_name("vm", "Migrating", "uid-1", "rs-a");
        assert_ne!(base, object_name("vm", "Migrating", "uid-1", "rs-b"));
        assert_ne!(base, object_name("vm", "Migrating", "uid-2", "rs-a"));
        // Operations that sanitise alike still differ by hash.
        assert_ne!(
            object_name("vm", "Live Migrating", "uid-1", "rs-a"),
            object_name("vm", "live-migrating", "uid-1", "rs-a")
        );
    }

    #[test]
    fn long_and_odd_inputs_stay_valid() {
        let long_subject = "a".repeat(253);
        let long_op = "VeryLongOperationName".repeat(5);
        let x52 = "x".repeat(52);
        let b_c = format!("{}-{}", "b".repeat(50), "c".repeat(10));
        let cases = [
            (long_subject.as_str(), "Migrating"),
            (long_subject.as_str(), long_op.as_str()),
            ("vm", long_op.as_str()),
            ("My.VM.example.com", "Upgrade/Phase_2"),
            ("--weird--", "--"),
            ("...", "!!!"),
            ("ünïcødé-vm", "Mïgrating"),
            (x52.as_str(), "Op"),
            (b_c.as_str(), "Restart"),
        ];
        for (subject, op) in cases {
            let n = object_name(subject, op, "uid", "rs");
            assert!(is_dns1123_label(&n), "{subject:?} {op:?} -> {n:?}");
        }
        let n = object_name(&long_subject, "Migrating", "uid", "rs");
        assert_eq!(n.len(), 63);
        assert!(n.contains("-migrating-"), "{n}");
        let n = object_name("vm", &long_op, "uid", "rs");
        assert!(n.starts_with("vm-verylongoperationname"), "{n}");
        let n = object_name(&long_subject, &long_op, "uid", "rs");
        assert!(n.contains("-verylongoperationnam"), "{n}");
        assert_eq!(
            object_name("My.VM.example.com", "Upgrade/Phase_2", "u", "r")
                .split_at(31)
                .0,
            "my-vm-example-com-upgrade-phase"
        );
        assert_eq!(object_name("...", "!!!", "u", "r").len(), 8);
    }

    #[test]
    fn uid_per_occurrence() {
        let t1: Timestamp = "2026-11-22T10:30:00Z".parse().unwrap();
        let t2: Timestamp = "2026-11-22T10:30:00.5Z".parse().unwrap();
        let u = occurrence_uid("uid", "rs", "Op", t1);
        assert_eq!(u, occurrence_uid("uid", "rs", "Op", t1));
        assert_ne!(u, occurrence_uid("uid", "rs", "Op", t2));
        assert_ne!(u, occurrence_uid("uid", "rs2", "Op", t1));
        assert_eq!(Uuid::parse_str(&u).unwrap().get_version_num(), 5);
    }
}
