//! The reader: a version peek, permissive wire types, then `into_lock` with the invariants.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{
    quote, Hardware, Lock, LockedComponent, LockedFact, LockedGpu, LockedLayer, LockedPackage,
    PyBuild, PyLockFile, PythonLock, Seal, LOCK_REVISION, LOCK_VERSION, LOCK_VERSION_MIN,
    SEALED_SINCE,
};
use crate::core::arch::Target;
use crate::core::version::{Version, VersionReq};
use crate::core::{Component, Field, Layer};
use crate::error::{toml_diagnostic, Diagnostic, Error, Location, Stage};
use crate::spec::Spec;

impl Lock {
    /// Parses a lock. `file` is used in messages only.
    pub fn parse(file: &str, text: &str) -> Result<Lock, Error> {
        match Lock::parse_canonical(file, text) {
            Some(lock) => Ok(lock),
            None => Lock::parse_toml(file, text),
        }
    }

    /// [`Lock::parse`] with the `toml` parser, whatever the text: what reads a lock that is
    /// not in its canonical form (an older revision, a hand edit), and says what is wrong.
    pub(crate) fn parse_toml(file: &str, text: &str) -> Result<Lock, Error> {
        // The text is parsed once; the version peek and the wire types both read the
        // parsed document (`toml::from_str` is this parse followed by the deserialization).
        let root = toml::de::DeTable::parse(text).map_err(|e| {
            toml_diagnostic(Stage::Lock, file, text, &e).hint(
                "the lock is generated; regenerate it with `gpustack lock` instead of editing it",
            )
        })?;
        let (version, revision) = peek(file, text, &root)?;
        // A newer revision of this version only adds keys an older reader may skip
        // (the module's evolution policy): read its `[request]` tolerantly.
        if version == LOCK_VERSION && revision > LOCK_REVISION {
            wire::<true>(file, text, root)?.into_lock(file, text)
        } else {
            wire::<false>(file, text, root)?.into_lock(file, text)
        }
    }
}

fn wire<'i, const TOLERANT: bool>(
    file: &str,
    text: &str,
    root: toml::Spanned<toml::de::DeTable<'i>>,
) -> Result<LockWire<TOLERANT>, Error> {
    LockWire::deserialize(toml::de::Deserializer::from(root)).map_err(|e| {
        toml_diagnostic(Stage::Lock, file, text, &e)
            .hint("regenerate the lock with `gpustack lock`")
            .into()
    })
}

/// The lock's `version` and `revision` (0 when absent), checked before anything else is
/// read: a version this gpustack does not read is refused by name.
fn peek(
    file: &str,
    text: &str,
    root: &toml::Spanned<toml::de::DeTable<'_>>,
) -> Result<(u32, u32), Error> {
    #[derive(Deserialize)]
    struct Peek {
        version: Option<toml::Value>,
        revision: Option<toml::Value>,
    }
    // Only the two keys are copied out of the parsed document.
    let mut keys = toml::de::DeTable::new();
    for key in ["version", "revision"] {
        if let Some((k, v)) = root.get_ref().get_key_value(key) {
            keys.insert(k.clone(), v.clone());
        }
    }
    let keys = toml::Spanned::new(root.span(), keys);
    let peek = Peek::deserialize(toml::de::Deserializer::from(keys)).map_err(|e| {
        toml_diagnostic(Stage::Lock, file, text, &e)
            .hint("the lock is generated; regenerate it with `gpustack lock` instead of editing it")
    })?;
    let at = |key: &str| text.find(key).unwrap_or(0);
    let version = match peek.version {
        None => {
            return Err(Diagnostic::new(
                Stage::Lock,
                "this is not a gpustack lockfile: it has no `version`",
            )
            .at(Location::file(file))
            .hint("generate one with `gpustack lock`")
            .into())
        }
        Some(toml::Value::Integer(n))
            if (i64::from(LOCK_VERSION_MIN)..=i64::from(LOCK_VERSION)).contains(&n) =>
        {
            u32::try_from(n).unwrap_or(LOCK_VERSION)
        }
        Some(toml::Value::Integer(n)) => {
            return Err(Diagnostic::new(Stage::Lock, format!("unsupported lockfile version {n} (this gpustack reads versions {LOCK_VERSION_MIN} to {LOCK_VERSION})"))
                .at_offset(file, text, at("version"))
                .hint(if n > i64::from(LOCK_VERSION) {
                    "the lock was written by a newer gpustack: upgrade gpustack, or re-lock with this one"
                } else {
                    "re-lock with `gpustack lock` to write the current format"
                })
                .into())
        }
        Some(v) => {
            return Err(Diagnostic::new(
                Stage::Lock,
                format!("lockfile `version` must be an integer, not {}", v.type_str()),
            )
            .at_offset(file, text, at("version"))
            .into())
        }
    };
    let revision = match peek.revision {
        None => 0,
        Some(toml::Value::Integer(n)) if n >= 0 => u32::try_from(n).unwrap_or(u32::MAX),
        Some(v) => {
            return Err(Diagnostic::new(
                Stage::Lock,
                format!(
                    "lockfile `revision` must be a non-negative integer, not {}",
                    v.type_str()
                ),
            )
            .at_offset(file, text, at("revision"))
            .into())
        }
    };
    Ok((version, revision))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LockWire<const TOLERANT: bool> {
    version: u32,
    #[serde(default)]
    revision: u32,
    inputs: InputsWire,
    request: RequestWire<TOLERANT>,
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

/// `[request]`: the spec's head keys, and its deployment tables read with the spec's own
/// wire types. With `TOLERANT` (a lock of a newer revision), keys this gpustack does not
/// know are skipped at every depth ([`super::tolerant`]); without, they are errors.
#[derive(Default)]
struct RequestWire<const TOLERANT: bool> {
    name: String,
    os: Option<String>,
    gpus: Vec<String>,
    archs: Vec<String>,
    driver: Option<String>,
    components: BTreeMap<String, String>,
    torch_source: Option<TorchSourceWire>,
    deploy: crate::spec::deploy::DeployWire,
}

/// The keys of `[request]`, in the order serde's messages list them.
const REQUEST_KEYS: &[&str] = &[
    "name",
    "os",
    "gpus",
    "archs",
    "driver",
    "components",
    "torch-source",
    "cluster",
    "network",
    "image",
    "train",
    "serve",
    "packer",
    "k8s",
    "slurm",
    "storage",
    "resolve",
    "python",
];

impl<'de, const TOLERANT: bool> Deserialize<'de> for RequestWire<TOLERANT> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<const T: bool>;
        impl<'de, const T: bool> serde::de::Visitor<'de> for V<T> {
            type Value = RequestWire<T>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("struct RequestWire")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut r = RequestWire::<T>::default();
                let mut name = None;
                while let Some(key) = map.next_key::<String>()? {
                    request_key(&mut r, &mut name, &key, &mut map)?;
                }
                r.name = name.ok_or_else(|| serde::de::Error::missing_field("name"))?;
                Ok(r)
            }
        }
        d.deserialize_struct("RequestWire", REQUEST_KEYS, V::<TOLERANT>)
    }
}

/// Reads one `[request]` key into `r`. The deployment tables' types are the spec's, named
/// by the fields they fill.
fn request_key<'de, A: serde::de::MapAccess<'de>, const T: bool>(
    r: &mut RequestWire<T>,
    name: &mut Option<String>,
    key: &str,
    map: &mut A,
) -> Result<(), A::Error> {
    use super::tolerant::next_value as next;
    let d = &mut r.deploy;
    match key {
        "name" => *name = Some(next(map, T)?),
        "os" => r.os = Some(next(map, T)?),
        "gpus" => r.gpus = next(map, T)?,
        "archs" => r.archs = next(map, T)?,
        "driver" => r.driver = Some(next(map, T)?),
        "components" => r.components = next(map, T)?,
        "torch-source" => r.torch_source = Some(next(map, T)?),
        "cluster" => d.cluster = Some(next(map, T)?),
        "network" => d.network = Some(next(map, T)?),
        "image" => d.image = Some(next(map, T)?),
        "train" => d.train = Some(next(map, T)?),
        "serve" => d.serve = Some(next(map, T)?),
        "packer" => d.packer = Some(next(map, T)?),
        "k8s" => d.k8s = Some(next(map, T)?),
        "slurm" => d.slurm = Some(next(map, T)?),
        "storage" => d.storage = Some(next(map, T)?),
        "resolve" => d.resolve = Some(next(map, T)?),
        "python" => d.python = Some(next(map, T)?),
        _ if T => {
            map.next_value::<serde::de::IgnoredAny>()?;
        }
        other => return Err(serde::de::Error::unknown_field(other, REQUEST_KEYS)),
    }
    Ok(())
}

/// `[request.torch-source]`: written only for a torch source build.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct TorchSourceWire {
    #[serde(default)]
    archs: Vec<String>,
    #[serde(default)]
    prebuilt_url: Option<String>,
    #[serde(default)]
    prebuilt_sha256: Option<String>,
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

/// The reader's context: the file's name and text, for messages that point into it.
#[derive(Clone, Copy)]
struct Cx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Cx<'_> {
    fn diag(self, what: String) -> Diagnostic {
        Diagnostic::new(Stage::Lock, what)
            .at(Location::file(self.file))
            .hint("the lock is generated; regenerate it with `gpustack lock`")
    }

    /// Points at the offending value: the first `quoted` word of the message that the
    /// file holds as a string.
    fn bad(self, what: String) -> Error {
        let at = what
            .split('`')
            .skip(1)
            .step_by(2)
            .find_map(|w| self.text.find(&quote(w)).map(|i| i + 1));
        match at {
            Some(at) => self.diag(what).at_offset(self.file, self.text, at).into(),
            None => self.diag(what).into(),
        }
    }

    fn ver(self, s: &str) -> Result<Version, Error> {
        Version::parse(s).map_err(|e| self.bad(e.to_string()))
    }

    fn digest(self, what: &str, s: &str) -> Result<(), Error> {
        if is_sha256_digest(s) {
            return Ok(());
        }
        let mut d = self.diag(format!(
            "{what} must be `sha256:` and 64 lowercase hex digits, not `{}`",
            s.escape_debug()
        ));
        // Point at the value's line when it is written as a plain string.
        if let Some(off) = self.text.find(&format!("\"{s}\"")) {
            d = d.at_offset(self.file, self.text, off + 1);
        }
        Err(d.into())
    }

    /// The stack name becomes file names (`apptainer/<name>.def`) and image names: a lock
    /// must not smuggle in what a spec may not hold.
    fn stack_name(self, name: &str) -> Result<(), Error> {
        if crate::catalog::valid_id(name) {
            return Ok(());
        }
        Err(Diagnostic::new(
            Stage::Lock,
            format!(
                "invalid stack name `{}` in [request]: expected [a-z0-9][a-z0-9-]*, at most 63 characters",
                name.escape_debug()
            ),
        )
        .at(Location::file(self.file))
        .hint("the lock is generated from gpustack.toml: fix `[stack].name` there and run `gpustack lock`")
        .into())
    }

    /// `[request]` as a [`Spec`]: the deployment tables validated by the spec's own rules.
    fn request<const T: bool>(self, r: RequestWire<T>) -> Result<Spec, Error> {
        let (file, text) = (self.file, self.text);
        let mut diags = Vec::new();
        let deploy = r.deploy.validate(&mut crate::spec::at::At {
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
        for (k, v) in &r.components {
            let c = Component::from_name(k).ok_or_else(|| {
                self.bad(format!("unknown component `{k}` in [request.components]"))
            })?;
            components.insert(
                c,
                VersionReq::parse(v).map_err(|e| self.bad(e.to_string()))?,
            );
        }
        let request = Spec {
            name: r.name,
            os: r.os,
            gpus: r.gpus,
            archs: r
                .archs
                .iter()
                .map(|a| Target::parse(a).map_err(|e| self.bad(e)))
                .collect::<Result<_, _>>()?,
            driver: r.driver.as_deref().map(|v| self.ver(v)).transpose()?,
            components,
            torch_source: match r.torch_source {
                None => None,
                Some(t) => {
                    let mut archs = Vec::new();
                    for a in &t.archs {
                        archs.extend(
                            crate::core::arch::parse_torch_entry(a).map_err(|e| self.bad(e))?,
                        );
                    }
                    archs.sort();
                    archs.dedup();
                    let prebuilt = match (&t.prebuilt_url, &t.prebuilt_sha256) {
                        (None, None) => None,
                        (Some(u), Some(h)) => Some(
                            crate::spec::PrebuiltWheel::new(u, h).map_err(|(m, _)| self.bad(m))?,
                        ),
                        _ => {
                            return Err(self.bad(
                                "[request.torch-source] has one of `prebuilt-url` and `prebuilt-sha256` without the other".into(),
                            ))
                        }
                    };
                    Some(crate::spec::TorchSourceReq { archs, prebuilt })
                }
            },
            deploy,
            check: Vec::new(),
        };
        Ok(request)
    }

    fn hardware(self, hw: HardwareWire) -> Result<Hardware, Error> {
        let gpus = hw
            .gpu
            .into_iter()
            .map(|g| {
                Ok(LockedGpu {
                    id: g.id,
                    name: g.name,
                    cc: g.cc.parse().map_err(|e| self.bad(e))?,
                    datacenter: g.datacenter,
                    nvswitch: g.nvswitch,
                    memory_gib: g.memory_gib,
                    gfd_product: g.gfd_product,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let hardware = Hardware {
            gpus,
            arch_list: hw
                .arch_list
                .iter()
                .map(|a| Target::parse(a).map_err(|e| self.bad(e)))
                .collect::<Result<_, _>>()?,
            driver: self.ver(&hw.driver)?,
            driver_installed: match hw.driver_source.as_str() {
                "installed" => true,
                "resolved" => false,
                o => {
                    return Err(self.bad(format!(
                        "`driver-source` must be `installed` or `resolved`, not `{o}`"
                    )))
                }
            },
        };
        Ok(hardware)
    }

    fn components(self, wire: Vec<ComponentWire>) -> Result<Vec<LockedComponent>, Error> {
        let mut comps = Vec::new();
        for c in wire {
            let name = Component::from_name(&c.name)
                .ok_or_else(|| self.bad(format!("unknown component `{}`", c.name)))?;
            let layer = Layer::from_any_name(&c.layer)
                .ok_or_else(|| self.bad(format!("unknown layer `{}`", c.layer)))?;
            let fields = wire_fields(c.fields, "component field", &|w| self.bad(w))?;
            comps.push(LockedComponent {
                name,
                version: self.ver(&c.version)?,
                layer,
                requested: c.requested,
                source: c.source,
                catalog: c.catalog,
                fields,
                because: c.because,
            });
        }
        Ok(comps)
    }

    fn packages(self, wire: Vec<PackageWireL>) -> Result<Vec<LockedPackage>, Error> {
        let mut packages = Vec::new();
        for p in wire {
            let layer = Layer::from_any_name(&p.layer)
                .ok_or_else(|| self.bad(format!("unknown layer `{}`", p.layer)))?;
            packages.push(LockedPackage {
                name: p.name,
                version: p.version,
                layer,
                source: p.source,
                catalog: p.catalog,
                fields: wire_fields(p.fields, "package field", &|w| self.bad(w))?,
                because: p.because,
            });
        }
        Ok(packages)
    }

    fn facts(self, wire: Vec<FactWireL>) -> Result<Vec<LockedFact>, Error> {
        let mut facts = Vec::new();
        for f in wire {
            facts.push(LockedFact {
                kind: f.kind,
                key: f.key,
                source: f.source,
                catalog: f.catalog,
                fields: wire_fields(f.fields, "fact field", &|w| self.bad(w))?,
                because: f.because,
            });
        }
        Ok(facts)
    }

    fn layers(self, wire: Vec<LayerWire>) -> Result<Vec<LockedLayer>, Error> {
        let mut layers = Vec::new();
        for l in wire {
            let layer = Layer::from_any_name(&l.name)
                .ok_or_else(|| self.bad(format!("unknown layer `{}`", l.name)))?;
            self.digest(&format!("layer `{}` hash", l.name), &l.hash)?;
            let components = l
                .components
                .iter()
                .map(|c| {
                    Component::from_name(c)
                        .ok_or_else(|| self.bad(format!("unknown component `{c}`")))
                })
                .collect::<Result<_, _>>()?;
            layers.push(LockedLayer {
                layer,
                components,
                packages: l.packages,
                hash: l.hash,
            });
        }
        Ok(layers)
    }

    /// The `[integrity]` seals: required from version 4 on, refused before.
    fn integrity(
        self,
        table: Option<toml::Spanned<BTreeMap<String, Vec<String>>>>,
        version: u32,
    ) -> Result<Vec<Seal>, Error> {
        let (file, text) = (self.file, self.text);
        let mut integrity = Vec::new();
        match (table, version >= SEALED_SINCE) {
        (None, true) => {
            return Err(self.diag(format!(
                "a version {} lock must end with an `[integrity]` table sealing its tables",
                version
            ))
            .hint("the lock is generated; regenerate it with `gpustack lock` instead of editing it")
            .into())
        }
        (Some(_), false) => {
            return Err(self.diag(format!(
                "a version {} lock has no `[integrity]` table (it came with version {SEALED_SINCE})",
                version
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
                    return Err(self.diag(format!(
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
        Ok(integrity)
    }

    /// `[python]`: the pylock files (names that become paths beside the lock) and the
    /// sdists the build stage compiles.
    fn python(self, wire: Option<PythonWireL>) -> Result<Option<PythonLock>, Error> {
        let python = match wire {
            None => None,
            Some(p) => {
                let mut files = Vec::new();
                for f in p.lock {
                    self.digest(&format!("`{}` digest", f.file), &f.digest)?;
                    self.digest(&format!("`{}` inputs", f.file), &f.inputs)?;
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
                        return Err(self.bad(format!(
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
                    if !hex_ok || !crate::spec::resolve::is_url(&b.url) {
                        return Err(self.bad(format!(
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
        Ok(python)
    }
}

impl<const TOLERANT: bool> LockWire<TOLERANT> {
    pub(super) fn into_lock(self, file: &str, text: &str) -> Result<Lock, Error> {
        let cx = Cx { file, text };
        cx.stack_name(&self.request.name)?;
        cx.digest("`spec-digest`", &self.inputs.spec_digest)?;
        cx.digest("`catalog-digest`", &self.inputs.catalog_digest)?;
        let request = cx.request(self.request)?;
        let hardware = cx.hardware(self.hardware)?;
        let components = cx.components(self.component)?;
        let packages = cx.packages(self.package)?;
        let facts = cx.facts(self.fact)?;
        let layers = cx.layers(self.layer)?;
        let integrity = cx.integrity(self.integrity, self.version)?;
        let python = cx.python(self.python)?;
        Ok(Lock {
            integrity,
            python,
            format: self.version,
            revision: self.revision,
            spec_digest: self.inputs.spec_digest,
            catalog_digest: self.inputs.catalog_digest,
            request,
            hardware,
            components,
            packages,
            facts,
            layers,
        })
    }
}
