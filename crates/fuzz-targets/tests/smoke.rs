//! The fuzz targets on the stable toolchain, bounded, inside `cargo test`: each runs
//! every input in `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` (past
//! crashes), then seeded random mutations of them (bit flips, byte changes, inserts,
//! deletes, splices) until a count or about three seconds run out. The mutations are
//! the same on every run. A crash prints the input's bytes and where it was saved.

use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusty_fuzz_targets::{seeds, Target, TARGETS};
use rusty_stack::internals::Rng;

/// Mutated inputs per target, at most.
const MUTATIONS: usize = 50_000;
/// Wall time per target for the mutations, at most.
const BUDGET: Duration = Duration::from_secs(3);

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files of `dir`, sorted by name; none if it does not exist.
fn inputs(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    // Inputs libFuzzer added while running locally (named by their SHA-1) are not part
    // of the committed corpus.
    let grown = |p: &PathBuf| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.len() == 40 && n.bytes().all(|c| c.is_ascii_hexdigit()))
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| !grown(p))
        .collect();
    files.sort();
    files
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| {
            let data = std::fs::read(&p).expect("readable corpus file");
            (p, data)
        })
        .collect()
}

/// Run `target` on `data`; on a panic, save the input and say where before failing.
fn run(name: &str, target: Target, data: &[u8], what: &str) {
    if let Err(e) = panic::catch_unwind(AssertUnwindSafe(|| target(data))) {
        let path = std::env::temp_dir().join(format!("rusty-fuzz-{name}-crash"));
        let _ = std::fs::write(&path, data);
        eprintln!(
            "{name} panicked on {what}, saved to {} (replay: cargo fuzz run {name} {}): {data:02x?}",
            path.display(),
            path.display()
        );
        panic::resume_unwind(e);
    }
}

/// Uniform in `0..n` (0 when `n` is 0).
fn pick(rng: &mut Rng, n: usize) -> usize {
    rng.below(n as u64) as usize
}

fn mutate(rng: &mut Rng, base: &[u8], other: &[u8]) -> Vec<u8> {
    const INTERESTING: [u8; 6] = [0, 1, 0x7f, 0x80, 0xfe, 0xff];
    let mut d = base.to_vec();
    for _ in 0..1 + pick(rng, 4) {
        match pick(rng, 7) {
            0 if !d.is_empty() => {
                let i = pick(rng, d.len());
                d[i] ^= 1 << pick(rng, 8);
            }
            1 if !d.is_empty() => {
                let i = pick(rng, d.len());
                d[i] = rng.next_u64() as u8;
            }
            2 if !d.is_empty() => {
                let i = pick(rng, d.len());
                d[i] = INTERESTING[pick(rng, INTERESTING.len())];
            }
            3 => {
                let i = pick(rng, d.len() + 1);
                let n = 1 + pick(rng, 8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                d.splice(i..i, bytes);
            }
            4 if !d.is_empty() => {
                let i = pick(rng, d.len());
                let n = 1 + pick(rng, (d.len() - i).min(16));
                d.drain(i..i + n);
            }
            5 if !other.is_empty() => {
                // Splice: our head, the other input's tail.
                let cut = pick(rng, d.len() + 1);
                let from = pick(rng, other.len());
                d.truncate(cut);
                d.extend_from_slice(&other[from..]);
            }
            _ if !d.is_empty() => {
                let i = pick(rng, d.len());
                d.truncate(i);
            }
            _ => d.push(rng.next_u64() as u8),
        }
    }
    d
}

fn smoke(name: &str) {
    let target = TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, t)| t)
        .expect("a target of that name");
    let dir = fuzz_dir();
    let corpus = inputs(&dir.join("corpus").join(name));
    assert!(!corpus.is_empty(), "no seed corpus for {name}");
    for (path, data) in corpus
        .iter()
        .chain(&inputs(&dir.join("regressions").join(name)))
    {
        run(name, target, data, &path.display().to_string());
    }
    let mut rng =
        Rng::new(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64 ^ (name.as_bytes()[0] as u64) << 8);
    let start = Instant::now();
    let mut n = 0;
    while n < MUTATIONS && start.elapsed() < BUDGET {
        let base = &corpus[pick(&mut rng, corpus.len())].1;
        let other = &corpus[pick(&mut rng, corpus.len())].1;
        let data = mutate(&mut rng, base, other);
        run(name, target, &data, &format!("mutation {n}"));
        n += 1;
    }
    eprintln!(
        "{name}: {} corpus inputs, {n} mutations in {:?}",
        corpus.len(),
        start.elapsed()
    );
}

#[test]
fn engine_frame() {
    smoke("engine_frame");
}

#[test]
fn tcp_segment() {
    smoke("tcp_segment");
}

#[test]
fn arp() {
    smoke("arp");
}

#[test]
fn http_request() {
    smoke("http_request");
}

#[test]
fn link_spec_cli() {
    smoke("link_spec_cli");
}

#[test]
fn ipv6_header() {
    smoke("ipv6_header");
}

#[test]
fn icmpv6() {
    smoke("icmpv6");
}

#[test]
fn tls_record() {
    smoke("tls_record");
}

/// The IPv6 seeds are what their names say: the ones a host accepts parse, the others
/// are refused, so the corpus starts on both sides of every rule.
#[test]
fn ipv6_seeds_lie_on_the_side_their_names_say() {
    use rusty_stack::internals::{icmpv6, ipv6};
    let refused = ["routing-type-0", "first-fragment", "chain-of-9"];
    for seed in seeds::all().iter().filter(|s| s.target == "ipv6_header") {
        let want = !refused.contains(&seed.name.as_str());
        let parsed = ipv6::parse(&seed.data);
        assert_eq!(parsed.is_ok(), want, "{}", seed.name);
        // The ICMPv6 seeds are messages a host takes in.
        if let Some(h) = parsed.ok().filter(|h| h.protocol == icmpv6::NEXT_HEADER) {
            let icmp = &seed.data[h.upper_offset..h.upper_offset + h.upper.len()];
            let message = icmpv6::parse(icmp, h.src(), h.dst(), h.hop_limit());
            assert!(
                matches!(message, Ok(m) if !matches!(m, icmpv6::Message::Other(_))),
                "{}: {message:?}",
                seed.name
            );
        }
    }
}

/// The ICMPv6 seeds are what their names say: `bad-…` ones are Neighbor Discovery
/// that may be forged, `bad-checksum` and `truncated-…` what those say, the others
/// read, so the corpus starts on both sides of every rule. Each holds its hop limit
/// and addresses in full (flags 0).
#[test]
fn icmpv6_seeds_lie_on_the_side_their_names_say() {
    use rusty_stack::internals::icmpv6::{parse, Icmpv6Error};
    let address = |b: &[u8]| std::net::Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap());
    for seed in seeds::all().iter().filter(|s| s.target == "icmpv6") {
        let d = &seed.data;
        assert_eq!(d[0], 0, "{}: flags", seed.name);
        let read = parse(&d[34..], address(&d[2..18]), address(&d[18..34]), d[1]);
        let name = seed.name.as_str();
        let want = if name == "bad-checksum" {
            Err(Icmpv6Error::Checksum)
        } else if name.starts_with("bad-") {
            Err(Icmpv6Error::BadNeighborDiscovery)
        } else if name.starts_with("truncated") {
            Err(Icmpv6Error::Truncated)
        } else {
            assert!(read.is_ok(), "{name}: {read:?}");
            continue;
        };
        assert_eq!(read.map(|_| ()), want, "{name}");
    }
}

#[test]
fn every_target_has_a_smoke_test() {
    let names: Vec<_> = TARGETS.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "engine_frame",
            "tcp_segment",
            "arp",
            "http_request",
            "link_spec_cli",
            "ipv6_header",
            "icmpv6",
            "tls_record"
        ]
    );
}

/// Write the seed corpus ([`seeds::all`]) to `fuzz/corpus/<target>/`, replacing the
/// files of the same names.
#[test]
#[ignore = "writes fuzz/corpus; run by hand after changing an input format"]
fn write_seed_corpus() {
    for seed in seeds::all() {
        let dir = fuzz_dir().join("corpus").join(seed.target);
        std::fs::create_dir_all(&dir).expect("corpus directory");
        std::fs::write(dir.join(&seed.name), &seed.data).expect("corpus file");
    }
}
