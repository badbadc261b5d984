//! Golden files: for every example spec, every generated file of every target equals the
//! committed copy under `fixtures/gen/<spec>/<target>/`, byte for byte, and regenerating
//! into the same directory changes nothing (`gen --check`). A difference fails with a
//! unified diff; after an intended change, `INSTA_UPDATE=always cargo test --test golden`
//! rewrites the tree and `git diff fixtures/gen` is the review (these are real files that
//! `tests/check.rs`, the benches and the book read, so they carry no snapshot header).

mod common;

use common::*;

#[test]
fn generated_files_match_the_goldens() {
    let mut failures = Vec::new();
    // Every target is built into every binary (none is behind a feature).
    let targets: Vec<&str> = gpustack::plan::Target::ALL
        .iter()
        .map(|t| t.name())
        .collect();
    assert_eq!(targets, ["docker", "apptainer", "packer", "k8s", "slurm"]);
    for name in example_names() {
        for target in &targets {
            let got = generate(&name, target);
            let golden = root().join("fixtures/gen").join(&name).join(target);
            let actual = tree(&got);
            if bless() {
                let _ = std::fs::remove_dir_all(&golden);
                copy_dir(&got, &golden);
                continue;
            }
            let expected = if golden.exists() {
                tree(&golden)
            } else {
                Default::default()
            };
            if expected.keys().collect::<Vec<_>>() != actual.keys().collect::<Vec<_>>() {
                failures.push(format!(
                    "{name}/{target}: files differ: golden {:?}, generated {:?}",
                    expected.keys().collect::<Vec<_>>(),
                    actual.keys().collect::<Vec<_>>()
                ));
                continue;
            }
            for (path, bytes) in &actual {
                if expected.get(path) != Some(bytes) {
                    failures.push(
                        unified_diff(
                            &String::from_utf8_lossy(&expected[path]),
                            &String::from_utf8_lossy(bytes),
                            &format!("fixtures/gen/{name}/{target}/{}", path.display()),
                        )
                        .to_string(),
                    );
                }
            }
            // Regenerating over the same directory is a no-op for --check.
            let lock = root().join("lockfiles").join(format!("{name}.lock"));
            let parent = got.parent().unwrap();
            let out = run_in(
                parent.parent().unwrap(),
                &[
                    "gen",
                    target,
                    "--lock",
                    lock.to_str().unwrap(),
                    "--out",
                    "out",
                    "--check",
                ],
            );
            if out.code != 0 {
                failures.push(format!(
                    "{name}/{target}: gen --check right after gen: {}",
                    out.stderr
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n\nif the change is intended, run `INSTA_UPDATE=always cargo test --test golden` \
         and review `git diff fixtures/gen`",
        failures.join("\n")
    );
}
