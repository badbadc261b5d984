//! The reader: a version peek, permissive wire types, then `into_lock` with the invariants.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{
    quote, Hardware, Lock, LockedComponent, LockedFact, LockedGpu, LockedLayer, LockedPackage,
    PyBuild, PyLockFile, PythonLock, Seal, LOCK_VERSION, LOCK_VERSION_MIN, SEALED_SINCE,
};
use crate::core::arch::Target;
use crate::core::version::{Version, VersionReq};
use crate::core::{Component, Field, Layer};
use crate::error::{toml_diagnostic, Diagnostic, Error, Location, Stage};
use crate::spec::Spec;

impl Lock {
    /// Parses a lock. `file` is used in messages only.
    pub fn parse(file: &str, text: &str) -> Result<Lock, Error> {
        #[derive(Deserialize)]
        struct Peek {
            version: Option<toml::Value>,
        }
        let peek: Result<Peek, _> = toml::from_str(text);
        match peek {
            Err(e) => {
                return Err(toml_diagnostic(Stage::Lock, file, text, &e)
                    .hint("the lock is generated; regenerate it with `gpustack lock` instead of editing it")
                    .into())
            }
            Ok(Peek { version: None }) => {
                return Err(Diagnostic::new(Stage::Lock, "this is not a gpustack lockfile: it has no `version`")
                    .at(Location::file(file))
                    .hint("generate one with `gpustack lock`")
                    .into())
            }
            Ok(Peek { version: Some(toml::Value::Integer(n)) }) if !(i64::from(LOCK_VERSION_MIN)..=i64::from(LOCK_VERSION)).contains(&n) => {
                return Err(Diagnostic::new(Stage::Lock, format!("unsupported lockfile version {n} (this gpustack reads versions {LOCK_VERSION_MIN} to {LOCK_VERSION})"))
                    .at_offset(file, text, text.find("version").unwrap_or(0))
                    .hint(if n > i64::from(LOCK_VERSION) {
                        "the lock was written by a newer gpustack: upgrade gpustack, or re-lock with this one"
                    } else {
                        "re-lock with `gpustack lock` to write the current format"
                    })
                    .into())
            }
            Ok(Peek { version: Some(toml::Value::Integer(_)) }) => {}
            Ok(Peek { version: Some(v) }) => {
                return Err(Diagnostic::new(Stage::Lock, format!("lockfile `version` must be an integer, not {}", v.type_str()))
                    .at_offset(file, text, text.find("version").unwrap_or(0))
                    .into())
            }
        }
        let wire: LockWire = toml::from_str(text).map_err(|e| {
            toml_diagnostic(Stage::Lock, file, text, &e)
                .hint("regenerate the lock with `gpustack lock`")
        })?;
        wire.into_lock(file, text)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LockWire {
    version: u32,
    inputs: InputsWire,
    request: RequestWire,
    hardware: HardwareWire,
    #[serde(default)]
    component: Vec<ComponentWire>,
    #[serde(default)]
    package: Vec<PackageWireL>,
    #[serde(default)]
    fact: Vec<FactWireL>,
    #[serde(default)]
    layer: Vec<LayerWire>,
    python: Option<PythonWireL>,
    integrity: Option<toml::Spanned<BTreeMap<String, Vec<String>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct PythonWireL {
    resolver: String,
    exclude_newer: String,
    #[serde(default)]
    lock: Vec<PyLockWire>,
    #[serde(default)]
    build: Vec<PyBuildWire>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PyLockWire {
    layer: String,
    platform: String,
    file: String,
    digest: String,
    inputs: String,
    packages: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PyBuildWire {
    layer: String,
    platform: String,
    name: String,
    version: String,
    url: String,
    sha256: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct PackageWireL {
    name: String,
    version: String,
    layer: String,
    source: String,
    catalog: String,
    #[serde(default)]
    because: Vec<String>,
    #[serde(flatten)]
    fields: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct FactWireL {
    kind: String,
    key: String,
    source: String,
    catalog: String,
    #[serde(default)]
    because: Vec<String>,
    #[serde(flatten)]
    fields: BTreeMap<String, toml::Value>,
}

fn wire_fields(
    raw: BTreeMap<String, toml::Value>,
    what: &str,
    bad: &dyn Fn(String) -> Error,
) -> Result<BTreeMap<String, Field>, Error> {
    let mut fields = BTreeMap::new();
    for (k, v) in raw {
        let f = match v {
            toml::Value::String(s) => Field::Str(s),
            toml::Value::Array(a) => Field::List(
                a.into_iter()
                    .map(|x| {
                        x.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| bad(format!("`{k}` must list strings")))
                    })
                    .collect::<Result<_, _>>()?,
            ),
            _ => {
                return Err(bad(format!(
                    "{what} `{k}` must be a string or a list of strings"
                )))
            }
        };
        fields.insert(k, f);
    }
    Ok(fields)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct InputsWire {
    spec_digest: String,
    catalog_digest: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestWire {
    name: String,
    os: Option<String>,
    #[serde(default)]
    gpus: Vec<String>,
    #[serde(default)]
    archs: Vec<String>,
    driver: Option<String>,
    #[serde(default)]
    components: BTreeMap<String, String>,
    #[serde(rename = "torch-source")]
    torch_source: Option<TorchSourceWire>,
    cluster: Option<toml::Spanned<crate::spec::deploy::ClusterWire>>,
    network: Option<toml::Spanned<crate::spec::deploy::NetworkWire>>,
    image: Option<toml::Spanned<crate::spec::deploy::ImageWire>>,
    train: Option<toml::Spanned<crate::spec::deploy::TrainWire>>,
    serve: Option<toml::Spanned<crate::spec::deploy::ServeWire>>,
    packer: Option<toml::Spanned<crate::spec::deploy::PackerWire>>,
    k8s: Option<toml::Spanned<crate::spec::deploy::K8sWire>>,
    slurm: Option<toml::Spanned<crate::spec::deploy::SlurmWire>>,
    storage: Option<toml::Spanned<crate::spec::deploy::StorageWire>>,
    resolve: Option<toml::Spanned<crate::resolve::spec::ResolveWire>>,
    python: Option<toml::Spanned<crate::resolve::python::PythonWire>>,
}

/// `[request.torch-source]`: written only for a torch source build.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct TorchSourceWire {
    #[serde(default)]
    archs: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct HardwareWire {
    driver: String,
    driver_source: String,
    arch_list: Vec<String>,
    #[serde(default)]
    gpu: Vec<GpuWire>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct GpuWire {
    id: String,
    name: String,
    cc: String,
    datacenter: bool,
    nvswitch: bool,
    memory_gib: Option<u32>,
    gfd_product: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct ComponentWire {
    name: String,
    version: String,
    layer: String,
    requested: String,
    source: String,
    catalog: String,
    #[serde(default)]
    because: Vec<String>,
    #[serde(flatten)]
    fields: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LayerWire {
    name: String,
    components: Vec<String>,
    #[serde(default)]
    packages: Vec<String>,
    hash: String,
}

/// `sha256:` followed by 64 lowercase hex digits: the only digest shape a lock records.
/// Image tags are cut from layer hashes, so anything else must not get past the parser.
fn is_sha256_digest(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

impl LockWire {
    fn into_lock(self, file: &str, text: &str) -> Result<Lock, Error> {
        let diag = |what: String| -> Diagnostic {
            Diagnostic::new(Stage::Lock, what)
                .at(Location::file(file))
                .hint("the lock is generated; regenerate it with `gpustack lock`")
        };
        // Point at the offending value: the first `quoted` word of the message that the
        // file holds as a string.
        let bad = |what: String| -> Error {
            let at = what
                .split('`')
                .skip(1)
                .step_by(2)
                .find_map(|w| text.find(&quote(w)).map(|i| i + 1));
            match at {
                Some(at) => diag(what).at_offset(file, text, at).into(),
                None => diag(what).into(),
            }
        };
        let ver = |s: &str| Version::parse(s).map_err(|e| bad(e.to_string()));
        let digest = |what: &str, s: &str| -> Result<(), Error> {
            if is_sha256_digest(s) {
                return Ok(());
            }
            let mut d = diag(format!(
                "{what} must be `sha256:` and 64 lowercase hex digits, not `{}`",
                s.escape_debug()
            ));
            // Point at the value's line when it is written as a plain string.
            if let Some(off) = text.find(&format!("\"{s}\"")) {
                d = d.at_offset(file, text, off + 1);
            }
            Err(d.into())
        };
        // The stack name becomes file names (`apptainer/<name>.def`) and image names: a
        // lock must not smuggle in what a spec may not hold.
        if !crate::catalog::valid_id(&self.request.name) {
            return Err(Diagnostic::new(
                Stage::Lock,
                format!(
                    "invalid stack name `{}` in [request]: expected [a-z0-9][a-z0-9-]*, at most 63 characters",
                    self.request.name.escape_debug()
                ),
            )
            .at(Location::file(file))
            .hint("the lock is generated from gpustack.toml: fix `[stack].name` there and run `gpustack lock`")
            .into());
        }
        digest("`spec-digest`", &self.inputs.spec_digest)?;
        digest("`catalog-digest`", &self.inputs.catalog_digest)?;
        let mut diags = Vec::new();
        let deploy = crate::spec::deploy::DeployWire {
            cluster: self.request.cluster,
            network: self.request.network,
            image: self.request.image,
            train: self.request.train,
            serve: self.request.serve,
            packer: self.request.packer,
            k8s: self.request.k8s,
            slurm: self.request.slurm,
            storage: self.request.storage,
            resolve: self.request.resolve,
            python: self.request.python,
        }
        .validate(&mut crate::spec::deploy::At {
            file,
            text,
            diags: &mut diags,
        });
        if !diags.is_empty() {
            for d in &mut diags {
                d.stage = Stage::Lock;
            }
            return Err(Error::Invalid(diags));
        }
        let mut components = BTreeMap::new();
        for (k, v) in &self.request.components {
            let c = Component::from_name(k)
                .ok_or_else(|| bad(format!("unknown component `{k}` in [request.components]")))?;
            components.insert(c, VersionReq::parse(v).map_err(|e| bad(e.to_string()))?);
        }
        let request = Spec {
            name: self.request.name,
            os: self.request.os,
            gpus: self.request.gpus,
            archs: self
                .request
                .archs
                .iter()
                .map(|a| Target::parse(a).map_err(&bad))
                .collect::<Result<_, _>>()?,
            driver: self.request.driver.as_deref().map(ver).transpose()?,
            components,
            torch_source: match self.request.torch_source {
                None => None,
                Some(t) => {
                    let mut archs = Vec::new();
                    for a in &t.archs {
                        archs.extend(crate::core::arch::parse_torch_entry(a).map_err(&bad)?);
                    }
                    archs.sort();
                    archs.dedup();
                    Some(crate::spec::TorchSourceReq { archs })
                }
            },
            deploy,
            check: Vec::new(),
        };
        let gpus = self
            .hardware
            .gpu
            .into_iter()
            .map(|g| {
                Ok(LockedGpu {
                    id: g.id,
                    name: g.name,
                    cc: g.cc.parse().map_err(&bad)?,
                    datacenter: g.datacenter,
                    nvswitch: g.nvswitch,
                    memory_gib: g.memory_gib,
                    gfd_product: g.gfd_product,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let hardware = Hardware {
            gpus,
            arch_list: self
                .hardware
                .arch_list
                .iter()
                .map(|a| Target::parse(a).map_err(&bad))
                .collect::<Result<_, _>>()?,
            driver: ver(&self.hardware.driver)?,
            driver_installed: match self.hardware.driver_source.as_str() {
                "installed" => true,
                "resolved" => false,
                o => {
                    return Err(bad(format!(
                        "`driver-source` must be `installed` or `resolved`, not `{o}`"
                    )))
                }
            },
        };
        let mut comps = Vec::new();
        for c in self.component {
            let name = Component::from_name(&c.name)
                .ok_or_else(|| bad(format!("unknown component `{}`", c.name)))?;
            let layer = Layer::from_any_name(&c.layer)
                .ok_or_else(|| bad(format!("unknown layer `{}`", c.layer)))?;
            let fields = wire_fields(c.fields, "component field", &bad)?;
            comps.push(LockedComponent {
                name,
                version: ver(&c.version)?,
                layer,
                requested: c.requested,
                source: c.source,
                catalog: c.catalog,
                fields,
                because: c.because,
            });
        }
        let mut packages = Vec::new();
        for p in self.package {
            let layer = Layer::from_any_name(&p.layer)
                .ok_or_else(|| bad(format!("unknown layer `{}`", p.layer)))?;
            packages.push(LockedPackage {
                name: p.name,
                version: p.version,
                layer,
                source: p.source,
                catalog: p.catalog,
                fields: wire_fields(p.fields, "package field", &bad)?,
                because: p.because,
            });
        }
        let mut facts = Vec::new();
        for f in self.fact {
            facts.push(LockedFact {
                kind: f.kind,
                key: f.key,
                source: f.source,
                catalog: f.catalog,
                fields: wire_fields(f.fields, "fact field", &bad)?,
                because: f.because,
            });
        }
        let mut layers = Vec::new();
        for l in self.layer {
            let layer = Layer::from_any_name(&l.name)
                .ok_or_else(|| bad(format!("unknown layer `{}`", l.name)))?;
            digest(&format!("layer `{}` hash", l.name), &l.hash)?;
            let components = l
                .components
                .iter()
                .map(|c| {
                    Component::from_name(c).ok_or_else(|| bad(format!("unknown component `{c}`")))
                })
                .collect::<Result<_, _>>()?;
            layers.push(LockedLayer {
                layer,
                components,
                packages: l.packages,
                hash: l.hash,
            });
        }
        let mut integrity = Vec::new();
        match (self.integrity, self.version >= SEALED_SINCE) {
            (None, true) => {
                return Err(diag(format!(
                    "a version {} lock must end with an `[integrity]` table sealing its tables",
                    self.version
                ))
                .hint("the lock is generated; regenerate it with `gpustack lock` instead of editing it")
                .into())
            }
            (Some(_), false) => {
                return Err(diag(format!(
                    "a version {} lock has no `[integrity]` table (it came with version {SEALED_SINCE})",
                    self.version
                ))
                .at_offset(file, text, text.find("version").unwrap_or(0))
                .into())
            }
            (Some(t), true) => {
                let span = t.span().start;
                for (table, v) in t.into_inner() {
                    let ok = matches!(v.as_slice(), [d, l] if is_sha256_digest(d)
                        && l.len() % 4 == 0
                        && l.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
                    if !ok {
                        let at = text[span.min(text.len())..]
                            .find(&format!("{} = ", quote(&table)))
                            .or_else(|| text[span.min(text.len())..].find(&format!("\n{table} = ")).map(|i| i + 1))
                            .map_or(span, |i| span + i);
                        return Err(diag(format!(
                            "[integrity] entry `{table}` must be [\"sha256:<64 hex digits>\", \"<four hex digits per line>\"]"
                        ))
                        .at_offset(file, text, at)
                        .into());
                    }
                    let mut v = v.into_iter();
                    integrity.push(Seal {
                        table,
                        digest: v.next().unwrap_or_default(),
                        lines: v.next().unwrap_or_default(),
                    });
                }
            }
            (None, false) => {}
        }
        let python = match self.python {
            None => None,
            Some(p) => {
                let mut files = Vec::new();
                for f in p.lock {
                    digest(&format!("`{}` digest", f.file), &f.digest)?;
                    digest(&format!("`{}` inputs", f.file), &f.inputs)?;
                    // A file name becomes a path beside the lock and a COPY source.
                    let ok = f.file.starts_with("pylock.")
                        && f.file.ends_with(".toml")
                        && f.file.len() <= 64
                        && f.file.bytes().all(|c| {
                            c.is_ascii_lowercase() || c.is_ascii_digit() || b"._-".contains(&c)
                        });
                    if !ok
                        || !matches!(
                            f.layer.as_str(),
                            "framework" | "inference" | "training" | "build"
                        )
                    {
                        return Err(bad(format!(
                            "invalid [[python.lock]] entry `{}` (layer `{}`)",
                            f.file.escape_debug(),
                            f.layer.escape_debug()
                        )));
                    }
                    files.push(PyLockFile {
                        layer: f.layer,
                        platform: f.platform,
                        file: f.file,
                        digest: f.digest,
                        inputs: f.inputs,
                        packages: f.packages,
                        contents: None,
                    });
                }
                let mut builds = Vec::new();
                for b in p.build {
                    let hex_ok = b.sha256.len() == 64
                        && b.sha256
                            .bytes()
                            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c));
                    if !hex_ok || !crate::resolve::spec::is_url(&b.url) {
                        return Err(bad(format!(
                            "invalid [[python.build]] entry for `{}`",
                            b.name.escape_debug()
                        )));
                    }
                    builds.push(PyBuild {
                        layer: b.layer,
                        platform: b.platform,
                        name: b.name,
                        version: b.version,
                        url: b.url,
                        sha256: b.sha256,
                    });
                }
                Some(PythonLock {
                    resolver: p.resolver,
                    exclude_newer: p.exclude_newer,
                    files,
                    builds,
                })
            }
        };
        Ok(Lock {
            integrity,
            python,
            format: self.version,
            spec_digest: self.inputs.spec_digest,
            catalog_digest: self.inputs.catalog_digest,
            request,
            hardware,
            components: comps,
            packages,
            facts,
            layers,
        })
    }
}
