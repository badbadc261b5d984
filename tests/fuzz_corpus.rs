//! Replays the fuzz corpora (`fuzz/corpus/<target>/`) and every crash reproducer the fuzzers
//! found (`fuzz/regressions/<target>/`) through the same entry points the fuzz targets call,
//! on stable, in the normal test run: a fixed crash stays fixed.
//!
//! The corpora are seed sets: the fuzzers' working corpora minimized to a set cover of
//! their edges (`scripts/fuzz-corpus.sh`, libFuzzer's `-set_cover_merge=1`), some 500 inputs
//! per target; the working corpora live outside the repository. A debug `cargo test` replays
//! every reproducer and every 4th corpus input; `tests/run.sh` replays all of them in a
//! release build (`GPUSTACK_FUZZ_CORPUS=all`).

mod common;

use common::root;

fn replay(target: &str, run: &dyn Fn(&[u8])) -> usize {
    let all = std::env::var("GPUSTACK_FUZZ_CORPUS").is_ok_and(|v| v == "all");
    let mut n = 0;
    for dir in ["fuzz/corpus", "fuzz/regressions"] {
        let every = if all || dir == "fuzz/regressions" {
            1
        } else {
            4
        };
        let dir = root().join(dir).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        // Counts the inputs present, so a corpus that went missing fails whatever is sampled.
        n += paths.len();
        for p in paths.into_iter().step_by(every) {
            let data = std::fs::read(&p).unwrap();
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&data)));
            assert!(r.is_ok(), "{} panics on {}", target, p.display());
        }
    }
    n
}

#[test]
fn catalog_corpus() {
    assert!(replay("catalog", &gpustack::fuzzing::catalog) >= 500);
}

#[test]
fn spec_corpus() {
    let catalog = gpustack::Catalog::stock().unwrap();
    assert!(replay("spec", &|d| gpustack::fuzzing::spec(d, &catalog)) >= 500);
}

#[test]
fn lock_corpus() {
    assert!(replay("lock", &gpustack::fuzzing::lock) >= 450);
}

#[test]
fn render_corpus() {
    assert!(replay("render", &gpustack::fuzzing::render) >= 600);
}
