//! The gate of a listening port: a connection is read nothing but its token's proof
//! ([`crate::secret`]) — 65 bytes, within [`AUTH_TIMEOUT`] — before it is handed on; one that
//! proves none of the gate's tokens is closed and reported.
//!
//! One thread watches the listener and every connection still waiting for its proof (`poll(2)`),
//! so a crowd of connections that send nothing costs descriptors for a few seconds, never a
//! thread each; at most [`MAX_PENDING`] wait at once (a new one beyond closes the one waiting
//! longest). Refusals are reported through [`Incidents`]: the first at once, then at most one line
//! every few seconds with how many more there were, so a flood cannot fill a log.

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use moirai_os::poll::{poll, PollFd};

use crate::limits::{AUTH_TIMEOUT, MAX_PENDING};
use crate::secret::{Token, PROOF};

/// A connection that proved a token.
pub struct Admitted {
    /// The connection, blocking again, positioned after the proof.
    pub stream: TcpStream,
    /// Where it comes from.
    pub peer: SocketAddr,
    /// Which of the gate's tokens it proved.
    pub token: usize,
}

struct Pending {
    stream: TcpStream,
    peer: SocketAddr,
    proof: [u8; PROOF],
    got: usize,
    since: Instant,
}

/// A listener whose connections must prove a token first.
pub struct Gate {
    listener: TcpListener,
    tokens: Vec<Token>,
    pending: Vec<Pending>,
    /// (peer, why) of the connections refused since the last [`Gate::take_refused`], the first
    /// [`Gate::LISTED`] of them; how many more.
    refused: Vec<(SocketAddr, String)>,
    unlisted: u64,
}

impl Gate {
    /// A gate on `listener` admitting connections that prove one of `tokens`.
    pub fn new(listener: TcpListener, tokens: Vec<Token>) -> std::io::Result<Gate> {
        listener.set_nonblocking(true)?;
        Ok(Gate { listener, tokens, pending: Vec::new(), refused: Vec::new(), unlisted: 0 })
    }

    /// Refusals listed between two [`Gate::take_refused`], at most (the rest are counted).
    pub const LISTED: usize = 64;

    /// Waits up to `wait` for a connection that proves a token.
    pub fn next(&mut self, wait: Duration) -> Option<Admitted> {
        let deadline = Instant::now() + wait;
        loop {
            let now = Instant::now();
            // Wake for the deadline, or for the first pending proof to time out.
            let first_due = self.pending.iter().map(|p| p.since + AUTH_TIMEOUT).min();
            let until = first_due.map_or(deadline, |d| d.min(deadline));
            let mut fds = vec![PollFd::new(self.listener.as_raw_fd(), true, false)];
            fds.extend(self.pending.iter().map(|p| PollFd::new(p.stream.as_raw_fd(), true, false)));
            if poll(&mut fds, until.saturating_duration_since(now)).is_err() {
                std::thread::sleep(Duration::from_millis(10));
            }
            // Proofs first (indices stay valid), then new connections.
            let ready: Vec<usize> = (0..self.pending.len()).filter(|&i| fds[i + 1].ready()).collect();
            for i in ready.into_iter().rev() {
                if let Some(admitted) = self.read_proof(i) {
                    return Some(admitted);
                }
            }
            if fds[0].readable() {
                self.accept();
            }
            // After the reads: a proof that arrived while this thread was not running counts.
            self.expire();
            if Instant::now() >= deadline {
                return None;
            }
        }
    }

    /// The connections refused since the last call, (peer, why), and how many more were.
    pub fn take_refused(&mut self) -> (Vec<(SocketAddr, String)>, u64) {
        (std::mem::take(&mut self.refused), std::mem::take(&mut self.unlisted))
    }

    fn refused(&mut self, peer: SocketAddr, why: String) {
        if self.refused.len() < Self::LISTED {
            self.refused.push((peer, why));
        } else {
            self.unlisted += 1;
        }
    }

    fn refuse(&mut self, i: usize, why: String) {
        let p = self.pending.swap_remove(i);
        self.refused(p.peer, why);
    }

    fn expire(&mut self) {
        let now = Instant::now();
        while let Some(i) = self.pending.iter().position(|p| now - p.since >= AUTH_TIMEOUT) {
            let got = self.pending[i].got;
            self.refuse(i, format!("no token within {AUTH_TIMEOUT:?} ({got} bytes of {PROOF})"));
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    if self.pending.len() >= MAX_PENDING {
                        let oldest = (0..self.pending.len()).min_by_key(|&i| self.pending[i].since).unwrap_or(0);
                        self.refuse(oldest, format!("more than {MAX_PENDING} connections waited for their token"));
                    }
                    self.pending.push(Pending { stream, peer, proof: [0; PROOF], got: 0, since: Instant::now() });
                }
                Err(e) if e.kind() == ErrorKind::Interrupted || e.kind() == ErrorKind::ConnectionAborted => {}
                // WouldBlock: none left. Out of descriptors: the waiting ones time out and free
                // theirs; the kernel keeps the rest in the backlog meanwhile.
                Err(_) => return,
            }
        }
    }

    /// Reads what arrived of pending connection `i`'s proof; admits or refuses it when complete.
    fn read_proof(&mut self, i: usize) -> Option<Admitted> {
        let p = &mut self.pending[i];
        let got = p.got;
        match p.stream.read(&mut p.proof[got..]) {
            Ok(0) => {
                self.refuse(i, format!("closed after {got} bytes, before a token"));
                return None;
            }
            Ok(n) => p.got += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => return None,
            Err(e) => {
                self.refuse(i, format!("failed before a token: {e}"));
                return None;
            }
        }
        if !Token::may_be_proof(&p.proof[..p.got]) {
            self.refuse(i, "what it sent is not a token".into());
            return None;
        }
        if p.got < PROOF {
            return None;
        }
        let proved = Token::from_proof(&p.proof).and_then(|t| self.tokens.iter().position(|mine| mine.matches(&t)));
        let Some(token) = proved else {
            self.refuse(i, "a token that is not this run's".into());
            return None;
        };
        let p = self.pending.swap_remove(i);
        if p.stream.set_nonblocking(false).is_err() {
            self.refused(p.peer, "cannot be read after its token".into());
            return None;
        }
        Some(Admitted { stream: p.stream, peer: p.peer, token })
    }
}

/// Reports of one kind of incident on stderr: the first at once, then at most one every
/// [`Incidents::EVERY`], counting those it did not print.
pub struct Incidents {
    prefix: String,
    state: Mutex<(Option<Instant>, u64)>,
}

impl Incidents {
    /// Least time between two printed reports.
    pub const EVERY: Duration = Duration::from_secs(10);

    /// Reports prefixed with `prefix` (`moirai micro-batch-executor 1`).
    pub fn new(prefix: impl Into<String>) -> Incidents {
        Incidents { prefix: prefix.into(), state: Mutex::new((None, 0)) }
    }

    /// Reports `what`, or counts it when a report was printed less than [`Self::EVERY`] ago.
    pub fn report(&self, what: &str) {
        self.report_many(what, 1);
    }

    /// Reports `what` and counts `more` like it that were not listed.
    pub fn report_many(&self, what: &str, count: u64) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if state.0.is_some_and(|at| now - at < Self::EVERY) {
            state.1 += count;
            return;
        }
        state.1 += count.saturating_sub(1);
        let more = match state.1 {
            0 => String::new(),
            n => format!(" ({n} more since the last report)"),
        };
        eprintln!("{}: {what}{more}", self.prefix);
        *state = (Some(now), 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn only_a_proven_token_passes_and_nothing_is_read_beyond_it() {
        let (mine, other) = (Token::random().unwrap(), Token::random().unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut gate = Gate::new(listener, vec![other.clone(), mine.clone()]).unwrap();
        let mut json = TcpStream::connect(addr).unwrap();
        json.write_all(b"{\"epoch\":0,\"batch\":1}\n").unwrap();
        let mut wrong = TcpStream::connect(addr).unwrap();
        wrong.write_all(&Token::random().unwrap().proof()).unwrap();
        let _silent = TcpStream::connect(addr).unwrap();
        let mut good = TcpStream::connect(addr).unwrap();
        good.write_all(&mine.proof()).unwrap();
        good.write_all(b"after\n").unwrap();
        let mut admitted = gate.next(Duration::from_secs(5)).expect("the proven connection is admitted");
        assert_eq!(admitted.token, 1);
        let mut after = [0u8; 6];
        admitted.stream.read_exact(&mut after).unwrap();
        assert_eq!(&after, b"after\n", "the gate read the proof and nothing more");
        // The silent one is refused after the timeout; the others at once.
        assert!(gate.next(AUTH_TIMEOUT + Duration::from_secs(1)).is_none());
        let refused: Vec<String> = gate.take_refused().0.into_iter().map(|(_, why)| why).collect();
        assert_eq!(refused.len(), 3, "{refused:?}");
        assert!(refused.iter().any(|w| w.contains("not a token")), "{refused:?}");
        assert!(refused.iter().any(|w| w.contains("not this run's")), "{refused:?}");
        assert!(refused.iter().any(|w| w.contains("no token within")), "{refused:?}");
        let mut buf = [0u8; 1];
        json.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert!(matches!(json.read(&mut buf), Ok(0) | Err(_)), "a refused connection is closed");
    }
}
