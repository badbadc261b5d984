//! Generated Dockerfiles read back: their stages and instructions, and whether what they
//! copy is in the build context (`tests/docker.rs`, `tests/closure.rs`).

use std::collections::BTreeMap;
use std::path::Path;

/// One `FROM … AS name` stage of a Dockerfile: its parent and its instructions (with line
/// continuations joined).
#[derive(Debug, Default)]
pub(crate) struct Stage {
    pub(crate) from: String,
    pub(crate) instructions: Vec<(String, String)>,
}

/// A small Dockerfile parser: enough structure to check stages, parents, ENV, RUN and
/// COPY; comments and parser directives dropped. Returns the stages in file order (an
/// unnamed one as `#<index>`) and each stage by name.
pub(crate) fn parse_dockerfile(text: &str) -> (Vec<String>, BTreeMap<String, Stage>) {
    let mut order = Vec::new();
    let mut stages: BTreeMap<String, Stage> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut logical = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        if logical.is_empty() && (t.starts_with('#') || t.is_empty()) {
            continue;
        }
        if t.starts_with('#') {
            continue;
        }
        if let Some(x) = line.strip_suffix('\\') {
            logical.push_str(x);
            logical.push(' ');
            continue;
        }
        logical.push_str(line);
        let full = std::mem::take(&mut logical);
        let (kw, rest) = full.trim().split_once(' ').unwrap_or((full.trim(), ""));
        let kw = kw.to_ascii_uppercase();
        if kw == "FROM" {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let name = if words.len() == 3 && words[1].eq_ignore_ascii_case("as") {
                words[2].to_string()
            } else {
                format!("#{}", order.len())
            };
            order.push(name.clone());
            stages.insert(
                name.clone(),
                Stage {
                    from: words[0].to_string(),
                    instructions: Vec::new(),
                },
            );
            current = Some(name);
        } else if let Some(c) = &current {
            stages
                .get_mut(c)
                .unwrap()
                .instructions
                .push((kw, rest.to_string()));
        }
    }
    (order, stages)
}

/// Whether `path` is in the Docker build context after `.dockerignore` (Docker's rule: the
/// last pattern that matches decides; `!` re-includes; `*` matches within one name).
pub(crate) fn in_build_context(dockerignore: &str, path: &str) -> bool {
    fn glob(p: &[u8], s: &[u8]) -> bool {
        match (p.first(), s.first()) {
            (None, None) => true,
            (Some(b'*'), _) => {
                glob(&p[1..], s) || (!s.is_empty() && s[0] != b'/' && glob(p, &s[1..]))
            }
            (Some(a), Some(b)) if a == b => glob(&p[1..], &s[1..]),
            _ => false,
        }
    }
    let mut included = true;
    for line in dockerignore.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (neg, pat) = match line.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, line),
        };
        if glob(pat.as_bytes(), path.as_bytes()) {
            included = neg;
        }
    }
    included
}

/// Every local source of a `COPY`/`ADD` in the generated Dockerfile of `docker_dir` exists
/// there and is in the build context its `.dockerignore` leaves (a file the ignore list
/// drops fails `docker build` with "not found").
pub(crate) fn assert_copies_are_in_the_context(docker_dir: &Path) {
    let dockerfile = std::fs::read_to_string(docker_dir.join("Dockerfile")).unwrap();
    let ignore = std::fs::read_to_string(docker_dir.join(".dockerignore")).unwrap();
    let (_, stages) = parse_dockerfile(&dockerfile);
    let copies = stages
        .values()
        .flat_map(|s| &s.instructions)
        .filter(|(kw, _)| kw == "COPY" || kw == "ADD");
    for (kw, rest) in copies {
        let line = format!("{kw} {rest}");
        let words: Vec<&str> = rest.split_whitespace().collect();
        if words.iter().any(|w| w.starts_with("--from=")) {
            continue;
        }
        let args: Vec<&str> = words.into_iter().filter(|w| !w.starts_with("--")).collect();
        for src in &args[..args.len().saturating_sub(1)] {
            let src = src.trim_matches('"');
            if src.contains("://") {
                continue;
            }
            assert!(
                in_build_context(&ignore, src),
                "{}: `{line}` copies `{src}`, which .dockerignore leaves out of the build context",
                docker_dir.display()
            );
            if !src.contains('*') {
                assert!(
                    docker_dir.join(src).exists(),
                    "{}: `{line}` copies `{src}`, which gen did not write",
                    docker_dir.display()
                );
            }
        }
    }
}
