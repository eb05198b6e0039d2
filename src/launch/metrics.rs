//! The metrics a launch asks for (`--metrics`, `--metrics-file`): a board with a slot
//! per worker, and the exporter that serves and writes it.

use rusty_metrics::{Board, Exporter};
use rusty_runtime::{RuntimeConfig, Worker};

use super::{Launch, LaunchError};

/// Start the metrics endpoint and file `launch` asks for, with a board for `workers`
/// that `cfg` hands them.
pub(super) fn export(
    launch: &Launch,
    workers: &[Worker],
    cfg: &mut RuntimeConfig,
) -> Result<Option<Exporter>, LaunchError> {
    if launch.metrics.is_none() && launch.metrics_file.is_none() {
        return Ok(None);
    }
    let names = workers.iter().map(|w| w.name.clone()).collect();
    let board = Board::new(names, launch.metrics_interval);
    let exporter = Exporter::start(&board, launch.metrics, launch.metrics_file.clone())
        .map_err(LaunchError::Metrics)?;
    if let Some(addr) = exporter.local_addr() {
        log::info!("metrics: serving http://{addr}/metrics");
    }
    if let Some(path) = &launch.metrics_file {
        log::info!(
            "metrics: writing {} every {:?}",
            path.display(),
            launch.metrics_interval
        );
    }
    cfg.metrics = Some(board);
    Ok(Some(exporter))
}
