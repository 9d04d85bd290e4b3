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
    describe_noting(op, now, None)
}

/// The detail view of one operation, with a note on its expected end (such as its rule's
/// estimates being unreliable, see `rules`).
pub fn describe_noting(op: &Op, now: Timestamp, estimates: Option<&str>) -> String {
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
                "{} ({}; from {basis}{})",
                end.strftime("%Y-%m-%dT%H:%M:%SZ"),
                time_left(now, end, op.expected_end_p90()),
                estimates.map(|n| format!("; {n}")).unwrap_or_default()
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
mod tests;
