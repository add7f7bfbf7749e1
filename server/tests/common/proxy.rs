//! A TCP proxy for one direction of a link between two nodes, which a test can cut (every
//! byte through it is read and dropped, as a network partition would lose it) and heal
//! (the connections of the cut are closed, so both ends reconnect afresh).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub struct LinkProxy {
    pub port: u16,
    cut: Arc<AtomicBool>,
    generation: Arc<AtomicU64>,
}

impl LinkProxy {
    /// Listens on a free port and forwards every connection to `target_port`.
    pub fn start(target_port: u16) -> LinkProxy {
        let port = super::free_port();
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("the proxy's port");
        let cut = Arc::new(AtomicBool::new(false));
        let generation = Arc::new(AtomicU64::new(0));
        let (c, g) = (cut.clone(), generation.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(("127.0.0.1", target_port)) else {
                    continue;
                };
                let born = g.load(Ordering::SeqCst);
                for (from, to) in [
                    (client.try_clone(), server.try_clone()),
                    (server.try_clone(), client.try_clone()),
                ] {
                    if let (Ok(from), Ok(to)) = (from, to) {
                        let (c, g) = (c.clone(), g.clone());
                        std::thread::spawn(move || pump(from, to, born, &c, &g));
                    }
                }
            }
        });
        LinkProxy {
            port,
            cut,
            generation,
        }
    }

    /// From now on nothing gets through.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    /// Traffic flows again, on fresh connections.
    pub fn heal(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// Copies `from` to `to` until either closes or the proxy heals (a connection that lived
/// through a cut has lost bytes: it is closed). While cut, what arrives is dropped.
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    born: u64,
    cut: &AtomicBool,
    generation: &AtomicU64,
) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buffer = vec![0u8; 64 << 10];
    loop {
        if generation.load(Ordering::SeqCst) != born {
            break;
        }
        match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                if !cut.load(Ordering::SeqCst) && to.write_all(&buffer[..n]).is_err() {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
