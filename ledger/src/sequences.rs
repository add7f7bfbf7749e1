//! Sequence states: where `nextval` and `setval` take and leave them. The state of every
//! sequence lives in partition 0 (its meta table, one entry per sequence) and in the
//! coordinator's executor, and changes only as commands apply in log order, so every
//! replica hands out the same values and a restart replays to the same state.
//!
//! A sequence call is not undone with the command that made it (as in PostgreSQL, a value
//! once handed out is never handed out again): states are written after the command, apart
//! from its undo log.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use plan::{Catalog, Expr, Func, SequenceDef, SequenceSource, SequenceState, SessionSequences};
use sql::{ErrorKind, SqlError, SqlResult};

use crate::executor::Executor;

/// The catalog's sequence definitions, stored apart from the catalog (see `Catalog`).
pub(crate) const META_SEQUENCES: &[u8] = b"sequences";
const STATE_PREFIX: &[u8] = b"sequence/";

/// The meta key of sequence `id`'s state.
pub(crate) fn state_key(id: u32) -> Vec<u8> {
    let mut key = STATE_PREFIX.to_vec();
    key.extend_from_slice(&id.to_be_bytes());
    key
}

pub(crate) fn encode_state(state: SequenceState) -> [u8; 9] {
    let mut out = [0u8; 9];
    out[..8].copy_from_slice(&state.last.to_le_bytes());
    out[8] = state.called as u8;
    out
}

pub(crate) fn decode_state(bytes: &[u8]) -> SqlResult<SequenceState> {
    match bytes {
        [last @ .., called] if last.len() == 8 => Ok(SequenceState {
            last: i64::from_le_bytes(last.try_into().expect("eight bytes")),
            called: *called != 0,
        }),
        _ => Err(SqlError::internal("a stored sequence state is unreadable")),
    }
}

/// The states of an executor's sequences. Only the coordinator's executor (which holds
/// partition 0) owns them; a partition thread's executor has an empty store that refuses
/// calls, and commands calling sequences are routed to the coordinator.
#[derive(Default)]
pub(crate) struct SequenceStore {
    inner: Mutex<StoreInner>,
}

#[derive(Default)]
struct StoreInner {
    owner: bool,
    states: BTreeMap<u32, SequenceState>,
    /// Changed by the command applying now, to be written when it ends.
    dirty: BTreeSet<u32>,
    /// The values the session that proposed the command had, for `currval`.
    session: SessionSequences,
    /// The values this command handed out.
    own: SessionSequences,
}

impl SequenceStore {
    pub(crate) fn owning(states: BTreeMap<u32, SequenceState>) -> SequenceStore {
        SequenceStore {
            inner: Mutex::new(StoreInner {
                owner: true,
                states,
                ..StoreInner::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, StoreInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Before a command: the proposing session's values; nothing handed out yet.
    pub(crate) fn begin(&self, session: SessionSequences) {
        let mut inner = self.lock();
        inner.session = session;
        inner.own = SessionSequences::default();
        inner.dirty.clear();
    }

    /// After a command: the values it handed out, and the states to write.
    pub(crate) fn finish(&self) -> (SessionSequences, Vec<(u32, SequenceState)>) {
        let mut inner = self.lock();
        let dirty = std::mem::take(&mut inner.dirty);
        let changed = dirty
            .into_iter()
            .filter_map(|id| inner.states.get(&id).map(|s| (id, *s)))
            .collect();
        inner.session = SessionSequences::default();
        (std::mem::take(&mut inner.own), changed)
    }

    /// Values allocated for a session count as handed out when its statement takes them,
    /// not when they are allocated.
    pub(crate) fn forget_handed_out(&self) {
        self.lock().own = SessionSequences::default();
    }

    /// A new sequence (CREATE SEQUENCE, a SERIAL column): its first state.
    pub(crate) fn create(&self, sequence: &SequenceDef) -> SequenceState {
        let state = sequence.initial_state();
        self.lock().states.insert(sequence.id, state);
        state
    }

    fn state(&self, sequence: u32) -> Option<SequenceState> {
        self.lock().states.get(&sequence).copied()
    }

    fn set_state(&self, sequence: u32, state: SequenceState) {
        self.lock().states.insert(sequence, state);
    }

    /// Every sequence's state (to `restore` after schema changes are taken back).
    pub(crate) fn states(&self) -> BTreeMap<u32, SequenceState> {
        self.lock().states.clone()
    }

    pub(crate) fn restore(&self, states: BTreeMap<u32, SequenceState>) {
        self.lock().states = states;
    }

    pub(crate) fn drop_sequence(&self, id: u32) {
        self.lock().states.remove(&id);
    }

    fn change(
        &self,
        sequence: &SequenceDef,
        step: impl FnOnce(SequenceState) -> SqlResult<SequenceState>,
    ) -> SqlResult<SequenceState> {
        let mut inner = self.lock();
        if !inner.owner {
            return Err(SqlError::internal(
                "a sequence call reached a partition thread (it must run on the coordinator)",
            ));
        }
        let state = inner
            .states
            .get(&sequence.id)
            .copied()
            .unwrap_or_else(|| sequence.initial_state());
        let next = step(state)?;
        inner.states.insert(sequence.id, next);
        inner.dirty.insert(sequence.id);
        Ok(next)
    }
}

/// The sequence source of a command applying in log order.
pub(crate) struct CommandSequences {
    pub catalog: Arc<Catalog>,
    pub store: Arc<SequenceStore>,
}

impl SequenceSource for CommandSequences {
    fn catalog(&self) -> Option<&Catalog> {
        Some(&self.catalog)
    }

    fn next_value(&self, sequence: &SequenceDef) -> SqlResult<i64> {
        let state = self.store.change(sequence, |s| sequence.next(s))?;
        self.store.lock().own.record(sequence.id, state.last);
        Ok(state.last)
    }

    fn set_value(&self, sequence: &SequenceDef, value: i64, called: bool) -> SqlResult<i64> {
        self.store
            .change(sequence, |_| sequence.set(value, called))?;
        Ok(value)
    }

    fn current_value(&self, sequence: u32) -> Option<i64> {
        let inner = self.store.lock();
        inner
            .own
            .get(sequence)
            .or_else(|| inner.session.get(sequence))
    }

    fn last_sequence(&self) -> Option<u32> {
        let inner = self.store.lock();
        inner.own.last.or(inner.session.last)
    }

    fn state(&self, sequence: u32) -> Option<SequenceState> {
        self.store.state(sequence)
    }
}

/// The sequence source of a statement that runs outside log order (a query, or a write
/// staged in a transaction): `currval` and `lastval` see the session's values, and
/// `nextval` takes values the session allocated through the log for this statement.
pub(crate) struct StatementSequences {
    pub catalog: Arc<Catalog>,
    pub store: Arc<SequenceStore>,
    pub session: SessionSequences,
    pub allocated: RefCell<BTreeMap<u32, VecDeque<i64>>>,
    pub own: RefCell<SessionSequences>,
}

impl SequenceSource for StatementSequences {
    fn catalog(&self) -> Option<&Catalog> {
        Some(&self.catalog)
    }

    fn next_value(&self, sequence: &SequenceDef) -> SqlResult<i64> {
        let value = self
            .allocated
            .borrow_mut()
            .get_mut(&sequence.id)
            .and_then(VecDeque::pop_front)
            .ok_or_else(|| {
                SqlError::feature_not_supported(format!(
                    "nextval('{}') here (inside a transaction block it is allowed in INSERT ... VALUES, in INSERT ... SELECT whose SELECT does not call it, and in a SELECT that reads no table)",
                    sequence.name
                ))
            })?;
        self.own.borrow_mut().record(sequence.id, value);
        Ok(value)
    }

    fn current_value(&self, sequence: u32) -> Option<i64> {
        self.own
            .borrow()
            .get(sequence)
            .or_else(|| self.session.get(sequence))
    }

    fn last_sequence(&self) -> Option<u32> {
        self.own.borrow().last.or(self.session.last)
    }

    fn state(&self, sequence: u32) -> Option<SequenceState> {
        self.store.state(sequence)
    }
}

impl Executor {
    /// CREATE SEQUENCE (or a SERIAL column's): the definition under a new id, its first
    /// state stored.
    pub(crate) fn create_sequence(
        &mut self,
        catalog: &mut Catalog,
        mut sequence: SequenceDef,
    ) -> SqlResult<()> {
        sequence.id = catalog.new_relation_id(&sequence.name)?;
        let state = self.sequences.create(&sequence);
        let meta = self.meta;
        self.put_raw(meta, &state_key(sequence.id), Some(&encode_state(state)))?;
        catalog
            .sequences
            .insert(sequence.name.clone(), Arc::new(sequence));
        Ok(())
    }

    /// ALTER SEQUENCE: the new definition, and the state RESTART gives (else the state
    /// must fit the new bounds).
    pub(crate) fn alter_sequence(
        &mut self,
        catalog: &mut Catalog,
        sequence: SequenceDef,
        restart: Option<i64>,
    ) -> SqlResult<()> {
        let Some(old) = catalog.sequence_by_id(sequence.id).cloned() else {
            return Err(SqlError::serialization_failure(
                "the sequence was dropped while ALTER SEQUENCE was planned; retry",
            ));
        };
        if let Some(owner) = &sequence.owner {
            if catalog.table_by_id(owner.table).is_none() {
                return Err(SqlError::serialization_failure(
                    "the sequence's owning table changed while it was planned; retry",
                ));
            }
        }
        match restart {
            Some(value) => {
                let state = SequenceState {
                    last: value,
                    called: false,
                };
                self.sequences.set_state(sequence.id, state);
                let meta = self.meta;
                self.put_raw(meta, &state_key(sequence.id), Some(&encode_state(state)))?;
            }
            None => {
                let state = self
                    .sequences
                    .state(sequence.id)
                    .unwrap_or_else(|| old.initial_state());
                sequence.check_restart(state.last)?;
            }
        }
        catalog
            .sequences
            .insert(old.name.clone(), Arc::new(sequence));
        Ok(())
    }

    /// DROP SEQUENCE: refused while a column's default calls one of them.
    pub(crate) fn drop_sequences(
        &mut self,
        catalog: &mut Catalog,
        names: &[String],
        if_exists: bool,
    ) -> SqlResult<()> {
        for name in names {
            if catalog.sequences.contains_key(name) {
                if let Some((table, column)) = default_calling(catalog, name) {
                    return Err(SqlError::new(
                        ErrorKind::DependentObjectsStillExist,
                        format!("cannot drop sequence {name} because other objects depend on it"),
                    )
                    .with_detail(format!(
                        "default value for column {column} of table {table} depends on sequence {name}"
                    )));
                }
            } else if catalog.relation_exists(name) {
                return Err(SqlError::new(
                    ErrorKind::WrongObjectType,
                    format!("\"{name}\" is not a sequence"),
                ));
            } else if !if_exists {
                return Err(SqlError::new(
                    ErrorKind::UndefinedTable,
                    format!("sequence \"{name}\" does not exist"),
                ));
            }
        }
        for name in names {
            if let Some(sequence) = catalog.sequences.remove(name) {
                self.forget_sequence(sequence.id)?;
            }
        }
        Ok(())
    }

    /// Drops the sequences table `id`'s columns own (DROP TABLE).
    /// A sequence's state as a transaction that made it left it (`SchemaStep`).
    pub(crate) fn set_sequence_state(&mut self, id: u32, state: SequenceState) -> SqlResult<()> {
        self.sequences.set_state(id, state);
        let meta = self.meta;
        self.put_raw(meta, &state_key(id), Some(&encode_state(state)))
    }

    pub(crate) fn drop_owned_sequences(&mut self, catalog: &mut Catalog, id: u32) -> SqlResult<()> {
        let owned: Vec<(String, u32)> = catalog
            .sequences_owned_by(id)
            .map(|s| (s.name.clone(), s.id))
            .collect();
        for (name, id) in owned {
            catalog.sequences.remove(&name);
            self.forget_sequence(id)?;
        }
        Ok(())
    }

    fn forget_sequence(&mut self, id: u32) -> SqlResult<()> {
        self.sequences.drop_sequence(id);
        let meta = self.meta;
        self.put_raw(meta, &state_key(id), None)
    }
}

/// A table column whose default calls `nextval` of sequence `name`: (table, column).
fn default_calling(catalog: &Catalog, name: &str) -> Option<(String, String)> {
    for table in catalog.tables.values() {
        for column in &table.columns {
            let mut calls = false;
            if let Some(default) = &column.default {
                default.visit(&mut |e| {
                    if let Expr::Function {
                        func: Func::NextVal,
                        args,
                        ..
                    } = e
                    {
                        let named = match args.first() {
                            Some(Expr::Literal(arg, _)) => catalog.sequence_named(arg).ok(),
                            _ => None,
                        };
                        calls |= named.is_some_and(|s| s.name == name);
                    }
                });
            }
            if calls {
                return Some((table.name.clone(), column.name.clone()));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip() {
        for state in [
            SequenceState {
                last: i64::MIN,
                called: true,
            },
            SequenceState {
                last: 42,
                called: false,
            },
        ] {
            assert_eq!(decode_state(&encode_state(state)).unwrap(), state);
        }
        assert!(decode_state(&[1, 2, 3]).is_err());
    }

    #[test]
    fn a_store_that_does_not_own_the_states_refuses_calls() {
        let def = SequenceDef::new("s".into(), &Default::default(), None).unwrap();
        let detached = CommandSequences {
            catalog: Arc::new(Catalog::default()),
            store: Arc::new(SequenceStore::default()),
        };
        assert!(detached.next_value(&def).is_err());
        let owning = CommandSequences {
            catalog: Arc::new(Catalog::default()),
            store: Arc::new(SequenceStore::owning(BTreeMap::new())),
        };
        owning.store.begin(SessionSequences::default());
        assert_eq!(owning.next_value(&def).unwrap(), 1);
        assert_eq!(owning.next_value(&def).unwrap(), 2);
        assert_eq!(owning.current_value(def.id), Some(2));
        let (own, changed) = owning.store.finish();
        assert_eq!(own.get(def.id), Some(2));
        assert_eq!(changed.len(), 1);
    }
}
