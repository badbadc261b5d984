//! `catalog/pending/` holds researched facts for families the generators will load later.
//! They are not part of the stock catalog yet, but they must already hold to its rules:
//! every file parses, names its family, and every entry has a non-empty `source`. A family
//! that the stock catalog loads (`catalog/*.toml`) has moved up and must not stay pending.

mod common;

use common::*;

#[test]
fn pending_families_parse_and_every_entry_has_a_source() {
    let dir = root().join("catalog/pending");
    let mut failures = Vec::new();
    let mut entries = 0;
    for path in sorted_files(&dir, "toml") {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let table: toml::Table = match toml::from_str(&text) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        if !table.get("family").is_some_and(toml::Value::is_str) {
            failures.push(format!("{name}: no `family`"));
        }
        for (key, value) in &table {
            let Some(list) = value.as_array() else {
                continue;
            };
            for (i, entry) in list.iter().enumerate() {
                let Some(entry) = entry.as_table() else {
                    continue;
                };
                entries += 1;
                let ok = entry
                    .get("source")
                    .and_then(toml::Value::as_str)
                    .is_some_and(|s| !s.trim().is_empty());
                if !ok {
                    failures.push(format!("{name}: [[{key}]] #{} has no source", i + 1));
                }
                if let Some(h) = entry.get("sha256").and_then(toml::Value::as_str) {
                    if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                        failures.push(format!(
                            "{name}: [[{key}]] #{}: sha256 `{h}` is not 64 hex digits",
                            i + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let _ = entries;
}

fn family_of(path: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let table: toml::Table = toml::from_str(&text).ok()?;
    table.get("family")?.as_str().map(str::to_string)
}

/// A family moves up to `catalog/` when the loader supports it, and leaves `pending/` then:
/// `extras.toml` (family `extra`) has moved up.
#[test]
fn pending_files_are_families_not_yet_loaded() {
    let root = root();
    assert!(
        !root.join("catalog/pending/extras.toml").exists(),
        "catalog/pending/extras.toml moved up to catalog/extras.toml"
    );
    let loaded: Vec<String> = sorted_files(&root.join("catalog"), "toml")
        .iter()
        .filter_map(|p| family_of(p))
        .collect();
    assert!(loaded.iter().any(|f| f == "extra"), "{loaded:?}");
    for p in sorted_files(&root.join("catalog/pending"), "toml") {
        let fam = family_of(&p).unwrap_or_default();
        assert!(
            !loaded.contains(&fam),
            "{}: family `{fam}` is loaded from catalog/ already; remove the pending copy and its README row",
            p.display()
        );
    }
}
