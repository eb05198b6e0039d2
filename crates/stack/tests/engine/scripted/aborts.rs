//! An application that aborts inside a callback: a real abort, and no callbacks after
//! it but `closed`.

use super::*;

/// `resume_receive` runs the handler's data callback; an abort there is a real abort:
/// RST, close reason `Aborted`, counted as such.
#[test]
fn abort_inside_resumed_delivery_is_reported_as_aborted() {
    let mut net = Net::new(
        config(),
        Recorder {
            pause: true,
            ..Default::default()
        },
    );
    net.eng.listen(PORT, 16);
    let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), BARE);
    let id = net.handler().ids[0];
    pc.data(&mut net, b"hello");
    assert_eq!(net.handler().data_calls, 1);
    net.eng.handler_mut().abort_on_data = true;
    assert!(net.eng.resume_receive(id));
    let out = tcp_of(&net.poll());
    assert!(out.iter().any(TcpOut::is_rst), "{out:?}");
    assert_eq!(net.handler().data_calls, 2);
    assert_eq!(net.handler().closed, vec![CloseReason::Aborted]);
    assert_eq!(net.stats().conns_aborted, 1);
    assert_eq!(net.stats().rsts_sent, 1);
    assert_eq!(net.stats().conns_closed, 0);
    assert_eq!(net.eng.connection_count(), 0);
    assert!(!net.eng.resume_receive(id));
}

/// After the application aborts inside a callback it gets no more callbacks for that
/// connection but `closed`: not `peer_closed` for a FIN in the same segment, nor the
/// final offer of unread bytes.
#[test]
fn no_callbacks_after_abort_in_a_callback() {
    let mut net = Net::new(
        config(),
        Recorder {
            abort_on_data: true,
            ..Default::default()
        },
    );
    net.eng.listen(PORT, 16);
    let mut pc = connect_peer(&mut net, 40000, SeqNum(1000), BARE);
    let mut seg = pc.seg(&net);
    seg.fin = true;
    seg.psh = true;
    pc.snd_nxt += 6;
    let out = pc.send(&mut net, &seg, b"hello");
    assert!(out.iter().any(TcpOut::is_rst), "{out:?}");
    assert_eq!(net.handler().data_calls, 1);
    assert_eq!(net.handler().peer_closed, 0);
    assert_eq!(net.handler().closed, vec![CloseReason::Aborted]);
    assert_eq!(net.stats().unread_bytes_discarded, 5);
}
