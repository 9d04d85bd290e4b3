//! One dynamic watcher per target resource type, started, restarted and stopped as rulesets come
//! and go. Objects are evaluated as they stream by and never cached.

mod detector;
mod health;
mod lanes;
mod object;
mod suspension;
mod target_health;
mod watcher;

pub(crate) use detector::{Detector, Limits};
pub(crate) use health::{Health, RuleSetHealth, WatchState};
/// What the watchers decode objects into (public for the `decode` benchmark).
pub use object::{MAX_DEPTH, Object};
pub(crate) use suspension::{DEFAULT_SUSPEND_AFTER, SuspendPolicy};
// Why a target is not current: read through `Stale::reason` (named in tests).
#[cfg(test)]
pub(crate) use target_health::Blind;
pub(crate) use target_health::{Stale, TargetHealth};
pub(crate) use watcher::{Liveness, Watches};
