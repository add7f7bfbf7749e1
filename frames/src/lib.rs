//! `frames`: where each message a PostgreSQL client sends begins and ends, and whether its
//! body is well-formed — checked on the raw bytes before the protocol decoder sees them, so
//! that a malformed, truncated or lying message is refused with a protocol violation (08P01)
//! instead of reaching a decoder that trusts its counts and lengths.
//!
//! It must not decode messages into values, hold connection state beyond the framing phase,
//! or do IO: `Scanner::step` is a pure function of the bytes so far, which is what the fuzz
//! target drives.
//!
//! Key types: `Scanner` (one connection's framing: the startup packet, then typed messages;
//! the first password message is a SASL initial response), `Step` (what the bytes at hand
//! hold), `Refusal` (too large, or malformed and why).
//!
//! Reading order: `scanner.rs`, then `body.rs` (the per-message checks).

mod body;
mod scanner;

pub use scanner::{Refusal, Scanner, Step, SMALL_MESSAGE_LIMIT};
