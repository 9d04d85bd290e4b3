//! Output: ages, aligned tables, `-o json|yaml|name`, and the detail view of `get`. Pure: every
//! function takes the time to measure ages against.

use std::fmt::Write as _;

use jiff::Timestamp;
use serde_json::{Value, json};
use unicode_width::UnicodeWidthStr as _;

use super::colour::Colours;
use super::op::Op;

/// `-o`: how a list or an object is printed, with kubectl's names for the formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Aligned columns, as `kubectl get`.
    Table,
    /// The table with component, ruleset, outcome and completion columns added.
    Wide,
    /// The served objects, verbatim, as JSON (a `List` for several).
    Json,
    /// The served objects, verbatim, as YAML (a `List` for several).
    Yaml,
    /// `resource.group/name` per line, to pipe into other kubectl commands.
    Name,
}

/// By hand rather than derived: a derived `ValueEnum` would print the variants' docs in `--help`
/// and switch the whole flag list to its long layout.
impl clap::ValueEnum for Output {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            Output::Table,
            Output::Wide,
            Output::Json,
            Output::Yaml,
            Output::Name,
        ]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(match self {
            Output::Table => "table",
            Output::Wide => "wide",
            Output::Json => "json",
            Output::Yaml => "yaml",
            Output::Name => "name",
        }))
    }
}

/// An age the way kubectl prints one (`45s`, `3m20s`, `15m`, `2h5m`, `30h`, `3d4h`, `90d`, `2y`).
pub fn human_duration(seconds: i64) -> String {
    ifo_apimachinery::duration::human_duration(jiff::SignedDuration::from_secs(seconds))
}

/// The age of `since` at `now`; `<unknown>` without a time.
pub fn age(now: Timestamp, since: Option<Timestamp>) -> String {
    match since {
        Some(t) => human_duration(now.as_second() - t.as_second()),
        None => "<unknown>".into(),
    }
}

/// Rows of cells printed in aligned columns, three spaces apart; the last column is not padded.
/// Widths are display widths (a CJK character takes two columns), and cells are painted after
/// they are padded, by the title of their column.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// The width of each column but the last (which is never padded).
    pub widths: Vec<usize>,
    titles: Vec<String>,
    colours: Colours,
}

impl Table {
    /// A table whose first row is `titles` (printed bold, and naming how columns are painted).
    pub fn new(titles: &[String], colours: Colours) -> Table {
        let mut table = Table {
            widths: Vec::new(),
            titles: titles.to_vec(),
            colours,
        };
        table.fit(std::slice::from_ref(&table.titles.clone()));
        table
    }

    /// Widths that fit `rows`, and at least the current ones (so a stream of rows keeps its
    /// columns aligned with what was printed before).
    pub fn fit(&mut self, rows: &[Vec<String>]) {
        for row in rows {
            if self.widths.len() < row.len() {
                self.widths.resize(row.len(), 0);
            }
            for (i, cell) in row.iter().enumerate() {
                self.widths[i] = self.widths[i].max(cell.width());
            }
        }
    }

    /// One row, padded to the widths and painted, without trailing spaces.
    pub fn line(&self, row: &[String]) -> String {
        let titles = row == self.titles.as_slice();
        let mut out = String::new();
        for (i, cell) in row.iter().enumerate() {
            let painted = if titles {
                self.colours.bold(cell)
            } else {
                let title = self.titles.get(i).map_or("", String::as_str);
                self.colours.cell(title, cell)
            };
            out.push_str(&painted);
            if i + 1 < row.len() {
                let width = self.widths.get(i).copied().unwrap_or(0);
                out.push_str(&" ".repeat(width.saturating_sub(cell.width()) + 3));
            }
        }
        out.trim_end().to_owned()
    }

    /// Every row, each followed by a newline; the first row is the titles.
    pub fn render(rows: &[Vec<String>], colours: Colours) -> String {
        let Some(titles) = rows.first() else {
            return String::new();
        };
        let mut table = Table::new(titles, colours);
        table.fit(rows);
        rows.iter().map(|r| table.line(r) + "\n").collect()
    }
}

fn or_none(s: &str) -> String {
    if s.is_empty() {
        "<none>".into()
    } else {
        s.to_owned()
    }
}

/// Which columns a list shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Columns {
    /// Whether to show the NAMESPACE column (with `-A`, where rows come from many namespaces).
    pub namespace: bool,
    /// Whether to show the `-o wide` columns.
    pub wide: bool,
}

/// The column titles for `cols`, in the order [`row`] fills them.
pub fn header(cols: Columns) -> Vec<String> {
    let mut h = Vec::new();
    if cols.namespace {
        h.push("NAMESPACE");
    }
    h.extend(["NAME", "KIND", "SUBJECT", "OPERATION", "PHASE", "AGE"]);
    if cols.wide {
        h.extend(["COMPONENT", "RULESET", "OUTCOME", "COMPLETED", "EXPECTED"]);
    }
    h.push("MESSAGE");
    h.into_iter().map(str::to_owned).collect()
}

/// The cells of one operation, in the order [`header`] names them; empty fields show `<none>` so
/// that columns stay aligned and readable.
pub fn row(op: &Op, cols: Columns, now: Timestamp) -> Vec<String> {
    let mut r = Vec::new();
    if cols.namespace {
        r.push(op.namespace.clone().unwrap_or_else(|| "-".into()));
    }
    r.push(or_none(&op.name));
    r.push(or_none(&op.spec.subject.kind));
    r.push(or_none(&op.spec.subject.name));
    r.push(or_none(&op.spec.operation));
    r.push(phase(op, now));
    r.push(age(now, op.created));
    if cols.wide {
        r.push(or_none(&op.spec.component));
        r.push(or_none(&op.spec.rule_set));
        r.push(or_none(op.outcome()));
        r.push(match op.completed() {
            Some(t) => age(now, Some(t)),
            None => "<none>".into(),
        });
        r.push(expected(op, now));
    }
    r.push(op.message().replace(['\n', '\r', '\t'], " "));
    r
}

/// The EXPECTED cell of an active operation: its progress, the time left until its expected
/// end (`~4m`, `overdue 2m`), and `stalled` when it is; `<none>` when nothing is known.
pub fn expected(op: &Op, now: Timestamp) -> String {
    if !op.is_active() {
        return "<none>".into();
    }
    let mut parts = Vec::new();
    if let Some(p) = op.progress() {
        parts.push(format!("{}%", (p * 10.0).round() / 10.0));
    }
    if let Some(end) = op.expected_end() {
        parts.push(time_left(now, end, op.expected_end_p90()));
    }
    if op.stall().is_some() {
        parts.push("stalled".into());
    }
    if parts.is_empty() {
        return "<none>".into();
    }
    parts.join(" ")
}

/// `~4m` until `end`, with the band's far edge `p90` where it reads otherwise (`~2m (≤5m)`),
/// `overdue 2m` past it.
fn time_left(now: Timestamp, end: Timestamp, p90: Option<Timestamp>) -> String {
    let left = end.as_second() - now.as_second();
    if left < 0 {
        return format!("overdue {}", human_duration(-left));
    }
    let near = human_duration(left);
    match p90.map(|p90| human_duration(p90.as_second().max(end.as_second()) - now.as_second())) {
        Some(far) if far != near => format!("~{near} (≤{far})"),
        _ => format!("~{near}"),
    }
}

/// The phase, or for an active operation no rule detects any more, `ending in 25s` (painted
/// dim, as every phase but `Active`).
fn phase(op: &Op, now: Timestamp) -> String {
    match op.ending_at() {
        Some(at) if op.is_active() => format!(
            "ending in {}",
            human_duration((at.as_second() - now.as_second()).max(0))
        ),
        _ => or_none(&op.status.phase),
    }
}

/// A Kubernetes `List` of the objects, as `kubectl get -o json` prints mixed kinds.
pub fn list_object(ops: &[Op]) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": ops.iter().map(|o| o.raw.clone()).collect::<Vec<_>>(),
    })
}

/// Pretty-printed JSON with a final newline, as kubectl prints.
pub fn to_json(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

/// YAML with a final newline; falls back to JSON if the value cannot be written as YAML.
pub fn to_yaml(value: &Value) -> String {
    match serde_saphyr::to_string(value) {
        Ok(s) if s.ends_with('\n') => s,
        Ok(s) => s + "\n",
        Err(_) => to_json(value),
    }
}

/// The operations in `output` format. Tables of nothing print nothing (the caller says so).
pub fn render_list(
    ops: &[Op],
    output: Output,
    namespace_column: bool,
    now: Timestamp,
    colours: Colours,
) -> String {
    match output {
        Output::Json => to_json(&list_object(ops)),
        Output::Yaml => to_yaml(&list_object(ops)),
        Output::Name => ops.iter().map(|o| o.qualified_name() + "\n").collect(),
        Output::Table | Output::Wide => {
            if ops.is_empty() {
                return String::new();
            }
            let cols = Columns {
                namespace: namespace_column,
                wide: output == Output::Wide,
            };
            let mut rows = vec![header(cols)];
            rows.extend(ops.iter().map(|o| row(o, cols, now)));
            Table::render(&rows, colours)
        }
    }
}

fn time_line(now: Timestamp, t: Option<Timestamp>) -> String {
    match t {
        Some(t) => format!(
            "{} ({} ago)",
            t.strftime("%Y-%m-%dT%H:%M:%SZ"),
            age(now, Some(t))
        ),
        None => "<none>".into(),
    }
}

/// The detail view of one operation.
pub fn describe(op: &Op, now: Timestamp) -> String {
    let dash = |s: &str| if s.is_empty() { "<none>" } else { s }.to_owned();
    let mut fields: Vec<(String, String)> = vec![
        ("Name".into(), dash(&op.name)),
        (
            "Namespace".into(),
            op.namespace
                .clone()
                .unwrap_or_else(|| "<none> (cluster-scoped)".into()),
        ),
        ("Kind".into(), op.kind().into()),
        ("Operation".into(), dash(&op.spec.operation)),
        ("Phase".into(), {
            let shown = phase(op, now);
            match op.ending_at() {
                Some(at) if shown != op.status.phase => format!(
                    "{} ({shown}: not detected any more, completes at {at} unless detected again)",
                    op.status.phase
                ),
                _ => shown,
            }
        }),
        ("Outcome".into(), dash(op.outcome())),
        ("Message".into(), dash(op.message())),
        ("Component".into(), dash(&op.spec.component)),
        ("RuleSet".into(), dash(&op.spec.rule_set)),
        ("Started".into(), time_line(now, op.created)),
        ("Last Detected".into(), time_line(now, op.last_detected())),
        ("Completed".into(), time_line(now, op.completed())),
    ];
    if let (Some(start), true) = (op.created, op.is_active()) {
        fields.push((
            "Running For".into(),
            human_duration(now.as_second() - start.as_second()),
        ));
    }
    if let Some(p) = op.progress() {
        fields.push(("Progress".into(), format!("{}%", (p * 10.0).round() / 10.0)));
    }
    if let (Some(end), true) = (op.expected_end(), op.is_active()) {
        let basis = op.status.estimate.as_deref().unwrap_or("unknown basis");
        fields.push((
            "Expected End".into(),
            format!(
                "{} ({}; from {basis})",
                end.strftime("%Y-%m-%dT%H:%M:%SZ"),
                time_left(now, end, op.expected_end_p90())
            ),
        ));
    }
    if let Some((reason, message)) = op.stall() {
        fields.push(("Stalled".into(), format!("{reason}: {message}")));
    }
    if !op.status.detected_by.is_empty() {
        fields.push(("Detected By".into(), op.status.detected_by.join(", ")));
    }
    let mut out = String::new();
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    for (k, v) in &fields {
        let _ = writeln!(out, "{:<width$}  {v}", format!("{k}:"));
    }
    let s = &op.spec.subject;
    let _ = writeln!(out, "Subject:");
    let subject_fields = [
        ("Kind", dash(&s.kind)),
        ("Name", dash(&s.name)),
        (
            "Namespace",
            s.namespace
                .clone()
                .unwrap_or_else(|| "<none> (cluster-scoped)".into()),
        ),
        ("APIVersion", dash(&s.api_version)),
        ("UID", dash(&s.uid)),
    ];
    for (k, v) in subject_fields {
        let _ = writeln!(out, "  {:<12}{v}", format!("{k}:"));
    }
    if let Some(g) = op.status.subject_generation {
        let _ = writeln!(out, "  {:<12}{g}", "Generation:");
    }
    if !s.owner_references.is_empty() {
        let _ = writeln!(out, "  Owners:");
        for o in &s.owner_references {
            let _ = writeln!(out, "    {}/{} (uid: {})", o.kind, o.name, o.uid);
        }
    }
    let _ = writeln!(out, "Labels:");
    if op.labels.is_empty() {
        let _ = writeln!(out, "  <none>");
    }
    for (k, v) in &op.labels {
        let _ = writeln!(out, "  {k}={v}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::tests::op;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn ages_like_kubectl() {
        for (secs, want) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (30 * 3600, "30h"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (4 * 86400, "4d"),
            (90 * 86400, "90d"),
            (3 * 365 * 86400 + 86400, "3y1d"),
            (10 * 365 * 86400, "10y"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
        assert_eq!(age(ts("2026-01-01T10:00:00Z"), None), "<unknown>");
    }

    #[test]
    fn tables_align_columns() {
        let rows = vec![
            vec!["A".to_string(), "BB".into(), "last".into()],
            vec!["long".to_string(), String::new(), "x y".into()],
        ];
        assert_eq!(
            Table::render(&rows, Colours::OFF),
            "A      BB   last\nlong        x y\n"
        );
    }

    #[test]
    fn streamed_rows_keep_their_columns() {
        let mut t = Table::default();
        t.fit(&[vec!["NAME".into(), "AGE".into()]]);
        assert_eq!(t.line(&["a".into(), "1s".into()]), "a      1s");
        t.fit(&[vec!["a-longer-name".into(), "1s".into()]]);
        assert_eq!(t.line(&["a".into(), "1s".into()]), "a               1s");
    }

    #[test]
    fn lists_in_every_format() {
        let now = ts("2026-01-01T10:03:20Z");
        let ops = vec![
            op(Some("ns1"), "VirtualMachine", "vm1", "Migrating", "Active"),
            op(None, "Node", "n1", "Draining", "Active"),
        ];
        let table = render_list(&ops, Output::Table, true, now, Colours::OFF);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            [
                "NAMESPACE",
                "NAME",
                "KIND",
                "SUBJECT",
                "OPERATION",
                "PHASE",
                "AGE",
                "MESSAGE"
            ]
        );
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            [
                "ns1",
                "vm1-migrating-0000",
                "VirtualMachine",
                "vm1",
                "Migrating",
                "Active",
                "3m20s",
                "msg"
            ]
        );
        assert!(lines[2].starts_with("-   "), "{table}");

        let wide = render_list(&ops, Output::Wide, false, now, Colours::OFF);
        assert!(
            wide.lines()
                .next()
                .unwrap()
                .contains("COMPONENT   RULESET   OUTCOME   COMPLETED")
        );
        assert!(wide.contains("kubevirt"));

        let json: Value =
            serde_json::from_str(&render_list(&ops, Output::Json, true, now, Colours::OFF))
                .unwrap();
        assert_eq!(json["kind"], "List");
        assert_eq!(json["items"][1]["kind"], "InFlightClusterOperation");

        let yaml = render_list(&ops, Output::Yaml, true, now, Colours::OFF);
        assert!(yaml.contains("kind: List"), "{yaml}");

        assert_eq!(
            render_list(&ops, Output::Name, true, now, Colours::OFF),
            "inflightoperation.live.ifo.kubevirt.io/vm1-migrating-0000\n\
             inflightclusteroperation.live.ifo.kubevirt.io/n1-draining-0000\n"
        );
        assert_eq!(render_list(&[], Output::Table, true, now, Colours::OFF), "");
    }

    #[test]
    fn multiline_messages_stay_on_their_row() {
        let mut o = op(Some("ns1"), "VirtualMachine", "vm1", "Migrating", "Active");
        o.status.message = Some("a\nb".into());
        let now = ts("2026-01-01T10:00:00Z");
        assert_eq!(
            render_list(&[o], Output::Table, false, now, Colours::OFF)
                .lines()
                .count(),
            2
        );
    }

    #[test]
    fn describes_one_operation() {
        let now = ts("2026-01-01T10:10:00Z");
        let o = op(Some("ns1"), "VirtualMachine", "vm1", "Migrating", "Active");
        let text = describe(&o, now);
        assert!(
            text.contains("Name:           vm1-migrating-0000\n"),
            "{text}"
        );
        assert!(
            text.contains("Started:        2026-01-01T10:00:00Z (10m ago)"),
            "{text}"
        );
        assert!(text.contains("Running For:    10m"), "{text}");
        assert!(text.contains("Outcome:        <none>"), "{text}");
        assert!(
            text.contains("Subject:\n  Kind:       VirtualMachine\n"),
            "{text}"
        );
        assert!(
            text.contains("Labels:\n  ifo.kubevirt.io/operation=Migrating\n"),
            "{text}"
        );
        let c = op(None, "Node", "n1", "Draining", "Completed");
        let text = describe(&c, now);
        assert!(text.contains("InFlightClusterOperation"), "{text}");
        assert!(!text.contains("Running For"), "{text}");
    }

    #[test]
    fn shows_progress_expected_end_and_stall() {
        let now = ts("2026-11-22T10:00:00Z");
        let base = op(
            Some("vms"),
            "DataVolume",
            "dv1",
            "ImportInProgress",
            "Active",
        );
        assert_eq!(expected(&base, now), "<none>");
        let mut raw = base.raw.clone();
        raw["status"]["progress"] = serde_json::json!(45.25);
        raw["status"]["expectedEnd"] = serde_json::json!("2026-11-22T10:04:00Z");
        raw["status"]["estimate"] = serde_json::json!("Progress");
        raw["status"]["conditions"] = serde_json::json!([{"type": "Stalled", "status": "True",
            "reason": "ReportedByRule", "message": "Unable to connect",
            "lastTransitionTime": "2026-11-22T09:59:00Z"}]);
        let o = Op::from_json(raw);
        assert_eq!(expected(&o, now), "45.3% ~4m stalled");
        assert_eq!(
            expected(&o, ts("2026-11-22T10:06:00Z")),
            "45.3% overdue 2m stalled"
        );
        let text = describe(&o, now);
        assert!(text.contains("Progress:"), "{text}");
        assert!(
            text.contains("2026-11-22T10:04:00Z (~4m; from Progress)"),
            "{text}"
        );
        assert!(text.contains("ReportedByRule: Unable to connect"), "{text}");
    }

    #[test]
    fn a_history_estimate_shows_its_band_where_it_reads_otherwise() {
        let now = ts("2026-11-22T10:00:00Z");
        let mut raw = op(None, "VirtualMachine", "vm1", "Migrating", "Active").raw;
        raw["status"]["expectedEnd"] = serde_json::json!("2026-11-22T10:02:00Z");
        raw["status"]["expectedEndP90"] = serde_json::json!("2026-11-22T10:05:00Z");
        raw["status"]["estimate"] = serde_json::json!("History");
        let o = Op::from_json(raw.clone());
        assert_eq!(expected(&o, now), "~2m (≤5m)");
        assert!(describe(&o, now).contains("(~2m (≤5m); from History)"));
        // A far edge that reads the same, or none: the estimate alone.
        raw["status"]["expectedEndP90"] = serde_json::json!("2026-11-22T10:02:00Z");
        assert_eq!(expected(&Op::from_json(raw.clone()), now), "~2m");
        raw["status"]["expectedEndP90"] = serde_json::json!(7);
        assert_eq!(expected(&Op::from_json(raw), now), "~2m");
    }

    #[test]
    fn ending_operations_show_when_they_complete_dimmed() {
        let now = ts("2026-01-01T10:10:00Z");
        let mut o = op(Some("ns1"), "VirtualMachine", "vm1", "Migrating", "Active");
        o.status.grace_period_end = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts(
            "2026-01-01T10:10:25Z",
        )));
        let cols = Columns {
            namespace: false,
            wide: false,
        };
        assert_eq!(row(&o, cols, now)[4], "ending in 25s");
        let painted = render_list(&[o.clone()], Output::Table, false, now, Colours::ON);
        assert!(
            painted.contains("\u{1b}[2mending in 25s\u{1b}[0m"),
            "{painted:?}"
        );
        assert!(
            describe(&o, now).contains("Phase:          Active (ending in 25s: not detected"),
            "{}",
            describe(&o, now)
        );
        // Past its end (the server has not ticked yet): ending now, never negative.
        assert_eq!(row(&o, cols, ts("2026-01-01T10:11:00Z"))[4], "ending in 0s");
        // A phase that is not Active is shown as it is.
        o.status.phase = "Completed".into();
        assert_eq!(row(&o, cols, now)[4], "Completed");
    }
}
