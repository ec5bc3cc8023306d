//! The attach protocol against a real JVM: a thread dump without jcmd, the first one starting
//! the JVM's attach listener (past a stale socket file at its pid), the next ones over the
//! listener already running.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use moirai_middleware::driver::hotspot_attach;
use moirai_middleware::driver::jvm::parse_thread_dump;

/// A JVM that names one thread and sleeps; killed by its pid when dropped, and its attach socket
/// (which a killed JVM leaves behind) removed, also when the test fails.
struct Jvm(Child);

impl Drop for Jvm {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(format!("/tmp/.java_pid{}", self.0.id()));
    }
}

fn start_jvm(dir: &Path) -> Jvm {
    let source = dir.join("Probe.java");
    std::fs::write(
        &source,
        "public class Probe { public static void main(String[] a) throws Exception {\n\
         Thread t = new Thread(() -> { try { Thread.sleep(600_000); } catch (InterruptedException e) {} },\n\
         \"moirai-attach-probe\"); t.start(); System.out.println(\"ready\"); t.join(); } }\n",
    )
    .unwrap();
    // A single-file program (Java 11+), run from `dir`: its attach trigger file goes there.
    let mut child = Command::new("java")
        .arg("-Xmx64m")
        .arg(&source)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("cannot run `java` (a JDK 11 or later is needed for this test: apt install openjdk-17-jdk-headless)");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the probe JVM did not start");
    Jvm(child)
}

#[test]
fn a_thread_dump_over_the_attach_socket_names_the_jvms_threads() {
    let dir = std::env::temp_dir().join(format!("moirai-attach-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let jvm = start_jvm(&dir);
    let pid = jvm.0.id();
    // A killed JVM's socket file at this pid, nobody listening on it (pids are reused): the first
    // dump must not take it for this JVM's listener.
    let socket = format!("/tmp/.java_pid{pid}");
    assert!(!Path::new(&socket).exists(), "{socket} exists before the test");
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(Path::new(&socket).exists());
    let calm = AtomicBool::new(false);
    for round in 0..2 {
        let start = Instant::now();
        let dump = hotspot_attach::jcmd(pid, "Thread.print", Duration::from_secs(30), &calm)
            .unwrap_or_else(|e| panic!("round {round}: {} (connected: {})", e.message, e.connected));
        let threads = parse_thread_dump(&dump);
        let (_, tid) = threads
            .iter()
            .find(|(name, _)| name == "moirai-attach-probe")
            .unwrap_or_else(|| panic!("round {round}: no probe thread in {threads:?}"));
        assert!(Path::new(&format!("/proc/{pid}/task/{tid}")).exists(), "tid {tid} is not the JVM's");
        eprintln!("round {round}: {} threads in {:?}", threads.len(), start.elapsed());
    }
    // The trigger file is gone; the socket stays for the next client (as after jcmd).
    assert!(!dir.join(format!(".attach_pid{pid}")).exists());
    // An unknown command is the JVM's error, after it took the connection.
    let e = hotspot_attach::jcmd(pid, "No.such.command", Duration::from_secs(30), &calm).unwrap_err();
    assert!(e.connected && e.message.contains("No.such.command"), "{e:?}");
    // A stopping caller does not wait for the dump.
    let start = Instant::now();
    let e = hotspot_attach::jcmd(pid, "Thread.print", Duration::from_secs(30), &AtomicBool::new(true)).unwrap_err();
    assert!(e.message.contains("stopping") && start.elapsed() < Duration::from_secs(5), "{e:?}");
    drop(jvm);
    assert!(!Path::new(&socket).exists());
    let _ = std::fs::remove_dir_all(&dir);
}
