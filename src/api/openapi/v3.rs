//! OpenAPI v2 schemas to OpenAPI v3, the way kube-apiserver writes its v3 documents.
//!
//! Two differences matter: references point into `#/components/schemas/`, and a reference that
//! carries its own keywords (a field's `description`) is wrapped in `allOf`. In v3 a `$ref`
//! replaces its siblings, so without the wrapper `kubectl explain` would lose every field
//! description of a referenced type (`metadata`, `spec`, `status`).

use serde_json::{Map, Value};

const V2_PREFIX: &str = "#/definitions/";
const V3_PREFIX: &str = "#/components/schemas/";

/// A `$ref` in v3 form.
pub(super) fn reference(v2: &str) -> String {
    match v2.strip_prefix(V2_PREFIX) {
        Some(name) => format!("{V3_PREFIX}{name}"),
        None => v2.to_owned(),
    }
}

/// The v3 form of a v2 schema.
pub(super) fn schema(v2: &Value) -> Value {
    match v2 {
        Value::Object(map) => Value::Object(object(map)),
        Value::Array(items) => Value::Array(items.iter().map(schema).collect()),
        other => other.clone(),
    }
}

fn object(v2: &Map<String, Value>) -> Map<String, Value> {
    let mut out: Map<String, Value> = v2
        .iter()
        .filter(|(key, _)| key.as_str() != "$ref")
        .map(|(key, value)| (key.clone(), schema(value)))
        .collect();
    if let Some(Value::String(target)) = v2.get("$ref") {
        let target = Value::String(reference(target));
        if out.is_empty() {
            out.insert("$ref".into(), target);
        } else {
            let mut only_ref = Map::new();
            only_ref.insert("$ref".into(), target);
            out.insert("allOf".into(), Value::Array(vec![Value::Object(only_ref)]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn references_move_and_keep_their_descriptions() {
        let v2 = json!({
            "type": "object",
            "properties": {
                "metadata": {"$ref": "#/definitions/a.ObjectMeta", "description": "meta"},
                "items": {"type": "array", "items": {"$ref": "#/definitions/a.Item"}},
            },
        });
        assert_eq!(
            schema(&v2),
            json!({
                "type": "object",
                "properties": {
                    "metadata": {
                        "allOf": [{"$ref": "#/components/schemas/a.ObjectMeta"}],
                        "description": "meta",
                    },
                    "items": {"type": "array", "items": {"$ref": "#/components/schemas/a.Item"}},
                },
            })
        );
    }
}
