//! Reading the copies back at start.

use std::sync::Arc;

use kube::Api;
use kube::api::{DynamicObject, ListParams};

use super::Error;
use super::object::{from_object, resource, selector};
use super::pending::Copy;
use crate::operation::InFlightOperation;

/// Our copies in the cluster at start.
#[derive(Debug, Default)]
pub(crate) struct ReadBack {
    /// The records they hold, to restore.
    pub records: Vec<Arc<InFlightOperation>>,
    /// Every copy by name (those that could not be read too: they are deleted unless a live
    /// operation of that name takes them over).
    pub copies: Vec<(String, Copy)>,
}

/// Lists our copies (by label, a page at a time).
pub(crate) async fn read_back(api: &Api<DynamicObject>) -> Result<ReadBack, Error> {
    let mut params = ListParams::default().labels(&selector()).limit(500);
    let mut out = ReadBack::default();
    loop {
        let page = api.list(&params).await.map_err(|e| match &e {
            kube::Error::Api(s) if s.code == 404 => Error::NotInstalled(e),
            kube::Error::Api(s) if s.code == 403 => Error::Forbidden(e),
            _ => Error::ReadBack(e),
        })?;
        for object in page.items {
            let name = object.metadata.name.clone().unwrap_or_default();
            let record = match from_object(&object) {
                Ok(record) => Some(record),
                Err(e) => {
                    tracing::warn!(name = %name, error = %e, "persisted copy cannot be restored; it will be deleted");
                    None
                }
            };
            out.records.extend(record.clone());
            out.copies.push((
                name,
                Copy {
                    record,
                    uid: object.metadata.uid.unwrap_or_default(),
                    resource_version: object.metadata.resource_version.unwrap_or_default(),
                },
            ));
        }
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(out),
        }
    }
}

/// The API of the persisted kind, through `client`.
pub(crate) fn api(client: kube::Client) -> Api<DynamicObject> {
    Api::all_with(client, &resource())
}
