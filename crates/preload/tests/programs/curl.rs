//! curl through rusty-run as a client of a kernel server.

use super::*;

/// 3. curl as a client: it downloads a 4 MiB file from Python's http.server on the
///    namespace's kernel.
#[test]
fn curl_as_a_client() {
    let test = "curl_as_a_client";
    let Some(scene) = Scene::new(test, &["curl", "python3"]) else {
        return;
    };
    let host = scene.kernel_ip();
    curl_downloads(test, scene, &host.clone(), &[host], 3);
}

/// curl through rusty-run downloads a 4 MiB file (`pattern` seed `seed`) from Python's
/// http.server on the namespace's kernel, bound to `bind`, once from each of `hosts`;
/// each download is checked by sha256, and the TAP must have carried them all.
pub(super) fn curl_downloads(
    test: &str,
    mut scene: Scene,
    bind: &str,
    hosts: &[String],
    seed: u64,
) {
    let www = scene.path("www");
    let file = www.join("file.bin");
    let size = 4 << 20;
    write_file(&file, &pattern(size, seed));
    let port = 8000;
    let python = scene.python();
    let argv = strings(&[
        &python,
        "-m",
        "http.server",
        &port.to_string(),
        "--bind",
        bind,
        "--directory",
        &www.display().to_string(),
    ]);
    let server = scene.spawn("http.server", &argv);
    scene.net.wait_listening(port, server);
    for (i, host) in hosts.iter().enumerate() {
        let got = scene.path(&format!("downloaded-{i}.bin"));
        let url = format!("http://{host}:{port}/file.bin");
        let argv = strings(&[
            &scene.tool("curl"),
            "-sS",
            "--max-time",
            "60",
            "-o",
            &got.display().to_string(),
            &url,
        ]);
        let client = scene.under_test(&format!("curl-{i}"), None, &argv);
        scene.expect_exit_0(client, Duration::from_secs(90));
        scene.same_file(&file, &got, &format!("curl's download from {host}"));
    }
    scene.expect_tap_carried((hosts.len() * size) as u64);
    eprintln!(
        "{test}: {} requests ({}), {size} bytes each checked by sha256, {:.1} s",
        hosts.len(),
        hosts.join(" and "),
        scene.seconds()
    );
}
