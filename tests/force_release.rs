//! `Client::force_release`: the operator's unlock. It removes whoever holds
//! the lock (this library's holder or a foreign value), hands the lock to
//! the oldest live waiter at once, leaves the fence counter alone (later
//! fences stay above the broken holder's), refuses a key of another type,
//! and the broken holder finds itself lost.

mod common;

use std::thread;
use std::time::Duration;

use common::{wait_until, Server};
use redislock::{AcquireOptions, Client, ErrorKind, Wait};

const S: Duration = Duration::from_secs(1);

#[test]
fn a_held_lock_is_removed_its_holder_finds_itself_lost_and_fences_go_on_rising() {
    let srv = Server::start();
    let mut raw = srv.raw();
    let holder_client = Client::open(&srv.url()).unwrap();
    let operator = Client::open(&srv.url()).unwrap();

    let held = holder_client.acquire("job", 60 * S, Wait::TryOnce).unwrap();
    let broken_fence = held.fence().unwrap();
    assert!(
        operator.force_release("job").unwrap(),
        "a holder was removed"
    );
    let left: Vec<String> = redis::cmd("KEYS").arg("*job*").query(&mut raw).unwrap();
    assert!(left.is_empty(), "nothing of the lock is left: {left:?}");

    // The next owner gets a larger fence, whatever the broken one drew.
    let next = operator
        .acquire_with("job", AcquireOptions::new(60 * S).fenced(true))
        .unwrap();
    assert!(next.fence().unwrap() > broken_fence);

    // The broken holder cannot release or extend the new owner's lock.
    assert_eq!(held.extend(60 * S).unwrap_err().kind(), ErrorKind::NotOwner);
    assert!(held.is_lost());
    assert_eq!(held.release().unwrap_err().kind(), ErrorKind::NotOwner);
    let token: Vec<u8> = redis::cmd("GET").arg("job").query(&mut raw).unwrap();
    assert_eq!(token, next.token(), "the new owner's lock is untouched");
    next.release().unwrap();

    // Nobody holds it: nothing removed, nothing created.
    assert!(!operator.force_release("job").unwrap());
    let exists: i64 = redis::cmd("EXISTS").arg("job").query(&mut raw).unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn the_oldest_waiter_is_handed_the_lock_at_once() {
    let srv = Server::start();
    let client = Client::open(&srv.url()).unwrap();
    let operator = Client::open(&srv.url()).unwrap();
    // The holder never releases: a crashed process, with a long TTL.
    client
        .acquire("stuck", 600 * S, Wait::TryOnce)
        .unwrap()
        .forget();
    let before = client.stats();
    let waiter = {
        let client = client.clone();
        thread::spawn(move || client.acquire("stuck", 30 * S, Wait::Timeout(120 * S)))
    };
    wait_until("the waiter to queue", 30 * S, || {
        client.inspect("stuck").unwrap().waiters == 1
    });
    let operator_before = operator.stats();
    assert!(operator.force_release("stuck").unwrap());
    let lock = waiter
        .join()
        .unwrap()
        .expect("the waiter is handed the lock");
    let s = client.stats();
    assert_eq!(
        (
            s.acquired_handed_over - before.acquired_handed_over,
            s.acquired_after_wait - before.acquired_after_wait
        ),
        (1, 0),
        "handed over by the forced release, not found free by a retry"
    );
    assert_eq!(
        operator.stats().handoffs_given - operator_before.handoffs_given,
        1
    );
    assert_eq!(
        client.inspect("stuck").unwrap().holder.as_deref(),
        Some(lock.token())
    );
    // The hand-off left the queue in order: the next release hands over as usual.
    let before = client.stats();
    let second = {
        let client = client.clone();
        thread::spawn(move || client.acquire("stuck", 30 * S, Wait::Timeout(120 * S)))
    };
    wait_until("the second waiter to queue", 30 * S, || {
        client.inspect("stuck").unwrap().waiters == 1
    });
    lock.release().unwrap();
    let second = second.join().unwrap().unwrap();
    // The release handed it over (the waiter may notice by its message or
    // by a retry that finds the lock already its own: that race is the
    // waiter's, not the queue's).
    let s = client.stats();
    assert_eq!(s.handoffs_given - before.handoffs_given, 1, "{s:?}");
    assert_eq!(
        (s.acquired_handed_over + s.acquired_after_wait)
            - (before.acquired_handed_over + before.acquired_after_wait),
        1,
        "{s:?}"
    );
    second.release().unwrap();
}

#[test]
fn a_foreign_value_is_removed_and_a_key_of_another_type_is_refused_untouched() {
    let srv = Server::start();
    let mut raw = srv.raw();
    let operator = Client::open(&srv.url()).unwrap();

    // redis-objects before 1.4.2 stored a timestamp; others store anything.
    let _: () = redis::cmd("SET")
        .arg("old")
        .arg("1700000000.25")
        .query(&mut raw)
        .unwrap();
    assert!(operator.force_release("old").unwrap());
    let exists: i64 = redis::cmd("EXISTS").arg("old").query(&mut raw).unwrap();
    assert_eq!(exists, 0);

    let _: i64 = redis::cmd("RPUSH")
        .arg("list")
        .arg("a")
        .query(&mut raw)
        .unwrap();
    let err = operator.force_release("list").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    let len: i64 = redis::cmd("LLEN").arg("list").query(&mut raw).unwrap();
    assert_eq!(len, 1, "the list is left alone");

    assert_eq!(
        operator.force_release("").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn over_redlock_every_node_is_cleared() {
    let nodes: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = nodes.iter().map(Server::url).collect();
    let holder = Client::redlock(&urls).build().unwrap();
    let operator = Client::redlock(&urls).build().unwrap();
    let held = holder.acquire("batch", 60 * S, Wait::TryOnce).unwrap();
    // Redlock returns once a majority answered: wait for the last node.
    wait_until("every node to hold the lock", 30 * S, || {
        nodes.iter().all(|n| {
            let v: Option<Vec<u8>> = redis::cmd("GET").arg("batch").query(&mut n.raw()).unwrap();
            v.as_deref() == Some(held.token())
        })
    });
    assert!(operator.force_release("batch").unwrap());
    for n in &nodes {
        let exists: i64 = redis::cmd("EXISTS")
            .arg("batch")
            .query(&mut n.raw())
            .unwrap();
        assert_eq!(exists, 0, "every node was waited for");
    }
    assert_eq!(held.release().unwrap_err().kind(), ErrorKind::NotOwner);
    assert!(!operator.force_release("batch").unwrap());
}
