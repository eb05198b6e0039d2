//! Putting a generated block of results into a Markdown page between marker lines,
//! leaving the rest of the page untouched.

/// `text` with `body` between the `start` and `end` marker lines. Without the markers,
/// the block goes at the end of the page.
pub(crate) fn put_block(text: &str, start: &str, end: &str, body: &str) -> String {
    let block = format!("{start}\n{}\n{end}", body.trim_end());
    if let Some(s) = text.find(start) {
        if let Some(e) = text[s..].find(end).map(|e| s + e) {
            return format!("{}{block}{}", &text[..s], &text[e + end.len()..]);
        }
    }
    let head = text.trim_end_matches('\n');
    if head.is_empty() {
        format!("{block}\n")
    } else {
        format!("{head}\n\n{block}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: &str = "<!-- bench-echo:start -->";
    const END: &str = "<!-- bench-echo:end -->";

    fn put(text: &str, body: &str) -> String {
        put_block(text, START, END, body)
    }

    #[test]
    fn replaces_between_markers_only() {
        let t = format!("a\n{START}\nold\n{END}\nb\n");
        assert_eq!(put(&t, "new\n"), format!("a\n{START}\nnew\n{END}\nb\n"));
    }

    #[test]
    fn appends_at_the_end_without_markers() {
        let t = "# X\n\n## Benchmarks\n\nsome text\n\n## Later\n\nz\n";
        assert_eq!(put(t, "new"), format!("{t}\n{START}\nnew\n{END}\n"));
        assert_eq!(
            put("# X\ntext", "new"),
            format!("# X\ntext\n\n{START}\nnew\n{END}\n")
        );
        assert_eq!(put("", "new"), format!("{START}\nnew\n{END}\n"));
    }

    #[test]
    fn is_idempotent() {
        let t = "# X\n\nsome text\n";
        let once = put(t, "new");
        assert_eq!(put(&once, "new"), once);
    }

    #[test]
    fn keeps_other_blocks() {
        let t = format!("# Benchmarks\n\n{START}\necho\n{END}\n");
        let (s2, e2) = ("<!-- bench-http:start -->", "<!-- bench-http:end -->");
        let once = put_block(&t, s2, e2, "http");
        assert_eq!(once, format!("{t}\n{s2}\nhttp\n{e2}\n"));
        assert_eq!(
            put_block(&once, s2, e2, "http 2"),
            once.replace("http\n", "http 2\n")
        );
        assert_eq!(put(&once, "echo 2"), once.replace("echo\n", "echo 2\n"));
    }
}
