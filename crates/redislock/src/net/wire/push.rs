//! A subscribed connection: SUBSCRIBE or SSUBSCRIBE, then what the server
//! pushes unasked: the messages PUBLISHed on the channel, what it says of
//! a subscription (a shard channel's slot that left the server), and the
//! answer to the PING that checks that it still hears us. A message cut
//! by a deadline stays in the inbox and is read whole by the next call.

use std::time::Instant;

use redis::{RedisResult, Value};

use super::owed::PING;
use super::timeouts::{is_interrupted, is_timeout};
use super::Wire;

impl Wire {
    /// On a subscribed connection: send PING, whose reply comes among the
    /// pushes (see [`push_of`]), to learn that the server still hears us.
    pub(crate) fn ping_subscribed(&mut self) -> RedisResult<()> {
        debug_assert!(self.subscribed);
        self.send(PING, 0)
    }

    /// SUBSCRIBE to `channel` and read the confirmation.
    pub(crate) fn subscribe(&mut self, channel: &str) -> RedisResult<()> {
        self.subscribe_as("SUBSCRIBE", channel)
    }

    /// SSUBSCRIBE to the shard channel `channel` (Redis 7 and later) and
    /// read the confirmation.
    pub(crate) fn ssubscribe(&mut self, channel: &str) -> RedisResult<()> {
        self.subscribe_as("SSUBSCRIBE", channel)
    }

    fn subscribe_as(&mut self, command: &str, channel: &str) -> RedisResult<()> {
        let cmd = redis::cmd(command).arg(channel).get_packed_command();
        let deadline = Instant::now() + self.timeout;
        // Messages may follow the confirmation at once.
        self.subscribed = true;
        self.send(&cmd, 1)?;
        let reply = self.read_by(deadline)?.extract_error()?;
        match reply {
            Value::Array(ref parts) if parts.len() == 3 => Ok(()),
            other => Err(redis::RedisError::from((
                redis::ErrorKind::Parse,
                "unexpected reply to a subscription",
                format!("{other:?}"),
            ))),
        }
    }

    /// On a subscribed connection: the payload of the next message, or
    /// `Ok(None)` when none came by `deadline`. A signal does not end the
    /// wait unless `interruptible` (then `Ok(None)` at once, and the next
    /// call goes on reading where this one stopped).
    #[cfg(test)]
    pub(crate) fn next_message(
        &mut self,
        deadline: Instant,
        interruptible: bool,
    ) -> RedisResult<Option<Vec<u8>>> {
        loop {
            match self.next_push(deadline, interruptible)? {
                Some(Push::Message { payload, .. }) => return Ok(Some(payload)),
                Some(_) => {}
                None => return Ok(None),
            }
        }
    }

    /// On a subscribed connection: the next message, or what the server
    /// says of a subscription (`Ok(None)` when nothing came by `deadline`;
    /// `interruptible` as for [`Wire::next_message`]).
    pub(crate) fn next_push(
        &mut self,
        deadline: Instant,
        interruptible: bool,
    ) -> RedisResult<Option<Push>> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let r = match self.take() {
                Ok(Some(reply)) => Ok(reply),
                Ok(None) => {
                    self.shorten(left)?;
                    // Uninterruptible reads resume after a signal; the
                    // others return, for the caller to check its interrupt.
                    self.read(deadline, !interruptible)
                }
                Err(e) => Err(e),
            };
            match r {
                Ok(reply) => {
                    // Replies to anything else (there is nothing else) are skipped.
                    if let Some(push) = push_of(reply) {
                        return Ok(Some(push));
                    }
                }
                // The inbox keeps what was read: reading again resumes.
                Err(e) if is_timeout(&e) => return Ok(None),
                Err(e) if interruptible && is_interrupted(&e) => return Ok(None),
                Err(e) => {
                    self.open = false;
                    return Err(e);
                }
            }
        }
    }

    /// [`Wire::next_push`] from what the socket holds now, never waiting
    /// (a connection with a [`Wire::poll_fd`]): `Ok(None)` when no whole
    /// push is there (a part of one stays for the next call).
    pub(crate) fn try_push(&mut self) -> RedisResult<Option<Push>> {
        loop {
            match self.try_reply()? {
                Some(reply) => {
                    if let Some(push) = push_of(reply) {
                        return Ok(Some(push));
                    }
                }
                None => return Ok(None),
            }
        }
    }
}

/// The push a subscribed connection's frame is, if it is one (the reply
/// to a PING there, `pong` and its argument, is one of `Push::Other`).
fn push_of(reply: Value) -> Option<Push> {
    let Value::Array(parts) = reply else {
        return None;
    };
    if let [Value::BulkString(kind), Value::BulkString(data)] = &parts[..] {
        if kind.as_slice() == b"pong" {
            return Some(Push::Other {
                kind: kind.clone(),
                channel: data.clone(),
            });
        }
    }
    if parts.len() != 3 {
        return None;
    }
    let mut parts = parts.into_iter();
    let (kind, channel, last) = (parts.next(), parts.next(), parts.next());
    let (Some(Value::BulkString(kind)), Some(Value::BulkString(channel))) = (kind, channel) else {
        return None;
    };
    Some(match (kind.as_slice(), last) {
        (b"message", Some(Value::BulkString(payload))) => Push::Message { channel, payload },
        _ => Push::Other { kind, channel },
    })
}

/// What a subscribed connection receives.
#[derive(Debug)]
pub(crate) enum Push {
    /// A message PUBLISHed on `channel`.
    Message { channel: Vec<u8>, payload: Vec<u8> },
    /// Anything else: `subscribe`, `sunsubscribe` (a shard channel's slot
    /// left the server) and the like, for `channel`.
    Other { kind: Vec<u8>, channel: Vec<u8> },
}

#[cfg(all(test, unix))]
mod tests {
    use crate::net::wire::tests::pair;
    use redis::ConnectionLike;
    use std::io::Write;
    use std::time::{Duration, Instant};

    #[test]
    fn a_message_cut_by_the_deadline_is_read_whole_next_time() {
        let (mut wire, mut server) = pair();
        wire.subscribed = true;
        server
            .write_all(b"*3\r\n$7\r\nmessage\r\n$4\r\nchan\r\n$5\r\nhe")
            .unwrap();
        let soon = Instant::now() + Duration::from_millis(50);
        assert_eq!(wire.next_message(soon, false).unwrap(), None);
        server
            .write_all(b"llo\r\n*3\r\n$7\r\nmessage\r\n$4\r\nchan\r\n$1\r\n2\r\n")
            .unwrap();
        let later = Instant::now() + Duration::from_secs(5);
        assert_eq!(
            wire.next_message(later, false).unwrap(),
            Some(b"hello".to_vec())
        );
        // The second came in the same read: the inbox has it.
        assert!(wire.inbox.end > 0);
        assert_eq!(wire.next_message(later, true).unwrap(), Some(b"2".to_vec()));
        assert!(wire.is_open());
    }
}
