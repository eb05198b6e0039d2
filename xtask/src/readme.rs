//! Putting a generated block into README.md between markers, leaving the rest untouched.

/// `text` with `body` between the `start` and `end` marker lines. Without the markers,
/// the block goes at the end of the `## Benchmarks` section (made at the end if missing).
pub(crate) fn put_block(text: &str, start: &str, end: &str, body: &str) -> String {
    let block = format!("{start}\n{}\n{end}", body.trim_end());
    if let Some(s) = text.find(start) {
        if let Some(e) = text[s..].find(end).map(|e| s + e) {
            return format!("{}{block}{}", &text[..s], &text[e + end.len()..]);
        }
    }
    let Some(section) = find_line(text, 0, |l| l.trim_end() == "## Benchmarks") else {
        let sep = if text.ends_with('\n') || text.is_empty() {
            ""
        } else {
            "\n"
        };
        return format!("{text}{sep}\n## Benchmarks\n\n{block}\n");
    };
    let after_heading = text[section..]
        .find('\n')
        .map_or(text.len(), |i| section + i + 1);
    let end = find_line(text, after_heading, |l| l.starts_with("## ")).unwrap_or(text.len());
    let head = text[..end].trim_end_matches('\n');
    let tail = &text[end..];
    if tail.is_empty() {
        format!("{head}\n\n{block}\n")
    } else {
        format!("{head}\n\n{block}\n\n{tail}")
    }
}

/// Byte offset of the first line at or after `from` (a line start) that satisfies `f`.
fn find_line(text: &str, from: usize, f: impl Fn(&str) -> bool) -> Option<usize> {
    let mut at = from;
    for line in text[from..].split_inclusive('\n') {
        if f(line.trim_end_matches('\n')) {
            return Some(at);
        }
        at += line.len();
    }
    None
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
    fn appends_to_the_benchmarks_section() {
        let t = "# X\n\n## Benchmarks\n\nsome text\n\n## Later\n\nz\n";
        assert_eq!(
            put(t, "new"),
            format!("# X\n\n## Benchmarks\n\nsome text\n\n{START}\nnew\n{END}\n\n## Later\n\nz\n")
        );
        let t = "# X\n\n## Benchmarks\n\nsome text\n";
        assert_eq!(
            put(t, "new"),
            format!("# X\n\n## Benchmarks\n\nsome text\n\n{START}\nnew\n{END}\n")
        );
    }

    #[test]
    fn makes_the_section_when_missing() {
        assert_eq!(
            put("# X\ntext", "new"),
            format!("# X\ntext\n\n## Benchmarks\n\n{START}\nnew\n{END}\n")
        );
    }

    #[test]
    fn is_idempotent() {
        let t = "# X\n\n## Benchmarks\n\nsome text\n";
        let once = put(t, "new");
        assert_eq!(put(&once, "new"), once);
    }

    #[test]
    fn keeps_other_blocks() {
        let t = format!("## Benchmarks\n\n{START}\necho\n{END}\n");
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
