//! Applying schema changes: CREATE/ALTER/DROP of tables, indexes, views, sequences,
//! procedures and enum types. Each validates everything before it changes anything, so a
//! failure leaves no trace; the new catalog is published when it is done.

use std::sync::Arc;

use plan::{Catalog, ColumnSource, DdlPlan, EvalEnv, RowChange, TableDef, TableRef};
use sql::{DataType, ErrorKind, SqlError, SqlResult, Value};

use crate::apply::*;
use crate::command::{CommandResult, Outcome};
use crate::error::kv_error;
use crate::executor::Executor;
use crate::partition::Shard;
use crate::row::{encode_key, Row};

/// What a new table brings besides itself: the sequences its columns own and its foreign
/// keys (both get their ids when the table has its own).
#[derive(Default)]
struct TableKeys {
    sequences: Vec<plan::SequenceDef>,
    foreign_keys: Vec<plan::ForeignKeyDef>,
}

/// A CREATE INDEX's definition as the binder gave it.
struct NewIndex {
    name: String,
    columns: Vec<usize>,
    unique: bool,
    if_not_exists: bool,
    derivation: Option<plan::IndexDerivation>,
}

impl Executor {
    /// Schema changes validate everything before changing anything, so a failure leaves
    /// no trace.
    pub(crate) fn apply_ddl(&mut self, plan: DdlPlan, version: u64) -> CommandResult {
        let mut catalog: Catalog = (*self.catalog).clone();
        catalog.version += 1;
        if !self.change_schema(&mut catalog, plan, version)? {
            return Ok(Outcome::default());
        }
        // The derivations of partial and expression indexes that went (with DROP INDEX or
        // their table) go too.
        let live: std::collections::HashSet<u32> = catalog
            .tables
            .values()
            .flat_map(|t| t.indexes.iter().map(|i| i.id))
            .collect();
        catalog.index_derivations.retain(|id, _| live.contains(id));
        catalog.unique_constraints.retain(|id| live.contains(id));
        crate::roles::forget_dropped_objects(&mut catalog);
        self.set_catalog(catalog)?;
        Ok(Outcome::default())
    }

    /// Makes `plan`'s change in `catalog` (and storage); false when there was nothing to do
    /// (`IF NOT EXISTS` of one that exists).
    fn change_schema(
        &mut self,
        catalog: &mut Catalog,
        plan: DdlPlan,
        version: u64,
    ) -> SqlResult<bool> {
        match plan {
            DdlPlan::Roles(plan) => {
                crate::roles::apply(catalog, plan)?;
                Ok(true)
            }
            DdlPlan::Owned { ddl, owner } => {
                let before = crate::roles::owned_objects(catalog);
                if !self.change_schema(catalog, *ddl, version)? {
                    return Ok(false);
                }
                crate::roles::own_new_objects(catalog, &before, owner);
                Ok(true)
            }
            other => self.change_objects(catalog, other, version),
        }
    }

    /// `change_schema` for schema objects: tables, indexes, views, sequences, procedures
    /// and types.
    fn change_objects(
        &mut self,
        catalog: &mut Catalog,
        plan: DdlPlan,
        version: u64,
    ) -> SqlResult<bool> {
        match plan {
            DdlPlan::CreateTable {
                table,
                if_not_exists,
            } => {
                if !self.create_table(catalog, table, if_not_exists, TableKeys::default())? {
                    return Ok(false);
                }
            }
            DdlPlan::WithSequences { ddl, sequences } => {
                match *ddl {
                    DdlPlan::CreateTable {
                        table,
                        if_not_exists,
                    } => {
                        let keys = TableKeys {
                            sequences,
                            foreign_keys: Vec::new(),
                        };
                        if !self.create_table(catalog, table, if_not_exists, keys)? {
                            return Ok(false);
                        }
                    }
                    DdlPlan::AlterTable { table, new, rows } => {
                        check_sequence_names(catalog, &sequences, None)?;
                        self.alter_table(catalog, &table, *new, rows, version)?;
                        for sequence in sequences {
                            self.create_sequence(catalog, sequence)?;
                        }
                    }
                    _ => return Err(SqlError::internal(
                        "sequences planned with a schema change other than CREATE or ALTER TABLE",
                    )),
                }
            }
            DdlPlan::CreateSequence {
                sequence,
                if_not_exists,
            } => {
                if catalog.relation_exists(&sequence.name) && if_not_exists {
                    return Ok(false);
                }
                if let Some(owner) = &sequence.owner {
                    if catalog.table_by_id(owner.table).is_none() {
                        return Err(SqlError::serialization_failure(
                            "the sequence's owning table changed while it was planned; retry",
                        ));
                    }
                }
                self.create_sequence(catalog, sequence)?;
            }
            DdlPlan::DropSequences { names, if_exists } => {
                self.drop_sequences(catalog, &names, if_exists)?;
            }
            DdlPlan::AlterSequence { sequence, restart } => {
                self.alter_sequence(catalog, sequence, restart)?;
            }
            DdlPlan::DropTables { names, if_exists } => {
                let dropped: Vec<u32> = names
                    .iter()
                    .filter_map(|n| catalog.tables.get(n).map(|t| t.id))
                    .collect();
                for n in &names {
                    if !catalog.tables.contains_key(n) && !if_exists {
                        return Err(SqlError::undefined_table(n));
                    }
                    if let Some(t) = catalog.tables.get(n) {
                        refuse_if_viewed(catalog, t, "drop")?;
                        refuse_if_referenced(catalog, t, &dropped)?;
                    }
                }
                catalog.foreign_keys.retain(|f| !dropped.contains(&f.table));
                for n in &names {
                    if let Some(t) = catalog.tables.remove(n) {
                        self.drop_storage(t.id, &t.storage)?;
                        for index in &t.indexes {
                            self.drop_storage(index.id, &index.storage)?;
                        }
                        self.drop_owned_sequences(catalog, t.id)?;
                    }
                }
            }
            DdlPlan::Truncate { tables } => {
                if self.in_schema_transaction() {
                    // A transaction block's TRUNCATE is staged as deletes (the session's).
                    return Err(SqlError::internal(
                        "TRUNCATE reached a transaction's schema changes",
                    ));
                }
                let defs: Vec<Arc<TableDef>> = tables
                    .iter()
                    .map(|t| self.resolve(t))
                    .collect::<SqlResult<_>>()?;
                let truncated: Vec<u32> = defs.iter().map(|d| d.id).collect();
                for d in &defs {
                    if let Some(fk) = catalog
                        .references_to(d.id)
                        .find(|f| !truncated.contains(&f.table))
                    {
                        let child = catalog.table_by_id(fk.table).map(|t| t.name.clone());
                        return Err(SqlError::feature_not_supported(
                            "cannot truncate a table referenced in a foreign key constraint",
                        )
                        .with_detail(format!(
                            "Table \"{}\" references \"{}\".",
                            child.unwrap_or_default(),
                            d.name
                        )));
                    }
                }
                for d in defs {
                    for shard in self.every_shard()? {
                        let ids = std::iter::once(d.id).chain(d.indexes.iter().map(|i| i.id));
                        for id in ids {
                            let handle = shard.handle(id)?;
                            shard.engine.truncate_table(handle).map_err(kv_error)?;
                        }
                        shard.table_versions.insert(d.id, version);
                    }
                }
                catalog.version -= 1;
                return Ok(false);
            }
            DdlPlan::AddPrimaryKey {
                table,
                columns,
                name,
            } => {
                let old = self.resolve(&table)?;
                refuse_on_ledger_table(&old, "adding a primary key")?;
                if !old.indexes.is_empty() {
                    return Err(SqlError::feature_not_supported(
                        "adding a primary key to a table that has indexes",
                    ));
                }
                let mut def = (*old).clone();
                def.primary_key = columns.clone();
                def.primary_key_name = Some(name);
                def.shape_version += 1;
                for &c in &columns {
                    def.columns[c].nullable = false;
                }
                def.storage = format!("t{}.{}", def.id, def.shape_version);
                self.rebuild_keyed(&old, &def)?;
                catalog.tables.insert(def.name.clone(), Arc::new(def));
            }
            DdlPlan::CreateIndex {
                table,
                name,
                columns,
                unique,
                if_not_exists,
            } => {
                let index = NewIndex {
                    name,
                    columns,
                    unique,
                    if_not_exists,
                    derivation: None,
                };
                self.create_index(catalog, &table, index)?;
            }
            DdlPlan::CreateDerivedIndex {
                table,
                name,
                columns,
                unique,
                if_not_exists,
                derivation,
            } => {
                let index = NewIndex {
                    name,
                    columns,
                    unique,
                    if_not_exists,
                    derivation: Some(*derivation),
                };
                self.create_index(catalog, &table, index)?;
            }
            DdlPlan::AddUniqueConstraint {
                table,
                name,
                columns,
            } => {
                let index = NewIndex {
                    name,
                    columns,
                    unique: true,
                    if_not_exists: false,
                    derivation: None,
                };
                let id = self.create_index(catalog, &table, index)?;
                catalog.unique_constraints.extend(id);
            }
            DdlPlan::CreateProcedure {
                procedure,
                or_replace,
            } => {
                if catalog.procedures.contains_key(&procedure.name) && !or_replace {
                    return Err(SqlError::new(
                        ErrorKind::DuplicateFunction,
                        format!("procedure {} already exists", procedure.name),
                    ));
                }
                catalog
                    .procedures
                    .insert(procedure.name.clone(), Arc::new(procedure));
            }
            DdlPlan::DropProcedures { names, if_exists } => {
                drop_named(&mut catalog.procedures, &names, if_exists, |n| {
                    SqlError::new(
                        ErrorKind::UndefinedFunction,
                        format!("procedure {n} does not exist"),
                    )
                })?;
            }
            DdlPlan::AlterTable { table, new, rows } => {
                self.alter_table(catalog, &table, *new, rows, version)?;
            }
            DdlPlan::CreateView {
                mut view,
                or_replace,
            } => {
                match catalog.views.get(&view.name) {
                    Some(old) if or_replace => {
                        old.check_replacement(&view)?;
                        view.id = old.id;
                    }
                    _ => view.id = catalog.new_relation_id(&view.name)?,
                }
                // The tables it reads must still be the ones it was bound against.
                for id in &view.tables {
                    if catalog.table_by_id(*id).is_none() {
                        return Err(SqlError::serialization_failure(
                            "a table the view reads changed while the view was planned; retry",
                        ));
                    }
                }
                catalog.views.insert(view.name.clone(), Arc::new(view));
            }
            DdlPlan::CreateEnum { def } => plan::create_enum(catalog, def)?,
            DdlPlan::AlterEnum { old, new } => plan::alter_enum(catalog, old, new)?,
            DdlPlan::DropEnums { names, if_exists } => {
                plan::drop_enums(catalog, &names, if_exists)?
            }
            DdlPlan::DropViews { names, if_exists } => {
                // A view created since the statement was bound may read one of them.
                let dependent_views = self
                    .dependent_views
                    .expect("schema changes apply on the coordinator's executor");
                let dependents = dependent_views(catalog, &names);
                if !dependents.is_empty() {
                    return Err(plan::views_depend_error(&names, &dependents));
                }
                drop_named(&mut catalog.views, &names, if_exists, |n| {
                    SqlError::new(
                        ErrorKind::UndefinedTable,
                        format!("view \"{n}\" does not exist"),
                    )
                })?;
            }
            DdlPlan::WithForeignKeys { ddl, foreign_keys } => {
                for fk in &foreign_keys {
                    if fk.parent != plan::SELF_REFERENCE {
                        let parent = catalog.table_by_id(fk.parent).ok_or_else(|| {
                            SqlError::serialization_failure(
                                "a referenced table changed while the foreign key was planned; retry",
                            )
                        })?;
                        fk.check_parent_key(parent)?;
                    }
                }
                let (create, sequences) = match *ddl {
                    DdlPlan::WithSequences { ddl, sequences } => (*ddl, sequences),
                    other => (other, Vec::new()),
                };
                let DdlPlan::CreateTable {
                    table,
                    if_not_exists,
                } = create
                else {
                    return Err(SqlError::internal(
                        "foreign keys planned with a schema change other than CREATE TABLE",
                    ));
                };
                let keys = TableKeys {
                    sequences,
                    foreign_keys,
                };
                if !self.create_table(catalog, table, if_not_exists, keys)? {
                    return Ok(false);
                }
            }
            DdlPlan::AddForeignKey { foreign_key } => {
                let table = catalog
                    .table_by_id(foreign_key.table)
                    .cloned()
                    .ok_or_else(|| {
                        SqlError::serialization_failure(
                            "the table changed while the foreign key was planned; retry",
                        )
                    })?;
                let parent = catalog.table_by_id(foreign_key.parent).ok_or_else(|| {
                    SqlError::serialization_failure(
                        "a referenced table changed while the foreign key was planned; retry",
                    )
                })?;
                foreign_key.check_parent_key(parent)?;
                if catalog
                    .foreign_keys_of(table.id)
                    .any(|f| f.name == foreign_key.name)
                {
                    return Err(SqlError::new(
                        ErrorKind::DuplicateObject,
                        format!(
                            "constraint \"{}\" for relation \"{}\" already exists",
                            foreign_key.name, table.name
                        ),
                    ));
                }
                self.check_existing_rows(&foreign_key)?;
                catalog.add_foreign_key(foreign_key);
            }
            DdlPlan::DropForeignKey {
                table,
                name,
                if_exists,
            } => {
                let before = catalog.foreign_keys.len();
                catalog
                    .foreign_keys
                    .retain(|f| !(f.table == table && f.name == name));
                if catalog.foreign_keys.len() == before {
                    if if_exists {
                        return Ok(false);
                    }
                    let table = catalog
                        .table_by_id(table)
                        .map(|t| t.name.clone())
                        .unwrap_or_default();
                    return Err(SqlError::new(
                        ErrorKind::UndefinedObject,
                        format!("constraint \"{name}\" of relation \"{table}\" does not exist"),
                    ));
                }
            }
            DdlPlan::DropIndexes { names, if_exists } => {
                for n in &names {
                    match catalog.index(n) {
                        Some((table, position)) => {
                            let mut def = (**table).clone();
                            let index = def.indexes.remove(position);
                            if catalog.unique_constraints.contains(&index.id) {
                                return Err(SqlError::new(
                                    ErrorKind::DependentObjectsStillExist,
                                    format!(
                                        "cannot drop index {n} because constraint {n} on table {} requires it",
                                        table.name
                                    ),
                                )
                                .with_detail(format!(
                                    "You can drop constraint {n} on table {} instead.",
                                    table.name
                                )));
                            }
                            foreign_keys_hold(catalog, &def, &format!("drop index {n}"))?;
                        }
                        None if !if_exists => {
                            return Err(SqlError::new(
                                ErrorKind::UndefinedObject,
                                format!("index \"{n}\" does not exist"),
                            ));
                        }
                        None => {}
                    }
                }
                for n in &names {
                    let Some((table, position)) = catalog.index(n) else {
                        continue;
                    };
                    let mut def = (**table).clone();
                    let index = def.indexes.remove(position);
                    def.shape_version += 1;
                    self.drop_storage(index.id, &index.storage)?;
                    catalog.tables.insert(def.name.clone(), Arc::new(def));
                }
            }
            DdlPlan::Roles(_) | DdlPlan::Owned { .. } => {
                return Err(SqlError::internal(
                    "a role change reached the object changes",
                ))
            }
        }
        Ok(true)
    }

    /// ALTER TABLE's new definition `new` for `table`, the rows rebuilt or checked as
    /// `rows` says.
    fn alter_table(
        &mut self,
        catalog: &mut Catalog,
        table: &TableRef,
        new: TableDef,
        rows: RowChange,
        version: u64,
    ) -> SqlResult<()> {
        let old = self.resolve(table)?;
        if !appends_columns(&old, &new) && !widens_amounts(&old, &new) {
            refuse_on_ledger_table(&old, "ALTER TABLE other than ADD COLUMN")?;
        }
        refuse_if_viewed(catalog, &old, "alter")?;
        let mut def = new;
        def.id = old.id;
        def.shape_version = old.shape_version + 1;
        def.storage = old.storage.clone();
        if def.name != old.name && catalog.relation_exists(&def.name) {
            return Err(SqlError::new(
                ErrorKind::DuplicateTable,
                format!("relation \"{}\" already exists", def.name),
            ));
        }
        foreign_keys_hold(catalog, &def, &format!("alter table {}", old.name))?;
        let env = EvalEnv::without_subqueries(&[], 0);
        // A UNIQUE constraint of an added column (id 0 until now): every row takes the
        // column's one fill value, so two rows and a value that is not NULL are a duplicate.
        // Decided before the rows change, which cannot be taken back.
        let added: Vec<usize> = (0..def.indexes.len())
            .filter(|&n| def.indexes[n].id == 0)
            .collect();
        let mut rows_beyond_one = None;
        for &n in &added {
            let index = &def.indexes[n];
            let RowChange::Rebuild(sources) = &rows else {
                return Err(SqlError::internal("a new index without new columns"));
            };
            for &c in &index.columns {
                let ColumnSource::Value(fill) = &sources[c] else {
                    return Err(SqlError::internal("a new index on an existing column"));
                };
                if fill.eval(&[], &env)?.is_null() {
                    continue;
                }
                let beyond_one = match rows_beyond_one {
                    Some(known) => known,
                    None => *rows_beyond_one.insert(self.stored_rows_beyond(&old, 1)?),
                };
                if beyond_one {
                    return Err(SqlError::new(
                        ErrorKind::UniqueViolation,
                        format!("could not create unique index \"{}\"", index.name),
                    )
                    .with_detail("Every row takes the column's default."));
                }
            }
        }
        for &n in &added {
            let id = catalog.new_relation_id(&def.indexes[n].name)?;
            def.indexes[n].id = id;
            def.indexes[n].storage = format!("i{id}");
        }
        match rows {
            RowChange::None => {}
            RowChange::Validate => {
                for (_, row) in self.every_row(&old)? {
                    check_altered_row(&def, &row, &env)?;
                }
            }
            RowChange::Rebuild(sources) => {
                def.storage = format!("t{}.{}", def.id, def.shape_version);
                self.rebuild_rows(&old, &def, &sources, version)?;
            }
        }
        for index in &old.indexes {
            if !def.indexes.iter().any(|i| i.id == index.id) {
                self.drop_storage(index.id, &index.storage)?;
            }
        }
        for &n in &added {
            self.build_index(&def, &def.indexes[n], None)?;
            catalog.unique_constraints.insert(def.indexes[n].id);
        }
        for shard in self.every_shard()? {
            shard.table_versions.insert(def.id, version);
        }
        catalog.tables.remove(&old.name);
        catalog.tables.insert(def.name.clone(), Arc::new(def));
        Ok(())
    }

    /// Adds `table` to `catalog` with its indexes, the sequences its columns own and its
    /// foreign keys, under new ids, and creates their storage. False (nothing done) when a
    /// relation has its name and `if_not_exists` is set.
    fn create_table(
        &mut self,
        catalog: &mut Catalog,
        mut table: TableDef,
        if_not_exists: bool,
        keys: TableKeys,
    ) -> SqlResult<bool> {
        let TableKeys {
            sequences,
            foreign_keys,
        } = keys;
        if if_not_exists && catalog.relation_exists(&table.name) {
            return Ok(false);
        }
        table.id = catalog.new_relation_id(&table.name)?;
        // Checked before any storage is made: a schema change fails whole.
        check_sequence_names(catalog, &sequences, Some(&table.name))?;
        table.storage = format!("t{}.{}", table.id, table.shape_version);
        self.create_storage(table.id, &table.storage, false)?;
        for index in &mut table.indexes {
            index.id = catalog.new_relation_id(&index.name)?;
            index.storage = format!("i{}", index.id);
            self.create_storage(index.id, &index.storage, !index.unique)?;
            // CREATE TABLE makes unique indexes only for its UNIQUE constraints.
            if index.unique {
                catalog.unique_constraints.insert(index.id);
            }
        }
        let id = table.id;
        catalog.tables.insert(table.name.clone(), Arc::new(table));
        for mut sequence in sequences {
            if let Some(owner) = &mut sequence.owner {
                owner.table = id;
            }
            self.create_sequence(catalog, sequence)?;
        }
        for mut fk in foreign_keys {
            fk.table = id;
            if fk.parent == plan::SELF_REFERENCE {
                fk.parent = id;
            }
            catalog.add_foreign_key(fk);
        }
        Ok(true)
    }

    /// Creates the kv table of a new SQL table or index in every partition; `buffered` (for
    /// a non-unique index, whose entries end with their row's key) with an insert buffer.
    fn create_storage(&mut self, id: u32, name: &str, buffered: bool) -> SqlResult<()> {
        for partition in 0..self.partitions() {
            let shard = self.shard(partition)?;
            let handle = create_kv_table(&mut shard.engine, name, buffered)?;
            shard.storage.insert(id, handle);
            self.note_created_storage(partition, id, name);
        }
        Ok(())
    }

    /// Drops the kv table of a SQL table or index from every partition.
    fn drop_storage(&mut self, id: u32, name: &str) -> SqlResult<()> {
        self.drop_kv_table_everywhere(name, Some(id))
    }

    /// CREATE INDEX: the index of `table` built from its rows (as `index.derivation` derives
    /// them, for a partial or expression index) and added to `catalog`; returns its id, or
    /// None (nothing done) when the name is taken and `if_not_exists` is set.
    fn create_index(
        &mut self,
        catalog: &mut Catalog,
        table: &TableRef,
        index: NewIndex,
    ) -> SqlResult<Option<u32>> {
        let NewIndex {
            name,
            columns,
            unique,
            if_not_exists,
            derivation,
        } = index;
        if catalog.relation_exists(&name) {
            if if_not_exists {
                return Ok(None);
            }
            return Err(SqlError::new(
                ErrorKind::DuplicateTable,
                format!("relation \"{name}\" already exists"),
            ));
        }
        let old = self.resolve(table)?;
        if unique {
            refuse_on_ledger_table(&old, "a unique index")?;
        }
        if crate::change_events::is_merged(&old) {
            // Each stored part of a row holds only some of its fields: an index of the
            // parts would not be an index of the rows.
            return Err(SqlError::feature_not_supported(format!(
                "an index on the ledger table \"{}\" (its rows are stored in parts)",
                old.name
            )));
        }
        let mut def = (*old).clone();
        let id = catalog.next_table_id + 1;
        catalog.next_table_id += 1;
        let index = plan::IndexDef {
            id,
            name,
            columns,
            unique,
            storage: format!("{}{id}", if derivation.is_some() { 'd' } else { 'i' }),
        };
        self.build_index(&old, &index, derivation.as_ref())?;
        if let Some(derivation) = derivation {
            catalog.index_derivations.insert(id, Arc::new(derivation));
        }
        def.indexes.push(index);
        def.shape_version += 1;
        catalog.tables.insert(def.name.clone(), Arc::new(def));
        Ok(Some(id))
    }

    fn build_index(
        &mut self,
        table: &TableDef,
        index: &plan::IndexDef,
        derivation: Option<&plan::IndexDerivation>,
    ) -> SqlResult<()> {
        self.fill_new_storage(
            table,
            (index.id, &index.storage, !index.unique),
            |row_key, row| {
                let mut entry = Vec::new();
                let value =
                    crate::executor::row_entry_into(index, derivation, row, row_key, &mut entry)?;
                Ok(value.map(|value| (entry, value.to_vec())))
            },
            |row| {
                SqlError::new(
                    ErrorKind::UniqueViolation,
                    format!("could not create unique index \"{}\"", index.name),
                )
                .with_detail(format!(
                    "{} is duplicated.",
                    key_description(table, &index.columns, row)
                ))
            },
        )
    }

    /// Copies every row of `old` into fresh storage keyed by `new`'s primary key, checking
    /// NOT NULL and uniqueness, then swaps the storage. On failure the new storage is dropped
    /// and `old` is untouched.
    fn rebuild_keyed(&mut self, old: &TableDef, new: &TableDef) -> SqlResult<()> {
        self.fill_new_storage(
            old,
            (new.id, &new.storage, false),
            |_, row| {
                if let Some(&c) = new.primary_key.iter().find(|&&c| row[c].is_null()) {
                    return Err(SqlError::new(
                        ErrorKind::NotNullViolation,
                        format!(
                            "column \"{}\" of relation \"{}\" contains null values",
                            new.columns[c].name, new.name
                        ),
                    ));
                }
                let key_values: Vec<Value> =
                    new.primary_key.iter().map(|&c| row[c].clone()).collect();
                let mut value = Vec::new();
                crate::row::encode_row(0, row, &mut value);
                Ok(Some((encode_key(&key_values)?, value)))
            },
            |row| {
                let mut e = duplicate_key(new, row);
                e.message = format!(
                    "could not create unique index \"{}\"",
                    new.primary_key_name.clone().unwrap_or_default()
                );
                e
            },
        )?;
        self.drop_kv_table_everywhere(&old.storage, None)
    }

    /// Whether `table` holds more than `count` rows (over all partitions), reading keys only
    /// until it knows.
    fn stored_rows_beyond(&mut self, table: &TableDef, count: usize) -> SqlResult<bool> {
        self.holds_every_shard()?;
        let mut seen = 0;
        for index in 0..self.partitions() {
            for item in every_entry(self.shard(index)?, table.id)? {
                item.map_err(kv_error)?;
                seen += 1;
                if seen > count {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// Every row of a table in every partition, with its storage key.
    fn every_row(&mut self, table: &TableDef) -> SqlResult<Vec<(Vec<u8>, Row)>> {
        self.holds_every_shard()?;
        let mut out = Vec::new();
        for index in 0..self.partitions() {
            out.extend(stored_rows(self.shard(index)?, table.id)?);
        }
        Ok(out)
    }

    /// ALTER TABLE's rewrite: every row of `old` rebuilt column by column from `sources`
    /// into `new`'s fresh storage under the same key, checked against `new`'s constraints;
    /// then the old storage goes. On failure nothing changes.
    fn rebuild_rows(
        &mut self,
        old: &TableDef,
        new: &TableDef,
        sources: &[ColumnSource],
        version: u64,
    ) -> SqlResult<()> {
        let env = EvalEnv::without_subqueries(&[], 0);
        let values: Vec<Option<Value>> = sources
            .iter()
            .zip(&new.columns)
            .map(|(source, column)| match source {
                ColumnSource::Old(_) | ColumnSource::Convert(_) => Ok(None),
                ColumnSource::Value(e) => Ok(Some(e.eval(&[], &env)?.cast(column.ty)?)),
            })
            .collect::<SqlResult<_>>()?;
        self.fill_new_storage(
            old,
            (new.id, &new.storage, false),
            |row_key, row| {
                let rebuilt: Row = sources
                    .iter()
                    .zip(&values)
                    .zip(&new.columns)
                    .map(|((source, value), column)| match (source, value) {
                        (ColumnSource::Old(i), _) => {
                            Ok(row.get(*i).cloned().unwrap_or(Value::Null))
                        }
                        (ColumnSource::Convert(e), _) => e.eval(row, &env)?.cast(column.ty),
                        (ColumnSource::Value(_), value) => Ok(value.clone().unwrap_or(Value::Null)),
                    })
                    .collect::<SqlResult<_>>()?;
                // A merged table's row is one account's part, the other side's columns NULL.
                if !crate::change_events::is_merged(new) {
                    check_altered_row(new, &rebuilt, &env)?;
                }
                let mut bytes = Vec::new();
                crate::row::encode_row(version, &rebuilt, &mut bytes);
                Ok(Some((row_key.to_vec(), bytes)))
            },
            |_| SqlError::internal("a row key repeated while a table was rebuilt"),
        )?;
        self.drop_kv_table_everywhere(&old.storage, None)
    }

    /// Creates kv table `name` in every partition, holding one entry per row of `source` (in
    /// the row's partition), made by `entry`, and registers it as the storage of `id`; a key
    /// already present fails with `duplicate`. On any failure the new tables are dropped
    /// again and the registration is left as it was.
    fn fill_new_storage(
        &mut self,
        source: &TableDef,
        (id, name, buffered): (u32, &str, bool),
        entry: impl Fn(&[u8], &Row) -> SqlResult<Option<(Vec<u8>, Vec<u8>)>>,
        duplicate: impl Fn(&Row) -> SqlError,
    ) -> SqlResult<()> {
        self.holds_every_shard()?;
        let mut created = Vec::with_capacity(self.partitions());
        let result = (|| -> SqlResult<()> {
            for index in 0..self.partitions() {
                let shard = self.shard(index)?;
                let rows = stored_rows(shard, source.id)?;
                let target = create_kv_table(&mut shard.engine, name, buffered)?;
                created.push(target);
                for (row_key, row) in &rows {
                    let Some((key, value)) = entry(row_key, row)? else {
                        continue;
                    };
                    if !shard
                        .engine
                        .insert(target, &key, &value)
                        .map_err(kv_error)?
                    {
                        return Err(duplicate(row));
                    }
                }
            }
            Ok(())
        })();
        match result {
            Ok(()) => {
                for (partition, target) in created.into_iter().enumerate() {
                    self.shard(partition)?.storage.insert(id, target);
                    self.note_created_storage(partition, id, name);
                }
                Ok(())
            }
            Err(e) => {
                for shard in self.every_shard()?.take(created.len()) {
                    shard.engine.drop_table(name).map_err(kv_error)?;
                }
                Err(e)
            }
        }
    }
}

/// Whether `new` is `old` with columns added at the end and nothing else changed but the
/// CHECK constraints: every row keeps its key, so its partition, and no index changes.
fn appends_columns(old: &TableDef, new: &TableDef) -> bool {
    new.columns.len() > old.columns.len()
        && new
            .columns
            .iter()
            .zip(&old.columns)
            .all(|(n, o)| n.name == o.name && n.ty == o.ty)
        && same_keys(old, new)
}

/// Whether `new` keeps `old`'s primary key and indexes.
fn same_keys(old: &TableDef, new: &TableDef) -> bool {
    new.primary_key == old.primary_key
        && new.indexes.len() == old.indexes.len()
        && new
            .indexes
            .iter()
            .zip(&old.indexes)
            .all(|(n, o)| n.id == o.id)
}

/// Whether `new` is ledger table `old` with some of its BIGINT amount or balance columns
/// widened to NUMERIC(39,0) and nothing else changed: every value stays the same number,
/// every row keeps its key and partition.
fn widens_amounts(old: &TableDef, new: &TableDef) -> bool {
    let Some(role) = old.ledger else {
        return false;
    };
    new.columns.len() == old.columns.len()
        && new.columns.iter().zip(&old.columns).all(|(n, o)| {
            n.name == o.name
                && (n.ty == o.ty
                    || (o.ty == DataType::Int8
                        && n.ty == plan::AMOUNT
                        && role.amount_field(&n.name)))
        })
        && same_keys(old, new)
}

/// DROP of catalog entries by name: every name must exist (unless IF EXISTS) before any
/// goes.
fn drop_named<T>(
    entries: &mut std::collections::BTreeMap<String, T>,
    names: &[String],
    if_exists: bool,
    missing: impl Fn(&str) -> SqlError,
) -> SqlResult<()> {
    if let Some(n) = names
        .iter()
        .find(|n| !entries.contains_key(*n) && !if_exists)
    {
        return Err(missing(n));
    }
    for n in names {
        entries.remove(n);
    }
    Ok(())
}

/// New sequences' names, checked before anything is created (a schema change fails whole):
/// none may be taken, or be `also` (a table created with them).
fn check_sequence_names(
    catalog: &Catalog,
    sequences: &[plan::SequenceDef],
    also: Option<&str>,
) -> SqlResult<()> {
    for (i, s) in sequences.iter().enumerate() {
        if catalog.relation_exists(&s.name)
            || also == Some(s.name.as_str())
            || sequences[..i].iter().any(|t| t.name == s.name)
        {
            return Err(SqlError::new(
                ErrorKind::DuplicateTable,
                format!("relation \"{}\" already exists", s.name),
            ));
        }
    }
    Ok(())
}

/// Every row a partition holds of relation `id`, with its storage key.
fn stored_rows(shard: &mut Shard, id: u32) -> SqlResult<Vec<(Vec<u8>, Row)>> {
    every_entry(shard, id)?
        .map(|item| {
            let (key, bytes) = item.map_err(kv_error)?;
            Ok((key, crate::row::decode_row(&bytes)?.1))
        })
        .collect()
}

/// Every kv entry of relation `id` in a partition, in key order.
fn every_entry(shard: &mut Shard, id: u32) -> SqlResult<kv::Range<'_>> {
    let handle = shard.handle(id)?;
    crate::partition::entries(shard, handle)
}

/// A table a view reads can be neither dropped nor altered (PostgreSQL would need CASCADE,
/// or check the view's columns).
fn refuse_if_viewed(catalog: &Catalog, table: &TableDef, what: &str) -> SqlResult<()> {
    match catalog.views_reading(table.id).next() {
        Some(view) => Err(SqlError::new(
            ErrorKind::DependentObjectsStillExist,
            format!(
                "cannot {what} table {} because other objects depend on it",
                table.name
            ),
        )
        .with_detail(format!(
            "view {} depends on table {}",
            view.name, table.name
        ))),
        None => Ok(()),
    }
}

/// A stored row against a table's altered definition, failing as PostgreSQL's ALTER TABLE
/// does: a column that must not be NULL, a CHECK some row breaks.
fn check_altered_row(table: &TableDef, row: &[Value], env: &EvalEnv<'_>) -> SqlResult<()> {
    match violation(table, row, env)? {
        None => Ok(()),
        Some(Violation::NotNull(column)) => Err(SqlError::new(
            ErrorKind::NotNullViolation,
            format!(
                "column \"{column}\" of relation \"{}\" contains null values",
                table.name
            ),
        )),
        Some(Violation::Check(check)) => Err(SqlError::new(
            ErrorKind::CheckViolation,
            format!(
                "check constraint \"{check}\" of relation \"{}\" is violated by some row",
                table.name
            ),
        )),
    }
}

/// Refuses to drop `table` while a foreign key of a table not dropped with it (`dropped`)
/// references it.
fn refuse_if_referenced(catalog: &Catalog, table: &TableDef, dropped: &[u32]) -> SqlResult<()> {
    match catalog
        .references_to(table.id)
        .find(|f| !dropped.contains(&f.table))
    {
        Some(fk) => Err(dependent_foreign_key(
            catalog,
            fk,
            &format!("drop table {}", table.name),
            &table.name,
        )),
        None => Ok(()),
    }
}

/// Checks that `table`'s new definition keeps every foreign key it takes part in: its own
/// columns, and the referenced columns with their primary key or unique index.
fn foreign_keys_hold(catalog: &Catalog, table: &TableDef, doing: &str) -> SqlResult<()> {
    for fk in catalog.foreign_keys_of(table.id) {
        plan::ForeignKeyDef::positions(table, &fk.columns)
            .map_err(|_| dependent_foreign_key(catalog, fk, doing, &table.name))?;
    }
    for fk in catalog.references_to(table.id) {
        fk.check_parent_key(table)
            .map_err(|_| dependent_foreign_key(catalog, fk, doing, &table.name))?;
    }
    Ok(())
}

fn dependent_foreign_key(
    catalog: &Catalog,
    fk: &plan::ForeignKeyDef,
    doing: &str,
    what: &str,
) -> SqlError {
    let child = catalog
        .table_by_id(fk.table)
        .map(|t| t.name.clone())
        .unwrap_or_default();
    SqlError::new(
        ErrorKind::DependentObjectsStillExist,
        format!("cannot {doing} because other objects depend on it"),
    )
    .with_detail(format!(
        "constraint {} on table {child} depends on table {what}",
        fk.name
    ))
}

/// A new kv table, with an insert buffer when `buffered` (`kv::Engine::create_buffered_table`).
pub(crate) fn create_kv_table(
    engine: &mut kv::Engine,
    name: &str,
    buffered: bool,
) -> SqlResult<kv::Table> {
    match buffered {
        true => engine.create_buffered_table(name),
        false => engine.create_table(name),
    }
    .map_err(kv_error)
}
