//! `mock-openai`: the test suites' OpenAI-compatible mock as a standalone server, for
//! benchmarks. Every chat answer is `stay` after a fixed latency; embeddings are
//! deterministic vectors after their own latency.
//!
//!     mock-openai [--port P] [--latency-ms 200] [--embed-latency-ms 100] [--dims 384]
//!
//! Prints `url http://127.0.0.1:P/v1` on stdout once it listens, then serves until it is
//! killed.

use std::io::Write;

use hearsay_tests::mock::{MockOptions, MockServer, Reply};

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let latency_ms = arg(&args, "--latency-ms", 200);
    let options = MockOptions {
        embed_dims: arg(&args, "--dims", 384) as usize,
        embed_delay_ms: arg(&args, "--embed-latency-ms", 100),
        port: arg(&args, "--port", 0) as u16,
        ..MockOptions::default()
    };
    let server = MockServer::start_with(options, move |_| {
        Reply::slow(
            r#"{"action": "stay", "speech": "", "x": 0, "y": 0}"#,
            latency_ms,
        )
    });
    println!("url {}", server.url);
    let _ = std::io::stdout().flush();
    // Serve until killed.
    let _server = server;
    loop {
        std::thread::park();
    }
}
