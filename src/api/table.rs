//! Server-side printing, for every served resource: the `meta.k8s.io` Table kubectl shows for
//! `get` and `get -w`, the `PartialObjectMetadata` form, and which of them (or the object) one
//! item is answered as. A resource says only what its columns are and what a row of an item
//! shows, as a [`Printed`]: the operations' in `operations::table`, the gates' in `gate::table`.
//!
//! Everything borrows the items and is serialised straight to the response: a list of 10,000
//! rows copies no object, it only writes them out.

use super::negotiate::Representation;
use super::params::IncludeObject;
use super::respond::meta_api_version;
use super::wire::ListMeta;
use jiff::Timestamp;
use serde::Serialize;

/// One column of a Table, as its `columnDefinitions` carry it (fields in the order they were
/// always written: by name).
#[derive(Serialize)]
pub(super) struct Column {
    pub description: &'static str,
    pub format: &'static str,
    pub name: &'static str,
    /// 0: always shown; 1: with `-o wide`.
    pub priority: u8,
    #[serde(rename = "type")]
    pub type_: &'static str,
}

impl Column {
    /// A column shown always.
    pub(super) const fn new(
        name: &'static str,
        type_: &'static str,
        format: &'static str,
        description: &'static str,
    ) -> Column {
        Column {
            name,
            type_,
            format,
            description,
            priority: 0,
        }
    }

    /// The same column, shown with `-o wide` only.
    pub(super) const fn wide(self) -> Column {
        Column {
            priority: 1,
            ..self
        }
    }
}

/// A served item as kubectl prints it.
pub(super) trait Printed {
    /// A row's cells, in the order of [`Printed::COLUMNS`].
    type Cells<'a>: Serialize
    where
        Self: 'a;
    /// The whole object as served.
    type Object: Serialize + ?Sized;
    /// Its `metadata`.
    type Metadata: Serialize + ?Sized;

    /// The column definitions: the same for list and watch, so kubectl never re-prints its
    /// header.
    const COLUMNS: &'static [Column];

    fn cells(&self, now: Timestamp) -> Self::Cells<'_>;
    fn object(&self) -> &Self::Object;
    fn metadata(&self) -> &Self::Metadata;
    /// The resourceVersion a one-row Table of it is at.
    fn resource_version(&self) -> String;
}

/// The `PartialObjectMetadata` form of an item.
#[derive(Serialize)]
#[serde(bound = "")]
pub(super) struct PartialMetadata<'a, T: Printed + ?Sized> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    metadata: &'a T::Metadata,
}

impl<'a, T: Printed + ?Sized> PartialMetadata<'a, T> {
    pub(super) fn of(item: &'a T, meta_api_version: &'static str) -> Self {
        PartialMetadata {
            kind: "PartialObjectMetadata",
            api_version: meta_api_version,
            metadata: item.metadata(),
        }
    }
}

/// What a row embeds, per `includeObject`.
#[derive(Serialize)]
#[serde(untagged, bound = "")]
enum RowObject<'a, T: Printed + ?Sized> {
    Metadata(PartialMetadata<'a, T>),
    Object(&'a T::Object),
}

/// One row of a Table.
#[derive(Serialize)]
#[serde(bound = "")]
pub(super) struct Row<'a, T: Printed + ?Sized + 'a> {
    cells: T::Cells<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    object: Option<RowObject<'a, T>>,
}

/// One row, embedding as much of the item as `include` asks for.
pub(super) fn row<'a, T: Printed + ?Sized>(
    item: &'a T,
    include: IncludeObject,
    meta_api_version: &'static str,
    now: Timestamp,
) -> Row<'a, T> {
    let object = match include {
        IncludeObject::None => None,
        IncludeObject::Metadata => Some(RowObject::Metadata(PartialMetadata::of(
            item,
            meta_api_version,
        ))),
        IncludeObject::Object => Some(RowObject::Object(item.object())),
    };
    Row {
        cells: item.cells(now),
        object,
    }
}

/// A `meta.k8s.io` Table.
#[derive(Serialize)]
#[serde(bound = "")]
pub(super) struct Table<'a, T: Printed + ?Sized + 'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    metadata: ListMeta,
    #[serde(rename = "columnDefinitions")]
    column_definitions: &'static [Column],
    rows: Vec<Row<'a, T>>,
}

pub(super) fn table<'a, T: Printed + ?Sized>(
    rows: Vec<Row<'a, T>>,
    meta_api_version: &'static str,
    metadata: ListMeta,
) -> Table<'a, T> {
    Table {
        kind: "Table",
        api_version: meta_api_version,
        metadata,
        column_definitions: T::COLUMNS,
        rows,
    }
}

/// One item as the client asked for it, borrowing it.
#[derive(Serialize)]
#[serde(untagged, bound = "")]
pub(super) enum Represented<'a, T: Printed + ?Sized + 'a> {
    Object(&'a T::Object),
    Metadata(PartialMetadata<'a, T>),
    Table(Table<'a, T>),
}

/// One item as the client asked for it: the object itself, its metadata, or a one-row Table
/// (what `get` answers and what each watch event carries).
pub(super) fn represent<T: Printed + ?Sized>(
    repr: Representation,
    item: &T,
    include: IncludeObject,
) -> Represented<'_, T> {
    match repr {
        Representation::Object => Represented::Object(item.object()),
        Representation::PartialObjectMetadata { .. } => {
            Represented::Metadata(PartialMetadata::of(item, meta_api_version(repr)))
        }
        Representation::Table { .. } => {
            let v = meta_api_version(repr);
            let row = row(item, include, v, Timestamp::now());
            let metadata = ListMeta {
                resource_version: item.resource_version(),
                continue_token: None,
            };
            Represented::Table(table(vec![row], v, metadata))
        }
    }
}
