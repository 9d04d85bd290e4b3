//! The query parameters of list, get and watch, parsed and validated once, with the errors
//! kube-apiserver gives for the same mistakes.

use super::status::ApiError;
use ifo_apimachinery::Query;
use ifo_apimachinery::fields::FieldSelector;
use ifo_apimachinery::labels::LabelSelector;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RvMatch {
    NotOlderThan,
    Exact,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IncludeObject {
    None,
    Metadata,
    Object,
}

#[derive(Clone, Debug)]
pub(crate) struct Params {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub watch: bool,
    /// `None` when absent or empty.
    pub resource_version: Option<u64>,
    pub rv_match: Option<RvMatch>,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub allow_bookmarks: bool,
    pub send_initial_events: Option<bool>,
    pub timeout_seconds: Option<u64>,
    pub include_object: IncludeObject,
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::BadRequest(msg.into())
}

fn boolean(name: &str, v: &str) -> Result<bool, ApiError> {
    match v {
        "true" | "1" | "True" | "TRUE" | "t" | "T" => Ok(true),
        "false" | "0" | "False" | "FALSE" | "f" | "F" => Ok(false),
        other => Err(bad(format!(
            "invalid value for {name}: {other:?} is not a boolean"
        ))),
    }
}

impl Params {
    /// Reads the parameters from the request's decoded query (first values count, as for
    /// authorization), for a resource whose field selectors may name `fields`. `watch` is the
    /// request's verb, decided once by its `RequestInfo`.
    pub(crate) fn parse(query: &Query, watch: bool, fields: &[&str]) -> Result<Params, ApiError> {
        let supported = fields;
        let get = |k: &str| query.non_empty(k);
        let labels = match get("labelSelector") {
            Some(s) => LabelSelector::parse(s)?,
            None => LabelSelector::everything(),
        };
        let fields = match get("fieldSelector") {
            Some(s) => FieldSelector::parse(s, supported)?,
            None => FieldSelector::everything(),
        };
        let resource_version = get("resourceVersion")
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| bad(format!("invalid resource version {v:?}: not a number")))
            })
            .transpose()?;
        let rv_match = match get("resourceVersionMatch") {
            None => None,
            Some("NotOlderThan") => Some(RvMatch::NotOlderThan),
            Some("Exact") => Some(RvMatch::Exact),
            Some(other) => {
                return Err(bad(format!(
                    "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
                )));
            }
        };
        let limit = get("limit")
            .map(|v| {
                v.parse::<i64>()
                    .map_err(|_| bad(format!("invalid limit {v:?}")))
            })
            .transpose()?
            .filter(|l| *l > 0)
            .map(|l| l as usize);
        let send_initial_events = get("sendInitialEvents")
            .map(|v| boolean("sendInitialEvents", v))
            .transpose()?;
        let include_object = match get("includeObject") {
            None | Some("Metadata") => IncludeObject::Metadata,
            Some("Object") => IncludeObject::Object,
            Some("None") => IncludeObject::None,
            Some(other) => {
                return Err(bad(format!(
                    "includeObject: Unsupported value: {other:?}: supported values: \"Metadata\", \"None\", \"Object\""
                )));
            }
        };
        let params = Params {
            labels,
            fields,
            watch,
            resource_version,
            rv_match,
            limit,
            continue_token: get("continue").map(str::to_string),
            allow_bookmarks: get("allowWatchBookmarks")
                .map(|v| boolean("allowWatchBookmarks", v))
                .transpose()?
                .unwrap_or(false),
            send_initial_events,
            timeout_seconds: get("timeoutSeconds")
                .map(|v| {
                    v.parse::<u64>()
                        .map_err(|_| bad(format!("invalid timeoutSeconds {v:?}")))
                })
                .transpose()?,
            include_object,
        };
        params.validate()?;
        Ok(params)
    }

    /// The cross-field rules of ListOptions validation.
    fn validate(&self) -> Result<(), ApiError> {
        // A streaming list (sendInitialEvents) may ask NotOlderThan of "" (the current state).
        if self.rv_match.is_some()
            && self.resource_version.is_none()
            && !(self.watch && self.send_initial_events.is_some())
        {
            return Err(bad(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if self.rv_match == Some(RvMatch::Exact) && self.resource_version == Some(0) {
            return Err(bad(
                "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
        if self.continue_token.is_some() && self.rv_match.is_some() {
            return Err(bad(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if self.watch {
            if self.send_initial_events.is_some() && self.rv_match != Some(RvMatch::NotOlderThan) {
                return Err(bad(
                    "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if self.send_initial_events.is_none() && self.rv_match.is_some() {
                return Err(bad(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
        } else if self.send_initial_events.is_some() {
            return Err(bad(
                "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::SELECTABLE_FIELDS;

    fn parse(q: &[(&str, &str)]) -> Result<Params, ApiError> {
        let raw: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(q)
            .finish();
        let query = Query::parse(Some(&raw));
        Params::parse(&query, query.flag("watch"), SELECTABLE_FIELDS)
    }

    #[test]
    fn kubectl_watch_and_streaming_list_parse() {
        let p = parse(&[("watch", "true"), ("resourceVersion", "17")]).unwrap();
        assert!(p.watch);
        assert_eq!(p.resource_version, Some(17));
        let p = parse(&[
            ("watch", "1"),
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("allowWatchBookmarks", "true"),
        ])
        .unwrap();
        assert_eq!(p.send_initial_events, Some(true));
        assert!(p.allow_bookmarks);
    }

    #[test]
    fn invalid_combinations_are_bad_requests() {
        for q in [
            vec![("fieldSelector", "spec.foo=x")],
            vec![("labelSelector", "a in (b")],
            vec![("resourceVersion", "abc")],
            vec![("resourceVersionMatch", "Exact")],
            vec![("resourceVersionMatch", "Exact"), ("resourceVersion", "0")],
            vec![("sendInitialEvents", "true")],
            vec![("watch", "true"), ("sendInitialEvents", "true")],
            vec![("includeObject", "Everything")],
        ] {
            let err = parse(&q).unwrap_err();
            assert_eq!(err.code(), 400, "{q:?} gave {err:?}");
        }
        assert_eq!(
            parse(&[("fieldSelector", "spec.foo=x")])
                .unwrap_err()
                .message(),
            "field label not supported: spec.foo"
        );
    }
}
