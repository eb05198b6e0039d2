//! The echo programs' live metrics: the stack's counters only, for now.

use rusty::metrics::AppMetrics;

use crate::{DiscardServer, EchoServer, LoadClient};

impl AppMetrics for EchoServer {}

impl AppMetrics for DiscardServer {}

impl AppMetrics for LoadClient {}
