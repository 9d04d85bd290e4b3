use super::*;

const KUBECTL_TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

fn res(h: &str) -> Result<Representation, NotAcceptable> {
    negotiate_resource(Some(h))
}

fn disc(h: &str) -> Result<DiscoveryFormat, NotAcceptable> {
    negotiate_discovery(Some(h))
}

#[test]
fn parse_accept_basics() {
    let c = parse_accept(" application/json ; as=Table ; g = meta.k8s.io ;v=v1;q=0.5, */*");
    assert_eq!(c.len(), 2);
    assert_eq!((c[0].type_.as_str(), c[0].subtype.as_str()), ("*", "*"));
    assert_eq!(c[1].type_, "application");
    assert_eq!(c[1].subtype, "json");
    assert_eq!(c[1].q, 0.5);
    assert_eq!(c[1].param("as"), Some("Table"));
    assert_eq!(c[1].param("g"), Some("meta.k8s.io"));
    assert_eq!(c[1].param("v"), Some("v1"));
    // A lone `*` is `*/*`; malformed ranges are dropped.
    let c = parse_accept("*,text,a/b/c,,application/");
    assert_eq!(c.len(), 2);
    assert_eq!(
        (c[0].type_.as_str(), c[0].subtype.as_str()),
        ("application", "")
    );
    assert_eq!((c[1].type_.as_str(), c[1].subtype.as_str()), ("*", "*"));
    // Unparsable q is 0.
    assert_eq!(parse_accept("a/b;q=x")[0].q, 0.0);
    assert_eq!(parse_accept("a/b;q=.25")[0].q, 0.25);
}

#[test]
fn parse_accept_order() {
    let order = |h: &str| {
        parse_accept(h)
            .into_iter()
            .map(|c| format!("{}/{}", c.type_, c.subtype))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        order("*/*;q=0.8, text/html, application/*;q=0.9, application/json"),
        vec!["text/html", "application/json", "application/*", "*/*"]
    );
    // Equal q and specificity keep header order.
    assert_eq!(order("a/b, c/d, e/f"), vec!["a/b", "c/d", "e/f"]);
    // Wildcards go after specific types of equal q.
    assert_eq!(
        order("*/*, application/json"),
        vec!["application/json", "*/*"]
    );
}

#[test]
fn missing_or_empty_header_is_object() {
    assert_eq!(negotiate_resource(None), Ok(Representation::Object));
    assert_eq!(negotiate_resource(Some("")), Ok(Representation::Object));
    assert_eq!(negotiate_discovery(None), Ok(DiscoveryFormat::Legacy));
    assert_eq!(negotiate_discovery(Some("")), Ok(DiscoveryFormat::Legacy));
}

#[test]
fn kubectl_get_asks_for_table() {
    assert_eq!(
        res(KUBECTL_TABLE),
        Ok(Representation::Table { beta: false })
    );
    assert_eq!(
        res("application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json"),
        Ok(Representation::Table { beta: true })
    );
    // kubectl -o yaml/json.
    assert_eq!(res("application/json, */*"), Ok(Representation::Object));
    assert_eq!(res("application/json"), Ok(Representation::Object));
    assert_eq!(res("*/*"), Ok(Representation::Object));
    assert_eq!(res("application/*"), Ok(Representation::Object));
}

#[test]
fn metadata_clients() {
    // kube-rs metadata list / watch (no JSON fallback).
    assert_eq!(
        res("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
        Ok(Representation::PartialObjectMetadata { beta: false })
    );
    assert_eq!(
        res("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
        Ok(Representation::PartialObjectMetadata { beta: false })
    );
    // client-go metadata client: protobuf first, then JSON metadata, then JSON.
    assert_eq!(
        res(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
        ),
        Ok(Representation::PartialObjectMetadata { beta: false })
    );
    assert_eq!(
        res("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1"),
        Ok(Representation::PartialObjectMetadata { beta: true })
    );
}

#[test]
fn protobuf_is_skipped() {
    assert_eq!(
        res("application/vnd.kubernetes.protobuf,*/*"),
        Ok(Representation::Object)
    );
    assert_eq!(
        res("application/vnd.kubernetes.protobuf, application/json"),
        Ok(Representation::Object)
    );
    assert_eq!(
        res("application/vnd.kubernetes.protobuf"),
        Err(NotAcceptable)
    );
    assert_eq!(
        res("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io"),
        Err(NotAcceptable)
    );
}

#[test]
fn not_acceptable() {
    assert_eq!(res("text/html"), Err(NotAcceptable));
    assert_eq!(res("application/yaml"), Err(NotAcceptable));
    assert_eq!(res("text/*"), Err(NotAcceptable));
    assert_eq!(res(","), Err(NotAcceptable));
    // Conversions this endpoint cannot do.
    assert_eq!(res("application/json;as=Table"), Err(NotAcceptable));
    assert_eq!(
        res("application/json;as=Table;g=meta.k8s.io;v=v2"),
        Err(NotAcceptable)
    );
    assert_eq!(
        res("application/json;as=Pod;g=meta.k8s.io;v=v1"),
        Err(NotAcceptable)
    );
    assert_eq!(
        res("application/json;g=meta.k8s.io;v=v1"),
        Err(NotAcceptable)
    );
    assert_eq!(
        res("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
        Err(NotAcceptable)
    );
    assert_eq!(res("application/json;stream=other"), Err(NotAcceptable));
    assert_eq!(res("application/json;sv=v2"), Err(NotAcceptable));
    assert_eq!(
        NotAcceptable.to_string(),
        "only the following media types are accepted: application/json"
    );
}

#[test]
fn unsupported_conversion_falls_through() {
    assert_eq!(
        res("application/json;as=Table;v=v9;g=meta.k8s.io,application/json"),
        Ok(Representation::Object)
    );
    assert_eq!(
        res("application/json;stream=watch"),
        Ok(Representation::Object)
    );
    assert_eq!(
        res("application/json;pretty=1;sv=v1"),
        Ok(Representation::Object)
    );
}

#[test]
fn quality_values() {
    assert_eq!(
        res("application/json;q=0.5,application/json;as=Table;v=v1;g=meta.k8s.io"),
        Ok(Representation::Table { beta: false })
    );
    assert_eq!(
        res("application/json;as=Table;v=v1;g=meta.k8s.io;q=0.5,application/json"),
        Ok(Representation::Object)
    );
    // q=0 clauses never apply...
    assert_eq!(
        res("application/json;as=Table;v=v1;g=meta.k8s.io;q=0,application/json"),
        Ok(Representation::Object)
    );
    // ...and an explicit application/json;q=0 refuses JSON even if */* would allow it.
    assert_eq!(res("application/json;q=0, */*"), Err(NotAcceptable));
    assert_eq!(res("*/*;q=0"), Err(NotAcceptable));
    assert_eq!(res("*/*;q=0, application/json"), Ok(Representation::Object));
}

#[test]
fn goautoneg_ordering_quirk_is_reproduced() {
    // goautoneg lets a specific type overtake a wildcard even at lower q.
    assert_eq!(
        res("*/*,application/json;as=Table;v=v1;g=meta.k8s.io;q=0.5"),
        Ok(Representation::Table { beta: false })
    );
}

#[test]
fn discovery() {
    // The aggregator, 1.30–1.36 and 1.37+.
    assert_eq!(
        disc(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
        ),
        Ok(DiscoveryFormat::AggregatedV2)
    );
    assert_eq!(
        disc("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
        Ok(DiscoveryFormat::AggregatedV2)
    );
    // 1.27–1.29.
    assert_eq!(
        disc("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"),
        Ok(DiscoveryFormat::AggregatedV2Beta1)
    );
    assert_eq!(
        disc(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        ),
        Ok(DiscoveryFormat::AggregatedV2Beta1)
    );
    // Protobuf aggregated first (client-go), JSON aggregated next.
    assert_eq!(
        disc(
            "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0.9,application/json;q=0.8"
        ),
        Ok(DiscoveryFormat::AggregatedV2)
    );
    // Plain requests get the legacy list.
    assert_eq!(disc("application/json"), Ok(DiscoveryFormat::Legacy));
    assert_eq!(disc("*/*"), Ok(DiscoveryFormat::Legacy));
    assert_eq!(disc("application/json, */*"), Ok(DiscoveryFormat::Legacy));
    assert_eq!(disc(KUBECTL_TABLE), Ok(DiscoveryFormat::Legacy));
    assert_eq!(
        disc("application/vnd.kubernetes.protobuf,*/*"),
        Ok(DiscoveryFormat::Legacy)
    );
    // An unknown discovery version falls back to legacy when JSON is also accepted.
    assert_eq!(
        disc(
            "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json"
        ),
        Ok(DiscoveryFormat::Legacy)
    );
    // Nothing servable.
    assert_eq!(disc("text/html"), Err(NotAcceptable));
    assert_eq!(
        disc("application/vnd.kubernetes.protobuf"),
        Err(NotAcceptable)
    );
    assert_eq!(
        disc("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList"),
        Err(NotAcceptable)
    );
    assert_eq!(
        disc("application/json;as=Table;v=v1;g=meta.k8s.io"),
        Err(NotAcceptable)
    );
}

#[test]
fn content_types() {
    assert_eq!(
        DiscoveryFormat::AggregatedV2.content_type(),
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    assert_eq!(
        DiscoveryFormat::AggregatedV2Beta1.content_type(),
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
    );
    assert_eq!(DiscoveryFormat::Legacy.content_type(), "application/json");
    assert_eq!(
        Representation::Table { beta: false }.content_type(),
        "application/json"
    );
    assert_eq!(
        Representation::Table { beta: true }.meta_api_version(),
        Some("meta.k8s.io/v1beta1")
    );
    assert_eq!(
        Representation::PartialObjectMetadata { beta: false }.meta_api_version(),
        Some("meta.k8s.io/v1")
    );
    assert_eq!(Representation::Object.meta_api_version(), None);
}

#[test]
fn header_map() {
    let mut h = http::HeaderMap::new();
    assert_eq!(accept_header(&h), None);
    h.append(http::header::ACCEPT, "application/json".parse().unwrap());
    h.append(http::header::ACCEPT, "text/html".parse().unwrap());
    assert_eq!(accept_header(&h).as_deref(), Some("application/json"));
}

#[test]
fn long_headers_still_sort() {
    let mut h = vec!["*/*;q=0.1".to_owned()];
    h.extend((0..20).map(|i| format!("text/x{i}")));
    h.push("application/json;as=Table;v=v1;g=meta.k8s.io;q=0.9".into());
    assert_eq!(res(&h.join(",")), Ok(Representation::Table { beta: false }));
}

#[test]
fn openapi_is_json_only() {
    const PROTO_V2: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
    assert_eq!(negotiate_openapi(None), Ok(()));
    assert_eq!(negotiate_openapi(Some("application/json")), Ok(()));
    assert_eq!(negotiate_openapi(Some("*/*")), Ok(()));
    assert_eq!(negotiate_openapi(Some(PROTO_V2)), Err(NotAcceptable));
    let fallback = format!("{PROTO_V2}, application/json");
    assert_eq!(negotiate_openapi(Some(&fallback)), Ok(()));
    assert_eq!(
        negotiate_openapi(Some("application/json;q=0, */*")),
        Err(NotAcceptable)
    );
}
