//! `DISCARD` and `RESET`: the session put back as a new connection has it, or part of it —
//! what connection poolers rely on between the clients they hand one connection to.

use super::*;

impl Session {
    /// `DISCARD ALL | PLANS | SEQUENCES | TEMP`.
    pub(super) fn discard(&mut self, what: plan::Discard) -> SqlResult<StatementResult> {
        use plan::Discard;
        match what {
            Discard::All => {
                if self.transaction.is_some() {
                    return Err(SqlError::new(
                        ErrorKind::ActiveTransaction,
                        "DISCARD ALL cannot run inside a transaction block",
                    ));
                }
                self.settings = self.startup_settings.clone();
                self.statements.clear();
                self.portals_discarded = true;
                self.shared.notifications.unlisten(self.id, None);
                self.shared.advisory_locks.unlock_all(self.id, None);
                self.sequences = SessionSequences::default();
                self.plan_generation += 1;
            }
            Discard::Plans => self.plan_generation += 1,
            Discard::Sequences => self.sequences = SessionSequences::default(),
            // There are no temporary tables to drop.
            Discard::Temp => {}
        }
        Ok(StatementResult::Command(what.tag().into()))
    }

    /// Whether DISCARD ALL ran since the last call: the connection then closes its portals.
    pub fn take_portals_discarded(&mut self) -> bool {
        std::mem::take(&mut self.portals_discarded)
    }

    /// `RESET name`, or `RESET ALL` (None): back to what the client gave at startup, else the
    /// default.
    pub(super) fn reset(&mut self, name: Option<&str>) -> SqlResult<()> {
        let Some(name) = name else {
            self.keep_settings_before();
            // RESET ALL leaves the role SET ROLE chose, as PostgreSQL does.
            let role = self.settings.get("role").cloned();
            self.settings = self.startup_settings.clone();
            if let Some(role) = role {
                self.settings.insert("role".into(), role);
            }
            if let Some(t) = &mut self.transaction {
                t.settings_made.push(SettingChange::All);
            }
            return Ok(());
        };
        let startup = self.startup_settings.get(&setting_key(name)).cloned();
        self.set_scoped(name, startup.as_deref(), false)
    }
}
