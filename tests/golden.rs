//! Golden files: for every example spec, every generated file of every target equals the
//! committed copy under `fixtures/gen/<spec>/<target>/`, byte for byte, and regenerating
//! into the same directory changes nothing (`gen --check`). Bless with
//! `GPUSTACK_BLESS=1 cargo test --test golden`.

mod common;

use common::*;

/// The targets with generators in this build.
const TARGETS: &[&str] = &["docker", "apptainer", "packer", "k8s", "slurm"];

fn available(target: &str) -> bool {
    let dir = tempdir(&format!("probe-{target}"));
    let lock = root().join("lockfiles/a100-pytorch.lock");
    let out = run_in(
        &dir,
        &[
            "gen",
            target,
            "--lock",
            lock.to_str().unwrap(),
            "--out",
            "o",
        ],
    );
    !out.stderr.contains("is not available in this build")
}

#[test]
fn generated_files_match_the_goldens() {
    let mut failures = Vec::new();
    let targets: Vec<&str> = TARGETS.iter().copied().filter(|t| available(t)).collect();
    assert!(targets.contains(&"docker"));
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
                    failures.push(format!(
                        "{name}/{target}/{}:\n{}",
                        path.display(),
                        diff(
                            &String::from_utf8_lossy(&expected[path]),
                            &String::from_utf8_lossy(bytes)
                        )
                    ));
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
        "{}\n\nrun `GPUSTACK_BLESS=1 cargo test --test golden` if the change is intended",
        failures.join("\n")
    );
}
