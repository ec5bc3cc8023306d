//! The driver factory: the one place that names the drivers. The daemon asks it for the driver
//! of every configured SPE and knows them only as [`Driver`]s.

use std::path::Path;

use crate::config::{DriverKind, SpeConfig};
use crate::driver::{Driver, DriverError};

/// Makes the driver of every configured SPE: the one place that names the drivers. `state_file`
/// is the daemon's state file (the moirai driver keeps its per-engine locks beside it).
pub fn open(spes: &[SpeConfig], state_file: &Path) -> Result<Vec<Box<dyn Driver>>, (String, DriverError)> {
    // Per-engine locks of middlewares that were killed: nobody holds them any more.
    crate::driver::moirai::remove_stale_locks();
    let mut drivers: Vec<Box<dyn Driver>> = Vec::new();
    for spe in spes {
        let bad = |e: DriverError| (spe.name.clone(), e);
        drivers.push(match spe.driver {
            DriverKind::Moirai => {
                let pins = crate::driver::moirai::Pins {
                    pid: spe.pid,
                    uid: spe.uid,
                    exe: spe.exe.clone(),
                    allow_owner_change: spe.allow_owner_change,
                };
                Box::new(
                    crate::driver::moirai::MoiraiDriver::new(&spe.name, &spe.url, pins, state_file.to_path_buf())
                        .map_err(bad)?,
                )
            }
            DriverKind::Flink => {
                let driver = crate::driver::flink::FlinkDriver::new(&spe.name, &spe.url, spe.pid)
                    .and_then(|d| d.prometheus(spe.prometheus.as_deref()))
                    .map_err(bad)?;
                let source_queue = spe.source_queue.unwrap_or_default();
                Box::new(
                    driver
                        .queue(spe.queue.unwrap_or_default())
                        .source_queue(source_queue)
                        .taskmanager(spe.taskmanager.clone()),
                )
            }
            DriverKind::Storm => {
                let dir = spe.metrics_dir.as_deref().unwrap_or(Path::new(""));
                let driver = crate::driver::storm::StormDriver::new(&spe.name, dir, spe.pid).map_err(bad)?;
                Box::new(driver.source_queue(spe.source_queue.unwrap_or_default()))
            }
        });
    }
    Ok(drivers)
}
