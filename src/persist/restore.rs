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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::mock_apiserver::{MockApiServer, Reply, list};
    use crate::operation::test_record;
    use crate::persist::object::to_object;

    /// Our copies are read back by their label, a page at a time: what every page holds is
    /// restored, and a copy that does not hold a record (edited by hand) is known, to be
    /// deleted, but not restored.
    #[tokio::test]
    async fn the_copies_of_every_page_are_read_back() {
        let (a, b) = (test_record("vm-a"), test_record("vm-b"));
        let copy = |record| serde_json::to_value(to_object(record, None)).unwrap();
        let edited = json!({
            "apiVersion": "ifo.kubevirt.io/v1alpha1",
            "kind": "InFlightOperation",
            "metadata": {"name": "edited", "uid": "cr-uid-9", "resourceVersion": "9"},
            "spec": {},
        });
        let pages = [
            list("InFlightOperationList", "9", Some("more"), vec![copy(&a)]),
            list("InFlightOperationList", "9", None, vec![copy(&b), edited]),
        ];
        let (client, api) = MockApiServer::start(move |asked| {
            Reply::Object(pages[usize::from(asked.param("continue").is_some())].clone())
        });
        let found = read_back(&super::api(client)).await.unwrap();
        let names =
            |r: &[Arc<InFlightOperation>]| r.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&found.records), [a.name.clone(), b.name.clone()]);
        let copies: Vec<&str> = found.copies.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(copies, [a.name.as_str(), b.name.as_str(), "edited"]);
        let asked = api.asked();
        assert_eq!(
            asked[0].param("labelSelector"),
            Some("app.kubernetes.io/managed-by=ifo-apiserver")
        );
        assert_eq!(asked[1].param("continue"), Some("more"));
    }

    /// What the server says when it cannot start in persistence mode: the CRD not installed
    /// (404) or not allowed (403) names what to apply; anything else says what failed.
    #[tokio::test]
    async fn a_refused_read_back_says_what_to_do() {
        for (code, says) in [
            (404, "kubectl apply -k deploy/persist/"),
            (403, "its ClusterRole is in deploy/persist/rbac.yaml"),
            (500, "reading the persisted InFlightOperations back"),
        ] {
            let (client, _) = MockApiServer::start(move |_| Reply::Status(code));
            let error = read_back(&super::api(client)).await.unwrap_err();
            assert!(error.to_string().contains(says), "{code}: {error}");
        }
    }
}
