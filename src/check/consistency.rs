//! The consistency checks: values read back from the generated files (the driver, image
//! references, the training command, the NCCL environment) agree across targets.

use std::collections::{BTreeMap, BTreeSet};

use crate::lock::Lock;
use crate::spec::check::Code;

use super::join;
use super::report::Finding;

/// Variables read back from one file: name → (line, value).
type EnvMap = BTreeMap<String, (usize, String)>;

/// A value read back from a generated file, with where it was found.
struct Seen {
    file: String,
    line: usize,
    value: String,
}

/// Reads the shared values back from the files of every target and compares them.
pub(super) fn consistency(
    lock: &Lock,
    lock_file: &str,
    dir: &str,
    files: &BTreeMap<String, Vec<u8>>,
    f: &mut Vec<Finding>,
) {
    driver(lock, lock_file, dir, files, f);
    images(dir, files, f);
    command(dir, files, f);
    environment(lock, dir, files, f);
}

/// A generated file's text, when the output has it.
fn text(files: &BTreeMap<String, Vec<u8>>, p: &str) -> Option<String> {
    files
        .get(p)
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

fn driver(
    lock: &Lock,
    lock_file: &str,
    dir: &str,
    files: &BTreeMap<String, Vec<u8>>,
    f: &mut Vec<Finding>,
) {
    // The driver: lock = Packer scripts = Packer manifest versions = GPU Operator values.
    let mut drivers = Vec::new();
    if let Some(t) = text(files, "packer/scripts/base.sh") {
        drivers.extend(find_values(&t, "packer/scripts/base.sh", |l| {
            l.strip_prefix("readonly DRIVER_VERSION=").map(unquote_sh)
        }));
    }
    if let Some(t) = text(files, "packer/build.pkr.hcl") {
        drivers.extend(find_values(&t, "packer/build.pkr.hcl", |l| {
            let v = l
                .trim()
                .strip_prefix("versions")?
                .trim_start()
                .strip_prefix('=')?;
            let v = v.trim().trim_matches('"');
            v.split(',')
                .find_map(|kv| kv.strip_prefix("driver="))
                .map(str::to_string)
        }));
    }
    if let Some(t) = text(files, "k8s/gpu-operator-values.yaml") {
        let mut in_driver = false;
        for (i, l) in t.lines().enumerate() {
            if !l.starts_with(' ') && !l.starts_with('#') && !l.is_empty() {
                in_driver = l.trim_end() == "driver:";
                continue;
            }
            if let Some(v) = l.strip_prefix("  version:").filter(|_| in_driver) {
                let mut value = v.trim().trim_matches('"').to_string();
                // The driver container by the digest the lock read: that is the locked
                // driver's image.
                if value.starts_with("sha256:")
                    && lock
                        .package("gpu-operator-driver")
                        .and_then(|p| p.get("image-digest"))
                        == Some(value.as_str())
                {
                    value = lock.hardware.driver.to_string();
                }
                drivers.push(Seen {
                    file: "k8s/gpu-operator-values.yaml".into(),
                    line: i + 1,
                    value,
                });
            }
        }
    }
    let want = lock.hardware.driver.to_string();
    let wrong: Vec<&Seen> = drivers.iter().filter(|s| s.value != want).collect();
    if let Some(first) = wrong.first() {
        let mut detail = vec![format!("{lock_file}: {want}")];
        detail.extend(
            drivers
                .iter()
                .map(|s| format!("{}:{}: {}", join(dir, &s.file), s.line, s.value)),
        );
        f.push(
            Finding::new(
                Code::InconsistentDriver,
                format!(
                    "the driver differs across targets: {} says {}, the lock {want}",
                    join(dir, &first.file),
                    first.value
                ),
            )
            .at(&join(dir, &first.file), Some(first.line))
            .detail(detail)
            .hint("regenerate every target from the one lock: `gpustack gen all`"),
        );
    }
}

fn images(dir: &str, files: &BTreeMap<String, Vec<u8>>, f: &mut Vec<Finding>) {
    // Images: every reference to the stack's images = the bake file's tag for that layer.
    if let Some(bake) = text(files, "docker/docker-bake.hcl") {
        let tags = bake_tags(&bake);
        let repos: BTreeSet<&str> = tags
            .values()
            .filter_map(|t| t.rsplit_once(':').map(|x| x.0))
            .collect();
        let mut refs = Vec::new();
        for (p, b) in files {
            let t = String::from_utf8_lossy(b);
            if p.starts_with("k8s/") {
                refs.extend(find_values(&t, p, |l| {
                    l.trim()
                        .strip_prefix("image:")
                        .map(|v| v.trim().trim_matches('"').to_string())
                }));
            } else if p.starts_with("slurm/") && p.ends_with(".sbatch") {
                refs.extend(find_values(&t, p, |l| {
                    l.strip_prefix("image=")
                        .map(|v| unquote_sh(v).replacen('#', "/", 1))
                }));
            } else if p.starts_with("apptainer/") {
                refs.extend(find_values(&t, p, |l| {
                    l.strip_prefix("From:").map(|v| v.trim().to_string())
                }));
            }
        }
        for r in refs {
            let Some((repo, tag)) = r.value.rsplit_once(':') else {
                continue;
            };
            if !repos.contains(repo) {
                continue;
            }
            let layer = tag.split_once('-').map_or(tag, |x| x.0);
            // The bake target with this repository and layer: the layer's own target, or
            // (the code image, `<stack>-code:training-…`) the one whose tag has both.
            let built = tags
                .iter()
                .find(|(_, t)| {
                    t.rsplit_once(':').is_some_and(|(rp, tg)| {
                        rp == repo && tg.split_once('-').map_or(tg, |x| x.0) == layer
                    })
                })
                .map(|(_, t)| t)
                .or_else(|| tags.get(layer));
            match built {
                Some(t) if *t == r.value => {}
                Some(t) => f.push(
                    Finding::new(
                        Code::InconsistentImage,
                        format!(
                            "{} uses image {}, but the bake file builds {t}",
                            join(dir, &r.file),
                            r.value
                        ),
                    )
                    .at(&join(dir, &r.file), Some(r.line))
                    .detail(vec![format!(
                        "{}: the {layer} layer's target tags {t}",
                        join(dir, "docker/docker-bake.hcl")
                    )])
                    .hint("regenerate every target from the one lock: `gpustack gen all`"),
                ),
                None => f.push(
                    Finding::new(
                        Code::InconsistentImage,
                        format!(
                            "{} uses image {}, which the bake file does not build",
                            join(dir, &r.file),
                            r.value
                        ),
                    )
                    .at(&join(dir, &r.file), Some(r.line))
                    .hint("regenerate every target from the one lock: `gpustack gen all`"),
                ),
            }
        }
    }
}

fn command(dir: &str, files: &BTreeMap<String, Vec<u8>>, f: &mut Vec<Finding>) {
    // What torchrun runs: the pods' args after the rendezvous options = train.sbatch's
    // `entry` array (both render the workload plan's entry). The TrainJob carries them
    // (Kubeflow Trainer v2), or the PyTorchJob (`training_api = "pytorchjob"`).
    let job = ["k8s/trainjob.yaml", "k8s/pytorchjob.yaml"]
        .into_iter()
        .find_map(|f| text(files, f).map(|t| (f, t)));
    if let (Some((job, k)), Some(sl)) = (job, text(files, "slurm/train.sbatch")) {
        let (k_line, k_entry) = k8s_entry(&k);
        let (s_line, s_entry) = slurm_entry(&sl);
        if k_entry != s_entry {
            f.push(
                Finding::new(
                    Code::InconsistentCommand,
                    format!(
                        "{} and {} start different training commands",
                        join(dir, job),
                        join(dir, "slurm/train.sbatch")
                    ),
                )
                .at(&join(dir, "slurm/train.sbatch"), Some(s_line))
                .detail(vec![
                    format!(
                        "{}:{k_line}: torchrun … {}",
                        join(dir, job),
                        k_entry.join(" ")
                    ),
                    format!(
                        "{}:{s_line}: torchrun … {}",
                        join(dir, "slurm/train.sbatch"),
                        s_entry.join(" ")
                    ),
                ])
                .hint("regenerate every target from the one lock: `gpustack gen all`"),
            );
        }
    }
}

fn environment(lock: &Lock, dir: &str, files: &BTreeMap<String, Vec<u8>>, f: &mut Vec<Finding>) {
    // The NCCL/fabric environment: Dockerfile ENV = ConfigMap data = nccl.env.
    let mut envs: Vec<(String, EnvMap)> = Vec::new();
    if let Some(t) = text(files, "docker/Dockerfile") {
        envs.push(("docker/Dockerfile".into(), dockerfile_env(&t)));
    }
    // Every namespace's ConfigMap (`nccl-env.yaml`, `nccl-env-training.yaml`, …), in name
    // order: each carries the one environment.
    for (path, bytes) in files {
        let Some(name) = path.strip_prefix("k8s/") else {
            continue;
        };
        if name.starts_with("nccl-env") && name.ends_with(".yaml") && !name.contains('/') {
            envs.push((path.clone(), configmap_env(&String::from_utf8_lossy(bytes))));
        }
    }
    if let Some(t) = text(files, "slurm/env/nccl.env") {
        envs.push(("slurm/env/nccl.env".into(), shell_env(&t)));
    }
    let mut names: BTreeSet<String> = lock
        .facts
        .iter()
        .filter(|x| x.kind == "env")
        .map(|x| x.key.clone())
        .collect();
    for (file, m) in &envs {
        if file != "docker/Dockerfile" {
            names.extend(m.keys().cloned());
        }
    }
    if envs.len() >= 2 {
        for name in &names {
            let values: Vec<(&str, Option<&(usize, String)>)> = envs
                .iter()
                .map(|(file, m)| (file.as_str(), m.get(name)))
                .collect();
            let first = values[0].1.map(|x| &x.1);
            if values.iter().all(|(_, v)| v.map(|x| &x.1) == first) {
                continue;
            }
            let (file, at) = values
                .iter()
                .skip(1)
                .find(|(_, v)| v.map(|x| &x.1) != first)
                .map_or((values[0].0, values[0].1), |(file, v)| (file, *v));
            let detail = values
                .iter()
                .map(|(file, v)| match v {
                    Some((line, value)) => format!("{}:{line}: {name}={value}", join(dir, file)),
                    None => format!("{}: {name} not set", join(dir, file)),
                })
                .collect();
            f.push(
                Finding::new(
                    Code::InconsistentEnv,
                    format!("`{name}` differs between the images, Kubernetes and Slurm"),
                )
                .at(&join(dir, file), at.map(|x| x.0))
                .detail(detail)
                .hint("regenerate every target from the one lock: `gpustack gen all`"),
            );
        }
    }
}

fn find_values(text: &str, file: &str, get: impl Fn(&str) -> Option<String>) -> Vec<Seen> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            get(l).map(|value| Seen {
                file: file.to_string(),
                line: i + 1,
                value,
            })
        })
        .collect()
}

/// Undoes the `sh` filter's quoting: `'a'\''b'` → `a'b`; bare words as they are.
fn unquote_sh(s: &str) -> String {
    let s = s.trim();
    let mut out = String::new();
    let mut chars = s.chars();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '\'' => quoted = !quoted,
            '\\' if !quoted => {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            '"' if !quoted => {}
            _ => out.push(c),
        }
    }
    out
}

/// Undoes JSON string quoting (`"a\"b"` → `a"b`); other text as it is.
fn unquote_json(s: &str) -> String {
    let s = s.trim();
    serde_json::from_str::<String>(s).unwrap_or_else(|_| s.to_string())
}

/// The first training container's args after `--rdzv-id=…`: what torchrun runs, and the
/// line of the first of them.
fn k8s_entry(text: &str) -> (usize, Vec<String>) {
    let mut out = Vec::new();
    let mut line = 0;
    let mut in_args = false;
    let mut after_rdzv = false;
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        if t == "args:" {
            in_args = out.is_empty();
            continue;
        }
        if !in_args {
            continue;
        }
        let Some(item) = t.strip_prefix("- ") else {
            in_args = false;
            continue;
        };
        let v = unquote_json(item);
        if after_rdzv {
            if out.is_empty() {
                line = i + 1;
            }
            out.push(v);
        } else if v.starts_with("--rdzv-id=") {
            after_rdzv = true;
        }
    }
    (line, out)
}

/// `entry=(` … `)` of a training script: one shell word a line.
fn slurm_entry(text: &str) -> (usize, Vec<String>) {
    let mut out = Vec::new();
    let mut line = 0;
    let mut inside = false;
    for (i, l) in text.lines().enumerate() {
        if l == "entry=(" {
            inside = true;
            line = i + 1;
        } else if inside && l == ")" {
            break;
        } else if inside {
            out.push(unquote_sh(l));
        }
    }
    (line, out)
}

/// `target "base" { … tags = ["…"] }` → layer → tag.
fn bake_tags(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("target \"") {
            current = rest.split('"').next().map(str::to_string);
        } else if let (Some(t), Some(rest)) = (&current, l.trim().strip_prefix("tags")) {
            let v = rest.trim_start().trim_start_matches('=').trim();
            let v = v.trim_start_matches('[').trim_end_matches(']');
            if let Some(first) = v.split(',').next() {
                out.insert(t.clone(), unquote_json(first));
            }
        }
    }
    out
}

/// `ENV A="1" \` / `    B="2"` → name → (line, value), for every ENV instruction.
fn dockerfile_env(text: &str) -> EnvMap {
    let mut out = BTreeMap::new();
    let mut continuing = false;
    for (i, l) in text.lines().enumerate() {
        let body = if let Some(rest) = l.strip_prefix("ENV ") {
            rest
        } else if continuing {
            l
        } else {
            continue;
        };
        continuing = body.trim_end().ends_with('\\');
        let body = body.trim().trim_end_matches('\\').trim();
        if let Some((k, v)) = body.split_once('=') {
            if !k.contains(' ') {
                out.insert(k.to_string(), (i + 1, unquote_json(v)));
            }
        }
    }
    out
}

/// A ConfigMap's `data:` entries.
fn configmap_env(text: &str) -> EnvMap {
    let mut out = BTreeMap::new();
    let mut in_data = false;
    for (i, l) in text.lines().enumerate() {
        if !l.starts_with(' ') && !l.starts_with('#') && !l.is_empty() {
            in_data = l.trim_end() == "data:";
            continue;
        }
        if !in_data || l.trim_start().starts_with('#') {
            continue;
        }
        let t = l.trim();
        // `"KEY": "value"` with JSON-style quoting on both sides.
        if let Some(rest) = t.strip_prefix('"') {
            if let Some(end) = rest.find("\":") {
                let key = unquote_json(&format!("\"{}\"", &rest[..end]));
                out.insert(key, (i + 1, unquote_json(&rest[end + 2..])));
            }
        } else if let Some((k, v)) = t.split_once(':') {
            out.insert(k.trim().to_string(), (i + 1, unquote_json(v)));
        }
    }
    out
}

/// `export A=1` lines.
fn shell_env(text: &str) -> EnvMap {
    let mut out = BTreeMap::new();
    for (i, l) in text.lines().enumerate() {
        if let Some((k, v)) = l.strip_prefix("export ").and_then(|r| r.split_once('=')) {
            out.insert(k.to_string(), (i + 1, unquote_sh(v)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unquoting_matches_the_filters() {
        for s in ["plain", "a b", "it's", "$HOME", "a\\b", "x'y'z", ""] {
            assert_eq!(unquote_sh(&crate::render::sh_quote(s)), s, "{s}");
            assert_eq!(unquote_json(&crate::render::json_quote(s)), s, "{s}");
        }
    }
}
