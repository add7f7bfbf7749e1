//! The write path: a write outside a transaction proposed as one command (its rows built
//! here when they can be), inside one staged on the executor and kept for COMMIT; schema
//! changes; stored procedures, `create_transfers` and `create_accounts`.

use super::*;

impl Session {
    /// `create_transfers` or `create_accounts`: the arrays evaluated here and turned into
    /// rows, applied as one command with an outcome per event.
    pub(super) async fn ledger_batch(
        &mut self,
        batch: &LedgerBatchPlan,
        params: &[Value],
    ) -> SqlResult<StatementResult> {
        self.refuse_if_read_only("CALL")?;
        self.refuse_in_transaction(
            batch.procedure,
            "each of its chains is a transaction of its own",
        )?;
        let now = now_micros();
        let (columns, rows, linked) = {
            let env = EvalEnv::without_subqueries(params, now);
            let array = |e: &Expr| -> SqlResult<Vec<Value>> {
                match e.eval(&[], &env)? {
                    Value::Array(items) => Ok(items),
                    Value::Null => Ok(Vec::new()),
                    other => Err(SqlError::mismatch(format!(
                        "{} takes arrays, not {other:?}",
                        batch.procedure
                    ))),
                }
            };
            let mut columns = Vec::with_capacity(batch.columns.len());
            let mut arrays = Vec::with_capacity(batch.columns.len());
            for (column, e) in &batch.columns {
                columns.push(*column);
                arrays.push(array(e)?);
            }
            let linked = match &batch.linked {
                Some(e) => array(e)?,
                None => Vec::new(),
            };
            let count = arrays.iter().map(Vec::len).max().unwrap_or(0);
            let lengths_differ = arrays.iter().any(|a| a.len() != count)
                || (batch.linked.is_some() && linked.len() != count);
            if lengths_differ {
                return Err(SqlError::new(
                    ErrorKind::InvalidParameterValue,
                    format!(
                        "{}: every array must have one element per event (the arrays have different lengths)",
                        batch.procedure
                    ),
                ));
            }
            let mut rows: Vec<Row> = (0..count)
                .map(|_| Vec::with_capacity(arrays.len()))
                .collect();
            for array in arrays {
                for (row, value) in rows.iter_mut().zip(array) {
                    row.push(value);
                }
            }
            let linked: Vec<bool> = linked
                .into_iter()
                .map(|v| matches!(v, Value::Bool(true)))
                .collect();
            (columns, rows, linked)
        };
        let outcome = self
            .propose(&Command::LedgerBatch {
                table: batch.table.clone(),
                columns,
                rows,
                linked,
                now_micros: now,
            })
            .await?;
        Ok(StatementResult::Rows {
            columns: plan::ledger_batch_columns(),
            rows: outcome.rows,
            tag: "CALL".into(),
        })
    }

    /// A stored procedure: its arguments evaluated here, its body applied as one command.
    /// Outside a transaction, the body is applied as one command; inside one (a block, or
    /// several statements before a Sync or in one query string) its statements run in the
    /// transaction one after another, as PostgreSQL runs them, staged like the client's own.
    pub(super) async fn call(
        &mut self,
        call: &CallPlan,
        params: &[Value],
    ) -> SqlResult<StatementResult> {
        let now = self.statement_time();
        let args = {
            let env = EvalEnv::without_subqueries(params, now);
            call.args
                .iter()
                .map(|a| a.eval(&[], &env))
                .collect::<SqlResult<Vec<Value>>>()?
        };
        let rows = if self.transaction.is_some() {
            self.call_in_transaction(&call.steps, &args).await?
        } else {
            if call.steps.iter().any(|s| matches!(s, plan::Step::Write(_))) {
                self.refuse_if_read_only("CALL")?;
            }
            let command = Command::Procedure {
                steps: call.steps.clone(),
                params: args,
                now_micros: now,
            };
            self.propose(&command).await?.rows
        };
        if call.columns.is_empty() {
            return Ok(StatementResult::Command("CALL".into()));
        }
        Ok(StatementResult::Rows {
            columns: call.columns.clone(),
            rows,
            tag: "CALL".into(),
        })
    }

    /// A procedure's body run in the open transaction: the last statement's rows.
    pub(super) async fn call_in_transaction(
        &mut self,
        steps: &[plan::Step],
        args: &[Value],
    ) -> SqlResult<Vec<Row>> {
        let mut last = Vec::new();
        for step in steps {
            last = match step {
                plan::Step::Write(plan) => {
                    self.refuse_if_read_only("CALL")?;
                    self.stage(plan.clone(), args).await?.1
                }
                plan::Step::Query(plan) => self.select(plan, args).await?,
            };
        }
        Ok(last)
    }

    /// A write outside a transaction block: proposed as one command, its INSERT ... VALUES
    /// rows built here when they can be (`ledger::prebuild_insert`), its sequence calls with
    /// this session's values; one that draws random values and cannot be built here goes
    /// through a transaction of its own.
    pub(super) async fn write_alone(
        &mut self,
        plan: &Arc<WritePlan>,
        params: &[Value],
    ) -> SqlResult<(u64, Vec<Row>)> {
        let now = now_micros();
        let catalog = self.shared.executor.catalog();
        let table = catalog.table_by_id(plan.table().id);
        let calls = |which| table.is_some_and(|t| plan::write_calls(plan, t, which));
        let sequences = !catalog.sequences.is_empty() && calls(Func::uses_sequences);
        let draws_random = calls(Func::draws_random);
        // Only an INSERT ... VALUES can be prebuilt.
        let values = matches!(
            plan.as_ref(),
            WritePlan::Insert(InsertPlan {
                source: InsertSource::Values(_),
                ..
            })
        );
        let prebuilt = (values && !sequences)
            .then(|| ledger::prebuild_insert(plan, &catalog, params, now))
            .flatten()
            .transpose()?;
        let command = match prebuilt {
            Some(prebuilt) => Command::Write {
                // Built rows hold their values: only ON CONFLICT and RETURNING could still
                // read a parameter (a 1,000-row INSERT's 6,000 parameters would otherwise
                // travel in the log and be decoded by the executor for nothing).
                params: match &prebuilt {
                    WritePlan::Insert(p) if p.on_conflict.is_none() && p.returning.is_none() => {
                        Vec::new()
                    }
                    _ => params.to_vec(),
                },
                plan: Arc::new(prebuilt),
                now_micros: now,
            },
            None if draws_random => return self.write_in_own_transaction(plan, params).await,
            None if sequences => Command::WriteWithSequences {
                plan: plan.clone(),
                params: params.to_vec(),
                now_micros: now,
                session: self.sequences.clone(),
            },
            None => Command::Write {
                plan: plan.clone(),
                params: params.to_vec(),
                now_micros: now,
            },
        };
        let outcome = self.propose(&command).await?;
        Ok((outcome.rows_affected, outcome.rows))
    }

    /// A write outside a transaction block that draws random values and cannot be built
    /// before it is proposed (an INSERT ... SELECT, defaults that also call `nextval`):
    /// staged as a transaction of its own, so its rows are drawn once on the executor and
    /// the commit carries them to every replica, then committed at once. Its reads are
    /// not validated (READ COMMITTED), as a statement on its own reads one snapshot.
    pub(super) async fn write_in_own_transaction(
        &mut self,
        plan: &Arc<WritePlan>,
        params: &[Value],
    ) -> SqlResult<(u64, Vec<Row>)> {
        let own = Transaction::new(Block::Query, Isolation::ReadCommitted, false);
        self.transaction = Some(own);
        let staged = self.stage(plan.clone(), params).await;
        let own = self.transaction.take();
        match (staged, own) {
            (Ok(staged), Some(own)) => self.commit_transaction(own).await.map(|_| staged),
            (Ok(_), None) => Err(SqlError::internal("a statement's own transaction vanished")),
            (Err(e), _) => Err(e),
        }
    }

    pub(super) async fn stage(
        &mut self,
        plan: Arc<WritePlan>,
        params: &[Value],
    ) -> SqlResult<(u64, Vec<Row>)> {
        let catalog = self.catalog();
        let plan = match catalog.table_by_id(plan.table().id) {
            Some(table) => self.with_source_rows(plan, table, params).await?,
            None => plan,
        };
        let now = self.statement_time();
        let mut sequences = ledger::StatementValues {
            session: self.sequences.clone(),
            allocated: BTreeMap::new(),
        };
        if let Some(table) = catalog.table_by_id(plan.table().id) {
            let overlay_len = self.overlay().map(|o| o.len()).unwrap_or(0);
            let staged_so_far = (overlay_len, self.staged_bytes());
            if let Some(local) =
                ledger::stage_insert_locally(&plan, table, params, now, staged_so_far)
            {
                return self.absorb(local?);
            }
            if plan::write_calls(&plan, table, Func::advances_sequences) {
                sequences.allocated = self
                    .allocate_sequence_values(&plan, table, &catalog)
                    .await?;
            }
        }
        // After the sequence values are allocated: the transaction's own sequences' states
        // travel with its schema changes.
        let context = self.statement_context(params)?;
        // A point UPDATE or DELETE is staged here, on the view the executor published while
        // idle, when no entry has begun since: the state the executor would stage it on,
        // without the hop there and back.
        let on_view = ledger::stages_on_view(&plan, &context);
        if let Some(view) = on_view
            .then(|| self.shared.executor.current_view())
            .flatten()
        {
            if let Some(staged) = ledger::stage_on_view(&view, &plan, &context) {
                return self.absorb(staged?);
            }
        }
        let staged: Staged = self
            .ask(move |reply| Request::Stage {
                plan,
                context,
                sequences,
                reply,
            })
            .await??;
        self.absorb(staged)
    }

    /// An `INSERT ... SELECT` whose defaults call `nextval` (SQLAlchemy's many-row INSERT
    /// of a SERIAL table), with the SELECT's rows read now, so the statement knows how many
    /// values to allocate before it is staged; other statements as they are.
    pub(super) async fn with_source_rows(
        &mut self,
        plan: Arc<WritePlan>,
        table: &TableDef,
        params: &[Value],
    ) -> SqlResult<Arc<WritePlan>> {
        let WritePlan::Insert(insert) = plan.as_ref() else {
            return Ok(plan);
        };
        let InsertSource::Query(rel) = &insert.source else {
            return Ok(plan);
        };
        if plan::rel_calls(rel, Func::advances_sequences)
            || !plan::write_calls(&plan, table, Func::advances_sequences)
        {
            return Ok(plan);
        }
        let query = Arc::new(SelectPlan {
            rel: (**rel).clone(),
            columns: Vec::new(),
            reads_user_tables: true,
        });
        let rows = self.select(&query, params).await?;
        let mut insert = insert.clone();
        insert.source = InsertSource::Values(
            rows.into_iter()
                .map(|row| row.into_iter().map(Expr::literal).collect())
                .collect(),
        );
        Ok(Arc::new(WritePlan::Insert(insert)))
    }

    /// The values a staged statement's `nextval` calls will take, allocated now through
    /// the log (so they are never handed out twice, as PostgreSQL's are not, whether or
    /// not the transaction commits).
    pub(super) async fn allocate_sequence_values(
        &mut self,
        plan: &WritePlan,
        table: &plan::TableDef,
        catalog: &plan::Catalog,
    ) -> SqlResult<BTreeMap<u32, VecDeque<i64>>> {
        let calls = plan::nextval_calls(plan, table, catalog)?;
        let setval = plan::write_calls(plan, table, |f| f == Func::SetVal);
        let Some(calls) = calls.filter(|_| !setval) else {
            return Err(SqlError::feature_not_supported(
                "nextval() or setval() inside a transaction block other than in INSERT ... VALUES, INSERT ... SELECT (whose SELECT does not call them) or a SELECT that reads no table",
            ));
        };
        // A sequence this transaction made exists for it alone until COMMIT: its values are
        // drawn here, and its state goes into the COMMIT. The others' come from the log.
        let shared = self.shared.executor.catalog();
        let oid = |id: u32| Value::Int((plan::FIRST_USER_OID + id) as i64);
        let mut allocated: BTreeMap<u32, VecDeque<i64>> = BTreeMap::new();
        let mut from_log = Vec::new();
        for (id, n) in calls {
            if shared.sequence_named(&oid(id)).is_ok() {
                from_log.push((id, n as u64));
                continue;
            }
            let sequence = catalog.sequence_named(&oid(id))?;
            let Some(t) = &mut self.transaction else {
                return Err(SqlError::internal(
                    "a transaction's own sequence outside it",
                ));
            };
            let mut state = t
                .own_sequences
                .get(&id)
                .copied()
                .unwrap_or_else(|| sequence.initial_state());
            let values = allocated.entry(id).or_default();
            for _ in 0..n {
                state = sequence.next(state)?;
                values.push_back(state.last);
            }
            t.own_sequences.insert(id, state);
        }
        if from_log.is_empty() {
            return Ok(allocated);
        }
        let outcome = self
            .propose(&Command::AllocateSequenceValues {
                sequences: from_log,
            })
            .await?;
        for row in outcome.rows {
            if let [Value::Int(id), Value::Int(value)] = row.as_slice() {
                allocated.entry(*id as u32).or_default().push_back(*value);
            }
        }
        Ok(allocated)
    }

    /// Adds a staged statement's writes, overlay rows and reads to the transaction.
    /// Returns what the statement reports: rows affected and RETURNING rows.
    pub(super) fn absorb(&mut self, staged: Staged) -> SqlResult<(u64, Vec<Row>)> {
        let Some(t) = &mut self.transaction else {
            return Err(SqlError::internal("staging outside a transaction"));
        };
        let overlay = Arc::make_mut(&mut t.overlay);
        overlay.extend(staged.overlay);
        t.reads.extend(staged.reads);
        t.ops.extend(staged.ops);
        t.staged_bytes += staged.bytes;
        self.sequences.absorb(&staged.sequences);
        Ok((staged.rows_affected, staged.rows))
    }

    pub(super) async fn write(
        &mut self,
        plan: &Arc<WritePlan>,
        columns: &[OutputColumn],
        params: &[Value],
    ) -> SqlResult<StatementResult> {
        self.refuse_if_read_only(plan.verb())?;
        let (affected, rows) = match &self.transaction {
            Some(_) => self.stage(plan.clone(), params).await?,
            None => self.write_alone(plan, params).await?,
        };
        let verb = plan.verb();
        if plan.returning().is_some() || verb == "CALL" {
            let tag = if verb == "INSERT" {
                "INSERT 0".to_string()
            } else {
                verb.to_string()
            };
            return Ok(StatementResult::Rows {
                columns: columns.to_vec(),
                rows,
                tag,
            });
        }
        Ok(StatementResult::Command(match verb {
            "INSERT" => format!("INSERT 0 {affected}"),
            other => format!("{other} {affected}"),
        }))
    }

    pub(super) async fn ddl(&mut self, ddl: &DdlPlan) -> SqlResult<StatementResult> {
        let tag = ddl_tag(ddl);
        if let DdlPlan::Roles(plan) = ddl {
            self.check_role_change(plan)?;
        }
        self.refuse_if_read_only(tag)?;
        if self.transaction.is_some() {
            let DdlPlan::Truncate { tables } = ddl else {
                let plan = with_constants_bound(ddl)?;
                self.plan_schema_change(plan).await?;
                return Ok(StatementResult::Command(tag.into()));
            };
            // Inside a transaction TRUNCATE deletes the rows it sees, so it commits or rolls
            // back with the rest of the transaction.
            for table in tables {
                let plan = WritePlan::Delete(plan::DeletePlan {
                    table: table.clone(),
                    access: plan::Access::Full,
                    filter: None,
                    returning: None,
                });
                self.stage(Arc::new(plan), &[]).await?;
            }
            return Ok(StatementResult::Command(tag.into()));
        }
        let plan = with_constants_bound(ddl)?;
        self.propose(&Command::Ddl { plan }).await?;
        Ok(StatementResult::Command(tag.into()))
    }
}

/// The command tag a schema change answers with.
fn ddl_tag(ddl: &DdlPlan) -> &'static str {
    match ddl {
        DdlPlan::CreateTable { .. } => "CREATE TABLE",
        DdlPlan::DropTables { .. } => "DROP TABLE",
        DdlPlan::Truncate { .. } => "TRUNCATE TABLE",
        DdlPlan::AddPrimaryKey { .. } => "ALTER TABLE",
        DdlPlan::CreateIndex { .. } | DdlPlan::CreateDerivedIndex { .. } => "CREATE INDEX",
        DdlPlan::DropIndexes { .. } => "DROP INDEX",
        DdlPlan::CreateProcedure { .. } => "CREATE PROCEDURE",
        DdlPlan::DropProcedures { .. } => "DROP PROCEDURE",
        DdlPlan::AlterTable { .. } => "ALTER TABLE",
        DdlPlan::CreateView { .. } => "CREATE VIEW",
        DdlPlan::DropViews { .. } => "DROP VIEW",
        DdlPlan::CreateEnum { .. } => "CREATE TYPE",
        DdlPlan::AlterEnum { .. } => "ALTER TYPE",
        DdlPlan::DropEnums { .. } => "DROP TYPE",
        DdlPlan::CreateSequence { .. } => "CREATE SEQUENCE",
        DdlPlan::DropSequences { .. } => "DROP SEQUENCE",
        DdlPlan::AlterSequence { .. } => "ALTER SEQUENCE",
        DdlPlan::WithSequences { ddl, .. } => match ddl.as_ref() {
            DdlPlan::CreateTable { .. } => "CREATE TABLE",
            _ => "ALTER TABLE",
        },
        DdlPlan::WithForeignKeys { .. } => "CREATE TABLE",
        DdlPlan::AddForeignKey { .. }
        | DdlPlan::DropForeignKey { .. }
        | DdlPlan::AddUniqueConstraint { .. } => "ALTER TABLE",
        DdlPlan::Roles(plan) => plan.tag(),
        DdlPlan::Owned { ddl, .. } => ddl_tag(ddl),
    }
}

/// A schema change as proposed: an added column's default is computed once, here, so
/// `now()` is this statement's time on every replica.
pub(super) fn with_constants_bound(ddl: &DdlPlan) -> SqlResult<DdlPlan> {
    let mut plan = ddl.clone();
    let alter = match &mut plan {
        DdlPlan::WithSequences { ddl, .. } => ddl.as_mut(),
        other => other,
    };
    if let DdlPlan::AlterTable {
        rows: plan::RowChange::Rebuild(sources),
        ..
    } = alter
    {
        let now = now_micros();
        for source in sources {
            if let plan::ColumnSource::Value(e) = source {
                *e = e.bind_constants(&[], now)?;
            }
        }
    }
    Ok(plan)
}
