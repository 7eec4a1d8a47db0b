//! The fuzzer: property tests of the RESP2 framer (`frame`, `decode`) and
//! of the reply decoders (`protocol::parse_*`, `split_handoff`), reached
//! through the core's `__private::fuzz`, on
//! byte streams and values that proptest makes: arbitrary bytes, and
//! near-valid RESP2 (nested arrays, bulk strings with right and wrong
//! lengths, negative and overflowing numbers, RESP3 type bytes, deep
//! nesting), truncated, spliced and split into reads anywhere.
//!
//! What must hold: nothing panics; `frame` never claims more bytes than it
//! was given, and never a reply in a strict prefix of one; a framed reply
//! decodes to an error or to exactly redis-rs's value of the same bytes;
//! reads split anywhere frame the same replies as one read; only `$-1` and
//! `*-1` are nil (any other negative length is an error); a lock is
//! granted only by an array `[1, fence, ...]`; and a fence is a
//! non-negative integer or a string of decimal digits, nothing else.
//!
//! `make test` runs each property on `REDISLOCK_FUZZ_CASES` cases (2000 by
//! default). `make fuzz` runs `campaign` in release mode for
//! `FUZZ_SECONDS` (300 by default, shared among the properties) and prints
//! executions per second and the minimal input of each failure. Failing
//! seeds are kept in `target/proptest-regressions/resp_fuzz/` and tried
//! first by every later run, `make test`'s included.

use std::cell::Cell;
use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::{
    Config, FileFailurePersistence, TestCaseError, TestCaseResult, TestError, TestRunner,
};
use redis::Value;

use redislock::__private::fuzz::{self, decode, frame};

// ---------------------------------------------------------------------
// Inputs

/// Bytes shown as a byte string literal (what a failure prints).
#[derive(Clone, PartialEq, Eq)]
struct Bytes(Vec<u8>);

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b\"{}\"", self.0.escape_ascii())
    }
}

/// A byte stream, and where reads split it.
#[derive(Clone, Debug)]
struct Stream {
    bytes: Bytes,
    cuts: Vec<usize>,
}

/// The bytes RESP2 and RESP3 are made of, for streams of near-misses.
const RESP_BYTES: &[u8] = b"+-:$*_,#!=(>%|~\r\n\r\n0123456789-1 xOK";

/// A length field: the right one, a wrong one, nil, or worse.
#[derive(Clone, Debug)]
enum Len {
    Right,
    Off(i8),
    Nil,
    /// `-N`, N >= 2.
    Negative(u64),
    Text(&'static str),
}

const ODD_LENGTHS: &[&str] = &[
    "536870912",
    "2147483648",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "99999999999999999999999",
    "-9223372036854775809",
    "",
    "x",
    " 3",
    "3 ",
    "+3",
    "-",
    "--1",
    "1-",
    "0x10",
    "-0",
    "01",
    "-01",
    " -1",
    "-1 ",
];

// The strategies below draw a choice and raw material (a number, bytes)
// rather than nesting `prop_oneof!`s: far fewer value trees per case, which
// is what makes a case cheap in a debug build. Shrinking takes the choice
// towards 0, the most ordinary case.

fn len() -> impl Strategy<Value = Len> {
    (0u8..14, any::<u64>()).prop_map(|(k, n)| match k {
        0..=7 => Len::Right,
        8 | 9 => Len::Off([-3, -2, -1, 1, 2, 3][n as usize % 6]),
        10 => Len::Nil,
        11 => Len::Negative(negative_of(n)),
        _ => Len::Text(ODD_LENGTHS[n as usize % ODD_LENGTHS.len()]),
    })
}

/// N >= 2, for a length of `-N`: small ones, up to 2^63.
fn negative_of(n: u64) -> u64 {
    match n % 4 {
        0 => 2 + n / 4 % 8,
        1 => i64::MAX as u64,
        2 => 1 << 63,
        _ => 2 + n % (i64::MAX as u64 - 1),
    }
}

fn show_len(len: &Len, right: usize) -> String {
    match len {
        Len::Right => right.to_string(),
        Len::Off(d) => (right as i64 + i64::from(*d)).to_string(),
        Len::Nil => "-1".into(),
        Len::Negative(n) => format!("-{n}"),
        Len::Text(t) => (*t).into(),
    }
}

/// One reply as a server might write it, or nearly.
#[derive(Clone, Debug)]
enum Reply {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Int(String),
    Bulk(Vec<u8>, Len),
    Array(Vec<Reply>, Len),
    /// A RESP3 type byte and its line.
    Resp3(u8, &'static str),
    /// `*1\r\n` that many times, then `:1\r\n`.
    Deep(usize),
    Raw(Vec<u8>),
}

const RESP3_TYPES: &[u8] = b"_,#!=(>%|~";
const RESP3_LINES: &[&str] = &["", "t", "f", "1.5", "inf", "0", "1", "2", "-1", "txt:hi"];

const ODD_INTEGERS: &[&str] = &[
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "123456789012345678901234567890",
    "-0",
    "+1",
    " 1",
    "1 ",
    "",
    "-",
    "1e3",
    "0x1",
    "\u{ff11}",
];

fn int_line() -> impl Strategy<Value = String> {
    (0u8..4, any::<i64>()).prop_map(|(k, n)| match k {
        0 => (n % 4).to_string(),
        1 | 2 => n.to_string(),
        _ => ODD_INTEGERS[n.unsigned_abs() as usize % ODD_INTEGERS.len()].into(),
    })
}

/// Bytes mostly taken from `alphabet`, now and then any byte.
fn from_alphabet(bytes: Vec<u8>, alphabet: &[u8]) -> Vec<u8> {
    let pick = |b: u8| match b {
        0..200 => alphabet[usize::from(b) % alphabet.len()],
        _ => b,
    };
    bytes.into_iter().map(pick).collect()
}

/// What goes on a simple string's or an error's line: words, a lone CR or
/// LF, bytes that are not UTF-8.
fn line() -> impl Strategy<Value = Vec<u8>> {
    (0u8..6, vec(any::<u8>(), 0..12)).prop_map(|(k, b)| match k {
        0 => b"OK".to_vec(),
        1 => b"ERR unknown command".to_vec(),
        2 => b"NOSCRIPT No matching script.".to_vec(),
        _ => from_alphabet(b, b"OK ERR\r\n:1"),
    })
}

fn data() -> impl Strategy<Value = Vec<u8>> {
    (0u8..3, vec(any::<u8>(), 0..24)).prop_map(|(k, b)| match k {
        0 => b,
        1 => from_alphabet(b, RESP_BYTES),
        _ => from_alphabet(b, b"0123456789"),
    })
}

fn reply() -> impl Strategy<Value = Reply> {
    let leaf = prop_oneof![
        3 => line().prop_map(Reply::Simple),
        1 => line().prop_map(Reply::Error),
        4 => int_line().prop_map(Reply::Int),
        4 => (data(), len()).prop_map(|(d, l)| Reply::Bulk(d, l)),
        1 => (select(RESP3_TYPES), select(RESP3_LINES)).prop_map(|(t, l)| Reply::Resp3(t, l)),
        1 => (0usize..120).prop_map(Reply::Deep),
        1 => vec(any::<u8>(), 1..8).prop_map(Reply::Raw),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        (vec(inner, 0..5), len()).prop_map(|(items, l)| Reply::Array(items, l))
    })
}

fn render(r: &Reply, out: &mut Vec<u8>) {
    let line = |out: &mut Vec<u8>, kind: u8, text: &[u8]| {
        out.push(kind);
        out.extend_from_slice(text);
        out.extend_from_slice(b"\r\n");
    };
    match r {
        Reply::Simple(l) => line(out, b'+', l),
        Reply::Error(l) => line(out, b'-', l),
        Reply::Int(n) => line(out, b':', n.as_bytes()),
        Reply::Bulk(d, l) => {
            line(out, b'$', show_len(l, d.len()).as_bytes());
            if !matches!(l, Len::Nil | Len::Negative(_)) {
                out.extend_from_slice(d);
                out.extend_from_slice(b"\r\n");
            }
        }
        Reply::Array(items, l) => {
            line(out, b'*', show_len(l, items.len()).as_bytes());
            if !matches!(l, Len::Nil | Len::Negative(_)) {
                for item in items {
                    render(item, out);
                }
            }
        }
        Reply::Resp3(t, l) => line(out, *t, l.as_bytes()),
        Reply::Deep(n) => {
            for _ in 0..*n {
                out.extend_from_slice(b"*1\r\n");
            }
            out.extend_from_slice(b":1\r\n");
        }
        Reply::Raw(b) => out.extend_from_slice(b),
    }
}

/// What happens to a stream on its way: cut short, bytes put in, taken
/// out, repeated or changed.
#[derive(Clone, Debug)]
enum Mutation {
    Truncate(Index),
    Insert(Index, Vec<u8>),
    Remove(Index, usize),
    Repeat(Index, Index),
    Flip(Index, u8),
}

const SPLICES: &[&[u8]] = &[
    b"\r\n", b"\r", b"\n", b"*", b"$", b":", b"-", b"-1", b"$-1\r\n", b"*-1\r\n", b"*1\r\n",
    b":1\r\n", b"+OK\r\n", b"$-7\r\n", b"0", b"9",
];

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<Index>().prop_map(Mutation::Truncate),
        (
            any::<Index>(),
            prop_oneof![
                select(SPLICES).prop_map(<[u8]>::to_vec),
                vec(any::<u8>(), 1..4)
            ]
        )
            .prop_map(|(at, b)| Mutation::Insert(at, b)),
        (any::<Index>(), 1usize..4).prop_map(|(at, n)| Mutation::Remove(at, n)),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::Repeat(a, b)),
        (any::<Index>(), 1u8..=255).prop_map(|(at, x)| Mutation::Flip(at, x)),
    ]
}

fn mutate(buf: &mut Vec<u8>, m: &Mutation) {
    let len = buf.len();
    match m {
        Mutation::Truncate(at) => buf.truncate(at.index(len + 1)),
        Mutation::Insert(at, b) => {
            let at = at.index(len + 1);
            buf.splice(at..at, b.iter().copied());
        }
        Mutation::Remove(at, n) => {
            let at = at.index(len + 1);
            buf.drain(at..(at + n).min(len));
        }
        Mutation::Repeat(a, b) => {
            let (a, b) = (a.index(len + 1), b.index(len + 1));
            let (from, to) = (a.min(b), a.max(b));
            let copy = buf[from..to].to_vec();
            buf.splice(to..to, copy);
        }
        Mutation::Flip(at, x) if len > 0 => buf[at.index(len)] ^= x,
        Mutation::Flip(..) => {}
    }
}

/// Replies one after another, perhaps mutated.
fn structured() -> impl Strategy<Value = Vec<u8>> {
    (vec(reply(), 1..4), vec(mutation(), 0..3)).prop_map(|(replies, mutations)| {
        let mut buf = Vec::new();
        for r in &replies {
            render(r, &mut buf);
        }
        for m in &mutations {
            mutate(&mut buf, m);
        }
        buf
    })
}

/// Any byte stream: random bytes, random RESP-ish bytes, or replies, split
/// into reads at up to 8 places.
fn stream() -> impl Strategy<Value = Stream> {
    let bytes = prop_oneof![
        1 => vec(any::<u8>(), 0..256),
        1 => vec(select(RESP_BYTES), 0..256),
        4 => structured(),
    ];
    (bytes, vec(any::<Index>(), 0..8)).prop_map(|(bytes, at)| {
        let mut cuts: Vec<usize> = at.iter().map(|i| i.index(bytes.len() + 1)).collect();
        cuts.sort_unstable();
        Stream {
            bytes: Bytes(bytes),
            cuts,
        }
    })
}

/// Plain RESP2 values (what `decode` builds itself), for values written
/// right.
fn plain_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Nil),
        int().prop_map(Value::Int),
        bulk().prop_map(Value::BulkString),
        vec(b' '..=b'~', 0..8).prop_map(|b| {
            let s = String::from_utf8(b).unwrap_or_default();
            // "OK" is Value::Okay.
            Value::SimpleString(if s == "OK" { "ok".into() } else { s })
        }),
        Just(Value::Okay),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| vec(inner, 0..4).prop_map(Value::Array))
}

/// `v` as a server writes it.
fn encode(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Nil => out.extend_from_slice(b"$-1\r\n"),
        Value::Int(n) => out.extend_from_slice(format!(":{n}\r\n").as_bytes()),
        Value::BulkString(b) => {
            out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        Value::SimpleString(s) => out.extend_from_slice(format!("+{s}\r\n").as_bytes()),
        Value::Okay => out.extend_from_slice(b"+OK\r\n"),
        Value::Array(items) => {
            out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
            for item in items {
                encode(item, out);
            }
        }
        other => unreachable!("not a plain value: {other:?}"),
    }
}

/// Replies written right, then one with a length of `-N`, nested in
/// arrays among siblings written right, then one more reply.
#[derive(Clone, Debug)]
struct NegativeLength {
    bytes: Bytes,
    /// The replies before it.
    before: Vec<Value>,
    /// Its N.
    n: u64,
    /// Its bytes.
    len: usize,
    /// Its value when N is 1.
    nil: Value,
}

fn negative_length() -> impl Strategy<Value = NegativeLength> {
    let level = (vec(plain_value(), 0..3), vec(plain_value(), 0..3));
    (
        vec(plain_value(), 0..3),
        select(&b"$*"[..]),
        (0u8..3, any::<u64>()).prop_map(|(k, n)| if k == 0 { 1 } else { negative_of(n) }),
        vec(level, 0..3),
    )
        .prop_map(|(before, kind, n, levels)| {
            let mut target = vec![kind];
            target.extend_from_slice(format!("-{n}\r\n").as_bytes());
            let mut nil = Value::Nil;
            for (left, right) in levels {
                let mut wrapped = format!("*{}\r\n", left.len() + 1 + right.len()).into_bytes();
                left.iter().for_each(|v| encode(v, &mut wrapped));
                wrapped.extend_from_slice(&target);
                right.iter().for_each(|v| encode(v, &mut wrapped));
                target = wrapped;
                nil = Value::Array(left.into_iter().chain([nil]).chain(right).collect());
            }
            let mut bytes = Vec::new();
            before.iter().for_each(|v| encode(v, &mut bytes));
            bytes.extend_from_slice(&target);
            bytes.extend_from_slice(b":7\r\n");
            NegativeLength {
                bytes: Bytes(bytes),
                before,
                n,
                len: target.len(),
                nil,
            }
        })
}

fn int() -> impl Strategy<Value = i64> {
    (0u8..12, any::<i64>()).prop_map(|(k, n)| match k {
        0 | 1 => 1,
        2 => 0,
        3 => -1,
        4 | 5 => n.rem_euclid(1003) - 3,
        6 => i64::from(fuzz::WRITER),
        7 => i64::MAX,
        8 => i64::MIN,
        _ => n,
    })
}

const ODD_BULKS: &[&str] = &[
    "",
    "0",
    "1",
    "+7",
    " 7",
    "7 ",
    "-1",
    "18446744073709551615",
    "18446744073709551616",
    "1795360184864561",
    "x",
    "00ff:42",
    ":",
    "OK",
];

/// What a bulk string holds: decimal numbers (fences), almost-numbers, a
/// hand-off's `<nonce>:<fence>`, anything.
fn bulk() -> impl Strategy<Value = Vec<u8>> {
    (0u8..3, any::<u64>(), vec(any::<u8>(), 0..12)).prop_map(|(k, n, b)| match k {
        0 => n.to_string().into_bytes(),
        1 => ODD_BULKS[n as usize % ODD_BULKS.len()].as_bytes().to_vec(),
        _ => b,
    })
}

/// A value that is not an array.
fn leaf() -> impl Strategy<Value = Value> {
    (0u8..6, int(), bulk(), vec(any::<char>(), 0..6)).prop_map(|(k, n, b, c)| match k {
        0 => Value::Nil,
        1 | 2 => Value::Int(n),
        3 => Value::BulkString(b),
        4 => Value::SimpleString(c.into_iter().collect()),
        _ => Value::Okay,
    })
}

/// Any value of the types the lock commands' replies are made of, arrays
/// nested up to 4 deep.
fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 24, 5, |inner| vec(inner, 0..6).prop_map(Value::Array))
}

/// Values shaped like what the scripts return, or nearly: `[x, y, ...]`
/// with x most often 1 or 0, SEM_INSPECT's `[[[token, ms, permits,
/// fence], ...], waiters, count]`, and anything.
fn reply_value() -> impl Strategy<Value = Value> {
    let first = (0u8..4, leaf()).prop_map(|(k, v)| match k {
        0 | 1 => Value::Int(1),
        2 => Value::Int(0),
        _ => v,
    });
    let attempt = (
        first,
        prop_oneof![4 => leaf(), 1 => value()],
        vec(leaf(), 0..3),
    )
        .prop_map(|(a, b, rest)| Value::Array([a, b].into_iter().chain(rest).collect()));
    let holder = (bulk(), int(), int(), leaf()).prop_map(|(t, ms, p, f)| {
        Value::Array(vec![Value::BulkString(t), Value::Int(ms), Value::Int(p), f])
    });
    let shared = (vec(holder, 0..4), int(), int(), vec(leaf(), 0..2)).prop_map(
        |(holders, waiters, count, rest)| {
            let head = [
                Value::Array(holders),
                Value::Int(waiters),
                Value::Int(count),
            ];
            Value::Array(head.into_iter().chain(rest).collect())
        },
    );
    prop_oneof![2 => value(), 3 => attempt, 1 => shared]
}

/// A hand-off message: `<nonce>`, `<nonce>:<fence>`, or anything.
fn payload() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        vec(any::<u8>(), 0..40),
        "[0-9a-f]{0,16}(:[0-9+ -]{0,22})?".prop_map(String::into_bytes),
    ]
    .prop_map(Bytes)
}

// ---------------------------------------------------------------------
// Properties

/// How a stream framed as a whole ends: an error, or a wait for more bytes.
#[derive(Debug, PartialEq, Eq)]
enum End {
    Error,
    More,
}

/// The replies `frame` finds one after another in `buf`, and how it ends;
/// fails when a length is beyond the buffer.
fn frame_all(buf: &[u8]) -> Result<(Vec<&[u8]>, End), TestCaseError> {
    let mut replies = Vec::new();
    let mut at = 0;
    loop {
        let rest = &buf[at..];
        match frame(rest) {
            Ok(Some(n)) => {
                prop_assert!(
                    n > 0 && n <= rest.len(),
                    "frame found a reply of {n} bytes in {}",
                    rest.len()
                );
                replies.push(&rest[..n]);
                at += n;
            }
            Ok(None) => return Ok((replies, End::More)),
            Err(_) => return Ok((replies, End::Error)),
        }
    }
}

/// Framed replies decode to an error or to redis-rs's value of the same
/// bytes; whatever decodes is safe to give every decoder, and a grant is an
/// array.
fn framed_replies_are_redis_rs_values(s: Stream) -> TestCaseResult {
    let (replies, _) = frame_all(&s.bytes.0)?;
    for reply in replies {
        let Ok(ours) = decode(reply) else { continue };
        let theirs = redis::parse_redis_value(reply);
        prop_assert!(
            matches!(&theirs, Ok(v) if format!("{v:?}") == format!("{ours:?}")),
            "decode gave {ours:?} where redis-rs gives {theirs:?} for {:?}",
            Bytes(reply.to_vec())
        );
        all_decoders(&ours);
        if fuzz::parse_grant(&ours).is_some() {
            prop_assert_eq!(reply[0], b'*', "a grant that is not an array");
        }
    }
    Ok(())
}

/// No strict prefix of a framed reply is a reply.
fn a_prefix_is_never_a_reply(s: Stream) -> TestCaseResult {
    let (replies, _) = frame_all(&s.bytes.0)?;
    for reply in replies {
        for cut in 0..reply.len() {
            let got = frame(&reply[..cut]);
            prop_assert!(
                !matches!(got, Ok(Some(_))),
                "frame found {got:?} in {:?}, a prefix of {:?}",
                Bytes(reply[..cut].to_vec()),
                Bytes(reply.to_vec())
            );
        }
    }
    Ok(())
}

/// A stream read in pieces frames the same replies, and ends the same way,
/// as the stream read whole: the reader of a connection, byte for byte.
fn reads_split_anywhere_frame_alike(s: Stream) -> TestCaseResult {
    let whole = &s.bytes.0;
    let (expected, end) = frame_all(whole)?;
    let mut pending = Vec::new();
    let mut got: Vec<Vec<u8>> = Vec::new();
    let mut got_end = End::More;
    let bounds = s.cuts.iter().copied().chain([whole.len()]);
    let mut from = 0;
    'reads: for to in bounds {
        pending.extend_from_slice(&whole[from..to]);
        from = to;
        loop {
            match frame(&pending) {
                Ok(Some(n)) => {
                    prop_assert!(n > 0 && n <= pending.len());
                    got.push(pending.drain(..n).collect());
                }
                Ok(None) => break,
                Err(_) => {
                    got_end = End::Error;
                    break 'reads;
                }
            }
        }
    }
    let got: Vec<&[u8]> = got.iter().map(Vec::as_slice).collect();
    prop_assert_eq!(
        (&got, &got_end),
        (&expected, &end),
        "read in pieces at {:?}",
        s.cuts
    );
    Ok(())
}

/// `$-1` and `*-1` are nil; `$-N` and `*-N` for any other N are errors,
/// nested or not; the replies around them frame as they were written.
fn only_minus_one_is_nil(c: NegativeLength) -> TestCaseResult {
    let buf = &c.bytes.0;
    let mut at = 0;
    for v in &c.before {
        let n = frame(&buf[at..]).ok().flatten();
        prop_assert!(n.is_some(), "a reply written right is not framed");
        let n = n.unwrap_or_default();
        let got = decode(&buf[at..at + n]);
        prop_assert!(matches!(&got, Ok(g) if g == v), "{v:?} decoded as {got:?}");
        at += n;
    }
    let rest = &buf[at..];
    let shown = Bytes(rest[..c.len].to_vec());
    match frame(rest) {
        Err(e) => prop_assert!(c.n != 1, "{shown:?} is an error: {e}"),
        Ok(None) => return Err(TestCaseError::fail(format!("{shown:?} needs more bytes"))),
        Ok(Some(n)) => {
            prop_assert_eq!(n, c.len, "{:?} framed as {} bytes", shown, n);
            match decode(&rest[..n]) {
                Ok(v) => {
                    prop_assert!(c.n == 1, "a length of -{} was read as {v:?}", c.n);
                    prop_assert_eq!(v, c.nil);
                }
                Err(e) => prop_assert!(c.n != 1, "{shown:?} is an error: {e}"),
            }
        }
    }
    Ok(())
}

/// Every reply decoder, on anything.
fn all_decoders(v: &Value) {
    let _ = fuzz::parse_grant(v);
    let _ = fuzz::parse_fence(v);
    let _ = fuzz::parse_forced(v);
    let _ = fuzz::parse_info(v);
    let _ = fuzz::parse_shared_info(v);
    if let Value::BulkString(b) = v {
        let _ = fuzz::split_handoff(b);
    }
}

fn decoders_never_panic(v: Value) -> TestCaseResult {
    all_decoders(&v);
    if let Value::Array(items) = &v {
        items.iter().for_each(all_decoders);
    }
    Ok(())
}

/// ACQUIRE and ENQUEUE grant the lock only by `[1, fence, ...]`: a nil, an
/// integer, a string, or an array starting with anything else is never a
/// grant, and the fence is the one the second element says.
fn only_one_and_a_fence_is_a_grant(v: Value) -> TestCaseResult {
    if let Some(fence) = fuzz::parse_grant(&v) {
        let said = match &v {
            Value::Array(items) if items.first() == Some(&Value::Int(1)) => {
                items.get(1).and_then(fuzz::parse_fence)
            }
            _ => None,
        };
        prop_assert_eq!(said, Some(fence), "granted with fence {} by {:?}", fence, v);
    }
    Ok(())
}

/// A fence is a non-negative integer, or a string of decimal digits that
/// says the same number: nothing else (`+7`, ` 7`, `-1`, `7x`) is one.
fn fences_are_decimal(v: Value) -> TestCaseResult {
    if let Some(fence) = fuzz::parse_fence(&v) {
        let exact = match &v {
            Value::Int(n) => u64::try_from(*n) == Ok(fence),
            Value::BulkString(b) => {
                !b.is_empty()
                    && b.iter().all(u8::is_ascii_digit)
                    && std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()) == Some(fence)
            }
            _ => false,
        };
        prop_assert!(exact, "{:?} read as the fence {}", v, fence);
    }
    Ok(())
}

fn handoffs_never_panic(p: Bytes) -> TestCaseResult {
    if let Some((nonce, _)) = fuzz::split_handoff(&p.0) {
        prop_assert!(nonce.len() <= p.0.len());
    }
    Ok(())
}

// ---------------------------------------------------------------------
// Runs

/// Cases per property in `make test`: `REDISLOCK_FUZZ_CASES`, 2000 by default.
fn cases() -> u32 {
    std::env::var("REDISLOCK_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}

/// Where the failing seeds of the properties are kept: the cargo target
/// directory of this test binary (`target/<profile>/deps/…`), so that
/// `make test` tries first what `make fuzz` found.
fn regressions_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let target = exe
        .ancestors()
        .nth(3)
        .unwrap_or(std::path::Path::new("target"));
    target.join("proptest-regressions").join("resp_fuzz")
}

fn config(name: &str, cases: u32) -> Config {
    let file = regressions_dir().join(format!("{name}.txt"));
    let file: &'static str = Box::leak(file.to_string_lossy().into_owned().into_boxed_str());
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(file))),
        ..Config::default()
    }
}

fn failure<T: fmt::Debug>(e: TestError<T>) -> String {
    match e {
        TestError::Abort(why) => format!("aborted: {why}"),
        TestError::Fail(why, input) => format!("{why}\n    minimal input: {input:?}"),
    }
}

/// Run one property on [`cases`] cases; a failure panics with the minimal
/// input.
fn bounded<S: Strategy>(name: &str, strategy: S, test: impl Fn(S::Value) -> TestCaseResult) {
    let mut runner = TestRunner::new(config(name, cases()));
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{name}: {}", failure(e));
    }
}

#[test]
fn framed_replies() {
    bounded(
        "framed_replies",
        stream(),
        framed_replies_are_redis_rs_values,
    );
}

#[test]
fn prefixes() {
    bounded("prefixes", stream(), a_prefix_is_never_a_reply);
}

#[test]
fn split_reads() {
    bounded("split_reads", stream(), reads_split_anywhere_frame_alike);
}

#[test]
fn negative_lengths() {
    bounded("negative_lengths", negative_length(), only_minus_one_is_nil);
}

#[test]
fn decoders() {
    bounded("decoders", reply_value(), decoders_never_panic);
}

#[test]
fn grants() {
    bounded("grants", reply_value(), only_one_and_a_fence_is_a_grant);
}

#[test]
fn fences() {
    bounded("fences", value(), fences_are_decimal);
}

#[test]
fn handoffs() {
    bounded("handoffs", payload(), handoffs_never_panic);
}

/// What one property's campaign did.
struct Run {
    executions: u64,
    took: Duration,
    failure: Option<String>,
}

/// Run one property for `budget`, batch after batch of fresh random cases,
/// until the time is up or it fails.
fn campaign_one<S: Strategy>(
    name: &str,
    strategy: S,
    test: impl Fn(S::Value) -> TestCaseResult,
    budget: Duration,
) -> Run {
    let executions = Cell::new(0u64);
    let start = Instant::now();
    let mut failure_found = None;
    while start.elapsed() < budget {
        let mut runner = TestRunner::new(config(name, 1000));
        let counted = |v| {
            executions.set(executions.get() + 1);
            test(v)
        };
        if let Err(e) = runner.run(&strategy, counted) {
            failure_found = Some(failure(e));
            break;
        }
    }
    Run {
        executions: executions.get(),
        took: start.elapsed(),
        failure: failure_found,
    }
}

/// The long campaign (`make fuzz`): every property for its share of
/// `FUZZ_SECONDS` (300 by default), reporting executions per second and
/// every failure with its minimal input; fails when one property failed.
#[test]
#[ignore = "the long campaign: make fuzz"]
fn campaign() {
    let seconds: f64 = std::env::var("FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300.0);
    const PROPERTIES: u32 = 8;
    let each = Duration::from_secs_f64(seconds.max(0.0) / f64::from(PROPERTIES));
    println!(
        "fuzzing {PROPERTIES} properties for {seconds} s ({:.1} s each); failing seeds kept in {}",
        each.as_secs_f64(),
        regressions_dir().display()
    );
    let runs = [
        (
            "framed_replies",
            campaign_one(
                "framed_replies",
                stream(),
                framed_replies_are_redis_rs_values,
                each,
            ),
        ),
        (
            "prefixes",
            campaign_one("prefixes", stream(), a_prefix_is_never_a_reply, each),
        ),
        (
            "split_reads",
            campaign_one(
                "split_reads",
                stream(),
                reads_split_anywhere_frame_alike,
                each,
            ),
        ),
        (
            "negative_lengths",
            campaign_one(
                "negative_lengths",
                negative_length(),
                only_minus_one_is_nil,
                each,
            ),
        ),
        (
            "decoders",
            campaign_one("decoders", reply_value(), decoders_never_panic, each),
        ),
        (
            "grants",
            campaign_one(
                "grants",
                reply_value(),
                only_one_and_a_fence_is_a_grant,
                each,
            ),
        ),
        (
            "fences",
            campaign_one("fences", value(), fences_are_decimal, each),
        ),
        (
            "handoffs",
            campaign_one("handoffs", payload(), handoffs_never_panic, each),
        ),
    ];
    let (mut total, mut failed) = (0u64, Vec::new());
    for (name, run) in &runs {
        let secs = run.took.as_secs_f64();
        println!(
            "{name:<18} {:>10} executions in {secs:6.1} s ({:>8.0}/s), {} failure{}",
            run.executions,
            run.executions as f64 / secs.max(1e-9),
            u32::from(run.failure.is_some()),
            if run.failure.is_some() { "" } else { "s" },
        );
        if let Some(f) = &run.failure {
            println!("    {f}");
            failed.push(*name);
        }
        total += run.executions;
    }
    println!("{total} executions in all");
    print_kept_seeds();
    assert!(failed.is_empty(), "properties that failed: {failed:?}");
}

/// The failing seeds kept from this run and earlier ones, with the minimal
/// input each shrank to.
fn print_kept_seeds() {
    let Ok(files) = std::fs::read_dir(regressions_dir()) else {
        println!("no failing seed kept");
        return;
    };
    let mut files: Vec<PathBuf> = files.flatten().map(|e| e.path()).collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let seeds: Vec<&str> = text.lines().filter(|l| l.starts_with("cc ")).collect();
        if seeds.is_empty() {
            continue;
        }
        println!("kept in {} (tried first by every run):", file.display());
        for seed in seeds {
            println!("    {seed}");
        }
    }
}
