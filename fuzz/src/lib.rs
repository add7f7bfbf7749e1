//! The fuzz targets' bodies, shared by the libFuzzer binaries (`cargo +nightly fuzz run
//! frames|sql_front`) and by the stable test that replays the saved inputs in `regressions/`
//! and the corpus (`cargo test --manifest-path fuzz/Cargo.toml`).

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use frames::{Scanner, Step};
use pgwire::messages::{DecodeContext, PgWireFrontendMessage, ProtocolVersion};
use plan::{Catalog, Interrupt, StopReason};

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

/// Parses `data` (when it is UTF-8) as SQL, binds every statement against a small catalog,
/// and evaluates those that read no table (constants, functions, `generate_series`, catalog
/// views) as a session would, stopped after 200 ms as `statement_timeout` would stop them;
/// errors are fine, panics are not.
pub fn parse_and_bind(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(statements) = sql::parse(text) else {
        return;
    };
    for statement in &statements {
        let Ok(bound) = planner::bind(catalog(), statement, &[]) else {
            continue;
        };
        if let plan::Plan::Select(select) = &bound.plan {
            if !select.reads_user_tables {
                evaluate(select);
            }
        }
    }
}

/// The statement being evaluated and when it started, for the watchdog.
static RUNNING: Mutex<Option<(Instant, Interrupt)>> = Mutex::new(None);

fn evaluate(select: &plan::SelectPlan) {
    static WATCHDOG: OnceLock<()> = OnceLock::new();
    WATCHDOG.get_or_init(|| {
        std::thread::spawn(|| loop {
            std::thread::sleep(Duration::from_millis(20));
            if let Some((started, interrupt)) = &*RUNNING.lock().unwrap() {
                if started.elapsed() > Duration::from_millis(200) {
                    interrupt.raise(StopReason::Timeout);
                }
            }
        });
    });
    let interrupt = Interrupt::new();
    *RUNNING.lock().unwrap() = Some((Instant::now(), interrupt.clone()));
    let _ = ledger::evaluate_without_storage(
        select,
        catalog(),
        &[],
        1_790_000_000_000_000,
        &plan::SessionSequences::default(),
        &plan::NoBackends,
        &interrupt,
    );
    *RUNNING.lock().unwrap() = None;
}
