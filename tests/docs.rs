//! The documents: every relative link of the Markdown files resolves to a
//! file or directory inside the repository (and its `#anchor` to a heading
//! of the target), README.md stays a front page of at most 250 lines, and
//! no file of the repository points at a place outside it. No server, no
//! network: links to `http(s)://` and `mailto:` are allowed and not fetched.
//!
//! The files are those git knows of, run from the crate's root: tracked
//! ones, and new ones that are not ignored (so that a document is checked
//! before it is committed); nothing under `target/` or `node_modules/`.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;

const README_MAX_LINES: usize = 250;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Whether a repository path is left out of every check.
fn skipped(path: &str) -> bool {
    path.split('/')
        .any(|c| c == "target" || c == "node_modules")
}

/// The files git knows of (tracked, or new and not ignored) that exist,
/// as paths from the root with `/`.
fn repo_files() -> BTreeSet<String> {
    let out = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(root())
        .output()
        .expect("running git ls-files (the test needs git and the repository)");
    assert!(
        out.status.success(),
        "git ls-files failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("git ls-files gave a path that is not UTF-8")
        .split('\0')
        .filter(|p| !p.is_empty() && !skipped(p))
        // A tracked file deleted in the work tree is on its way out.
        .filter(|p| root().join(p).is_file())
        .map(str::to_owned)
        .collect()
}

fn is_markdown(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".md") || lower.ends_with(".markdown")
}

/// The repository as the link check sees it: its files, and the text of
/// its Markdown files.
struct Repo {
    files: BTreeSet<String>,
    docs: HashMap<String, String>,
}

impl Repo {
    fn load() -> Repo {
        let files = repo_files();
        let docs = files
            .iter()
            .filter(|p| is_markdown(p))
            .map(|p| {
                let text = std::fs::read_to_string(root().join(p))
                    .unwrap_or_else(|e| panic!("{p}: cannot read it: {e}"));
                (p.clone(), text)
            })
            .collect();
        Repo { files, docs }
    }

    fn is_dir(&self, path: &str) -> bool {
        path.is_empty() || {
            let prefix = format!("{path}/");
            self.files
                .range(prefix.clone()..)
                .next()
                .is_some_and(|f| f.starts_with(&prefix))
        }
    }

    /// Every problem of every Markdown file's links, one line each:
    /// `file:line: [..](dest): what is wrong`.
    fn link_problems(&self) -> Vec<String> {
        let anchors: HashMap<&str, BTreeSet<String>> = self
            .docs
            .iter()
            .map(|(p, text)| (p.as_str(), anchors(text)))
            .collect();
        let mut problems = Vec::new();
        let mut docs: Vec<_> = self.docs.iter().collect();
        docs.sort();
        for (file, text) in docs {
            for link in links(text) {
                if let Err(why) = self.check(file, &link.dest, &anchors) {
                    problems.push(format!("{file}:{}: link ({}): {why}", link.line, link.dest));
                }
            }
        }
        problems
    }

    fn check(
        &self,
        file: &str,
        dest: &str,
        anchors: &HashMap<&str, BTreeSet<String>>,
    ) -> Result<(), String> {
        let lower = dest.to_ascii_lowercase();
        if lower.starts_with("http://")
            || lower.starts_with("https://")
            || lower.starts_with("mailto:")
        {
            return Ok(());
        }
        if let Some(scheme) = scheme(dest) {
            return Err(format!(
                "a {scheme}: link; only http(s):// and mailto: may leave the repository"
            ));
        }
        let (path, anchor) = match dest.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (dest, None),
        };
        let path = path.split('?').next().unwrap_or("");
        let path = percent_decode(path);
        if path.is_empty() && anchor.is_none_or(str::is_empty) {
            return Err("an empty link".into());
        }
        if path.starts_with('/') {
            return Err("an absolute path: give a path relative to this file".into());
        }
        let target = if path.is_empty() {
            file.to_owned()
        } else {
            resolve(file, &path)?
        };
        let is_file = self.files.contains(&target);
        if !is_file && !self.is_dir(&target) {
            return Err(if root().join(&target).exists() {
                format!("{target} exists here but git ignores it: it is not in the repository")
            } else {
                format!("{target}: no such file or directory in the repository")
            });
        }
        let Some(anchor) = anchor.filter(|a| !a.is_empty()) else {
            return Ok(());
        };
        let anchor = percent_decode(anchor);
        if !is_file {
            return Err(format!("#{anchor} points into {target}/, a directory"));
        }
        match anchors.get(target.as_str()) {
            Some(known) if known.contains(&anchor) => Ok(()),
            Some(known) => Err(format!(
                "{target} has no heading whose anchor is #{anchor}{}",
                nearest(&anchor, known)
                    .map(|n| format!(" (did you mean #{n}?)"))
                    .unwrap_or_default()
            )),
            // GitHub's line anchors into source files.
            None if is_line_anchor(&anchor) => Ok(()),
            None => Err(format!(
                "#{anchor} points into {target}, which is not Markdown"
            )),
        }
    }
}

/// `L12` or `L12-L20`.
fn is_line_anchor(a: &str) -> bool {
    let line = |s: &str| {
        s.strip_prefix('L')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    match a.split_once('-') {
        Some((from, to)) => line(from) && line(to),
        None => line(a),
    }
}

/// The URL scheme of `dest`, if it has one (`ftp`, `file`, …).
fn scheme(dest: &str) -> Option<&str> {
    let (scheme, _) = dest.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        && !scheme.contains('/'))
    .then_some(scheme)
}

/// The repository path `rel` names, seen from `file`; an error when it
/// leaves the repository.
fn resolve(file: &str, rel: &str) -> Result<String, String> {
    let mut parts: Vec<&str> = file.split('/').collect();
    parts.pop(); // the file's own name
    for c in rel.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err("leaves the repository: a link must stay inside it".into());
                }
            }
            c => parts.push(c),
        }
    }
    Ok(parts.join("/"))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The known anchor closest to `wanted`, for the failure message.
fn nearest<'a>(wanted: &str, known: &'a BTreeSet<String>) -> Option<&'a str> {
    known
        .iter()
        .filter(|k| k.contains(wanted) || wanted.contains(k.as_str()))
        .min_by_key(|k| k.len().abs_diff(wanted.len()))
        .map(String::as_str)
}

/// Where a fenced code block opens: its character and length.
fn fence_open(line: &str) -> Option<(char, usize)> {
    let t = line.trim_start();
    let c = t.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = t.chars().take_while(|x| *x == c).count();
    // A backtick fence's info string may not hold a backtick.
    (n >= 3 && !(c == '`' && t[n..].contains('`'))).then_some((c, n))
}

fn fence_closes(line: &str, (c, n): (char, usize)) -> bool {
    let t = line.trim();
    t.chars().count() >= n && t.chars().all(|x| x == c)
}

/// Each line of `text` with whether it lies in a fenced code block (the
/// fences themselves count as inside).
fn lines_outside_fences(text: &str) -> Vec<(usize, &str, bool)> {
    let mut fence = None;
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let inside = match fence {
                Some(f) => {
                    if fence_closes(line, f) {
                        fence = None;
                    }
                    true
                }
                None => {
                    fence = fence_open(line);
                    fence.is_some()
                }
            };
            (i + 1, line, inside)
        })
        .collect()
}

/// `line` with its code spans blanked out (a link inside backticks is
/// code, not a link).
fn without_code_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let n = chars[i..].iter().take_while(|c| **c == '`').count();
        // The closing run: exactly n backticks.
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = chars[j..].iter().take_while(|c| **c == '`').count();
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                out.extend(std::iter::repeat_n(' ', j + n - i));
                i = j + n;
            }
            None => {
                out.extend(&chars[i..i + n]);
                i += n;
            }
        }
    }
    out
}

struct Link {
    line: usize,
    dest: String,
}

/// The destination that starts `s` (just after `](`), up to its closing
/// parenthesis or its title.
fn inline_dest(s: &str) -> String {
    let s = s.trim_start();
    if let Some(rest) = s.strip_prefix('<') {
        return rest.split('>').next().unwrap_or("").to_owned();
    }
    let mut depth = 0usize;
    let mut end = s.len();
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => {
                end = i;
                break;
            }
            ')' => depth -= 1,
            c if c.is_whitespace() => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    s[..end].to_owned()
}

/// Every inline link and image (`[text](dest)`, `![alt](dest)`) and every
/// reference definition (`[label]: dest`) outside fenced code blocks.
fn links(text: &str) -> Vec<Link> {
    let mut out = Vec::new();
    for (n, line, inside) in lines_outside_fences(text) {
        if inside {
            continue;
        }
        let line = without_code_spans(line);
        let t = line.trim_start();
        if line.len() - t.len() <= 3 && t.starts_with('[') && !t.starts_with("[^") {
            // `[label]: dest`: the label's `]` is the first one.
            if let Some(close) = t.find("]:").filter(|c| t.find(']') == Some(*c)) {
                let dest = t[close + 2..].split_whitespace().next().unwrap_or("");
                let dest = dest.trim_start_matches('<').trim_end_matches('>');
                out.push(Link {
                    line: n,
                    dest: dest.to_owned(),
                });
                continue;
            }
        }
        let mut from = 0;
        while let Some(at) = line[from..].find("](") {
            let start = from + at + 2;
            out.push(Link {
                line: n,
                dest: inline_dest(&line[start..]),
            });
            from = start;
        }
    }
    out
}

/// A heading's text as GitHub renders it, for its anchor: links keep
/// their text, images their alt text.
fn rendered(heading: &str) -> String {
    let mut out = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let (before, after) = rest.split_at(open);
        out.push_str(before.strip_suffix('!').unwrap_or(before));
        match after.find("](") {
            Some(mid) if !after[1..mid].contains('[') => {
                let text = &after[1..mid];
                let tail = &after[mid + 2..];
                let close = tail.find(')').map_or(tail.len(), |c| c + 1);
                out.push_str(text);
                rest = &tail[close..];
            }
            _ => {
                out.push('[');
                rest = &after[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped except
/// `-` and `_`, spaces turned into `-`.
fn slug(heading: &str) -> String {
    rendered(heading)
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// An ATX heading's text (`## Text ##`), if `line` is one.
fn atx_heading(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if line.len() - t.len() > 3 {
        return None;
    }
    let level = t.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &t[level..];
    if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
        return None;
    }
    let rest = rest.trim();
    // A closing sequence of #s, after a space, is not part of the text.
    let body = rest.trim_end_matches('#');
    Some(if body.is_empty() || body.ends_with(' ') {
        body.trim_end()
    } else {
        rest
    })
}

/// The paragraph line a setext underline (`===`, `---`) turns into a
/// heading, if `prev` can be one.
fn setext_text(prev: &str, underline: &str) -> bool {
    let u = underline.trim();
    let p = prev.trim_start();
    !u.is_empty()
        && underline.len() - underline.trim_start().len() <= 3
        && (u.chars().all(|c| c == '=') || u.chars().all(|c| c == '-'))
        && !p.is_empty()
        && prev.len() - p.len() <= 3
        && atx_heading(prev).is_none()
        && !p.starts_with(['|', '>', '-', '*', '+', '<'])
        && !p
            .split_once(". ")
            .is_some_and(|(n, _)| n.bytes().all(|b| b.is_ascii_digit()))
}

/// The anchors of a Markdown file: its headings' (outside fenced code,
/// duplicates numbered `-1`, `-2`, … as GitHub does), and the `id` and
/// `name` of its HTML anchors.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    let mut add = |s: String, out: &mut BTreeSet<String>| {
        let n = seen.entry(s.clone()).or_insert(0);
        out.insert(if *n == 0 {
            s.clone()
        } else {
            format!("{s}-{n}")
        });
        *n += 1;
    };
    let lines = lines_outside_fences(text);
    for (i, &(_, line, inside)) in lines.iter().enumerate() {
        if inside {
            continue;
        }
        if let Some(h) = atx_heading(line) {
            add(slug(h), &mut out);
        } else if i > 0 && !lines[i - 1].2 && setext_text(lines[i - 1].1, line) {
            add(slug(lines[i - 1].1), &mut out);
        }
        for attr in [" id=\"", " name=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(attr) {
                rest = &rest[at + attr.len()..];
                if let Some(end) = rest.find('"') {
                    out.insert(rest[..end].to_owned());
                }
            }
        }
    }
    out
}

#[test]
fn every_relative_link_between_documents_resolves_inside_the_repository() {
    let repo = Repo::load();
    assert!(
        repo.docs.contains_key("README.md"),
        "README.md is not among the files git lists"
    );
    let problems = repo.link_problems();
    assert!(
        problems.is_empty(),
        "{} broken link(s) in the Markdown files:\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}

#[test]
fn the_readme_is_a_front_page() {
    let text = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let lines = text.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md:{}: the README has {lines} lines, more than {README_MAX_LINES}: \
         move the detail into a guide under docs/ and link it",
        README_MAX_LINES + 1
    );
}

#[test]
fn no_file_points_outside_the_repository() {
    // Built from pieces, so that this file does not name them itself.
    let needles = [
        concat!("shared", "/DESIGN", ".md"),
        concat!("..", "/shared", "/"),
        concat!("/wo", "rk/"),
    ];
    let this_file = file!().replace('\\', "/");
    let mut problems = Vec::new();
    for path in repo_files() {
        if path == this_file || path == "Cargo.lock" {
            continue;
        }
        let bytes = std::fs::read(root().join(&path))
            .unwrap_or_else(|e| panic!("{path}: cannot read it: {e}"));
        // Binary files, as git tells them: a NUL among the first 8000 bytes.
        if bytes[..bytes.len().min(8000)].contains(&0) {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        for (n, line) in text.lines().enumerate() {
            for needle in needles {
                if line.contains(needle) {
                    problems.push(format!(
                        "{path}:{}: names {needle:?}, outside the repository: {}",
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "files point outside the repository:\n  {}",
        problems.join("\n  ")
    );
}

/// The checker itself, on a repository made up here: each kind of broken
/// link is found, and what is fine passes.
#[test]
fn the_link_check_finds_each_kind_of_broken_link() {
    let doc = |p: &str, text: &str| (p.to_owned(), text.to_owned());
    let docs: HashMap<String, String> = [
        doc(
            "README.md",
            "# Title\n\
             \n\
             [guide](docs/guide.md) [anchor](docs/guide.md#the-api-rust) \
             [second](docs/guide.md#setup-1) [self](#title) [dir](docs/) \
             [up](docs/../README.md) [web](https://example.org/x) [mail](mailto:a@b.c)\n\
             ![img](docs/pic.png) [line](src/lib.rs#L10-L12)\n\
             `[code](nowhere.md)` and [spaced](<docs/a guide.md>)\n\
             \n\
             ```md\n\
             [in a fence](nowhere.md)\n\
             # Not a heading\n\
             ```\n\
             [ref]: docs/guide.md#setup\n\
             [missing](docs/missing.md)\n\
             [no anchor](docs/guide.md#nope)\n\
             [outside](../elsewhere/README.md)\n\
             [absolute](/etc/passwd)\n\
             [fenced heading](#not-a-heading)\n\
             [bad ref]: docs/gone.md\n\
             [ftp](ftp://example.org/x)\n\
             [into source](src/lib.rs#main)\n",
        ),
        doc(
            "docs/guide.md",
            "# Guide\n\n## The API: `Rust`!\n\n## Setup\n\n## Setup\n\n[back](../README.md#title)\n",
        ),
        doc("docs/a guide.md", "Setext heading\n==============\n"),
    ]
    .into_iter()
    .collect();
    let files = [
        "README.md",
        "docs/guide.md",
        "docs/a guide.md",
        "docs/pic.png",
        "src/lib.rs",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    let repo = Repo { files, docs };
    let problems = repo.link_problems();
    let found = |line: usize, dest: &str| {
        problems
            .iter()
            .any(|p| p.starts_with(&format!("README.md:{line}: link ({dest}): ")))
    };
    for (line, dest) in [
        (12, "docs/missing.md"),
        (13, "docs/guide.md#nope"),
        (14, "../elsewhere/README.md"),
        (15, "/etc/passwd"),
        (16, "#not-a-heading"),
        (17, "docs/gone.md"),
        (18, "ftp://example.org/x"),
        (19, "src/lib.rs#main"),
    ] {
        assert!(
            found(line, dest),
            "{dest} (line {line}) not reported: {problems:#?}"
        );
    }
    assert_eq!(problems.len(), 8, "{problems:#?}");
    assert_eq!(
        anchors("# A\n\n## A\n\n## A\n\n### Semaphores, locks & more (v2)\n"),
        ["a", "a-1", "a-2", "semaphores-locks--more-v2"]
            .into_iter()
            .map(str::to_owned)
            .collect()
    );
}
