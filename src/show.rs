//! Text the CLI prints: catalog listings, `why`, the `init` starter spec.

use std::fmt::Write as _;

use gpustack::catalog::{Catalog, Gpu, Origin};
use gpustack::lock::{Field, LockedComponent};
use gpustack::Lock;

pub(crate) const FAMILIES: [&str; 16] = [
    "driver",
    "cuda",
    "gpu",
    "os",
    "python",
    "cudnn",
    "nccl",
    "torch",
    "vllm",
    "deepspeed",
    "extra",
    "image",
    "package",
    "instance",
    "bandwidth",
    "env",
];

fn newest<T>(items: &[T], f: impl Fn(&T) -> String) -> String {
    let v: Vec<String> = items.iter().take(3).map(f).collect();
    if items.len() > 3 {
        format!("{}, …", v.join(", "))
    } else {
        v.join(", ")
    }
}

pub(crate) fn list(c: &Catalog) -> String {
    let mut o = String::new();
    for (name, n, detail) in list_rows(c) {
        let _ = writeln!(o, "{name:<10} {n:>4}  {detail}");
    }
    o
}

/// `catalog list --format json`: one object per family.
pub(crate) fn list_json(c: &Catalog) -> serde_json::Value {
    serde_json::Value::Array(
        list_rows(c)
            .into_iter()
            .map(|(family, entries, summary)| {
                serde_json::json!({ "family": family, "entries": entries, "summary": summary })
            })
            .collect(),
    )
}

/// `catalog show FAMILY --format json`: the entries `family` prints, each with its catalog
/// location and full source.
pub(crate) fn family_json(family: &str, text: &str) -> serde_json::Value {
    let mut entries: Vec<serde_json::Value> = Vec::new();
    let mut lines: Vec<&str> = Vec::new();
    for l in text.lines() {
        // `src` writes `    catalog/FILE:LINE — SOURCE` after each entry's lines.
        let origin = l
            .strip_prefix("    ")
            .and_then(|r| r.split_once(" — "))
            .filter(|(loc, _)| {
                loc.rsplit_once(':')
                    .is_some_and(|(_, n)| n.parse::<usize>().is_ok())
            });
        match origin {
            Some((location, source)) => {
                entries.push(serde_json::json!({
                    "entry": lines.join("\n"),
                    "location": location,
                    "source": source,
                }));
                lines.clear();
            }
            None => lines.push(l),
        }
    }
    if !lines.is_empty() {
        entries.push(serde_json::json!({ "entry": lines.join("\n") }));
    }
    serde_json::json!({ "family": family, "entries": entries })
}

/// `why --format json`.
pub(crate) fn why_json(lock: &Lock, c: &LockedComponent) -> serde_json::Value {
    let fields: serde_json::Map<String, serde_json::Value> = c
        .fields
        .iter()
        .map(|(k, v)| {
            let v = match v {
                Field::Str(s) => serde_json::Value::from(s.clone()),
                Field::List(l) => serde_json::Value::from(l.clone()),
            };
            (k.clone(), v)
        })
        .collect();
    serde_json::json!({
        "component": c.name.name(),
        "version": c.version.to_string(),
        "layer": c.layer.name(),
        "requested": c.requested,
        "catalog": c.catalog,
        "source": c.source,
        "fields": fields,
        "because": c.because,
        "hardware": {
            "gpus": lock.hardware.gpus.iter().map(|g| g.id.as_str()).collect::<Vec<_>>(),
            "driver": lock.hardware.driver.to_string(),
            "driver-installed": lock.hardware.driver_installed,
            "arch-list": lock.hardware.arch_list.iter().map(ToString::to_string).collect::<Vec<_>>(),
        },
    })
}

/// `lock --format json`: what was locked, where, and the notes.
pub(crate) fn lock_summary_json(lock: &Lock, out: &str, notes: &[String]) -> serde_json::Value {
    serde_json::json!({
        "stack": lock.request.name,
        "lock": out,
        "components": lock.components.iter().map(|c| serde_json::json!({
            "name": c.name.name(),
            "version": c.version.to_string(),
            "layer": c.layer.name(),
        })).collect::<Vec<_>>(),
        "notes": notes,
    })
}

fn list_rows(c: &Catalog) -> Vec<(&'static str, usize, String)> {
    let rows: Vec<(&'static str, usize, String)> = vec![
        (
            "driver",
            c.drivers.len(),
            format!(
                "{} branches; newest {}",
                c.branches.len(),
                newest(&c.drivers, |d| d.version.to_string())
            ),
        ),
        (
            "cuda",
            c.cuda.len(),
            format!("newest {}", newest(&c.cuda, |r| r.version.to_string())),
        ),
        (
            "gpu",
            c.gpus.len(),
            c.gpus
                .iter()
                .map(|g| g.id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        ),
        (
            "os",
            c.os.len(),
            c.os.iter()
                .map(|g| g.id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        ),
        (
            "python",
            c.python.len(),
            newest(&c.python, |r| r.version.to_string()),
        ),
        (
            "cudnn",
            c.cudnn.len(),
            format!("newest {}", newest(&c.cudnn, |r| r.version.to_string())),
        ),
        (
            "nccl",
            c.nccl.len(),
            format!("newest {}", newest(&c.nccl, |r| r.version.to_string())),
        ),
        (
            "torch",
            c.torch.len(),
            format!(
                "{} releases; newest {}",
                c.torch_releases.len(),
                newest(&c.torch, |r| r.full.to_string())
            ),
        ),
        (
            "vllm",
            c.vllm.len(),
            format!("newest {}", newest(&c.vllm, |r| r.version.to_string())),
        ),
        (
            "deepspeed",
            c.deepspeed.len(),
            format!("newest {}", newest(&c.deepspeed, |r| r.version.to_string())),
        ),
        ("extra", c.extras.len(), {
            let mut names: Vec<&str> = c.extras.iter().map(|e| e.component.name()).collect();
            names.dedup();
            names.join(", ")
        }),
        (
            "image",
            c.images.len(),
            format!(
                "nvidia/cuda tags; newest {}",
                newest(&c.images, |i| format!("{} {}", i.cuda, i.os))
            ),
        ),
        ("package", c.packages.len(), {
            let mut names: Vec<&str> = c.packages.iter().map(|p| p.name.as_str()).collect();
            names.dedup();
            names.join(", ")
        }),
        (
            "instance",
            c.instances.len(),
            format!("cloud instance types for {} GPUs", {
                let mut g: Vec<&str> = c.instances.iter().map(|i| i.gpu.as_str()).collect();
                g.sort_unstable();
                g.dedup();
                g.len()
            }),
        ),
        (
            "bandwidth",
            c.bandwidth.len(),
            "published nccl-tests bus bandwidth figures".to_string(),
        ),
        (
            "env",
            c.env.len(),
            "NCCL and fabric environment variables per fabric".to_string(),
        ),
    ];
    rows
}

fn src(o: &mut String, origin: &Origin) {
    let _ = writeln!(o, "    {} — {}", origin.location(), origin.source);
}

pub(crate) fn family(c: &Catalog, fam: &str) -> Option<String> {
    let mut o = String::new();
    match fam {
        "driver" => drivers(&mut o, c),
        "cuda" => cuda(&mut o, c),
        "gpu" => gpus(&mut o, c),
        "os" => oses(&mut o, c),
        "python" => pythons(&mut o, c),
        "cudnn" | "nccl" => libraries(&mut o, c, fam),
        "torch" => torch_builds(&mut o, c),
        "vllm" => vllm(&mut o, c),
        "image" => images(&mut o, c),
        "package" => packages(&mut o, c),
        "instance" => instances(&mut o, c),
        "env" => env(&mut o, c),
        "bandwidth" => bandwidth(&mut o, c),
        "deepspeed" => deepspeed(&mut o, c),
        "extra" => extras(&mut o, c),
        _ => return None,
    }
    Some(o)
}

/// Driver branches and their releases.
fn drivers(o: &mut String, c: &Catalog) {
    for (i, b) in c.branches.iter().enumerate() {
        let vs: Vec<String> = c
            .drivers
            .iter()
            .filter(|d| d.branch == i)
            .map(|d| d.version.to_string())
            .collect();
        let _ = writeln!(
            o,
            "R{} {} {}{}: {}",
            b.number,
            b.kind.as_str(),
            if b.supported { "supported" } else { "eol" },
            b.eol
                .as_ref()
                .map(|e| format!(" (eol {e})"))
                .unwrap_or_default(),
            vs.join(", ")
        );
        src(o, &b.origin);
    }
}

/// CUDA compatibility facts, nvcc targets and releases.
fn cuda(o: &mut String, c: &Catalog) {
    for m in &c.minor_compat {
        let _ = writeln!(
            o,
            "CUDA {}.x minor-version compatibility: driver ≥ {}",
            m.major, m.driver_min
        );
        src(o, &m.origin);
    }
    for f in &c.forward_compat {
        let _ = writeln!(
            o,
            "{}: base branches {}",
            f.package,
            f.bases
                .iter()
                .map(|b| format!("R{b}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        src(o, &f.origin);
    }
    for t in &c.targets {
        let _ = writeln!(
            o,
            "nvcc targets for CUDA `{}`: {}",
            t.cuda,
            t.sm.iter().map(|s| s.short()).collect::<Vec<_>>().join(" ")
        );
        src(o, &t.origin);
    }
    for r in &c.cuda {
        let _ = writeln!(
            o,
            "CUDA {}: driver ≥ {}",
            r.version,
            r.driver_min
                .as_ref()
                .map_or_else(|| "unpublished".to_string(), ToString::to_string)
        );
        src(o, &r.origin);
    }
}

/// GPUs.
fn gpus(o: &mut String, c: &Catalog) {
    for g in &c.gpus {
        let _ = writeln!(
            o,
            "{} ({}): cc {}, {}{}{}{}{}",
            g.id,
            g.name,
            g.cc,
            g.arch,
            if g.datacenter { ", data center" } else { "" },
            if g.nvswitch { ", NVSwitch" } else { "" },
            g.memory_gib
                .map(|m| format!(", {m} GiB"))
                .unwrap_or_default(),
            if g.aliases.is_empty() {
                String::new()
            } else {
                format!(", aliases {}", g.aliases.join(" "))
            }
        );
        src(o, &g.origin);
    }
}

/// Operating systems and their CUDA images.
fn oses(o: &mut String, c: &Catalog) {
    for x in &c.os {
        let _ = writeln!(o, "{}: CUDA `{}`", x.id, x.cuda);
        src(o, &x.origin);
    }
}

/// Python releases.
fn pythons(o: &mut String, c: &Catalog) {
    for r in &c.python {
        let _ = writeln!(
            o,
            "Python {}{}",
            r.version,
            r.eol
                .as_ref()
                .map(|e| format!(" (eol {e})"))
                .unwrap_or_default()
        );
        src(o, &r.origin);
    }
}

/// cuDNN or NCCL releases (`fam`).
fn libraries(o: &mut String, c: &Catalog, fam: &str) {
    for r in if fam == "cudnn" { &c.cudnn } else { &c.nccl } {
        let _ = writeln!(
            o,
            "{} {}: CUDA {}{}{}",
            fam,
            r.version,
            r.cuda_majors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            r.min_cc.map(|m| format!(", cc ≥ {m}")).unwrap_or_default(),
            not_installable(&r.install, &r.platforms)
        );
        src(o, &r.origin);
    }
}

/// ` (yanked on PyPI)` or ` (no Linux wheel)` for a release never locked.
fn not_installable(
    install: &gpustack::catalog::Installability,
    platforms: &[gpustack::catalog::WheelPlatform],
) -> &'static str {
    if install.yanked.is_some() {
        " (yanked on PyPI)"
    } else if !platforms.is_empty() && !platforms.iter().any(|p| p.is_linux()) {
        " (no Linux wheel)"
    } else {
        ""
    }
}

/// torch builds.
fn torch_builds(o: &mut String, c: &Catalog) {
    for b in &c.torch {
        let _ = writeln!(
            o,
            "torch {}{}: CUDA {}, Python `{}`, archs {}{}{}{}",
            b.full,
            if b.pypi_default {
                " (PyPI default)"
            } else {
                ""
            },
            b.cuda,
            b.python,
            gpustack::arch::torch_list(&b.arch_list).join(";"),
            b.cudnn
                .as_ref()
                .map(|v| format!(", cuDNN {v}"))
                .unwrap_or_default(),
            b.nccl
                .as_ref()
                .map(|v| format!(", NCCL {v}"))
                .unwrap_or_default(),
            c.torch_releases
                .iter()
                .find(|r| b.pypi_default && r.version == b.version)
                .and_then(|r| r.triton.as_ref())
                .map(|t| format!(", triton `{t}`"))
                .unwrap_or_default()
        );
        src(o, &b.origin);
    }
}

/// vLLM releases.
fn vllm(o: &mut String, c: &Catalog) {
    for r in &c.vllm {
        let _ = writeln!(
            o,
            "vllm {}: torch =={}, CUDA {} wheel, Python `{}`{}",
            r.version,
            r.torch,
            r.cuda,
            r.python,
            r.min_cc.map(|m| format!(", cc ≥ {m}")).unwrap_or_default()
        );
        src(o, &r.origin);
    }
}

/// `nvidia/cuda` images.
fn images(o: &mut String, c: &Catalog) {
    for i in &c.images {
        let _ = writeln!(
            o,
            "nvidia/cuda {} on {} ({}): {}",
            i.cuda,
            i.os,
            i.status.name(),
            i.tags.join(", ")
        );
        src(o, &i.origin);
    }
}

/// Host and image packages.
fn packages(o: &mut String, c: &Catalog) {
    for p in &c.packages {
        let _ = writeln!(
            o,
            "{} {}{}{}",
            p.name,
            p.version.as_deref().unwrap_or("(follows the driver)"),
            p.variant
                .as_deref()
                .map(|v| format!(" [{v}]"))
                .unwrap_or_default(),
            if p.sha256.is_some() {
                ", sha256 known"
            } else {
                ""
            }
        );
        src(o, &p.origin);
    }
}

/// Cloud instances.
fn instances(o: &mut String, c: &Catalog) {
    for i in &c.instances {
        let _ = writeln!(
            o,
            "{} on {}: {}{}",
            i.gpu,
            i.cloud,
            i.instance_type.as_deref().unwrap_or("(type not sourced)"),
            i.gpus.map(|n| format!(", {n} GPUs")).unwrap_or_default()
        );
        src(o, &i.origin);
    }
}

/// Fabric environment variables.
fn env(o: &mut String, c: &Catalog) {
    for e in &c.env {
        let _ = writeln!(o, "{}: {}={}", e.fabric, e.name, e.value);
        src(o, &e.origin);
    }
}

/// Published bandwidth figures.
fn bandwidth(o: &mut String, c: &Catalog) {
    for b in &c.bandwidth {
        let _ = writeln!(
            o,
            "{} over {}, {}×{}: {} GB/s ({}{})",
            b.gpu,
            b.fabric,
            b.nodes,
            b.gpus_per_node,
            b.busbw_gbps,
            b.test,
            b.size
                .as_deref()
                .map(|s| format!(", {s}"))
                .unwrap_or_default()
        );
        src(o, &b.origin);
    }
}

/// DeepSpeed releases.
fn deepspeed(o: &mut String, c: &Catalog) {
    for r in &c.deepspeed {
        let _ = writeln!(
            o,
            "deepspeed {}: torch `{}`, Python `{}`, nvcc/torch CUDA mismatches allowed: {}",
            r.version,
            r.torch
                .as_ref()
                .map_or_else(|| "*".to_string(), ToString::to_string),
            r.python
                .as_ref()
                .map_or_else(|| "*".to_string(), ToString::to_string),
            if r.cuda_mismatch_ok.is_empty() {
                "none".to_string()
            } else {
                r.cuda_mismatch_ok
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            }
        );
        src(o, &r.origin);
    }
}

/// Extras (flash-attn, xformers, …).
fn extras(o: &mut String, c: &Catalog) {
    for e in &c.extras {
        let mut facts = vec![format!("layer {}", e.layer.name())];
        if let Some(t) = &e.torch {
            facts.push(format!("torch `{t}`"));
        }
        if let Some(p) = &e.python {
            facts.push(format!("Python `{p}`"));
        }
        if let Some(m) = &e.cuda_majors {
            facts.push(format!(
                "CUDA {}",
                m.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some(cc) = e.min_cc {
            facts.push(format!("cc ≥ {cc}"));
        }
        facts.push(format!("from {}", e.index));
        let _ = writeln!(
            o,
            "{} {} ({}): {}",
            e.component.name(),
            e.version,
            e.pypi_name,
            facts.join(", ")
        );
        src(o, &e.origin);
    }
}

/// `why`: the pick, its facts and the rules behind it. The source is shortened to one URL
/// unless `verbose`.
pub(crate) fn why(lock: &Lock, c: &LockedComponent, verbose: bool) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{} {} (layer {})", c.name, c.version, c.layer.name());
    let _ = writeln!(o, "  requested: {}", c.requested);
    let _ = writeln!(o, "  catalog:   {}", c.catalog);
    if verbose {
        let _ = writeln!(o, "  source:    {}", c.source);
    } else {
        let _ = writeln!(
            o,
            "  source:    {}",
            gpustack::catalog::short_source(&c.source)
        );
    }
    for (k, v) in &c.fields {
        let v = match v {
            Field::Str(s) => s.clone(),
            Field::List(l) => l.join(" "),
        };
        let _ = writeln!(o, "  {k}: {v}");
    }
    if !c.because.is_empty() {
        let _ = writeln!(o, "  because:");
        for b in &c.because {
            let _ = writeln!(o, "    - {b}");
        }
    }
    let gpus: Vec<&str> = lock.hardware.gpus.iter().map(|g| g.id.as_str()).collect();
    let archs: Vec<String> = lock
        .hardware
        .arch_list
        .iter()
        .map(ToString::to_string)
        .collect();
    let _ = writeln!(
        o,
        "  hardware:  {}driver {} ({}), arch list {}",
        if gpus.is_empty() {
            String::new()
        } else {
            format!("{} on ", gpus.join(", "))
        },
        lock.hardware.driver,
        if lock.hardware.driver_installed {
            "installed"
        } else {
            "resolved"
        },
        archs.join(" ")
    );
    o
}

pub(crate) fn starter(gpus: &[&Gpu], driver: Option<&str>) -> String {
    // Comments start in one column (33), whatever the value's length.
    let line = |value: String, comment: &str| format!("{value:<31} # {comment}");
    let driver_line = match driver {
        Some(d) => line(
            format!("driver = \"{d}\""),
            "installed on the nodes (`nvidia-smi`); a host fact",
        ),
        None => line(
            "# driver = \"550.54.15\"".into(),
            "the installed driver; omit it and gpustack picks one",
        ),
    };
    let ids: Vec<String> = gpus.iter().map(|g| format!("\"{}\"", g.id)).collect();
    let mut gpu_lines = vec![line(
        format!("gpus = [{}]", ids.join(", ")),
        &format!("{}, compute capability {}", gpus[0].name, gpus[0].cc),
    )];
    for g in &gpus[1..] {
        gpu_lines.push(line(
            String::new(),
            &format!("{}, compute capability {}", g.name, g.cc),
        ));
    }
    format!(
        r#"# gpustack.toml — the one place your GPU stack is written down.
# `gpustack lock` resolves it into gpustack.lock; every generator renders from the lock.
# Requirements: "*", a bare version ("12.4" = 12.4 or any 12.4.x; also "12.4.*"), "~=12.4",
# or ==, !=, >=, >, <=, < joined by commas (">=2.4, <2.6"). A torch local label pins a wheel variant: "==2.5.1+cu124".

[stack]
{name}
{os}

[hardware]
{gpus}
{archs}
{driver_line}

{components}
cuda = "*"
cudnn = "*"
nccl = "*"
torch = "*"
# python = "3.11"
# vllm = "*"
# deepspeed = "*"
{extra}

# Where it runs: uncomment the tables you deploy with. `gpustack gen all` renders Docker and
# Apptainer, plus the target of each of [packer], [k8s] and [slurm] present (all three when
# none is); the spec reference in the book has every key.
{image}
# registry = "registry.example.com/ml"
# [cluster]
{fabric}
# nodes = 2
# gpus_per_node = 8
# [k8s]
{namespace}
# [slurm]
{partition}
# [packer]
{clouds}
"#,
        name = line("name = \"my-stack\"".into(), "[a-z0-9][a-z0-9-]*"),
        os = line(
            "# os = \"ubuntu22.04\"".into(),
            "ubuntu20.04, ubuntu22.04, ubuntu24.04, rockylinux8, rockylinux9"
        ),
        gpus = gpu_lines.join("\n"),
        archs = line("# archs = [\"sm_90\"]".into(), "extra targets to build for"),
        components = line(
            "[components]".into(),
            "listed = part of the stack; omitted = absent"
        ),
        extra = line(
            "# flash-attn = \"*\"".into(),
            "an extra; also xformers, transformers, accelerate, …"
        ),
        image = line(
            "# [image]".into(),
            "registry: where the images are pushed; nodes pull them"
        ),
        fabric = line(
            "# fabric = \"infiniband\"".into(),
            "infiniband, roce, efa, slingshot or ethernet"
        ),
        namespace = line("# namespace = \"ml\"".into(), "default gpustack"),
        partition = line(
            "# partition = \"gpu\"".into(),
            "the Slurm partition the jobs run in"
        ),
        clouds = line(
            "# clouds = [\"aws\"]".into(),
            "aws, gcp, azure, qemu: the VM images to build"
        ),
    )
}
