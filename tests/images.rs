//! Issue 15, "every external image reference by digest", held across every target: each
//! generated file of every example lock is scanned for image references (`FROM`, `From:`,
//! `COPY --from=`, `# syntax=`, `image:`, `docker://`, the GPU Operator's
//! `repository`/`image`/`version` triples, …). An external reference pinned by tag alone is
//! allowed only where the lock itself records no digest for it, and then `gpustack check`
//! warns; once the lock has digests (as `gpustack lock` resolves them from the registries),
//! none may be left.

mod common;

use common::*;
use gpustack::lock::Field;
use gpustack::plan::{generate_many, Target};
use gpustack::Lock;

/// Image references in a file: `(line, reference)`, the reference with its `@sha256:`
/// when it has one. Comments are skipped (nothing pulls them) except `# syntax=`, which
/// BuildKit does pull.
fn references(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let t = if let Some(rest) = t.strip_prefix("# syntax=") {
            rest
        } else if t.starts_with('#') || t.starts_with("//") {
            continue;
        } else {
            t
        };
        for tok in t.split(|c: char| {
            c.is_whitespace() || matches!(c, '"' | '\'' | '=' | ',' | '[' | ']' | '(' | ')' | '`')
        }) {
            let tok = tok.strip_prefix("docker://").unwrap_or(tok);
            let tok = tok.trim_end_matches(['.', ';', '\\']);
            if tok.contains("://") || tok.contains('$') || tok.contains('{') {
                continue;
            }
            let first = tok.chars().next().unwrap_or(' ');
            if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
                continue;
            }
            let name = tok.split('@').next().unwrap_or(tok);
            let Some(slash) = name.rfind('/') else {
                continue;
            };
            let Some(colon) = name[slash..].find(':').map(|c| slash + c) else {
                continue;
            };
            let (repo, tag) = (&name[..colon], &name[colon + 1..]);
            let repo_ok = repo
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-/".contains(c));
            let tag_ok = !tag.is_empty()
                && tag
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
            if repo_ok && tag_ok && !repo.contains("//") {
                out.push((i + 1, tok.to_string()));
            }
        }
    }
    out
}

/// The GPU Operator's component images in its Helm values: `(key, repository, image,
/// version)` for each top-level block that names an image.
fn operator_images(text: &str) -> Vec<(String, Option<String>, Option<String>, String)> {
    let doc = &yaml_rust2::YamlLoader::load_from_str(text).unwrap()[0];
    let mut out = Vec::new();
    for (k, v) in doc.as_hash().into_iter().flatten() {
        let get = |f: &str| v[f].as_str().map(str::to_string);
        if let Some(version) = get("version") {
            out.push((
                k.as_str().unwrap_or("").to_string(),
                get("repository"),
                get("image"),
                version,
            ));
        }
    }
    out
}

/// The lock's own images (the stack's layers, tagged by layer hash): content-addressed by
/// the lock, built from it, not pulled from elsewhere.
fn own_image(lock: &Lock, reference: &str) -> bool {
    let registry = lock
        .request
        .deploy
        .image
        .as_ref()
        .map_or("localhost/gpustack", |i| i.registry.as_str());
    reference.starts_with(&format!("{registry}/")) || reference.starts_with("localhost/gpustack/")
}

/// Every reference the lock records without a digest.
fn undigested(lock: &Lock) -> Vec<String> {
    let mut out = Vec::new();
    for (package, reference) in gpustack::resolve::image_references(lock) {
        let p = lock.package(&package).unwrap();
        let stems: Vec<&str> = p
            .fields
            .keys()
            .filter_map(|k| k.strip_suffix("-tag"))
            .filter(|s| *s != "image")
            .collect();
        let has = if p.get("image").is_some() && reference.starts_with(p.get("image").unwrap()) {
            p.get("image-digest").is_some()
        } else {
            stems.iter().any(|s| {
                p.get(&format!("{s}-tag"))
                    .is_some_and(|t| reference.ends_with(&format!(":{t}")))
                    && p.get(&format!("{s}-digest")).is_some()
            })
        };
        if !has {
            out.push(reference);
        }
    }
    out
}

/// The lock as `gpustack lock` writes it when every registry answered: a digest for every
/// image reference it names (a stand-in digest, sha256 of the reference).
fn with_digests(mut lock: Lock) -> Lock {
    use sha2::{Digest, Sha256};
    let fake = |r: &str| {
        let d = Sha256::digest(r.as_bytes());
        format!(
            "sha256:{}",
            d.iter().map(|b| format!("{b:02x}")).collect::<String>()
        )
    };
    for p in &mut lock.packages {
        let mut add = Vec::new();
        if let Some(repo) = p.get("repository") {
            for (k, v) in &p.fields {
                if let (Some(stem), Field::Str(tag)) = (k.strip_suffix("-tag"), v) {
                    if stem != "image" {
                        add.push((format!("{stem}-digest"), fake(&format!("{repo}:{tag}"))));
                    }
                }
            }
        }
        if let Some(image) = p.get("image") {
            add.push(("image-digest".to_string(), fake(image)));
        }
        for (k, v) in add {
            p.fields.insert(k, Field::Str(v));
        }
    }
    lock.rehash();
    lock
}

/// The GPU Operator component images the generated values leave to the chart or compose
/// from a version: the driver container of a Rocky Linux node (the operator appends the
/// node's OS to the version), whose tag the lock does not name, so no digest can be
/// rendered (the book's "Reproducible builds" chapter lists it). The Container Toolkit and
/// DCGM Exporter are named by the lock and pulled by digest where it has one.
const OPERATOR_TAG_ONLY: &[&str] = &["driver"];

fn scan(name: &str, lock: &Lock, allowed: &[String]) -> Vec<String> {
    let mut failures = Vec::new();
    let mut seen = 0;
    for (t, files) in generate_many(lock, &Target::ALL).unwrap() {
        for f in files {
            let path = format!("{name}/{}/{}", t.name(), f.path);
            for (line, r) in references(&f.contents) {
                seen += 1;
                if r.contains("@sha256:") || own_image(lock, &r) {
                    continue;
                }
                if !allowed
                    .iter()
                    .any(|a| a == &r || a.ends_with(&format!("/{r}")))
                {
                    failures.push(format!("{path}:{line}: `{r}` is pinned by tag only"));
                }
            }
            if f.path.ends_with("gpu-operator-values.yaml") {
                for (key, repo, image, version) in operator_images(&f.contents) {
                    if version.starts_with("sha256:") || OPERATOR_TAG_ONLY.contains(&key.as_str()) {
                        continue;
                    }
                    let r = format!(
                        "{}/{}:{version}",
                        repo.unwrap_or_default(),
                        image.unwrap_or_default()
                    );
                    if !allowed.contains(&r) {
                        failures.push(format!("{path}: operator `{key}` pulls `{r}` by tag only"));
                    }
                }
            }
        }
    }
    assert!(seen > 0, "{name}: no image reference found at all");
    failures
}

#[test]
fn no_external_image_is_pinned_by_tag_alone_where_the_lock_has_a_digest() {
    let mut failures = Vec::new();
    for name in example_names() {
        let text =
            std::fs::read_to_string(root().join("lockfiles").join(format!("{name}.lock"))).unwrap();
        let lock = Lock::parse("l", &text).unwrap();
        // As committed (offline, catalog digests only): tag-only references are exactly
        // those the lock records no digest for.
        let allowed = undigested(&lock);
        failures.extend(scan(&name, &lock, &allowed));
        // Resolved: every reference carries its digest.
        let resolved = with_digests(lock);
        assert!(undigested(&resolved).is_empty());
        failures.extend(scan(&format!("{name} (resolved)"), &resolved, &[]));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Where the lock records no digest, `gpustack check` says so.
#[test]
fn check_warns_about_every_reference_without_a_digest() {
    let dir = tempdir("images-check");
    let text = std::fs::read_to_string(root().join("lockfiles/h100-ib-train-serve.lock")).unwrap();
    let lock = Lock::parse("l", &text).unwrap();
    let missing = undigested(&lock);
    assert!(
        !missing.is_empty(),
        "the committed lock has catalog digests for every image"
    );
    std::fs::write(dir.join("gpustack.lock"), &text).unwrap();
    // `unpinned` is a catalog gap the user cannot act on: shown with --pedantic.
    let out = run_in(&dir, &["check", "--pedantic"]);
    for r in &missing {
        let package = gpustack::resolve::image_references(&lock)
            .into_iter()
            .find(|(_, x)| x == r)
            .unwrap()
            .0;
        assert!(
            out.stdout
                .contains(&format!("warning[unpinned]: {package} ")),
            "{package} ({r}):\n{}",
            out.stdout
        );
    }
}

/// A catalog overlay giving `image` entry of the stock catalog's `cuda`/`os` pair the
/// `[[image.digest]]` observations in `digests` (TOML text appended to the entry).
fn observed_catalog(cuda: &str, os: &str, tags: &[&str], digests: &str) -> gpustack::Catalog {
    let overlay = format!(
        "family = \"image\"\n[[image]]\ncuda = \"{cuda}\"\nos = \"{os}\"\ntags = [{}]\nstatus = \"supported\"\nsource = \"https://example.org/supported-tags.md\"\n{digests}",
        tags.iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    gpustack::Catalog::stock_with(&[vec![("overlay/images.toml".into(), overlay)]])
        .unwrap_or_else(|e| panic!("{e}"))
}

fn observation(tag: &str, hex: char, observed: &str, kind: &str) -> String {
    format!(
        "[[image.digest]]\ntag = \"{tag}\"\ndigest = \"sha256:{}\"\nobserved = \"{observed}\"\nsource = \"https://example.org/{observed}/Dockerfile\"\nkind = \"{kind}\"\n",
        hex.to_string().repeat(64)
    )
}

const OBSERVED_SPEC: &str = "[stack]\nname = \"observed\"\nos = \"ubuntu22.04\"\n[hardware]\ngpus = [\"a100\"]\n[components]\ntorch = \"*\"\n";

/// Offline, the base images are pinned by the catalog's newest observation that names the
/// multi-arch index (or may), never by a single platform's manifest; the lock says which
/// observation (date, kind, source), `gpustack lock` reports it, and the Dockerfile says
/// the digest was not read from the registry.
#[test]
fn an_offline_lock_pins_base_images_by_the_catalogs_dated_observation() {
    let stock = gpustack::lock_spec(catalog(), "s", OBSERVED_SPEC).unwrap();
    let cuda = stock.package("cuda-image").unwrap();
    let (runtime, devel) = (
        cuda.get("runtime-tag").unwrap().to_string(),
        cuda.get("devel-tag").unwrap().to_string(),
    );
    let version = cuda.version.clone();
    let digests = [
        observation(&devel, 'a', "2026-01-05", "index"),
        observation(&devel, 'b', "2026-03-01", "index"),
        // Newer, but one platform's manifest: a FROM by it pulls on amd64 only.
        observation(&devel, 'c', "2026-06-01", "manifest"),
        observation(&runtime, 'd', "2026-02-10", "unknown"),
    ]
    .concat();
    let cat = observed_catalog(&version, "ubuntu22.04", &[&runtime, &devel], &digests);
    let (lock, report) = gpustack::lock_spec_resolved(
        &cat,
        "s",
        OBSERVED_SPEC,
        &gpustack::resolve::http::Offline,
        None,
    )
    .unwrap();
    let cuda = lock.package("cuda-image").unwrap();
    let b = "b".repeat(64);
    let d = "d".repeat(64);
    assert_eq!(cuda.get("digest-source"), Some("catalog"));
    assert_eq!(
        cuda.get("devel-digest"),
        Some(format!("sha256:{b}").as_str())
    );
    assert_eq!(
        cuda.get("runtime-digest"),
        Some(format!("sha256:{d}").as_str())
    );
    let because = cuda.because.join("\n");
    assert!(
        because.contains(&format!(
            "`nvidia/cuda:{devel}`: catalog observation of 2026-03-01 (the multi-arch index), not read from the registry; source: https://example.org/2026-03-01/Dockerfile"
        )),
        "{because}"
    );
    assert!(
        because.contains(&format!(
            "`nvidia/cuda:{runtime}`: catalog observation of 2026-02-10 (index or platform manifest: the source does not say)"
        )),
        "{because}"
    );
    assert!(!because.contains("UNPINNED"), "{because}");
    // `gpustack lock` says where each digest came from.
    let fallback: Vec<&String> = report
        .fallback
        .iter()
        .filter(|(r, _)| r.starts_with("nvidia/cuda:"))
        .map(|(_, why)| why)
        .collect();
    assert_eq!(fallback.len(), 2, "{:?}", report.fallback);
    assert!(fallback
        .iter()
        .all(|w| w.starts_with("catalog observation of 2026-")));
    // The Dockerfile pulls by the observed digests and says they are observations.
    let files = gpustack::plan::generate_many(&lock, &[Target::Docker]).unwrap();
    let dockerfile = &files[0]
        .1
        .iter()
        .find(|f| f.path.ends_with("Dockerfile"))
        .unwrap()
        .contents;
    assert!(dockerfile.contains(&format!("FROM nvidia/cuda:{runtime}@sha256:{d} AS base")));
    assert!(dockerfile.contains(&format!("nvidia/cuda:{devel}@sha256:{b}")));
    assert!(
        dockerfile.contains("catalog observation of 2026-03-01"),
        "{dockerfile}"
    );
    assert!(!dockerfile.contains("pinned by tag only"), "{dockerfile}");
    assert!(lock.verify().is_empty());

    // With the stock catalog's entry the pair has no observation for one flavour at most:
    // what is unpinned is named.
    let only_devel = observed_catalog(
        &version,
        "ubuntu22.04",
        &[&runtime, &devel],
        &observation(&devel, 'b', "2026-03-01", "index"),
    );
    let (lock, report) = gpustack::lock_spec_resolved(
        &only_devel,
        "s",
        OBSERVED_SPEC,
        &gpustack::resolve::http::Offline,
        None,
    )
    .unwrap();
    let cuda = lock.package("cuda-image").unwrap();
    assert!(cuda.get("runtime-digest").is_none());
    // The observed flavour is pinned from the catalog, the other reported unpinned.
    assert_eq!(cuda.get("digest-source"), Some("catalog"));
    assert_eq!(
        cuda.get("devel-digest"),
        Some(format!("sha256:{b}").as_str())
    );
    let runtime_ref = format!("nvidia/cuda:{runtime}");
    let devel_ref = format!("nvidia/cuda:{devel}");
    assert!(
        report.unpinned.contains(&runtime_ref),
        "{:?}",
        report.unpinned
    );
    assert!(
        !report.unpinned.contains(&devel_ref),
        "{:?}",
        report.unpinned
    );
    assert!(
        report.fallback.iter().any(|(r, _)| *r == devel_ref),
        "{:?}",
        report.fallback
    );
    assert!(
        cuda.because.contains(&format!(
            "UNPINNED: the catalog knows no sourced digest for `{runtime}`"
        )),
        "{:?}",
        cuda.because
    );
}

/// The GPU Operator's Container Toolkit and DCGM Exporter come with NVIDIA's own digests
/// (the operator's OLM bundle), and the Helm values pull them by digest: the operator uses
/// `repository/image@version` for a `sha256:` version.
#[test]
fn operator_component_images_are_pinned_by_the_bundles_digests() {
    let lock = lock_of("h100-ib-train-serve");
    for (package, image, tag) in [
        (
            "nvidia-container-toolkit",
            "nvcr.io/nvidia/k8s/container-toolkit",
            "v1.20.0",
        ),
        (
            "dcgm-exporter",
            "nvcr.io/nvidia/k8s/dcgm-exporter",
            "4.6.0-4.8.3-distroless",
        ),
    ] {
        let p = lock.package(package).unwrap();
        assert_eq!(p.get("image"), Some(image), "{package}");
        assert_eq!(p.get("image-tag"), Some(tag), "{package}");
        assert_eq!(p.get("digest-source"), Some("catalog"), "{package}");
        let digest = p.get("image-digest").unwrap();
        assert!(
            p.because.iter().any(|b| b.starts_with(&format!(
                "`{image}:{tag}`: catalog observation of 2026-08-20 (the multi-arch index)"
            )) && b.contains("github.com/NVIDIA/gpu-operator/blob/")),
            "{package}: {:?}",
            p.because
        );
        let values = generate_many(&lock, &[Target::K8s]).unwrap()[0]
            .1
            .iter()
            .find(|f| f.path.ends_with("gpu-operator-values.yaml"))
            .unwrap()
            .contents
            .clone();
        let (repository, name) = image.rsplit_once('/').unwrap();
        let found = operator_images(&values).into_iter().any(|(_, r, i, v)| {
            r.as_deref() == Some(repository) && i.as_deref() == Some(name) && v == digest
        });
        assert!(found, "{package}: {values}");
    }
}

/// Each malformed observation is refused at its entry's line, with what is expected.
#[test]
fn digest_observations_are_validated() {
    let tag = "12.4.1-devel-ubuntu22.04";
    let good = observation(tag, 'a', "2026-01-05", "index");
    let cases = [
        (
            good.replace("2026-01-05\"", "2026-02-30\""),
            "is not a date",
        ),
        (good.replace("2026-01-05\"", "yesterday\""), "is not a date"),
        (
            good.replace("kind = \"index\"", "kind = \"list\""),
            "is not `index`, `manifest` or `unknown`",
        ),
        (
            good.replace(&"a".repeat(64), "abc"),
            "must be `sha256:<64 lowercase hex>`",
        ),
        (
            good.replace("https://example.org/2026-01-05", "http://example.org"),
            "must be an https URL",
        ),
        (
            good.replace(
                &format!("tag = \"{tag}\""),
                "tag = \"12.4.1-base-ubuntu22.04\"",
            ),
            "not one of the entry's tags",
        ),
        (
            format!("digests = [\"{tag}@sha256:{}\"]\n", "a".repeat(64)),
            "no longer read",
        ),
    ];
    for (digests, want) in cases {
        // `digests` (the old form) belongs to the entry, before the sub-tables.
        let overlay = format!(
            "family = \"image\"\n[[image]]\ncuda = \"12.4.1\"\nos = \"ubuntu22.04\"\ntags = [\"{tag}\"]\nstatus = \"supported\"\nsource = \"https://example.org/tags\"\n{digests}"
        );
        let e = gpustack::Catalog::stock_with(&[vec![("overlay/images.toml".into(), overlay)]])
            .err()
            .unwrap_or_else(|| panic!("accepted: {digests}"))
            .to_string();
        assert!(e.contains(want), "{want}: {e}");
        assert!(e.contains("overlay/images.toml:2"), "{e}");
    }
}

/// A Grace (aarch64) host pulls the arm64 image: only an observation known to name the
/// multi-arch index pins it; one of unknown kind may be an amd64 manifest and is not used.
#[test]
fn a_grace_host_is_pinned_only_by_an_observed_index() {
    let spec = OBSERVED_SPEC.replace("\"a100\"", "\"gh200\"");
    let stock = gpustack::lock_spec(catalog(), "s", &spec).unwrap();
    let cuda = stock.package("cuda-image").unwrap();
    let (runtime, devel) = (
        cuda.get("runtime-tag").unwrap().to_string(),
        cuda.get("devel-tag").unwrap().to_string(),
    );
    let digests = [
        observation(&devel, 'e', "2026-04-01", "index"),
        observation(&runtime, 'f', "2026-04-01", "unknown"),
    ]
    .concat();
    let cat = observed_catalog(&cuda.version, "ubuntu22.04", &[&runtime, &devel], &digests);
    let lock = gpustack::lock_spec(&cat, "s", &spec).unwrap();
    let cuda = lock.package("cuda-image").unwrap();
    assert_eq!(
        cuda.get("devel-digest"),
        Some(format!("sha256:{}", "e".repeat(64)).as_str())
    );
    assert!(cuda.get("runtime-digest").is_none(), "{:?}", cuda.fields);
    assert!(
        cuda.because.contains(&format!(
            "UNPINNED: the catalog knows no sourced digest for `{runtime}`"
        )),
        "{:?}",
        cuda.because
    );
}

/// The committed example locks (made offline) pin the base images the catalog has dated
/// observations for, from the catalog, and say which observation.
#[test]
fn committed_offline_locks_pin_observed_base_images_from_the_catalog() {
    let mut pinned = 0;
    for name in example_names() {
        let lock = lock_of(&name);
        let Some(cuda) = lock.package("cuda-image") else {
            continue;
        };
        let Some(image) = catalog().image(
            &gpustack::Version::parse(&cuda.version).unwrap(),
            cuda.get("os").unwrap(),
        ) else {
            continue;
        };
        let grace = lock.hardware.gpus.iter().any(|g| g.id.starts_with("gh"));
        for flavour in ["runtime", "devel"] {
            let tag = cuda.get(&format!("{flavour}-tag")).unwrap();
            let digest = cuda.get(&format!("{flavour}-digest"));
            match image
                .observation(tag)
                .filter(|o| !grace || o.kind == gpustack::catalog::DigestKind::Index)
            {
                Some(o) => {
                    pinned += 1;
                    assert_eq!(digest, Some(o.digest.as_str()), "{name} {tag}");
                    assert_eq!(cuda.get("digest-source"), Some("catalog"), "{name}");
                    let line =
                        format!("`nvidia/cuda:{tag}`: catalog observation of {}", o.observed);
                    assert!(
                        cuda.because
                            .iter()
                            .any(|b| b.starts_with(&line) && b.contains(&o.source)),
                        "{name}: {:?}",
                        cuda.because
                    );
                }
                None => assert_eq!(digest, None, "{name} {tag}"),
            }
        }
    }
    assert!(pinned > 0, "no example lock uses an observed tag");
}

/// A Rocky Linux node: the GPU Operator appends `rocky<major>` to the driver image's tag
/// (NVIDIA/gpu-operator `getOSTag` drops the minor for rocky, rhel and ol), and NVIDIA
/// publishes those images (GPU Operator v26.7.0 platform support: Rocky Linux 8.10, 9.7,
/// 10.1). The lock records the driver container by that tag for `gpustack lock` to read
/// its digest, the Helm values let the operator install the locked driver, and say the
/// tag is unpinned offline. With the driver installed on the hosts the operator installs
/// none (`driver.enabled: false`), as on Ubuntu.
#[test]
fn a_rocky_node_gets_the_operators_rocky_driver_container() {
    let spec = "[stack]\nname = \"rocky\"\nos = \"rockylinux9\"\n[hardware]\ngpus = [\"h100\"]\n[components]\ntorch = \"*\"\n";
    let lock = gpustack::lock_spec(catalog(), "s", spec).unwrap();
    let driver = lock.hardware.driver.to_string();
    let pkg = lock
        .package("gpu-operator-driver")
        .expect("driver container");
    assert_eq!(pkg.get("image"), Some("nvcr.io/nvidia/driver"));
    assert_eq!(
        pkg.get("image-tag"),
        Some(format!("{driver}-rocky9").as_str())
    );
    let values = |lock: &Lock| {
        let files = generate_many(lock, &[Target::K8s]).unwrap();
        files[0]
            .1
            .iter()
            .find(|f| f.path.ends_with("gpu-operator-values.yaml"))
            .unwrap()
            .contents
            .clone()
    };
    let text = values(&lock);
    let driver_block: String = text
        .split("\ndriver:\n")
        .nth(1)
        .and_then(|t| t.split("\ntoolkit:").next())
        .unwrap()
        .to_string();
    assert!(driver_block.contains("  enabled: true"), "{driver_block}");
    assert!(
        driver_block.contains(&format!("  version: \"{driver}\"")),
        "{driver_block}"
    );
    assert!(
        driver_block.contains(&format!(
            "`nvcr.io/nvidia/driver:{driver}-rocky9` is pinned by tag only"
        )),
        "{driver_block}"
    );
    assert!(
        !driver_block.contains("Ubuntu nodes only"),
        "{driver_block}"
    );

    // The driver on the hosts: no driver container, and the values say why.
    let installed = spec.replace(
        "gpus = [\"h100\"]",
        "gpus = [\"h100\"]\ndriver = \"580.178.04\"",
    );
    let lock = gpustack::lock_spec(catalog(), "s", &installed).unwrap();
    let text = values(&lock);
    assert!(text.contains("\n  enabled: false\n"), "{text}");
    assert!(
        text.contains("the operator must not install another"),
        "{text}"
    );
}

/// A spec for one H100 stack on `os` (none: the solver takes an Ubuntu), pinning CUDA to
/// `cuda`, with `driver` as the installed driver when given.
fn cuda_spec(os: Option<&str>, cuda: &str, driver: Option<&str>) -> String {
    let os = os.map(|o| format!("os = \"{o}\"\n")).unwrap_or_default();
    let driver = driver
        .map(|d| format!("driver = \"{d}\"\n"))
        .unwrap_or_default();
    format!(
        "[stack]\nname = \"cuda-x\"\n{os}[hardware]\ngpus = [\"h100\"]\n{driver}[components]\ncuda = \"{cuda}\"\n"
    )
}

/// Issue 33: CUDA 13.3 locks from NVIDIA's own tag lists at mirror commit 44b13941 (the
/// newest copy found), not from tags observed in public files: 13.3.1 is supported on
/// Ubuntu 22.04 and 24.04, 13.3.0 unsupported there. A pin to 13.3.0 still locks, its
/// runtime image pinned by the dated observation kept from public files.
#[test]
fn cuda_13_3_locks_from_nvidias_lists_at_the_newer_mirror_commit() {
    let at = "pranavmishra90/nvidia-container-images-cuda/blob/44b139413eb3dfcb3fc30d0868479deedce72255/doc/";
    for os in ["ubuntu24.04", "ubuntu22.04"] {
        let lock = gpustack::lock_spec(catalog(), "s", &cuda_spec(Some(os), "13.3", None))
            .unwrap_or_else(|e| panic!("{e}"));
        let cuda = lock.component(gpustack::Component::Cuda).unwrap();
        assert_eq!(cuda.version.to_string(), "13.3.1", "{os}");
        let image = lock.package("cuda-image").unwrap();
        assert_eq!(image.get("status"), Some("supported"), "{os}");
        assert_eq!(
            image.get("runtime-tag"),
            Some(format!("13.3.1-runtime-{os}").as_str())
        );
        assert!(
            image.source.contains(&format!("{at}supported-tags.md")),
            "{}",
            image.source
        );
    }
    // With no OS the newest Ubuntu with both tags serves it: 24.04.
    let lock = gpustack::lock_spec(catalog(), "s", &cuda_spec(None, "13.3.1", None))
        .unwrap_or_else(|e| panic!("{e}"));
    let image = lock.package("cuda-image").unwrap();
    assert_eq!(image.get("os"), Some("ubuntu24.04"));

    let lock = gpustack::lock_spec(
        catalog(),
        "s",
        &cuda_spec(Some("ubuntu24.04"), "13.3.0", None),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let image = lock.package("cuda-image").unwrap();
    assert_eq!(image.version, "13.3.0");
    assert_eq!(image.get("status"), Some("unsupported"));
    assert_eq!(
        image.get("runtime-digest"),
        Some("sha256:789e629e49401647e22b7054ae9c6c4f6427dba68010ba428deb4cc6b063676e")
    );
    assert!(image.get("devel-digest").is_none());
    assert!(
        image.source.contains(&format!("{at}unsupported-tags.md")),
        "{}",
        image.source
    );
    // The generators build on both tags.
    let files = generate_many(&lock, &[Target::Docker]).unwrap();
    let dockerfile = &files[0]
        .1
        .iter()
        .find(|f| f.path.ends_with("Dockerfile"))
        .unwrap()
        .contents;
    assert!(
        dockerfile.contains("FROM nvidia/cuda:13.3.0-runtime-ubuntu24.04@sha256:789e629e"),
        "{dockerfile}"
    );
    assert!(dockerfile.contains("nvidia/cuda:13.3.0-devel-ubuntu24.04"));
}

/// CUDA 13.4 is not locked from the stock catalog: it is newer than every copy of NVIDIA's
/// tag lists found, and its `[[no_image]]` entries say so; the refusal quotes the reason.
/// A site that mirrors the images adds the tags (an overlay), which settles the open gap:
/// then 13.4.1 locks through minor-version compatibility only, as its notes give no
/// full-support driver minimum, and a driver below R580 is refused saying so.
#[test]
fn cuda_13_4_is_refused_for_its_images_and_has_no_driver_minimum() {
    let e = gpustack::lock_spec(
        catalog(),
        "s",
        &cuda_spec(Some("ubuntu24.04"), "13.4", None),
    )
    .expect_err("13.4 has no runtime tag in the stock catalog")
    .to_string();
    for v in ["13.4.1", "13.4.2"] {
        assert!(
            e.contains(&format!("{v}: whether NVIDIA publishes `nvidia/cuda` images of CUDA {v} is not known (newer than every copy of NVIDIA's lists found; ")),
            "{e}"
        );
    }
    assert!(e.contains("os.cuda-images"), "{e}");
    let overlay = "family = \"image\"\n[[image]]\ncuda = \"13.4.1\"\nos = \"ubuntu24.04\"\ntags = [\"13.4.1-runtime-ubuntu24.04\", \"13.4.1-devel-ubuntu24.04\"]\nstatus = \"observed\"\nsource = \"https://example.org/site-mirror\"\n";
    let cat = gpustack::Catalog::stock_with(&[vec![("site/images.toml".into(), overlay.into())]])
        .unwrap();
    let lock = gpustack::lock_spec(&cat, "s", &cuda_spec(Some("ubuntu24.04"), "13.4", None))
        .unwrap_or_else(|e| panic!("{e}"));
    let cuda = lock.component(gpustack::Component::Cuda).unwrap();
    assert_eq!(cuda.version.to_string(), "13.4.1");
    assert_eq!(cuda.get("compat"), Some("minor-version"));
    // Tags observed in public files (not NVIDIA's lists): the lock says so.
    let image = lock.package("cuda-image").unwrap();
    assert_eq!(image.get("status"), Some("observed"));
    assert!(
        image
            .because
            .iter()
            .any(|b| b.contains("observed in public files")
                && b.contains("NVIDIA's support of them is not known")),
        "{:?}",
        image.because
    );
    assert!(cuda.get("driver-min").is_none(), "{:?}", cuda.fields);
    let e = gpustack::lock_spec(
        &cat,
        "s",
        &cuda_spec(Some("ubuntu24.04"), "13.4", Some("575.57.08")),
    )
    .expect_err("a driver below R580 runs no CUDA 13.4")
    .to_string();
    assert!(
        e.contains("CUDA 13.4.1 has no published full-support driver minimum"),
        "{e}"
    );
}

/// Issue 33, "every CUDA release in the catalog has its image tags": each release of
/// cuda.toml has runtime and devel tags on some OS, or a `[[no_image]]` entry with a source
/// saying NVIDIA published none or why it is an open gap. `catalog validate` fails
/// otherwise, naming the release, and the stock catalog's `unknown` entries are not stale.
#[test]
fn every_cuda_release_has_image_tags_or_says_why_not() {
    let cat = catalog();
    assert!(cat.coverage().is_empty(), "{:?}", cat.coverage());
    let gaps: Vec<String> = cat
        .no_images
        .iter()
        .map(|n| format!("{} {}", n.cuda, n.status.name()))
        .collect();
    assert_eq!(
        gaps,
        [
            "13.5.0 unknown",
            "13.4.2 unknown",
            "13.4.1 unknown",
            "13.2.2 unknown",
            "12.2.1 unpublished"
        ]
    );
    for n in &cat.no_images {
        assert!(
            !cat.images
                .iter()
                .any(|i| i.cuda == n.cuda && i.has_base_tags()),
            "CUDA {} has runtime and devel tags: drop its `[[no_image]]`",
            n.cuda
        );
        assert!(n.origin.source.contains("/blob/") || n.origin.source.contains("/commits/"));
        if n.status == gpustack::catalog::NoImageStatus::Unknown {
            assert!(n.note.is_some(), "{}", n.cuda);
        }
    }

    // A release with neither: validate names it and the way out.
    let dir = tempdir("no-image-gap");
    let overlay = dir.join("overlay");
    std::fs::create_dir_all(&overlay).unwrap();
    std::fs::write(
        overlay.join("cuda.toml"),
        "family = \"cuda\"\n[[release]]\nversion = \"13.5.1\"\nsource = \"https://example.org/notes\"\n",
    )
    .unwrap();
    let validate = || {
        run_in(
            &dir,
            &[
                "catalog",
                "validate",
                "--catalog",
                overlay.to_str().unwrap(),
            ],
        )
    };
    let out = validate();
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("CUDA `13.5.1` has no `nvidia/cuda` runtime and devel tags on any OS in images.toml, and no `[[no_image]]` entry saying why"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("cuda.toml:2"), "{}", out.stderr);
    // A statement settles it.
    std::fs::write(
        overlay.join("images.toml"),
        "family = \"image\"\n[[no_image]]\ncuda = \"13.5.1\"\nstatus = \"unknown\"\nsource = \"https://example.org/lists\"\nnote = \"newer than the lists\"\n",
    )
    .unwrap();
    let out = validate();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

/// `[[no_image]]` is checked where it is loaded: a listed release, a known status, a note
/// for `unknown`, no unknown field, and no tags for an `unpublished` release.
#[test]
fn no_image_entries_are_checked() {
    let load = |text: &str| {
        gpustack::Catalog::stock_with(&[vec![("site/images.toml".into(), text.into())]])
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    let e = load("family = \"image\"\n[[no_image]]\ncuda = \"9.9.9\"\nstatus = \"unpublished\"\nsource = \"https://example.org\"\n");
    assert!(
        e.contains("no_image for CUDA `9.9.9`, which `cuda.toml` does not list"),
        "{e}"
    );
    let e = load("family = \"image\"\n[[no_image]]\ncuda = \"12.2.1\"\nstatus = \"gone\"\nsource = \"https://example.org\"\n");
    assert!(
        e.contains("no_image status `gone` is not `unpublished` or `unknown`"),
        "{e}"
    );
    let e = load("family = \"image\"\n[[no_image]]\ncuda = \"12.2.1\"\nstatus = \"unknown\"\nsource = \"https://example.org\"\n");
    assert!(
        e.contains("no_image for CUDA `12.2.1` is `unknown` without a `note`"),
        "{e}"
    );
    let e = load("family = \"image\"\n[[no_image]]\ncuda = \"12.2.1\"\nstatus = \"unpublished\"\nsource = \"https://example.org\"\nwhy = \"x\"\n");
    assert!(e.contains("unknown field `why`"), "{e}");
    let e = load("family = \"image\"\n[[no_image]]\ncuda = \"12.4.1\"\nstatus = \"unpublished\"\nsource = \"https://example.org\"\n");
    assert!(
        e.contains("no_image says NVIDIA published no images of CUDA `12.4.1`, but images.toml has tags of it for"),
        "{e}"
    );
}

/// Rule `os.cuda-images` says why a release without tags is refused: NVIDIA published none,
/// per the cited lists.
#[test]
fn a_release_nvidia_never_imaged_is_refused_with_the_source() {
    let e = gpustack::lock_spec(catalog(), "s", &cuda_spec(None, "==12.2.1", None))
        .expect_err("12.2.1 has no images")
        .to_string();
    assert!(
        e.contains("NVIDIA published no `nvidia/cuda` images of CUDA 12.2.1: its tag lists (supported and unsupported) at the cited commit, which list later releases, have no tag of it"),
        "{e}"
    );
    assert!(
        e.contains("nvidia-container-images-cuda/commits/60a1c892"),
        "{e}"
    );
}

/// Rule `cuda.redist-only`: no release of the stock catalog is `redist_only` (12.8.2,
/// 12.9.2, 13.0.3 and 13.1.2 are updates of their own and lock), but a release an overlay
/// marks so (what `catalog import redist` writes for a manifest release the catalog lacks)
/// is refused by name, with the update before it as the nearest that works.
#[test]
fn a_redist_only_release_is_never_locked() {
    let cat = gpustack::Catalog::stock().unwrap();
    let respins = ["12.8.2", "12.9.2", "13.0.3", "13.1.2"];
    for c in &cat.cuda {
        assert!(!c.redist_only, "CUDA {} is `redist_only`", c.version);
        if respins.contains(&c.version.to_string().as_str()) {
            assert!(
                c.driver_min.is_some(),
                "CUDA {} has no driver_min",
                c.version
            );
        }
    }
    let dir = tempdir("redist-only");
    let site = dir.join("site");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(
        site.join("cuda.toml"),
        "family = \"cuda\"\n[[release]]\nversion = \"12.8.2\"\nredist_only = true\nsource = \"https://example.org/redistrib_12.8.2.json\"\n",
    )
    .unwrap();
    let spec = "[stack]\nname = \"cuda-1282\"\n[hardware]\ngpus = [\"h100\"]\n[components]\ncuda = \"==12.8.2\"\n";
    std::fs::write(dir.join("spec.toml"), spec).unwrap();
    let out = run_in(
        &dir,
        &[
            "lock",
            "--spec",
            "spec.toml",
            "--catalog",
            site.to_str().unwrap(),
            "--out",
            "-",
        ],
    );
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("CUDA 12.8.2 is known only from NVIDIA's redistrib manifest")
            && out.stderr.contains("rule `cuda.redist-only`")
            && out
                .stderr
                .contains("the nearest CUDA the catalog has, 12.8.1, works"),
        "{}",
        out.stderr
    );
    // Without the overlay the same request locks 12.8.2.
    let out = run_in(&dir, &["lock", "--spec", "spec.toml", "--out", "-"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("version = \"12.8.2\""),
        "{}",
        out.stdout
    );
}
