//! The micro-batch wire hears only the run's own processes and reads nothing without a bound.
//! Real executor processes of the `moirai` binary, started by the driver (in this process);
//! attacks from this process, which is not an executor:
//!
//! - connections to an executor's shuffle port without the run's token — one that sends nothing,
//!   ones that send a plausible map output, one that streams 2 GiB without a newline — are closed
//!   and reported, the executor's memory stays where it was, and the committed output is byte for
//!   byte a clean run's;
//! - a peer that knows the token (read off the executors' standard input by a wrapper the test
//!   installs as the executor program: what a compromised or broken executor could do) and then
//!   streams 2 GiB without a newline, or sends a malformed line, loses its connection at the
//!   job's message limit, with the same memory and output.
//!
//! The 2 GiB are streamed from one 1 MiB buffer and stop where the executor closes the
//! connection.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use moirai_microbatch::{driver, DriverConfig, GroupSize, RunReport, Scheduling, WordCountJob};
use moirai_os::identity::listening_ports;
use moirai_workloads::wordcount::WordCountConfig;

const BIN: &str = env!("CARGO_BIN_EXE_moirai");

/// The tests run one at a time: they look for this process's children.
static SERIAL: Mutex<()> = Mutex::new(());

/// 40 000 sentences at 10 000/s in micro-batches of 50 ms: a paced run of 4 s.
const JOB: [&str; 11] = [
    "wordcount",
    "--sentences",
    "40000",
    "--rate",
    "10000",
    "--parallelism",
    "2",
    "--window-ms",
    "500",
    "--batch-interval",
    "50ms",
];

fn job() -> WordCountJob {
    let config =
        WordCountConfig { sentences: 40_000, rate: 10_000.0, parallelism: 2, window_ms: 500, ..Default::default() };
    WordCountJob::new(config, Duration::from_millis(50), None).expect("a valid job")
}

/// A directory of the test's own, removed with the guard.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("moirai-wire-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// What the executors wrote on stderr.
    fn logs(&self) -> String {
        let mut all = String::new();
        for e in std::fs::read_dir(&self.0).unwrap().flatten() {
            if e.file_name().to_string_lossy().ends_with(".log") {
                all.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
        all
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An executor program that is `moirai` with its stderr in `dir`, and that keeps a copy of the
/// run's shuffle token in `dir/shuffle-token` (the tokens arrive on standard input).
fn wrapper(dir: &Path) -> PathBuf {
    let script = dir.join("executor.sh");
    let d = dir.display();
    std::fs::write(
        &script,
        format!(
            "#!/bin/bash\nIFS= read -r link || exit 2\nIFS= read -r shuffle || exit 2\n\
             printf '%s\\n' \"$shuffle\" > {d}/shuffle-token\n\
             exec {BIN} \"$@\" 2>>{d}/executor-$$.log <<EOF\n$link\n$shuffle\nEOF\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    script
}

fn config(program: PathBuf) -> DriverConfig {
    DriverConfig {
        executors: 2,
        scheduling: Scheduling::Group(GroupSize::Fixed(4)),
        program,
        job_args: JOB.iter().map(|s| s.to_string()).collect(),
        paced: true,
        heartbeat_timeout: Duration::from_secs(3),
        checkpoint_every: 10,
        kill: None,
        verbose: false,
    }
}

fn committed(report: &RunReport) -> BTreeMap<(u64, usize), String> {
    report.outputs.iter().map(|(k, v)| (*k, v.get().to_string())).collect()
}

/// The committed output of a run nobody disturbs.
fn clean() -> &'static BTreeMap<(u64, usize), String> {
    static CLEAN: OnceLock<BTreeMap<(u64, usize), String>> = OnceLock::new();
    CLEAN.get_or_init(|| {
        let report = driver::run(&config(BIN.into()), &job()).expect("the clean run succeeds");
        assert!(report.recoveries.is_empty());
        committed(&report)
    })
}

/// PIDs of this process's children: the executors while a run is on.
fn children() -> Vec<u32> {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc");
    tasks
        .flatten()
        .flat_map(|t| {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            children.split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<u32>>()
        })
        .collect()
}

/// The executors of the run going on, with their shuffle ports, once both listen.
fn executors() -> Vec<(u32, u16)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found: Vec<(u32, u16)> =
            children().into_iter().filter_map(|pid| Some((pid, *listening_ports(pid).ok()?.first()?))).collect();
        if found.len() == 2 {
            return found;
        }
        assert!(Instant::now() < deadline, "the executors did not start listening");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn rss(pid: u32) -> u64 {
    moirai_os::proc::process_rss_bytes(pid).unwrap_or(0)
}

/// Streams up to 2 GiB of `fill` after `head` to `port` without a newline, while sampling the
/// executor's memory; returns the bytes the connection took and the largest RSS growth seen.
fn flood(pid: u32, port: u16, head: &[u8], fill: u8) -> (u64, u64) {
    let before = rss(pid);
    let (done, peak) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(before)));
    let sampler = {
        let (done, peak) = (done.clone(), peak.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                peak.fetch_max(rss(pid), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    let chunk = vec![fill; 1 << 20];
    let mut sent = 0u64;
    if s.write_all(head).is_ok() {
        sent += head.len() as u64;
        while sent < 2 << 30 {
            match s.write(&chunk) {
                Ok(n) => sent += n as u64,
                Err(_) => break,
            }
        }
    }
    // The executor closed it: reading ends too.
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = [0u8; 64];
    let closed = matches!(s.read(&mut buf), Ok(0) | Err(_));
    std::thread::sleep(Duration::from_millis(50));
    done.store(true, Ordering::SeqCst);
    sampler.join().unwrap();
    assert!(closed, "the executor closed the connection");
    (sent, peak.load(Ordering::SeqCst).saturating_sub(before))
}

/// A map output as an executor would push it (without a token first).
fn plausible(batch: u64, partition: usize) -> String {
    format!(
        "{{\"epoch\":0,\"batch\":{batch},\"map_partition\":0,\"reduce_partition\":{partition},\
         \"data\":[[0,\"injected\",1000000]]}}\n"
    )
}

const MIB: u64 = 1 << 20;

#[test]
fn outsiders_are_refused_and_change_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let expected = clean();
    let dir = TempDir::new("outsider");
    let program = wrapper(&dir.0);
    let run = std::thread::spawn(move || driver::run(&config(program), &job()));
    let execs = executors();
    // One that sends nothing; plausible map outputs for every partition and many micro-batches.
    let silent = TcpStream::connect(("127.0.0.1", execs[0].1)).unwrap();
    let mut plausible_sent = 0;
    for b in 0..20 {
        for &(_, port) in &execs {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                if s.write_all(plausible(b * 4, (b % 2) as usize).as_bytes()).is_ok() {
                    plausible_sent += 1;
                }
            }
        }
    }
    assert!(plausible_sent >= 20, "the test reached the shuffle ports");
    // 2 GiB without a newline, a plausible message's start first.
    let (pid, port) = execs[1];
    let head = b"{\"epoch\":0,\"batch\":8,\"map_partition\":0,\"reduce_partition\":0,\"data\":\"";
    let (sent, grew) = flood(pid, port, head, b'a');
    eprintln!("outsider: 2 GiB offered, {sent} bytes taken, executor RSS grew at most {} KiB", grew / 1024);
    assert!(sent < 64 * MIB, "refused long before 2 GiB: {sent} bytes taken");
    assert!(grew < 8 * MIB, "the executor's memory stayed where it was: grew {} KiB", grew / 1024);
    // The silent one is closed within the token timeout.
    silent.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 8];
    assert!(matches!((&silent).read(&mut buf), Ok(0) | Err(_)));
    assert!(started.elapsed() < Duration::from_secs(14), "closed by the executor");
    let report = run.join().unwrap().expect("the run succeeds");
    assert!(report.recoveries.is_empty(), "no executor was lost: {:?}", report.recoveries);
    assert_eq!(&committed(&report), expected, "the output is byte for byte a clean run's");
    let logs = dir.logs();
    assert!(logs.contains("refused a shuffle connection from 127.0.0.1:"), "refusals are reported:\n{logs}");
    assert!(logs.contains("what it sent is not a token"), "{logs}");
    assert!(logs.lines().count() < 20, "a flood is reported in a few lines:\n{logs}");
}

#[test]
fn a_peer_past_the_token_is_cut_off_at_the_message_limit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let expected = clean();
    let dir = TempDir::new("peer");
    let program = wrapper(&dir.0);
    let run = std::thread::spawn(move || driver::run(&config(program), &job()));
    let execs = executors();
    let token = std::fs::read(dir.0.join("shuffle-token")).expect("the wrapper kept the shuffle token");
    assert_eq!(token.len(), 65, "64 hex digits and a newline");
    // A malformed line after the token.
    let mut bad = TcpStream::connect(("127.0.0.1", execs[0].1)).unwrap();
    bad.write_all(&token).unwrap();
    bad.write_all(b"{\"epoch\": nonsense}\n").unwrap();
    bad.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let mut buf = [0u8; 8];
    assert!(matches!(bad.read(&mut buf), Ok(0) | Err(_)), "a malformed message ends its connection");
    // 2 GiB without a newline after the token.
    let (pid, port) = execs[1];
    let mut head = token.clone();
    head.extend_from_slice(b"{\"epoch\":0,\"batch\":8,\"map_partition\":0,\"reduce_partition\":1,\"data\":\"");
    let (sent, grew) = flood(pid, port, &head, b'a');
    eprintln!("peer: 2 GiB offered, {sent} bytes taken, executor RSS grew at most {} KiB", grew / 1024);
    let limit = moirai_microbatch::limits::WireLimits::of(&job()).shuffle as u64;
    assert!(sent < limit + 32 * MIB, "cut off near the limit of {limit} bytes: {sent} bytes taken");
    assert!(grew < 8 * MIB, "the executor's memory stayed within a few MiB: grew {} KiB", grew / 1024);
    let report = run.join().unwrap().expect("the run succeeds");
    assert!(report.recoveries.is_empty(), "no executor was lost: {:?}", report.recoveries);
    assert_eq!(&committed(&report), expected, "the output is byte for byte a clean run's");
    let logs = dir.logs();
    assert!(logs.contains(&format!("a message longer than {limit} bytes")), "the cut is reported:\n{logs}");
    assert!(logs.contains("a malformed message"), "{logs}");
    assert!(logs.contains("closed the shuffle connection from 127.0.0.1:"), "with the peer:\n{logs}");
}
