//! What the tests watch: the frames that cross smoltcp's device, and the device itself
//! (smoltcp's `phy::Device` over one end of the in-memory link).

use super::*;

// ----- What crossed the wire -----

/// TCP options of a SYN or SYN-ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SynOpts {
    pub(crate) mss: Option<u16>,
    pub(crate) wscale: Option<u8>,
    pub(crate) sack_permitted: bool,
    pub(crate) timestamps: bool,
}

/// Observations of the TCP conversation, from the adapter's point of view.
#[derive(Debug, Default)]
pub(crate) struct Wire {
    pub(crate) our_syn: Option<SynOpts>,
    pub(crate) peer_syn: Option<SynOpts>,
    /// Non-SYN segments from us, and how many carried a timestamp.
    pub(crate) our_segments: u64,
    pub(crate) our_segments_with_ts: u64,
    /// Non-SYN segments from smoltcp, how many carried a timestamp, how many SACK blocks.
    pub(crate) peer_segments: u64,
    pub(crate) peer_segments_with_ts: u64,
    pub(crate) peer_sack_segments: u64,
    /// Highest sequence number we sent (end of segment), smoltcp's highest ACK, and the
    /// most bytes we ever had outstanding between the two.
    pub(crate) our_snd_max: Option<u32>,
    pub(crate) peer_ack_max: Option<u32>,
    pub(crate) max_outstanding: u32,
    /// The same for smoltcp's data.
    pub(crate) peer_snd_max: Option<u32>,
    pub(crate) our_ack_max: Option<u32>,
    pub(crate) peer_max_outstanding: u32,
    /// Largest window smoltcp advertised after the handshake, scaled as negotiated.
    pub(crate) peer_max_window: u64,
    /// Neighbor Discovery: the solicitations that resolve a neighbour and the
    /// advertisements each side sent.
    pub(crate) our_solicitations: u64,
    pub(crate) peer_solicitations: u64,
    pub(crate) our_advertisements: u64,
    pub(crate) peer_advertisements: u64,
}

/// `a - b` in sequence space (RFC 9293 §3.4), signed.
pub(crate) fn seq_diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

/// Move a sequence-space high-water mark forward.
pub(crate) fn raise(mark: &mut Option<u32>, seq: u32) {
    if mark.is_none_or(|m| seq_diff(seq, m) > 0) {
        *mark = Some(seq);
    }
}

impl Wire {
    /// Look at one frame; `from_us` says which way it went.
    pub(crate) fn observe(&mut self, frame: &[u8], from_us: bool) {
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return;
        };
        let (src, dst, protocol, payload) = match eth.ethertype() {
            EthernetProtocol::Ipv4 => {
                let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
                    return;
                };
                let (src, dst) = (ip.src_addr().into(), ip.dst_addr().into());
                (src, dst, ip.next_header(), ip.payload())
            }
            EthernetProtocol::Ipv6 => {
                let Ok(ip) = Ipv6Packet::new_checked(eth.payload()) else {
                    return;
                };
                let (src, dst) = (ip.src_addr().into(), ip.dst_addr().into());
                (src, dst, ip.next_header(), ip.payload())
            }
            _ => return,
        };
        match protocol {
            IpProtocol::Tcp => self.observe_tcp(src, dst, payload, from_us),
            IpProtocol::Icmpv6 => {
                let Ok(icmp) = Icmpv6Packet::new_checked(payload) else {
                    return;
                };
                if src.is_unspecified() {
                    // Duplicate address detection's probes resolve nobody.
                    return;
                }
                let count = match (icmp.msg_type(), from_us) {
                    (Icmpv6Message::NeighborSolicit, true) => &mut self.our_solicitations,
                    (Icmpv6Message::NeighborSolicit, false) => &mut self.peer_solicitations,
                    (Icmpv6Message::NeighborAdvert, true) => &mut self.our_advertisements,
                    (Icmpv6Message::NeighborAdvert, false) => &mut self.peer_advertisements,
                    _ => return,
                };
                *count += 1;
            }
            _ => {}
        }
    }

    pub(crate) fn observe_tcp(
        &mut self,
        src: IpAddress,
        dst: IpAddress,
        payload: &[u8],
        from_us: bool,
    ) {
        let Ok(tcp) = TcpPacket::new_checked(payload) else {
            return;
        };
        let Ok(repr) = TcpRepr::parse(&tcp, &src, &dst, &ChecksumCapabilities::ignored()) else {
            return;
        };
        if repr.control == TcpControl::Syn {
            let opts = SynOpts {
                mss: repr.max_seg_size,
                wscale: repr.window_scale,
                sack_permitted: repr.sack_permitted,
                timestamps: repr.timestamp.is_some(),
            };
            if from_us {
                self.our_syn = Some(opts);
            } else {
                self.peer_syn = Some(opts);
            }
            return;
        }
        let seq = repr.seq_number.0 as u32;
        if from_us {
            self.our_segments += 1;
            self.our_segments_with_ts += u64::from(repr.timestamp.is_some());
            let end = seq.wrapping_add(repr.segment_len() as u32);
            raise(&mut self.our_snd_max, end);
            if let Some(ack) = repr.ack_number {
                raise(&mut self.our_ack_max, ack.0 as u32);
            }
        } else {
            let end = seq.wrapping_add(repr.segment_len() as u32);
            raise(&mut self.peer_snd_max, end);
            self.peer_segments += 1;
            self.peer_segments_with_ts += u64::from(repr.timestamp.is_some());
            self.peer_sack_segments += u64::from(repr.sack_ranges[0].is_some());
            if let Some(ack) = repr.ack_number {
                raise(&mut self.peer_ack_max, ack.0 as u32);
            }
            // A window field is scaled by the shift smoltcp announced, if both sides did.
            let shift = match (self.our_syn, self.peer_syn) {
                (Some(a), Some(b)) if a.wscale.is_some() => b.wscale.unwrap_or(0),
                _ => 0,
            };
            let win = u64::from(repr.window_len) << shift;
            self.peer_max_window = self.peer_max_window.max(win);
        }
        if let (Some(snd), Some(ack)) = (self.our_snd_max, self.peer_ack_max) {
            self.max_outstanding = self.max_outstanding.max(seq_diff(snd, ack).max(0) as u32);
        }
        if let (Some(snd), Some(ack)) = (self.peer_snd_max, self.our_ack_max) {
            let out = seq_diff(snd, ack).max(0) as u32;
            self.peer_max_outstanding = self.peer_max_outstanding.max(out);
        }
    }
}

// ----- smoltcp's device over the in-memory link -----

/// smoltcp's `phy::Device` on one end of the in-memory link (copying: test adapter).
pub(crate) struct SmolPhy {
    pub(crate) io: Link,
    pub(crate) rx: VecDeque<<Link as PacketIo>::Rx>,
    pub(crate) burst: Vec<<Link as PacketIo>::Rx>,
    pub(crate) wire: Wire,
    /// Frames smoltcp wanted to send while the link had no buffer.
    pub(crate) tx_dropped: u64,
}

pub(crate) struct SmolRx(<Link as PacketIo>::Rx);

pub(crate) struct SmolTx<'a> {
    pub(crate) io: &'a mut Link,
    pub(crate) wire: &'a mut Wire,
    pub(crate) tx_dropped: &'a mut u64,
}

impl phy::RxToken for SmolRx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for SmolTx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        match self.io.alloc_tx(len) {
            Some(mut buf) => {
                let r = f(&mut buf);
                self.wire.observe(&buf, false);
                let mut burst = vec![buf];
                self.io.transmit(&mut burst);
                r
            }
            None => {
                *self.tx_dropped += 1;
                let mut scratch = vec![0u8; len];
                f(&mut scratch)
            }
        }
    }
}

impl phy::Device for SmolPhy {
    type RxToken<'a> = SmolRx;
    type TxToken<'a> = SmolTx<'a>;

    fn receive(&mut self, _timestamp: smoltcp::time::Instant) -> Option<(SmolRx, SmolTx<'_>)> {
        if self.rx.is_empty() {
            self.io.receive(&mut self.burst, 32);
            self.rx.extend(self.burst.drain(..));
        }
        let frame = self.rx.pop_front()?;
        self.wire.observe(&frame, true);
        Some((
            SmolRx(frame),
            SmolTx {
                io: &mut self.io,
                wire: &mut self.wire,
                tx_dropped: &mut self.tx_dropped,
            },
        ))
    }

    fn transmit(&mut self, _timestamp: smoltcp::time::Instant) -> Option<SmolTx<'_>> {
        Some(SmolTx {
            io: &mut self.io,
            wire: &mut self.wire,
            tx_dropped: &mut self.tx_dropped,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        // smoltcp counts the Ethernet header in the MTU.
        caps.max_transmission_unit = 1514;
        caps
    }
}
