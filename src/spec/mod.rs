//! The user's request, `gpustack.toml`.
//!
//! ```toml
//! [stack]
//! name = "llm-train"            # required; [a-z0-9][a-z0-9-]*
//! os = "ubuntu22.04"            # optional
//! [hardware]
//! gpus = ["h100"]               # catalog ids, aliases or nvidia-smi names, any case
//! archs = ["sm_90"]             # also "9.0", "90", "sm90", "sm_90a"
//! driver = "550.54.15"          # installed on the nodes; omit it and gpustack picks one
//! [components]                  # listed = part of the stack; omitted = absent
//! cuda = "12.4"
//! torch = ">=2.4, <2.6"
//! ```
//!
//! Parsing is two steps: TOML into private wire types (`SpecWire`; unknown keys and
//! tables are errors with a hint), then validation against the catalog (GPU names) into a
//! [`Spec`], which is exactly the request the lock records. The same wire types define the
//! keys of the spec's JSON Schema ([`crate::spec::schema`]).

pub use crate::core::{Component, Layer};
pub(crate) mod at;
pub(crate) mod check;
pub mod deploy;
pub mod pep508;
pub mod python;
pub mod resolve;
pub mod schema;
mod shape;

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use crate::catalog::{valid_id, Catalog};
use crate::core::arch::{Cc, Target};
use crate::core::names::did_you_mean;
use crate::core::version::{Version, VersionReq};
use crate::error::{toml_diagnostic, Diagnostic, Error, Location, Stage};

/// The validated request.
///
/// Build one with [`Spec::parse`], which checks every value against the catalog (GPU ids
/// become canonical, requirements are parsed, deployment values are validated) and
/// reports every problem with its `file:line:col`. The fields are public so that a tool
/// can read a request, or adjust a parsed one with typed values
/// (`spec.components.insert(Component::Nccl, VersionReq::any())`). A `Spec` assembled
/// field by field skips that validation: the solver ignores GPU ids the catalog does not
/// know, so prefer parsing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// `[stack].name`.
    pub name: String,
    /// `[stack].os`.
    pub os: Option<String>,
    /// Canonical GPU ids, in the order given, deduplicated.
    pub gpus: Vec<String>,
    /// Extra targets from `[hardware].archs`, normalized (`sm_90a`), deduplicated.
    pub archs: Vec<Target>,
    /// The installed driver, a host fact.
    pub driver: Option<Version>,
    /// Listed components and their requirements.
    pub components: BTreeMap<Component, VersionReq>,
    /// `torch = { version = "…", build = "source" }`: torch compiled from its release's
    /// source against the lock's CUDA, cuDNN and NCCL instead of installed as a wheel.
    pub torch_source: Option<TorchSourceReq>,
    /// The generators' tables.
    pub deploy: crate::spec::deploy::Deploy,
    /// `[check].allow`: warnings the spec acknowledges, each with a reason. Review policy,
    /// not part of the request: the lock does not record it and changing it does not make
    /// the lock stale.
    pub check: Vec<check::Allowance>,
}

/// A torch source build, as requested.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TorchSourceReq {
    /// The `TORCH_CUDA_ARCH_LIST` to build, sorted and deduplicated (`+PTX` adds the PTX
    /// target); empty means the GPUs' own list (`[hardware]`).
    pub archs: Vec<Target>,
    /// `prebuilt = { url, sha256 }`: a wheel of this build the user already has (built once
    /// by the `torch-build` stage and uploaded to a cache); Packer installs it, checked by
    /// its sha256, instead of building on the VM.
    pub prebuilt: Option<PrebuiltWheel>,
}

/// A previously built torch wheel the user names: where it is and its sha256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrebuiltWheel {
    /// An `https://` URL whose last segment is the wheel's file name (`torch-….whl`).
    pub url: String,
    /// 64 lowercase hex digits.
    pub sha256: String,
}

impl PrebuiltWheel {
    /// Checks a URL and digest: `https://`, no shell or template syntax, a `torch-*.whl`
    /// file name, a sha256 of 64 lowercase hex digits. `Err` holds (message, hint).
    pub fn new(url: &str, sha256: &str) -> Result<PrebuiltWheel, (String, String)> {
        let rest = url.strip_prefix("https://").unwrap_or_default();
        let plain = !rest.is_empty()
            && rest.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'-' | b'_' | b'+' | b'%')
            });
        let file = rest.rsplit('/').next().unwrap_or_default();
        if !plain || !file.starts_with("torch-") || !file.ends_with(".whl") {
            return Err((
                format!("`prebuilt.url` `{}` must be an https:// URL of a `torch-….whl` file (letters, digits, `/._-+%` only)", url.escape_debug()),
                "name the wheel the `torch-build` stage built, as uploaded: `url = \"https://cache.example.org/torch-2.10.0+cu128-cp311-cp311-linux_x86_64.whl\"`".into(),
            ));
        }
        if sha256.len() != 64
            || !sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err((
                format!(
                    "`prebuilt.sha256` `{}` must be 64 lowercase hex digits",
                    sha256.escape_debug()
                ),
                "write the wheel's digest as `sha256sum` prints it".into(),
            ));
        }
        Ok(PrebuiltWheel {
            url: url.to_string(),
            sha256: sha256.to_string(),
        })
    }

    /// The wheel's file name, the URL's last segment (`%2B` read as `+`).
    pub fn file_name(&self) -> String {
        self.url
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .replace("%2B", "+")
    }
}

/// Reads `prebuilt = { url = "…", sha256 = "…" }` of the `torch` table.
fn prebuilt(v: &toml::Value) -> Result<PrebuiltWheel, (String, String)> {
    let hint = "write `prebuilt = { url = \"https://…/torch-….whl\", sha256 = \"…\" }`";
    let Some(t) = v.as_table() else {
        return Err((
            "`prebuilt` in the `torch` table must be a table".into(),
            hint.into(),
        ));
    };
    if let Some(k) = t.keys().find(|k| !matches!(k.as_str(), "url" | "sha256")) {
        return Err((
            format!("unknown key `{}` in `prebuilt`", k.escape_debug()),
            hint.into(),
        ));
    }
    match (
        t.get("url").and_then(toml::Value::as_str),
        t.get("sha256").and_then(toml::Value::as_str),
    ) {
        (Some(u), Some(h)) => PrebuiltWheel::new(u, h),
        _ => Err((
            "`prebuilt` needs a string `url` and a string `sha256`".into(),
            hint.into(),
        )),
    }
}

/// The keys of the `torch = { … }` table form.
pub(crate) const TORCH_TABLE_KEYS: &[&str] = &["version", "build", "archs", "prebuilt"];

/// Components a torch source build refuses (see [`Spec::parse`]): vLLM, DeepSpeed and the
/// extras whose wheels require `torch` or are built against its ABI.
pub(crate) const REBUILT_AGAINST_TORCH: &[Component] = &[
    Component::Vllm,
    Component::Deepspeed,
    Component::FlashAttn,
    Component::Xformers,
    Component::Accelerate,
    Component::Bitsandbytes,
    Component::TensorrtLlm,
];

/// Reads `torch = { version = "…", build = "source", archs = […] }`: the requirement text
/// and the source build, if asked; or a message and a hint.
fn torch_table(
    tbl: &toml::value::Table,
) -> Result<(String, Option<TorchSourceReq>), (String, String)> {
    for k in tbl.keys() {
        if !TORCH_TABLE_KEYS.contains(&k.as_str()) {
            return Err((
                format!("unknown key `{}` in the `torch` table", k.escape_debug()),
                "the `torch` table takes `version`, `build` (`\"wheel\"` or `\"source\"`), `archs` and `prebuilt`".into(),
            ));
        }
    }
    let req = match tbl.get("version") {
        None => "*".to_string(),
        Some(toml::Value::String(s)) => s.clone(),
        Some(_) => {
            return Err((
                "`version` in the `torch` table must be a string".into(),
                "write `version = \"==2.10.0\"`".into(),
            ))
        }
    };
    let source = match tbl.get("build").map(toml::Value::as_str) {
        None | Some(Some("wheel")) => false,
        Some(Some("source")) => true,
        Some(other) => {
            return Err((
                format!(
                    "`build` in the `torch` table must be `\"wheel\"` or `\"source\"`, not {}",
                    other.map_or_else(|| "a non-string".to_string(), |s| format!("`\"{}\"`", s.escape_debug()))
                ),
                "`build = \"source\"` compiles torch from its release tag; leave `build` out for the wheel".into(),
            ))
        }
    };
    let mut archs = Vec::new();
    if let Some(a) = tbl.get("archs") {
        if !source {
            return Err((
                "`archs` in the `torch` table applies to source builds only: a wheel's arch list is fixed".into(),
                "add `build = \"source\"`, or list the GPUs' targets under `[hardware]`".into(),
            ));
        }
        let Some(list) = a.as_array() else {
            return Err((
                "`archs` in the `torch` table must be a list".into(),
                "write `archs = [\"8.0\"]`".into(),
            ));
        };
        for x in list {
            let Some(s) = x.as_str() else {
                return Err((
                    "`archs` in the `torch` table lists strings".into(),
                    "write `archs = [\"8.0\", \"9.0\"]`".into(),
                ));
            };
            match crate::core::arch::parse_torch_entry(s) {
                Ok(ts) => archs.extend(ts),
                Err(e) => {
                    return Err((
                        format!(
                            "invalid arch `{}` in the `torch` table: {e}",
                            s.escape_debug()
                        ),
                        "`archs` takes TORCH_CUDA_ARCH_LIST entries: `8.0`, `9.0a`, `12.0+PTX`"
                            .into(),
                    ))
                }
            }
        }
        if archs.is_empty() {
            return Err((
                "`archs` in the `torch` table is empty".into(),
                "list the targets to build (`archs = [\"8.0\"]`), or leave `archs` out to build for the GPUs in `[hardware]`".into(),
            ));
        }
        archs.sort();
        archs.dedup();
    }
    let prebuilt = match tbl.get("prebuilt") {
        None => None,
        Some(_) if !source => {
            return Err((
                "`prebuilt` in the `torch` table names a wheel of a source build: add `build = \"source\"`".into(),
                "a wheel build installs torch from its index; `prebuilt` reuses a wheel built from source".into(),
            ))
        }
        Some(v) => Some(prebuilt(v)?),
    };
    Ok((req, source.then_some(TorchSourceReq { archs, prebuilt })))
}

/// The spec as written (also read by `crate::spec::schema`, which lists its keys).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SpecWire {
    stack: Option<Spanned<StackWire>>,
    #[serde(default)]
    hardware: Option<Spanned<HardwareWire>>,
    #[serde(default)]
    components: Option<BTreeMap<Spanned<String>, Spanned<toml::Value>>>,
    cluster: Option<Spanned<crate::spec::deploy::ClusterWire>>,
    network: Option<Spanned<crate::spec::deploy::NetworkWire>>,
    image: Option<Spanned<crate::spec::deploy::ImageWire>>,
    train: Option<Spanned<crate::spec::deploy::TrainWire>>,
    serve: Option<Spanned<crate::spec::deploy::ServeWire>>,
    packer: Option<Spanned<crate::spec::deploy::PackerWire>>,
    k8s: Option<Spanned<crate::spec::deploy::K8sWire>>,
    slurm: Option<Spanned<crate::spec::deploy::SlurmWire>>,
    storage: Option<Spanned<crate::spec::deploy::StorageWire>>,
    resolve: Option<Spanned<crate::spec::resolve::ResolveWire>>,
    python: Option<Spanned<crate::spec::python::PythonWire>>,
    check: Option<Spanned<check::CheckWire>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StackWire {
    name: Option<Spanned<String>>,
    os: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HardwareWire {
    #[serde(default)]
    gpus: Vec<Spanned<String>>,
    #[serde(default)]
    archs: Vec<Spanned<String>>,
    driver: Option<Spanned<String>>,
}

const TOP_TABLES: &[&str] = &[
    "stack",
    "hardware",
    "components",
    "cluster",
    "image",
    "train",
    "serve",
    "packer",
    "k8s",
    "slurm",
    "storage",
    "network",
    "resolve",
    "python",
    "check",
];

impl Spec {
    /// Parses and validates `text` (read from `file`, used in messages only).
    ///
    /// Every problem is reported, each at its location and with a hint, as
    /// [`Error::Invalid`]:
    ///
    /// ```
    /// use gpustack::{Catalog, Spec};
    /// let catalog = Catalog::stock()?;
    /// let spec = Spec::parse("gpustack.toml", r#"
    /// [stack]
    /// name = "demo"
    /// [hardware]
    /// gpus = ["H100"]
    /// [components]
    /// torch = "*"
    /// "#, &catalog)?;
    /// assert_eq!(spec.gpus, ["h100"]); // canonical catalog ids
    ///
    /// let err = Spec::parse("gpustack.toml", "[stack]\nname = \"demo\"\n[hardware]\ngpus = [\"h1000\"]\n[components]\ntorch = \"*\"\n", &catalog)
    ///     .unwrap_err();
    /// let text = err.to_string();
    /// assert!(text.starts_with("error: unknown GPU `h1000`\n  --> gpustack.toml:4:9"), "{text}");
    /// assert_eq!(err.exit_code(), 2);
    /// # Ok::<(), gpustack::Error>(())
    /// ```
    pub fn parse(file: &str, text: &str, catalog: &Catalog) -> Result<Spec, Error> {
        let mut diags = Vec::new();
        let (wire, removed) = read_wire(file, text, catalog, &mut diags)?;
        let (name, os) = match parse_stack(file, text, catalog, wire.stack, &mut diags) {
            Ok(stack) => stack,
            Err(Error::Invalid(mut missing)) => {
                diags.append(&mut missing);
                return Err(Error::Invalid(in_file_order(diags, &removed)));
            }
            Err(e) => return Err(e),
        };
        let (gpus, archs, driver) = parse_hardware(file, text, catalog, wire.hardware, &mut diags);
        let (components, torch_source, torch_at) =
            parse_components(file, text, wire.components, &mut diags);
        if torch_source.is_some() {
            refuse_rebuilt_against_torch(file, text, &components, torch_at, &mut diags);
        }
        // An installed driver and a `driver` requirement may both be given: the installed
        // one must then satisfy the requirement (rule `host.driver`).
        let deploy_wire = crate::spec::deploy::DeployWire {
            cluster: wire.cluster,
            network: wire.network,
            image: wire.image,
            train: wire.train,
            serve: wire.serve,
            packer: wire.packer,
            k8s: wire.k8s,
            slurm: wire.slurm,
            storage: wire.storage,
            resolve: wire.resolve,
            python: wire.python,
        };
        let serve_span = deploy_wire.serve.as_ref().map(toml::Spanned::span);
        let k8s_span = deploy_wire.k8s.as_ref().map(toml::Spanned::span);
        let mut at = crate::spec::at::At {
            file,
            text,
            diags: &mut diags,
        };
        let deploy = deploy_wire.validate(&mut at);
        if let Some(span) = k8s_span {
            crate::spec::deploy::fabric_device(&deploy, span, &mut at);
        }
        if let Some(span) = serve_span {
            // Every generator refuses [serve] without vLLM: refuse it here, at its line.
            if !components.contains_key(&Component::Vllm) {
                diags.push(
                    Diagnostic::new(
                        Stage::Spec,
                        "`[serve]` runs vLLM, but `[components]` has no `vllm`",
                    )
                    .at_offset(file, text, span.start)
                    .hint("add `vllm = \"*\"` to [components], or remove [serve]"),
                );
            }
        }
        let check = wire
            .check
            .map(|c| check::allowances(c, file, text, &mut diags))
            .unwrap_or_default();
        if !diags.is_empty() {
            return Err(Error::Invalid(in_file_order(diags, &removed)));
        }
        Ok(Spec {
            name,
            os,
            gpus,
            archs,
            driver,
            components,
            torch_source,
            deploy,
            check,
        })
    }

    /// The compute capabilities the stack must run on: each GPU's and each arch's.
    pub fn capabilities(&self, catalog: &Catalog) -> Vec<Cc> {
        let mut v: Vec<Cc> = self
            .gpus
            .iter()
            .filter_map(|g| catalog.gpu(g))
            .map(|g| g.cc)
            .chain(self.archs.iter().map(|a| a.cc))
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// The targets the stack is built for: each GPU's `sm_XY` plus the listed archs, sorted.
    pub fn arch_list(&self, catalog: &Catalog) -> Vec<Target> {
        let mut v: Vec<Target> = self
            .gpus
            .iter()
            .filter_map(|g| catalog.gpu(g))
            .map(|g| Target::sass(g.cc))
            .chain(self.archs.iter().copied())
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

fn unknown_name(message: &str) -> Option<String> {
    let rest = message.split("unknown field `").nth(1)?;
    Some(rest.split('`').next()?.to_string())
}

fn suggest_name(s: &str) -> String {
    let mut out: String = s
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .trim_matches('-')
        .to_string();
    out.truncate(63);
    if out.is_empty() {
        "my-stack".into()
    } else {
        out
    }
}

/// The offset in the file of byte `at` of a requirement string whose value starts at
/// `value_start` (its opening quote): the caret goes on the operator at fault. Falls back to
/// the quote when the string is written with escapes (the text then differs from the value).
fn req_offset(text: &str, value_start: usize, value: &str, at: usize) -> usize {
    let inner = value_start + 1;
    match text.get(inner..inner + value.len()) {
        Some(raw) if raw == value && at <= value.len() => inner + at,
        _ => value_start,
    }
}

/// The spec's text as its wire type. A syntax error stops here, with a hint about TOML
/// syntax. Otherwise every unknown key and every value of the wrong type is reported into
/// `diags` ([`shape`]) and removed, so that the rest of the spec is still read: the keys
/// removed are returned, so that their absence is not reported again.
fn read_wire(
    file: &str,
    text: &str,
    catalog: &Catalog,
    diags: &mut Vec<Diagnostic>,
) -> Result<(SpecWire, shape::Removed), Error> {
    if text.len() > 1 << 20 {
        return Err(
            Diagnostic::new(Stage::Spec, "the spec is larger than 1 MiB")
                .at(Location::file(file))
                .hint("a gpustack.toml is a few dozen lines; is this the right file?")
                .into(),
        );
    }
    let doc = toml::de::DeTable::parse(text).map_err(|e| {
        let d = toml_diagnostic(Stage::Spec, file, text, &e);
        if d.message.starts_with("duplicate key") {
            d.hint("a key, and a table, may appear once: keep one of them")
        } else if d.hints.is_empty() {
            d.hint("gpustack.toml is TOML (https://toml.io/en/v1.0.0): check the brackets, quotes and `=` near this point")
        } else {
            d
        }
    })?;
    // A well-formed spec is read at once; the schema is built only for one that is not.
    if let Ok(wire) = SpecWire::deserialize(toml::de::Deserializer::from(doc.clone())) {
        return Ok((wire, Vec::new()));
    }
    let mut doc = doc;
    let schema = crate::spec::schema::spec_schema(catalog);
    let removed = shape::check(file, text, doc.get_mut(), &schema, diags);
    match SpecWire::deserialize(toml::de::Deserializer::from(doc)) {
        Ok(wire) => Ok((wire, removed)),
        // A value the shape check lets through but serde refuses (an integer out of
        // range): serde's words, with a hint where one is known.
        Err(e) => {
            diags.push(serde_diagnostic(file, text, &e));
            Err(Error::Invalid(in_file_order(
                std::mem::take(diags),
                &removed,
            )))
        }
    }
}

/// A serde error of the wire types as a diagnostic, with a hint about what was meant.
fn serde_diagnostic(file: &str, text: &str, e: &toml::de::Error) -> Diagnostic {
    let mut d = toml_diagnostic(Stage::Spec, file, text, e);
    if let Some(name) = unknown_name(&d.message) {
        // serde lists the table's own keys: `expected one of `namespace`, `version``.
        let expected: Vec<String> = d
            .message
            .split("expected one of ")
            .nth(1)
            .or_else(|| d.message.split("expected ").nth(1))
            .map(|l| {
                l.split(", ")
                    .map(|k| k.trim_matches('`').to_string())
                    .collect()
            })
            .unwrap_or_default();
        if let Some(s) = did_you_mean(
            &name,
            TOP_TABLES
                .iter()
                .chain(["name", "os", "gpus", "archs", "driver"].iter())
                .copied()
                .chain(expected.iter().map(String::as_str)),
        ) {
            d = d.hint(format!("did you mean `{s}`?"));
        } else if !expected.is_empty() && !expected.iter().any(|k| k == "stack") {
            d = d.hint(format!(
                "this table takes: {}; see the spec reference in the book",
                expected.join(", ")
            ));
        } else {
            d = d.hint("the spec's tables are [stack], [hardware], [components], and for the generators [cluster], [image], [train], [serve], [packer], [k8s], [slurm], [storage], [network] for the site's fabric, [python] and [resolve] for the Python closure, and [check] for acknowledged warnings; see the spec reference in the book");
        }
    }
    d
}

/// The diagnostics in file order (what is missing last), without those that only repeat
/// a key the shape check removed ("`[cluster]` needs `nodes`" after "`nodes` must be a
/// number").
fn in_file_order(mut diags: Vec<Diagnostic>, removed: &shape::Removed) -> Vec<Diagnostic> {
    diags.retain(|d| {
        !removed.iter().any(|(table, key)| {
            d.message.starts_with(&format!("{table} needs `{key}`"))
                || d.message.starts_with(&format!("{table} needs a `{key}`"))
                || (table == "the spec" && d.message == format!("missing the `[{key}]` table"))
                || (table == "`[hardware]`"
                    && (key == "gpus" || key == "archs")
                    && d.message == "`[hardware]` names no GPU")
                || (table == "the spec"
                    && key == "components"
                    && d.message == "`[components]` is empty")
        })
    });
    // Problems at a place of the file (those with a snippet) by place, then what is
    // missing from it.
    diags.sort_by_key(|d| match (&d.snippet, &d.location) {
        (Some(_), Some(l)) => (0, l.line, l.col),
        _ => (1, 0, 0),
    });
    diags
}

/// `[stack]`: the name and the OS. A missing table is an error of its own (nothing else
/// is worth reporting without it).
fn parse_stack(
    file: &str,
    text: &str,
    catalog: &Catalog,
    stack: Option<Spanned<StackWire>>,
    diags: &mut Vec<Diagnostic>,
) -> Result<(String, Option<String>), Error> {
    let at = |span: std::ops::Range<usize>| (file, text, span.start);
    let Some(stack) = stack else {
        return Err(Diagnostic::new(Stage::Spec, "missing the `[stack]` table")
            .at(Location { file: file.to_string(), line: 1, col: 1 })
            .hint("start the spec with:\n\n    [stack]\n    name = \"my-stack\"\n\n`gpustack init` writes a commented starter spec")
            .into());
    };
    let stack_span = stack.span();
    let stack = stack.into_inner();
    let name = match stack.name {
        None => {
            diags.push(
                Diagnostic::new(Stage::Spec, "`[stack]` needs a `name`")
                    .at_offset(file, text, stack_span.start)
                    .hint("add `name = \"my-stack\"` (lowercase letters, digits and `-`)"),
            );
            String::new()
        }
        Some(n) => {
            let (f, t, o) = at(n.span());
            if !valid_id(n.get_ref()) {
                diags.push(
                    Diagnostic::new(Stage::Spec, format!("invalid stack name `{}`: expected [a-z0-9][a-z0-9-]*, at most 63 characters", n.get_ref().escape_debug()))
                        .at_offset(f, t, o)
                        .hint(format!("try `{}`", suggest_name(n.get_ref()))),
                );
            }
            n.into_inner()
        }
    };
    let os = match stack.os {
        None => None,
        Some(o) => {
            let id = o.get_ref().to_ascii_lowercase();
            if catalog.os.iter().any(|x| x.id == id) {
                Some(id)
            } else {
                let (f, t, off) = at(o.span());
                let ids: Vec<&str> = catalog.os.iter().map(|x| x.id.as_str()).collect();
                let mut d = Diagnostic::new(
                    Stage::Spec,
                    format!("unknown os `{}`", o.get_ref().escape_debug()),
                )
                .at_offset(f, t, off);
                if let Some(s) = did_you_mean(&id, ids.iter().copied()) {
                    d = d.hint(format!("did you mean `{s}`?"));
                }
                diags.push(d.hint(format!("the catalog knows: {}", ids.join(", "))));
                None
            }
        }
    };
    Ok((name, os))
}

/// `[hardware]`: the GPU ids (canonical), the extra archs and the installed driver.
fn parse_hardware(
    file: &str,
    text: &str,
    catalog: &Catalog,
    hardware: Option<Spanned<HardwareWire>>,
    diags: &mut Vec<Diagnostic>,
) -> (Vec<String>, Vec<Target>, Option<Version>) {
    let at = |span: std::ops::Range<usize>| (file, text, span.start);
    let mut gpus = Vec::new();
    let mut archs = Vec::new();
    let mut driver = None;
    if let Some(hw) = hardware {
        let hw_span = hw.span();
        let hw = hw.into_inner();
        for g in &hw.gpus {
            match catalog.gpu(g.get_ref()) {
                Some(found) => {
                    if !gpus.contains(&found.id) {
                        gpus.push(found.id.clone());
                    }
                }
                None => {
                    let (f, t, o) = at(g.span());
                    let mut d = Diagnostic::new(
                        Stage::Spec,
                        format!("unknown GPU `{}`", g.get_ref().escape_debug()),
                    )
                    .at_offset(f, t, o);
                    if let Some(s) = catalog.gpu_suggestion(g.get_ref()) {
                        d = d.hint(format!("did you mean `{s}`?"));
                    }
                    d = d.hint("`gpustack catalog show gpu` lists the GPUs (ids, aliases, and the names nvidia-smi prints are all accepted); or give the compute capability with `archs = [\"sm_90\"]`");
                    diags.push(d);
                }
            }
        }
        for a in &hw.archs {
            match Target::parse(a.get_ref()) {
                Ok(t) if t.ptx => {
                    let (f, tx, o) = at(a.span());
                    diags.push(Diagnostic::new(Stage::Spec, format!("`{}` is a PTX target; `archs` lists the GPUs the stack must run on", a.get_ref())).at_offset(f, tx, o).hint(format!("write `sm_{}`", t.short())));
                }
                Ok(t) => {
                    if !archs.contains(&t) {
                        archs.push(t);
                    }
                }
                Err(e) => {
                    let (f, t, o) = at(a.span());
                    diags.push(Diagnostic::new(Stage::Spec, e).at_offset(f, t, o).hint("`archs` takes compute capabilities of the GPUs to build for, like `sm_90`, `sm_90a` or `8.6`"));
                }
            }
        }
        if let Some(d) = hw.driver {
            let (f, t, o) = at(d.span());
            match Version::parse(d.get_ref()) {
                Ok(v) if v.parts().len() >= 2 && v.local().is_none() && v.parts().len() <= 3 => {
                    driver = Some(v)
                }
                _ => diags.push(
                    Diagnostic::new(
                        Stage::Spec,
                        format!("invalid driver version `{}`", d.get_ref().escape_debug()),
                    )
                    .at_offset(f, t, o)
                    .hint("write the version `nvidia-smi` prints, like `550.54.15` or `570.26`"),
                ),
            }
        }
        if hw.gpus.is_empty() && hw.archs.is_empty() {
            diags.push(
                Diagnostic::new(Stage::Spec, "`[hardware]` names no GPU")
                    .at_offset(file, text, hw_span.start)
                    .hint("add `gpus = [\"h100\"]` or `archs = [\"sm_90\"]`"),
            );
        }
    } else {
        diags.push(
            Diagnostic::new(Stage::Spec, "missing the `[hardware]` table")
                .at(Location { file: file.to_string(), line: 1, col: 1 })
                .hint("add:\n\n    [hardware]\n    gpus = [\"h100\"]\n\nthe GPUs decide which CUDA builds and wheels can run"),
        );
    }
    (gpus, archs, driver)
}

/// `[components]`: a requirement per component, and torch's source-build table. Returns the
/// offset of torch's requirement, where a refusal of the source build points.
fn parse_components(
    file: &str,
    text: &str,
    table: Option<BTreeMap<Spanned<String>, Spanned<toml::Value>>>,
    diags: &mut Vec<Diagnostic>,
) -> (
    BTreeMap<Component, VersionReq>,
    Option<TorchSourceReq>,
    usize,
) {
    let at = |span: std::ops::Range<usize>| (file, text, span.start);
    let mut components = BTreeMap::new();
    let mut torch_source: Option<TorchSourceReq> = None;
    let mut torch_at = 0;
    match table {
        None => diags.push(
            Diagnostic::new(Stage::Spec, "missing the `[components]` table")
                .at(Location { file: file.to_string(), line: 1, col: 1 })
                .hint("list what the stack contains, e.g.\n\n    [components]\n    cuda = \"*\"\n    torch = \"*\""),
        ),
        Some(map) => {
            for (k, v) in map {
                let (f, t, o) = at(k.span());
                let Some(c) = Component::from_name(k.get_ref()) else {
                    let mut d = Diagnostic::new(Stage::Spec, format!("unknown component `{}`", k.get_ref().escape_debug())).at_offset(f, t, o);
                    if let Some(s) = did_you_mean(k.get_ref(), Component::ALL.iter().map(|c| c.name())) {
                        d = d.hint(format!("did you mean `{s}`?"));
                    }
                    diags.push(d.hint(format!("components are: {}", Component::ALL.map(Component::name).join(", "))));
                    continue;
                };
                let (f, t, o) = at(v.span());
                if c == Component::Torch {
                    torch_at = o;
                }
                let table_req;
                let s = if let (Component::Torch, Some(tbl)) = (c, v.get_ref().as_table()) {
                    match torch_table(tbl) {
                        Ok((req, src)) => {
                            torch_source = src;
                            table_req = req;
                            table_req.as_str()
                        }
                        Err((msg, hint)) => {
                            diags.push(Diagnostic::new(Stage::Spec, msg).at_offset(f, t, o).hint(hint));
                            continue;
                        }
                    }
                } else if let Some(s) = v.get_ref().as_str() {
                    s
                } else if c == Component::Torch {
                    diags.push(
                        Diagnostic::new(Stage::Spec, "the requirement for `torch` must be a string or a table")
                            .at_offset(f, t, o)
                            .hint("write `torch = \"==2.10.0\"`, or `torch = { version = \"==2.10.0\", build = \"source\" }` to compile it"),
                    );
                    continue;
                } else {
                    diags.push(
                        Diagnostic::new(Stage::Spec, format!("the requirement for `{}` must be a string", c.name()))
                            .at_offset(f, t, o)
                            .hint(format!("quote it: `{} = \"{}\"`", c.name(), v.get_ref().to_string().trim_matches('"'))),
                    );
                    continue;
                };
                match VersionReq::parse(s) {
                    Ok(r) => {
                        if r.any_local().is_some() && c != Component::Torch {
                            diags.push(
                                Diagnostic::new(Stage::Spec, format!("a local label (`+{}`) only selects torch wheel variants", r.any_local().unwrap_or_default()))
                                    .at_offset(f, t, o)
                                    .hint(format!("drop the `+…` part from the `{}` requirement", c.name())),
                            );
                        }
                        components.insert(c, r);
                    }
                    Err(e) => diags.push(
                        Diagnostic::new(Stage::Spec, format!("invalid requirement for `{}`: {}", c.name(), e.reason))
                            .at_offset(f, t, req_offset(t, o, s, e.at))
                            .hint("use `*`, a bare version (`12.4`), `12.*`, `~=12.4`, or `==`, `!=`, `>=`, `>`, `<=`, `<` joined by commas (`>=2.4, <2.6`)"),
                    ),
                }
            }
            if components.is_empty() && diags.is_empty() {
                diags.push(
                    Diagnostic::new(Stage::Spec, "`[components]` is empty")
                        .at(Location { file: file.to_string(), line: 1, col: 1 })
                        .hint("list at least one component, e.g. `torch = \"*\"`"),
                );
            }
        }
    }
    (components, torch_source, torch_at)
}

/// A torch source build refuses what is compiled against torch or needs torch from an index.
fn refuse_rebuilt_against_torch(
    file: &str,
    text: &str,
    components: &BTreeMap<Component, VersionReq>,
    torch_at: usize,
    diags: &mut Vec<Diagnostic>,
) {
    // What is compiled against torch's C++ ABI, or requires `torch` from an index,
    // would need a rebuild against the built wheel, which gpustack does not do yet.
    let against: Vec<&str> = components
        .keys()
        .filter(|c| REBUILT_AGAINST_TORCH.contains(c))
        .map(|c| c.name())
        .collect();
    if !against.is_empty() {
        diags.push(
            Diagnostic::new(
                Stage::Spec,
                format!(
                    "a torch source build cannot be combined with {}: each requires torch from a package index or is compiled against it, and gpustack does not rebuild it against the built torch yet",
                    against.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                ),
            )
            .at_offset(file, text, torch_at)
            .hint("remove `build = \"source\"` to install the torch wheel, or remove those components"),
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn unknown_table_suggests() {
        let cat = crate::Catalog::stock().unwrap();
        let err = super::Spec::parse("s", "[stack]\nname = \"d\"\n[clusters]\nnodes = 1\n", &cat)
            .unwrap_err();
        let crate::Error::Invalid(ds) = err else {
            panic!()
        };
        assert_eq!(
            ds[0].hints,
            vec!["did you mean `cluster`?".to_string()],
            "{:?}",
            ds[0].message
        );
    }
}
