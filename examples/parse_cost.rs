//! How long TOML parsing of the embedded catalog takes, alone (profile aid).
#![allow(clippy::print_stdout, clippy::print_stderr)]
fn main() {
    let files: Vec<String> = std::fs::read_dir("catalog")
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    for _ in 0..5 {
        let t = std::time::Instant::now();
        for f in &files {
            let v: toml::Table = toml::from_str(f).unwrap();
            std::hint::black_box(v);
        }
        let a = t.elapsed();
        let t = std::time::Instant::now();
        let c = gpustack::Catalog::stock().unwrap();
        std::hint::black_box(c);
        eprintln!("toml::Table {a:?}  Catalog::stock {:?}", t.elapsed());
    }
}
