//! Reading ruleset files (`rules/<component>/<name>.yaml`) and their cases (`<name>.cases.yaml`).

use crate::ruleset::RuleSetSpec;
use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// One ruleset file of the library, checked to be an `OperationRuleSet` manifest.
pub struct RuleSetFile {
    /// Where it was read from; its cases file sits beside it.
    pub path: PathBuf,
    /// `metadata.name`.
    pub name: String,
    /// The spec, parsed: what the tools compile and evaluate.
    pub spec: RuleSetSpec,
    /// The file as written, so that `bundle` reproduces it comments and all.
    pub text: String,
}

#[derive(Deserialize)]
struct Manifest {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    metadata: Metadata,
    spec: RuleSetSpec,
}

#[derive(Deserialize)]
struct Metadata {
    name: String,
}

/// The YAML files (`.yaml`, `.yml`) at `path`: itself, or those below it read recursively, in
/// the order of their paths.
pub(super) fn yaml_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    files_ending(path, &["yaml", "yml"], out)
}

/// The files at `path` whose extension is one of `extensions`: itself, or those below it read
/// recursively, in the order of their paths.
pub(super) fn files_ending(path: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) -> Result<()> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("reading {}", path.display()))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        entries.sort();
        for e in entries {
            files_ending(&e, extensions, out)?;
        }
    } else if path
        .extension()
        .is_some_and(|e| extensions.iter().any(|x| e == *x))
    {
        out.push(path.to_path_buf());
    }
    Ok(())
}

/// Every ruleset file under `paths` (files or directories), sorted by path.
pub fn load(paths: &[PathBuf]) -> Result<Vec<RuleSetFile>> {
    let mut files = Vec::new();
    for p in paths {
        if !p.exists() {
            bail!("{} does not exist", p.display());
        }
        yaml_files(p, &mut files)?;
    }
    files.retain(|f| !f.to_string_lossy().ends_with(".cases.yaml"));
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let m: Manifest = serde_saphyr::from_str(&text)
                .map_err(|e| anyhow::anyhow!("{}: not an OperationRuleSet: {e}", path.display()))?;
            if m.api_version != "ifo.kubevirt.io/v1alpha1" || m.kind != "OperationRuleSet" {
                bail!(
                    "{}: expected ifo.kubevirt.io/v1alpha1 OperationRuleSet, found {} {}",
                    path.display(),
                    m.api_version,
                    m.kind
                );
            }
            Ok(RuleSetFile {
                path,
                name: m.metadata.name,
                spec: m.spec,
                text,
            })
        })
        .collect()
}

/// The cases file beside a ruleset file, if any.
pub(super) fn cases_path(ruleset: &Path) -> PathBuf {
    let stem = ruleset
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .to_string();
    ruleset.with_file_name(format!("{stem}.cases.yaml"))
}
