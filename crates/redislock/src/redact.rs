//! URLs as every binding shows them (a Python `repr`, PHP's `var_dump`,
//! a log line): without their passwords. One rule for every language.

/// `url` with its password replaced by `***`, for a `repr()` or a log line: the password
/// of the user info (`redis://user:***@host:6379/0`; user info without a
/// `:` is taken for a password: `***@host`), and the value of every query
/// parameter whose name contains `pass` (`sentinel_password`, a socket's
/// `pass`). Escaped or not, the password never shows: the user info ends
/// at the last `@` (a password may hold an unescaped one), and when what
/// comes before it is not plain user info (an `@` in a query value), all of
/// it is hidden, more than needed but never less. A URL without `://` is
/// hidden whole, and so is one whose part before `://` is not a plain
/// scheme (`redis:user:secret@h://`).
pub fn redact_url(url: &str) -> String {
    let Some(sep) = url.find("://") else {
        return "***".to_owned();
    };
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.');
    if sep == 0 || !url[..sep].chars().all(plain) {
        return "***".to_owned();
    }
    let (scheme, mut rest) = url.split_at(sep + 3);
    let mut out = String::from(scheme);
    if let Some(at) = rest.rfind('@') {
        let info = &rest[..at];
        match info.split_once(':') {
            Some((user, _)) if !info.contains(['/', '?', '#']) => {
                out.push_str(user);
                out.push_str(":***@");
            }
            _ => out.push_str("***@"),
        }
        rest = &rest[at + 1..];
    }
    match rest.split_once('?') {
        None => out.push_str(rest),
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            for (i, param) in query.split('&').enumerate() {
                if i > 0 {
                    out.push('&');
                }
                let name = param.split_once('=').map_or(param, |(n, _)| n);
                let decoded: String = url::form_urlencoded::parse(name.as_bytes())
                    .map(|(k, v)| format!("{k}{v}"))
                    .collect();
                if decoded.to_ascii_lowercase().contains("pass") {
                    out.push_str(name);
                    out.push_str("=***");
                } else {
                    out.push_str(param);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_never_show() {
        let cases = [
            ("redis://user:s3cret@h:6379/0", "redis://user:***@h:6379/0"),
            ("redis://:s3cret@h:6379/0", "redis://:***@h:6379/0"),
            ("redis://s3cret@h:6379/0", "redis://***@h:6379/0"),
            ("redis://u:p%40ss@h/0", "redis://u:***@h/0"),
            ("redis://u:p@ss@h/0", "redis://u:***@h/0"),
            ("redis://h:6379/0", "redis://h:6379/0"),
            (
                "redis+sentinel://a:1,b:2/m?sentinel_password=s3cret&db=2",
                "redis+sentinel://a:1,b:2/m?sentinel_password=***&db=2",
            ),
            (
                "unix:///run/r.sock?pass=s3cret&db=1",
                "unix:///run/r.sock?pass=***&db=1",
            ),
            ("redis://h/0?x=a@b", "redis://***@b"),
            ("not a url s3cret", "***"),
            ("redis:user:s3cret@127.0.0.1://", "***"),
            ("redis:u:s3cret@h/0?tls_ca_file=file:///ca.pem", "***"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }
}
