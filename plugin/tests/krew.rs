//! `plugin/krew/package.sh` makes an archive and a Krew manifest that agree: the manifest names
//! the plugin, this version, the archive's URL and its sha256, and the binary the archive holds.

use std::path::{Path, PathBuf};
use std::process::Command;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_manifest_describes_the_archive() {
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::temp_dir().join(format!("ifo-krew-{}", std::process::id()));
    let binary: PathBuf = out.join("stand-in");
    std::fs::create_dir_all(&out).unwrap();
    // A stand-in with a symbol table: this test's own executable.
    std::fs::copy(std::env::current_exe().unwrap(), &binary).unwrap();
    run(Command::new(plugin.join("krew/package.sh"))
        .args(["https://example.com/releases/", "https://example.com/ifo"])
        .arg(&out)
        .env("IFO_PLUGIN_BINARY", &binary));

    let manifest: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(out.join("ifo.yaml")).unwrap()).unwrap();
    assert_eq!(manifest["kind"], "Plugin");
    assert_eq!(manifest["metadata"]["name"], "ifo");
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(manifest["spec"]["version"], version.as_str());
    assert_eq!(manifest["spec"]["homepage"], "https://example.com/ifo");
    let platform = &manifest["spec"]["platforms"][0];
    let archive = format!("kubectl-ifo_{version}_linux_amd64.tar.gz");
    assert_eq!(
        platform["uri"],
        format!("https://example.com/releases/{archive}").as_str()
    );
    let sha = run(Command::new("sha256sum").arg(out.join(&archive)));
    assert_eq!(platform["sha256"], sha.split_whitespace().next().unwrap());
    let listing = run(Command::new("tar").arg("-tzvf").arg(out.join(&archive)));
    let bin = platform["bin"].as_str().unwrap();
    assert!(
        listing
            .lines()
            .any(|l| l.starts_with("-rwx") && l.ends_with(&format!(" {bin}"))),
        "{listing}"
    );
    // The archive's binary is stripped: no symbol table left.
    let unpacked = out.join("unpacked");
    std::fs::create_dir_all(&unpacked).unwrap();
    run(Command::new("tar")
        .arg("-xzf")
        .arg(out.join(&archive))
        .arg("-C")
        .arg(&unpacked));
    let symbols = Command::new("nm").arg(unpacked.join(bin)).output().unwrap();
    assert!(
        String::from_utf8_lossy(&symbols.stderr).contains("no symbols"),
        "{symbols:?}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
