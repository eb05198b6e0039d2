//! Packet capture: a decorator around any [`PacketIo`] queue that records every frame it
//! receives and every frame it transmits (when handed to `transmit`) to a classic pcap
//! stream (link type Ethernet), timestamped with the clock it is given, for Wireshark or
//! tcpdump.
//!
//! Capture never gets in the way of the data path: a write error is counted and capture
//! stops, frames keep flowing. The stream is flushed when the decorator is dropped (or
//! explicitly with [`PcapCapture::finish`], which also reports the flush error).
//!
//! Timestamps are the clock's [`Instant`](rusty_stack::time::Instant)s taken as time since the
//! Unix epoch, so a capture on virtual time starts at 1970-01-01 00:00:00.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};

use rusty_stack::io::{Capabilities, Doorbell, PacketIo};
use rusty_stack::time::Clock;

/// Largest number of bytes recorded per frame (libpcap's maximum snapshot length), so a
/// 64 KiB TSO or GRO super-frame is captured whole.
pub const SNAPLEN: u32 = 262_144;

/// Counters of a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CaptureStats {
    /// Frames written to the capture.
    pub captured: u64,
    /// Write errors (capture stops at the first one).
    pub write_errors: u64,
    /// Frames that passed while capture was stopped.
    pub missed: u64,
}

/// Capturing decorator. See the module docs.
pub struct PcapCapture<D: PacketIo, C: Clock, W: Write> {
    inner: D,
    clock: C,
    /// `None` once capture stopped (write error) or finished.
    writer: Option<PcapWriter<W>>,
    stats: CaptureStats,
}

impl<D: PacketIo, C: Clock, W: Write> PcapCapture<D, C, W> {
    /// Wrap `inner`, writing the pcap global header to `writer` now.
    pub fn new(inner: D, clock: C, writer: W) -> io::Result<PcapCapture<D, C, W>> {
        let header = PcapHeader {
            snaplen: SNAPLEN,
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::MicroSecond,
            endianness: Endianness::native(),
            ..PcapHeader::default()
        };
        let writer = PcapWriter::with_header(writer, header).map_err(io::Error::other)?;
        Ok(PcapCapture {
            inner,
            clock,
            writer: Some(writer),
            stats: CaptureStats::default(),
        })
    }

    /// How many frames were captured, and whether writing failed.
    pub fn stats(&self) -> CaptureStats {
        self.stats
    }

    /// Whether frames are still being recorded.
    pub fn is_capturing(&self) -> bool {
        self.writer.is_some()
    }

    /// The decorated queue.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The decorated queue.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Stop capturing, flush and hand back the writer (`None` if capture had stopped on
    /// an error). The wrapped queue is dropped.
    pub fn finish(mut self) -> io::Result<Option<W>> {
        match self.writer.take() {
            Some(w) => {
                let mut w = w.into_writer();
                w.flush()?;
                Ok(Some(w))
            }
            None => Ok(None),
        }
    }

    fn record(&mut self, frame: &[u8], timestamp: Duration) {
        let Some(writer) = self.writer.as_mut() else {
            self.stats.missed += 1;
            return;
        };
        let orig_len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let incl = &frame[..frame.len().min(SNAPLEN as usize)];
        match writer.write_packet(&PcapPacket::new(timestamp, orig_len, incl)) {
            Ok(_) => self.stats.captured += 1,
            Err(_) => {
                self.stats.write_errors += 1;
                self.writer = None;
            }
        }
    }
}

impl<D: PacketIo, C: Clock> PcapCapture<D, C, BufWriter<File>> {
    /// Capture to a new file at `path` (truncated if it exists), buffered.
    pub fn create(
        inner: D,
        clock: C,
        path: impl AsRef<Path>,
    ) -> io::Result<PcapCapture<D, C, BufWriter<File>>> {
        let file = File::create(path)?;
        PcapCapture::new(inner, clock, BufWriter::new(file))
    }
}

impl<D: PacketIo, C: Clock, W: Write> Drop for PcapCapture<D, C, W> {
    fn drop(&mut self) {
        if let Some(w) = self.writer.take() {
            // Nobody is left to report the error to; `finish` reports it.
            let _ = w.into_writer().flush();
        }
    }
}

impl<D: PacketIo, C: Clock, W: Write> PacketIo for PcapCapture<D, C, W> {
    type Rx = D::Rx;
    type Tx = D::Tx;

    fn capabilities(&self) -> &Capabilities {
        self.inner.capabilities()
    }

    fn receive(&mut self, out: &mut Vec<D::Rx>, max: usize) -> usize {
        let first = out.len();
        let n = self.inner.receive(out, max);
        if n > 0 {
            let ts = Duration::from_micros(self.clock.now().as_micros());
            for frame in &out[first..] {
                self.record(frame, ts);
            }
        }
        n
    }

    fn alloc_tx(&mut self, len: usize) -> Option<D::Tx> {
        self.inner.alloc_tx(len)
    }

    fn transmit(&mut self, frames: &mut Vec<D::Tx>) {
        if !frames.is_empty() {
            let ts = Duration::from_micros(self.clock.now().as_micros());
            for frame in frames.iter() {
                self.record(frame, ts);
            }
        }
        self.inner.transmit(frames);
    }

    fn flush(&mut self) {
        self.inner.flush();
    }

    fn set_doorbell(&mut self, bell: Doorbell) {
        self.inner.set_doorbell(bell);
    }

    fn pooled_bytes(&self) -> usize {
        self.inner.pooled_bytes()
    }

    fn wait(&mut self, timeout: std::time::Duration) {
        self.inner.wait(timeout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_file::pcap::PcapReader;
    use rusty_stack::io::MacAddr;
    use rusty_stack::time::VirtualClock;
    use rusty_testkit::memory::{pair, MemoryLink};

    fn links() -> (MemoryLink, MemoryLink) {
        let caps = Capabilities::new(MacAddr::BROADCAST, 1500);
        pair(caps.clone(), caps)
    }

    fn send<D: PacketIo>(link: &mut D, data: &[u8]) {
        let mut f = link.alloc_tx(data.len()).unwrap();
        f.copy_from_slice(data);
        link.transmit(&mut vec![f]);
    }

    /// (timestamp, bytes) of every packet in a pcap stream.
    fn read_back(bytes: &[u8]) -> Vec<(Duration, Vec<u8>)> {
        let mut reader = PcapReader::new(bytes).unwrap();
        assert_eq!(reader.header().datalink, DataLink::ETHERNET);
        let mut packets = Vec::new();
        while let Some(p) = reader.next_packet() {
            let p = p.unwrap();
            assert_eq!(p.orig_len as usize, p.data.len());
            packets.push((p.timestamp, p.data.into_owned()));
        }
        packets
    }

    #[test]
    fn records_transmitted_and_received_frames_with_timestamps() {
        let (a, mut b) = links();
        let clock = VirtualClock::new();
        let mut cap = PcapCapture::new(a, clock.clone(), Vec::new()).unwrap();
        clock.advance(Duration::from_micros(1_500_001));
        send(&mut cap, &[1u8; 60]);
        send(&mut cap, &[2u8; 1514]);
        clock.advance(Duration::from_millis(2));
        send(&mut b, &[3u8; 64]);
        let mut out = Vec::new();
        assert_eq!(cap.receive(&mut out, 8), 1);
        assert_eq!(&out[0][..], &[3u8; 64]);
        // The frames really went through.
        let mut at_b = Vec::new();
        assert_eq!(b.receive(&mut at_b, 8), 2);
        assert_eq!(cap.stats().captured, 3);

        let bytes = cap.finish().unwrap().unwrap();
        let packets = read_back(&bytes);
        let t1 = Duration::from_micros(1_500_001);
        let t2 = Duration::from_micros(1_502_001);
        assert_eq!(
            packets,
            vec![
                (t1, vec![1u8; 60]),
                (t1, vec![2u8; 1514]),
                (t2, vec![3u8; 64]),
            ]
        );
    }

    /// A writer that accepts `budget` bytes and then fails.
    struct Failing {
        budget: usize,
    }

    impl Write for Failing {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.budget < buf.len() {
                return Err(io::Error::other("disk full"));
            }
            self.budget -= buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn write_errors_stop_capture_but_not_traffic() {
        let (a, mut b) = links();
        // Global header (24) + one packet (16 + 60) fit, the second packet does not.
        let mut cap = PcapCapture::new(a, VirtualClock::new(), Failing { budget: 100 }).unwrap();
        for i in 0..4u8 {
            send(&mut cap, &[i; 60]);
        }
        let mut out = Vec::new();
        assert_eq!(b.receive(&mut out, 8), 4);
        let stats = cap.stats();
        assert_eq!(stats.captured, 1);
        assert_eq!(stats.write_errors, 1);
        assert_eq!(stats.missed, 2);
        assert!(!cap.is_capturing());
        assert!(cap.finish().unwrap().is_none());
    }

    #[test]
    fn create_writes_a_file_flushed_on_drop() {
        let path =
            std::env::temp_dir().join(format!("rusty-pcap-test-{}.pcap", std::process::id()));
        let (a, _b) = links();
        {
            let mut cap = PcapCapture::create(a, VirtualClock::new(), &path).unwrap();
            send(&mut cap, &[9u8; 42]);
        }
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(read_back(&bytes), vec![(Duration::ZERO, vec![9u8; 42])]);
    }
}
