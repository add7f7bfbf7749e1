//! The settings a session may SET, SHOW and RESET, with their defaults.

use super::*;

/// Settings a client may SET and SHOW, with their defaults.
pub(super) const SETTINGS: &[(&str, &str)] = &[
    ("application_name", ""),
    ("client_encoding", "UTF8"),
    ("datestyle", "ISO, MDY"),
    ("timezone", "UTC"),
    ("search_path", "\"$user\", public"),
    ("extra_float_digits", "1"),
    ("statement_timeout", "0"),
    ("lock_timeout", "0"),
    ("idle_in_transaction_session_timeout", "0"),
    ("idle_session_timeout", "0"),
    ("default_transaction_isolation", "read committed"),
    ("default_transaction_read_only", "off"),
    ("transaction_read_only", "off"),
    // The server's (`--max-connections`); shown with its value, never SET.
    ("max_connections", "500"),
    ("superuser_reserved_connections", "3"),
    ("standard_conforming_strings", "on"),
    ("client_min_messages", "notice"),
    ("intervalstyle", "postgres"),
    ("synchronous_commit", "on"),
    ("bytea_output", "hex"),
    ("read_consistency", "strong"),
    // SET ROLE: "none", or the role the session runs as (`Session::role`).
    ("role", "none"),
    ("work_mem", "4MB"),
    ("jit", "off"),
    ("row_security", "on"),
    ("max_parallel_workers_per_gather", "0"),
    ("geqo", "on"),
    // What pg_dump's scripts set first; none changes what this server does.
    ("check_function_bodies", "on"),
    ("xmloption", "content"),
    ("default_tablespace", ""),
    ("default_table_access_method", "heap"),
];

/// The server's own settings (`plan::SERVER_SETTINGS`): shown, never changed.
pub(super) fn read_only(key: &str) -> bool {
    plan::SERVER_SETTINGS.iter().any(|(n, _)| *n == key)
}

/// Every setting SHOW knows, with its default: the session's, then the server's.
pub(super) fn known_settings() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    SETTINGS.iter().chain(plan::SERVER_SETTINGS)
}

/// The settings in a startup packet's `options` (what libpq's PGOPTIONS sends):
/// `-c name=value` and `--name=value`, separated by spaces, a backslash escaping the next
/// character.
pub(crate) fn startup_options(options: &str) -> Vec<(String, String)> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = options.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => word.extend(chars.next()),
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    let mut pairs = Vec::new();
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        let setting = match word.as_str() {
            "-c" => words.next(),
            w => w
                .strip_prefix("--")
                .or_else(|| w.strip_prefix("-c"))
                .map(str::to_string),
        };
        if let Some((name, value)) = setting.as_deref().and_then(|s| s.split_once('=')) {
            pairs.push((name.replace('-', "_"), value.to_string()));
        }
    }
    pairs
}

pub(super) fn setting_key(name: &str) -> String {
    name.to_ascii_lowercase()
}

/// A SET a transaction made that outlives it when it commits (SET LOCAL's do not).
#[derive(Clone, Debug)]
pub(super) enum SettingChange {
    /// The setting's value after it (None: back to the default).
    One(String, Option<String>),
    /// RESET ALL.
    All,
}

impl Session {
    /// SET or SET LOCAL (`local`): a SET inside a transaction lasts beyond it only if the
    /// transaction commits, a SET LOCAL only until it ends, as in PostgreSQL; a SET LOCAL
    /// outside one does nothing but warn.
    pub(super) fn set_scoped(
        &mut self,
        name: &str,
        value: Option<&str>,
        local: bool,
    ) -> SqlResult<()> {
        if local && self.transaction.is_none() {
            self.notices.push(SqlError::new(
                ErrorKind::NoActiveTransaction,
                "SET LOCAL can only be used in transaction blocks",
            ));
            return Ok(());
        }
        self.keep_settings_before();
        self.set(name, value)?;
        if !local {
            let key = setting_key(name);
            let now = self.settings.get(&key).cloned();
            if let Some(t) = &mut self.transaction {
                t.settings_made.push(SettingChange::One(key, now));
            }
        }
        Ok(())
    }

    /// Before a transaction's first SET: keeps the settings it began with.
    pub(super) fn keep_settings_before(&mut self) {
        let unkept = self
            .transaction
            .as_ref()
            .is_some_and(|t| t.settings_before.is_none());
        if unkept {
            let settings = self.settings.clone();
            if let Some(t) = &mut self.transaction {
                t.settings_before = Some(settings);
            }
        }
    }

    /// The settings as a transaction leaves them: as they were when it began, then, when it
    /// committed, with the SETs it made (`made`) made again. A transaction that made no SET
    /// (`before` None) leaves them as they are.
    pub(super) fn settle_settings(
        &mut self,
        before: Option<BTreeMap<String, String>>,
        made: &[SettingChange],
        committed: bool,
    ) {
        let Some(before) = before else {
            return;
        };
        self.settings = before;
        if !committed {
            return;
        }
        for change in made {
            match change {
                SettingChange::One(key, Some(value)) => {
                    self.settings.insert(key.clone(), value.clone());
                }
                SettingChange::One(key, None) => {
                    self.settings.remove(key);
                }
                SettingChange::All => self.settings = self.startup_settings.clone(),
            }
        }
    }

    /// SHOW name, SHOW ALL, and the server's `group_commit_stats` and `storage_stats`.
    pub(super) async fn show(&self, name: &str, plan: &Plan) -> SqlResult<StatementResult> {
        let key = setting_key(name);
        if key == "all" {
            let rows = known_settings()
                .filter(|(n, _)| *n != "role")
                .map(|(n, _)| {
                    vec![
                        Value::text(*n),
                        Value::Text(self.setting(n).unwrap_or_default()),
                    ]
                })
                .collect();
            let columns = ["name", "setting"]
                .iter()
                .map(|n| OutputColumn {
                    name: n.to_string(),
                    ty: DataType::Text,
                    table_oid: 0,
                    column_number: 0,
                })
                .collect();
            return Ok(StatementResult::Rows {
                columns,
                rows,
                tag: "SHOW".into(),
            });
        }
        let value = if key == "group_commit_stats" {
            self.group_commit_stats()
        } else if key == "storage_stats" {
            self.storage_stats().await?
        } else {
            self.setting(&key).ok_or_else(|| unknown_setting(name))?
        };
        Ok(StatementResult::Rows {
            columns: plan.output_columns(),
            rows: vec![vec![Value::Text(value)]],
            tag: "SHOW".into(),
        })
    }

    pub(super) fn setting(&self, name: &str) -> Option<String> {
        let key = setting_key(name);
        if key == "transaction_isolation" {
            return Some(match &self.transaction {
                Some(t) => isolation_name(t.isolation).to_string(),
                None => self
                    .setting("default_transaction_isolation")
                    .unwrap_or_default(),
            });
        }
        match key.as_str() {
            "max_connections" => return Some(self.shared.max_connections.to_string()),
            "superuser_reserved_connections" => {
                return Some(crate::connection_slots::SUPERUSER_RESERVED.to_string())
            }
            "transaction_read_only" => {
                return Some(if self.read_only() { "on" } else { "off" }.to_string())
            }
            "is_superuser" => {
                let superuser = self.catalog().authorization.is_superuser(self.role());
                return Some(if superuser { "on" } else { "off" }.to_string());
            }
            "session_authorization" => {
                return Some(self.catalog().authorization.role_name(self.role()))
            }
            _ => {}
        }
        self.settings.get(&key).cloned().or_else(|| {
            known_settings()
                .find(|(n, _)| *n == key)
                .map(|(_, v)| v.to_string())
        })
    }

    /// Whether transactions are read-only unless they say otherwise.
    /// Asked by every write (`refuse_if_read_only`): a lookup, no setting built.
    pub(super) fn default_read_only(&self) -> bool {
        self.settings
            .get("default_transaction_read_only")
            .is_some_and(|v| v == "on")
    }

    pub(super) fn default_isolation(&self) -> Isolation {
        match self
            .setting("default_transaction_isolation")
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("serializable") | Some("repeatable read") => Isolation::Serializable,
            _ => Isolation::ReadCommitted,
        }
    }

    pub(super) fn set(&mut self, name: &str, value: Option<&str>) -> SqlResult<()> {
        let key = setting_key(name);
        if key == "transaction_isolation" {
            if let (Some(t), Some(v)) = (&mut self.transaction, value) {
                t.isolation = if v.eq_ignore_ascii_case("serializable")
                    || v.eq_ignore_ascii_case("repeatable read")
                {
                    Isolation::Serializable
                } else {
                    Isolation::ReadCommitted
                };
            }
            return Ok(());
        }
        if key == "transaction_read_only" {
            // As SET TRANSACTION READ ONLY / READ WRITE; outside a transaction, nothing to set.
            if let (Some(t), Some(v)) = (&mut self.transaction, value) {
                t.set_read_only(boolean(&key, v)?)?;
            }
            return Ok(());
        }
        if read_only(&key)
            || matches!(
                key.as_str(),
                "max_connections" | "superuser_reserved_connections"
            )
        {
            return Err(SqlError::new(
                ErrorKind::CannotConnectNow,
                format!("parameter \"{key}\" cannot be changed"),
            ));
        }
        if !SETTINGS.iter().any(|(n, _)| *n == key) && !key.contains('.') {
            return Err(unknown_setting(name));
        }
        if key == "role" {
            return self.set_role(value);
        }
        match (key.as_str(), value) {
            ("client_encoding", Some(v))
                if !matches!(
                    v.to_ascii_uppercase().as_str(),
                    "UTF8" | "UTF-8" | "UNICODE"
                ) =>
            {
                return Err(SqlError::feature_not_supported(format!(
                    "client_encoding {v}: only UTF8"
                )));
            }
            ("read_consistency", Some(v)) if !matches!(v, "strong" | "weak") => {
                return Err(SqlError::new(
                    ErrorKind::InvalidParameterValue,
                    format!("invalid value for parameter \"read_consistency\": \"{v}\""),
                ));
            }
            _ => {}
        }
        let value = match value {
            Some(v) if key == "default_transaction_read_only" => {
                Some(if boolean(&key, v)? { "on" } else { "off" }.to_string())
            }
            Some(v) if super::timeouts::TIMEOUTS.contains(&key.as_str()) => Some(
                super::timeouts::shown(super::timeouts::milliseconds(&key, v)?),
            ),
            other => other.map(str::to_string),
        };
        match value {
            Some(v) => self.settings.insert(key, v),
            None => self.settings.remove(&key),
        };
        Ok(())
    }
}

impl Session {
    /// `SET ROLE name` (a role the session's role is a member of, or any for a
    /// superuser), or `SET ROLE NONE` / `RESET ROLE` (None).
    fn set_role(&mut self, value: Option<&str>) -> SqlResult<()> {
        let name = match value {
            None => None,
            Some(v) if v.eq_ignore_ascii_case("none") => None,
            Some(v) => Some(v.to_string()),
        };
        let Some(name) = name else {
            self.settings.remove("role");
            return Ok(());
        };
        let catalog = self.catalog();
        let auth = &catalog.authorization;
        let target = auth.role(&name).ok_or_else(|| {
            SqlError::new(
                ErrorKind::InvalidParameterValue,
                format!("role \"{name}\" does not exist"),
            )
        })?;
        let session_role = self.bind_context().session_role;
        if !auth.is_superuser(session_role) && !auth.member_of(session_role).contains(&target.oid) {
            return Err(SqlError::new(
                ErrorKind::InsufficientPrivilege,
                format!("permission denied to set role \"{name}\""),
            ));
        }
        self.settings.insert("role".into(), name);
        Ok(())
    }

    /// An `ALTER ROLE ... SET name = value` must name a setting a session may SET, with a
    /// value SET would take: checked here as SET checks it (and then undone), since the
    /// role's sessions apply it as they start.
    pub(super) fn check_role_change(&mut self, plan: &plan::RolePlan) -> SqlResult<()> {
        let plan::RolePlan::AlterRole {
            change: plan::RoleChange::Setting(name, value),
            ..
        } = plan
        else {
            return Ok(());
        };
        if name == "role" {
            return Err(SqlError::feature_not_supported(
                "role as a role's setting (its sessions SET ROLE themselves)",
            ));
        }
        if matches!(
            name.as_str(),
            "transaction_isolation" | "transaction_read_only"
        ) {
            return Err(SqlError::feature_not_supported(format!(
                "{name} as a role's setting (set default_{} instead)",
                name.trim_start_matches("transaction_")
            )));
        }
        if !SETTINGS.iter().any(|(n, _)| n == name) {
            return Err(unknown_setting(name));
        }
        let saved = self.settings.clone();
        let checked = self.set(name, value.as_deref());
        self.settings = saved;
        checked
    }
}

/// A Boolean setting's value as PostgreSQL reads one (on/off, true/false, yes/no, 1/0).
fn boolean(key: &str, value: &str) -> SqlResult<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" | "t" | "y" => Ok(true),
        "off" | "false" | "no" | "0" | "f" | "n" => Ok(false),
        _ => Err(SqlError::new(
            ErrorKind::InvalidParameterValue,
            format!("parameter \"{key}\" requires a Boolean value"),
        )),
    }
}

pub(super) fn unknown_setting(name: &str) -> SqlError {
    SqlError::new(
        ErrorKind::UndefinedObject,
        format!("unrecognized configuration parameter \"{name}\""),
    )
}

#[cfg(test)]
mod tests {
    use super::startup_options;

    #[test]
    fn startup_options_read_as_libpq_sends_them() {
        let pairs = startup_options(r"-c statement_timeout=3s --search-path=a\ b -cwork_mem=4MB");
        assert_eq!(
            pairs,
            [
                ("statement_timeout".to_string(), "3s".to_string()),
                ("search_path".to_string(), "a b".to_string()),
                ("work_mem".to_string(), "4MB".to_string()),
            ]
        );
    }
}
