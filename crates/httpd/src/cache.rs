//! The served tree, read whole into memory at start and never changed afterwards: one
//! [`Cache`] behind an `Arc`, read by every worker without locks.
//!
//! Each file keeps its body as [`Bytes`] (a response sends a cheap clone or slice, never
//! a copy), its ones'-complement prefix sums (so a segment of it can be checksummed
//! without re-reading it) and the constant part of its response heads, built once here.
//!
//! Which files are served, symlinks included: see [`Cache`].

use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use bytes::Bytes;
use rusty_stack::checksum::SummedBytes;

use crate::date::format_imf_fixdate;
use crate::mime::content_type;

/// Block size of each file's prefix sums.
pub(crate) const PREFIX_SUM_BLOCK: usize = 1024;

/// One cached file.
#[non_exhaustive]
pub struct FileEntry {
    /// Normalised URL path (`/sub/page.html`).
    pub path: String,
    /// The file's contents, as read at start.
    pub body: Bytes,
    /// `body` with its ones'-complement prefix sums (in blocks of 1 KiB), what
    /// responses send.
    pub summed: SummedBytes,
    /// The `Content-Type` value, from the extension of the file's name.
    pub content_type: &'static str,
    /// Strong validator: `"<mtime hex>-<length hex>"`, quotes included.
    pub etag: String,
    /// Modification time, seconds since the Unix epoch.
    pub last_modified: u64,
    /// Header fields every 2xx/304/416 response for this file carries:
    /// `Server`, `Content-Type`, `ETag`, `Last-Modified`, `Accept-Ranges`.
    pub fields: Bytes,
    /// The complete constant part of a 200 response: status line, `fields` and
    /// `Content-Length` (a response appends `Date`, maybe `Connection`, and CRLF).
    pub head_200: Bytes,
    /// The constant part of a 304 response: status line, `Server`, `ETag`,
    /// `Last-Modified`.
    pub head_304: Bytes,
}

impl fmt::Debug for FileEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileEntry")
            .field("path", &self.path)
            .field("len", &self.body.len())
            .field("etag", &self.etag)
            .finish()
    }
}

impl FileEntry {
    /// Build the entry (and its prebuilt heads) for `body` served at `path`.
    pub fn new(path: String, body: Bytes, mtime: u64) -> FileEntry {
        let summed = SummedBytes::new(body.clone(), PREFIX_SUM_BLOCK);
        let content_type = content_type(&path);
        let etag = format!("\"{mtime:x}-{:x}\"", body.len());
        let last_modified = format_imf_fixdate(mtime);
        let fields = format!(
            "Server: rusty\r\nContent-Type: {content_type}\r\nETag: {etag}\r\n\
             Last-Modified: {last_modified}\r\nAccept-Ranges: bytes\r\n"
        );
        let head_200 = format!(
            "HTTP/1.1 200 OK\r\n{fields}Content-Length: {}\r\n",
            body.len()
        );
        let head_304 = format!(
            "HTTP/1.1 304 Not Modified\r\nServer: rusty\r\nETag: {etag}\r\n\
             Last-Modified: {last_modified}\r\n"
        );
        FileEntry {
            path,
            body,
            summed,
            content_type,
            etag,
            last_modified: mtime,
            fields: Bytes::from(fields),
            head_200: Bytes::from(head_200),
            head_304: Bytes::from(head_304),
        }
    }
}

/// What a normalised path names.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Node {
    /// A regular file, or a link to one inside the root.
    File(Arc<FileEntry>),
    /// A directory, with its `index.html` if it has one.
    Dir(Option<Arc<FileEntry>>),
}

/// Why the tree could not be loaded.
#[derive(Debug)]
#[non_exhaustive]
pub enum CacheError {
    /// The root is missing, not a directory, or unreadable.
    Root(PathBuf, io::Error),
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::Root(p, e) => write!(f, "root directory {}: {e}", p.display()),
        }
    }
}

impl std::error::Error for CacheError {}

/// The whole served tree.
///
/// Symlinks: a link to a regular file whose canonical target lies inside the canonical
/// root is served (as the file it points to); links to directories, links leading out
/// of the root, dangling links, special files and names that are not UTF-8 are skipped
/// and reported in [`Cache::skipped`]. Directories are served through their
/// `index.html`; there are no listings.
#[derive(Debug, Default)]
pub struct Cache {
    nodes: HashMap<String, Node>,
    files: usize,
    bytes: u64,
    skipped: Vec<(PathBuf, String)>,
}

fn mtime_secs(meta: &fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs())
}

impl Cache {
    /// Read every file under `root` (subdirectories included).
    pub fn load(root: &Path) -> Result<Cache, CacheError> {
        let root_err = |e| CacheError::Root(root.to_path_buf(), e);
        let canonical_root = fs::canonicalize(root).map_err(root_err)?;
        if !canonical_root.is_dir() {
            return Err(root_err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory",
            )));
        }
        // Fail on an unreadable root now rather than serve an empty site.
        fs::read_dir(&canonical_root).map_err(root_err)?;
        let mut cache = Cache::default();
        cache.nodes.insert("/".into(), Node::Dir(None));
        let mut dirs = vec![(canonical_root.clone(), String::new())];
        while let Some((dir, url)) = dirs.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) => {
                    cache.skip(&dir, format!("unreadable directory: {e}"));
                    continue;
                }
            };
            let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
            entries.sort_by_key(|e| e.file_name());
            for entry in entries {
                let fs_path = entry.path();
                let Some(name) = entry.file_name().to_str().map(String::from) else {
                    cache.skip(&fs_path, "name is not UTF-8".into());
                    continue;
                };
                let child_url = format!("{url}/{name}");
                let meta = match fs::symlink_metadata(&fs_path) {
                    Ok(m) => m,
                    Err(e) => {
                        cache.skip(&fs_path, e.to_string());
                        continue;
                    }
                };
                let meta = if meta.file_type().is_symlink() {
                    match fs::canonicalize(&fs_path) {
                        Ok(target) if !target.starts_with(&canonical_root) => {
                            cache.skip(&fs_path, "symlink leads outside the root".into());
                            continue;
                        }
                        Ok(target) => match fs::metadata(&target) {
                            Ok(m) if m.is_file() => m,
                            Ok(_) => {
                                cache.skip(&fs_path, "symlink to a non-file".into());
                                continue;
                            }
                            Err(e) => {
                                cache.skip(&fs_path, e.to_string());
                                continue;
                            }
                        },
                        Err(e) => {
                            cache.skip(&fs_path, format!("dangling symlink: {e}"));
                            continue;
                        }
                    }
                } else {
                    meta
                };
                if meta.is_dir() {
                    cache.nodes.insert(child_url.clone(), Node::Dir(None));
                    dirs.push((fs_path, child_url));
                } else if meta.is_file() {
                    match fs::read(&fs_path) {
                        Ok(data) => {
                            cache.files += 1;
                            cache.bytes += data.len() as u64;
                            let e = FileEntry::new(
                                child_url.clone(),
                                Bytes::from(data),
                                mtime_secs(&meta),
                            );
                            cache.nodes.insert(child_url, Node::File(Arc::new(e)));
                        }
                        Err(e) => cache.skip(&fs_path, format!("unreadable: {e}")),
                    }
                } else {
                    cache.skip(&fs_path, "not a regular file or directory".into());
                }
            }
        }
        // Attach each directory's index.html.
        let indexes: Vec<(String, Arc<FileEntry>)> = cache
            .nodes
            .iter()
            .filter(|(_, n)| matches!(n, Node::Dir(_)))
            .filter_map(|(dir, _)| {
                let index = if dir == "/" {
                    "/index.html".to_string()
                } else {
                    format!("{dir}/index.html")
                };
                match cache.nodes.get(&index) {
                    Some(Node::File(f)) => Some((dir.clone(), f.clone())),
                    _ => None,
                }
            })
            .collect();
        for (dir, f) in indexes {
            cache.nodes.insert(dir, Node::Dir(Some(f)));
        }
        Ok(cache)
    }

    fn skip(&mut self, path: &Path, why: String) {
        self.skipped.push((path.to_path_buf(), why));
    }

    /// What the normalised `path` names (see [`crate::path::normalise`]).
    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    /// Number of files cached.
    pub fn files(&self) -> usize {
        self.files
    }

    /// Bytes of file content cached.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Entries left out, and why.
    pub fn skipped(&self) -> &[(PathBuf, String)] {
        &self.skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("rusty-httpd-cache-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn loads_a_tree_with_indexes() {
        let d = scratch("tree");
        fs::write(d.join("index.html"), "root").unwrap();
        fs::create_dir_all(d.join("sub/deeper")).unwrap();
        fs::write(d.join("sub/index.html"), "sub").unwrap();
        fs::write(d.join("sub/deeper/a.css"), "a{}").unwrap();
        let c = Cache::load(&d).unwrap();
        assert_eq!((c.files(), c.bytes()), (3, 10));
        assert!(matches!(c.get("/"), Some(Node::Dir(Some(f))) if &f.body[..] == b"root"));
        assert!(matches!(c.get("/sub"), Some(Node::Dir(Some(f))) if &f.body[..] == b"sub"));
        assert!(matches!(c.get("/sub/deeper"), Some(Node::Dir(None))));
        match c.get("/sub/deeper/a.css") {
            Some(Node::File(f)) => {
                assert_eq!(f.content_type, "text/css; charset=utf-8");
                let head = std::str::from_utf8(&f.head_200).unwrap();
                assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
                assert!(head.contains("Content-Length: 3\r\n"), "{head}");
                assert!(head.contains(&format!("ETag: {}\r\n", f.etag)), "{head}");
                assert_eq!(f.summed.sums().len(), 3);
            }
            other => panic!("{other:?}"),
        }
        assert!(c.get("/missing").is_none());
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn symlinks_stay_inside_the_root() {
        let d = scratch("links");
        let outside = scratch("outside");
        fs::write(outside.join("secret"), "no").unwrap();
        fs::write(d.join("real.txt"), "yes").unwrap();
        fs::create_dir(d.join("dir")).unwrap();
        std::os::unix::fs::symlink(d.join("real.txt"), d.join("inside.txt")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), d.join("escape")).unwrap();
        std::os::unix::fs::symlink(&outside, d.join("outdir")).unwrap();
        std::os::unix::fs::symlink(&d, d.join("dir/loop")).unwrap();
        std::os::unix::fs::symlink(d.join("nowhere"), d.join("dangling")).unwrap();
        let c = Cache::load(&d).unwrap();
        assert!(matches!(c.get("/inside.txt"), Some(Node::File(f)) if &f.body[..] == b"yes"));
        for p in ["/escape", "/outdir", "/dir/loop", "/dangling"] {
            assert!(c.get(p).is_none(), "{p}");
        }
        assert_eq!(c.skipped().len(), 4, "{:?}", c.skipped());
        fs::remove_dir_all(&d).unwrap();
        fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn a_missing_root_is_an_error() {
        let err = Cache::load(Path::new("/nonexistent/rusty-httpd-root")).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/rusty-httpd-root"),
            "{err}"
        );
        let d = scratch("file-root");
        fs::write(d.join("f"), "x").unwrap();
        assert!(Cache::load(&d.join("f")).is_err());
        fs::remove_dir_all(&d).unwrap();
    }
}
