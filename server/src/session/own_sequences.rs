//! `SELECT nextval(...)` of a sequence the open transaction created: its values come from
//! the transaction's own state of it (`Transaction::own_sequences`), as its INSERTs' do,
//! since the sequence exists nowhere else until COMMIT. Other sequences' values come through
//! the log, which cannot see the transaction's schema changes: refused there.

use std::cell::RefCell;

use plan::{SequenceDef, SequenceSource, SequenceState};

use super::*;

/// The sequence calls of a SELECT evaluated in the session, inside a transaction that
/// changed the schema.
struct OwnSequences<'a> {
    /// The catalog the transaction sees.
    catalog: &'a Catalog,
    /// The one every session sees: a sequence there is not the transaction's own.
    shared: &'a Catalog,
    states: RefCell<BTreeMap<u32, SequenceState>>,
    session: RefCell<SessionSequences>,
}

impl SequenceSource for OwnSequences<'_> {
    fn catalog(&self) -> Option<&Catalog> {
        Some(self.catalog)
    }

    fn next_value(&self, sequence: &SequenceDef) -> SqlResult<i64> {
        if self.shared.sequences.values().any(|s| s.id == sequence.id) {
            return Err(SqlError::feature_not_supported(
                "nextval() in a SELECT of a sequence older than the transaction block, after the block changed the schema",
            ));
        }
        let mut states = self.states.borrow_mut();
        let state = states
            .get(&sequence.id)
            .copied()
            .unwrap_or_else(|| sequence.initial_state());
        let next = sequence.next(state)?;
        states.insert(sequence.id, next);
        self.session.borrow_mut().record(sequence.id, next.last);
        Ok(next.last)
    }

    fn current_value(&self, sequence: u32) -> Option<i64> {
        self.session.borrow().get(sequence)
    }

    fn last_sequence(&self) -> Option<u32> {
        self.session.borrow().last
    }
}

impl Session {
    /// A SELECT that reads no table and calls `nextval` on the transaction's own
    /// sequences, evaluated here; their states and the session's `currval` follow.
    pub(super) fn select_own_sequences(
        &mut self,
        plan: &SelectPlan,
        params: &[Value],
    ) -> SqlResult<Vec<Row>> {
        let catalog = self.catalog();
        let shared = self.shared.executor.catalog();
        let Some(t) = &self.transaction else {
            return Err(SqlError::internal("own sequences outside a transaction"));
        };
        let source = OwnSequences {
            catalog: &catalog,
            shared: &shared,
            states: RefCell::new(t.own_sequences.clone()),
            session: RefCell::new(self.sequences.clone()),
        };
        let now = self.statement_time();
        let signals = crate::activity::SignalsFrom {
            activity: &self.shared.activity,
            catalog: &catalog,
            role: self.role(),
        };
        let rows = ledger::evaluate_with_sequences(
            plan,
            &catalog,
            params,
            now,
            &source,
            &signals,
            &self.interrupt,
        )?;
        let OwnSequences {
            states, session, ..
        } = source;
        if let Some(t) = &mut self.transaction {
            t.own_sequences = states.into_inner();
        }
        self.sequences = session.into_inner();
        Ok(rows)
    }
}
