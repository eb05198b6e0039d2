//! AF_INET6 sockets in unmodified programs: nginx listening on both families (one
//! dual-stack socket, and an AF_INET socket beside an IPv6-only one), and curl as a
//! client over IPv6.
//!
//! On an IPv4 link, nginx's dual-stack socket serves IPv4 clients (IPv4-mapped); the
//! other tests run on a link with an IPv6 address beside the IPv4 one
//! (`Scene::with_ipv6`).

use super::nginx::{
    nginx_rounds, nginx_setup, nginx_summary, probe_workers, wait_gone, wait_workers, Listen,
    Tally, SENDFILE_OFF, SENDFILE_ON,
};
use super::*;

/// nginx with a master and two workers listening on both families, on an IPv4 link:
/// the dual-stack socket (`listen [::]:8080 ipv6only=off`) and the AF_INET one beside
/// an IPv6-only socket (8081) serve IPv4 clients through every round; then SIGQUIT.
#[test]
fn nginx_listening_on_both_families_serves_ipv4() {
    let test = "nginx_listening_on_both_families_serves_ipv4";
    let Some(mut scene) = Scene::new(test, &["nginx", "curl", "wrk"]) else {
        return;
    };
    nginx_on_both_families(&mut scene, test, false);
}

/// The same nginx on a link with IPv6: every round over IPv6 and over IPv4, on both
/// ports, by the workers the master forked.
#[test]
fn nginx_listening_on_both_families_serves_ipv6_and_ipv4() {
    let test = "nginx_listening_on_both_families_serves_ipv6_and_ipv4";
    let Some(mut scene) = Scene::with_ipv6(test, &["nginx", "curl", "wrk"]) else {
        return;
    };
    nginx_on_both_families(&mut scene, test, true);
}

fn nginx_on_both_families(scene: &mut Scene, test: &str, ipv6: bool) {
    let (nginx, argv) = nginx_setup(scene, true, Listen::Both);
    let master = scene.under_test("nginx", Some(3), &argv);
    scene.wait_for_log(master, "start worker process");
    let mut hosts = vec![scene.own_ip()];
    if ipv6 {
        hosts.insert(0, scene.own_ip6());
    }
    for host in &hosts {
        for port in [SENDFILE_ON, SENDFILE_OFF] {
            scene.wait_http(&format!("http://{host}:{port}/small.txt"), master);
        }
    }
    let workers = wait_workers(scene, master, &[]);
    let mut tally = Tally::default();
    for (i, host) in hosts.iter().enumerate() {
        probe_workers(scene, &format!("http://{host}:{SENDFILE_ON}/small.txt"), "");
        nginx_rounds(scene, &nginx, &format!("host{i}"), host, &mut tally);
        scene.expect_running(master, &format!("after the rounds at {host}"));
    }
    let stopped = scene.stop(master, "QUIT");
    wait_gone(scene, &workers, "the workers after SIGQUIT");
    nginx_summary(
        scene,
        test,
        &tally,
        &format!(
            " at {}, SIGQUIT stop in {:.2} s",
            hosts.join(" and "),
            stopped.as_secs_f64()
        ),
    );
}

/// curl as a client over IPv6 and over IPv4: it downloads a 4 MiB file from Python's
/// http.server on the namespace's kernel, bound to `::` (both families).
#[test]
fn curl_as_a_client_over_ipv6() {
    let test = "curl_as_a_client_over_ipv6";
    let Some(scene) = Scene::with_ipv6(test, &["curl", "python3"]) else {
        return;
    };
    let hosts = [scene.kernel_ip6(), scene.kernel_ip()];
    super::curl::curl_downloads(test, scene, "::", &hosts, 5);
}
