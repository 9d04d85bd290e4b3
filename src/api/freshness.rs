//! Telling readers when an answer may be incomplete: a `Warning` header (RFC 7234, as
//! kube-apiserver sends them: `299 - "text"`; kubectl prints each as `Warning: text`) for every
//! reason why detection feeding the answer is not current (see [`HealthReader::stale`]): a watch
//! starting, failing or stalled, a ruleset suspended or behind, an object skipped.
//!
//! The index keeps serving what it last saw when a watch breaks (etcd down, RBAC revoked, CRD
//! deleted); without this, "nothing in flight" would be indistinguishable from "not looking".

use crate::detect::{HealthReader, Stale};
use axum::http::{HeaderValue, header};
use axum::response::Response;

pub use ifo_model::INCOMPLETE_WARNING as INCOMPLETE;

/// Most warnings on one response; the rest are counted in the last one.
const MAX_WARNINGS: usize = 10;
/// Longest reason quoted in a warning (API server messages can be long).
const MAX_REASON: usize = 300;

/// The warnings a read of `namespace` (`None`: every namespace, or cluster-scoped objects), as
/// the request's `RequestInfo` names it, gets now. `unsynced` is what the initial sync has not
/// seen yet (see [`crate::readiness::Readiness::unsynced`]): before the rulesets are listed no
/// target is known to be stale, yet the answer is partial all the same.
///
/// Read once before the answer is taken from the index and once after, and both kept (see
/// [`warn`]): the writers publish what a list brought before they say the target is current,
/// so an answer taken while it was not yet current is warned even if it is current by the time
/// the answer is sent.
pub fn warnings_now(
    targets: &HealthReader,
    unsynced: &[String],
    namespace: Option<&str>,
) -> Vec<String> {
    let sync = (!unsynced.is_empty()).then(|| {
        let all = unsynced.join(", ");
        let mut waiting: String = all.chars().take(MAX_REASON).collect();
        if waiting.len() < all.len() {
            waiting.push('…');
        }
        format!("{INCOMPLETE}: the initial sync is not done (waiting for {waiting})")
    });
    sync.into_iter()
        .chain(warnings(&targets.stale(namespace)))
        .collect()
}

/// Adds `texts` to a successful response as `Warning` headers, each text once.
pub fn warn(texts: impl IntoIterator<Item = String>, response: &mut Response) {
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

/// One text per reason, at most [`MAX_WARNINGS`].
fn warnings(stale: &[Stale]) -> Vec<String> {
    let mut texts: Vec<String> = stale
        .iter()
        .take(MAX_WARNINGS)
        .map(|s| {
            let name = target_name(s);
            let full = s.reason.to_string();
            let mut reason: String = full.chars().take(MAX_REASON).collect();
            if reason.len() < full.len() {
                reason.push('…');
            }
            format!("{INCOMPLETE}: {name} {reason}")
        })
        .collect();
    if stale.len() > MAX_WARNINGS {
        texts.push(format!(
            "{INCOMPLETE}: and {} more reasons (see the rulesets' conditions)",
            stale.len() - MAX_WARNINGS
        ));
    }
    texts
}

/// `<resource>.<group>/<version>` (`<resource>/<version>` in the core group): how warnings and
/// maintenance gates name a target.
pub fn target_name(stale: &Stale) -> String {
    let t = &stale.target;
    if t.group.is_empty() {
        format!("{}/{}", t.resource, t.version)
    } else {
        format!("{}.{}/{}", t.resource, t.group, t.version)
    }
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
    use crate::detect::Blind;
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
        warn(warnings_now(&targets, &[], None), &mut ok);
        let values: Vec<_> = ok.headers().get_all(header::WARNING).iter().collect();
        assert_eq!(
            values,
            [
                r#"299 - "operations may be incomplete: things.example.com/v1 is not being watched: its first list has not completed""#
            ]
        );
        let mut failed = Response::new(Body::empty());
        *failed.status_mut() = StatusCode::NOT_FOUND;
        warn(warnings_now(&targets, &[], None), &mut failed);
        assert!(failed.headers().get(header::WARNING).is_none());
    }

    #[test]
    fn answers_before_the_initial_sync_say_so_even_with_no_target_known() {
        let targets = std::sync::Arc::new(crate::detect::Health::default()).reader();
        let mut ok = Response::new(Body::empty());
        warn(
            warnings_now(
                &targets,
                &["the list of OperationRuleSets".to_string()],
                None,
            ),
            &mut ok,
        );
        let values: Vec<_> = ok.headers().get_all(header::WARNING).iter().collect();
        assert_eq!(
            values,
            [
                r#"299 - "operations may be incomplete: the initial sync is not done (waiting for the list of OperationRuleSets)""#
            ]
        );
        let mut synced = Response::new(Body::empty());
        warn(warnings_now(&targets, &[], None), &mut synced);
        assert!(synced.headers().get(header::WARNING).is_none());
    }
}
