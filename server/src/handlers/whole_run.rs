//! A prepared statement's whole run answered in one step: Bind of the unnamed portal,
//! optionally Describe of it, Execute of all its rows and Sync, arriving together — what
//! libpq's `PQexecPrepared` and `PQexecParams` send for every statement, and so every
//! statement of `pgbench -M prepared`. Through pgwire's dispatch the four messages cost a
//! portal (its parameters copied, stored, looked up, its state locked), a response stream,
//! four locks of the session and four dispatches; a point read spends more on those than
//! on its read. Here the session is locked once, the parameters are decoded from the Bind
//! itself, and the replies are encoded as the rows come.
//!
//! The run is the same statement run the messages one by one get (`Session::execute`,
//! with its activity, timeouts, cancel and metrics), and its replies are the same bytes,
//! errors included: an error at Bind answers with the error and ReadyForQuery, one at
//! Execute after BindComplete (and the description). The statements taken are SELECT,
//! INSERT, UPDATE, DELETE, CALL, BEGIN, COMMIT and ROLLBACK, alone or in a transaction
//! block that has not failed — what `pgbench -M prepared` sends, TPC-B's block included;
//! anything else goes through the messages one by one (`run_whole` answers false and
//! sends nothing).

use super::*;

/// What the connection loop found after a Bind of the unnamed portal: whether a Describe of
/// that portal came between it and the Execute (of all rows) and Sync that follow.
pub struct WholeRun {
    pub describe: bool,
}

impl Connection {
    /// Answers `bind` and the messages `run` describes, through ReadyForQuery; false (having
    /// sent and changed nothing) when they are for the messages one by one instead. Errors
    /// are only the socket's.
    pub async fn run_whole<C>(
        &self,
        client: &mut C,
        bind: &Bind,
        run: WholeRun,
    ) -> PgWireResult<bool>
    where
        C: Client,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let handle = client.session_extensions().get::<Arc<ConnectionHandle>>();
        let mut session = self.session_for(client).await;
        let Some(prepared) = statement_to_run_whole(&session, client, bind) else {
            return Ok(false);
        };
        // The unnamed portal this Bind replaces is gone, as it would be.
        client.portal_store().rm_portal(pgwire::api::DEFAULT_NAME);
        // Parameters are checked before anything is sent, as Bind checks them.
        let decoded = check_formats(bind, &prepared).and_then(|(params, results)| {
            let values = decode_bound(&bind.parameters, &params, &prepared.bound)?;
            Ok((params, results, values))
        });
        let (params_format, results_format, values) = match decoded {
            Ok(decoded) => decoded,
            Err(e) => {
                session.statement_failed();
                let sync = end_at_sync(session).await;
                client.feed(error_message(&e)).await?;
                return send_sync(client, sync).await.map(|()| true);
            }
        };
        client
            .feed(PgWireBackendMessage::BindComplete(BindComplete::new()))
            .await?;
        if run.describe {
            let fields = field_infos(&prepared.bound.plan.output_columns(), |i| {
                results_format.format_for(i)
            });
            feed_description(client, None, &fields).await?;
        }
        let cancel = match handle {
            Some(handle) => Some(handle.start_query().await),
            None => None,
        };
        let interrupt = session.begin_query();
        let params = Params {
            bind,
            format: &params_format,
            values,
        };
        let work = run_bound(&mut session, &prepared, params);
        let result = until_done(work, cancel, &interrupt).await;
        let result = result.and_then(|r| encode_outcome(r, &results_format));
        if result.is_err() {
            session.statement_failed();
        }
        if session.take_portals_discarded() {
            client.portal_store().clear_portals();
        }
        let notices = std::mem::take(&mut session.notices);
        // The session is let go of before the replies go out: a client slow to read them
        // holds up only its own connection.
        let sync = end_at_sync(session).await;
        for n in notices {
            client.feed(notice(&n)).await?;
        }
        match result {
            Err(e) => client.feed(error_message(&e)).await?,
            Ok((rows, complete)) => {
                for row in rows {
                    client.feed(PgWireBackendMessage::DataRow(row)).await?;
                }
                client
                    .feed(PgWireBackendMessage::CommandComplete(complete))
                    .await?;
            }
        }
        send_sync(client, sync).await.map(|()| true)
    }
}

/// The statement `bind` names, when its run can be whole: not in a failed block (where
/// Bind refuses all but what ends it), and one whose result is rows or a command tag and
/// that needs no more of the protocol (COPY and EXECUTE of another statement do).
/// BEGIN, COMMIT and ROLLBACK are, and so are the statements between them.
fn statement_to_run_whole<C: Client>(
    session: &Session,
    client: &C,
    bind: &Bind,
) -> Option<Arc<Prepared>> {
    if session.is_failed() {
        return None;
    }
    let name = bind
        .statement_name
        .as_deref()
        .unwrap_or(pgwire::api::DEFAULT_NAME);
    let Some(StoreEntry::Value(stored)) = statement_in(session, client, name) else {
        return None;
    };
    let plan = &stored.statement.bound.plan;
    let whole = matches!(
        plan,
        Plan::Select(_)
            | Plan::Write(..)
            | Plan::Call(_)
            | Plan::Begin { .. }
            | Plan::Commit
            | Plan::Rollback
    );
    whole.then(|| stored.statement.clone())
}

/// A Bind's parameters, and their values as the statement was prepared.
struct Params<'a> {
    bind: &'a Bind,
    format: &'a Format,
    values: Vec<Value>,
}

/// Runs the statement on its own, bound again (and its parameters decoded again) when the
/// catalog changed since it was prepared.
async fn run_bound(
    session: &mut Session,
    prepared: &Prepared,
    params: Params<'_>,
) -> SqlResult<StatementResult> {
    let rebound = session.binding_to_run(prepared)?;
    let (bound, values) = match &rebound {
        None => (&prepared.bound, params.values),
        Some(bound) => (
            bound,
            decode_bound(&params.bind.parameters, params.format, bound)?,
        ),
    };
    session.begin_statement(&prepared.parsed.text);
    session.execute(bound, &values).await
}

/// The data rows and the CommandComplete of a run's result, encoded whole before any is
/// sent, as a portal's are.
fn encode_outcome(
    result: StatementResult,
    format: &Format,
) -> SqlResult<(Vec<pgwire::messages::data::DataRow>, CommandComplete)> {
    match result {
        StatementResult::Rows { columns, rows, tag } => {
            let binary = |i| format.format_for(i) == FieldFormat::Binary;
            let encoded = rows
                .iter()
                .map(|row| data_row(row, &columns, binary))
                .collect::<SqlResult<Vec<_>>>()?;
            let complete = complete_tag(&tag, encoded.len());
            Ok((encoded, complete))
        }
        StatementResult::Command(tag)
        | StatementResult::TransactionStart(tag)
        | StatementResult::TransactionEnd(tag) => Ok((Vec::new(), Tag::new(&tag).into())),
        _ => Err(SqlError::internal(
            "a statement run whole gave a result other than rows or a command",
        )),
    }
}
