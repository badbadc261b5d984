//! Validating the generator-side families: images, packages, instances, clouds,
//! bandwidth figures and the NCCL environment.

use std::collections::{BTreeMap, BTreeSet};

use super::env_names;
use super::model::*;
use super::validate::{is_sha256_hex, safe_url, safe_word, valid_id, V};
use super::wire::*;
use crate::core::version::{Version, VersionReq};
use crate::core::Component;

pub(super) struct DeployLayers {
    pub(super) image: BTreeMap<String, (ImageWire, Origin)>,
    pub(super) no_image: BTreeMap<String, (NoImageWire, Origin)>,
    pub(super) package: BTreeMap<String, (PackageWire, Origin)>,
    pub(super) instance: BTreeMap<String, (InstanceWire, Origin)>,
    pub(super) cloud: BTreeMap<String, (CloudWire, Origin)>,
    pub(super) bandwidth: BTreeMap<String, (BandwidthWire, Origin)>,
    pub(super) env: BTreeMap<String, (EnvWire, Origin)>,
}

/// The generator-side families: images, packages, instances, clouds, bandwidth, and the
/// NCCL environment (validated first).
pub(super) fn build_deploy(v: &mut V<'_>, c: &mut Catalog, l: DeployLayers) {
    env_vars(v, c, l.env);
    images(v, c, l.image);
    no_images(v, c, l.no_image);
    packages(v, c, l.package);
    instances(v, c, l.instance);
    clouds(v, c, l.cloud);
    bandwidth(v, c, l.bandwidth);
}

/// `[[env]]`: variables NCCL jobs on a fabric set, each one a documented name.
fn env_vars(v: &mut V<'_>, c: &mut Catalog, env: BTreeMap<String, (EnvWire, Origin)>) {
    for (_, (e, o)) in env {
        v.source(&o);
        if e.fabric != "all" && (!FABRICS.contains(&e.fabric.as_str()) || e.fabric == "nvlink") {
            v.fail(
                &o,
                format!(
                    "env fabric `{}` is not `all` or a `[cluster].fabric`",
                    e.fabric
                ),
            );
            continue;
        }
        let name_ok = e
            .name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_uppercase() || b == b'_')
            // Lower case after the first letter: Open MPI's and PMIx's MCA parameters
            // (`OMPI_MCA_btl`, `PMIX_MCA_psec`) are spelled so.
            && e.name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !name_ok {
            v.fail(
                &o,
                format!(
                    "`{}` is not an environment variable name ([A-Z_][A-Za-z0-9_]*)",
                    e.name
                ),
            );
            continue;
        }
        if !env_names::allowed(&e.name) {
            let mut hint = "an `[[env]]` entry may set the NCCL, libfabric, UCX, CUDA and PyTorch NCCL variables those projects document (the list, with sources, is in the book's catalog chapter); set others in the site's own image or job script".to_string();
            if let Some(s) = crate::core::names::did_you_mean(
                &e.name,
                env_names::ALLOWED.iter().map(|(n, _)| *n),
            ) {
                hint = format!("did you mean `{s}`? {hint}");
            }
            v.fail_hint(
                &o,
                format!("`{}` is not an environment variable gpustack sets", e.name),
                hint,
            );
            continue;
        }
        if e.value.len() > 200
            || e.value
                .chars()
                .any(|ch| ch.is_control() || matches!(ch, '"' | '\\' | '$' | '`' | '\''))
        {
            v.fail(&o, format!("value of `{}` may not hold quotes, `$`, backquotes, backslashes or control characters", e.name));
            continue;
        }
        c.env.push(EnvVar {
            fabric: e.fabric.clone(),
            name: e.name.clone(),
            value: e.value.clone(),
            origin: o,
        });
    }
}

/// `nvidia/cuda` base images of a CUDA release on an OS, with their tags and digests.
fn images(v: &mut V<'_>, c: &mut Catalog, image: BTreeMap<String, (ImageWire, Origin)>) {
    let cuda_releases: BTreeSet<&Version> = c.cuda.iter().map(|r| &r.version).collect();
    for (_, (i, o)) in image {
        v.source(&o);
        let Some(cuda) = v.version(&o, "cuda", &i.cuda) else {
            continue;
        };
        if !cuda_releases.contains(&cuda) {
            v.fail(
                &o,
                format!("image for CUDA `{cuda}`, which `cuda.toml` does not list"),
            );
        }
        if !c.os.iter().any(|x| x.id == i.os) {
            v.fail(
                &o,
                format!("image for OS `{}`, which `os.toml` does not list", i.os),
            );
        }
        let Some(status) = ImageStatus::parse(&i.status) else {
            v.fail(
                &o,
                format!(
                    "image status `{}` is not `supported`, `unsupported` or `observed`",
                    i.status
                ),
            );
            continue;
        };
        for t in &i.tags {
            if !safe_word(t) || !t.starts_with(&i.cuda) || !t.ends_with(&i.os) {
                v.fail(
                    &o,
                    format!("tag `{t}` must be `{}-<flavour>-{}`", i.cuda, i.os),
                );
            }
        }
        if let Some(d) = i.digests.first() {
            v.fail_hint(
                &o,
                format!("`digests = [\"{d}\", …]` has no date or source: it is no longer read"),
                "write each as `[[image.digest]]` with `tag`, `digest`, `observed` (YYYY-MM-DD), `source` and `kind`".into(),
            );
        }
        let mut digests = Vec::new();
        for d in &i.digest {
            if !i.tags.contains(&d.tag) {
                v.fail(
                    &o,
                    format!(
                        "digest for `{}`, which is not one of the entry's tags",
                        d.tag
                    ),
                );
                continue;
            }
            digests.extend(v.observation(&o, &d.tag, &d.digest, &d.observed, &d.source, &d.kind));
        }
        let cudnn = i.cudnn.as_deref().and_then(|s| v.version(&o, "cudnn", s));
        c.images.push(BaseImage {
            cuda,
            os: i.os.clone(),
            tags: i.tags.clone(),
            status,
            cudnn,
            digests,
            origin: o,
        });
    }
    c.images
        .sort_by(|a, b| b.cuda.cmp(&a.cuda).then_with(|| a.os.cmp(&b.os)));
}

/// `[[no_image]]`: a CUDA release `cuda.toml` lists, `unpublished` or `unknown`, a source,
/// and for `unknown` the reason. An `unpublished` release has no `[[image]]` entry; tags an
/// overlay records for an `unknown` one settle it (the rule reads the tags first), and the
/// stock catalog's own are checked by a test.
fn no_images(v: &mut V<'_>, c: &mut Catalog, no_image: BTreeMap<String, (NoImageWire, Origin)>) {
    for (_, (n, o)) in no_image {
        v.source(&o);
        let Some(cuda) = v.version(&o, "cuda", &n.cuda) else {
            continue;
        };
        if !c.cuda.iter().any(|r| r.version == cuda) {
            v.fail(
                &o,
                format!("no_image for CUDA `{cuda}`, which `cuda.toml` does not list"),
            );
        }
        let Some(status) = NoImageStatus::parse(&n.status) else {
            v.fail(
                &o,
                format!(
                    "no_image status `{}` is not `unpublished` or `unknown`",
                    n.status
                ),
            );
            continue;
        };
        let note = n.note.clone().filter(|s| !s.trim().is_empty());
        if status == NoImageStatus::Unknown && note.is_none() {
            v.fail_hint(
                &o,
                format!("no_image for CUDA `{cuda}` is `unknown` without a `note`"),
                "say why it is an open gap: which public copy of NVIDIA's tag lists is the newest found, and why it does not settle the release".into(),
            );
        }
        if status == NoImageStatus::Unpublished {
            if let Some(i) = c.images.iter().find(|i| i.cuda == cuda) {
                v.fail_hint(
                    &o,
                    format!(
                        "no_image says NVIDIA published no images of CUDA `{cuda}`, but images.toml has tags of it for {} ({}:{})",
                        i.os, i.origin.file, i.origin.line
                    ),
                    "correct one of them: drop the `[[no_image]]` entry, or the `[[image]]` entry".into(),
                );
            }
        }
        c.no_images.push(NoImage {
            cuda,
            status,
            note,
            origin: o,
        });
    }
    c.no_images.sort_by(|a, b| b.cuda.cmp(&a.cuda));
}

/// Fabric, MPI and cluster packages, by name and newest first.
fn packages(v: &mut V<'_>, c: &mut Catalog, package: BTreeMap<String, (PackageWire, Origin)>) {
    for (_, (p, o)) in package {
        v.source(&o);
        if let Some(p) = one_package(v, c, &p, o) {
            c.packages.push(p);
        }
    }
    c.packages.sort_by(|a, b| {
        a.name
            .cmp(&b.name)
            .then_with(|| b.order.cmp(&a.order))
            .then_with(|| a.variant.cmp(&b.variant))
    });
}

/// One package entry; none when it cannot be used (each problem reported).
fn one_package(v: &mut V<'_>, c: &Catalog, p: &PackageWire, o: Origin) -> Option<Package> {
    if !valid_id(&p.name) {
        v.fail(
            &o,
            format!("package name `{}` must match [a-z0-9][a-z0-9-]*", p.name),
        );
        return None;
    }
    let (follows, follows_versions) = follows(v, p, &o)?;
    let order = if p.nvswitch_generation.is_some() {
        host_requirement(v, c, p, &o, follows.is_some())?;
        None
    } else {
        if !p.kernel_modules.is_empty() || p.os_release {
            v.fail(
                &o,
                format!(
                    "package `{}`: `kernel_modules` and `os_release` describe a host requirement, which needs `nvswitch_generation`",
                    p.name
                ),
            );
            return None;
        }
        package_order(v, p, &o, follows.is_some())?
    };
    check_package_refs(v, p, &o);
    Some(Package {
        name: p.name.clone(),
        version: p.version.clone(),
        order,
        variant: p.variant.clone(),
        url: p.url.clone(),
        sha256: p.sha256.clone(),
        commit: p.commit.clone(),
        apt_packages: p.apt_packages.clone(),
        apt_pin: p.apt_pin.clone(),
        dnf_packages: p.dnf_packages.clone(),
        image: p.image.clone(),
        image_digest: p.image_digest.clone(),
        image_observation: image_observation(v, p, &o),
        image_tags: p.image_tags.clone(),
        minimum_safe: p.minimum_safe,
        follows_driver: follows == Some(Component::Driver),
        follows: follows.map(|c| (c, follows_versions)),
        requires: p.requires.clone(),
        nvswitch_generation: p.nvswitch_generation,
        kernel_modules: p.kernel_modules.clone(),
        os_release: p.os_release,
        note: p.note.clone(),
        origin: o,
    })
}

/// A host requirement of an NVSwitch generation: unpinned OS packages (no `version`, no
/// `name=version`) and kernel modules, for a generation some GPU in `gpus.toml` has.
fn host_requirement(
    v: &mut V<'_>,
    c: &Catalog,
    p: &PackageWire,
    o: &Origin,
    follows: bool,
) -> Option<()> {
    let n = p.nvswitch_generation?;
    let name = &p.name;
    if p.version.is_some() || follows {
        v.fail(
            o,
            format!("package `{name}`: a host requirement (`nvswitch_generation`) is unpinned; it takes no `version` or `follows`"),
        );
        return None;
    }
    if !c.gpus.iter().any(|g| g.nvswitch_generation == Some(n)) {
        v.fail(
            o,
            format!("package `{name}`: no GPU in `gpus.toml` has `nvswitch_generation = {n}`"),
        );
        return None;
    }
    if p.apt_packages.is_empty() != p.dnf_packages.is_empty() {
        v.fail(
            o,
            format!("package `{name}`: a host requirement names its packages for both apt and dnf (`apt_packages`, `dnf_packages`)"),
        );
        return None;
    }
    if p.apt_packages.is_empty() && p.kernel_modules.is_empty() {
        v.fail(
            o,
            format!("package `{name}`: a host requirement names packages or `kernel_modules`"),
        );
        return None;
    }
    let os_package = |x: &String| {
        x.len() > 1
            && x.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && x.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+.-_".contains(&b))
            // No `-<version>` field (dnf's `name-version` form): 1.2, 2025.10.12.
            && !x
                .split('-')
                .skip(1)
                .any(|f| f.starts_with(|c: char| c.is_ascii_digit()) && f.contains('.'))
    };
    if let Some(x) = p
        .apt_packages
        .iter()
        .chain(&p.dnf_packages)
        .find(|x| !os_package(x))
    {
        v.fail(
            o,
            format!("package `{name}`: `{x}` is not a bare package name (a host requirement is unpinned: no `=version` or `-version`)"),
        );
        return None;
    }
    if let Some(m) = p.kernel_modules.iter().find(|m| {
        m.is_empty()
            || !m
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    }) {
        v.fail(
            o,
            format!("package `{name}`: kernel module `{m}` must match [a-z0-9_]+"),
        );
        return None;
    }
    Some(())
}

/// The dated observation behind a package's `image_digest`, when the entry dates it
/// (`image_digest_observed`; the source defaults to the entry's, the kind to `unknown`).
fn image_observation(v: &mut V<'_>, p: &PackageWire, o: &Origin) -> Option<DigestObservation> {
    let (digest, observed) = (p.image_digest.as_ref()?, p.image_digest_observed.as_ref()?);
    let tag = p
        .image_tags
        .iter()
        .find(|t| t.ends_with("-distroless"))
        .or(p.image_tags.first())
        .or(p.version.as_ref())?;
    v.observation(
        o,
        tag,
        digest,
        observed,
        p.image_digest_source.as_deref().unwrap_or(&o.source),
        p.image_digest_kind.as_deref().unwrap_or("unknown"),
    )
}

/// The locked component a package follows (with the versions it applies to), if any.
fn follows(v: &mut V<'_>, p: &PackageWire, o: &Origin) -> Option<(Option<Component>, VersionReq)> {
    let follows = match (p.follows.as_deref(), p.follows_driver) {
        (None, false) => None,
        (None, true) | (Some("driver"), _) => Some(Component::Driver),
        (Some("cuda"), false) => Some(Component::Cuda),
        (Some("cudnn"), false) => Some(Component::Cudnn),
        (Some("nccl"), false) => Some(Component::Nccl),
        (Some(other), _) => {
            v.fail(
                o,
                format!(
                    "package `{}`: `follows = \"{other}\"` must be `driver`, `cuda`, `cudnn` or `nccl`{}",
                    p.name,
                    if p.follows_driver { " (and `follows_driver` then left out)" } else { "" }
                ),
            );
            return None;
        }
    };
    let follows_versions = match (&p.follows_versions, follows) {
        (None, _) => VersionReq::any(),
        (Some(r), Some(_)) => match VersionReq::parse(r) {
            Ok(r) => r,
            Err(e) => {
                v.fail(o, format!("follows_versions `{r}`: {e}"));
                return None;
            }
        },
        (Some(_), None) => {
            v.fail(o, "`follows_versions` needs `follows`".into());
            return None;
        }
    };
    Some((follows, follows_versions))
}

/// The version a package sorts by: its own (a pin), or none when it follows a component.
fn package_order(
    v: &mut V<'_>,
    p: &PackageWire,
    o: &Origin,
    follows: bool,
) -> Option<Option<Version>> {
    let order = match (&p.version, follows) {
        (Some(ver), false) => {
            if !safe_word(ver) {
                v.fail(
                    o,
                    format!("package version `{ver}` has characters a pin cannot hold"),
                );
                return None;
            }
            Version::parse(ver).ok()
        }
        (None, true) => None,
        (Some(_), true) => {
            v.fail(
                o,
                format!(
                    "package `{}` follows a locked component; it takes no `version`",
                    p.name
                ),
            );
            return None;
        }
        (None, false) => {
            v.fail(
                o,
                format!(
                    "package `{}` needs a `version` (or `follows_driver = true`)",
                    p.name
                ),
            );
            return None;
        }
    };
    Some(order)
}

/// What a package's URL, hash, image and pins may hold.
fn check_package_refs(v: &mut V<'_>, p: &PackageWire, o: &Origin) {
    if let Some(h) = &p.sha256 {
        if !is_sha256_hex(h) {
            v.fail(o, format!("sha256 `{h}` must be 64 lowercase hex digits"));
        }
        if p.url.is_none() {
            v.fail(o, "a `sha256` needs the `url` it verifies".into());
        }
    }
    if let Some(c) = &p.commit {
        if c.len() != 40 || !c.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            v.fail(o, format!("commit `{c}` must be 40 lowercase hex digits"));
        }
        if p.sha256.is_some() || !p.url.as_deref().is_some_and(|u| u.starts_with("https://")) {
            v.fail(
                o,
                "a `commit` pins a git repository: it needs an https `url` of the repository and no `sha256`".into(),
            );
        }
    }
    if let Some(d) = &p.image_digest {
        if !d.strip_prefix("sha256:").is_some_and(is_sha256_hex) || p.image.is_none() {
            v.fail(
                o,
                format!(
                    "image_digest `{d}` must be `sha256:<64 lowercase hex>` next to an `image`"
                ),
            );
        }
    } else if p.image_digest_observed.is_some()
        || p.image_digest_source.is_some()
        || p.image_digest_kind.is_some()
    {
        v.fail(
            o,
            "`image_digest_observed`, `_source` and `_kind` describe an `image_digest`, which the entry lacks".into(),
        );
    }
    if let Some(u) = &p.url {
        if !safe_url(u) {
            v.fail(
                o,
                format!("url `{u}` must be https:// and hold no quotes, spaces or `$`"),
            );
        }
    }
    for x in p
        .apt_packages
        .iter()
        .chain(&p.dnf_packages)
        .chain(p.apt_pin.iter())
        .chain(p.variant.iter())
        .chain(p.image.iter())
        .chain(&p.image_tags)
    {
        if !safe_word(x) {
            v.fail(o, format!("`{x}` has characters a package pin cannot hold"));
        }
    }
}

/// Cloud instance types of a GPU the catalog knows.
fn instances(v: &mut V<'_>, c: &mut Catalog, instance: BTreeMap<String, (InstanceWire, Origin)>) {
    let gpu_known = |c: &Catalog, id: &str| c.gpus.iter().any(|g| g.id == id);
    for (_, (i, o)) in instance {
        v.source(&o);
        if !gpu_known(c, &i.gpu) {
            v.fail(
                &o,
                format!(
                    "instance for GPU `{}`, which `gpus.toml` does not list",
                    i.gpu
                ),
            );
        }
        if !matches!(i.cloud.as_str(), "aws" | "gcp" | "azure") {
            v.fail(
                &o,
                format!("cloud `{}` is not one of `aws`, `gcp`, `azure`", i.cloud),
            );
            continue;
        }
        for x in i.instance_type.iter().chain(i.accelerator_type.iter()) {
            if !safe_word(x) {
                v.fail(
                    &o,
                    format!("`{x}` is not a plain instance or accelerator type"),
                );
            }
        }
        c.instances.push(Instance {
            gpu: i.gpu.clone(),
            cloud: i.cloud.clone(),
            instance_type: i.instance_type.clone(),
            gpus: i.gpus,
            accelerator_type: i.accelerator_type.clone(),
            origin: o,
        });
    }
}

/// Per-cloud settings.
fn clouds(v: &mut V<'_>, c: &mut Catalog, cloud: BTreeMap<String, (CloudWire, Origin)>) {
    for (_, (x, o)) in cloud {
        v.source(&o);
        if let Some(m) = &x.on_host_maintenance {
            if !matches!(m.as_str(), "TERMINATE" | "MIGRATE") {
                v.fail(
                    &o,
                    format!("on_host_maintenance `{m}` is not `TERMINATE` or `MIGRATE`"),
                );
            }
        }
        c.clouds.push(CloudSettings {
            id: x.id.clone(),
            on_host_maintenance: x.on_host_maintenance.clone(),
            origin: o,
        });
    }
}

/// Published nccl-tests bus bandwidth figures.
fn bandwidth(v: &mut V<'_>, c: &mut Catalog, bandwidth: BTreeMap<String, (BandwidthWire, Origin)>) {
    let gpu_known = |c: &Catalog, id: &str| c.gpus.iter().any(|g| g.id == id);
    for (_, (b, o)) in bandwidth {
        v.source(&o);
        if !gpu_known(c, &b.gpu) {
            v.fail(
                &o,
                format!(
                    "bandwidth for GPU `{}`, which `gpus.toml` does not list",
                    b.gpu
                ),
            );
        }
        if !FABRICS.contains(&b.fabric.as_str()) {
            v.fail(
                &o,
                format!("fabric `{}` is not one of {}", b.fabric, FABRICS.join(", ")),
            );
        }
        let numeric = !b.busbw_gbps.is_empty()
            && b.busbw_gbps
                .bytes()
                .all(|x| x.is_ascii_digit() || x == b'.')
            && b.busbw_gbps.parse::<f64>().is_ok();
        if !numeric {
            v.fail(
                &o,
                format!(
                    "busbw_gbps `{}` must be a decimal number in text, like \"478.87\"",
                    b.busbw_gbps
                ),
            );
        }
        // The benchmark program comes first (`all_reduce_perf (NCCL_ALGO=RING)`): the
        // acceptance jobs judge a figure by the program that measured it.
        let program = b.test.split_whitespace().next().unwrap_or("");
        let program_ok = b.test.starts_with(program)
            && !program.is_empty()
            && program
                .bytes()
                .all(|x| x.is_ascii_alphanumeric() || b"._-".contains(&x));
        if !program_ok
            || b.test.chars().any(char::is_control)
            || b.size.as_deref().is_some_and(|s| !safe_word(s))
            || b.nodes == 0
            || b.gpus_per_node == 0
        {
            v.fail(&o, "bandwidth `test` must be one line starting with the benchmark's program name (letters, digits, `._-`), `size` a plain word, and the job shape positive counts".into());
        }
        if b.sharp.is_some() && b.fabric != "infiniband" {
            v.fail(
                &o,
                format!(
                    "`sharp` describes InfiniBand runs, not fabric `{}`",
                    b.fabric
                ),
            );
        }
        c.bandwidth.push(Bandwidth {
            sharp: b.sharp,
            gpu: b.gpu.clone(),
            fabric: b.fabric.clone(),
            test: b.test.clone(),
            size: b.size.clone(),
            busbw_gbps: b.busbw_gbps.clone(),
            nodes: b.nodes,
            gpus_per_node: b.gpus_per_node,
            origin: o,
        });
    }
}
