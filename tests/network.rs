//! `gpustack lock` against hostile and broken servers on 127.0.0.1, each bounded in time:
//! a gzip bomb as `Packages.gz`, a slow-loris registry (the run's deadline), redirects to
//! another host and to `file://` (refused, named), a PyPI mirror serving a uv wheel that
//! is not the pinned file (refused), a proxy from `HTTPS_PROXY` (used; `NO_PROXY` bypasses
//! it), a registry that cannot be reached (one summary line, `-v` for each), a token realm
//! on another host (not asked), a registry whose digests are not its bytes and malformed
//! manifests and repository indexes (exit 3, printed safely), a slow-loris index for the
//! importers' deadline, and a server that proves the queries of a run are in flight at once.
//!
//! Every server here is written in the test; nothing leaves the machine. The CLI runs with
//! `[resolve]` pointing every registry and repository at them, so a CI machine with network
//! access behaves the same.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gpustack::resolve::http::{Http, Request, Transport};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpustack-network-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A port nothing listens on (connections are refused).
fn dead_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Accepts connections on a background thread, one thread each; returns the port.
fn serve_raw(handle: impl Fn(TcpStream) + Send + Sync + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = Arc::new(handle);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let h = handle.clone();
            std::thread::spawn(move || h(stream));
        }
    });
    port
}

/// The request line's method and target, headers skipped.
fn read_head(stream: &TcpStream) -> Option<(String, String)> {
    let mut r = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let head = (parts.next()?.to_string(), parts.next()?.to_string());
    loop {
        let mut l = String::new();
        if r.read_line(&mut l).ok()? == 0 || l.trim_end().is_empty() {
            return Some(head);
        }
    }
}

fn respond(mut s: &TcpStream, status: u16, headers: &[(&str, String)], body: &[u8]) {
    let mut head = format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(body);
}

/// A plain HTTP server: `answer(path)` → status, headers, body.
fn serve(
    answer: impl Fn(&str) -> (u16, Vec<(&'static str, String)>, Vec<u8>) + Send + Sync + 'static,
) -> u16 {
    serve_raw(move |s| {
        if let Some((_, path)) = read_head(&s) {
            let (status, headers, body) = answer(&path);
            respond(&s, status, &headers, &body);
        }
    })
}

/// The seed A100 PyTorch spec with `resolve` as its `[resolve]` table.
fn spec(resolve: &str) -> String {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/specs/a100-pytorch.toml"),
    )
    .unwrap();
    format!("{text}\n[resolve]\n{resolve}\n")
}

/// Every registry and both NVIDIA repositories at `registries` / `repos`.
fn mirrors(registries: &str, repos: &str) -> String {
    format!(
        "registries = {{ \"docker.io\" = \"{registries}\", \"nvcr.io\" = \"{registries}\", \"ghcr.io\" = \"{registries}\" }}\n\
         apt = {{ \"https://developer.download.nvidia.com/compute/cuda/repos\" = \"{repos}/cuda\", \"https://nvidia.github.io/libnvidia-container\" = \"{repos}/ctk\" }}\n"
    )
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// `gpustack ARGS` in `dir` (no uv unless `uv` says where), killed after `limit`.
fn gpustack(dir: &Path, args: &[&str], env: &[(&str, &str)], limit: Duration) -> Run {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpustack"));
    c.args(args)
        .current_dir(dir)
        .env_remove("GPUSTACK_OFFLINE")
        .env_remove("GPUSTACK_UV")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .env("GPUSTACK_CACHE_DIR", dir.join("cache"))
        .env("PATH", "/usr/bin:/bin")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let start = Instant::now();
    let mut child = c.spawn().unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gpustack {args:?} ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Run {
        code,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        took: start.elapsed(),
    }
}

fn project(name: &str, resolve: &str) -> PathBuf {
    let d = tmp(name);
    std::fs::write(d.join("gpustack.toml"), spec(resolve)).unwrap();
    d
}

/// `gpustack lock --allow-open` in `dir` without uv (the Python closure stays open): what
/// the registries and repositories answer decides the run.
fn lock_open(dir: &Path) -> Run {
    gpustack(
        dir,
        &["lock", "--allow-open"],
        &[("GPUSTACK_UV", "/nonexistent/uv")],
        Duration::from_secs(60),
    )
}

/// A hostile server's answer refused as a network failure: exit 3, `says` in the
/// message, nothing a terminal would act on, nothing forged, nothing written.
fn assert_refused_safely(name: &str, run: &Run, dir: &Path, says: &str) {
    assert_eq!(run.code, Some(3), "{name}: {}", run.stderr);
    assert!(run.stderr.contains(says), "{name}: {}", run.stderr);
    assert!(!run.stderr.contains('\u{1b}'), "{name}: {}", run.stderr);
    assert!(
        !run.stderr.contains("\nerror: forged"),
        "{name}: a forged line: {}",
        run.stderr
    );
    assert!(run.stderr.len() < 20_000, "{name}: {}", run.stderr.len());
    assert!(!dir.join("gpustack.lock").exists(), "{name}");
}

/// Raw deflate of `mib` MiB of zeros, or of 1 KiB lines (`lines`), from 1 MiB
/// sync-flushed blocks repeated.
fn deflate_bomb(mib: usize, lines: bool) -> Vec<u8> {
    use miniz_oxide::deflate::core::{
        compress, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush,
    };
    let mut c = CompressorOxide::new(create_comp_flags_from_zip_params(9, -15, 0));
    let zeros: Vec<u8> = (0..1 << 20)
        .map(|i| match (lines, i % 1024) {
            (false, _) => 0,
            (true, 1023) => b'\n',
            (true, _) => b'a',
        })
        .collect();
    let mut out = vec![0u8; 1 << 20];
    let (_, used, n) = compress(&mut c, &zeros, &mut out, TDEFLFlush::Sync);
    assert_eq!(used, zeros.len());
    let block = &out[..n];
    let mut d = Vec::with_capacity(n * mib + 5);
    for _ in 0..mib {
        d.extend_from_slice(block);
    }
    d.extend([0x01, 0x00, 0x00, 0xff, 0xff]); // a final empty stored block
    d
}

#[test]
fn a_gzip_bomb_packages_index_is_refused_with_a_clear_error() {
    // 1 GiB of 1 KiB lines in about 1 MB: inflating stops at gpustack's 256 MiB cap; 1 GiB
    // of zeros is one line, refused at 1 MiB. Either way the index is read as a stream, so
    // memory holds a line, never the inflated file.
    for (lines, says) in [
        (
            true,
            "gzip data inflates to more than 256 MiB (refused: a gzip bomb, or not an index)",
        ),
        (false, "a line is longer than 1048576 bytes (not an index)"),
    ] {
        let mut gz = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];
        gz.extend(deflate_bomb(1024, lines));
        gz.extend([0u8; 8]);
        assert!(gz.len() < 4 << 20, "{}", gz.len());
        let digest = gpustack::resolve::http::sha256_digest(&gz);
        let release = format!(
            "Origin: hostile\nSHA256:\n {} {} Packages.gz\n",
            &digest["sha256:".len()..],
            gz.len()
        );
        let gz = Arc::new(gz);
        let repo = serve(move |path| {
            if path.ends_with("/Release") {
                (200, vec![], release.clone().into_bytes())
            } else if path.ends_with("/Packages.gz") {
                (200, vec![], gz.to_vec())
            } else {
                (404, vec![], vec![])
            }
        });
        let dead = format!("http://127.0.0.1:{}", dead_port());
        let dir = project("bomb", &mirrors(&dead, &format!("http://127.0.0.1:{repo}")));
        let run = gpustack(
            &dir,
            &["lock", "--allow-open"],
            &[],
            Duration::from_secs(120),
        );
        assert_eq!(run.code, Some(3), "{}", run.stderr);
        assert!(run.stderr.contains(says), "{}", run.stderr);
        assert!(run.stderr.contains("[resolve].apt"), "{}", run.stderr);
        assert!(run.stderr.len() < 4000, "{}", run.stderr.len());
        assert!(!dir.join("gpustack.lock").exists());
    }
}

/// Headers at once, then one byte a second of a 1 MB body, for as long as anyone reads.
fn slow_loris() -> u16 {
    serve_raw(|s| {
        if read_head(&s).is_some() {
            let mut s2 = &s;
            let _ = s2.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n");
            for _ in 0..600 {
                if s2.write_all(b"{").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    })
}

#[test]
fn a_slow_loris_index_is_cut_off_by_the_importers_deadline() {
    let url = format!("http://127.0.0.1:{}/simple", slow_loris());
    let dir = tmp("slow-import");
    for args in [
        &[
            "catalog",
            "import",
            "pypi",
            "torch==2.4.0",
            "--index",
            &url,
            "--timeout",
            "2",
        ][..],
        &["catalog", "outdated", "--index", &url, "--timeout", "2"][..],
    ] {
        let run = gpustack(&dir, args, &[], Duration::from_secs(60));
        assert_eq!(run.code, Some(3), "{args:?}: {}", run.stderr);
        assert!(run.took < Duration::from_secs(20), "{:?}", run.took);
        assert!(
            run.stderr.contains("the run's 2 s budget"),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains("--timeout SECS"), "{}", run.stderr);
        assert!(!dir.join("catalog-import").exists());
    }
}

#[test]
fn a_slow_loris_registry_is_cut_off_by_the_runs_deadline() {
    let slow = slow_loris();
    let url = format!("http://127.0.0.1:{slow}");
    let dir = project("slow", &mirrors(&url, &url));
    let run = gpustack(
        &dir,
        &["lock", "--allow-open", "--timeout", "3", "-v"],
        &[("GPUSTACK_UV", "/nonexistent/uv")],
        Duration::from_secs(60),
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.took < Duration::from_secs(20), "{:?}", run.took);
    assert!(
        run.stderr
            .contains("timeout: the run's 3 s budget for network queries is spent"),
        "{}",
        run.stderr
    );
    // The same from the spec's `[resolve].timeout`.
    let dir = project(
        "slow-spec",
        &format!("timeout = 2\n{}", mirrors(&url, &url)),
    );
    let run = gpustack(
        &dir,
        &["lock", "--allow-open", "-v"],
        &[("GPUSTACK_UV", "/nonexistent/uv")],
        Duration::from_secs(60),
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr.contains("the run's 2 s budget"),
        "{}",
        run.stderr
    );
}

#[test]
fn redirects_to_file_urls_and_to_other_hosts_over_http_are_refused_and_named() {
    let other = serve(|_| (200, vec![], b"from another host".to_vec()));
    let same = serve(move |path| match path {
        "/file" => (
            302,
            vec![("Location", "file:///etc/passwd".to_string())],
            vec![],
        ),
        "/other" => (
            302,
            vec![("Location", format!("http://localhost:{other}/x"))],
            vec![],
        ),
        "/here" => (301, vec![("Location", "/final".to_string())], vec![]),
        "/final" => (200, vec![], b"ok".to_vec()),
        "/loop" => (302, vec![("Location", "/loop".to_string())], vec![]),
        _ => (404, vec![], vec![]),
    });
    let http = Http::new(false);
    let get = |p: &str| http.send(&Request::get(format!("http://127.0.0.1:{same}{p}")));
    let e = get("/file").unwrap_err().to_string();
    assert!(
        e.contains("redirect to `file:///etc/passwd` refused"),
        "{e}"
    );
    let e = get("/other").unwrap_err().to_string();
    assert!(
        e.contains(&format!("redirect to `http://localhost:{other}/x` refused")),
        "{e}"
    );
    assert_eq!(get("/here").unwrap().body, b"ok");
    let e = get("/loop").unwrap_err().to_string();
    assert!(e.contains("redirect to"), "{e}");

    // Through `lock`: a registry that redirects to `file://` is an error (exit 3) naming
    // the host and the `[resolve]` key, never a silent fallback to the catalog.
    let registry = serve(|_| {
        (
            302,
            vec![("Location", "file:///etc/passwd".to_string())],
            vec![],
        )
    });
    let dead = format!("http://127.0.0.1:{}", dead_port());
    let dir = project(
        "redirect",
        &mirrors(&format!("http://127.0.0.1:{registry}"), &dead),
    );
    let run = lock_open(&dir);
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("redirect to `file:///etc/passwd` refused"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!("`127.0.0.1:{registry}`")),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("[resolve].registries"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_pypi_mirror_serving_another_uv_wheel_is_refused() {
    // Both CPUs' wheel names, so the test holds on x86_64 and aarch64 machines.
    let names = [
        "uv-0.11.7-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "uv-0.11.7-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64.whl",
    ];
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let pypi = serve(move |path| {
        seen.lock().unwrap().push(path.to_string());
        if path == "/simple/uv/" {
            let links: String = names
                .iter()
                // A relative link, as PyPI's pages have.
                .map(|n| format!("<a href=\"../../files/{n}#sha256=00\">{n}</a>\n")) // not-a-repo-path
                .collect();
            (200, vec![], links.into_bytes())
        } else if path.starts_with("/files/") {
            (
                200,
                vec![],
                b"PK\x03\x04 a wheel, but not the one pinned".to_vec(),
            )
        } else {
            (404, vec![], vec![])
        }
    });
    let dead = format!("http://127.0.0.1:{}", dead_port());
    let dir = project(
        "wheel",
        &format!(
            "pypi = \"http://127.0.0.1:{pypi}/simple\"\n{}",
            mirrors(&dead, &dead)
        ),
    );
    let run = gpustack(&dir, &["lock"], &[], Duration::from_secs(60));
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(
        run.stderr.contains("the catalog pins (refused)"),
        "{}",
        run.stderr
    );
    assert!(!dir.join("gpustack.lock").exists());
    assert!(!dir.join("cache/uv").exists() || walk_files(&dir.join("cache/uv")) == 0);
    let asked = asked.lock().unwrap();
    assert!(
        asked.iter().any(|p| p.starts_with("/files/uv-0.11.7-")),
        "{asked:?}"
    );

    // GPUSTACK_UV names another program: an error (exit 2), never a download.
    let run = gpustack(
        &dir,
        &["lock"],
        &[("GPUSTACK_UV", "/bin/true")],
        Duration::from_secs(60),
    );
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("--allow-open"), "{}", run.stderr);
}

fn walk_files(d: &Path) -> usize {
    std::fs::read_dir(d).map_or(0, |it| {
        it.flatten()
            .map(|e| {
                if e.path().is_dir() {
                    walk_files(&e.path())
                } else {
                    1
                }
            })
            .sum()
    })
}

/// A CONNECT proxy that records each tunnel's target and then pipes both ways.
fn connect_proxy(seen: Arc<Mutex<Vec<String>>>) -> u16 {
    serve_raw(move |client| {
        let Some((method, target)) = read_head(&client) else {
            return;
        };
        seen.lock().unwrap().push(format!("{method} {target}"));
        let Ok(upstream) = TcpStream::connect(&target) else {
            respond(&client, 502, &[], b"");
            return;
        };
        let _ = (&client).write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
        let (mut c1, mut u1) = (client.try_clone().unwrap(), upstream.try_clone().unwrap());
        let t = std::thread::spawn(move || {
            let _ = std::io::copy(&mut c1, &mut u1);
            let _ = u1.shutdown(std::net::Shutdown::Write);
        });
        let (mut c2, mut u2) = (client, upstream);
        let _ = std::io::copy(&mut u2, &mut c2);
        let _ = c2.shutdown(std::net::Shutdown::Write);
        let _ = t.join();
    })
}

#[test]
fn https_proxy_is_used_and_no_proxy_bypasses_it() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let proxy = connect_proxy(seen.clone());
    // The registry behind the proxy answers every tag with 404... except that a 404 is the
    // catalog's problem (exit 2); a server error is the registry's (exit 3). Use the
    // latter so the run says it reached the server through the proxy.
    let registry = serve(|_| (503, vec![], b"down for maintenance".to_vec()));
    let dead = format!("http://127.0.0.1:{}", dead_port());
    let dir = project(
        "proxy",
        &mirrors(&format!("http://127.0.0.1:{registry}"), &dead),
    );
    let proxy_url = format!("http://127.0.0.1:{proxy}");
    let run = gpustack(
        &dir,
        &["lock", "--allow-open"],
        &[
            ("GPUSTACK_UV", "/nonexistent/uv"),
            ("HTTPS_PROXY", &proxy_url),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(run.stderr.contains("503"), "{}", run.stderr);
    let tunnels = seen.lock().unwrap().clone();
    assert!(
        tunnels.contains(&format!("CONNECT 127.0.0.1:{registry}")),
        "{tunnels:?}"
    );
    seen.lock().unwrap().clear();
    let run = gpustack(
        &dir,
        &["lock", "--allow-open"],
        &[
            ("GPUSTACK_UV", "/nonexistent/uv"),
            ("HTTPS_PROXY", &proxy_url),
            ("NO_PROXY", "127.0.0.1"),
        ],
        Duration::from_secs(60),
    );
    assert!(run.stderr.contains("503"), "{}", run.stderr);
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );
}

#[test]
fn an_unreachable_registry_is_one_summary_line_and_v_lists_each() {
    let dead = format!("http://127.0.0.1:{}", dead_port());
    let dir = project("dead", &mirrors(&dead, &dead));
    let run = lock_open(&dir);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let notes: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("note: "))
        .collect();
    let summary: Vec<&&str> = notes
        .iter()
        .filter(|l| l.contains("did not answer"))
        .collect();
    assert_eq!(summary.len(), 1, "{}", run.stderr);
    assert!(summary[0].contains("connect: "), "{}", summary[0]);
    assert!(summary[0].contains("`-v` lists each"), "{}", summary[0]);
    let run = gpustack(
        &dir,
        &["lock", "--allow-open", "-v"],
        &[("GPUSTACK_UV", "/nonexistent/uv")],
        Duration::from_secs(60),
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr
            .lines()
            .filter(|l| l.contains("digest from the"))
            .count()
            > 1,
        "{}",
        run.stderr
    );
    // An open lock is refused without `--allow-open` (exit 2), and `check --strict` says so
    // about one written with it.
    let run = gpustack(
        &dir,
        &["lock"],
        &[("GPUSTACK_UV", "/nonexistent/uv")],
        Duration::from_secs(60),
    );
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("the Python closure is not locked"),
        "{}",
        run.stderr
    );
    let run = gpustack(
        &dir,
        &["check", "--strict", "--no-drift"],
        &[],
        Duration::from_secs(60),
    );
    assert!(
        run.stdout.contains("open-closure"),
        "{}{}",
        run.stdout,
        run.stderr
    );
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let run = gpustack(&dir, &["check", "--no-drift"], &[], Duration::from_secs(60));
    assert!(!run.stdout.contains("open-closure"), "{}", run.stdout);
}

#[test]
fn registry_and_repository_queries_are_in_flight_at_once() {
    // Each request waits (up to 5 s) until another is in flight beside it: one after the
    // other, no request would ever see a second one, and the most seen stays 1.
    let in_flight = Arc::new(Mutex::new((0usize, 0usize))); // (now, most)
    let state = in_flight.clone();
    let port = serve_raw(move |s| {
        if read_head(&s).is_none() {
            return;
        }
        {
            let mut g = state.lock().unwrap();
            g.0 += 1;
            g.1 = g.1.max(g.0);
        }
        let start = Instant::now();
        while state.lock().unwrap().1 < 2 && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        respond(&s, 404, &[], b"");
        state.lock().unwrap().0 -= 1;
    });
    let base = format!("http://127.0.0.1:{port}");
    let dir = project("in-flight", &mirrors(&base, &base));
    let run = lock_open(&dir);
    let most = in_flight.lock().unwrap().1;
    assert!(
        most >= 2,
        "at most {most} request(s) in flight\n{}",
        run.stderr
    );
    assert!(run.took < Duration::from_secs(30), "{:?}", run.took);
}

#[test]
fn a_token_realm_on_another_host_is_not_asked() {
    // The registry asks for a token at another port (another service on the machine, as
    // a cloud metadata endpoint would be): gpustack does not go there, and says why.
    let asked = Arc::new(Mutex::new(Vec::<String>::new()));
    let a = asked.clone();
    let other = serve(move |path| {
        a.lock().unwrap().push(path.to_string());
        (200, vec![], br#"{"token":"t"}"#.to_vec())
    });
    let port = serve(move |path| {
        if path.starts_with("/v2/") {
            let challenge =
                format!("Bearer realm=\"http://127.0.0.1:{other}/latest/meta-data\",service=\"x\"");
            (401, vec![("WWW-Authenticate", challenge)], Vec::new())
        } else {
            (404, vec![], Vec::new())
        }
    });
    let base = format!("http://127.0.0.1:{port}");
    let dir = project("realm", &mirrors(&base, &base));
    let run = lock_open(&dir);
    assert!(
        asked.lock().unwrap().is_empty(),
        "{:?}",
        asked.lock().unwrap()
    );
    assert_ne!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr.contains("outside its own site"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("/latest/meta-data"), "{}", run.stderr);
}

#[test]
fn no_network_is_concluded_once_and_spares_hosts_on_this_machine() {
    use gpustack::resolve::http::{Cause, FetchError};
    let port = serve(|_| (200, vec![], b"ok".to_vec()));
    let http = Http::for_lock(Some(30));
    let cause = |r: Result<_, FetchError>| match r {
        Err(FetchError::Unreachable { cause, .. }) => cause,
        other => panic!("{other:?}"),
    };
    // `.invalid` never resolves (RFC 2606): the run's first request finds no network ...
    let first = cause(http.send(&Request::get("http://gpustack-test.invalid/a")));
    assert_eq!(first, Cause::Dns);
    // ... so another host is not asked at all ...
    let start = Instant::now();
    let second = cause(http.send(&Request::get("http://other-gpustack-test.invalid/b")));
    assert!(matches!(second, Cause::NoNetwork { .. }), "{second:?}");
    assert!(start.elapsed() < Duration::from_secs(1));
    // ... but a mirror on this machine still is.
    let local = http
        .send(&Request::get(format!("http://127.0.0.1:{port}/c")))
        .unwrap();
    assert_eq!(local.body, b"ok");
}

#[test]
fn changing_digests_and_malformed_metadata_are_errors_that_print_safely() {
    // Each registry answers every manifest request the same hostile way; the apt
    // repositories are down, so the registry's answer decides the run.
    let forged = "\u{1b}[31m\nerror: forged by the registry".to_string();
    // (name, response headers, response body, what the error says)
    type Case = (
        &'static str,
        Vec<(&'static str, String)>,
        Vec<u8>,
        &'static str,
    );
    let cases: Vec<Case> = vec![
        (
            // The digest it names is not the bytes it sends (a tag that moved mid-answer,
            // or a mirror that lies).
            "changing",
            vec![(
                "Docker-Content-Digest",
                format!("sha256:{}", "1".repeat(64)),
            )],
            br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{}}"#.to_vec(),
            "says its manifest is `sha256:1111",
        ),
        (
            "not-json",
            vec![],
            format!("{forged}{}", "x".repeat(900_000)).into_bytes(),
            "not JSON",
        ),
        (
            "schema-1",
            vec![],
            br#"{"schemaVersion":1,"name":"nvidia/cuda"}"#.to_vec(),
            "only schema 2",
        ),
        (
            "bad-entry",
            vec![],
            serde_json::to_vec(&serde_json::json!({
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.index.v1+json",
                "manifests": [{ "digest": format!("sha256:{forged}") }],
            }))
            .unwrap(),
            "is not sha256",
        ),
    ];
    for (name, headers, body, says) in cases {
        let body = Arc::new(body);
        let headers = Arc::new(headers);
        let port = serve(move |path| {
            if path.contains("/manifests/") {
                (200, headers.to_vec(), body.to_vec())
            } else {
                (404, vec![], vec![])
            }
        });
        let dead = format!("http://127.0.0.1:{}", dead_port());
        let dir = project(name, &mirrors(&format!("http://127.0.0.1:{port}"), &dead));
        assert_refused_safely(name, &lock_open(&dir), &dir, says);
    }
}

#[test]
fn malformed_repository_metadata_is_an_error_naming_the_file() {
    let cases: Vec<(&str, &str, Vec<u8>, &str)> = vec![
        (
            "inrelease",
            "/InRelease",
            b"\x1b[2Jnot signed".to_vec(),
            "not a clear-signed Release file",
        ),
        (
            "release",
            "/Release",
            b"Origin: x\nSHA256:\n".to_vec(),
            "names no `Packages` or `Packages.gz`",
        ),
    ];
    for (name, file, body, says) in cases {
        let body = Arc::new(body);
        let port = serve(move |path| {
            if path.ends_with(file) {
                (200, vec![], body.to_vec())
            } else {
                (404, vec![], vec![])
            }
        });
        let dead = format!("http://127.0.0.1:{}", dead_port());
        let dir = project(name, &mirrors(&dead, &format!("http://127.0.0.1:{port}")));
        let run = lock_open(&dir);
        assert_refused_safely(name, &run, &dir, says);
        assert!(
            run.stderr.contains(&format!("127.0.0.1:{port}")),
            "{name}: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains("[resolve].apt"),
            "{name}: {}",
            run.stderr
        );
    }
}
