use super::*;
use crate::op::tests::op;

/// Asserts that `text` contains each of `parts`.
#[track_caller]
fn assert_contains(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} missing from:\n{text}");
    }
}

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
        serde_json::from_str(&render_list(&ops, Output::Json, true, now, Colours::OFF)).unwrap();
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
    assert_contains(
        &describe(&o, now),
        &[
            "Name:           vm1-migrating-0000\n",
            "Started:        2026-01-01T10:00:00Z (10m ago)",
            "Running For:    10m",
            "Outcome:        <none>",
            "Subject:\n  Kind:       VirtualMachine\n",
            "Labels:\n  ifo.kubevirt.io/operation=Migrating\n",
        ],
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
    assert_contains(
        &describe(&o, now),
        &[
            "Progress:",
            "2026-11-22T10:04:00Z (~4m; from Progress)",
            "ReportedByRule: Unable to connect",
        ],
    );
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
    let noted = describe_noting(
        &o,
        now,
        Some("estimates unreliable: p90 covered 62 % of the last 40 ends"),
    );
    assert!(
        noted.contains("(~2m (≤5m); from History; estimates unreliable: p90 covered 62 %"),
        "{noted}"
    );
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
