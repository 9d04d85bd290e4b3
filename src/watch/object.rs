//! The objects of a watched target, decoded one by one, so that one object that cannot be decoded
//! never blinds the whole target.
//!
//! kube-apiserver stores what a schemaless field (`x-kubernetes-preserve-unknown-fields`) is given,
//! nested up to 10,000 levels deep, and serde_json refuses more than 128 levels per document. A
//! list decoded as one document therefore failed as a whole on one deep object ("recursion limit
//! exceeded"), and the target was not watched at all until that object went away.
//!
//! [`Object`] is what the watchers list and watch instead of `DynamicObject`: in a list or a watch
//! event it takes the object's text as it is (`RawValue`, which serde_json skips over without
//! recursion), then decodes it on its own:
//! - at most 128 levels (nearly every object): straight to a `serde_json::Value`;
//! - deeper, up to [`MAX_DEPTH`]: again with a stack that grows as needed (`serde_stacker`);
//! - deeper still, or invalid: not decoded. Its name, namespace, uid and resourceVersion are read
//!   (everything else skipped without recursion) so that the watch goes on, and the watcher
//!   skips and reports it.
//!
//! [`MAX_DEPTH`] bounds what is built: a `Value` is dropped and walked recursively, on threads
//! whose stacks are a few MiB.

use kube::core::ObjectMeta;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess};
use serde::{Deserialize, de};
use serde_json::value::RawValue;

/// Deepest nesting of an object that is evaluated; deeper objects are skipped and reported.
pub(super) const MAX_DEPTH: usize = 512;

/// An object of a watched target: its content, or why it could not be decoded.
#[derive(Clone, Debug)]
pub struct Object {
    /// Name, namespace, uid and resourceVersion (the rest is in `content`).
    pub metadata: ObjectMeta,
    /// The whole object, or why it could not be decoded.
    pub content: Result<serde_json::Value, String>,
}

impl Object {
    /// Decodes one object's JSON text (never fails: see the module's documentation).
    pub fn decode(text: &str) -> Object {
        match decode_value(text) {
            Ok(value) => Object {
                metadata: meta_of(&value),
                content: Ok(value),
            },
            Err(why) => Object {
                metadata: serde_json::from_str::<Head>(text)
                    .map(|h| h.metadata.into())
                    .unwrap_or_default(),
                content: Err(why),
            },
        }
    }

    /// `namespace/name` (or `name`), for messages.
    pub fn reference(&self) -> String {
        let name = self.metadata.name.as_deref().unwrap_or("(unnamed)");
        ifo_model::reference(self.metadata.namespace.as_deref(), name)
    }
}

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        Ok(Object::decode(raw.get()))
    }
}

super::dynamic_resource!(Object);

/// The object as a `Value`, or why not.
fn decode_value(text: &str) -> Result<serde_json::Value, String> {
    let shallow = match serde_json::from_str(text) {
        Ok(value) => return Ok(value),
        Err(e) => e,
    };
    if !shallow.to_string().starts_with("recursion limit exceeded") {
        return Err(format!("invalid JSON: {shallow}"));
    }
    // Deeper than serde_json's limit: measure first (without building anything), then decode
    // with a growing stack.
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    Nesting {
        remaining: MAX_DEPTH,
    }
    .deserialize(serde_stacker::Deserializer::new(&mut de))
    .map_err(|e| e.to_string())?;
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    serde_json::Value::deserialize(serde_stacker::Deserializer::new(&mut de))
        .map_err(|e| format!("invalid JSON: {e}"))
}

fn meta_of(value: &serde_json::Value) -> ObjectMeta {
    let field = |name: &str| {
        value
            .get("metadata")
            .and_then(|m| m.get(name))
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    ObjectMeta {
        name: field("name"),
        namespace: field("namespace"),
        uid: field("uid"),
        resource_version: field("resourceVersion"),
        ..ObjectMeta::default()
    }
}

/// What is read of an object that cannot be decoded (the rest is skipped without recursion).
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    metadata: HeadMeta,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct HeadMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
}

impl From<HeadMeta> for ObjectMeta {
    fn from(h: HeadMeta) -> ObjectMeta {
        ObjectMeta {
            name: h.name,
            namespace: h.namespace,
            uid: h.uid,
            resource_version: h.resource_version,
            ..ObjectMeta::default()
        }
    }
}

/// Walks a document without keeping anything, failing once it is nested deeper than
/// `remaining` levels.
#[derive(Clone, Copy)]
struct Nesting {
    remaining: usize,
}

impl Nesting {
    fn deeper<E: de::Error>(self) -> Result<Nesting, E> {
        match self.remaining.checked_sub(1) {
            Some(remaining) => Ok(Nesting { remaining }),
            None => Err(E::custom(format!("nested deeper than {MAX_DEPTH} levels"))),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Nesting {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> de::Visitor<'de> for Nesting {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let inner = self.deeper()?;
        while seq.next_element_seed(inner)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let inner = self.deeper()?;
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(inner)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!(
            r#"{{"metadata":{{"name":"deep","namespace":"ns","uid":"u1","resourceVersion":"7"}},"spec":{}1{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        )
    }

    #[test]
    fn a_shallow_object_is_decoded() {
        let o = Object::decode(&nested(3));
        assert_eq!(o.content.unwrap()["spec"][0][0][0], 1);
        assert_eq!(o.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(o.metadata.resource_version.as_deref(), Some("7"));
    }

    #[test]
    fn an_object_deeper_than_serde_json_allows_is_decoded() {
        let o = Object::decode(&nested(200));
        assert_eq!(o.reference(), "ns/deep");
        let mut v = &o.content.unwrap()["spec"];
        for _ in 0..200 {
            v = &v[0];
        }
        assert_eq!(*v, 1);
    }

    #[test]
    fn an_object_deeper_than_the_limit_is_named_but_not_decoded() {
        let o = Object::decode(&nested(MAX_DEPTH + 10));
        let why = o.content.unwrap_err();
        assert!(why.contains("nested deeper than 512 levels"), "{why}");
        assert_eq!(o.metadata.name.as_deref(), Some("deep"));
        assert_eq!(o.metadata.resource_version.as_deref(), Some("7"));
        // Even far deeper (kube-apiserver allows 10,000 levels), nothing overflows.
        let o = Object::decode(&nested(10_000));
        assert!(o.content.is_err());
        assert_eq!(o.metadata.uid.as_deref(), Some("u1"));
    }

    #[test]
    fn a_list_with_one_deep_object_decodes_the_others() {
        let list = format!(
            r#"{{"items":[{},{},{}]}}"#,
            nested(1),
            nested(MAX_DEPTH + 1),
            nested(300)
        );
        #[derive(Deserialize)]
        struct List {
            items: Vec<Object>,
        }
        let list: List = serde_json::from_str(&list).unwrap();
        let decoded: Vec<bool> = list.items.iter().map(|o| o.content.is_ok()).collect();
        assert_eq!(decoded, [true, false, true]);
    }

    #[test]
    fn a_watch_event_with_a_deep_object_is_read() {
        let line = format!(r#"{{"type":"MODIFIED","object":{}}}"#, nested(300));
        let event: kube::core::WatchEvent<Object> = serde_json::from_str(&line).unwrap();
        let kube::core::WatchEvent::Modified(o) = event else {
            panic!("{event:?}")
        };
        assert!(o.content.is_ok());
    }
}
