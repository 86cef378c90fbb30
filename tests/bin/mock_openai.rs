//! `mock-openai`: the test suites' OpenAI-compatible mock as a standalone server, for
//! benchmarks. Every chat answer is `stay` after a fixed latency — or, with `--varied`,
//! a decision drawn from the NPC and the tick (a fifth talk, two fifths walk to a cell of
//! a `--width` × `--height` map, the rest stay), so that runs have something to react
//! to; embeddings are deterministic vectors after their own latency.
//!
//!     mock-openai [--port P] [--latency-ms 200] [--embed-latency-ms 100] [--dims 384]
//!                 [--varied] [--width 40] [--height 40]
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
    let varied = args.iter().any(|a| a == "--varied");
    let (width, height) = (arg(&args, "--width", 40), arg(&args, "--height", 40));
    let server = MockServer::start_with(options, move |call| {
        if !varied || call.reflect {
            return Reply::slow(
                r#"{"action": "stay", "speech": "", "x": 0, "y": 0}"#,
                latency_ms,
            );
        }
        // A fixed mix from (NPC, tick): the same run gets the same answers.
        let h = call
            .npc
            .bytes()
            .fold(call.tick.wrapping_mul(0x9e37_79b9_7f4a_7c15), |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
        let answer = match h % 5 {
            0 => {
                serde_json::json!({"action": "talk", "speech": format!("{} has news at turn {}", call.npc, call.tick), "x": 0, "y": 0})
            }
            1 | 2 => {
                serde_json::json!({"action": "move", "speech": "", "x": (h >> 8) % width.max(1), "y": (h >> 24) % height.max(1)})
            }
            _ => serde_json::json!({"action": "stay", "speech": "", "x": 0, "y": 0}),
        };
        Reply::slow(answer.to_string(), latency_ms)
    });
    println!("url {}", server.url);
    let _ = std::io::stdout().flush();
    // Serve until killed.
    let _server = server;
    loop {
        std::thread::park();
    }
}
