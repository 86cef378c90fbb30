//! hearsay's terminal view (ratatui): a run's map, speech, news and spread curves, tick
//! by tick — played back from a finished run's `events.jsonl` (`hearsay watch`) or fed
//! live by a run in progress (`hearsay run --watch`).
//!
//! This crate owns the view only: it reads frames ([`hearsay_runtime::story::Frame`])
//! and draws them; it never runs the simulation and never touches a store. In a live
//! run the view's pace is the run's pace — the run waits for the view to take each tick,
//! so pausing the view pauses the run — and quitting stops the run after the tick it is
//! on (resumable).
//!
//! The terminal is put back as it was on exit, on error and on panic (ratatui's
//! `init`/`restore` with its panic hook).

pub mod board;
pub mod ui;

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use hearsay_runtime::RunError;
use hearsay_runtime::story::{Cast, Frame, FrameReader};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use crate::board::Board;

/// Ticks per second the view can play at; `None` is as fast as frames come.
pub const SPEEDS: [Option<u32>; 9] = [
    Some(1),
    Some(2),
    Some(5),
    Some(10),
    Some(20),
    Some(50),
    Some(100),
    Some(500),
    None,
];

/// Where frames come from.
pub enum Source {
    /// A run's event log, read as the view needs it.
    Log(Box<FrameReader<hearsay_runtime::logfile::LogReader>>),
    /// A run in progress: each tick's event lines, as the run makes them (the first
    /// tick already taken off the channel, if it was).
    Live {
        /// A tick received before the view started.
        pending: Option<(u64, Vec<String>)>,
        /// The ticks after it, (tick, event lines), as the run sends them.
        rx: Receiver<(u64, Vec<String>)>,
    },
}

/// How the view ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The user quit.
    Quit,
}

/// The view's state: every frame seen so far, and which of them is shown.
struct Viewer {
    cast: Cast,
    seed: u64,
    source: Source,
    frames: Vec<Frame>,
    shown: usize,
    board: Board,
    fact: usize,
    npc: usize,
    paused: bool,
    speed: usize,
    ended: bool,
    live: bool,
}

impl Viewer {
    /// The next frame from the source, if one is there now.
    fn pull(&mut self) -> Result<Option<Frame>, RunError> {
        if self.ended {
            return Ok(None);
        }
        let frame =
            match &mut self.source {
                Source::Log(reader) => reader.next_frame(&self.cast)?,
                Source::Live { pending, rx } => {
                    let next = match pending.take() {
                        Some(tick) => Ok(tick),
                        None => rx.try_recv(),
                    };
                    match next {
                        Ok((_, lines)) => Some(Frame::parse(&lines, &self.cast).map_err(|e| {
                            RunError::RunDir {
                                path: hearsay_runtime::rundir::EVENTS_FILE.into(),
                                problem: e,
                            }
                        })?),
                        Err(TryRecvError::Empty) => return Ok(None),
                        Err(TryRecvError::Disconnected) => None,
                    }
                }
            };
        if frame.is_none() {
            self.ended = true;
        }
        Ok(frame)
    }

    /// Shows one more tick; false if none is available yet.
    fn forward(&mut self) -> Result<bool, RunError> {
        if self.shown == self.frames.len() {
            match self.pull()? {
                Some(f) => self.frames.push(f),
                None => return Ok(false),
            }
        }
        self.board.apply(&self.cast, &self.frames[self.shown]);
        self.shown += 1;
        Ok(true)
    }

    /// Shows one tick less (rebuilt from the start: applying frames is cheap).
    fn back(&mut self) {
        if self.shown <= 1 {
            return;
        }
        self.shown -= 1;
        let mut board = Board::new(&self.cast);
        for f in &self.frames[..self.shown] {
            board.apply(&self.cast, f);
        }
        self.board = board;
    }

    fn at_end(&self) -> bool {
        self.ended && self.shown == self.frames.len()
    }

    fn draw(&self, terminal: &mut ratatui::DefaultTerminal) -> std::io::Result<()> {
        terminal.draw(|f| {
            ui::draw(
                f,
                &ui::Screen {
                    cast: &self.cast,
                    board: &self.board,
                    seed: self.seed,
                    fact: self.fact,
                    npc: self.npc,
                    paused: self.paused,
                    speed: SPEEDS[self.speed],
                    live: self.live,
                    ended: self.at_end(),
                },
            )
        })?;
        Ok(())
    }

    /// Handles a key; returns whether to quit.
    fn key(&mut self, code: KeyCode, mods: KeyModifiers) -> Result<bool, RunError> {
        let n_facts = self.cast.facts.len().max(1);
        let n_npcs = self.cast.npcs.len().max(1);
        match code {
            KeyCode::Char('q') | KeyCode::Esc => return Ok(true),
            KeyCode::Char('c') if mods.contains(KeyModifiers::CONTROL) => return Ok(true),
            KeyCode::Char(' ') | KeyCode::Char('p') => self.paused = !self.paused,
            KeyCode::Right | KeyCode::Char('.') | KeyCode::Char('l') => {
                self.paused = true;
                self.forward()?;
            }
            KeyCode::Left | KeyCode::Char(',') | KeyCode::Char('h') => {
                self.paused = true;
                self.back();
            }
            KeyCode::Char('+') | KeyCode::Char('=') | KeyCode::Up => {
                self.speed = (self.speed + 1).min(SPEEDS.len() - 1);
            }
            KeyCode::Char('-') | KeyCode::Down => self.speed = self.speed.saturating_sub(1),
            KeyCode::Char('f') => self.fact = (self.fact + 1) % n_facts,
            KeyCode::Char('F') => self.fact = (self.fact + n_facts - 1) % n_facts,
            KeyCode::Char('n') | KeyCode::Tab => self.npc = (self.npc + 1) % n_npcs,
            KeyCode::Char('N') | KeyCode::BackTab => self.npc = (self.npc + n_npcs - 1) % n_npcs,
            _ => {}
        }
        Ok(false)
    }
}

/// Options of a view.
#[derive(Clone, Copy, Debug)]
pub struct ViewOptions {
    /// Ticks per second to start at (the nearest of [`SPEEDS`]; 0 = as fast as possible).
    pub speed: u32,
    /// Start paused (space or `p` resumes).
    pub paused: bool,
}

impl Default for ViewOptions {
    fn default() -> Self {
        Self {
            speed: 10,
            paused: false,
        }
    }
}

fn speed_index(speed: u32) -> usize {
    if speed == 0 {
        return SPEEDS.len() - 1;
    }
    SPEEDS
        .iter()
        .position(|s| s.is_some_and(|s| s >= speed))
        .unwrap_or(SPEEDS.len() - 1)
}

/// Runs the view on the terminal until the user quits. The terminal is restored
/// however this returns (and on panic).
pub fn view(cast: Cast, seed: u64, source: Source, options: ViewOptions) -> Result<Exit, RunError> {
    let live = matches!(source, Source::Live { .. });
    let mut viewer = Viewer {
        board: Board::new(&cast),
        cast,
        seed,
        source,
        frames: Vec::new(),
        shown: 0,
        fact: 0,
        npc: 0,
        paused: options.paused,
        speed: speed_index(options.speed),
        ended: false,
        live,
    };
    let mut terminal = ratatui::try_init().map_err(|e| RunError::Io {
        path: "the terminal".into(),
        source: e,
    })?;
    let result = event_loop(&mut viewer, &mut terminal);
    ratatui::restore();
    result
}

fn event_loop(
    viewer: &mut Viewer,
    terminal: &mut ratatui::DefaultTerminal,
) -> Result<Exit, RunError> {
    let io = |e: std::io::Error| RunError::Io {
        path: "the terminal".into(),
        source: e,
    };
    let mut next_step = Instant::now();
    loop {
        viewer.draw(terminal).map_err(io)?;
        let now = Instant::now();
        let playing = !viewer.paused && !viewer.at_end();
        let wait = if playing {
            next_step
                .saturating_duration_since(now)
                .min(Duration::from_millis(100))
        } else {
            Duration::from_millis(100)
        };
        if event::poll(wait).map_err(io)? {
            if let Event::Key(k) = event::read().map_err(io)?
                && k.kind != KeyEventKind::Release
                && viewer.key(k.code, k.modifiers)?
            {
                return Ok(Exit::Quit);
            }
            continue;
        }
        if !playing || Instant::now() < next_step {
            continue;
        }
        match SPEEDS[viewer.speed] {
            Some(per_second) => {
                viewer.forward()?;
                next_step = Instant::now() + Duration::from_secs_f64(1.0 / f64::from(per_second));
            }
            None => {
                // As fast as frames come, redrawing at most every 50 ms.
                let until = Instant::now() + Duration::from_millis(50);
                while Instant::now() < until && viewer.forward()? {}
                next_step = Instant::now();
            }
        }
    }
}

/// Plays the finished (or stopped) run in `dir`.
pub fn watch_dir(dir: &Path, options: ViewOptions) -> Result<Exit, RunError> {
    use hearsay_runtime::rundir::{EVENTS_FILE, MANIFEST_FILE, SCENARIO_FILE, require};
    require(dir, &[MANIFEST_FILE, SCENARIO_FILE, EVENTS_FILE])?;
    let manifest = hearsay_runtime::logs::RunManifest::read(dir)?;
    let path = dir.join(hearsay_runtime::rundir::SCENARIO_FILE);
    let (mut scenario, _) = hearsay_runtime::scenario::load(&path)?;
    scenario.ticks = manifest.ticks;
    let cast = Cast::new(&scenario);
    let reader = FrameReader::open_run(dir, &scenario, &cast)?;
    view(
        cast,
        manifest.seed_at(0),
        Source::Log(Box::new(reader)),
        options,
    )
}

/// Runs `opts` with the view attached (`hearsay run --watch`): the run on a thread of
/// its own, the view on this one, one tick handed over at a time. Quitting the view
/// stops the run after its current tick (`RunOutcome::stopped_at`; `hearsay resume`
/// finishes it). Errors that stop the run before its first tick come back before the
/// terminal is touched.
pub fn run_watched(
    opts: hearsay_runtime::RunOptions,
    options: ViewOptions,
) -> Result<hearsay_runtime::RunOutcome, RunError> {
    let (mut scenario, bytes) = hearsay_runtime::scenario::load(&opts.scenario)?;
    if !opts.sets.is_empty() {
        let text = hearsay_runtime::edit::apply_sets(&String::from_utf8_lossy(&bytes), &opts.sets)?;
        scenario = hearsay_runtime::scenario::parse(&opts.scenario, text.as_bytes())?;
    }
    if let Some(ticks) = opts.ticks {
        scenario.ticks = ticks;
    }
    let seed = opts.seed.unwrap_or(scenario.seed);
    let cast = Cast::new(&scenario);
    // One tick in hand: the run waits for the view, so a paused view pauses the run.
    let (tx, rx) = std::sync::mpsc::sync_channel::<(u64, Vec<String>)>(1);
    let observer: hearsay_runtime::Observer = Box::new(move |tick, lines| {
        match tx.send((tick, lines.to_vec())) {
            Ok(()) => ControlFlow::Continue(()),
            // The view is gone: stop here.
            Err(_) => ControlFlow::Break(()),
        }
    });
    let run = std::thread::Builder::new()
        .name("hearsay-run".into())
        .spawn(move || hearsay_runtime::run_observed(&opts, Some(observer)))
        .map_err(RunError::Runtime)?;
    let joined = |run: std::thread::JoinHandle<Result<_, RunError>>| {
        run.join()
            .unwrap_or_else(|_| Err(RunError::Provider("the run panicked".into())))
    };
    let first = match rx.recv() {
        Ok(tick) => tick,
        // The run ended before its first tick: an error, most likely.
        Err(_) => return joined(run),
    };
    let viewed = view(
        cast,
        seed,
        Source::Live {
            pending: Some(first),
            rx,
        },
        options,
    );
    let outcome = joined(run);
    viewed?;
    outcome
}
