//! `moirai schedule --ui`: a real engine, a real middleware and a real headless Chromium that
//! loads the dashboard, runs its JavaScript and dumps the DOM it built, twice.
//!
//! Every process started here is stopped by its PID when its guard drops, also when a test fails.
//! Chromium is required: without it the test fails and says how to install it.

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{moirai, OutDir, MOIRAI};

/// Only turns a hang into a failure; nothing here asserts on speed.
const PATIENCE: Duration = Duration::from_secs(90);

/// A child process killed (by PID) when dropped.
struct Proc(Option<Child>);

impl Proc {
    fn spawn(cmd: &mut Command) -> Proc {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        Proc(Some(child))
    }

    fn moirai(args: &[&str]) -> Proc {
        Proc::spawn(Command::new(MOIRAI).args(args))
    }

    fn pid(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }

    /// Waits for the exit (killing it after `patience`); returns the exit code, stdout and stderr.
    fn wait(mut self, patience: Duration) -> (Option<i32>, String, String) {
        let mut child = self.0.take().expect("running");
        // Read the pipes while it runs: a full pipe would block it.
        let mut out = child.stdout.take().expect("piped");
        let mut err = child.stderr.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let err_reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let deadline = Instant::now() + patience;
        let status = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("process {} did not exit within {patience:?}", child.id());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (status.code(), reader.join().unwrap_or_default(), err_reader.join().unwrap_or_default())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The DOM of `url` after its scripts ran for a while, as headless Chromium serialises it.
fn dump_dom(chromium: &Path, profile: &Path, url: &str) -> String {
    let p = Proc::spawn(Command::new(chromium).args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-extensions",
        &format!("--user-data-dir={}", profile.display()),
        "--virtual-time-budget=4000",
        "--dump-dom",
        url,
    ]));
    let (code, out, err) = p.wait(PATIENCE);
    assert_eq!(code, Some(0), "{} --dump-dom {url} failed; stderr:\n{err}", chromium.display());
    out
}

/// The round number the page shows (`<span id="status" data-round="N">round N, updated …`).
fn shown_round(dom: &str) -> u64 {
    let status = dom.split("id=\"status\"").nth(1).unwrap_or_else(|| panic!("no #status in the DOM:\n{dom}"));
    let text = status.split('>').nth(1).unwrap_or("").split('<').next().unwrap_or("");
    let round = text.strip_prefix("round ").and_then(|t| t.split(',').next()).and_then(|n| n.parse().ok());
    let round = round.unwrap_or_else(|| panic!("#status is {text:?}, not \"round N, updated HH:MM:SS\"; DOM:\n{dom}"));
    assert!(text.contains(", updated "), "{text}");
    round
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// An engine running SYN, serving its metrics on `port`; the names of its physical operators.
fn engine(port: u16) -> (Proc, Vec<String>) {
    let addr = format!("127.0.0.1:{port}");
    let p = Proc::moirai(&[
        "run",
        "syn",
        "--ops",
        "3",
        "--cost-ns",
        "3000",
        "--rate",
        "20000",
        "--duration",
        "180s",
        "--metrics-addr",
        &addr,
    ]);
    let mut names = Vec::new();
    wait_until("the engine's operator threads", || {
        let Ok(resp) = ureq::get(&format!("http://{addr}/topology")).call() else { return false };
        let Ok(topo) = resp.into_json::<serde_json::Value>() else { return false };
        let ops = topo["physical"].as_array().cloned().unwrap_or_default();
        names = ops.iter().filter_map(|o| o["name"].as_str().map(str::to_string)).collect();
        !ops.is_empty() && ops.iter().all(|o| o["tid"].as_i64().unwrap_or(0) != 0)
    });
    (p, names)
}

#[test]
fn a_headless_chromium_renders_the_live_dashboard() {
    let test = "a_headless_chromium_renders_the_live_dashboard";
    let Some(chromium) = moirai_bench::requires::or_skip(test, moirai_bench::requires::chromium()) else {
        return;
    };
    if !is_root() {
        eprintln!(
            "SKIPPED a_headless_chromium_renders_the_live_dashboard: needs root (CAP_SYS_NICE) to lower nice values"
        );
        return;
    }
    let dir = OutDir::new("schedule-ui");
    std::fs::create_dir_all(&dir.0).unwrap();
    let (engine_port, ui_port) = (free_port(), free_port());
    let (eng, names) = engine(engine_port);
    assert!(names.len() >= 5, "SYN with --ops 3 has a source, 3 operators and a sink: {names:?}");
    let state = dir.0.join("state.json");
    let ui = format!("127.0.0.1:{ui_port}");
    let sched = Proc::moirai(&[
        "schedule",
        "--engine",
        &format!("http://127.0.0.1:{engine_port}"),
        "--policy",
        "qs",
        "--period",
        "300ms",
        "--activation",
        "always",
        "--state-file",
        &state.display().to_string(),
        "--ui",
        &ui,
        // The same address: one server answers the metrics and the dashboard.
        "--metrics-addr",
        &ui,
    ]);
    // The JSON first: a round has run and it shows the engine's operators with what was applied.
    let url = format!("http://{ui}/");
    let mut json = serde_json::Value::Null;
    wait_until("a round with applied nice values in /api/state", || {
        let Ok(resp) = ureq::get(&format!("http://{ui}/api/state")).call() else { return false };
        json = resp.into_json().unwrap_or_default();
        json["spes"][0]["operators"]
            .as_array()
            .is_some_and(|ops| !ops.is_empty() && ops.iter().all(|o| o["threads"][0]["applied"]["qs"].is_i64()))
    });
    assert_eq!(json["spes"][0]["name"], "engine");
    assert_eq!(json["spes"][0]["pid"], eng.pid());
    assert_eq!(json["policies"][0]["applies"], "nice");
    let metrics = ureq::get(&format!("http://{ui}/metrics")).call().unwrap().into_string().unwrap();
    assert!(metrics.contains("moirai_schedule_rounds_total"), "{metrics}");

    let profile = dir.0.join("chromium-profile");
    let first = dump_dom(&chromium, &profile, &url);
    let round = shown_round(&first);
    // A few rounds later (300 ms each) the page shows a later one.
    std::thread::sleep(Duration::from_millis(1500));
    let second = dump_dom(&chromium, &profile, &url);
    let later = shown_round(&second);
    assert!(later > round, "the round shown went from {round} to {later}");

    for dom in [&first, &second] {
        // What the page's script built: the SPE's card, its graph with one box per operator of the
        // engine's query, the table and the sparklines.
        assert!(dom.contains("data-spe=\"engine\""), "no SPE card:\n{dom}");
        assert!(dom.contains("class=\"graph\""), "no graph:\n{dom}");
        assert!(dom.contains("class=\"sparkline\""), "no sparkline:\n{dom}");
        for name in &names {
            assert!(
                dom.contains(&format!("data-name=\"{}\"", html_escape(name))),
                "no box for operator {name:?}:\n{dom}"
            );
        }
        assert_eq!(dom.matches("class=\"op\"").count(), names.len(), "one box per operator");
        assert!(dom.contains("nice "), "the applied nice values are shown:\n{dom}");
        assert!(!dom.contains("class=\"err\""), "no SPE or policy error is shown:\n{dom}");
    }

    // A clean stop restores the nice values.
    // SAFETY: kill(2) on the pid of our own child, which we have not reaped yet.
    unsafe { libc::kill(sched.pid() as i32, libc::SIGINT) };
    let (code, _, err) = sched.wait(PATIENCE);
    assert_eq!(code, Some(0), "stderr:\n{err}");
    assert!(err.contains("serving the dashboard on http://127.0.0.1:"), "{err}");
    drop(eng);
}

#[test]
fn a_dashboard_other_machines_can_reach_needs_ui_public() {
    let dir = OutDir::new("schedule-ui-public");
    let state = dir.0.join("state.json").display().to_string();
    let out = moirai(&[
        "schedule",
        "--engine",
        "http://127.0.0.1:9",
        "--policy",
        "qs",
        "--state-file",
        &state,
        "--ui",
        "0.0.0.0:0",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{err}");
    assert!(err.contains("0.0.0.0:0 is not a loopback address") && err.contains("--ui-public"), "{err}");
    assert!(!dir.0.exists(), "nothing was created before the refusal");

    // The same from a configuration file.
    std::fs::create_dir_all(&dir.0).unwrap();
    let config = dir.0.join("schedule.toml");
    std::fs::write(
        &config,
        format!(
            "state_file = {state:?}\nui = \"192.0.2.1:9466\"\n[[spe]]\nname = \"e\"\ndriver = \"moirai\"\nurl = \
             \"http://127.0.0.1:9\"\n[[policy]]\ntype = \"qs\"\n"
        ),
    )
    .unwrap();
    let out = moirai(&["schedule", "--config", &config.display().to_string()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{err}");
    assert!(err.contains("192.0.2.1:9466 is not a loopback address"), "{err}");
    // --ui on the command line overrides the file's address, and is checked too.
    std::fs::write(&config, std::fs::read_to_string(&config).unwrap().replace("192.0.2.1", "127.0.0.1")).unwrap();
    let out = moirai(&["schedule", "--config", &config.display().to_string(), "--ui", "[::]:9466"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{err}");
    assert!(err.contains("[::]:9466 is not a loopback address"), "{err}");
}
