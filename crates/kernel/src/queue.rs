//! The per-connection buffers in front of and behind a kernel socket: the send queue
//! holds what the kernel refused (copies, bounded) and shared chunks (by reference); the
//! receive side holds bytes the application has not consumed yet.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::Bytes;

/// Most chunks handed to one `sendmsg` (well under IOV_MAX).
pub(crate) const MAX_IOV: usize = 64;

#[derive(Debug)]
enum Chunk {
    Copied(Vec<u8>),
    Shared(Bytes),
}

impl Chunk {
    fn bytes(&self) -> &[u8] {
        match self {
            Chunk::Copied(v) => v,
            Chunk::Shared(b) => b,
        }
    }
}

/// Bytes queued for the socket, in order. Copied bytes count against the connection's
/// `send_buffer`; shared chunks do not (their memory is owned elsewhere), as in
/// Rusty's own send buffer.
#[derive(Debug, Default)]
pub(crate) struct SendQueue {
    chunks: VecDeque<Chunk>,
    /// Bytes of the front chunk already written.
    front_written: usize,
    /// Unwritten copied bytes held.
    copied: usize,
}

impl SendQueue {
    pub(crate) fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// Unwritten bytes held, copied and shared (walks the chunks: not for every send).
    pub(crate) fn len(&self) -> usize {
        let total: usize = self.chunks.iter().map(|c| c.bytes().len()).sum();
        total - self.front_written
    }

    /// Unwritten copied bytes held.
    pub(crate) fn copied(&self) -> usize {
        self.copied
    }

    /// Copy at most `limit` bytes of `data`; returns how many.
    pub(crate) fn push_copy(&mut self, data: &[u8], limit: usize) -> usize {
        let n = data.len().min(limit);
        if n == 0 {
            return 0;
        }
        // Append to the last copied run unless the kernel is part-way through it (its
        // written prefix would otherwise grow without bound under steady streaming).
        let appendable = self.chunks.len() > 1 || self.front_written == 0;
        match self.chunks.back_mut() {
            Some(Chunk::Copied(v)) if appendable => v.extend_from_slice(&data[..n]),
            _ => self.chunks.push_back(Chunk::Copied(data[..n].to_vec())),
        }
        self.copied += n;
        n
    }

    pub(crate) fn push_shared(&mut self, data: Bytes) {
        if !data.is_empty() {
            self.chunks.push_back(Chunk::Shared(data));
        }
    }

    /// Fill `out` with slices over the unwritten bytes, in order; returns how many.
    pub(crate) fn slices<'a>(&'a self, out: &mut [IoSlice<'a>; MAX_IOV]) -> usize {
        let mut n = 0;
        for (slot, c) in out.iter_mut().zip(self.chunks.iter()) {
            let b = c.bytes();
            *slot = IoSlice::new(if n == 0 { &b[self.front_written..] } else { b });
            n += 1;
        }
        n
    }

    /// The kernel took `n` more bytes from the front.
    pub(crate) fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let Some(front) = self.chunks.front() else {
                debug_assert!(false, "advanced past the queue");
                return;
            };
            let left = front.bytes().len() - self.front_written;
            let take = n.min(left);
            if let Chunk::Copied(_) = front {
                self.copied -= take;
            }
            n -= take;
            if take == left {
                self.chunks.pop_front();
                self.front_written = 0;
            } else {
                self.front_written += take;
            }
        }
    }

    /// Drop everything (the connection is gone).
    pub(crate) fn clear(&mut self) {
        *self = SendQueue::default();
    }
}

/// Received bytes the application has not consumed. Owns no memory while empty.
#[derive(Debug, Default)]
pub(crate) struct RecvBuffer {
    data: Vec<u8>,
    start: usize,
}

impl RecvBuffer {
    pub(crate) fn len(&self) -> usize {
        self.data.len() - self.start
    }

    pub(crate) fn readable(&self) -> &[u8] {
        &self.data[self.start..]
    }

    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if self.start > 0 && self.start >= self.data.len() / 2 {
            self.data.drain(..self.start);
            self.start = 0;
        }
        self.data.extend_from_slice(bytes);
    }

    pub(crate) fn consume(&mut self, n: usize) {
        self.start += n.min(self.len());
        if self.start == self.data.len() {
            *self = RecvBuffer::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(q: &mut SendQueue, step: usize) -> Vec<u8> {
        let mut out = Vec::new();
        while !q.is_empty() {
            let mut s = [IoSlice::new(&[]); MAX_IOV];
            let k = q.slices(&mut s);
            let flat: Vec<u8> = s[..k].iter().flat_map(|x| x.iter().copied()).collect();
            let n = flat.len().min(step);
            out.extend_from_slice(&flat[..n]);
            q.advance(n);
        }
        out
    }

    #[test]
    fn send_queue_keeps_order_and_counts_only_copies() {
        let mut q = SendQueue::default();
        assert_eq!(q.push_copy(b"abc", 2), 2);
        q.push_shared(Bytes::from_static(b"-shared-"));
        q.push_shared(Bytes::new());
        assert_eq!(q.push_copy(b"xyz", 10), 3);
        assert_eq!(q.push_copy(b"!", 10), 1);
        assert_eq!(q.copied(), 6);
        assert_eq!(drain(&mut q, 3), b"ab-shared-xyz!");
        assert_eq!(q.copied(), 0);
    }

    #[test]
    fn copies_do_not_grow_a_partly_written_front() {
        let mut q = SendQueue::default();
        q.push_copy(&[1; 10], 100);
        q.advance(4);
        q.push_copy(&[2; 10], 100);
        assert_eq!(q.chunks.len(), 2);
        assert_eq!(q.copied(), 16);
        q.advance(6);
        q.push_copy(&[3; 5], 100);
        assert_eq!(q.chunks.len(), 1, "appended to the unwritten run");
        assert_eq!(drain(&mut q, 7), [[2u8; 10].as_slice(), &[3; 5]].concat());
    }

    #[test]
    fn recv_buffer_consumes_and_frees() {
        let mut r = RecvBuffer::default();
        r.extend(b"hello world");
        r.consume(6);
        assert_eq!(r.readable(), b"world");
        r.extend(b"!");
        assert_eq!(r.readable(), b"world!");
        r.consume(100);
        assert!(r.readable().is_empty());
        assert_eq!(r.data.capacity(), 0);
    }
}
