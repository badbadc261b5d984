//! The stock catalog as data: the validated [`Catalog`] the build script builds from
//! `catalog/*.toml`, in a binary form the library decodes at start instead of ingesting,
//! validating and sorting the stock files again (that was more than half of a cold
//! `gpustack lock`; the book's performance chapter, "The stock catalog as data").
//!
//! This file is compiled into both the build script and the library, like `codec.rs`, whose
//! primitives it uses: every model type is listed once below with all its fields, so a
//! field added to a model type and not here is a compile error. Versions are written as
//! their parsed parts, so loading parses none; requirements as their text, parsed again;
//! enums as their position. Strings are written once each, together, and checked as UTF-8
//! in one pass; a value names its string by offset and length.
//!
//! Layout: the strings, then the origins, then the [`Catalog`], whose values name their origin by
//! number (an origin shared by several values, as a torch release's is by its builds, stays
//! shared). The origins are the files' display and lock names, then each origin's file,
//! line, source, family (the catalog field its entry is in), and where its canonical body lies in the stock blob (the wire
//! encoding, `codec.rs`, already holds every entry's body; it is borrowed from there, not
//! copied, and not read until a lock digests that entry).

// The encoder is used by the build script and the tests, the decoder by the library.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use super::codec::{codec_struct, put_len, Codec, Reader, Writer};
use super::model::*;
use crate::core::arch::{Cc, Suffix, Target};
use crate::core::version::{RawVersion, Version, VersionReq};
use crate::core::{Component, Layer};

/// Encodes a stock catalog; `None` when a value does not come from the stock blob `blob`
/// (an overlay entry), which a snapshot cannot hold.
pub(crate) fn encode(catalog: &Catalog, blob: &[u8]) -> Option<Vec<u8>> {
    let mut body = Writer::new();
    body.strings = Some((String::new(), BTreeMap::new()));
    catalog.enc(&mut body);
    let origins = std::mem::take(&mut body.origins);
    let mut files: Vec<(&str, &str)> = Vec::new();
    let mut head = Writer::new();
    head.strings = body.strings.take();
    let mut rows = Vec::with_capacity(origins.len());
    for o in &origins {
        let Canonical::Stock { family, body: text } = &o.canonical else {
            return None;
        };
        let at = (text.as_ptr() as usize).checked_sub(blob.as_ptr() as usize)?;
        if at + text.len() > blob.len() {
            return None;
        }
        let file = match files.iter().position(|f| *f == (&*o.file, &*o.lock_name)) {
            Some(i) => i,
            None => {
                files.push((&o.file, &o.lock_name));
                files.len() - 1
            }
        };
        rows.push((file, o.line, &o.source, family, at, text.len()));
    }
    put_len(files.len(), &mut head);
    for (file, lock_name) in files {
        file.to_string().enc(&mut head);
        lock_name.to_string().enc(&mut head);
    }
    put_len(rows.len(), &mut head);
    for (file, line, source, family, at, len) in rows {
        put_len(file, &mut head);
        put_len(line, &mut head);
        source.enc(&mut head);
        family.to_string().enc(&mut head);
        put_len(at, &mut head);
        put_len(len, &mut head);
    }
    let (strings, _) = head.strings.take()?;
    let mut out = Writer::new();
    put_len(strings.len(), &mut out);
    let mut out = out.into_bytes();
    out.extend_from_slice(strings.as_bytes());
    out.extend_from_slice(&head.into_bytes());
    out.extend_from_slice(&body.into_bytes());
    Some(out)
}

/// Decodes what [`encode`] wrote, borrowing canonical bodies from `blob` (the stock
/// blob it was encoded against); `None` when `buf` is malformed.
pub(crate) fn decode(buf: &'static [u8], blob: &'static [u8]) -> Option<Catalog> {
    let mut r = Reader::at(buf, 0);
    let n = r.len()?;
    r.strings = Some(std::str::from_utf8(r.bytes(n)?).ok()?);
    let n = r.len()?;
    let mut files = Vec::with_capacity(n.min(buf.len()));
    for _ in 0..n {
        let file: Arc<str> = Arc::from(r.str()?);
        let lock_name: Arc<str> = match r.str()? {
            same if same == &*file => Arc::clone(&file),
            other => Arc::from(other),
        };
        files.push((file, lock_name));
    }
    let n = r.len()?;
    let mut origins = Vec::with_capacity(n.min(buf.len()));
    for _ in 0..n {
        let (file, lock_name) = files.get(r.len()?)?;
        let line = r.len()?;
        let source = String::dec(&mut r)?;
        let family = r.str()?;
        let at = r.len()?;
        let text = blob.get(at..at.checked_add(r.len()?)?)?;
        origins.push(Origin(Arc::new(OriginInner {
            file: Arc::clone(file),
            lock_name: Arc::clone(lock_name),
            line,
            source,
            canonical: Canonical::Stock { family, body: text },
            canonical_text: std::sync::OnceLock::new(),
        })));
    }
    r.origins = origins;
    let catalog = Catalog::dec(&mut r)?;
    (r.remaining() == 0).then_some(catalog)
}

impl Codec for Origin {
    fn enc(&self, out: &mut Writer) {
        let key = Arc::as_ptr(&self.0) as usize;
        let next = u32::try_from(out.origins.len()).expect("fewer than 4G origins");
        let id = *out.origin_ids.entry(key).or_insert(next);
        if id == next {
            out.origins.push(self.clone());
        }
        id.enc(out);
    }
    fn dec(r: &mut Reader<'_>) -> Option<Origin> {
        let id = usize::try_from(r.u32()?).ok()?;
        r.origins.get(id).cloned()
    }
}

impl Codec for Version {
    fn enc(&self, out: &mut Writer) {
        let raw = self.raw();
        raw.text.to_string().enc(out);
        raw.parts.to_vec().enc(out);
        raw.phase.enc(out);
        raw.local.map(str::to_string).enc(out);
    }
    fn dec(r: &mut Reader<'_>) -> Option<Version> {
        let text = r.str()?;
        let parts = Vec::<u64>::dec(r)?;
        let phase = <(u8, u64)>::dec(r)?;
        let local = Option::<String>::dec(r)?;
        Version::from_raw(RawVersion {
            text,
            parts: &parts,
            phase,
            local: local.as_deref(),
        })
    }
}

impl Codec for VersionReq {
    fn enc(&self, out: &mut Writer) {
        self.to_string().enc(out);
    }
    fn dec(r: &mut Reader<'_>) -> Option<VersionReq> {
        VersionReq::parse(r.str()?).ok()
    }
}

impl Codec for Component {
    fn enc(&self, out: &mut Writer) {
        let i = Component::ALL.iter().position(|c| c == self);
        u8::try_from(i.expect("every component is in Component::ALL"))
            .expect("fewer than 256 components")
            .enc(out);
    }
    fn dec(r: &mut Reader<'_>) -> Option<Component> {
        Component::ALL.get(usize::from(u8::dec(r)?)).copied()
    }
}

/// An enum without fields, as its position in the list.
macro_rules! codec_enum {
    ($t:ident { $($v:ident),* $(,)? }) => {
        impl Codec for $t {
            fn enc(&self, out: &mut Writer) {
                const ALL: &[$t] = &[$($t::$v),*];
                let i = ALL.iter().position(|v| v == self).expect("listed");
                u8::try_from(i).expect("fewer than 256 variants").enc(out);
            }
            fn dec(r: &mut Reader<'_>) -> Option<$t> {
                const ALL: &[$t] = &[$($t::$v),*];
                ALL.get(usize::from(u8::dec(r)?)).copied()
            }
        }
    };
}

codec_enum!(Layer {
    Base,
    Framework,
    Inference,
    Training,
    Validate,
    Host
});
codec_enum!(Suffix { None, F, A });
codec_enum!(BranchKind { Ltsb, Pb, Nfb });
codec_enum!(OpenModules {
    Required,
    Supported,
    Unsupported
});
codec_enum!(ImageStatus {
    Supported,
    Unsupported,
    Observed
});
codec_enum!(NoImageStatus {
    Unpublished,
    Unknown
});
codec_enum!(DigestKind {
    Index,
    Manifest,
    Unknown
});

codec_struct!(Cc { major, minor });
codec_struct!(Target { cc, suffix, ptx });
codec_struct!(DriverBranch {
    number,
    kind,
    supported,
    eol,
    origin
});
codec_struct!(DriverRelease { version, branch });
codec_struct!(CudaRelease {
    version,
    driver_min,
    redist_only,
    origin
});
codec_struct!(MinorCompat {
    major,
    driver_min,
    origin
});
codec_struct!(ForwardCompat {
    cuda,
    package,
    bases,
    origin
});
codec_struct!(TargetSet { cuda, sm, origin });
codec_struct!(Gpu {
    id,
    name,
    aliases,
    cc,
    arch,
    datacenter,
    nvswitch,
    memory_gib,
    gfd_product,
    smi_names,
    min_driver,
    last_driver_branch,
    cpu,
    nvswitch_generation,
    origin,
});
codec_struct!(KernelModules {
    arch,
    gpu,
    open,
    open_default_from,
    origin
});
codec_struct!(Generation {
    arch,
    min_driver,
    last_driver_branch,
    origin
});
codec_struct!(GpuSupport { cc, since, origin });
codec_struct!(DeepspeedTorchMinimum {
    torch,
    deepspeed,
    origin
});
codec_struct!(Tested {
    name,
    cuda,
    cudnn,
    nccl,
    python,
    torch,
    origin
});
codec_struct!(WheelPlatform { tag, cpu, glibc });
codec_struct!(Yank {
    reason,
    observed,
    source
});
codec_struct!(GlibcFloor {
    cpu,
    glibc,
    by,
    source
});
codec_struct!(Installability {
    yanked,
    glibc_floor
});
codec_struct!(Os {
    id,
    cuda,
    glibc,
    releases,
    images,
    origin
});
codec_struct!(OsRelease {
    version,
    released,
    eol,
    vault,
    source
});
codec_struct!(OsImage {
    release,
    cpu,
    url,
    sha256,
    source
});
codec_struct!(PythonRelease {
    version,
    eol,
    origin
});
codec_struct!(LibRelease {
    version,
    cuda_majors,
    cuda_builds,
    min_cc,
    platforms,
    install,
    origin
});
codec_struct!(FileRef {
    version,
    python,
    index,
    filename,
    sha256
});
codec_struct!(TorchRelease {
    version,
    python,
    pypi_variant,
    pypi_cuda_cpus,
    platforms,
    install,
    triton,
    origin,
});
codec_struct!(TorchBuild {
    version,
    variant,
    full,
    cuda,
    index_url,
    arch_list,
    cudnn,
    nccl,
    cusparselt,
    python,
    python_origin,
    pypi_default,
    pypi_cpus,
    platforms,
    install,
    files,
    origin,
    release_origin,
});
codec_struct!(TorchSource {
    version,
    repository,
    tag,
    commit,
    archive,
    compiler,
    cmake_archs,
    cudnn_min,
    build_requires,
    runtime_requires,
    origin,
});
codec_struct!(SourceArchive { url, sha256 });
codec_struct!(CmakeArchs { suffixes, source });
codec_struct!(HostCompiler {
    gcc_min,
    nvcc_gcc_max,
    os_gcc
});
codec_struct!(VllmRelease {
    version,
    torch,
    cuda,
    python,
    min_cc,
    files,
    platforms,
    install,
    origin,
});
codec_struct!(DeepspeedRelease {
    version,
    torch,
    python,
    cuda_mismatch_ok,
    install,
    origin
});
codec_struct!(ExtraRelease {
    component,
    version,
    layer,
    torch,
    cuda_majors,
    min_cc,
    python,
    pypi_name,
    index,
    pypi_variant,
    prebuilt,
    files,
    platforms,
    install,
    origin,
});
codec_struct!(Catalog {
    branches,
    drivers,
    cuda,
    minor_compat,
    forward_compat,
    targets,
    gpus,
    kernel_modules,
    generations,
    cudnn_gpu_support,
    nccl_gpu_support,
    deepspeed_torch_minimum,
    tested,
    os,
    python,
    cudnn,
    nccl,
    torch_releases,
    torch,
    torch_sources,
    vllm,
    deepspeed,
    extras,
    images,
    no_images,
    packages,
    instances,
    clouds,
    bandwidth,
    env,
});
codec_struct!(BaseImage {
    cuda,
    os,
    tags,
    status,
    cudnn,
    digests,
    origin
});
codec_struct!(NoImage {
    cuda,
    status,
    note,
    origin
});
codec_struct!(DigestObservation {
    tag,
    digest,
    observed,
    source,
    kind
});
codec_struct!(Package {
    name,
    version,
    order,
    variant,
    url,
    sha256,
    commit,
    apt_packages,
    apt_pin,
    dnf_packages,
    image,
    image_digest,
    image_observation,
    image_tags,
    minimum_safe,
    follows_driver,
    follows,
    requires,
    nvswitch_generation,
    kernel_modules,
    os_release,
    note,
    origin,
});
codec_struct!(Instance {
    gpu,
    cloud,
    instance_type,
    gpus,
    accelerator_type,
    origin
});
codec_struct!(CloudSettings {
    id,
    on_host_maintenance,
    origin
});
codec_struct!(Bandwidth {
    gpu,
    fabric,
    test,
    size,
    busbw_gbps,
    nodes,
    gpus_per_node,
    sharp,
    origin,
});
codec_struct!(EnvVar {
    fabric,
    name,
    value,
    origin
});
