//! The client role as a Rusty [`Handler`]: it sends the opening handshake on each
//! connection it opens, checks the server's answer, masks what it sends (RFC 6455
//! §5.3) and otherwise runs the same frame loop as the server. For tests and load
//! generators.

use std::net::SocketAddr;

use rand_chacha::rand_core::{RngCore, SeedableRng};

use rusty_stack::{Conn, Handler, Opener};

use crate::app::WsApp;
use crate::base64;
use crate::config::WsConfig;
use crate::deflate;
use crate::extension::DeflateCodec;
use crate::handshake::{check_response, ClientRequest, HeadProgress};
use crate::parser::Role;
use crate::session::{
    endpoint_accessors, handler_callbacks, os_seed, send_all, ClientSide, Endpoint, MaskKeys,
    Phase, WsConn,
};
use crate::stats::WsStats;

/// A WebSocket client running application `A`, one per worker. The application opens
/// connections from [`WsApp::poll`] through its [`Connector`]; code outside the
/// handler can also use the engine's `connect` with a state from
/// [`WsClient::connection`].
pub struct WsClient<A> {
    app: A,
    cfg: WsConfig,
    stats: WsStats,
    keys: Keys,
}

/// Where each connection's handshake key and mask stream come from: the worker's
/// ChaCha20 stream, seeded from the OS's randomness (RFC 6455 §10.3). Each connection
/// takes 16 bytes of it for its key and 32 for the seed of its own mask stream, so a
/// key tells nothing of any mask.
struct Keys(rand_chacha::ChaCha20Rng);

impl Keys {
    fn from_os() -> Keys {
        Keys(rand_chacha::ChaCha20Rng::from_seed(os_seed()))
    }

    fn connection<S>(&mut self, cfg: &WsConfig, request: ClientRequest, state: S) -> WsConn<S> {
        let mut c = WsConn::new(Role::Client, cfg, Some(state));
        let mut key = [0u8; 16];
        self.0.fill_bytes(&mut key);
        let mut seed = [0u8; 32];
        self.0.fill_bytes(&mut seed);
        c.set_masks(MaskKeys::new(seed));
        c.client = Some(Box::new(ClientSide {
            request,
            key: base64::encode(&key),
        }));
        c
    }
}

/// What [`WsApp::poll`] opens client connections with.
pub struct Connector<'a, 'o, S> {
    cfg: &'a WsConfig,
    keys: &'a mut Keys,
    opener: &'a mut Opener<'o, WsConn<S>>,
}

impl<S> Connector<'_, '_, S> {
    /// Open a TCP connection to `remote` and, once it is up, ask for `request`; the
    /// application's `state` rides along (`opened` follows the server's 101, `closed`
    /// any failure).
    pub fn connect(&mut self, remote: SocketAddr, request: ClientRequest, state: S) {
        let conn = self.keys.connection(self.cfg, request, state);
        self.opener.connect(remote, conn);
    }
}

impl<A: WsApp> WsClient<A> {
    /// A client with limits `cfg`.
    pub fn new(app: A, cfg: WsConfig) -> WsClient<A> {
        WsClient {
            app,
            cfg,
            stats: WsStats::default(),
            keys: Keys::from_os(),
        }
    }

    /// The connection state for a new connection that will ask for `request` and
    /// carry the application state `state`.
    pub fn connection(&mut self, request: ClientRequest, state: A::State) -> WsConn<A::State> {
        self.keys.connection(&self.cfg, request, state)
    }

    endpoint_accessors!();

    /// Read the server's response (§4.1 client requirements).
    fn handshake(&mut self, conn: &mut Conn<'_, WsConn<A::State>>, data: &[u8]) -> usize {
        let used = match conn.state().head.push(data, self.cfg.max_handshake) {
            HeadProgress::Partial => return data.len(),
            HeadProgress::TooLarge => {
                self.refuse(conn, "response head too large".to_string());
                return data.len();
            }
            HeadProgress::Complete(n) => n,
        };
        let st = conn.state();
        let checked = match &st.client {
            Some(c) => check_response(
                st.head.bytes(),
                &c.key,
                &c.request.protocols,
                &self.cfg.deflate,
            ),
            None => return data.len(),
        };
        match checked {
            Ok(answer) => {
                st.protocol = answer.protocol;
                st.client = None;
                if let Some(neg) = answer.deflate {
                    let codec = DeflateCodec::new(&neg, deflate::Role::Client, &self.cfg.deflate);
                    st.set_codec(Box::new(codec));
                    self.stats.deflate += 1;
                }
                let mut ep = self.endpoint();
                ep.opened(conn);
                used + ep.frames(conn, &data[used..])
            }
            Err(e) => {
                self.refuse(conn, format!("handshake refused: {e:?}"));
                data.len()
            }
        }
    }

    fn refuse(&mut self, conn: &mut Conn<'_, WsConn<A::State>>, why: String) {
        self.stats.rejected += 1;
        log::debug!("websocket client {}: {why}", conn.peer_addr());
        let st = conn.state();
        st.phase = Phase::Closed;
        st.set_local_close(crate::close::ABNORMAL, why);
        conn.close();
    }
}

impl<A: WsApp> Handler for WsClient<A> {
    type Conn = WsConn<A::State>;

    /// A client accepts no connections.
    fn accept(
        &mut self,
        _local: std::net::SocketAddr,
        _remote: std::net::SocketAddr,
    ) -> Option<WsConn<A::State>> {
        None
    }

    fn connected(&mut self, conn: &mut Conn<'_, Self::Conn>) {
        let offer = self
            .cfg
            .deflate
            .enabled
            .then(|| deflate::client_offer(&self.cfg.deflate));
        let request = conn
            .state()
            .client
            .as_ref()
            .map(|c| c.request.to_bytes_offering(&c.key, offer.as_deref()));
        match request {
            Some(r) => {
                let _ = send_all(conn, &r);
                conn.set_timer(self.cfg.handshake_timeout);
            }
            // Not built by `connection`: nothing to ask for.
            None => conn.abort(),
        }
    }

    fn poll(&mut self, opener: &mut Opener<'_, Self::Conn>) {
        let mut connector = Connector {
            cfg: &self.cfg,
            keys: &mut self.keys,
            opener,
        };
        self.app.poll(&mut connector);
    }

    handler_callbacks!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_of(keys: &mut Keys) -> String {
        let c = keys.connection(&WsConfig::default(), ClientRequest::new("h", "/"), ());
        c.client.expect("a client connection").key
    }

    /// Handshake keys come from a stream the OS seeded: they differ between
    /// connections and between workers (two generators never start alike).
    #[test]
    fn handshake_keys_are_fresh_per_connection_and_worker() {
        let (mut a, mut b) = (Keys::from_os(), Keys::from_os());
        let from_a: Vec<String> = (0..64).map(|_| key_of(&mut a)).collect();
        let mut all = from_a.clone();
        all.extend((0..64).map(|_| key_of(&mut b)));
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 128, "{from_a:?}");
        assert!(from_a
            .iter()
            .all(|k| base64::decode(k).map(|b| b.len()) == Some(16)));
    }

    /// The frame masks cannot be computed from the handshake key, which a passive
    /// observer sees (RFC 6455 §10.3). With a generator whose outputs reveal its state,
    /// they could: xorshift64* outputs its state times an odd constant, so one 64-bit
    /// word of the key gives the state, and the state gives every later output. Here
    /// that prediction (for every way of cutting a mask from an output) matches none of
    /// a connection's masks; the masks come from a ChaCha20 stream of their own, seeded
    /// from output the key does not contain.
    #[test]
    fn masks_cannot_be_computed_from_the_key() {
        const MUL: u64 = 0x2545_F491_4F6C_DD1D;
        // MUL's inverse modulo 2^64 (Newton's iteration doubles the correct bits).
        let mut inv: u64 = MUL;
        for _ in 0..5 {
            inv = inv.wrapping_mul(2u64.wrapping_sub(MUL.wrapping_mul(inv)));
        }
        assert_eq!(MUL.wrapping_mul(inv), 1);
        let step = |mut x: u64| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x
        };
        let mut keys = Keys::from_os();
        for _ in 0..8 {
            let mut c = keys.connection(&WsConfig::default(), ClientRequest::new("h", "/"), ());
            let key = base64::decode(&c.client.as_ref().expect("a client").key).expect("base64");
            let masks: Vec<[u8; 4]> = (0..16).map(|_| c.next_mask().expect("masks")).collect();
            for word in key.chunks_exact(8) {
                let word = u64::from_le_bytes(word.try_into().expect("8 bytes"));
                let mut state = word.wrapping_mul(inv);
                for _ in 0..32 {
                    state = step(state);
                    let out = state.wrapping_mul(MUL).to_le_bytes();
                    for cut in out.windows(4) {
                        assert!(
                            !masks.iter().any(|m| m == cut),
                            "a mask follows from the key"
                        );
                    }
                }
            }
            // Nor are the masks cut from the key itself.
            for cut in key.windows(4) {
                assert!(!masks.iter().any(|m| m == cut), "a mask is part of the key");
            }
        }
    }
}
