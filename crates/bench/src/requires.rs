//! What some tests need beyond the Rust toolchain — a JDK and Maven for the real Flink and Storm
//! jobs, a headless Chromium for the dashboard — and how a test without it skips: it says plainly
//! what it skips and what to install, and passes. With `MOIRAI_REQUIRE_ALL=1` (which `.ci/run`
//! sets after installing everything) a missing tool fails the test instead, so CI runs them all.

use std::path::PathBuf;

/// Set to `1` (CI does): a test whose tool is missing fails instead of skipping.
pub const REQUIRE_ALL: &str = "MOIRAI_REQUIRE_ALL";

/// An executable named `name` on PATH.
pub fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// A JDK (`java`, `jcmd`) and Maven (`mvn`), or what to install.
pub fn jdk_and_maven() -> Result<(), String> {
    let missing: Vec<&str> = ["java", "jcmd", "mvn"].into_iter().filter(|t| on_path(t).is_none()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "needs a JDK 17 and Maven ({} not on PATH): apt-get install openjdk-17-jdk-headless maven",
        missing.join(", ")
    ))
}

/// A headless Chromium on PATH, or what to install.
pub fn chromium() -> Result<PathBuf, String> {
    ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"].into_iter().find_map(on_path).ok_or_else(
        || {
            "needs a headless Chromium (chromium, chromium-browser or google-chrome on PATH): apt-get install chromium"
                .into()
        },
    )
}

/// `found`, or — when the tool is missing — `None` after saying `SKIPPED <test>: <what to
/// install>` on stderr; with [`REQUIRE_ALL`] set, a panic with the same words instead.
pub fn or_skip<T>(test: &str, found: Result<T, String>) -> Option<T> {
    match found {
        Ok(t) => Some(t),
        Err(what) if std::env::var(REQUIRE_ALL).is_ok_and(|v| v == "1") => {
            panic!("{test} {what} ({REQUIRE_ALL}=1 turns this skip into a failure)")
        }
        Err(what) => {
            eprintln!("SKIPPED {test}: {what}");
            None
        }
    }
}
