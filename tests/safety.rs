//! Never lose or clobber a file, never run away with memory (issue 17): one test per
//! finding of the hostile-input and fault-injection pass, each failing before its fix.
//!
//! * writes: symbolic links at temporary names, device and FIFO destinations, `--out`
//!   onto the spec or onto a file that is not a lock, `init` never leaving an empty spec;
//! * `gen`: files it did not write are kept (it refuses), an I/O error at every step leaves
//!   the old tree, a kill at every step is rolled back by the next run, concurrent runs are
//!   serialised, FIFOs in output directories are reported and never opened;
//! * reads: `/dev/zero`, FIFOs and huge sparse files as every input, under a memory cap;
//! * `matrix`: a 1,000-entry overlay within 256 MiB, with `--limit` (and 2 s) or without,
//!   `matrix | head -1`;
//! * output: Markdown/HTML and terminal escapes; exit codes.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_gpustack")
}

fn mkfifo(p: &Path) {
    let ok = Command::new("mkfifo").arg(p).status().unwrap().success();
    assert!(ok, "mkfifo {}", p.display());
}

fn is_fifo(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_fifo())
}

fn lockfile(name: &str) -> PathBuf {
    root().join("lockfiles").join(format!("{name}.lock"))
}

/// A project with a spec, its lock, and `out/` generated from `a100-pytorch`.
fn project(tag: &str) -> PathBuf {
    let dir = tempdir(tag);
    std::fs::copy(
        root().join("fixtures/specs/a100-pytorch.toml"),
        dir.join("gpustack.toml"),
    )
    .unwrap();
    std::fs::copy(lockfile("a100-pytorch"), dir.join("gpustack.lock")).unwrap();
    std::fs::copy(lockfile("l40s-torch"), dir.join("other.lock")).unwrap();
    let out = run_in(&dir, &["gen", "all"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    dir
}

/// Every entry under `dir` (files with contents and modes, links, FIFOs, directories).
fn snapshot(dir: &Path) -> Vec<(String, String)> {
    use std::os::unix::fs::PermissionsExt;
    let mut v = Vec::new();
    for e in walkdir::WalkDir::new(dir).min_depth(1).sort_by_file_name() {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        let what = if m.is_file() {
            format!(
                "file {:o} {}",
                m.permissions().mode() & 0o777,
                String::from_utf8_lossy(&std::fs::read(e.path()).unwrap())
            )
        } else if m.is_dir() {
            "dir".into()
        } else {
            "other".into()
        };
        v.push((rel, what));
    }
    v
}

/// The paths where two snapshots differ (for readable failures).
fn differences(a: &[(String, String)], b: &[(String, String)]) -> Vec<String> {
    let a: std::collections::BTreeMap<_, _> = a.iter().cloned().collect();
    let b: std::collections::BTreeMap<_, _> = b.iter().cloned().collect();
    let keys: std::collections::BTreeSet<_> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

/// `out/` as generated from `lock` in a fresh directory.
fn generated_from(lock: &str) -> Vec<(String, String)> {
    let dir = tempdir("reference");
    std::fs::copy(lockfile(lock), dir.join("gpustack.lock")).unwrap();
    assert_eq!(run_in(&dir, &["gen", "all"]).code, 0);
    let s = snapshot(&dir.join("out"));
    let _ = std::fs::remove_dir_all(&dir);
    s
}

fn run_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env("GPUSTACK_OFFLINE", "1")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// ---------------------------------------------------------------------------------------
// Writes

#[test]
fn lock_never_writes_through_a_link_at_a_temporary_name() {
    let dir = tempdir("tmp-symlink");
    std::fs::copy(
        root().join("fixtures/specs/a100-pytorch.toml"),
        dir.join("gpustack.toml"),
    )
    .unwrap();
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    // The old predictable names, for every pid a container is likely to give.
    for pid in 1..=64 {
        std::os::unix::fs::symlink(
            &victim,
            dir.join(format!(".gpustack.lock.gpustack-tmp.{pid}")),
        )
        .unwrap();
    }
    let out = run_in(&dir, &["lock"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let m = std::fs::symlink_metadata(dir.join("gpustack.lock")).unwrap();
    assert!(m.is_file(), "gpustack.lock must be a regular file");
    // The planted links are not gpustack's temporary files: left alone.
    assert!(std::fs::symlink_metadata(dir.join(".gpustack.lock.gpustack-tmp.1")).is_ok());
    // A link as the destination is refused, not replaced and not written through.
    std::fs::remove_file(dir.join("gpustack.lock")).unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("gpustack.lock")).unwrap();
    let out = run_in(&dir, &["lock"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("it is a symbolic link"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lock_refuses_device_fifo_spec_and_foreign_destinations() {
    let dir = tempdir("destinations");
    std::fs::copy(
        root().join("fixtures/specs/a100-pytorch.toml"),
        dir.join("gpustack.toml"),
    )
    .unwrap();
    let spec = std::fs::read(dir.join("gpustack.toml")).unwrap();
    mkfifo(&dir.join("fifo"));
    std::fs::write(dir.join("notes.txt"), "mine\n").unwrap();
    let cases: &[(&str, &str)] = &[
        ("/dev/null", "it is a character device"),
        ("/dev/full", "it is a character device"),
        ("/dev/stdout", "it is a symbolic link"),
        ("fifo", "it is a FIFO"),
        ("gpustack.toml", "refusing to write the lock over the spec"),
        (
            "./gpustack.toml",
            "refusing to write the lock over the spec",
        ),
        ("notes.txt", "it is not a gpustack lock"),
        (".", "it is a directory"),
    ];
    for (dest, msg) in cases {
        if !Path::new(dest).exists() && dest.starts_with('/') {
            continue;
        }
        let out = run_in(&dir, &["lock", "--out", dest]);
        assert_eq!(out.code, 2, "lock --out {dest}: {}", out.stderr);
        assert!(
            out.stderr.contains(msg),
            "lock --out {dest}: {}",
            out.stderr
        );
        assert!(out.stderr.contains("\nhint: "), "{}", out.stderr);
    }
    assert!(is_fifo(&dir.join("fifo")));
    assert_eq!(std::fs::read(dir.join("gpustack.toml")).unwrap(), spec);
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "mine\n"
    );
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    // `-` is standard output; an existing lock is replaced.
    let out = run_in(&dir, &["lock", "--out", "-"]);
    assert_eq!(out.code, 0);
    assert!(out
        .stdout
        .starts_with("# This file is @generated by gpustack"));
    assert_eq!(run_in(&dir, &["lock"]).code, 0);
    assert_eq!(run_in(&dir, &["lock"]).code, 0);
    // `lock --check` on something that is not a lock file is invalid input (2), a
    // missing lock is a stale one (1).
    for (dest, code) in [(".", 2), ("fifo", 2), ("/dev/zero", 2), ("missing.lock", 1)] {
        let out = run_in(&dir, &["lock", "--check", "--out", dest]);
        assert_eq!(out.code, code, "lock --check --out {dest}: {}", out.stderr);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn leftover_temporary_files_of_killed_runs_are_removed() {
    let dir = tempdir("leftovers");
    std::fs::copy(
        root().join("fixtures/specs/a100-pytorch.toml"),
        dir.join("gpustack.toml"),
    )
    .unwrap();
    // A run killed after writing its temporary file, before the rename.
    let (code, _) = run_env(&dir, &["lock"], &[("GPUSTACK_TEST_FAULT", "abort@1")]);
    assert_eq!(code, None, "the run must have been killed");
    let temps = |d: &Path| {
        std::fs::read_dir(d)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .contains("gpustack-tmp")
            })
            .count()
    };
    assert_eq!(temps(&dir), 1);
    assert!(!dir.join("gpustack.lock").exists());
    assert_eq!(run_in(&dir, &["lock"]).code, 0);
    assert_eq!(temps(&dir), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn init_leaves_nothing_when_it_cannot_finish() {
    let dir = tempdir("init");
    // A write that fails (a full disk) after the temporary file: no spec at all, so the
    // next `init` is not blocked by an empty one.
    let (code, err) = run_env(&dir, &["init"], &[("GPUSTACK_TEST_FAULT", "error@1")]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "nothing left");
    assert_eq!(run_in(&dir, &["init"]).code, 0);
    let first = std::fs::read(dir.join("gpustack.toml")).unwrap();
    assert!(!first.is_empty());
    let out = run_in(&dir, &["init"]);
    assert_eq!(out.code, 2);
    assert_eq!(std::fs::read(dir.join("gpustack.toml")).unwrap(), first);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------
// gen

#[test]
fn gen_never_deletes_a_file_it_did_not_write() {
    let dir = project("foreign");
    std::fs::write(dir.join("out/k8s/ingress.yaml"), "kind: Ingress\n").unwrap();
    std::fs::copy(
        dir.join("gpustack.lock"),
        dir.join("out/docker/gpustack.lock"),
    )
    .unwrap();
    std::fs::create_dir(dir.join("out/slurm/mine")).unwrap();
    let before = snapshot(&dir.join("out"));
    let out = run_in(&dir, &["gen", "all", "--lock", "other.lock"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    for p in ["k8s/ingress.yaml", "docker/gpustack.lock", "slurm/mine/"] {
        assert!(
            out.stderr
                .contains(&format!("{p} was not written by gpustack")),
            "{}",
            out.stderr
        );
    }
    assert_eq!(snapshot(&dir.join("out")), before, "nothing may change");
    // A file gpustack wrote that the new lock no longer generates is removed.
    std::fs::remove_file(dir.join("out/k8s/ingress.yaml")).unwrap();
    std::fs::remove_file(dir.join("out/docker/gpustack.lock")).unwrap();
    std::fs::remove_dir(dir.join("out/slurm/mine")).unwrap();
    let manifest = dir.join("out/slurm/.gpustack-manifest");
    let mut m = std::fs::read_to_string(&manifest).unwrap();
    m.push_str("retired.sbatch\n");
    std::fs::write(&manifest, m).unwrap();
    std::fs::write(dir.join("out/slurm/retired.sbatch"), "#!/bin/bash\n").unwrap();
    let out = run_in(&dir, &["gen", "all"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!dir.join("out/slurm/retired.sbatch").exists());
    assert_eq!(snapshot(&dir.join("out")), generated_from("a100-pytorch"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn special_files_in_output_directories_are_reported_and_never_opened() {
    let dir = project("fifo-out");
    mkfifo(&dir.join("out/k8s/pipe"));
    mkfifo(&dir.join("out/docker/Dockerfile.new"));
    // A FIFO where gpustack writes a file.
    std::fs::remove_file(dir.join("out/slurm/env/nccl.env")).unwrap();
    mkfifo(&dir.join("out/slurm/env/nccl.env"));
    std::os::unix::fs::symlink("/etc/passwd", dir.join("out/packer/link")).unwrap();
    // Each would hang on open: they must finish.
    let out = run_in(&dir, &["gen", "all", "--check"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    for l in [
        "k8s/pipe is a FIFO",
        "docker/Dockerfile.new is a FIFO",
        "slurm/env/nccl.env is a FIFO",
        "packer/link is a symbolic link",
    ] {
        assert!(out.stderr.contains(l), "{l}: {}", out.stderr);
    }
    let out = run_in(&dir, &["check"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    for l in [
        "out/k8s/pipe is a FIFO",
        "out/packer/link is a symbolic link",
    ] {
        assert!(out.stdout.contains(l), "{l}: {}", out.stdout);
    }
    let out = run_in(&dir, &["gen", "all"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("k8s/pipe is a FIFO"), "{}", out.stderr);
    assert!(is_fifo(&dir.join("out/k8s/pipe")));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `gen all --lock other.lock` with a fault at checkpoint 1, 2, … until a run gets
/// through; calls `after(n, exit code)` after each faulted run.
fn each_checkpoint(dir: &Path, fault: &str, mut after: impl FnMut(usize, Option<i32>)) -> usize {
    for n in 1..100 {
        let (code, err) = run_env(
            dir,
            &["gen", "all", "--lock", "other.lock"],
            &[("GPUSTACK_TEST_FAULT", &format!("{fault}@{n}"))],
        );
        if code == Some(0) {
            return n - 1;
        }
        if fault == "error" {
            assert_eq!(code, Some(2), "{fault}@{n}: {err}");
            assert!(err.contains("injected fault"), "{fault}@{n}: {err}");
        }
        after(n, code);
    }
    panic!("gen never finished");
}

#[test]
fn an_io_error_at_any_step_of_gen_leaves_the_old_tree() {
    let dir = project("io-error");
    let old = snapshot(&dir.join("out"));
    let steps = each_checkpoint(&dir, "error", |n, _| {
        assert_eq!(
            snapshot(&dir.join("out")),
            old,
            "error@{n} changed the tree"
        );
    });
    assert!(steps >= 12, "expected a checkpoint per step, found {steps}");
    assert_eq!(snapshot(&dir.join("out")), generated_from("l40s-torch"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_kill_at_any_step_of_gen_is_rolled_back_or_complete() {
    let dir = project("kill");
    let old = snapshot(&dir.join("out"));
    let new = generated_from("l40s-torch");
    let steps = each_checkpoint(&dir, "abort", |n, code| {
        assert_eq!(code, None, "abort@{n} must kill the run");
        // The next run's recovery (here in-process) gives one tree or the other.
        gpustack::emit::recover(&dir.join("out")).unwrap();
        let now = snapshot(&dir.join("out"));
        assert!(
            now == old || now == new,
            "abort@{n} left a mixed tree: {:?}",
            differences(&now, &old)
        );
        if now == new {
            // Committed: put the old tree back for the next step.
            assert_eq!(run_in(&dir, &["gen", "all"]).code, 0);
        }
    });
    assert!(steps >= 12, "{steps}");
    assert_eq!(snapshot(&dir.join("out")), new);
    // A kill during the recovery itself: the next recovery finishes it.
    assert_eq!(run_in(&dir, &["gen", "all"]).code, 0);
    let (code, _) = run_env(
        &dir,
        &["gen", "all", "--lock", "other.lock"],
        &[("GPUSTACK_TEST_FAULT", "abort@10")],
    );
    assert_eq!(code, None);
    let out = run_in(&dir, &["gen", "all", "--check"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("was interrupted"), "{}", out.stderr);
    let out = run_in(&dir, &["check"]);
    assert!(out.stdout.contains("interrupted"), "{}", out.stdout);
    let (code, _) = run_env(&dir, &["gen", "all"], &[("GPUSTACK_TEST_FAULT", "abort@2")]);
    assert_eq!(code, None);
    gpustack::emit::recover(&dir.join("out")).unwrap();
    assert_eq!(snapshot(&dir.join("out")), old);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn concurrent_gen_runs_are_serialised() {
    let dir = project("concurrent");
    let a = generated_from("a100-pytorch");
    let b = generated_from("l40s-torch");
    for _ in 0..4 {
        let spawn = |lock: &str| {
            Command::new(bin())
                .args(["gen", "all", "--lock", lock])
                .current_dir(&dir)
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let p = spawn("gpustack.lock");
        let q = spawn("other.lock");
        for c in [p, q] {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        let now = snapshot(&dir.join("out"));
        assert!(now == a || now == b, "two locks mixed in one tree");
    }
    // A run that cannot get the lock in time says so.
    let held = std::fs::File::open(dir.join("out")).unwrap();
    held.lock().unwrap();
    let (code, err) = run_env(
        &dir,
        &["gen", "all", "--lock", "other.lock"],
        &[("GPUSTACK_LOCK_TIMEOUT", "0.2")],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("another gpustack is writing `out`"), "{err}");
    drop(held);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------
// Reads

#[test]
fn unbounded_and_special_inputs_are_refused_under_a_memory_cap() {
    let dir = tempdir("inputs");
    std::fs::copy(lockfile("a100-pytorch"), dir.join("gpustack.lock")).unwrap();
    mkfifo(&dir.join("fifo"));
    // Sparse files: 3 GiB as a spec, 64 MiB as a lock: nothing is read.
    std::fs::File::create(dir.join("huge.toml"))
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    std::fs::File::create(dir.join("huge.lock"))
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let cases: &[&[&str]] = &[
        &["lock", "--spec", "/dev/zero", "--out", "-"],
        &["lock", "--spec", "fifo", "--out", "-"],
        &["lock", "--spec", "huge.toml", "--out", "-"],
        &["matrix", "--spec", "/dev/zero"],
        &["gen", "all", "--lock", "/dev/zero"],
        &["gen", "all", "--lock", "fifo"],
        &["gen", "all", "--lock", "huge.lock"],
        &["diff", "/dev/zero", "gpustack.lock"],
        &["why", "torch", "--lock", "huge.lock"],
        &["probe", "--from", "/dev/zero"],
        &["probe", "--from", "fifo"],
        &["check", "--hardware", "/dev/zero"],
        &["check", "--lock", "fifo"],
        &["check", "--spec", "huge.toml"],
    ];
    for args in cases {
        // 512 MiB of address space: a read of the input would not fit.
        let cmd = format!("ulimit -v 524288 && exec {} {}", bin(), args.join(" "));
        let o = Command::new("sh")
            .args(["-c", &cmd])
            .current_dir(&dir)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("not a regular file") || err.contains("is larger than"),
            "{args:?}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn overlay_symbolic_links_are_ignored() {
    let dir = tempdir("overlay-links");
    let site = dir.join("site");
    std::fs::create_dir(&site).unwrap();
    std::fs::write(dir.join("outside.toml"), "this is not toml [").unwrap();
    std::os::unix::fs::symlink(dir.join("outside.toml"), site.join("linked.toml")).unwrap();
    std::os::unix::fs::symlink(&dir, site.join("loop")).unwrap();
    let out = run_in(&dir, &["catalog", "list", "--catalog", "site"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------
// matrix

/// A spec whose axes are CUDA, NCCL and Python, and an overlay with 1,000 more NCCL
/// releases: 208,410 rows in all.
fn big_matrix(tag: &str) -> PathBuf {
    let dir = tempdir(tag);
    std::fs::create_dir(dir.join("site")).unwrap();
    let mut s = String::from("family = \"nccl\"\n");
    for i in 0..1000 {
        s.push_str(&format!(
            "\n[[release]]\nversion = \"2.40.{i}\"\ncuda_majors = [12, 13]\nsource = \"synthetic\"\n"
        ));
    }
    std::fs::write(dir.join("site/nccl.toml"), s).unwrap();
    std::fs::write(
        dir.join("gpustack.toml"),
        "[stack]\nname = \"mx\"\n[hardware]\ngpus = [\"h100\"]\n[components]\ncuda = \"*\"\nnccl = \"*\"\npython = \"*\"\n",
    )
    .unwrap();
    dir
}

#[test]
fn matrix_with_a_limit_is_bounded_by_the_limit() {
    let dir = big_matrix("matrix-bounded");
    for limit in ["5", "256"] {
        // 256 MiB of address space and 2 s of CPU time (`ulimit -t`: the kernel ends the
        // process past it, however loaded the machine is).
        let cmd = format!(
            "ulimit -v 262144 && ulimit -t 2 && exec {} matrix --catalog site --format github --limit {limit}",
            bin()
        );
        let start = std::time::Instant::now();
        let o = Command::new("sh")
            .args(["-c", &cmd])
            .current_dir(&dir)
            .output()
            .unwrap();
        let took = start.elapsed();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "--limit {limit}: {err}");
        let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(
            rows.as_array().unwrap().len(),
            limit.parse::<usize>().unwrap()
        );
        assert_eq!(rows[0]["nccl"], "2.40.999", "best first");
        assert!(err.contains("more exist"), "{err}");
        // Wall-clock time only guards against a hang on a loaded machine.
        assert!(took.as_secs_f64() < 30.0, "--limit {limit} took {took:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Peak resident memory of `gpustack matrix ARGS` in `dir` (`/usr/bin/time -f %M`, in
/// KiB), with its standard output; `None` without `/usr/bin/time`.
fn matrix_peak(dir: &Path, args: &[&str]) -> Option<(u64, Vec<u8>)> {
    let time = Path::new("/usr/bin/time");
    if !time.is_file() {
        return None;
    }
    let o = Command::new(time)
        .args(["-f", "peak-kib=%M", bin(), "matrix", "--catalog", "site"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
    let peak = err
        .lines()
        .find_map(|l| l.strip_prefix("peak-kib="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak memory in {err}"));
    Some((peak, o.stdout))
}

/// Without `--limit`, every row of the 1,000-release overlay (208,410 of them) is written
/// while the peak resident memory stays under 256 MiB, and within 64 MiB of a 1,000-row
/// matrix's: rows are streamed, never all held. (Before, 232 MiB against 31 MiB for this
/// matrix in a debug build, and 7.3 GB for a wider one.) Without `/usr/bin/time` the test
/// says so and checks nothing.
#[test]
#[allow(clippy::print_stderr)] // the loud skip notice is the point
fn matrix_without_a_limit_streams_in_bounded_memory() {
    let dir = big_matrix("matrix-streams");
    let Some((small, _)) = matrix_peak(&dir, &["--limit", "1000"]) else {
        eprintln!("SKIPPED matrix_without_a_limit_streams_in_bounded_memory: no /usr/bin/time to measure peak memory");
        return;
    };
    for format in ["github", "json"] {
        let (peak, stdout) = matrix_peak(&dir, &["--format", format]).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
        let rows = if format == "json" {
            assert_eq!(v["total"], 208_410);
            assert_eq!(v["truncated"], false);
            &v["rows"]
        } else {
            &v
        };
        let rows = rows.as_array().unwrap();
        assert_eq!(rows.len(), 208_410, "{format}");
        assert_eq!(rows[0]["nccl"], "2.40.999", "{format}: best first");
        assert!(peak < 256 * 1024, "{format}: peak {peak} KiB");
        assert!(
            peak < small + 64 * 1024,
            "{format}: peak {peak} KiB, {small} KiB for 1,000 rows"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn matrix_into_a_closed_pipe_ends_quietly() {
    let dir = big_matrix("matrix-pipe");
    // 8,284 rows, about 800 KB: more than a pipe holds.
    std::fs::write(
        dir.join("gpustack.toml"),
        "[stack]\nname = \"mx\"\n[hardware]\ngpus = [\"h100\"]\n[components]\ntorch = \"*\"\nnccl = \"*\"\n",
    )
    .unwrap();
    for format in ["json", "github"] {
        let mut child = Command::new(bin())
            .args(["matrix", "--catalog", "site", "--format", format])
            .current_dir(&dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // `| head -c 1`: read a byte, then close the pipe.
        let mut first = [0u8; 1];
        std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{format}: {err}");
        assert!(!err.contains("panicked"), "{format}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------
// Output

/// The spans of `line` outside code spans (CommonMark: a run of n backticks opens a span
/// that the next run of exactly n closes).
fn outside_code(line: &str) -> String {
    let b: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == '`' && (i == 0 || b[i - 1] != '\\') {
            let n = b[i..].iter().take_while(|c| **c == '`').count();
            let mut j = i + n;
            let mut closed = None;
            while j < b.len() {
                if b[j] == '`' {
                    let m = b[j..].iter().take_while(|c| **c == '`').count();
                    if m == n {
                        closed = Some(j + m);
                        break;
                    }
                    j += m;
                } else {
                    j += 1;
                }
            }
            if let Some(end) = closed {
                out.push_str(" CODE ");
                i = end;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

#[test]
fn diff_markdown_escapes_lock_values() {
    let dir = tempdir("markdown");
    let old = std::fs::read_to_string(lockfile("h100-ib-train-serve")).unwrap();
    let at = old.find("key = \"NCCL_IB_DISABLE\"").unwrap();
    let v = at + old[at..].find("value = \"0\"").unwrap();
    let hostile = r#"value = "</table><h1>pwned</h1><!-- `x` | y [z](http://e) \u001b[31m""#;
    let new = format!(
        "{}{hostile}{}",
        &old[..v],
        &old[v + "value = \"0\"".len()..]
    );
    std::fs::write(dir.join("old.lock"), &old).unwrap();
    std::fs::write(dir.join("new.lock"), &new).unwrap();
    let out = run_in(
        &dir,
        &["diff", "old.lock", "new.lock", "--format", "markdown"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.contains('\u{1b}'));
    let mut saw = false;
    for line in out.stdout.lines() {
        let text = outside_code(line);
        // Outside code spans, only gpustack's own tags, and no unescaped `<`, `[` or `|`
        // beyond the table's own.
        let own = ["<details>", "</details>", "<summary>", "</summary>"];
        let mut rest = text.clone();
        for t in own {
            rest = rest.replace(t, "");
        }
        let unescaped = |c: char| {
            let v: Vec<char> = rest.chars().collect();
            (0..v.len())
                .filter(|&i| v[i] == c && (i == 0 || v[i - 1] != '\\'))
                .count()
        };
        assert_eq!(unescaped('<'), 0, "{line}");
        assert_eq!(unescaped('['), 0, "{line}");
        if line.contains("NCCL\\_IB\\_DISABLE") {
            saw = true;
            assert_eq!(unescaped('|'), 6, "five cells: {line}");
        }
    }
    assert!(saw, "{}", out.stdout);
    // The terminal report shows the escape sequence as text.
    let out = run_in(&dir, &["diff", "old.lock", "new.lock"]);
    assert!(!out.stdout.contains('\u{1b}'), "{}", out.stdout);
    assert!(out.stdout.contains("\\u{1b}[31m"), "{}", out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn terminal_output_never_carries_control_characters() {
    let dir = tempdir("ansi");
    // From a catalog source: refused at load, and the message shows it escaped.
    std::fs::create_dir(dir.join("site")).unwrap();
    std::fs::write(
        dir.join("site/env.toml"),
        "family = \"env\"\n\n[[env]]\nfabric = \"all\"\nname = \"NCCL_DEBUG\"\nvalue = \"WARN\"\nsource = \"runbook \\u001b]0;owned\\u0007\\u001b[2J\"\n",
    )
    .unwrap();
    let out = run_in(&dir, &["catalog", "show", "env", "--catalog", "site"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("`source` holds control characters"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains('\u{1b}') && !out.stderr.contains('\u{7}'));
    // From a lock edited by hand: `why` shows it escaped.
    let lock = std::fs::read_to_string(lockfile("a100-pytorch")).unwrap();
    let edited = lock.replacen("source = \"", "source = \"\\u001b[2J", 1);
    assert_ne!(edited, lock);
    std::fs::write(dir.join("gpustack.lock"), edited).unwrap();
    for c in ["driver", "cuda", "torch", "python", "nccl", "cudnn"] {
        let out = run_in(&dir, &["why", c]);
        assert!(!out.stdout.contains('\u{1b}'), "why {c}: {}", out.stdout);
        assert!(!out.stderr.contains('\u{1b}'), "why {c}: {}", out.stderr);
    }
    // A file name with a newline and an escape cannot forge a line of output.
    let out = run_in(
        &dir,
        &["lock", "--spec", "evil\n\u{1b}[2Jerror: forged.toml"],
    );
    assert_eq!(out.code, 2);
    assert_eq!(
        out.stderr
            .lines()
            .filter(|l| l.starts_with("error:"))
            .count(),
        1,
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains('\u{1b}'));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn overlay_env_names_come_from_the_allow_list() {
    let dir = tempdir("env-names");
    std::fs::copy(
        root().join("fixtures/specs/a100-pytorch.toml"),
        dir.join("gpustack.toml"),
    )
    .unwrap();
    std::fs::create_dir(dir.join("site")).unwrap();
    for name in [
        "LD_PRELOAD",
        "BASH_ENV",
        "PATH",
        "PYTHONPATH",
        "NCCL_NET_PLUGIN",
    ] {
        std::fs::write(
            dir.join("site/env.toml"),
            format!("family = \"env\"\n\n[[env]]\nfabric = \"all\"\nname = \"{name}\"\nvalue = \"x\"\nsource = \"site\"\n"),
        )
        .unwrap();
        let out = run_in(&dir, &["lock", "--catalog", "site", "--out", "-"]);
        assert_eq!(out.code, 2, "{name}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!(
                "`{name}` is not an environment variable gpustack sets"
            )),
            "{}",
            out.stderr
        );
        assert!(out.stderr.contains("site/env.toml:3"), "{}", out.stderr);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------
// Validation

#[test]
fn lock_refuses_what_gen_would_refuse_all_at_once_with_lines() {
    let dir = tempdir("validate");
    let spec = r#"[stack]
name = "demo"
[hardware]
gpus = ["h100"]
[components]
torch = "*"
[cluster]
fabric = "infiniband"
gpus_per_node = 4
[serve]
model = "/models/a,b"
tensor_parallel = 8
[slurm]
partition = "-p"
time = "24:60:00"
[storage]
datasets = "lustre:/data,x"
[k8s]
namespace = "kube-system"
"#;
    std::fs::write(dir.join("gpustack.toml"), spec).unwrap();
    let out = run_in(&dir, &["lock"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let expect = [
        ("`[cluster]` needs `nodes`", 7),
        ("`[serve]` runs vLLM, but `[components]` has no `vllm`", 10),
        (
            "`tensor_parallel = 8` is more than the 4 GPUs of a node",
            12,
        ),
        ("model path `/models/a,b` cannot be mounted by pyxis", 11),
        ("invalid partition `-p`", 14),
        ("invalid time limit `24:60:00`", 15),
        (
            "`[storage].datasets` path `/data,x` cannot be mounted by pyxis",
            17,
        ),
        ("namespace `kube-system` is a system namespace", 19),
    ];
    for (msg, line) in expect {
        let at = out
            .stderr
            .find(msg)
            .unwrap_or_else(|| panic!("missing `{msg}` in\n{}", out.stderr));
        let rest = &out.stderr[at..];
        assert!(
            rest.contains(&format!("--> gpustack.toml:{line}:")),
            "`{msg}` not at line {line}:\n{}",
            out.stderr
        );
    }
    assert!(!dir.join("gpustack.lock").exists());
    // Zero is no limit in Slurm: only written out.
    for (time, code) in [
        ("0", 2),
        ("00:00:00", 2),
        ("UNLIMITED", 0),
        ("2-00:00:00", 0),
    ] {
        std::fs::write(
            dir.join("gpustack.toml"),
            format!("[stack]\nname = \"demo\"\n[hardware]\ngpus = [\"h100\"]\n[components]\ntorch = \"*\"\n[slurm]\npartition = \"gpu\"\ntime = \"{time}\"\n"),
        )
        .unwrap();
        let out = run_in(&dir, &["lock", "--out", "-"]);
        assert_eq!(out.code, code, "time = {time}: {}", out.stderr);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lock_checks_the_targets_the_spec_configures() {
    let dir = tempdir("configured");
    let k8s_only = "[stack]\nname = \"demo\"\n[hardware]\ngpus = [\"h100\"]\n[components]\nvllm = \"*\"\n[serve]\nmodel = \"/models/llama\"\n[storage]\nmodels = \"pvc:models\"\n[k8s]\nnamespace = \"ml\"\nversion = \"1.30\"\n";
    std::fs::write(dir.join("gpustack.toml"), k8s_only).unwrap();
    // Kubernetes alone: a claim is fine, Slurm (not configured) is not asked.
    assert_eq!(run_in(&dir, &["lock"]).code, 0);
    assert_eq!(run_in(&dir, &["gen", "k8s"]).code, 0);
    // No target table: every target is configured by default, and Slurm, which cannot
    // mount the claim, is the one `gen all` skips (with why) rather than a refused lock;
    // `gen slurm` still says why it cannot.
    let all = k8s_only.split("[k8s]").next().unwrap();
    std::fs::write(dir.join("gpustack.toml"), all).unwrap();
    let out = run_in(&dir, &["lock"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let gen = run_in(&dir, &["gen", "all"]);
    assert_eq!(gen.code, 0, "{}", gen.stderr);
    assert!(gen.stderr.contains("skipped slurm: "), "{}", gen.stderr);
    let out = run_in(&dir, &["gen", "slurm"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("Slurm jobs cannot mount it"),
        "{}",
        out.stderr
    );
    // With a `[slurm]` table, Slurm is asked for: the lock is refused at once.
    std::fs::write(
        dir.join("gpustack.toml"),
        format!("{all}[slurm]\npartition = \"gpu\"\n"),
    )
    .unwrap();
    let out = run_in(&dir, &["lock", "--out", "-"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("Slurm jobs cannot mount it"),
        "{}",
        out.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}
