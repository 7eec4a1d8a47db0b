//! The replies a connection's server owes it, counted against the
//! commands sent, so that a reply is never handed to a command it does not
//! answer. A reply when none is owed, or bytes after the last one owed,
//! mean the connection is out of step (a reply sent twice, a frame nobody
//! asked for): it is closed, never read on. Before a command on a
//! connection that owes nothing, nothing may be waiting to be read (what
//! is there was sent unasked: the command is not sent, and goes again on
//! a fresh connection, see [`is_stale`]). A connection's first command
//! goes with a PING whose PONG must come first, so that a frame the server
//! sent before being asked anything is not taken for that command's
//! reply; an error in its place (`ERR max number of clients reached`)
//! says why the server then closes the connection. `strict` keeps the
//! same count for the async connections.

use std::borrow::Cow;
use std::io;

use redis::{RedisResult, Value};

use super::Wire;
use crate::error::{abridged, abridged_bytes, protocol_error as protocol};

/// The PING sent with a connection's first command (see [`Wire::fresh`]).
pub(super) const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

/// How a protocol error found before a command was sent ends: the command
/// had no effect, and goes again on a fresh connection (see [`is_stale`]).
const STALE: &str = "waiting on a connection that owed no reply (found before sending a command)";

/// A protocol error found before the command was sent (see [`STALE`]).
pub(crate) fn is_stale(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Parse && e.detail().is_some_and(|d| d.ends_with(STALE))
}

impl Wire {
    /// Before a command: a connection that owes no reply must have
    /// nothing to read (see [`Wire::check_quiet`]); without `look`, only
    /// the bytes already read are looked at (a `poll(2)` found the socket
    /// with nothing to read just before). A subscribed connection is sent
    /// messages unasked. What is found closes the connection.
    pub(super) fn check_nothing_waits(&mut self, look: bool) -> RedisResult<()> {
        if self.owed == 0 && !self.subscribed && (look || self.inbox.start != self.inbox.end) {
            if let Err(e) = self.check_quiet() {
                self.open = false;
                return Err(e);
            }
        }
        Ok(())
    }

    /// The bytes to write for `bytes`, commands whose `replies` replies are
    /// now owed: on a connection's first command, the PING goes first, and
    /// its PONG is owed too.
    pub(super) fn owe<'a>(&mut self, bytes: &'a [u8], replies: usize) -> Cow<'a, [u8]> {
        let packet = if self.fresh {
            self.fresh = false;
            self.pong_owed = true;
            let mut both = Vec::with_capacity(PING.len() + bytes.len());
            both.extend_from_slice(PING);
            both.extend_from_slice(bytes);
            self.owed += 1;
            Cow::Owned(both)
        } else {
            Cow::Borrowed(bytes)
        };
        self.owed += replies;
        packet
    }

    /// Before a command on a connection that owes no reply: nothing may be
    /// waiting to be read. A closed connection is a dropped one (the
    /// command is sent again on a fresh one); bytes are a protocol error,
    /// found before the command was sent.
    fn check_quiet(&mut self) -> RedisResult<()> {
        if self.inbox.start == self.inbox.end {
            // Under TLS what the socket holds is records (a session ticket
            // is one): only the replies already decrypted are looked at.
            let Some(fd) = self.poll_fd() else {
                return Ok(());
            };
            let room = self.inbox.room();
            // SAFETY: `room` is writable memory of `room.len()` bytes that
            // outlives the call; `fd` is this connection's open socket.
            let n =
                unsafe { libc::recv(fd, room.as_mut_ptr().cast(), room.len(), libc::MSG_DONTWAIT) };
            match n {
                0 => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
                n if n < 0 => return Ok(()),
                n => self.inbox.filled(n as usize),
            }
        }
        // Before anything was ever sent: a server that refuses a
        // connection says why in an error frame, then closes it.
        if self.fresh {
            if let Ok(Some(reply @ Value::ServerError(_))) = self.inbox.take() {
                return Err(reply.extract_error().unwrap_err());
            }
        }
        let unread = &self.inbox.buf[self.inbox.start..self.inbox.end];
        Err(protocol(format!("{} {STALE}", abridged_bytes(unread))))
    }

    /// The next reply in the inbox, if all of it was read, counted against
    /// what the server owes (see [`Wire::owed`]).
    pub(super) fn take(&mut self) -> RedisResult<Option<Value>> {
        loop {
            let Some(reply) = self.inbox.take()? else {
                return Ok(None);
            };
            if self.pong_owed {
                self.pong_owed = false;
                self.owed = self.owed.saturating_sub(1);
                // An error reply (LOADING, NOAUTH, …) is the server's answer
                // to the PING: the command gets its own. (A frame sent
                // unasked that was one is harmless: the PONG, taken for the
                // command's reply, is not a reply any command accepts.)
                if matches!(&reply, Value::SimpleString(s) if s == "PONG") {
                    continue;
                }
                if let Value::ServerError(_) = reply {
                    self.refusal = reply.extract_error().err();
                    continue;
                }
                return Err(protocol(format!(
                    "{} before any command was sent",
                    abridged(&reply)
                )));
            }
            // The first command's reply came: the PING's error was no
            // refusal of the connection.
            self.refusal = None;
            if self.subscribed {
                return Ok(Some(reply));
            }
            if self.owed == 0 {
                return Err(protocol(format!(
                    "{} when no reply was owed",
                    abridged(&reply)
                )));
            }
            self.owed -= 1;
            if self.owed == 0 && self.inbox.start != self.inbox.end {
                let extra = &self.inbox.buf[self.inbox.start..self.inbox.end];
                return Err(protocol(format!(
                    "{} after the reply {}",
                    abridged_bytes(extra),
                    abridged(&reply)
                )));
            }
            return Ok(Some(reply));
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::net::wire::tests::{answer, fresh_pair, packed, pair};
    use redis::ConnectionLike;
    use std::io::{Read, Write};
    use std::thread;
    use std::time::Duration;

    #[test]
    fn replies_read_together_are_handed_out_in_turn() {
        let (mut wire, server) = pair();
        let mut pipe = redis::pipe();
        pipe.cmd("MULTI").cmd("INCR").arg("k").cmd("EXEC");
        let cmd = pipe.get_packed_pipeline();
        let len = cmd.len();
        // Three replies, and the start of a fourth, in one read.
        let t = thread::spawn(move || {
            answer(
                server,
                len,
                vec![b"+OK\r\n+QUEUED\r\n*1\r\n:1\r\n:4", b"2\r\n"],
            )
        });
        // The start of a fourth that nobody asked for: the connection is
        // out of step. (The second write may come in the same read: then
        // the whole fourth reply is shown, ":42\r\n".)
        let e = wire.req_packed_commands(&cmd, 2, 1).unwrap_err();
        assert_eq!(e.kind(), redis::ErrorKind::Parse, "{e}");
        let shown = e.to_string();
        assert!(
            shown.contains(r#"":4" after the reply"#)
                || shown.contains(r#"":42\r\n" after the reply"#),
            "{e}"
        );
        assert!(!wire.is_open());
        t.join().unwrap();
    }

    #[test]
    fn a_reply_sent_twice_is_never_read_by_the_next_command() {
        // In one read: the reply is refused with what follows it.
        let (mut wire, server) = pair();
        let cmd = packed(redis::cmd("SET").arg("k").arg("t").arg("NX").arg("GET"));
        let len = cmd.len();
        let t = thread::spawn(move || answer(server, len, vec![b"$-1\r\n$-1\r\n"]));
        let e = wire.req_packed_command(&cmd).unwrap_err();
        assert!(e.to_string().contains("after the reply"), "{e}");
        assert!(!wire.is_open());
        t.join().unwrap();

        // Arriving after the reply was read: found before the next command
        // is sent, which is then never sent on that connection.
        let (mut wire, server) = pair();
        let t = thread::spawn(move || {
            let mut s = answer(server, len, vec![b"$-1\r\n"]);
            thread::sleep(Duration::from_millis(50));
            s.write_all(b"$-1\r\n").unwrap();
            s
        });
        assert_eq!(wire.req_packed_command(&cmd).unwrap(), Value::Nil);
        let mut server = t.join().unwrap();
        let e = wire.req_packed_command(&cmd).unwrap_err();
        assert!(is_stale(&e), "{e}");
        assert!(e.to_string().contains(r#""$-1\r\n""#), "{e}");
        assert!(!wire.is_open());
        server.set_nonblocking(true).unwrap();
        let mut got = [0; 64];
        assert!(
            server.read(&mut got).is_err(),
            "the second command was sent"
        );
    }

    #[test]
    fn a_frame_before_the_first_command_is_never_its_reply() {
        let (mut wire, mut server) = fresh_pair();
        server.write_all(b"$-1\r\n").unwrap();
        let cmd = packed(redis::cmd("SET").arg("k").arg("t").arg("NX").arg("GET"));
        // Already there when the command is to be sent: it is not sent.
        let e = wire.req_packed_command(&cmd).unwrap_err();
        assert!(is_stale(&e), "{e}");
        assert!(!wire.is_open());

        // Arriving after the command left: its PING's PONG must come
        // first.
        let (mut wire, server) = fresh_pair();
        let len = PING.len() + cmd.len();
        let t =
            thread::spawn(move || answer(server, len, vec![b"$-1\r\n+PONG\r\n$5\r\nother\r\n"]));
        let e = wire.req_packed_command(&cmd).unwrap_err();
        assert!(e.to_string().contains("before any command"), "{e}");
        t.join().unwrap();

        // A server that answers in turn: the PONG is not the reply.
        let (mut wire, server) = fresh_pair();
        let t = thread::spawn(move || answer(server, len, vec![b"+PONG\r\n$5", b"\r\nother\r\n"]));
        let v = wire.req_packed_command(&cmd).unwrap();
        assert_eq!(v, Value::BulkString(b"other".to_vec()));
        assert!(wire.is_open());
        t.join().unwrap();
    }
}
