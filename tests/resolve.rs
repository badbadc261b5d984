//! Lock-time resolution against real servers on 127.0.0.1:
//!
//! * a real OCI registry (Debian's `docker-registry`, the distribution registry) holding a
//!   tiny two-platform image pushed with `skopeo` from an OCI layout written here, reached
//!   through `[resolve].registries` for `docker.io`, directly and behind a token gate that
//!   speaks the anonymous bearer-token flow;
//! * a real apt repository (`dpkg-deb` packages indexed by `apt-ftparchive`) and a real dnf
//!   repository (`rpmbuild` packages indexed by `createrepo_c`), served over HTTP.
//!
//! A missing tool skips loudly, and fails under `CI=true` (`tests/run.sh` installs them).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use gpustack::resolve::http::{sha256_digest, Http, Request, Transport};
use gpustack::{Catalog, Lock};

fn tools(names: &[&str]) -> bool {
    names.iter().all(|n| common::validator(n).is_some())
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpustack-resolve-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sh(cmd: &mut Command) {
    let out = cmd.output().expect("run tool");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A process killed when dropped.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Serves `handler(method, path, headers)` on a background thread; returns the port.
fn serve(
    handler: impl Fn(&str, &str, &[(String, String)]) -> (u16, Vec<(String, String)>, Vec<u8>)
        + Send
        + Sync
        + 'static,
) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handler = Arc::new(handler);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let h = handler.clone();
            std::thread::spawn(move || {
                let _ = answer(stream, &*h);
            });
        }
    });
    port
}

type Handler = dyn Fn(&str, &str, &[(String, String)]) -> (u16, Vec<(String, String)>, Vec<u8>);

fn answer(mut stream: TcpStream, h: &Handler) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let mut headers = Vec::new();
        loop {
            let mut l = String::new();
            reader.read_line(&mut l)?;
            let l = l.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let (status, extra, body) = h(&method, &path, &headers);
        let mut head = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\n", body.len());
        for (k, v) in extra {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes())?;
        if method != "HEAD" {
            stream.write_all(&body)?;
        }
        stream.flush()?;
    }
}

/// A static file server for `dir`.
fn serve_dir(dir: PathBuf) -> u16 {
    serve(move |_, path, _| {
        let rel = path.trim_start_matches('/');
        if rel.split('/').any(|s| s == "..") {
            return (400, vec![], vec![]);
        }
        match std::fs::read(dir.join(rel)) {
            Ok(b) => (200, vec![], b),
            Err(_) => (404, vec![], b"not found".to_vec()),
        }
    })
}

fn write_blob(layout: &Path, bytes: &[u8]) -> (String, usize) {
    let d = sha256_digest(bytes);
    let p = layout
        .join("blobs/sha256")
        .join(d.trim_start_matches("sha256:"));
    std::fs::write(p, bytes).unwrap();
    (d, bytes.len())
}

/// An OCI layout holding an image index with an amd64 and an arm64 image (each one empty
/// gzip layer), tagged `t`.
fn oci_layout(dir: &Path, salt: &str) {
    std::fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
    std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    // An empty tar (two 512-byte zero blocks), gzip-compressed with no name or time.
    let tar = vec![0u8; 1024];
    let gz = {
        let mut v = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];
        v.extend(miniz_deflate(&tar));
        v.extend(crc32(&tar).to_le_bytes());
        v.extend(u32::try_from(tar.len()).unwrap().to_le_bytes());
        v
    };
    let (layer, layer_size) = write_blob(dir, &gz);
    let diff_id = sha256_digest(&tar);
    let mut entries = Vec::new();
    for arch in ["amd64", "arm64"] {
        let config = format!(
            r#"{{"architecture":"{arch}","os":"linux","config":{{"Labels":{{"salt":"{salt}"}}}},"rootfs":{{"type":"layers","diff_ids":["{diff_id}"]}}}}"#
        );
        let (c, cs) = write_blob(dir, config.as_bytes());
        let manifest = format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{c}","size":{cs}}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{layer}","size":{layer_size}}}]}}"#
        );
        let (m, ms) = write_blob(dir, manifest.as_bytes());
        entries.push(format!(
            r#"{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{m}","size":{ms},"platform":{{"architecture":"{arch}","os":"linux"}}}}"#
        ));
    }
    let index = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{}]}}"#,
        entries.join(",")
    );
    let (i, is) = write_blob(dir, index.as_bytes());
    std::fs::write(
        dir.join("index.json"),
        format!(
            r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"{i}","size":{is},"annotations":{{"org.opencontainers.image.ref.name":"t"}}}}]}}"#
        ),
    )
    .unwrap();
}

fn miniz_deflate(data: &[u8]) -> Vec<u8> {
    // Stored (uncompressed) deflate blocks: valid gzip without a compressor.
    let mut out = Vec::new();
    let chunks: Vec<&[u8]> = data.chunks(65_535).collect();
    for (n, c) in chunks.iter().enumerate() {
        out.push(u8::from(n + 1 == chunks.len()));
        let len = u16::try_from(c.len()).unwrap();
        out.extend(len.to_le_bytes());
        out.extend((!len).to_le_bytes());
        out.extend_from_slice(c);
    }
    out
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Starts a registry on a free port; returns it and its base URL.
fn registry(dir: &Path) -> (Proc, String) {
    let port = free_port();
    let config = dir.join("config.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.join("data").display()
        ),
    )
    .unwrap();
    let child = Command::new("docker-registry")
        .arg("serve")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start docker-registry");
    let p = Proc(child);
    let url = format!("http://127.0.0.1:{port}");
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    (p, url)
}

fn push(layout: &Path, registry: &str, reference: &str) {
    let host = registry.trim_start_matches("http://");
    sh(Command::new("skopeo").args([
        "copy",
        "--quiet",
        "--all",
        "--dest-tls-verify=false",
        &format!("oci:{}:t", layout.display()),
        &format!("docker://{host}/{reference}"),
    ]));
}

const SPEC: &str = "[stack]\nname = \"resolve-demo\"\nos = \"ubuntu22.04\"\n[hardware]\ngpus = [\"a100\"]\n[components]\ntorch = \"*\"\ncudnn = \"*\"\n";

fn spec_with(resolve: &str) -> String {
    format!("{SPEC}[resolve]\n{resolve}")
}

#[test]
fn image_digests_come_from_a_real_registry_through_a_mirror_and_a_token_gate() {
    if !tools(&["docker-registry", "skopeo"]) {
        return;
    }
    let dir = tmp("registry");
    let cat = Catalog::stock().unwrap();
    let offline = gpustack::lock_spec(&cat, "s", SPEC).unwrap();
    let cuda = offline.package("cuda-image").unwrap();
    let (devel, runtime) = (
        cuda.get("devel-tag").unwrap(),
        cuda.get("runtime-tag").unwrap(),
    );
    // Offline, the base images have no sourced digest; uv's comes from the catalog.
    assert_eq!(cuda.get("digest-source"), None);
    assert_eq!(
        offline.package("uv").unwrap().get("digest-source"),
        Some("catalog")
    );

    oci_layout(&dir.join("layout"), "one");
    let (_reg, url) = registry(&dir);
    for tag in [devel, runtime] {
        push(&dir.join("layout"), &url, &format!("nvidia/cuda:{tag}"));
    }
    // The Dockerfile frontend is a docker.io image too: the mirror must serve it.
    push(&dir.join("layout"), &url, "docker/dockerfile:1.7");
    // What the registry itself says the tag is.
    let http = Http::new(false);
    let head = http
        .send(
            &Request::get(format!("{url}/v2/nvidia/cuda/manifests/{devel}"))
                .header("Accept", gpustack::resolve::oci::ACCEPT),
        )
        .unwrap();
    let served = head.header("docker-content-digest").unwrap().to_string();
    assert_eq!(sha256_digest(&head.body), served);

    let text = spec_with(&format!("registries = {{ \"docker.io\" = \"{url}\" }}\n"));
    let (lock, report) = gpustack::lock_spec_resolved(&cat, "s", &text, &http, None).unwrap();
    let cuda = lock.package("cuda-image").unwrap();
    assert_eq!(cuda.get("digest-source"), Some("registry"));
    let frontend = lock.package("dockerfile-frontend").unwrap();
    assert_eq!(frontend.get("digest-source"), Some("registry"));
    assert_eq!(cuda.get("devel-digest"), Some(served.as_str()));
    assert_eq!(cuda.list("devel-platforms").len(), 2, "{:?}", cuda.fields);
    assert!(cuda.list("devel-platforms")[0].starts_with("linux/amd64 sha256:"));
    assert!(lock.verify().is_empty());
    assert_eq!(
        report.from_registry.len(),
        3,
        "the two base images and the frontend"
    );
    // ghcr.io is not mirrored and not reachable here: uv keeps the catalog's digest.
    assert_eq!(
        lock.package("uv").unwrap().get("digest-source"),
        Some("catalog")
    );
    // The lock records the mirror in its request, and parses back the same.
    let written = lock.to_toml();
    assert!(written.contains(&format!(
        "[request.resolve.registries]\n\"docker.io\" = \"{url}\""
    )));
    assert!(written.contains("version = 4\n"));
    assert_eq!(Lock::parse("l", &written).unwrap(), lock);
    // The generated Dockerfile pulls by digest.
    let files = gpustack::plan::generate_many(&lock, &[gpustack::plan::Target::Docker]).unwrap();
    let dockerfile = files[0]
        .1
        .iter()
        .find(|f| f.path.ends_with("Dockerfile"))
        .map(|f| f.contents.clone())
        .unwrap();
    assert!(
        dockerfile.contains(&format!("nvidia/cuda:{devel}@{served}")),
        "{dockerfile}"
    );

    // Offline with the previous lock: its registry digests stand.
    let (again, _) = gpustack::lock_spec_resolved(
        &cat,
        "s",
        &text,
        &gpustack::resolve::http::Offline,
        Some(&lock),
    )
    .unwrap();
    assert_eq!(again.to_toml(), written);

    // The CLI: `lock` resolves online; `--offline` (and `GPUSTACK_OFFLINE=1`) sends nothing;
    // `lock --check` is offline and keeps the lock's registry digests, so it is fresh.
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("gpustack.toml"), &text).unwrap();
    let cli = |args: &[&str], offline_env: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_gpustack"));
        c.args(args)
            .current_dir(&project)
            .env_remove("GPUSTACK_OFFLINE")
            // No uv: the Python closure stays open (tests/closure.rs covers it; an open
            // lock needs `--allow-open`), so the CLI's lock is the library's
            // `lock_spec_resolved` one.
            .args(if args[0] == "lock" {
                &["--allow-open"][..]
            } else {
                &[]
            })
            .env("GPUSTACK_UV", "/nonexistent/uv");
        if offline_env {
            c.env("GPUSTACK_OFFLINE", "1");
        }
        let out = c.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, _, err) = cli(&["lock"], false);
    assert_eq!(code, 0, "{err}");
    let on_disk = std::fs::read_to_string(project.join("gpustack.lock")).unwrap();
    assert_eq!(on_disk, written);
    // One summary line for the references the registry was not asked about (`-v`: each).
    assert!(
        err.contains("from the previous lock or the catalog"),
        "{err}"
    );
    assert!(!err.contains("digest from the catalog"), "{err}");
    let (code, _, err) = cli(&["lock", "-v"], false);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("digest from the catalog"), "{err}");
    let (code, _, err) = cli(&["lock", "--check"], false);
    assert_eq!(code, 0, "{err}");
    for (args, env) in [
        (&["lock", "--offline", "--out", "-"][..], false),
        (&["lock", "--out", "-"][..], true),
    ] {
        let (code, out, err) = cli(args, env);
        assert_eq!(code, 0, "{err}");
        assert!(
            !out.contains("digest-source = \"registry\""),
            "{args:?} {env}: resolved online"
        );
    }

    // The tag moves: a re-lock sees the new digest.
    oci_layout(&dir.join("layout2"), "two");
    push(&dir.join("layout2"), &url, &format!("nvidia/cuda:{devel}"));
    let (moved, _) = gpustack::lock_spec_resolved(&cat, "s", &text, &http, Some(&lock)).unwrap();
    assert_ne!(
        moved.package("cuda-image").unwrap().get("devel-digest"),
        Some(served.as_str())
    );
    assert_ne!(
        moved.layer(gpustack::Layer::Base).unwrap().hash,
        lock.layer(gpustack::Layer::Base).unwrap().hash
    );

    // A token gate in front of the same registry, as Docker Hub, nvcr.io and ghcr.io answer:
    // 401 with a Bearer challenge, a token endpoint, then the registry with the token.
    let upstream = url.clone();
    let gate = serve(move |method, path, headers| {
        let authed = headers
            .iter()
            .any(|(k, v)| k == "authorization" && v == "Bearer s3cret");
        if path.starts_with("/token?") {
            assert!(path.contains("scope=repository:nvidia/cuda:pull"), "{path}");
            return (200, vec![], br#"{"token":"s3cret"}"#.to_vec());
        }
        if !authed {
            let port = headers
                .iter()
                .find(|(k, _)| k == "host")
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            return (
                401,
                vec![(
                    "WWW-Authenticate".into(),
                    format!("Bearer realm=\"http://{port}/token\",service=\"gate\",scope=\"repository:nvidia/cuda:pull\""),
                )],
                vec![],
            );
        }
        let accept = headers
            .iter()
            .find(|(k, _)| k == "accept")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let mut req = Request::get(format!("{upstream}{path}")).header("Accept", accept);
        if method == "HEAD" {
            req.method = gpustack::resolve::http::Method::Head;
        }
        let r = Http::new(false).send(&req).unwrap();
        let keep = ["content-type", "docker-content-digest"];
        (
            r.status,
            r.headers
                .into_iter()
                .filter(|(k, _)| keep.contains(&k.as_str()))
                .collect(),
            r.body,
        )
    });
    let text = spec_with(&format!(
        "registries = {{ \"docker.io\" = \"http://127.0.0.1:{gate}\" }}\n"
    ));
    let (gated, _) = gpustack::lock_spec_resolved(&cat, "s", &text, &http, None).unwrap();
    assert_eq!(
        gated.package("cuda-image").unwrap().get("devel-digest"),
        moved.package("cuda-image").unwrap().get("devel-digest")
    );

    // A tag the registry does not have stops the lock, naming it.
    let text = spec_with(&format!(
        "registries = {{ \"docker.io\" = \"{url}/nothing-here\" }}\n"
    ));
    let err = gpustack::lock_spec_resolved(&cat, "s", &text, &http, None).unwrap_err();
    assert!(err.to_string().contains("does not resolve"), "{err}");

    // nvcr.io through the same kind of mirror: the GPU Operator's driver container (its tag
    // `<driver>-<os>`) and DCGM Exporter are pinned by digest in the operator values, and
    // `check` still reads the values' driver as the locked one.
    let driver = offline.package("gpu-operator-driver").unwrap();
    assert_eq!(driver.get("image"), Some("nvcr.io/nvidia/driver"));
    let driver_tag = driver.get("image-tag").unwrap().to_string();
    assert!(driver_tag.ends_with("-ubuntu22.04"), "{driver_tag}");
    let exporter = offline.package("dcgm-exporter").unwrap();
    let exporter_ref = format!(
        "{}:{}",
        exporter
            .get("image")
            .unwrap()
            .trim_start_matches("nvcr.io/"),
        exporter.get("image-tag").unwrap()
    );
    push(
        &dir.join("layout"),
        &url,
        &format!("nvidia/driver:{driver_tag}"),
    );
    push(&dir.join("layout"), &url, &exporter_ref);
    // The Container Toolkit's operator image, named by the lock's toolkit package.
    let toolkit = offline.package("nvidia-container-toolkit").unwrap();
    let toolkit_ref = format!(
        "{}:{}",
        toolkit.get("image").unwrap().trim_start_matches("nvcr.io/"),
        toolkit.get("image-tag").unwrap()
    );
    push(&dir.join("layout"), &url, &toolkit_ref);
    let text = spec_with(&format!(
        "registries = {{ \"docker.io\" = \"{url}\", \"nvcr.io\" = \"{url}\" }}\n"
    ));
    let (both, _) = gpustack::lock_spec_resolved(&cat, "s", &text, &http, None).unwrap();
    let driver = both.package("gpu-operator-driver").unwrap();
    assert_eq!(driver.get("digest-source"), Some("registry"));
    let digest = driver.get("image-digest").unwrap().to_string();
    let files = gpustack::plan::generate_many(&both, &[gpustack::plan::Target::K8s]).unwrap();
    let values = files[0]
        .1
        .iter()
        .find(|f| f.path.ends_with("gpu-operator-values.yaml"))
        .map(|f| f.contents.clone())
        .unwrap();
    assert!(
        values.contains(&"driver:\n".to_string())
            && values.contains(&format!(
                "  repository: \"nvcr.io/nvidia\"\n  image: \"driver\"\n  version: \"{digest}\"\n"
            )),
        "{values}"
    );
    let exporter_digest = both
        .package("dcgm-exporter")
        .unwrap()
        .get("image-digest")
        .unwrap()
        .to_string();
    assert!(
        values.contains(&format!("  version: \"{exporter_digest}\"\n")),
        "{values}"
    );
    let toolkit = both.package("nvidia-container-toolkit").unwrap();
    assert_eq!(toolkit.get("digest-source"), Some("registry"));
    assert!(
        values.contains(&format!(
            "  repository: \"nvcr.io/nvidia/k8s\"\n  image: \"container-toolkit\"\n  version: \"{}\"\n",
            toolkit.get("image-digest").unwrap()
        )),
        "{values}"
    );
    // The registry's answer replaced the catalog's observation (NVIDIA's bundle digest,
    // which this test registry does not serve): said, with the observation's date.
    assert!(
        toolkit.because.iter().any(
            |b| b.contains("` moved: the catalog observed sha256:f8c647d5")
                && b.contains(" on 2026-08-20, the registry now serves ")
        ),
        "{:?}",
        toolkit.because
    );
    assert!(
        !toolkit
            .because
            .iter()
            .any(|b| b.contains("catalog observation of")),
        "{:?}",
        toolkit.because
    );
    std::fs::write(project.join("gpustack.toml"), &text).unwrap();
    let (code, _, err) = cli(&["lock"], false);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(&["gen", "k8s"], false);
    assert_eq!(code, 0, "{err}");
    let (_, out, err) = cli(&["check"], false);
    assert!(
        !out.contains("inconsistent-driver") && !err.contains("inconsistent-driver"),
        "{out}{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Builds a `.deb` named `name` at `version` into `pool`.
fn deb(pool: &Path, name: &str, version: &str) {
    let root = pool.join(format!("{name}-{version}").replace(':', "_"));
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::write(
        root.join("DEBIAN/control"),
        format!("Package: {name}\nVersion: {version}\nArchitecture: amd64\nMaintainer: t <t@example.com>\nDescription: test\n"),
    )
    .unwrap();
    sh(Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zgzip", "--build"])
        .arg(&root)
        .arg(pool.join(format!("{name}_{}_amd64.deb", version.replace(':', "%3a")))));
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn apt_pins_are_checked_against_a_real_flat_repository() {
    if !tools(&["dpkg-deb", "apt-ftparchive"]) {
        return;
    }
    let dir = tmp("apt");
    let cat = Catalog::stock().unwrap();
    let offline = gpustack::lock_spec(&cat, "s", SPEC).unwrap();
    let dcgm = offline.package("dcgm").unwrap();
    assert_eq!(dcgm.get("apt-source"), Some("catalog"));
    let pins = dcgm.list("apt").to_vec();
    // NVIDIA's CUDA repository for ubuntu2204/x86_64, as a flat repository: what the lock
    // pins, and the first pin only under another Debian revision.
    let repo = dir.join("cuda/ubuntu2204/x86_64");
    std::fs::create_dir_all(&repo).unwrap();
    // Every package the CUDA repository serves (the container toolkit has its own).
    let others: Vec<String> = offline
        .packages
        .iter()
        .filter(|p| p.name != "dcgm" && p.name != "nvidia-container-toolkit")
        .flat_map(|p| p.list("apt").to_vec())
        .collect();
    for (i, p) in pins.iter().chain(&others).enumerate() {
        let (n, v) = p.split_once('=').unwrap();
        if i == 0 {
            deb(&repo, n, &v.replace("-1", "-2"));
        } else if n.starts_with("nvidia-open-") {
            // The driver's Debian revision is not the naming rule's `-1` in every
            // repository: the index's string is what the lock must record.
            deb(&repo, n, &v.replace("-1", "-1ubuntu1"));
        } else {
            deb(&repo, n, v);
        }
    }
    let packages = Command::new("apt-ftparchive")
        .arg("packages")
        .arg(".")
        .current_dir(&repo)
        .output()
        .unwrap();
    std::fs::write(repo.join("Packages"), &packages.stdout).unwrap();
    sh(Command::new("gzip")
        .args(["-kn9"])
        .arg(repo.join("Packages")));
    let release = Command::new("apt-ftparchive")
        .arg("release")
        .arg(".")
        .current_dir(&repo)
        .output()
        .unwrap();
    std::fs::write(repo.join("Release"), &release.stdout).unwrap();
    let port = serve_dir(dir.clone());
    let text = spec_with(&format!(
        "apt = {{ \"https://developer.download.nvidia.com/compute/cuda/repos\" = \"http://127.0.0.1:{port}/cuda\" }}\n"
    ));
    let http = Http::new(false);
    let (lock, report) = gpustack::lock_spec_resolved(&cat, "s", &text, &http, None).unwrap();
    let dcgm = lock.package("dcgm").unwrap();
    assert_eq!(dcgm.get("apt-source"), Some("repository"));
    assert_eq!(
        dcgm.get("apt-repository"),
        Some("https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64")
    );
    let (n0, v0) = pins[0].split_once('=').unwrap();
    assert_eq!(
        dcgm.list("apt")[0],
        format!("{n0}={}", v0.replace("-1", "-2"))
    );
    assert_eq!(dcgm.list("apt")[1..], pins[1..]);
    assert!(report.verified.len() >= pins.len());
    // The stack's own packages (driver in both module flavours, toolkit, cuDNN, NCCL): the
    // catalog's naming offline, the repository's strings once it was read.
    for name in [
        "nvidia-open",
        "cuda-drivers",
        "cuda-toolkit",
        "libcudnn",
        "libnccl",
    ] {
        let before = offline.package(name).unwrap_or_else(|| panic!("{name}"));
        let after = lock.package(name).unwrap();
        assert_eq!(before.get("apt-source"), Some("naming"), "{name}");
        assert_eq!(after.get("apt-source"), Some("repository"), "{name}");
        if name == "nvidia-open" {
            assert!(after.list("apt")[0].ends_with("-1ubuntu1"), "{after:?}");
        } else {
            assert_eq!(after.list("apt"), before.list("apt"), "{name}");
        }
    }
    // Every generated install step names the index's strings, and none is called unverified.
    let rendered = gpustack::plan::generate_many(
        &lock,
        &[
            gpustack::plan::Target::Packer,
            gpustack::plan::Target::Docker,
        ],
    )
    .unwrap();
    let all: String = rendered
        .iter()
        .flat_map(|(_, files)| files.iter().map(|f| f.contents.clone()))
        .collect();
    let open = &lock.package("nvidia-open").unwrap().list("apt")[0];
    assert!(
        all.contains(&format!("'{open}'")),
        "base.sh installs {open}"
    );
    for name in ["nvidia-open", "cuda-toolkit", "libcudnn", "libnccl"] {
        for pin in lock.package(name).unwrap().list("apt") {
            assert!(all.contains(pin.as_str()), "{pin} not installed");
            assert!(
                !all.lines()
                    .any(|l| l.contains("unverified") && l.contains(pin.as_str())),
                "{pin} still called unverified"
            );
        }
    }
    assert!(lock.verify().is_empty());
    // Layer hashes follow the verified pins.
    assert_ne!(
        lock.layer(gpustack::Layer::Host).unwrap().hash,
        offline.layer(gpustack::Layer::Host).unwrap().hash
    );

    // A Packages file that is not the one Release states is refused.
    std::fs::write(repo.join("Packages.gz"), b"tampered").unwrap();
    let err = gpustack::lock_spec_resolved(&cat, "s", &text, &http, None).unwrap_err();
    assert!(err.to_string().contains("index states"), "{err}");

    // A pin the repository does not publish at all stops the lock, with what it has.
    std::fs::remove_file(repo.join("Packages.gz")).unwrap();
    for f in std::fs::read_dir(&repo).unwrap().flatten() {
        if f.file_name().to_string_lossy().starts_with(n0) {
            std::fs::remove_file(f.path()).unwrap();
        }
    }
    let packages = Command::new("apt-ftparchive")
        .arg("packages")
        .arg(".")
        .current_dir(&repo)
        .output()
        .unwrap();
    std::fs::write(repo.join("Packages"), &packages.stdout).unwrap();
    let release = Command::new("apt-ftparchive")
        .arg("release")
        .arg(".")
        .current_dir(&repo)
        .output()
        .unwrap();
    std::fs::write(repo.join("Release"), &release.stdout).unwrap();
    let err = gpustack::lock_spec_resolved(&cat, "s", &text, &http, None).unwrap_err();
    assert!(
        err.to_string().contains(&format!("apt pin `{}`", pins[0])),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dnf_pins_are_checked_against_a_real_repository() {
    if !tools(&["rpmbuild", "createrepo_c"]) {
        return;
    }
    let dir = tmp("dnf");
    let cat = Catalog::stock().unwrap();
    let spec = SPEC.replace("ubuntu22.04", "rockylinux9");
    let offline = gpustack::lock_spec(&cat, "s", &spec).unwrap();
    let fm = offline.package("nvidia-fabricmanager").unwrap();
    let pin = fm.list("dnf")[0].clone();
    assert_eq!(fm.get("dnf-source"), Some("naming"));
    // `nvidia-fabricmanager-595-595.91.07` → name and version.
    let (name, ver) = pin.rsplit_once('-').unwrap();
    let repo = dir.join("cuda/rhel9/x86_64");
    std::fs::create_dir_all(&repo).unwrap();
    // Every dnf pin of the CUDA repository's packages, as an RPM: `<name>-<version>[-<release>]`
    // split at the lock package's version (`libnccl-2.27.5-1+cuda12.9`: release `1+cuda12.9`).
    let mut rpms: Vec<(String, String, String)> = Vec::new();
    for p in offline
        .packages
        .iter()
        .filter(|p| p.name != "nvidia-container-toolkit")
    {
        for x in p.list("dnf") {
            let at = x
                .find(&format!("-{}", p.version))
                .unwrap_or_else(|| panic!("{x}"));
            let rest = &x[at + 1 + p.version.len()..];
            let release = rest.strip_prefix('-').unwrap_or("1");
            rpms.push((x[..at].to_string(), p.version.clone(), release.to_string()));
        }
    }
    assert!(rpms.iter().any(|(n, _, _)| n == "libnccl"), "{rpms:?}");
    dnf_repository(&dir, &repo, &rpms);
    let port = serve_dir(dir.clone());
    let text = spec_with(&format!(
        "dnf = {{ \"https://developer.download.nvidia.com/compute/cuda/repos\" = \"http://127.0.0.1:{port}/cuda\" }}\n"
    ))
    .replace("ubuntu22.04", "rockylinux9");
    let (lock, _) = gpustack::lock_spec_resolved(&cat, "s", &text, &Http::new(false), None)
        .unwrap_or_else(|e| panic!("{e}"));
    let fm = lock.package("nvidia-fabricmanager").unwrap();
    assert_eq!(fm.get("dnf-source"), Some("repository"));
    assert_eq!(fm.list("dnf"), [format!("{name}-{ver}-1")]);
    for name in ["nvidia-open", "cuda-toolkit", "libcudnn", "libnccl"] {
        let p = lock.package(name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!(p.get("dnf-source"), Some("repository"), "{name}");
    }
    assert!(lock.verify().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resolve_table_is_validated_with_lines() {
    let cat = Catalog::stock().unwrap();
    let err = gpustack::lock_spec(
        &cat,
        "gpustack.toml",
        &spec_with("exclude-newer = \"yesterday\"\nregistries = { \"Docker.io\" = \"ftp://x\" }\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("invalid `exclude-newer` `yesterday`"), "{err}");
    assert!(err.contains("gpustack.toml:10:17"), "{err}");
    assert!(
        err.contains("invalid `registries` key `Docker.io`"),
        "{err}"
    );
    assert!(
        err.contains("invalid `registries` mirror `ftp://x`"),
        "{err}"
    );
}

/// A catalog overlay giving the stock `image` entry of `cuda`/`os` one observation per tag.
fn observed(cuda: &str, os: &str, tags: &[&str], digest: &str) -> Catalog {
    let mut text = format!(
        "family = \"image\"\n[[image]]\ncuda = \"{cuda}\"\nos = \"{os}\"\ntags = [{}]\nstatus = \"supported\"\nsource = \"https://example.org/tags\"\n",
        tags.iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for t in tags {
        text.push_str(&format!(
            "[[image.digest]]\ntag = \"{t}\"\ndigest = \"{digest}\"\nobserved = \"2026-03-04\"\nsource = \"https://example.org/Dockerfile\"\nkind = \"unknown\"\n"
        ));
    }
    Catalog::stock_with(&[vec![("overlay/images.toml".into(), text)]]).unwrap()
}

/// The registry wins over the catalog's dated observations: online, the observation's line
/// leaves the lock and a different digest is reported as a moved tag with the observation's
/// date; an observation that was one platform's manifest of the served index is said to be
/// that, not a move. Offline, the observation pins the image and says so.
#[test]
fn the_registry_wins_over_a_dated_catalog_observation() {
    if !tools(&["docker-registry", "skopeo"]) {
        return;
    }
    let dir = tmp("observed");
    let stock = gpustack::lock_spec(&Catalog::stock().unwrap(), "s", SPEC).unwrap();
    let cuda = stock.package("cuda-image").unwrap();
    let (version, devel, runtime) = (
        cuda.version.clone(),
        cuda.get("devel-tag").unwrap().to_string(),
        cuda.get("runtime-tag").unwrap().to_string(),
    );
    let tags = [runtime.as_str(), devel.as_str()];
    let stale = format!("sha256:{}", "5".repeat(64));
    let cat = observed(&version, "ubuntu22.04", &tags, &stale);
    let (offline, _) =
        gpustack::lock_spec_resolved(&cat, "s", SPEC, &gpustack::resolve::http::Offline, None)
            .unwrap();
    let cuda = offline.package("cuda-image").unwrap();
    assert_eq!(cuda.get("digest-source"), Some("catalog"));
    assert_eq!(cuda.get("devel-digest"), Some(stale.as_str()));

    oci_layout(&dir.join("layout"), "obs");
    let (_reg, url) = registry(&dir);
    for tag in tags {
        push(&dir.join("layout"), &url, &format!("nvidia/cuda:{tag}"));
    }
    push(&dir.join("layout"), &url, "docker/dockerfile:1.7");
    let text = spec_with(&format!("registries = {{ \"docker.io\" = \"{url}\" }}\n"));
    let http = Http::new(false);
    let (online, _) = gpustack::lock_spec_resolved(&cat, "s", &text, &http, None).unwrap();
    let cuda = online.package("cuda-image").unwrap();
    assert_eq!(cuda.get("digest-source"), Some("registry"));
    let served = cuda.get("devel-digest").unwrap().to_string();
    assert_ne!(served, stale);
    assert!(
        !cuda
            .because
            .iter()
            .any(|b| b.contains("catalog observation of")),
        "{:?}",
        cuda.because
    );
    assert!(
        cuda.because.contains(&format!(
            "`nvidia/cuda:{devel}` moved: the catalog observed {stale} on 2026-03-04, the registry now serves {served}"
        )),
        "{:?}",
        cuda.because
    );
    // Offline again, with that lock as the previous one: its registry digests stand, and
    // the observation does not come back.
    let (again, _) = gpustack::lock_spec_resolved(
        &cat,
        "s",
        &text,
        &gpustack::resolve::http::Offline,
        Some(&online),
    )
    .unwrap();
    assert_eq!(again.to_toml(), online.to_toml());

    // An observation that named the amd64 manifest of the index the tag still names.
    let amd64 = cuda.list("devel-platforms")[0].clone();
    let (platform, manifest) = amd64.split_once(' ').unwrap();
    let cat = observed(&version, "ubuntu22.04", &tags, manifest);
    let (online, _) = gpustack::lock_spec_resolved(&cat, "s", &text, &http, None).unwrap();
    let cuda = online.package("cuda-image").unwrap();
    assert!(
        cuda.because.contains(&format!(
            "`nvidia/cuda:{devel}`: the catalog's observation on 2026-03-04 ({manifest}) is the {platform} manifest of the index the registry serves"
        )),
        "{:?}",
        cuda.because
    );
    assert!(
        !cuda.because.iter().any(|b| b.contains("moved")),
        "{:?}",
        cuda.because
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes a flat apt repository's `Packages`, `Packages.gz` and `Release` for the `.deb`
/// files in `repo`.
fn index_flat_apt(repo: &Path) {
    for (what, file) in [("packages", "Packages"), ("release", "Release")] {
        if what == "release" {
            sh(Command::new("gzip")
                .args(["-kfn9"])
                .arg(repo.join("Packages")));
        }
        let out = Command::new("apt-ftparchive")
            .arg(what)
            .arg(".")
            .current_dir(repo)
            .output()
            .unwrap();
        std::fs::write(repo.join(file), &out.stdout).unwrap();
    }
}

/// NCCL 2.29.7 has no CUDA build in the catalog, so the lock assumes the locked minor
/// (`+cuda13.0`, unverified); NVIDIA's repository publishes `+cuda12.9` and `+cuda13.2`
/// only: the lock takes the nearest build of the locked major from the index (13.2), the
/// same rule the catalog's lists follow, records it in the `nccl-build` fact, and the
/// generated installs name it. A repository with no build of that major stops the lock.
#[test]
fn an_nccl_build_the_catalog_does_not_list_is_read_from_the_repository() {
    if !tools(&["dpkg-deb", "apt-ftparchive"]) {
        return;
    }
    let dir = tmp("nccl-build");
    let cat = Catalog::stock().unwrap();
    let spec = "[stack]\nname = \"nccl-build\"\nos = \"ubuntu22.04\"\n[hardware]\ngpus = [\"h100\"]\ndriver = \"580.95.05\"\n[components]\ntorch = \"==2.12.0\"\nnccl = \"==2.29.7\"\n";
    let offline = gpustack::lock_spec(&cat, "s", spec).unwrap();
    let fact = |l: &Lock| {
        l.facts
            .iter()
            .find(|f| f.kind == "nccl-build")
            .cloned()
            .unwrap()
    };
    assert_eq!(fact(&offline).get("known"), Some("false"));
    assert_eq!(fact(&offline).get("cuda"), Some("13.0"));
    let repo = dir.join("cuda/ubuntu2204/x86_64");
    std::fs::create_dir_all(&repo).unwrap();
    let publish = |builds: &[&str]| {
        for f in std::fs::read_dir(&repo).unwrap().flatten() {
            std::fs::remove_file(f.path()).unwrap();
        }
        for p in offline
            .packages
            .iter()
            .filter(|p| p.name != "nvidia-container-toolkit")
        {
            for pin in p.list("apt") {
                let (n, v) = pin.split_once('=').unwrap();
                match v.strip_suffix("+cuda13.0") {
                    Some(stem) => builds
                        .iter()
                        .for_each(|b| deb(&repo, n, &format!("{stem}+cuda{b}"))),
                    None => deb(&repo, n, v),
                }
            }
        }
        index_flat_apt(&repo);
    };
    publish(&["12.9", "13.2"]);
    let port = serve_dir(dir.clone());
    let text = format!(
        "{spec}[resolve]\napt = {{ \"https://developer.download.nvidia.com/compute/cuda/repos\" = \"http://127.0.0.1:{port}/cuda\" }}\n"
    );
    let http = Http::new(false);
    let (lock, _) = gpustack::lock_spec_resolved(&cat, "s", &text, &http, None)
        .unwrap_or_else(|e| panic!("{e}"));
    let nccl = lock.package("libnccl").unwrap();
    assert_eq!(nccl.get("apt-source"), Some("repository"));
    assert_eq!(
        nccl.list("apt"),
        [
            "libnccl2=2.29.7-1+cuda13.2",
            "libnccl-dev=2.29.7-1+cuda13.2"
        ]
    );
    let f = fact(&lock);
    assert_eq!(f.get("cuda"), Some("13.2"));
    assert_eq!(f.get("known"), Some("repository"));
    assert!(
        f.because
            .iter()
            .any(|b| b.contains("publishes NCCL 2.29.7 for CUDA 13.2")),
        "{:?}",
        f.because
    );
    assert!(!f.because.iter().any(|b| b.contains("UNVERIFIED")));
    assert!(lock.verify().is_empty());
    // The lock reads back as written, and every target installs the repository's build.
    let again = Lock::parse("gpustack.lock", &lock.to_toml()).unwrap();
    assert_eq!(fact(&again).get("cuda"), Some("13.2"));
    let rendered = gpustack::plan::generate_many(
        &lock,
        &[
            gpustack::plan::Target::Docker,
            gpustack::plan::Target::Packer,
        ],
    )
    .unwrap();
    let all: String = rendered
        .iter()
        .flat_map(|(_, files)| files.iter().map(|f| f.contents.clone()))
        .collect();
    assert!(all.contains("libnccl2=2.29.7-1+cuda13.2"));
    assert!(!all.contains("+cuda13.0"));
    assert!(!all
        .lines()
        .any(|l| l.contains("unverified") && l.contains("libnccl2")));

    // No build of CUDA 13 at all: the assumed pin is reported missing, with what exists.
    publish(&["12.9"]);
    let err = gpustack::lock_spec_resolved(&cat, "s", &text, &http, None).unwrap_err();
    assert!(
        err.to_string().contains("libnccl2=2.29.7-1+cuda13.0"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same on dnf: NCCL 2.24.3 has no CUDA build in the catalog; the Rocky repository
/// publishes `+cuda12.2` and `+cuda12.6`, and a CUDA 12.4 stack takes 12.6 (newer first).
#[test]
fn an_nccl_build_the_catalog_does_not_list_is_read_from_a_dnf_repository() {
    if !tools(&["rpmbuild", "createrepo_c"]) {
        return;
    }
    let dir = tmp("nccl-build-dnf");
    let cat = Catalog::stock().unwrap();
    let spec = "[stack]\nname = \"nccl-build\"\nos = \"rockylinux9\"\n[hardware]\ngpus = [\"h100\"]\n[components]\ncuda = \"12.4\"\nnccl = \"==2.24.3\"\n";
    let offline = gpustack::lock_spec(&cat, "s", spec).unwrap();
    let nccl_fact = |l: &Lock| {
        l.facts
            .iter()
            .find(|f| f.kind == "nccl-build")
            .cloned()
            .unwrap()
    };
    assert_eq!(nccl_fact(&offline).get("known"), Some("false"));
    let repo = dir.join("cuda/rhel9/x86_64");
    std::fs::create_dir_all(&repo).unwrap();
    let mut rpms: Vec<(String, String, String)> = Vec::new();
    for p in offline
        .packages
        .iter()
        .filter(|p| p.name != "nvidia-container-toolkit")
    {
        for x in p.list("dnf") {
            let at = x
                .find(&format!("-{}", p.version))
                .unwrap_or_else(|| panic!("{x}"));
            let rest = &x[at + 1 + p.version.len()..];
            let release = rest.strip_prefix('-').unwrap_or("1");
            let name = x[..at].to_string();
            match release.strip_suffix("+cuda12.4") {
                Some(r) => {
                    for b in ["12.2", "12.6"] {
                        rpms.push((name.clone(), p.version.clone(), format!("{r}+cuda{b}")));
                    }
                }
                None => rpms.push((name, p.version.clone(), release.to_string())),
            }
        }
    }
    dnf_repository(&dir, &repo, &rpms);
    let port = serve_dir(dir.clone());
    let text = format!(
        "{spec}[resolve]\ndnf = {{ \"https://developer.download.nvidia.com/compute/cuda/repos\" = \"http://127.0.0.1:{port}/cuda\" }}\n"
    );
    let (lock, _) = gpustack::lock_spec_resolved(&cat, "s", &text, &Http::new(false), None)
        .unwrap_or_else(|e| panic!("{e}"));
    let nccl = lock.package("libnccl").unwrap();
    assert_eq!(nccl.get("dnf-source"), Some("repository"));
    assert_eq!(
        nccl.list("dnf"),
        [
            "libnccl-2.24.3-1+cuda12.6",
            "libnccl-devel-2.24.3-1+cuda12.6"
        ]
    );
    let f = nccl_fact(&lock);
    assert_eq!(
        (f.get("cuda"), f.get("known")),
        (Some("12.6"), Some("repository"))
    );
    assert!(lock.verify().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Builds an empty noarch RPM per `(name, version, release)` into `repo` (work files under
/// `dir`) and indexes it with `createrepo_c`.
fn dnf_repository(dir: &Path, repo: &Path, rpms: &[(String, String, String)]) {
    for (i, (n, v, r)) in rpms.iter().enumerate() {
        let specfile = dir.join(format!("p{i}.spec"));
        std::fs::write(
            &specfile,
            format!("Name: {n}\nVersion: {v}\nRelease: {r}\nSummary: t\nLicense: MIT\nBuildArch: noarch\n%description\nt\n%files\n"),
        )
        .unwrap();
        sh(Command::new("rpmbuild")
            .arg("--define")
            .arg(format!("_topdir {}", dir.join("rpmbuild").display()))
            .arg("--define")
            .arg(format!("_rpmdir {}", repo.display()))
            .arg("-bb")
            .arg(&specfile)
            .stdout(Stdio::null()));
    }
    sh(Command::new("createrepo_c")
        .args(["--quiet", "--general-compress-type=gz"])
        .arg(repo));
}

/// Issue 32: a repository (or a mirror) publishing a version outside the Debian grammar,
/// here an epoch that is a shell command substitution, stops the lock with a named error
/// (`lock` fails; nothing of it is sealed into a lock). The repository is written by hand
/// (no packaging tools needed): a `Release` whose SHA256 list names the `Packages` file.
#[test]
fn an_apt_version_outside_the_debian_grammar_never_enters_the_lock() {
    let dir = tmp("apt-hostile");
    let cat = Catalog::stock().unwrap();
    let offline = gpustack::lock_spec(&cat, "s", SPEC).unwrap();
    let pin = offline.package("dcgm").unwrap().list("apt")[0].clone();
    let (name, version) = pin.split_once('=').unwrap();
    let upstream = version.rsplit_once(':').map_or(version, |(_, u)| u);
    let repo = dir.join("cuda/ubuntu2204/x86_64");
    std::fs::create_dir_all(&repo).unwrap();
    for evil in [
        format!("1$(touch /tmp/PWNED):{upstream}"),
        format!("{upstream}\u{1b}[2Jerror: forged"),
        format!("{upstream} ; id"),
    ] {
        let packages = format!("Package: {name}\nVersion: {evil}\nArchitecture: amd64\n\n");
        std::fs::write(repo.join("Packages"), &packages).unwrap();
        let digest = sha256_digest(packages.as_bytes());
        std::fs::write(
            repo.join("Release"),
            format!(
                "Origin: test\nSHA256:\n {} {} Packages\n",
                digest.trim_start_matches("sha256:"),
                packages.len()
            ),
        )
        .unwrap();
        let port = serve_dir(dir.clone());
        let text = spec_with(&format!(
            "apt = {{ \"https://developer.download.nvidia.com/compute/cuda/repos\" = \"http://127.0.0.1:{port}/cuda\" }}\n"
        ));
        let err = gpustack::lock_spec_resolved(&cat, "s", &text, &Http::new(false), None)
            .expect_err(&evil)
            .to_string();
        assert!(
            err.contains(&format!("package `{name}` has version `"))
                && err.contains("which is not a Debian version"),
            "{evil:?}: {err}"
        );
        // Printed safely: no escape sequence reaches the terminal raw.
        assert!(!err.contains('\u{1b}'), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 32: the same for a dnf repository whose `primary.xml` has a release with a
/// newline (`&#10;`) and an epoch that is a command substitution.
#[test]
fn a_dnf_version_outside_the_rpm_grammar_never_enters_the_lock() {
    let dir = tmp("dnf-hostile");
    let cat = Catalog::stock().unwrap();
    let spec = SPEC.replace("ubuntu22.04", "rockylinux9");
    let offline = gpustack::lock_spec(&cat, "s", &spec).unwrap();
    let fm = offline.package("nvidia-fabricmanager").unwrap();
    let pin = fm.list("dnf")[0].clone();
    let (name, ver) = pin.rsplit_once('-').unwrap();
    let repo = dir.join("cuda/rhel9/x86_64");
    std::fs::create_dir_all(repo.join("repodata")).unwrap();
    for (epoch, rel, what) in [
        ("0", "1&#10;error: forged", "release"),
        ("1$(touch /tmp/PWNED)", "1", "epoch"),
    ] {
        let primary = format!(
            "<?xml version=\"1.0\"?>\n<metadata xmlns=\"http://linux.duke.edu/metadata/common\" packages=\"1\"><package type=\"rpm\"><name>{name}</name><arch>x86_64</arch><version epoch=\"{epoch}\" ver=\"{ver}\" rel=\"{rel}\"/></package></metadata>\n"
        );
        std::fs::write(repo.join("repodata/primary.xml"), &primary).unwrap();
        std::fs::write(
            repo.join("repodata/repomd.xml"),
            format!(
                "<?xml version=\"1.0\"?>\n<repomd xmlns=\"http://linux.duke.edu/metadata/repo\"><data type=\"primary\"><checksum type=\"sha256\">{}</checksum><location href=\"repodata/primary.xml\"/></data></repomd>\n",
                sha256_digest(primary.as_bytes()).trim_start_matches("sha256:")
            ),
        )
        .unwrap();
        let port = serve_dir(dir.clone());
        let text = spec_with(&format!(
            "dnf = {{ \"https://developer.download.nvidia.com/compute/cuda/repos\" = \"http://127.0.0.1:{port}/cuda\" }}\n"
        ))
        .replace("ubuntu22.04", "rockylinux9");
        let err = gpustack::lock_spec_resolved(&cat, "s", &text, &Http::new(false), None)
            .expect_err(what)
            .to_string();
        assert!(
            err.contains(&format!("package `{name}` has {what} `"))
                && err.contains(&format!("which is not an RPM {what}")),
            "{what}: {err}"
        );
        assert!(!err.contains("\nerror: forged"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
