use bytes::BytesMut;
use pgwire::messages::{DecodeContext, PgWireFrontendMessage, ProtocolVersion};
use proptest::prelude::*;

use super::*;

fn typed(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    m.extend_from_slice(body);
    m
}

fn startup() -> Vec<u8> {
    let params = b"user\0ledger\0database\0ledger\0\0";
    let mut m = ((params.len() + 8) as u32).to_be_bytes().to_vec();
    m.extend_from_slice(&196_608u32.to_be_bytes());
    m.extend_from_slice(params);
    m
}

fn sasl_initial(data: &[u8]) -> Vec<u8> {
    let mut body = b"SCRAM-SHA-256\0".to_vec();
    body.extend_from_slice(&(data.len() as i32).to_be_bytes());
    body.extend_from_slice(data);
    typed(b'p', &body)
}

fn parse(name: &str, query: &str, types: &[u32]) -> Vec<u8> {
    let mut body = format!("{name}\0{query}\0").into_bytes();
    body.extend_from_slice(&(types.len() as u16).to_be_bytes());
    for t in types {
        body.extend_from_slice(&t.to_be_bytes());
    }
    typed(b'P', &body)
}

fn bind(formats: &[u16], params: &[Option<&[u8]>], results: &[u16]) -> Vec<u8> {
    let mut body = b"\0\0".to_vec();
    body.extend_from_slice(&(formats.len() as u16).to_be_bytes());
    for f in formats {
        body.extend_from_slice(&f.to_be_bytes());
    }
    body.extend_from_slice(&(params.len() as u16).to_be_bytes());
    for p in params {
        match p {
            None => body.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(v) => {
                body.extend_from_slice(&(v.len() as i32).to_be_bytes());
                body.extend_from_slice(v);
            }
        }
    }
    body.extend_from_slice(&(results.len() as u16).to_be_bytes());
    for r in results {
        body.extend_from_slice(&r.to_be_bytes());
    }
    typed(b'B', &body)
}

/// What an extended-protocol client sends after logging in.
fn extended_round() -> Vec<Vec<u8>> {
    vec![
        parse("s1", "select $1::int, $2::text", &[23, 25]),
        bind(&[1], &[Some(&[0, 0, 0, 7]), None], &[0, 1]),
        typed(b'D', b"P\0"),
        typed(b'E', b"\0\0\0\0\0"),
        typed(b'C', b"Ss1\0"),
        typed(b'H', b""),
        typed(b'S', b""),
        typed(b'Q', b"select 1\0"),
        typed(b'd', b"1\t2\n"),
        typed(b'c', b""),
        typed(b'f', b"stopped\0"),
        typed(b'X', b""),
    ]
}

/// A scanner that has seen the startup message and a whole SCRAM exchange.
fn logged_in() -> Scanner {
    let mut s = Scanner::new(1 << 20);
    for m in [
        startup(),
        sasl_initial(b"n,,n=,r=abc"),
        typed(b'p', b"c=biws"),
    ] {
        assert_eq!(s.step(&m), Step::Frame(m.len()));
    }
    s
}

fn malformed(step: Step) -> String {
    match step {
        Step::Refused(Refusal::Malformed(why)) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn accepts_what_clients_send_split_anywhere() {
    let mut stream = vec![startup(), sasl_initial(b"n,,n=,r=abc"), typed(b'p', b"x")];
    stream.extend(extended_round());
    let mut s = Scanner::new(1 << 20);
    for m in &stream {
        for split in 0..m.len() {
            assert!(
                matches!(s.clone().step(&m[..split]), Step::Incomplete(_)),
                "{m:?} split at {split}"
            );
        }
        assert_eq!(s.step(m), Step::Frame(m.len()), "{m:?}");
    }
}

#[test]
fn refuses_a_password_reply_that_is_not_a_sasl_initial_response() {
    for body in [
        &b"secret\0"[..],
        b"md5abcdef\0",
        b"",
        b"SCRAM-SHA-256\0\0\0",
    ] {
        let mut s = Scanner::new(1 << 20);
        s.step(&startup());
        let why = malformed(s.step(&typed(b'p', body)));
        assert!(!why.is_empty());
    }
    // Announcing more data than it carries, or a negative length.
    let mut lying = b"SCRAM-SHA-256\0".to_vec();
    lying.extend_from_slice(&100i32.to_be_bytes());
    lying.extend_from_slice(b"short");
    let mut s = Scanner::new(1 << 20);
    s.step(&startup());
    malformed(s.step(&typed(b'p', &lying)));
}

#[test]
fn refuses_truncated_and_lying_extended_messages() {
    let good_parse = parse("", "select $1", &[23]);
    let good_bind = bind(&[], &[Some(b"12")], &[]);
    for good in [good_parse, good_bind] {
        // Truncated: the length says the body ends early.
        for cut in 1..good.len() - 5 {
            let body = &good[5..good.len() - cut];
            malformed(logged_in().step(&typed(good[0], body)));
        }
    }
    // A Parse whose type count is "negative" (65535 unsigned) with no types after it.
    malformed(logged_in().step(&typed(b'P', b"\0select 1\0\xff\xff")));
    // A Bind whose parameter count exceeds its body, and one whose value length does.
    malformed(logged_in().step(&typed(b'B', b"\0\0\0\0\0\x05")));
    let mut long_value = b"\0\0\0\0\0\x01".to_vec();
    long_value.extend_from_slice(&1_000i32.to_be_bytes());
    long_value.extend_from_slice(b"abc\0\0");
    malformed(logged_in().step(&typed(b'B', &long_value)));
}

#[test]
fn a_bind_with_more_formats_than_parameters_is_whole() {
    // Refused at Bind with an ERROR, not here: the frame holds what it says.
    let two_for_three = bind(&[0, 1], &[None, None, None], &[]);
    assert_eq!(
        logged_in().step(&two_for_three),
        Step::Frame(two_for_three.len())
    );
}

#[test]
fn refuses_bad_lengths_types_and_leftovers() {
    // A typed message shorter than its own length field.
    malformed(logged_in().step(b"Q\0\0\0\x03"));
    malformed(logged_in().step(b"S\0\0\0\0"));
    malformed(logged_in().step(&typed(b'S', b"x")));
    malformed(logged_in().step(&typed(b'Q', b"select 1")));
    malformed(logged_in().step(&typed(b'Q', b"select 1\0\0")));
    malformed(logged_in().step(&typed(b'D', b"Zname\0")));
    malformed(logged_in().step(&typed(b'F', b"")));
    let mut s = logged_in();
    s.step(&typed(b'S', b""));
    malformed(s.step(&typed(b'p', b"late")));
    malformed(logged_in().step(&typed(0, b"")));
    let why = malformed(logged_in().step(&typed(b'E', &[b'x'; 20_000])));
    assert!(why.contains("invalid message length"), "{why}");
    // Startup packets: too short, an old protocol, unterminated parameters.
    malformed(Scanner::new(1 << 20).step(b"\0\0\0\x04\0\0"));
    let mut v2 = 15u32.to_be_bytes().to_vec();
    v2.extend_from_slice(&0x0002_0000u32.to_be_bytes());
    v2.extend_from_slice(b"user\0x\0");
    malformed(Scanner::new(1 << 20).step(&v2));
    let mut open = 14u32.to_be_bytes().to_vec();
    open.extend_from_slice(&196_608u32.to_be_bytes());
    open.extend_from_slice(b"user\0x");
    malformed(Scanner::new(1 << 20).step(&open));
}

#[test]
fn refuses_a_large_message_from_its_header_alone() {
    let mut s = Scanner::new(1000);
    assert_eq!(s.step(&startup()), Step::Frame(startup().len()));
    let header = &typed(b'Q', &[b'x'; 2000])[..5];
    assert_eq!(
        s.step(header),
        Step::Refused(Refusal::TooLarge { length: 2004 })
    );
}

#[test]
fn a_cancel_request_ends_the_stream() {
    let mut cancel = 16u32.to_be_bytes().to_vec();
    cancel.extend_from_slice(&80_877_102u32.to_be_bytes());
    cancel.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2]);
    let mut s = Scanner::new(1 << 20);
    assert_eq!(s.step(&cancel), Step::Frame(16));
    assert_eq!(s.step(b""), Step::Incomplete(None));
    malformed(s.step(&startup()));
}

/// pgwire decodes an accepted frame without panicking and consumes exactly that frame; a
/// first password message becomes a SASL initial response.
fn decode_accepted(frame: &[u8], first_password: bool) {
    let mut ctx = DecodeContext::new(ProtocolVersion::PROTOCOL3_0);
    ctx.awaiting_frontend_ssl = false;
    ctx.awaiting_frontend_startup = false;
    let mut buf = BytesMut::from(frame);
    buf.extend_from_slice(b"Strailing");
    let decoded = PgWireFrontendMessage::decode(&mut buf, &ctx);
    let Ok(Some(message)) = decoded else {
        panic!("pgwire refused an accepted frame {frame:?}: {decoded:?}");
    };
    assert_eq!(&buf[..], b"Strailing", "{frame:?} decoded as {message:?}");
    if let (true, PgWireFrontendMessage::PasswordMessageFamily(p)) = (first_password, message) {
        p.into_sasl_initial_response()
            .expect("a checked SASL initial response");
    }
}

fn mutated(frame: Vec<u8>, edits: Vec<(usize, u8)>, cut: usize, grow: Vec<u8>) -> Vec<u8> {
    let mut frame = frame;
    for (at, byte) in edits {
        let at = at % frame.len();
        frame[at] = byte;
    }
    frame.truncate(frame.len().saturating_sub(cut % 4));
    frame.extend(grow);
    frame
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// Valid messages with bytes changed, cut or added: whatever the scanner accepts, pgwire
    /// decodes whole.
    #[test]
    fn accepted_frames_decode_exactly(
        which in 0usize..14,
        edits in prop::collection::vec((0usize..64, any::<u8>()), 0..4),
        cut in 0usize..8,
        grow in prop::collection::vec(any::<u8>(), 0..6),
    ) {
        let mut candidates = extended_round();
        candidates.push(sasl_initial(b"n,,n=,r=abc"));
        candidates.push(typed(b'p', b"abc"));
        let original = candidates[which % candidates.len()].clone();
        let frame = mutated(original, edits, cut, grow);
        let first_password = frame[0] == b'p';
        let mut s = Scanner::new(1 << 20);
        s.step(&startup());
        if !first_password {
            s.step(&sasl_initial(b"x"));
        }
        if let Step::Frame(n) = s.step(&frame) {
            decode_accepted(&frame[..n], first_password);
        }
    }
}
