//! Digests and seals: `spec-digest`, layer closure hashes, the `[integrity]` table.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use sha2::{Digest, Sha256};

use super::{
    request_toml, Hardware, Lock, LockedComponent, LockedFact, LockedLayer, LockedPackage,
    Mismatch, PythonLock, Seal, LOCK_VERSION, SEALED_SINCE,
};
use crate::catalog::{hex, push_hex};
use crate::core::{Field, Layer};
use crate::error::{Diagnostic, Stage};
use crate::spec::Spec;

impl Seal {
    pub(super) fn of(table: &str, text: &str) -> Seal {
        thread_local! {
            /// The digest and line checksums of each table text sealed so far. One
            /// `gpustack lock` seals the same tables several times (after the solve, after
            /// each resolution step, when writing) and a SHA-256 per line is most of it.
            static SEALED: RefCell<HashMap<String, (String, String)>> =
                RefCell::new(HashMap::new());
        }
        let (digest, lines) = SEALED.with(|sealed| {
            if let Some(hit) = sealed.borrow().get(text) {
                return hit.clone();
            }
            let mut h = Sha256::new();
            h.update(b"gpustack-table-v1\n");
            h.update(text.as_bytes());
            let mut lines = String::with_capacity(4 * text.lines().count());
            for l in text.lines() {
                let d = Sha256::digest(l.as_bytes());
                push_hex(&mut lines, &d[..2]);
            }
            let mut digest = String::with_capacity(71);
            digest.push_str("sha256:");
            push_hex(&mut digest, &h.finalize());
            let mut sealed = sealed.borrow_mut();
            // Bounded: a long-lived process (a fuzzer, the matrix) seals many locks.
            if sealed.len() >= 4096 {
                sealed.clear();
            }
            sealed.insert(text.to_string(), (digest.clone(), lines.clone()));
            (digest, lines)
        });
        Seal {
            table: table.to_string(),
            digest,
            lines,
        }
    }

    /// Index of the first line whose checksum differs from `other`'s.
    fn first_difference(&self, other: &Seal) -> Option<usize> {
        let a: Vec<&[u8]> = self.lines.as_bytes().chunks(4).collect();
        let b: Vec<&[u8]> = other.lines.as_bytes().chunks(4).collect();
        (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i))
    }
}

impl Lock {
    /// Refuses a lock without `[integrity]` seals (versions 1 to 3) for `gen` and `check`.
    ///
    /// Such a lock cannot be re-verified: its layer hashes and `spec-digest` leave out
    /// fields that reach generated files (a GPU's `gfd-product` becomes a node selector, the
    /// acceptance thresholds a pass mark), and a sealed lock whose `version` was lowered and
    /// whose `[integrity]` was deleted reads the same. So the seal covers what it covers
    /// whatever `version` says: an unsealed lock is read (`why`, `diff`, and `lock`, which
    /// keeps its picks and writes a sealed lock), never rendered or called clean.
    /// `file` and `text` are the lock's name and text, for the location.
    ///
    /// ```
    /// # use gpustack::Lock;
    /// let text = std::fs::read_to_string("fixtures/lockfiles/v3/gh200-hpc.lock").unwrap();
    /// let lock = Lock::parse("gpustack.lock", &text)?;
    /// let e = lock.require_seals("gpustack.lock", &text).unwrap_err();
    /// assert!(e.to_string().contains("a version 3 lock: it has no `[integrity]` seals"));
    /// # Ok::<(), gpustack::Error>(())
    /// ```
    pub fn require_seals(&self, file: &str, text: &str) -> Result<(), Diagnostic> {
        if self.format >= SEALED_SINCE {
            return Ok(());
        }
        let at = text.find("\nversion").map_or(0, |i| i + 1);
        Err(Diagnostic::new(
            Stage::Lock,
            format!(
                "`{file}` is a version {} lock: it has no `[integrity]` seals, so its content cannot be verified",
                self.format
            ),
        )
        .at_offset(file, text, at)
        .hint(format!(
            "re-lock with `gpustack lock`: it keeps this lock's picks where the catalog still has them and writes a sealed version {LOCK_VERSION} lock (a sealed lock whose `version` was lowered by hand reads the same as an old one, so neither is trusted)"
        )))
    }

    /// The seals of the lock's content, as [`Lock::to_toml`] writes them.
    pub fn seals(&self) -> Vec<Seal> {
        self.sections()
            .iter()
            .map(|(table, text)| Seal::of(table, text))
            .collect()
    }

    /// Recomputes the digests the lock records from the lock's own content: `spec-digest`
    /// over `[request]`, and each layer's closure hash over its members. A lock written by
    /// gpustack always verifies; a hand edit (a version bumped in place, a layer hash copied
    /// from elsewhere) does not. Returns every mismatch: from version 4 on, first the
    /// tables whose `[integrity]` seal fails (with the edited line, [`Mismatch::offset`]),
    /// then `spec-digest` and the layer hashes.
    ///
    /// ```
    /// # use gpustack::{Catalog, Lock};
    /// let catalog = Catalog::stock()?;
    /// let spec = "[stack]\nname = \"demo\"\n[hardware]\ngpus = [\"a100\"]\n[components]\ntorch = \"*\"\n";
    /// let lock = gpustack::lock_spec(&catalog, "gpustack.toml", spec)?;
    /// assert!(lock.verify().is_empty());
    /// let edited = lock.to_toml().replacen(&lock.components[1].version.to_string(), "99.9", 1);
    /// let edited = Lock::parse("gpustack.lock", &edited)?;
    /// assert!(!edited.verify().is_empty());
    /// # Ok::<(), gpustack::Error>(())
    /// ```
    pub fn verify(&self) -> Vec<Mismatch> {
        let mut out = self.verify_content();
        if self.format >= SEALED_SINCE {
            // The seals name the edited table and line: they come first.
            let mut sealed = self.unsealed();
            sealed.append(&mut out);
            return sealed;
        }
        out
    }

    /// [`Lock::verify`] without the `[integrity]` seals: `spec-digest` and the layer
    /// hashes, recomputed. For a lock read in its canonical form
    /// ([`Lock::parse_canonical`]), whose seals are those of its tables by construction.
    pub(crate) fn verify_content(&self) -> Vec<Mismatch> {
        let mut out = Vec::new();
        let digest = spec_digest(&self.request);
        if digest != self.spec_digest {
            out.push(Mismatch {
                what: "spec-digest".into(),
                recorded: self.spec_digest.clone(),
                computed: digest,
                at: None,
            });
        }
        // v1 locks hashed no packages or facts; their layers are recomputed the same way,
        // since both lists are empty there.
        let mut computed = layers(
            &self.hardware,
            &self.request,
            &self.components,
            &self.packages,
            &self.facts,
            self.format,
        );
        fold_python(&mut computed, self.python.as_ref());
        for l in &self.layers {
            let now = computed.iter().find(|c| c.layer == l.layer);
            let now_hash = now.map_or_else(|| "(no such layer)".to_string(), |c| c.hash.clone());
            if now_hash != l.hash {
                out.push(Mismatch {
                    what: format!("layer `{}` hash", l.layer.name()),
                    recorded: l.hash.clone(),
                    computed: now_hash,
                    at: None,
                });
            }
        }
        for c in &computed {
            if !self.layers.iter().any(|l| l.layer == c.layer) {
                out.push(Mismatch {
                    what: format!("layer `{}`", c.layer.name()),
                    recorded: "(missing)".into(),
                    computed: c.hash.clone(),
                    at: None,
                });
            }
        }
        out
    }

    /// The tables whose `[integrity]` seal does not match their content (version 4 on),
    /// each with the line the edit is on where the line checksums tell.
    fn unsealed(&self) -> Vec<Mismatch> {
        let computed = self.seals();
        let mut out = Vec::new();
        let mut unmatched: Vec<&Seal> = Vec::new();
        for c in &computed {
            match self.integrity.iter().find(|r| r.table == c.table) {
                Some(r) if r == c => {}
                Some(r) => out.push(Mismatch {
                    what: format!("`{}` table (its [integrity] seal)", c.table),
                    recorded: r.digest.clone(),
                    computed: c.digest.clone(),
                    // An edited seal: every line still matches its checksum.
                    at: Some(c.first_difference(r).map_or_else(
                        || (format!("integrity {}", c.table), 0),
                        |i| (c.table.clone(), i),
                    )),
                }),
                None => unmatched.push(c),
            }
        }
        let mut orphans: Vec<&Seal> = self
            .integrity
            .iter()
            .filter(|r| !computed.iter().any(|c| c.table == r.table))
            .collect();
        for c in unmatched {
            // A renamed table (its `name` edited): pair it with the recorded seal of the
            // same kind and length that differs least, to point at the edited line.
            let kind = c.table.split(' ').next().unwrap_or("");
            let best = orphans
                .iter()
                .enumerate()
                .filter(|(_, r)| {
                    r.table.split(' ').next() == Some(kind) && r.lines.len() == c.lines.len()
                })
                .min_by_key(|(_, r)| {
                    c.lines
                        .as_bytes()
                        .chunks(4)
                        .zip(r.lines.as_bytes().chunks(4))
                        .filter(|(a, b)| a != b)
                        .count()
                })
                .map(|(i, _)| i);
            let (recorded, line) = match best {
                Some(i) => {
                    let r = orphans.remove(i);
                    (r.digest.clone(), c.first_difference(r).unwrap_or(0))
                }
                None => ("(no seal)".to_string(), 0),
            };
            out.push(Mismatch {
                what: format!("`{}` table (it has no [integrity] seal)", c.table),
                recorded,
                computed: c.digest.clone(),
                at: Some((c.table.clone(), line)),
            });
        }
        for r in orphans {
            out.push(Mismatch {
                what: format!("[integrity] seal of `{}` (no such table)", r.table),
                recorded: r.digest.clone(),
                computed: "(no such table)".into(),
                at: Some((format!("integrity {}", r.table), 0)),
            });
        }
        out
    }
}

/// `sha256:…` of the canonical request.
pub fn spec_digest(spec: &Spec) -> String {
    format!(
        "sha256:{}",
        hex(&Sha256::digest(request_toml(spec).as_bytes()))
    )
}

pub(super) fn layers(
    hw: &Hardware,
    spec: &Spec,
    comps: &[LockedComponent],
    pkgs: &[LockedPackage],
    facts: &[LockedFact],
    format: u32,
) -> Vec<LockedLayer> {
    // Version 3 also hashes what names an image (its repository, image and tag): a
    // hand-edited `repository` must not keep the layer's hash.
    let package_pinned: &[&str] = if format >= 3 {
        PACKAGE_PINNED_FIELDS_V3
    } else {
        PACKAGE_PINNED_FIELDS
    };
    let mut out: Vec<LockedLayer> = Vec::new();
    for l in Layer::EVERY {
        let members: Vec<&LockedComponent> = comps.iter().filter(|c| c.layer == l).collect();
        let packages: Vec<&LockedPackage> = pkgs.iter().filter(|p| p.layer == l).collect();
        if members.is_empty() && packages.is_empty() && l != Layer::Base {
            continue;
        }
        let parent = l
            .parent()
            .and_then(|p| out.iter().find(|x| x.layer == p))
            .map(|x| x.hash.clone())
            .unwrap_or_default();
        let mut h = Sha256::new();
        h.update(format!("gpustack-layer-v1\n{}\nparent={parent}\n", l.name()).as_bytes());
        if l == Layer::Base {
            h.update(
                format!(
                    "arch-list={}\nos={}\n",
                    hw.arch_list
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                    spec.os.as_deref().unwrap_or("")
                )
                .as_bytes(),
            );
            // The fabric environment is baked into the base image.
            for f in facts.iter().filter(|f| f.kind == "env") {
                h.update(format!("env {}={}\n", f.key, f.get("value").unwrap_or("")).as_bytes());
            }
            // The CUDA build of the NCCL packages the base image installs.
            for f in facts.iter().filter(|f| f.kind == "nccl-build") {
                h.update(
                    format!(
                        "nccl-build {}=cuda{}\n",
                        f.get("nccl").unwrap_or(""),
                        f.get("cuda").unwrap_or("")
                    )
                    .as_bytes(),
                );
            }
        }
        if l == Layer::Host {
            // The driver's kernel modules a VM image installs.
            for f in facts.iter().filter(|f| f.kind == "kernel-modules") {
                h.update(format!("kernel-modules={}\n", f.get("flavour").unwrap_or("")).as_bytes());
            }
        }
        for c in &members {
            h.update(format!("{}={}\n", c.name.name(), c.version).as_bytes());
            hash_pinned(&mut h, &c.fields, PINNED_FIELDS);
        }
        for p in &packages {
            h.update(format!("package {}={}\n", p.name, p.version).as_bytes());
            hash_pinned(&mut h, &p.fields, package_pinned);
        }
        out.push(LockedLayer {
            layer: l,
            components: members.iter().map(|c| c.name).collect(),
            packages: packages.iter().map(|p| p.name.clone()).collect(),
            hash: format!("sha256:{}", hex(&h.finalize())),
        });
    }
    out
}

/// Folds the Python closure into the layer hashes: a layer whose image installs a pylock
/// (or a package built from a locked sdist) changes hash with it. Locks without a closure
/// keep their hashes.
pub(super) fn fold_python(layers: &mut [LockedLayer], python: Option<&PythonLock>) {
    let Some(p) = python else { return };
    for l in layers.iter_mut() {
        let name = l.layer.name();
        let mut h = Sha256::new();
        let mut any = false;
        // The build stage's closure feeds the layers that install what it compiles.
        let feeds: Vec<&str> = p
            .builds
            .iter()
            .filter(|b| b.layer == name)
            .map(|_| "build")
            .collect();
        for f in p
            .files
            .iter()
            .filter(|f| f.layer == name || feeds.contains(&f.layer.as_str()))
        {
            h.update(format!("pylock {} {} {}\n", f.file, f.platform, f.digest).as_bytes());
            any = true;
        }
        for b in p.builds.iter().filter(|b| b.layer == name) {
            h.update(format!("sdist {}={} {} {}\n", b.name, b.version, b.url, b.sha256).as_bytes());
            any = true;
        }
        if name == "framework" {
            h.update(
                format!(
                    "resolver={} exclude-newer={}\n",
                    p.resolver, p.exclude_newer
                )
                .as_bytes(),
            );
            any = true;
        }
        if any {
            h.update(l.hash.as_bytes());
            l.hash = format!("sha256:{}", hex(&h.finalize()));
        }
    }
}

/// Component fields that change what a layer installs, and so enter its closure hash.
/// Descriptive fields (branch status, end of life, minimums) do not.
const PINNED_FIELDS: &[&str] = &[
    "arch-list",
    "build",
    "build-requires",
    "compat",
    "compat-package",
    "cuda",
    "cudnn",
    "cusparselt",
    "host-gcc",
    "index-url",
    "nccl",
    "pypi-name",
    "runtime-requires",
    "sdist",
    "sdist-index",
    "sha256",
    "source-archive",
    "source-archive-sha256",
    "source-commit",
    "source-repository",
    "source-tag",
    "torch",
    "variant",
    "wheel",
    "wheel-index",
];

/// Feeds the pinned fields of a member into a layer hash: `  key=value`, lists joined by `,`.
fn hash_pinned(h: &mut Sha256, fields: &BTreeMap<String, Field>, pinned: &[&str]) {
    for (k, v) in fields.iter().filter(|(k, _)| pinned.contains(&k.as_str())) {
        let v = match v {
            Field::Str(s) => s.clone(),
            Field::List(l) => l.join(","),
        };
        h.update(format!("  {k}={v}\n").as_bytes());
    }
}

/// Package fields that change what a layer installs.
const PACKAGE_PINNED_FIELDS: &[&str] = &[
    "apt",
    "devel-digest",
    "devel-tag",
    "dnf",
    "image-digest",
    "image-tag",
    "runtime-digest",
    "runtime-tag",
    "sha256",
    "url",
];

/// Version 3's package fields that change what a layer installs: version 2's, and what
/// names an image (repository, image and tag), since a generated file pulls by name and
/// digest; and a host requirement's unpinned package names and kernel modules (no lock
/// before them has these fields, so their hashes stay).
const PACKAGE_PINNED_FIELDS_V3: &[&str] = &[
    "apt",
    "apt-names",
    "devel-digest",
    "devel-tag",
    "dnf",
    "dnf-names",
    "image",
    "image-digest",
    "image-tag",
    "kernel-modules",
    "repository",
    "runtime-digest",
    "runtime-tag",
    "sha256",
    "url",
];
