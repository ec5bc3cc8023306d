//! Starting a run's executors: the processes, their tokens, and the connections that prove them.
//!
//! The driver listens on a loopback port, draws a token per executor and the run's shuffle token
//! ([`crate::secret`]), and starts each executor with its two tokens on its standard input. An
//! executor's connection is admitted only with a token ([`crate::gate`]), and the token — not
//! anything the executor says — tells which of the driver's processes it is: a process that
//! learns an executor's pid cannot take its place. A connection that proves no token is closed
//! and reported, and the run goes on; an executor that does not connect within 30 s, or exits,
//! fails the run.

use std::io::{BufReader, BufWriter, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use crate::gate::{Gate, Incidents};
use crate::job::Job;
use crate::limits::{WireLimits, HELLO, STALL_TIMEOUT};
use crate::protocol::{self, receive, receive_by, ToDriver};
use crate::secret::{Secrets, Token};
use crate::Error;

/// How long the executors may take to start and connect.
const CONNECT_WITHIN: Duration = Duration::from_secs(30);

/// An executor process; dropping it kills it by PID and reaps it.
pub(crate) struct ExecutorProcess {
    child: Child,
}

impl ExecutorProcess {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, as `kill -9 PID`.
    pub(crate) fn kill(&mut self) {
        // std sends SIGKILL by PID only while the child is not reaped, so never to a reused PID.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits up to `grace` for the process to exit by itself, then kills it.
    pub(crate) fn stop(&mut self, grace: Duration) {
        let until = Instant::now() + grace;
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
    }
}

impl Drop for ExecutorProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}

/// What an executor's connection delivers to the driver's loop.
pub(crate) enum Event {
    Message(usize, ToDriver),
    Closed(usize, String),
}

/// The driver's side of one executor.
pub(crate) struct Link {
    pub(crate) process: ExecutorProcess,
    pub(crate) writer: BufWriter<std::net::TcpStream>,
    pub(crate) last_seen: Instant,
}

/// The started executors: their links, their shuffle addresses, and their messages.
pub(crate) struct Started {
    pub(crate) links: Vec<Option<Link>>,
    pub(crate) peers: Vec<String>,
    pub(crate) events: Receiver<Event>,
}

fn token() -> Result<Token, Error> {
    Token::random().map_err(|e| Error::Io("draw the run's tokens from /dev/urandom".into(), e))
}

/// What to start: `executors` processes of `program` with the hidden `micro-batch-executor`
/// subcommand and the job's description, `job_args`.
pub(crate) struct Executors<'a> {
    pub(crate) program: &'a Path,
    pub(crate) job_args: &'a [String],
    pub(crate) executors: usize,
}

/// Starts the executors of `job` and waits until each proved its token and said hello; their
/// messages are read with `limits`.
pub(crate) fn start(config: Executors<'_>, job: &dyn Job, limits: WireLimits) -> Result<Started, Error> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| Error::Io("bind the driver port".into(), e))?;
    let addr = listener.local_addr().map_err(|e| Error::Io("read the driver port".into(), e))?;
    let shuffle = token()?;
    let tokens = (0..config.executors).map(|_| token()).collect::<Result<Vec<_>, _>>()?;
    let mut processes = Vec::new();
    for (id, link) in tokens.iter().enumerate() {
        let mut child = Command::new(config.program)
            .arg("micro-batch-executor")
            .arg("--driver")
            .arg(addr.to_string())
            .arg("--id")
            .arg(id.to_string())
            .arg("--")
            .args(config.job_args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| Error::Io(format!("start executor {id} ({})", config.program.display()), e))?;
        let secrets = Secrets { link: link.clone(), shuffle: shuffle.clone() };
        // A child that died already shows as an exit below.
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(&secrets.encode());
        }
        processes.push(Some(ExecutorProcess { child }));
    }
    let mut gate = Gate::new(listener, tokens).map_err(|e| Error::Io("configure the driver port".into(), e))?;
    let incidents = Incidents::new("micro-batch: driver");
    let (tx, events) = mpsc::channel();
    let mut links: Vec<Option<Link>> = (0..config.executors).map(|_| None).collect();
    let mut peers = vec![String::new(); config.executors];
    let deadline = Instant::now() + CONNECT_WITHIN;
    while links.iter().any(Option::is_none) {
        for (id, p) in processes.iter_mut().enumerate() {
            if let Some(Ok(Some(status))) = p.as_mut().map(|p| p.child.try_wait()) {
                return Err(Error::Protocol(format!(
                    "executor {id} exited ({status}) before it connected; its error is above"
                )));
            }
        }
        if Instant::now() > deadline {
            return Err(Error::Protocol(format!("executors did not connect within {CONNECT_WITHIN:?}")));
        }
        let admitted = gate.next(Duration::from_millis(50));
        let (refused, more) = gate.take_refused();
        for (i, (peer, why)) in refused.iter().enumerate() {
            let count = if i + 1 == refused.len() { 1 + more } else { 1 };
            incidents.report_many(&format!("refused a connection from {peer}: {why}"), count);
        }
        let Some(a) = admitted else { continue };
        let id = a.token;
        let Some(process) = processes[id].take() else {
            // Its token was used already: not by the executor it was given to.
            incidents.report(&format!("refused a second connection with executor {id}'s token from {}", a.peer));
            continue;
        };
        let _ = a.stream.set_nodelay(true);
        let reading = a.stream.try_clone().map_err(|e| Error::Io("clone a connection".into(), e))?;
        let mut reader = BufReader::new(reading);
        // The hello follows the token at once: whole within 10 s (checked every second).
        let _ = a.stream.set_read_timeout(Some(Duration::from_secs(1)));
        let hello = receive_by::<ToDriver>(&mut reader, HELLO, Some(Instant::now() + STALL_TIMEOUT))
            .map_err(|e| Error::Protocol(format!("executor {id} said no hello: {e}")))?;
        let _ = a.stream.set_read_timeout(Some(STALL_TIMEOUT));
        let Some(ToDriver::Hello { id: said, shuffle_addr, job: built }) = hello else {
            return Err(Error::Protocol(format!("executor {id} did not start with hello")));
        };
        if said != id {
            return Err(Error::Protocol(format!("executor {id} calls itself executor {said}")));
        }
        let shape = [job.batches(), job.map_partitions() as u64, job.reduce_partitions() as u64];
        if built != shape {
            return Err(Error::Protocol(format!(
                "executor {id} built another job from the job arguments (micro-batches, map and reduce partitions: \
                 {built:?}, the driver's {shape:?})"
            )));
        }
        peers[id] = shuffle_addr;
        let (tx, peer) = (tx.clone(), a.peer);
        std::thread::spawn(move || loop {
            let event = match receive::<ToDriver>(&mut reader, limits.report) {
                Ok(Some(m)) => Event::Message(id, m),
                Ok(None) => Event::Closed(id, "its connection ended".into()),
                Err(e) => {
                    if protocol::is_violation(&e) {
                        // Always said: the executor is replaced as if it were lost.
                        eprintln!("micro-batch: closed the connection of executor {id} ({peer}): {e}");
                    }
                    Event::Closed(id, format!("its connection failed: {e}"))
                }
            };
            let closed = matches!(event, Event::Closed(..));
            if tx.send(event).is_err() || closed {
                return;
            }
        });
        links[id] = Some(Link { process, writer: BufWriter::new(a.stream), last_seen: Instant::now() });
    }
    // The port closes with the gate: nothing connects to the driver after the start.
    Ok(Started { links, peers, events })
}
