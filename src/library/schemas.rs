//! Reading the schemas of CRDs from YAML files (`rules lint --schemas <dir>`), to check the
//! paths the rules read against them.

use crate::ruleset::schema_check::CrdSchemas;
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The schemas of every CustomResourceDefinition in the YAML files under `paths` (files, or
/// directories read recursively); other documents are skipped.
pub fn load_crd_schemas(paths: &[PathBuf]) -> Result<CrdSchemas> {
    let mut schemas = CrdSchemas::default();
    for path in paths {
        if !path.exists() {
            bail!("{} does not exist", path.display());
        }
        add(path, &mut schemas)?;
    }
    Ok(schemas)
}

fn add(path: &Path, schemas: &mut CrdSchemas) -> Result<()> {
    let mut files = Vec::new();
    super::load::yaml_files(path, &mut files)?;
    for path in &files {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
            .with_context(|| format!("parsing {}", path.display()))?;
        for document in &documents {
            schemas.add(document);
        }
    }
    Ok(())
}
