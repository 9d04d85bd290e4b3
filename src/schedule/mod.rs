//! Operations announced before they start: what a rule's `schedule` says of each object (a
//! CronJob's next run, a Velero Schedule's next backup, a Forklift cutover), kept per ruleset,
//! subject and operation, and read as the scheduled operations of a scope.
//!
//! - [`cron`]: a cron schedule as Kubernetes CronJobs take it, in its time zone.
//! - [`Schedules`]: what the detector last found on each object (written on every event, and
//!   when an object or ruleset goes), and the scheduled operations of a scope, soonest first
//!   ([`Schedules::upcoming`]), each with the durations it is expected to take: its object's
//!   own runs' once it has enough, else its rule's, never less than its own took
//!   (`history::own`).
//!
//! A scheduled operation is not in flight: it is no InFlightOperation, never counts in a gate's
//! verdict, and the guard does not see it. Its node is not known in advance (a CronJob's pods
//! are placed when they start), so it belongs to the cluster, its namespace and its component.

pub mod cron;
mod table;
mod upcoming;

pub use table::Schedules;
pub use upcoming::{HORIZON, MAX_LISTED, Unknown, Upcoming, Upcomings};

#[cfg(test)]
mod tests;
