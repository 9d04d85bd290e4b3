//! `kubectl ifo override`: the admin's maintenance override of a node, set with an end that is a
//! time (now + `--for`, in whole seconds), as the server requires: an end given as a duration
//! would be counted from a time on the Node that later writes move, and is refused there.

use anyhow::{Context as _, Result, bail};
use ifo_model::{MAINTENANCE_OVERRIDE_ANNOTATION, MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::{Context, emit};
use crate::Exit;
use crate::format::Output;
use crate::sanitize;

/// What to do to a node's override.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Change {
    /// Set it, for this long from now, for this reason.
    Set {
        reason: String,
        for_: SignedDuration,
    },
    /// Take it off.
    Remove,
}

/// The merge patch of the node's annotations that makes `change` at `now`, and the end it
/// writes.
pub(crate) fn patch(change: &Change, now: Timestamp) -> Result<(Value, Option<Timestamp>)> {
    match change {
        Change::Remove => Ok((
            json!({"metadata": {"annotations": {
                MAINTENANCE_OVERRIDE_ANNOTATION: null,
                MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION: null,
            }}}),
            None,
        )),
        Change::Set { reason, for_ } => {
            if reason.trim().is_empty() {
                bail!("--reason is empty: say why the guard is let through");
            }
            if !for_.is_positive() {
                bail!("--for must be longer than nothing");
            }
            // Whole seconds, rounded up: the end is never before the one asked for.
            let end = now
                .checked_add(*for_)
                .ok()
                .and_then(|t| {
                    let up = i64::from(t.subsec_nanosecond() > 0);
                    Timestamp::from_second(t.as_second().checked_add(up)?).ok()
                })
                .context("--for reaches past the last time a timestamp can hold")?;
            Ok((
                json!({"metadata": {"annotations": {
                    MAINTENANCE_OVERRIDE_ANNOTATION: reason,
                    MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION: end.to_string(),
                }}}),
                Some(end),
            ))
        }
    }
}

/// Patches the node `node` with `change`, and says what it did.
pub(crate) async fn run(cx: &Context<'_>, node: &str, change: Change) -> Result<Exit> {
    let (body, end) = patch(&change, cx.now)?;
    let nodes: Api<Node> = Api::all(cx.client.clone());
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .with_context(|| {
            format!(
                "the override of node {} was not written",
                sanitize::line(node)
            )
        })?;
    let node = sanitize::line(node);
    let text = match (&change, end) {
        (Change::Set { reason, .. }, Some(end)) => format!(
            "node/{node} overridden until {end}: evictions of its pods go through the maintenance guard ({})\n",
            sanitize::line(reason)
        ),
        _ => {
            format!("node/{node} override removed: the maintenance guard holds its drains again\n")
        }
    };
    match cx.output {
        Output::Json | Output::Yaml => {
            let v = json!({"node": node, "until": end.map(|t| t.to_string()), "removed": change == Change::Remove});
            emit(&if cx.output == Output::Json {
                crate::format::to_json(&v)
            } else {
                crate::format::to_yaml(&v)
            });
        }
        _ => {
            emit(&text);
        }
    }
    Ok(Exit::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-11-22T10:00:00.250Z".parse().unwrap()
    }

    #[test]
    fn the_end_is_written_as_a_time_never_before_the_one_asked() {
        let set = Change::Set {
            reason: "disk failing".into(),
            for_: SignedDuration::from_hours(2),
        };
        let (body, end) = patch(&set, now()).unwrap();
        assert_eq!(end, Some("2026-11-22T12:00:01Z".parse().unwrap()));
        assert_eq!(
            body,
            json!({"metadata": {"annotations": {
                "ifo.kubevirt.io/maintenance-override": "disk failing",
                "ifo.kubevirt.io/maintenance-override-until": "2026-11-22T12:00:01Z",
            }}})
        );
        let whole: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        assert_eq!(
            patch(&set, whole).unwrap().1,
            Some("2026-11-22T12:00:00Z".parse().unwrap())
        );
    }

    #[test]
    fn removing_takes_both_annotations_off() {
        let (body, end) = patch(&Change::Remove, now()).unwrap();
        assert_eq!(end, None);
        assert_eq!(
            body["metadata"]["annotations"],
            json!({"ifo.kubevirt.io/maintenance-override": null,
                   "ifo.kubevirt.io/maintenance-override-until": null})
        );
    }

    #[test]
    fn a_blank_reason_or_an_end_out_of_time_is_refused() {
        let blank = Change::Set {
            reason: "  ".into(),
            for_: SignedDuration::from_hours(1),
        };
        assert!(patch(&blank, now()).is_err());
        let forever = Change::Set {
            reason: "r".into(),
            for_: SignedDuration::from_secs(i64::MAX),
        };
        let err = patch(&forever, now()).unwrap_err();
        assert!(format!("{err:#}").contains("past the last time"), "{err:#}");
    }
}
