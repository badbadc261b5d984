//! The code's shape, checked: no module imports one that imports it back, and functions fit on
//! a screen or two (book/src/architecture.md, "Layout").
//!
//! Modules are read from the source text: every `crate::…` path (in `use` trees and inline)
//! and every `super::…` path in a file counts as an edge from the file's module to the named
//! one. Two graphs are checked for cycles: the crate's top-level modules (`catalog`, `spec`,
//! `solve`, …) and, inside each directory module, its sibling files (`plan::docker` and
//! `plan::common`). A directory's `mod.rs` and its children are one module and may refer to each
//! other (that is how Rust lays out a module's private parts). `#[cfg(test)]` items count: a
//! test that needs a module upstream is still a dependency.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The longest function body allowed without a reason: a line comment starting `// long:`
/// among the lines directly above the `fn` (its docs and attributes).
const MAX_FN_LINES: usize = 120;

fn sources() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&root, &mut files);
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p.strip_prefix(&root).unwrap().to_path_buf(), text)
        })
        .collect()
}

/// `plan/docker.rs` → ["plan", "docker"]; `plan/mod.rs` → ["plan"]; `lib.rs` → [].
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

/// The source without comments and string literals, so that neither a doc link nor a message
/// counts as a dependency.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'r' && (b.get(i + 1) == Some(&b'#') || b.get(i + 1) == Some(&b'"')) {
            // A raw string r"…" or r#"…"#: skip to the matching close.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"')
                || (i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
            {
                out.push(b[i] as char);
                i += 1;
                continue;
            }
            j += 1;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while j < b.len() && !b[j..].starts_with(&close) {
                j += 1;
            }
            i = j + close.len();
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '"'), not a lifetime ('a).
            if b.get(i + 2) == Some(&b'\'') {
                i += 3;
            } else if b.get(i + 1) == Some(&b'\\') {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
                i += 1;
            } else {
                out.push('\'');
                i += 1;
            }
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn ident_at(s: &[u8], mut i: usize) -> (String, usize) {
    let start = i;
    while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == b'_') {
        i += 1;
    }
    (String::from_utf8_lossy(&s[start..i]).into_owned(), i)
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// Expands the path (or use tree) starting at `i` into full paths: `a::{b::C, d}` →
/// [a,b,C], [a,d]. Returns the paths and the index after the tree.
fn paths_at(s: &[u8], i: usize) -> (Vec<Vec<String>>, usize) {
    let mut prefix = Vec::new();
    let mut i = skip_ws(s, i);
    loop {
        if s.get(i) == Some(&b'{') {
            let mut out = Vec::new();
            i += 1;
            loop {
                i = skip_ws(s, i);
                match s.get(i) {
                    Some(b'}') => return (out, i + 1),
                    Some(b',') => i += 1,
                    None => return (out, i),
                    _ => {
                        let (subs, j) = paths_at(s, i);
                        if j == i {
                            i += 1;
                            continue;
                        }
                        for sub in subs {
                            let mut p = prefix.clone();
                            p.extend(sub);
                            out.push(p);
                        }
                        i = j;
                    }
                }
            }
        }
        let (id, j) = ident_at(s, i);
        if id.is_empty() {
            return (vec![prefix], i);
        }
        prefix.push(id);
        let k = skip_ws(s, j);
        if s[k..].starts_with(b"::") {
            i = skip_ws(s, k + 2);
        } else {
            return (vec![prefix], j);
        }
    }
}

/// Every module path a file refers to, made absolute (`super::x` resolved against the file's
/// module).
fn references(module: &[String], code: &str) -> BTreeSet<Vec<String>> {
    let s = code.as_bytes();
    let mut out = BTreeSet::new();
    for (anchor, base) in [
        ("crate::", Vec::new()),
        ("super::", {
            let mut m = module.to_vec();
            m.pop();
            m
        }),
    ] {
        let mut from = 0;
        while let Some(pos) = code[from..].find(anchor) {
            let at = from + pos;
            from = at + anchor.len();
            if at > 0
                && (s[at - 1].is_ascii_alphanumeric() || s[at - 1] == b'_' || s[at - 1] == b':')
            {
                continue;
            }
            let (paths, _) = paths_at(s, at + anchor.len());
            for p in paths {
                let mut full = base.clone();
                full.extend(p);
                out.insert(full);
            }
        }
    }
    out
}

/// The module names at one level: the top-level modules of the crate, or the child modules of
/// a directory module.
fn children(files: &[(PathBuf, String)], parent: &[String]) -> BTreeSet<String> {
    files
        .iter()
        .map(|(p, _)| module_of(p))
        .filter(|m| m.len() > parent.len() && m.starts_with(parent))
        .map(|m| m[parent.len()].clone())
        .collect()
}

/// Edges between the children of `parent`: child a → child b when a file in a (or below it)
/// names a path in b (or below it).
fn graph(files: &[(PathBuf, String)], parent: &[String]) -> BTreeMap<String, BTreeSet<String>> {
    let names = children(files, parent);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let m = module_of(path);
        if m.len() <= parent.len() || !m.starts_with(parent) {
            continue;
        }
        let from = m[parent.len()].clone();
        let entry = g.entry(from.clone()).or_default();
        for r in references(&m, &code_only(text)) {
            if r.len() > parent.len() && r.starts_with(parent) {
                let to = &r[parent.len()];
                if *to != from && names.contains(to) {
                    entry.insert(to.clone());
                }
            }
        }
    }
    g
}

/// Strongly connected components with more than one member (Tarjan).
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        if let Some(next) = t.g.get(v) {
            for w in next {
                let w = w.as_str();
                if !t.index.contains_key(w) {
                    visit(t, w);
                    let lw = t.low[w];
                    let lv = t.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if t.on.contains(w) {
                    let iw = t.index[w];
                    let lv = t.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// For a cycle, the module edges inside it, each with the first place that makes it, so that
/// the failure says where to cut.
fn explain(files: &[(PathBuf, String)], parent: &[String], comp: &[String]) -> String {
    let mut edges: BTreeMap<(String, String), (String, usize)> = BTreeMap::new();
    for (path, text) in files {
        let m = module_of(path);
        if m.len() <= parent.len() || !m.starts_with(parent) || !comp.contains(&m[parent.len()]) {
            continue;
        }
        let from = &m[parent.len()];
        for r in references(&m, &code_only(text)) {
            if r.len() > parent.len() && r.starts_with(parent) {
                let to = &r[parent.len()];
                if to != from && comp.contains(to) {
                    let e = edges.entry((from.clone(), to.clone())).or_insert_with(|| {
                        (
                            format!("src/{} uses crate::{}", path.display(), r.join("::")),
                            0,
                        )
                    });
                    e.1 += 1;
                }
            }
        }
    }
    edges
        .into_iter()
        .map(|((a, b), (first, n))| format!("    {a} -> {b}: {first} ({n} path(s) in all)"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let files = sources();
    let mut parents: BTreeSet<Vec<String>> = BTreeSet::new();
    parents.insert(Vec::new());
    for (p, _) in &files {
        if p.file_name().is_some_and(|f| f == "mod.rs") {
            parents.insert(module_of(p));
        }
    }
    let mut problems = Vec::new();
    for parent in &parents {
        let g = graph(&files, parent);
        for comp in cycles(&g) {
            let at = if parent.is_empty() {
                "crate".to_string()
            } else {
                parent.join("::")
            };
            problems.push(format!(
                "cycle among {at}'s modules {{{}}}:\n{}",
                comp.join(", "),
                explain(&files, parent, &comp)
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} module cycle(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Functions as rustfmt lays them out: a line `fn name(` at some indent opens one, the first
/// later line that is exactly that indent and `}` closes it.
fn long_functions(rel: &Path, text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let is_fn = [
            "fn ",
            "pub fn ",
            "pub(crate) fn ",
            "pub(super) fn ",
            "const fn ",
            "pub const fn ",
            "async fn ",
            "unsafe fn ",
        ]
        .iter()
        .any(|p| trimmed.starts_with(p));
        if !is_fn {
            continue;
        }
        let close = format!("{}}}", " ".repeat(indent));
        let Some(len) = lines[i + 1..].iter().position(|l| *l == close) else {
            continue;
        };
        // A declaration without a body (`fn f();` in a trait) closes at its first `;` line.
        if lines[i..=i + len]
            .iter()
            .any(|l| l.trim_end().ends_with(';') && !l.contains('{'))
            && !lines[i..=i + len]
                .iter()
                .any(|l| l.trim_end().ends_with('{'))
        {
            continue;
        }
        if len <= MAX_FN_LINES {
            continue;
        }
        let mut reason = false;
        for above in lines[..i].iter().rev() {
            let a = above.trim_start();
            if a.starts_with("// long:") {
                reason = true;
                break;
            }
            if !(a.starts_with("//") || a.starts_with("#[") || a.starts_with("#![")) {
                break;
            }
        }
        if !reason {
            let name: String = trimmed
                .split("fn ")
                .nth(1)
                .unwrap_or("")
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(format!(
                "src/{}:{}: fn {name} is {len} lines",
                rel.display(),
                i + 1
            ));
        }
    }
    out
}

#[test]
fn functions_fit_on_a_screen_or_two() {
    let mut long = Vec::new();
    for (rel, text) in sources() {
        long.extend(long_functions(&rel, &text));
    }
    assert!(
        long.is_empty(),
        "{} function(s) over {MAX_FN_LINES} lines without a `// long:` reason above them:\n{}",
        long.len(),
        long.join("\n")
    );
}

#[test]
fn the_checker_sees_a_cycle_and_a_use_tree() {
    let code = code_only(
        "use crate::{a::{B, c::D}, e};\n// crate::zz\nlet s = \"crate::yy\";\nsuper::f::g();",
    );
    let refs = references(&["m".into(), "n".into()], &code);
    let got: Vec<String> = refs.iter().map(|r| r.join("::")).collect();
    assert_eq!(got, ["a::B", "a::c::D", "e", "m::f::g"]);
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(cycles(&g), vec![vec!["a".to_string(), "b".to_string()]]);
}
