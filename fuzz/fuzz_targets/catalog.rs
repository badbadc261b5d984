#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gpustack::fuzzing::catalog(data));
