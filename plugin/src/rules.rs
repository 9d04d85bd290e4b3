//! What the server learned of each rule's operations, read from the rulesets' status
//! (`status.operationDurations`): how long they take, and how often the expected ends read from
//! that came true (`coverage`). A rule operation whose p90 band covered fewer than 80 % of at
//! least 20 ends has **estimates unreliable**: its expected ends are not to be planned by.

use std::fmt::Write as _;

use anyhow::Result;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;

use crate::colour::Colours;
use crate::format::Table;

/// The rulesets' API (a CRD, not the live API).
const GROUP: &str = "ifo.kubevirt.io";
const VERSION: &str = "v1alpha1";
const KIND: &str = "OperationRuleSet";
const PLURAL: &str = "operationrulesets";

/// Ends judged before coverage says anything (the server's `MIN_ENDS`).
pub const MIN_ENDS: u64 = 20;
/// The share of ends the p90 band must cover for estimates to be reliable.
pub const RELIABLE_P90: f64 = 0.8;

/// How often one rule operation's estimates came true, over its last ends (at most 100).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Coverage {
    /// Ends judged.
    pub ends: u64,
    /// Share that ended by their expected end (the median), 0 to 1.
    pub p50: f64,
    /// Share that ended by the band's far edge (p90), 0 to 1.
    pub p90: f64,
}

/// What was learned of one rule operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Learned {
    /// The ruleset.
    pub ruleset: String,
    /// The rule's operation.
    pub operation: String,
    /// Operations that succeeded, in all.
    pub count: u64,
    /// Median, 90th and 99th percentile of the last durations, in seconds.
    pub p50: f64,
    /// See `p50`.
    pub p90: f64,
    /// See `p50`.
    pub p99: f64,
    /// How often its estimates came true, once an end was judged.
    pub coverage: Option<Coverage>,
}

impl Learned {
    /// Whether its p90 band covered fewer than [`RELIABLE_P90`] of at least [`MIN_ENDS`] ends.
    pub fn unreliable(&self) -> bool {
        self.coverage
            .is_some_and(|c| c.ends >= MIN_ENDS && c.p90 < RELIABLE_P90)
    }

    /// `estimates unreliable: p90 covered 62 % of the last 40 ends`, when they are.
    pub fn warning(&self) -> Option<String> {
        let c = self.coverage.filter(|_| self.unreliable())?;
        Some(format!(
            "estimates unreliable: p90 covered {} of the last {} ends",
            percent(c.p90),
            c.ends
        ))
    }
}

fn percent(share: f64) -> String {
    format!("{:.0} %", share * 100.0)
}

/// The learned operations of one ruleset object, as its status lists them (leniently: an
/// entry without an operation is skipped, a missing figure reads 0), its strings
/// [sanitized](crate::sanitize): printable as they are.
pub fn from_ruleset(ruleset: &Value) -> Vec<Learned> {
    let ruleset = &crate::sanitize::value(ruleset);
    let name = ruleset["metadata"]["name"].as_str().unwrap_or_default();
    let number = |v: &Value| v.as_f64().unwrap_or(0.0);
    ruleset["status"]["operationDurations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| {
            Some(Learned {
                ruleset: name.to_owned(),
                operation: d["operation"].as_str()?.to_owned(),
                count: d["count"].as_u64().unwrap_or(0),
                p50: number(&d["p50Seconds"]),
                p90: number(&d["p90Seconds"]),
                p99: number(&d["p99Seconds"]),
                coverage: d["coverage"].as_object().map(|c| Coverage {
                    ends: c.get("ends").and_then(Value::as_u64).unwrap_or(0),
                    p50: c.get("p50").map_or(0.0, number),
                    p90: c.get("p90").map_or(0.0, number),
                }),
            })
        })
        .collect()
}

/// `1m30s` from seconds (under a second: `0.4s`).
fn seconds(s: f64) -> String {
    if s < 1.0 {
        return format!("{s:.1}s");
    }
    // Whole seconds of a duration that fits.
    #[allow(clippy::cast_possible_truncation)]
    let whole = s.round() as i64;
    crate::format::human_duration(whole)
}

/// The table of `kubectl ifo rules`: one row per learned rule operation.
pub fn table(learned: &[Learned], colours: Colours) -> String {
    if learned.is_empty() {
        return "No rule has learned durations yet (a rule learns from its operations that \
                succeed).\n"
            .to_owned();
    }
    let titles = [
        "RULESET",
        "OPERATION",
        "SUCCEEDED",
        "P50",
        "P90",
        "P99",
        "P90 COVERED",
        "NOTE",
    ];
    let mut rows = vec![titles.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>()];
    for l in learned {
        let covered = match l.coverage {
            Some(c) => format!("{} of {}", percent(c.p90), c.ends),
            None => "-".to_owned(),
        };
        let note = if l.unreliable() {
            "estimates unreliable".to_owned()
        } else {
            match l.coverage {
                Some(c) if c.ends < MIN_ENDS => format!("too few ends to judge (<{MIN_ENDS})"),
                _ => String::new(),
            }
        };
        rows.push(vec![
            l.ruleset.clone(),
            l.operation.clone(),
            l.count.to_string(),
            seconds(l.p50),
            seconds(l.p90),
            seconds(l.p99),
            covered,
            note,
        ]);
    }
    let mut out = Table::render(&rows, colours);
    let unreliable = learned.iter().filter(|l| l.unreliable()).count();
    if unreliable > 0 {
        let _ = writeln!(
            out,
            "\n{unreliable} with estimates unreliable: their operations ended after the p90 \
             end they were first given more than {} of the time (of at least {MIN_ENDS} ends); \
             their expected ends are not to be planned by.",
            percent(1.0 - RELIABLE_P90)
        );
    }
    out
}

fn api(client: &kube::Client) -> Api<DynamicObject> {
    let ar = crate::client::api_resource(GROUP, VERSION, KIND, PLURAL);
    Api::all_with(client.clone(), &ar)
}

fn explain(e: &kube::Error, verb: &str) -> anyhow::Error {
    crate::client::access_error(
        e,
        verb,
        &format!("{PLURAL}.{GROUP}"),
        "reading rulesets needs a role that grants it (e.g. view on the cluster)",
    )
}

fn to_value(obj: DynamicObject) -> Value {
    serde_json::to_value(obj).unwrap_or_default()
}

/// What every ruleset (or the one named) learned, sorted by ruleset and operation.
pub async fn list(client: &kube::Client, name: Option<&str>) -> Result<Vec<Learned>> {
    let rulesets = match name {
        Some(name) => vec![to_value(
            api(client)
                .get(name)
                .await
                .map_err(|e| explain(&e, "get"))?,
        )],
        None => api(client)
            .list(&ListParams::default())
            .await
            .map_err(|e| explain(&e, "list"))?
            .items
            .into_iter()
            .map(to_value)
            .collect(),
    };
    let mut learned: Vec<Learned> = rulesets.iter().flat_map(from_ruleset).collect();
    learned.sort_by(|a, b| (&a.ruleset, &a.operation).cmp(&(&b.ruleset, &b.operation)));
    Ok(learned)
}

/// What `ruleset` learned of `operation`; `None` when it cannot be read (not allowed, gone),
/// since it only adds a note to what is shown.
pub async fn of(client: &kube::Client, ruleset: &str, operation: &str) -> Option<Learned> {
    let obj = api(client).get(ruleset).await.ok()?;
    from_ruleset(&to_value(obj))
        .into_iter()
        .find(|l| l.operation == operation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ruleset() -> Value {
        json!({
            "metadata": {"name": "vm-rules"},
            "status": {"operationDurations": [
                {"operation": "Migrating", "count": 37, "p50Seconds": 41.2, "p90Seconds": 75.3,
                 "p99Seconds": 118.8, "coverage": {"ends": 31, "p50": 0.516, "p90": 0.903}},
                {"operation": "Starting", "count": 300, "p50Seconds": 12.0, "p90Seconds": 20.0,
                 "p99Seconds": 30.0, "coverage": {"ends": 100, "p50": 0.2, "p90": 0.62}},
                {"operation": "Stopping", "count": 8, "p50Seconds": 0.4, "p90Seconds": 2.0,
                 "p99Seconds": 2.0, "coverage": {"ends": 3, "p50": 0.0, "p90": 0.0}},
                {"operation": "Cloning", "count": 5, "p50Seconds": 90, "p90Seconds": 95,
                 "p99Seconds": 99},
                {"operation": "Copying\u{1b}[2J", "count": 1},
                {"count": 1}
            ]}
        })
    }

    #[test]
    fn a_rule_whose_p90_covered_under_80_percent_of_20_ends_is_unreliable() {
        let learned = from_ruleset(&ruleset());
        assert_eq!(learned.len(), 5);
        assert!(!learned[4].operation.contains('\u{1b}'), "{:?}", learned[4]);
        let by = |op: &str| learned.iter().find(|l| l.operation == op).unwrap();
        assert!(!by("Migrating").unreliable());
        assert!(by("Starting").unreliable());
        assert_eq!(
            by("Starting").warning().as_deref(),
            Some("estimates unreliable: p90 covered 62 % of the last 100 ends")
        );
        // Too few ends to judge, or none judged: not flagged.
        assert!(!by("Stopping").unreliable());
        assert!(!by("Cloning").unreliable());
        assert_eq!(by("Cloning").coverage, None);
        assert_eq!(by("Migrating").warning(), None);
    }

    #[test]
    fn the_table_marks_unreliable_estimates() {
        let text = table(&from_ruleset(&ruleset()), Colours::OFF);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("RULESET"), "{text}");
        let starting = lines.iter().find(|l| l.contains("Starting")).unwrap();
        assert!(starting.contains("62 % of 100"), "{text}");
        assert!(starting.ends_with("estimates unreliable"), "{text}");
        let migrating = lines.iter().find(|l| l.contains("Migrating")).unwrap();
        assert!(
            migrating.contains("90 % of 31") && migrating.contains("41s"),
            "{text}"
        );
        assert!(!migrating.contains("unreliable"), "{text}");
        let stopping = lines.iter().find(|l| l.contains("Stopping")).unwrap();
        assert!(stopping.contains("too few ends"), "{text}");
        assert!(stopping.contains("0.4s"), "{text}");
        assert!(text.contains("1 with estimates unreliable"), "{text}");
        assert!(table(&[], Colours::OFF).starts_with("No rule"));
    }
}
