//! Synthetic catalogs of 10× and 100× the stock catalog's versions (`gpustack::synth`):
//! they load, every versioned family grows by the factor, every synthetic entry says it is
//! synthetic, every example spec that locks on the stock catalog locks on them, and the
//! worst-case unsatisfiable request is explained on the 100× catalog as on the stock one.
//! Timings are `benches/scale.rs`'s business; the one bound here only tells an explanation
//! from a runaway search.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use gpustack::synth::{scaled_catalog, version_counts, SOURCE, WORST_CASE_SPEC};
use gpustack::{Catalog, Error};

fn scaled(factor: usize) -> &'static Catalog {
    static X10: OnceLock<Catalog> = OnceLock::new();
    static X100: OnceLock<Catalog> = OnceLock::new();
    let cell = match factor {
        10 => &X10,
        100 => &X100,
        _ => unreachable!("only 10 and 100 are cached"),
    };
    cell.get_or_init(|| Catalog::from_layers(&[scaled_catalog(factor)]).expect("loads"))
}

fn specs() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/specs");
    let mut out: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

/// A synthetic copy has a release part above 9000 (`12.4.1.9003`); no real version does.
fn is_copy(v: &gpustack::Version) -> bool {
    v.parts().iter().any(|p| *p > 9000)
}

#[test]
fn every_versioned_family_grows_by_the_factor_and_copies_say_so() {
    let stock = version_counts(&Catalog::stock().unwrap());
    assert!(stock.iter().all(|(_, n)| *n > 0), "{stock:?}");
    for factor in [10, 100] {
        let cat = scaled(factor);
        let counts = version_counts(cat);
        for ((family, s), (f2, n)) in stock.iter().zip(&counts) {
            assert_eq!(family, f2);
            assert_eq!(*n, factor * s, "{family} at {factor}×");
        }
        // Unversioned families are left as they are.
        let plain = Catalog::stock().unwrap();
        assert_eq!(cat.gpus.len(), plain.gpus.len());
        assert_eq!(cat.targets.len(), plain.targets.len());
        assert_eq!(cat.minor_compat.len(), plain.minor_compat.len());
        // Each entry is synthetic exactly when its version is a copy.
        let marked = |source: &str| source == SOURCE;
        let same = |v: &gpustack::Version, o: &gpustack::catalog::Origin| {
            assert_eq!(is_copy(v), marked(&o.source), "{v}")
        };
        for r in &cat.cuda {
            same(&r.version, &r.origin);
        }
        for r in cat.cudnn.iter().chain(&cat.nccl) {
            same(&r.version, &r.origin);
        }
        for r in &cat.python {
            same(&r.version, &r.origin);
        }
        for t in &cat.torch {
            let copy = is_copy(&t.version);
            assert_eq!(copy, marked(&t.origin.source), "{}", t.full);
            assert_eq!(copy, marked(&t.release_origin.source), "{}", t.full);
            if copy {
                assert!(
                    t.files.is_empty(),
                    "a synthetic wheel has no files: {}",
                    t.full
                );
                // Pins point at copies too, and those exist.
                for pin in [&t.cudnn, &t.nccl].into_iter().flatten() {
                    assert!(is_copy(pin), "{} pins {pin}", t.full);
                }
            }
        }
        for r in &cat.vllm {
            same(&r.version, &r.origin);
            assert_eq!(is_copy(&r.version), is_copy(&r.torch), "{}", r.version);
        }
        for r in &cat.deepspeed {
            same(&r.version, &r.origin);
        }
        for e in &cat.extras {
            same(&e.version, &e.origin);
            assert!(!is_copy(&e.version) || e.files.is_empty());
        }
        for i in &cat.images {
            assert_eq!(is_copy(&i.cuda), marked(&i.origin.source), "{}", i.cuda);
            assert!(!is_copy(&i.cuda) || i.digests.is_empty());
        }
        for p in cat.packages.iter().filter(|p| p.version.is_some()) {
            // Package versions are free text (`4.7.1-4.9.0`): any number above 9000.
            let copy = p.version.as_deref().is_some_and(|v| {
                v.split(|c: char| !c.is_ascii_digit())
                    .any(|n| n.parse::<u64>().is_ok_and(|n| n > 9000))
            });
            assert_eq!(copy, marked(&p.origin.source), "{:?}", p.version);
            assert!(!copy || (p.sha256.is_none() && p.image_digest.is_none()));
        }
        // Driver branches hold both; their source says which versions are synthetic.
        for b in &cat.branches {
            assert!(b.origin.source.starts_with(SOURCE), "{}", b.origin.source);
        }
        assert_eq!(
            cat.drivers.iter().filter(|d| is_copy(&d.version)).count(),
            (factor - 1) * plain.drivers.len()
        );
    }
}

#[test]
fn every_example_spec_that_locks_on_stock_locks_on_the_scaled_catalogs() {
    let stock = Catalog::stock().unwrap();
    let mut locked = 0;
    let mut on_copies = 0;
    for (name, text) in specs() {
        let Ok(base) = gpustack::lock_spec(&stock, &name, &text) else {
            continue;
        };
        locked += 1;
        for factor in [10, 100] {
            let lock = gpustack::lock_spec(scaled(factor), &name, &text)
                .unwrap_or_else(|e| panic!("{name} at {factor}×:\n{e}"));
            // The same components are locked.
            let names =
                |l: &gpustack::Lock| l.components.iter().map(|c| c.name).collect::<Vec<_>>();
            assert_eq!(names(&lock), names(&base), "{name} at {factor}×");
            if factor == 100 && lock.components.iter().any(|c| is_copy(&c.version)) {
                on_copies += 1;
            }
        }
    }
    assert!(locked >= 10, "only {locked} example specs lock on stock");
    // The copies rank first (they sort just above their originals), so most stacks are
    // found among them: the search really runs over the larger catalog.
    assert!(on_copies * 2 > locked, "{on_copies} of {locked} use copies");
}

/// The rules named by an explanation, in order: its structure without the versions.
fn shape(e: &gpustack::Explanation) -> Vec<String> {
    e.causes
        .iter()
        .map(|c| {
            let rules: Vec<&str> = c.groups.iter().map(|(_, v)| v.rule.id()).collect();
            format!(
                "{} primary={} {}",
                c.component.name(),
                c.primary,
                rules.join(",")
            )
        })
        .collect()
}

fn explain(cat: &Catalog) -> (Box<gpustack::Explanation>, Duration) {
    let t = Instant::now();
    let err = gpustack::lock_spec(cat, "gpustack.toml", WORST_CASE_SPEC).unwrap_err();
    let took = t.elapsed();
    match err {
        Error::NoSolution(e) => (e, took),
        other => panic!("not a conflict: {other}"),
    }
}

#[test]
fn the_worst_case_conflict_is_explained_on_the_100x_catalog() {
    let (base, _) = explain(&Catalog::stock().unwrap());
    let (big, took) = explain(scaled(100));
    assert!(!big.causes.is_empty());
    assert!(big.causes[0].primary);
    assert_eq!(shape(&big), shape(&base), "{big}");
    let text = big.to_string();
    assert!(
        text.starts_with("error: no compatible stack for `worst-case-conflict`"),
        "{text}"
    );
    assert!(text.contains("rule `"), "{text}");
    // Generous for a debug build on a loaded machine: a blow-up takes minutes.
    assert!(took < Duration::from_secs(60), "took {took:?}");
}

#[test]
fn the_committed_csv_and_plot_agree() {
    let book = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src");
    let csv = std::fs::read_to_string(book.join("scaling.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("factor,versions,catalog_kib,measurement,runs,min_ms,median_ms")
    );
    // The versions column is the factor times the catalog the figures were measured on,
    // which the performance chapter names; the stock catalog has grown since by the
    // releases imported after the run, never shrunk.
    let stock: usize = version_counts(&Catalog::stock().unwrap())
        .iter()
        .map(|(_, n)| n)
        .sum();
    let measured_on: usize = csv
        .lines()
        .nth(1)
        .and_then(|l| l.split(',').nth(1))
        .and_then(|v| v.parse().ok())
        .expect("a first row");
    assert!(
        measured_on <= stock && stock - measured_on < stock / 10,
        "scaling.csv was measured on a {measured_on}-version catalog, the stock one has {stock}: re-run `cargo bench --bench scale`"
    );
    let stock = measured_on;
    let mut names: Vec<String> = Vec::new();
    let mut factors: Vec<usize> = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 7, "{line}");
        let factor: usize = f[0].parse().unwrap();
        // The versions column is the factor times the stock catalog's.
        assert_eq!(f[1].parse::<usize>().unwrap(), factor * stock, "{line}");
        let (min, median): (f64, f64) = (f[5].parse().unwrap(), f[6].parse().unwrap());
        assert!(0.0 < min && min <= median, "{line}");
        if !factors.contains(&factor) {
            factors.push(factor);
        }
        if !names.iter().any(|n| n == f[3]) {
            names.push(f[3].to_string());
        }
    }
    assert_eq!(factors, [1, 2, 5, 10, 20, 50, 100]);
    assert!(
        names.iter().any(|n| n == "conflict worst-case"),
        "{names:?}"
    );
    // The plot has one line per measurement, with a point per factor.
    let svg = std::fs::read_to_string(book.join("scaling.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    let lines: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("class") == Some("measurement"))
        .collect();
    let plotted: Vec<&str> = lines
        .iter()
        .filter_map(|n| n.attribute("data-name"))
        .collect();
    assert_eq!(plotted, names, "regenerate with scripts/plot-scaling.py");
    for l in &lines {
        let points = l.attribute("points").unwrap().split_whitespace().count();
        assert_eq!(points, factors.len());
    }
}
