//! `get`: one operation by name, described (or as an object), looked up in every namespace with
//! `-A`.

use anyhow::{Result, bail};

use super::Context;
use super::emit;
use crate::Exit;
use crate::client::{self, Resource, Scope};
use crate::filter::Filters;
use crate::format::{self, Output};
use crate::op::Op;
use crate::rules;

/// `get name`: the operation described, or an error naming where it was looked for.
pub(crate) async fn run(cx: &Context<'_>, name: &str) -> Result<Exit> {
    let found: Vec<Op> = match cx.scope {
        Scope::Namespace(ns) => client::get(cx.client, Resource::Namespaced, Some(ns), name)
            .await?
            .into_iter()
            .collect(),
        Scope::Cluster => client::get(cx.client, Resource::Cluster, None, name)
            .await?
            .into_iter()
            .collect(),
        Scope::All => {
            let by_name = Filters {
                name: Some(name.to_owned()),
                ..Default::default()
            };
            client::list(cx.client, cx.scope, &by_name).await?
        }
    };
    if found.is_empty() {
        let hint = match cx.scope {
            Scope::Namespace(_) => {
                " (cluster-scoped subjects: --cluster-scoped; every namespace: -A)"
            }
            _ => "",
        };
        bail!("operation {name:?} not found {}{hint}", cx.scope.describe());
    }
    let text = match cx.output {
        Output::Json | Output::Yaml if found.len() == 1 => {
            if cx.output == Output::Json {
                format::to_json(&found[0].raw)
            } else {
                format::to_yaml(&found[0].raw)
            }
        }
        Output::Json | Output::Yaml | Output::Name => format::render_list(
            &found,
            cx.output,
            cx.scope.namespace_column(),
            cx.now,
            cx.colours,
        ),
        Output::Table | Output::Wide => {
            let mut described = Vec::with_capacity(found.len());
            for op in &found {
                let note = estimates_note(cx, op).await;
                described.push(format::describe_noting(op, cx.now, note.as_deref()));
            }
            described.join("\n")
        }
    };
    emit(&text);
    Ok(Exit::Done)
}

/// Whether the expected end an active operation shows from history is to be trusted: its
/// rule's coverage, read from its ruleset (nothing when that cannot be read).
async fn estimates_note(cx: &Context<'_>, op: &Op) -> Option<String> {
    if !op.is_active() || op.status.estimate.as_deref() != Some("History") {
        return None;
    }
    rules::of(cx.client, &op.spec.rule_set, &op.spec.operation)
        .await?
        .warning()
}
