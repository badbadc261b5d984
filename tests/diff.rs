//! `gpustack diff`: every case under `fixtures/diff/<case>/` locks `old.toml` and
//! `new.toml` with the stock catalog and checks the exact set of classes the diff reports;
//! some cases also compare the text, JSON and Markdown reports with the insta snapshots
//! next to them (`diff.txt.snap`, `diff.json.snap`, `diff.md.snap`; review a change with
//! `cargo insta review`, or accept every change with `INSTA_UPDATE=always cargo test --test
//! diff`, which also rewrites the example in `book/src/diff.md`).

mod common;

use common::*;
use gpustack::diff::{diff, Class, Kind, LockDiff, Status};
use gpustack::lock::Field;
use gpustack::{Component, Lock};

/// Every case and the classes its diff must report, costliest first.
const CASES: &[(&str, &[Class])] = &[
    (
        "driver-branch",
        &[
            Class::DriverBranch,
            Class::HostPackage,
            Class::CudaMinor,
            Class::Framework,
            Class::Request,
        ],
    ),
    (
        "driver-patch",
        &[Class::DriverPatch, Class::HostPackage, Class::Request],
    ),
    (
        "cuda-major",
        // The VM image installs the toolkit's own package (`cuda-toolkit-12-4`).
        &[
            Class::HostPackage,
            Class::CudaMajor,
            Class::Package,
            Class::Request,
        ],
    ),
    (
        "cuda-minor",
        &[
            Class::HostPackage,
            Class::CudaMinor,
            Class::Package,
            Class::Request,
        ],
    ),
    // The VM image installs cuDNN's own packages; every image NCCL's (`libnccl`).
    ("cudnn", &[Class::HostPackage, Class::Cudnn, Class::Request]),
    ("nccl", &[Class::Nccl, Class::Package, Class::Request]),
    (
        "framework",
        &[
            Class::Nccl,
            Class::Framework,
            Class::Package,
            Class::Request,
        ],
    ),
    // The interpreter build uv installs moves with it (`cpython`).
    ("python", &[Class::Python, Class::Package, Class::Request]),
    ("arch-list", &[Class::ArchList, Class::Request]),
    ("gpu", &[Class::Gpu, Class::ArchList, Class::Deployment]),
    // The GPU Operator's driver container is built per OS (`<driver>-<os>`).
    ("os", &[Class::HostPackage, Class::Os, Class::Package]),
    (
        "fabric",
        &[Class::Fabric, Class::Env, Class::Deployment, Class::Request],
    ),
    ("no-change", &[]),
];

/// The cases whose three reports are snapshot-tested.
const SNAPSHOTS: &[&str] = &["driver-branch", "framework", "fabric", "no-change"];

fn lock(case: &str, side: &str) -> Lock {
    let rel = format!("fixtures/diff/{case}/{side}.toml");
    let text = std::fs::read_to_string(root().join(&rel)).unwrap();
    gpustack::lock_spec(catalog(), &rel, &text).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn case_diff(case: &str) -> LockDiff {
    diff(&lock(case, "old"), &lock(case, "new"))
}

fn parse(path: &str) -> Lock {
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    Lock::parse(path, &text).unwrap()
}

#[test]
fn every_case_reports_exactly_its_classes() {
    let mut failures = Vec::new();
    for (case, want) in CASES {
        let d = case_diff(case);
        if d.classes() != *want {
            failures.push(format!(
                "{case}: classes {:?}, want {want:?}\n{}",
                d.classes(),
                d.to_text()
            ));
        }
        // The summary leads with the costliest class; the table follows it.
        let mut sorted = d.changes.iter().map(|c| c.class).collect::<Vec<_>>();
        sorted.sort();
        if d.changes.iter().map(|c| c.class).collect::<Vec<_>>() != sorted {
            failures.push(format!("{case}: changes are not costliest first"));
        }
        if d.is_empty() != want.is_empty() {
            failures.push(format!("{case}: is_empty() is {}", d.is_empty()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_case_directory_is_checked() {
    let mut dirs: Vec<String> = std::fs::read_dir(root().join("fixtures/diff"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    let mut listed: Vec<String> = CASES.iter().map(|(c, _)| c.to_string()).collect();
    listed.sort();
    assert_eq!(dirs, listed);
}

#[test]
fn reports_match_the_snapshots() {
    let mut failures = Vec::new();
    for case in SNAPSHOTS {
        let d = case_diff(case);
        let dir = format!("fixtures/diff/{case}");
        for (name, text) in [
            ("diff.txt", d.to_text()),
            ("diff.json", d.to_json()),
            ("diff.md", d.to_markdown()),
        ] {
            failures.extend(check_insta(&dir, name, &text));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_driver_branch_change_names_the_driver_and_what_to_rebuild() {
    let d = case_diff("driver-branch");
    assert_eq!(d.costliest(), Some(Class::DriverBranch));
    let driver = &d.changes[0];
    assert_eq!(
        (driver.kind, driver.name.as_str(), driver.status),
        (Kind::Component, "driver", Status::Changed)
    );
    assert_eq!(driver.old.as_deref(), Some("535.183.06"));
    assert_eq!(driver.new.as_deref(), Some("550.144.03"));
    // CUDA keeps its version but its compatibility mode (a pinned field) changes.
    let cuda = d.changes.iter().find(|c| c.name == "cuda").unwrap();
    assert_eq!(cuda.old, cuda.new);
    assert!(cuda.fields.iter().any(|f| f.key == "compat"), "{cuda:?}");
    assert_eq!(d.rebuild(), ["base", "framework", "validate", "host"]);
    let md = d.to_markdown();
    assert!(md.contains("**Costliest change: `driver-branch`**"), "{md}");
    assert!(
        md.contains("<details>") && md.contains("</details>"),
        "{md}"
    );
}

#[test]
fn a_torch_variant_change_is_a_framework_change_with_a_note() {
    let d = case_diff("framework");
    let torch = d.changes.iter().find(|c| c.name == "torch").unwrap();
    assert_eq!(torch.class, Class::Framework);
    assert_eq!(torch.note.as_deref(), Some("CUDA variant cu121 → cu124"));
    assert!(d.to_text().contains("CUDA variant cu121 → cu124"));
}

#[test]
fn new_fabric_packages_are_added_fabric_changes() {
    let d = case_diff("fabric");
    let ucx = d.changes.iter().find(|c| c.name == "ucx").unwrap();
    assert_eq!(
        (ucx.class, ucx.status, ucx.old.as_deref()),
        (Class::Fabric, Status::Added, None)
    );
    let env = d
        .changes
        .iter()
        .find(|c| c.name == "env NCCL_IB_DISABLE")
        .unwrap();
    assert_eq!(
        (env.class, env.old.as_deref(), env.new.as_deref()),
        (Class::Env, Some("1"), Some("0"))
    );
}

#[test]
fn reversing_a_diff_keeps_its_classes_and_swaps_sides() {
    for (case, want) in CASES {
        let (a, b) = (lock(case, "old"), lock(case, "new"));
        let (fwd, back) = (diff(&a, &b), diff(&b, &a));
        assert_eq!(back.classes(), *want, "{case} reversed");
        assert_eq!(fwd.changes.len(), back.changes.len(), "{case}");
        for (x, y) in fwd.changes.iter().zip(&back.changes) {
            assert_eq!(
                (&x.name, &x.old, &x.new),
                (&y.name, &y.new, &y.old),
                "{case}"
            );
        }
    }
}

#[test]
fn reports_are_deterministic() {
    let a = case_diff("fabric");
    let b = case_diff("fabric");
    assert_eq!(a, b);
    assert_eq!(a.to_json(), b.to_json());
    assert_eq!(a.to_markdown(), b.to_markdown());
}

#[test]
fn json_report_has_the_documented_shape() {
    let d = case_diff("driver-branch");
    let v: serde_json::Value = serde_json::from_str(&d.to_json()).unwrap();
    assert_eq!(v["schema"], 1);
    assert_eq!(v["empty"], false);
    assert_eq!(v["old"]["stack"], "a100-train");
    assert_eq!(v["summary"][0]["class"], "driver-branch");
    assert_eq!(v["summary"][0]["count"], 1);
    assert_eq!(v["changes"][0]["kind"], "component");
    assert_eq!(v["changes"][0]["status"], "changed");
    assert_eq!(v["changes"][0]["old"], "535.183.06");
    assert_eq!(v["layers"][0]["layer"], "base");
    assert!(v["layers"][0]["old_hash"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    assert_eq!(v["files"]["available"], true);
    let targets: Vec<&str> = v["files"]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["target"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["docker", "apptainer", "packer", "k8s", "slurm"]);
    assert!(v["files"]["targets"][0]["changed"]
        .as_array()
        .unwrap()
        .contains(&"Dockerfile".into()));
}

#[test]
fn markdown_table_rows_have_five_cells() {
    for (case, _) in CASES {
        let md = case_diff(case).to_markdown();
        let mut in_table = false;
        for line in md.lines() {
            if line.starts_with("| change |") {
                in_table = true;
            } else if !line.starts_with('|') {
                in_table = false;
            }
            if in_table {
                let cells = line.replace("\\|", "").matches('|').count() - 1;
                assert_eq!(cells, 5, "{case}: {line}");
            }
        }
    }
}

#[test]
fn a_v1_lock_diffs_without_the_file_comparison() {
    let old = parse("fixtures/lockfiles/v1/a100-pytorch.lock");
    let new = parse("lockfiles/a100-pytorch.lock");
    let d = diff(&old, &new);
    assert!(!d.files.available);
    let reason = d.files.reason.as_deref().unwrap();
    assert!(
        reason.starts_with("the old lock does not render: the lock has no deployment picks"),
        "{reason}"
    );
    // The classified changes still stand: the v2 lock adds the host packages.
    assert!(
        d.classes().contains(&Class::HostPackage),
        "{:?}",
        d.classes()
    );
    assert!(d
        .to_text()
        .contains("not compared: the old lock does not render"));
    assert!(d.to_markdown().contains("Generated files not compared:"));
    let v: serde_json::Value = serde_json::from_str(&d.to_json()).unwrap();
    assert_eq!(v["files"]["available"], false);
}

#[test]
fn descriptive_fields_alone_are_metadata() {
    // A test edit, not a fact: the R535 branch flips from end of life back to supported.
    let old = parse("lockfiles/a100-pytorch.lock");
    assert_eq!(
        old.component(Component::Driver)
            .unwrap()
            .get("branch-status"),
        Some("eol")
    );
    let mut new = old.clone();
    let driver = new
        .components
        .iter_mut()
        .find(|c| c.name == Component::Driver)
        .unwrap();
    driver
        .fields
        .insert("branch-status".into(), Field::Str("supported".into()));
    let d = diff(&old, &new);
    assert_eq!(d.classes(), [Class::Metadata]);
    assert!(d.layers.is_empty(), "{:?}", d.layers);
    let f = &d.changes[0].fields[0];
    assert_eq!(
        (f.key.as_str(), f.old.as_deref(), f.new.as_deref()),
        ("branch-status", Some("eol"), Some("supported"))
    );
}

#[test]
fn a_lock_that_differs_only_in_provenance_is_empty_and_relabels_files() {
    let old = parse("lockfiles/a100-pytorch.lock");
    let mut new = old.clone();
    new.catalog_digest = format!("sha256:{}", "0".repeat(64));
    let d = diff(&old, &new);
    assert!(d.changes.is_empty() && d.layers.is_empty());
    assert!(d.is_empty());
    // Every file carries the lock hash, and nothing else changed.
    let docker = &d.files.targets[0];
    assert!(docker.changed.is_empty(), "{docker:?}");
    assert!(docker.relabelled.contains(&"Dockerfile".to_string()));
    let text = d.to_text();
    assert!(text.contains("no changes"), "{text}");
    assert!(text.contains("differ only in provenance"), "{text}");
}

#[test]
fn the_book_lists_every_class() {
    let book = std::fs::read_to_string(root().join("book/src/diff.md")).unwrap();
    for c in Class::ALL {
        let row = format!("| `{}` | {} | {} |", c.name(), c.trigger(), c.action());
        assert!(book.contains(&row), "book/src/diff.md lacks the row\n{row}");
    }
}

/// The Markdown example in the book is the `driver-branch` snapshot (blessing rewrites it).
#[test]
fn the_book_example_is_the_driver_branch_snapshot() {
    let path = root().join("book/src/diff.md");
    let book = std::fs::read_to_string(&path).unwrap();
    let block = code_blocks(&book)
        .into_iter()
        .find(|b| b.info == "markdown")
        .expect("a ```markdown block");
    let (start, end) = (block.body.start, block.body.end);
    let actual = case_diff("driver-branch").to_markdown();
    if bless() {
        std::fs::write(&path, format!("{}{actual}{}", &book[..start], &book[end..])).unwrap();
        return;
    }
    assert!(
        book[start..end] == actual,
        "book/src/diff.md's example is stale:\n{}\nrun `INSTA_UPDATE=always cargo test --test diff` \
         and review `git diff book/src/diff.md`",
        unified_diff(&book[start..end], &actual, "book/src/diff.md")
    );
}
