//! The canonical writer: fixed key order, one trailing newline.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{Lock, PythonLock, Seal, HEADER, LOCK_REVISION, LOCK_VERSION};
use toml_writer::WriteTomlValue as _;

use crate::core::Field;
use crate::spec::Spec;

impl Lock {
    /// The canonical text.
    pub fn to_toml(&self) -> String {
        let mut o = String::from(HEADER);
        let _ = writeln!(o, "version = {LOCK_VERSION}");
        let _ = writeln!(o, "revision = {LOCK_REVISION}");
        let sections = self.sections();
        for (_, text) in &sections {
            o.push('\n');
            o.push_str(text);
        }
        o.push_str("\n[integrity]\n");
        for (table, text) in &sections {
            let seal = Seal::of(table, text);
            let _ = writeln!(
                o,
                "{} = [{}, {}]",
                quote(table),
                quote(&seal.digest),
                quote(&seal.lines)
            );
        }
        o
    }

    /// The lock's tables in file order, each with its id (`package ucx`) and canonical
    /// text. Every table is sealed in `[integrity]`: a table added to the format here is
    /// covered without more code.
    pub(super) fn sections(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        let mut push = |id: String, text: String| {
            // Ids are unique by construction; a duplicate (two facts of one kind and key)
            // still gets its own seal.
            let n = out
                .iter()
                .filter(|(i, _)| {
                    i.strip_prefix(id.as_str())
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with(" #"))
                })
                .count();
            let id = if n == 0 {
                id
            } else {
                format!("{id} #{}", n + 1)
            };
            out.push((id, text));
        };
        let mut o = String::from("[inputs]\n");
        kv(&mut o, "spec-digest", &self.spec_digest);
        kv(&mut o, "catalog-digest", &self.catalog_digest);
        push("inputs".into(), o);
        push("request".into(), request_toml(&self.request));
        push("hardware".into(), self.hardware_toml());
        for c in &self.components {
            let mut o = String::from("[[component]]\n");
            kv(&mut o, "name", c.name.name());
            kv(&mut o, "version", c.version.as_str());
            kv(&mut o, "layer", c.layer.name());
            kv(&mut o, "requested", &c.requested);
            kv(&mut o, "source", &c.source);
            kv(&mut o, "catalog", &c.catalog);
            write_fields(&mut o, &c.fields, &c.because);
            push(format!("component {}", c.name.name()), o);
        }
        for p in &self.packages {
            let mut o = String::from("[[package]]\n");
            kv(&mut o, "name", &p.name);
            kv(&mut o, "version", &p.version);
            kv(&mut o, "layer", p.layer.name());
            kv(&mut o, "source", &p.source);
            kv(&mut o, "catalog", &p.catalog);
            write_fields(&mut o, &p.fields, &p.because);
            push(format!("package {}", p.name), o);
        }
        for f in &self.facts {
            let mut o = String::from("[[fact]]\n");
            kv(&mut o, "kind", &f.kind);
            kv(&mut o, "key", &f.key);
            kv(&mut o, "source", &f.source);
            kv(&mut o, "catalog", &f.catalog);
            write_fields(&mut o, &f.fields, &f.because);
            push(format!("fact {} {}", f.kind, f.key), o);
        }
        if let Some(p) = &self.python {
            push("python".into(), python_toml(p));
        }
        for l in &self.layers {
            let mut o = String::from("[[layer]]\n");
            kv(&mut o, "name", l.layer.name());
            list(
                &mut o,
                "components",
                &l.components
                    .iter()
                    .map(|c| c.name().to_string())
                    .collect::<Vec<_>>(),
            );
            if !l.packages.is_empty() {
                list(&mut o, "packages", &l.packages);
            }
            kv(&mut o, "hash", &l.hash);
            push(format!("layer {}", l.layer.name()), o);
        }
        out
    }

    /// `[hardware]` and its `[[hardware.gpu]]` tables.
    fn hardware_toml(&self) -> String {
        let mut o = String::from("[hardware]\n");
        kv(&mut o, "driver", self.hardware.driver.as_str());
        kv(
            &mut o,
            "driver-source",
            if self.hardware.driver_installed {
                "installed"
            } else {
                "resolved"
            },
        );
        list(
            &mut o,
            "arch-list",
            &self
                .hardware
                .arch_list
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
        );
        for g in &self.hardware.gpus {
            o.push_str("\n[[hardware.gpu]]\n");
            kv(&mut o, "id", &g.id);
            kv(&mut o, "name", &g.name);
            kv(&mut o, "cc", &g.cc.to_string());
            let _ = writeln!(o, "datacenter = {}", g.datacenter);
            let _ = writeln!(o, "nvswitch = {}", g.nvswitch);
            if let Some(m) = g.memory_gib {
                let _ = writeln!(o, "memory-gib = {m}");
            }
            if let Some(p) = &g.gfd_product {
                kv(&mut o, "gfd-product", p);
            }
        }
        o
    }
}

/// `[python]` and its `[[python.lock]]` and `[[python.build]]` tables.
fn python_toml(p: &PythonLock) -> String {
    let mut o = String::from("[python]\n");
    kv(&mut o, "resolver", &p.resolver);
    kv(&mut o, "exclude-newer", &p.exclude_newer);
    for f in &p.files {
        o.push_str("\n[[python.lock]]\n");
        kv(&mut o, "layer", &f.layer);
        kv(&mut o, "platform", &f.platform);
        kv(&mut o, "file", &f.file);
        kv(&mut o, "digest", &f.digest);
        kv(&mut o, "inputs", &f.inputs);
        let _ = writeln!(o, "packages = {}", f.packages);
    }
    for b in &p.builds {
        o.push_str("\n[[python.build]]\n");
        kv(&mut o, "layer", &b.layer);
        kv(&mut o, "platform", &b.platform);
        kv(&mut o, "name", &b.name);
        kv(&mut o, "version", &b.version);
        kv(&mut o, "url", &b.url);
        kv(&mut o, "sha256", &b.sha256);
    }
    o
}

/// The canonical `[request]` text, which `spec-digest` covers.
pub fn request_toml(spec: &Spec) -> String {
    let mut o = String::from("[request]\n");
    kv(&mut o, "name", &spec.name);
    if let Some(os) = &spec.os {
        kv(&mut o, "os", os);
    }
    list(&mut o, "gpus", &spec.gpus);
    list(
        &mut o,
        "archs",
        &spec
            .archs
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
    );
    if let Some(d) = &spec.driver {
        kv(&mut o, "driver", d.as_str());
    }
    o.push_str("\n[request.components]\n");
    for (c, r) in &spec.components {
        kv(&mut o, c.name(), &r.to_string());
    }
    if let Some(t) = &spec.torch_source {
        o.push_str("\n[request.torch-source]\n");
        list(&mut o, "archs", &crate::core::arch::torch_list(&t.archs));
        if let Some(w) = &t.prebuilt {
            kv(&mut o, "prebuilt-url", &w.url);
            kv(&mut o, "prebuilt-sha256", &w.sha256);
        }
    }
    deploy_toml(&mut o, &spec.deploy);
    o
}

fn num(o: &mut String, k: &str, n: u32) {
    let _ = writeln!(o, "{k} = {n}");
}

/// The deployment tables: the workload's, then the targets', then resolution and Python.
fn deploy_toml(o: &mut String, d: &crate::spec::deploy::Deploy) {
    workload_toml(o, d);
    targets_toml(o, d);
    resolve_toml(o, d);
}

/// `[request.cluster]`, `[request.network]`, `[request.image]`, `[request.train]` and
/// `[request.serve]`.
fn workload_toml(o: &mut String, d: &crate::spec::deploy::Deploy) {
    if let Some(c) = &d.cluster {
        o.push_str("\n[request.cluster]\n");
        kv(o, "fabric", c.fabric.name());
        num(o, "nodes", c.nodes);
        num(o, "gpus_per_node", c.gpus_per_node);
        if let Some(n) = c.cpus_per_node {
            num(o, "cpus_per_node", n);
        }
        if let Some(n) = c.memory_gib_per_node {
            num(o, "memory_gib_per_node", n);
        }
    }
    if let Some(n) = &d.network {
        o.push_str("\n[request.network]\n");
        if !n.interfaces.is_empty() {
            list(o, "interfaces", &n.interfaces);
        }
        if !n.hcas.is_empty() {
            list(o, "hcas", &n.hcas);
        }
        if let Some(g) = n.gid_index {
            num(o, "gid_index", g);
        }
        if let Some(r) = &n.rdma_resource {
            kv(o, "rdma_resource", r);
        }
        if n.sharp {
            o.push_str("sharp = true\n");
        }
        if !n.pod_subnets.is_empty() {
            list(o, "pod_subnets", &n.pod_subnets);
        }
        if let Some(r) = &n.cxi_resource {
            kv(o, "cxi_resource", r);
        }
        if let Some(d) = n.efa_devices {
            num(o, "efa_devices", d);
        }
    }
    if let Some(i) = &d.image {
        o.push_str("\n[request.image]\n");
        kv(o, "registry", &i.registry);
        list(
            o,
            "layers",
            &i.layers
                .iter()
                .map(|l| l.name().to_string())
                .collect::<Vec<_>>(),
        );
    }
    if let Some(t) = &d.train {
        o.push_str("\n[request.train]\n");
        list(o, "command", &t.command);
        if let Some(w) = &t.workdir {
            kv(o, "workdir", &w.to_string());
        }
    }
    if let Some(s) = &d.serve {
        o.push_str("\n[request.serve]\n");
        kv(o, "model", &s.model);
        num(o, "tensor_parallel", s.tensor_parallel);
        num(o, "max_model_len", s.max_model_len);
        num(o, "replicas", s.replicas);
        if s.nodes != 1 {
            num(o, "nodes", s.nodes);
        }
        if s.pipeline_parallel != s.nodes {
            num(o, "pipeline_parallel", s.pipeline_parallel);
        }
    }
}

/// `[request.packer]`, `[request.k8s]`, `[request.slurm]` and `[request.storage]`.
fn targets_toml(o: &mut String, d: &crate::spec::deploy::Deploy) {
    if let Some(p) = &d.packer {
        o.push_str("\n[request.packer]\n");
        list(
            o,
            "clouds",
            &p.clouds
                .iter()
                .map(|c| c.name().to_string())
                .collect::<Vec<_>>(),
        );
    }
    if let Some(k) = &d.k8s {
        o.push_str("\n[request.k8s]\n");
        kv(o, "namespace", &k.namespace);
        kv(o, "version", &k.version);
        if k.training_api != crate::spec::deploy::TrainingApi::TrainJob {
            kv(o, "training_api", k.training_api.name());
        }
        if let Some(q) = &k.queue {
            kv(o, "queue", q);
        }
        if let Some(t) = &k.topology {
            kv(o, "topology", t);
        }
        if k.gang != crate::spec::deploy::GangScheduler::Coscheduling {
            kv(o, "gang", k.gang.name());
        }
        let default_labels = crate::spec::deploy::DEFAULT_MONITOR_LABELS
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect::<Vec<_>>();
        if k.monitor_labels != default_labels {
            let items: Vec<String> = (k.monitor_labels.iter())
                .map(|(k, v)| format!("{} = {}", quote(k), quote(v)))
                .collect();
            let _ = writeln!(o, "monitor_labels = {{ {} }}", items.join(", "));
        }
    }
    if let Some(s) = &d.slurm {
        o.push_str("\n[request.slurm]\n");
        kv(o, "partition", &s.partition);
        kv(o, "container", s.container.name());
        kv(o, "time", &s.time);
        if let Some(n) = s.max_nodes {
            num(o, "max_nodes", n);
        }
        if let Some(t) = &s.max_time {
            kv(o, "max_time", t);
        }
    }
    if let Some(s) = &d.storage {
        o.push_str("\n[request.storage]\n");
        if let Some(x) = &s.datasets {
            kv(o, "datasets", &x.to_string());
        }
        if let Some(x) = &s.checkpoints {
            kv(o, "checkpoints", &x.to_string());
        }
        if let Some(x) = &s.models {
            kv(o, "models", &x.to_string());
        }
    }
}

/// `[request.resolve]` (and its tables) and `[request.python]`.
fn resolve_toml(o: &mut String, d: &crate::spec::deploy::Deploy) {
    if let Some(r) = &d.resolve {
        o.push_str("\n[request.resolve]\n");
        if let Some(x) = &r.exclude_newer {
            kv(o, "exclude-newer", x);
        }
        if let Some(x) = &r.pypi {
            kv(o, "pypi", x);
        }
        if r.variant_index {
            o.push_str("variant-index = true\n");
        }
        if let Some(t) = r.timeout {
            o.push_str(&format!("timeout = {t}\n"));
        }
        for (name, table) in [
            ("indexes", &r.indexes),
            ("registries", &r.registries),
            ("apt", &r.apt),
            ("dnf", &r.dnf),
        ] {
            if !table.is_empty() {
                let _ = writeln!(o, "\n[request.resolve.{name}]");
                for (k, v) in table {
                    let _ = writeln!(o, "{} = {}", quote(k), quote(v));
                }
            }
        }
    }
    if !d.python.is_empty() {
        o.push_str("\n[request.python]\n");
        for (k, v) in [
            ("framework", &d.python.framework),
            ("inference", &d.python.inference),
            ("training", &d.python.training),
        ] {
            if !v.is_empty() {
                list(o, k, v);
            }
        }
    }
}

/// A TOML basic string (`"…"`), escaped by `toml_writer`: `"` and `\\` escaped, `\n`,
/// `\t`, `\r`, `\b`, `\f` by name, other control characters as `\uXXXX`. The lock
/// always writes basic strings, whatever the value, so that its layout does not depend
/// on the text it holds.
pub(crate) fn quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    push_quoted(&mut o, s);
    o
}

/// [`quote`], appended to `o`: the lock writer's values go straight into the lock's text.
fn push_quoted(o: &mut String, s: &str) {
    // Nearly every value needs no escape: toml_writer writes such a basic string as it is,
    // between quotes, after measuring it for every other encoding first. Same bytes.
    if s.bytes()
        .all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b != 0x7f)
    {
        o.push('"');
        o.push_str(s);
        o.push('"');
        return;
    }
    let _ = toml_writer::TomlStringBuilder::new(s)
        .as_basic()
        .write_toml_value(o);
}

fn write_fields(o: &mut String, fields: &BTreeMap<String, Field>, because: &[String]) {
    for (k, v) in fields {
        match v {
            Field::Str(s) => kv(o, k, s),
            Field::List(l) => list(o, k, l),
        }
    }
    if !because.is_empty() {
        o.push_str("because = [\n");
        for b in because {
            o.push_str("    ");
            push_quoted(o, b);
            o.push_str(",\n");
        }
        o.push_str("]\n");
    }
}

fn kv(o: &mut String, k: &str, v: &str) {
    o.push_str(k);
    o.push_str(" = ");
    push_quoted(o, v);
    o.push('\n');
}

fn list(o: &mut String, k: &str, v: &[String]) {
    o.push_str(k);
    o.push_str(" = [");
    for (i, s) in v.iter().enumerate() {
        if i > 0 {
            o.push_str(", ");
        }
        push_quoted(o, s);
    }
    o.push_str("]\n");
}

#[cfg(test)]
mod tests {
    use super::quote;
    use toml_writer::WriteTomlValue as _;

    /// The fast path (no escape needed) writes what `toml_writer` writes, byte for byte.
    #[test]
    fn quoting_matches_toml_writer_on_every_path() {
        for v in [
            "",
            "plain",
            "12.4.1",
            "sha256:0123abcd",
            "https://example.com/a b?c=d&e#f",
            "ünïcode ✓ 中文",
            "\u{80}\u{9f} C1 controls",
            "'single' quotes",
            "tab\there",
            "quote \" inside",
            "back\\slash",
            "del \u{7f}",
            "nul \u{0}",
            "line\nbreak",
        ] {
            let mut expected = String::new();
            let _ = toml_writer::TomlStringBuilder::new(v)
                .as_basic()
                .write_toml_value(&mut expected);
            assert_eq!(quote(v), expected, "{v:?}");
        }
    }

    #[test]
    fn quoted_values_keep_their_bytes_and_round_trip() {
        // Today's values: the same bytes the hand-written escaper gave.
        assert_eq!(quote("12.4.1"), "\"12.4.1\"");
        assert_eq!(quote("a \"b\" c\\d"), r#""a \"b\" c\\d""#);
        assert_eq!(quote("x\ny\tz\r"), r#""x\ny\tz\r""#);
        assert_eq!(quote("\u{1}\u{7f}"), r#""\u0001\u007F""#);
        assert_eq!(quote("ünïcode"), "\"ünïcode\"");
        // Every awkward value reads back as written.
        for v in [
            "plain",
            "quote \" and backslash \\ and both \\\"",
            "line one\nline two\r\n",
            "tab\there",
            "controls \u{0}\u{1}\u{8}\u{c}\u{1b}\u{1f}\u{7f}",
            "''' \"\"\" ${x} {{ y }}",
            "",
        ] {
            let text = format!("k = {}\n", quote(v));
            let back: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{v:?}: {e}"));
            assert_eq!(back["k"].as_str(), Some(v), "{text}");
        }
    }
}
