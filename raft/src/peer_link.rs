//! One multiplexed TCP connection per peer. Every request to a peer — openraft's appends,
//! votes and snapshot chunks, forwarded proposals, read barriers, membership calls — goes
//! over the same connection, tagged with an id; the peer answers each when it is done, in
//! any order, and the answer finds its caller by the id. So a long request (a snapshot's
//! last chunk, a forwarded batch) never holds a heartbeat up behind it, and a peer has one
//! connection to each other peer however many callers there are.
//!
//! A frame is a 4-byte little-endian length, an 8-byte id, then the bincode of a
//! `PeerRequest` or `PeerResponse`. A connection that fails is dropped, and every call
//! waiting on it fails (`CallError::Broken`: the request may have arrived); the next call
//! connects again. A call that cannot connect fails with `Unreachable` (nothing was sent).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use openraft::BasicNode;

use crate::network::{CallError, PeerRequest, PeerResponse};
use crate::types::NodeId;

/// The largest frame read: a log entry is at most 8 MiB (`proposer::BATCH_BYTES_MAX`) and
/// an append carries at most `MAX_PAYLOAD_ENTRIES`.
const FRAME_MAX: usize = 1 << 30;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A frame: the id, then the message.
pub(crate) fn encode_frame<T: Serialize>(id: u64, message: &T) -> std::io::Result<Vec<u8>> {
    let body = bincode::serialize(message).map_err(std::io::Error::other)?;
    let len = u32::try_from(8 + body.len()).map_err(std::io::Error::other)?;
    let mut frame = Vec::with_capacity(12 + body.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(&id.to_le_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Reads one frame: its id and message.
pub(crate) async fn read_frame<T: DeserializeOwned>(
    stream: &mut OwnedReadHalf,
) -> std::io::Result<(u64, T)> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await?;
    let len = u32::from_le_bytes(len) as usize;
    if !(8..=FRAME_MAX).contains(&len) {
        return Err(std::io::Error::other(format!(
            "a peer frame of {len} bytes is outside 8 ..= {FRAME_MAX}"
        )));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    let id = u64::from_le_bytes(body[..8].try_into().expect("8 bytes"));
    let message = bincode::deserialize(&body[8..]).map_err(std::io::Error::other)?;
    Ok((id, message))
}

/// Writes every frame queued on `frames` to `stream` until either ends.
pub(crate) async fn write_frames(
    mut stream: OwnedWriteHalf,
    mut frames: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    while let Some(frame) = frames.recv().await {
        if stream.write_all(&frame).await.is_err() {
            return;
        }
    }
}

/// The connections to peers, one per address, shared by everything on this node.
#[derive(Clone, Default)]
pub(crate) struct PeerLinks {
    links: Arc<Mutex<HashMap<String, Arc<Link>>>>,
    /// The peers this node's `--peers` names, at the addresses it reaches them on.
    named: Arc<BTreeMap<NodeId, String>>,
}

/// The link to one peer: its live connection, if any. Callers that find none connect one
/// at a time (the lock is held while connecting), so there is never more than one.
#[derive(Default)]
struct Link {
    current: tokio::sync::Mutex<Option<Arc<Connection>>>,
}

/// A live connection: frames to write, and the callers waiting for an answer by id.
struct Connection {
    frames: mpsc::UnboundedSender<Vec<u8>>,
    waiting: Mutex<HashMap<u64, oneshot::Sender<PeerResponse>>>,
    next_id: AtomicU64,
    closed: AtomicBool,
}

impl Connection {
    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<PeerResponse>>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl PeerLinks {
    /// Links that reach the peers in `named` at those addresses.
    pub fn naming(named: BTreeMap<NodeId, String>) -> PeerLinks {
        PeerLinks {
            links: Arc::default(),
            named: Arc::new(named),
        }
    }

    /// Where this node dials member `id`, whose membership entry is `node`: the address
    /// its own `--peers` gives, when it names `id`, else the membership's. The membership
    /// holds one list for the whole cluster — the one that reached each node first, which
    /// for a node that starts late is another node's — while `--peers` says how this node
    /// reaches each peer (on one network every node's list is the same; behind proxies or
    /// NAT they differ). A member added later (`hotledger.add_node`) is dialled at the
    /// address the membership gives it.
    pub fn addr_of(&self, id: NodeId, node: &BasicNode) -> String {
        match self.named.get(&id) {
            Some(addr) => addr.clone(),
            None => node.addr.clone(),
        }
    }

    /// Sends `request` to the peer at `addr` and waits at most `limit` for its answer.
    pub async fn call(
        &self,
        addr: &str,
        request: &PeerRequest,
        limit: Duration,
    ) -> Result<PeerResponse, CallError> {
        let connection = self.connection(addr, limit).await?;
        let id = connection.next_id.fetch_add(1, Ordering::Relaxed);
        let frame = encode_frame(id, request).map_err(CallError::Broken)?;
        let (tx, rx) = oneshot::channel();
        connection.waiting().insert(id, tx);
        // The reader marks a connection closed before it fails its callers: one that
        // registered after that sees the mark.
        if connection.closed.load(Ordering::SeqCst) || connection.frames.send(frame).is_err() {
            connection.waiting().remove(&id);
            connection.closed.store(true, Ordering::SeqCst);
            return Err(CallError::Broken(std::io::ErrorKind::BrokenPipe.into()));
        }
        match tokio::time::timeout(limit, rx).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(CallError::Broken(
                std::io::ErrorKind::ConnectionReset.into(),
            )),
            Err(_) => {
                // A late answer finds no one waiting and is dropped.
                connection.waiting().remove(&id);
                Err(CallError::TimedOut)
            }
        }
    }

    /// The live connection to `addr`, connecting when there is none.
    async fn connection(&self, addr: &str, limit: Duration) -> Result<Arc<Connection>, CallError> {
        let link = self
            .links
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(addr.to_string())
            .or_default()
            .clone();
        let mut current = link.current.lock().await;
        if let Some(live) = current
            .as_ref()
            .filter(|c| !c.closed.load(Ordering::SeqCst))
        {
            return Ok(live.clone());
        }
        let connect = TcpStream::connect(addr);
        let stream = match tokio::time::timeout(CONNECT_TIMEOUT.min(limit), connect).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return Err(CallError::Unreachable(e)),
            Err(_) => return Err(CallError::Unreachable(std::io::ErrorKind::TimedOut.into())),
        };
        let _ = stream.set_nodelay(true);
        let (reader, writer) = stream.into_split();
        let (frames, queued) = mpsc::unbounded_channel();
        let connection = Arc::new(Connection {
            frames,
            waiting: Mutex::default(),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
        });
        tokio::spawn(write_frames(writer, queued));
        tokio::spawn(read_answers(reader, Arc::downgrade(&connection)));
        *current = Some(connection.clone());
        Ok(connection)
    }
}

/// Hands each answer to its caller; when the connection ends, fails every caller still
/// waiting on it (dropping their senders) and marks it closed. Holds the connection
/// weakly: one replaced and no longer used is dropped, which ends its writer and so the
/// socket.
async fn read_answers(mut reader: OwnedReadHalf, connection: Weak<Connection>) {
    while let Ok((id, response)) = read_frame::<PeerResponse>(&mut reader).await {
        let Some(live) = connection.upgrade() else {
            return;
        };
        let caller = live.waiting().remove(&id);
        if let Some(caller) = caller {
            let _ = caller.send(response);
        }
    }
    if let Some(live) = connection.upgrade() {
        live.closed.store(true, Ordering::SeqCst);
        live.waiting().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    #[test]
    fn a_peer_named_in_peers_is_dialled_there_and_others_at_their_membership_address() {
        let links = PeerLinks::naming(BTreeMap::from([(2, "127.0.0.1:7002".to_string())]));
        let recorded = |addr: &str| BasicNode {
            addr: addr.to_string(),
        };
        assert_eq!(
            links.addr_of(2, &recorded("10.0.0.2:5533")),
            "127.0.0.1:7002"
        );
        assert_eq!(
            links.addr_of(4, &recorded("10.0.0.4:5533")),
            "10.0.0.4:5533"
        );
    }

    /// A peer that reads `count` requests, then answers them last first, each with its id.
    async fn peer_answering_in_reverse(count: usize) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let (mut reader, mut writer) = stream.into_split();
            let mut ids = Vec::new();
            for _ in 0..count {
                let (id, _): (u64, PeerRequest) = read_frame(&mut reader).await.unwrap();
                ids.push(id);
            }
            for id in ids.into_iter().rev() {
                let frame = encode_frame(id, &PeerResponse::Describe(format!("answer {id}")));
                writer.write_all(&frame.unwrap()).await.unwrap();
            }
            // Then the connection ends.
        });
        addr
    }

    #[tokio::test]
    async fn answers_find_their_callers_in_any_order_over_one_connection() {
        let addr = peer_answering_in_reverse(2).await;
        let links = PeerLinks::default();
        let limit = Duration::from_secs(5);
        let first = links.call(&addr, &PeerRequest::Describe, limit);
        let second = links.call(&addr, &PeerRequest::Describe, limit);
        let (first, second) = tokio::join!(first, second);
        let text = |r: Result<PeerResponse, CallError>| match r {
            Ok(PeerResponse::Describe(s)) => s,
            _ => panic!("no answer"),
        };
        let mut answers = vec![text(first), text(second)];
        answers.sort();
        assert_eq!(answers, ["answer 1", "answer 2"]);
        assert_eq!(links.links.lock().unwrap().len(), 1, "one link");
    }

    #[tokio::test]
    async fn a_caller_waiting_on_a_connection_that_ends_fails_and_the_next_reconnects() {
        // A peer that reads each request and closes the connection without answering.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            for _ in 0..2 {
                let (stream, _) = listener.accept().await.unwrap();
                let (mut reader, _writer) = stream.into_split();
                let _ = read_frame::<PeerRequest>(&mut reader).await;
                // Dropped without answering.
            }
        });
        let links = PeerLinks::default();
        let limit = Duration::from_secs(5);
        for _ in 0..2 {
            let outcome = links.call(&addr, &PeerRequest::Describe, limit).await;
            assert!(matches!(outcome, Err(CallError::Broken(_))));
        }
        // Nobody listens any more on a closed port: unreachable, nothing sent.
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let gone = closed.local_addr().unwrap().to_string();
        drop(closed);
        let outcome = links.call(&gone, &PeerRequest::Describe, limit).await;
        assert!(matches!(outcome, Err(CallError::Unreachable(_))));
    }
}
