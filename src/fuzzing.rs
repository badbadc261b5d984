//! Entry points shared by the fuzz targets (`fuzz/fuzz_targets/`) and by the corpus
//! regression test (`tests/fuzz_corpus.rs`): each takes arbitrary bytes, runs one parser or
//! the renderer, and must return (with `Ok` or an `Err`) without panicking, hanging or
//! allocating without bound. Not part of the stable API.

use crate::{Catalog, Lock, Spec};

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// One catalog file, parsed and validated on its own (the base layer), then as an overlay
/// file in a second layer over it.
pub fn catalog(data: &[u8]) {
    let Some(t) = text(data) else { return };
    let file = vec![("catalog/fuzz.toml".to_string(), t.to_string())];
    let _ = Catalog::from_layers(std::slice::from_ref(&file));
    let _ = Catalog::from_layers(&[file, vec![("overlay/fuzz.toml".to_string(), t.to_string())]]);
}

/// A spec against the stock catalog; when it parses, also solve it.
pub fn spec(data: &[u8], catalog: &Catalog) {
    let Some(t) = text(data) else { return };
    if let Ok(spec) = Spec::parse("gpustack.toml", t, catalog) {
        if let Ok(r) = crate::solve(catalog, &spec) {
            let lock = Lock::from_resolution(catalog, &r).expect("a solved resolution locks");
            let again =
                Lock::parse("gpustack.lock", &lock.to_toml()).expect("a written lock parses");
            assert_eq!(again, lock, "a written lock reads back equal");
        }
    }
}

/// A lock; when it parses, it must write back and read back equal.
pub fn lock(data: &[u8]) {
    let Some(t) = text(data) else { return };
    if let Ok(lock) = Lock::parse("gpustack.lock", t) {
        let written = lock.to_toml();
        let again = Lock::parse("gpustack.lock", &written).expect("a written lock parses");
        assert_eq!(again.to_toml(), written, "writing is a fixed point");
    }
}

/// A lock rendered to every target; a render either fails cleanly or yields safe paths.
pub fn render(data: &[u8]) {
    let Some(t) = text(data) else { return };
    let Ok(lock) = Lock::parse("gpustack.lock", t) else {
        return;
    };
    if let Ok(all) = crate::plan::generate_many(&lock, &crate::plan::Target::ALL) {
        for (_, files) in all {
            for f in files {
                assert!(
                    !f.path.is_empty()
                        && !f.path.starts_with('/')
                        && !f.path.split('/').any(|c| c == ".." || c.is_empty()),
                    "unsafe output path {:?}",
                    f.path
                );
            }
        }
    }
}
