//! One dynamic watcher per target resource type, started, restarted and stopped as rulesets come
//! and go. Objects are handed to detection as they stream by and never cached.

mod dynamic;
mod object;
mod watcher;

pub(crate) use dynamic::dynamic_resource;
/// What the watchers decode objects into.
pub use object::Object;
pub(crate) use watcher::{InitialList, Liveness, Watches, watch_error_message};
