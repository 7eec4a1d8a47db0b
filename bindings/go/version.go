package redislock

// Version is this module's version. The C library linked in must be the
// same release: the package panics at init when redislock_version() differs
// (make lint checks that it follows Cargo.toml's).
const Version = "0.1.0"
