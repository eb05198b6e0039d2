//! The WebSocket endpoints' live metrics: the stack's counters only, for now.

use rusty::metrics::AppMetrics;

use crate::app::{WsApp, WsServerApp};
use crate::client::WsClient;
use crate::server::WsServer;

impl<A: WsServerApp> AppMetrics for WsServer<A> {}

impl<A: WsApp> AppMetrics for WsClient<A> {}
