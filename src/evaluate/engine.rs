//! The shared CEL environment, compiling, and evaluating one compiled expression.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use cel::common::ast::IdedExpr;
use cel::common::types::{CelBool, CelDouble, CelInt, CelString, CelTimestamp, CelUInt};
use cel::common::value::CowVal;
use cel::{Context, Env, ExecutionError, Value};

use super::bind::Bound;
use super::bounded::{MAX_ERROR_CHARS, MAX_MESSAGE_CHARS, bounded, truncated};
use super::functions;
use super::meter::{self, Exceeded};
use super::runtime_error::RuntimeError;
use check::check_cost;

mod check;

/// Longest accepted expression, in bytes. cel 0.15 has no evaluation cost limit, so the size of
/// what a rule author can make the engine run is bounded here (the parser bounds nesting).
pub(super) const MAX_SOURCE_LEN: usize = 16 * 1024;

/// The only variable rules are evaluated with, as in the Kubernetes-side operator.
const OBJECT: &str = "object";

/// Namespaces of the qualified functions the environment registers (`optional.of(x)`,
/// `lists.range(n)`, `strings.quote(s)`): an identifier used as such a call's target is a
/// function name, not a variable.
const FUNCTION_NAMESPACES: &[&str] = &["optional", "lists", "strings"];

/// Shared CEL environment (stdlib + strings ext + lists ext + optional syntax + cached `matches` +
/// the few Kubernetes CEL functions rules need). Built once; Clone is cheap (Arc inside).
/// Send + Sync.
#[derive(Clone)]
pub struct Engine {
    env: Arc<Env>,
}

impl Engine {
    /// Builds the environment. It takes tens of microseconds, so build one and share it.
    pub fn new() -> Engine {
        // `Env::stdlib()` already enables the optional syntax and library (`a.?b`, `orValue`).
        // The crate is built without its `regex` feature, so the stock `matches`, which compiles
        // its pattern on every call, is absent and ours (cached) takes its place.
        let mut env = Env::stdlib();
        env.add_extension(cel::extensions::strings)
            .expect("strings extension registers once");
        env.add_extension(cel::extensions::lists)
            .expect("lists extension registers once");
        functions::register(&mut env).expect("custom functions do not clash with the stdlib");
        meter::register(&mut env).expect("metering functions do not clash with the stdlib");
        Engine { env: Arc::new(env) }
    }

    /// Parse + macro-expand. Also rejects, as CompileError: empty source, source longer than
    /// 16 KiB, references to variables other than `object` that are not comprehension
    /// variables bound in the expression, and expressions over the cost estimate's limits
    /// (see `estimate`).
    ///
    /// cel has no type checker, so wrong types, unknown functions and non-bool rule results are
    /// only found when evaluating (or, where they can be seen, by `ruleset::schema_check`);
    /// undeclared variables (typically a forgotten pair of quotes: `phase == Running`) are the
    /// common mistake this catches early.
    pub fn compile(&self, source: &str) -> Result<Expr, CompileError> {
        if source.trim().is_empty() {
            return Err(CompileError {
                message: "ERROR: <input>:1:1: expression is empty".to_owned(),
            });
        }
        if source.len() > MAX_SOURCE_LEN {
            return Err(CompileError {
                message: format!(
                    "ERROR: <input>:1:1: expression is {} bytes long, more than the limit of {} bytes",
                    source.len(),
                    MAX_SOURCE_LEN
                ),
            });
        }
        // Sources come from users: a parser bug must not take the caller down with it.
        let parsed =
            catch_unwind(AssertUnwindSafe(|| self.env.compile(source))).map_err(|panic| {
                CompileError {
                    message: format!(
                        "ERROR: <input>:1:1: internal error in the CEL parser: {}",
                        panic_text(&*panic)
                    ),
                }
            })?;
        let program = parsed.map_err(|errors| CompileError {
            message: errors.to_string(),
        })?;
        self.check_variables(&program, source)?;
        let estimate = check_cost(&program, source)?;
        let metered = meter::instrument(program.expression());
        Ok(Expr {
            inner: Arc::new(Compiled {
                metered,
                estimated_cost: estimate.cost,
                comprehension_depth: estimate.depth,
                source: source.into(),
                env: Arc::clone(&self.env),
            }),
        })
    }
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new()
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

/// A compile error; `message` is cel-go style with line:col and caret (what `ParseErrors`
/// Display gives).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct CompileError {
    /// The error, with line, column and a caret under the place, as kubectl shows CRD validation
    /// rule errors.
    pub message: String,
}

/// Why an expression produced no usable value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// A runtime error: the CEL interpreter's (missing key, no matching overload, ...), or the
    /// value's (a progress that is not a number, a string that is not a timestamp), its cause
    /// kept.
    #[error(transparent)]
    Execution(RuntimeError),
    /// The expression evaluated, but not to the type its role requires.
    #[error("expected {expected}, got {got}")]
    WrongType {
        /// The type the role requires (`bool`, `string`, `timestamp`).
        expected: &'static str,
        /// The type it got.
        got: String,
    },
    /// The evaluation went over its budget and was stopped (or ended too late): "unknown".
    #[error("{0}")]
    CostExceeded(Exceeded),
}

struct Compiled {
    /// What is evaluated: the compiled program's AST with the runtime cost meter in it (see
    /// `meter`).
    metered: IdedExpr,
    estimated_cost: u64,
    comprehension_depth: usize,
    source: Box<str>,
    /// The environment the program was compiled for and runs with.
    env: Arc<Env>,
}

/// A compiled expression. Clone is cheap (`Arc<Program>`). Send + Sync.
#[derive(Clone)]
pub struct Expr {
    inner: Arc<Compiled>,
}

impl std::fmt::Debug for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Expr").field(&self.source()).finish()
    }
}

/// A context bound to one object, reusable by every expression of the same engine.
pub(crate) struct BoundContext<'v> {
    ctx: Context<'v, 'v>,
    /// Identity of the environment `ctx` holds (an address, not a second reference count: that
    /// counter is shared by every thread evaluating, so touching it is not free).
    env: *const Env,
}

impl<'v> BoundContext<'v> {
    pub(crate) fn new(env: &Arc<Env>, object: &'v Bound<'_>) -> Self {
        let mut ctx = Context::with_env(Arc::clone(env));
        ctx.set_variable_resolver(&object.resolver);
        BoundContext {
            ctx,
            env: Arc::as_ptr(env),
        }
    }

    /// Whether expressions compiled by `env` can run in this context.
    pub(crate) fn is_for(&self, env: &Arc<Env>) -> bool {
        std::ptr::eq(self.env, Arc::as_ptr(env))
    }
}

const NO_START_TIME: &str = "empty string is not a timestamp";

impl Expr {
    /// The CEL source this was compiled from.
    pub fn source(&self) -> &str {
        &self.inner.source
    }

    /// The worst-case cost estimated at compile time (see `estimate`).
    pub fn estimated_cost(&self) -> u64 {
        self.inner.estimated_cost
    }

    /// How deep comprehensions nest in this expression.
    pub fn comprehension_depth(&self) -> usize {
        self.inner.comprehension_depth
    }

    /// The compiled AST, as evaluated: comprehension ranges are wrapped in the meter's
    /// `@cost_range(range, cost)`, `lists.range` and `replace` are the meter's (see `meter`).
    pub(crate) fn ast(&self) -> &IdedExpr {
        &self.inner.metered
    }

    pub(crate) fn env(&self) -> &Arc<Env> {
        &self.inner.env
    }

    /// Runs the program and hands the result to `convert`, turning runtime errors (and, should
    /// the interpreter ever panic, the panic) into `EvalError::Execution`, and a run that went
    /// over budget into `EvalError::CostExceeded` whatever it returned.
    fn run<T>(
        &self,
        ctx: &BoundContext<'_>,
        convert: impl FnOnce(&CowVal<'_, '_>) -> Result<T, EvalError>,
    ) -> Result<T, EvalError> {
        debug_assert!(ctx.is_for(&self.inner.env));
        let (result, exceeded) = meter::expression(|| {
            catch_unwind(AssertUnwindSafe(|| {
                match Value::resolve_val(&self.inner.metered, &ctx.ctx) {
                    Ok(val) => convert(&val),
                    Err(e) => Err(execution(e)),
                }
            }))
        });
        if let Some(exceeded) = exceeded {
            return Err(EvalError::CostExceeded(exceeded));
        }
        result.unwrap_or_else(|panic| {
            Err(EvalError::Execution(
                format!(
                    "internal error in the CEL interpreter: {}",
                    panic_text(&*panic)
                )
                .into(),
            ))
        })
    }

    /// Evaluates against `object` with a context made for this call.
    fn run_alone<T>(
        &self,
        object: &Bound<'_>,
        eval: impl FnOnce(&Self, &BoundContext<'_>) -> Result<T, EvalError>,
    ) -> Result<T, EvalError> {
        let ctx = BoundContext::new(&self.inner.env, object);
        eval(self, &ctx)
    }

    /// A rule's result: anything but a bool is `WrongType`, as Kubernetes would reject it.
    pub fn eval_bool(&self, object: &Bound<'_>) -> Result<bool, EvalError> {
        self.run_alone(object, Self::eval_bool_in)
    }

    /// A message, outcome name or label value: anything but a string is `WrongType` (no
    /// implicit conversion, so `object.metadata.generation` must be written `string(...)`).
    pub fn eval_string(&self, object: &Bound<'_>) -> Result<String, EvalError> {
        self.run_alone(object, Self::eval_string_in)
    }

    /// CEL timestamp, or a string in RFC 3339 (Kubernetes time fields are strings in JSON).
    pub fn eval_timestamp(&self, object: &Bound<'_>) -> Result<jiff::Timestamp, EvalError> {
        self.run_alone(object, Self::eval_timestamp_in)
    }

    pub(crate) fn eval_bool_in(&self, ctx: &BoundContext<'_>) -> Result<bool, EvalError> {
        self.run(ctx, |val| {
            val.downcast_ref::<CelBool>()
                .map(|b| *b.inner())
                .ok_or_else(|| wrong_type("bool", val))
        })
    }

    pub(crate) fn eval_string_in(&self, ctx: &BoundContext<'_>) -> Result<String, EvalError> {
        self.run(ctx, |val| {
            val.downcast_ref::<CelString>()
                .map(|s| bounded_string(s.inner()))
                .ok_or_else(|| wrong_type("string", val))
        })
    }

    /// A progress in percent: a number from 0 to 100, or a string such as `"45.5%"` (or
    /// `"45.5"`); an empty string means "the object does not say" (`None`). Anything else, out
    /// of range or not a number, is an error: a wrong value is never served.
    pub(crate) fn eval_progress_in(
        &self,
        ctx: &BoundContext<'_>,
    ) -> Result<Option<f64>, EvalError> {
        self.run(ctx, |val| {
            #[allow(clippy::cast_precision_loss)] // percentages are small numbers
            let number = if let Some(n) = val.downcast_ref::<CelInt>() {
                *n.inner() as f64
            } else if let Some(n) = val.downcast_ref::<CelUInt>() {
                *n.inner() as f64
            } else if let Some(n) = val.downcast_ref::<CelDouble>() {
                *n.inner()
            } else if let Some(s) = val.downcast_ref::<CelString>() {
                let text = s.inner().trim();
                if text.is_empty() {
                    return Ok(None);
                }
                let digits = text.strip_suffix('%').unwrap_or(text).trim_end();
                digits.parse::<f64>().map_err(|_| {
                    EvalError::Execution(
                        format!(
                            "progress '{}' is not a number or a percentage",
                            shorten(text)
                        )
                        .into(),
                    )
                })?
            } else {
                return Err(wrong_type(
                    "number 0-100 or a string such as \"45.5%\"",
                    val,
                ));
            };
            if (0.0..=100.0).contains(&number) {
                Ok(Some(number))
            } else {
                Err(EvalError::Execution(
                    format!("progress {number} is out of range (0 to 100)").into(),
                ))
            }
        })
    }

    /// Whether the operation is stalled: `false` or an empty string is `None`; `true` is a
    /// stall without a reason (`Some("")`); a non-empty string is a stall with that reason.
    pub(crate) fn eval_stalled_in(
        &self,
        ctx: &BoundContext<'_>,
    ) -> Result<Option<String>, EvalError> {
        self.run(ctx, |val| {
            if let Some(b) = val.downcast_ref::<CelBool>() {
                return Ok(b.inner().then(String::new));
            }
            if let Some(s) = val.downcast_ref::<CelString>() {
                let reason = s.inner().trim();
                return Ok((!reason.is_empty()).then(|| reason.to_owned()));
            }
            Err(wrong_type("bool or string (the reason)", val))
        })
    }

    /// A start time, where an empty string means "the object does not say" (first detection).
    pub(crate) fn eval_start_time_in(
        &self,
        ctx: &BoundContext<'_>,
    ) -> Option<Result<jiff::Timestamp, EvalError>> {
        match self.eval_timestamp_in(ctx) {
            Err(EvalError::Execution(e)) if e.message() == NO_START_TIME => None,
            other => Some(other),
        }
    }

    pub(crate) fn eval_timestamp_in(
        &self,
        ctx: &BoundContext<'_>,
    ) -> Result<jiff::Timestamp, EvalError> {
        self.run(ctx, |val| {
            if let Some(ts) = val.downcast_ref::<CelTimestamp>() {
                let ts = ts.inner();
                return jiff::Timestamp::new(ts.timestamp(), ts.timestamp_subsec_nanos() as i32)
                    .map_err(|e| {
                        EvalError::Execution(RuntimeError::caused_by(
                            format!("timestamp out of range: {e}"),
                            e,
                        ))
                    });
            }
            if let Some(s) = val.downcast_ref::<CelString>() {
                if s.inner().is_empty() {
                    return Err(EvalError::Execution(NO_START_TIME.into()));
                }
                return s.inner().parse::<jiff::Timestamp>().map_err(|e| {
                    let message = truncated(
                        format!("'{}' is not an RFC 3339 timestamp: {e}", s.inner()),
                        MAX_ERROR_CHARS,
                    );
                    EvalError::Execution(RuntimeError::caused_by(message, e))
                });
            }
            Err(wrong_type("timestamp or RFC 3339 string", val))
        })
    }
}

/// At most 64 characters of `text`, for error messages quoting a value.
pub(crate) fn shorten(text: &str) -> String {
    const MAX: usize = 64;
    match text.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// The message of a caught panic, when it has one.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Error texts quote object data: bounded.
fn execution(e: ExecutionError) -> EvalError {
    let message = truncated(e.to_string(), MAX_ERROR_CHARS);
    EvalError::Execution(RuntimeError::caused_by(message, e))
}

/// A string result (a message, an outcome, a label value), at most [`MAX_MESSAGE_CHARS`]
/// characters.
fn bounded_string(s: &str) -> String {
    bounded(s, MAX_MESSAGE_CHARS).into_owned()
}

fn wrong_type(expected: &'static str, val: &CowVal<'_, '_>) -> EvalError {
    EvalError::WrongType {
        expected,
        got: val.get_type().name().to_owned(),
    }
}
