//! `--metrics-file`: the same document written to a file at each interval, for
//! node_exporter's textfile collector. Each write goes to a temporary file beside the
//! target, then is renamed over it, so a reader sees the old document or the new one,
//! never half of one.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Instant;

use crate::board::Board;
use crate::render::render;

/// Write `text` to `path` atomically: into `path` with `.tmp` appended, synced, then
/// renamed over `path`.
pub fn write_atomically(path: &Path, text: &str) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let written = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// The thread that writes the file; dropping it writes once more (the workers' last
/// counters) and stops it.
pub struct FileWriter {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FileWriter {
    /// Write `board`'s document to `path` now (so that a path that cannot be written is
    /// an error at start), then at every interval.
    pub fn start(path: PathBuf, board: Arc<Board>) -> io::Result<FileWriter> {
        write_atomically(&path, &render(&board, Instant::now()))?;
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = thread::Builder::new()
            .name("metrics-file".into())
            .spawn(move || {
                let mut failing = false;
                loop {
                    let last = match stopped.recv_timeout(board.interval()) {
                        Err(RecvTimeoutError::Timeout) => false,
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
                    };
                    match write_atomically(&path, &render(&board, Instant::now())) {
                        Ok(()) => failing = false,
                        Err(e) if !failing => {
                            failing = true;
                            log::warn!("metrics: cannot write {}: {e}", path.display());
                        }
                        Err(_) => {}
                    }
                    if last {
                        return;
                    }
                }
            })?;
        Ok(FileWriter {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for FileWriter {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::board::Gauges;
    use crate::report::AppMetrics;
    use rusty_stack::Stats;

    struct Nothing;
    impl AppMetrics for Nothing {}

    #[test]
    fn the_file_is_replaced_whole_and_ends_with_the_last_counters() {
        let dir = std::env::temp_dir().join(format!("rusty-metrics-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rusty.prom");
        let board = Board::new(vec!["w".into()], Duration::from_millis(20));
        let mut p = board.publisher(0);
        let writer = FileWriter::start(path.clone(), board.clone()).unwrap();
        let stats = Stats {
            frames_in: 42,
            ..Stats::default()
        };
        p.publish(Instant::now(), &stats, Gauges::default(), &Nothing);
        drop(writer);
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("rusty_frames_received_total{worker=\"0\"} 42\n"),
            "{text}"
        );
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["rusty.prom"], "no temporary file is left");
        fs::remove_dir_all(&dir).unwrap();
        let nowhere = PathBuf::from("/nonexistent-dir/rusty.prom");
        assert!(FileWriter::start(nowhere, board).is_err());
    }
}
