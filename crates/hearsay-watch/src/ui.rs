//! Drawing one screen: a header (run, tick, play state), the map (NPCs by initial,
//! coloured by whether they know the selected fact; places labelled), the facts with
//! the selected one's spread curve, the selected NPC, the log of speech and news, and
//! the keys.

use hearsay_core::Pos;
use hearsay_runtime::story::Cast;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Chart, Dataset, GraphType, Paragraph, Wrap};
use unicode_width::UnicodeWidthChar;

use crate::board::{Board, LogKind, Mind};

/// Colours of the facts, in order (then again).
pub const FACT_COLORS: [Color; 6] = [
    Color::Cyan,
    Color::Magenta,
    Color::Yellow,
    Color::LightBlue,
    Color::LightRed,
    Color::LightGreen,
];

/// Everything a screen shows.
pub struct Screen<'a> {
    /// Map, places, NPC and fact names, which the board's indices refer to.
    pub cast: &'a Cast,
    /// The state at the tick shown.
    pub board: &'a Board,
    /// Seed, for the header.
    pub seed: u64,
    /// Index into [`Cast::facts`] of the fact whose knowers and curve are shown (`f` cycles).
    pub fact: usize,
    /// Index into [`Cast::npcs`] of the NPC the panel shows (the map follows it if too big).
    pub npc: usize,
    /// Whether playback is paused; the header then says so.
    pub paused: bool,
    /// Ticks per second (`None`: as fast as possible).
    pub speed: Option<u32>,
    /// Whether the run is being made right now.
    pub live: bool,
    /// No more ticks will come.
    pub ended: bool,
}

/// Draws the whole screen.
pub fn draw(f: &mut Frame<'_>, s: &Screen<'_>) {
    let [header, body, log, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(8),
        Constraint::Length(9),
        Constraint::Length(1),
    ])
    .areas(f.area());
    draw_header(f, header, s);
    let side = 44.min(body.width / 2);
    let [map, panel] =
        Layout::horizontal([Constraint::Min(10), Constraint::Length(side)]).areas(body);
    draw_map(f, map, s);
    let facts_h = (s.cast.facts.len() as u16 + 2).min(8);
    let [facts, curve, npc] = Layout::vertical([
        Constraint::Length(facts_h),
        Constraint::Min(5),
        Constraint::Length(7),
    ])
    .areas(panel);
    draw_facts(f, facts, s);
    draw_curve(f, curve, s);
    draw_npc(f, npc, s);
    draw_log(f, log, s);
    f.render_widget(
        Paragraph::new(
            " space pause · →/. step · ←/, back · +/- speed · f/F fact · n/N NPC · q quit",
        )
        .style(Style::new().fg(Color::DarkGray)),
        keys,
    );
}

fn draw_header(f: &mut Frame<'_>, area: Rect, s: &Screen<'_>) {
    let tick = s.board.tick.map_or("-".to_owned(), |t| t.to_string());
    let state = if s.ended {
        "■ end of run".to_owned()
    } else if s.paused {
        "⏸ paused".to_owned()
    } else {
        match s.speed {
            Some(n) => format!("▶ {n} ticks/s"),
            None => "▶ max speed".to_owned(),
        }
    };
    let mode = if s.live { "live" } else { "playback" };
    let (thought, continued) = s.board.thought_continued;
    let thinking = if thought + continued == 0 {
        String::new()
    } else {
        format!(
            " · thinking {:.0}% of NPC-ticks",
            thought as f64 * 100.0 / (thought + continued) as f64
        )
    };
    let line = Line::from(vec![
        Span::styled(
            " hearsay ",
            Style::new()
                .fg(Color::Black)
                .bg(Color::Cyan)
                .add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!(
            " {} · seed {} · tick {tick}/{} · {state} · {mode}{thinking}",
            s.cast.name,
            s.seed,
            s.cast.ticks.saturating_sub(1)
        )),
    ]);
    f.render_widget(Paragraph::new(line), area);
}

/// The glyph for an NPC: its initial, or `@` when the initial is wider than the cell.
fn initial(name: &str, cell: u16) -> (char, u16) {
    let c = name.chars().next().unwrap_or('?');
    let w = c.width().unwrap_or(1) as u16;
    if w > cell { ('@', 1) } else { (c, w) }
}

fn draw_map(f: &mut Frame<'_>, area: Rect, s: &Screen<'_>) {
    let block = Block::bordered().title(" map ");
    let inner = block.inner(area);
    f.render_widget(block, area);
    if inner.width == 0 || inner.height == 0 {
        return;
    }
    let grid = s.cast.grid;
    let cell: u16 = if u32::from(inner.width) >= grid.width * 2 {
        2
    } else {
        1
    };
    let cols = (inner.width / cell) as i32;
    let rows = inner.height as i32;
    // A window on the map around the selected NPC when the map does not fit.
    let focus = s
        .board
        .positions
        .get(s.npc)
        .copied()
        .flatten()
        .unwrap_or(Pos::new(0, 0));
    let origin = |len: i32, view: i32, at: i32| {
        if len <= view {
            0
        } else {
            (at - view / 2).clamp(0, len - view)
        }
    };
    let ox = origin(grid.width as i32, cols, focus.x);
    let oy = origin(grid.height as i32, rows, focus.y);
    let buf = f.buffer_mut();
    let put = |buf: &mut ratatui::buffer::Buffer, x: i32, y: i32, text: &str, style: Style| {
        let (px, py) = (x - ox, y - oy);
        if px < 0 || py < 0 || px >= cols || py >= rows {
            return;
        }
        let bx = inner.x + px as u16 * cell;
        let by = inner.y + py as u16;
        let room = (inner.x + inner.width).saturating_sub(bx);
        buf.set_stringn(bx, by, text, room as usize, style);
    };
    for y in oy..(oy + rows).min(grid.height as i32) {
        for x in ox..(ox + cols).min(grid.width as i32) {
            put(buf, x, y, "·", Style::new().fg(Color::DarkGray));
        }
    }
    for (name, at) in &s.cast.places {
        let style = Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD);
        put(buf, at.x, at.y, "■", style);
        // The label to the right of the place, in as many cells as it needs.
        let label_x = inner.x as i32 + (at.x - ox + 1) * i32::from(cell);
        let label_y = at.y - oy;
        if label_y >= 0 && label_y < rows && at.x - ox + 1 < cols && label_x >= inner.x as i32 {
            let room = (inner.x + inner.width).saturating_sub(label_x as u16);
            buf.set_stringn(
                label_x as u16,
                inner.y + label_y as u16,
                name,
                room as usize,
                Style::new().fg(Color::Yellow),
            );
        }
    }
    // NPCs over everything: one glyph per cell, a count where several stand.
    let mut at_cell: std::collections::BTreeMap<(i32, i32), Vec<usize>> = Default::default();
    for (i, p) in s.board.positions.iter().enumerate() {
        if let Some(p) = p {
            at_cell.entry((p.x, p.y)).or_default().push(i);
        }
    }
    let known = s.board.known.get(s.fact);
    for ((x, y), who) in at_cell {
        let selected = who.contains(&s.npc);
        let knows = who
            .iter()
            .filter(|&&i| known.and_then(|k| k[i]).is_some())
            .count();
        let mut style = Style::new()
            .add_modifier(Modifier::BOLD)
            .fg(if knows == who.len() {
                Color::Green
            } else if knows > 0 {
                Color::LightYellow
            } else {
                Color::White
            });
        if selected {
            style = style.add_modifier(Modifier::REVERSED);
        }
        // NPCs that carry on without thinking are drawn dim.
        if who
            .iter()
            .all(|&i| matches!(s.board.minds.get(i), Some(Mind::Continued(_))))
        {
            style = style
                .add_modifier(Modifier::DIM)
                .remove_modifier(Modifier::BOLD);
        }
        let text = if who.len() == 1 {
            let (c, w) = initial(&s.cast.npcs[who[0]], cell);
            let mut t = c.to_string();
            if w < cell {
                t.push(' ');
            }
            t
        } else if who.len() < 10 {
            format!("{}", who.len())
        } else {
            "+".to_owned()
        };
        put(buf, x, y, &text, style);
    }
}

fn draw_facts(f: &mut Frame<'_>, area: Rect, s: &Screen<'_>) {
    let n = s.cast.npcs.len().max(1);
    let lines: Vec<Line<'_>> = s
        .cast
        .facts
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let k = s.board.knowers(i);
            let mark = if i == s.fact { "▶ " } else { "  " };
            let style = Style::new().fg(FACT_COLORS[i % FACT_COLORS.len()]);
            let style = if i == s.fact {
                style.add_modifier(Modifier::BOLD)
            } else {
                style
            };
            Line::from(vec![
                Span::raw(mark),
                Span::styled(name.clone(), style),
                Span::raw(format!("  {k}/{n} ({:.0}%)", k as f64 * 100.0 / n as f64)),
            ])
        })
        .collect();
    let lines = if lines.is_empty() {
        vec![Line::from("no facts tracked")]
    } else {
        lines
    };
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" facts (knowers) ")),
        area,
    );
}

fn draw_curve(f: &mut Frame<'_>, area: Rect, s: &Screen<'_>) {
    let last = s.cast.ticks.saturating_sub(1).max(1) as f64;
    let n = s.cast.npcs.len().max(1) as f64;
    let name = s.cast.facts.get(s.fact).cloned().unwrap_or_default();
    let mut points: Vec<(f64, f64)> = vec![(0.0, 0.0)];
    let mut count = 0.0;
    for &(t, k) in s.board.curves.get(s.fact).map_or(&[][..], Vec::as_slice) {
        points.push((t as f64, count));
        count = f64::from(k);
        points.push((t as f64, count));
    }
    if let Some(t) = s.board.tick {
        points.push((t as f64, count));
    }
    let color = FACT_COLORS[s.fact % FACT_COLORS.len()];
    let data = [Dataset::default()
        .marker(symbols::Marker::Braille)
        .graph_type(GraphType::Line)
        .style(Style::new().fg(color))
        .data(&points)];
    let chart = Chart::new(data.to_vec())
        .block(Block::bordered().title(format!(" spread: {name} ")))
        .x_axis(
            Axis::default()
                .bounds([0.0, last])
                .labels(["0".to_owned(), format!("{last:.0}")])
                .style(Style::new().fg(Color::DarkGray)),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, n])
                .labels(["0".to_owned(), format!("{n:.0}")])
                .style(Style::new().fg(Color::DarkGray)),
        );
    f.render_widget(chart, area);
}

fn draw_npc(f: &mut Frame<'_>, area: Rect, s: &Screen<'_>) {
    let i = s.npc;
    let name = s.cast.npcs.get(i).cloned().unwrap_or_default();
    let at = s.board.positions.get(i).copied().flatten();
    let mut lines = vec![Line::from(vec![
        Span::styled(name.clone(), Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(match at {
            Some(p) => format!(" at {p}"),
            None => " (not here yet)".to_owned(),
        }),
        Span::styled(
            format!("  {}/{}", i + 1, s.cast.npcs.len()),
            Style::new().fg(Color::DarkGray),
        ),
    ])];
    for (fi, fact) in s.cast.facts.iter().enumerate() {
        let known = s
            .board
            .known
            .get(fi)
            .and_then(|k| k.get(i).copied().flatten());
        let text = match known {
            Some(k) => match k.from {
                Some(by) => format!(
                    "knows “{fact}” since tick {} from {}",
                    k.tick, s.cast.npcs[by]
                ),
                None => format!("knows “{fact}” since tick {}, first-hand", k.tick),
            },
            None => format!("does not know “{fact}”"),
        };
        lines.push(Line::styled(
            text,
            Style::new().fg(FACT_COLORS[fi % FACT_COLORS.len()]),
        ));
    }
    if let Some((t, said)) = s.board.last_said.get(i).cloned().flatten() {
        lines.push(Line::from(format!("said at tick {t}: “{said}”")));
    }
    match s.board.minds.get(i) {
        Some(Mind::Thought(why)) => lines.push(Line::from(format!(
            "thought this tick ({})",
            why.iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        Some(Mind::Continued(last)) => lines.push(Line::styled(
            match last {
                Some(t) => format!("carrying on without thinking (last thought at tick {t})"),
                None => "carrying on without thinking".to_owned(),
            },
            Style::new().fg(Color::DarkGray),
        )),
        _ => {}
    }
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: true })
            .block(Block::bordered().title(" NPC ")),
        area,
    );
}

fn draw_log(f: &mut Frame<'_>, area: Rect, s: &Screen<'_>) {
    let rows = area.height.saturating_sub(2) as usize;
    let start = s.board.log.len().saturating_sub(rows);
    let lines: Vec<Line<'_>> = s
        .board
        .log
        .iter()
        .skip(start)
        .map(|l| {
            let style = match l.kind {
                LogKind::Speech => Style::new(),
                LogKind::Happening => Style::new().fg(Color::Yellow),
                LogKind::Learned(fi) => Style::new().fg(FACT_COLORS[fi % FACT_COLORS.len()]),
                LogKind::Reflection => Style::new().fg(Color::DarkGray),
            };
            Line::from(vec![
                Span::styled(format!("{:>6} ", l.tick), Style::new().fg(Color::DarkGray)),
                Span::styled(l.text.clone(), style),
            ])
        })
        .collect();
    f.render_widget(
        Paragraph::new(lines).block(
            Block::bordered().title(format!(" speech and news ({} speeches) ", s.board.speeches)),
        ),
        area,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    #[test]
    fn the_screen_shows_the_map_the_tick_the_fact_and_the_npc() {
        let cast = crate::board::tests::cast();
        let mut board = Board::new(&cast);
        for f in crate::board::tests::frames(&cast) {
            board.apply(&cast, &f);
        }
        let mut terminal = Terminal::new(TestBackend::new(100, 30)).expect("terminal");
        terminal
            .draw(|f| {
                draw(
                    f,
                    &Screen {
                        cast: &cast,
                        board: &board,
                        seed: 7,
                        fact: 0,
                        npc: 1,
                        paused: true,
                        speed: Some(10),
                        live: false,
                        ended: false,
                    },
                )
            })
            .expect("draw");
        let buffer = terminal.backend().buffer();
        let rows: Vec<String> = (0..buffer.area.height)
            .map(|y| {
                (0..buffer.area.width)
                    .map(|x| buffer[(x, y)].symbol().to_owned())
                    .collect()
            })
            .collect();
        let screen = rows.join("\n");
        assert!(
            screen.contains("t · seed 7 · tick 1/9 · ⏸ paused"),
            "{screen}"
        );
        assert!(screen.contains("Alice at (3, 1)"), "{screen}");
        assert!(
            screen.contains("knows “fish” since tick 1 from Bob"),
            "{screen}"
        );
        assert!(screen.contains("fish  2/2 (100%)"), "{screen}");
        assert!(
            screen.contains("Bob → Alice: “The market sells fish.”"),
            "{screen}"
        );
        // Map cells are two columns wide on a map this small; the border is one column.
        let map_row = &rows[2 + 1];
        let cells: Vec<char> = map_row.chars().collect();
        let col = |x: usize| 1 + 2 * x;
        assert_eq!(cells[col(1)], 'B', "{map_row}");
        assert_eq!(cells[col(3)], 'A', "{map_row}");
        assert!(rows[4].contains("■ market"), "{}", rows[4]);
    }
}
