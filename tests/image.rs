//! The image `deploy/image.sh` assembles without a registry agrees with the `Dockerfile` users
//! build: same entrypoint, user, exposed port, environment and files.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The arguments of every line of the Dockerfile's final stage that starts with `instruction`.
fn final_stage(instruction: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join("Dockerfile")).expect("reading the Dockerfile");
    let lines: Vec<&str> = text.lines().collect();
    let last_from = lines
        .iter()
        .rposition(|l| l.starts_with("FROM "))
        .expect("the Dockerfile has a FROM");
    lines
        .iter()
        .skip(last_from)
        .filter_map(|l| l.strip_prefix(&format!("{instruction} ")))
        .map(|rest| rest.trim().to_string())
        .collect()
}

fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn blob(archive: &Path, digest: &str) -> Vec<u8> {
    let name = format!("blobs/sha256/{}", digest.trim_start_matches("sha256:"));
    run(Command::new("tar").arg("-xOf").arg(archive).arg(name))
}

#[test]
fn assembled_image_matches_the_dockerfile() {
    let dir = tempfile_dir();
    // Stand-in binaries (any dynamically linked executable): the test checks the image's shape.
    let binaries: Vec<PathBuf> = ["ifo-apiserver", "kubectl-ifo"]
        .iter()
        .map(|name| {
            let path = dir.join(name);
            std::fs::copy("/bin/true", &path).expect("copying /bin/true");
            path
        })
        .collect();
    let archive = dir.join("image.tar");
    let list = binaries
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" ");
    run(Command::new(root().join("deploy/image.sh"))
        .arg(&archive)
        .env("IFO_BINARIES", list));

    let index: Value = serde_json::from_slice(&run(Command::new("tar")
        .arg("-xOf")
        .arg(&archive)
        .arg("index.json")))
    .expect("index.json is JSON");
    let entry = &index["manifests"][0];
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        entry["annotations"]["io.containerd.image.name"],
        format!("docker.io/library/ifo-apiserver:{version}")
    );
    let manifest: Value =
        serde_json::from_slice(&blob(&archive, entry["digest"].as_str().unwrap())).unwrap();
    let config: Value = serde_json::from_slice(&blob(
        &archive,
        manifest["config"]["digest"].as_str().unwrap(),
    ))
    .unwrap();
    let config = &config["config"];

    let entrypoint: Value = serde_json::from_str(&final_stage("ENTRYPOINT")[0]).unwrap();
    assert_eq!(config["Entrypoint"], entrypoint, "entrypoint");
    assert_eq!(config["User"], final_stage("USER")[0], "user");
    let mut ports: Vec<String> = config["ExposedPorts"]
        .as_object()
        .expect("exposed ports")
        .keys()
        .cloned()
        .collect();
    // One EXPOSE may name several ports.
    let mut expected: Vec<String> = final_stage("EXPOSE")
        .iter()
        .flat_map(|line| line.split_whitespace().map(|p| format!("{p}/tcp")))
        .collect();
    ports.sort();
    expected.sort();
    assert_eq!(ports, expected, "exposed ports");
    let env: Vec<&str> = config["Env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for e in final_stage("ENV") {
        assert!(env.contains(&e.as_str()), "ENV {e} missing from {env:?}");
    }

    let layer = blob(&archive, manifest["layers"][0]["digest"].as_str().unwrap());
    let layer_path = dir.join("layer.tar.gz");
    std::fs::write(&layer_path, layer).unwrap();
    let files = String::from_utf8(run(Command::new("tar").arg("-tzf").arg(&layer_path))).unwrap();
    let files: Vec<&str> = files.lines().map(|l| l.trim_start_matches('.')).collect();
    // Every file the Dockerfile copies to / (the binaries), and what they need to run.
    for copy in final_stage("COPY") {
        let mut parts: Vec<&str> = copy.split_whitespace().collect();
        let dest = parts.pop().unwrap();
        for src in parts.iter().filter(|p| !p.starts_with("--")) {
            let name = Path::new(src).file_name().unwrap().to_str().unwrap();
            let path = format!("{dest}{name}");
            assert!(files.contains(&path.as_str()), "{path} missing: {files:?}");
        }
    }
    for needed in ["/etc/ssl/certs/ca-certificates.crt", "/etc/passwd", "/tmp/"] {
        assert!(files.contains(&needed), "{needed} missing: {files:?}");
    }
    assert!(
        files.iter().any(|f| f.contains("ld-linux")),
        "the dynamic loader is missing: {files:?}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ifo-image-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating a temporary directory");
    dir
}
