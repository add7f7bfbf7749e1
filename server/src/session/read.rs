//! The read path: a query evaluated in the session when it reads no table, else on the
//! executor against the transaction's overlay; one that calls `nextval` goes through the log.

use super::*;
use crate::read_threads;

impl Session {
    pub(super) fn overlay(&self) -> Option<Arc<Overlay>> {
        self.transaction
            .as_ref()
            .filter(|t| !t.overlay.is_empty())
            .map(|t| t.overlay.clone())
    }

    /// What a statement runs with on the executor: its parameters and time, and the open
    /// transaction's writes so far, schema changes and whether its reads are recorded.
    pub(super) fn statement_context(&self, params: &[Value]) -> SqlResult<StatementContext> {
        Ok(StatementContext {
            params: params.to_vec(),
            now_micros: self.statement_time(),
            overlay: self.overlay(),
            record_reads: self.record_reads(),
            schema: self.schema_changes()?,
            interrupt: self.interrupt.clone(),
            staged_bytes: self.staged_bytes(),
        })
    }

    /// The bytes the open transaction's staged writes take in the log's encoding.
    pub(super) fn staged_bytes(&self) -> usize {
        self.transaction.as_ref().map_or(0, |t| t.staged_bytes)
    }

    /// Whether the statement's reads are recorded to be checked at COMMIT: every read of a
    /// SERIALIZABLE transaction, and in any transaction block those of SELECT ... FOR
    /// UPDATE/FOR SHARE. Rows are not locked: instead a transaction whose locking read
    /// another transaction has changed since fails at COMMIT (40001), so two transactions
    /// that read the same row FOR UPDATE and then change it cannot both commit.
    pub(super) fn record_reads(&self) -> bool {
        self.transaction
            .as_ref()
            .is_some_and(|t| t.isolation == Isolation::Serializable || self.locking_read)
    }

    pub(super) async fn select(
        &mut self,
        plan: &Arc<SelectPlan>,
        params: &[Value],
    ) -> SqlResult<Vec<Row>> {
        if plan::rel_calls(&plan.rel, Func::advances_sequences) {
            return self.select_advancing_sequences(plan, params).await;
        }
        // The views of the session's own state are evaluated here, on a copy of the catalog
        // that carries it.
        let reads = |t| plan::reads_system_table(&plan.rel, t);
        use plan::SystemTable as T;
        let sessions = reads(T::HotledgerSessions);
        let activity = reads(T::PgStatActivity) || sessions;
        let statements = reads(T::PgPreparedStatements);
        let cluster = reads(T::HotledgerCluster);
        let node = sessions
            || [
                T::HotledgerMetrics,
                T::HotledgerLatency,
                T::HotledgerThroughput,
                T::HotledgerCheckpoints,
                T::HotledgerHotAccounts,
            ]
            .into_iter()
            .any(reads);
        if (activity || statements || cluster || node) && plan.reads_user_tables {
            let view = if activity {
                "pg_stat_activity"
            } else if statements {
                "pg_prepared_statements"
            } else if cluster {
                "hotledger.cluster"
            } else {
                "the hotledger schema's views of the node"
            };
            return Err(SqlError::feature_not_supported(format!(
                "{view} in a query that also reads tables"
            )));
        }
        if !plan.reads_user_tables {
            let mut catalog = self.catalog();
            if activity || statements || cluster || node {
                let mut with_session = (*catalog).clone();
                if activity {
                    with_session.activity = Arc::new(self.visible_activity(&catalog));
                }
                if node {
                    with_session.node = Arc::new(super::node_views::gather(&self.shared).await?);
                }
                if statements {
                    with_session.prepared_statements = Arc::new(self.statements.listing());
                }
                if cluster {
                    with_session.cluster = Arc::new(self.cluster_members().await);
                }
                catalog = Arc::new(with_session);
            }
            return self.evaluate_here(plan, catalog, params).await;
        }
        let context = self.statement_context(params)?;
        let result = match self.select_off_executor(plan, &context).await? {
            Some(result) => result,
            None => {
                let (plan, sequences) = (plan.clone(), self.sequences.clone());
                self.ask(move |reply| Request::Query {
                    plan,
                    context,
                    sequences,
                    reply,
                })
                .await??
            }
        };
        if let Some(t) = &mut self.transaction {
            t.reads.extend(result.reads);
        }
        Ok(result.rows)
    }

    /// A query that reads more than rows by key runs on a snapshot of the partitions
    /// (`ledger::ReadView`), on a read thread (`read_threads`): the executor only takes the
    /// snapshot and goes on applying commands. A point read runs here, on the session's
    /// thread, on the view the executor published while idle, when no entry has begun
    /// since. None when it is run on the executor instead: a point read without a current
    /// view, a transaction's own schema changes to see, or relation sizes.
    async fn select_off_executor(
        &self,
        plan: &Arc<SelectPlan>,
        context: &StatementContext,
    ) -> SqlResult<Option<QueryResult>> {
        if context.schema.is_some() || plan::rel_calls(&plan.rel, Func::reads_storage) {
            return Ok(None);
        }
        if plan::reads_by_key_only(&plan.rel) {
            // A point read: here, on the view the executor published while idle, if no
            // entry has begun since; else the hop to the executor is quicker than a
            // snapshot.
            return match self.shared.executor.current_view() {
                Some(view) => ledger::query_on_view(&view, plan, context, self.sequences.clone()),
                None => Ok(None),
            };
        }
        let view = self.ask(|reply| Request::ReadView { reply }).await??;
        let (plan, context) = (plan.clone(), context.clone());
        let sequences = self.sequences.clone();
        let (result, view) = read_threads::run(&self.interrupt, move || {
            (
                ledger::query_on_view(&view, &plan, &context, sequences),
                view,
            )
        })
        .await
        .map_err(|e| SqlError::internal(format!("a query on a snapshot failed: {e}")))?;
        // Let go of here, at normal priority (see `read_threads`).
        drop(view);
        result
    }

    /// A query calling `nextval` or `setval` runs in log order, as a write does.
    pub(super) async fn select_advancing_sequences(
        &mut self,
        plan: &Arc<SelectPlan>,
        params: &[Value],
    ) -> SqlResult<Vec<Row>> {
        self.refuse_if_read_only("nextval()")?;
        if self.transaction.is_some() {
            // Applied in log order, the query reads what is committed: what a READ COMMITTED
            // statement may see, unless the transaction has writes of its own to see.
            if plan.reads_user_tables && (self.overlay().is_some() || self.record_reads()) {
                return Err(SqlError::feature_not_supported(
                    "nextval() or setval() in a query that reads tables inside a transaction block that has written or is SERIALIZABLE",
                ));
            }
        }
        if self
            .transaction
            .as_ref()
            .is_some_and(|t| t.schema.is_some())
        {
            if !plan.reads_user_tables {
                return self.select_own_sequences(plan, params);
            }
            return Err(SqlError::feature_not_supported(
                "nextval() or setval() in a SELECT that reads tables inside a transaction block that changed the schema",
            ));
        }
        let outcome = self
            .propose(&Command::QueryWithSequences {
                plan: plan.clone(),
                params: params.to_vec(),
                now_micros: self.statement_time(),
                session: self.sequences.clone(),
            })
            .await?;
        Ok(outcome.rows)
    }

    /// A query that reads no table, evaluated in the session: inline when it is a row of
    /// values, else on a blocking worker, so a long one (a large series, a join of them)
    /// leaves the session thread to the other sessions on it. Either way it stops when the
    /// statement's interrupt is raised.
    async fn evaluate_here(
        &self,
        plan: &Arc<SelectPlan>,
        catalog: Arc<Catalog>,
        params: &[Value],
    ) -> SqlResult<Vec<Row>> {
        let now = self.statement_time();
        if !plan::may_run_long(&plan.rel) {
            let signals = crate::activity::SignalsFrom {
                activity: &self.shared.activity,
                catalog: &catalog,
                role: self.role(),
            };
            return ledger::evaluate_without_storage(
                plan,
                &catalog,
                params,
                now,
                &self.sequences,
                &signals,
                &self.interrupt,
            );
        }
        let (plan, params) = (plan.clone(), params.to_vec());
        let (sequences, shared) = (self.sequences.clone(), self.shared.clone());
        let (interrupt, role) = (self.interrupt.clone(), self.role());
        read_threads::run(&self.interrupt, move || {
            let signals = crate::activity::SignalsFrom {
                activity: &shared.activity,
                catalog: &catalog,
                role,
            };
            ledger::evaluate_without_storage(
                &plan, &catalog, &params, now, &sequences, &signals, &interrupt,
            )
        })
        .await
        .map_err(|e| SqlError::internal(format!("a query's evaluation failed: {e}")))?
    }
}

impl Session {
    /// `pg_stat_activity` as this session's role may see it: what a session of another
    /// role runs (its query, state and times) is a superuser's, or a member of that role's,
    /// to see; the rest shows `<insufficient privilege>`, as in PostgreSQL.
    fn visible_activity(&self, catalog: &Catalog) -> Vec<plan::SessionActivity> {
        let auth = &catalog.authorization;
        let role = self.role();
        let superuser = auth.is_superuser(role);
        let mine = auth.privileged_as(role);
        let mut sessions = self.shared.activity.snapshot();
        for s in &mut sessions {
            let visible = superuser || auth.role(&s.user).is_some_and(|r| mine.contains(&r.oid));
            if !visible {
                s.query = "<insufficient privilege>".into();
                s.state.clear();
                s.client_addr = None;
                s.client_port = None;
                s.xact_start = None;
                s.query_start = None;
            }
        }
        sessions
    }

    /// `hotledger.cluster`'s rows: the replication group as this node sees it.
    async fn cluster_members(&self) -> Vec<plan::ClusterMember> {
        let number = |n: Option<u64>| n.map(|n| n as i64);
        self.shared
            .cluster_status
            .members()
            .await
            .into_iter()
            .map(|m| plan::ClusterMember {
                node_id: m.node_id as i64,
                role: m.role.to_string(),
                voter: m.voter,
                pg_addr: m.pg_addr,
                raft_addr: m.raft_addr,
                term: number(m.term),
                last_log_index: number(m.last_log_index),
                committed_index: number(m.committed_index),
                applied_index: number(m.applied_index),
                lag_entries: number(m.lag_entries),
                reachable: m.reachable,
                is_self: m.is_self,
            })
            .collect()
    }
}
