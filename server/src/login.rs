//! Who may log in, and how a login that fails is answered: SCRAM-SHA-256 against the
//! server's user (SCRAM-SHA-256-PLUS, bound to the TLS certificate, on TLS connections),
//! plaintext refused when TLS is required, connection slots (`max_connections`), and
//! failed logins answered alike, logged and slowed per address.
//!
//! An unknown user is taken through the whole SCRAM exchange with a made-up salt and key, so
//! it fails where a wrong password fails, with the same message (28P01): neither the answer
//! nor the step at which it comes tells an unknown user from a wrong password. A database that
//! does not exist is reported (3D000) for any user, known or not.

use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pgwire::api::auth::sasl::scram::{gen_salted_password, ScramAuth};
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::{AuthSource, DefaultServerParameterProvider, LoginInfo, Password};
use pgwire::api::{ConnectionManager, RandomPidSecretKeyGenerator};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};

use crate::connection_slots::{ConnectionSlots, Slot};
use crate::log_limit;
use crate::login_throttle::LoginThrottle;

pub const SCRAM_ITERATIONS: usize = 4096;

/// How connections log in; one for the server.
pub struct Logins {
    user: String,
    database: String,
    /// The salted password (SCRAM's SaltedPassword) and its salt, computed once at start.
    salt: Vec<u8>,
    salted_password: Vec<u8>,
    /// A secret of this process, from which unknown users' made-up salts come.
    mock_key: u64,
    /// The server's certificate chain (PEM), for channel binding on TLS connections.
    tls_certificate: Option<Vec<u8>>,
    tls_required: bool,
    slots: Arc<ConnectionSlots>,
    throttle: LoginThrottle,
}

/// What `Logins::new` takes.
pub struct LoginConfig {
    pub user: String,
    pub password: String,
    pub tls_certificate: Option<Vec<u8>>,
    pub tls_required: bool,
    pub max_connections: usize,
}

/// A refusal: the FATAL ErrorResponse to send before closing.
pub fn fatal(code: &str, message: String) -> ErrorInfo {
    ErrorInfo::new("FATAL".to_owned(), code.to_owned(), message)
}

impl Logins {
    pub fn new(config: LoginConfig) -> Arc<Logins> {
        let salt = rand::random::<[u8; 16]>().to_vec();
        let salted_password = gen_salted_password(&config.password, &salt, SCRAM_ITERATIONS);
        Arc::new(Logins {
            database: config.user.clone(),
            user: config.user,
            salt,
            salted_password,
            mock_key: rand::random(),
            tls_certificate: config.tls_certificate,
            tls_required: config.tls_required,
            slots: ConnectionSlots::new(
                config.max_connections,
                crate::connection_slots::SUPERUSER_RESERVED,
            ),
            throttle: LoginThrottle::default(),
        })
    }

    fn is_superuser(&self, user: &str) -> bool {
        user == self.user
    }

    /// How long a connection from `peer` waits before its startup message is served.
    pub fn wait_before_login(&self, peer: SocketAddr) -> Duration {
        self.throttle.wait_for(peer.ip())
    }

    /// Counts a connection just accepted (`max_connections`).
    pub fn accept(&self) -> Slot {
        self.slots.accept()
    }

    /// Admits a connection holding `slot` that sent its startup message (as `user`, over
    /// TLS or not), or says how it is refused.
    pub fn admit(
        &self,
        slot: &Slot,
        peer: SocketAddr,
        user: &str,
        database: &str,
        secure: bool,
    ) -> Result<(), Box<ErrorInfo>> {
        if self.tls_required && !secure {
            log_limit::client_fault(&format!(
                "refused a plaintext connection from {peer} (TLS is required)"
            ));
            return Err(Box::new(fatal(
                "28000",
                format!(
                    "no encryption: this server requires TLS (user \"{user}\", database \"{database}\"); connect with sslmode=require"
                ),
            )));
        }
        slot.admit(self.is_superuser(user))
            .map_err(|why| Box::new(fatal("53300", why.to_owned())))
    }

    /// A login that failed with `error`: logged, counted against the address, and answered
    /// alike whatever failed (an unknown user, a wrong password, a malformed proof); a
    /// database that does not exist is said so.
    pub fn failed(&self, peer: SocketAddr, user: &str, error: PgWireError) -> ErrorInfo {
        let failures = self.throttle.failed(peer.ip());
        log_limit::client_fault(&format!(
            "login failed for user \"{user}\" from {peer} ({failures} recent failures from this address): {error}"
        ));
        match error {
            PgWireError::UserError(info) if info.code == "3D000" => *info,
            _ => fatal(
                "28P01",
                format!("password authentication failed for user \"{user}\""),
            ),
        }
    }

    /// A login from `peer` succeeded: its address is cleared.
    pub fn succeeded(&self, peer: SocketAddr) {
        self.throttle.succeeded(peer.ip());
    }

    /// A made-up salt for an unknown user: the same for the same name while the server
    /// runs, so asking twice does not tell it apart from a real one.
    fn mock_salt(&self, user: &str) -> Vec<u8> {
        let mut salt = Vec::with_capacity(16);
        for half in 0..2u8 {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (self.mock_key, half, user).hash(&mut h);
            salt.extend_from_slice(&h.finish().to_be_bytes());
        }
        salt
    }

    /// The SCRAM handler for one connection; over TLS it also offers SCRAM-SHA-256-PLUS.
    pub fn startup_handler(
        self: &Arc<Self>,
        secure: bool,
        connections: Arc<ConnectionManager>,
        pids: Arc<RandomPidSecretKeyGenerator>,
    ) -> SASLAuthStartupHandler<DefaultServerParameterProvider> {
        let mut scram = ScramAuth::new(Arc::new(Credentials {
            logins: self.clone(),
        }));
        scram.set_iterations(SCRAM_ITERATIONS);
        if let (true, Some(pem)) = (secure, &self.tls_certificate) {
            // The certificate was loaded by the TLS acceptor already; it parses.
            let _ = scram.configure_certificate(pem);
        }
        let mut parameters = DefaultServerParameterProvider::default();
        parameters.server_version = "15.0".to_owned();
        parameters.time_zone = "UTC".to_owned();
        parameters.date_style = "ISO, MDY".to_owned();
        parameters.search_path = "\"$user\", public".to_owned();
        SASLAuthStartupHandler::new(Arc::new(parameters))
            .with_scram(scram)
            .with_connection_manager(connections)
            .with_pid_secret_key_generator(pids)
    }
}

#[derive(Debug)]
struct Credentials {
    logins: Arc<Logins>,
}

impl std::fmt::Debug for Logins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logins").field("user", &self.user).finish()
    }
}

#[async_trait]
impl AuthSource for Credentials {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        let logins = &self.logins;
        let user = login.user().unwrap_or_default();
        // Checked first, for any user, so the answer says nothing about which users exist.
        let database = login.database().unwrap_or(user);
        if database != logins.database {
            return Err(PgWireError::UserError(Box::new(fatal(
                "3D000",
                format!("database \"{database}\" does not exist"),
            ))));
        }
        if user != logins.user {
            // A key no password derives: the exchange goes on and fails at the proof.
            let key = rand::random::<[u8; 32]>().to_vec();
            return Ok(Password::new(Some(logins.mock_salt(user)), key));
        }
        Ok(Password::new(
            Some(logins.salt.clone()),
            logins.salted_password.clone(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_users_get_a_stable_made_up_salt() {
        let logins = Logins::new(LoginConfig {
            user: "ledger".into(),
            password: "secret".into(),
            tls_certificate: None,
            tls_required: false,
            max_connections: 10,
        });
        let a = logins.mock_salt("mallory");
        assert_eq!(a.len(), 16);
        assert_eq!(a, logins.mock_salt("mallory"));
        assert_ne!(a, logins.mock_salt("eve"));
    }
}
