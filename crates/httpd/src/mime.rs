//! `Content-Type` by file extension (case-insensitive); text types say UTF-8.

const TYPES: &[(&str, &str)] = &[
    ("html", "text/html; charset=utf-8"),
    ("htm", "text/html; charset=utf-8"),
    ("css", "text/css; charset=utf-8"),
    ("js", "text/javascript; charset=utf-8"),
    ("mjs", "text/javascript; charset=utf-8"),
    ("json", "application/json"),
    ("txt", "text/plain; charset=utf-8"),
    ("md", "text/markdown; charset=utf-8"),
    ("csv", "text/csv; charset=utf-8"),
    ("xml", "application/xml"),
    ("svg", "image/svg+xml"),
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
    ("avif", "image/avif"),
    ("ico", "image/x-icon"),
    ("pdf", "application/pdf"),
    ("wasm", "application/wasm"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("ttf", "font/ttf"),
    ("otf", "font/otf"),
    ("mp4", "video/mp4"),
    ("webm", "video/webm"),
    ("mp3", "audio/mpeg"),
    ("ogg", "audio/ogg"),
    ("wav", "audio/wav"),
    ("zip", "application/zip"),
    ("gz", "application/gzip"),
    ("tar", "application/x-tar"),
];

/// For files without a known extension.
pub(crate) const DEFAULT_TYPE: &str = "application/octet-stream";

/// The media type of a file named `path`.
pub(crate) fn content_type(path: &str) -> &'static str {
    let name = path.rsplit('/').next().unwrap_or(path);
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return DEFAULT_TYPE;
    };
    if stem.is_empty() {
        // `.bashrc`: a hidden file with no extension.
        return DEFAULT_TYPE;
    }
    TYPES
        .iter()
        .find(|(e, _)| e.eq_ignore_ascii_case(ext))
        .map_or(DEFAULT_TYPE, |(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_by_extension() {
        assert_eq!(content_type("/index.html"), "text/html; charset=utf-8");
        assert_eq!(content_type("/a/b/STYLE.CSS"), "text/css; charset=utf-8");
        assert_eq!(content_type("/logo.png"), "image/png");
        assert_eq!(content_type("/x.tar.gz"), "application/gzip");
        assert_eq!(content_type("/README"), DEFAULT_TYPE);
        assert_eq!(content_type("/.hidden"), DEFAULT_TYPE);
        assert_eq!(content_type("/dir.d/file"), DEFAULT_TYPE);
        assert_eq!(content_type("/x.unknown"), DEFAULT_TYPE);
    }
}
