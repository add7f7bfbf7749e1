//! The shape of each frontend message body, as the protocol documents it (PostgreSQL 15,
//! "Message Formats"): every count and length agrees with the bytes that follow, every string
//! ends with its NUL inside the body, and nothing is left over. Counts are unsigned 16-bit, as
//! PostgreSQL reads them.

/// A reading position in one message body; every read is bounds-checked.
struct Body<'a> {
    rest: &'a [u8],
}

type Checked<T> = Result<T, String>;

impl<'a> Body<'a> {
    fn new(bytes: &'a [u8]) -> Body<'a> {
        Body { rest: bytes }
    }

    fn take(&mut self, n: usize, what: &str) -> Checked<&'a [u8]> {
        if n > self.rest.len() {
            return Err(format!(
                "{what} needs {n} bytes, {} remain in the message",
                self.rest.len()
            ));
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(taken)
    }

    fn byte(&mut self, what: &str) -> Checked<u8> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &str) -> Checked<usize> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]) as usize)
    }

    fn i32(&mut self, what: &str) -> Checked<i32> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A NUL-terminated string; the bytes before the NUL.
    fn cstring(&mut self, what: &str) -> Checked<&'a [u8]> {
        let Some(end) = self.rest.iter().position(|&b| b == 0) else {
            return Err(format!("{what} is not terminated inside the message"));
        };
        let s = &self.rest[..end];
        self.rest = &self.rest[end + 1..];
        Ok(s)
    }

    /// A length-prefixed value: -1 (NULL) or that many bytes.
    fn value(&mut self, what: &str) -> Checked<()> {
        match self.i32(what)? {
            -1 => Ok(()),
            n if n < 0 => Err(format!("{what} has length {n}")),
            n => self.take(n as usize, what).map(|_| ()),
        }
    }

    fn end(&self, message: &str) -> Checked<()> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{message} has {} bytes after its last field",
                self.rest.len()
            ))
        }
    }
}

/// A startup-phase packet's body after its length: the protocol code and what follows.
pub(crate) enum Untyped {
    /// A startup message: typed messages follow.
    Startup,
    /// A cancel request: nothing follows.
    Cancel,
    /// A GSSAPI encryption request: another untyped packet follows.
    GssEncryption,
}

pub(crate) fn untyped(body: &[u8]) -> Checked<Untyped> {
    let mut b = Body::new(body);
    let code = b.i32("the protocol code")? as u32;
    match code {
        80_877_102 => {
            b.i32("the cancel request's process id")?;
            // Protocol 3.0 keys are 4 bytes; 3.2 allows up to 256.
            if !(4..=256).contains(&b.rest.len()) {
                return Err(format!("a cancel request's key has {} bytes", b.rest.len()));
            }
            Ok(Untyped::Cancel)
        }
        80_877_103 => Err("an SSL request after encryption was negotiated".to_owned()),
        80_877_104 => {
            b.end("a GSSAPI encryption request")?;
            Ok(Untyped::GssEncryption)
        }
        _ => {
            let (major, minor) = (code >> 16, code & 0xffff);
            if major != 3 {
                return Err(format!("unsupported frontend protocol {major}.{minor}"));
            }
            // Name and value pairs, ended by an empty name.
            loop {
                if b.cstring("a startup parameter name")?.is_empty() {
                    break;
                }
                b.cstring("a startup parameter value")?;
            }
            b.end("the startup message")?;
            Ok(Untyped::Startup)
        }
    }
}

/// A typed message's body; `first_password` tells a SASL initial response (the first
/// password-family message, whose layout is fixed) from later SASL responses (opaque).
pub(crate) fn typed(kind: u8, body: &[u8], first_password: bool) -> Checked<()> {
    let mut b = Body::new(body);
    match kind {
        b'Q' => {
            b.cstring("the query string")?;
            b.end("a Query message")
        }
        b'P' => {
            b.cstring("the statement name")?;
            b.cstring("the query string")?;
            let types = b.u16("the parameter type count")?;
            b.take(types * 4, "the parameter types")?;
            b.end("a Parse message")
        }
        b'B' => bind(&mut b),
        b'E' => {
            b.cstring("the portal name")?;
            b.i32("the row limit")?;
            b.end("an Execute message")
        }
        b'D' | b'C' => {
            let message = if kind == b'D' {
                "a Describe"
            } else {
                "a Close"
            };
            match b.byte("the target kind")? {
                b'S' | b'P' => {}
                other => {
                    return Err(format!(
                        "{message} message names target kind {:?}",
                        other as char
                    ))
                }
            }
            b.cstring("the target name")?;
            b.end(message)
        }
        b'S' => b.end("a Sync message"),
        b'H' => b.end("a Flush message"),
        b'X' => b.end("a Terminate message"),
        b'c' => b.end("a CopyDone message"),
        b'd' => Ok(()),
        b'f' => {
            b.cstring("the failure message")?;
            b.end("a CopyFail message")
        }
        b'p' if first_password => {
            if b.cstring("the SASL mechanism")?.is_empty() {
                return Err("a SASL initial response names no mechanism".to_owned());
            }
            b.value("the SASL initial response data")?;
            b.end("a SASL initial response")
        }
        b'p' => Ok(()),
        other => Err(format!("invalid frontend message type {other}")),
    }
}

fn bind(b: &mut Body) -> Checked<()> {
    b.cstring("the portal name")?;
    b.cstring("the statement name")?;
    let formats = b.u16("the parameter format count")?;
    b.take(formats * 2, "the parameter formats")?;
    // A count of formats that is neither 0, 1 nor one per parameter is a statement error
    // (08P01, the session goes on, as in PostgreSQL), answered at Bind: the frame itself
    // holds what it says.
    let params = b.u16("the parameter count")?;
    for _ in 0..params {
        b.value("a parameter value")?;
    }
    let results = b.u16("the result format count")?;
    b.take(results * 2, "the result formats")?;
    b.end("a Bind message")
}
