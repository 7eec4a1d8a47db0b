//! Where a RESP2 reply ends in the bytes read from a server, and the value
//! of the plain ones.
//!
//! [`frame`] finds the end of the first reply in a buffer (or says that more
//! bytes are needed), so that a connection reads into a buffer of its own
//! and hands out replies one by one, however the server's bytes were split
//! across reads. [`decode`] makes the `Value` of a framed reply: the simple
//! strings, integers, bulk strings and arrays of them that every lock
//! command answers are built here (redis-rs's parser zeroes an 8 KiB buffer
//! before each read, whatever it is given: more than the rest of a lock
//! cycle costs), and everything else (errors above all) is handed to
//! redis-rs's parser, which knows their meaning. The values are the ones
//! redis-rs's parser makes of the same bytes; the tests check that.

use redis::{RedisResult, Value};

/// Arrays nested deeper than this are no reply of a command sent here (the
/// deepest, CLUSTER SLOTS', nests 3): a protocol error, found while framing
/// without recursion, before any parser could exhaust a thread's stack on
/// a hostile server's 10,000 levels.
const MAX_DEPTH: usize = 16;

/// The length of the first complete reply at the start of `buf`, or
/// `Ok(None)` when more bytes are needed. Bytes that cannot start a RESP2
/// reply are an error: the connection is out of step and must be closed.
pub(crate) fn frame(buf: &[u8]) -> RedisResult<Option<usize>> {
    let mut pos = 0;
    // Replies still to be framed at each depth of nesting: the first, and
    // the elements of the arrays it is in.
    let mut pending = [0usize; MAX_DEPTH + 1];
    pending[0] = 1;
    let mut depth = 0;
    loop {
        while pending[depth] == 0 {
            if depth == 0 {
                return Ok(Some(pos));
            }
            depth -= 1;
        }
        pending[depth] -= 1;
        let Some(end) = line_end(buf, pos + 1) else {
            return Ok(None);
        };
        let (start, kind, line) = (pos, buf[pos], &buf[pos + 1..end]);
        pos = end + 2;
        let here = |what| malformed(what, &buf[start..]);
        match kind {
            b'+' | b'-' | b':' => {}
            b'$' => {
                let Some(len) = length(line).map_err(here)? else {
                    continue; // nil
                };
                let Some(after) = pos.checked_add(len).and_then(|p| p.checked_add(2)) else {
                    return Err(here("a bulk string longer than memory"));
                };
                if buf.len() < after {
                    return Ok(None);
                }
                if &buf[after - 2..after] != b"\r\n" {
                    return Err(here("a bulk string longer than its length"));
                }
                pos = after;
            }
            b'*' => match length(line).map_err(here)? {
                Some(0) | None => {}
                Some(_) if depth == MAX_DEPTH => {
                    return Err(here("arrays nested deeper than any reply"))
                }
                Some(n) => {
                    depth += 1;
                    pending[depth] = n;
                }
            },
            _ => return Err(here("a reply of an unknown type")),
        }
    }
}

/// The value of one reply, `frame` as [`frame`] delimited it.
pub(crate) fn decode(frame: &[u8]) -> RedisResult<Value> {
    match plain(frame, &mut 0, 0) {
        Some(v) => Ok(v),
        None => redis::parse_redis_value(frame),
    }
}

/// The value of the reply at `pos` in a framed reply, if it is a plain one
/// (see the module comment); `pos` then points past it.
fn plain(buf: &[u8], pos: &mut usize, depth: usize) -> Option<Value> {
    let end = line_end(buf, *pos + 1)?;
    let (kind, line) = (buf[*pos], &buf[*pos + 1..end]);
    *pos = end + 2;
    Some(match kind {
        b'+' if line == b"OK" => Value::Okay,
        b'+' => Value::SimpleString(std::str::from_utf8(line).ok()?.to_owned()),
        b':' => Value::Int(number(line)?),
        b'$' => match length(line).ok()? {
            None => Value::Nil,
            Some(len) => {
                let bytes = buf.get(*pos..*pos + len)?.to_vec();
                *pos += len + 2;
                Value::BulkString(bytes)
            }
        },
        b'*' if depth <= MAX_DEPTH => match length(line).ok()? {
            None => Value::Nil,
            Some(n) => {
                // Every element takes 3 bytes at least: a bound on what a
                // hostile length can reserve.
                let mut items = Vec::with_capacity(n.min(buf.len() / 3));
                for _ in 0..n {
                    items.push(plain(buf, pos, depth + 1)?);
                }
                Value::Array(items)
            }
        },
        _ => return None,
    })
}

/// Where the line that starts at `from` ends: the index of its `\r\n`.
fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    loop {
        let nl = at + buf.get(at..)?.iter().position(|&b| b == b'\n')?;
        if nl > from && buf[nl - 1] == b'\r' {
            return Some(nl - 1);
        }
        at = nl + 1;
    }
}

/// A length or an integer, read as redis-rs reads them.
fn number(line: &[u8]) -> Option<i64> {
    // What servers send (an optional '-' and at most 18 digits, which
    // cannot overflow) without the string machinery; anything else as
    // redis-rs reads it.
    let (negative, digits) = match line {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, line),
    };
    if (1..=18).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit) {
        let n = (digits.iter()).fold(0, |n: i64, d| n * 10 + i64::from(d - b'0'));
        return Some(if negative { -n } else { n });
    }
    std::str::from_utf8(line).ok()?.trim().parse().ok()
}

/// A bulk string's or an array's length: `None` for the nil reply, whose
/// length is exactly `-1`. Any other negative length is no reply at all
/// (redis-rs reads every negative length as nil: a `$-7` would then be the
/// nil that tells `SET … NX … GET` that the lock was taken).
fn length(line: &[u8]) -> Result<Option<usize>, &'static str> {
    match number(line) {
        Some(-1) if line == b"-1" => Ok(None),
        Some(n) => usize::try_from(n)
            .map(Some)
            .map_err(|_| "a negative length other than -1"),
        None => Err("a length that is not a number"),
    }
}

/// `what` is wrong with the reply that starts `at` (shown abridged).
fn malformed(what: &str, at: &[u8]) -> redis::RedisError {
    crate::error::protocol_error(format!(
        "{what} (not RESP2): {}",
        crate::error::abridged_bytes(at)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replies of every shape, each with what follows it untouched.
    const REPLIES: &[&[u8]] = &[
        b"+OK\r\n",
        b"+PONG\r\n",
        b"-ERR unknown command\r\n",
        b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        b":0\r\n",
        b":-42\r\n",
        b":9223372036854775807\r\n",
        b"$-1\r\n",
        b"$0\r\n\r\n",
        b"$32\r\n0123456789abcdef0123456789abcdef\r\n",
        b"$6\r\na\r\nb\r\n\r\n",
        b"$4\r\n\n\r\n\r\r\n",
        b"*-1\r\n",
        b"*0\r\n",
        b"*2\r\n:1\r\n:1795360184864561\r\n",
        b"*3\r\n$7\r\nmessage\r\n$12\r\nredislock:w:\r\n$2\r\n\r\n\r\n",
        b"*4\r\n$-1\r\n:-2\r\n*1\r\n*0\r\n:3\r\n",
        b"*2\r\n+OK\r\n-ERR inside an array\r\n",
        b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
    ];

    #[test]
    fn each_reply_is_framed_whole() {
        for reply in REPLIES {
            let mut two = reply.to_vec();
            two.extend_from_slice(b":7\r\n");
            let show = String::from_utf8_lossy(reply);
            assert_eq!(frame(reply).unwrap(), Some(reply.len()), "{show}");
            assert_eq!(frame(&two).unwrap(), Some(reply.len()), "{show}");
        }
    }

    #[test]
    fn a_partial_reply_needs_more() {
        for reply in REPLIES {
            for cut in 0..reply.len() {
                let show = String::from_utf8_lossy(&reply[..cut]);
                assert_eq!(frame(&reply[..cut]).unwrap(), None, "{show}");
            }
        }
    }

    #[test]
    fn values_are_redis_rs_values() {
        for reply in REPLIES {
            let show = String::from_utf8_lossy(reply);
            let ours = decode(reply).unwrap();
            let theirs = redis::parse_redis_value(reply).unwrap();
            assert_eq!(format!("{ours:?}"), format!("{theirs:?}"), "{show}");
        }
        assert_eq!(decode(b"$-1\r\n").unwrap(), Value::Nil);
        assert_eq!(decode(b"+OK\r\n").unwrap(), Value::Okay);
        assert_eq!(
            decode(b"$6\r\na\r\nb\r\n\r\n").unwrap(),
            Value::BulkString(b"a\r\nb\r\n".to_vec())
        );
        assert!(matches!(
            decode(b"-NOSCRIPT No matching script.\r\n").unwrap(),
            Value::ServerError(_)
        ));
    }

    #[test]
    fn replies_come_out_one_by_one() {
        // A pipeline's replies, as one read might bring them.
        let all: Vec<u8> = REPLIES.concat();
        let mut at = 0;
        for reply in REPLIES {
            let len = frame(&all[at..]).unwrap().unwrap();
            assert_eq!(&all[at..at + len], *reply);
            at += len;
        }
        assert_eq!(frame(&all[at..]).unwrap(), None);
    }

    #[test]
    fn numbers_are_read_as_redis_rs_reads_them() {
        for line in [
            "0",
            "-0",
            "7",
            "-1",
            "123456789012345678",
            "-123456789012345678",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            " 12",
            "+3",
            "-",
            "",
            "1-",
            "--1",
            "12a",
        ] {
            let reply = format!(":{line}\r\n");
            let theirs = match redis::parse_redis_value(reply.as_bytes()) {
                Ok(Value::Int(n)) => Some(n),
                _ => None,
            };
            assert_eq!(number(line.as_bytes()), theirs, "{line:?}");
        }
    }

    #[test]
    fn garbage_is_an_error() {
        for bad in [
            &b"?\r\n"[..],
            b"$x\r\n",
            b"*1x\r\n:1\r\n",
            b"$2\r\nabc\r\n",
            b"*1\r\n!3\r\n",
            b"$99999999999999999999999\r\n",
            // Only -1 is nil: redis-rs reads these as nil too.
            b"$-7\r\n",
            b"$-2\r\n",
            b"*-3\r\n",
            b"$-1 \r\n",
            b"*2\r\n:1\r\n$-9\r\n",
            // Deeper than any reply: framed without recursion, refused.
            &b"*1\r\n".repeat(10_000),
        ] {
            let e = frame(bad).unwrap_err();
            assert_eq!(e.kind(), redis::ErrorKind::Parse, "{e}");
        }
    }
}
