//! A node's maintenance override, read from its annotations: the admin's way to let evictions
//! through the guard while the node's gate is not clear.
//!
//! - `ifo.kubevirt.io/maintenance-override: <reason>` sets it (an empty or blank value sets
//!   nothing). The reason is kept escaped and bounded: control and invisible formatting
//!   characters written as escapes (`\n`, `\u{202e}`), at most [`MAX_REASON_CHARS`] characters,
//!   so that whatever it holds shows as one plain line in gates, messages, logs and Events.
//! - `ifo.kubevirt.io/maintenance-override-until: <RFC 3339 time>` ends it: from that time on the
//!   override is no longer in force, and the guard holds evictions again with no other change to
//!   the Node. Whether it is in force is asked with the time of each question
//!   ([`Override::in_force`]), never decided when the Node's event arrived.
//! - The end is a time, never a duration: a duration would have to be counted from when it was
//!   written, which the Node only records in `managedFields`, whose time any later write of the
//!   same manager moves (an unrelated `kubectl annotate` would extend the override past the end
//!   the admin set). A duration ([`End::Relative`]), like any other `-until` that is not a time
//!   ([`End::Invalid`]), leaves the override **not in force**: the admin meant it to end, and an
//!   end that cannot be read must not leave the guard off for good. The node's gate says why
//!   (condition `Overridden`, reason `InvalidOverrideEnd`), and so does the guard's refusal;
//!   fixing or removing the annotation puts the override in force.
//!
//! When it was set (shown, never used to end it) is the time of the latest write of the
//! annotation that kube-apiserver recorded in the Node's `managedFields` (so it survives the
//! server's restarts), else when this server first saw it.

use std::sync::Arc;

use ifo_model::{MAINTENANCE_OVERRIDE_ANNOTATION, MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION};
use jiff::Timestamp;
use kube::core::ObjectMeta;

/// Characters of an override's reason that are kept (the rest is cut, with `…`).
pub(crate) const MAX_REASON_CHARS: usize = 256;
/// Characters of an `-until` value that is not a time that are kept to show it.
const MAX_INVALID_END_CHARS: usize = 64;

/// A node's maintenance override.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Override {
    /// Why: the annotation's value, escaped and bounded.
    pub reason: Arc<str>,
    /// When it ends.
    pub end: End,
    /// When the annotation was last written, from the Node's `managedFields`; `None` when they
    /// do not say (then [`Override::seen`] stands for it).
    pub written: Option<Timestamp>,
    /// When this server first saw the override (kept across the Node's updates while it stays).
    pub seen: Timestamp,
}

/// When an override ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// Never: no `-until` annotation.
    Never,
    /// At this time.
    At(Timestamp),
    /// The `-until` annotation is a duration (`2h`, `90m`; its value, escaped and bounded),
    /// which no time on the Node anchors: the override is not in force.
    Relative(Arc<str>),
    /// The `-until` annotation is not an RFC 3339 time (its value, escaped and bounded): the
    /// override is not in force.
    Invalid(Arc<str>),
}

/// The end an `-until` value `text` gives: an RFC 3339 time; a duration with its units (`2h`,
/// `90m`, `1h30m`) is told apart from other text only to say what to write instead.
fn end_of(text: &str) -> End {
    if let Ok(at) = text.parse::<Timestamp>() {
        return End::At(at);
    }
    let shown: Arc<str> = escaped(text, MAX_INVALID_END_CHARS).into();
    let has_unit = text.bytes().any(|b| b.is_ascii_alphabetic());
    match ifo_apimachinery::duration::parse_duration(text) {
        Ok(d) if has_unit && d.is_positive() => End::Relative(shown),
        _ => End::Invalid(shown),
    }
}

impl Override {
    /// The override the annotations of `meta` set, if any; `now`: when it is read.
    pub(crate) fn of(meta: &ObjectMeta, now: Timestamp) -> Option<Override> {
        let annotations = meta.annotations.as_ref()?;
        let reason = annotations
            .get(MAINTENANCE_OVERRIDE_ANNOTATION)
            .map(|r| r.trim())
            .filter(|r| !r.is_empty())?;
        let end = match annotations
            .get(MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION)
            .map(|e| e.trim())
            .filter(|e| !e.is_empty())
        {
            None => End::Never,
            Some(text) => end_of(text),
        };
        Some(Override {
            reason: escaped(reason, MAX_REASON_CHARS).into(),
            end,
            written: written(meta, MAINTENANCE_OVERRIDE_ANNOTATION),
            seen: now,
        })
    }

    /// Whether it lets evictions through at `now`: until its end, if it has one; never when
    /// its end cannot be read.
    pub(crate) fn in_force(&self, now: Timestamp) -> bool {
        match self.end {
            End::Never => true,
            End::At(end) => now < end,
            End::Relative(_) | End::Invalid(_) => false,
        }
    }

    /// When it ends, if it has an end that can be read.
    pub(crate) fn ends_at(&self) -> Option<Timestamp> {
        match self.end {
            End::At(at) => Some(at),
            End::Never | End::Relative(_) | End::Invalid(_) => None,
        }
    }

    /// Since when it is set, as far as the server knows.
    pub(crate) fn since(&self) -> Timestamp {
        self.written.unwrap_or(self.seen)
    }

    /// The same override as `previous` (of the same node, read before): when the server first
    /// saw it is kept.
    pub(super) fn continues(&mut self, previous: &Override) {
        self.seen = self.seen.min(previous.seen);
    }
}

/// The time of the latest write of `annotation` that `managedFields` record.
fn written(meta: &ObjectMeta, annotation: &str) -> Option<Timestamp> {
    let key = format!("f:{annotation}");
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|entry| {
            entry.fields_v1.as_ref().is_some_and(|fields| {
                fields.0["f:metadata"]["f:annotations"]
                    .get(key.as_str())
                    .is_some()
            })
        })
        .filter_map(|entry| entry.time.as_ref().map(|t| t.0))
        .max()
}

/// `text` as one plain line of at most `max` characters: control characters and invisible
/// formatting characters (bidirectional overrides, zero-width characters, line and paragraph
/// separators) written as escapes, and `…` in place of what is cut.
pub(crate) fn escaped(text: &str, max: usize) -> String {
    let piece = |c: char| -> Box<dyn Iterator<Item = char>> {
        if c.is_control() {
            Box::new(c.escape_debug())
        } else if is_invisible_format(c) {
            Box::new(c.escape_unicode())
        } else {
            Box::new(std::iter::once(c))
        }
    };
    let total: usize = text.chars().map(|c| piece(c).count()).sum();
    let room = if total <= max {
        max
    } else {
        max.saturating_sub(1)
    };
    let mut out = String::new();
    let mut count = 0;
    for c in text.chars() {
        let len = piece(c).count();
        if count + len > room {
            break;
        }
        out.extend(piece(c));
        count += len;
    }
    if total > max {
        out.push('…');
    }
    out
}

/// Characters that change how text around them shows without showing themselves.
fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{061c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, Time};
    use serde_json::json;

    fn at(t: &str) -> Timestamp {
        t.parse().unwrap()
    }

    fn meta(annotations: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: Some("w1".into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    const NOW: &str = "2026-11-22T10:00:00Z";

    /// A write by `manager` at `time` of the annotation `annotation`, as `managedFields` record it.
    fn entry(manager: &str, time: &str, annotation: &str) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Update".into()),
            time: Some(Time(at(time))),
            fields_v1: Some(FieldsV1(json!({
                "f:metadata": {"f:annotations": {format!("f:{annotation}"): {}}}
            }))),
            ..ManagedFieldsEntry::default()
        }
    }

    /// The override's annotation, written by kubectl at `time`.
    fn written_at(time: &str) -> ManagedFieldsEntry {
        entry("kubectl-annotate", time, MAINTENANCE_OVERRIDE_ANNOTATION)
    }

    #[test]
    fn the_override_is_set_by_a_reason_that_is_not_blank() {
        let now = at(NOW);
        assert_eq!(Override::of(&meta(&[]), now), None);
        assert_eq!(
            Override::of(&meta(&[(MAINTENANCE_OVERRIDE_ANNOTATION, "  ")]), now),
            None
        );
        // An end alone sets nothing.
        assert_eq!(
            Override::of(
                &meta(&[(
                    MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION,
                    "2026-11-22T12:00:00Z"
                )]),
                now
            ),
            None
        );
        let set = Override::of(
            &meta(&[(MAINTENANCE_OVERRIDE_ANNOTATION, " disk failing, INC-4711 ")]),
            now,
        )
        .unwrap();
        assert_eq!(&*set.reason, "disk failing, INC-4711");
        assert_eq!(set.end, End::Never);
        assert_eq!(set.since(), now, "first seen now: no managedFields");
        assert!(set.in_force(at("2036-01-01T00:00:00Z")));
    }

    #[test]
    fn an_override_with_an_end_is_in_force_until_then_and_never_after() {
        let set = Override::of(
            &meta(&[
                (MAINTENANCE_OVERRIDE_ANNOTATION, "firmware"),
                (
                    MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION,
                    "2026-11-22T12:00:00+01:00",
                ),
            ]),
            at(NOW),
        )
        .unwrap();
        assert_eq!(set.end, End::At(at("2026-11-22T11:00:00Z")));
        assert!(set.in_force(at(NOW)));
        assert!(set.in_force(at("2026-11-22T10:59:59Z")));
        assert!(!set.in_force(at("2026-11-22T11:00:00Z")));
        assert!(!set.in_force(at("2026-11-23T00:00:00Z")));
    }

    /// A duration is no end: counted from when it was written, as `managedFields` record it, any
    /// later write of the same manager (an unrelated `kubectl annotate`) would move it.
    #[test]
    fn a_duration_is_not_an_end_and_leaves_the_override_not_in_force() {
        for until in ["2h", "90m", "1h30m", "40s"] {
            let mut m = meta(&[
                (MAINTENANCE_OVERRIDE_ANNOTATION, "firmware"),
                (MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION, until),
            ]);
            m.managed_fields = Some(vec![written_at("2026-11-22T09:59:00Z")]);
            let set = Override::of(&m, at(NOW)).unwrap();
            assert_eq!(set.end, End::Relative(Arc::from(until)), "{until}");
            assert_eq!(set.ends_at(), None, "{until}");
            assert!(!set.in_force(at(NOW)), "{until}");
        }
    }

    /// An end that is a time stays where the admin put it, whatever is written to the Node
    /// afterwards (another annotation by the same manager moves its `managedFields` time).
    #[test]
    fn later_writes_to_the_node_do_not_move_an_end() {
        let until = "2026-11-22T10:00:40Z";
        let mut m = meta(&[
            (MAINTENANCE_OVERRIDE_ANNOTATION, "firmware"),
            (MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION, until),
            ("example.com/unrelated", "x"),
        ]);
        m.managed_fields = Some(vec![written_at("2026-11-22T10:00:00Z")]);
        let first = Override::of(&m, at(NOW)).unwrap();
        m.managed_fields = Some(vec![written_at("2026-11-22T10:00:20Z")]);
        let later = Override::of(&m, at("2026-11-22T10:00:20Z")).unwrap();
        for set in [first, later] {
            assert_eq!(set.ends_at(), Some(at(until)));
            assert!(set.in_force(at("2026-11-22T10:00:39Z")));
            assert!(!set.in_force(at(until)));
        }
    }

    #[test]
    fn an_end_that_cannot_be_read_leaves_the_override_not_in_force() {
        for bad in [
            "tomorrow",
            "2026-11-22 12:00",
            "2026-11-22T12:00:00",
            "2",
            "0s",
            "-2h",
        ] {
            let set = Override::of(
                &meta(&[
                    (MAINTENANCE_OVERRIDE_ANNOTATION, "firmware"),
                    (MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION, bad),
                ]),
                at(NOW),
            )
            .unwrap();
            assert_eq!(set.end, End::Invalid(bad.into()), "{bad}");
            assert!(!set.in_force(at(NOW)), "{bad}");
        }
        let long = "x".repeat(1000);
        let set = Override::of(
            &meta(&[
                (MAINTENANCE_OVERRIDE_ANNOTATION, "firmware"),
                (MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION, &long),
            ]),
            at(NOW),
        )
        .unwrap();
        let End::Invalid(shown) = set.end else {
            panic!("{:?}", set.end)
        };
        assert_eq!(shown.chars().count(), MAX_INVALID_END_CHARS);
    }

    #[test]
    fn the_reason_is_one_plain_bounded_line() {
        assert_eq!(
            escaped("disk\nfailing\t\u{1b}[31mred\u{202e}olleh", 256),
            "disk\\nfailing\\t\\u{1b}[31mred\\u{202e}olleh"
        );
        assert_eq!(escaped("ok ünïcødé ✓", 256), "ok ünïcødé ✓");
        let cut = escaped(&"é".repeat(1000), MAX_REASON_CHARS);
        assert_eq!(cut.chars().count(), MAX_REASON_CHARS);
        assert!(cut.ends_with('…'));
        assert_eq!(escaped("abcd", 4), "abcd");
        assert_eq!(escaped("abcde", 4), "abc…");
        // An escape is never cut in half.
        assert_eq!(escaped("ab\u{202e}", 8), "ab…");
        let set = Override::of(
            &meta(&[(MAINTENANCE_OVERRIDE_ANNOTATION, &"a\n".repeat(500))]),
            at(NOW),
        )
        .unwrap();
        assert!(set.reason.chars().count() <= MAX_REASON_CHARS);
        assert!(!set.reason.chars().any(char::is_control));
    }

    #[test]
    fn since_when_is_the_latest_write_of_the_annotation_that_managed_fields_record() {
        let mut m = meta(&[(MAINTENANCE_OVERRIDE_ANNOTATION, "firmware")]);
        m.managed_fields = Some(vec![
            entry(
                "kubelet",
                "2026-11-22T09:59:00Z",
                "node.alpha.kubernetes.io/ttl",
            ),
            entry(
                "kubectl-annotate",
                "2026-11-22T08:00:00Z",
                MAINTENANCE_OVERRIDE_ANNOTATION,
            ),
        ]);
        let set = Override::of(&m, at(NOW)).unwrap();
        assert_eq!(set.written, Some(at("2026-11-22T08:00:00Z")));
        assert_eq!(set.since(), at("2026-11-22T08:00:00Z"));
        // Read again later: the same override, first seen when it was first read.
        let mut again = Override::of(
            &meta(&[(MAINTENANCE_OVERRIDE_ANNOTATION, "firmware")]),
            at("2026-11-22T11:00:00Z"),
        )
        .unwrap();
        again.continues(
            &Override::of(
                &meta(&[(MAINTENANCE_OVERRIDE_ANNOTATION, "firmware")]),
                at(NOW),
            )
            .unwrap(),
        );
        assert_eq!(again.since(), at(NOW));
    }
}
