//! SCRAM-SHA-256 verifiers as PostgreSQL stores them in `pg_authid.rolpassword`:
//! `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` (base64). A verifier lets
//! the server check a client's proof without holding the password or anything that logs in
//! as the role (RFC 5802: StoredKey is a hash of the ClientKey a proof reveals).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ring::{digest, hmac, pbkdf2};

/// PostgreSQL's default (`scram_iterations` in later releases).
pub const SCRAM_ITERATIONS: u32 = 4096;

const PREFIX: &str = "SCRAM-SHA-256$";

/// A verifier's parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramVerifier {
    pub iterations: u32,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl ScramVerifier {
    /// The verifier of `password` with `salt`: the password normalized by SASLprep as
    /// clients do (kept as given when it does not normalize, as PostgreSQL does).
    pub fn derive(password: &str, salt: &[u8], iterations: u32) -> ScramVerifier {
        let normalized = stringprep::saslprep(password)
            .map(|p| p.into_owned())
            .unwrap_or_else(|_| password.to_owned());
        let mut salted = [0u8; 32];
        let rounds = std::num::NonZeroU32::new(iterations.max(1)).expect("at least one round");
        pbkdf2::derive(
            pbkdf2::PBKDF2_HMAC_SHA256,
            rounds,
            salt,
            normalized.as_bytes(),
            &mut salted,
        );
        let key = hmac::Key::new(hmac::HMAC_SHA256, &salted);
        let client_key = hmac::sign(&key, b"Client Key");
        let server_key = hmac::sign(&key, b"Server Key");
        ScramVerifier {
            iterations,
            salt: salt.to_vec(),
            stored_key: digest::digest(&digest::SHA256, client_key.as_ref())
                .as_ref()
                .to_vec(),
            server_key: server_key.as_ref().to_vec(),
        }
    }

    /// Reads the stored form; None for anything else (an MD5 hash, a plain password).
    pub fn parse(text: &str) -> Option<ScramVerifier> {
        let rest = text.strip_prefix(PREFIX)?;
        let (head, keys) = rest.split_once('$')?;
        let (iterations, salt) = head.split_once(':')?;
        let (stored_key, server_key) = keys.split_once(':')?;
        let verifier = ScramVerifier {
            iterations: iterations.parse().ok().filter(|i| *i > 0)?,
            salt: STANDARD.decode(salt).ok()?,
            stored_key: STANDARD.decode(stored_key).ok()?,
            server_key: STANDARD.decode(server_key).ok()?,
        };
        (verifier.stored_key.len() == 32 && verifier.server_key.len() == 32).then_some(verifier)
    }

    /// The stored form.
    pub fn encode(&self) -> String {
        format!(
            "{PREFIX}{}:{}${}:{}",
            self.iterations,
            STANDARD.encode(&self.salt),
            STANDARD.encode(&self.stored_key),
            STANDARD.encode(&self.server_key)
        )
    }
}

/// What a role's `PASSWORD '...'` stores: a verifier given as one is kept (as
/// PostgreSQL does, so a dump restores its passwords); any other text is a password,
/// of which only a verifier with a fresh random salt is kept. `md5...` hashes are refused
/// by the caller: hotledger logs in by SCRAM only.
pub fn stored_password(given: &str) -> String {
    if ScramVerifier::parse(given).is_some() {
        return given.to_owned();
    }
    let salt: [u8; 16] = rand::random();
    ScramVerifier::derive(given, &salt, SCRAM_ITERATIONS).encode()
}

/// Whether `given` is an MD5 password hash as PostgreSQL writes one (`md5` and 32 hex
/// digits).
pub fn is_md5_hash(given: &str) -> bool {
    given.len() == 35
        && given.starts_with("md5")
        && given[3..].bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PostgreSQL 15's `rolpassword` for the password "secret", read from a real server
    /// (`CREATE ROLE r PASSWORD 'secret'`, then `select rolpassword from pg_authid`).
    #[test]
    fn derives_what_postgresql_stores() {
        let stored = "SCRAM-SHA-256$4096:GMXZU5JjTD97mzlQxX7SIg==$rc3jdrmhpA8eg517svsCJXMR/GFYFLhwQFgzn4CwKP0=:2JiKG0RkFK00/rWRWUat0ue65kRcABFJPTvBJ3s/skk=";
        let parsed = ScramVerifier::parse(stored).expect("a verifier");
        let derived = ScramVerifier::derive("secret", &parsed.salt, parsed.iterations);
        assert_eq!(derived, parsed);
        assert_eq!(derived.encode(), stored);
    }

    #[test]
    fn keeps_a_verifier_and_hashes_anything_else() {
        let stored = stored_password("hunter2");
        let verifier = ScramVerifier::parse(&stored).expect("stored as a verifier");
        assert_eq!(verifier.iterations, SCRAM_ITERATIONS);
        assert_eq!(
            ScramVerifier::derive("hunter2", &verifier.salt, verifier.iterations),
            verifier
        );
        assert_eq!(stored_password(&stored), stored);
        assert_ne!(stored_password("hunter2"), stored, "a fresh salt each time");
        assert!(ScramVerifier::parse("hunter2").is_none());
        assert!(is_md5_hash("md5c4ca4238a0b923820dcc509a6f75849b"));
        assert!(!is_md5_hash("md5 is a hash function"));
    }
}
