//! The gates as kubectl prints them (through the Table writer, [`crate::api::table`]): `NAME,
//! CLEAR, ACTIVE, EXPECTED, OLDEST, MESSAGE` (the same columns with `-o wide`: there is nothing
//! more to say in a row).

use super::verdict::Gate;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::table::{Column, Printed};
use ifo_apimachinery::duration::{human_duration, table_age};

impl Printed for Gate {
    type Cells<'a> = (&'a str, &'a str, u64, String, String, &'a str);
    type Object = Gate;
    type Metadata = ObjectMeta;
    const COLUMNS: &'static [Column] = &[
        Column::new(
            "Name",
            "string",
            "name",
            "The scope: cluster, node.<node>, component.<component> or namespace.<namespace>.",
        ),
        Column::new(
            "Clear",
            "string",
            "",
            "True: nothing in flight. False: operations in flight. Unknown: the server cannot vouch for the scope.",
        ),
        Column::new(
            "Active",
            "integer",
            "",
            "Operations in flight in the scope.",
        ),
        Column::new(
            "Expected",
            "string",
            "",
            "When the last of them is expected to end, from now.",
        ),
        Column::new(
            "Oldest",
            "string",
            "",
            "How long the oldest of them has been running.",
        ),
        Column::new(
            "Message",
            "string",
            "",
            "What blocks the scope, or why its state is unknown.",
        ),
    ];

    fn cells(&self, now: Timestamp) -> Self::Cells<'_> {
        let clear = self.status.clear();
        (
            self.metadata.name.as_deref().unwrap_or_default(),
            clear.map_or("Unknown", |c| c.status.as_str()),
            self.status.active_operations,
            self.status
                .expected_clear_time
                .as_ref()
                .map(|t| expected_in(t.0, now))
                .unwrap_or_default(),
            self.status
                .operations
                .first()
                .map(|op| table_age(Some(op.start_time()), now))
                .unwrap_or_default(),
            clear.map_or("", |c| c.message.as_str()),
        )
    }

    fn object(&self) -> &Gate {
        self
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn resource_version(&self) -> String {
        self.metadata.resource_version.clone().unwrap_or_default()
    }
}

/// `~4m` until `at`; `overdue` once it has passed.
pub(super) fn expected_in(at: Timestamp, now: Timestamp) -> String {
    if at <= now {
        "overdue".to_owned()
    } else {
        format!("~{}", human_duration(at.duration_since(now)))
    }
}

/// What a row shows of `gate` at `now`, as text: a Table watch sends a change of a gate only
/// when it differs (`kubectl get gates -w` prints a row for every event it is sent).
pub(super) fn shown(gate: &Gate, now: Timestamp) -> String {
    serde_json::to_string(&gate.cells(now)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_times_read_from_now() {
        let now: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        assert_eq!(
            expected_in("2026-11-22T10:04:00Z".parse().unwrap(), now),
            "~4m"
        );
        assert_eq!(
            expected_in("2026-11-22T09:59:00Z".parse().unwrap(), now),
            "overdue"
        );
    }
}
