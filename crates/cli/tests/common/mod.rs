//! What the tests of the `moirai` binary share: the binary, a run of it, an output directory.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The `moirai` binary under test.
pub const MOIRAI: &str = env!("CARGO_BIN_EXE_moirai");

/// An output directory under the temp dir, removed on drop (also when the test fails).
pub struct OutDir(pub PathBuf);

impl OutDir {
    /// `moirai-cli-<name>-<pid>`, emptied first.
    pub fn new(name: &str) -> OutDir {
        let p = std::env::temp_dir().join(format!("moirai-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        OutDir(p)
    }
}

impl Drop for OutDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `moirai ARGS` to its end with no stdin.
pub fn moirai(args: &[&str]) -> Output {
    Command::new(MOIRAI).args(args).stdin(Stdio::null()).output().expect("moirai runs")
}
