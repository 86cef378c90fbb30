//! A real headless Chromium driven over the DevTools protocol (a websocket on
//! 127.0.0.1): open a page, collect every console error and uncaught exception, and
//! evaluate script in it. The browser is Debian's `chromium` (scripts/test.sh installs
//! it); `HEARSAY_CHROMIUM` names another binary.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A Chromium binary, if one is installed.
pub fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HEARSAY_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join(name))
                    .find(|p| p.is_file())
            })
        })
}

/// A headless browser with one page attached.
pub struct Browser {
    child: Child,
    ws: tungstenite::WebSocket<TcpStream>,
    session: String,
    next_id: u64,
    /// Every event the page sent.
    pub events: Vec<Value>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts `bin` headless and attaches to its first page.
    pub fn launch(bin: &Path) -> Browser {
        let profile = tempfile::tempdir().expect("profile dir");
        let mut cmd = Command::new(bin);
        cmd.args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().expect("chromium starts");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.split("DevTools listening on ").nth(1) {
                    let _ = tx.send(url.trim().to_owned());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("chromium prints its DevTools address");
        let host = url
            .strip_prefix("ws://")
            .and_then(|r| r.split('/').next())
            .expect("ws://HOST:PORT/…")
            .to_owned();
        let stream = TcpStream::connect(&host).expect("connect to DevTools");
        // The handshake waits as long as a loaded machine needs (with the short read
        // timeout below, a slow answer broke it off half-way: HandshakeError::Interrupted
        // in CI); the reads after it poll every 200 ms against their own deadlines.
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("read timeout");
        let (ws, _) = tungstenite::client(url.as_str(), stream).expect("websocket handshake");
        ws.get_ref()
            .set_read_timeout(Some(Duration::from_millis(200)))
            .expect("read timeout");
        let mut browser = Browser {
            child,
            ws,
            session: String::new(),
            next_id: 0,
            events: Vec::new(),
            _profile: profile,
        };
        let targets = browser.call("Target.getTargets", json!({}));
        let page = targets["targetInfos"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["type"] == "page"))
            .and_then(|t| t["targetId"].as_str())
            .expect("a page target")
            .to_owned();
        let attached = browser.call(
            "Target.attachToTarget",
            json!({ "targetId": page, "flatten": true }),
        );
        browser.session = attached["sessionId"]
            .as_str()
            .expect("session id")
            .to_owned();
        for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
            browser.call(domain, json!({}));
        }
        browser
    }

    fn read(&mut self, deadline: Instant) -> Option<Value> {
        loop {
            match self.ws.read() {
                Ok(tungstenite::Message::Text(text)) => {
                    return serde_json::from_str(text.as_str()).ok();
                }
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => panic!("DevTools connection failed: {e}"),
            }
            if Instant::now() > deadline {
                return None;
            }
        }
    }

    /// Calls `method` (on the page once attached) and returns its result.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if !self.session.is_empty() {
            msg["sessionId"] = json!(self.session);
        }
        self.ws
            .send(tungstenite::Message::text(msg.to_string()))
            .expect("send to DevTools");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let m = self
                .read(deadline)
                .unwrap_or_else(|| panic!("no answer to {method} in 60 s"));
            if m["id"] == id {
                assert!(m.get("error").is_none(), "{method} failed: {m}");
                return m["result"].clone();
            }
            self.events.push(m);
        }
    }

    /// Opens `path` and waits for its load event.
    pub fn open(&mut self, path: &Path) {
        let url = format!("file://{}", path.canonicalize().expect("path").display());
        self.call("Page.navigate", json!({ "url": url }));
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self
            .events
            .iter()
            .any(|e| e["method"] == "Page.loadEventFired")
        {
            let m = self.read(deadline).expect("the page loads in 60 s");
            self.events.push(m);
        }
    }

    /// Evaluates `expression` in the page and returns its value.
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        );
        assert!(
            r.get("exceptionDetails").is_none(),
            "the script threw: {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }

    /// Console errors, uncaught exceptions and error log entries so far.
    pub fn errors(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match e["method"].as_str() {
                Some("Runtime.exceptionThrown") => {
                    Some(e["params"]["exceptionDetails"].to_string())
                }
                Some("Runtime.consoleAPICalled")
                    if matches!(e["params"]["type"].as_str(), Some("error" | "assert")) =>
                {
                    Some(e["params"]["args"].to_string())
                }
                Some("Log.entryAdded") if e["params"]["entry"]["level"] == "error" => {
                    Some(e["params"]["entry"].to_string())
                }
                _ => None,
            })
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Politely first, then by force; then whatever of its process group is left
        // (Chromium's helpers), one PID at a time.
        let _ = self.ws.send(tungstenite::Message::text(
            json!({ "id": 0, "method": "Browser.close" }).to_string(),
        ));
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let group = self.child.id();
        let _ = self.child.kill();
        let _ = self.child.wait();
        for pid in group_members(group) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// The processes whose process group is `group` (from /proc).
fn group_members(group: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // pid (comm) state ppid pgrp …; comm may hold spaces.
                    let rest = stat.rsplit_once(')')?.1;
                    rest.split_whitespace().nth(2)?.parse::<u32>().ok()
                })
                == Some(group)
        })
        .filter(|&pid| pid != group && pid > 1)
        .collect()
}
