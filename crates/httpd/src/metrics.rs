//! httpd's live metrics: the stack's counters only, for now.

use rusty::metrics::AppMetrics;

use crate::https::Https;
use crate::server::HttpServer;

impl AppMetrics for HttpServer {}

impl AppMetrics for Https {}
