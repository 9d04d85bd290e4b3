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
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("reading {}", path.display()))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        entries.sort();
        for e in entries {
            add(&e, schemas)?;
        }
    } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
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
