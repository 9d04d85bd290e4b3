//! Telling readers when an answer may be incomplete: a `Warning` header (RFC 7234, as
//! kube-apiserver sends them: `299 - "text"`; kubectl prints each as `Warning: text`) for every
//! reason why detection feeding the answer is not current (see [`HealthReader::stale`]): a watch
//! starting, failing or stalled, a ruleset suspended or behind, an object skipped.
//!
//! The index keeps serving what it last saw when a watch breaks (etcd down, RBAC revoked, CRD
//! deleted); without this, "nothing in flight" would be indistinguishable from "not looking".
//!
//! A warning names only what its reader may read ([`Reader`]): a read of one namespace is told
//! of that namespace's blind spots (and of the targets' and rulesets'), a read across every
//! namespace was authorized for all of them; a read of cluster-scoped operations is authorized
//! for none, so the blind spots of namespaces (an object skipped there is named
//! `namespace/name`, and its name can be a secret) are counted for it, not named.

use crate::detect::{Blind, HealthReader, Stale};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use std::sync::Arc;

pub(crate) use ifo_model::INCOMPLETE_WARNING as INCOMPLETE;
use ifo_model::{CauseGroup, StaleCause, group_by_cause};

/// Most warnings on one response; the rest are counted in the last one.
const MAX_WARNINGS: usize = 10;
/// Longest reason quoted in a warning (API server messages can be long).
const MAX_REASON: usize = 300;

/// Who reads an answer's warnings, as the request was authorized: what they may be told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reader {
    /// Every reason its query gives: a read of one namespace (whose query gives only that
    /// namespace's blind spots, and its targets' and rulesets'), a read across every namespace
    /// (authorized cluster-wide), the maintenance gates (read by holders of their ClusterRole).
    All,
    /// A read of cluster-scoped operations, authorized for no namespace: reasons that name
    /// something of a namespace (an object skipped there, a ruleset suspended there) are
    /// counted, not named.
    ClusterScoped,
}

/// One reason why an answer may be incomplete, as read when the answer was taken; told to a
/// reader by [`texts`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Notice {
    text: String,
    /// Whether it names something of a namespace (told only to readers of it).
    namespaced: bool,
}

impl From<&str> for Notice {
    /// A reason that names nothing of a namespace.
    fn from(text: &str) -> Self {
        Notice {
            text: text.to_owned(),
            namespaced: false,
        }
    }
}

/// The reasons a read of `namespace` (`None`: every namespace, or cluster-scoped objects), as
/// the request's `RequestInfo` names it, is given now. `unsynced` is what the initial sync has
/// not seen yet (see [`crate::readiness::Readiness::unsynced`]): before the rulesets are listed
/// no target is known to be stale, yet the answer is partial all the same.
///
/// Read once before the answer is taken from the index and once after, and both kept (see
/// [`texts`]): the writers publish what a list brought before they say the target is current,
/// so an answer taken while it was not yet current is warned even if it is current by the time
/// the answer is sent.
pub(crate) fn warnings_now(
    targets: &HealthReader,
    unsynced: &[String],
    namespace: Option<&str>,
) -> Vec<Notice> {
    let sync = (!unsynced.is_empty()).then(|| {
        let all = unsynced.join(", ");
        let mut waiting: String = all.chars().take(MAX_REASON).collect();
        if waiting.len() < all.len() {
            waiting.push('…');
        }
        Notice::from(
            format!("{INCOMPLETE}: the initial sync is not done (waiting for {waiting})").as_str(),
        )
    });
    let stale = targets.stale(namespace);
    sync.into_iter().chain(by_cause(&stale)).collect()
}

/// The notices of `stale`, those of one cause across many targets told once (see
/// [`group_by_cause`]): targets the server may not read (RBAC: one line that names its identity
/// and the remedy, not one a resource type), targets whose first list is not done (the initial
/// sync). Any other reason is told as it is ([`notice`]).
fn by_cause(stale: &[Stale]) -> Vec<Notice> {
    let (told, grouped) = causes(stale);
    let told = told
        .into_iter()
        .map(|text| Notice::from(format!("{INCOMPLETE}: {text}").as_str()));
    let rest = stale
        .iter()
        .zip(grouped)
        .filter(|(_, grouped)| !grouped)
        .map(|(s, _)| notice(s));
    told.chain(rest).collect()
}

/// `stale` told by cause (see [`group_by_cause`]): one reason, with its remedy, for each cause
/// that many of them share, and for each of `stale` whether one of those reasons tells it. The
/// same words in a `Warning` and in a gate's message.
pub(crate) fn causes(stale: &[Stale]) -> (Vec<String>, Vec<bool>) {
    let named: Vec<(String, String)> = stale
        .iter()
        .map(|s| (s.resource(), s.reason.to_string()))
        .collect();
    let pairs: Vec<(&str, &str)> = named
        .iter()
        .map(|(name, reason)| (name.as_str(), reason.as_str()))
        .collect();
    let (groups, grouped) = group_by_cause(&pairs);
    let told = groups
        .iter()
        .map(|group| cause_text(group, &pairs))
        .collect();
    (told, grouped)
}

/// The one reason that tells `group`, of `stale` (target name, reason as served), with its
/// remedy.
fn cause_text(group: &CauseGroup, stale: &[(&str, &str)]) -> String {
    match group.cause {
        StaleCause::Forbidden => {
            let who = stale
                .iter()
                .filter(|(_, reason)| StaleCause::Forbidden.of(reason))
                .find_map(|(_, reason)| forbidden_user(reason))
                .unwrap_or("the server");
            format!(
                "{} resource types are not being watched: {who} is forbidden to list them ({}); \
                 grant it read access to every target of the rulesets \
                 (deploy/rbac/rule-targets.yaml, or `ifo-apiserver rules rbac` for rulesets of \
                 your own)",
                group.names.len(),
                group.some_names()
            )
        }
        StaleCause::FirstList => format!(
            "{} resource types are being listed for the first time ({}); what is in flight on \
             them shows once they are",
            group.names.len(),
            group.some_names()
        ),
    }
}

/// The user an RBAC refusal names (`User "system:serviceaccount:ifo-system:ifo-apiserver"
/// cannot list …`).
fn forbidden_user(reason: &str) -> Option<&str> {
    let rest = &reason[reason.find("User \"")? + 6..];
    Some(&rest[..rest.find('"')?])
}

/// The reasons of an answer kept with it (a list read from a kept snapshot), for the `Warning`
/// headers [`texts`] makes of them with the others; a response extension.
#[derive(Clone, Debug)]
pub(crate) struct Kept(pub Arc<[Notice]>);

/// The `Warning` texts `reader` is given for `notices` (each reason once, in order): at most
/// [`MAX_WARNINGS`], the rest counted in one more; for [`Reader::ClusterScoped`], those that
/// name something of a namespace are counted in one text that says the answer may be
/// incomplete all the same.
pub(crate) fn texts<'a>(
    notices: impl IntoIterator<Item = &'a Notice>,
    reader: Reader,
) -> Vec<String> {
    let (mut told, mut unnamed): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    for n in notices {
        let list = if reader == Reader::ClusterScoped && n.namespaced {
            &mut unnamed
        } else {
            &mut told
        };
        if !list.contains(&n.text.as_str()) {
            list.push(&n.text);
        }
    }
    let more = told.len().saturating_sub(MAX_WARNINGS);
    let mut out: Vec<String> = told
        .into_iter()
        .take(MAX_WARNINGS)
        .map(str::to_owned)
        .collect();
    if more > 0 {
        out.push(format!(
            "{INCOMPLETE}: and {more} more reasons (see the rulesets' conditions)"
        ));
    }
    if !unnamed.is_empty() {
        let reasons = match unnamed.len() {
            1 => "1 reason".to_owned(),
            n => format!("{n} reasons"),
        };
        out.push(format!(
            "{INCOMPLETE}: detection is not current in some namespaces ({reasons}, named only to \
             readers of those namespaces)"
        ));
    }
    out
}

/// Adds `texts` to a successful response as `Warning` headers, each text once.
pub(crate) fn warn(texts: impl IntoIterator<Item = String>, response: &mut Response) {
    if !response.status().is_success() {
        return;
    }
    for text in texts {
        let Ok(value) = HeaderValue::from_bytes(header_value(&text).as_bytes()) else {
            continue;
        };
        if !response
            .headers()
            .get_all(header::WARNING)
            .iter()
            .any(|v| *v == value)
        {
            response.headers_mut().append(header::WARNING, value);
        }
    }
}

/// One reason's text, and whether it names something of a namespace: an object skipped there
/// (`namespace/name`; a cluster-scoped object is `name`), a ruleset suspended there.
fn notice(s: &Stale) -> Notice {
    let name = s.resource();
    let full = s.reason.to_string();
    let mut reason: String = full.chars().take(MAX_REASON).collect();
    if reason.len() < full.len() {
        reason.push('…');
    }
    let namespaced = match &s.reason {
        Blind::Skipped { object, .. } => object.contains('/'),
        Blind::Suspended { namespace, .. } => namespace.is_some(),
        Blind::NotWatched(_)
        | Blind::DroppedEvents { .. }
        | Blind::Lagging { .. }
        | Blind::Invalid { .. } => false,
    };
    Notice {
        text: format!("{INCOMPLETE}: {name} {reason}"),
        namespaced,
    }
}

/// The texts every reader of `stale` is given (the tests').
#[cfg(test)]
fn warnings(stale: &[Stale]) -> Vec<String> {
    texts(&stale.iter().map(notice).collect::<Vec<_>>(), Reader::All)
}

/// `299 - "text"`, with `"` and `\` escaped and control characters made spaces (as
/// kube-apiserver's `NewWarningHeader` requires of the text).
fn header_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str("299 - \"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ruleset::Target;
    use axum::body::Body;
    use axum::http::StatusCode;

    fn stale(resource: &str, group: &str, reason: &str) -> Stale {
        Stale {
            target: Target {
                group: group.into(),
                version: "v1".into(),
                resource: resource.into(),
            },
            reason: Blind::NotWatched(reason.into()),
        }
    }

    /// Without its RBAC, the server cannot list any target: one line says so, with whom and the
    /// remedy, not one a resource type; so does the initial sync. Other reasons stay as they
    /// are, and one target alone is told as it is.
    #[test]
    fn warnings_of_one_cause_across_targets_are_told_once() {
        let forbidden = |resource: &str| {
            stale(
                resource,
                "kubevirt.io",
                &format!(
                    "list failed: {resource}.kubevirt.io is forbidden: User \"system:serviceaccount:ifo-system:ifo-apiserver\" cannot list resource \"{resource}\""
                ),
            )
        };
        let mut all: Vec<Stale> = ["a", "b", "c", "d", "e"].map(forbidden).into();
        all.push(forbidden("a"));
        for (resource, group) in [
            ("pods", ""),
            ("jobs", "batch"),
            ("cronjobs", "batch"),
            ("x", "y"),
        ] {
            all.push(stale(resource, group, ifo_model::FIRST_LIST_PENDING));
        }
        all.push(stale("things", "example.com", "the watch stalled"));
        let texts: Vec<String> = by_cause(&all).into_iter().map(|n| n.text).collect();
        assert_eq!(
            texts,
            [
                "operations may be incomplete: 5 resource types are not being watched: \
                 system:serviceaccount:ifo-system:ifo-apiserver is forbidden to list them \
                 (a.kubevirt.io/v1, b.kubevirt.io/v1, c.kubevirt.io/v1 and 2 more); grant it \
                 read access to every target of the rulesets (deploy/rbac/rule-targets.yaml, or \
                 `ifo-apiserver rules rbac` for rulesets of your own)",
                "operations may be incomplete: 4 resource types are being listed for the first \
                 time (cronjobs.batch/v1, jobs.batch/v1, pods/v1 and 1 more); what is in flight \
                 on them shows once they are",
                "operations may be incomplete: things.example.com/v1 is not being watched: the \
                 watch stalled",
            ]
        );
        // A few are each told as they are.
        let few = by_cause(&[forbidden("a"), forbidden("b"), forbidden("c")]);
        assert_eq!(few.len(), 3);
        assert!(
            few[0].text.starts_with(
                "operations may be incomplete: a.kubevirt.io/v1 is not being watched: list failed"
            ),
            "{few:?}"
        );
    }

    #[test]
    fn warnings_name_the_target_and_the_reason() {
        let texts = warnings(&[
            stale("virtualmachines", "kubevirt.io", "list failed: forbidden"),
            stale("pods", "", "its first list has not completed"),
        ]);
        assert_eq!(
            texts,
            [
                "operations may be incomplete: virtualmachines.kubevirt.io/v1 is not being watched: list failed: forbidden",
                "operations may be incomplete: pods/v1 is not being watched: its first list has not completed",
            ]
        );
        let many: Vec<Stale> = (0..12).map(|i| stale(&format!("r{i}"), "g", "x")).collect();
        let texts = warnings(&many);
        assert_eq!(texts.len(), MAX_WARNINGS + 1);
        assert!(texts[MAX_WARNINGS].contains("2 more reasons"), "{texts:?}");
        let texts = warnings(&[Stale {
            target: Target {
                group: "kubevirt.io".into(),
                version: "v1".into(),
                resource: "virtualmachines".into(),
            },
            reason: Blind::Suspended {
                ruleset: "vms".into(),
                namespace: Some("demo".into()),
            },
        }]);
        assert_eq!(
            texts,
            [
                "operations may be incomplete: virtualmachines.kubevirt.io/v1 is not evaluated by ruleset vms: it is suspended in namespace demo (it kept going over its evaluation budget there); make its rules cheaper or the objects there smaller (any change to its spec resumes it)"
            ]
        );
    }

    /// bob, who may read no namespace, lists cluster-scoped operations: he is told that the
    /// answer may be incomplete, and of what concerns every reader (a target, a ruleset, a
    /// cluster-scoped object), but not the name of alice's object, nor where a ruleset is
    /// suspended. A read across every namespace was authorized for all of them.
    #[test]
    fn a_read_of_cluster_scoped_operations_names_nothing_of_a_namespace() {
        let vms = Target {
            group: "kubevirt.io".into(),
            version: "v1".into(),
            resource: "virtualmachines".into(),
        };
        let stale = |reason| Stale {
            target: vms.clone(),
            reason,
        };
        let notices: Vec<Notice> = [
            Blind::Skipped {
                object: "team-a/secret-project-payroll-export".into(),
                why: "over the budget".into(),
            },
            Blind::Suspended {
                ruleset: "vms".into(),
                namespace: Some("team-a".into()),
            },
            Blind::Skipped {
                object: "cluster-wide".into(),
                why: "over the budget".into(),
            },
            Blind::DroppedEvents {
                ruleset: "vms".into(),
            },
        ]
        .into_iter()
        .map(|reason| notice(&stale(reason)))
        .collect();
        let all = texts(&notices, Reader::All);
        assert_eq!(all.len(), 4);
        assert!(
            all[0].contains("team-a/secret-project-payroll-export"),
            "{all:?}"
        );
        // Read before the answer was taken and after: the same reasons, counted once.
        let bob = texts(notices.iter().chain(&notices), Reader::ClusterScoped);
        assert_eq!(
            bob,
            [
                "operations may be incomplete: virtualmachines.kubevirt.io/v1 object cluster-wide is skipped: over the budget",
                "operations may be incomplete: virtualmachines.kubevirt.io/v1 lost events of ruleset vms (its evaluation fell behind); listing it again",
                "operations may be incomplete: detection is not current in some namespaces (2 reasons, named only to readers of those namespaces)",
            ]
        );
    }

    #[test]
    fn header_values_are_quoted_strings() {
        assert_eq!(header_value(r#"a "b" c\d"#), r#"299 - "a \"b\" c\\d""#);
        assert_eq!(header_value("line\nbreak"), r#"299 - "line break""#);
    }

    #[test]
    fn only_successful_answers_carry_warnings() {
        let health = std::sync::Arc::new(crate::detect::Health::default());
        let t = Target {
            group: "example.com".into(),
            version: "v1".into(),
            resource: "things".into(),
        };
        health.watching(&t, None);
        let targets = health.reader();
        let mut ok = Response::new(Body::empty());
        warn(
            texts(&warnings_now(&targets, &[], None), Reader::All),
            &mut ok,
        );
        let values: Vec<_> = ok.headers().get_all(header::WARNING).iter().collect();
        assert_eq!(
            values,
            [
                r#"299 - "operations may be incomplete: things.example.com/v1 is not being watched: its first list has not completed""#
            ]
        );
        let mut failed = Response::new(Body::empty());
        *failed.status_mut() = StatusCode::NOT_FOUND;
        warn(
            texts(&warnings_now(&targets, &[], None), Reader::All),
            &mut failed,
        );
        assert!(failed.headers().get(header::WARNING).is_none());
    }

    #[test]
    fn answers_before_the_initial_sync_say_so_even_with_no_target_known() {
        let targets = std::sync::Arc::new(crate::detect::Health::default()).reader();
        let mut ok = Response::new(Body::empty());
        let notices = warnings_now(
            &targets,
            &["the list of OperationRuleSets".to_string()],
            None,
        );
        warn(texts(&notices, Reader::ClusterScoped), &mut ok);
        let values: Vec<_> = ok.headers().get_all(header::WARNING).iter().collect();
        assert_eq!(
            values,
            [
                r#"299 - "operations may be incomplete: the initial sync is not done (waiting for the list of OperationRuleSets)""#
            ]
        );
        let mut synced = Response::new(Body::empty());
        warn(
            texts(&warnings_now(&targets, &[], None), Reader::All),
            &mut synced,
        );
        assert!(synced.headers().get(header::WARNING).is_none());
    }
}
