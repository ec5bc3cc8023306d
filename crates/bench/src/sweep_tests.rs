//! Tests of the orchestrator against a stand-in `moirai` binary (a Python script), so that
//! failures, hangs, usage errors, the middleware's plumbing and Ctrl-C are exercised with real
//! processes without the engine's cost.

use super::*;
use crate::output::tests::TempDir;
use crate::spec::parse_configurations;
use std::sync::Arc;

/// A stand-in for the `moirai` binary, in Python: `run syn ...` behaves as the mode given by
/// `--fake MODE` after the lab's arguments, `schedule` behaves as a middleware: it serves
/// `/metrics` on `--metrics-addr`, acting from 0.1 s after its start with `--activation always`
/// and never otherwise.
const FAKE: &str = r#"#!/usr/bin/env python3
import json, os, signal, socket, sys, time
start = time.monotonic()
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
def opt(name, default=None):
    return args[args.index(name) + 1] if name in args else default
if args[:1] == ["schedule"]:
    if "--help" in args:
        if os.path.exists(os.path.join(here, "mw-flink")):
            print("      --flink <URL>  the Flink job whose REST API is at URL")
        sys.exit(0)
    if os.path.exists(os.path.join(here, "mw-fail")):
        time.sleep(0.1)
        print("policy crashed", file=sys.stderr)
        sys.exit(3)
    taken = os.path.join(here, "mw-port-taken")
    if os.path.exists(taken):
        os.remove(taken)
        print("error: cannot serve metrics on %s: Address already in use (os error 98)" % opt("--metrics-addr"),
              file=sys.stderr)
        sys.exit(2)
    log = open(os.path.join(here, "middleware.log"), "a")
    port = int(opt("--engine").rsplit(":", 1)[1])
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    log.write("engine %s policy %s answered\n" % (opt("--engine"), opt("--policy")))
    log.flush()
    def on_int(sig, frame):
        log.write("SIGINT\n")
        log.close()
        sys.exit(0)
    signal.signal(signal.SIGINT, on_int)
    if not os.path.exists(os.path.join(here, "mw-no-metrics")):
        import threading
        always = opt("--activation") == "always"
        host, mport = opt("--metrics-addr").rsplit(":", 1)
        metrics = socket.socket()
        metrics.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        metrics.bind((host, int(mport)))
        metrics.listen(16)
        def serve():
            while True:
                conn, _ = metrics.accept()
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    request += chunk
                up = time.monotonic() - start
                active = max(0.0, up - 0.1) if always else 0.0
                body = "moirai_schedule_uptime_seconds %f\n" % up
                body += 'moirai_schedule_active_seconds_total{spe="engine"} %f\n' % active
                if always and up > 0.1:
                    body += 'moirai_schedule_first_active_seconds{spe="engine"} 0.1\n'
                head = "HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
                conn.sendall((head + body).encode())
                conn.close()
        threading.Thread(target=serve, daemon=True).start()
    while True:
        sum(range(20000))
        time.sleep(0.001)
if args[:1] != ["run"]:
    sys.exit(2)
if "--help" in args:
    if args[1] == "syn":
        sys.exit(0)
    print("error: unrecognized subcommand '%s'" % args[1], file=sys.stderr)
    sys.exit(2)
mode = opt("--fake", "ok")
rate = float(opt("--rate"))
with open(os.path.join(here, "engine.log"), "a") as log:
    log.write(" ".join(args) + "\n")
if mode == "fail":
    print("thread 'op1' panicked: boom", file=sys.stderr)
    sys.exit(1)
if mode == "usage":
    print("error: unexpected argument '--bogus' found", file=sys.stderr)
    sys.exit(2)
if mode == "nojson":
    print("hello")
    sys.exit(0)
if mode == "hang":
    time.sleep(300)
host, port = opt("--metrics-addr").rsplit(":", 1)
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind((host, int(port)))
server.listen(16)
time.sleep(float(opt("--duration").rstrip("ms")) / 1000)
lat = {"count": 10, "mean": 0.5, "p50": 0.4, "p99": 2.0, "p999": 3.0, "max": 4.0}
print("workload syn")
print(json.dumps({"workload": "syn", "offered_rate": rate, "ingress_tps": rate * 0.99, "egress_tps": rate * 0.99,
    "latency_ms": lat, "e2e_latency_ms": lat, "cpu_cores": 0.25, "threads": 7,
    "queue_len": {"samples": 3, "mean": 1.5, "p50": 1, "p90": 2, "p99": 3, "max": 3, "per_operator": {}}}))
"#;

/// A temp dir holding the fake binary.
pub(crate) struct Fake {
    pub(crate) dir: TempDir,
}

impl Fake {
    pub(crate) fn new(name: &str) -> Fake {
        let dir = TempDir::new(name);
        let exe = dir.0.join("moirai");
        // The system's interpreter when there is one: a version manager's shim (pyenv) takes most
        // of a second to start on a loaded machine, longer than a middleware has here.
        let fake = match std::path::Path::new("/usr/bin/python3").exists() {
            true => FAKE.replacen("#!/usr/bin/env python3", "#!/usr/bin/python3", 1),
            false => FAKE.to_string(),
        };
        std::fs::write(&exe, fake).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        Fake { dir }
    }

    fn spec(&self, compare: &str, rates: &[f64], mode: &str) -> SweepSpec {
        SweepSpec {
            exe: self.dir.0.join("moirai"),
            configurations: parse_configurations(compare).unwrap(),
            rates: rates.to_vec(),
            extra_args: vec!["--fake".into(), mode.into()],
            out_dir: self.dir.0.join("out"),
            ..spec(&self.dir.0)
        }
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.0.join(name)).unwrap_or_default()
    }
}

/// Runs a sweep of moirai configurations (nothing to prepare).
fn sweep(spec: &SweepSpec, stop: &AtomicBool) -> (Vec<Point>, SweepEnd) {
    run_sweep(spec, &Prepared::default(), stop)
}

/// A valid spec for tests; the binary does not exist.
pub(crate) fn spec(dir: &std::path::Path) -> SweepSpec {
    SweepSpec {
        exe: dir.join("no-such-moirai"),
        workload: "syn".into(),
        rates: vec![1000.0],
        duration: Duration::from_secs(1),
        warmup: 0.2,
        reps: 1,
        configurations: parse_configurations("os").unwrap(),
        extra_args: Vec::new(),
        policy_period: Some(Duration::from_secs(1)),
        criteria: Criteria::default(),
        grace: Duration::from_secs(10),
        // The probes are the CLI's tests' (crates/cli/tests/bench.rs); here they would only add
        // seconds to every fake point.
        speed_probes: crate::speed::Probing::Off,
        out_dir: dir.join("out"),
        command_line: vec!["moirai".into(), "bench".into()],
    }
}

#[test]
fn validation_rejects_bad_values() {
    let dir = TempDir::new("validate");
    let ok = spec(&dir.0);
    assert!(ok.validate().is_ok());
    let msg = |s: SweepSpec| s.validate().unwrap_err().to_string();
    assert!(msg(SweepSpec { reps: 0, ..ok.clone() }).contains("--reps"));
    assert!(msg(SweepSpec { duration: Duration::from_millis(200), ..ok.clone() }).contains("--duration"));
    assert!(msg(SweepSpec { warmup: 0.95, ..ok.clone() }).contains("--warmup"));
    let extra = vec!["--cost-ns".to_string(), "100".to_string(), "--rate=5".to_string()];
    assert!(msg(SweepSpec { extra_args: extra, ..ok.clone() }).contains("--rate cannot be passed"));
    let criteria = Criteria { p99_bound_ms: 0.0, ..Criteria::default() };
    assert!(msg(SweepSpec { criteria, ..ok.clone() }).contains("bound"));
}

#[test]
fn flink_configurations_are_checked_against_the_flink_jobs() {
    let dir = TempDir::new("validate-flink");
    let flink = SweepSpec {
        configurations: parse_configurations("os,flink:os,flink:qs").unwrap(),
        extra_args: vec!["--ops".into(), "3".into(), "--cost-ns=200".into()],
        ..spec(&dir.0)
    };
    assert!(flink.validate().is_ok());
    let msg = |s: SweepSpec| s.validate().unwrap_err().to_string();
    // A flag of moirai's engine only.
    let chaining = SweepSpec { extra_args: vec!["--chaining".into()], ..flink.clone() };
    let e = msg(chaining);
    assert!(e.starts_with("configuration 'flink:os' cannot run: the Flink job `syn` does not take --chaining"), "{e}");
    let batch = SweepSpec { extra_args: vec!["--batch-size".into(), "64".into()], ..flink.clone() };
    assert!(msg(batch).contains("does not take --batch-size"));
    // The same flag is fine for a sweep of moirai alone.
    let moirai_only = SweepSpec {
        configurations: parse_configurations("os,qs").unwrap(),
        extra_args: vec!["--chaining".into()],
        ..flink.clone()
    };
    assert!(moirai_only.validate().is_ok());
    // Workloads without a Flink job, and Linear Road in the faithful shape.
    for w in ["wordcount", "ysb"] {
        let e = msg(SweepSpec { workload: w.into(), extra_args: Vec::new(), ..flink.clone() });
        assert!(e.contains(&format!("no '{w}' workload")), "{e}");
    }
    let lr = SweepSpec { workload: "linear-road".into(), extra_args: Vec::new(), ..flink.clone() };
    assert!(msg(lr.clone()).contains("--shape lachesis"));
    assert!(SweepSpec { extra_args: vec!["--shape".into(), "lachesis".into()], ..lr }.validate().is_ok());
}

#[test]
fn flink_arguments_carry_the_point() {
    let dir = TempDir::new("flink-args");
    let s = SweepSpec { extra_args: vec!["--ops".into(), "3".into()], ..spec(&dir.0) };
    assert_eq!(flink_args(&s, 2500.0).join(" "), "--rate 2500 --duration 1000ms --warmup 0.2 --json --ops 3");
}

#[test]
fn engine_arguments_carry_the_point() {
    let dir = TempDir::new("args");
    let s = SweepSpec { extra_args: vec!["--ops".into(), "3".into()], ..spec(&dir.0) };
    let c = Configuration::parse("os@dedicated").unwrap();
    let args = engine_args(&s, &c, 2500.0, 9999).join(" ");
    assert_eq!(
        args,
        "run syn --rate 2500 --duration 1000ms --warmup 0.2 --json --metrics-addr 127.0.0.1:9999 \
         --threading dedicated --ops 3"
    );
    // A configuration's own workload arguments come before the sweep's.
    let c = Configuration::parse("os/exchange=lbf/sentence-variance").unwrap();
    let args = engine_args(&s, &c, 2500.0, 9999).join(" ");
    assert!(args.ends_with("127.0.0.1:9999 --exchange lbf --sentence-variance --ops 3"), "{args}");
}

#[test]
fn configuration_arguments_may_not_clash_with_the_lab_or_the_sweep() {
    let dir = TempDir::new("config-args");
    let base = SweepSpec {
        configurations: parse_configurations("os/exchange=fifo,os/exchange=lbf").unwrap(),
        extra_args: vec!["--link-capacity".into(), "20000".into()],
        ..spec(&dir.0)
    };
    assert!(base.validate().is_ok());
    let msg = |s: SweepSpec| s.validate().unwrap_err().to_string();
    let twice = SweepSpec { extra_args: vec!["--exchange=rr".into()], ..base.clone() };
    assert!(msg(twice).contains("--exchange is set both by configuration os/exchange=fifo and after --"));
    let lab = SweepSpec { configurations: parse_configurations("os/rate=5").unwrap(), ..base };
    assert!(msg(lab).contains("--rate cannot be a workload argument"));
}

#[test]
fn preflight_catches_what_would_fail_every_point() {
    let fake = Fake::new("preflight");
    let mut s = fake.spec("os", &[1000.0], "ok");
    assert!(preflight(&s).is_ok());
    s.workload = "nosuch".into();
    let e = preflight(&s).unwrap_err().to_string();
    assert!(e.contains("unknown workload 'nosuch'") && e.contains("unrecognized subcommand"), "{e}");
    s.workload = "syn".into();
    // A binary without `schedule`.
    let no_mw = SweepSpec { exe: "/bin/false".into(), ..fake.spec("os,qs", &[1000.0], "ok") };
    let e = preflight(&no_mw).unwrap_err().to_string();
    assert_eq!(e, "configuration 'qs' needs `moirai schedule`, which this build does not have");
    // A middleware without the Flink driver cannot schedule a Flink job: said before the Flink
    // jobs are built.
    let flink = SweepSpec { extra_args: Vec::new(), ..fake.spec("os,flink:qs", &[1000.0], "ok") };
    let e = preflight(&flink).unwrap_err().to_string();
    assert_eq!(
        e,
        "configuration 'flink:qs' cannot run: `moirai schedule` of this build has no --flink flag (the middleware's \
         Flink driver)"
    );
    // An output directory below a regular file cannot be created, even by root.
    std::fs::write(fake.dir.0.join("file"), b"x").unwrap();
    let blocked = SweepSpec { out_dir: fake.dir.0.join("file/out"), ..fake.spec("os", &[1000.0], "ok") };
    assert!(preflight(&blocked).unwrap_err().to_string().contains("cannot write there"));
}

#[test]
fn a_sweep_interleaves_configurations_and_writes_everything() {
    let fake = Fake::new("sweep");
    let s = fake.spec("os,os", &[1000.0, 2000.0], "ok");
    let done = crate::run(&s, &AtomicBool::new(false)).unwrap();
    assert_eq!(done.end, SweepEnd::Completed);
    let order: Vec<(f64, &str)> = done.points.iter().map(|p| (p.rate, p.configuration.as_str())).collect();
    assert_eq!(order, [(1000.0, "os"), (1000.0, "os#2"), (2000.0, "os"), (2000.0, "os#2")]);
    for p in &done.points {
        assert_eq!(p.failure, None);
        assert_eq!(p.run.as_ref().unwrap().ingress_tps, p.rate * 0.99);
        assert_eq!(p.middleware_cpu, None);
    }
    // Every point had its own metrics endpoint and the lab's arguments.
    let log = fake.log("engine.log");
    assert_eq!(log.lines().count(), 4);
    assert!(log.lines().all(|l| l.contains("--json") && l.contains("--fake ok")), "{log}");
    assert_eq!(done.summary.configurations[0].sustainable_rate, Some(2000.0));
    for f in &done.files {
        assert!(std::fs::metadata(f).unwrap().len() > 200, "{} is too small", f.display());
    }
    // Each repetition starts one configuration later.
    let s = SweepSpec { reps: 3, ..fake.spec("os,os,os", &[1000.0], "ok") };
    let done = crate::run(&s, &AtomicBool::new(false)).unwrap();
    let order: Vec<(&str, u32)> = done.points.iter().map(|p| (p.configuration.as_str(), p.rep)).collect();
    let expected =
        [("os", 1), ("os#2", 1), ("os#3", 1), ("os#2", 2), ("os#3", 2), ("os", 2), ("os#3", 3), ("os", 3), ("os#2", 3)];
    assert_eq!(order, expected);
}

#[test]
fn failed_points_are_recorded_and_the_sweep_goes_on() {
    let fake = Fake::new("failures");
    let stop = AtomicBool::new(false);
    let (points, end) = sweep(&fake.spec("os", &[1000.0, 2000.0], "fail"), &stop);
    assert_eq!(end, SweepEnd::Completed);
    assert_eq!(points.len(), 2);
    for p in &points {
        let f = p.failure.as_deref().unwrap();
        assert!(f.contains("exit code 1") && f.contains("panicked: boom"), "{f}");
    }
    let (points, _) = sweep(&fake.spec("os", &[1000.0], "nojson"), &stop);
    assert!(points[0].failure.as_deref().unwrap().contains("not its JSON summary"), "{:?}", points[0].failure);
}

#[test]
fn a_hanging_engine_is_killed_at_the_deadline() {
    let fake = Fake::new("hang");
    let s = SweepSpec { grace: Duration::from_millis(300), ..fake.spec("os", &[1000.0], "hang") };
    let (points, end) = sweep(&s, &AtomicBool::new(false));
    assert_eq!(end, SweepEnd::Completed);
    let f = points[0].failure.as_deref().unwrap();
    assert!(f.contains("did not finish") && f.contains("killed"), "{f}");
}

#[test]
fn a_usage_error_ends_the_sweep() {
    let fake = Fake::new("usage");
    let (points, end) = sweep(&fake.spec("os", &[1000.0, 2000.0], "usage"), &AtomicBool::new(false));
    assert!(points.is_empty());
    assert!(matches!(&end, SweepEnd::Aborted(m) if m.contains("unexpected argument '--bogus'")), "{end:?}");
}

#[test]
fn a_policy_starts_the_middleware_against_the_engine_and_stops_it_with_sigint() {
    let fake = Fake::new("middleware");
    // Long enough for the fake middleware to answer within the window on a loaded machine.
    let s = SweepSpec { duration: Duration::from_secs(2), ..fake.spec("os,qs", &[1000.0], "ok") };
    preflight(&s).unwrap();
    let (points, end) = sweep(&s, &AtomicBool::new(false));
    assert_eq!(end, SweepEnd::Completed);
    assert_eq!(points[0].middleware_cpu, None);
    assert_eq!((points[0].middleware_active_share, points[0].middleware_first_active_s), (None, None));
    assert_eq!(points[1].failure, None);
    let cpu = points[1].middleware_cpu.expect("middleware CPU measured");
    assert!((0.0..=1.5).contains(&cpu), "{cpu}");
    // It said, on its own endpoint, that it never acted.
    assert_eq!((points[1].middleware_active_share, points[1].middleware_first_active_s), (Some(0.0), None));
    // The middleware reached the endpoint of that point's engine, and got SIGINT at the end.
    let engine = fake.log("engine.log");
    let port = engine.lines().nth(1).unwrap().split("--metrics-addr 127.0.0.1:").nth(1).unwrap();
    let port = port.split_whitespace().next().unwrap();
    assert_eq!(fake.log("middleware.log"), format!("engine http://127.0.0.1:{port} policy qs answered\nSIGINT\n"));
}

#[test]
fn a_middleware_that_dies_fails_its_point() {
    let fake = Fake::new("middleware-dies");
    std::fs::write(fake.dir.0.join("mw-fail"), b"").unwrap();
    let (points, _) = sweep(&fake.spec("qs", &[1000.0], "ok"), &AtomicBool::new(false));
    let f = points[0].failure.as_deref().unwrap();
    assert!(f.contains("middleware exited during the run (exit code 3)") && f.contains("policy crashed"), "{f}");
}

#[test]
fn ctrl_c_stops_the_running_point_and_results_are_still_written() {
    let fake = Fake::new("interrupt");
    let s = fake.spec("os", &[1000.0, 2000.0, 3000.0], "ok");
    let stop = Arc::new(AtomicBool::new(false));
    let raiser = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            stop.store(true, Ordering::SeqCst);
        })
    };
    let done = crate::run(&s, &stop).unwrap();
    raiser.join().unwrap();
    assert_eq!(done.end, SweepEnd::Interrupted);
    assert!(done.points.len() < 3);
    assert!(done.points.iter().all(|p| p.failure.is_none()));
    let report = std::fs::read_to_string(&done.files[2]).unwrap();
    assert!(report.contains("interrupted"));
}

#[test]
fn the_lab_reads_whether_and_since_when_the_middleware_acted_from_its_metrics() {
    let fake = Fake::new("middleware-acts");
    let s = SweepSpec { duration: Duration::from_secs(2), ..fake.spec("qs/activation=always", &[1000.0], "ok") };
    let (points, _) = sweep(&s, &AtomicBool::new(false));
    let p = &points[0];
    assert_eq!(p.failure, None);
    // The fake acts from 0.1 s after its start, well before the window (0.4 s to 2 s).
    let share = p.middleware_active_share.expect("a share");
    assert!(share > 0.9 && share <= 1.0, "{share}");
    // Started after the engine answered, it first acted 0.1 s later: after the SPE's start,
    // within the run.
    let first = p.middleware_first_active_s.expect("it acted");
    assert!((0.1..2.0).contains(&first), "{first}");
}

#[test]
fn a_middleware_that_cannot_listen_on_its_port_gets_another_attempt() {
    let fake = Fake::new("middleware-port");
    std::fs::write(fake.dir.0.join("mw-port-taken"), b"").unwrap();
    // Long enough for the fake to fail within the run on a loaded machine.
    let s = SweepSpec { duration: Duration::from_secs(2), ..fake.spec("qs", &[1000.0], "ok") };
    let (points, _) = sweep(&s, &AtomicBool::new(false));
    assert_eq!(points[0].failure, None, "the second attempt, on another port, ran");
    assert_eq!(points[0].middleware_active_share, Some(0.0));
    assert_eq!(fake.log("engine.log").lines().count(), 2, "the engine ran once per attempt");
}

#[test]
fn a_middleware_whose_metrics_do_not_answer_fails_its_point() {
    let fake = Fake::new("middleware-mute");
    std::fs::write(fake.dir.0.join("mw-no-metrics"), b"").unwrap();
    let (points, _) = sweep(&fake.spec("qs", &[1000.0], "ok"), &AtomicBool::new(false));
    let f = points[0].failure.as_deref().unwrap();
    assert!(f.contains("metrics did not answer") && f.contains("cannot say whether it acted"), "{f}");
    assert!(f.contains("/metrics"), "names the address: {f}");
}
