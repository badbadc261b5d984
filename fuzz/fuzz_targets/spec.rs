#![no_main]
use std::sync::OnceLock;

static CATALOG: OnceLock<gpustack::Catalog> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let catalog = CATALOG.get_or_init(|| gpustack::Catalog::stock().expect("stock catalog"));
    gpustack::fuzzing::spec(data, catalog);
});
