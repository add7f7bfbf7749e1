//! Malformed protocol messages, before and after login: each is refused with FATAL 08P01 and
//! one short line in the log — never a panic, never a message decoded from the next one's
//! bytes — and the server keeps serving. A flood of them leaves a log bounded in rate.

mod common;

use common::wire::Wire;
use common::{scalar, TestServer, PASSWORD};

fn typed(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// Frames the probes sent after login, each with what made it a lie.
fn after_login_probes() -> Vec<(&'static str, Vec<u8>)> {
    let mut long_value = b"\0\0\0\0\0\x01".to_vec();
    long_value.extend_from_slice(&1_000i32.to_be_bytes());
    long_value.extend_from_slice(b"abc\0\0");
    vec![
        ("truncated Parse", typed(b'P', b"\0select 1")),
        (
            "Parse with a negative type count",
            typed(b'P', b"\0select 1\0\xff\xff"),
        ),
        ("truncated Bind", typed(b'B', b"\0\0\0\x01")),
        (
            "Bind counting more parameters than it holds",
            typed(b'B', b"\0\0\0\0\0\x05"),
        ),
        (
            "Bind whose value is longer than its body",
            typed(b'B', &long_value),
        ),
        ("length shorter than the header", b"Q\0\0\0\x02".to_vec()),
        ("unknown message type", typed(b'z', b"")),
        ("Sync with a body", typed(b'S', b"junk")),
        ("password message after login", typed(b'p', b"secret\0")),
    ]
}

#[test]
fn malformed_frames_are_refused_and_the_server_keeps_serving() {
    let server = TestServer::start();
    // Before login: replies to the SCRAM request that are not a SASL initial response.
    for (what, body) in [
        ("cleartext password", &b"ledger\0"[..]),
        ("MD5 password", b"md5ffffffffffffffffffffffffffffffff\0"),
        ("empty reply", b""),
    ] {
        let mut wire = Wire::start_login(server.port, "ledger");
        wire.send_raw(&typed(b'p', body));
        let fatal = wire.fatal_then_close();
        assert!(fatal.starts_with("FATAL 08P01"), "{what}: {fatal}");
    }
    for (what, frame) in after_login_probes() {
        let mut wire = Wire::connect(server.port, "ledger", PASSWORD, "ledger");
        // A valid query in the same write is answered first.
        let mut bytes = typed(b'Q', b"select 1\0");
        bytes.extend_from_slice(&frame);
        wire.send_raw(&bytes);
        let fatal = wire.fatal_then_close();
        assert!(fatal.starts_with("FATAL 08P01"), "{what}: {fatal}");
    }
    let log = server.log();
    assert!(!log.contains("panicked"), "{log}");
    assert!(
        log.matches("protocol violation from 127.0.0.1").count() >= 12,
        "{log}"
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = server.client().await;
        assert_eq!(scalar(&c, "select 41 + 1").await.as_deref(), Some("42"));
    });
}

/// Many connections sending a 5-byte lie after their startup message, at once: each is refused, the log grows by at most a
/// few lines a second (the rest counted), and a well-behaved client is served throughout.
#[test]
fn a_flood_of_bad_frames_leaves_a_bounded_log() {
    let server = TestServer::start();
    let before = server.log().len();
    let started = std::time::Instant::now();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let port = server.port;
            std::thread::spawn(move || {
                for _ in 0..100 {
                    let mut wire = Wire::start_login(port, "ledger");
                    wire.send_raw(b"Q\0\0\0\x01");
                    assert!(wire.fatal_then_close().starts_with("FATAL 08P01"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // The next second's first line says how many were left out.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let mut wire = Wire::start_login(server.port, "ledger");
    wire.send_raw(b"Q\0\0\0\x01");
    assert!(wire.fatal_then_close().starts_with("FATAL 08P01"));
    let log = server.log();
    let added = &log[before..];
    let lines = added
        .lines()
        .filter(|l| l.contains("protocol violation"))
        .count();
    // 20 lines a second at most, plus the lines that report how many were left out.
    let bound = 40 * (started.elapsed().as_secs() as usize + 1);
    assert!(
        (1..=bound).contains(&lines),
        "{lines} lines for 801 refusals"
    );
    assert!(added.contains("similar lines suppressed"), "{added}");
    assert!(!added.contains("panicked"), "{added}");
}
