//! A client that speaks the PostgreSQL protocol message by message: what a driver sends,
//! batched as the test says (a pipeline without Sync, an error mid-batch, a dropped
//! connection), and every reply as a short line, so that the same script run against
//! hotledger and against PostgreSQL 15 can be compared line by line.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::BytesMut;
use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};
use postgres_protocol::message::backend::{ErrorFields, Message};
use postgres_protocol::message::frontend;
use postgres_protocol::IsNull;

/// One frontend message.
#[derive(Clone, Debug)]
pub enum Send {
    Query(String),
    /// Parse of an unnamed (`""`) or named statement, parameter types left to the server.
    Parse(String, String),
    /// Bind of a statement to the unnamed portal, with text parameters (`None` is NULL).
    Bind(String, Vec<Option<String>>),
    /// The same with the parameter format codes given (any count, even a wrong one).
    BindFormats(String, Vec<Option<String>>, Vec<i16>),
    DescribeStatement(String),
    DescribePortal,
    Execute,
    Sync,
    Flush,
    CopyData(Vec<u8>),
    CopyDone,
    CopyFail(String),
}

/// The unnamed statement's Parse.
pub fn parse(sql: &str) -> Send {
    Send::Parse(String::new(), sql.to_string())
}

/// Bind of the unnamed statement with text parameters.
pub fn bind(params: &[&str]) -> Send {
    Send::Bind(
        String::new(),
        params.iter().map(|p| Some(p.to_string())).collect(),
    )
}

/// Parse, Bind, Execute of `sql` with text parameters: what a driver sends per statement.
pub fn statement(sql: &str, params: &[&str]) -> Vec<Send> {
    vec![parse(sql), bind(params), Send::Execute]
}

pub struct Wire {
    stream: TcpStream,
    incoming: BytesMut,
}

impl Wire {
    /// Connects and logs in (SCRAM-SHA-256 when asked for a password, or trust).
    pub fn connect(port: u16, user: &str, password: &str, database: &str) -> Wire {
        let mut wire = Wire::startup(port, user, database);
        let mut scram = None;
        loop {
            match wire.message() {
                Message::AuthenticationSasl(_) => {
                    let s = ScramSha256::new(password.as_bytes(), ChannelBinding::unsupported());
                    let mut buf = BytesMut::new();
                    frontend::sasl_initial_response("SCRAM-SHA-256", s.message(), &mut buf)
                        .expect("sasl initial");
                    wire.write(&buf);
                    scram = Some(s);
                }
                Message::AuthenticationSaslContinue(body) => {
                    let s = scram.as_mut().expect("SASL started");
                    s.update(body.data()).expect("server first message");
                    let mut buf = BytesMut::new();
                    frontend::sasl_response(s.message(), &mut buf).expect("sasl response");
                    wire.write(&buf);
                }
                Message::AuthenticationSaslFinal(body) => {
                    let s = scram.as_mut().expect("SASL started");
                    s.finish(body.data()).expect("server signature");
                }
                Message::ErrorResponse(body) => panic!("login refused: {}", error_line(&body)),
                Message::ReadyForQuery(_) => return wire,
                _ => {}
            }
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to the server");
    }

    /// Sends the messages in one write.
    pub fn send(&mut self, messages: &[Send]) {
        let mut buf = BytesMut::new();
        for m in messages {
            encode(m, &mut buf);
        }
        self.write(&buf);
    }

    fn message(&mut self) -> Message {
        loop {
            if let Some(m) = Message::parse(&mut self.incoming).expect("a backend message") {
                return m;
            }
            let mut chunk = [0u8; 8192];
            let n = self.stream.read(&mut chunk).expect("read from the server");
            assert!(n > 0, "the server closed the connection");
            self.incoming.extend_from_slice(&chunk[..n]);
        }
    }

    /// Replies, one line each, up to and including the `n`th ReadyForQuery.
    pub fn replies(&mut self, mut n: usize) -> Vec<String> {
        let mut lines = Vec::new();
        while n > 0 {
            let m = self.message();
            if matches!(m, Message::ReadyForQuery(_)) {
                n -= 1;
            }
            if let Some(line) = reply_line(m) {
                lines.push(line);
            }
        }
        lines
    }

    /// Replies up to and including the first one `last` accepts (after a Flush, say).
    pub fn replies_until(&mut self, last: impl Fn(&str) -> bool) -> Vec<String> {
        let mut lines = Vec::new();
        loop {
            if let Some(line) = reply_line(self.message()) {
                let done = last(&line);
                lines.push(line);
                if done {
                    return lines;
                }
            }
        }
    }

    /// Sends the messages in one write and returns the replies through the ReadyForQuery of
    /// each Sync and Query among them.
    pub fn round(&mut self, messages: &[Send]) -> Vec<String> {
        self.send(messages);
        let readies = messages
            .iter()
            .filter(|m| matches!(m, Send::Sync | Send::Query(_)))
            .count();
        self.replies(readies)
    }

    /// The replies' bytes as they came, up to and including the `n`th ReadyForQuery.
    pub fn raw_replies(&mut self, mut n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        while n > 0 {
            if self.incoming.len() >= 5 {
                let len = u32::from_be_bytes(self.incoming[1..5].try_into().unwrap()) as usize;
                if self.incoming.len() > len {
                    let frame = self.incoming.split_to(len + 1);
                    if frame[0] == b'Z' {
                        n -= 1;
                    }
                    out.extend_from_slice(&frame);
                    continue;
                }
            }
            let mut chunk = [0u8; 8192];
            let got = self.stream.read(&mut chunk).expect("read from the server");
            assert!(got > 0, "the server closed the connection");
            self.incoming.extend_from_slice(&chunk[..got]);
        }
        out
    }

    /// Sends bytes as they are: a message the encoder would not write.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.write(bytes);
    }

    /// The ErrorResponse the server answers with (as "SEVERITY CODE message"), after which it
    /// must close the connection.
    pub fn fatal_then_close(&mut self) -> String {
        let line = loop {
            if let Message::ErrorResponse(body) = self.message() {
                let mut severity = String::new();
                let mut fields = body.fields();
                while let Some(f) = fields.next().expect("error fields") {
                    if f.type_() == b'S' {
                        severity = String::from_utf8_lossy(f.value_bytes()).into_owned();
                    }
                }
                break format!("{severity} {}", error_line(&body));
            }
        };
        let mut rest = Vec::new();
        let _ = self.stream.read_to_end(&mut rest);
        assert!(rest.is_empty(), "after {line}: more bytes {rest:?}");
        line
    }

    /// Connects and sends the startup message.
    fn startup(port: u16, user: &str, database: &str) -> Wire {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("read timeout");
        stream.set_nodelay(true).expect("nodelay");
        let mut wire = Wire {
            stream,
            incoming: BytesMut::new(),
        };
        let mut buf = BytesMut::new();
        frontend::startup_message([("user", user), ("database", database)], &mut buf)
            .expect("startup message");
        wire.write(&buf);
        wire
    }

    /// Connects and sends the startup message only; the server's request for a password is
    /// read.
    pub fn start_login(port: u16, user: &str) -> Wire {
        let mut wire = Wire::startup(port, user, user);
        assert!(matches!(wire.message(), Message::AuthenticationSasl(_)));
        wire
    }

    /// Closes the socket without a Terminate, as a crashed client would.
    pub fn drop_connection(self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// Appends a Bind to the unnamed portal of `statement`: its parameters' bytes (`None` is
/// NULL) in the given formats, its results in `results`.
pub fn bind_into(
    statement: &str,
    params: &[Option<&[u8]>],
    formats: &[i16],
    results: &[i16],
    buf: &mut BytesMut,
) {
    let bound = frontend::bind(
        "",
        statement,
        formats.iter().copied(),
        params,
        |p, out| match p {
            Some(bytes) => {
                out.extend_from_slice(bytes);
                Ok::<_, Box<dyn std::error::Error + Sync + std::marker::Send>>(IsNull::No)
            }
            None => Ok(IsNull::Yes),
        },
        results.iter().copied(),
        buf,
    );
    assert!(bound.is_ok(), "bind message");
}

fn encode(m: &Send, buf: &mut BytesMut) {
    match m {
        Send::Query(sql) => frontend::query(sql, buf).expect("query"),
        Send::Parse(name, sql) => frontend::parse(name, sql, [], buf).expect("parse"),
        Send::Bind(statement, params) => encode(
            &Send::BindFormats(statement.clone(), params.clone(), vec![0]),
            buf,
        ),
        Send::BindFormats(statement, params, formats) => {
            let params: Vec<Option<&[u8]>> = params
                .iter()
                .map(|p| p.as_deref().map(str::as_bytes))
                .collect();
            bind_into(statement, &params, formats, &[0], buf);
        }
        Send::DescribeStatement(name) => frontend::describe(b'S', name, buf).expect("describe"),
        Send::DescribePortal => frontend::describe(b'P', "", buf).expect("describe"),
        Send::Execute => frontend::execute("", 0, buf).expect("execute"),
        Send::Sync => frontend::sync(buf),
        Send::Flush => frontend::flush(buf),
        Send::CopyData(data) => frontend::CopyData::new(&data[..])
            .expect("copy data")
            .write(buf),
        Send::CopyDone => frontend::copy_done(buf),
        Send::CopyFail(why) => frontend::copy_fail(why, buf).expect("copy fail"),
    }
}

fn fields(mut body: ErrorFields<'_>) -> (String, String) {
    let (mut code, mut message) = (String::new(), String::new());
    while let Some(f) = body.next().expect("error fields") {
        match f.type_() {
            b'C' => code = String::from_utf8_lossy(f.value_bytes()).into_owned(),
            b'M' => message = String::from_utf8_lossy(f.value_bytes()).into_owned(),
            _ => {}
        }
    }
    (code, message)
}

fn error_line(body: &postgres_protocol::message::backend::ErrorResponseBody) -> String {
    let (code, message) = fields(body.fields());
    format!("{code} {message}")
}

/// A reply as a line: the message's kind and what the comparison needs of it (an error's or
/// a notice's SQLSTATE, a command tag, a row's values, ReadyForQuery's status). Messages that
/// differ between servers for no client-visible reason (ParameterStatus, row and parameter
/// descriptions' details) are left out or summarized.
fn reply_line(m: Message) -> Option<String> {
    Some(match m {
        Message::ParseComplete => "ParseComplete".into(),
        Message::BindComplete => "BindComplete".into(),
        Message::CloseComplete => "CloseComplete".into(),
        Message::NoData => "NoData".into(),
        Message::EmptyQueryResponse => "EmptyQuery".into(),
        Message::PortalSuspended => "PortalSuspended".into(),
        Message::CopyInResponse(_) => "CopyIn".into(),
        Message::CopyOutResponse(_) => "CopyOut".into(),
        Message::CopyDone => "CopyDone".into(),
        Message::CopyData(d) => format!("CopyData {}", String::from_utf8_lossy(d.data())),
        Message::ParameterDescription(d) => {
            format!(
                "ParameterDescription {}",
                d.parameters().count().unwrap_or(0)
            )
        }
        Message::RowDescription(d) => format!("RowDescription {}", d.fields().count().unwrap_or(0)),
        Message::CommandComplete(c) => format!("Complete {}", c.tag().unwrap_or("?")),
        Message::ErrorResponse(e) => format!("Error {}", fields(e.fields()).0),
        Message::NoticeResponse(n) => format!("Notice {}", fields(n.fields()).0),
        Message::ReadyForQuery(r) => format!("Ready {}", r.status() as char),
        Message::DataRow(row) => {
            let buffer = row.buffer();
            let values: Vec<String> = row
                .ranges()
                .map(|r| {
                    Ok(match r {
                        Some(r) => String::from_utf8_lossy(&buffer[r]).into_owned(),
                        None => "NULL".to_string(),
                    })
                })
                .collect()
                .unwrap_or_default();
            format!("Row {}", values.join(","))
        }
        Message::ParameterStatus(_) | Message::NotificationResponse(_) => return None,
        other => format!("{:?}", std::mem::discriminant(&other)),
    })
}
