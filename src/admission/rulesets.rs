//! The door for OperationRuleSets: a ruleset created or changed is compiled as the controller
//! would compile it (same [`compile`], same [`Engine`]), and refused, with every problem and
//! its position, when it does not compile. So `kubectl apply` of a broken ruleset fails as it
//! does for a CRD with validation rules, instead of succeeding and reporting `InvalidRule` in
//! the ruleset's status afterwards.
//!
//! A ruleset that compiles is then checked against what it reads (`ruleset::schema_check`):
//! the result types of its expressions, and the fields it reads against its targets' schemas,
//! those the server holds (`ruleset::schema_check::Schemas`: every CRD's from a watch, built-in
//! types' from kube-apiserver's `/openapi/v3`), whoever the caller: a review makes the server
//! read nothing but a document of `/openapi/v3` it has not read yet, and tells the caller
//! nothing an authenticated user could not read there. A field a closed schema does not have,
//! or a rule that cannot give a bool, is refused like a compile error; what could not be
//! checked (no CRD, an open schema, a schema not had in time) is said in the review's warnings,
//! which kubectl prints.
//!
//! What the door cannot see (a target that does not exist, a rule failing on some objects, a
//! cost over budget on real objects) is still reported by the status conditions at run time;
//! and a ruleset that got past the door (the webhook is `failurePolicy: Ignore`, so a server
//! that is down lets every change through) is still reported `InvalidRule`.

use super::intake::{Caller, Intake};
use super::{REVIEW_DEADLINE, ReviewError};
use crate::evaluate::{Engine, MAX_MESSAGE_CHARS, truncated};
use crate::metrics::{AdmissionDoor, AdmissionTimer};
use crate::ruleset::schema_check::{Found, Lookup, Schemas, check_against};
use crate::ruleset::{RuleSetSpec, Target, api_resource, compile};
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

/// Reviews of rulesets kube-apiserver (proven) has read at once: a body may be
/// [`super::MAX_REVIEW_BYTES`], and ruleset changes are rare. Others' take turns to be read
/// (`intake`), weighed by their bytes.
const MAX_READS: usize = 2;

/// Most warnings a review answers with, and most characters in each (kube-apiserver may cut
/// longer ones).
const MAX_WARNINGS: usize = 4;
const MAX_WARNING_CHARS: usize = 250;

/// The door's state: the engine the controller uses, the turns of the reads and the compiles,
/// and the targets' schemas (`None`: types only).
pub(super) struct RuleSets {
    engine: Engine,
    intake: Arc<Intake>,
    reads: Arc<Semaphore>,
    compiles: Arc<Semaphore>,
    schemas: Option<Arc<Schemas>>,
}

impl RuleSets {
    pub(super) fn new(
        engine: Engine,
        intake: Arc<Intake>,
        schemas: Option<Arc<Schemas>>,
    ) -> RuleSets {
        RuleSets {
            engine,
            intake,
            reads: Arc::new(Semaphore::new(MAX_READS)),
            compiles: Arc::new(Semaphore::new(MAX_COMPILES)),
            schemas,
        }
    }

    /// The schemas of the targets of the ruleset in `review`.
    async fn look_up(&self, review: &AdmissionRequest<DynamicObject>) -> Found {
        let Some(schemas) = &self.schemas else {
            return Found::default();
        };
        let targets = review
            .object
            .as_ref()
            .map(|o| targets_of(&o.data))
            .unwrap_or_default();
        schemas.lookup(&targets).await
    }

    /// Checks the caller, reads the review in turn (its spec decoded only when it is to be
    /// compiled), and decides on the blocking pool, in turn.
    async fn answer(&self, request: Request) -> Result<AdmissionResponse, ReviewError> {
        let (caller, request) = self.intake.admit(request).await?;
        let length = axum::body::HttpBody::size_hint(request.body()).upper();
        let peer = Intake::peer(&request);
        let mut turn = self
            .intake
            .read_turn(caller, peer, length, super::MAX_REVIEW_BYTES)
            .await?;
        // kube-apiserver's, proven, take no turn: theirs are read and decided a few at a time.
        // (The semaphores are never closed: `None` cannot happen.)
        let _read = match caller {
            Caller::KubeApiserver => self.reads.clone().acquire_owned().await.ok(),
            Caller::Unverified => None,
        };
        let bytes = turn
            .read(super::review::read_whole(
                request.into_body(),
                super::MAX_REVIEW_BYTES,
            ))
            .await?;
        // Read: it waits for its decision (one compile at a time) in a turn of its own, its body
        // still counted among those read, and its turn still to be taken back, until it has one.
        let _deciding = turn.until(self.intake.decide_turn(caller, peer)).await?;
        turn.settle();
        let large = super::review::is_large(Some(bytes.len() as u64));
        let parse = move || {
            let mut spec_bytes = None;
            let review = super::review::parse_named(&bytes, |raw| {
                let text = raw.get();
                spec_bytes = Some(text.len());
                if text.len() > MAX_CHECKED_SPEC_BYTES {
                    return Ok(serde_json::Value::Null);
                }
                serde_json::from_str(text)
            })?;
            Ok::<_, ReviewError>((review, spec_bytes))
        };
        // A large body is parsed on the blocking pool: a ruleset's object is kept, not skipped.
        let (review, spec_bytes) = if large {
            tokio::task::spawn_blocking(parse)
                .await
                .map_err(ReviewError::Failed)??
        } else {
            parse()?
        };
        drop(turn);
        let looked = self.look_up(&review).await;
        // Held by the compile itself: a compile still running after the deadline keeps its turn.
        let turn = self.compiles.clone().acquire_owned().await.ok();
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || {
            let _turn = turn;
            decide_measured(&engine, &review, spec_bytes, &looked)
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
    decide_measured(engine, request, None, &Found::default())
}

/// [`decide`], with the schemas found for the ruleset's targets.
#[cfg(test)]
pub(crate) fn decide_with(
    engine: &Engine,
    request: &AdmissionRequest<DynamicObject>,
    found: &Found,
) -> Result<AdmissionResponse, ReviewError> {
    decide_measured(engine, request, None, found)
}

/// [`decide`], with the size of the spec as it was sent (`None`: measured here) and the
/// schemas found.
fn decide_measured(
    engine: &Engine,
    request: &AdmissionRequest<DynamicObject>,
    spec_bytes: Option<usize>,
    found: &Found,
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
    match check(engine, name, object, spec_bytes, found) {
        Checked::Compiles(warnings) => {
            tracing::debug!(door = "rulesets", ruleset = %name, operation, "ruleset compiles");
            if !warnings.is_empty() {
                response.warnings = Some(warnings);
            }
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
    /// It compiles and passes the schema check; what was not checked, as warnings.
    Compiles(Vec<String>),
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
    found: &Found,
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
    let compiled = match compile(engine, name, None, &spec) {
        Ok(compiled) => compiled,
        Err(invalid) => {
            return Checked::Problems(truncated(invalid.to_string(), MAX_MESSAGE_CHARS));
        }
    };
    let report = check_against(&compiled, |target| found.schema(target));
    if !report.is_ok() {
        return Checked::Problems(truncated(report.problems.join("; "), MAX_MESSAGE_CHARS));
    }
    let mut warnings: Vec<String> = Vec::new();
    let targets =
        std::iter::once(&compiled.target).chain(compiled.related.iter().map(|p| &p.target));
    for target in targets {
        if let Some(Lookup::Absent(why)) = found.by_target.get(target) {
            let warning = format!("the fields read from {target} are not checked: {why}");
            if !warnings.contains(&warning) {
                warnings.push(warning);
            }
        }
    }
    warnings.extend(report.unchecked);
    warnings.truncate(MAX_WARNINGS);
    Checked::Compiles(
        warnings
            .into_iter()
            .map(|w| truncated(w, MAX_WARNING_CHARS))
            .collect(),
    )
}

/// The targets a ruleset's spec names (its own, then its related parts'), as far as they read.
fn targets_of(object: &serde_json::Value) -> Vec<Target> {
    let spec = &object["spec"];
    let related = spec["related"].as_array().map_or(&[][..], Vec::as_slice);
    std::iter::once(&spec["target"])
        .chain(related.iter().map(|r| &r["target"]))
        .filter_map(|t| Target::deserialize(t).ok())
        .collect()
}

#[cfg(test)]
mod tests;
