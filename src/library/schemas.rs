//! Reading schemas from files (`rules lint --schemas <dir>`): CRDs in YAML, kube-apiserver's
//! OpenAPI v3 documents in JSON, to check the paths the rules read against them.

use crate::ruleset::schema_check::SchemaSet;
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The schemas of every CustomResourceDefinition in the YAML files under `paths` (files, or
/// directories read recursively), and of every resource of the OpenAPI v3 documents in the JSON
/// files; other documents are skipped.
pub fn load_schemas(paths: &[PathBuf]) -> Result<SchemaSet> {
    let mut schemas = SchemaSet::default();
    for path in paths {
        if !path.exists() {
            bail!("{} does not exist", path.display());
        }
        add(path, &mut schemas)?;
    }
    Ok(schemas)
}

fn add(path: &Path, schemas: &mut SchemaSet) -> Result<()> {
    let mut files = Vec::new();
    super::load::files_ending(path, &["yaml", "yml", "json"], &mut files)?;
    for path in &files {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let documents: Vec<Value> = if path.extension().is_some_and(|e| e == "json") {
            vec![
                serde_json::from_str(&text)
                    .with_context(|| format!("parsing {}", path.display()))?,
            ]
        } else {
            serde_saphyr::from_multiple(&text)
                .with_context(|| format!("parsing {}", path.display()))?
        };
        for document in &documents {
            schemas.add(document);
        }
    }
    Ok(())
}
