//! The real `hearsay` binary in a real pseudo-terminal (portable-pty), its output run
//! through a terminal emulator (vt100), so tests read the screen a user would see and
//! type the keys a user would press.

use std::io::{Read, Write};
use std::num::NonZeroU16;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};

/// A `hearsay` process on a pseudo-terminal.
pub struct Tty {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    parser: Arc<Mutex<vt100::Parser>>,
    raw: Arc<Mutex<Vec<u8>>>,
    // Kept open while the child runs.
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Tty {
    /// Starts `hearsay ARGS` on a `cols` × `rows` terminal, in the workspace root.
    pub fn spawn(args: &[&str], cols: u16, rows: u16) -> Tty {
        Self::spawn_with_env(args, cols, rows, &[])
    }

    /// [`Tty::spawn`] with extra environment variables.
    pub fn spawn_with_env(args: &[&str], cols: u16, rows: u16, env: &[(&str, &str)]) -> Tty {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut cmd = CommandBuilder::new(crate::bin());
        cmd.args(args);
        cmd.cwd(crate::root());
        cmd.env("TERM", "xterm-256color");
        cmd.env_remove("RUST_LOG");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = pair.slave.spawn_command(cmd).expect("spawn in the pty");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let writer = pair.master.take_writer().expect("pty writer");
        let nz = |n: u16| NonZeroU16::new(n).expect("non-zero size");
        let parser = Arc::new(Mutex::new(vt100::Parser::new(nz(rows), nz(cols), 0)));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let (p, r) = (parser.clone(), raw.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            // Ends when the child closes the terminal (EOF or EIO).
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut parser) = p.lock() {
                    parser.process(&buf[..n]);
                }
                if let Ok(mut raw) = r.lock() {
                    raw.extend_from_slice(&buf[..n]);
                }
            }
        });
        Tty {
            child,
            writer,
            parser,
            raw,
            _master: pair.master,
        }
    }

    /// The screen as text, one line per row.
    pub fn screen(&self) -> String {
        self.parser.lock().expect("parser").screen().contents()
    }

    /// The character drawn at (`row`, `col`).
    pub fn cell(&self, row: u16, col: u16) -> String {
        self.parser
            .lock()
            .expect("parser")
            .screen()
            .cell(row, col)
            .map(|c| c.contents().to_owned())
            .unwrap_or_default()
    }

    /// Whether the program is on the alternate screen.
    pub fn alternate(&self) -> bool {
        self.parser
            .lock()
            .expect("parser")
            .screen()
            .alternate_screen()
    }

    /// Every byte the program wrote.
    pub fn raw(&self) -> Vec<u8> {
        self.raw.lock().expect("raw").clone()
    }

    /// Waits until `ok` holds for the screen; panics with the screen after `timeout`.
    pub fn wait_for(&self, what: &str, timeout: Duration, ok: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(
                started.elapsed() < timeout,
                "waited {timeout:?} for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(40));
        }
    }

    /// Types `keys`.
    pub fn send(&mut self, keys: &str) {
        self.writer.write_all(keys.as_bytes()).expect("type");
        self.writer.flush().expect("flush");
    }

    /// Waits for the program to exit; its exit code.
    pub fn wait_exit(&mut self, timeout: Duration) -> u32 {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                // Let the reader drain what the program wrote last.
                std::thread::sleep(Duration::from_millis(200));
                return status.exit_code();
            }
            if started.elapsed() > timeout {
                let _ = self.child.kill();
                panic!(
                    "the program did not exit in {timeout:?}; screen:\n{}",
                    self.screen()
                );
            }
            std::thread::sleep(Duration::from_millis(40));
        }
    }
}

impl Drop for Tty {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The tick in a `hearsay` view's header ("tick 12/239"), if one is shown.
pub fn shown_tick(screen: &str) -> Option<u64> {
    let rest = screen.lines().next()?.split(" · tick ").nth(1)?;
    rest.split('/').next()?.trim().parse().ok()
}
