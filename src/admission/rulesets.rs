//! The door for OperationRuleSets: a ruleset created or changed is compiled as the controller
//! would compile it (same [`compile`], same [`Engine`]), and refused, with every problem and
//! its position, when it does not compile. So `kubectl apply` of a broken ruleset fails as it
//! does for a CRD with validation rules, instead of succeeding and reporting `InvalidRule` in
//! the ruleset's status afterwards.
//!
//! What compiling cannot see (a target that does not exist, a rule of the wrong result type, a
//! rule failing on some objects, a cost over budget on real objects) is still reported by the
//! status conditions at run time; and a ruleset that got past the door (the webhook is
//! `failurePolicy: Ignore`, so a server that is down lets every change through) is still
//! reported `InvalidRule`.

use super::intake::{BODY_DEADLINE, Intake};
use super::{REVIEW_DEADLINE, ReviewError};
use crate::evaluate::{Engine, MAX_MESSAGE_CHARS, truncated};
use crate::metrics::{AdmissionDoor, AdmissionTimer};
use crate::ruleset::{RuleSetSpec, api_resource, compile};
use axum::extract::{Request, State};
use axum::response::Response;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::core::{DynamicObject, Status};
use serde::Deserialize;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Compiles run at once, at most: a compile is CPU-bound, and ruleset changes are rare, so
/// reviews take turns rather than take the cores from detection.
const MAX_COMPILES: usize = 1;

/// Largest spec (as JSON) the door compiles: 13 times the largest shipped one (19 KB). Compiling
/// runs at some 150 KB/s in an unoptimised build (measured: 4 MB of 16 KiB expressions, the
/// most the CRD's schema allows, in 28 s), so at most 1.7 s of one core there, several times
/// less in a release build. A larger spec is let through unchecked, with a warning, and its
/// status says whether it compiles: reviews come from anyone who reaches the port (the door is
/// not authenticated), and each must stay cheap.
const MAX_CHECKED_SPEC_BYTES: usize = 256 << 10;

/// Reviews of rulesets read at once, by each kind of caller: a body may be
/// [`super::MAX_REVIEW_BYTES`], and ruleset changes are rare.
const MAX_READS: usize = 2;

/// The door's state: the engine the controller uses, the turns of the reads and the compiles.
pub(super) struct RuleSets {
    engine: Engine,
    intake: Arc<Intake>,
    reads: Arc<Semaphore>,
    compiles: Arc<Semaphore>,
}

impl RuleSets {
    pub(super) fn new(engine: Engine, intake: Arc<Intake>) -> RuleSets {
        RuleSets {
            engine,
            intake,
            reads: Arc::new(Semaphore::new(MAX_READS)),
            compiles: Arc::new(Semaphore::new(MAX_COMPILES)),
        }
    }

    /// Checks the caller, reads the review in turn (its spec decoded only when it is to be
    /// compiled), and decides on the blocking pool, in turn.
    async fn answer(&self, request: Request) -> Result<AdmissionResponse, ReviewError> {
        let (caller, request) = self.intake.admit(request).await?;
        let _turn = self.intake.turn(caller, Intake::peer(&request)).await;
        // (The semaphores are never closed: `None` cannot happen.)
        let _read = self.reads.clone().acquire_owned().await.ok();
        let bytes = tokio::time::timeout(
            BODY_DEADLINE,
            super::review::read_whole(request.into_body(), super::MAX_REVIEW_BYTES),
        )
        .await
        .map_err(|_| ReviewError::TimedOut(BODY_DEADLINE))??;
        let mut spec_bytes = None;
        let review = super::review::parse_named(&bytes, |raw| {
            let text = raw.get();
            spec_bytes = Some(text.len());
            if text.len() > MAX_CHECKED_SPEC_BYTES {
                return Ok(serde_json::Value::Null);
            }
            serde_json::from_str(text)
        })?;
        drop(bytes);
        // Held by the compile itself: a compile still running after the deadline keeps its turn.
        let turn = self.compiles.clone().acquire_owned().await.ok();
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || {
            let _turn = turn;
            decide_measured(&engine, &review, spec_bytes)
        })
        .await
        .map_err(ReviewError::Failed)?
    }
}

/// `POST /admission/rulesets`: an AdmissionReview in, its answer out (an HTTP error when the
/// review cannot be read or answered in time).
pub(super) async fn review(State(door): State<Arc<RuleSets>>, request: Request) -> Response {
    let timer = AdmissionTimer::start(AdmissionDoor::RuleSets);
    let answered = tokio::time::timeout(REVIEW_DEADLINE, door.answer(request))
        .await
        .unwrap_or(Err(ReviewError::TimedOut(REVIEW_DEADLINE)));
    let (response, decision) = super::respond(answered);
    timer.finish(decision);
    response
}

/// The decision on one review: refuses the creation or change of an OperationRuleSet whose
/// spec does not compile, with `422 Invalid` and every problem (as its `InvalidRule` condition
/// would say them); allows everything else, including what the door was not registered for.
#[cfg(test)]
pub(crate) fn decide(
    engine: &Engine,
    request: &AdmissionRequest<DynamicObject>,
) -> Result<AdmissionResponse, ReviewError> {
    decide_measured(engine, request, None)
}

/// [`decide`], with the size of the spec as it was sent (`None`: measured here).
fn decide_measured(
    engine: &Engine,
    request: &AdmissionRequest<DynamicObject>,
    spec_bytes: Option<usize>,
) -> Result<AdmissionResponse, ReviewError> {
    let operation = match request.operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete | Operation::Connect => return Ok(AdmissionResponse::from(request)),
    };
    let rulesets = api_resource();
    let is_ruleset = request.resource.group == rulesets.group
        && request.resource.version == rulesets.version
        && request.resource.resource == rulesets.plural
        && request
            .sub_resource
            .as_deref()
            .unwrap_or_default()
            .is_empty();
    if !is_ruleset {
        return Ok(AdmissionResponse::from(request));
    }
    let Some(object) = &request.object else {
        return Err(ReviewError::NoObject { operation });
    };
    let name = object.metadata.name.as_deref().unwrap_or(&request.name);
    let mut response = AdmissionResponse::from(request);
    // Logged at debug only: whoever applied the ruleset sees the answer, the decisions are
    // counted, and callers of this unauthenticated path must not be able to fill the log.
    match check(engine, name, object, spec_bytes) {
        Checked::Compiles => {
            tracing::debug!(door = "rulesets", ruleset = %name, operation, "ruleset compiles");
        }
        Checked::TooLarge(bytes) => {
            tracing::debug!(door = "rulesets", ruleset = %name, operation, bytes, "ruleset let through unchecked: its spec is too large to compile here");
            response.warnings = Some(vec![format!(
                "not validated: the spec is {bytes} bytes, over the {MAX_CHECKED_SPEC_BYTES} this \
                 check compiles; see the ruleset's InvalidRule condition"
            )]);
        }
        Checked::Problems(problems) => {
            tracing::debug!(door = "rulesets", ruleset = %name, operation, dry_run = request.dry_run, %problems, "ruleset refused: it does not compile");
            response.allowed = false;
            response.result = Status::failure(&problems, "Invalid").with_code(422);
        }
    }
    Ok(response)
}

/// What compiling a ruleset's spec found.
enum Checked {
    Compiles,
    /// Every problem, as the `InvalidRule` condition says them.
    Problems(String),
    /// Not compiled: the spec is this many bytes, over [`MAX_CHECKED_SPEC_BYTES`].
    TooLarge(usize),
}

fn check(
    engine: &Engine,
    name: &str,
    object: &DynamicObject,
    spec_bytes: Option<usize>,
) -> Checked {
    let Some(spec) = object.data.get("spec") else {
        return Checked::Problems("spec: Required value".to_owned());
    };
    let bytes = spec_bytes
        .unwrap_or_else(|| serde_json::to_vec(spec).map_or(usize::MAX, |json| json.len()));
    if bytes > MAX_CHECKED_SPEC_BYTES {
        return Checked::TooLarge(bytes);
    }
    let spec = match RuleSetSpec::deserialize(spec) {
        Ok(spec) => spec,
        Err(e) => return Checked::Problems(format!("spec: {e}")),
    };
    match compile(engine, name, None, &spec) {
        Ok(_) => Checked::Compiles,
        Err(invalid) => Checked::Problems(truncated(invalid.to_string(), MAX_MESSAGE_CHARS)),
    }
}

#[cfg(test)]
mod tests;
