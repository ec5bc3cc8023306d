//! Where the library crates' logs go: they report through `tracing` and never print; the CLI
//! shows what they report on stderr, one plain line per event (no time, level or target), as a
//! user of `moirai run` has always read it.

/// Installs the stderr subscriber for events at `info` level and above (once; later calls do
/// nothing).
pub fn install() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .without_time()
        .with_target(false)
        .with_level(false)
        .with_max_level(tracing::Level::INFO)
        .try_init();
}
