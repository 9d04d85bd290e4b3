//! One dynamic watcher per target resource type, started, restarted and stopped as rulesets come
//! and go. Objects are evaluated as they stream by and never cached.

mod detector;
mod health;
mod lanes;
mod suspension;
mod target_health;
mod watcher;

pub use detector::{Detector, Limits};
pub use health::{Health, RuleSetHealth, WatchState};
pub use suspension::{DEFAULT_SUSPEND_AFTER, DEFAULT_SUSPEND_WINDOW, SuspendPolicy};
pub use target_health::{Stale, TargetHealth};
pub use watcher::{Liveness, Watches};
