//! The fuzz targets' bodies, shared by the libFuzzer binaries (`cargo +nightly fuzz run
//! frames|sql_front`) and by the stable test that replays the saved inputs in `regressions/`
//! and the corpus (`cargo test --manifest-path fuzz/Cargo.toml`).

use std::sync::OnceLock;

use bytes::BytesMut;
use frames::{Scanner, Step};
use pgwire::messages::{DecodeContext, PgWireFrontendMessage, ProtocolVersion};
use plan::Catalog;

/// Feeds `data` to a frame scanner as one connection's stream; every frame it accepts goes to
/// pgwire's decoder, which must decode it whole (typed frames) or refuse it with an error
/// (a startup packet pgwire does not support), and never panic.
pub fn frames_then_decoder(data: &[u8]) {
    let mut scanner = Scanner::new(1 << 20);
    let mut at = 0;
    let mut typed = false;
    let mut passwords = 0;
    while let Step::Frame(n) = scanner.step(&data[at..]) {
        let frame = &data[at..at + n];
        at += n;
        // The server's codec decodes the first packet before any version is negotiated.
        let mut ctx = DecodeContext::new(ProtocolVersion::default());
        ctx.awaiting_frontend_ssl = false;
        ctx.awaiting_frontend_startup = !typed;
        let mut buf = BytesMut::from(frame);
        buf.extend_from_slice(b"S\0\0\0\x04");
        match PgWireFrontendMessage::decode(&mut buf, &ctx) {
            Ok(Some(message)) => {
                assert_eq!(&buf[..], b"S\0\0\0\x04", "{frame:?} read past its end");
                match message {
                    PgWireFrontendMessage::Startup(_) => typed = true,
                    PgWireFrontendMessage::CancelRequest(_) => return,
                    PgWireFrontendMessage::PasswordMessageFamily(p) => {
                        if passwords == 0 {
                            p.into_sasl_initial_response()
                                .expect("a checked SASL initial response decodes");
                        }
                        passwords += 1;
                    }
                    _ => {}
                }
            }
            Ok(None) => panic!("an accepted frame {frame:?} is incomplete to pgwire"),
            Err(e) => assert!(!typed, "pgwire refused an accepted frame {frame:?}: {e}"),
        }
    }
}

fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let mut catalog = Catalog::default();
        for create in [
            "CREATE TABLE t (i INT PRIMARY KEY, b BIGINT, n NUMERIC(10, 2), x TEXT, \
             ok BOOLEAN, at TIMESTAMPTZ, d DATE, j JSONB, a INT[])",
            "CREATE TABLE u (id BIGINT PRIMARY KEY, t_i INT, v VARCHAR(8))",
        ] {
            catalog = planner::catalog_with_table(&catalog, create).expect("fuzz catalog");
        }
        catalog
    })
}

/// Parses `data` (when it is UTF-8) as SQL and binds every statement against a small
/// catalog; errors are fine, panics are not.
pub fn parse_and_bind(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(statements) = sql::parse(text) else {
        return;
    };
    for statement in &statements {
        let _ = planner::bind(catalog(), statement, &[]);
    }
}
