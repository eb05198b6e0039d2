//! curl through rusty-run as a client of a kernel server.

use super::*;

/// 3. curl as a client: it downloads a 4 MiB file from Python's http.server on the
///    namespace's kernel.
#[test]
fn curl_as_a_client() {
    let test = "curl_as_a_client";
    let Some(mut scene) = Scene::new(test, &["curl", "python3"]) else {
        return;
    };
    let www = scene.path("www");
    let file = www.join("file.bin");
    let size = 4 << 20;
    write_file(&file, &pattern(size, 3));
    let port = 8000;
    let python = scene.python();
    let argv = strings(&[
        &python,
        "-m",
        "http.server",
        &port.to_string(),
        "--bind",
        &scene.kernel_ip(),
        "--directory",
        &www.display().to_string(),
    ]);
    let server = scene.spawn("http.server", &argv);
    scene.net.wait_listening(port, server);
    let got = scene.path("downloaded.bin");
    let url = format!("http://{}:{port}/file.bin", scene.kernel_ip());
    let argv = strings(&[
        &scene.tool("curl"),
        "-sS",
        "--max-time",
        "60",
        "-o",
        &got.display().to_string(),
        &url,
    ]);
    let client = scene.under_test("curl", None, &argv);
    scene.expect_exit_0(client, Duration::from_secs(90));
    scene.same_file(&file, &got, "curl's download");
    scene.expect_tap_carried(size as u64);
    eprintln!(
        "{test}: 1 request, {size} bytes checked by sha256, {:.1} s",
        scene.seconds()
    );
}
