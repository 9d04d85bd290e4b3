//! Builds the page `kubectl ifo ui` serves (ui/: d3 for the timeline, bundled by esbuild) into
//! OUT_DIR, where `src/ui/assets.rs` embeds it. The npm packages are pinned by
//! ui/package-lock.json and installed with `npm ci` into OUT_DIR once per lock file (npm's own
//! cache makes a reinstall offline); Node.js and npm are needed at build time only.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What is copied into the build directory: the build script, the pinned packages and src/.
const FILES: [&str; 3] = ["package.json", "package-lock.json", "build.mjs"];

fn main() {
    let ui =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it")).join("ui");
    let work = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it")).join("ui");
    println!("cargo::rerun-if-changed=ui/src");
    for file in FILES {
        println!("cargo::rerun-if-changed=ui/{file}");
    }
    if let Err(e) = build(&ui, &work) {
        panic!(
            "\nerror: cannot build the web page of `kubectl ifo ui` ({}): {e}\n\
             It needs Node.js 18 or newer with npm, and the npm registry on the first build \
             (Debian: apt-get install nodejs npm; tests/prereqs.sh installs them).\n",
            ui.display()
        );
    }
}

fn build(ui: &Path, work: &Path) -> Result<(), String> {
    for tool in ["node", "npm"] {
        let found = Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Err(format!("`{tool}` is not installed (or not on PATH)"));
        }
    }
    let src = work.join("src");
    std::fs::create_dir_all(&src).map_err(|e| e.to_string())?;
    for file in FILES {
        copy(&ui.join(file), &work.join(file))?;
    }
    // src/ anew, so a removed file is gone from the bundle too.
    std::fs::remove_dir_all(&src).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&src).map_err(|e| e.to_string())?;
    for entry in std::fs::read_dir(ui.join("src")).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        copy(&entry.path(), &src.join(entry.file_name()))?;
    }
    // `npm ci` once per lock file: the installed copy is kept next to the stamp.
    let lock = std::fs::read(ui.join("package-lock.json")).map_err(|e| e.to_string())?;
    let stamp = work.join("node_modules/.installed-lock.json");
    if std::fs::read(&stamp).ok().as_deref() != Some(lock.as_slice()) {
        run(
            Command::new("npm")
                .args([
                    "ci",
                    "--no-audit",
                    "--no-fund",
                    "--prefer-offline",
                    "--ignore-scripts",
                ])
                .current_dir(work),
            "npm ci",
        )?;
        std::fs::write(&stamp, &lock).map_err(|e| e.to_string())?;
    }
    run(
        Command::new("node").arg("build.mjs").current_dir(work),
        "node build.mjs (esbuild)",
    )
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to)
        .map(drop)
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let out = command
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
