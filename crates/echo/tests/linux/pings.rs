//! The namespace's kernel pings Rusty: raw-socket ICMP echo and `ping`, on TAP and on
//! the ixgbe model.

use super::*;

/// 1. The namespace's kernel pings Rusty's address on the TAP: our raw-socket ICMP
///    client (checks id, sequence, payload and checksum of every reply) and, when
///    installed, `ping` itself.
#[test]
fn kernel_pings_rusty_on_tap() {
    pings("kernel_pings_rusty_on_tap", start_tap_echo);
}

/// 1b. The same through the ixgbe driver on the model of the 82599.
#[test]
fn kernel_pings_rusty_on_the_ixgbe_model() {
    pings(
        "kernel_pings_rusty_on_the_ixgbe_model",
        start_ixgbe_model_echo,
    );
}

/// Raw-socket ICMP echo and `ping` from the namespace to echo on the link `start` makes.
fn pings(test: &str, start: StartEcho) {
    let Some(mut net) = setup(test, &["python3"]) else {
        return;
    };
    let echo = start(&mut net, 2, &["--grace", "2"]);
    let ip = net.stack_ip();
    let script = net.write("icmp.py", ICMP_PY);
    let python = net.tools.get("python3").to_path_buf();
    let icmp = net.spawn_in_ns(
        "icmp.py",
        python,
        &[
            script.display().to_string(),
            ip.clone(),
            "20".into(),
            "10".into(),
        ],
    );
    let status = net.wait_ok(icmp, Duration::from_secs(40));
    if !status.success() {
        net.fail("raw-socket ICMP echo failed");
    }
    match Tools::optional("ping") {
        Some(ping) => {
            let p = net.spawn_in_ns(
                "ping",
                ping,
                &["-n", "-c", "10", "-i", "0.05", "-W", "2", &ip].map(String::from),
            );
            let status = net.wait_ok(p, Duration::from_secs(30));
            let log = net.log(p);
            if !status.success() || !log.contains(" 0% packet loss") {
                net.fail("ping lost packets");
            }
        }
        None => eprintln!("ping is not installed; the raw-socket ICMP check stood in for it"),
    }
    stop(&mut net, echo, Duration::from_secs(5));
}
