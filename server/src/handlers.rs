//! The pgwire side of a connection: authentication, the simple and extended query protocols,
//! COPY, cancel. Each accepted connection gets its own `Connection` (and `Session`).

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::{select, Either};
use futures::{stream, Sink, SinkExt, StreamExt};
use pgwire::api::auth::StartupHandler;
use pgwire::api::cancel::{CancelHandler, DefaultCancelHandler};
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::PortalExecutionState;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{
    send_execution_response, send_ready_for_query, ExtendedQueryHandler, SimpleQueryHandler,
};
use pgwire::api::results::{
    CopyResponse, DescribeResponse, FieldFormat, FieldInfo, QueryResponse, Response, Tag,
};
use pgwire::api::stmt::QueryParser;
use pgwire::api::stmt::StoredStatement;
use pgwire::api::store::Entry as StoreEntry;
use pgwire::api::store::PortalStore;
use pgwire::api::{
    ClientInfo, ClientPortalStore, ConnectionHandle, ConnectionManager, PgWireConnectionState,
    PgWireServerHandlers, RandomPidSecretKeyGenerator, Type,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail, CopyOutResponse};
use pgwire::messages::data::{NoData, ParameterDescription, RowDescription};
use pgwire::messages::extendedquery::{
    Bind, BindComplete, Close, CloseComplete, Describe, Execute, Parse, ParseComplete,
    PortalSuspended, Sync as PgSync, TARGET_TYPE_BYTE_PORTAL, TARGET_TYPE_BYTE_STATEMENT,
};
use pgwire::messages::response::{
    CommandComplete, NoticeResponse, ReadyForQuery, TransactionStatus,
};
use pgwire::messages::PgWireBackendMessage;
use plan::{Bound, Plan};
use planner::bind_in_session;
use sql::{DataType, ErrorKind, ParsedStatement, SqlError, SqlResult, Value};
use tokio::sync::Mutex;

use crate::activity::ConnectionControl;
use crate::bulk_insert::bind_simple;
use crate::frontend::Lookahead;
use crate::login::Logins;
use crate::notifications::Inbox;
use crate::session::{Block, Session, Shared, StatementResult};
use crate::statements::{no_such_statement, Prepared};
use crate::wire::{data_row, decode_param, error_info, field_infos, pg_error};

mod whole_run;
pub use whole_run::WholeRun;

// pgwire's bounds on a handler's client, written once, in three widths. (Rust does not
// imply `PgWireError: From<C::Error>` from a trait's where clause, so each handler still
// states that one.)

/// Where a handler writes its messages.
pub trait MessageSink: Sink<PgWireBackendMessage, Error: Debug> + Unpin {}

impl<C> MessageSink for C
where
    C: Sink<PgWireBackendMessage> + Unpin,
    C::Error: Debug,
{
}

/// A connection's client as the simple-query and COPY handlers see it.
pub trait SessionClient: ClientInfo + MessageSink + Send + Sync {}

impl<C: ClientInfo + MessageSink + Send + Sync> SessionClient for C {}

/// A connection's client as the extended-protocol handlers see it: with its portals, whose
/// statements are this server's `Prepared`.
pub trait Client:
    SessionClient + ClientPortalStore<PortalStore: PortalStore<Statement = Arc<Prepared>>>
{
}

impl<C> Client for C
where
    C: SessionClient + ClientPortalStore,
    C::PortalStore: PortalStore<Statement = Arc<Prepared>>,
{
}

/// Server-wide settings every connection needs.
pub struct ServerContext {
    pub shared: Arc<Shared>,
    /// Who may log in, connection slots, failed-login handling.
    pub logins: Arc<Logins>,
    pub connections: Arc<ConnectionManager>,
    pub cancel: Arc<DefaultCancelHandler>,
    /// One generator for the node, so each connection gets its own process id (what
    /// `pg_backend_pid()`, `pg_stat_activity` and notifications show); a generator per
    /// connection gave them all the same.
    pub pids: Arc<RandomPidSecretKeyGenerator>,
}

impl ServerContext {
    pub fn new(shared: Arc<Shared>, logins: Arc<Logins>) -> ServerContext {
        let connections = Arc::new(ConnectionManager::new());
        let cancel = Arc::new(DefaultCancelHandler::new(connections.clone()));
        ServerContext {
            shared,
            logins,
            connections,
            cancel,
            pids: Default::default(),
        }
    }
}

/// Binds the connection's statements against its session's catalog (which an open
/// transaction's schema changes may have changed).
pub struct Parser {
    session: Arc<Mutex<Session>>,
}

fn parse_one(sql: &str) -> SqlResult<Option<ParsedStatement>> {
    let mut parsed = sql::parse(sql)?;
    match parsed.len() {
        0 => Ok(None),
        1 => Ok(parsed.pop()),
        _ => Err(SqlError::syntax(
            "cannot insert multiple commands into a prepared statement",
        )),
    }
}

#[async_trait]
impl QueryParser for Parser {
    type Statement = Arc<Prepared>;

    async fn parse_sql<C>(
        &self,
        client: &C,
        sql: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<Arc<Prepared>>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let Some(parsed) = parse_one(sql).map_err(|e| pg_error(&e))? else {
            return Ok(None);
        };
        let hints: Vec<DataType> = types
            .iter()
            .map(|t| {
                t.as_ref()
                    .and_then(|t| DataType::from_oid(t.oid()))
                    .unwrap_or(DataType::Unknown)
            })
            .collect();
        // The client's process id and user, not the session's: a connection's first Parse
        // may come before its session has taken the startup's.
        let session = self.session.lock().await;
        let catalog = session.catalog();
        let context = session.bind_context_for(
            client.pid_and_secret_key().0,
            client.metadata().get("user").map(String::as_str),
        );
        let bound = bind_in_session(&catalog, &parsed, &hints, context);
        // In a failed block only what ends it is parsed; anything else (even a statement
        // that would not bind) gets 25P02, as in PostgreSQL.
        if session.is_failed() {
            let plan = match &bound {
                Ok(b) => &b.plan,
                Err(_) => &Plan::NoOp(""),
            };
            session.refuse_when_failed(plan).map_err(|e| pg_error(&e))?;
        }
        let generation = session.plan_generation();
        drop(session);
        let bound = bound.map_err(|e| pg_error(&e))?;
        Ok(Some(Arc::new(Prepared::new(
            parsed,
            hints,
            bound,
            catalog.version,
            generation,
            context,
        ))))
    }

    fn get_parameter_types(&self, stmt: &Arc<Prepared>) -> PgWireResult<Vec<Type>> {
        Ok(stmt
            .bound
            .param_types
            .iter()
            .map(|t| crate::wire::pg_type(*t))
            .collect())
    }

    fn get_result_schema(
        &self,
        stmt: &Arc<Prepared>,
        format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        let columns = stmt.bound.plan.output_columns();
        Ok(field_infos(&columns, |i| {
            format.map(|f| f.format_for(i)).unwrap_or(FieldFormat::Text)
        }))
    }
}

/// The per-connection handler for every protocol path.
pub struct Connection {
    context: Arc<ServerContext>,
    session: Arc<Mutex<Session>>,
    /// Notifications for this connection's session, sent by `frontend::serve_connection`.
    inbox: Arc<Inbox>,
    /// How other sessions cancel or end this connection's (`pg_terminate_backend`).
    control: Arc<ConnectionControl>,
    parser: Arc<Parser>,
    startup_applied: Arc<std::sync::atomic::AtomicBool>,
    /// What the connection loop saw after the Execute being run.
    lookahead: Arc<Lookahead>,
    /// Set by the connection loop once TLS is negotiated (SCRAM-SHA-256-PLUS is offered then).
    secure: Arc<std::sync::atomic::AtomicBool>,
}

impl Connection {
    pub fn new(context: Arc<ServerContext>) -> Connection {
        let inbox = Arc::new(Inbox::default());
        let session = Arc::new(Mutex::new(Session::new(
            context.shared.clone(),
            &HashMap::new(),
            0,
            inbox.clone(),
        )));
        let parser = Arc::new(Parser {
            session: session.clone(),
        });
        Connection {
            context,
            session,
            inbox,
            control: Arc::default(),
            parser,
            startup_applied: Arc::new(false.into()),
            lookahead: Arc::default(),
            secure: Arc::default(),
        }
    }

    /// Where the connection loop says the connection is encrypted.
    pub fn secure(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.secure.clone()
    }

    /// Where the connection loop says whether a Sync follows the Execute it dispatches.
    pub fn lookahead(&self) -> Arc<Lookahead> {
        self.lookahead.clone()
    }

    /// The statement `name`: a named one from the session's statements, the unnamed one (or
    /// an empty one) from pgwire's store.
    async fn statement<C: ClientInfo + ClientPortalStore>(
        &self,
        client: &C,
        name: &str,
    ) -> Option<StoreEntry<StoredStatement<Arc<Prepared>>>>
    where
        C::PortalStore: PortalStore<Statement = Arc<Prepared>>,
    {
        let session = self.session_for(client).await;
        statement_in(&session, client, name)
    }

    /// The columns a Describe gives of `prepared` when they are not its own plan's: an
    /// `EXECUTE name(...)` answers with its prepared statement's. In a failed block a
    /// statement that returns rows is not described (25P02), as in PostgreSQL, where
    /// describing its rows would need the catalog.
    async fn described_columns<C: ClientInfo>(
        &self,
        client: &C,
        prepared: &Prepared,
    ) -> PgWireResult<Option<Vec<plan::OutputColumn>>> {
        let session = self.session_for(client).await;
        let plan = &prepared.bound.plan;
        if session.is_failed() && !plan.output_columns().is_empty() {
            session.refuse_when_failed(plan).map_err(|e| pg_error(&e))?;
        }
        let Plan::Execute { name, .. } = plan else {
            return Ok(None);
        };
        let target = session.statements.get(name);
        Ok(target.map(|t| t.statement.bound.plan.output_columns()))
    }

    /// A message of the extended protocol failed: so has the transaction it was part of.
    async fn failing_with<C: ClientInfo>(
        &self,
        client: &C,
        result: PgWireResult<()>,
    ) -> PgWireResult<()> {
        if result.is_err() {
            self.session_for(client).await.statement_failed();
        }
        result
    }

    /// Where this connection's notifications wait to be sent.
    pub fn inbox(&self) -> Arc<Inbox> {
        self.inbox.clone()
    }

    pub fn control(&self) -> Arc<ConnectionControl> {
        self.control.clone()
    }

    async fn session_for<C: ClientInfo>(&self, client: &C) -> tokio::sync::MutexGuard<'_, Session> {
        let mut session = self.session.lock().await;
        if !self
            .startup_applied
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            *session = Session::new(
                self.context.shared.clone(),
                client.metadata(),
                client.pid_and_secret_key().0,
                self.inbox.clone(),
            );
            session.set_client(client.socket_addr());
            if let Some(handle) = client.session_extensions().get::<Arc<ConnectionHandle>>() {
                self.control.set_cancel(Arc::clone(&handle));
            }
            session.attach_control(self.control.clone());
        }
        session
    }
}

fn status_of(session: &Session) -> TransactionStatus {
    if session.is_failed() {
        TransactionStatus::Error
    } else if session.in_block() {
        TransactionStatus::Transaction
    } else {
        TransactionStatus::Idle
    }
}

/// A warning the statement gave, sent before its result.
fn notice(warning: &SqlError) -> PgWireBackendMessage {
    let severity = match warning.kind {
        sql::ErrorKind::Notice => "NOTICE",
        _ => "WARNING",
    };
    let info = ErrorInfo::new(
        severity.to_owned(),
        warning.kind.sqlstate().to_owned(),
        warning.message.clone(),
    );
    PgWireBackendMessage::NoticeResponse(NoticeResponse::from(info))
}

fn query_response(
    columns: &[plan::OutputColumn],
    rows: Vec<Vec<Value>>,
    tag: &str,
    format: Option<&Format>,
) -> SqlResult<QueryResponse> {
    let binary: Vec<bool> = (0..columns.len())
        .map(|i| {
            format
                .map(|f| f.format_for(i) == FieldFormat::Binary)
                .unwrap_or(false)
        })
        .collect();
    let fields = Arc::new(field_infos(columns, |i| {
        if binary[i] {
            FieldFormat::Binary
        } else {
            FieldFormat::Text
        }
    }));
    let mut encoded = Vec::with_capacity(rows.len());
    for row in &rows {
        encoded.push(Ok(data_row(row, columns, |i| binary[i])?));
    }
    let mut response = QueryResponse::new(fields, stream::iter(encoded));
    response.set_command_tag(tag);
    Ok(response)
}

/// A statement's rows as the simple protocol sends them: RowDescription, the rows, and the
/// command tag (`complete_tag`).
async fn send_rows<C>(client: &mut C, mut response: QueryResponse) -> PgWireResult<()>
where
    C: MessageSink,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let fields = response.row_schema();
    client
        .feed(PgWireBackendMessage::RowDescription(RowDescription::new(
            fields.iter().map(Into::into).collect(),
        )))
        .await?;
    let tag = response.command_tag().to_owned();
    let mut rows = 0;
    while let Some(row) = response.data_rows().next().await {
        client.feed(PgWireBackendMessage::DataRow(row?)).await?;
        rows += 1;
    }
    client
        .feed(PgWireBackendMessage::CommandComplete(complete_tag(
            &tag, rows,
        )))
        .await?;
    Ok(())
}

/// The CommandComplete of a statement that returned `rows` rows: with the count, except
/// SHOW's, which PostgreSQL sends bare.
fn complete_tag(tag: &str, rows: usize) -> CommandComplete {
    if tag == "SHOW" {
        Tag::new(tag).into()
    } else {
        Tag::new(tag).with_rows(rows).into()
    }
}

/// Runs a query message's work to its end. A cancel request for it raises its interrupt,
/// and the statements stop where they are (a write already proposed completes: its
/// client hears the outcome, as PostgreSQL's does of a commit under way).
async fn until_done<T, E>(
    work: impl std::future::Future<Output = T>,
    cancel: Option<impl std::future::Future<Output = Result<(), E>> + Unpin>,
    interrupt: &plan::Interrupt,
) -> T {
    let Some(cancel) = cancel else {
        return work.await;
    };
    let work = Box::pin(work);
    match select(work, cancel).await {
        Either::Left((done, _)) => done,
        Either::Right((fired, work)) => {
            // An Err is the handle's sender replaced, not a cancel.
            if fired.is_ok() {
                interrupt.raise(plan::StopReason::Cancel);
            }
            work.await
        }
    }
}

fn copy_in_response(columns: usize) -> CopyResponse {
    CopyResponse::new(0, columns, stream::empty())
}

/// COPY TO STDOUT's data: CopyOutResponse (text format), one CopyData per line, CopyDone.
/// The caller then completes the command with `COPY n` (pgwire's own sender would count a
/// header line as a row).
async fn send_copy_out<C>(client: &mut C, columns: usize, lines: Vec<Vec<u8>>) -> PgWireResult<()>
where
    C: MessageSink,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let formats = vec![0; columns];
    client
        .feed(PgWireBackendMessage::CopyOutResponse(CopyOutResponse::new(
            0,
            columns as i16,
            formats,
        )))
        .await?;
    for line in lines {
        client
            .feed(PgWireBackendMessage::CopyData(CopyData::new(line.into())))
            .await?;
    }
    client
        .feed(PgWireBackendMessage::CopyDone(CopyDone::new()))
        .await?;
    Ok(())
}

#[async_trait]
impl SimpleQueryHandler for Connection {
    async fn on_query<C>(
        &self,
        client: &mut C,
        query: pgwire::messages::simplequery::Query,
    ) -> PgWireResult<()>
    where
        C: SessionClient + ClientPortalStore,
        C::PortalStore: PortalStore,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Err(PgWireError::NotReadyForQuery);
        }
        client.set_state(PgWireConnectionState::QueryInProgress);
        let handle = client.session_extensions().get::<Arc<ConnectionHandle>>();
        let cancel = match handle {
            Some(h) => Some(h.start_query().await),
            None => None,
        };
        let mut session = self.session_for(client).await;
        let interrupt = session.begin_query();
        let work = run_simple(&mut session, client, &query.query);
        let copy_started = until_done(work, cancel, &interrupt).await?;
        if copy_started {
            return Ok(());
        }
        // The Query's statements were one transaction unless they began or ended blocks.
        if let Err(e) = session.close_implicit(Block::Query).await {
            client
                .feed(PgWireBackendMessage::ErrorResponse(error_info(&e).into()))
                .await?;
        }
        let status = status_of(&session);
        client.set_state(PgWireConnectionState::ReadyForQuery);
        client.set_transaction_status(status);
        send_ready_for_query(client, status).await
    }

    async fn do_query<C>(&self, _client: &mut C, _query: &str) -> PgWireResult<Vec<Response>>
    where
        C: SessionClient + ClientPortalStore,
        C::PortalStore: PortalStore,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        Err(PgWireError::ApiError(
            "simple queries are handled in on_query".into(),
        ))
    }
}

/// Statements of at least this many bytes are parsed and bound off the runtime's worker
/// threads: a 1,000-row INSERT takes milliseconds to parse, and on a worker it would hold up
/// every task queued behind it there — other sessions' small statements, and openraft's
/// tasks that commit entries and hand them to the executor — leaving the executor idle.
const LARGE_STATEMENT_BYTES: usize = 16 * 1024;

/// Runs `work` on tokio's blocking pool; a panic in it continues in the caller.
async fn off_the_runtime<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// Runs every statement of a simple query, sending each result as it completes. Returns
/// true when a COPY FROM STDIN started (the protocol then waits for data).
async fn run_simple<C>(session: &mut Session, client: &mut C, text: &str) -> PgWireResult<bool>
where
    C: SessionClient + ClientPortalStore,
    C::PortalStore: PortalStore,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let statements = if text.len() >= LARGE_STATEMENT_BYTES {
        let text = text.to_owned();
        off_the_runtime(move || sql::parse(&text)).await
    } else {
        sql::parse(text)
    };
    let statements = match statements {
        Ok(s) => s,
        Err(e) => {
            session.statement_failed();
            client
                .feed(PgWireBackendMessage::ErrorResponse(error_info(&e).into()))
                .await?;
            return Ok(false);
        }
    };
    if statements.is_empty() {
        client
            .feed(PgWireBackendMessage::EmptyQueryResponse(
                pgwire::messages::response::EmptyQueryResponse::new(),
            ))
            .await?;
        return Ok(false);
    }
    // Several statements in one Query run as one transaction (an implicit one, which a
    // BEGIN among them turns into a block, and a COMMIT or ROLLBACK ends), as in
    // PostgreSQL; the caller ends it after the last.
    let implicit = statements.len() > 1;
    for statement in statements {
        if implicit {
            session.open_implicit(Block::Query);
        }
        // Active from before binding, as PostgreSQL's query_start is.
        session.begin_statement(&statement.text);
        let (catalog, context) = (session.catalog(), session.bind_context());
        let alone = !session.in_transaction();
        let bound = if statement.text.len() >= LARGE_STATEMENT_BYTES {
            off_the_runtime(move || bind_simple(&catalog, &statement, context, alone)).await
        } else {
            bind_simple(&catalog, &statement, context, alone)
        };
        let result = match bound {
            Ok(bound) => session.execute(&bound, &[]).await,
            Err(e) => {
                session.statement_failed();
                Err(e)
            }
        };
        if session.take_portals_discarded() {
            client.portal_store().clear_portals();
        }
        for n in std::mem::take(&mut session.notices) {
            client.feed(notice(&n)).await?;
        }
        match result {
            Err(e) => {
                client
                    .feed(PgWireBackendMessage::ErrorResponse(error_info(&e).into()))
                    .await?;
                return Ok(false);
            }
            Ok(StatementResult::Rows { columns, rows, tag }) => {
                let response =
                    query_response(&columns, rows, &tag, None).map_err(|e| pg_error(&e))?;
                send_rows(client, response).await?;
            }
            Ok(
                StatementResult::Command(tag)
                | StatementResult::TransactionStart(tag)
                | StatementResult::TransactionEnd(tag),
            ) => {
                send_execution_response(client, Tag::new(&tag)).await?;
            }
            Ok(StatementResult::CopyIn { columns }) => {
                pgwire::api::copy::send_copy_in_response(client, copy_in_response(columns)).await?;
                client.set_state(PgWireConnectionState::CopyInProgress(false));
                return Ok(true);
            }
            Ok(StatementResult::CopyOut {
                columns,
                lines,
                rows,
            }) => {
                send_copy_out(client, columns, lines).await?;
                send_execution_response(client, Tag::new("COPY").with_rows(rows)).await?;
            }
        }
    }
    Ok(false)
}

#[async_trait]
impl ExtendedQueryHandler for Connection {
    type Statement = Arc<Prepared>;
    type QueryParser = Parser;

    fn query_parser(&self) -> Arc<Parser> {
        self.parser.clone()
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Arc<Prepared>>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: Client,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let mut session = self.session_for(client).await;
        let prepared = &portal.statement.statement;
        let rebound = match session.binding_to_run(prepared) {
            Ok(b) => b,
            Err(e) => {
                session.statement_failed();
                return Err(pg_error(&e));
            }
        };
        let bound = rebound.as_ref().unwrap_or(&prepared.bound);
        let params = match decode_params(portal, bound) {
            Ok(p) => p,
            Err(e) => {
                session.statement_failed();
                return Err(pg_error(&e));
            }
        };
        // Statements the client sends before one Sync are one transaction: unless this one
        // is the last of them (a Sync came right after its Execute), it opens one.
        if !self.lookahead.sync_follows() {
            session.open_implicit(Block::Pipeline);
        }
        session.begin_statement(&prepared.parsed.text);
        let result = session.execute(bound, &params).await;
        let notices = std::mem::take(&mut session.notices);
        let portals_discarded = session.take_portals_discarded();
        drop(session);
        if portals_discarded {
            client.portal_store().clear_portals();
        }
        for n in notices {
            client.feed(notice(&n)).await?;
        }
        match result {
            Err(e) => Err(pg_error(&e)),
            Ok(StatementResult::Rows { columns, rows, tag }) => {
                let response =
                    query_response(&columns, rows, &tag, Some(&portal.result_column_format))
                        .map_err(|e| pg_error(&e))?;
                Ok(Response::Query(response))
            }
            Ok(StatementResult::Command(tag)) => Ok(Response::Execution(Tag::new(&tag))),
            Ok(StatementResult::TransactionStart(tag)) => {
                Ok(Response::TransactionStart(Tag::new(&tag)))
            }
            Ok(StatementResult::TransactionEnd(tag)) => {
                Ok(Response::TransactionEnd(Tag::new(&tag)))
            }
            Ok(StatementResult::CopyIn { columns }) => {
                Ok(Response::CopyIn(copy_in_response(columns)))
            }
            // The data goes out here; the command completes as any other.
            Ok(StatementResult::CopyOut {
                columns,
                lines,
                rows,
            }) => {
                send_copy_out(client, columns, lines).await?;
                Ok(Response::Execution(Tag::new("COPY").with_rows(rows)))
            }
        }
    }

    // Like pgwire's own, but every reply is buffered (fed) rather than flushed: the Sync that
    // ends the batch flushes once, as PostgreSQL does.
    async fn on_execute<C>(&self, client: &mut C, message: Execute) -> PgWireResult<()>
    where
        C: Client,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let result = self.execute_portal(client, message).await;
        self.failing_with(client, result).await
    }

    // Parse and Bind replies are buffered (fed, not flushed): like PostgreSQL, everything
    // up to the next Sync or Flush goes out in one write.
    async fn on_parse<C>(&self, client: &mut C, message: Parse) -> PgWireResult<()>
    where
        C: Client,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let result = async {
            let name = message
                .name
                .clone()
                .unwrap_or_else(|| pgwire::api::DEFAULT_NAME.to_owned());
            match StoredStatement::parse(client, &message, self.parser.clone()).await? {
                // A named one joins the session's statements (refused if the name is taken).
                Some(statement) if name != pgwire::api::DEFAULT_NAME => {
                    let mut session = self.session_for(client).await;
                    let now = crate::session::now_micros();
                    session
                        .statements
                        .add(Arc::new(statement), false, now)
                        .map_err(|e| pg_error(&e))?;
                }
                Some(statement) => client.portal_store().put_statement(Arc::new(statement)),
                None => client.portal_store().put_empty_statement(&name),
            }
            client
                .feed(PgWireBackendMessage::ParseComplete(ParseComplete::new()))
                .await?;
            Ok(())
        }
        .await;
        self.failing_with(client, result).await
    }

    async fn on_bind<C>(&self, client: &mut C, message: Bind) -> PgWireResult<()>
    where
        C: Client,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let result = async {
            let statement_name = message
                .statement_name
                .as_deref()
                .unwrap_or(pgwire::api::DEFAULT_NAME);
            let portal_name = message
                .portal_name
                .as_deref()
                .unwrap_or(pgwire::api::DEFAULT_NAME);
            let (entry, refused) = {
                let session = self.session_for(client).await;
                let entry = statement_in(&session, client, statement_name);
                // In a failed block only what ends it is bound (25P02 otherwise).
                let refused = match &entry {
                    Some(StoreEntry::Value(s)) if session.is_failed() => {
                        session.refuse_when_failed(&s.statement.bound.plan)
                    }
                    _ => Ok(()),
                };
                (entry, refused)
            };
            refused.map_err(|e| pg_error(&e))?;
            match entry {
                Some(StoreEntry::Value(statement)) => {
                    // Parameters are checked here, at Bind, as PostgreSQL checks them.
                    check_formats(&message, &statement.statement).map_err(|e| pg_error(&e))?;
                    let portal = Portal::try_new(&message, statement)?;
                    decode_params(&portal, &portal.statement.statement.bound)
                        .map_err(|e| pg_error(&e))?;
                    client.portal_store().put_portal(Arc::new(portal));
                }
                Some(StoreEntry::Empty) => {
                    if !message.parameters.is_empty() {
                        let e = SqlError::new(ErrorKind::ProtocolViolation, format!("bind message supplies {} parameters, but prepared statement \"{statement_name}\" requires 0", message.parameters.len()));
                        return Err(pg_error(&e));
                    }
                    client.portal_store().put_empty_portal(portal_name);
                }
                None => return Err(pg_error(&no_such_statement(statement_name))),
            }
            client
                .feed(PgWireBackendMessage::BindComplete(BindComplete::new()))
                .await?;
            Ok(())
        }
        .await;
        self.failing_with(client, result).await
    }

    // Describe and Close replies are buffered too. pgbench's prepared mode sends Bind,
    // Describe, Execute, Sync for every statement: a flushed Describe reply was a second
    // write (and a second wakeup of the client) per statement.
    async fn on_describe<C>(&self, client: &mut C, message: Describe) -> PgWireResult<()>
    where
        C: Client,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let result = async {
            let name = message.name.as_deref().unwrap_or(pgwire::api::DEFAULT_NAME);
            match message.target_type {
                TARGET_TYPE_BYTE_STATEMENT => match self.statement(client, name).await {
                    Some(StoreEntry::Value(statement)) => {
                        let executed = self.described_columns(client, &statement.statement).await?;
                        let described = self.do_describe_statement(client, &statement).await?;
                        let fields = match executed {
                            Some(columns) => field_infos(&columns, |_| FieldFormat::Text),
                            None => described.fields().to_vec(),
                        };
                        feed_description(client, described.parameters(), &fields).await
                    }
                    Some(StoreEntry::Empty) => feed_description(client, Some(&[]), &[]).await,
                    None => Err(pg_error(&no_such_statement(name))),
                },
                TARGET_TYPE_BYTE_PORTAL => match client.portal_store().get_portal(name) {
                    Some(StoreEntry::Value(portal)) => {
                        let prepared = &portal.statement.statement;
                        let executed = self.described_columns(client, prepared).await?;
                        let described = self.do_describe_portal(client, &portal).await?;
                        let fields = match executed {
                            Some(columns) => {
                                field_infos(&columns, |i| portal.result_column_format.format_for(i))
                            }
                            None => described.fields().to_vec(),
                        };
                        feed_description(client, None, &fields).await
                    }
                    Some(StoreEntry::Empty) => feed_description(client, None, &[]).await,
                    None => Err(no_such_portal(name)),
                },
                other => Err(PgWireError::InvalidTargetType(other)),
            }
        }
        .await;
        self.failing_with(client, result).await
    }

    async fn on_close<C>(&self, client: &mut C, message: Close) -> PgWireResult<()>
    where
        C: Client,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.as_deref().unwrap_or(pgwire::api::DEFAULT_NAME);
        match message.target_type {
            TARGET_TYPE_BYTE_STATEMENT => {
                self.session_for(client).await.statements.remove(name);
                client.portal_store().rm_statement(name);
            }
            TARGET_TYPE_BYTE_PORTAL => client.portal_store().rm_portal(name),
            _ => {}
        }
        client
            .feed(PgWireBackendMessage::CloseComplete(CloseComplete::new()))
            .await?;
        Ok(())
    }

    async fn on_sync<C>(&self, client: &mut C, _message: PgSync) -> PgWireResult<()>
    where
        C: Client,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        client.portal_store().rm_portal(pgwire::api::DEFAULT_NAME);
        let sync = end_at_sync(self.session_for(client).await).await;
        send_sync(client, sync).await
    }
}

/// The ErrorResponse of a statement's error.
fn error_message(e: &SqlError) -> PgWireBackendMessage {
    PgWireBackendMessage::ErrorResponse(error_info(e).into())
}

/// What a Sync ends with: the statements since the last Sync, when no block holds them,
/// committed (or rolled back, when one failed), and the transaction status after it.
struct SyncOutcome {
    closed: SqlResult<()>,
    status: TransactionStatus,
}

/// Ends what a Sync ends, and lets go of the session.
async fn end_at_sync(mut session: tokio::sync::MutexGuard<'_, Session>) -> SyncOutcome {
    let closed = session.close_implicit(Block::Pipeline).await;
    SyncOutcome {
        closed,
        status: status_of(&session),
    }
}

/// The Sync's replies: a commit that failed, then ReadyForQuery, with everything before it
/// in one write.
async fn send_sync<C>(client: &mut C, sync: SyncOutcome) -> PgWireResult<()>
where
    C: Client,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    if let Err(e) = &sync.closed {
        client.feed(error_message(e)).await?;
    }
    client.set_transaction_status(sync.status);
    client
        .feed(PgWireBackendMessage::ReadyForQuery(ReadyForQuery::new(
            sync.status,
        )))
        .await?;
    client.flush().await?;
    Ok(())
}

/// Running a portal (Execute).
impl Connection {
    async fn execute_portal<C>(&self, client: &mut C, message: Execute) -> PgWireResult<()>
    where
        C: Client,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Err(PgWireError::NotReadyForQuery);
        }
        client.set_state(PgWireConnectionState::QueryInProgress);
        let portal_name = message.name.as_deref().unwrap_or(pgwire::api::DEFAULT_NAME);
        let max_rows = message.max_rows as usize;
        let portal = match client.portal_store().get_portal(portal_name) {
            Some(StoreEntry::Value(portal)) => portal,
            Some(StoreEntry::Empty) => {
                client
                    .feed(PgWireBackendMessage::EmptyQueryResponse(
                        pgwire::messages::response::EmptyQueryResponse::new(),
                    ))
                    .await?;
                client.set_state(PgWireConnectionState::ReadyForQuery);
                return Ok(());
            }
            None => {
                client.set_state(PgWireConnectionState::ReadyForQuery);
                return Err(no_such_portal(portal_name));
            }
        };
        let started = matches!(*portal.state().lock().await, PortalExecutionState::Initial);
        // A portal already started (suspended) only hands over more of its rows.
        let has_rows = if started {
            match self.start_portal(client, &portal, max_rows).await? {
                Some(has_rows) => has_rows,
                None => return Ok(()),
            }
        } else {
            true
        };
        if has_rows {
            send_portal_rows(client, &portal, max_rows).await?;
        }
        client.set_state(PgWireConnectionState::ReadyForQuery);
        Ok(())
    }

    /// Runs a portal's statement (cancellable): whether it has rows to send, or None when
    /// it started a COPY FROM STDIN (the protocol then waits for the data).
    async fn start_portal<C>(
        &self,
        client: &mut C,
        portal: &Portal<Arc<Prepared>>,
        max_rows: usize,
    ) -> PgWireResult<Option<bool>>
    where
        C: Client,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let cancel = match client.session_extensions().get::<Arc<ConnectionHandle>>() {
            Some(handle) => Some(handle.start_query().await),
            None => None,
        };
        let interrupt = self.session_for(client).await.begin_query();
        let work = ExtendedQueryHandler::do_query(self, client, portal, max_rows);
        let response = until_done(work, cancel, &interrupt).await;
        let response = match response {
            Ok(r) => r,
            Err(e) => {
                client.set_state(PgWireConnectionState::ReadyForQuery);
                return Err(e);
            }
        };
        match response {
            Response::Query(results) => {
                portal.start(results).await;
                return Ok(Some(true));
            }
            Response::EmptyQuery => {
                client
                    .feed(PgWireBackendMessage::EmptyQueryResponse(
                        pgwire::messages::response::EmptyQueryResponse::new(),
                    ))
                    .await?;
            }
            Response::Execution(tag) | Response::TransactionStart(tag) => {
                send_execution_response(client, tag).await?;
            }
            Response::TransactionEnd(tag) => {
                send_execution_response(client, tag).await?;
                client.portal_store().rm_portal(pgwire::api::DEFAULT_NAME);
            }
            Response::Error(e) => {
                client
                    .feed(PgWireBackendMessage::ErrorResponse((*e).into()))
                    .await?;
            }
            Response::CopyIn(result) => {
                client.set_state(PgWireConnectionState::CopyInProgress(true));
                pgwire::api::copy::send_copy_in_response(client, result).await?;
                return Ok(None);
            }
            Response::CopyOut(_) | Response::CopyBoth(_) => {
                client.set_state(PgWireConnectionState::ReadyForQuery);
                return Err(pg_error(&SqlError::feature_not_supported("COPY TO")));
            }
        }
        Ok(Some(false))
    }
}

/// Up to `max_rows` of a started portal's rows (0: all), then PortalSuspended or the
/// command's completion.
async fn send_portal_rows<C>(
    client: &mut C,
    portal: &Portal<Arc<Prepared>>,
    max_rows: usize,
) -> PgWireResult<()>
where
    C: MessageSink,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let fetched = portal.fetch(max_rows).await?;
    let mut response = fetched.response;
    let tag = response.command_tag().to_owned();
    let mut rows = 0;
    while let Some(row) = response.data_rows().next().await {
        client.feed(PgWireBackendMessage::DataRow(row?)).await?;
        rows += 1;
    }
    if fetched.suspended {
        client
            .feed(PgWireBackendMessage::PortalSuspended(PortalSuspended::new()))
            .await?;
    } else {
        client
            .feed(PgWireBackendMessage::CommandComplete(complete_tag(
                &tag, rows,
            )))
            .await?;
    }
    Ok(())
}

/// The statement `name` as `statement` finds it, under a session already locked.
fn statement_in<C: ClientPortalStore>(
    session: &Session,
    client: &C,
    name: &str,
) -> Option<StoreEntry<StoredStatement<Arc<Prepared>>>>
where
    C::PortalStore: PortalStore<Statement = Arc<Prepared>>,
{
    if name != pgwire::api::DEFAULT_NAME {
        if let Some(stored) = session.statements.get(name) {
            return Some(StoreEntry::Value(stored));
        }
    }
    client.portal_store().get_statement(name)
}

fn no_such_portal(name: &str) -> PgWireError {
    pg_error(&SqlError::new(
        ErrorKind::InvalidCursor,
        format!("portal \"{name}\" does not exist"),
    ))
}

/// Buffers a Describe reply: the parameter types (for a statement) and the result columns,
/// or NoData when there are none.
async fn feed_description<C>(
    client: &mut C,
    parameters: Option<&[Type]>,
    fields: &[FieldInfo],
) -> PgWireResult<()>
where
    C: MessageSink,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    if let Some(parameters) = parameters {
        let oids = parameters.iter().map(Type::oid).collect();
        client
            .feed(PgWireBackendMessage::ParameterDescription(
                ParameterDescription::new(oids),
            ))
            .await?;
    }
    let reply = if fields.is_empty() {
        PgWireBackendMessage::NoData(NoData::new())
    } else {
        PgWireBackendMessage::RowDescription(RowDescription::new(
            fields.iter().map(Into::into).collect(),
        ))
    };
    client.feed(reply).await?;
    Ok(())
}

fn decode_params(portal: &Portal<Arc<Prepared>>, bound: &Bound) -> SqlResult<Vec<Value>> {
    decode_bound(&portal.parameters, &portal.parameter_format, bound)
}

/// A Bind's parameter values as the statement's parameter types.
fn decode_bound(
    parameters: &[Option<bytes::Bytes>],
    format: &Format,
    bound: &Bound,
) -> SqlResult<Vec<Value>> {
    let expected = bound.param_types.len();
    if parameters.len() != expected {
        return Err(SqlError::new(
            ErrorKind::ProtocolViolation,
            format!(
                "bind message supplies {} parameters, but prepared statement requires {expected}",
                parameters.len()
            ),
        ));
    }
    parameters
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            let binary = format.format_for(i) == FieldFormat::Binary;
            decode_param(raw.as_deref(), bound.param_types[i], binary)
        })
        .collect()
}

/// A Bind's parameter formats: none (all text), one for all, or one per parameter it
/// supplies — any other count is refused (08P01), as PostgreSQL refuses it.
fn parameter_format(codes: &[i16], parameters: usize) -> SqlResult<Format> {
    format_of(codes, parameters).ok_or_else(|| {
        let n = codes.len();
        SqlError::new(
            ErrorKind::ProtocolViolation,
            format!("bind message has {n} parameter formats but {parameters} parameters"),
        )
    })
}

/// A Bind's result formats for a statement of `columns()` columns, counted only when the
/// codes are one per column; refused as `parameter_format` refuses.
fn result_format(codes: &[i16], columns: impl FnOnce() -> usize) -> SqlResult<Format> {
    if codes.len() <= 1 {
        return Ok(format_of(codes, 0).expect("zero or one code"));
    }
    let columns = columns();
    format_of(codes, columns).ok_or_else(|| {
        let n = codes.len();
        SqlError::new(
            ErrorKind::ProtocolViolation,
            format!("bind message has {n} result formats but query has {columns} columns"),
        )
    })
}

/// A Bind's parameter and result formats, checked against what it supplies and what the
/// statement returns.
fn check_formats(bind: &Bind, prepared: &Prepared) -> SqlResult<(Format, Format)> {
    let parameters = parameter_format(&bind.parameter_format_codes, bind.parameters.len())?;
    let results = result_format(&bind.result_column_format_codes, || {
        prepared.bound.plan.output_columns().len()
    })?;
    Ok((parameters, results))
}

fn format_of(codes: &[i16], count: usize) -> Option<Format> {
    match codes.len() {
        0 => Some(Format::UnifiedText),
        1 => Some(Format::from(codes[0])),
        n if n == count => Some(Format::Individual(codes.to_vec())),
        _ => None,
    }
}

#[async_trait]
impl CopyHandler for Connection {
    async fn on_copy_data<C>(&self, client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: SessionClient,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let mut session = self.session_for(client).await;
        session.copy_data(&copy_data.data);
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: SessionClient,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let mut session = self.session_for(client).await;
        let mut result = session.copy_done().await;
        if result.is_err() {
            session.statement_failed();
        }
        // A COPY among several statements of one Query ends their transaction.
        if let Err(e) = session.close_implicit(Block::Query).await {
            result = result.and(Err(e));
        }
        let status = status_of(&session);
        drop(session);
        client.set_transaction_status(status);
        match result {
            Ok(n) => {
                let tag: CommandComplete = Tag::new("COPY").with_rows(n as usize).into();
                client
                    .send(PgWireBackendMessage::CommandComplete(tag))
                    .await?;
                Ok(())
            }
            Err(e) => Err(pg_error(&e)),
        }
    }

    async fn on_copy_fail<C>(&self, client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: SessionClient,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let mut session = self.session_for(client).await;
        session.copy_fail();
        session.statement_failed();
        client.set_transaction_status(status_of(&session));
        pg_error(&SqlError::new(
            ErrorKind::QueryCanceled,
            format!("COPY from stdin failed: {}", fail.message),
        ))
    }
}

// The handlers are named as what they are, so that the connection loop, which also runs
// whole runs (`run_whole`), knows its portals hold `Prepared` statements.
#[allow(refining_impl_trait)]
impl PgWireServerHandlers for Connection {
    fn simple_query_handler(&self) -> Arc<Connection> {
        Arc::new(self.clone_handle())
    }

    fn extended_query_handler(&self) -> Arc<Connection> {
        Arc::new(self.clone_handle())
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        let secure = self.secure.load(std::sync::atomic::Ordering::Relaxed);
        Arc::new(self.context.logins.startup_handler(
            secure,
            self.context.connections.clone(),
            self.context.pids.clone(),
        ))
    }

    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        Arc::new(self.clone_handle())
    }

    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        self.context.cancel.clone()
    }
}

impl Connection {
    /// Another handle on the same connection state (pgwire asks for each handler separately).
    fn clone_handle(&self) -> Connection {
        Connection {
            context: self.context.clone(),
            session: self.session.clone(),
            inbox: self.inbox.clone(),
            control: self.control.clone(),
            parser: self.parser.clone(),
            startup_applied: self.startup_applied.clone(),
            lookahead: self.lookahead.clone(),
            secure: self.secure.clone(),
        }
    }
}
