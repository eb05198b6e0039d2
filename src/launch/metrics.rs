//! The metrics a launch asks for (`--metrics`): a board with a slot per worker, and the
//! exporter that serves it.

use rusty_metrics::{Board, Exporter};
use rusty_runtime::{RuntimeConfig, Worker};

use super::{Launch, LaunchError};

/// Start the metrics endpoint `launch` asks for, with a board for `workers` that `cfg`
/// hands them.
pub(super) fn export(
    launch: &Launch,
    workers: &[Worker],
    cfg: &mut RuntimeConfig,
) -> Result<Option<Exporter>, LaunchError> {
    if launch.metrics.is_none() {
        return Ok(None);
    }
    let names = workers.iter().map(|w| w.name.clone()).collect();
    let board = Board::new(names, launch.metrics_interval);
    let exporter = Exporter::start(&board, launch.metrics).map_err(LaunchError::Metrics)?;
    if let Some(addr) = exporter.local_addr() {
        log::info!("metrics: serving http://{addr}/metrics");
    }
    cfg.metrics = Some(board);
    Ok(Some(exporter))
}
