//! What every served resource reads alike of a request: the name its path names, the verbs
//! served, and a watch of one object as a watch by name.

use super::params::Params;
use super::status::{ApiError, GroupResource};
use ifo_apimachinery::ResourceInfo;
use ifo_apimachinery::fields::{FieldSelector, escape_value};

/// The name the path of `r` names: `None` for a collection, 404 for an empty name.
pub fn name_in_path(r: &ResourceInfo) -> Result<Option<&str>, ApiError> {
    match (r.name_in_path, r.name.as_deref()) {
        (false, _) => Ok(None),
        (true, Some(name)) if !name.is_empty() => Ok(Some(name)),
        (true, _) => Err(ApiError::PathNotFound),
    }
}

/// 405 for a verb other than get, list and watch of `resource`.
pub fn served_verb(verb: &str, resource: impl FnOnce() -> GroupResource) -> Result<(), ApiError> {
    if matches!(verb, "get" | "list" | "watch") {
        return Ok(());
    }
    Err(ApiError::MethodNotAllowed {
        resource: resource(),
        verb: verb.to_string(),
    })
}

/// Makes `params` of a watch of the object `name` those of a watch with a `metadata.name`
/// field selector, beside the request's own (`selectable`: the fields the resource can be
/// selected by).
pub fn select_name(params: &mut Params, name: &str, selectable: &[&str]) -> Result<(), ApiError> {
    let selector = format!("metadata.name={}", escape_value(name));
    let combined = if params.fields.is_empty() {
        selector
    } else {
        format!("{},{selector}", params.fields)
    };
    params.fields = FieldSelector::parse(&combined, selectable)?;
    Ok(())
}
