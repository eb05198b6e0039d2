//! The HTTP benchmark's page set and its wrk script, generated deterministically.
//!
//! [`PAGES`] pages `0.html` … `499.html` whose sizes follow a log-normal distribution
//! (median [`MEDIAN_BYTES`], σ = [`SIGMA`], clamped to [`MIN_BYTES`]..=[`MAX_BYTES`]),
//! drawn from a fixed-seed SplitMix64 generator through Box–Muller, plus one page of
//! exactly 64 bytes, [`SMALL_PAGE`]. Contents are HTML-ish text from the same generator,
//! so every run (and every machine) serves byte-identical files.

use std::f64::consts::TAU;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::Result;

pub(crate) const PAGES: usize = 500;
pub(crate) const SMALL_PAGE: &str = "64b.html";
pub(crate) const MEDIAN_BYTES: f64 = 20_000.0;
pub(crate) const SIGMA: f64 = 1.0;
pub(crate) const MIN_BYTES: usize = 512;
pub(crate) const MAX_BYTES: usize = 300_000;
const SEED: u64 = 0x5275_7374_7948_5454; // "RustyHTT"
/// Seed of wrk's `math.random` (plus the thread's index).
pub(crate) const WRK_SEED: u64 = 20_240_601;

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast and good enough for sizes and text.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal (Box–Muller; one of the pair is enough here).
    pub(crate) fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64(); // (0, 1]: ln is finite
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (TAU * u2).cos()
    }

    /// Uniform in [0, n); 0 when `n` is 0.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.next_u64().checked_rem(n as u64).unwrap_or(0) as usize
    }
}

/// The sizes of pages `0.html` … in order.
pub(crate) fn page_sizes() -> Vec<usize> {
    let mut rng = Rng::new(SEED);
    let mu = MEDIAN_BYTES.ln();
    (0..PAGES)
        .map(|_| {
            let x = (mu + SIGMA * rng.normal()).exp();
            (x.round() as usize).clamp(MIN_BYTES, MAX_BYTES)
        })
        .collect()
}

const WORDS: &[&str] = &[
    "rusty",
    "stack",
    "packet",
    "segment",
    "window",
    "socket",
    "kernel",
    "worker",
    "queue",
    "core",
    "timer",
    "engine",
    "frame",
    "header",
    "buffer",
    "checksum",
    "handshake",
    "stream",
    "latency",
    "request",
    "response",
    "page",
    "static",
    "server",
    "client",
    "link",
    "route",
    "cache",
    "byte",
    "loop",
    "event",
    "poll",
];

/// The exact bytes of page `index`, `size` long (at least [`MIN_BYTES`]).
pub(crate) fn page_body(index: usize, size: usize) -> Vec<u8> {
    let mut rng = Rng::new(SEED ^ (index as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407));
    let head = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Page {index}</title></head>\
         <body>\n<h1>Page {index}</h1>\n"
    );
    let foot = "</body></html>\n";
    let mut out = Vec::with_capacity(size + 128);
    out.extend_from_slice(head.as_bytes());
    let body_end = size.saturating_sub(foot.len());
    while out.len() < body_end {
        out.extend_from_slice(b"<p>");
        for i in 0..8 + rng.below(40) {
            if i > 0 {
                out.push(b' ');
            }
            out.extend_from_slice(WORDS[rng.below(WORDS.len())].as_bytes());
        }
        out.extend_from_slice(b".</p>\n");
    }
    out.truncate(body_end);
    if let Some(last) = out.last_mut() {
        *last = b'\n';
    }
    out.extend_from_slice(foot.as_bytes());
    out.truncate(size);
    out
}

/// The 64-byte page.
pub(crate) fn small_page() -> Vec<u8> {
    let mut p = b"<!DOCTYPE html>\n<title>64</title>\n<p>sixty-four bytes</p>\n".to_vec();
    p.resize(63, b' ');
    p.push(b'\n');
    p
}

/// What was written.
#[derive(Debug, Clone)]
pub(crate) struct PageSet {
    pub sizes: Vec<usize>,
}

impl PageSet {
    pub(crate) fn total(&self) -> usize {
        self.sizes.iter().sum()
    }

    pub(crate) fn median(&self) -> usize {
        let mut s = self.sizes.clone();
        s.sort_unstable();
        s[s.len() / 2]
    }

    pub(crate) fn summary(&self) -> String {
        let max = self.sizes.iter().max().copied().unwrap_or(0);
        let min = self.sizes.iter().min().copied().unwrap_or(0);
        format!(
            "{} pages, median {} B, mean {} B, min {min} B, max {max} B, {} B in all, plus \
             {SMALL_PAGE} (64 B)",
            self.sizes.len(),
            self.median(),
            self.total() / self.sizes.len().max(1),
            self.total()
        )
    }
}

/// Writes the page set into `dir` (made if missing; world-readable, so that an nginx
/// worker running as nobody can serve it).
pub(crate) fn write_pages(dir: &Path) -> Result<PageSet> {
    fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let readable = |p: &Path, mode: u32| {
        fs::set_permissions(p, fs::Permissions::from_mode(mode))
            .map_err(|e| format!("chmod {}: {e}", p.display()))
    };
    readable(dir, 0o755)?;
    let sizes = page_sizes();
    let write = |name: String, bytes: &[u8]| {
        let p = dir.join(name);
        fs::write(&p, bytes).map_err(|e| format!("writing {}: {e}", p.display()))?;
        readable(&p, 0o644)
    };
    for (i, &size) in sizes.iter().enumerate() {
        write(format!("{i}.html"), &page_body(i, size))?;
    }
    write(SMALL_PAGE.to_string(), &small_page())?;
    Ok(PageSet { sizes })
}

/// A wrk script requesting `/0.html` … `/499.html` uniformly at random, with
/// `math.random` seeded by [`WRK_SEED`] plus the thread's index. The requests are
/// formatted once in `init` (with wrk's headers, `-H` included), so `request` costs a
/// table lookup.
pub(crate) fn wrk_script() -> String {
    format!(
        "-- Generated by `cargo xtask bench http`: GET /0.html .. /{last}.html uniformly at\n\
         -- random, seed {WRK_SEED} + thread index.\n\
         local pages = {PAGES}\n\
         local counter = 0\n\
         local reqs = {{}}\n\
         \n\
         function setup(thread)\n\
         \x20 thread:set(\"id\", counter)\n\
         \x20 counter = counter + 1\n\
         end\n\
         \n\
         function init(args)\n\
         \x20 math.randomseed({WRK_SEED} + (id or 0))\n\
         \x20 for i = 0, pages - 1 do\n\
         \x20   reqs[i + 1] = wrk.format(nil, \"/\" .. i .. \".html\")\n\
         \x20 end\n\
         end\n\
         \n\
         function request()\n\
         \x20 return reqs[math.random(pages)]\n\
         end\n",
        last = PAGES - 1
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_log_normal_and_fixed() {
        let sizes = page_sizes();
        assert_eq!(sizes.len(), PAGES);
        assert_eq!(sizes, page_sizes(), "deterministic");
        assert!(sizes.iter().all(|&s| (MIN_BYTES..=MAX_BYTES).contains(&s)));
        let set = PageSet {
            sizes: sizes.clone(),
        };
        let median = set.median() as f64;
        assert!(
            (16_000.0..25_000.0).contains(&median),
            "median {median} should be about {MEDIAN_BYTES}"
        );
        // The log of the sizes has standard deviation about SIGMA (clamping trims a bit).
        let logs: Vec<f64> = sizes.iter().map(|&s| (s as f64).ln()).collect();
        let mean = logs.iter().sum::<f64>() / logs.len() as f64;
        let sd = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / logs.len() as f64).sqrt();
        assert!((0.85..1.15).contains(&sd), "σ of ln(size) {sd}");
        // A real tail: some pages above 100 kB, but not all at the cap.
        assert!(sizes.iter().filter(|&&s| s > 100_000).count() >= 5);
        assert!(sizes.iter().filter(|&&s| s == MAX_BYTES).count() < 10);
    }

    #[test]
    fn normal_has_unit_moments() {
        let mut r = Rng::new(7);
        let n = 100_000;
        let xs: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.02, "mean {mean}");
        assert!((var - 1.0).abs() < 0.03, "variance {var}");
    }

    #[test]
    fn pages_have_exact_sizes_and_fixed_content() {
        for (i, size) in [(0, MIN_BYTES), (1, 20_000), (2, MAX_BYTES), (3, 777)] {
            let p = page_body(i, size);
            assert_eq!(p.len(), size);
            assert_eq!(p, page_body(i, size));
            assert!(p.starts_with(b"<!DOCTYPE html>"));
            assert!(p.ends_with(b"</body></html>\n"));
            assert!(std::str::from_utf8(&p).is_ok());
        }
        assert_ne!(page_body(1, 5000), page_body(2, 5000));
        assert_eq!(small_page().len(), 64);
    }

    #[test]
    fn writes_the_set() {
        let dir = std::env::temp_dir().join(format!("xtask-pages-test-{}", std::process::id()));
        let set = write_pages(&dir).unwrap();
        for (i, &s) in set.sizes.iter().enumerate() {
            let meta = fs::metadata(dir.join(format!("{i}.html"))).unwrap();
            assert_eq!(meta.len() as usize, s);
        }
        assert_eq!(fs::read(dir.join(SMALL_PAGE)).unwrap(), small_page());
        assert_eq!(fs::read_dir(&dir).unwrap().count(), PAGES + 1);
        fs::remove_dir_all(&dir).unwrap();
        assert!(set.summary().starts_with("500 pages, median "));
    }

    #[test]
    fn script_requests_every_page() {
        let s = wrk_script();
        assert!(s.contains("local pages = 500\n"));
        assert!(s.contains(&format!("math.randomseed({WRK_SEED} + (id or 0))")));
        assert!(s.contains("return reqs[math.random(pages)]"));
        // Balanced Lua blocks: three `function … end` plus one `for … do … end`.
        let ends = s.lines().filter(|l| l.trim() == "end").count();
        assert_eq!(ends, 4);
    }
}
