//! Lenient reading, for every object of the API: a field that is missing, `null` or of another
//! shape reads as its default instead of failing the whole object, because a reader (the
//! plugin) would rather show an object with an empty column than drop it, and an older or newer
//! server may add or omit fields. [`lenient_struct!`] declares such a type, [`lenient`] reads
//! one field so.

use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};

/// Deserialises a `T`, or gives `T::default()` when the value has another shape (a number where
/// a string belongs, `null`, an array where an object belongs): one odd field must not cost a
/// reader the rest of the object.
pub(crate) fn lenient<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Shape<T> {
        Expected(T),
        Other(IgnoredAny),
    }
    Ok(match Shape::deserialize(deserializer)? {
        Shape::Expected(value) => value,
        Shape::Other(IgnoredAny) => T::default(),
    })
}

/// Declares a serde type of the API (fields in camelCase, a `Default`) whose every field is read
/// with [`lenient`] and defaults when absent; its own attributes (`skip_serializing_if`) and
/// docs stay on each field. A type generic over how its operations are held names the parameter
/// `Op`, which then needs `Serialize` to write and `Deserialize + Default` to read.
macro_rules! lenient_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident<Op = $default:ty> {
            $( $(#[$field_meta:meta])* pub $field:ident: $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(
            rename_all = "camelCase",
            bound(
                serialize = "Op: serde::Serialize",
                deserialize = "Op: serde::Deserialize<'de> + Default"
            )
        )]
        pub struct $name<Op = $default> {
            $(
                $(#[$field_meta])*
                #[serde(default, deserialize_with = "crate::lenient::lenient")]
                pub $field: $ty,
            )*
        }
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$field_meta:meta])* pub $field:ident: $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            $(
                $(#[$field_meta])*
                #[serde(default, deserialize_with = "crate::lenient::lenient")]
                pub $field: $ty,
            )*
        }
    };
}
pub(crate) use lenient_struct;
