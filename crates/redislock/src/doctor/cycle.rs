//! `lock-cycle`: one lock acquired and released through the client, as an
//! application would, under a random name `redislock:doctor:…` whose key
//! is deleted with `DEL` when the release is refused.

use std::time::{Duration, Instant};

use redis::Value;

use super::{Finding, Severity};
use crate::client::Client;
use crate::options::{AcquireOptions, Wait};

impl Client {
    /// Acquire and release a lock of a random name, as an application does.
    pub(super) fn lock_cycle(&self) -> Finding {
        let mut name = b"redislock:doctor:".to_vec();
        name.extend_from_slice(&crate::random_token());
        let started = Instant::now();
        let mut opts = AcquireOptions::new(Duration::from_secs(10));
        opts.wait = Wait::TryOnce;
        // A lock taken whose release is refused (a user without EVALSHA)
        // would stay for its TTL: its key (a name only this call knows) is
        // deleted with a plain DEL.
        let mut left = String::new();
        let r = self.acquire_with(&name, opts).and_then(|l| {
            l.release().inspect_err(|_| {
                left = match self.delete_everywhere(&name) {
                    true => String::from(" (the lock's key was then deleted with DEL)"),
                    false => String::from(" (the lock's key expires within 10 s)"),
                };
            })
        });
        let server = self.addr();
        match r {
            Ok(()) => Finding {
                severity: Severity::Ok,
                check: "lock-cycle",
                server,
                message: format!(
                    "a lock was acquired and released in {} µs",
                    started.elapsed().as_micros()
                ),
                fix: String::new(),
            },
            Err(e) => Finding {
                severity: Severity::Unsafe,
                check: "lock-cycle",
                server,
                message: format!("a lock could not be acquired and released: {e}{left}"),
                fix: String::from(
                    "see the findings above; the user must be allowed SET, EVAL, EVALSHA and the \
                     keys redislock:* and the lock names (ACL ~…)",
                ),
            },
        }
    }

    /// `DEL key` on every server of the deployment; whether each took it.
    fn delete_everywhere(&self, key: &[u8]) -> bool {
        let mut all = true;
        for pool in self.deployment().pools() {
            let del = redis::cmd("DEL").arg(key).clone();
            all &= pool.with(|con, _| del.query::<Value>(con)).is_ok();
        }
        all
    }
}
