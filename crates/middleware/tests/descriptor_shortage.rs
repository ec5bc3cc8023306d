//! A middleware out of file descriptors does not mistake that for an SPE that went away: finding
//! the listener of a port is an error, not "nobody listens", and the threads of an engine keep
//! their mapping of the last round. Run in a child process (this test binary, under `ulimit -n
//! 64`) that uses up its own descriptors, so that the other tests keep theirs.

use std::process::Command;

use moirai_middleware::driver::jvm::any_gone;
use moirai_middleware::driver::moirai::{to_spe_topology_with, EngineTopology};
use moirai_middleware::driver::threads::ThreadCensus;
use moirai_os::identity::listening_pid;
use moirai_os::limits::is_out_of_descriptors;
use moirai_os::sighting::SeenThreads;
use moirai_sched::ThreadRef;

/// The marker the child prints when every check passed.
const PASSED: &str = "descriptor shortage checks passed";

#[test]
fn out_of_descriptors_is_an_error_that_keeps_the_last_mapping() {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("bash")
        .args(["-c", "ulimit -n 64 && exec \"$0\" --exact shortage_child --ignored --nocapture --test-threads=1"])
        .arg(exe)
        .env("MOIRAI_SHORTAGE_CHILD", "1")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains(PASSED), "the child failed:\n{text}");
}

#[test]
#[ignore = "helper run as a child process by out_of_descriptors_is_an_error_that_keeps_the_last_mapping"]
fn shortage_child() {
    if std::env::var_os("MOIRAI_SHORTAGE_CHILD").is_none() {
        eprintln!("shortage_child is only meaningful as the child of the shortage test; nothing to do");
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (pid, tid) = (std::process::id(), moirai_os::proc::current_tid());
    // An engine of one operator on this thread, as its /topology would say.
    let topology: EngineTopology = serde_json::from_value(serde_json::json!({
        "pid": pid, "threading": "dedicated", "queries": ["q"],
        "logical": {"nodes": [{"query": "q", "name": "op", "kind": "operator"}], "edges": []},
        "physical": [{"id": 0, "query": "q", "name": "op (1/1)", "logical": [0], "instance": 0, "tid": tid}],
        "channels": []
    }))
    .unwrap();

    // With descriptors: the listener is found and the thread is mapped (through a census of
    // the process's threads, as the drivers read them round after round).
    assert_eq!(listening_pid(port).unwrap(), Some(pid));
    let mut census = ThreadCensus::new();
    assert!(census.refresh(pid));
    let first = to_spe_topology_with("e", &topology, |p, t| census.start_ticks(p, t));
    assert!(census.take_shortage().is_none());
    let mapped: Vec<ThreadRef> = first.physical[0].threads.clone();
    assert_eq!(mapped.len(), 1, "the operator's thread is mapped");
    // A JVM driver's check of its mapped threads, with the thread's file opened while it could.
    let mut seen = SeenThreads::new();
    assert!(!any_gone(&mut seen, pid, &mapped));

    // Every descriptor used up.
    let mut hold = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        hold.push(f);
    }
    assert!(!hold.is_empty());
    let e = listening_pid(port).expect_err("no descriptor to read /proc with: an error, not \"nobody listens\"");
    assert!(is_out_of_descriptors(&e), "{e}");
    // A listing without descriptors is no change: the drivers keep their topology and mapping.
    // (A thread born and ended moves the process's stamp: the census must list to know.)
    std::thread::spawn(|| {}).join().unwrap();
    assert!(!census.refresh(pid), "a shortage is not a change of threads");
    assert!(census.take_shortage().is_some_and(|e| is_out_of_descriptors(&e)), "the shortage is reported");
    let kept = to_spe_topology_with("e", &topology, |p, t| census.start_ticks(p, t));
    assert_eq!(kept.physical[0].threads, mapped, "the thread keeps its mapping of the last round");
    let mut fresh = ThreadCensus::new();
    let lost = to_spe_topology_with("e", &topology, |p, t| fresh.start_ticks(p, t));
    assert!(lost.physical[0].threads.is_empty(), "without a last mapping nothing is guessed");
    assert!(fresh.short(), "and the shortage is seen");
    assert!(!any_gone(&mut seen, pid, &mapped), "a thread vouched for by its open file needs no descriptor");
    assert!(!any_gone(&mut SeenThreads::new(), pid, &mapped), "a JVM driver's thread map is kept too");

    // Descriptors back: read afresh.
    drop(hold);
    assert_eq!(listening_pid(port).unwrap(), Some(pid));
    let mut again = ThreadCensus::new();
    let read = to_spe_topology_with("e", &topology, |p, t| again.start_ticks(p, t));
    assert!(!again.short() && read.physical[0].threads == mapped);
    drop(listener);
    println!("{PASSED}");
}
