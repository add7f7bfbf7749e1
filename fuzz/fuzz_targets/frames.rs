//! Arbitrary bytes as a client's stream after the SSL negotiation: whatever the frame checker
//! accepts, pgwire decodes whole, without panicking.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    hotledger_fuzz::frames_then_decoder(data);
});
