//! `rules`: what each rule learned of its operations' durations, and whether its estimates can
//! be trusted.

use anyhow::Result;
use serde_json::json;

use super::Context;
use super::emit;
use crate::Exit;
use crate::format::{self, Output};
use crate::rules;

/// `rules [name]`: the table, or the learned operations as a list.
pub(crate) async fn run(cx: &Context<'_>, name: Option<&str>) -> Result<Exit> {
    let learned = rules::list(cx.client, name).await?;
    match cx.output {
        Output::Table | Output::Wide => {
            emit(&rules::table(&learned, cx.colours));
        }
        Output::Name => {
            for l in &learned {
                emit(&format!("{}/{}\n", l.ruleset, l.operation));
            }
        }
        Output::Json | Output::Yaml => {
            let items: Vec<_> = learned
                .iter()
                .map(|l| {
                    json!({
                        "ruleset": l.ruleset,
                        "operation": l.operation,
                        "count": l.count,
                        "p50Seconds": l.p50,
                        "p90Seconds": l.p90,
                        "p99Seconds": l.p99,
                        "coverage": l.coverage.map(|c| json!({"ends": c.ends, "p50": c.p50, "p90": c.p90})),
                        "unreliable": l.unreliable(),
                    })
                })
                .collect();
            let v = json!({ "items": items });
            emit(&if cx.output == Output::Json {
                format::to_json(&v)
            } else {
                format::to_yaml(&v)
            });
        }
    }
    Ok(Exit::Done)
}
