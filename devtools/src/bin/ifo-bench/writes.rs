//! Write requests kube-apiserver served, by verb and resource, from its own `/metrics`
//! (`apiserver_request_total`). The difference of two readings is what was written in between.

use anyhow::{Context, Result};
use std::collections::BTreeMap;

const WRITE_VERBS: [&str; 6] = [
    "POST",
    "PUT",
    "PATCH",
    "DELETE",
    "DELETECOLLECTION",
    "APPLY",
];

/// `(verb, group, resource, subresource)` → requests.
#[derive(Clone, Debug, Default)]
pub(crate) struct Writes(pub BTreeMap<(String, String, String, String), u64>);

pub(crate) async fn read(client: &kube::Client) -> Result<Writes> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a static request");
    let text = client
        .request_text(request)
        .await
        .context("reading kube-apiserver /metrics")?;
    Ok(parse(&text))
}

fn parse(text: &str) -> Writes {
    let mut writes = Writes::default();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let labels: BTreeMap<&str, &str> = labels
            .trim_end_matches('"')
            .split("\",")
            .filter_map(|pair| pair.split_once("=\""))
            .collect();
        let label = |name: &str| labels.get(name).copied().unwrap_or_default().to_string();
        let verb = label("verb");
        if !WRITE_VERBS.contains(&verb.as_str()) {
            continue;
        }
        let count = value.trim().parse::<f64>().unwrap_or(0.0) as u64;
        *writes
            .0
            .entry((
                verb,
                label("group"),
                label("resource"),
                label("subresource"),
            ))
            .or_default() += count;
    }
    writes
}

impl Writes {
    /// What was written after `earlier`.
    pub(crate) fn since(&self, earlier: &Writes) -> Writes {
        Writes(
            self.0
                .iter()
                .filter_map(|(k, &n)| {
                    let d = n.saturating_sub(earlier.0.get(k).copied().unwrap_or(0));
                    (d > 0).then(|| (k.clone(), d))
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_write_verbs_over_codes_and_skips_reads() {
        let text = r#"# HELP apiserver_request_total x
apiserver_request_total{code="200",component="apiserver",dry_run="",group="kubevirt.io",resource="virtualmachines",scope="resource",subresource="status",verb="PATCH",version="v1"} 10
apiserver_request_total{code="409",component="apiserver",dry_run="",group="kubevirt.io",resource="virtualmachines",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="LIST",version="v1"} 5
"#;
        let w = parse(text);
        assert_eq!(w.0.len(), 1);
        let key = (
            "PATCH".to_string(),
            "kubevirt.io".to_string(),
            "virtualmachines".to_string(),
            "status".to_string(),
        );
        assert_eq!(w.0[&key], 12);
        let later = parse(&text.replace("} 10", "} 15"));
        assert_eq!(later.since(&w).0[&key], 5);
    }
}
