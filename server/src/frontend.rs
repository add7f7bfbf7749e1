//! One client connection's message loop, with every frame checked on the bytes as they
//! arrive (`frames::Scanner`) before pgwire decodes it: a message whose header announces more
//! than the limit is refused before its body is read, with a FATAL 54000, instead of being
//! buffered (pgwire alone would buffer up to 1 GiB per message); a malformed one (a count or
//! length its body does not hold, a string without its end, an unknown type) is refused with
//! a FATAL 08P01 and one line in the log, instead of reaching a decoder that would panic or
//! read into the next message. A prepared statement's Bind, Describe, Execute and Sync that
//! arrive together are answered in one step (`offer_whole_run`, `handlers/whole_run.rs`).
//! Everything else is pgwire's own dispatch.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use frames::{Refusal, Step};
use futures::{FutureExt, SinkExt, StreamExt};
use pgwire::api::{ClientInfo, PgWireConnectionState, PgWireServerHandlers};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::extendedquery::Bind;
use pgwire::messages::response::{NotificationResponse, TransactionStatus};
use pgwire::messages::startup::Startup;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::tokio::server::{
    negotiate_tls, process_error, process_message, MaybeTls, PgWireMessageServerCodec,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, FramedParts};

use crate::activity::ConnectionControl;
use crate::connection_slots::Slot;
use crate::handlers::{Connection, WholeRun};
use crate::log_limit;
use crate::login::{fatal, Logins};
use crate::notifications::Inbox;
use crate::statements::Prepared;

/// A client that does not finish authenticating within this long is dropped.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// How much is read from the socket at a time (more when a frame announces more).
const READ_CHUNK: usize = 16 << 10;

/// The socket as pgwire reads it: bytes are handed on only as whole frames that
/// `frames::Scanner` accepted, so the decoder never sees a frame whose counts and lengths
/// lie. A refused frame (too large: from its header, before its body is read; or malformed)
/// ends the stream with an error after every frame before it was handed on, and is recorded
/// in `refused` for the loop to answer.
pub struct CheckedIo<S> {
    inner: S,
    scanner: frames::Scanner,
    /// Read from the socket, not yet handed on; the first `accepted` bytes are whole frames.
    pending: BytesMut,
    accepted: usize,
    /// The refusal to report once the accepted bytes before it are handed on.
    refusal: Option<Refusal>,
    refused: Arc<Mutex<Option<Refusal>>>,
    end_of_stream: bool,
    /// After a refusal: bytes pass through unexamined, to be discarded.
    draining: bool,
}

impl<S> CheckedIo<S> {
    fn new(inner: S, limit: usize, refused: Arc<Mutex<Option<Refusal>>>) -> CheckedIo<S> {
        // negotiate_tls has already consumed an SSLRequest; the startup message is next.
        CheckedIo {
            inner,
            scanner: frames::Scanner::new(limit),
            pending: BytesMut::new(),
            accepted: 0,
            refusal: None,
            refused,
            end_of_stream: false,
            draining: false,
        }
    }

    /// Accepts the whole frames pending after those accepted already; the capacity the next
    /// incomplete frame needs.
    fn scan(&mut self) -> usize {
        loop {
            match self.scanner.step(&self.pending[self.accepted..]) {
                Step::Frame(n) => self.accepted += n,
                Step::Incomplete(total) => return total.unwrap_or(0),
                Step::Refused(r) => {
                    self.refusal = Some(r);
                    return 0;
                }
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for CheckedIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.draining {
                return Pin::new(&mut this.inner).poll_read(cx, buf);
            }
            if this.accepted > 0 {
                let n = this.accepted.min(buf.remaining());
                buf.put_slice(&this.pending.split_to(n));
                this.accepted -= n;
                if this.pending.is_empty() && this.pending.capacity() > READ_CHUNK * 4 {
                    // A large message passed: an idle connection keeps no large buffer.
                    this.pending = BytesMut::new();
                }
                return Poll::Ready(Ok(()));
            }
            if let Some(refusal) = this.refusal.take() {
                *this.refused.lock().expect("refusal lock") = Some(refusal);
                this.draining = true;
                this.pending = BytesMut::new();
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "frame refused",
                )));
            }
            if this.end_of_stream {
                // A partial frame left by a client that hung up is dropped.
                return Poll::Ready(Ok(()));
            }
            let next_frame = this.scan();
            if this.accepted > 0 || this.refusal.is_some() {
                continue;
            }
            let want = next_frame
                .saturating_sub(this.pending.len())
                .max(READ_CHUNK);
            this.pending.reserve(want);
            match tokio_util::io::poll_read_buf(Pin::new(&mut this.inner), cx, &mut this.pending) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(0)) => this.end_of_stream = true,
                Poll::Ready(Ok(_)) => {}
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for CheckedIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Reads and discards what the client is still sending (the rest of the refused message), so
/// that closing the socket does not reset the connection before the client has read the
/// error. Bounded in bytes and time.
async fn drain<S: AsyncRead + Unpin>(io: &mut S, limit: usize) {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 64 << 10];
    let mut budget = limit.saturating_mul(4);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while budget > 0 {
        match tokio::time::timeout_at(deadline, io.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => budget = budget.saturating_sub(n),
            _ => return,
        }
    }
}

/// What the loop saw after the Execute it dispatches. The loop reads the message after an
/// Execute before running it (a client that wants the result must follow it with a Sync or
/// a Flush, so this never waits for what the client would not send): the statements a client
/// sends before one Sync are one transaction, and an Execute that a Sync follows at once is
/// the last of them — alone, it runs as a statement on its own, with no transaction staged.
#[derive(Default)]
pub struct Lookahead {
    sync_follows: AtomicBool,
}

impl Lookahead {
    /// Whether a Sync came right after the Execute being run.
    pub fn sync_follows(&self) -> bool {
        self.sync_follows.load(Ordering::Relaxed)
    }

    fn saw(&self, next: &PgWireFrontendMessage) {
        let sync = matches!(next, PgWireFrontendMessage::Sync(_));
        self.sync_follows.store(sync, Ordering::Relaxed);
    }
}

/// What the loop needs of its connection besides the protocol handlers.
pub struct ConnectionContext {
    /// Notifications to send while idle.
    pub inbox: Arc<Inbox>,
    /// Set by `pg_terminate_backend`, which also shuts the socket's read side.
    pub control: Arc<ConnectionControl>,
    /// The largest message accepted, in bytes.
    pub limit: usize,
    /// Where the loop tells the handlers what followed an Execute.
    pub lookahead: Arc<Lookahead>,
    /// Where the loop tells the handlers that TLS was negotiated.
    pub secure: Arc<AtomicBool>,
    /// Admission, failed and successful logins.
    pub logins: Arc<Logins>,
    /// The connection's slot, taken as it was accepted.
    pub slot: Slot,
}

/// One connection's login: its connection slot (held from the accept), and who it claims
/// to be.
struct Login {
    logins: Arc<Logins>,
    peer: SocketAddr,
    secure: bool,
    user: String,
    slot: Slot,
}

impl Login {
    /// The startup message arrived: wait out the address's failed-login penalty, then see
    /// whether the connection may log in. The refusal to send otherwise.
    async fn admit(&mut self, startup: &Startup) -> Result<(), Box<ErrorInfo>> {
        let wait = self.logins.wait_before_login(self.peer);
        if !wait.is_zero() {
            tokio::time::sleep(wait.min(STARTUP_TIMEOUT)).await;
        }
        self.user = startup.parameters.get("user").cloned().unwrap_or_default();
        let database = startup
            .parameters
            .get("database")
            .cloned()
            .unwrap_or_else(|| self.user.clone());
        self.logins
            .admit(&self.slot, self.peer, &self.user, &database, self.secure)
    }

    /// What a message processed while authenticating left: Some(refusal) for a failed
    /// login (every failure answered alike, logged, counted against the address).
    fn outcome(&self, result: PgWireResult<()>, state: PgWireConnectionState) -> Option<ErrorInfo> {
        match result {
            Err(e) => Some(self.logins.failed(self.peer, &self.user, e)),
            Ok(()) => {
                if matches!(state, PgWireConnectionState::ReadyForQuery) {
                    self.logins.succeeded(self.peer);
                }
                None
            }
        }
    }
}

/// Sends a FATAL refusal and half-closes the connection.
async fn say_goodbye<S, E>(
    socket: &mut Framed<CheckedIo<S>, PgWireMessageServerCodec<E>>,
    refusal: ErrorInfo,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let _ = socket
        .send(PgWireBackendMessage::ErrorResponse(refusal.into()))
        .await;
    let _ = tokio::io::AsyncWriteExt::shutdown(socket.get_mut()).await;
    Ok(())
}

/// What reading the next message gave: a message, or the end of the connection.
type Next<E> = Option<Result<PgWireFrontendMessage, E>>;

/// The client stayed idle past its session's timeout: the connection ends with FATAL
/// 25P03 (inside a transaction block, which is rolled back) or 57P05, as in PostgreSQL.
async fn end_idle<S, E>(
    socket: &mut Framed<CheckedIo<S>, PgWireMessageServerCodec<E>>,
    in_transaction: bool,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (code, message) = if in_transaction {
        (
            "25P03",
            "terminating connection due to idle-in-transaction timeout",
        )
    } else {
        (
            "57P05",
            "terminating connection due to idle-session timeout",
        )
    };
    say_goodbye(socket, fatal(code, message.to_owned())).await
}

/// The message `next` holds, or `None` after saying goodbye: the client left, sent a message
/// over the limit (refused with FATAL 54000) or a malformed one (FATAL 08P01, and a line in
/// the log), or the connection was terminated (57P01; what the client sent since, which the
/// socket's shut read side may still hand over, is not served).
async fn message_or_end<S, E>(
    socket: &mut Framed<CheckedIo<S>, PgWireMessageServerCodec<E>>,
    next: Next<PgWireError>,
    checks: FrameChecks<'_>,
) -> io::Result<Option<PgWireFrontendMessage>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let FrameChecks {
        control,
        refused,
        limit,
    } = checks;
    if control.terminated() {
        let message = "terminating connection due to administrator command";
        say_goodbye(socket, fatal("57P01", message.to_owned())).await?;
        return Ok(None);
    }
    if let Some(Ok(m)) = next {
        return Ok(Some(m));
    }
    let refusal = refused.lock().expect("refusal lock").take();
    let (code, message) = match refusal {
        None => return Ok(None),
        Some(Refusal::TooLarge { length }) => (
            "54000",
            format!("message of {length} bytes exceeds the server's limit of {limit} bytes"),
        ),
        Some(Refusal::Malformed(why)) => {
            let peer = socket.codec().client_info.socket_addr;
            log_limit::client_fault(&format!("protocol violation from {peer}: {why}"));
            ("08P01", format!("invalid frontend message: {why}"))
        }
    };
    // Half-closed, so the client sees the error and then the end, and hangs up; meanwhile
    // read what it still sends.
    say_goodbye(socket, fatal(code, message)).await?;
    drain(socket.get_mut(), limit).await;
    Ok(None)
}

/// A logged-in connection's socket: frames checked, then pgwire's codec, its statements
/// this server's.
type Socket = Framed<CheckedIo<MaybeTls>, PgWireMessageServerCodec<Arc<Prepared>>>;

/// What the messages queued after a Bind of the unnamed portal make.
enum Shape {
    /// A whole run (`WholeRun`) of the first `usize` of them.
    Whole(WholeRun, usize),
    /// Messages one by one.
    Not,
    /// Too few to tell.
    Incomplete,
    /// The connection ended while they were read (`gather_whole_run`).
    Ended,
}

fn unnamed(name: &Option<String>) -> bool {
    name.as_deref().is_none_or(str::is_empty)
}

/// Whether `queued`, after a Bind of the unnamed portal, begins with an optional Describe
/// of that portal, an Execute of all its rows and a Sync.
fn whole_run_shape(queued: &VecDeque<PgWireFrontendMessage>) -> Shape {
    use PgWireFrontendMessage as M;
    let describe = match queued.front() {
        None => return Shape::Incomplete,
        Some(M::Describe(d)) if d.target_type == b'P' && unnamed(&d.name) => true,
        Some(M::Execute(_)) => false,
        Some(_) => return Shape::Not,
    };
    let at = usize::from(describe);
    match queued.get(at) {
        None => return Shape::Incomplete,
        Some(M::Execute(e)) if unnamed(&e.name) && e.max_rows == 0 => {}
        Some(_) => return Shape::Not,
    }
    match queued.get(at + 1) {
        None => Shape::Incomplete,
        Some(M::Sync(_)) => Shape::Whole(WholeRun { describe }, at + 2),
        Some(_) => Shape::Not,
    }
}

/// After a Bind of the unnamed portal: what the messages already read (queued in `ahead`,
/// then those the socket holds without waiting) make, never `Shape::Incomplete`. A client
/// that sent the Bind alone is not waited for.
async fn gather_whole_run<S, E>(
    socket: &mut Framed<CheckedIo<S>, PgWireMessageServerCodec<E>>,
    ahead: &mut VecDeque<PgWireFrontendMessage>,
    checks: FrameChecks<'_>,
) -> io::Result<Shape>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        let shape = whole_run_shape(ahead);
        if !matches!(shape, Shape::Incomplete) {
            return Ok(shape);
        }
        let Some(next) = socket.next().now_or_never() else {
            return Ok(Shape::Not);
        };
        match message_or_end(socket, next, checks).await? {
            Some(m) => ahead.push_back(m),
            None => return Ok(Shape::Ended),
        }
    }
}

/// What `message_or_end` checks a message read ahead against.
#[derive(Clone, Copy)]
struct FrameChecks<'a> {
    control: &'a ConnectionControl,
    refused: &'a Mutex<Option<Refusal>>,
    limit: usize,
}

/// What became of a Bind offered as a whole run.
enum Offered {
    /// Answered through ReadyForQuery, the messages of the run taken from `ahead`.
    Answered,
    /// For the messages one by one (those read ahead are queued in `ahead`).
    OneByOne,
    /// The connection ended while the run's messages were read.
    Ended,
}

/// A Bind of the unnamed portal, outside a failed block (which refuses at Bind what does
/// not end it), that the messages of a whole run follow: answered in one step
/// (`Connection::run_whole`).
async fn offer_whole_run(
    socket: &mut Socket,
    bind: &Bind,
    ahead: &mut VecDeque<PgWireFrontendMessage>,
    handlers: &Connection,
    checks: FrameChecks<'_>,
) -> io::Result<Offered> {
    let ready = matches!(socket.state(), PgWireConnectionState::ReadyForQuery)
        && socket.transaction_status() != TransactionStatus::Error;
    if !ready || !unnamed(&bind.portal_name) {
        return Ok(Offered::OneByOne);
    }
    let (run, n) = match gather_whole_run(socket, ahead, checks).await? {
        Shape::Whole(run, n) => (run, n),
        Shape::Not | Shape::Incomplete => return Ok(Offered::OneByOne),
        Shape::Ended => return Ok(Offered::Ended),
    };
    match handlers.run_whole(socket, bind, run).await {
        Ok(true) => {
            ahead.drain(..n);
            Ok(Offered::Answered)
        }
        Ok(false) => Ok(Offered::OneByOne),
        Err(e) => {
            // Only the socket's: the Execute and Sync queued are skipped until the Sync,
            // which answers.
            process_error(socket, e, true).await?;
            Ok(Offered::Answered)
        }
    }
}

/// Serves one connection until the client leaves, is refused, is terminated, or fails.
pub async fn serve_connection(
    tcp: TcpStream,
    tls: Option<pgwire::tokio::TlsAcceptor>,
    handlers: Arc<Connection>,
    connection: ConnectionContext,
) -> io::Result<()> {
    let ConnectionContext {
        inbox,
        control,
        limit,
        lookahead,
        secure,
        logins,
        slot,
    } = connection;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&tcp);
    let negotiated = tokio::time::timeout(STARTUP_TIMEOUT, negotiate_tls(tcp, tls)).await;
    let Ok(Ok(Some(socket))) = negotiated else {
        return Ok(());
    };
    let client = &socket.codec().client_info;
    secure.store(client.is_secure, Ordering::Relaxed);
    let mut login = Login {
        logins,
        peer: client.socket_addr,
        secure: client.is_secure,
        user: String::new(),
        slot,
    };
    let parts = socket.into_parts();
    let refused = Arc::new(Mutex::new(None));
    let mut io = CheckedIo::new(parts.io, limit, refused.clone());
    // negotiate_tls may have read past the SSL request already: those bytes are checked too.
    io.pending = parts.read_buf;
    let mut checked = FramedParts::new(io, parts.codec);
    checked.write_buf = parts.write_buf;
    let mut socket: Socket = Framed::from_parts(checked);
    // Declared after the socket, so dropped before it.
    let _attached = control.attach(fd);

    let startup_handler = Connection::startup_handler(&handlers);
    let simple_query_handler = Connection::simple_query_handler(&handlers);
    let extended_query_handler = Connection::extended_query_handler(&handlers);
    let copy_handler = Connection::copy_handler(&handlers);
    let cancel_handler = Connection::cancel_handler(&handlers);
    let startup_deadline = tokio::time::Instant::now() + STARTUP_TIMEOUT;
    let checks = FrameChecks {
        control: &control,
        refused: &refused,
        limit,
    };
    // Messages read ahead of time (after an Execute, or a Bind), dispatched next.
    let mut ahead: VecDeque<PgWireFrontendMessage> = VecDeque::new();
    loop {
        let message = if let Some(message) = ahead.pop_front() {
            message
        } else {
            let starting = matches!(
                socket.state(),
                PgWireConnectionState::AwaitingStartup
                    | PgWireConnectionState::AuthenticationInProgress
            );
            let in_transaction = socket.transaction_status() != TransactionStatus::Idle;
            let idle = !starting && inbox.may_receive() && !in_transaction;
            // Waiting for the client's next command: the session's idle timeouts apply.
            let waiting =
                !starting && matches!(socket.state(), PgWireConnectionState::ReadyForQuery);
            let idle_end = waiting
                .then(|| control.idle_timeout(in_transaction))
                .flatten()
                .map(|limit| tokio::time::Instant::now() + limit);
            let idle_expired = async {
                match idle_end {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            // Terminated while a statement ran (its own, too): nothing more is read.
            let next = if control.terminated() {
                None
            } else if starting {
                match tokio::time::timeout_at(startup_deadline, socket.next()).await {
                    Ok(m) => m,
                    Err(_) => return Ok(()),
                }
            } else if idle {
                // Between transactions, notifications go out as they arrive (and any that
                // came while a statement or transaction block ran go out now).
                tokio::select! {
                    biased;
                    m = socket.next() => m,
                    () = idle_expired => return end_idle(&mut socket, in_transaction).await,
                    () = inbox.arrived() => {
                        for n in inbox.take() {
                            let response = NotificationResponse::new(n.pid, n.channel, n.payload);
                            socket.feed(PgWireBackendMessage::NotificationResponse(response)).await?;
                        }
                        socket.flush().await?;
                        continue;
                    }
                }
            } else {
                tokio::select! {
                    biased;
                    m = socket.next() => m,
                    () = idle_expired => return end_idle(&mut socket, in_transaction).await,
                }
            };
            let Some(message) = message_or_end(&mut socket, next, checks).await? else {
                return Ok(());
            };
            message
        };
        if matches!(message, PgWireFrontendMessage::Terminate(_)) {
            return Ok(());
        }
        // An Execute runs once the message after it is here (`Lookahead`). Should the client
        // leave instead, the statement is not run: its transaction could not have committed.
        let executes = matches!(message, PgWireFrontendMessage::Execute(_))
            && matches!(socket.state(), PgWireConnectionState::ReadyForQuery);
        if executes {
            if ahead.is_empty() {
                let next = socket.next().await;
                let Some(next) = message_or_end(&mut socket, next, checks).await? else {
                    return Ok(());
                };
                ahead.push_back(next);
            }
            lookahead.saw(ahead.front().expect("a message read ahead"));
        }
        if let PgWireFrontendMessage::Bind(bind) = &message {
            match offer_whole_run(&mut socket, bind, &mut ahead, &handlers, checks).await? {
                Offered::Answered => continue,
                Offered::OneByOne => {}
                Offered::Ended => return Ok(()),
            }
        }
        let is_extended = match socket.state() {
            PgWireConnectionState::CopyInProgress(extended) => extended,
            _ => message.is_extended_query(),
        };
        let is_cancel = matches!(message, PgWireFrontendMessage::CancelRequest(_));
        if let PgWireFrontendMessage::Startup(startup) = &message {
            if let Err(refusal) = login.admit(startup).await {
                return say_goodbye(&mut socket, *refusal).await;
            }
        }
        // A password message's outcome is the login's (a startup message's errors, such as
        // an unsupported protocol, are answered as they are).
        let authenticating = matches!(message, PgWireFrontendMessage::PasswordMessageFamily(_));
        let result = process_message(
            message,
            &mut socket,
            startup_handler.clone(),
            simple_query_handler.clone(),
            extended_query_handler.clone(),
            copy_handler.clone(),
            cancel_handler.clone(),
        )
        .await;
        if authenticating {
            if let Some(refusal) = login.outcome(result, socket.state()) {
                return say_goodbye(&mut socket, refusal).await;
            }
            continue;
        }
        if let Err(e) = result {
            let fatal = e.is_fatal();
            process_error(&mut socket, e, is_extended).await?;
            if fatal {
                return Ok(());
            }
        }
        if is_cancel {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn typed(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![kind];
        m.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    fn startup() -> Vec<u8> {
        let params = b"user\0ledger\0\0";
        let mut m = ((params.len() + 8) as u32).to_be_bytes().to_vec();
        m.extend_from_slice(&196_608u32.to_be_bytes());
        m.extend_from_slice(params);
        m
    }

    /// Whole frames before a malformed one are handed on; then the stream fails and the
    /// refusal is recorded.
    #[tokio::test]
    async fn hands_on_whole_frames_then_refuses() {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let refused = Arc::new(Mutex::new(None));
        let mut io = CheckedIo::new(server, 1 << 20, refused.clone());
        let mut good = startup();
        good.extend(typed(b'p', b"SCRAM-SHA-256\0\xff\xff\xff\xff"));
        good.extend(typed(b'Q', b"select 1\0"));
        // Sent a byte at a time: frames are still handed on whole.
        for b in &good {
            client.write_all(&[*b]).await.unwrap();
        }
        client
            .write_all(&typed(b'B', b"\0\0\0\0\0\x05"))
            .await
            .unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 7];
        let failed = loop {
            match io.read(&mut buf).await {
                Ok(0) => panic!("end of stream before the refusal"),
                Ok(n) => seen.extend_from_slice(&buf[..n]),
                Err(e) => break e,
            }
        };
        assert_eq!(seen, good);
        assert_eq!(failed.kind(), io::ErrorKind::InvalidData);
        let refusal = refused.lock().unwrap().clone();
        assert!(
            matches!(refusal, Some(Refusal::Malformed(_))),
            "{refusal:?}"
        );
    }

    #[tokio::test]
    async fn refuses_a_large_message_before_its_body() {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let refused = Arc::new(Mutex::new(None));
        let mut io = CheckedIo::new(server, 1000, refused.clone());
        client.write_all(&startup()).await.unwrap();
        client
            .write_all(&typed(b'Q', &[b'x'; 2000])[..5])
            .await
            .unwrap();
        let mut buf = vec![0u8; 4096];
        let mut seen = 0;
        while let Ok(n) = io.read(&mut buf).await {
            seen += n;
        }
        assert_eq!(seen, startup().len());
        let refusal = refused.lock().unwrap().clone();
        assert_eq!(refusal, Some(Refusal::TooLarge { length: 2004 }));
    }
}
