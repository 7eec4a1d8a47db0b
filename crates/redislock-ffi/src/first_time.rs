//! `redislock_first_time`: a process-wide once per tag, for the bindings
//! that log a hint once per process (a php-fpm worker loads the
//! declarations in every request).

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};

use crate::args::byte_str;
use crate::guard::guard;

/// True the first time this process calls it with `tag`, false after (for
/// bindings that log a hint once per process, such as a php-fpm worker
/// loading the declarations in every request). `tag`: borrowed bytes.
#[no_mangle]
pub extern "C" fn redislock_first_time(tag: *const u8, tag_len: usize) -> bool {
    static SEEN: LazyLock<Mutex<HashSet<Vec<u8>>>> = LazyLock::new(Default::default);
    guard(false, || {
        let Ok(Some(tag)) = byte_str(tag, tag_len, "tag", false) else {
            return false;
        };
        redislock::__private::locked(&SEEN).insert(tag.to_vec())
    })
}
