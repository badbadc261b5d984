//! Building the lock from a resolution: the components from each pick and the catalog
//! record it carries ([`crate::solve::Record`]), the packages and facts from
//! [`crate::select`], then the layer hashes and seals. No catalog position crosses into
//! here: a resolution handed another catalog still locks its own picks.

use std::collections::BTreeMap;

use super::{
    layers, spec_digest, Hardware, Lock, LockedComponent, LockedFact, LockedGpu, LockedPackage,
    LOCK_REVISION, LOCK_VERSION,
};
use crate::catalog::Catalog;
use crate::core::{Component, Field};
use crate::error::{Diagnostic, Error, Stage};
use crate::select::{SelectedFact, SelectedPackage};
use crate::solve::{Compat, Pick, Record, Resolution};

impl Lock {
    /// Builds the lock from a resolution. `catalog` gives what the solver does not decide
    /// (images, packages, instances: `select`); every component's data comes from
    /// the resolution's own records.
    ///
    /// # Errors
    ///
    /// A resolution without a driver pick, or with a catalog component's pick that carries
    /// no record of its kind and version (only a hand-built resolution can be either).
    pub fn from_resolution(catalog: &Catalog, r: &Resolution) -> Result<Lock, Error> {
        let mut lock = Lock::from_resolution_unsealed(catalog, r)?;
        lock.integrity = lock.sorted_seals();
        Ok(lock)
    }

    /// [`Lock::from_resolution`] without the `[integrity]` seals, for a caller that
    /// re-seals it ([`Lock::rehash`]) before anyone reads them: lock-time resolution
    /// always does, and sealing builds the text of every table.
    pub(crate) fn from_resolution_unsealed(
        catalog: &Catalog,
        r: &Resolution,
    ) -> Result<Lock, Error> {
        let spec = &r.spec;
        let driver = r
            .pick(Component::Driver)
            .ok_or_else(crate::select::no_driver)?;
        let components = r
            .picks
            .iter()
            .map(|p| locked_component(r, p))
            .collect::<Result<Vec<_>, Error>>()?;
        let hardware = Hardware {
            gpus: r.gpus.iter().map(locked_gpu).collect(),
            arch_list: r.arch_list.clone(),
            driver: driver.version.clone(),
            driver_installed: spec.driver.is_some(),
        };
        let sel = crate::select::select(catalog, r)?;
        let catalog_digest = if sel.used.is_empty() {
            r.catalog_digest.clone()
        } else {
            crate::catalog::digest_of(r.used.iter().chain(&sel.used))
        };
        let mut packages: Vec<LockedPackage> =
            sel.packages.into_iter().map(LockedPackage::from).collect();
        packages.sort_by_key(|p| p.layer);
        let facts: Vec<LockedFact> = sel.facts.into_iter().map(LockedFact::from).collect();
        let layers = layers(
            &hardware,
            spec,
            &components,
            &packages,
            &facts,
            LOCK_VERSION,
        );
        let lock = Lock {
            spec_digest: spec_digest(spec),
            catalog_digest,
            request: spec.clone(),
            hardware,
            components,
            packages,
            facts,
            layers,
            python: None,
            format: LOCK_VERSION,
            revision: LOCK_REVISION,
            integrity: Vec::new(),
        };
        Ok(lock)
    }
}

impl From<SelectedPackage> for LockedPackage {
    fn from(p: SelectedPackage) -> Self {
        LockedPackage {
            name: p.name,
            version: p.version,
            layer: p.layer,
            source: p.source,
            catalog: p.catalog,
            fields: p.fields,
            because: p.because,
        }
    }
}

impl From<SelectedFact> for LockedFact {
    fn from(f: SelectedFact) -> Self {
        LockedFact {
            kind: f.kind,
            key: f.key,
            source: f.source,
            catalog: f.catalog,
            fields: f.fields,
            because: f.because,
        }
    }
}

fn locked_gpu(g: &crate::catalog::Gpu) -> LockedGpu {
    LockedGpu {
        id: g.id.clone(),
        name: g.name.clone(),
        cc: g.cc,
        datacenter: g.datacenter,
        nvswitch: g.nvswitch,
        memory_gib: g.memory_gib,
        gfd_product: g.gfd_product.clone(),
    }
}

/// One `[[component]]`: the pick, and the fields its record gives.
fn locked_component(r: &Resolution, p: &Pick) -> Result<LockedComponent, Error> {
    let fields = component_fields(r, p)?;
    Ok(LockedComponent {
        name: p.component,
        version: p.version.clone(),
        layer: p.component.layer(),
        requested: p.requested.clone(),
        source: p.origin.as_ref().map_or_else(
            || "host fact from [hardware].driver".to_string(),
            |o| o.source.clone(),
        ),
        catalog: p
            .origin
            .as_ref()
            .map_or_else(|| "host".to_string(), |o| o.lock_name.to_string()),
        fields,
        because: p.because.clone(),
    })
}

/// The record a catalog component's pick must carry, checked against the pick: the same
/// kind and the same version.
fn record_of(p: &Pick) -> Result<Option<&Record>, Error> {
    let Some(record) = &p.record else {
        return if matches!(p.component, Component::Driver | Component::Python) {
            Ok(None)
        } else {
            Err(no_record(p))
        };
    };
    let version = match record {
        Record::Driver { .. } => Some(&p.version),
        other => other.version(),
    };
    let kind_ok = matches!(
        (&p.record, p.component),
        (Some(Record::Driver { .. }), Component::Driver)
            | (Some(Record::Cuda { .. }), Component::Cuda)
            | (Some(Record::Lib(_)), Component::Cudnn | Component::Nccl)
            | (Some(Record::Torch { .. }), Component::Torch)
            | (Some(Record::Vllm(_)), Component::Vllm)
            | (Some(Record::Extra(_)), crate::core::extra_pattern!())
            | (Some(Record::Deepspeed(_)), Component::Deepspeed)
    );
    if kind_ok && version == Some(&p.version) {
        return Ok(Some(record));
    }
    Err(no_record(p))
}

fn no_record(p: &Pick) -> Error {
    Diagnostic::new(
        Stage::Lock,
        format!(
            "the resolution's `{}` pick ({}) carries no catalog record of its own",
            p.component.name(),
            p.version
        ),
    )
    .hint("build the resolution with `gpustack::solve`, which records each pick's catalog entry")
    .into()
}

/// A component's fields (`compat`, `index-url`, `arch-list`, `wheel`, …), from its record.
fn component_fields(r: &Resolution, p: &Pick) -> Result<BTreeMap<String, Field>, Error> {
    let mut f = Fields::default();
    match record_of(p)? {
        Some(Record::Driver { branch }) => driver_fields(&mut f, branch.as_ref(), p),
        Some(Record::Cuda {
            release,
            minor_compat,
        }) => {
            f.opt("driver-min", release.driver_min.as_ref());
            f.opt(
                "driver-min-minor-compat",
                minor_compat.as_ref().map(|m| &m.driver_min),
            );
            f.compat(r.cuda_compat.as_ref());
        }
        Some(Record::Lib(l)) => f.list("cuda-majors", &l.cuda_majors),
        Some(Record::Torch {
            build,
            source: Some(src),
        }) if r.spec.torch_source.is_some() => torch_source_fields(&mut f, r, build, src),
        Some(Record::Torch { build, .. }) => torch_wheel_fields(&mut f, r, build),
        Some(Record::Vllm(v)) => {
            f.str("torch", v.torch.to_string());
            f.str("cuda", v.cuda.to_string());
            f.opt("min-cc", v.min_cc.as_ref());
            f.compat(r.vllm_compat.as_ref());
            let py = python(r);
            if let Some(file) = v
                .files
                .iter()
                .find(|x| x.python.is_none() || x.python == py)
            {
                add_file(&mut f.0, file);
            }
        }
        Some(Record::Extra(e)) => extra_fields(&mut f, r, e),
        Some(Record::Deepspeed(d)) if !d.cuda_mismatch_ok.is_empty() => {
            f.list("cuda-mismatch-ok", &d.cuda_mismatch_ok);
        }
        Some(Record::Deepspeed(_)) => {}
        None => {}
    }
    Ok(f.0)
}

/// The fields being built for one component.
#[derive(Default)]
struct Fields(BTreeMap<String, Field>);

impl Fields {
    fn str(&mut self, k: &str, v: String) {
        self.0.insert(k.to_string(), Field::Str(v));
    }

    fn opt(&mut self, k: &str, v: Option<&impl ToString>) {
        if let Some(v) = v {
            self.str(k, v.to_string());
        }
    }

    fn list<T: ToString>(&mut self, k: &str, v: &[T]) {
        self.0.insert(
            k.to_string(),
            Field::List(v.iter().map(ToString::to_string).collect()),
        );
    }

    /// `compat` and, for forward compatibility, `compat-package`.
    fn compat(&mut self, c: Option<&Compat>) {
        if let Some(c) = c {
            self.str("compat", c.as_str().to_string());
            if let Compat::Forward { package } = c {
                self.str("compat-package", package.clone());
            }
        }
    }
}

fn python(r: &Resolution) -> Option<crate::core::version::Version> {
    r.pick(Component::Python).map(|p| p.version.clone())
}

fn driver_fields(f: &mut Fields, branch: Option<&crate::catalog::DriverBranch>, p: &Pick) {
    let Some(b) = branch else {
        f.str("branch", format!("R{}", p.version.major()));
        return;
    };
    f.str("branch", format!("R{}", b.number));
    f.str("branch-type", b.kind.as_str().to_string());
    f.str(
        "branch-status",
        if b.supported { "supported" } else { "eol" }.to_string(),
    );
    f.opt("eol", b.eol.as_ref());
}

/// Built from source: the release's tag, the toolkit's CUDA minor, the arch list to
/// compile, and the build's own requirements; the wheel's pins and files do not apply.
fn torch_source_fields(
    f: &mut Fields,
    r: &Resolution,
    t: &crate::catalog::TorchBuild,
    src: &crate::catalog::TorchSource,
) {
    f.str("build", "source".into());
    f.str("variant", t.variant.clone());
    f.str("cuda", t.cuda.to_string());
    f.str("source-repository", src.repository.clone());
    f.str("source-tag", src.tag.clone());
    f.opt("source-commit", src.commit.as_ref());
    if let Some(a) = &src.archive {
        f.str("source-archive", a.url.clone());
        f.str("source-archive-sha256", a.sha256.clone());
    }
    if let Some(gcc) = r.spec.os.as_deref().and_then(|os| src.compiler.os_gcc(os)) {
        f.str("host-gcc", gcc.to_string());
    }
    f.str("cudnn-min", src.cudnn_min.to_string());
    f.compat(r.torch_compat.as_ref());
    let archs = r
        .spec
        .torch_source
        .as_ref()
        .filter(|x| !x.archs.is_empty())
        .map_or(&r.arch_list, |x| &x.archs);
    f.list("arch-list", &crate::core::arch::torch_list(archs));
    f.list("build-requires", &src.build_requires);
    f.list("runtime-requires", &src.runtime_requires);
}

fn torch_wheel_fields(f: &mut Fields, r: &Resolution, t: &crate::catalog::TorchBuild) {
    f.str("variant", t.variant.clone());
    f.str("cuda", t.cuda.to_string());
    f.str("index-url", t.index_url.clone());
    if t.pypi_default {
        f.str("pypi-default", "true".into());
        f.list("pypi-cpus", &t.pypi_cpus);
    }
    f.opt("cudnn", t.cudnn.as_ref());
    f.opt("nccl", t.nccl.as_ref());
    f.opt("cusparselt", t.cusparselt.as_ref());
    f.compat(r.torch_compat.as_ref());
    f.list("arch-list", &crate::core::arch::torch_list(&t.arch_list));
    let py = python(r);
    if let Some(file) = t
        .files
        .iter()
        .find(|x| x.python.is_some() && x.python == py)
    {
        add_file(&mut f.0, file);
    }
}

fn extra_fields(f: &mut Fields, r: &Resolution, e: &crate::catalog::ExtraRelease) {
    f.str("pypi-name", e.pypi_name.clone());
    f.str("index-url", e.index.clone());
    f.opt("torch", e.torch.as_ref());
    f.opt("python", e.python.as_ref());
    f.opt("min-cc", e.min_cc.as_ref());
    f.opt("pypi-variant", e.pypi_variant.as_ref());
    f.opt("prebuilt", e.prebuilt.as_ref());
    if let Some(m) = &e.cuda_majors {
        f.list("cuda-majors", m);
    }
    // A file fits when its wheel tag fits the locked Python and, where the catalog says
    // which CUDA variant the wheel on the index is, torch is that variant.
    let py = python(r);
    let torch_variant = r.torch_build().map(|t| t.variant.as_str());
    let variant_ok = e
        .pypi_variant
        .as_deref()
        .is_none_or(|v| Some(v) == torch_variant);
    if let Some(file) = e
        .files
        .iter()
        .find(|x| variant_ok && (x.python.is_none() || x.python == py))
    {
        add_extra_file(&mut f.0, file);
    }
}

fn add_file(fields: &mut BTreeMap<String, Field>, f: &crate::catalog::FileRef) {
    fields.insert("wheel".into(), Field::Str(f.filename.clone()));
    fields.insert("sha256".into(), Field::Str(f.sha256.clone()));
    if let Some(i) = &f.index {
        fields.insert("wheel-index".into(), Field::Str(i.clone()));
    }
}

/// An extra's file: a wheel as torch's and vLLM's are (`wheel`, `sha256`, `wheel-index`), or
/// a source distribution (`sdist`, `sha256`, `sdist-index`), which pip builds.
fn add_extra_file(fields: &mut BTreeMap<String, Field>, f: &crate::catalog::FileRef) {
    if f.filename.ends_with(".whl") {
        add_file(fields, f);
        return;
    }
    fields.insert("sdist".into(), Field::Str(f.filename.clone()));
    fields.insert("sha256".into(), Field::Str(f.sha256.clone()));
    if let Some(i) = &f.index {
        fields.insert("sdist-index".into(), Field::Str(i.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spec;

    fn solved(cat: &Catalog) -> Resolution {
        let text = "[stack]\nname = \"t\"\n[hardware]\ngpus = [\"h100\"]\n[components]\ntorch = \"*\"\nvllm = \"*\"\nflash-attn = \"*\"\ncudnn = \"*\"\nnccl = \"*\"\n";
        let spec = Spec::parse("t.toml", text, cat).unwrap();
        crate::solve(cat, &spec).unwrap()
    }

    #[test]
    fn another_catalog_cannot_change_the_components() {
        let cat = Catalog::stock().unwrap();
        let r = solved(&cat);
        let want = Lock::from_resolution(&cat, &r).unwrap();
        // The same entries in another order: positions differ, the components do not (the
        // selection reads lists in the catalog's newest-first order, which this breaks).
        let mut shuffled = cat.clone();
        shuffled.cuda.reverse();
        shuffled.cudnn.reverse();
        shuffled.nccl.reverse();
        shuffled.torch.reverse();
        shuffled.vllm.reverse();
        shuffled.extras.reverse();
        shuffled.deepspeed.reverse();
        let lock = Lock::from_resolution(&shuffled, &r).unwrap();
        assert_eq!(lock.components, want.components);
        assert_eq!(lock.hardware, want.hardware);
        // A catalog without the solver's entries at all: the components still come from
        // the resolution's records.
        let mut bare = cat.clone();
        bare.cuda.clear();
        bare.cudnn.clear();
        bare.nccl.clear();
        bare.torch.clear();
        bare.vllm.clear();
        bare.extras.clear();
        bare.branches.clear();
        bare.minor_compat.clear();
        bare.torch_sources.clear();
        bare.gpus.clear();
        let lock = Lock::from_resolution(&bare, &r).unwrap();
        assert_eq!(lock.components, want.components);
        assert_eq!(lock.hardware, want.hardware);
    }

    #[test]
    fn a_hand_built_resolution_without_a_driver_is_an_error() {
        let cat = Catalog::stock().unwrap();
        let mut r = solved(&cat);
        r.picks.retain(|p| p.component != Component::Driver);
        let e = Lock::from_resolution(&cat, &r).unwrap_err().to_string();
        assert!(e.contains("the resolution has no driver pick"), "{e}");
    }

    #[test]
    fn a_pick_without_its_record_is_an_error() {
        let cat = Catalog::stock().unwrap();
        let mut r = solved(&cat);
        for p in &mut r.picks {
            if p.component == Component::Torch {
                p.record = None;
            }
        }
        let e = Lock::from_resolution(&cat, &r).unwrap_err().to_string();
        assert!(e.contains("the resolution's `torch` pick"), "{e}");
        // A record of another entry (the vLLM release on the torch pick) is refused too.
        let mut r = solved(&cat);
        let vllm = r.record(Component::Vllm).cloned();
        for p in &mut r.picks {
            if p.component == Component::Torch {
                p.record.clone_from(&vllm);
            }
        }
        assert!(Lock::from_resolution(&cat, &r).is_err());
    }

    fn resolve(gpu: &str, components: &str) -> Result<Resolution, Error> {
        let cat = Catalog::stock().unwrap();
        let text = format!(
            "[stack]\nname = \"t\"\n[hardware]\ngpus = [\"{gpu}\"]\n[components]\n{components}\n"
        );
        let spec = Spec::parse("t.toml", &text, &cat).unwrap();
        crate::solve(&cat, &spec)
    }

    fn picked(r: &Resolution, c: Component) -> String {
        r.pick(c).unwrap().version.to_string()
    }

    #[test]
    fn cuda_major_picks_the_matching_distribution() {
        let cat = Catalog::stock().unwrap();
        for (cuda, want) in [("12", "cupy-cuda12x"), ("13", "cupy-cuda13x")] {
            let r = resolve("h100", &format!("cuda = \"{cuda}\"\ncupy = \"14.2\"")).unwrap();
            let lock = Lock::from_resolution(&cat, &r).unwrap();
            let c = lock.component(Component::Cupy).unwrap();
            assert_eq!(c.get("pypi-name"), Some(want));
            assert_eq!(c.layer, crate::core::Layer::Framework);
        }
    }

    #[test]
    fn python_range_and_lock_files() {
        let cat = Catalog::stock().unwrap();
        let r = resolve("a100", "python = \"3.10\"\ntransformers = \"*\"").unwrap();
        // 5.23.0 and 5.22.2 require Python >=3.11.
        assert_eq!(picked(&r, Component::Transformers), "5.20.0");
        let lock = Lock::from_resolution(&cat, &r).unwrap();
        let t = lock.component(Component::Transformers).unwrap();
        assert_eq!(t.get("wheel"), Some("transformers-5.20.0-py3-none-any.whl"));
        assert_eq!(t.get("torch"), Some(">=2.6"));
        // flash-attn's file is its sdist.
        let r = resolve("a100", "flash-attn = \"2.8.3.post2\"").unwrap();
        let lock = Lock::from_resolution(&cat, &r).unwrap();
        let f = lock.component(Component::FlashAttn).unwrap();
        assert_eq!(f.get("sdist"), Some("flash_attn-2.8.3.post2.tar.gz"));
        assert_eq!(f.get("wheel"), None);
        // The PyPI xformers wheel is a cu128 build: locked with a cu128 torch only.
        for (torch, wheel) in [("==2.10.0+cu128", true), ("==2.10.0+cu126", false)] {
            let r = resolve("h100", &format!("torch = \"{torch}\"\nxformers = \"*\"")).unwrap();
            let lock = Lock::from_resolution(&cat, &r).unwrap();
            let x = lock.component(Component::Xformers).unwrap();
            assert_eq!(x.get("wheel").is_some(), wheel, "{torch}");
            assert_eq!(x.get("pypi-variant"), Some("cu128"));
            assert_eq!(Lock::parse("l", &lock.to_toml()).unwrap(), lock);
        }
    }
}
