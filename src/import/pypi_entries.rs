//! One PyPI release (its files on a page) turned into catalog entries, one kind of project
//! each (torch wheels and their CUDA builds, vLLM, DeepSpeed, cuDNN/NCCL, extras), with
//! requirements normalized to the catalog's syntax.

use std::collections::BTreeSet;

use crate::catalog::{Catalog, TorchBuild};
use crate::core::version::{Version, VersionReq};
use crate::core::Component;

use super::*;

/// A release's files on a page.
pub(super) struct Release<'p> {
    pub(super) page: &'p pypi::Page,
    /// The full version string of the files (`2.4.0`, `2.5.1+cu124`).
    pub(super) version: String,
    pub(super) files: Vec<(&'p pypi::DistFile, pypi::FileName)>,
}

impl Release<'_> {
    pub(super) fn linux_wheels(&self) -> Vec<&(&pypi::DistFile, pypi::FileName)> {
        self.files
            .iter()
            .filter(|(_, n)| n.wheel.as_ref().is_some_and(pypi::WheelTags::linux_x86_64))
            .collect()
    }

    /// The file whose metadata is read: a Linux x86_64 wheel with PEP 658 metadata, else
    /// any Linux x86_64 wheel, else the sdist (file-name order within each).
    pub(super) fn metadata_file(&self) -> Option<&pypi::DistFile> {
        let wheels = self.linux_wheels();
        wheels
            .iter()
            .find(|(f, _)| f.core_metadata.is_some())
            .or_else(|| wheels.first())
            .map(|(f, _)| *f)
            .or_else(|| {
                self.files
                    .iter()
                    .find(|(_, n)| n.wheel.is_none())
                    .map(|(f, _)| *f)
            })
    }

    /// `files = [...]` rows: the Linux x86_64 wheels with a sha256.
    fn file_rows(&self, index: &str, public: &str, with_version: bool) -> Vec<FileOut> {
        let mut wheels = self.linux_wheels();
        let minor = |n: &pypi::FileName| {
            n.wheel
                .as_ref()
                .and_then(pypi::WheelTags::cpython_minor)
                .and_then(|m| Version::parse(&m).ok())
        };
        wheels.sort_by(|a, b| (minor(&a.1), &a.0.filename).cmp(&(minor(&b.1), &b.0.filename)));
        wheels
            .into_iter()
            .filter_map(|(f, n)| {
                Some(FileOut {
                    version: with_version.then(|| public.to_string()),
                    python: n.wheel.as_ref().and_then(pypi::WheelTags::cpython_minor),
                    index: Some(index.trim_end_matches('/').to_string()),
                    filename: f.filename.clone(),
                    sha256: f.sha256.clone()?,
                })
            })
            .collect()
    }

    /// `>=3.9, <3.13` from the `cpXY` tags of the Linux x86_64 wheels.
    fn python_from_tags(&self) -> Option<String> {
        let minors: BTreeSet<u64> = self
            .linux_wheels()
            .iter()
            .filter_map(|(_, n)| n.wheel.as_ref()?.cpython_minor())
            .filter_map(|m| m.strip_prefix("3.")?.parse().ok())
            .collect();
        let (lo, hi) = (minors.first()?, minors.last()?);
        Some(format!(">=3.{lo}, <3.{}", hi + 1))
    }

    fn date(&self, opts: &PypiOptions) -> String {
        opts.date
            .clone()
            .or_else(|| self.page.date.clone())
            .unwrap_or_else(today)
    }

    pub(super) fn source(&self, md: &pypi::DistFile, how: &str, opts: &PypiOptions) -> String {
        format!(
            "{} ({} project page: files, sha256, tags; {how} of {}), read {}",
            self.page.url,
            self.page.format,
            md.filename,
            self.date(opts)
        )
    }
}

/// Normalizes a PEP 440 specifier for the catalog (`>=2.0.0,<3` → `>=2.0.0, <3`); `None`
/// when the catalog's requirement syntax cannot hold it (`~=`, `===`, wildcards).
pub(super) fn catalog_req(spec: &str) -> Option<String> {
    let s = spec
        .split(',')
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(", ");
    (!s.contains('*') && VersionReq::parse(&s).is_ok()).then_some(s)
}

/// `cu124` → `12.4`, `cu118` → `11.8`, `cu130` → `13.0`.
pub(super) fn cuda_of_label(label: &str) -> Option<String> {
    let n = label.strip_prefix("cu")?;
    if n.len() < 3 || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (major, minor) = n.split_at(2);
    Some(format!("{}.{}", major.trim_start_matches('0'), minor))
}

/// What [`Ctx::import_one`] read for one release of a PyPI project: the steps below turn
/// it into catalog entries, one kind of project each.
pub(super) struct Pulled<'a> {
    pub(super) base: &'a Catalog,
    pub(super) opts: &'a PypiOptions,
    pub(super) project: &'a str,
    /// The project page's URL, for errors.
    pub(super) url: &'a String,
    pub(super) rel: &'a Release<'a>,
    pub(super) md: &'a pypi::Metadata,
    pub(super) source: String,
    /// `Requires-Dist` that applies on Linux unconditionally.
    pub(super) reqs: Vec<pypi::Requirement>,
    /// The version without its `+local` label.
    pub(super) public: String,
    pub(super) sort: Version,
}

/// The facts of one torch wheel build, for [`Pulled::torch_wheel`].
struct TorchWheel<'a> {
    variant: String,
    cuda: String,
    /// The base catalog's build of this release and variant.
    build: Option<&'a TorchBuild>,
    /// Whether the base catalog has this release's `[[release]]` entry.
    has_release: bool,
    /// Whether the wheel pins a CUDA runtime wheel.
    runtime_pinned: bool,
    /// A PyPI-default build (no `+cuXYZ` label).
    from_pypi: bool,
}

impl Pulled<'_> {
    /// The exact pin of the first requirement whose name starts with `name_prefix`.
    fn pin(&self, name_prefix: &str) -> Option<(String, String)> {
        self.reqs
            .iter()
            .find(|r| r.name.starts_with(name_prefix))
            .and_then(|r| r.exact().map(|v| (r.name.clone(), v.to_string())))
    }

    /// A torch wheel (and, for the PyPI-default build, the release entry).
    pub(super) fn torch(
        &self,
        follow: &mut Vec<(String, Option<String>)>,
    ) -> Result<Vec<Entry>, ImportError> {
        let (rel, sort, base) = (self.rel, &self.sort, self.base);
        let local = rel.version.split_once('+').map(|(_, l)| l.to_string());
        if let Some(l) = local.as_deref().filter(|l| cuda_of_label(l).is_none()) {
            return Err(ImportError::Malformed {
                url: self.url.clone(),
                what: format!(
                    "torch {} is a `+{l}` build; the catalog lists CUDA builds (`+cuXYZ`)",
                    rel.version
                ),
            });
        }
        // The CUDA runtime wheel pin: `nvidia-cuda-runtime-cu12==12.4.127`, or from
        // torch 2.11 on the `cuda-toolkit[...]==13.0.2` meta-package.
        let runtime = self
            .pin("nvidia-cuda-runtime-cu")
            .or_else(|| {
                self.pin("cuda-toolkit")
                    .filter(|(n, _)| n == "cuda-toolkit")
            })
            .map(|(_, v)| v);
        let cuda = runtime
            .as_deref()
            .and_then(|v| Version::parse(v).ok())
            .map(|v| format!("{}.{}", v.major(), v.minor()))
            .or_else(|| local.as_deref().and_then(cuda_of_label));
        let variant = local
            .clone()
            .or_else(|| cuda.as_deref().map(|c| format!("cu{}", c.replace('.', ""))));
        let (Some(variant), Some(cuda)) = (variant, cuda) else {
            return Err(ImportError::Malformed {
                url: self.url.clone(),
                what: format!(
                    "torch {} pins neither `nvidia-cuda-runtime-cuXX` nor `cuda-toolkit` and has no `+cuXYZ` label: not a CUDA build",
                    rel.version
                ),
            });
        };
        let build = base
            .torch
            .iter()
            .find(|b| b.version == *sort && b.variant == variant);
        let has_release = base.torch_releases.iter().any(|r| r.version == *sort);
        // Wheels without a `+cuXYZ` label are the PyPI-default build.
        let from_pypi = local.is_none();
        let mut new = Vec::new();
        if from_pypi {
            new.push(self.torch_release(&variant));
        }
        new.push(self.torch_wheel(
            &TorchWheel {
                variant,
                cuda,
                build,
                has_release,
                runtime_pinned: runtime.is_some(),
                from_pypi,
            },
            follow,
        ));
        Ok(new)
    }

    /// The `[[release]]` entry of the PyPI-default torch build.
    fn torch_release(&self, variant: &str) -> Entry {
        let (rel, md, public, sort) = (self.rel, self.md, &self.public, &self.sort);
        let python = rel
            .python_from_tags()
            .or_else(|| md.requires_python.clone());
        let mut r = Entry::new(
            Family::Torch,
            "release",
            format!("torch {public}"),
            sort.clone(),
        );
        r.str("version", public);
        match &python {
            Some(p) => r.str("python", p),
            None => r.missing.push("python".into()),
        }
        r.str("pypi_variant", variant);
        let triton = md
            .requires_dist
            .iter()
            .filter_map(|d| pypi::parse_requirement(d))
            .find(|d| d.name == "triton" && install::applies(d, "x86_64"));
        if let Some(t) = triton {
            match catalog_req(&t.specifier) {
                Some(req) => r.str("triton", req),
                None => r.notes.push(format!(
                    "Requires-Dist: triton{} (not representable)",
                    t.specifier
                )),
            }
        }
        r.source.clone_from(&self.source);
        if let Some(rp) = &md.requires_python {
            r.notes.push(format!(
                "`python` is the cpXY tags of the Linux x86_64 wheels; Requires-Python {rp}"
            ));
        }
        r
    }

    /// The `[[wheel]]` entry of one torch build; pins of cuDNN and NCCL the base catalog
    /// lacks go to `follow`.
    fn torch_wheel(&self, t: &TorchWheel<'_>, follow: &mut Vec<(String, Option<String>)>) -> Entry {
        let (rel, public, sort, base, opts) =
            (self.rel, &self.public, &self.sort, self.base, self.opts);
        let variant = &t.variant;
        let mut w = Entry::new(
            Family::Torch,
            "wheel",
            format!("torch {public}+{variant}"),
            sort.clone(),
        );
        w.set("torch", Value::Strs(vec![public.clone()]));
        w.str("variant", &t.variant);
        w.str("cuda", &t.cuda);
        if t.from_pypi {
            // The same build, with its `+cuXYZ` label, on PyTorch's variant index:
            // where a lock that pins the label installs it from.
            let pytorch = format!("https://download.pytorch.org/whl/{variant}");
            match t.build {
                Some(b) => w.str("index_url", &b.index_url),
                None => {
                    w.str("index_url", &pytorch);
                    w.notes.push(format!(
                        "`index_url` is PyTorch's index for the `+{variant}` build of this PyPI wheel"
                    ));
                }
            }
        } else {
            w.str("index_url", opts.recorded());
        }
        w.not_derived(
            "arch_list",
            "TORCH_CUDA_ARCH_LIST is compiled into the binaries, not in the metadata; an empty list is never picked",
            t.build
                .filter(|b| !b.arch_list.is_empty())
                .map(|b| {
                    (
                        Value::Strs(crate::core::arch::torch_list(&b.arch_list)),
                        b.origin.location(),
                    )
                }),
            false,
        );
        if !w.fields.iter().any(|(k, _)| *k == "arch_list") {
            w.set("arch_list", Value::Strs(Vec::new()));
        }
        for (field, prefix, lib) in [
            ("cudnn", "nvidia-cudnn-cu", Some(true)),
            ("nccl", "nvidia-nccl-cu", Some(false)),
            ("cusparselt", "nvidia-cusparselt-cu", None),
        ] {
            if let Some((name, v)) = self.pin(prefix) {
                w.str(field, &v);
                if let (Some(is_cudnn), true) = (lib, opts.follow_pins) {
                    let list = if is_cudnn { &base.cudnn } else { &base.nccl };
                    let known =
                        Version::parse(&v).is_ok_and(|pv| list.iter().any(|l| l.version == pv));
                    if !known {
                        follow.push((name, Some(v)));
                    }
                }
            }
        }
        if !t.from_pypi {
            if let Some(p) = rel.python_from_tags() {
                w.str("python", p);
            }
        }
        let rows = rel.file_rows(opts.recorded(), public, true);
        w.set("files", Value::Files(rows));
        if !t.runtime_pinned {
            w.notes.push(format!(
                "`cuda` from the `+{variant}` label (the wheel pins no CUDA runtime wheel)"
            ));
        }
        if !t.from_pypi && !t.has_release {
            w.missing.push(format!(
                "the `[[release]]` entry of torch {public} (import `torch=={public}` from {PYPI} first)"
            ));
        }
        w.source = self.source.clone();
        w
    }

    /// A vLLM release; its torch pin goes to `follow` when the base catalog lacks it.
    pub(super) fn vllm(&self, follow: &mut Vec<(String, Option<String>)>) -> Entry {
        let (rel, md, public, sort, base, opts) = (
            self.rel,
            self.md,
            &self.public,
            &self.sort,
            self.base,
            self.opts,
        );
        let mut e = Entry::new(
            Family::Vllm,
            "release",
            format!("vllm {public}"),
            sort.clone(),
        );
        e.str("version", public);
        let others: Vec<String> = self
            .reqs
            .iter()
            .filter(|r| r.name != "torch" && r.exact().is_some())
            .map(|r| format!("{}{}", r.name, r.specifier))
            .collect();
        if !others.is_empty() {
            e.notes
                .push(format!("other exact pins: {}", others.join(", ")));
        }
        let torch = self.reqs.iter().find(|r| r.name == "torch");
        match torch.and_then(|r| r.exact()) {
            Some(t) => {
                e.str("torch", t);
                let known = Version::parse(t)
                    .is_ok_and(|tv| base.torch_releases.iter().any(|r| r.version == tv));
                if !known && opts.follow_pins {
                    follow.push(("torch".to_string(), Some(t.to_string())));
                }
            }
            None => e.missing.push(format!(
                "torch (Requires-Dist has `torch{}`, not an exact pin)",
                torch.map(|r| r.specifier.as_str()).unwrap_or("")
            )),
        }
        let known = base.vllm.iter().find(|v| v.version == *sort);
        e.not_derived(
            "cuda",
            "the CUDA of vLLM's PyPI wheel is in its build, not its metadata",
            known.map(|k| (Value::Str(k.cuda.to_string()), k.origin.location())),
            true,
        );
        match md.requires_python.as_deref().and_then(catalog_req) {
            Some(p) => e.str("python", p),
            None => e.missing.push("python (no usable Requires-Python)".into()),
        }
        e.not_derived(
            "min_cc",
            "the lowest compute capability is stated in vLLM's docs, not its metadata",
            known.and_then(|k| {
                k.min_cc
                    .map(|c| (Value::Str(c.to_string()), k.origin.location()))
            }),
            false,
        );
        e.set(
            "files",
            Value::Files(rel.file_rows(opts.recorded(), public, false)),
        );
        e.source = self.source.clone();
        e
    }

    /// A DeepSpeed release.
    pub(super) fn deepspeed(&self) -> Entry {
        let (rel, md, public, sort, base) =
            (self.rel, self.md, &self.public, &self.sort, self.base);
        let mut e = Entry::new(
            Family::Deepspeed,
            "release",
            format!("deepspeed {public}"),
            sort.clone(),
        );
        e.str("version", public);
        let torch = self.reqs.iter().find(|r| r.name == "torch");
        match torch.map(|r| r.specifier.as_str()) {
            Some("") => e.notes.push("Requires-Dist: torch (no version)".into()),
            Some(s) => match catalog_req(s) {
                Some(req) => e.str("torch", req),
                None => e
                    .notes
                    .push(format!("Requires-Dist: torch{s} (not representable)")),
            },
            None => e.notes.push("no torch in Requires-Dist".into()),
        }
        match md.requires_python.as_deref() {
            Some(p) => match catalog_req(p) {
                Some(req) => e.str("python", req),
                None => e
                    .notes
                    .push(format!("Requires-Python {p} (not representable)")),
            },
            None => e.notes.push("no Requires-Python".into()),
        }
        let known = base.deepspeed.iter().find(|d| d.version == *sort);
        e.not_derived(
            "cuda_mismatch_ok",
            "op_builder/builder.py's cuda_minor_mismatch_ok is source code, not metadata",
            known.filter(|k| !k.cuda_mismatch_ok.is_empty()).map(|k| {
                (
                    Value::Strs(k.cuda_mismatch_ok.iter().map(ToString::to_string).collect()),
                    k.origin.location(),
                )
            }),
            false,
        );
        for (f, _) in &rel.files {
            if let Some(h) = &f.sha256 {
                e.notes.push(format!("{} sha256 {h}", f.filename));
            }
        }
        e.source = self.source.clone();
        e
    }

    /// An extra's release from one distribution (`cupy-cuda12x`).
    pub(super) fn extra(&self, component: Component) -> Entry {
        let (rel, md, public, sort, base, opts) = (
            self.rel,
            self.md,
            &self.public,
            &self.sort,
            self.base,
            self.opts,
        );
        let mut e = Entry::new(
            Family::Extra,
            "extra",
            format!(
                "{} {public} ({})",
                component.name(),
                pypi::normalize(self.project)
            ),
            sort.clone(),
        );
        let known = base.extras.iter().find(|x| {
            x.component == component
                && x.version == *sort
                && pypi::normalize(&x.pypi_name) == pypi::normalize(self.project)
        });
        let pypi_name = base
            .extras
            .iter()
            .find(|x| pypi::normalize(&x.pypi_name) == pypi::normalize(self.project))
            .map_or_else(|| pypi::normalize(self.project), |x| x.pypi_name.clone());
        e.str("name", component.name());
        e.str("version", public);
        e.str("layer", component.layer().name());
        let torch = self.reqs.iter().find(|r| r.name == "torch");
        if let Some(s) = torch
            .map(|r| r.specifier.as_str())
            .filter(|s| !s.is_empty())
        {
            match catalog_req(s) {
                Some(req) => e.str("torch", req),
                None => e
                    .notes
                    .push(format!("Requires-Dist: torch{s} (not representable)")),
            }
        }
        e.not_derived(
            "cuda_majors",
            "the CUDA majors of the binaries are in the build, not the metadata",
            known.and_then(|k| {
                k.cuda_majors
                    .clone()
                    .map(|m| (Value::Ints(m), k.origin.location()))
            }),
            false,
        );
        e.not_derived(
            "min_cc",
            "a lowest compute capability is stated in docs, not metadata",
            known.and_then(|k| {
                k.min_cc
                    .map(|c| (Value::Str(c.to_string()), k.origin.location()))
            }),
            false,
        );
        if let Some(p) = md.requires_python.as_deref() {
            match catalog_req(p) {
                Some(req) => e.str("python", req),
                None => e
                    .notes
                    .push(format!("Requires-Python {p} (not representable)")),
            }
        }
        e.str("pypi_name", pypi_name);
        e.str("index", opts.recorded());
        e.not_derived(
            "pypi_variant",
            "the CUDA variant of the wheel on the index is in its build, not its metadata",
            known.and_then(|k| {
                k.pypi_variant
                    .clone()
                    .map(|v| (Value::Str(v), k.origin.location()))
            }),
            false,
        );
        e.set(
            "files",
            Value::Files(rel.file_rows(opts.recorded(), public, false)),
        );
        // A pure-Python wheel has no CUDA build: nothing to derive there.
        let wheels = rel.linux_wheels();
        let pure = !wheels.is_empty()
            && wheels
                .iter()
                .all(|(_, n)| n.wheel.as_ref().is_some_and(|w| w.platform == "any"));
        if pure {
            e.not_derived.retain(|n| {
                n.kept_from.is_some()
                    || !matches!(n.field, "cuda_majors" | "min_cc" | "pypi_variant")
            });
        }
        e.source = self.source.clone();
        e
    }
}
