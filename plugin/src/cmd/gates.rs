//! `gates`: the maintenance gates the server serves, or one of them.

use anyhow::Result;

use super::Context;
use super::emit;
use crate::Exit;
use crate::format::{self, Output};
use crate::gate;

/// `gates`: the table (coloured), or the objects.
pub(crate) async fn run(cx: &Context<'_>, name: Option<&str>) -> Result<Exit> {
    let gates = match name {
        Some(name) => vec![
            gate::get(cx.client, name)
                .await
                .map_err(|e| gate::explain(&e, "get"))?,
        ],
        None => gate::list(cx.client).await?,
    };
    match cx.output {
        Output::Table | Output::Wide => {
            emit(&gate::table(&gates, cx.now, cx.colours));
        }
        Output::Name => {
            for g in &gates {
                let name = g.metadata.name.as_deref().unwrap_or_default();
                emit(&format!("maintenancegate/{name}\n"));
            }
        }
        Output::Json | Output::Yaml => {
            let v = serde_json::to_value(&gates).unwrap_or_default();
            emit(&if cx.output == Output::Json {
                format::to_json(&v)
            } else {
                format::to_yaml(&v)
            });
        }
    }
    Ok(Exit::Done)
}
