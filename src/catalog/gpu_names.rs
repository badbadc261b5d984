//! One table of the names a GPU goes by, read by everything that takes a GPU name from a
//! user: `init --gpu`, the spec's `[hardware].gpus`, the JSON Schema's GPU pattern,
//! `probe` (after the exact `smi_names` match) and the "did you mean" hints.
//!
//! A catalog GPU is named by
//!
//! * its **id** and **aliases** (`h100`, `h100-sxm5`): what editors complete and what the
//!   lock records (the id);
//! * its **marketing name** (`NVIDIA H100 SXM5 80GB`);
//! * the names **nvidia-smi** prints for it (`smi_names`: `NVIDIA H100 80GB HBM3`);
//!
//! each of the last two also without the leading `NVIDIA ` and without its memory tokens
//! (`80GB`, `HBM3`, `GDDR7`): `H100 80GB HBM3`, `L40S`, `A100-SXM4`. Names compare by
//! [`gpu_key`]: lowercase, a leading `nvidia` dropped, and case, white space, hyphens,
//! underscores, parentheses and commas do not count.
//!
//! A derived name (marketing, nvidia-smi, shortened) that two GPUs share names neither:
//! `A100 SXM4` is both the 80 GB and the 40 GB A100, so the spec must say which. Ids and
//! aliases always win over derived names.

use std::collections::BTreeMap;

use crate::catalog::{Catalog, Gpu};
use crate::core::names::levenshtein;

/// Where a spelling in the GPU name table comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum GpuNameKind {
    /// The catalog id (`h100`), which the lock records.
    Id,
    /// An alias from the catalog (`h100-sxm5`).
    Alias,
    /// The marketing name, or it shortened (`NVIDIA H100 SXM5 80GB`, `H100 SXM5`).
    Marketing,
    /// A name nvidia-smi prints, or it shortened (`NVIDIA H100 80GB HBM3`, `H100 80GB HBM3`).
    Smi,
}

/// One accepted spelling of a GPU.
#[derive(Clone, Debug)]
pub struct GpuName<'c> {
    /// The spelling as the table lists it (any case and separators are accepted too).
    pub spelling: String,
    /// Where it comes from.
    pub kind: GpuNameKind,
    /// The GPU it names.
    pub gpu: &'c Gpu,
}

/// How GPU names compare: lowercase, without separators (spaces, `-`, `_`,
/// parentheses and commas, as in `NVIDIA B300 (HGX B300, SXM6)`) and without a leading
/// `nvidia`. Any other character is kept, so `h100\` or `h100"` names no GPU.
///
/// ```
/// use gpustack::catalog::gpu_key;
/// assert_eq!(gpu_key("NVIDIA H100 80GB HBM3"), gpu_key("h100-80gb-hbm3"));
/// assert_eq!(gpu_key(" RTX_4090 "), "rtx4090");
/// assert_eq!(gpu_key("h100\\"), "h100\\");
/// ```
#[must_use]
pub fn gpu_key(s: &str) -> String {
    let k: String = s
        .chars()
        .filter(|c| !is_separator(*c))
        .map(|c| c.to_ascii_lowercase())
        .collect();
    match k.strip_prefix("nvidia") {
        Some(rest) if !rest.is_empty() => rest.to_string(),
        _ => k,
    }
}

/// What [`gpu_key`] ignores between the letters and digits of a GPU name; the schema's
/// pattern allows the same (`crate::spec::schema`).
pub(crate) const SEPARATORS: &str = "-_(),";

/// Spaces only: a tab, a newline or another control character is never part of a name.
fn is_separator(c: char) -> bool {
    c == ' ' || SEPARATORS.contains(c)
}

/// `name` without a leading `NVIDIA ` and without memory tokens (`80GB`, `HBM3`,
/// `GDDR6`), hyphens and spaces kept: `NVIDIA A100-SXM4-80GB` → `A100-SXM4`.
fn shortened(name: &str) -> String {
    let rest = name.trim();
    let rest = match rest.get(..7) {
        Some(p) if p.eq_ignore_ascii_case("nvidia ") => &rest[7..],
        _ => rest,
    };
    let mut out = String::new();
    for (i, word) in rest.split(' ').enumerate() {
        let parts: Vec<&str> = word.split('-').filter(|p| !is_memory_token(p)).collect();
        if parts.is_empty() {
            continue;
        }
        if i > 0 && !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&parts.join("-"));
    }
    out
}

/// `80GB`, `(480GB)`, `HBM3`, `HBM3e`, `GDDR7`.
fn is_memory_token(t: &str) -> bool {
    let t = t
        .trim_matches(|c| c == '(' || c == ')')
        .to_ascii_lowercase();
    let gb = t
        .strip_suffix("gb")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    gb || t.starts_with("hbm") || t.starts_with("gddr")
}

impl Catalog {
    /// Every spelling the catalog accepts for a GPU, ids and aliases first, then per GPU
    /// its marketing and nvidia-smi names and their shortened forms (see the module
    /// documentation of `catalog::gpu_names`). A derived spelling that would name two GPUs
    /// is left out.
    ///
    /// ```
    /// let catalog = gpustack::Catalog::stock()?;
    /// let names = catalog.gpu_names();
    /// let of = |s: &str| names.iter().find(|n| n.spelling == s).map(|n| n.gpu.id.as_str());
    /// assert_eq!(of("NVIDIA H100 80GB HBM3"), Some("h100"));
    /// assert_eq!(of("L40S"), Some("l40s"));
    /// assert_eq!(of("A100 SXM4"), None); // the 80 GB and the 40 GB A100
    /// # Ok::<(), gpustack::Error>(())
    /// ```
    #[must_use]
    pub fn gpu_names(&self) -> Vec<GpuName<'_>> {
        let mut explicit: BTreeMap<String, usize> = BTreeMap::new();
        let mut out: Vec<GpuName<'_>> = Vec::new();
        for (i, g) in self.gpus.iter().enumerate() {
            for (kind, s) in std::iter::once((GpuNameKind::Id, &g.id))
                .chain(g.aliases.iter().map(|a| (GpuNameKind::Alias, a)))
            {
                explicit.entry(gpu_key(s)).or_insert(i);
                out.push(GpuName {
                    spelling: s.clone(),
                    kind,
                    gpu: g,
                });
            }
        }
        // Derived spellings, and which GPUs each key would name.
        let mut derived: Vec<(String, GpuNameKind, usize)> = Vec::new();
        let mut owners: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, g) in self.gpus.iter().enumerate() {
            let full = std::iter::once((GpuNameKind::Marketing, &g.name))
                .chain(g.smi_names.iter().map(|s| (GpuNameKind::Smi, s)));
            for (kind, name) in full {
                let short_prefix = match name.get(..7) {
                    Some(p) if p.eq_ignore_ascii_case("nvidia ") => Some(name[7..].to_string()),
                    _ => None,
                };
                for s in [Some(name.clone()), short_prefix, Some(shortened(name))]
                    .into_iter()
                    .flatten()
                {
                    if s.is_empty() || derived.iter().any(|d| d.0 == s && d.2 == i) {
                        continue;
                    }
                    let owned = owners.entry(gpu_key(&s)).or_default();
                    if !owned.contains(&i) {
                        owned.push(i);
                    }
                    derived.push((s, kind, i));
                }
            }
        }
        for (s, kind, i) in derived {
            let key = gpu_key(&s);
            let unique = owners.get(&key).is_some_and(|o| o.len() == 1);
            let free = explicit.get(&key).is_none_or(|&e| e == i);
            if unique && free && !out.iter().any(|n| n.spelling == s) {
                out.push(GpuName {
                    spelling: s,
                    kind,
                    gpu: &self.gpus[i],
                });
            }
        }
        out
    }

    /// A GPU by any name of [`Catalog::gpu_names`], compared as [`gpu_key`]s: the id, an
    /// alias, the marketing name, or a name nvidia-smi prints, with or without `NVIDIA `
    /// and memory tokens, in any case and with any separators.
    ///
    /// ```
    /// let catalog = gpustack::Catalog::stock().unwrap();
    /// assert_eq!(catalog.gpu("RTX4090").unwrap().id, "rtx-4090");
    /// assert_eq!(catalog.gpu("H100 PCIe").unwrap().id, "h100-pcie");
    /// assert_eq!(catalog.gpu("a100 80gb").unwrap().id, "a100");
    /// assert_eq!(catalog.gpu("NVIDIA H100 80GB HBM3").unwrap().id, "h100");
    /// assert_eq!(catalog.gpu("H100-SXM5-80GB").unwrap().id, "h100");
    /// assert_eq!(catalog.gpu("NVIDIA L40S").unwrap().id, "l40s");
    /// assert!(catalog.gpu("A100 SXM4").is_none()); // 80 GB or 40 GB?
    /// ```
    pub fn gpu(&self, name: &str) -> Option<&Gpu> {
        // The lock's and the spec's canonical ids: no table needed.
        if let Some(g) = self.gpus.iter().find(|g| g.id == name) {
            return Some(g);
        }
        let key = gpu_key(name);
        if key.is_empty() {
            return None;
        }
        self.gpu_names()
            .into_iter()
            .find(|n| gpu_key(&n.spelling) == key)
            .map(|n| n.gpu)
    }

    /// The GPU id or alias closest to an unknown `name`, for a "did you mean" hint: only
    /// among the GPUs of the architecture family the name points at (`h1000` may be an
    /// `h100`, never an `a100`). The family is read from the model number (`H100`, `A40`,
    /// `4090`: its letters and first digit, or its letters alone when no catalog GPU has
    /// both); a name without a model number gets no family restriction.
    ///
    /// ```
    /// let catalog = gpustack::Catalog::stock().unwrap();
    /// assert_eq!(catalog.gpu_suggestion("h1000"), Some("h100"));
    /// assert_eq!(catalog.gpu_suggestion("h100-sxm4"), Some("h100-sxm"));
    /// assert_eq!(catalog.gpu_suggestion("3080"), Some("3090")); // Ampere, as the 3090
    /// assert_eq!(catalog.gpu_suggestion("2090"), None); // Turing: not a 3090 or a 4090
    /// assert_eq!(catalog.gpu_suggestion("b100"), Some("b200")); // Blackwell
    /// ```
    pub fn gpu_suggestion(&self, name: &str) -> Option<&str> {
        let key = gpu_key(name);
        // The family: the architectures of the GPUs with the same model letters and first
        // digit (`h1…`: Hopper), or failing that the same letters (`b1…`: Blackwell, as
        // `b2…` and `b3…` are); a bare number no GPU starts with gets no suggestion.
        let family = model_number(name).map(|(letters, digit)| {
            let archs = |same: &dyn Fn(&(String, char)) -> bool| {
                self.gpus
                    .iter()
                    .filter(|g| spellings(g).any(|s| model_number(s).is_some_and(|m| same(&m))))
                    .map(|g| g.arch.as_str())
                    .collect::<Vec<_>>()
            };
            let exact = archs(&|m| m.0 == letters && m.1 == digit);
            if exact.is_empty() && !letters.is_empty() {
                archs(&|m| m.0 == letters)
            } else {
                exact
            }
        });
        // Every name of the table counts (`h100-sxm4-80gb` is close to the marketing name
        // `H100 SXM5 80GB`); the hint names the id, or the alias that was close.
        let mut best: Option<(usize, &str)> = None;
        for n in self.gpu_names() {
            let g = n.gpu;
            if family
                .as_ref()
                .is_some_and(|f| !f.contains(&g.arch.as_str()))
            {
                continue;
            }
            let d = levenshtein(&key, &gpu_key(&n.spelling));
            if d <= 2.max(key.len() / 3) && best.is_none_or(|(bd, _)| d < bd) {
                let shown = match n.kind {
                    GpuNameKind::Alias => g
                        .aliases
                        .iter()
                        .find(|a| **a == n.spelling)
                        .map_or(g.id.as_str(), String::as_str),
                    _ => g.id.as_str(),
                };
                best = Some((d, shown));
            }
        }
        best.map(|(_, s)| s)
    }
}

/// The id and the aliases.
fn spellings(g: &Gpu) -> impl Iterator<Item = &str> {
    std::iter::once(g.id.as_str()).chain(g.aliases.iter().map(String::as_str))
}

/// The model number's letters and first digit: `H100-SXM5` → (`h`, `1`), `rtx-4090` →
/// (``, `4`), `GH200` → (`gh`, `2`). Brand words (`nvidia`, `geforce`, `tesla`, `rtx`,
/// `pro`) are skipped; `None` without a word that has a digit.
fn model_number(name: &str) -> Option<(String, char)> {
    const BRANDS: &[&str] = &["nvidia", "geforce", "tesla", "rtx", "pro", "quadro"];
    let lower = name.to_ascii_lowercase();
    let word = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty() && !BRANDS.contains(w))
        .find(|w| w.bytes().any(|b| b.is_ascii_digit()))?;
    let word = word.strip_prefix("rtx").unwrap_or(word);
    let letters: String = word.chars().take_while(char::is_ascii_alphabetic).collect();
    let digit = word.chars().find(char::is_ascii_digit)?;
    Some((letters, digit))
}

#[cfg(test)]
mod tests {
    #[test]
    fn shortened_drops_vendor_and_memory() {
        assert_eq!(super::shortened("NVIDIA A100-SXM4-80GB"), "A100-SXM4");
        assert_eq!(super::shortened("NVIDIA H100 80GB HBM3"), "H100");
        assert_eq!(
            super::shortened("NVIDIA GH200 Grace Hopper Superchip (480GB)"),
            "GH200 Grace Hopper Superchip"
        );
        assert_eq!(super::shortened("Tesla V100-SXM2-32GB"), "Tesla V100-SXM2");
    }

    #[test]
    fn every_spelling_names_its_gpu_and_suggestions_stay_in_the_family() {
        let cat = crate::Catalog::stock().unwrap();
        for n in cat.gpu_names() {
            assert_eq!(
                cat.gpu(&n.spelling).map(|g| &g.id),
                Some(&n.gpu.id),
                "{}",
                n.spelling
            );
            let upper = n.spelling.to_ascii_uppercase().replace('-', " ");
            assert_eq!(cat.gpu(&upper).map(|g| &g.id), Some(&n.gpu.id), "{upper}");
        }
        for (typo, family) in [
            ("h100-sxm4-80gb-x", "hopper"),
            ("a100-sxm5", "ampere"),
            ("l40x", "ada-lovelace"),
        ] {
            let s = cat.gpu_suggestion(typo).unwrap_or_else(|| panic!("{typo}"));
            assert_eq!(cat.gpu(s).unwrap().arch, family, "{typo} → {s}");
        }
    }
}
