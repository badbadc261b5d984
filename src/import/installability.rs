//! `catalog import installability`: rewrites the installability keys of existing catalog
//! entries in place from PyPI, leaving every other line as it was.

use crate::catalog::Catalog;
use crate::core::version::Version;

use super::pypi_entries::catalog_req;
use super::pypi_import::{is_pypi, Ctx};
use super::*;

/// What `catalog import installability` changed.
#[derive(Clone, Debug, Default)]
pub struct Refresh {
    /// The files rewritten (name as given, new text); unchanged files are left out.
    pub files: Vec<OverlayFile>,
    /// One line per release whose facts changed.
    pub changed: Vec<String>,
    /// Releases whose facts could not be read, and why.
    pub failed: Vec<String>,
}

/// The catalog keys `catalog import installability` owns in an entry of `file`.
pub(super) fn owned_keys(file: &str) -> &'static [&'static str] {
    match file {
        "torch.toml" => &["yanked", "glibc_floor", "triton"],
        "vllm.toml" | "deepspeed.toml" | "extras.toml" => &["yanked", "glibc_floor"],
        "cudnn.toml" | "nccl.toml" => &["yanked", "platforms"],
        _ => &[],
    }
}

/// A `key = "value"` line's value.
fn line_str<'a>(lines: &[&'a str], key: &str) -> Option<&'a str> {
    lines.iter().find_map(|l| {
        let v = l.strip_prefix(key)?.trim_start().strip_prefix('=')?.trim();
        v.strip_prefix('"')?.strip_suffix('"')
    })
}

/// Recomputes the installability facts (`yanked`, `glibc_floor`, torch's `triton`, and
/// for cuDNN/NCCL `platforms` of a release without Linux wheels) of every PyPI release in
/// the catalog files given (`torch.toml`, `vllm.toml`, `deepspeed.toml`, `extras.toml`,
/// `cudnn.toml`, `nccl.toml`; others are passed over) and rewrites those lines in place,
/// leaving every other line as it was.
pub fn refresh_installability(
    fetch: &dyn Fetch,
    base: &Catalog,
    files: &[(String, String)],
    opts: &PypiOptions,
) -> Result<Refresh, ImportError> {
    if let Some(d) = &opts.date {
        check_date(d)?;
    }
    let mut ctx = Ctx::new(fetch, base, opts);
    let mut out = Refresh::default();
    for (name, text) in files {
        let keys = owned_keys(name);
        if keys.is_empty() {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        let mut new_text = String::new();
        let mut i = 0;
        while i < lines.len() {
            let l = lines[i];
            let is_entry = l == "[[release]]" || (name == "extras.toml" && l == "[[extra]]");
            if !is_entry {
                new_text.push_str(l);
                new_text.push('\n');
                i += 1;
                continue;
            }
            let mut end = i + 1;
            while end < lines.len() && !lines[end].starts_with('[') {
                end += 1;
            }
            // Trailing blank lines and comments belong to what follows.
            let mut body_end = end;
            while body_end > i + 1
                && (lines[body_end - 1].trim().is_empty() || lines[body_end - 1].starts_with('#'))
            {
                body_end -= 1;
            }
            let block = &lines[i..body_end];
            let facts = match ctx.facts_of_entry(name, block) {
                Ok(f) => f,
                Err(e) => {
                    out.failed.push(format!(
                        "{name} `{}`: {e}",
                        line_str(block, "version").unwrap_or("?")
                    ));
                    None
                }
            };
            let rewritten = match &facts {
                Some(f) => patch_block(block, keys, f),
                None => block.iter().map(|l| format!("{l}\n")).collect(),
            };
            let old: String = block.iter().map(|l| format!("{l}\n")).collect();
            if rewritten != old {
                out.changed.push(format!(
                    "{name} {}{}",
                    line_str(block, "pypi_name").map_or(String::new(), |p| format!("{p} ")),
                    line_str(block, "version").unwrap_or("?")
                ));
            }
            new_text.push_str(&rewritten);
            for l in &lines[body_end..end] {
                new_text.push_str(l);
                new_text.push('\n');
            }
            i = end;
        }
        if !text.ends_with('\n') {
            new_text.pop();
        }
        if &new_text != text {
            out.files.push(OverlayFile {
                name: name.clone(),
                contents: new_text,
            });
        }
    }
    Ok(out)
}

/// The block with the owned keys' lines replaced by `f`'s, before `source`.
pub(super) fn patch_block(block: &[&str], keys: &[&str], f: &Entry) -> String {
    let owned = |l: &str| {
        keys.iter().any(|k| {
            l.strip_prefix(k)
                .is_some_and(|r| r.trim_start().starts_with('='))
        })
    };
    let mut kept: Vec<String> = Vec::new();
    let mut skipping = false;
    for l in block {
        if skipping {
            if l.trim() == "]" {
                skipping = false;
            }
            continue;
        }
        if owned(l) {
            let v = l.split_once('=').map_or("", |(_, v)| v.trim());
            skipping = v.starts_with('[') && !v.ends_with(']');
            continue;
        }
        kept.push((*l).to_string());
    }
    let at = kept
        .iter()
        .position(|l| l.starts_with("source =") || l.starts_with("source="))
        .unwrap_or(kept.len());
    let mut new: Vec<String> = Vec::new();
    for (k, v) in &f.fields {
        if keys.contains(k) {
            new.push(format!("{k} = {}", write_value(v)));
        }
    }
    kept.splice(at..at, new);
    kept.iter().map(|l| format!("{l}\n")).collect()
}

impl Ctx<'_> {
    /// The installability facts of one catalog entry, as an entry whose fields hold them;
    /// `None` for an entry not on PyPI (an extra from another index).
    fn facts_of_entry(&mut self, file: &str, block: &[&str]) -> Result<Option<Entry>, ImportError> {
        let version = line_str(block, "version").unwrap_or_default().to_string();
        let mut e = Entry::new(
            Family::Extra,
            "release",
            version.clone(),
            Version::parse("0").expect("0"),
        );
        if let Some(stem) = match file {
            "cudnn.toml" => Some("nvidia-cudnn-cu"),
            "nccl.toml" => Some("nvidia-nccl-cu"),
            _ => None,
        } {
            let before = self.entries.len();
            match self.import_lib(stem == "nvidia-cudnn-cu", &version) {
                Ok(()) => {}
                Err(ImportError::NoRelease { .. }) => return Ok(None), // a tarball-only release
                Err(err) => return Err(err),
            }
            let got = self.entries.split_off(before);
            if let Some(g) = got.into_iter().next() {
                e.fields = g.fields;
            }
            return Ok(Some(e));
        }
        let project = match file {
            "torch.toml" => "torch".to_string(),
            "vllm.toml" => "vllm".to_string(),
            "deepspeed.toml" => "deepspeed".to_string(),
            _ => {
                let index = line_str(block, "index").unwrap_or("");
                if !is_pypi(index) {
                    return Ok(None);
                }
                line_str(block, "pypi_name").unwrap_or_default().to_string()
            }
        };
        let fetch = self.fetch;
        let Some(page) = self.page(&project)? else {
            return Ok(None);
        };
        let rel = Ctx::release(page, &project, Some(&version))?;
        let Some(md_file) = rel.metadata_file() else {
            return Ok(None);
        };
        let rel_version = rel.version.clone();
        let (md, _) = pypi::metadata_of(fetch, md_file)?;
        let facts = self.install_facts(&project, &rel_version, Some(&md))?;
        facts.write(&mut e, false);
        if file == "torch.toml" {
            let triton = md
                .requires_dist
                .iter()
                .filter_map(|d| pypi::parse_requirement(d))
                .find(|d| d.name == "triton" && install::applies(d, "x86_64"));
            if let Some(req) = triton.and_then(|t| catalog_req(&t.specifier)) {
                e.str("triton", req);
            }
        }
        Ok(Some(e))
    }
}
