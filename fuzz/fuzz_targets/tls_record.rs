#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| rusty_fuzz_targets::tls_record(data));
