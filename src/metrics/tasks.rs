//! The server's background tasks (see the `supervise` module): how often each failed.

use super::register;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

pub(super) struct Tasks {
    failures: Family<super::Labels, Counter>,
}

impl Tasks {
    pub(super) fn register(r: &mut Registry) -> Tasks {
        Tasks {
            failures: register(
                r,
                "task_failures",
                "Times a background task of the server ended or panicked (it is started again, or the server stops being live)",
                Family::default(),
            ),
        }
    }
}

/// Background task `task` ended or panicked.
pub fn task_failed(task: &str) {
    super::metrics()
        .tasks
        .failures
        .get_or_create(&vec![("task", task.to_string())])
        .inc();
}
