//! How a [`LockDiff`] reads: plain text for a terminal, Markdown for a pull request comment
//! (every cell escaped), JSON for tools.

use std::fmt::Write as _;

use crate::core::Layer;

use super::{Change, LayerChange, LockDiff, Status, TargetFiles};

/// The first 12 hex digits of a `sha256:…` hash, for display.
pub(super) fn short(h: &str) -> String {
    let hex = h.trim_start_matches("sha256:");
    format!("sha256:{}", &hex[..hex.len().min(12)])
}

impl Change {
    /// The note, or the fields that differ when the version did not change.
    fn detail(&self) -> Option<String> {
        if let Some(n) = &self.note {
            return Some(n.clone());
        }
        if self.status != Status::Changed || self.old != self.new || self.fields.is_empty() {
            return None;
        }
        let none = || "none".to_string();
        Some(
            self.fields
                .iter()
                .map(|f| {
                    let (a, b) = (
                        f.old.clone().unwrap_or_else(none),
                        f.new.clone().unwrap_or_else(none),
                    );
                    if a.chars().count() + b.chars().count() <= 48 {
                        format!("{}: {a} → {b}", f.key)
                    } else {
                        format!("{} changed", f.key)
                    }
                })
                .collect::<Vec<_>>()
                .join("; "),
        )
    }
}

impl LockDiff {
    fn headline(&self) -> String {
        if self.old.stack == self.new.stack {
            self.new.stack.clone()
        } else {
            format!("{} → {}", self.old.stack, self.new.stack)
        }
    }

    /// The JSON report (schema [`SCHEMA`](super::SCHEMA), documented in the module doc), with
    /// a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("the report serializes");
        s.push('\n');
        s
    }

    /// The terminal report.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "lock diff: {}", self.headline());
        if self.empty {
            o.push_str("no changes: nothing to rebuild, re-validate or re-apply\n");
            if self.old.catalog_digest != self.new.catalog_digest {
                o.push_str("(the catalog entries differ only in provenance)\n");
            }
            self.text_files(&mut o);
            return o;
        }
        if let Some(c) = self.costliest() {
            let _ = writeln!(o, "costliest: {}: {}", c.name(), c.action());
        }
        if !self.changes.is_empty() {
            o.push_str("\nchanges:\n");
            let w0 = self
                .changes
                .iter()
                .map(|c| c.class.name().len())
                .max()
                .unwrap_or(0);
            let w1 = self
                .changes
                .iter()
                .map(|c| c.name.chars().count())
                .max()
                .unwrap_or(0);
            let none = || "(none)".to_string();
            for c in &self.changes {
                let _ = writeln!(
                    o,
                    "  {}{}  {}{}  {} → {}",
                    c.class.name(),
                    pad(c.class.name(), w0),
                    c.name,
                    pad(&c.name, w1),
                    c.old.clone().unwrap_or_else(none),
                    c.new.clone().unwrap_or_else(none),
                );
                if let Some(d) = c.detail() {
                    let _ = writeln!(o, "  {}    {d}", " ".repeat(w0));
                }
            }
            o.push_str("\nactions, costliest first:\n");
            let w = self
                .summary
                .iter()
                .map(|s| s.class.name().len())
                .max()
                .unwrap_or(0);
            for s in &self.summary {
                let _ = writeln!(
                    o,
                    "  {}{}  {}",
                    s.class.name(),
                    pad(s.class.name(), w),
                    s.action
                );
            }
        }
        if !self.layers.is_empty() {
            o.push_str("\nrebuild (layer closure hash changed):\n");
            let labels: Vec<String> = self.layers.iter().map(|l| layer_label(&l.layer)).collect();
            let w = labels.iter().map(String::len).max().unwrap_or(0);
            for (l, label) in self.layers.iter().zip(&labels) {
                let _ = writeln!(o, "  {label}{}  {}", pad(label, w), layer_text(l, short));
            }
        }
        self.text_files(&mut o);
        o
    }

    fn text_files(&self, o: &mut String) {
        o.push_str("\ngenerated files:\n");
        if let Some(r) = &self.files.reason {
            let _ = writeln!(o, "  not compared: {r}");
            return;
        }
        let w = self
            .files
            .targets
            .iter()
            .map(|t| t.target.len())
            .max()
            .unwrap_or(0);
        for t in &self.files.targets {
            let mut parts = Vec::new();
            if let Some(e) = &t.error {
                parts.push(format!("not compared: {e}"));
            }
            for (what, list) in [
                ("added", &t.added),
                ("removed", &t.removed),
                ("changed", &t.changed),
                ("relabelled", &t.relabelled),
            ] {
                if !list.is_empty() {
                    parts.push(format!("{what} {}", list.join(", ")));
                }
            }
            if parts.is_empty() {
                parts.push("unchanged".into());
            }
            let _ = writeln!(
                o,
                "  {}{}  {}",
                t.target,
                pad(&t.target, w),
                parts.join("; ")
            );
        }
    }

    /// The Markdown report, ready to post as a pull request comment.
    pub fn to_markdown(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "### gpustack lock diff: {}\n", md_code(&self.headline()));
        if self.empty {
            o.push_str("No changes: nothing to rebuild, re-validate or re-apply.\n");
            return o;
        }
        if let Some(c) = self.costliest() {
            let _ = writeln!(
                o,
                "**Costliest change: {}**: {}.\n",
                md_code(c.name()),
                c.action()
            );
        }
        if !self.changes.is_empty() {
            o.push_str("| change | old | new | class | what it costs |\n");
            o.push_str("|---|---|---|---|---|\n");
            for c in &self.changes {
                let mut what = md_cell(&c.name);
                if let Some(d) = c.detail() {
                    let _ = write!(what, " ({})", md_cell(&d));
                }
                let v = |x: &Option<String>| x.as_deref().map_or("—".to_string(), md_code);
                let _ = writeln!(
                    o,
                    "| {what} | {} | {} | `{}` | {} |",
                    v(&c.old),
                    v(&c.new),
                    c.class.name(),
                    c.class.action()
                );
            }
        }
        if !self.layers.is_empty() {
            o.push_str("\n**Rebuild** (layer closure hash changed):\n\n");
            for l in &self.layers {
                let _ = writeln!(
                    o,
                    "- {}: {}",
                    md_code(&l.layer)
                        + if l.layer == Layer::Host.name() {
                            " (VM image)"
                        } else {
                            ""
                        },
                    layer_text(l, |h| format!("`{}`", short(h)))
                );
            }
        }
        o.push('\n');
        if let Some(r) = &self.files.reason {
            let _ = writeln!(o, "Generated files not compared: {}.", md_cell(r));
            return o;
        }
        let count = |f: fn(&TargetFiles) -> usize| self.files.targets.iter().map(f).sum::<usize>();
        let (added, removed, changed, relabelled) = (
            count(|t| t.added.len()),
            count(|t| t.removed.len()),
            count(|t| t.changed.len()),
            count(|t| t.relabelled.len()),
        );
        let _ = writeln!(
            o,
            "<details>\n<summary>Generated files: {changed} changed, {added} added, {removed} removed, {relabelled} relabelled only</summary>\n"
        );
        o.push_str("| target | file | change |\n|---|---|---|\n");
        for t in &self.files.targets {
            if let Some(e) = &t.error {
                let _ = writeln!(o, "| {} | — | not compared: {} |", t.target, md_cell(e));
            }
            for (what, list) in [
                ("added", &t.added),
                ("removed", &t.removed),
                ("changed", &t.changed),
            ] {
                for p in list {
                    let _ = writeln!(o, "| {} | {} | {what} |", t.target, md_code(p));
                }
            }
        }
        if relabelled > 0 {
            o.push_str("\nOnly the lock-hash label changes in: ");
            let all: Vec<String> = self
                .files
                .targets
                .iter()
                .flat_map(|t| {
                    t.relabelled
                        .iter()
                        .map(move |p| md_code(&format!("{}/{p}", t.target)))
                })
                .collect();
            o.push_str(&all.join(", "));
            o.push_str(".\n");
        }
        o.push_str("\n</details>\n");
        o
    }
}

fn layer_text(l: &LayerChange, h: impl Fn(&str) -> String) -> String {
    match (&l.old_hash, &l.new_hash) {
        (Some(a), Some(b)) => format!("{} → {}", h(a), h(b)),
        (None, Some(b)) => format!("added ({})", h(b)),
        (Some(a), None) => format!("removed (was {})", h(a)),
        (None, None) => String::new(),
    }
}

/// `host` is the VM image's own layer, not a container image.
fn layer_label(layer: &str) -> String {
    if layer == Layer::Host.name() {
        format!("{layer} (VM image)")
    } else {
        layer.to_string()
    }
}

fn pad(s: &str, width: usize) -> String {
    " ".repeat(width.saturating_sub(s.chars().count()))
}

/// Text safe inside a Markdown table cell.
pub(super) fn md_cell(s: &str) -> String {
    // Newlines would end the table row; control characters are shown as escapes. Then
    // every character Markdown or HTML gives a meaning inside a line is backslash-escaped
    // (CommonMark: any ASCII punctuation may be), so a value from a lock cannot open a
    // tag (`</table>`, `<!--`), a link, emphasis or a new table cell.
    let flat = s.replace(['\n', '\r'], " ");
    let flat = crate::error::escape_control(&flat);
    let mut o = String::with_capacity(flat.len());
    for c in flat.chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '&' | '|' | '~' | '!' | '#'
        ) {
            o.push('\\');
        }
        o.push(c);
    }
    o
}

/// A code span safe inside a table cell: HTML is not interpreted inside a code span, the
/// fence is longer than any run of backticks in the value, and `|` is escaped (GitHub
/// splits table cells before it parses code spans).
pub(super) fn md_code(s: &str) -> String {
    let flat = s.replace(['\n', '\r'], " ");
    let flat = crate::error::escape_control(&flat).replace('|', "\\|");
    let mut longest = 0;
    let mut run = 0;
    for c in flat.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if flat.starts_with('`') || flat.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{flat}{pad}{fence}")
}
