//! A connection's inbox: the bytes read from the server and not yet handed
//! out as replies, in a buffer the connection keeps and reads straight
//! into. [`resp`](crate::net::resp) says where each reply ends, so that
//! replies come out one by one however the server's bytes were split
//! across reads: one read per reply in the common case, several replies
//! per read for pipelines, and a reply cut by a deadline read whole next
//! time. Which of them were owed is `owed`'s.

use redis::{RedisResult, Value};

use crate::net::resp;

/// Bytes read from the server and not yet handed out as replies.
pub(super) struct Inbox {
    /// Zeroed once when made (or grown): reads go straight into it.
    pub(super) buf: Vec<u8>,
    /// The bytes not handed out yet are `buf[start..end]`.
    pub(super) start: usize,
    pub(super) end: usize,
}

/// The size of a connection's read buffer: replies to lock commands take
/// a few dozen bytes.
const INBOX: usize = 4096;
/// A buffer grown beyond this for a large reply goes back to [`INBOX`]
/// once empty.
pub(super) const INBOX_KEEP: usize = 64 * 1024;

impl Inbox {
    pub(super) fn new() -> Inbox {
        Inbox {
            buf: vec![0; INBOX],
            start: 0,
            end: 0,
        }
    }

    /// The next reply, if all of it was read.
    pub(super) fn take(&mut self) -> RedisResult<Option<Value>> {
        let unread = &self.buf[self.start..self.end];
        let Some(len) = resp::frame(unread)? else {
            return Ok(None);
        };
        let value = resp::decode(&unread[..len]);
        self.start += len;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.buf.len() > INBOX_KEEP {
                *self = Inbox::new();
            }
        }
        value.map(Some)
    }

    /// Where the next read goes: after the part of a reply read so far
    /// (moved to the front first), in a buffer grown when that part fills
    /// it.
    pub(super) fn room(&mut self) -> &mut [u8] {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        &mut self.buf[self.end..]
    }

    /// `n` bytes were read into [`Inbox::room`].
    pub(super) fn filled(&mut self, n: usize) {
        self.end += n;
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::net::wire::tests::{answer, packed, pair};
    use redis::ConnectionLike;
    use std::thread;

    #[test]
    fn a_large_reply_grows_the_inbox_for_a_while() {
        let (mut wire, server) = pair();
        let cmd = packed(redis::cmd("GET").arg("big"));
        let len = cmd.len();
        let body: &'static [u8] = Box::leak(vec![b'x'; 300_000].into_boxed_slice());
        let t = thread::spawn(move || answer(server, len, vec![b"$300000\r\n", body, b"\r\n"]));
        match wire.req_packed_command(&cmd).unwrap() {
            Value::BulkString(b) => assert_eq!(b, body),
            other => panic!("{other:?}"),
        }
        t.join().unwrap();
        assert_eq!(wire.inbox.buf.len(), INBOX);
    }
}
