//! A compact binary form of parsed catalog files, so the stock catalog loads without TOML
//! parsing.
//!
//! The build script (`src/build.rs`) parses `catalog/*.toml` into the wire types of
//! [`super::wire`] and encodes them here; it and the library decode them back into the very
//! same values (spans included) and validate them exactly as TOML is validated: the build
//! script to write the validated catalog (`snapshot.rs`), the library when overlays are
//! merged on top of the stock files. This file is
//! compiled into both, so the two halves cannot disagree on the layout: every wire struct is
//! listed once, with all its fields in order (the struct literal in `dec` makes a missing
//! field a compile error).
//!
//! Layout, all integers little-endian `u32`: a string is its length and its UTF-8 bytes; an
//! `Option` a `0`/`1` byte, then the value; a `Vec` its length, then the items; a `bool` one
//! byte; a `Spanned` its start and end byte offsets, then the value; a struct its fields in
//! declaration order. A stock blob is the number of files, then for each file its display
//! path, its [`FileWire`], the 1-based source line of each of its entries (a `Vec` of
//! `u32`, in field order), and the canonical body of each entry (a `Vec` of strings: what
//! `toml::to_string` writes for it, the text the catalog digest of a lock hashes), so that
//! loading needs neither the TOML parser nor a line scan, and a lock serializes no entry.

// The encoder half is used by the build script and the tests, the decoder half by the
// library: each compilation uses one of them.
#![allow(dead_code)]

use toml::Spanned;

use super::model::Origin;
use super::wire::*;

/// Reads values back from an encoded buffer; `None` on malformed input.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// How many [`Spanned`] values (catalog entries) were decoded.
    entries: usize,
    /// The origins a stock snapshot's values refer to by number (`snapshot.rs`).
    pub(super) origins: Vec<Origin>,
    /// A stock snapshot's strings, checked as UTF-8 once (`snapshot.rs`): each string is
    /// then its offset and length in them.
    pub(super) strings: Option<&'a str>,
}

impl<'a> Reader<'a> {
    /// A reader at byte `pos` of `buf`.
    pub(crate) fn at(buf: &'a [u8], pos: usize) -> Reader<'a> {
        Reader {
            buf,
            pos,
            entries: 0,
            origins: Vec::new(),
            strings: None,
        }
    }
    pub(super) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }
    pub(super) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.remaining() {
            return None;
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Some(b)
    }
    pub(super) fn u32(&mut self) -> Option<u32> {
        let b = self.bytes(4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(super) fn len(&mut self) -> Option<usize> {
        usize::try_from(self.u32()?).ok()
    }
    /// A string in place, borrowed from the buffer (or from the strings, when it has them).
    pub(super) fn str(&mut self) -> Option<&'a str> {
        if let Some(strings) = self.strings {
            let at = self.len()?;
            return strings.get(at..at.checked_add(self.len()?)?);
        }
        let n = self.len()?;
        std::str::from_utf8(self.bytes(n)?).ok()
    }
}

/// An entry's canonical body, what the catalog digest hashes after its `[family]` line: the
/// build script writes it for stock entries, the library makes it for overlay entries.
pub(crate) fn canonical_body<T: serde::Serialize>(v: &T) -> String {
    toml::to_string(v).unwrap_or_default()
}

/// Collects the encoding, and where each [`Spanned`] value's source text starts.
pub(crate) struct Writer {
    buf: Vec<u8>,
    spans: Vec<usize>,
    /// The canonical body (`toml::to_string`) of each [`Spanned`] value, in encoding order.
    bodies: Vec<String>,
    /// A stock snapshot's origins, each numbered where it is first met (`snapshot.rs`), by
    /// the address of what it shares.
    pub(super) origins: Vec<Origin>,
    pub(super) origin_ids: std::collections::BTreeMap<usize, u32>,
    /// A stock snapshot's strings, each written once, and where each starts.
    pub(super) strings: Option<(String, std::collections::BTreeMap<String, usize>)>,
}

impl Writer {
    pub(super) fn new() -> Writer {
        Writer {
            buf: Vec::new(),
            spans: Vec::new(),
            bodies: Vec::new(),
            origins: Vec::new(),
            origin_ids: std::collections::BTreeMap::new(),
            strings: None,
        }
    }
    pub(super) fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// A value with a binary form.
pub(crate) trait Codec: Sized {
    fn enc(&self, out: &mut Writer);
    fn dec(r: &mut Reader<'_>) -> Option<Self>;
}

pub(super) fn put_len(n: usize, out: &mut Writer) {
    let n = u32::try_from(n).expect("catalog value larger than 4 GiB");
    out.buf.extend_from_slice(&n.to_le_bytes());
}

impl Codec for u32 {
    fn enc(&self, out: &mut Writer) {
        out.buf.extend_from_slice(&self.to_le_bytes());
    }
    fn dec(r: &mut Reader<'_>) -> Option<u32> {
        r.u32()
    }
}

impl Codec for u8 {
    fn enc(&self, out: &mut Writer) {
        out.buf.push(*self);
    }
    fn dec(r: &mut Reader<'_>) -> Option<u8> {
        r.bytes(1).map(|b| b[0])
    }
}

impl Codec for u64 {
    fn enc(&self, out: &mut Writer) {
        out.buf.extend_from_slice(&self.to_le_bytes());
    }
    fn dec(r: &mut Reader<'_>) -> Option<u64> {
        let b: [u8; 8] = r.bytes(8)?.try_into().ok()?;
        Some(u64::from_le_bytes(b))
    }
}

impl Codec for usize {
    fn enc(&self, out: &mut Writer) {
        u64::try_from(*self).expect("usize fits u64").enc(out);
    }
    fn dec(r: &mut Reader<'_>) -> Option<usize> {
        usize::try_from(u64::dec(r)?).ok()
    }
}

impl<A: Codec, B: Codec> Codec for (A, B) {
    fn enc(&self, out: &mut Writer) {
        self.0.enc(out);
        self.1.enc(out);
    }
    fn dec(r: &mut Reader<'_>) -> Option<(A, B)> {
        Some((A::dec(r)?, B::dec(r)?))
    }
}

impl Codec for bool {
    fn enc(&self, out: &mut Writer) {
        out.buf.push(u8::from(*self));
    }
    fn dec(r: &mut Reader<'_>) -> Option<bool> {
        match r.bytes(1)? {
            [0] => Some(false),
            [1] => Some(true),
            _ => None,
        }
    }
}

impl Codec for String {
    fn enc(&self, out: &mut Writer) {
        if let Some((all, at)) = &mut out.strings {
            let start = *at.entry(self.clone()).or_insert_with(|| {
                all.push_str(self);
                all.len() - self.len()
            });
            put_len(start, out);
        }
        put_len(self.len(), out);
        if out.strings.is_none() {
            out.buf.extend_from_slice(self.as_bytes());
        }
    }
    fn dec(r: &mut Reader<'_>) -> Option<String> {
        r.str().map(str::to_owned)
    }
}

impl<T: Codec> Codec for Option<T> {
    fn enc(&self, out: &mut Writer) {
        self.is_some().enc(out);
        if let Some(v) = self {
            v.enc(out);
        }
    }
    fn dec(r: &mut Reader<'_>) -> Option<Option<T>> {
        if bool::dec(r)? {
            T::dec(r).map(Some)
        } else {
            Some(None)
        }
    }
}

impl<T: Codec> Codec for Vec<T> {
    fn enc(&self, out: &mut Writer) {
        put_len(self.len(), out);
        for v in self {
            v.enc(out);
        }
    }
    fn dec(r: &mut Reader<'_>) -> Option<Vec<T>> {
        let n = r.len()?;
        // Every item takes at least one byte: a corrupt length cannot over-allocate.
        if n > r.remaining() {
            return None;
        }
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(T::dec(r)?);
        }
        Some(v)
    }
}

impl<T: Codec + serde::Serialize> Codec for Spanned<T> {
    fn enc(&self, out: &mut Writer) {
        let span = self.span();
        put_len(span.start, out);
        put_len(span.end, out);
        out.spans.push(span.start);
        out.bodies.push(canonical_body(self.get_ref()));
        self.get_ref().enc(out);
    }
    fn dec(r: &mut Reader<'_>) -> Option<Spanned<T>> {
        let start = r.len()?;
        let end = r.len()?;
        r.entries += 1;
        Some(Spanned::new(start..end, T::dec(r)?))
    }
}

macro_rules! codec_struct {
    ($t:ident { $($f:ident),* $(,)? }) => {
        impl Codec for $t {
            fn enc(&self, out: &mut Writer) {
                $( self.$f.enc(out); )*
            }
            fn dec(r: &mut Reader<'_>) -> Option<$t> {
                Some($t { $( $f: Codec::dec(r)?, )* })
            }
        }
    };
}
pub(super) use codec_struct;

codec_struct!(FileWire {
    family,
    description,
    branch,
    minor_compat,
    forward_compat,
    targets,
    gpu,
    kernel_modules,
    generation,
    gpu_support,
    torch_minimum,
    tested,
    os,
    wheel,
    source,
    release,
    extra,
    image,
    no_image,
    package,
    instance,
    cloud,
    bandwidth,
    env,
});
codec_struct!(KernelModulesWire {
    arch,
    gpu,
    open,
    open_default_from,
    source,
    note,
});
codec_struct!(EnvWire {
    fabric,
    name,
    value,
    source,
    note,
});
codec_struct!(ImageWire {
    cuda,
    os,
    tags,
    status,
    cudnn,
    digests,
    digest,
    source,
    note,
});
codec_struct!(NoImageWire {
    cuda,
    status,
    source,
    note,
});
codec_struct!(DigestWire {
    tag,
    digest,
    observed,
    source,
    kind,
});
codec_struct!(PackageWire {
    name,
    version,
    variant,
    url,
    sha256,
    commit,
    apt_packages,
    apt_pin,
    dnf_packages,
    image,
    image_digest,
    image_digest_observed,
    image_digest_source,
    image_digest_kind,
    image_tags,
    minimum_safe,
    follows_driver,
    follows,
    follows_versions,
    nvswitch_generation,
    kernel_modules,
    os_release,
    requires,
    source,
    note,
});
codec_struct!(InstanceWire {
    gpu,
    cloud,
    instance_type,
    gpus,
    accelerator_type,
    source,
    note,
});
codec_struct!(CloudWire {
    id,
    on_host_maintenance,
    source,
    note,
});
codec_struct!(BandwidthWire {
    gpu,
    fabric,
    test,
    size,
    busbw_gbps,
    nodes,
    gpus_per_node,
    sharp,
    source,
    note,
});
codec_struct!(DriverBranchWire {
    branch,
    kind,
    status,
    eol,
    versions,
    source,
    note,
});
codec_struct!(MinorCompatWire {
    major,
    driver_min,
    source,
    note,
});
codec_struct!(ForwardCompatWire {
    cuda,
    package,
    bases,
    source,
    note,
});
codec_struct!(TargetsWire {
    cuda,
    sm,
    source,
    note,
});
codec_struct!(GpuWire {
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
    source,
    note,
});
codec_struct!(GenerationWire {
    arch,
    min_driver,
    last_driver_branch,
    source,
    note,
});
codec_struct!(GpuSupportWire {
    cc,
    since,
    source,
    note,
});
codec_struct!(TorchMinimumWire {
    torch,
    deepspeed,
    source,
    note,
});
codec_struct!(TestedWire {
    name,
    cuda,
    cudnn,
    nccl,
    python,
    torch,
    source,
    note,
});
codec_struct!(OsWire {
    id,
    cuda,
    glibc,
    source,
    note,
    release,
    image,
});
codec_struct!(OsReleaseWire {
    version,
    released,
    eol,
    vault,
    source,
    note,
});
codec_struct!(OsImageWire {
    release,
    cpu,
    url,
    sha256,
    source,
});
codec_struct!(ReleaseWire {
    version,
    source,
    note,
    driver_min,
    redist_only,
    eol,
    cuda_majors,
    min_cc,
    cuda_builds,
    python,
    pypi_variant,
    pypi_cuda_cpus,
    torch,
    cuda,
    cuda_mismatch_ok,
    files,
    platforms,
    yanked,
    glibc_floor,
    triton,
});
codec_struct!(YankWire {
    reason,
    observed,
    source,
});
codec_struct!(GlibcFloorWire {
    cpu,
    glibc,
    by,
    source,
});
codec_struct!(TorchWheelWire {
    torch,
    variant,
    cuda,
    index_url,
    arch_list,
    cudnn,
    nccl,
    cusparselt,
    python,
    files,
    source,
    note,
});
codec_struct!(TorchSourceWire {
    torch,
    repository,
    tag,
    commit,
    archive,
    gcc_min,
    nvcc_host_gcc,
    os_gcc,
    cmake_archs,
    cudnn_min,
    build_requires,
    runtime_requires,
    source,
    note,
});
codec_struct!(ExtraWire {
    name,
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
    yanked,
    glibc_floor,
    source,
    note,
});
codec_struct!(SourceArchiveWire { url, sha256 });
codec_struct!(NvccHostGccWire {
    cuda,
    gcc_max,
    source,
});
codec_struct!(OsGccWire { os, gcc, source });
codec_struct!(CmakeArchsWire { suffixes, source });
codec_struct!(FileRefWire {
    version,
    python,
    index,
    filename,
    sha256,
});

/// A decoded catalog file.
pub(crate) struct Decoded<'a> {
    /// Display path (`catalog/cuda.toml`).
    pub(crate) path: String,
    pub(crate) file: FileWire,
    /// For each entry, in [`FileWire`] field order: its canonical body (what
    /// `toml::to_string` writes for it, computed at build time and borrowed from the
    /// buffer) and its 1-based line in the source text.
    pub(crate) entries: Vec<(&'a str, usize)>,
}

/// Encodes parsed files: (display path, source text, parsed file).
pub(crate) fn encode_files(files: &[(String, String, FileWire)]) -> Vec<u8> {
    let mut out = Writer::new();
    put_len(files.len(), &mut out);
    for (path, text, file) in files {
        path.enc(&mut out);
        out.spans.clear();
        out.bodies.clear();
        file.enc(&mut out);
        let starts = std::mem::take(&mut out.spans);
        let bodies = std::mem::take(&mut out.bodies);
        let lines: Vec<u32> = starts
            .iter()
            .map(|&at| {
                let n = text.as_bytes()[..at]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count()
                    + 1;
                u32::try_from(n).expect("catalog file longer than 4G lines")
            })
            .collect();
        lines.enc(&mut out);
        bodies.enc(&mut out);
    }
    out.buf
}

/// Decodes what [`encode_files`] wrote; `None` when the buffer is malformed.
pub(crate) fn decode_files(buf: &[u8]) -> Option<Vec<Decoded<'_>>> {
    let mut r = Reader::at(buf, 0);
    let n = r.len()?;
    let mut files = Vec::with_capacity(n.min(buf.len()));
    for _ in 0..n {
        let path = String::dec(&mut r)?;
        r.entries = 0;
        let file = FileWire::dec(&mut r)?;
        let lines = Vec::<u32>::dec(&mut r)?;
        let n = r.len()?;
        if lines.len() != r.entries || n != r.entries {
            return None;
        }
        let mut entries = Vec::with_capacity(n);
        for l in lines {
            entries.push((r.str()?, usize::try_from(l).ok()?));
        }
        files.push(Decoded {
            path,
            file,
            entries,
        });
    }
    (r.remaining() == 0).then_some(files)
}
