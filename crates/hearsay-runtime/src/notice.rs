//! Notices: the few lines a command says on stderr before it starts work that the user
//! should see first — which key goes to which host before the first network call, what
//! validation noticed. The binary installs where they go ([`set_sink`]); a library caller
//! that installs nothing hears nothing.

use std::collections::BTreeSet;
use std::sync::{Mutex, OnceLock};

type Sink = Box<dyn Fn(&str) + Send + Sync>;

static SINK: OnceLock<Sink> = OnceLock::new();
/// Lines said so far: a sweep's runs share one announcement.
static SAID: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Where notices go, for the life of the process (the first call wins).
pub fn set_sink(sink: impl Fn(&str) + Send + Sync + 'static) {
    let _ = SINK.set(Box::new(sink));
}

/// Says `line`, once per process.
pub fn say(line: &str) {
    let Some(sink) = SINK.get() else {
        return;
    };
    let new = SAID
        .lock()
        .map(|mut said| said.len() < 10_000 && said.insert(line.to_owned()))
        .unwrap_or(true);
    if new {
        sink(line);
    }
}
