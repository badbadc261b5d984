//! Prints in-process timings of each stage (a quick profile aid; `cargo bench` has the
#![allow(clippy::print_stdout, clippy::print_stderr)]
//! recorded figures).
fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let text = std::fs::read_to_string("fixtures/specs/h100-ib-train-serve.toml").unwrap();
    for _ in 0..n {
        let t = std::time::Instant::now();
        let cat = gpustack::Catalog::stock().unwrap();
        let t1 = t.elapsed();
        let t = std::time::Instant::now();
        let lock = gpustack::lock_spec(&cat, "x", &text).unwrap();
        let t2 = t.elapsed();
        let t = std::time::Instant::now();
        let s = lock.to_toml();
        let t3 = t.elapsed();
        eprintln!("catalog {t1:?} solve+lock {t2:?} write {t3:?} {}", s.len());
    }
}
