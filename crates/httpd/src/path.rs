//! From a request target to a path in the cache: split off the query, percent-decode
//! (RFC 3986 §2.1) and normalise (§6.2.2.3) so no target can name anything outside the
//! served root.
//!
//! Decisions (see the crate docs):
//! - `..` that would climb above the root, a malformed `%` escape, a NUL (raw or `%00`)
//!   or a control character: **400**.
//! - An encoded slash (`%2F`) stays part of one segment: no file name holds a `/`, so
//!   such a target names nothing and gets **404**; it can never be used to sneak a
//!   `..` past the normaliser.
//! - Empty segments (`//`) and `.` collapse; `..` inside the root resolves as usual.
//! - A decoded path that is not UTF-8 names nothing we cache: **404**.

/// Why a target cannot be mapped to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathError {
    /// Malformed: bad escape, NUL/control byte, not origin- or absolute-form, or a
    /// `..` climbing above the root (400).
    BadRequest,
    /// Well-formed but it cannot name a cached file (404).
    NotFound,
}

/// A request target mapped into the root.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Target<'a> {
    /// The query, without `?` (kept for redirects).
    pub query: Option<&'a str>,
    /// The path ended with `/` (names a directory).
    pub trailing_slash: bool,
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Percent-decode `s` into `out` (appending). NUL and other control bytes, raw or
/// decoded, and malformed escapes are errors.
pub fn percent_decode(s: &[u8], out: &mut Vec<u8>) -> Result<(), PathError> {
    let mut i = 0;
    while i < s.len() {
        let c = match s[i] {
            b'%' => {
                let (h, l) = match (s.get(i + 1), s.get(i + 2)) {
                    (Some(&h), Some(&l)) => (hex(h), hex(l)),
                    _ => return Err(PathError::BadRequest),
                };
                i += 3;
                match (h, l) {
                    (Some(h), Some(l)) => h << 4 | l,
                    _ => return Err(PathError::BadRequest),
                }
            }
            c => {
                i += 1;
                c
            }
        };
        if c < 0x20 || c == 0x7f {
            return Err(PathError::BadRequest);
        }
        out.push(c);
    }
    Ok(())
}

/// Strip an absolute-form target (`http://host/path`, RFC 9112 §3.2.2) down to its
/// path; origin-form targets pass through.
fn origin_form(target: &str) -> Result<&str, PathError> {
    if target.starts_with('/') {
        return Ok(target);
    }
    // On bytes: the target may hold UTF-8 whose characters straddle the scheme's end,
    // where a `str` cannot be cut. A match is ASCII, so the cuts below fall on boundaries.
    let lower = |p: &str| {
        let t = target.as_bytes();
        t.len() >= p.len() && t[..p.len()].eq_ignore_ascii_case(p.as_bytes())
    };
    let rest = if lower("http://") {
        &target[7..]
    } else if lower("https://") {
        &target[8..]
    } else {
        return Err(PathError::BadRequest);
    };
    match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => Ok(&rest[i..]),
        // `http://host` or `http://host?q`: the path is `/`.
        Some(_) | None => Ok("/"),
    }
}

/// Map `target` to a normalised absolute path in `out` (cleared first): starts with
/// `/`, no trailing slash except for the root itself, no empty, `.` or `..` segments.
/// `scratch` is reused for decoding. Allocation-free once the buffers have grown.
pub fn normalise<'a>(
    target: &'a str,
    out: &mut String,
    scratch: &mut Vec<u8>,
) -> Result<Target<'a>, PathError> {
    let target = origin_form(target)?;
    let target = target.split('#').next().unwrap_or("");
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    if path.is_empty() {
        return Err(PathError::BadRequest);
    }
    out.clear();
    let mut not_found = false;
    // Raw segments are split on raw `/` only, so an encoded `%2F` stays inside its
    // segment; each is decoded on its own, then `.`/`..` are resolved.
    for raw in path.split('/') {
        scratch.clear();
        percent_decode(raw.as_bytes(), scratch)?;
        match scratch.as_slice() {
            b"" | b"." => {}
            b".." => {
                // Pop the last segment; there is none at the root: refuse.
                match out.rfind('/') {
                    Some(i) if !out.is_empty() => out.truncate(i),
                    _ => return Err(PathError::BadRequest),
                }
            }
            seg => {
                if seg.contains(&b'/') {
                    not_found = true;
                }
                match std::str::from_utf8(seg) {
                    Ok(s) => {
                        out.push('/');
                        out.push_str(s);
                    }
                    Err(_) => not_found = true,
                }
            }
        }
    }
    if not_found {
        return Err(PathError::NotFound);
    }
    if out.is_empty() {
        out.push('/');
    }
    let last = path.rsplit('/').next().unwrap_or("");
    // `/dir/` and `/dir/.` and `/dir/..` all name directories.
    let trailing_slash = out == "/" || last.is_empty() || last == "." || last == "..";
    Ok(Target {
        query,
        trailing_slash,
    })
}

/// Percent-encode a normalised path for a `Location` header: everything but
/// unreserved characters, sub-delims, `:`, `@` and `/` (RFC 3986 §3.3 `pchar`).
pub fn percent_encode_path(path: &str, out: &mut Vec<u8>) {
    for &c in path.as_bytes() {
        let keep = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
                    | b'@'
                    | b'/'
            );
        if keep {
            out.push(c);
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.extend_from_slice(&[b'%', HEX[usize::from(c >> 4)], HEX[usize::from(c & 15)]]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(t: &str) -> Result<(String, bool, Option<String>), PathError> {
        let mut out = String::new();
        let mut scratch = Vec::new();
        let r = normalise(t, &mut out, &mut scratch)?;
        Ok((out, r.trailing_slash, r.query.map(String::from)))
    }

    fn path(t: &str) -> Result<String, PathError> {
        norm(t).map(|(p, _, _)| p)
    }

    #[test]
    fn percent_decoding() {
        let mut out = Vec::new();
        percent_decode(b"a%20b%2fc%C3%A9", &mut out).unwrap();
        assert_eq!(out, "a b/cé".as_bytes());
        for bad in [
            &b"%"[..],
            b"%2",
            b"%zz",
            b"%0g",
            b"a%00b",
            b"a\0b",
            b"%0a",
            b"%7F",
        ] {
            assert_eq!(
                percent_decode(bad, &mut Vec::new()),
                Err(PathError::BadRequest),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn normalises_paths() {
        assert_eq!(norm("/").unwrap(), ("/".into(), true, None));
        assert_eq!(
            norm("/a/b.html?x=1").unwrap(),
            ("/a/b.html".into(), false, Some("x=1".into()))
        );
        assert_eq!(norm("/a/").unwrap(), ("/a".into(), true, None));
        assert_eq!(path("//a///b/./c").unwrap(), "/a/b/c");
        assert_eq!(path("/a/../b").unwrap(), "/b");
        assert_eq!(norm("/a/b/..").unwrap(), ("/a".into(), true, None));
        assert_eq!(path("/a/%2e%2e/b").unwrap(), "/b");
        assert_eq!(path("/%7Euser/x%20y").unwrap(), "/~user/x y");
        assert_eq!(path("/a#frag").unwrap(), "/a");
        assert_eq!(path("http://example.com/x/y?q").unwrap(), "/x/y");
        assert_eq!(path("HTTP://example.com").unwrap(), "/");
    }

    #[test]
    fn nothing_escapes_the_root() {
        for t in [
            "/..",
            "/../etc/passwd",
            "/a/../../etc/passwd",
            "/%2e%2e/etc/passwd",
            "/%2E%2E/%2E%2E/etc/passwd",
            "/a/%2e%2e/%2e%2e/x",
            "/.%2e/x",
        ] {
            assert_eq!(path(t), Err(PathError::BadRequest), "{t}");
        }
        // An encoded slash never splits a segment, so `..%2f` is one odd name.
        assert_eq!(path("/..%2fetc%2fpasswd"), Err(PathError::NotFound));
        assert_eq!(path("/a%2fb"), Err(PathError::NotFound));
        assert_eq!(path("/%2e%2e%2f%2e%2e%2fetc"), Err(PathError::NotFound));
        assert_eq!(path("/a%00"), Err(PathError::BadRequest));
        assert_eq!(path("/%ff"), Err(PathError::NotFound));
        assert_eq!(path("*"), Err(PathError::BadRequest));
        assert_eq!(path("a/b"), Err(PathError::BadRequest));
        assert_eq!(path("?x"), Err(PathError::BadRequest));
    }

    /// Found by the `http_request` fuzz target: a character across the end of where
    /// `http://` would be panicked the scheme check, which cut the `str` inside it.
    #[test]
    fn a_multibyte_character_where_the_scheme_ends_is_no_scheme() {
        assert_eq!(path("http:/\u{447}x/y"), Err(PathError::BadRequest));
        assert_eq!(path("https:/\u{447}"), Err(PathError::BadRequest));
        assert_eq!(
            path("\u{447}\u{447}\u{447}\u{447}"),
            Err(PathError::BadRequest)
        );
        assert_eq!(path("http://\u{447}/\u{447}").unwrap(), "/\u{447}");
    }

    #[test]
    fn encodes_locations() {
        let mut out = Vec::new();
        percent_encode_path("/a b/é?#%/", &mut out);
        assert_eq!(out, b"/a%20b/%C3%A9%3F%23%25/");
    }
}
