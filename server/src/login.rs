//! Who may log in, and how a login that fails is answered: SCRAM-SHA-256 (SCRAM-SHA-256-PLUS,
//! bound to the TLS certificate, on TLS connections) against the bootstrap superuser's
//! password (the server's `--user` and `--password`) or a role's stored verifier
//! (`CREATE ROLE ... LOGIN PASSWORD`), plaintext refused when TLS is required, connection
//! slots (`max_connections`), and failed logins answered alike, logged and slowed per
//! address.
//!
//! After the password, as in PostgreSQL: a role without LOGIN is refused (28000), one over
//! its `CONNECTION LIMIT` too (53300), and one without CONNECT on the database (42501). A
//! password past its role's `VALID UNTIL` fails like a wrong one.
//!
//! An unknown user is taken through the whole SCRAM exchange with a made-up salt and key, so
//! it fails where a wrong password fails, with the same message (28P01): neither the answer
//! nor the step at which it comes tells an unknown user from a wrong password. A database that
//! does not exist is reported (3D000) for any user, known or not.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::Sink;
use pgwire::api::auth::mechanism::AuthMechanismFactory;
use pgwire::api::auth::sasl::scram::{gen_salted_password, ScramAuth, ScramSecret};
use pgwire::api::auth::sasl::SaslMechanisms;
use pgwire::api::auth::{
    AuthDriver, AuthOutcome, AuthSource, DefaultServerParameterProvider, LoginInfo, Password,
    ServerParameterProvider, StartupHandler,
};
use pgwire::api::{ClientInfo, ConnectionManager, RandomPidSecretKeyGenerator};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};

use crate::connection_slots::{ConnectionSlots, Slot};
use crate::log_limit;
use crate::login_throttle::LoginThrottle;

pub const SCRAM_ITERATIONS: usize = 4096;

/// The database: there is one.
pub const DATABASE: &str = "ledger";

/// How connections log in; one for the server.
pub struct Logins {
    user: String,
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
    /// The catalog's roles, and how many sessions each has.
    shared: Option<Arc<crate::session::Shared>>,
}

/// What `Logins::new` takes.
pub struct LoginConfig {
    pub user: String,
    pub password: String,
    pub tls_certificate: Option<Vec<u8>>,
    pub tls_required: bool,
    pub max_connections: usize,
    /// The roles are the catalog's (`None`: the bootstrap superuser alone, for tests).
    pub shared: Option<Arc<crate::session::Shared>>,
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
            shared: config.shared,
        })
    }

    fn catalog(&self) -> Option<Arc<plan::Catalog>> {
        self.shared.as_ref().map(|s| s.executor.catalog())
    }

    fn is_superuser(&self, user: &str) -> bool {
        user == self.user
            || self.catalog().is_some_and(|c| {
                c.authorization
                    .role(user)
                    .is_some_and(|r| r.attributes.superuser)
            })
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
    /// database that does not exist is said so. A role refused after its password
    /// (`authorize`) hears why and is not counted as a failed attempt.
    pub fn failed(&self, peer: SocketAddr, user: &str, error: PgWireError) -> ErrorInfo {
        let error = match error {
            PgWireError::UserError(info)
                if matches!(info.code.as_str(), "28000" | "53300" | "42501") =>
            {
                log_limit::client_fault(&format!(
                    "login refused for user \"{user}\" from {peer}: {}",
                    info.message
                ));
                return *info;
            }
            other => other,
        };
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

    /// After the password: whether `user` may start a session, as PostgreSQL decides it.
    fn authorize(&self, user: &str) -> Result<(), Box<ErrorInfo>> {
        if user == self.user {
            return Ok(());
        }
        let (Some(catalog), Some(shared)) = (self.catalog(), &self.shared) else {
            return Ok(());
        };
        let auth = &catalog.authorization;
        let refuse = |code: &str, message: String| Err(Box::new(fatal(code, message)));
        let Some(role) = auth.role(user) else {
            return refuse("28000", format!("role \"{user}\" does not exist"));
        };
        if !role.attributes.login {
            return refuse(
                "28000",
                format!("role \"{user}\" is not permitted to log in"),
            );
        }
        let limit = role.attributes.connection_limit;
        if limit >= 0
            && !role.attributes.superuser
            && shared.activity.sessions_of(user) >= limit as usize
        {
            return refuse("53300", format!("too many connections for role \"{user}\""));
        }
        let (held, _) = auth.held(role.oid, &plan::ObjectId::Database);
        if !held.contains(plan::Privileges::CONNECT) {
            let mut refusal = fatal(
                "42501",
                format!("permission denied for database \"{DATABASE}\""),
            );
            refusal.detail = Some("User does not have CONNECT privilege.".into());
            return Err(Box::new(refusal));
        }
        Ok(())
    }

    /// A login by password for the console (`POST /api/login`): the same roles, passwords,
    /// attributes and slowing of failures as a PostgreSQL login; the refusal's message (a
    /// wrong password and an unknown user alike).
    pub async fn password_login(
        self: &Arc<Self>,
        peer: SocketAddr,
        user: &str,
        password: &str,
    ) -> Result<(), String> {
        let wait = self.wait_before_login(peer);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        if !self.password_matches(user, password) {
            let failures = self.throttle.failed(peer.ip());
            log_limit::client_fault(&format!(
                "console login failed for user \"{user}\" from {peer} ({failures} recent failures from this address)"
            ));
            return Err(format!(
                "password authentication failed for user \"{user}\""
            ));
        }
        self.authorize(user).map_err(|refusal| refusal.message)?;
        self.succeeded(peer);
        Ok(())
    }

    /// Whether `password` is `user`'s: the bootstrap superuser's, or one whose SCRAM
    /// verifier the role's stored one is (while it is valid).
    fn password_matches(self: &Arc<Self>, user: &str, password: &str) -> bool {
        let secret = Credentials {
            logins: self.clone(),
        }
        .secret(user);
        match secret {
            ScramSecret::SaltedPassword {
                salt,
                salted_password,
            } => {
                let given = gen_salted_password(password, &salt, SCRAM_ITERATIONS);
                constant_time_eq(&given, &salted_password)
            }
            ScramSecret::Verifier {
                salt,
                iterations,
                stored_key,
                server_key,
            } => {
                let given = plan::scram::ScramVerifier::derive(password, &salt, iterations as u32);
                constant_time_eq(&given.stored_key, &stored_key)
                    && constant_time_eq(&given.server_key, &server_key)
            }
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

    /// The startup handler for one connection: SCRAM (over TLS also SCRAM-SHA-256-PLUS),
    /// then `authorize`.
    pub fn startup_handler(
        self: &Arc<Self>,
        secure: bool,
        connections: Arc<ConnectionManager>,
        pids: Arc<RandomPidSecretKeyGenerator>,
    ) -> RoleStartup {
        let mut scram = ScramAuth::new(Arc::new(Credentials {
            logins: self.clone(),
        }));
        scram.set_iterations(SCRAM_ITERATIONS);
        if let (true, Some(pem)) = (secure, &self.tls_certificate) {
            // The certificate was loaded by the TLS acceptor already; it parses.
            let _ = scram.configure_certificate(pem);
        }
        let mut defaults = DefaultServerParameterProvider::default();
        defaults.server_version = "15.0".to_owned();
        defaults.time_zone = "UTC".to_owned();
        defaults.date_style = "ISO, MDY".to_owned();
        defaults.search_path = "\"$user\", public".to_owned();
        let parameters = RoleParameters {
            defaults,
            logins: self.clone(),
        };
        RoleStartup {
            driver: AuthDriver::new(Arc::new(parameters))
                .with_connection_manager(connections)
                .with_pid_secret_key_generator(pids),
            mechanisms: SaslMechanisms::new(vec![Arc::new(scram)]),
            logins: self.clone(),
        }
    }
}

/// pgwire's SASL startup with `Logins::authorize` between the verified password and the
/// session's start (AuthenticationOk), where pgwire leaves the choice to refuse.
pub struct RoleStartup {
    driver: AuthDriver<Arc<RoleParameters>>,
    mechanisms: SaslMechanisms,
    logins: Arc<Logins>,
}

/// The parameters a session starts with (ParameterStatus), `is_superuser` and
/// `session_authorization` the logged-in role's (psql's prompt shows `#` for a superuser).
pub struct RoleParameters {
    defaults: DefaultServerParameterProvider,
    logins: Arc<Logins>,
}

impl ServerParameterProvider for RoleParameters {
    fn server_parameters<C: ClientInfo>(&self, client: &C) -> Option<HashMap<String, String>> {
        let mut parameters = self.defaults.server_parameters(client)?;
        let user = client.metadata().get("user").cloned().unwrap_or_default();
        let superuser = if self.logins.is_superuser(&user) {
            "on"
        } else {
            "off"
        };
        parameters.insert("is_superuser".to_owned(), superuser.to_owned());
        parameters.insert("session_authorization".to_owned(), user);
        Some(parameters)
    }
}

impl RoleStartup {
    async fn finish<C>(&self, client: &mut C, outcome: AuthOutcome) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: std::fmt::Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match outcome {
            AuthOutcome::InProgress => Ok(()),
            AuthOutcome::Authenticated { final_message, .. } => {
                let user = client.metadata().get("user").cloned().unwrap_or_default();
                self.logins
                    .authorize(&user)
                    .map_err(PgWireError::UserError)?;
                self.driver
                    .complete_authentication(client, final_message)
                    .await
            }
        }
    }
}

#[async_trait]
impl StartupHandler for RoleStartup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: std::fmt::Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match message {
            PgWireFrontendMessage::Startup(ref startup) => {
                pgwire::api::auth::protocol_negotiation(client, startup).await?;
                pgwire::api::auth::save_startup_parameters_to_metadata(client, startup);
                let mechanism = self.mechanisms.create();
                let outcome = self.driver.begin_authentication(client, mechanism).await?;
                self.finish(client, outcome).await
            }
            PgWireFrontendMessage::PasswordMessageFamily(message) => {
                let outcome = self.driver.advance_authentication(client, message).await?;
                self.finish(client, outcome).await
            }
            _ => Ok(()),
        }
    }
}

#[derive(Debug)]
struct Credentials {
    logins: Arc<Logins>,
}

/// Whether two byte strings are equal, in time that depends only on their lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

impl std::fmt::Debug for Logins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logins").field("user", &self.user).finish()
    }
}

impl Credentials {
    /// A secret no password matches, with the made-up salt of `user`: the exchange goes on
    /// and fails at the proof, as a wrong password does.
    fn made_up(&self, user: &str) -> ScramSecret {
        ScramSecret::Verifier {
            salt: self.logins.mock_salt(user),
            iterations: SCRAM_ITERATIONS,
            stored_key: rand::random::<[u8; 32]>().to_vec(),
            server_key: rand::random::<[u8; 32]>().to_vec(),
        }
    }

    /// What `user` logs in with: the bootstrap superuser's password, a role's stored
    /// verifier while it is valid, or nothing that matches.
    fn secret(&self, user: &str) -> ScramSecret {
        let logins = &self.logins;
        if user == logins.user {
            return ScramSecret::SaltedPassword {
                salt: logins.salt.clone(),
                salted_password: logins.salted_password.clone(),
            };
        }
        let Some(catalog) = logins.catalog() else {
            return self.made_up(user);
        };
        let Some(role) = catalog.authorization.role(user) else {
            return self.made_up(user);
        };
        let expired = role
            .valid_until
            .is_some_and(|until| until < crate::session::now_micros());
        let verifier = role
            .password
            .as_deref()
            .and_then(plan::scram::ScramVerifier::parse);
        match verifier {
            Some(v) if !expired => ScramSecret::Verifier {
                salt: v.salt,
                iterations: v.iterations as usize,
                stored_key: v.stored_key,
                server_key: v.server_key,
            },
            _ => self.made_up(user),
        }
    }

    /// The database must be the one there is, for any user, so the answer says nothing
    /// about which users exist.
    fn check_database(&self, login: &LoginInfo) -> PgWireResult<()> {
        let user = login.user().unwrap_or_default();
        let database = login.database().unwrap_or(user);
        if database != DATABASE {
            return Err(PgWireError::UserError(Box::new(fatal(
                "3D000",
                format!("database \"{database}\" does not exist"),
            ))));
        }
        Ok(())
    }
}

#[async_trait]
impl AuthSource for Credentials {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        // SCRAM asks `get_scram_secret`; a password of another kind matches nothing.
        self.check_database(login)?;
        let user = login.user().unwrap_or_default();
        let key = rand::random::<[u8; 32]>().to_vec();
        Ok(Password::new(Some(self.logins.mock_salt(user)), key))
    }

    async fn get_scram_secret(&self, login: &LoginInfo) -> PgWireResult<(ScramSecret, Option<()>)> {
        self.check_database(login)?;
        Ok((self.secret(login.user().unwrap_or_default()), None))
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
            shared: None,
        });
        let a = logins.mock_salt("mallory");
        assert_eq!(a.len(), 16);
        assert_eq!(a, logins.mock_salt("mallory"));
        assert_ne!(a, logins.mock_salt("eve"));
    }
}
