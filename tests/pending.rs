//! `catalog/pending/` holds researched facts for families the generators will load later.
//! They are not part of the stock catalog yet, but they must already hold to its rules:
//! every file parses, names its family, and every entry has a non-empty `source`.

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
