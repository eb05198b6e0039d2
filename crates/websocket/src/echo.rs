//! The echo application behind `ws-echo`: every text and binary message goes back as
//! the same type, its assembled payload queued by reference (no copy), or compressed
//! into a new buffer when the connection negotiated permessage-deflate (the echo goes
//! through the codec like any message sent with [`WsHandle`]).

use std::net::SocketAddr;

use crate::app::{Accept, Message, WsApp, WsServerApp};
use crate::handshake::{Reject, Request};
use crate::session::WsHandle;

/// Echoes every message on every connection; accepts every valid upgrade on any path,
/// without a subprotocol.
#[derive(Debug, Default, Clone, Copy)]
pub struct WsEcho;

impl WsApp for WsEcho {
    type State = ();

    fn message(&mut self, ws: &mut WsHandle<'_, '_, ()>, msg: Message<'_>) {
        let kind = msg.kind();
        // Refused only once we have sent a close frame: then nothing more is due.
        let _ = ws.send_shared(kind, msg.into_bytes());
    }
}

impl WsServerApp for WsEcho {
    fn open(&mut self, _req: &Request, _peer: SocketAddr) -> Result<Accept<()>, Reject> {
        Ok(Accept::new(()))
    }
}
