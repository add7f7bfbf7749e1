//! What a bound statement needs beyond the relations its queries read (those are noted as
//! FROM binds them, `bind_from.rs` and `bind_view.rs`): the privileges its writes need,
//! ownership for schema changes, CREATE in `public` for new objects, EXECUTE for a
//! procedure, a superuser for cluster changes — PostgreSQL 15's rules. The checks are made
//! at the end of binding (`bind_in_session`), as the statement's role.

use plan::*;
use sql::{ErrorKind, SqlError, SqlResult};

use crate::bind::Binder;

impl Binder<'_> {
    /// Notes what `plan` needs (the reads of its queries were noted as they bound).
    pub(crate) fn plan_checks(&mut self, plan: &Plan) -> SqlResult<()> {
        match plan {
            Plan::Write(write, _) => self.write_checks(write),
            Plan::Ddl(ddl) => self.ddl_checks(ddl)?,
            Plan::Call(call) => {
                let name = call.name.clone();
                self.need(
                    ObjectId::Procedure(name.clone()),
                    Privileges::EXECUTE,
                    ObjectKind::Procedure,
                    &name,
                );
                for step in &call.steps {
                    if let Step::Write(write) = step {
                        self.write_checks(write);
                    }
                }
            }
            Plan::LedgerBatch(batch) => {
                self.need_on_table(&batch.table.name, batch.table.id, Privileges::INSERT)
            }
            Plan::CopyFrom(copy) => {
                self.need_on_table(&copy.table.name, copy.table.id, Privileges::INSERT)
            }
            Plan::ClusterChange(_) if !self.catalog.authorization.is_superuser(self.role) => {
                return Err(SqlError::new(
                    ErrorKind::InsufficientPrivilege,
                    "must be superuser to change the cluster's membership or leader",
                ));
            }
            Plan::Explain(inner) => self.plan_checks(inner)?,
            _ => {}
        }
        Ok(())
    }

    /// `nextval` needs USAGE or UPDATE on its sequence, `currval` USAGE or SELECT, `setval`
    /// UPDATE, as in PostgreSQL.
    pub(crate) fn need_on_sequence(&mut self, func: Func, sequence: &SequenceDef) {
        let privileges = match func {
            Func::NextVal => Privileges::USAGE.union(Privileges::UPDATE),
            Func::SetVal => Privileges::UPDATE,
            _ => Privileges::USAGE.union(Privileges::SELECT),
        };
        self.need(
            ObjectId::Sequence(sequence.id),
            privileges,
            ObjectKind::Sequence,
            &sequence.name,
        );
    }

    fn need_on_table(&mut self, name: &str, id: u32, privileges: Privileges) {
        self.need(ObjectId::Relation(id), privileges, ObjectKind::Table, name);
    }

    /// INSERT, UPDATE or DELETE on the target; SELECT as well where the statement reads the
    /// target's rows (a WHERE, RETURNING, SET from columns, ON CONFLICT DO UPDATE).
    fn write_checks(&mut self, write: &WritePlan) {
        let table = write.table().clone();
        let (privilege, reads) = match write {
            WritePlan::Insert(p) => {
                self.default_sequence_checks(p);
                let updates = match &p.on_conflict {
                    Some(OnConflict::DoUpdate { .. }) => true,
                    Some(OnConflict::Arbitrated { action, .. }) => {
                        matches!(action.as_ref(), OnConflict::DoUpdate { .. })
                    }
                    _ => false,
                };
                if updates {
                    self.need_on_table(&table.name, table.id, Privileges::UPDATE);
                }
                (Privileges::INSERT, p.returning.is_some() || updates)
            }
            WritePlan::Update(p) => (
                Privileges::UPDATE,
                p.filter.is_some()
                    || p.returning.is_some()
                    || p.assignments.iter().any(|(_, e)| reads_a_column(e)),
            ),
            WritePlan::Delete(p) => (
                Privileges::DELETE,
                p.filter.is_some() || p.returning.is_some(),
            ),
        };
        self.need_on_table(&table.name, table.id, privilege);
        if reads {
            self.need_on_table(&table.name, table.id, Privileges::SELECT);
        }
    }

    /// The columns an INSERT leaves to their defaults: a SERIAL column's `nextval` needs
    /// its sequence's USAGE (identity columns' sequences are the table's own).
    fn default_sequence_checks(&mut self, insert: &InsertPlan) {
        let Some(table) = self.catalog.table_by_id(insert.table.id).cloned() else {
            return;
        };
        for (i, column) in table.columns.iter().enumerate() {
            if insert.target_columns.contains(&i)
                || self.catalog.identity_of(table.id, &column.name).is_some()
            {
                continue;
            }
            let Some(default) = &column.default else {
                continue;
            };
            let mut sequences = Vec::new();
            default.visit(&mut |e| {
                if let Expr::Function {
                    func: Func::NextVal,
                    args,
                    ..
                } = e
                {
                    if let Some(Expr::Literal(name, _)) = args.first() {
                        sequences.extend(self.catalog.sequence_named(name).ok().cloned());
                    }
                }
            });
            for sequence in sequences {
                self.need_on_sequence(Func::NextVal, &sequence);
            }
        }
    }

    fn ddl_checks(&mut self, ddl: &DdlPlan) -> SqlResult<()> {
        match ddl {
            DdlPlan::CreateTable { .. }
            | DdlPlan::CreateSequence { .. }
            | DdlPlan::CreateEnum { .. } => self.need_create_in_public(),
            DdlPlan::CreateView { view, .. } => {
                self.need_create_in_public();
                if let Some(v) = self.catalog.views.get(&view.name) {
                    let id = v.id;
                    self.need_owner(ObjectId::Relation(id), ObjectKind::View, &view.name);
                }
            }
            DdlPlan::CreateProcedure { procedure, .. } => {
                self.need_create_in_public();
                if self.catalog.procedures.contains_key(&procedure.name) {
                    let name = procedure.name.clone();
                    self.need_owner(
                        ObjectId::Procedure(name.clone()),
                        ObjectKind::Procedure,
                        &name,
                    );
                }
            }
            DdlPlan::WithSequences { ddl, .. } => self.ddl_checks(ddl)?,
            DdlPlan::WithForeignKeys { ddl, foreign_keys } => {
                self.ddl_checks(ddl)?;
                self.reference_checks(foreign_keys);
            }
            DdlPlan::DropTables { names, .. } => self.own_each(names, |c, n| {
                c.table(n)
                    .map(|t| (ObjectId::Relation(t.id), ObjectKind::Table))
            }),
            DdlPlan::DropViews { names, .. } => self.own_each(names, |c, n| {
                c.views
                    .get(n)
                    .map(|v| (ObjectId::Relation(v.id), ObjectKind::View))
            }),
            DdlPlan::DropSequences { names, .. } => self.own_each(names, |c, n| {
                c.sequences
                    .get(n)
                    .map(|s| (ObjectId::Sequence(s.id), ObjectKind::Sequence))
            }),
            DdlPlan::AlterSequence { sequence, .. } => {
                let names = [sequence.name.clone()];
                self.own_each(&names, |_, _| {
                    Some((ObjectId::Sequence(sequence.id), ObjectKind::Sequence))
                })
            }
            DdlPlan::DropProcedures { names, .. } => self.own_each(names, |c, n| {
                c.procedures
                    .contains_key(n)
                    .then(|| (ObjectId::Procedure(n.to_owned()), ObjectKind::Procedure))
            }),
            DdlPlan::DropIndexes { names, .. } => self.own_each(names, |c, n| {
                c.index(n)
                    .map(|(t, _)| (ObjectId::Relation(t.id), ObjectKind::Index))
            }),
            DdlPlan::Truncate { tables } => {
                for t in tables {
                    self.need_on_table(&t.name, t.id, Privileges::TRUNCATE);
                }
            }
            DdlPlan::AddPrimaryKey { table, .. }
            | DdlPlan::CreateIndex { table, .. }
            | DdlPlan::CreateDerivedIndex { table, .. }
            | DdlPlan::AddUniqueConstraint { table, .. }
            | DdlPlan::AlterTable { table, .. } => self.need_owner(
                ObjectId::Relation(table.id),
                ObjectKind::Table,
                &table.name.clone(),
            ),
            DdlPlan::AddForeignKey { foreign_key } => {
                if let Some(t) = self.catalog.table_by_id(foreign_key.table) {
                    let (id, name) = (t.id, t.name.clone());
                    self.need_owner(ObjectId::Relation(id), ObjectKind::Table, &name);
                }
                self.reference_checks(std::slice::from_ref(foreign_key));
            }
            DdlPlan::DropForeignKey { table, .. } => {
                if let Some(t) = self.catalog.table_by_id(*table) {
                    let (id, name) = (t.id, t.name.clone());
                    self.need_owner(ObjectId::Relation(id), ObjectKind::Table, &name);
                }
            }
            // Types carry no privileges here; like PostgreSQL's, their owner changes them.
            DdlPlan::AlterEnum { .. } | DdlPlan::DropEnums { .. } => {
                if !self.catalog.authorization.is_superuser(self.role) {
                    return Err(SqlError::feature_not_supported(
                        "changing or dropping a type as a role other than a superuser",
                    ));
                }
            }
            // Checked as they bind (`bind_role.rs`, `bind_grant.rs`).
            DdlPlan::Roles(_) => {}
            DdlPlan::Owned { ddl, .. } => self.ddl_checks(ddl)?,
        }
        Ok(())
    }

    /// Each of `names` that `find` finds (a DROP of one that does not exist says so as it
    /// applies) must be owned by the statement's role.
    fn own_each(
        &mut self,
        names: &[String],
        find: impl Fn(&Catalog, &str) -> Option<(ObjectId, ObjectKind)>,
    ) {
        for name in names {
            if let Some((object, kind)) = find(self.catalog, name) {
                self.need_owner(object, kind, name);
            }
        }
    }

    /// A foreign key needs REFERENCES on the table it refers to.
    fn reference_checks(&mut self, foreign_keys: &[ForeignKeyDef]) {
        for fk in foreign_keys {
            if let Some(t) = self.catalog.table_by_id(fk.parent) {
                let (id, name) = (t.id, t.name.clone());
                self.need_on_table(&name, id, Privileges::REFERENCES);
            }
        }
    }
}

/// Whether `e` reads a column of the row (an UPDATE's SET then needs SELECT too).
fn reads_a_column(e: &Expr) -> bool {
    let mut reads = false;
    e.visit(&mut |e| {
        if matches!(e, Expr::Column(..)) {
            reads = true;
        }
    });
    reads
}
