//! What changed between two locks and what it costs: every component, package, hardware
//! fact and request setting compared and given its [`Class`], the layers whose closure hash
//! changed, and the generated files each target adds, removes or changes.

use std::collections::BTreeMap;

use crate::core::version::Version;
use crate::core::{Component, Layer};
use crate::error::Error;
use crate::lock::{Field, Lock, LockedFact};
use crate::plan::{self, Common};
use crate::render::RenderedFile;

use super::{
    Change, Class, ClassCount, FieldChange, Files, Kind, LayerChange, LockDiff, Side, Status,
    TargetFiles, SCHEMA,
};

/// Compares two locks.
///
/// ```
/// use gpustack::{Catalog, diff::{diff, Class}};
///
/// let catalog = Catalog::stock()?;
/// let spec = |driver: &str| format!(r#"
/// [stack]
/// name = "demo"
/// [hardware]
/// gpus = ["h100"]
/// driver = "{driver}"
/// [components]
/// cuda = "12.4"
/// "#);
/// let old = gpustack::lock_spec(&catalog, "old.toml", &spec("550.54.15"))?;
/// let new = gpustack::lock_spec(&catalog, "new.toml", &spec("550.144.03"))?;
/// let d = diff(&old, &new);
/// assert_eq!(d.classes().first(), Some(&Class::DriverPatch));
/// assert!(d.to_markdown().contains("| driver | `550.54.15` | `550.144.03` |"));
/// assert!(diff(&old, &old).is_empty());
/// # Ok::<(), gpustack::Error>(())
/// ```
pub fn diff(old: &Lock, new: &Lock) -> LockDiff {
    let mut changes = Vec::new();
    hardware(old, new, &mut changes);
    components(old, new, &mut changes);
    packages(old, new, &mut changes);
    facts(old, new, &mut changes);
    python_packages(old, new, &mut changes);
    request(old, new, &mut changes);
    // Stable: within a class, the lock's own order stays.
    changes.sort_by_key(|c| c.class);

    let mut summary: Vec<ClassCount> = Vec::new();
    for c in &changes {
        match summary.last_mut() {
            Some(s) if s.class == c.class => s.count += 1,
            _ => summary.push(ClassCount {
                class: c.class,
                action: c.class.action(),
                count: 1,
            }),
        }
    }

    let layers = Layer::EVERY
        .into_iter()
        .filter_map(|l| {
            let a = old.layer(l).map(|x| x.hash.clone());
            let b = new.layer(l).map(|x| x.hash.clone());
            (a != b).then(|| LayerChange {
                layer: l.name().to_string(),
                status: Status::of(a.as_ref(), b.as_ref()),
                old_hash: a,
                new_hash: b,
            })
        })
        .collect::<Vec<_>>();

    let files = files(old, new);
    let empty =
        changes.is_empty() && layers.is_empty() && files.targets.iter().all(TargetFiles::is_empty);
    LockDiff {
        schema: SCHEMA,
        old: Side::of(old),
        new: Side::of(new),
        empty,
        summary,
        changes,
        layers,
        files,
    }
}

/// The Python closure, package by package where both locks' pylock files were read, else
/// file by file (by digest); and the source builds' sdists.
fn python_packages(old: &Lock, new: &Lock, out: &mut Vec<Change>) {
    type Pkgs = BTreeMap<String, String>;
    let per_layer = |l: &Lock| -> BTreeMap<String, (String, Option<Pkgs>)> {
        l.python
            .iter()
            .flat_map(|p| p.files.iter())
            .map(|f| {
                let pkgs = f.contents.as_deref().map(|t| {
                    crate::resolve::python::packages(t)
                        .into_iter()
                        .collect::<Pkgs>()
                });
                (f.file.clone(), (f.digest.clone(), pkgs))
            })
            .collect()
    };
    let (a, b) = (per_layer(old), per_layer(new));
    let files: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    // A package whose version moved in several layers is one change, naming the layers.
    let mut moved: BTreeMap<(String, Option<String>, Option<String>), Vec<String>> =
        BTreeMap::new();
    for file in files {
        match (a.get(file), b.get(file)) {
            (Some((da, _)), Some((db, _))) if da == db => {}
            (Some((_, Some(pa))), Some((_, Some(pb)))) => {
                let names: std::collections::BTreeSet<&String> =
                    pa.keys().chain(pb.keys()).collect();
                for n in names {
                    let (x, y) = (pa.get(n), pb.get(n));
                    if x != y {
                        moved
                            .entry((n.clone(), x.cloned(), y.cloned()))
                            .or_default()
                            .push(file.clone());
                    }
                }
            }
            (x, y) => out.push(Change {
                kind: Kind::PythonPackage,
                name: file.clone(),
                status: Status::of(x, y),
                old: x.map(|v| v.0.clone()),
                new: y.map(|v| v.0.clone()),
                class: Class::PythonPackage,
                fields: Vec::new(),
                note: None,
            }),
        }
    }
    for ((name, x, y), files) in moved {
        out.push(Change {
            kind: Kind::PythonPackage,
            status: Status::of(x.as_ref(), y.as_ref()),
            name,
            old: x,
            new: y,
            class: Class::PythonPackage,
            fields: Vec::new(),
            note: Some(format!("in {}", files.join(", "))),
        });
    }
    let builds = |l: &Lock| -> BTreeMap<String, String> {
        l.python
            .iter()
            .flat_map(|p| p.builds.iter())
            .map(|b| {
                (
                    format!("sdist {}", b.name),
                    format!("{} ({})", b.version, b.sha256),
                )
            })
            .collect()
    };
    let (a, b) = (builds(old), builds(new));
    for n in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
        let (x, y) = (a.get(n), b.get(n));
        if x != y {
            out.push(Change {
                kind: Kind::PythonPackage,
                name: n.clone(),
                status: Status::of(x, y),
                old: x.cloned(),
                new: y.cloned(),
                class: Class::PythonPackage,
                fields: Vec::new(),
                note: None,
            });
        }
    }
}

fn hardware(old: &Lock, new: &Lock, out: &mut Vec<Change>) {
    let ids = |l: &Lock| {
        l.hardware
            .gpus
            .iter()
            .map(|g| g.id.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (a, b) = (ids(old), ids(new));
    if a != b {
        out.push(Change {
            kind: Kind::Hardware,
            name: "gpus".into(),
            status: Status::Changed,
            old: Some(a),
            new: Some(b),
            class: Class::Gpu,
            fields: Vec::new(),
            note: None,
        });
    } else if old.hardware.gpus != new.hardware.gpus {
        // Same GPUs, different recorded facts (a product label, a memory size).
        let mut fields = Vec::new();
        for (x, y) in old.hardware.gpus.iter().zip(&new.hardware.gpus) {
            let opt = |v: Option<String>| v.unwrap_or_else(|| "none".into());
            for (k, a, b) in [
                ("name", x.name.clone(), y.name.clone()),
                ("cc", x.cc.to_string(), y.cc.to_string()),
                (
                    "datacenter",
                    x.datacenter.to_string(),
                    y.datacenter.to_string(),
                ),
                ("nvswitch", x.nvswitch.to_string(), y.nvswitch.to_string()),
                (
                    "memory-gib",
                    opt(x.memory_gib.map(|m| m.to_string())),
                    opt(y.memory_gib.map(|m| m.to_string())),
                ),
                (
                    "gfd-product",
                    opt(x.gfd_product.clone()),
                    opt(y.gfd_product.clone()),
                ),
            ] {
                if a != b {
                    fields.push(FieldChange {
                        key: format!("{}.{k}", x.id),
                        old: Some(a),
                        new: Some(b),
                    });
                }
            }
        }
        out.push(Change {
            kind: Kind::Hardware,
            name: "gpus".into(),
            status: Status::Changed,
            old: Some(a),
            new: Some(b),
            class: Class::Metadata,
            fields,
            note: None,
        });
    }
    let arch = |l: &Lock| {
        l.hardware
            .arch_list
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let (a, b) = (arch(old), arch(new));
    if a != b {
        out.push(Change {
            kind: Kind::Hardware,
            name: "arch-list".into(),
            status: Status::Changed,
            old: Some(a),
            new: Some(b),
            class: Class::ArchList,
            fields: Vec::new(),
            note: None,
        });
    }
}

/// The fields whose values differ between two field maps, by key.
fn differing(a: &BTreeMap<String, Field>, b: &BTreeMap<String, Field>) -> Vec<FieldChange> {
    let mut keys: Vec<&String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|k| FieldChange {
            key: k.clone(),
            old: a.get(k).map(field_text),
            new: b.get(k).map(field_text),
        })
        .collect()
}

/// Whether a layer's closure hash is the same in both locks.
fn same_layer(old: &Lock, new: &Lock, l: Layer) -> bool {
    old.layer(l).map(|x| &x.hash) == new.layer(l).map(|x| &x.hash)
}

fn components(old: &Lock, new: &Lock, out: &mut Vec<Change>) {
    for c in Component::ALL {
        let (a, b) = (old.component(c), new.component(c));
        if a.is_none() && b.is_none() {
            continue;
        }
        let (av, bv) = (a.map(|x| &x.version), b.map(|x| &x.version));
        let version_differs = av.map(Version::as_str) != bv.map(Version::as_str);
        let fields = match (a, b) {
            (Some(a), Some(b)) => differing(&a.fields, &b.fields),
            _ => Vec::new(),
        };
        if !version_differs && fields.is_empty() {
            continue;
        }
        let layer = b.or(a).map_or(c.layer(), |x| x.layer);
        let class = if !version_differs && same_layer(old, new, layer) {
            Class::Metadata
        } else {
            match (c, av, bv) {
                (Component::Driver, Some(x), Some(y)) if x.major() == y.major() => {
                    Class::DriverPatch
                }
                (Component::Driver, _, _) => Class::DriverBranch,
                (Component::Cuda, Some(x), Some(y)) if x.major() == y.major() => Class::CudaMinor,
                (Component::Cuda, _, _) => Class::CudaMajor,
                (Component::Cudnn, _, _) => Class::Cudnn,
                (Component::Nccl, _, _) => Class::Nccl,
                (Component::Python, _, _) => Class::Python,
                _ => Class::Framework,
            }
        };
        let mut notes = Vec::new();
        if let (Some(x), Some(y)) = (av, bv) {
            // The release alone: a CUDA variant is no older or newer than another.
            if y.cmp_release(x).is_lt() {
                notes.push("downgrade".to_string());
            }
            if let (Some(x), Some(y)) = (x.local(), y.local()) {
                if x != y {
                    notes.push(format!("CUDA variant {x} → {y}"));
                }
            }
        }
        let note = (!notes.is_empty()).then(|| notes.join("; "));
        out.push(Change {
            kind: Kind::Component,
            name: c.name().to_string(),
            status: Status::of(a, b),
            old: av.map(ToString::to_string),
            new: bv.map(ToString::to_string),
            class,
            fields,
            note,
        });
    }
}

fn packages(old: &Lock, new: &Lock, out: &mut Vec<Change>) {
    let mut names: Vec<&str> = new.packages.iter().map(|p| p.name.as_str()).collect();
    for p in &old.packages {
        if !names.contains(&p.name.as_str()) {
            names.push(&p.name);
        }
    }
    for name in names {
        let (a, b) = (old.package(name), new.package(name));
        let version_differs = a.map(|x| &x.version) != b.map(|x| &x.version);
        let fields = match (a, b) {
            (Some(a), Some(b)) => differing(&a.fields, &b.fields),
            _ => Vec::new(),
        };
        if !version_differs && fields.is_empty() {
            continue;
        }
        let Some(layer) = b.or(a).map(|x| x.layer) else {
            continue;
        };
        let class = if !version_differs && same_layer(old, new, layer) {
            Class::Metadata
        } else if layer == Layer::Host {
            Class::HostPackage
        } else if name != "cuda-image"
            && matches!(layer, Layer::Base | Layer::Validate)
            // OS packages from NVIDIA's repository (NCCL) are not the fabric's source builds.
            && b.or(a).is_some_and(|x| x.list("apt").is_empty() && x.list("dnf").is_empty())
        {
            Class::Fabric
        } else {
            Class::Package
        };
        out.push(Change {
            kind: Kind::Package,
            name: name.to_string(),
            status: Status::of(a, b),
            old: a.map(|x| x.version.clone()),
            new: b.map(|x| x.version.clone()),
            class,
            fields,
            note: match (a, b) {
                (Some(x), Some(y)) => {
                    match (Version::parse(&x.version), Version::parse(&y.version)) {
                        (Ok(x), Ok(y)) if y.cmp_release(&x).is_lt() => {
                            Some("downgrade".to_string())
                        }
                        _ => None,
                    }
                }
                _ => None,
            },
        });
    }
}

fn field_text(f: &Field) -> String {
    match f {
        Field::Str(s) => s.clone(),
        Field::List(l) => l.join(","),
    }
}

/// A fact's value: `value` for an environment variable, else `key=value` for the given keys.
fn fact_text(f: &LockedFact, keys: &[String]) -> String {
    if f.kind == "env" {
        if let Some(v) = f.get("value") {
            return v.to_string();
        }
    }
    keys.iter()
        .filter_map(|k| {
            f.fields
                .get(k)
                .map(|v| match (k.as_str(), field_text(v).as_str()) {
                    // An NCCL build's `known`: whether NVIDIA publishes that build, in words.
                    ("known", "true") => "a build NVIDIA publishes".to_string(),
                    ("known", "false") => "no build NVIDIA publishes".to_string(),
                    (_, t) => format!("{k}={t}"),
                })
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn facts(old: &Lock, new: &Lock, out: &mut Vec<Change>) {
    let mut ids: Vec<(&str, &str)> = new
        .facts
        .iter()
        .map(|f| (f.kind.as_str(), f.key.as_str()))
        .collect();
    for f in &old.facts {
        if !ids.contains(&(f.kind.as_str(), f.key.as_str())) {
            ids.push((&f.kind, &f.key));
        }
    }
    for (kind, key) in ids {
        let (a, b) = (old.fact(kind, key), new.fact(kind, key));
        let fields = match (a, b) {
            (Some(a), Some(b)) => differing(&a.fields, &b.fields),
            _ => Vec::new(),
        };
        if a.is_some() && b.is_some() && fields.is_empty() {
            continue;
        }
        let keys: Vec<String> = fields.iter().map(|f| f.key.clone()).collect();
        let shown = |f: &LockedFact| {
            if keys.is_empty() {
                fact_text(f, &f.fields.keys().cloned().collect::<Vec<_>>())
            } else {
                fact_text(f, &keys)
            }
        };
        out.push(Change {
            kind: Kind::Fact,
            name: format!("{kind} {key}"),
            status: Status::of(a, b),
            old: a.map(shown),
            new: b.map(shown),
            class: {
                // Added, removed, or one of these fields changed (not only the GPUs or the
                // `known` flag that explain it).
                let touches = |f: &str| keys.is_empty() || keys.iter().any(|k| k == f);
                match kind {
                    "env" => Class::Env,
                    // The CUDA build of the NCCL packages the base image installs.
                    "nccl-build" if touches("cuda") || touches("nccl") => Class::Nccl,
                    // The driver packages a VM image installs.
                    "kernel-modules" if touches("flavour") => Class::HostPackage,
                    _ => Class::Deployment,
                }
            },
            fields,
            note: None,
        });
    }
}

/// `request.<table>.<key>` → the TOML value text, from the canonical request text.
fn request_values(l: &Lock) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut table = String::new();
    for line in crate::lock::request_toml(&l.request).lines() {
        if let Some(t) = line.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            table = t.to_string();
        } else if let Some((k, v)) = line.split_once(" = ") {
            // A plain string shows without its quotes; lists and escapes stay TOML.
            let v = match v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
                Some(inner) if !inner.contains(['"', '\\']) => inner,
                _ => v,
            };
            out.push((format!("{table}.{k}"), v.to_string()));
        }
    }
    out
}

fn request(old: &Lock, new: &Lock, out: &mut Vec<Change>) {
    let a = request_values(old);
    let b = request_values(new);
    let mut keys: Vec<&str> = b.iter().map(|(k, _)| k.as_str()).collect();
    for (k, _) in &a {
        if !keys.contains(&k.as_str()) {
            keys.push(k);
        }
    }
    let get =
        |v: &[(String, String)], k: &str| v.iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    for k in keys {
        // The resolved GPUs are compared under [hardware].
        if k == "request.gpus" {
            continue;
        }
        let (x, y) = (get(&a, k), get(&b, k));
        if x == y {
            continue;
        }
        let (name, class) = if k == "request.os" {
            ("os".to_string(), Class::Os)
        } else {
            (k.to_string(), Class::Request)
        };
        out.push(Change {
            kind: Kind::Request,
            name,
            status: Status::of(x.as_ref(), y.as_ref()),
            old: x,
            new: y,
            class,
            fields: Vec::new(),
            note: None,
        });
    }
}

/// An error's messages in one line, for a report.
fn reason(e: &Error) -> String {
    match e {
        Error::Invalid(ds) | Error::Unresolvable(ds) | Error::Network(ds) => ds
            .iter()
            .map(|d| d.message.as_str())
            .collect::<Vec<_>>()
            .join("; "),
        Error::NoSolution(_) => "no compatible stack".to_string(),
    }
}

/// Renders every target of a lock; a target that fails carries its reason.
type Rendered = Vec<(plan::Target, Result<Vec<RenderedFile>, String>)>;

fn render_all(lock: &Lock) -> Result<(String, Rendered), String> {
    let common = Common::new(lock).map_err(|e| reason(&e))?;
    let all = match plan::generate_many(lock, &plan::Target::ALL) {
        Ok(v) => v.into_iter().map(|(t, f)| (t, Ok(f))).collect(),
        Err(_) => plan::Target::ALL
            .into_iter()
            .map(|t| (t, plan::generate(lock, t).map_err(|e| reason(&e))))
            .collect(),
    };
    Ok((common.lock_hash, all))
}

const LABEL: &str = "<lock-hash>";

fn files(old: &Lock, new: &Lock) -> Files {
    let unavailable = |reason: String| Files {
        available: false,
        reason: Some(reason),
        targets: Vec::new(),
    };
    let (a_hash, a) = match render_all(old) {
        Ok(x) => x,
        Err(e) => return unavailable(format!("the old lock does not render: {e}")),
    };
    let (b_hash, b) = match render_all(new) {
        Ok(x) => x,
        Err(e) => return unavailable(format!("the new lock does not render: {e}")),
    };
    let mut targets = Vec::new();
    for ((t, x), (_, y)) in a.into_iter().zip(b) {
        let mut tf = TargetFiles {
            target: t.name().to_string(),
            ..TargetFiles::default()
        };
        match (x, y) {
            (Err(e), _) => tf.error = Some(format!("the old lock does not render it: {e}")),
            (_, Err(e)) => tf.error = Some(format!("the new lock does not render it: {e}")),
            (Ok(x), Ok(y)) => {
                let x: BTreeMap<&str, &str> = x
                    .iter()
                    .map(|f| (f.path.as_str(), f.contents.as_str()))
                    .collect();
                let y: BTreeMap<&str, &str> = y
                    .iter()
                    .map(|f| (f.path.as_str(), f.contents.as_str()))
                    .collect();
                for (p, xc) in &x {
                    match y.get(p) {
                        None => tf.removed.push((*p).to_string()),
                        Some(yc) if yc == xc => {}
                        Some(yc) if yc.replace(&b_hash, LABEL) == xc.replace(&a_hash, LABEL) => {
                            tf.relabelled.push((*p).to_string());
                        }
                        Some(_) => tf.changed.push((*p).to_string()),
                    }
                }
                tf.added = y
                    .keys()
                    .filter(|p| !x.contains_key(*p))
                    .map(|p| (*p).to_string())
                    .collect();
            }
        }
        targets.push(tf);
    }
    Files {
        available: true,
        reason: None,
        targets,
    }
}
