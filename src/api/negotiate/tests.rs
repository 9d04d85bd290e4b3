use super::*;

const KUBECTL_TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

fn res(h: &str) -> Result<Representation, NotAcceptable> {
    negotiate_resource(Some(h))
}

fn disc(h: &str) -> Result<DiscoveryFormat, NotAcceptable> {
    negotiate_discovery(Some(h))
}

const OBJECT: Result<Representation, NotAcceptable> = Ok(Representation::Object);
const TABLE: Result<Representation, NotAcceptable> = Ok(Representation::Table { beta: false });
const TABLE_BETA: Result<Representation, NotAcceptable> = Ok(Representation::Table { beta: true });
const METADATA: Result<Representation, NotAcceptable> =
    Ok(Representation::PartialObjectMetadata { beta: false });
const METADATA_BETA: Result<Representation, NotAcceptable> =
    Ok(Representation::PartialObjectMetadata { beta: true });
const REFUSED: Result<Representation, NotAcceptable> = Err(NotAcceptable);

/// Each Accept header negotiates the resource representation given.
#[track_caller]
fn assert_resources(cases: &[(&str, Result<Representation, NotAcceptable>)]) {
    for (header, want) in cases {
        assert_eq!(&res(header), want, "{header}");
    }
}

/// Each Accept header negotiates the discovery format given.
#[track_caller]
fn assert_discovery(cases: &[(&str, Result<DiscoveryFormat, NotAcceptable>)]) {
    for (header, want) in cases {
        assert_eq!(&disc(header), want, "{header}");
    }
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
    assert_eq!(negotiate_resource(None), OBJECT);
    assert_eq!(negotiate_resource(Some("")), OBJECT);
    assert_eq!(negotiate_discovery(None), Ok(DiscoveryFormat::Legacy));
    assert_eq!(negotiate_discovery(Some("")), Ok(DiscoveryFormat::Legacy));
}

#[test]
fn kubectl_get_asks_for_table() {
    assert_resources(&[
        (KUBECTL_TABLE, TABLE),
        (
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json",
            TABLE_BETA,
        ),
        // kubectl -o yaml/json.
        ("application/json, */*", OBJECT),
        ("application/json", OBJECT),
        ("*/*", OBJECT),
        ("application/*", OBJECT),
    ]);
}

#[test]
fn metadata_clients() {
    assert_resources(&[
        // kube-rs metadata list / watch (no JSON fallback).
        (
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
            METADATA,
        ),
        (
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            METADATA,
        ),
        // client-go metadata client: protobuf first, then JSON metadata, then JSON.
        (
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            METADATA,
        ),
        (
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1",
            METADATA_BETA,
        ),
    ]);
}

#[test]
fn protobuf_is_skipped() {
    assert_resources(&[
        ("application/vnd.kubernetes.protobuf,*/*", OBJECT),
        (
            "application/vnd.kubernetes.protobuf, application/json",
            OBJECT,
        ),
        ("application/vnd.kubernetes.protobuf", REFUSED),
        (
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io",
            REFUSED,
        ),
    ]);
}

#[test]
fn not_acceptable() {
    assert_resources(&[
        ("text/html", REFUSED),
        ("application/yaml", REFUSED),
        ("text/*", REFUSED),
        (",", REFUSED),
        // Conversions this endpoint cannot do.
        ("application/json;as=Table", REFUSED),
        ("application/json;as=Table;g=meta.k8s.io;v=v2", REFUSED),
        ("application/json;as=Pod;g=meta.k8s.io;v=v1", REFUSED),
        ("application/json;g=meta.k8s.io;v=v1", REFUSED),
        (
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            REFUSED,
        ),
        ("application/json;stream=other", REFUSED),
        ("application/json;sv=v2", REFUSED),
    ]);
    assert_eq!(
        NotAcceptable.to_string(),
        "only the following media types are accepted: application/json"
    );
}

#[test]
fn unsupported_conversion_falls_through() {
    assert_resources(&[
        (
            "application/json;as=Table;v=v9;g=meta.k8s.io,application/json",
            OBJECT,
        ),
        ("application/json;stream=watch", OBJECT),
        ("application/json;pretty=1;sv=v1", OBJECT),
    ]);
}

#[test]
fn quality_values() {
    assert_resources(&[
        (
            "application/json;q=0.5,application/json;as=Table;v=v1;g=meta.k8s.io",
            TABLE,
        ),
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io;q=0.5,application/json",
            OBJECT,
        ),
        // q=0 clauses never apply...
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io;q=0,application/json",
            OBJECT,
        ),
        // ...and an explicit application/json;q=0 refuses JSON even if */* would allow it.
        ("application/json;q=0, */*", REFUSED),
        ("*/*;q=0", REFUSED),
        ("*/*;q=0, application/json", OBJECT),
    ]);
}

#[test]
fn goautoneg_ordering_quirk_is_reproduced() {
    // goautoneg lets a specific type overtake a wildcard even at lower q.
    let header = "*/*,application/json;as=Table;v=v1;g=meta.k8s.io;q=0.5";
    assert_eq!(res(header), TABLE);
}

#[test]
fn discovery() {
    use DiscoveryFormat::*;
    assert_discovery(&[
        // The aggregator, 1.30–1.36 and 1.37+.
        (
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
            Ok(AggregatedV2),
        ),
        (
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            Ok(AggregatedV2),
        ),
        // 1.27–1.29.
        (
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
            Ok(AggregatedV2Beta1),
        ),
        (
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            Ok(AggregatedV2Beta1),
        ),
        // Protobuf aggregated first (client-go), JSON aggregated next.
        (
            "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;q=0.9,application/json;q=0.8",
            Ok(AggregatedV2),
        ),
        // Plain requests get the legacy list.
        ("application/json", Ok(Legacy)),
        ("*/*", Ok(Legacy)),
        ("application/json, */*", Ok(Legacy)),
        (KUBECTL_TABLE, Ok(Legacy)),
        ("application/vnd.kubernetes.protobuf,*/*", Ok(Legacy)),
        // An unknown discovery version falls back to legacy when JSON is also accepted.
        (
            "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json",
            Ok(Legacy),
        ),
        // Nothing servable.
        ("text/html", Err(NotAcceptable)),
        ("application/vnd.kubernetes.protobuf", Err(NotAcceptable)),
        (
            "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList",
            Err(NotAcceptable),
        ),
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            Err(NotAcceptable),
        ),
    ]);
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
