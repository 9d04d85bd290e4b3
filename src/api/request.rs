//! What every served resource reads alike of a request: the name its path names, the verbs
//! served, a watch of one object as a watch by name, and so what the request is served as
//! ([`plan`]), decided before the resource is sent it.

use super::params::Params;
use super::resource::{Action, GROUP, Plan, Resource, Scope, VERSION};
use super::status::ApiError;
use ifo_apimachinery::fields::{FieldSelector, escape_value};
use ifo_apimachinery::{RequestInfo, ResourceInfo};

/// Reads what `info` asks of `resource`: 404 for paths it does not serve, 405 for verbs it
/// does not answer, 400 for bad parameters.
pub(crate) fn plan(resource: &'static Resource, info: &RequestInfo) -> Result<Plan, ApiError> {
    let r = info.resource.as_ref().ok_or(ApiError::PathNotFound)?;
    if r.group != GROUP
        || r.version != VERSION
        || r.resource != resource.plural
        || r.subresource.is_some()
    {
        return Err(ApiError::PathNotFound);
    }
    match &r.namespace {
        Some(ns) if ns.is_empty() || !resource.namespaced => return Err(ApiError::PathNotFound),
        _ => {}
    }
    let name = name_in_path(r)?;
    let verb = info.verb.as_str();
    served_verb(resource, verb)?;
    let mut params = Params::parse(&info.query, verb == "watch", resource.selectable)?;
    let action = match (verb, name) {
        ("watch", Some(name)) => {
            select_name(&mut params, name, resource.selectable)?;
            Action::Watch
        }
        ("watch", None) => Action::Watch,
        (_, Some(name)) => Action::Get(name.to_string()),
        (_, None) => Action::List,
    };
    let scope = Scope {
        resource,
        namespace: r.namespace.clone(),
    };
    Ok(Plan {
        scope,
        action,
        params,
    })
}

/// The name the path of `r` names: `None` for a collection, 404 for an empty name.
fn name_in_path(r: &ResourceInfo) -> Result<Option<&str>, ApiError> {
    match (r.name_in_path, r.name.as_deref()) {
        (false, _) => Ok(None),
        (true, Some(name)) if !name.is_empty() => Ok(Some(name)),
        (true, _) => Err(ApiError::PathNotFound),
    }
}

/// 405 for a verb `resource` does not answer.
fn served_verb(resource: &Resource, verb: &str) -> Result<(), ApiError> {
    if resource.verbs.contains(&verb) {
        return Ok(());
    }
    Err(ApiError::MethodNotAllowed {
        resource: resource.group_resource(),
        verb: verb.to_string(),
    })
}

/// Makes `params` of a watch of the object `name` those of a watch with a `metadata.name`
/// field selector, beside the request's own (`selectable`: the fields the resource can be
/// selected by).
fn select_name(params: &mut Params, name: &str, selectable: &[&str]) -> Result<(), ApiError> {
    let selector = format!("metadata.name={}", escape_value(name));
    let combined = if params.fields.is_empty() {
        selector
    } else {
        format!("{},{selector}", params.fields)
    };
    params.fields = FieldSelector::parse(&combined, selectable)?;
    Ok(())
}
