//! `docs/PROTOCOL.md` shows every Lua script byte for byte, with its SHA1
//! (the name `EVALSHA` sends). This test keeps it true without a server:
//! it rebuilds each script the way the compiler does, from the string
//! constants and `macro_rules!` fragments of every `.rs` file under
//! `crates/redislock/src/protocol/` (string literals, raw strings, `concat!`
//! and argument-less macro calls), and checks that
//!
//! - every script constant has a ```` ```lua NAME ```` block in the
//!   document whose text is the script exactly, and no block names a
//!   script that does not exist;
//! - the document names the file each script is in (a line
//!   `` `NAME` in `crates/redislock/src/protocol/FILE`: ``);
//! - the SHA1 the document gives for each script is the SHA1 of that text.
//!
//! After changing a script, `PROTOCOL_DOC_DUMP=FILE cargo test
//! --test protocol_doc` writes the blocks and the SHA1 table as they should
//! be. `PROTOCOL_DOC_SRC` (a directory in place of
//! `crates/redislock/src/protocol/`) and `PROTOCOL_DOC_MD` read other
//! copies, to check that the test fails when they disagree. Std only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the protocol's source files are, from the workspace's root.
const PROTOCOL_DIR: &str = "crates/redislock/src/protocol";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `.rs` file of the protocol's directory and the directories under
/// it, as (path from the workspace's root, text), in the order of their
/// names.
fn sources() -> Vec<(String, String)> {
    let dir = match std::env::var_os("PROTOCOL_DOC_SRC") {
        Some(d) => PathBuf::from(d),
        None => root().join(PROTOCOL_DIR),
    };
    let mut files = Vec::new();
    rust_files(&dir, "", &mut files);
    assert!(!files.is_empty(), "{}: no .rs file", dir.display());
    files.sort();
    files
        .into_iter()
        .map(|f| (format!("{PROTOCOL_DIR}/{f}"), read(dir.join(&f))))
        .collect()
}

/// The `.rs` files under `dir`, as paths relative to the directory the
/// search began in (`rel` is `dir`'s).
fn rust_files(dir: &Path, rel: &str, out: &mut Vec<String>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let name = entry.file_name().into_string().expect("a UTF-8 file name");
        let path = format!("{rel}{name}");
        if entry.file_type().unwrap().is_dir() {
            rust_files(&entry.path(), &format!("{path}/"), out);
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

fn document() -> String {
    match std::env::var_os("PROTOCOL_DOC_MD") {
        Some(p) => read(PathBuf::from(p)),
        None => read(root().join("docs/PROTOCOL.md")),
    }
}

/// A cursor over Rust source, enough for string constants built with
/// `concat!` and macros without arguments.
struct Src<'a> {
    s: &'a [u8],
    at: usize,
    file: &'a str,
}

/// One piece of a script: text, or a macro to expand.
enum Part {
    Text(String),
    Macro(String),
}

impl<'a> Src<'a> {
    fn fail(&self, what: &str) -> ! {
        let line = self.s[..self.at].iter().filter(|&&b| b == b'\n').count() + 1;
        panic!("{}:{line}: {what}", self.file)
    }

    fn skip(&mut self) {
        loop {
            while self.at < self.s.len() && self.s[self.at].is_ascii_whitespace() {
                self.at += 1;
            }
            if self.s[self.at..].starts_with(b"//") {
                while self.at < self.s.len() && self.s[self.at] != b'\n' {
                    self.at += 1;
                }
                continue;
            }
            return;
        }
    }

    fn eat(&mut self, token: &str) {
        self.skip();
        if !self.s[self.at..].starts_with(token.as_bytes()) {
            self.fail(&format!("expected `{token}`"));
        }
        self.at += token.len();
    }

    fn ident(&mut self) -> String {
        self.skip();
        let start = self.at;
        while self.at < self.s.len()
            && (self.s[self.at].is_ascii_alphanumeric() || self.s[self.at] == b'_')
        {
            self.at += 1;
        }
        if start == self.at {
            self.fail("expected a name");
        }
        String::from_utf8(self.s[start..self.at].to_vec()).unwrap()
    }

    /// `"…"` with Rust's escapes.
    fn string(&mut self) -> String {
        self.eat("\"");
        let mut out = Vec::new();
        loop {
            let Some(&b) = self.s.get(self.at) else {
                self.fail("unterminated string")
            };
            self.at += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    let e = self.s[self.at];
                    self.at += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'0' => out.push(0),
                        b'\\' | b'"' | b'\'' => out.push(e),
                        b'\n' => {
                            while self.s[self.at].is_ascii_whitespace() {
                                self.at += 1;
                            }
                        }
                        _ => self.fail("an escape this test does not know"),
                    }
                }
                _ => out.push(b),
            }
        }
        String::from_utf8(out).unwrap()
    }

    /// `r"…"`, `r#"…"#`, …
    fn raw_string(&mut self) -> String {
        self.eat("r");
        let hashes = self.s[self.at..].iter().take_while(|&&b| b == b'#').count();
        self.at += hashes;
        self.eat("\"");
        let end = format!("\"{}", "#".repeat(hashes));
        let len = self.s[self.at..]
            .windows(end.len())
            .position(|w| w == end.as_bytes())
            .unwrap_or_else(|| self.fail("unterminated raw string"));
        let text = String::from_utf8(self.s[self.at..self.at + len].to_vec()).unwrap();
        self.at += len + end.len();
        text
    }

    /// A string expression: literal, raw literal, `concat!(…)` or `name!()`.
    fn expr(&mut self, out: &mut Vec<Part>) {
        self.skip();
        match self.s[self.at] {
            b'"' => out.push(Part::Text(self.string())),
            b'r' if matches!(self.s.get(self.at + 1), Some(b'"' | b'#')) => {
                out.push(Part::Text(self.raw_string()))
            }
            _ => {
                let name = self.ident();
                self.eat("!");
                self.eat("(");
                if name == "concat" {
                    loop {
                        self.skip();
                        if self.s[self.at] == b')' {
                            break;
                        }
                        self.expr(out);
                        self.skip();
                        if self.s[self.at] == b',' {
                            self.at += 1;
                        }
                    }
                } else {
                    out.push(Part::Macro(name));
                }
                self.eat(")");
            }
        }
    }
}

/// The macros' bodies and the string constants of the source files, each
/// as its parts (a constant with the file it is in).
#[allow(clippy::type_complexity)]
fn parse() -> (
    BTreeMap<String, Vec<Part>>,
    BTreeMap<String, (String, Vec<Part>)>,
) {
    let (mut macros, mut consts) = (BTreeMap::new(), BTreeMap::new());
    for (file, text) in &sources() {
        let s = text.as_bytes();
        let mut at = 0;
        while at < s.len() {
            let rest = &s[at..];
            let line_start = at == 0 || s[at - 1] == b'\n';
            let decl = ["macro_rules! ", "pub(crate) const ", "const "]
                .into_iter()
                .find(|d| line_start && rest.starts_with(d.as_bytes()));
            let Some(decl) = decl else {
                at += 1;
                continue;
            };
            let mut src = Src {
                s,
                at: at + decl.len(),
                file,
            };
            let name = src.ident();
            if decl == "macro_rules! " {
                src.eat("{");
                src.eat("(");
                src.eat(")");
                src.eat("=>");
                src.eat("{");
                let mut parts = Vec::new();
                src.expr(&mut parts);
                src.eat("}");
                if macros.insert(name.clone(), parts).is_some() {
                    src.fail(&format!("a second macro {name}!"));
                }
            } else {
                src.skip();
                if !s[src.at..].starts_with(b": &str =") {
                    at = src.at;
                    continue;
                }
                src.eat(": &str =");
                let mut parts = Vec::new();
                src.expr(&mut parts);
                src.eat(";");
                if consts.insert(name.clone(), (file.clone(), parts)).is_some() {
                    src.fail(&format!("a second constant {name}"));
                }
            }
            at = src.at;
        }
    }
    (macros, consts)
}

fn expand(parts: &[Part], macros: &BTreeMap<String, Vec<Part>>, out: &mut String) {
    for p in parts {
        match p {
            Part::Text(t) => out.push_str(t),
            Part::Macro(m) => {
                let body = macros
                    .get(m)
                    .unwrap_or_else(|| panic!("macro {m}! is not defined in the scanned files"));
                expand(body, macros, out);
            }
        }
    }
}

/// A Lua script as sent, and the file it is in.
struct Script {
    file: String,
    text: String,
}

/// Every Lua script, by constant name. A string constant that is not Lua
/// (a key suffix, a channel prefix) is left out.
fn scripts() -> BTreeMap<String, Script> {
    let (macros, consts) = parse();
    consts
        .into_iter()
        .filter_map(|(name, (file, parts))| {
            let mut text = String::new();
            expand(&parts, &macros, &mut text);
            text.contains("redis.")
                .then_some((name, Script { file, text }))
        })
        .collect()
}

/// The line that tells, above a script's block, which file it is in.
fn where_line(name: &str, script: &Script) -> String {
    format!("`{name}` in `{}`:", script.file)
}

/// The ```` ```lua NAME ```` blocks of the document: name → text.
fn blocks(doc: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut lines = doc.split_inclusive('\n');
    while let Some(line) = lines.next() {
        let Some(name) = line.trim_end().strip_prefix("```lua ") else {
            continue;
        };
        let mut text = String::new();
        for l in lines.by_ref() {
            if l.trim_end() == "```" {
                break;
            }
            text.push_str(l);
        }
        let name = name.trim().to_string();
        assert!(
            out.insert(name.clone(), text).is_none(),
            "two blocks for {name}"
        );
    }
    out
}

/// The SHA1s the document gives: each table row `| `NAME` | `sha1` | …`.
fn documented_shas(doc: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 {
            continue;
        }
        let (name, sha) = (cells[1].trim_matches('`'), cells[2].trim_matches('`'));
        if sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            out.insert(name.to_string(), sha.to_string());
        }
    }
    out
}

fn sha1(data: &[u8]) -> String {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for chunk in msg.chunks(64) {
        let mut w = [0u32; 80];
        for i in 0..16 {
            w[i] = u32::from_be_bytes(chunk[i * 4..i * 4 + 4].try_into().unwrap());
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            (e, d, c, b, a) = (d, c, b.rotate_left(30), a, t);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

/// What the document's blocks and table should hold, for pasting.
fn dump(scripts: &BTreeMap<String, Script>) {
    let Some(path) = std::env::var_os("PROTOCOL_DOC_DUMP") else {
        return;
    };
    let mut out = String::from("| script | SHA1 | bytes |\n|---|---|---|\n");
    for (name, s) in scripts {
        out.push_str(&format!(
            "| `{name}` | `{}` | {} |\n",
            sha1(s.text.as_bytes()),
            s.text.len()
        ));
    }
    for (name, s) in scripts {
        out.push_str(&format!(
            "\n{}\n\n```lua {name}\n{}```\n",
            where_line(name, s),
            s.text
        ));
    }
    std::fs::write(&path, out).unwrap();
}

#[test]
fn sha1_is_sha1() {
    assert_eq!(sha1(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    assert_eq!(sha1(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
    let long = vec![b'a'; 1000];
    assert_eq!(sha1(&long), "291e9a6c66994949b57ba5e650361e98fc36b1ba");
}

#[test]
fn every_script_is_found() {
    let scripts = scripts();
    for name in [
        "ACQUIRE",
        "ENQUEUE",
        "CANCEL",
        "RELEASE",
        "RELEASE_QUEUED",
        "FENCE",
        "FLOOR",
        "FORCE_RELEASE",
        "EXTEND",
        "INSPECT",
        "SEM_ACQUIRE",
        "SEM_RELEASE",
        "SEM_EXTEND",
        "SEM_FENCE",
        "SEM_CANCEL",
        "SEM_INSPECT",
    ] {
        assert!(
            scripts.contains_key(name),
            "{name} was not found in the source"
        );
    }
}

#[test]
fn the_document_shows_every_script_as_sent() {
    let scripts = scripts();
    dump(&scripts);
    let doc = document();
    let shown = blocks(&doc);
    let shas = documented_shas(&doc);
    let lines: Vec<&str> = doc.lines().map(str::trim_end).collect();
    let mut wrong = Vec::new();
    for (name, script) in &scripts {
        let sha = sha1(script.text.as_bytes());
        match shown.get(name) {
            None => wrong.push(format!("{name}: no ```lua {name} block in the document")),
            Some(text) if *text != script.text => wrong.push(format!(
                "{name}: the document's block differs from the script (SHA1 {sha}); it is now:\n{}",
                script.text
            )),
            Some(_) => {}
        }
        let said = where_line(name, script);
        if !lines.contains(&said.as_str()) {
            wrong.push(format!(
                "{name}: the document does not say where the script is (the line {said})"
            ));
        }
        match shas.get(name) {
            Some(s) if *s == sha => {}
            other => wrong.push(format!(
                "{name}: the document gives SHA1 {other:?}, the script's is {sha}"
            )),
        }
    }
    for name in shown.keys().chain(shas.keys()) {
        if !scripts.contains_key(name) {
            wrong.push(format!(
                "{name}: the document names a script the source does not have"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/PROTOCOL.md is out of date (PROTOCOL_DOC_DUMP=FILE writes what it should show):\n\n{}",
        wrong.join("\n\n")
    );
}
