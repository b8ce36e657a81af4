//! NET's city: buildings that attenuate (or block) the signal between two members, and
//! streets that members drive along ([`crate::mobility::Mobility::Streets`]).
//!
//! A [`City`] is what a scenario gives: obstacles (polygons, each with a loss per wall
//! crossed, or opaque) and a road graph (crossings and the streets between them). The
//! walls are indexed once per map ([`Walls`]: a uniform grid of wall segments, NET's
//! precomputation) so that a line of sight only meets the walls of the cells it crosses.

use serde::{Deserialize, Serialize};

use crate::Pos;

/// A building or any other obstacle: a closed polygon (the last corner joins the first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Obstacle {
    pub polygon: Vec<Pos>,
    /// Loss per wall crossed, dB; `None`: opaque (nothing gets through).
    pub wall_db: Option<f64>,
}

/// A road graph: crossings (and bends), and the streets between them (two-way).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Roads {
    pub crossings: Vec<Pos>,
    pub streets: Vec<(u32, u32)>,
}

impl Roads {
    /// The crossings each crossing has a street to.
    pub fn neighbours(&self) -> Vec<Vec<u32>> {
        let mut n = vec![Vec::new(); self.crossings.len()];
        for &(a, b) in &self.streets {
            if a != b {
                n[a as usize].push(b);
                n[b as usize].push(a);
            }
        }
        n
    }

    /// The crossing nearest to `p`.
    pub fn nearest(&self, p: Pos) -> Option<u32> {
        (0..self.crossings.len() as u32).min_by(|&a, &b| {
            p.distance(self.crossings[a as usize])
                .total_cmp(&p.distance(self.crossings[b as usize]))
        })
    }
}

/// A city: its obstacles and its roads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct City {
    pub obstacles: Vec<Obstacle>,
    #[serde(default)]
    pub roads: Roads,
}

impl City {
    /// A Manhattan grid: `blocks` (x, y) square blocks of `block_m`, each a building
    /// leaving `street_m` of street between it and the next; the streets run along the
    /// middle of those gaps, one crossing at each intersection (the grid's border
    /// streets included). The city spans `blocks · block_m` each way.
    pub fn manhattan(
        blocks: (u32, u32),
        block_m: f64,
        street_m: f64,
        wall_db: Option<f64>,
    ) -> City {
        let half = street_m / 2.0;
        let mut obstacles = Vec::new();
        for i in 0..blocks.0 {
            for j in 0..blocks.1 {
                let (x0, y0) = (i as f64 * block_m + half, j as f64 * block_m + half);
                let (x1, y1) = (x0 + block_m - street_m, y0 + block_m - street_m);
                let polygon =
                    vec![Pos::new(x0, y0), Pos::new(x1, y0), Pos::new(x1, y1), Pos::new(x0, y1)];
                obstacles.push(Obstacle { polygon, wall_db });
            }
        }
        let (nx, ny) = (blocks.0 + 1, blocks.1 + 1);
        let id = |i: u32, j: u32| i * ny + j;
        let mut crossings = Vec::new();
        for i in 0..nx {
            for j in 0..ny {
                crossings.push(Pos::new(i as f64 * block_m, j as f64 * block_m));
            }
        }
        let mut streets = Vec::new();
        for i in 0..nx {
            for j in 0..ny {
                if i + 1 < nx {
                    streets.push((id(i, j), id(i + 1, j)));
                }
                if j + 1 < ny {
                    streets.push((id(i, j), id(i, j + 1)));
                }
            }
        }
        City { obstacles, roads: Roads { crossings, streets } }
    }

    /// The smallest rectangle from (0, 0) holding every corner and crossing, m.
    pub fn extent(&self) -> (f64, f64) {
        let pts = self.obstacles.iter().flat_map(|o| o.polygon.iter()).chain(&self.roads.crossings);
        pts.fold((0.0f64, 0.0f64), |(w, h), p| (w.max(p.x), h.max(p.y)))
    }
}

/// Side of a grid cell of the wall index, m.
const CELL_M: f64 = 25.0;
/// Most cells of the index (a larger city gets larger cells).
const MAX_CELLS: usize = 1 << 20;

/// The walls of a city, indexed by a uniform grid: what a line of sight crosses, fast.
#[derive(Debug, Clone)]
pub struct Walls {
    /// Every wall: its ends and its obstacle.
    walls: Vec<(Pos, Pos, u32)>,
    /// Loss per wall of each obstacle (`None`: opaque).
    loss: Vec<Option<f64>>,
    origin: Pos,
    cell_m: f64,
    cols: usize,
    rows: usize,
    /// Per cell, the walls that pass through it.
    cells: Vec<Vec<u32>>,
}

impl Walls {
    pub fn new(city: &City) -> Walls {
        let mut walls = Vec::new();
        for (k, o) in city.obstacles.iter().enumerate() {
            let n = o.polygon.len();
            for i in 0..n {
                let (a, b) = (o.polygon[i], o.polygon[(i + 1) % n]);
                if a != b {
                    walls.push((a, b, k as u32));
                }
            }
        }
        let (mut lo, mut hi) = (Pos::new(f64::MAX, f64::MAX), Pos::new(f64::MIN, f64::MIN));
        for (a, b, _) in &walls {
            for p in [a, b] {
                lo = Pos::new(lo.x.min(p.x), lo.y.min(p.y));
                hi = Pos::new(hi.x.max(p.x), hi.y.max(p.y));
            }
        }
        if walls.is_empty() {
            (lo, hi) = (Pos::default(), Pos::default());
        }
        let (w, h) = ((hi.x - lo.x).max(1.0), (hi.y - lo.y).max(1.0));
        let mut cell_m = CELL_M;
        while (w / cell_m).ceil() * (h / cell_m).ceil() > MAX_CELLS as f64 {
            cell_m *= 2.0;
        }
        let (cols, rows) = ((w / cell_m).ceil() as usize + 1, (h / cell_m).ceil() as usize + 1);
        let mut index = Walls {
            loss: city.obstacles.iter().map(|o| o.wall_db).collect(),
            walls: Vec::new(),
            origin: lo,
            cell_m,
            cols,
            rows,
            cells: vec![Vec::new(); cols * rows],
        };
        for (i, &(a, b, _)) in walls.iter().enumerate() {
            for c in index.cells_along(a, b) {
                index.cells[c].push(i as u32);
            }
        }
        index.walls = walls;
        index
    }

    /// The cells a segment passes through (a superset near corners), in no order.
    fn cells_along(&self, a: Pos, b: Pos) -> Vec<usize> {
        // Only the part within the grid can meet a wall: a line of sight between members
        // far out costs no more than one across the city.
        let Some((a, b)) = self.clip(a, b) else { return Vec::new() };
        let cell = |p: Pos| {
            let cx = ((p.x - self.origin.x) / self.cell_m).floor();
            let cy = ((p.y - self.origin.y) / self.cell_m).floor();
            (cx, cy)
        };
        let (ca, cb) = (cell(a), cell(b));
        let mut out = Vec::new();
        // Walk the segment in steps of at most a third of a cell, noting each cell and
        // its neighbours across a corner it may clip.
        let len = a.distance(b);
        let steps = ((len / (self.cell_m / 3.0)).ceil() as usize).max(1);
        for s in 0..=steps {
            let t = s as f64 / steps as f64;
            let p = Pos::new(a.x + (b.x - a.x) * t, a.y + (b.y - a.y) * t);
            let (cx, cy) = cell(p);
            for (dx, dy) in [(0.0, 0.0), (1.0, 0.0), (-1.0, 0.0), (0.0, 1.0), (0.0, -1.0)] {
                let (x, y) = (cx + dx, cy + dy);
                let (lo_x, hi_x) = (ca.0.min(cb.0) - 1.0, ca.0.max(cb.0) + 1.0);
                let (lo_y, hi_y) = (ca.1.min(cb.1) - 1.0, ca.1.max(cb.1) + 1.0);
                if x < 0.0
                    || y < 0.0
                    || x >= self.cols as f64
                    || y >= self.rows as f64
                    || x < lo_x
                    || x > hi_x
                    || y < lo_y
                    || y > hi_y
                {
                    continue;
                }
                out.push(y as usize * self.cols + x as usize);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The part of segment a–b inside the grid (a cell's margin around it), if any
    /// (Liang–Barsky).
    fn clip(&self, a: Pos, b: Pos) -> Option<(Pos, Pos)> {
        let m = self.cell_m;
        let (x0, y0) = (self.origin.x - m, self.origin.y - m);
        let (x1, y1) = (
            self.origin.x + (self.cols as f64 + 1.0) * m,
            self.origin.y + (self.rows as f64 + 1.0) * m,
        );
        let (dx, dy) = (b.x - a.x, b.y - a.y);
        let (mut t0, mut t1) = (0.0f64, 1.0f64);
        for (p, q) in [(-dx, a.x - x0), (dx, x1 - a.x), (-dy, a.y - y0), (dy, y1 - a.y)] {
            if p == 0.0 {
                if q < 0.0 {
                    return None;
                }
            } else {
                let r = q / p;
                if p < 0.0 {
                    t0 = t0.max(r);
                } else {
                    t1 = t1.min(r);
                }
            }
        }
        (t0 <= t1).then(|| {
            (Pos::new(a.x + t0 * dx, a.y + t0 * dy), Pos::new(a.x + t1 * dx, a.y + t1 * dy))
        })
    }

    /// The loss between two points, dB: each wall crossed costs its obstacle's loss;
    /// crossing an opaque obstacle's wall (or standing inside one), ∞.
    pub fn loss_db(&self, a: Pos, b: Pos) -> f64 {
        if self.walls.is_empty() {
            return 0.0;
        }
        let mut seen: Vec<u32> = Vec::new();
        let mut total = 0.0;
        // Segments outside the grid cross no wall inside it: clip to the cells covered.
        for c in self.cells_along(a, b) {
            for &w in &self.cells[c] {
                if seen.contains(&w) {
                    continue;
                }
                seen.push(w);
                let (p, q, k) = self.walls[w as usize];
                if crosses(a, b, p, q) {
                    match self.loss[k as usize] {
                        Some(db) => total += db,
                        None => return f64::INFINITY,
                    }
                }
            }
        }
        total
    }
}

/// Whether segment a–b crosses wall p–q, the wall taken half-open (its end q belongs to
/// the next wall: a line through a corner crosses one wall there, not two).
fn crosses(a: Pos, b: Pos, p: Pos, q: Pos) -> bool {
    let orient = |u: Pos, v: Pos, w: Pos| (v.x - u.x) * (w.y - u.y) - (v.y - u.y) * (w.x - u.x);
    let (d1, d2) = (orient(p, q, a), orient(p, q, b));
    let (d3, d4) = (orient(a, b, p), orient(a, b, q));
    if ((d1 > 0.0 && d2 < 0.0) || (d1 < 0.0 && d2 > 0.0))
        && ((d3 > 0.0 && d4 < 0.0) || (d3 < 0.0 && d4 > 0.0))
    {
        return true;
    }
    let on = |u: Pos, v: Pos, w: Pos, d: f64| {
        d == 0.0
            && w.x >= u.x.min(v.x)
            && w.x <= u.x.max(v.x)
            && w.y >= u.y.min(v.y)
            && w.y <= u.y.max(v.y)
    };
    (on(p, q, a, d1) && a != q) || (on(p, q, b, d2) && b != q) || on(a, b, p, d3)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(city: &City, a: Pos, b: Pos) -> f64 {
        let mut t = 0.0;
        for o in &city.obstacles {
            let n = o.polygon.len();
            for i in 0..n {
                if crosses(a, b, o.polygon[i], o.polygon[(i + 1) % n]) {
                    match o.wall_db {
                        Some(db) => t += db,
                        None => return f64::INFINITY,
                    }
                }
            }
        }
        t
    }

    #[test]
    fn a_line_through_a_building_crosses_two_walls() {
        let city = City::manhattan((3, 3), 100.0, 20.0, Some(10.0));
        let w = Walls::new(&city);
        // Along a street: nothing in the way.
        assert_eq!(w.loss_db(Pos::new(0.0, 100.0), Pos::new(300.0, 100.0)), 0.0);
        // Across the middle block (110..190 each way): two walls.
        assert_eq!(w.loss_db(Pos::new(100.0, 150.0), Pos::new(200.0, 150.0)), 20.0);
        // Diagonally across the whole city: three buildings.
        assert_eq!(w.loss_db(Pos::new(0.0, 0.0), Pos::new(300.0, 300.0)), 60.0);
        let opaque = City::manhattan((3, 3), 100.0, 20.0, None);
        assert_eq!(
            Walls::new(&opaque).loss_db(Pos::new(100.0, 150.0), Pos::new(200.0, 150.0)),
            f64::INFINITY
        );
    }

    #[test]
    fn the_index_finds_what_testing_every_wall_finds() {
        let city = City::manhattan((6, 4), 120.0, 25.0, Some(7.5));
        let w = Walls::new(&city);
        let mut s = 0x1234_5678_9abc_def0u64;
        let mut r = || {
            s = crate::splitmix64(s);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        for i in 0..3000 {
            // (One in three from far outside the city: clipped to the grid.)
            let far = if i % 3 == 0 { 1e5 } else { 1.0 };
            let a = Pos::new((r() * 800.0 - 40.0) * far, (r() * 560.0 - 40.0) * far);
            let b = Pos::new(r() * 800.0 - 40.0, r() * 560.0 - 40.0);
            assert_eq!(w.loss_db(a, b), brute(&city, a, b), "{a:?} {b:?}");
        }
    }

    #[test]
    fn a_manhattan_grid_has_its_crossings_and_streets() {
        let c = City::manhattan((2, 3), 100.0, 20.0, None);
        assert_eq!(c.obstacles.len(), 6);
        assert_eq!(c.roads.crossings.len(), 12);
        assert_eq!(c.roads.streets.len(), 2 * 4 + 3 * 3);
        assert_eq!(c.extent(), (200.0, 300.0));
        let n = c.roads.neighbours();
        assert_eq!(n[0].len(), 2);
        assert_eq!(c.roads.nearest(Pos::new(95.0, 190.0)), Some(6)); // (100, 200): i = 1, j = 2
    }
}

/// A received-power map: what a receiver at each cell's centre of a grid would hear of
/// one member's transmissions, dBm (−∞: nothing, behind an opaque building).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerMap {
    /// The grid's south-west corner and its cells' side, m.
    pub x0_m: f64,
    pub y0_m: f64,
    pub cell_m: f64,
    pub cols: usize,
    pub rows: usize,
    /// Row by row from `y0_m`, each from `x0_m`; `None` for −∞ (JSON has no infinity).
    pub dbm: Vec<Option<f64>>,
    /// Weaker than this is not received, dBm (the medium's receive threshold, or the
    /// DCF's preamble detection threshold).
    pub threshold_dbm: f64,
}
