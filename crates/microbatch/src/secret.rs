//! The run's secrets: only the run's own processes talk to each other.
//!
//! The driver draws a **token** per executor (for that executor's connection to the driver) and
//! one **shuffle token** for the run (for the executors' connections to each other), 32 random
//! bytes each from the kernel (`/dev/urandom`). An executor receives its two tokens on its
//! standard input, a pipe from the driver that nothing else holds — never on its command line,
//! which `ps` shows to every user, nor in its environment, which other processes of the same user
//! can read in `/proc`. Every connection opens with a token as 64 hex digits and a newline; the
//! receiver reads exactly those 65 bytes, within a timeout, before anything else
//! ([`crate::gate`]).

use std::fmt;
use std::io::{self, Read};

use crate::Error;

/// Bytes of a token's proof on the wire: 64 hex digits and a newline.
pub const PROOF: usize = 65;

/// 32 random bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Token([u8; 32]);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never printed.
        f.write_str("Token(..)")
    }
}

impl Token {
    /// A fresh token from the kernel's random source.
    pub fn random() -> io::Result<Token> {
        let mut bytes = [0u8; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        Ok(Token(bytes))
    }

    /// What a connection opens with: the token in hex and a newline ([`PROOF`] bytes).
    pub fn proof(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(PROOF);
        for b in self.0 {
            out.extend_from_slice(format!("{b:02x}").as_bytes());
        }
        out.push(b'\n');
        out
    }

    /// The token a proof names; `None` for anything else.
    pub fn from_proof(proof: &[u8]) -> Option<Token> {
        if proof.len() != PROOF || proof[PROOF - 1] != b'\n' {
            return None;
        }
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let mut bytes = [0u8; 32];
        for (i, pair) in proof[..PROOF - 1].chunks(2).enumerate() {
            bytes[i] = (digit(pair[0])? << 4) | digit(pair[1])?;
        }
        Some(Token(bytes))
    }

    /// Whether `proof` so far can still be a proof: lowercase hex digits, a newline only last.
    pub fn may_be_proof(partial: &[u8]) -> bool {
        partial.iter().enumerate().all(|(i, &c)| {
            if i == PROOF - 1 {
                c == b'\n'
            } else {
                c.is_ascii_digit() || (b'a'..=b'f').contains(&c)
            }
        })
    }

    /// Compares in time independent of where the tokens differ.
    pub fn matches(&self, other: &Token) -> bool {
        self.0.iter().zip(other.0.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

/// What an executor is given: its own token and the run's shuffle token.
#[derive(Clone, Debug)]
pub struct Secrets {
    /// Proves this executor to the driver.
    pub link: Token,
    /// Proves a connection between the run's executors.
    pub shuffle: Token,
}

impl Secrets {
    /// As the driver writes them to an executor's standard input.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.link.proof();
        out.extend(self.shuffle.proof());
        out
    }

    /// Reads them from `input` (an executor's standard input): exactly two proofs.
    pub fn read(input: &mut impl Read) -> Result<Secrets, Error> {
        let mut buf = [0u8; 2 * PROOF];
        let bad = |why: String| {
            Error::Config(format!(
                "an executor reads its run's tokens on standard input from its driver ({why}); executors are started \
                 by `moirai run ... --threading micro-batch`, not by hand"
            ))
        };
        input.read_exact(&mut buf).map_err(|e| bad(e.to_string()))?;
        let (link, shuffle) = buf.split_at(PROOF);
        match (Token::from_proof(link), Token::from_proof(shuffle)) {
            (Some(link), Some(shuffle)) => Ok(Secrets { link, shuffle }),
            _ => Err(bad("what it read is not two tokens".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_only_their_proofs_match() {
        let (a, b) = (Token::random().unwrap(), Token::random().unwrap());
        assert!(!a.matches(&b), "two draws differ");
        let proof = a.proof();
        assert_eq!(proof.len(), PROOF);
        assert!(Token::may_be_proof(&proof) && Token::may_be_proof(&proof[..10]));
        assert!(Token::from_proof(&proof).is_some_and(|t| t.matches(&a)));
        assert!(!Token::may_be_proof(b"{\"epoch\":0"), "a JSON message is not a proof");
        assert!(!Token::may_be_proof(b"ab\n"), "a newline only last");
        assert!(Token::from_proof(&proof[..64]).is_none());
        assert_eq!(format!("{a:?}"), "Token(..)", "never printed");
        let secrets = Secrets { link: a.clone(), shuffle: b.clone() };
        let back = Secrets::read(&mut std::io::Cursor::new(secrets.encode())).unwrap();
        assert!(back.link.matches(&a) && back.shuffle.matches(&b));
        let e = Secrets::read(&mut std::io::Cursor::new(b"x".to_vec())).unwrap_err();
        assert!(e.to_string().contains("standard input"), "{e}");
    }
}
