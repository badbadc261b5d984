//! Deployment picks: the packages and facts the generators need, chosen from the catalog
//! for a resolution and the spec's deployment tables, so that `plan` never reads the
//! catalog.
//!
//! The solver decides the version matrix (driver … DeepSpeed); what is chosen here depends
//! only on that result and has no alternatives to weigh against each other, so it is a
//! plain selection with documented rules, each recorded in the package's `because`:
//!
//! * **`cuda-image`** (layer `base`): the `nvidia/cuda` tags for the locked CUDA release on
//!   the requested OS; with no OS requested, the newest Ubuntu that has tags for it.
//!   Digests only where the catalog has a source for them.
//! * **Fabric stack** (layer `base`), by `[cluster].fabric`: InfiniBand and RoCE get
//!   GDRCopy, UCX and Open MPI (in build order: UCX uses GDRCopy and the distribution's
//!   rdma-core); EFA gets AWS's EFA installer and aws-ofi-nccl; Slingshot gets the CXI stack
//!   as the Alps images build it (Cassini and CXI UAPI headers, libcxi, GDRCopy, XPMEM,
//!   libfabric with CXI, UCX, UCC, Open MPI, aws-ofi-nccl, OSU micro-benchmarks); Ethernet gets Open MPI. Each package at its newest catalog version whose
//!   download or image has a published digest (the newest version otherwise, marked unverified).
//! * **`nccl-tests`** (layer `validate`): same rule; the acceptance test of every target.
//! * **Host packages** (layer `host`, VM images and the GPU Operator only): the NVIDIA
//!   Container Toolkit at its newest version (never below the catalog's minimum safe one);
//!   the newest DCGM Exporter whose DCGM the catalog has package pins for, and that DCGM;
//!   Fabric Manager at exactly the locked driver when a locked GPU sits on NVSwitch, and
//!   the host requirements of its NVSwitch generation (`nvswitch_generation`; generation
//!   4: NVLSM, libibumad3/infiniband-diags and the `ib_umad` module), unpinned, by name.
//! * **The stack's own OS packages** (NVIDIA's CUDA repository): the driver in both
//!   kernel-module flavours and the CUDA toolkit and cuDNN (layer `host`), NCCL at the
//!   nccl-build fact's CUDA build (layer `base`), from the catalog's naming rules
//!   (`follows`), in the lock OS's package manager; `src/resolve` reads the real strings.
//! * **Fabric environment**: the variables the catalog's `env` family lists for
//!   `[cluster].fabric`, then those listed for `all` fabrics (a fabric's own value wins).
//! * **Facts**: the instance type per `[packer].clouds` cloud for the first GPU (the one
//!   whose GPU count per instance equals `[cluster].gpus_per_node`, else the largest), the
//!   per-cloud settings, and the expected nccl-tests bus bandwidth inside a node (NVLink)
//!   and across nodes (the cluster's fabric): the figure for the same GPUs per node, nearest
//!   node count, stated message size preferred, lowest figure last (a conservative floor);
//!   where the acceptance test runs OSU (a multi-node Slingshot cluster), the `osu_bw`
//!   figure for the GPU and fabric, one rank on each of two nodes, as its own fact.

use std::collections::BTreeMap;

use crate::catalog::{Catalog, DigestKind, DigestObservation, ImageStatus, Origin, Package};
use crate::core::version::Version;
use crate::core::Fabric;
use crate::core::{Component, Field, Layer};
use crate::error::{Diagnostic, Error, Stage};
use crate::solve::Resolution;

/// Packages and facts for a resolution, and the catalog entries they used: what the lock
/// records as `[[package]]` and `[[fact]]` tables.
pub(crate) struct Selection {
    pub(crate) packages: Vec<SelectedPackage>,
    pub(crate) facts: Vec<SelectedFact>,
    pub(crate) used: Vec<Origin>,
}

/// A package the generators install, as selected: the lock's `[[package]]`.
pub(crate) struct SelectedPackage {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) layer: Layer,
    pub(crate) source: String,
    pub(crate) catalog: String,
    pub(crate) fields: BTreeMap<String, Field>,
    pub(crate) because: Vec<String>,
}

/// A deployment fact, as selected: the lock's `[[fact]]`.
pub(crate) struct SelectedFact {
    pub(crate) kind: String,
    pub(crate) key: String,
    pub(crate) source: String,
    pub(crate) catalog: String,
    pub(crate) fields: BTreeMap<String, Field>,
    pub(crate) because: Vec<String>,
}

impl SelectedFact {
    fn get(&self, key: &str) -> Option<&str> {
        match self.fields.get(key) {
            Some(Field::Str(s)) => Some(s),
            _ => None,
        }
    }
}

/// Fabric packages per fabric, in install order.
pub(crate) fn fabric_packages(f: Fabric) -> &'static [&'static str] {
    match f {
        // One rdma-core: the distribution's (its development packages in the build, its
        // libraries and providers at run time), never a second one built from source
        // and put ahead of it on the loader's path.
        Fabric::Infiniband | Fabric::Roce => &["gdrcopy", "ucx", "openmpi"],
        // AWS's EFA installer (rdma-core, libfabric with the EFA provider, Open MPI: one of
        // each), then aws-ofi-nccl against its libfabric.
        Fabric::Efa => &["efa-installer", "aws-ofi-nccl"],
        // The CXI stack as the Alps images build it (install-alps-hpc-stack.sh): the
        // Cassini and CXI UAPI headers, libcxi, GDRCopy, the XPMEM library, libfabric with
        // the CXI provider (and XPMEM), UCX and UCC (Open MPI's UCC collectives, which need
        // UCX), Open MPI with OFI, UCX and UCC, aws-ofi-nccl against that libfabric, OSU
        // micro-benchmarks.
        Fabric::Slingshot => &[
            "cassini-headers",
            "cxi-driver",
            "libcxi",
            "gdrcopy",
            "xpmem",
            "libfabric",
            "ucx",
            "ucc",
            "openmpi",
            "aws-ofi-nccl",
            "osu-micro-benchmarks",
        ],
        Fabric::Ethernet => &["openmpi"],
    }
}

struct Sel<'a> {
    cat: &'a Catalog,
    out: Selection,
}

fn s(v: impl Into<String>) -> Field {
    Field::Str(v.into())
}

impl Sel<'_> {
    fn push(
        &mut self,
        name: &str,
        version: String,
        layer: Layer,
        origin: &Origin,
        fields: BTreeMap<String, Field>,
        because: Vec<String>,
    ) {
        self.out.used.push(origin.clone());
        self.out.packages.push(SelectedPackage {
            name: name.to_string(),
            version,
            layer,
            source: origin.source.clone(),
            catalog: origin.lock_name.to_string(),
            fields,
            because,
        });
    }

    /// The newest version with a published sha256 (or a git commit, which git verifies),
    /// else the newest.
    fn newest_verified<'s>(&'s self, name: &'s str) -> Option<(&'s Package, bool)> {
        let mut all = self
            .cat
            .packages_named(name)
            .filter(|p| !p.follows_driver && p.variant.as_deref().is_none_or(|v| v == "source"));
        let first = all.next()?;
        let verified =
            |p: &Package| p.sha256.is_some() || p.commit.is_some() || p.image_digest.is_some();
        if verified(first) {
            return Some((first, true));
        }
        self.cat
            .packages_named(name)
            .filter(|p| !p.follows_driver)
            .find(|p| verified(p))
            .map(|p| (p, true))
            .or(Some((first, false)))
    }

    fn package(&mut self, name: &str, layer: Layer, why: &str) {
        let Some((p, verified)) = self.newest_verified(name) else {
            return;
        };
        let p = p.clone();
        let newest = self
            .cat
            .packages_named(name)
            .find(|x| !x.follows_driver)
            .and_then(|x| x.version.clone());
        let version = p.version.clone().unwrap_or_default();
        let mut because = vec![why.to_string()];
        if verified && p.sha256.is_none() && p.image_digest.is_none() {
            because.push(format!(
                "newest {name} in the catalog; no tarball checksum is published, so it is fetched from its repository by commit {}, which git verifies",
                p.commit.as_deref().unwrap_or_default()
            ));
        } else if verified {
            if newest.as_deref() != Some(version.as_str()) {
                because.push(format!(
                    "newest {name} whose download or image has a published digest (newer {} has none)",
                    newest.unwrap_or_default()
                ));
            } else {
                because.push(format!(
                    "newest {name} in the catalog; its download or image has a published digest"
                ));
            }
        } else {
            because.push(format!(
                "newest {name} in the catalog; UNVERIFIED: no published sha256 for any version"
            ));
        }
        because.extend(image_observation_because(&p));
        let fields = package_fields(&p, None);
        self.push(name, version, layer, &p.origin, fields, because);
    }
}

/// The `because` line of a package image's digest, when the catalog dates its observation.
fn image_observation_because(p: &Package) -> Option<String> {
    let (image, d) = (p.image.as_ref()?, p.image_observation.as_ref()?);
    Some(observation_because(&format!("{image}:{}", d.tag), d))
}

fn package_fields(p: &Package, driver: Option<&Version>) -> BTreeMap<String, Field> {
    package_fields_with(p, driver, None)
}

/// [`package_fields`], filling `{cuda_major}` too (DCGM's per-CUDA-major packages).
fn package_fields_with(
    p: &Package,
    driver: Option<&Version>,
    cuda_major: Option<u64>,
) -> BTreeMap<String, Field> {
    let fill = |x: &str| {
        let x = match driver {
            Some(d) => x
                .replace("{driver}", d.as_str())
                .replace("{branch}", &d.major().to_string()),
            None => x.to_string(),
        };
        match cuda_major {
            Some(m) => x.replace("{cuda_major}", &m.to_string()),
            None => x,
        }
    };
    let mut f = BTreeMap::new();
    if let Some(u) = &p.url {
        f.insert("url".into(), s(u.clone()));
    }
    if let Some(h) = &p.sha256 {
        f.insert("sha256".into(), s(h.clone()));
    }
    if let Some(c) = &p.commit {
        f.insert("commit".into(), s(c.clone()));
    }
    if !p.apt_packages.is_empty() {
        f.insert(
            "apt".into(),
            Field::List(p.apt_packages.iter().map(|x| fill(x)).collect()),
        );
    }
    if !p.dnf_packages.is_empty() {
        f.insert(
            "dnf".into(),
            Field::List(p.dnf_packages.iter().map(|x| fill(x)).collect()),
        );
    }
    if let Some(i) = &p.image {
        f.insert("image".into(), s(i.clone()));
    }
    if let Some(d) = &p.image_digest {
        f.insert("image-digest".into(), s(d.clone()));
    }
    // One image tag per package: the distroless variant where the catalog lists one (the
    // GPU Operator's own default), else the first listed.
    if let Some(t) = p
        .image_tags
        .iter()
        .find(|t| t.ends_with("-distroless"))
        .or(p.image_tags.first())
    {
        f.insert("image-tag".into(), s(t.clone()));
    }
    f
}

/// Chooses packages and facts for a resolution. The resolution's own records (its GPUs,
/// its picks) are read from it, never looked up again; `cat` gives what the solver does not
/// decide (images, packages, instances, bandwidth figures).
pub(crate) fn select(cat: &Catalog, r: &Resolution) -> Result<Selection, Error> {
    let mut sel = Sel {
        cat,
        out: Selection {
            packages: Vec::new(),
            facts: Vec::new(),
            used: Vec::new(),
        },
    };
    let driver = r
        .pick(Component::Driver)
        .map(|p| p.version.clone())
        .ok_or_else(no_driver)?;
    base_image(&mut sel, r);
    vm_images(&mut sel, r);
    fabric_stack(&mut sel, r);
    tools(&mut sel, r);
    container_toolkit(&mut sel);
    dcgm(&mut sel, r, &driver);
    fabric_manager(&mut sel, r, &driver);
    nvswitch_requirements(&mut sel, r);
    kernel_modules(&mut sel.out, cat, r, &driver);
    nccl_build(&mut sel.out, cat, r);
    stack_os_packages(&mut sel, r, &driver);
    fabric_env(&mut sel, r);
    instance_facts(&mut sel, r);
    bandwidth_facts(&mut sel, r);
    osu_bandwidth_fact(&mut sel, r);
    Ok(sel.out)
}

/// The lock's package name of the VM image for hosts with CPU `cpu`.
pub(crate) fn vm_image_name(cpu: &str) -> String {
    format!("vm-image-{cpu}")
}

/// The CPUs of the stack's hosts, sorted: each locked GPU's host CPU (`aarch64` for Grace
/// systems), from the catalog; `x86_64` for a spec that names no GPU (an arch list).
pub(crate) fn host_cpus(cat: &Catalog, gpus: &[String]) -> Vec<String> {
    if gpus.is_empty() {
        return vec!["x86_64".into()];
    }
    let mut cpus: Vec<String> = gpus
        .iter()
        .map(|g| {
            cat.gpu(g)
                .map_or_else(|| "x86_64".to_string(), |g| g.cpu.clone())
        })
        .collect();
    cpus.sort();
    cpus.dedup();
    cpus
}

/// One `vm-image-<cpu>` package (layer `host`) per CPU of the stack's hosts: the cloud
/// image a Packer qemu build boots, from the newest release of the lock's OS that has one
/// for that CPU, with the release's lifecycle dates. Without a catalog image the package
/// still records the CPU and the OS (the image is then a required Packer variable).
fn vm_images(sel: &mut Sel<'_>, r: &Resolution) {
    let cat = sel.cat;
    let os_id = r.spec.os.clone().or_else(|| {
        sel.out
            .packages
            .iter()
            .find(|p| p.name == "cuda-image")
            .and_then(|p| match p.fields.get("os") {
                Some(Field::Str(s)) => Some(s.clone()),
                _ => None,
            })
    });
    let Some(os) = os_id.and_then(|id| cat.os.iter().find(|o| o.id == id)) else {
        return;
    };
    for cpu in host_cpus(cat, &r.spec.gpus) {
        let hosts: Vec<&str> = r
            .spec
            .gpus
            .iter()
            .filter(|g| cat.gpu(g).map_or("x86_64", |g| g.cpu.as_str()) == cpu)
            .map(String::as_str)
            .collect();
        let mut f = BTreeMap::new();
        f.insert("os".into(), s(os.id.clone()));
        f.insert("cpu".into(), s(cpu.clone()));
        let mut because = vec![if hosts.is_empty() {
            format!("the spec names no GPU: {cpu} hosts, the default")
        } else {
            format!(
                "the hosts of {} have {cpu} CPUs (catalog/gpus.toml `cpu`)",
                hosts.join(", ")
            )
        }];
        let (version, source) = match os.newest_image(&cpu) {
            Some((rel, img)) => {
                f.insert("url".into(), s(img.url.clone()));
                f.insert("sha256".into(), s(img.sha256.clone()));
                if let Some(d) = &rel.released {
                    f.insert("released".into(), s(d.clone()));
                }
                if let Some(d) = &rel.eol {
                    f.insert("eol".into(), s(d.clone()));
                }
                if let Some(v) = &rel.vault {
                    f.insert("vault".into(), s(v.clone()));
                }
                because.push(format!(
                    "newest {} release with a dated {cpu} cloud image in the catalog: {}",
                    os.id, rel.version
                ));
                (
                    rel.version.to_string(),
                    format!("{} ; {}", img.source, rel.source),
                )
            }
            None => {
                because.push(format!(
                    "the catalog has no {cpu} cloud image of {}: the Packer qemu source image is a required variable",
                    os.id
                ));
                (os.id.clone(), os.origin.source.clone())
            }
        };
        let name = vm_image_name(&cpu);
        sel.push(&name, version, Layer::Host, &os.origin, f, because);
        if let Some(p) = sel.out.packages.last_mut() {
            p.source = source;
        }
    }
}

/// The `nvidia/cuda` base image for the locked CUDA release.
fn base_image(sel: &mut Sel<'_>, r: &Resolution) {
    let (cat, spec) = (sel.cat, &r.spec);
    // The base image.
    if let Some(cuda) = r.pick(Component::Cuda) {
        let image = match &spec.os {
            Some(os) => cat.image(&cuda.version, os).map(|i| {
                (
                    i,
                    if i.status == ImageStatus::Observed {
                        format!(
                            "`nvidia/cuda` tags for CUDA {} on {os} observed in public files",
                            cuda.version
                        )
                    } else {
                        format!(
                            "`nvidia/cuda` tags NVIDIA lists for CUDA {} on {os}",
                            cuda.version
                        )
                    },
                )
            }),
            None => {
                let mut ubuntu: Vec<_> = cat
                    .images
                    .iter()
                    .filter(|i| i.cuda == cuda.version && i.os.starts_with("ubuntu"))
                    .filter(|i| i.has_base_tags())
                    .collect();
                ubuntu.sort_by(|a, b| {
                    let v = |x: &str| Version::parse(x.trim_start_matches("ubuntu")).ok();
                    v(&b.os).cmp(&v(&a.os))
                });
                ubuntu.first().map(|i| {
                    (
                        *i,
                        format!(
                            "no OS requested: the newest Ubuntu with `nvidia/cuda` tags for CUDA {}",
                            cuda.version
                        ),
                    )
                })
            }
        };
        if let Some((i, why)) = image {
            let mut f = BTreeMap::new();
            f.insert("repository".into(), s("nvidia/cuda"));
            f.insert("os".into(), s(i.os.clone()));
            f.insert("status".into(), s(i.status.name()));
            let mut because = vec![why];
            let mut unpinned = Vec::new();
            // An aarch64 (Grace) host pulls the arm64 image: only a digest known to name
            // the multi-arch index serves it (one of unknown kind may be an amd64 manifest).
            let arm = grace_host(spec.gpus.iter().map(String::as_str));
            for flavour in ["runtime", "devel"] {
                let tag = format!("{}-{flavour}-{}", i.cuda, i.os);
                if i.tags.contains(&tag) {
                    match i
                        .observation(&tag)
                        .filter(|d| !arm || d.kind == DigestKind::Index)
                    {
                        Some(d) => {
                            f.insert(format!("{flavour}-digest"), s(d.digest.clone()));
                            because.push(observation_because(&format!("nvidia/cuda:{tag}"), d));
                        }
                        None => unpinned.push(tag.clone()),
                    }
                    f.insert(format!("{flavour}-tag"), s(tag));
                }
            }
            if !unpinned.is_empty() {
                because.push(format!(
                    "UNPINNED: the catalog knows no sourced digest for `{}`",
                    unpinned.join("`, `")
                ));
            }
            match i.status {
                ImageStatus::Unsupported => because
                    .push("NVIDIA lists these tags as unsupported (they may be deleted)".into()),
                ImageStatus::Observed => because.push(
                    "the tags are observed in public files (the catalog's copy of NVIDIA's tag lists predates this release): NVIDIA's support of them is not known".into(),
                ),
                _ => {}
            }
            let origin = i.origin.clone();
            sel.push(
                "cuda-image",
                i.cuda.to_string(),
                Layer::Base,
                &origin,
                f,
                because,
            );
        }
    }
}

/// The lock's `because` line for a digest taken from a catalog observation: which
/// observation (date, what it names, source). `gpustack lock` replaces it when the
/// registry answers (`resolve::OBSERVATION`).
pub(crate) fn observation_because(reference: &str, d: &DigestObservation) -> String {
    format!(
        "`{reference}`: {}{} ({}), not read from the registry; source: {}",
        OBSERVATION,
        d.observed,
        d.kind.describe(),
        d.source
    )
}

/// What starts the rest of an observation's `because` line, after the reference.
pub(crate) const OBSERVATION: &str = "catalog observation of ";

/// The fabric stack for `[cluster].fabric`, and the RDMA device plugin of multi-node
/// InfiniBand/RoCE Kubernetes jobs.
fn fabric_stack(sel: &mut Sel<'_>, r: &Resolution) {
    let spec = &r.spec;
    // Fabric stack.
    if let Some(c) = &spec.deploy.cluster {
        for name in fabric_packages(c.fabric) {
            let why = format!("[cluster].fabric = \"{}\" needs {name}", c.fabric.name());
            sel.package(name, Layer::Base, &why);
        }
        if c.fabric == Fabric::Infiniband && spec.deploy.network.as_ref().is_some_and(|n| n.sharp) {
            sharp_stack(sel, r);
        }
    }

    // The RDMA shared device plugin of the NicClusterPolicy `gen k8s` writes for the RDMA
    // resource multi-node InfiniBand/RoCE pods request.
    if let (Some(c), Some(_)) = (&spec.deploy.cluster, &spec.deploy.k8s) {
        if matches!(c.fabric, Fabric::Infiniband | Fabric::Roce) && c.nodes > 1 {
            sel.package(
                "k8s-rdma-shared-dev-plugin",
                Layer::Host,
                "the NicClusterPolicy provides the pods' RDMA resource through this device plugin",
            );
            pod_network_plugins(sel, c.fabric, spec.deploy.network.as_ref());
        }
    }
}

/// HPC-X's build name of the stack's OS, CUDA major and CPU, without its rdma-core flavour:
/// `ubuntu22.04-cuda12-x86_64`, `redhat9-cuda13-aarch64` (Rocky Linux as the RHEL build).
fn hpcx_platform(os: &str, cuda_major: u64, aarch64: bool) -> String {
    let os = os.strip_prefix("rockylinux").map_or_else(
        || os.to_string(),
        |v| format!("redhat{}", v.split('.').next().unwrap_or(v)),
    );
    let cpu = if aarch64 { "aarch64" } else { "x86_64" };
    format!("{os}-cuda{cuda_major}-{cpu}")
}

/// `[network].sharp = true` on InfiniBand: the SHARP libraries of the HPC-X build for the
/// stack's OS, CUDA major and CPU (the `inbox` build, which links the distribution's
/// rdma-core as the images do, where the catalog has one; else the `doca_ofed` build), then
/// NVIDIA's NCCL SHARP plugin built against them. Without such an HPC-X build nothing is
/// selected, and the network plan names SHARP as a prerequisite.
fn sharp_stack(sel: &mut Sel<'_>, r: &Resolution) {
    let cat = sel.cat;
    let os = sel
        .out
        .packages
        .iter()
        .find(|p| p.name == "cuda-image")
        .and_then(|p| match p.fields.get("os") {
            Some(Field::Str(o)) => Some(o.clone()),
            _ => None,
        });
    let (Some(os), Some(cuda)) = (os, r.pick(Component::Cuda)) else {
        return;
    };
    let aarch64 = grace_host(r.spec.gpus.iter().map(String::as_str));
    let platform = hpcx_platform(&os, cuda.version.major(), aarch64);
    let build = ["inbox", "doca_ofed"].into_iter().find_map(|flavour| {
        let variant = format!("{flavour}-{platform}");
        cat.packages_named("hpcx")
            .find(|p| p.variant.as_deref() == Some(variant.as_str()) && p.sha256.is_some())
            .map(|p| (p.clone(), flavour, variant))
    });
    let Some((p, flavour, variant)) = build else {
        return;
    };
    let version = p.version.clone().unwrap_or_default();
    let mut because = vec![
        "[network].sharp = true needs the SHARP libraries (libsharp_coll) the NCCL SHARP plugin links; only HPC-X's sharp/ directory is installed".to_string(),
        format!("HPC-X {version} `{variant}`: the build the catalog pins by sha256 for {os}, CUDA {} and {}", cuda.version.major(), if aarch64 { "aarch64" } else { "x86_64" }),
    ];
    if flavour == "doca_ofed" {
        because.push(format!(
            "UNVERIFIED: no `inbox` HPC-X build (the distribution's rdma-core) is pinned for {platform}; this build links DOCA-OFED's user space"
        ));
    }
    let mut fields = package_fields(&p, None);
    fields.insert("variant".into(), s(variant));
    sel.push("hpcx", version, Layer::Base, &p.origin, fields, because);
    sel.package(
        "nccl-rdma-sharp-plugins",
        Layer::Base,
        "[network].sharp = true: NCCL reaches SHARP through this net/CollNet plugin (libnccl-net.so)",
    );
}

/// The NicClusterPolicy's secondary-network components when pods attach networks on the
/// fabric (`[network].pod_subnets`): Multus, the CNI plugins, nv-ipam, and on InfiniBand
/// the IPoIB CNI.
fn pod_network_plugins(
    sel: &mut Sel<'_>,
    fabric: Fabric,
    net: Option<&crate::spec::deploy::Network>,
) {
    if net.is_none_or(|n| n.pod_subnets.is_empty()) {
        return;
    }
    let why =
        "the NicClusterPolicy deploys it for the pods' secondary networks ([network].pod_subnets)";
    for name in ["multus-cni", "cni-plugins", "nvidia-k8s-ipam"] {
        sel.package(name, Layer::Host, why);
    }
    if fabric == Fabric::Infiniband {
        sel.package("ipoib-cni", Layer::Host, why);
    }
}

/// The Dockerfile frontend, uv, the CPython build and nccl-tests.
fn tools(sel: &mut Sel<'_>, r: &Resolution) {
    let (cat, spec) = (sel.cat, &r.spec);
    // The Dockerfile syntax frontend BuildKit pulls before it reads the generated
    // Dockerfile (`# syntax=`): an external image like any base image.
    sel.package(
        "dockerfile-frontend",
        Layer::Base,
        "BuildKit pulls this Dockerfile frontend (`# syntax=`) to parse the generated Dockerfile",
    );

    // The Python installer of the framework layer.
    if r.pick(Component::Python).is_some() {
        sel.package(
            "uv",
            Layer::Framework,
            "installs the locked Python and wheels in the framework layer",
        );
    }

    // The interpreter uv installs for the locked Python: the exact patch and build (URL and
    // sha256 of uv's download table) for the stack's CPU architecture.
    if let Some(py) = r.pick(Component::Python) {
        let arch = if grace_host(spec.gpus.iter().map(String::as_str)) {
            "aarch64-gnu"
        } else {
            "x86_64-gnu"
        };
        let build = cat
            .packages_named("cpython")
            .filter(|p| p.variant.as_deref() == Some(arch))
            .find(|p| {
                p.order.as_ref().is_some_and(|v| {
                    v.major() == py.version.major() && v.minor() == py.version.minor()
                })
            })
            .cloned();
        if let Some(p) = build {
            let version = p.version.clone().unwrap_or_default();
            let because = vec![
                format!(
                    "the CPython {version} build the locked uv installs for Python {} on {arch} (`uv python install {version}` checks this sha256)",
                    py.version
                ),
            ];
            let mut fields = package_fields(&p, None);
            fields.insert("variant".into(), s(arch));
            sel.push(
                "cpython",
                version,
                Layer::Framework,
                &p.origin,
                fields,
                because,
            );
        }
    }

    // Acceptance test.
    sel.package(
        "nccl-tests",
        Layer::Validate,
        "the acceptance test every target runs (all_reduce_perf)",
    );
}

/// The NVIDIA Container Toolkit, never below the catalog's minimum safe version.
fn container_toolkit(sel: &mut Sel<'_>) {
    let cat = sel.cat;
    // Host packages.
    if let Some(t) = cat
        .packages_named("nvidia-container-toolkit")
        .find(|p| !p.follows_driver)
        .cloned()
    {
        let floor = cat
            .packages_named("nvidia-container-toolkit")
            .find(|p| p.minimum_safe)
            .and_then(|p| p.order.clone());
        let mut because = vec!["newest NVIDIA Container Toolkit in the catalog".to_string()];
        if let Some(fl) = &floor {
            because.push(format!(
                "not below {fl}, the catalog's minimum safe version"
            ));
        }
        because.extend(image_observation_because(&t));
        if floor.is_none_or(|fl| t.order.as_ref().is_some_and(|v| *v >= fl)) {
            let fields = package_fields(&t, None);
            let v = t.version.clone().unwrap_or_default();
            sel.push(
                "nvidia-container-toolkit",
                v,
                Layer::Host,
                &t.origin,
                fields,
                because,
            );
        }
    }
}

/// The newest DCGM Exporter whose DCGM the catalog has package pins for, and that DCGM.
fn dcgm(sel: &mut Sel<'_>, r: &Resolution, driver: &Version) {
    let cat = sel.cat;
    let dcgm_cuda = dcgm_cuda_major(cat, r, driver);
    let exporter = cat
        .packages_named("dcgm-exporter")
        .filter_map(|e| {
            let dcgm_v = e.version.as_deref()?.split('-').next()?.to_string();
            let d = cat.packages_named("dcgm").find(|d| {
                d.version.as_deref() == Some(dcgm_v.as_str()) && !d.apt_packages.is_empty()
            })?;
            Some((e.clone(), d.clone()))
        })
        .next();
    if let Some((e, d)) = exporter {
        let dv = d.version.clone().unwrap_or_default();
        let ev = e.version.clone().unwrap_or_default();
        let mut because = vec![format!(
            "the DCGM that DCGM Exporter {ev} is built against (its tag's first part)"
        )];
        let templated = d.apt_packages.iter().any(|x| x.contains("{cuda_major}"));
        match (&dcgm_cuda, templated) {
            (Some((m, why)), true) => because.push(format!(
                "`dcgmi diag` runs the datacenter-gpu-manager-4-cuda{m} plugins: {why}"
            )),
            (None, true) => because.push(
                "UNVERIFIED: no catalog CUDA release matches the locked driver and GPUs, so the diagnostics package's CUDA major is unknown (`{cuda_major}` left in the pin)".into(),
            ),
            _ => {}
        }
        let mut fields = package_fields_with(&d, None, dcgm_cuda.as_ref().map(|(m, _)| *m));
        if let Some((m, _)) = &dcgm_cuda {
            fields.insert("cuda-major".into(), s(m.to_string()));
        }
        sel.push("dcgm", dv.clone(), Layer::Host, &d.origin, fields, because);
        sel.push(
            "dcgm-exporter",
            ev,
            Layer::Host,
            &e.origin,
            package_fields(&e, None),
            std::iter::once(format!(
                "newest DCGM Exporter whose DCGM ({dv}) the catalog has package pins for"
            ))
            .chain(image_observation_because(&e))
            .collect(),
        );
    }
}

/// Fabric Manager at exactly the locked driver, when a locked GPU sits on NVSwitch.
fn fabric_manager(sel: &mut Sel<'_>, r: &Resolution, driver: &Version) {
    let cat = sel.cat;
    if let Some(g) = r.gpus.iter().find(|g| g.nvswitch) {
        let g = g.clone();
        for p in cat
            .packages_named("nvidia-fabricmanager")
            .filter(|p| p.follows_driver)
            // The naming of the driver's branch (from R580 the branch is in the version only).
            .filter(|p| {
                p.follows
                    .as_ref()
                    .is_none_or(|(_, req)| req.matches(driver))
            })
            .cloned()
            .collect::<Vec<_>>()
        {
            let mut fields = package_fields(&p, Some(driver));
            // Filled from the catalog's naming rule; `gpustack lock` reads the repository.
            for m in ["apt", "dnf"] {
                if fields.contains_key(m) {
                    fields.insert(format!("{m}-source"), s("naming"));
                }
            }
            let because = vec![format!(
                "{} sits on NVSwitch: Fabric Manager must match the driver exactly ({driver})",
                g.name
            )];
            // Both naming schemes (apt, dnf) are one package; record it once with both.
            if let Some(prev) = sel
                .out
                .packages
                .iter_mut()
                .find(|x| x.name == "nvidia-fabricmanager")
            {
                prev.fields.extend(fields);
                sel.out.used.push(p.origin.clone());
                continue;
            }
            sel.push(
                "nvidia-fabricmanager",
                driver.to_string(),
                Layer::Host,
                &p.origin,
                fields,
                because,
            );
        }
    }
}

/// The host requirements of the locked GPUs' NVSwitch generation (`nvswitch_generation`
/// in `gpus.toml` and `packages.toml`): on fourth-generation NVSwitch boards, NVLSM and the
/// InfiniBand management stack Fabric Manager starts it with. Unpinned: the lock records
/// the package names, where they come from and the kernel modules loaded at boot.
fn nvswitch_requirements(sel: &mut Sel<'_>, r: &Resolution) {
    let cat = sel.cat;
    let gpus: Vec<(u32, String)> = r
        .gpus
        .iter()
        .filter(|g| g.nvswitch)
        .filter_map(|g| Some((g.nvswitch_generation?, g.name.clone())))
        .collect();
    for p in &cat.packages {
        let Some(n) = p.nvswitch_generation else {
            continue;
        };
        let on: Vec<&str> = gpus
            .iter()
            .filter(|(g, _)| *g == n)
            .map(|(_, name)| name.as_str())
            .collect();
        if on.is_empty() {
            continue;
        }
        let mut fields = BTreeMap::new();
        fields.insert(
            "from".into(),
            s(if p.os_release { "os-release" } else { "cuda" }),
        );
        fields.insert("nvswitch-generation".into(), s(n.to_string()));
        if !p.apt_packages.is_empty() {
            fields.insert("apt-names".into(), Field::List(p.apt_packages.clone()));
        }
        if !p.dnf_packages.is_empty() {
            fields.insert("dnf-names".into(), Field::List(p.dnf_packages.clone()));
        }
        if !p.kernel_modules.is_empty() {
            fields.insert(
                "kernel-modules".into(),
                Field::List(p.kernel_modules.clone()),
            );
        }
        let mut because = vec![format!(
            "{} sits on generation-{n} NVSwitches: {}",
            on.join(", "),
            p.requires
                .as_deref()
                .unwrap_or("a host requirement of the generation")
        )];
        if !p.apt_packages.is_empty() {
            because.push(format!(
                "UNVERIFIED: installed by name, without a version: the catalog records none (its note in {} says why)",
                p.origin.lock_name
            ));
        }
        sel.push(
            &p.name,
            "unpinned".into(),
            Layer::Host,
            &p.origin,
            fields,
            because,
        );
    }
}

/// The fabric environment: the cluster fabric's variables, then those for every fabric.
fn fabric_env(sel: &mut Sel<'_>, r: &Resolution) {
    let (cat, spec) = (sel.cat, &r.spec);
    // Fabric environment: the cluster fabric's variables, then those for every fabric.
    let fabric = spec.deploy.cluster.as_ref().map(|c| c.fabric.name());
    let mut env: BTreeMap<&str, &crate::catalog::EnvVar> = BTreeMap::new();
    for e in &cat.env {
        if Some(e.fabric.as_str()) == fabric {
            env.insert(e.name.as_str(), e);
        }
    }
    for e in &cat.env {
        if e.fabric == "all" {
            env.entry(e.name.as_str()).or_insert(e);
        }
    }
    for (name, e) in env {
        let mut f = BTreeMap::new();
        f.insert("value".into(), s(e.value.clone()));
        f.insert("fabric".into(), s(e.fabric.clone()));
        let why = if e.fabric == "all" {
            "set for NCCL jobs on every fabric".to_string()
        } else {
            format!("set for NCCL jobs over {}", e.fabric)
        };
        push_fact(&mut sel.out, "env", name, &e.origin, f, vec![why]);
    }
}

/// The instance type and cloud settings per `[packer].clouds` cloud, for the first GPU.
fn instance_facts(sel: &mut Sel<'_>, r: &Resolution) {
    let (cat, spec) = (sel.cat, &r.spec);
    // Facts.
    let first_gpu = r.gpus.first();
    let gpn = spec.deploy.cluster.as_ref().map(|c| c.gpus_per_node);
    if let (Some(g), Some(p)) = (first_gpu, &spec.deploy.packer) {
        for cloud in &p.clouds {
            let name = cloud.name();
            let mut cands: Vec<_> = cat
                .instances
                .iter()
                .filter(|i| i.gpu == g.id && i.cloud == name && i.instance_type.is_some())
                .collect();
            cands.sort_by_key(|i| {
                (
                    gpn.is_none_or(|n| i.gpus != Some(n)),
                    std::cmp::Reverse(i.gpus),
                )
            });
            if let Some(i) = cands.first() {
                let mut f = BTreeMap::new();
                f.insert("gpu".into(), s(g.id.clone()));
                if let Some(t) = &i.instance_type {
                    f.insert("instance-type".into(), s(t.clone()));
                }
                if let Some(n) = i.gpus {
                    f.insert("gpus".into(), s(n.to_string()));
                }
                if let Some(a) = &i.accelerator_type {
                    f.insert("accelerator-type".into(), s(a.clone()));
                }
                let why = match (gpn, i.gpus) {
                    (Some(n), Some(m)) if n == m => {
                        format!(
                            "{} instance with {n} {} per instance, as [cluster].gpus_per_node asks",
                            name, g.id
                        )
                    }
                    _ => format!(
                        "the {name} instance with the most {} GPUs the catalog lists",
                        g.id
                    ),
                };
                push_fact(&mut sel.out, "instance", name, &i.origin, f, vec![why]);
            }
            if let Some(cs) = cat.clouds.iter().find(|c| c.id == name) {
                let mut f = BTreeMap::new();
                if let Some(m) = &cs.on_host_maintenance {
                    f.insert("on-host-maintenance".into(), s(m.clone()));
                }
                push_fact(
                    &mut sel.out,
                    "cloud",
                    name,
                    &cs.origin,
                    f,
                    vec![format!("settings every {name} GPU machine needs")],
                );
            }
        }
    }
}

/// The expected nccl-tests bus bandwidth inside a node and across nodes.
fn bandwidth_facts(sel: &mut Sel<'_>, r: &Resolution) {
    let (cat, spec) = (sel.cat, &r.spec);
    let first_gpu = r.gpus.first();
    let gpn = spec.deploy.cluster.as_ref().map(|c| c.gpus_per_node);
    if let Some(g) = first_gpu {
        let gpn = gpn.unwrap_or(8);
        let nodes = spec.deploy.cluster.as_ref().map_or(1, |c| c.nodes);
        let mut scopes = vec![("intra-node", "nvlink".to_string(), 1u32)];
        if let Some(c) = &spec.deploy.cluster {
            if c.nodes > 1 {
                scopes.push(("inter-node", c.fabric.name().to_string(), nodes));
            }
        }
        let wants_sharp = spec.deploy.network.as_ref().is_some_and(|n| n.sharp);
        for (scope, fabric, want_nodes) in scopes {
            let sharp = wants_sharp && scope == "inter-node";
            let mut cands: Vec<_> = cat
                .bandwidth
                .iter()
                .filter(|b| {
                    b.gpu == g.id
                        && b.fabric == fabric
                        // OSU point-to-point figures are not nccl-tests thresholds
                        // (osu_bandwidth_fact records the OSU run's own).
                        && !b.test.starts_with("osu_")
                        && b.gpus_per_node == gpn
                        && (want_nodes == 1) == (b.nodes == 1)
                        // SHARP and non-SHARP figures are kept apart: a SHARP run is the
                        // threshold only of a job that enables SHARP, and such a job
                        // takes only SHARP runs.
                        && if sharp { b.sharp == Some(true) } else { b.sharp != Some(true) }
                })
                .collect();
            cands.sort_by(|a, b| {
                a.nodes
                    .abs_diff(want_nodes)
                    .cmp(&b.nodes.abs_diff(want_nodes))
                    .then_with(|| a.size.is_none().cmp(&b.size.is_none()))
                    .then_with(|| {
                        let f = |x: &str| x.parse::<f64>().unwrap_or(f64::MAX);
                        f(&a.busbw_gbps).total_cmp(&f(&b.busbw_gbps))
                    })
            });
            if let Some(b) = cands.first() {
                let mut f = bandwidth_fields(&g.id, b);
                if let Some(sh) = b.sharp {
                    f.insert("sharp".into(), s(sh.to_string()));
                }
                let why = format!(
                    "published {} bus bandwidth for {} {}×{} over {} (job asks {}×{gpn})",
                    b.test, g.id, b.nodes, b.gpus_per_node, b.fabric, want_nodes
                );
                push_fact(&mut sel.out, "bandwidth", scope, &b.origin, f, vec![why]);
            }
        }
    }
}

/// A `bandwidth` fact's fields for a catalog figure (nccl-tests' and OSU's alike).
fn bandwidth_fields(gpu: &str, b: &crate::catalog::Bandwidth) -> BTreeMap<String, Field> {
    let mut f = BTreeMap::new();
    f.insert("gpu".into(), s(gpu));
    f.insert("fabric".into(), s(b.fabric.clone()));
    f.insert("test".into(), s(b.test.clone()));
    f.insert("busbw-gbps".into(), s(b.busbw_gbps.clone()));
    f.insert("nodes".into(), s(b.nodes.to_string()));
    f.insert("gpus-per-node".into(), s(b.gpus_per_node.to_string()));
    if let Some(sz) = &b.size {
        f.insert("size".into(), s(sz.clone()));
    }
    f
}

/// The OSU test the acceptance runs beside nccl-tests where the fabric stack builds the OSU
/// micro-benchmarks: `osu_bw`, one rank on each of two nodes.
pub(crate) const OSU_TEST: &str = "osu_bw";

/// The expected `osu_bw` figure (fact `bandwidth`/`osu_bw`), where the acceptance test runs
/// it: a multi-node cluster whose fabric stack builds the OSU micro-benchmarks (Slingshot).
/// The catalog's figure for the first GPU over that fabric, one rank on each of two nodes;
/// the lowest when several qualify (a conservative floor). Its fields are the nccl-tests
/// figures' (`busbw-gbps` holds the catalog's GB/s); the plan states it in osu_bw's unit.
fn osu_bandwidth_fact(sel: &mut Sel<'_>, r: &Resolution) {
    let (Some(c), Some(g)) = (r.spec.deploy.cluster.as_ref(), r.gpus.first()) else {
        return;
    };
    if c.nodes < 2 || !fabric_packages(c.fabric).contains(&"osu-micro-benchmarks") {
        return;
    }
    let gbps = |b: &crate::catalog::Bandwidth| b.busbw_gbps.parse::<f64>().unwrap_or(f64::MAX);
    let Some(b) = sel
        .cat
        .bandwidth
        .iter()
        .filter(|b| {
            b.gpu == g.id
                && b.fabric == c.fabric.name()
                && b.test == OSU_TEST
                && b.nodes == 2
                && b.gpus_per_node == 1
        })
        .min_by(|a, b| gbps(a).total_cmp(&gbps(b)))
    else {
        return;
    };
    let f = bandwidth_fields(&g.id, b);
    let why = format!(
        "published {} point-to-point bandwidth for {} over {}, one rank on each of two nodes: the OSU run of the acceptance test ([cluster].fabric = \"{}\" builds the OSU micro-benchmarks)",
        b.test, g.id, b.fabric, c.fabric.name()
    );
    let origin = b.origin.clone();
    push_fact(&mut sel.out, "bandwidth", OSU_TEST, &origin, f, vec![why]);
}

/// The CUDA major `dcgmi diag` runs with: the CUDA the driver reports (the newest catalog
/// release whose minimum driver it meets) that can still target every locked GPU (CUDA 13
/// dropped Volta, so a Volta host on R580 takes the CUDA 12 plugins).
fn dcgm_cuda_major(cat: &Catalog, r: &Resolution, driver: &Version) -> Option<(u64, String)> {
    let gpus = &r.gpus;
    cat.cuda
        .iter()
        .filter(|c| c.driver_min.as_ref().is_some_and(|m| m <= driver))
        .find(|c| {
            cat.targets_for(&c.version).is_some_and(|t| {
                gpus.iter()
                    .all(|g| crate::core::arch::best_way(&t.sm, g.cc).is_some())
            })
        })
        .map(|c| {
            let m = c.version.major();
            (
                m,
                format!(
                    "the driver {driver} runs CUDA {} (the newest catalog release whose minimum driver it meets and that targets every locked GPU), and DCGM installs the package for the CUDA major the driver reports",
                    c.version
                ),
            )
        })
}

/// The driver's kernel-module flavour, from the catalog's `[[kernel_modules]]` entries for
/// the locked GPUs: proprietary when a GPU cannot use the open modules, open when one needs
/// them, else the branch's default (open from the branch the entry names, R560).
/// The `[[kernel_modules]]` entries of the locked GPUs (a product's own entry, else its
/// architecture's), or, with no GPUs named, of the architectures of the locked arch list;
/// `true` in the latter case.
fn kernel_module_entries<'a>(
    cat: &'a Catalog,
    r: &'a Resolution,
) -> (
    Vec<(&'a crate::catalog::Gpu, &'a crate::catalog::KernelModules)>,
    bool,
) {
    let mut found = Vec::new();
    for g in &r.gpus {
        let e = cat
            .kernel_modules
            .iter()
            .find(|k| k.gpu.as_deref() == Some(g.id.as_str()))
            .or_else(|| {
                cat.kernel_modules
                    .iter()
                    .find(|k| k.arch.as_deref() == Some(g.arch.as_str()))
            });
        if let Some(e) = e {
            found.push((g, e));
        }
    }
    let mut from_arch_list = false;
    if r.spec.gpus.is_empty() {
        // No GPUs named: the architectures of the catalog's GPUs with a locked compute
        // capability, by their architecture's entry (a product's own entry needs the
        // product).
        from_arch_list = true;
        for t in &r.arch_list {
            let Some(g) = cat.gpus.iter().find(|g| g.cc == t.cc) else {
                continue;
            };
            if found
                .iter()
                .any(|(x, _): &(&crate::catalog::Gpu, _)| x.arch == g.arch)
            {
                continue;
            }
            if let Some(e) = cat
                .kernel_modules
                .iter()
                .find(|k| k.arch.as_deref() == Some(g.arch.as_str()))
            {
                found.push((g, e));
            }
        }
    }
    (found, from_arch_list)
}

fn kernel_modules(out: &mut Selection, cat: &Catalog, r: &Resolution, driver: &Version) {
    use crate::catalog::OpenModules;
    let (found, from_arch_list) = kernel_module_entries(cat, r);
    let Some(first) = found.first() else {
        return;
    };
    let branch = driver.major();
    let unsupported = found
        .iter()
        .find(|(_, e)| e.open == OpenModules::Unsupported);
    let required = found.iter().find(|(_, e)| e.open == OpenModules::Required);
    let (flavour, decider, mut because) = match (unsupported, required) {
        (Some((g, e)), other) => {
            let mut b = vec![format!(
                "{} ({}) cannot use NVIDIA's open kernel modules: proprietary",
                g.name, g.arch
            )];
            if let Some((o, _)) = other {
                b.push(format!(
                    "CONFLICT: {} needs the open modules; no one flavour drives both GPUs",
                    o.name
                ));
            }
            ("proprietary", *e, b)
        }
        (None, Some((g, e))) => (
            "open",
            *e,
            vec![format!(
                "{} needs NVIDIA's open kernel modules (the proprietary ones do not support it)",
                g.name
            )],
        ),
        (None, None) => {
            let from = found
                .iter()
                .filter_map(|(_, e)| e.open_default_from)
                .max()
                .unwrap_or(u64::MAX);
            let e = first.1;
            if branch >= from {
                (
                    "open",
                    e,
                    vec![format!(
                        "the open modules drive {} and are the default flavour from R{from}; the driver is R{branch}",
                        first.0.arch
                    )],
                )
            } else {
                (
                    "proprietary",
                    e,
                    vec![format!(
                        "R{branch} predates R{from}, the first branch whose default flavour is open: the branch's default, proprietary, is kept (both drive {})",
                        first.0.arch
                    )],
                )
            }
        }
    };
    if from_arch_list {
        because.insert(
            0,
            format!(
                "no GPUs named: the architectures of the locked arch list ({})",
                found
                    .iter()
                    .map(|(g, _)| g.arch.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    because.push("a Packer build may override it (variable driver_kernel_modules)".into());
    let mut f = BTreeMap::new();
    f.insert("flavour".into(), s(flavour));
    if from_arch_list {
        f.insert(
            "archs".into(),
            Field::List(found.iter().map(|(g, _)| g.arch.clone()).collect()),
        );
    } else {
        f.insert(
            "gpus".into(),
            Field::List(found.iter().map(|(g, _)| g.id.clone()).collect()),
        );
    }
    for (_, e) in &found {
        out.used.push(e.origin.clone());
    }
    push_fact(out, "kernel-modules", "driver", &decider.origin, f, because);
}

/// Whether the GPUs sit on Grace (Arm) hosts (the `gh` products): the CPU architecture the
/// resolver reads repositories for and the interpreter build the selection picks.
pub(crate) fn grace_host<'a>(gpu_ids: impl IntoIterator<Item = &'a str>) -> bool {
    gpu_ids.into_iter().any(|g| g.starts_with("gh"))
}

/// The package manager of the lock's OS: dnf on Rocky Linux, apt otherwise (the Ubuntu
/// images, and the newest Ubuntu when no OS is requested).
pub(crate) fn os_manager(os: Option<&str>) -> &'static str {
    if os.is_some_and(|o| o.starts_with("rocky")) {
        "dnf"
    } else {
        "apt"
    }
}

/// The stack's own OS packages from NVIDIA's repositories: the driver (both kernel-module
/// flavours: a Packer build may switch), the CUDA toolkit, cuDNN and NCCL, at the locked
/// versions, in the pin syntax of the lock's package manager. The catalog's entries that
/// `follow` a component give the repository's naming with placeholders; the strings are
/// recorded with `<manager>-source = "naming"`, and `gpustack lock` replaces them with what
/// the repository's index publishes (`src/resolve`, `"repository"`).
/// The OS suffix the GPU Operator appends to the driver image's tag on a node of this OS
/// (`{operator_os}` in the catalog's tag forms): NFD's `os_release.ID` followed by
/// `VERSION_ID`, whose minor the operator drops for Rocky Linux and RHEL (NVIDIA/gpu-operator
/// v26.7.0 `getOSTag`: `ubuntu22.04`, `rocky9`). `None` for an OS the catalog cannot name so.
fn gpu_operator_os_tag(os: &str) -> Option<String> {
    if os.starts_with("ubuntu") {
        return Some(os.to_string());
    }
    let major = os.strip_prefix("rockylinux")?;
    (!major.is_empty() && major.bytes().all(|b| b.is_ascii_digit()))
        .then(|| format!("rocky{major}"))
}

fn stack_os_packages(sel: &mut Sel<'_>, r: &Resolution, driver: &Version) {
    let manager = os_manager(r.spec.os.as_deref());
    let build = sel.out.facts.iter().find(|f| f.kind == "nccl-build");
    let nccl_cuda = build.and_then(|f| f.get("cuda").map(str::to_string));
    let nccl_version = build.and_then(|f| f.get("nccl").map(str::to_string));
    let mut vars: Vec<(&str, String)> = vec![
        ("driver", driver.to_string()),
        ("branch", driver.major().to_string()),
    ];
    let mut versions: BTreeMap<Component, Version> = BTreeMap::new();
    versions.insert(Component::Driver, driver.clone());
    if let Some(c) = r.pick(Component::Cuda) {
        vars.push(("cuda", c.version.to_string()));
        vars.push(("cuda_major", c.version.major().to_string()));
        vars.push(("cuda_minor", c.version.minor().to_string()));
        versions.insert(Component::Cuda, c.version.clone());
    }
    if let Some(d) = r.pick(Component::Cudnn) {
        vars.push(("cudnn", d.version.to_string()));
        vars.push(("cudnn_major", d.version.major().to_string()));
        versions.insert(Component::Cudnn, d.version.clone());
    }
    if let (Some(n), Some(c)) = (&nccl_version, &nccl_cuda) {
        vars.push(("nccl", n.clone()));
        vars.push(("nccl_cuda", c.clone()));
        if let Ok(v) = Version::parse(n) {
            versions.insert(Component::Nccl, v);
        }
    }
    let os = r.spec.os.clone().unwrap_or_default();
    vars.push(("os", os.clone()));
    let operator_os = gpu_operator_os_tag(&os);
    if let Some(t) = &operator_os {
        vars.push(("operator_os", t.clone()));
    }
    let fill = |x: &str| {
        let mut x = x.to_string();
        for (k, v) in &vars {
            x = x.replace(&format!("{{{k}}}"), v);
        }
        x
    };
    // The GPU Operator's driver image (variant `image`): its tag form is known for the
    // node OSes the operator names (`gpu_operator_os_tag`).
    let images = operator_os.is_some();
    let entries: Vec<Package> = sel
        .cat
        .packages
        .iter()
        .filter(|p| p.name != "nvidia-fabricmanager")
        .filter(|p| {
            p.variant.as_deref() == Some(manager)
                || (images && p.variant.as_deref() == Some("image"))
        })
        .filter(|p| match &p.follows {
            Some((c, req)) => versions.get(c).is_some_and(|v| req.matches(v)),
            None => false,
        })
        .cloned()
        .collect();
    for p in entries {
        let Some((c, _)) = &p.follows else { continue };
        if let (Some(image), Some(tag)) = (&p.image, p.image_tags.first()) {
            let tag = fill(tag);
            if tag.contains('{') {
                continue;
            }
            let version = versions[c].to_string();
            let mut f = BTreeMap::new();
            f.insert("image".into(), s(image.clone()));
            f.insert("image-tag".into(), s(tag.clone()));
            let because = vec![format!(
                "the GPU Operator's driver container for driver {version} on {os} (`{image}:{tag}`); `gpustack lock` reads its digest from the registry"
            )];
            sel.push(&p.name, version, Layer::Host, &p.origin, f, because);
            continue;
        }
        let pins: Vec<String> = if manager == "apt" {
            p.apt_packages.iter().map(|x| fill(x)).collect()
        } else {
            p.dnf_packages.iter().map(|x| fill(x)).collect()
        };
        // A placeholder the lock has no value for leaves the entry out (no NCCL build, no
        // cuDNN): never a half-filled pin.
        if pins.is_empty() || pins.iter().any(|x| x.contains('{')) {
            continue;
        }
        let version = versions[c].to_string();
        let mut f = BTreeMap::new();
        f.insert(manager.to_string(), Field::List(pins));
        f.insert(format!("{manager}-source"), s("naming"));
        let (layer, why) = match c {
            Component::Nccl => (
                Layer::Base,
                format!("NCCL {version} from NVIDIA's packages (every image and the VM image install it)"),
            ),
            Component::Driver => (
                Layer::Host,
                format!("the driver {version} on the VM image, with the {} kernel modules", if p.name.contains("open") { "open" } else { "proprietary" }),
            ),
            Component::Cuda => (
                Layer::Host,
                format!("the CUDA toolkit {version} on the VM image"),
            ),
            _ => (Layer::Host, format!("cuDNN {version} on the VM image")),
        };
        let because = vec![
            why,
            format!("{manager} names as NVIDIA's repository spells them (the catalog's naming rule); `gpustack lock` checks them against the repository's index"),
        ];
        sel.push(&p.name, version, layer, &p.origin, f, because);
    }
}

/// The CUDA build of a library published once per CUDA minor (NCCL's `+cudaX.Y` packages)
/// that a stack on CUDA `locked` installs, among `builds` of the same major: the locked
/// minor itself, else the nearest newer one (CUDA minor-version compatibility runs it on
/// the locked driver), else the newest older one; `None` when there is no build of that
/// major. One rule for the catalog's list (lock time, offline) and a repository's index
/// (`crate::resolve`, when the catalog lists none).
pub(crate) fn nearest_cuda_build(builds: &[&Version], locked: &Version) -> Option<Version> {
    let same: Vec<&Version> = builds
        .iter()
        .copied()
        .filter(|b| b.major() == locked.major())
        .collect();
    if same.contains(&locked) {
        return Some(locked.clone());
    }
    same.iter()
        .filter(|b| **b > locked)
        .min()
        .or_else(|| same.iter().max())
        .map(|b| (*b).clone())
}

/// The CUDA build of the NCCL packages (`libnccl2=<nccl>-1+cuda<X.Y>`): NVIDIA publishes
/// each NCCL release for a few CUDA minors only. The locked CUDA minor when the catalog
/// lists that build; else the nearest listed build of the same CUDA major, the newer one
/// first (it has kernels for every target the locked toolkit has, and CUDA's minor-version
/// compatibility runs it on the locked driver); else, when the catalog lists no build of
/// that major, the locked minor, marked unverified.
fn nccl_build(out: &mut Selection, cat: &Catalog, r: &Resolution) {
    let Some(cuda) = r.pick(Component::Cuda) else {
        return;
    };
    let (nccl, from) = match r.pick(Component::Nccl) {
        Some(p) => (p.version.clone(), "the locked NCCL"),
        None => {
            let torch = r.torch_build().and_then(|t| t.nccl.clone());
            match torch {
                Some(v) => (v, "the NCCL the torch wheel pins"),
                None => return,
            }
        }
    };
    let cv = &cuda.version;
    let locked = Version::parse(&format!("{}.{}", cv.major(), cv.minor()))
        .expect("a CUDA major.minor parses");
    let Some(rel) = cat.nccl.iter().find(|n| n.version == nccl) else {
        return;
    };
    let same_major: Vec<&Version> = rel
        .cuda_builds
        .iter()
        .filter(|b| b.major() == cv.major())
        .collect();
    let listed = rel
        .cuda_builds
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let (build, known, why) = if let Some(b) = nearest_cuda_build(&same_major, &locked) {
        let why = if b == locked {
            format!("NVIDIA publishes NCCL {nccl} for CUDA {locked}, the locked CUDA minor")
        } else {
            format!(
                "NVIDIA publishes NCCL {nccl} for CUDA {listed} only, not {locked}: the nearest build of CUDA {}, {b}, newer first (CUDA minor-version compatibility runs it on the locked driver)",
                cv.major()
            )
        };
        (b, true, why)
    } else {
        (
            locked.clone(),
            false,
            if listed.is_empty() {
                format!("UNVERIFIED: the catalog lists no CUDA builds of NCCL {nccl}; the locked CUDA minor {locked} is assumed")
            } else {
                format!("UNVERIFIED: the catalog lists NCCL {nccl} builds for CUDA {listed} only, none for CUDA {}; the locked CUDA minor {locked} is assumed", cv.major())
            },
        )
    };
    let mut f = BTreeMap::new();
    f.insert("cuda".into(), s(build.to_string()));
    f.insert("known".into(), s(if known { "true" } else { "false" }));
    f.insert("nccl".into(), s(nccl.to_string()));
    push_fact(
        out,
        "nccl-build",
        "nccl",
        &rel.origin,
        f,
        vec![format!("{from}, installed from NVIDIA's packages"), why],
    );
}

/// A resolution without a driver pick: only a hand-built one.
pub(crate) fn no_driver() -> Error {
    Diagnostic::new(
        Stage::Lock,
        "the resolution has no driver pick: a lock needs the driver it was solved for",
    )
    .hint("build the resolution with `gpustack::solve`, which always picks a driver")
    .into()
}

fn push_fact(
    out: &mut Selection,
    kind: &str,
    key: &str,
    origin: &Origin,
    fields: BTreeMap<String, Field>,
    because: Vec<String>,
) {
    out.used.push(origin.clone());
    out.facts.push(SelectedFact {
        kind: kind.to_string(),
        key: key.to_string(),
        source: origin.source.clone(),
        catalog: origin.lock_name.to_string(),
        fields,
        because,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_cuda_build_is_the_locked_minor_else_newer_first_within_the_major() {
        let v = |s: &str| Version::parse(s).unwrap();
        let pick = |builds: &[&str], locked: &str| {
            let b: Vec<Version> = builds.iter().map(|s| v(s)).collect();
            let r: Vec<&Version> = b.iter().collect();
            nearest_cuda_build(&r, &v(locked)).map(|x| x.to_string())
        };
        assert_eq!(pick(&["12.4", "12.9"], "12.9").as_deref(), Some("12.9"));
        assert_eq!(
            pick(&["12.4", "12.9", "13.2"], "12.8").as_deref(),
            Some("12.9")
        );
        assert_eq!(pick(&["12.2", "12.4"], "12.8").as_deref(), Some("12.4"));
        assert_eq!(
            pick(&["12.9", "13.3", "13.4"], "13.2").as_deref(),
            Some("13.3")
        );
        assert_eq!(pick(&["12.9"], "13.0"), None);
        assert_eq!(pick(&[], "12.8"), None);
    }
}
