//! One connection's framing: the startup packet (a length and a protocol code, no type byte),
//! then typed messages (a type byte and a length). `Scanner::step` looks at the bytes not yet
//! handed on and says whether a whole, well-formed frame starts there.

use std::fmt;

use crate::body::{self, Untyped};

/// Why a frame is refused; the connection ends after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The header announces more than the limit (refused before the body is read).
    TooLarge { length: usize },
    /// The frame is not what the protocol allows here.
    Malformed(String),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::TooLarge { length } => write!(f, "message of {length} bytes"),
            Refusal::Malformed(why) => write!(f, "{why}"),
        }
    }
}

/// What the bytes at hand hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Not a whole frame yet; its total length once the header is in.
    Incomplete(Option<usize>),
    /// A whole, well-formed frame of this many bytes (header included).
    Frame(usize),
    /// The frame is refused.
    Refused(Refusal),
}

/// The largest startup packet or small message (anything but Query, Parse, Bind and
/// CopyData), as PostgreSQL's `PQ_SMALL_MESSAGE_LIMIT`; pgwire refuses larger ones too.
pub const SMALL_MESSAGE_LIMIT: usize = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Before the startup message.
    Untyped,
    /// After it. Password-family messages are allowed until the first other message.
    Typed { passwords: u32, logged_in: bool },
    /// After a cancel request: nothing more may come.
    Closed,
}

/// One connection's framing state.
#[derive(Clone, Debug)]
pub struct Scanner {
    phase: Phase,
    limit: usize,
}

impl Scanner {
    /// A scanner for a connection whose next packet is the startup message (any SSL request
    /// having been answered already); `limit` bounds a frame's announced length.
    pub fn new(limit: usize) -> Scanner {
        Scanner {
            phase: Phase::Untyped,
            limit,
        }
    }

    /// Looks at the frame at the start of `buf`. A frame is accepted once: after `Frame(n)`
    /// the caller hands those `n` bytes on and the next call starts after them.
    pub fn step(&mut self, buf: &[u8]) -> Step {
        let (header, typed) = match self.phase {
            Phase::Untyped => (4, false),
            Phase::Typed { .. } => (5, true),
            Phase::Closed => {
                if buf.is_empty() {
                    return Step::Incomplete(None);
                }
                return refuse("data after a cancel request");
            }
        };
        if buf.len() < header {
            return Step::Incomplete(None);
        }
        let at = header - 4;
        let length = u32::from_be_bytes(buf[at..header].try_into().expect("4 bytes")) as usize;
        let least = if typed { 4 } else { 8 };
        if length < least {
            return refuse(format!("invalid message length {length}"));
        }
        // As PostgreSQL: only queries, statements, parameters and copied data may be large.
        let large = typed && matches!(buf[0], b'Q' | b'P' | b'B' | b'd');
        if !large && length > SMALL_MESSAGE_LIMIT {
            return refuse(if typed {
                format!("invalid message length {length}")
            } else {
                format!("invalid length of startup packet {length}")
            });
        }
        if length > self.limit {
            return Step::Refused(Refusal::TooLarge { length });
        }
        let total = at + length;
        if buf.len() < total {
            return Step::Incomplete(Some(total));
        }
        let body = &buf[header..total];
        let checked = if typed {
            self.typed(buf[0], body)
        } else {
            self.untyped(body)
        };
        match checked {
            Ok(()) => Step::Frame(total),
            Err(why) => refuse(why),
        }
    }

    fn untyped(&mut self, body: &[u8]) -> Result<(), String> {
        self.phase = match body::untyped(body)? {
            Untyped::Startup => Phase::Typed {
                passwords: 0,
                logged_in: false,
            },
            Untyped::Cancel => Phase::Closed,
            Untyped::GssEncryption => Phase::Untyped,
        };
        Ok(())
    }

    fn typed(&mut self, kind: u8, body: &[u8]) -> Result<(), String> {
        let Phase::Typed {
            passwords,
            logged_in,
        } = self.phase
        else {
            unreachable!("typed frames only after the startup message");
        };
        if kind == b'p' && logged_in {
            return Err("a password message after authentication".to_owned());
        }
        body::typed(kind, body, passwords == 0)?;
        self.phase = match kind {
            b'p' => Phase::Typed {
                passwords: passwords + 1,
                logged_in,
            },
            b'X' => Phase::Typed {
                passwords,
                logged_in,
            },
            _ => Phase::Typed {
                passwords,
                logged_in: true,
            },
        };
        Ok(())
    }
}

fn refuse(why: impl Into<String>) -> Step {
    Step::Refused(Refusal::Malformed(why.into()))
}

#[cfg(test)]
mod tests;
