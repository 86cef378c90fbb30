//! Grid geometry: positions, bounds, distances and single steps.

use serde::{Deserialize, Serialize};

/// A cell on the grid. Serialised as `[x, y]`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(from = "[i32; 2]", into = "[i32; 2]")]
pub struct Pos {
    /// Column, 0 at the left.
    pub x: i32,
    /// Row, 0 at the top.
    pub y: i32,
}

/// How far a whisper reaches, in cells along each axis (see [`Pos::within_whisper`]).
pub const WHISPER_REACH: u32 = 1;

impl Pos {
    /// A position from its coordinates.
    pub const fn new(x: i32, y: i32) -> Self {
        Self { x, y }
    }

    /// Squared Euclidean distance, exact in integers for any two positions (each square
    /// is below 2⁶⁴; their sum saturates, which no comparison with a squared `u32` radius
    /// can tell from the exact value).
    pub fn dist2(self, other: Pos) -> u64 {
        let dx = (i64::from(self.x) - i64::from(other.x)).unsigned_abs();
        let dy = (i64::from(self.y) - i64::from(other.y)).unsigned_abs();
        (dx * dx).saturating_add(dy * dy)
    }

    /// Whether `other` lies within `radius` cells (Euclidean, inclusive), for every radius
    /// a `u32` holds.
    pub fn within(self, other: Pos, radius: u32) -> bool {
        let r = u64::from(radius);
        self.dist2(other) <= r * r
    }

    /// Whether `other` is close enough to whisper to: at most [`WHISPER_REACH`] cells
    /// along each axis (Chebyshev distance), so the eight surrounding cells and the cell
    /// itself — the cells one step reaches. Hearing is Euclidean; a whisper is not heard
    /// but handed over, so diagonal neighbours count.
    pub fn within_whisper(self, other: Pos) -> bool {
        let dx = (i64::from(self.x) - i64::from(other.x)).unsigned_abs();
        let dy = (i64::from(self.y) - i64::from(other.y)).unsigned_abs();
        dx.max(dy) <= u64::from(WHISPER_REACH)
    }

    /// One step toward `target`: each coordinate moves by at most one, so a diagonal
    /// step counts as one step.
    pub fn step_toward(self, target: Pos) -> Pos {
        Pos::new(
            self.x + (target.x - self.x).signum(),
            self.y + (target.y - self.y).signum(),
        )
    }
}

impl From<[i32; 2]> for Pos {
    fn from([x, y]: [i32; 2]) -> Self {
        Pos::new(x, y)
    }
}

impl From<Pos> for [i32; 2] {
    fn from(p: Pos) -> Self {
        [p.x, p.y]
    }
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({}, {})", self.x, self.y)
    }
}

/// The map's extent: cells `0..width` × `0..height`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grid {
    /// Number of columns.
    pub width: u32,
    /// Number of rows.
    pub height: u32,
}

impl Grid {
    /// Whether `p` is on the map.
    pub fn contains(self, p: Pos) -> bool {
        p.x >= 0
            && p.y >= 0
            && (p.x as i64) < i64::from(self.width)
            && (p.y as i64) < i64::from(self.height)
    }

    /// The nearest cell on the map to `p`.
    pub fn clamp(self, p: Pos) -> Pos {
        let max_x = self.width.saturating_sub(1).min(i32::MAX as u32) as i32;
        let max_y = self.height.saturating_sub(1).min(i32::MAX as u32) as i32;
        Pos::new(p.x.clamp(0, max_x), p.y.clamp(0, max_y))
    }
}

/// Who stands near whom: NPC indices bucketed by square cells of a fixed side, so finding
/// everyone within a radius reads the few cells around a point instead of every NPC
/// (a tick's perception and hearing are O(N·k), not O(N²)). Answers are in index order,
/// as a scan over every NPC would give them.
///
/// The cells are one array sorted by (column, row, index): the cells of one column
/// that a search reads are adjacent, so each column costs one binary search and a
/// straight read — no map of buckets to walk, and no memory for the empty cells of a
/// sparse town, however big its grid.
#[derive(Clone, Debug, Default)]
pub struct Neighbours {
    side: i64,
    /// Every placed NPC's cell, sorted; `entries` in the same order.
    cells: Vec<(i64, i64)>,
    /// Each occupied column and where its cells start in `cells` (a search's first step
    /// reads this short list, not every NPC's cell).
    columns: Vec<(i64, usize)>,
    /// Each placed NPC's index and position.
    entries: Vec<(usize, Pos)>,
    positions: Vec<Option<Pos>>,
}

impl Neighbours {
    /// Buckets `positions` (by NPC index; `None` is nowhere) in cells of `side` (the
    /// radius it will mostly be asked about).
    pub fn new(positions: Vec<Option<Pos>>, side: u32) -> Self {
        let side = i64::from(side.max(1));
        let mut placed: Vec<((i64, i64), usize, Pos)> = positions
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let p = (*p)?;
                let cell = (
                    i64::from(p.x).div_euclid(side),
                    i64::from(p.y).div_euclid(side),
                );
                Some((cell, i, p))
            })
            .collect();
        // Indices are unique: an unstable sort gives the one order.
        placed.sort_unstable_by_key(|&(cell, i, _)| (cell, i));
        let mut columns: Vec<(i64, usize)> = Vec::new();
        for (at, &((column, _), ..)) in placed.iter().enumerate() {
            if columns.last().is_none_or(|&(c, _)| c != column) {
                columns.push((column, at));
            }
        }
        Self {
            side,
            columns,
            cells: placed.iter().map(|&(cell, ..)| cell).collect(),
            entries: placed.into_iter().map(|(_, i, p)| (i, p)).collect(),
            positions,
        }
    }

    /// Where NPC `i` stands.
    pub fn at(&self, i: usize) -> Option<Pos> {
        self.positions.get(i).copied().flatten()
    }

    /// Every NPC within `radius` of `at` (Euclidean, inclusive), by index.
    pub fn within(&self, at: Pos, radius: u32) -> Vec<usize> {
        let r = i64::from(radius);
        let (x, y) = (i64::from(at.x), i64::from(at.y));
        let (low, high) = ((y - r).div_euclid(self.side), (y + r).div_euclid(self.side));
        let mut out = Vec::new();
        let (first, last) = ((x - r).div_euclid(self.side), (x + r).div_euclid(self.side));
        let from = self.columns.partition_point(|&(c, _)| c < first);
        for (k, &(column, begin)) in self.columns.iter().enumerate().skip(from) {
            if column > last {
                break;
            }
            let finish = self
                .columns
                .get(k + 1)
                .map_or(self.cells.len(), |&(_, next)| next);
            let rows = &self.cells[begin..finish];
            let start = begin + rows.partition_point(|&(_, row)| row < low);
            let end = begin + rows.partition_point(|&(_, row)| row <= high);
            out.extend(
                self.entries[start..end]
                    .iter()
                    .filter(|(_, p)| at.within(*p, radius))
                    .map(|&(i, _)| i),
            );
        }
        out.sort_unstable();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbours_are_whoever_a_full_scan_finds_in_the_same_order() {
        let mut state: u64 = 9;
        let mut next = |m: i32| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            ((state >> 33) % m as u64) as i32
        };
        let positions: Vec<Option<Pos>> = (0..400)
            .map(|i| (i % 13 != 0).then(|| Pos::new(next(60), next(40))))
            .collect();
        for side in [1, 3, 6, 50] {
            let n = Neighbours::new(positions.clone(), side);
            for probe in 0..200 {
                let at = Pos::new(next(64) - 2, next(44) - 2);
                let radius = (probe % 8) as u32;
                let scan: Vec<usize> = positions
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.is_some_and(|p| at.within(p, radius)))
                    .map(|(i, _)| i)
                    .collect();
                assert_eq!(
                    n.within(at, radius),
                    scan,
                    "side {side}, at {at}, radius {radius}"
                );
            }
        }
    }

    #[test]
    fn steps_are_single_and_reach_the_target() {
        let mut p = Pos::new(0, 0);
        let target = Pos::new(3, -2);
        let mut steps = 0;
        while p != target {
            let next = p.step_toward(target);
            assert!((next.x - p.x).abs() <= 1 && (next.y - p.y).abs() <= 1);
            p = next;
            steps += 1;
        }
        assert_eq!(steps, 3);
        assert_eq!(p.step_toward(p), p);
    }

    #[test]
    fn clamp_keeps_positions_on_the_map() {
        let g = Grid {
            width: 4,
            height: 3,
        };
        assert_eq!(g.clamp(Pos::new(-5, 9)), Pos::new(0, 2));
        assert!(g.contains(Pos::new(3, 2)));
        assert!(!g.contains(Pos::new(4, 2)));
        assert!(!g.contains(Pos::new(0, -1)));
    }

    #[test]
    fn distances_never_overflow() {
        let corner = Pos::new(i32::MIN, i32::MIN);
        let far = Pos::new(i32::MAX, i32::MAX);
        assert!(
            !corner.within(far, u32::MAX),
            "the sum saturates, beyond any radius"
        );
        assert!(Pos::new(0, 0).within(Pos::new(2_000_000_000, 0), 2_000_000_000));
        assert!(Pos::new(0, 0).within(Pos::new(3, 4), u32::MAX));
        assert!(!Pos::new(0, 0).within(Pos::new(i32::MAX, i32::MAX), 3_000_000_000));
    }

    #[test]
    fn hearing_is_euclidean_and_inclusive() {
        let a = Pos::new(0, 0);
        assert!(a.within(Pos::new(3, 0), 3));
        assert!(!a.within(Pos::new(3, 1), 3));
        assert!(a.within(Pos::new(2, 2), 3));
    }
}
