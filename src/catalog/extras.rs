//! Validating `[[extra]]` entries (flash-attn, xformers, …) into [`Catalog::extras`].

use std::collections::BTreeMap;

use super::model::{Catalog, ExtraRelease, FileRef, Origin};
use super::validate::V;
use super::wire::ExtraWire;
use crate::core::arch::Cc;
use crate::core::version::{Version, VersionReq};
use crate::core::{Component, Layer};

/// Validates the `[[extra]]` entries into [`Catalog::extras`].
pub(super) fn build_extras(
    v: &mut V<'_>,
    entries: BTreeMap<(String, String, String), (ExtraWire, Origin)>,
    c: &mut Catalog,
) {
    for (_, (e, o)) in entries {
        if let Some(x) = extra(v, &e, o) {
            c.extras.push(x);
        }
    }
    c.extras.sort_by(|a, b| {
        a.component
            .cmp(&b.component)
            .then_with(|| b.version.cmp(&a.version))
            .then_with(|| a.pypi_name.cmp(&b.pypi_name))
    });
}

/// Diagnostics from the shared parsers (versions, requirements, compute capabilities,
/// files, sources) get a hint that says how to write the field: every diagnostic from
/// `from` on that has none.
fn hint_new(v: &mut V<'_>, from: usize, hint: &str) {
    for d in &mut v.diags[from..] {
        if d.hints.is_empty() {
            d.hints.push(hint.to_string());
        }
    }
}

/// One extra release; none when a field is wrong (each problem reported).
fn extra(v: &mut V<'_>, e: &ExtraWire, o: Origin) -> Option<ExtraRelease> {
    let (component, version) = identity(v, e, &o)?;
    let cuda_majors = distribution(v, e, &o, &version)?;
    let (torch, python, min_cc) = requirements(v, e, &o)?;
    let files = files(v, e, &o, &version);
    Some(ExtraRelease {
        component,
        version,
        layer: component.layer(),
        torch,
        cuda_majors,
        min_cc,
        python,
        pypi_name: e.pypi_name.clone(),
        index: e.index.clone(),
        pypi_variant: e.pypi_variant.clone(),
        prebuilt: e.prebuilt.clone(),
        files,
        platforms: v.platforms(&o, &e.platforms),
        install: v.installability(&o, e.yanked.as_ref(), &e.glibc_floor),
        origin: o,
    })
}

/// The entry's source, which extra it is, its version, and its layer.
fn identity(v: &mut V<'_>, e: &ExtraWire, o: &Origin) -> Option<(Component, Version)> {
    let known = || {
        Component::EXTRAS
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let n = v.diags.len();
    v.source(o);
    hint_new(
        v,
        n,
        "give the page, file at a commit or metadata the fact was read from",
    );
    let Some(component) = Component::from_name(&e.name).filter(|c| c.is_extra()) else {
        let mut hint = format!("gpustack knows the extras {}", known());
        if let Some(s) =
            crate::core::names::did_you_mean(&e.name, Component::EXTRAS.iter().map(|c| c.name()))
        {
            hint = format!("did you mean `{s}`? {hint}");
        }
        v.fail_hint(o, format!("unknown extra `{}`", e.name), hint);
        return None;
    };
    let n = v.diags.len();
    let version = v.version(o, "version", &e.version);
    hint_new(
        v,
        n,
        "write the release exactly as PyPI lists it, like `2.8.3.post2`",
    );
    let version = version?;
    match Layer::from_name(&e.layer) {
        Some(l) if l == component.layer() => {}
        Some(_) | None => {
            v.fail_hint(
                o,
                format!(
                    "{} `{version}` says `layer = \"{}\"`, but gpustack installs {} in the `{}` layer",
                    e.name,
                    e.layer,
                    e.name,
                    component.layer().name()
                ),
                format!(
                    "every entry of `{}` must say `layer = \"{}\"`",
                    e.name,
                    component.layer().name()
                ),
            );
            return None;
        }
    }
    Some((component, version))
}

/// Where the wheels come from: the PyPI name, the index, the CUDA variant and majors.
/// Returns the CUDA majors (sorted, deduplicated), if stated.
fn distribution(
    v: &mut V<'_>,
    e: &ExtraWire,
    o: &Origin,
    version: &Version,
) -> Option<Option<Vec<u64>>> {
    let pypi_ok = !e.pypi_name.is_empty()
        && e.pypi_name.len() <= 100
        && e.pypi_name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && e.pypi_name.as_bytes()[0].is_ascii_alphanumeric();
    if !pypi_ok {
        v.fail_hint(
            o,
            format!("{} `{version}`: `pypi_name = \"{}\"` is not a PyPI project name", e.name, e.pypi_name.escape_debug()),
            "write the distribution as PyPI spells it: letters, digits, `-`, `_` and `.`, like `cupy-cuda12x`".into(),
        );
        return None;
    }
    let index_ok = e.index.starts_with("https://")
        && e.index.len() > "https://".len()
        && !e.index.contains(|ch: char| {
            ch.is_whitespace() || ch.is_control() || matches!(ch, '"' | '\'' | '`' | '$' | '\\')
        });
    if !index_ok {
        v.fail_hint(
            o,
            format!(
                "{} `{version}`: `index = \"{}\"` is not an https URL",
                e.name,
                e.index.escape_debug()
            ),
            "write the package index URL, like `https://pypi.org/simple`".into(),
        );
        return None;
    }
    if let Some(pv) = &e.pypi_variant {
        if !pv.starts_with("cu") || pv.len() < 4 || !pv[2..].bytes().all(|b| b.is_ascii_digit()) {
            v.fail_hint(
                o,
                format!("{} `{version}`: `pypi_variant = \"{}\"` must look like `cu128`", e.name, pv.escape_debug()),
                "the CUDA variant of the wheel on `index`, spelled as torch variants are; leave it out when not stated".into(),
            );
            return None;
        }
    }
    let cuda_majors = match &e.cuda_majors {
        None => None,
        Some(m) if m.is_empty() || m.contains(&0) => {
            v.fail_hint(
                o,
                format!(
                    "{} `{version}`: `cuda_majors` must list CUDA majors, like `[12, 13]`",
                    e.name
                ),
                "leave `cuda_majors` out when the CUDA builds are not known".into(),
            );
            return None;
        }
        Some(m) => {
            let mut m: Vec<u64> = m.iter().map(|x| u64::from(*x)).collect();
            m.sort_unstable();
            m.dedup();
            Some(m)
        }
    };
    Some(cuda_majors)
}

/// An extra's requirements on torch and Python and its lowest compute capability.
type Requirements = (Option<VersionReq>, Option<VersionReq>, Option<Cc>);

/// The requirements on torch and Python and the lowest compute capability, each optional.
fn requirements(v: &mut V<'_>, e: &ExtraWire, o: &Origin) -> Option<Requirements> {
    let n = v.diags.len();
    let torch = e.torch.as_deref().map(|s| v.req(o, "torch", s));
    hint_new(v, n, "write the package's requirement on torch like `>=2.4, <3` or `==2.10.0`; leave `torch` out when it is not known");
    let n = v.diags.len();
    let python = e.python.as_deref().map(|s| v.req(o, "python", s));
    hint_new(
        v,
        n,
        "write `Requires-Python` like `>=3.10, <3.16`; leave `python` out when it is not known",
    );
    let n = v.diags.len();
    let min_cc = e.min_cc.as_deref().map(|s| v.cc(o, "min_cc", s));
    hint_new(
        v,
        n,
        "write a compute capability like `8.0`; leave `min_cc` out unless a source states it",
    );
    let (Some(torch), Some(python), Some(min_cc)) = (
        torch.map_or(Some(None), |r| r.map(Some)),
        python.map_or(Some(None), |r| r.map(Some)),
        min_cc.map_or(Some(None), |r| r.map(Some)),
    ) else {
        return None;
    };
    Some((torch, python, min_cc))
}

/// The entry's files; each one's version, if stated, must be the entry's.
fn files(v: &mut V<'_>, e: &ExtraWire, o: &Origin, version: &Version) -> Vec<FileRef> {
    let n = v.diags.len();
    let files = v.files(o, &e.files);
    for f in &files {
        if f.version.as_ref().is_some_and(|fv| fv != version) {
            v.fail(
                o,
                format!(
                    "file `{}` says version `{}`, but the entry is {} `{version}`",
                    f.filename,
                    f.version
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default(),
                    e.name
                ),
            );
        }
    }
    hint_new(v, n, "each file is `{ filename = \"…\", sha256 = \"…\" }`: a plain file name and 64 lowercase hex digits, with `python = \"3.12\"` for a CPython-specific wheel");
    files
}
