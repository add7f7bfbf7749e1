//! One client connection's message loop, with a limit on message size enforced on the bytes
//! as they arrive: a message whose header announces more than the limit is refused before
//! its body is read, with a FATAL 54000, instead of being buffered (pgwire alone would buffer
//! up to 1 GiB per message). Everything else is pgwire's own dispatch.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use pgwire::api::{ClientInfo, PgWireConnectionState, PgWireServerHandlers};
use pgwire::error::{ErrorInfo, PgWireError};
use pgwire::messages::response::{NotificationResponse, TransactionStatus};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::tokio::server::{
    negotiate_tls, process_error, process_message, PgWireMessageServerCodec,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, FramedParts};

use crate::activity::ConnectionControl;
use crate::notifications::Inbox;

/// A client that does not finish authenticating within this long is dropped.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the framing of the incoming byte stream is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    /// Before the startup message: messages are a 4-byte length, no type byte.
    Untyped,
    /// Between messages: a type byte and a 4-byte length come next.
    Typed,
    /// Inside a message body: this many bytes remain.
    Body { remaining: usize, then_typed: bool },
}

/// The socket as pgwire reads it, with message headers checked against the limit.
pub struct LimitedIo<S> {
    inner: S,
    limit: usize,
    framing: Framing,
    header: [u8; 8],
    header_len: usize,
    /// Set to the announced length when a message was refused.
    refused: Arc<AtomicUsize>,
    /// After a refusal: bytes pass through unexamined, to be discarded.
    draining: bool,
}

impl<S> LimitedIo<S> {
    fn new(inner: S, limit: usize, refused: Arc<AtomicUsize>) -> LimitedIo<S> {
        // negotiate_tls has already consumed an SSLRequest; the startup message is next.
        LimitedIo {
            inner,
            limit,
            framing: Framing::Untyped,
            header: [0; 8],
            header_len: 0,
            refused,
            draining: false,
        }
    }

    /// Advances the framing over newly read bytes; Err(length) for a message over the limit.
    fn scan(&mut self, mut data: &[u8]) -> Result<(), usize> {
        while !data.is_empty() {
            match self.framing {
                Framing::Body {
                    remaining,
                    then_typed,
                } => {
                    let n = remaining.min(data.len());
                    data = &data[n..];
                    self.framing = if n < remaining {
                        Framing::Body {
                            remaining: remaining - n,
                            then_typed,
                        }
                    } else if then_typed {
                        Framing::Typed
                    } else {
                        Framing::Untyped
                    };
                }
                Framing::Untyped | Framing::Typed => {
                    let typed = self.framing == Framing::Typed;
                    // Typed: type byte and length. Untyped: length and protocol code.
                    let need = if typed { 5 } else { 8 };
                    let n = (need - self.header_len).min(data.len());
                    self.header[self.header_len..self.header_len + n].copy_from_slice(&data[..n]);
                    self.header_len += n;
                    data = &data[n..];
                    if self.header_len < need {
                        continue;
                    }
                    self.header_len = 0;
                    let at = if typed { 1 } else { 0 };
                    let length =
                        u32::from_be_bytes(self.header[at..at + 4].try_into().expect("4 bytes"))
                            as usize;
                    if length > self.limit {
                        return Err(length);
                    }
                    let (remaining, then_typed) = if typed {
                        (length.saturating_sub(4), true)
                    } else {
                        // After an SSL or GSS encryption request another untyped message
                        // follows; after the startup message, typed messages do.
                        let code =
                            u32::from_be_bytes(self.header[4..8].try_into().expect("4 bytes"));
                        (
                            length.saturating_sub(8),
                            !matches!(code, 80_877_103 | 80_877_104),
                        )
                    };
                    self.framing = match (remaining, then_typed) {
                        (0, true) => Framing::Typed,
                        (0, false) => Framing::Untyped,
                        _ => Framing::Body {
                            remaining,
                            then_typed,
                        },
                    };
                }
            }
        }
        Ok(())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for LimitedIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if this.draining {
                    return Poll::Ready(Ok(()));
                }
                if let Err(length) = this.scan(&buf.filled()[before..]) {
                    this.draining = true;
                    this.refused.store(length, Ordering::Relaxed);
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "message too large",
                    )));
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for LimitedIo<S> {
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
}

/// What reading the next message gave: a message, or the end of the connection.
type Next<E> = Option<Result<PgWireFrontendMessage, E>>;

/// The client stayed idle past its session's timeout: the connection ends with FATAL
/// 25P03 (inside a transaction block, which is rolled back) or 57P05, as in PostgreSQL.
async fn end_idle<S, E>(
    socket: &mut Framed<LimitedIo<S>, PgWireMessageServerCodec<E>>,
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
    let info = ErrorInfo::new("FATAL".to_owned(), code.to_owned(), message.to_owned());
    let _ = socket
        .send(PgWireBackendMessage::ErrorResponse(info.into()))
        .await;
    Ok(())
}

/// The message `next` holds, or `None` after saying goodbye: the client left or sent a message
/// over the limit (refused with FATAL 54000), or the connection was terminated (57P01; what
/// the client sent since, which the socket's shut read side may still hand over, is not
/// served).
async fn message_or_end<S, E>(
    socket: &mut Framed<LimitedIo<S>, PgWireMessageServerCodec<E>>,
    next: Next<PgWireError>,
    control: &ConnectionControl,
    refused: &AtomicUsize,
    limit: usize,
) -> io::Result<Option<PgWireFrontendMessage>>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    if control.terminated() {
        let info = ErrorInfo::new(
            "FATAL".to_owned(),
            "57P01".to_owned(),
            "terminating connection due to administrator command".to_owned(),
        );
        let _ = socket
            .send(PgWireBackendMessage::ErrorResponse(info.into()))
            .await;
        return Ok(None);
    }
    if let Some(Ok(m)) = next {
        return Ok(Some(m));
    }
    let length = refused.load(Ordering::Relaxed);
    if length > 0 {
        let info = ErrorInfo::new(
            "FATAL".to_owned(),
            "54000".to_owned(),
            format!("message of {length} bytes exceeds the server's limit of {limit} bytes"),
        );
        let _ = socket
            .send(PgWireBackendMessage::ErrorResponse(info.into()))
            .await;
        // Half-close, so the client sees the error and then the end, and hangs up;
        // meanwhile read what it still sends.
        let _ = tokio::io::AsyncWriteExt::shutdown(socket.get_mut()).await;
        drain(socket.get_mut(), limit).await;
    }
    Ok(None)
}

/// Serves one connection until the client leaves, is refused, is terminated, or fails.
pub async fn serve_connection<H: PgWireServerHandlers>(
    tcp: TcpStream,
    tls: Option<pgwire::tokio::TlsAcceptor>,
    handlers: Arc<H>,
    connection: ConnectionContext,
) -> io::Result<()> {
    let ConnectionContext {
        inbox,
        control,
        limit,
        lookahead,
    } = connection;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&tcp);
    let negotiated = tokio::time::timeout(STARTUP_TIMEOUT, negotiate_tls(tcp, tls)).await;
    let Ok(Ok(Some(socket))) = negotiated else {
        return Ok(());
    };
    let parts = socket.into_parts();
    let refused = Arc::new(AtomicUsize::new(0));
    let mut io = LimitedIo::new(parts.io, limit, refused.clone());
    // negotiate_tls may have read past the SSL request already: account for those bytes.
    if io.scan(&parts.read_buf).is_err() {
        return Ok(());
    }
    let mut limited = FramedParts::new(io, parts.codec);
    limited.read_buf = parts.read_buf;
    limited.write_buf = parts.write_buf;
    let mut socket = Framed::from_parts(limited);
    // Declared after the socket, so dropped before it.
    let _attached = control.attach(fd);

    let startup_handler = handlers.startup_handler();
    let simple_query_handler = handlers.simple_query_handler();
    let extended_query_handler = handlers.extended_query_handler();
    let copy_handler = handlers.copy_handler();
    let cancel_handler = handlers.cancel_handler();
    let startup_deadline = tokio::time::Instant::now() + STARTUP_TIMEOUT;
    // A message read ahead of time (after an Execute), dispatched next.
    let mut ahead: Option<PgWireFrontendMessage> = None;
    loop {
        let message = if let Some(message) = ahead.take() {
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
            let Some(message) =
                message_or_end(&mut socket, next, &control, &refused, limit).await?
            else {
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
            let next = socket.next().await;
            let Some(next) = message_or_end(&mut socket, next, &control, &refused, limit).await?
            else {
                return Ok(());
            };
            lookahead.saw(&next);
            ahead = Some(next);
        }
        let is_extended = match socket.state() {
            PgWireConnectionState::CopyInProgress(extended) => extended,
            _ => message.is_extended_query(),
        };
        let is_cancel = matches!(message, PgWireFrontendMessage::CancelRequest(_));
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

    fn io(limit: usize) -> LimitedIo<()> {
        LimitedIo::new((), limit, Arc::new(AtomicUsize::new(0)))
    }

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

    #[test]
    fn follows_messages_split_anywhere() {
        let mut stream = startup();
        stream.extend(typed(b'Q', b"select 1\0"));
        stream.extend(typed(b'S', b""));
        stream.extend(typed(b'Q', &[b'x'; 100]));
        for split in 1..stream.len() {
            let mut l = io(1000);
            assert!(l.scan(&stream[..split]).is_ok());
            assert!(l.scan(&stream[split..]).is_ok());
            assert_eq!(l.framing, Framing::Typed, "split at {split}");
        }
    }

    #[test]
    fn refuses_a_large_message_from_its_header() {
        let mut l = io(1000);
        let mut stream = startup();
        stream.extend(typed(b'Q', b"select 1\0"));
        assert!(l.scan(&stream).is_ok());
        // Only the header of a 2000-byte query has arrived: refuse now, not after buffering.
        let header = &typed(b'Q', &[b'x'; 2000])[..5];
        assert_eq!(l.scan(header), Err(2004));
        let mut fresh = io(10);
        assert_eq!(fresh.scan(&startup()), Err(startup().len()));
    }
}
