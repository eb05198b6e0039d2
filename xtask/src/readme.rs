//! Putting a generated block into README.md between markers, leaving the rest untouched.

pub const START: &str = "<!-- bench-echo:start -->";
pub const END: &str = "<!-- bench-echo:end -->";

/// `text` with `body` between the `START` and `END` markers. Without the markers, the
/// block goes at the end of the `## Benchmarks` section (made at the end if missing).
pub fn put_block(text: &str, body: &str) -> String {
    let block = format!("{START}\n{}\n{END}", body.trim_end());
    if let (Some(s), Some(e)) = (text.find(START), text.find(END)) {
        if s < e {
            return format!("{}{block}{}", &text[..s], &text[e + END.len()..]);
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

    #[test]
    fn replaces_between_markers_only() {
        let t = format!("a\n{START}\nold\n{END}\nb\n");
        assert_eq!(
            put_block(&t, "new\n"),
            format!("a\n{START}\nnew\n{END}\nb\n")
        );
    }

    #[test]
    fn appends_to_the_benchmarks_section() {
        let t = "# X\n\n## Benchmarks\n\nsome text\n\n## Later\n\nz\n";
        assert_eq!(
            put_block(t, "new"),
            format!("# X\n\n## Benchmarks\n\nsome text\n\n{START}\nnew\n{END}\n\n## Later\n\nz\n")
        );
        let t = "# X\n\n## Benchmarks\n\nsome text\n";
        assert_eq!(
            put_block(t, "new"),
            format!("# X\n\n## Benchmarks\n\nsome text\n\n{START}\nnew\n{END}\n")
        );
    }

    #[test]
    fn makes_the_section_when_missing() {
        assert_eq!(
            put_block("# X\ntext", "new"),
            format!("# X\ntext\n\n## Benchmarks\n\n{START}\nnew\n{END}\n")
        );
    }

    #[test]
    fn is_idempotent() {
        let t = "# X\n\n## Benchmarks\n\nsome text\n";
        let once = put_block(t, "new");
        assert_eq!(put_block(&once, "new"), once);
    }
}
