//! Arbitrary text as SQL: parsing and binding answer a result or an error, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hotledger_fuzz::parse_and_bind(data);
});
