//! `kube::Resource` for the server's own decoded forms of objects whose kind is known only at run
//! time (an `ApiResource`): kube's watcher reads their `metadata` (name, namespace, uid,
//! resourceVersion) and nothing else, so each form keeps there only what it decoded.

/// Implements `kube::Resource` for `$decoded`, a struct whose field `metadata` is an `ObjectMeta`.
macro_rules! dynamic_resource {
    ($decoded:ty) => {
        impl kube::Resource for $decoded {
            type DynamicType = kube::core::ApiResource;
            type Scope = kube::core::DynamicResourceScope;

            fn group(dt: &kube::core::ApiResource) -> std::borrow::Cow<'_, str> {
                dt.group.as_str().into()
            }

            fn version(dt: &kube::core::ApiResource) -> std::borrow::Cow<'_, str> {
                dt.version.as_str().into()
            }

            fn kind(dt: &kube::core::ApiResource) -> std::borrow::Cow<'_, str> {
                dt.kind.as_str().into()
            }

            fn api_version(dt: &kube::core::ApiResource) -> std::borrow::Cow<'_, str> {
                dt.api_version.as_str().into()
            }

            fn plural(dt: &kube::core::ApiResource) -> std::borrow::Cow<'_, str> {
                dt.plural.as_str().into()
            }

            fn meta(&self) -> &kube::core::ObjectMeta {
                &self.metadata
            }

            fn meta_mut(&mut self) -> &mut kube::core::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

pub(crate) use dynamic_resource;
