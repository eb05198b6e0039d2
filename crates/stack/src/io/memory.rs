//! The in-memory link: two connected ends (or two sets of queues) that move Ethernet
//! frames between engines running on one thread, for tests, the deterministic simulator
//! and benchmarks.
//!
//! A frame transmitted on one side is received on the other. With several queues per
//! side, IPv4/TCP frames land on the receiving queue the RSS indirection table picks for
//! the Toeplitz hash of their 4-tuple ([`RssConfig::queue_for_rx_flow`]), exactly as a
//! NIC would steer them; everything else (ARP, ICMP, fragments, malformed frames) lands on
//! queue 0, like a NIC that does not hash those types. A test may steer a side by its
//! own rule instead ([`MemoryLink::steer_with`]).
//!
//! Buffers come from an arena shared by the whole link: heap buffers that never move,
//! recycled through a free list of their indices. A frame is a small handle naming its
//! buffer; a transmitted frame *becomes* the peer's received frame (the handle moves, the
//! bytes are never copied) and its buffer goes back to the free list when the receiver
//! drops it. In steady state no frame allocates. The number of buffers one side has out
//! (allocated and not yet dropped by whoever holds them) is bounded, which is the link's
//! back-pressure: [`PacketIo::alloc_tx`] returns `None` at the bound, like a full
//! transmit ring.
//!
//! The ends and the frames reach the shared state through plain pointers rather than
//! `Rc`/`RefCell` (a frame costs no reference count and no borrow flag): the state counts
//! its ends and each side's buffers out, and the last of them to go frees it, so a frame
//! may outlive both ends. That code, the only `unsafe` of the crate, is fenced into the
//! `arena` module below. Ends and frames are `!Send`: a link lives on one thread (the
//! simulator and the benchmarks run both engines on that thread).

use std::fmt;
use std::sync::Arc;

use smoltcp::wire::{EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, TcpPacket};

use super::{Capabilities, ChecksumRequest, MacAddr, PacketIo, RxFrame, RxMeta, TxFrame, TxMeta};
use crate::rss::{ipv4_tcp_input, RssConfig, Toeplitz};
use arena::{End, Shared};

pub use arena::MemFrame;

/// Default bound on buffers one side may have out at once (per direction).
pub const DEFAULT_IN_FLIGHT_LIMIT: usize = 4096;

/// Counters of one end (one queue of one side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkStats {
    /// Frames handed to the peer.
    pub sent: u64,
    /// Frames handed to the stack by [`PacketIo::receive`].
    pub received: u64,
    /// Frames transmitted but not delivered: the receiving end was gone, or the frame was
    /// not allocated by this link.
    pub dropped: u64,
    /// [`PacketIo::alloc_tx`] calls refused because the in-flight bound was reached.
    pub alloc_failures: u64,
}

/// A test's steering rule: the receive queue of a frame.
type SteerFn = Box<dyn FnMut(&[u8]) -> usize>;

/// Receive-side steering of one side.
enum Steering {
    /// Toeplitz over the 4-tuple plus the indirection table.
    Rss {
        hasher: Arc<Toeplitz>,
        rss: RssConfig,
    },
    /// A test's own rule ([`MemoryLink::steer_with`]).
    Custom(SteerFn),
}

/// The RSS hash input of an unfragmented IPv4/TCP frame, `None` for anything else.
fn tcp_4tuple_input(frame: &[u8]) -> Option<[u8; 12]> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EthernetProtocol::Ipv4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    // A NIC only parses TCP ports out of the first fragment of an unfragmented packet.
    if ip.version() != 4
        || ip.next_header() != IpProtocol::Tcp
        || ip.more_frags()
        || ip.frag_offset() != 0
    {
        return None;
    }
    let tcp = TcpPacket::new_checked(ip.payload()).ok()?;
    Some(ipv4_tcp_input(
        ip.src_addr(),
        ip.dst_addr(),
        tcp.src_port(),
        tcp.dst_port(),
    ))
}

impl Shared {
    /// The receive queue a frame arriving on `side` lands on.
    fn steer(&self, side: usize, frame: &[u8]) -> usize {
        let queues = self.queues[side];
        if queues == 1 {
            return 0;
        }
        self.steer_among(side, queues, frame)
    }

    /// [`Shared::steer`] for a side of several queues, out of the single-queue path.
    #[inline(never)]
    fn steer_among(&self, side: usize, queues: usize, frame: &[u8]) -> usize {
        let q = match &mut *self.steering[side].borrow_mut() {
            Some(Steering::Rss { hasher, rss }) => tcp_4tuple_input(frame)
                .map_or(0, |input| usize::from(rss.queue_for(hasher.hash(&input)))),
            Some(Steering::Custom(steer)) => steer(frame),
            None => 0,
        };
        // A table naming more queues than exist wraps rather than losing frames.
        q % queues
    }
}

/// The buffer arena, the shared state and the handles that point into them: everything
/// that needs `unsafe`, behind a safe API (ends and frames).
///
/// Invariants, relied on by every `unsafe` block here:
/// - One [`Shared`] per link, allocated by [`Shared::create`] and freed when no [`End`]
///   and no buffer out refers to it ([`State::unused`]); every end and every frame
///   counts (`State::links`, each side's `in_flight`), so each one may reach it.
/// - A buffer (a [`Slot`]) out of the free list has exactly one handle, a [`MemFrame`]
///   or a [`RawFrame`] waiting in a receive queue (`RxQueue::frames[head..]`; the
///   entries before `head` are stale copies, never read); only free buffers are freed
///   or replaced. Vectors of frames change between `Vec<MemFrame>` and `Vec<RawFrame>`
///   in place (`MemFrame` is a `repr(transparent)` `RawFrame`), which moves no handle.
/// - A buffer holds a valid [`Header`] in front of its bytes, written when it is made
///   ([`Slot::new`]) and reset by [`State::alloc`] before its handle exists; only that
///   handle reaches it then.
/// - The state is borrowed only in [`Shared::with_state`], by closures of this module
///   that drop no [`MemFrame`] and run no user code (the state holds neither), so no
///   borrow of it overlaps another.
#[allow(unsafe_code)]
mod arena {
    use std::cell::{RefCell, UnsafeCell};
    use std::fmt;
    use std::mem::{self, ManuallyDrop};
    use std::ops::{Deref, DerefMut};
    use std::ptr::NonNull;

    use super::{Steering, DEFAULT_IN_FLIGHT_LIMIT};
    use crate::io::TxMeta;

    /// What travels with a frame besides its bytes.
    #[derive(Clone, Copy, Default)]
    #[repr(C)]
    pub(super) struct FrameMeta {
        /// What the stack asked of the device. Its `tso_mss` is the receiver's GSO size:
        /// a TSO super-frame is delivered whole, announced as coalesced (what a GRO/LRO
        /// receiver would hand up); the link never reports a checksum verified.
        pub(super) tx: TxMeta,
    }

    /// A frame's handle without the drop glue that gives its buffer back: what the
    /// receive queues hold, so that nothing done to [`State`] can drop a frame.
    /// A frame's handle is kept small (it moves whole between the stack's vectors, and
    /// 16 bytes move at once): the rest of what travels with a frame, its link included,
    /// sits in front of its bytes, in its buffer.
    pub(super) struct RawFrame {
        /// The first byte of the buffer of `index` ([`Slot::data`]), which has at least
        /// `len` bytes, and a [`Header`] in front of them.
        data: NonNull<u8>,
        len: u32,
        index: u32,
    }

    /// What a buffer holds in front of a frame's bytes. Written by [`Slot::new`], reset
    /// by [`State::alloc`] before the buffer's handle exists, then reached only through
    /// that one handle.
    #[derive(Clone, Copy)]
    #[repr(C)]
    struct Header {
        /// The link whose arena holds the buffer.
        shared: NonNull<Shared>,
        /// `shared` while the frame asks for no checksum, else null: whether a frame
        /// goes to the peer as it is (of this link, nothing to fill in) is one compare.
        plain_for: *const Shared,
        meta: FrameMeta,
        /// The side that allocated the buffer, whose in-flight count holds it.
        owner_side: u8,
    }

    /// The 8-byte words a [`Header`] takes in front of a buffer's bytes.
    const HEADER_WORDS: usize = mem::size_of::<Header>().div_ceil(8);

    impl RawFrame {
        /// This frame's buffer's header.
        fn header(&self) -> NonNull<Header> {
            // SAFETY: `data` is `Slot::data` of this frame's buffer: `HEADER_WORDS` words
            // past the start of its allocation, where the `Header` sits.
            unsafe { self.data.cast::<u64>().sub(HEADER_WORDS).cast() }
        }

        /// The link whose arena holds the buffer.
        fn shared(&self) -> NonNull<Shared> {
            // SAFETY: as in `owner_side`.
            unsafe { self.header().as_ref() }.shared
        }

        /// The side that allocated the buffer.
        fn owner_side(&self) -> usize {
            // SAFETY: the header was reset by `State::alloc` before this handle
            // existed, and only the handle reaches it (read here, through it).
            usize::from(unsafe { self.header().as_ref() }.owner_side)
        }
    }

    /// One buffer of the arena: a boxed slice of words (the [`Header`] then the frame's
    /// bytes, both 8-byte aligned) given up with `Box::leak`, so that it never moves while
    /// a handle points into it, and freed by [`Slot::free`] or [`State`]'s drop.
    struct Slot(NonNull<[u64]>);

    impl Slot {
        /// A zeroed buffer of at least `len` bytes (only its first use sees the zeros).
        /// Its header names the link `shared` (for good: a buffer stays in its arena).
        fn new(len: usize, shared: NonNull<Shared>) -> Slot {
            let words = HEADER_WORDS + len.div_ceil(8);
            let slot = Slot(NonNull::from(Box::leak(
                vec![0u64; words].into_boxed_slice(),
            )));
            let header = Header {
                shared,
                plain_for: shared.as_ptr(),
                meta: FrameMeta::default(),
                owner_side: 0,
            };
            // SAFETY: the allocation is new, unshared, 8-byte aligned and longer than
            // `HEADER_WORDS` words, the header's room at its start.
            unsafe { slot.0.cast::<Header>().write(header) };
            slot
        }

        /// The bytes a frame may have.
        fn len(&self) -> usize {
            (self.0.len() - HEADER_WORDS) * 8
        }

        /// The first byte of a frame.
        fn data(&self) -> NonNull<u8> {
            // SAFETY: the allocation has `HEADER_WORDS` words and more (`new`).
            unsafe { self.0.cast::<u64>().add(HEADER_WORDS).cast() }
        }

        /// Replace a free buffer too small for the frame asked for (allocated by an end
        /// of smaller frames) by one of `len` bytes.
        #[cold]
        fn replace(&mut self, len: usize, shared: NonNull<Shared>) {
            mem::replace(self, Slot::new(len, shared)).free();
        }

        /// Free the buffer, which no handle points into.
        fn free(self) {
            // SAFETY: the pointer came from `Box::leak` in `Slot::new`, and `self` is
            // consumed, so it is freed once. Callers free only buffers in the free list
            // (or all of them when nothing is out), which no handle points into.
            drop(unsafe { Box::from_raw(self.0.as_ptr()) });
        }
    }

    /// One receive queue: the frames `frames[head..]`, oldest first (the entries before
    /// `head` were moved out to a receiver and are no handles). Kept normal: `head` is 0
    /// whenever the queue is empty, so an empty queue is an empty vector. Its size is a
    /// power of two, so that an end finds its queue (by index) with a shift.
    #[repr(align(64))]
    struct RxQueue {
        frames: Vec<RawFrame>,
        head: usize,
        /// Whether the end of this queue still exists.
        alive: bool,
        /// Frames ever queued here. Those received are these less the ones waiting:
        /// counted as the sender queues them, where the count is at hand, rather than
        /// as the receiver takes them.
        queued: u64,
    }

    impl RxQueue {
        fn len(&self) -> usize {
            self.frames.len() - self.head
        }

        /// Make room for `more` frames at the back: move the waiting frames to the front
        /// when at least as many were taken from it as wait (the move is then paid for by
        /// those takes), rather than growing the vector.
        fn make_room(&mut self, more: usize) {
            if self.head > 0
                && self.frames.len() + more > self.frames.capacity()
                && self.head >= self.len()
            {
                // The entries before `head` are no handles: discarding them drops nothing.
                self.frames.drain(..self.head);
                self.head = 0;
            }
        }

        fn push(&mut self, frame: RawFrame) {
            self.queued += 1;
            self.make_room(1);
            self.frames.push(frame);
        }

        /// Queue the frames of `frames` behind the waiting ones, leaving `frames` empty.
        /// Into an empty queue the vectors swap: no frame moves.
        #[inline]
        fn append(&mut self, frames: &mut Vec<MemFrame>) {
            self.queued += frames.len() as u64;
            if self.frames.is_empty() {
                swap_frames(frames, &mut self.frames);
            } else {
                self.append_behind(frames);
            }
        }

        /// [`RxQueue::append`] to a queue with frames waiting.
        #[inline(never)]
        fn append_behind(&mut self, frames: &mut Vec<MemFrame>) {
            let mut raw = Vec::new();
            swap_frames(frames, &mut raw);
            self.make_room(raw.len());
            self.frames.append(&mut raw);
            // Back to `frames`, empty, with its capacity.
            swap_frames(frames, &mut raw);
        }

        /// Move up to `max` frames to the back of `out`; how many. A whole queue taken
        /// into an empty `out` swaps the vectors: no frame moves.
        #[inline]
        fn take(&mut self, out: &mut Vec<MemFrame>, max: usize) -> usize {
            let waiting = self.len();
            if waiting <= max && self.head == 0 && out.is_empty() {
                swap_frames(out, &mut self.frames);
                return waiting;
            }
            self.take_some(out, max)
        }

        /// [`RxQueue::take`] by moving frames.
        #[inline(never)]
        fn take_some(&mut self, out: &mut Vec<MemFrame>, max: usize) -> usize {
            let n = self.len().min(max);
            out.reserve(n);
            // SAFETY: `frames[head..head + n]` are initialised handles and `out` has room
            // for `n` more elements behind its `len`; the two vectors are distinct
            // allocations. `MemFrame` is a `repr(transparent)` `RawFrame`, so the bits
            // copied are `n` valid frames, and advancing `head` past them below leaves
            // `out` their one owner (a `RawFrame` has no drop glue to run twice).
            unsafe {
                let src = self.frames.as_ptr().add(self.head).cast::<MemFrame>();
                let len = out.len();
                std::ptr::copy_nonoverlapping(src, out.as_mut_ptr().add(len), n);
                out.set_len(len + n);
            }
            self.head += n;
            if self.head == self.frames.len() {
                self.frames.clear();
                self.head = 0;
            }
            n
        }
    }

    struct Side {
        /// Buffers allocated by this side and not yet back in the free list.
        in_flight: usize,
        in_flight_limit: usize,
    }

    impl Side {
        fn new() -> Side {
            Side {
                in_flight: 0,
                in_flight_limit: DEFAULT_IN_FLIGHT_LIMIT,
            }
        }
    }

    /// The mutable part of a link's shared state. It holds no [`MemFrame`] and no user
    /// code, so nothing done to it can reach it again through a second borrow.
    struct State {
        /// Every buffer the link allocated; a frame names its buffer by index.
        slots: Vec<Slot>,
        /// Indices of the buffers out of use, reused last-in first-out (warmest first).
        /// Its capacity is at least the number of buffers (see [`State::add_slot`]), so
        /// a release never grows it.
        free: Vec<u32>,
        /// The receive queues of side 0, then those of side 1: the transmitted frames
        /// themselves (their receive metadata set by `transmit`). An end names its queue
        /// by its index here.
        rx: Vec<RxQueue>,
        sides: [Side; 2],
        /// Ends alive, of both sides.
        links: usize,
    }

    impl State {
        /// A buffer of `len` bytes for `side`, allocating one of `cap` bytes if none is
        /// free, or `None` at the side's in-flight bound.
        fn alloc(
            &mut self,
            side: usize,
            len: u32,
            cap: usize,
            shared: NonNull<Shared>,
        ) -> Option<RawFrame> {
            // A side is 0 or 1: the mask spares a bounds check.
            let s = &mut self.sides[side & 1];
            if s.in_flight >= s.in_flight_limit {
                return None;
            }
            s.in_flight += 1;
            let index = match self.free.pop() {
                Some(index) => index,
                None => self.add_slot(cap, shared),
            };
            debug_assert!((index as usize) < self.slots.len());
            // SAFETY: the free list and `add_slot` name only buffers of `slots`, which
            // never shrinks while the state lives.
            let slot = unsafe { self.slots.get_unchecked_mut(index as usize) };
            if slot.len() < len as usize {
                slot.replace(cap, shared);
            }
            // SAFETY: the buffer is out of the free list only now and has no handle yet,
            // and `&mut self` is the one reference to the state: nothing else reaches its
            // header, which starts its allocation (written by `Slot::new`).
            let header = unsafe { slot.0.cast::<Header>().as_mut() };
            header.meta = FrameMeta::default();
            // `shared` is the header's own (a buffer stays in its arena), at hand here.
            debug_assert_eq!(header.shared, shared);
            header.plain_for = shared.as_ptr();
            header.owner_side = side as u8;
            // The old bytes stay rather than being zeroed: a NIC slot is not cleared either.
            Some(RawFrame {
                data: slot.data(),
                len,
                index,
            })
        }

        /// A new buffer of `cap` bytes, out of the free list; its index.
        #[cold]
        fn add_slot(&mut self, cap: usize, shared: NonNull<Shared>) -> u32 {
            self.slots.push(Slot::new(cap, shared));
            // Room in the free list for every buffer, this one included.
            self.free.reserve(self.slots.len() - self.free.len());
            // Every buffer holds a frame: fewer than 2^32 fit in memory.
            (self.slots.len() - 1) as u32
        }

        /// The receive queue of index `rx`, which an end holds (`End::rx`, `End::peer_rx`).
        #[inline]
        fn queue(&mut self, rx: usize) -> &mut RxQueue {
            debug_assert!(rx < self.rx.len());
            // SAFETY: an end's queue indices name a queue of one side of its link (its
            // own, or the peer side's first: every side has one, see [`Shared::create`]),
            // so they are below the queue count, the length of `rx`, which never shrinks
            // while the state lives.
            unsafe { self.rx.get_unchecked_mut(rx) }
        }

        /// Put a frame's buffer back in the free list; its handle is gone.
        fn release(&mut self, frame: &RawFrame) {
            // A side is 0 or 1: the mask spares a bounds check.
            self.sides[frame.owner_side() & 1].in_flight -= 1;
            let len = self.free.len();
            debug_assert!(len < self.free.capacity());
            // SAFETY: the free list has room for every buffer (`add_slot`) and does not
            // hold this one (it had a handle), so `len` is below its capacity: the write
            // stays in its allocation and the new element is initialised.
            unsafe {
                self.free.as_mut_ptr().add(len).write(frame.index);
                self.free.set_len(len + 1);
            }
        }

        /// Put the buffers of `frames` back in the free list, leaving it empty; their
        /// handles are gone.
        #[cold]
        fn release_all(&mut self, frames: &mut Vec<MemFrame>) {
            let mut raw = Vec::new();
            swap_frames(frames, &mut raw);
            for frame in &raw {
                self.release(frame);
            }
        }

        /// Whether no end and no frame refers to the state any more.
        fn unused(&self) -> bool {
            self.links == 0 && self.sides.iter().all(|s| s.in_flight == 0)
        }
    }

    impl Drop for State {
        fn drop(&mut self) {
            // Dropped once nothing is out (`unused`): no handle points into a buffer.
            for slot in self.slots.drain(..) {
                slot.free();
            }
        }
    }

    /// What the ends and frames of one link share.
    pub(super) struct Shared {
        state: UnsafeCell<State>,
        /// Queue count of each side.
        pub(super) queues: [usize; 2],
        /// Receive steering of each side (consulted only with more than one queue). Out
        /// of `state` because a test's rule is user code.
        pub(super) steering: [RefCell<Option<Steering>>; 2],
    }

    impl Shared {
        /// A new link with `queues` queues per side: the ends of each side, by queue.
        pub(super) fn create(queues: [usize; 2], steering: [Option<Steering>; 2]) -> [Vec<End>; 2] {
            // Every side has a queue 0, which the peer's ends name (`End::peer_rx`).
            assert!(queues[0] > 0 && queues[1] > 0, "a side without queues");
            let shared = NonNull::from(Box::leak(Box::new(Shared {
                state: UnsafeCell::new(State {
                    slots: Vec::new(),
                    free: Vec::new(),
                    rx: (0..queues[0] + queues[1])
                        .map(|_| RxQueue {
                            frames: Vec::new(),
                            head: 0,
                            alive: true,
                            queued: 0,
                        })
                        .collect(),
                    sides: [Side::new(), Side::new()],
                    links: queues[0] + queues[1],
                }),
                queues,
                steering: steering.map(RefCell::new),
            })));
            [0, 1].map(|side| {
                (0..queues[side])
                    .map(|queue| End {
                        shared,
                        side,
                        queue,
                        rx: Shared::rx_index(queues, side, queue),
                        peer_rx: Shared::rx_index(queues, 1 - side, 0),
                        peer_single: queues[1 - side] == 1,
                    })
                    .collect()
            })
        }

        /// The index in `State::rx` of `side`'s receive queue `queue`.
        fn rx_index(queues: [usize; 2], side: usize, queue: usize) -> usize {
            if side == 0 {
                queue
            } else {
                queues[0] + queue
            }
        }

        /// Run `f` on the state. Every `f` is a closure of this module that moves
        /// counters and [`RawFrame`]s only: it drops no [`MemFrame`] and runs no user
        /// code.
        fn with_state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
            // SAFETY: the state is reached only through this function, from `!Send`
            // handles on one thread, and `f` cannot reach it again (see above), so this
            // is the only reference to it while `f` runs.
            f(unsafe { &mut *self.state.get() })
        }

        /// Free the state if nothing refers to it any more.
        ///
        /// # Safety
        ///
        /// `shared` came from [`Shared::create`] and is alive, the caller's end or
        /// frame is already accounted as gone, and the caller does not use `shared`
        /// afterwards.
        #[cold]
        unsafe fn free_if_unused(shared: NonNull<Shared>) {
            // SAFETY: alive, as the caller promises.
            if unsafe { shared.as_ref() }.with_state(|s| s.unused()) {
                // SAFETY: allocated by `Box::leak` in `create`; no end and no frame
                // refers to it, so nothing will reach it again.
                drop(unsafe { Box::from_raw(shared.as_ptr()) });
            }
        }
    }

    /// One end's hold on the link's shared state: one queue of one side.
    pub(super) struct End {
        /// Alive while this end is (it counts in `State::links`).
        shared: NonNull<Shared>,
        pub(super) side: usize,
        pub(super) queue: usize,
        /// This end's receive queue: its index in `State::rx`.
        rx: usize,
        /// The peer side's first receive queue: its index in `State::rx`.
        peer_rx: usize,
        /// Whether the peer side has a single queue.
        pub(super) peer_single: bool,
    }

    impl End {
        pub(super) fn shared(&self) -> &Shared {
            // SAFETY: this end keeps the state alive until its drop.
            unsafe { self.shared.as_ref() }
        }

        /// Whether `frame`'s buffer belongs to this link.
        pub(super) fn owns(&self, frame: &MemFrame) -> bool {
            frame.raw.shared() == self.shared
        }

        /// Whether `frame` is of this link and asks for no checksum: it goes to the peer
        /// as it is.
        #[inline(always)]
        pub(super) fn sends_plain(&self, frame: &MemFrame) -> bool {
            frame.plain_for(self.shared)
        }

        /// A transmit buffer of `len` bytes (the caller checked `len <= cap`), allocated
        /// with `cap` bytes when the free list is empty, or `None` at the in-flight bound.
        pub(super) fn alloc(&self, len: u32, cap: usize) -> Option<MemFrame> {
            let (side, shared) = (self.side, self.shared);
            let raw = self
                .shared()
                .with_state(|s| s.alloc(side, len, cap, shared))?;
            Some(MemFrame { raw })
        }

        /// Move up to `max` frames of this end's receive queue to `out`; how many.
        #[inline]
        pub(super) fn receive(&self, out: &mut Vec<MemFrame>, max: usize) -> usize {
            let rx = self.rx;
            // Moving handles drops none.
            self.shared().with_state(|s| s.queue(rx).take(out, max))
        }

        /// Queue `frame` (of this link, see [`End::owns`]) on `side`'s receive queue
        /// `queue`, or give its buffer back if that end is gone; whether it was queued.
        pub(super) fn deliver(&self, side: usize, queue: usize, frame: MemFrame) -> bool {
            debug_assert!(self.owns(&frame));
            let raw = frame.into_raw();
            let rx = Shared::rx_index(self.shared().queues, side, queue);
            self.shared().with_state(|s| {
                let rx = &mut s.rx[rx];
                if rx.alive {
                    rx.push(raw);
                    true
                } else {
                    // Not the last hold on the state: this end is alive.
                    s.release(&raw);
                    false
                }
            })
        }

        /// Queue all of `frames` (of this link, see [`End::owns`]), in order, on the
        /// peer side's only receive queue, or give their buffers back if that end is
        /// gone; whether they were queued. `frames` is left empty.
        #[inline]
        pub(super) fn deliver_all(&self, frames: &mut Vec<MemFrame>) -> bool {
            debug_assert!(frames.iter().all(|f| self.owns(f)));
            let peer_rx = self.peer_rx;
            self.shared().with_state(|s| {
                let rx = s.queue(peer_rx);
                if rx.alive {
                    rx.append(frames);
                    true
                } else {
                    // Not the last hold on the state: this end is alive.
                    s.release_all(frames);
                    false
                }
            })
        }

        /// Frames waiting in this end's receive queue.
        pub(super) fn pending(&self) -> usize {
            let rx = self.rx;
            self.shared().with_state(|s| s.rx[rx].len())
        }

        /// Frames taken from this end's receive queue so far.
        pub(super) fn received(&self) -> u64 {
            let rx = self.rx;
            self.shared().with_state(|s| {
                let q = &s.rx[rx];
                q.queued - q.len() as u64
            })
        }

        /// Buffers this end's side has out.
        pub(super) fn in_flight(&self) -> usize {
            let side = self.side;
            self.shared().with_state(|s| s.sides[side].in_flight)
        }

        /// Bound the buffers this end's side may have out.
        pub(super) fn set_in_flight_limit(&self, limit: usize) {
            let side = self.side;
            self.shared()
                .with_state(|s| s.sides[side].in_flight_limit = limit);
        }

        /// Buffers in the free list.
        #[cfg(test)]
        pub(super) fn free_buffers(&self) -> usize {
            self.shared().with_state(|s| s.free.len())
        }
    }

    impl Drop for End {
        fn drop(&mut self) {
            let rx = self.rx;
            self.shared().with_state(|s| {
                s.links -= 1;
                let rx = &mut s.rx[rx];
                rx.alive = false;
                let (frames, head) = (mem::take(&mut rx.frames), mem::take(&mut rx.head));
                // Frames nobody will receive go back to the free list.
                for frame in &frames[head..] {
                    s.release(frame);
                }
            });
            // SAFETY: this end is accounted as gone and does not touch the state again.
            unsafe { Shared::free_if_unused(self.shared) };
        }
    }

    /// Hand the frames of `frames` to `f` in order, leaving it empty with its capacity:
    /// a draining iterator without the cost of dropping one. Should `f` panic, the
    /// frames not yet handed over leak (their buffers stay out) rather than drop twice.
    pub(super) fn drain_each(frames: &mut Vec<MemFrame>, mut f: impl FnMut(MemFrame)) {
        let len = frames.len();
        let base = frames.as_ptr();
        // SAFETY: shortening a vector only gives up ownership of its elements.
        unsafe { frames.set_len(0) };
        for i in 0..len {
            // SAFETY: the vector no longer owns its first `len` elements, still in its
            // buffer (borrowed mutably here, so untouched), and each moves out once.
            f(unsafe { std::ptr::read(base.add(i)) });
        }
    }

    /// Swap the contents of `frames` and `raw`: the handles of `frames` lose their drop
    /// glue (whoever holds `raw` answers for their buffers), those of `raw` gain it
    /// (each is its buffer's one handle, now the holder's of `frames`). Drops nothing.
    fn swap_frames(frames: &mut Vec<MemFrame>, raw: &mut Vec<RawFrame>) {
        let ours = into_raw_vec(mem::take(frames));
        let theirs = from_raw_vec(mem::replace(raw, ours));
        // `frames` holds the empty vector `take` left, which owns no allocation.
        mem::forget(mem::replace(frames, theirs));
    }

    /// The handles of `frames`, without their drop glue: the caller answers for their
    /// buffers.
    fn into_raw_vec(frames: Vec<MemFrame>) -> Vec<RawFrame> {
        let mut frames = ManuallyDrop::new(frames);
        // SAFETY: `MemFrame` is a `repr(transparent)` `RawFrame`: one size and alignment,
        // so the allocation has the layout a `Vec<RawFrame>` of this capacity expects and
        // its first `len` elements are valid `RawFrame`s. `frames` is never dropped, so
        // the allocation keeps one owner.
        unsafe { Vec::from_raw_parts(frames.as_mut_ptr().cast(), frames.len(), frames.capacity()) }
    }

    /// Frames of the handles of `raw` (each its buffer's one handle, now the caller's).
    fn from_raw_vec(raw: Vec<RawFrame>) -> Vec<MemFrame> {
        let mut raw = ManuallyDrop::new(raw);
        // SAFETY: as in `into_raw_vec`, the other way round.
        unsafe { Vec::from_raw_parts(raw.as_mut_ptr().cast(), raw.len(), raw.capacity()) }
    }

    /// The receive and transmit buffer of the in-memory link: exactly the frame's length.
    ///
    /// A freshly allocated transmit buffer holds unspecified bytes (left over from an
    /// earlier frame), like a NIC ring slot; the stack writes every byte it sends.
    #[repr(transparent)]
    pub struct MemFrame {
        pub(super) raw: RawFrame,
    }

    impl MemFrame {
        /// The handle, whose buffer the caller now answers for.
        fn into_raw(self) -> RawFrame {
            let frame = ManuallyDrop::new(self);
            // SAFETY: `frame` is never dropped nor used again, so its handle moves out
            // exactly once.
            unsafe { std::ptr::read(&frame.raw) }
        }

        /// What travels with the frame.
        pub(super) fn meta(&self) -> &FrameMeta {
            // SAFETY: the header was reset by `State::alloc` before this handle existed
            // and only this handle reaches it; borrowed through `&self`, it is not
            // written meanwhile.
            unsafe { &self.raw.header().as_ref().meta }
        }

        /// Ask for the offloads `tx`.
        pub(super) fn set_tx(&mut self, tx: TxMeta) {
            // SAFETY: as in `meta`; the unique borrow of the one handle is a unique borrow
            // of its header.
            let header = unsafe { self.raw.header().as_mut() };
            header.meta.tx = tx;
            header.plain_for = match tx.checksum {
                None => header.shared.as_ptr(),
                Some(_) => std::ptr::null(),
            };
        }

        /// Whether the frame is of the link `shared` and asks for no checksum: it goes
        /// to the peer as it is.
        #[inline(always)]
        pub(super) fn plain_for(&self, shared: NonNull<Shared>) -> bool {
            // SAFETY: as in `meta`.
            std::ptr::eq(
                unsafe { self.raw.header().as_ref() }.plain_for,
                shared.as_ptr(),
            )
        }

        /// Shorten the frame to `len` bytes (no-op if it is not longer).
        pub(super) fn shorten(&mut self, len: usize) {
            if len < self.raw.len as usize {
                self.raw.len = len as u32;
            }
        }
    }

    impl Deref for MemFrame {
        type Target = [u8];
        fn deref(&self) -> &[u8] {
            // SAFETY: `data` starts this frame's buffer, of at least `len` initialised
            // bytes, in the arena this frame keeps alive. Only free buffers are freed or
            // replaced and this frame is its buffer's one handle, so the bytes stay valid
            // and unaliased while `self` is borrowed.
            unsafe { std::slice::from_raw_parts(self.raw.data.as_ptr(), self.raw.len as usize) }
        }
    }

    impl DerefMut for MemFrame {
        fn deref_mut(&mut self) -> &mut [u8] {
            // SAFETY: as in `deref`; the unique borrow of the one handle is a unique
            // borrow of its bytes.
            unsafe { std::slice::from_raw_parts_mut(self.raw.data.as_ptr(), self.raw.len as usize) }
        }
    }

    impl Drop for MemFrame {
        fn drop(&mut self) {
            let shared = self.raw.shared();
            // SAFETY: this frame keeps the state alive until its buffer is released here.
            let orphan = unsafe { shared.as_ref() }.with_state(|s| {
                s.release(&self.raw);
                s.links == 0
            });
            // Only a frame that outlived both ends can be the last hold on the state.
            if orphan {
                // SAFETY: the frame is accounted as gone and does not touch the state
                // again.
                unsafe { Shared::free_if_unused(shared) };
            }
        }
    }

    impl fmt::Debug for MemFrame {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("MemFrame")
                .field("len", &self.len())
                .field("owner_side", &self.raw.owner_side())
                .finish()
        }
    }
}

/// One queue of one side of an in-memory link. See the module docs.
pub struct MemoryLink {
    end: End,
    caps: Capabilities,
    /// `caps.max_tx_frame()`, or 0 when it is to be worked out again (the capabilities
    /// may have changed since: [`MemoryLink::capabilities_mut`]).
    max_tx: usize,
    /// This end's counters but `received`, which its receive queue keeps
    /// ([`MemoryLink::stats`] puts them together).
    stats: LinkStats,
}

impl MemFrame {
    /// Apply the transmit offloads the stack asked for, as a device would.
    fn apply_tx_offloads(&mut self) {
        if let Some(req) = self.meta().tx.checksum {
            fill_checksum(self, req);
        }
    }
}

/// Compute the checksum `req` asks for into `data`, as a device would (out of line: the
/// frames of a link without the offload never come here).
#[inline(never)]
fn fill_checksum(data: &mut [u8], req: ChecksumRequest) {
    let start = usize::from(req.start);
    let at = start + usize::from(req.offset);
    // A request outside the frame is the stack's bug; a device would send garbage, we
    // leave the frame alone rather than panic.
    if at + 2 <= data.len() {
        let sum = !ones_complement_sum(&data[start..]);
        data[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    }
}

/// The folded 16-bit ones'-complement sum of `data` (RFC 1071), big-endian words, an odd
/// last byte padded with zero.
fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u64::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

impl RxFrame for MemFrame {
    fn meta(&self) -> RxMeta {
        RxMeta {
            checksum_verified: false,
            gso_size: self.meta().tx.tso_mss,
        }
    }
}

impl TxFrame for MemFrame {
    fn set_meta(&mut self, meta: TxMeta) {
        self.set_tx(meta);
    }
    fn truncate(&mut self, len: usize) {
        self.shorten(len);
    }
}

impl fmt::Debug for MemoryLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryLink")
            .field("side", &self.end.side)
            .field("queue", &self.end.queue)
            .field("stats", &self.stats())
            .finish()
    }
}

/// Two connected single-queue ends with the given capabilities.
///
/// `queue`, `queue_count` and `rss` of the capabilities are reported as given, but each
/// side has exactly one queue.
pub fn pair(a: Capabilities, b: Capabilities) -> (MemoryLink, MemoryLink) {
    let [ends_a, ends_b] = Shared::create([1, 1], [None, None]);
    let link = |ends: Vec<End>, caps| MemoryLink {
        end: ends.into_iter().next().expect("one queue per side"),
        caps,
        max_tx: 0,
        stats: LinkStats::default(),
    };
    (link(ends_a, a), link(ends_b, b))
}

/// Two connected sides with `queues_a` and `queues_b` queues (zero is taken as one), both
/// steering received IPv4/TCP frames with `rss`. Each queue's capabilities carry its index,
/// the side's queue count and `rss`.
pub fn multi_queue_pair(
    queues_a: u16,
    queues_b: u16,
    rss: RssConfig,
    mac_a: MacAddr,
    mac_b: MacAddr,
    mtu: usize,
) -> (Vec<MemoryLink>, Vec<MemoryLink>) {
    let queues_a = queues_a.max(1);
    let queues_b = queues_b.max(1);
    let steering = || Steering::Rss {
        hasher: rss.hasher(),
        rss: rss.clone(),
    };
    let [ends_a, ends_b] = Shared::create(
        [usize::from(queues_a), usize::from(queues_b)],
        [Some(steering()), Some(steering())],
    );
    let side_links = |ends: Vec<End>, queues: u16, mac| {
        ends.into_iter()
            .zip(0..queues)
            .map(|(end, q)| {
                let mut caps = Capabilities::new(mac, mtu);
                caps.queue = q;
                caps.queue_count = queues;
                caps.rss = Some(rss.clone());
                MemoryLink {
                    end,
                    caps,
                    max_tx: 0,
                    stats: LinkStats::default(),
                }
            })
            .collect::<Vec<_>>()
    };
    let a = side_links(ends_a, queues_a, mac_a);
    let b = side_links(ends_b, queues_b, mac_b);
    (a, b)
}

impl MemoryLink {
    /// The largest frame `alloc_tx` hands out, from the capabilities.
    #[cold]
    fn work_out_max_tx(&mut self) -> usize {
        self.max_tx = self.caps.max_tx_frame();
        self.max_tx
    }

    /// This end's counters.
    pub fn stats(&self) -> LinkStats {
        LinkStats {
            received: self.end.received(),
            ..self.stats
        }
    }

    /// Change what this end reports about itself: tests use it to model a link whose
    /// steering the stack is not told about (as with TAP).
    pub fn capabilities_mut(&mut self) -> &mut Capabilities {
        self.max_tx = 0;
        &mut self.caps
    }

    /// Steer the frames that arrive at this end's side (on every queue of it) with
    /// `steer` instead: it names the receive queue of each frame, wrapped to the side's
    /// queue count. Tests model links whose steering the stack cannot predict with it
    /// (TAP's flow table, a veth whose peer kernel picks the queue), adversarial ones
    /// included.
    pub fn steer_with(&self, steer: impl FnMut(&[u8]) -> usize + 'static) {
        let rule = Some(Steering::Custom(Box::new(steer)));
        // The old rule (and whatever it captured) drops once the cell is no longer borrowed.
        drop(self.end.shared().steering[self.end.side].replace(rule));
    }

    /// Frames waiting to be received on this end.
    pub fn pending(&self) -> usize {
        self.end.pending()
    }

    /// Bound the buffers this end's side may have out at once (default
    /// [`DEFAULT_IN_FLIGHT_LIMIT`]). Shared by all queues of the side.
    pub fn set_in_flight_limit(&self, limit: usize) {
        self.end.set_in_flight_limit(limit);
    }

    /// Buffers this end's side has out now (allocated, queued or being read).
    pub fn in_flight(&self) -> usize {
        self.end.in_flight()
    }
}

impl PacketIo for MemoryLink {
    type Rx = MemFrame;
    type Tx = MemFrame;

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    #[inline]
    fn receive(&mut self, out: &mut Vec<MemFrame>, max: usize) -> usize {
        self.end.receive(out, max)
    }

    #[inline]
    fn alloc_tx(&mut self, len: usize) -> Option<MemFrame> {
        let cap = match self.max_tx {
            0 => self.work_out_max_tx(),
            cap => cap,
        };
        let len = u32::try_from(len).ok().filter(|&l| l as usize <= cap)?;
        let frame = self.end.alloc(len, cap);
        if frame.is_none() {
            self.stats.alloc_failures += 1;
        }
        frame
    }

    #[inline]
    fn transmit(&mut self, frames: &mut Vec<MemFrame>) {
        // The usual burst: frames of this link with no checksum to fill, to a peer side
        // of one queue. Anything else takes the general path.
        if self.end.peer_single {
            let mut plain = true;
            for frame in frames.iter() {
                if !self.end.sends_plain(frame) {
                    plain = false;
                    break;
                }
            }
            if plain {
                self.deliver_all(frames);
                return;
            }
        }
        self.transmit_any(frames);
    }
}

impl MemoryLink {
    /// Hand all of `frames` (of this link, offloads done) to the peer side's only queue.
    #[inline]
    fn deliver_all(&mut self, frames: &mut Vec<MemFrame>) {
        let n = frames.len() as u64;
        if self.end.deliver_all(frames) {
            self.stats.sent += n;
        } else {
            self.stats.dropped += n;
        }
    }

    /// [`PacketIo::transmit`] of any burst.
    #[inline(never)]
    fn transmit_any(&mut self, frames: &mut Vec<MemFrame>) {
        let mut foreign = 0;
        for frame in frames.iter_mut() {
            if self.end.owns(frame) {
                frame.apply_tx_offloads();
            } else {
                foreign += 1;
            }
        }
        if foreign == 0 && self.end.peer_single {
            // The whole burst moves at once to the peer's only queue.
            self.deliver_all(frames);
        } else {
            self.transmit_each(frames);
        }
    }

    /// [`PacketIo::transmit`] frame by frame (offloads done): to a side of several
    /// queues, or with frames of another link among them.
    #[inline(never)]
    fn transmit_each(&mut self, frames: &mut Vec<MemFrame>) {
        let peer = 1 - self.end.side;
        arena::drain_each(frames, |frame| {
            if !self.end.owns(&frame) {
                // Not ours: its buffer goes back to its own link as `frame` drops here.
                self.stats.dropped += 1;
                return;
            }
            let q = self.end.shared().steer(peer, &frame);
            // The handle moves whole into the peer's queue (or its buffer goes back).
            if self.end.deliver(peer, q, frame) {
                self.stats.sent += 1;
            } else {
                self.stats.dropped += 1;
            }
        });
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::{
        ArpOperation, ArpPacket, ArpRepr, EthernetRepr, IpAddress, Ipv4Address, Ipv4Repr,
        TcpControl, TcpRepr, TcpSeqNumber,
    };
    use std::net::Ipv4Addr;

    const MAC_A: MacAddr = smoltcp::wire::EthernetAddress([2, 0, 0, 0, 0, 1]);
    pub(crate) const MAC_B: MacAddr = smoltcp::wire::EthernetAddress([2, 0, 0, 0, 0, 2]);

    /// Two ends with plain capabilities (1500-byte MTU, no offloads).
    fn plain_pair() -> (MemoryLink, MemoryLink) {
        pair(
            Capabilities::new(MAC_A, 1500),
            Capabilities::new(MAC_B, 1500),
        )
    }

    fn send(link: &mut MemoryLink, payload: &[u8]) {
        let mut f = link.alloc_tx(payload.len()).unwrap();
        f.copy_from_slice(payload);
        link.transmit(&mut vec![f]);
    }

    fn recv_all(link: &mut MemoryLink) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        link.receive(&mut out, usize::MAX);
        out.iter().map(|f| f.to_vec()).collect()
    }

    /// An Ethernet/IPv4/TCP SYN frame built with smoltcp's emitters, from `MAC_A` to
    /// `MAC_B`.
    pub(crate) fn tcp_frame(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> Vec<u8> {
        let tcp = TcpRepr {
            src_port: sport,
            dst_port: dport,
            control: TcpControl::Syn,
            seq_number: TcpSeqNumber(1),
            ack_number: None,
            window_len: 1000,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: None,
            payload: &[],
        };
        let ip = Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::Tcp,
            payload_len: tcp.buffer_len(),
            hop_limit: 64,
        };
        let eth = EthernetRepr {
            src_addr: MAC_A,
            dst_addr: MAC_B,
            ethertype: EthernetProtocol::Ipv4,
        };
        let mut buf = vec![0u8; eth.buffer_len() + ip.buffer_len() + tcp.buffer_len()];
        let caps = ChecksumCapabilities::default();
        let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
        eth.emit(&mut f);
        let mut p = Ipv4Packet::new_unchecked(f.payload_mut());
        ip.emit(&mut p, &caps);
        let mut t = TcpPacket::new_unchecked(p.payload_mut());
        tcp.emit(&mut t, &IpAddress::Ipv4(src), &IpAddress::Ipv4(dst), &caps);
        buf
    }

    fn arp_frame() -> Vec<u8> {
        let arp = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: MAC_A,
            source_protocol_addr: Ipv4Address::new(10, 0, 0, 1),
            target_hardware_addr: smoltcp::wire::EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Address::new(10, 0, 0, 2),
        };
        let eth = EthernetRepr {
            src_addr: MAC_A,
            dst_addr: MacAddr::BROADCAST,
            ethertype: EthernetProtocol::Arp,
        };
        let mut buf = vec![0u8; eth.buffer_len() + arp.buffer_len()];
        let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
        eth.emit(&mut f);
        arp.emit(&mut ArpPacket::new_unchecked(f.payload_mut()));
        buf
    }

    #[test]
    fn frames_cross_both_ways_and_count() {
        let (mut a, mut b) = plain_pair();
        send(&mut a, b"hello");
        send(&mut a, b"world!");
        send(&mut b, b"back");
        assert_eq!(b.pending(), 2);
        assert_eq!(a.pending(), 1);
        assert_eq!(
            recv_all(&mut b),
            vec![b"hello".to_vec(), b"world!".to_vec()]
        );
        assert_eq!(recv_all(&mut a), vec![b"back".to_vec()]);
        assert_eq!(b.pending(), 0);
        assert_eq!(a.stats().sent, 2);
        assert_eq!(b.stats().received, 2);
        assert_eq!(b.stats().sent, 1);
        assert_eq!(a.stats().received, 1);
    }

    #[test]
    fn receive_respects_max() {
        let (mut a, mut b) = plain_pair();
        for i in 0..5u8 {
            send(&mut a, &[i; 60]);
        }
        let mut out = Vec::new();
        assert_eq!(b.receive(&mut out, 3), 3);
        assert_eq!(out.len(), 3);
        assert_eq!(out[2][0], 2);
        assert_eq!(b.pending(), 2);
    }

    #[test]
    fn partial_takes_keep_order_and_recycle() {
        let (mut a, mut b) = plain_pair();
        // The receiver takes fewer than arrive, so the queue's front is taken while its
        // back fills: order, counts and buffers must all hold.
        let (mut sent, mut got) = (0u32, 0u32);
        for round in 0..200u32 {
            for _ in 0..(round % 5) {
                send(&mut a, &sent.to_be_bytes());
                sent += 1;
            }
            // A non-empty `out` is appended to, not replaced.
            let mut out = Vec::new();
            b.receive(&mut out, 1);
            b.receive(&mut out, (round % 3) as usize);
            for f in &out {
                assert_eq!(&f[..], &got.to_be_bytes());
                got += 1;
            }
            drop(out);
            assert_eq!(b.pending() as u32, sent - got);
            assert_eq!(a.in_flight() as u32, sent - got);
        }
        assert_eq!(recv_all(&mut b).len() as u32, sent - got);
        assert_eq!(a.in_flight(), 0);
        assert_eq!(b.stats().received, u64::from(sent));
    }

    #[test]
    fn a_burst_with_a_foreign_frame_delivers_the_rest_in_order() {
        let (mut a, mut b) = plain_pair();
        let (mut c, _d) = plain_pair();
        send(&mut a, b"first");
        let mut burst = vec![
            a.alloc_tx(1).unwrap(),
            c.alloc_tx(1).unwrap(),
            a.alloc_tx(1).unwrap(),
        ];
        for (i, f) in burst.iter_mut().enumerate() {
            f[0] = i as u8;
        }
        a.transmit(&mut burst);
        assert!(burst.is_empty());
        assert_eq!(a.stats().sent, 3);
        assert_eq!(a.stats().dropped, 1);
        assert_eq!(c.in_flight(), 0);
        assert_eq!(recv_all(&mut b), vec![b"first".to_vec(), vec![0], vec![2]]);
    }

    #[test]
    fn a_burst_to_a_dropped_end_is_counted_and_recycled() {
        let (mut a, b) = plain_pair();
        drop(b);
        let mut burst: Vec<_> = (0..3).map(|_| a.alloc_tx(60).unwrap()).collect();
        a.transmit(&mut burst);
        assert!(burst.is_empty());
        assert_eq!(a.stats().dropped, 3);
        assert_eq!(a.stats().sent, 0);
        assert_eq!(a.in_flight(), 0);
        assert_eq!(a.end.free_buffers(), 3);
    }

    #[test]
    fn alloc_rejects_oversize_and_respects_in_flight_bound() {
        let (mut a, mut b) = plain_pair();
        assert!(a.alloc_tx(1514).is_some());
        assert!(a.alloc_tx(1515).is_none());
        a.set_in_flight_limit(2);
        let f1 = a.alloc_tx(60).unwrap();
        let f2 = a.alloc_tx(60).unwrap();
        assert!(a.alloc_tx(60).is_none());
        assert_eq!(a.stats().alloc_failures, 1);
        // Dropping an unsent buffer gives it back.
        drop(f1);
        assert_eq!(a.in_flight(), 1);
        a.transmit(&mut vec![f2]);
        // Still out: queued at the peer.
        assert_eq!(a.in_flight(), 1);
        let f3 = a.alloc_tx(60).unwrap();
        assert!(a.alloc_tx(60).is_none());
        let mut out = Vec::new();
        b.receive(&mut out, 8);
        assert_eq!(a.in_flight(), 2);
        drop(out);
        assert_eq!(a.in_flight(), 1);
        drop(f3);
        assert_eq!(a.in_flight(), 0);
    }

    #[test]
    fn buffers_are_recycled_not_reallocated() {
        let (mut a, mut b) = plain_pair();
        send(&mut a, &[7; 100]);
        let mut out = Vec::new();
        b.receive(&mut out, 1);
        let ptr = out[0].as_ptr();
        out.clear();
        let f = a.alloc_tx(200).unwrap();
        assert_eq!(f.as_ptr(), ptr);
        assert_eq!(f.len(), 200);
        assert_eq!(b.end.free_buffers(), 0);
    }

    #[test]
    fn truncate_shortens_the_sent_frame() {
        let (mut a, mut b) = plain_pair();
        let mut f = a.alloc_tx(100).unwrap();
        f[..3].copy_from_slice(b"abc");
        f.truncate(3);
        a.transmit(&mut vec![f]);
        assert_eq!(recv_all(&mut b), vec![b"abc".to_vec()]);
    }

    #[test]
    fn frames_to_a_dropped_end_are_counted_and_recycled() {
        let (mut a, b) = plain_pair();
        send(&mut a, &[1; 60]);
        drop(b);
        assert_eq!(a.in_flight(), 0);
        send(&mut a, &[1; 60]);
        assert_eq!(a.stats().dropped, 1);
        assert_eq!(a.stats().sent, 1);
        assert_eq!(a.in_flight(), 0);
    }

    #[test]
    fn foreign_frames_are_dropped() {
        let (mut a, mut b) = plain_pair();
        let (mut c, _d) = plain_pair();
        let f = c.alloc_tx(60).unwrap();
        a.transmit(&mut vec![f]);
        assert_eq!(a.stats().dropped, 1);
        assert_eq!(b.pending(), 0);
        assert_eq!(c.in_flight(), 0);
        assert!(recv_all(&mut b).is_empty());
    }

    #[test]
    fn frames_outlive_both_ends() {
        let (mut a, mut b) = plain_pair();
        send(&mut a, b"received");
        send(&mut a, b"queued");
        let mut unsent = a.alloc_tx(6).unwrap();
        unsent.copy_from_slice(b"unsent");
        let mut received = Vec::new();
        b.receive(&mut received, 1);
        drop(a);
        drop(b);
        // The last frames keep the arena alive; their bytes are intact and writable.
        assert_eq!(&received[0][..], b"received");
        unsent[0] = b'U';
        assert_eq!(&unsent[..], b"Unsent");
        drop(unsent);
        drop(received);
    }

    #[test]
    fn a_received_frame_outlives_its_sender() {
        let (mut a, mut b) = plain_pair();
        send(&mut a, b"from a");
        let mut out = Vec::new();
        b.receive(&mut out, 1);
        drop(a);
        assert_eq!(&out[0][..], b"from a");
        // The sender is gone: what the receiver sends is dropped, its buffers recycled.
        send(&mut b, b"to nobody");
        assert_eq!(b.stats().dropped, 1);
        assert_eq!(b.in_flight(), 0);
        drop(out);
        let f = b.alloc_tx(10).unwrap();
        assert_eq!(b.in_flight(), 1);
        drop(f);
        assert_eq!(b.in_flight(), 0);
    }

    #[test]
    fn a_foreign_frame_outliving_its_link_is_dropped() {
        let (mut a, b) = plain_pair();
        let (mut c, d) = plain_pair();
        let f = c.alloc_tx(60).unwrap();
        drop(c);
        drop(d);
        // The frame is the last hold on its link; dropping it here frees that link.
        a.transmit(&mut vec![f]);
        assert_eq!(a.stats().dropped, 1);
        assert_eq!(a.stats().sent, 0);
        assert_eq!(b.pending(), 0);
    }

    #[test]
    fn frames_steered_to_a_dropped_queue_are_recycled() {
        let (mut a, mut b) =
            multi_queue_pair(1, 3, RssConfig::symmetric_default(3), MAC_A, MAC_B, 1500);
        let mut next = 0;
        b[0].steer_with(move |_| {
            next += 1;
            next
        });
        // Queues 1, 2, 0, 1, 2 in turn; queue 2 then goes with two frames waiting.
        for _ in 0..5 {
            send(&mut a[0], &[0; 60]);
        }
        assert_eq!(a[0].in_flight(), 5);
        let q2 = b.remove(2);
        assert_eq!(q2.pending(), 2);
        drop(q2);
        assert_eq!(a[0].in_flight(), 3);
        // Queues 0, 1, then 2, which is gone: that frame is dropped.
        for _ in 0..3 {
            send(&mut a[0], &[0; 60]);
        }
        assert_eq!(a[0].stats().sent, 7);
        assert_eq!(a[0].stats().dropped, 1);
        assert_eq!(a[0].in_flight(), 5);
        drop(b);
        assert_eq!(a[0].in_flight(), 0);
    }

    #[test]
    fn a_steering_rule_holding_frames_gives_them_back_when_replaced() {
        let (mut a, b) =
            multi_queue_pair(1, 2, RssConfig::symmetric_default(2), MAC_A, MAC_B, 1500);
        let held = a[0].alloc_tx(60).unwrap();
        b[0].steer_with(move |frame| frame.len() + held.len());
        assert_eq!(a[0].in_flight(), 1);
        send(&mut a[0], &[0; 61]);
        assert_eq!(b[1].pending(), 1);
        b[0].steer_with(|_| 0);
        assert_eq!(a[0].in_flight(), 1);
    }

    #[test]
    fn a_buffer_too_small_for_the_other_side_is_replaced() {
        let mut caps_b = Capabilities::new(MAC_B, 9000);
        caps_b.tso_max = Some(65_000);
        let (mut a, mut b) = pair(Capabilities::new(MAC_A, 1500), caps_b);
        send(&mut a, &[1; 100]);
        let mut out = Vec::new();
        a.receive(&mut out, 1);
        b.receive(&mut out, 1);
        drop(out);
        // The only free buffer has 1,514 bytes: a TSO frame of B needs a new one.
        let big = b.max_tx_len();
        let mut f = b.alloc_tx(big).unwrap();
        assert_eq!(f.len(), big);
        f.fill(0xab);
        b.transmit(&mut vec![f]);
        let got = recv_all(&mut a);
        assert_eq!(got, vec![vec![0xab; big]]);
        assert_eq!(a.end.free_buffers(), 1);
    }

    impl MemoryLink {
        fn max_tx_len(&self) -> usize {
            self.caps.max_tx_frame()
        }
    }

    #[test]
    fn tx_checksum_offload_is_performed() {
        let mut caps = Capabilities::new(MAC_A, 1500);
        caps.tx_checksum = crate::io::ChecksumOffload::ALL;
        let (mut a, mut b) = pair(caps, Capabilities::new(MAC_B, 1500));
        // Data 0x0001 0x0002, checksum field at offset 4 pre-filled with 0x0010.
        let mut f = a.alloc_tx(6).unwrap();
        f.copy_from_slice(&[0, 1, 0, 2, 0, 0x10]);
        f.set_meta(TxMeta {
            checksum: Some(crate::io::ChecksumRequest {
                start: 0,
                offset: 4,
            }),
            tso_mss: None,
        });
        a.transmit(&mut vec![f]);
        let got = recv_all(&mut b).pop().unwrap();
        // !(1 + 2 + 0x10) = !0x13
        assert_eq!(&got[4..], &(!0x13u16).to_be_bytes());
        // A receiver adds the pseudo-header sum (0x10) back and must get all ones.
        let with_pseudo = [&got[..4], &[0x00, 0x10], &got[4..]].concat();
        assert_eq!(ones_complement_sum(&with_pseudo), 0xffff);
    }

    #[test]
    fn a_burst_mixing_offloads_gets_each_once() {
        let mut caps = Capabilities::new(MAC_A, 1500);
        caps.tx_checksum = crate::io::ChecksumOffload::ALL;
        caps.tso_max = Some(9000);
        let (mut a, mut b) = pair(caps, Capabilities::new(MAC_B, 1500));
        let mut tso = a.alloc_tx(4).unwrap();
        tso.copy_from_slice(&[9; 4]);
        tso.set_meta(TxMeta {
            checksum: None,
            tso_mss: Some(1000),
        });
        let mut summed = a.alloc_tx(6).unwrap();
        summed.copy_from_slice(&[0, 1, 0, 2, 0, 0x10]);
        summed.set_meta(TxMeta {
            checksum: Some(crate::io::ChecksumRequest {
                start: 0,
                offset: 4,
            }),
            tso_mss: None,
        });
        a.transmit(&mut vec![tso, summed]);
        let mut out = Vec::new();
        assert_eq!(b.receive(&mut out, 8), 2);
        assert_eq!(RxFrame::meta(&out[0]).gso_size, Some(1000));
        assert_eq!(&out[0][..], &[9; 4]);
        assert_eq!(RxFrame::meta(&out[1]).gso_size, None);
        // Filled once: !(1 + 2 + 0x10).
        assert_eq!(&out[1][4..], &(!0x13u16).to_be_bytes());
    }

    #[test]
    fn multi_queue_steers_tcp_by_toeplitz_and_the_rest_to_queue_0() {
        let rss = RssConfig::symmetric_default(4);
        let (mut a, mut b) = multi_queue_pair(2, 4, rss.clone(), MAC_A, MAC_B, 1500);
        assert_eq!(b.len(), 4);
        assert_eq!(b[3].capabilities().queue, 3);
        assert_eq!(b[3].capabilities().queue_count, 4);
        assert_eq!(b[3].capabilities().rss.as_ref(), Some(&rss));
        let src: Ipv4Addr = "10.0.0.1".parse().unwrap();
        let dst: Ipv4Addr = "10.0.0.2".parse().unwrap();
        let mut hit = [false; 4];
        for sport in 40000..40064u16 {
            let frame = tcp_frame(src, dst, sport, 80);
            send(&mut a[1], &frame);
            let want = usize::from(rss.queue_for_rx_flow(src, dst, sport, 80));
            hit[want] = true;
            for (q, link) in b.iter_mut().enumerate() {
                let got = recv_all(link);
                if q == want {
                    assert_eq!(got, vec![frame.clone()]);
                } else {
                    assert!(got.is_empty());
                }
            }
        }
        assert_eq!(hit, [true; 4], "64 flows should cover all 4 queues");
        // ARP and malformed frames land on queue 0.
        send(&mut a[0], &arp_frame());
        let mut truncated = tcp_frame(src, dst, 1, 2);
        truncated.truncate(40);
        send(&mut a[0], &truncated);
        send(&mut a[0], &[0xff; 3]);
        assert_eq!(b[0].pending(), 3);
        // Replies from B reach A's queues by the same rule, whichever queue sends them.
        let reply = tcp_frame(dst, src, 80, 40000);
        send(&mut b[2], &reply);
        let want = usize::from(rss.queue_for_rx_flow(dst, src, 80, 40000)) % 2;
        assert_eq!(a[want].pending(), 1);
    }

    #[test]
    fn a_custom_rule_steers_every_frame() {
        let (mut a, mut b) =
            multi_queue_pair(1, 3, RssConfig::symmetric_default(3), MAC_A, MAC_B, 1500);
        let mut next = 0;
        b[1].steer_with(move |_| {
            next += 1;
            next
        });
        let src: Ipv4Addr = "10.0.0.1".parse().unwrap();
        let dst: Ipv4Addr = "10.0.0.2".parse().unwrap();
        // One flow, then ARP: round-robin from queue 1, wrapping past the last queue.
        for _ in 0..3 {
            send(&mut a[0], &tcp_frame(src, dst, 40000, 80));
        }
        send(&mut a[0], &arp_frame());
        let pending: Vec<usize> = b.iter().map(|q| q.pending()).collect();
        assert_eq!(pending, vec![1, 2, 1]);
        assert_eq!(recv_all(&mut b[1])[1], arp_frame());
    }

    #[test]
    fn parser_never_panics_on_garbage() {
        for len in 0..80 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let _ = tcp_4tuple_input(&junk);
            let mut eth_ip = junk.clone();
            if eth_ip.len() > 14 {
                eth_ip[12] = 0x08;
                eth_ip[13] = 0x00;
                let _ = tcp_4tuple_input(&eth_ip);
            }
        }
    }
}
