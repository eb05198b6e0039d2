use super::*;

#[test]
fn reads_proc_stat() {
    let stat = "1234 (echo (x) y) S 1 2 3 4 5 6 7 8 9 10 150 25 0 0 20 0 3 0";
    assert_eq!(parse_stat_ticks(stat), Some(175));
    assert_eq!(parse_stat_ppid(stat), Some(1));
}

#[test]
fn reads_machine_busy_time() {
    let stat = "cpu  100 5 50 1000 20 3 7 2 40 0\ncpu0 50 2 25 500 10 1 3 1 20 0\n";
    assert_eq!(parse_busy_ticks(stat), Some(100 + 5 + 50 + 3 + 7 + 2));
    assert_eq!(parse_busy_ticks("cpu  1 2 3 4\n"), Some(6));
    assert_eq!(parse_busy_ticks("intr 5\n"), None);
}

#[test]
fn finds_own_children() {
    let mut c = Command::new("sleep").arg("5").spawn().unwrap();
    let me = std::process::id() as i32;
    assert!(children_of(me).contains(&(c.id() as i32)));
    c.kill().unwrap();
    c.wait().unwrap();
}

#[test]
fn medians_and_numbers() {
    assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(vec![4.0, 1.0]), 2.5);
    assert!(median(vec![f64::NAN]).is_nan());
    assert_eq!(thousands(1_234_567.4), "1,234,567");
    assert_eq!(thousands(999.0), "999");
    assert_eq!(civil_from_days(0), (1970, 1, 1));
    assert_eq!(civil_from_days(19_723), (2024, 1, 1));
    assert_eq!(civil_from_days(11_016), (2000, 2, 29));
}

#[test]
fn no_docs_keeps_its_old_name() {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }
    use clap::Parser;
    for flag in ["--no-docs", "--no-readme"] {
        assert!(
            Cli::try_parse_from(["bench", flag])
                .unwrap()
                .run
                .host
                .no_docs
        );
    }
    assert!(!Cli::try_parse_from(["bench"]).unwrap().run.host.no_docs);
}

#[test]
fn results_go_into_the_page_between_markers() {
    let dir = std::env::temp_dir().join(format!("xtask-results-{}", std::process::id()));
    fs::create_dir_all(dir.join("docs")).unwrap();
    let page = dir.join(BENCHMARKS_PAGE);
    fs::write(
        &page,
        "# Benchmarks\n\n<!-- x:start -->\nold\n<!-- x:end -->\n\nend\n",
    )
    .unwrap();
    let path = write_results(
        &dir,
        BENCHMARKS_PAGE,
        "<!-- x:start -->",
        "<!-- x:end -->",
        "new",
    )
    .unwrap();
    assert_eq!(path, page);
    assert_eq!(
        fs::read_to_string(&page).unwrap(),
        "# Benchmarks\n\n<!-- x:start -->\nnew\n<!-- x:end -->\n\nend\n"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn quick_is_one_short_round_that_leaves_the_docs_alone() {
    let parse = |args: &[&str]| parse_flags::<RunArgs>(args).unwrap();
    let full = parse(&["x", "--duration", "7"]).effective(QUICK_DURATION);
    assert_eq!((full.load.duration, full.load.rounds), (7, 3));
    assert!(!full.host.no_docs);
    let args = ["x", "--quick", "--duration", "7", "--family", "ipv6"];
    let quick = parse(&args).effective(QUICK_DURATION);
    assert_eq!(
        (quick.load.duration, quick.load.rounds),
        (QUICK_DURATION, 1)
    );
    assert!(quick.host.no_docs);
    assert_eq!(quick.family, Families::Ipv6, "other flags stay");
}
