//! A wireless segment's `city:` (NET's city, [`vemu_radio::city`]): a Manhattan grid of
//! buildings and streets, or obstacles and roads given inline or in GeoJSON files.

use std::collections::HashMap;

use serde_json::Value as Json;
use vemu_radio::city::{City, Obstacle, Roads};
use vemu_radio::Pos;

use super::wireless::{decibels, distance_m, position};
use super::{join, P};
use crate::yaml::{Node, Value};

/// Keys of `city:`.
const CITY_KEYS: &[&str] = &["manhattan", "wall", "obstacles", "roads", "lonlat"];
/// Most obstacles, walls and streets a city may have.
pub const MAX_CITY_ITEMS: usize = 200_000;

/// `wall: 10dB` (a loss per wall crossed) or `opaque`.
fn wall(s: &str) -> Result<Option<f64>, String> {
    match s.trim() {
        "opaque" => Ok(None),
        t => decibels(t)
            .map(Some)
            .map_err(|m| format!("{m} (a loss per wall crossed, e.g. 10dB, or opaque)")),
    }
}

/// `5x4`: blocks each way.
fn blocks(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("expected blocks each way like 5x4 (1 to 100 each), got '{s}'");
    let (a, b) = s.split_once('x').ok_or_else(bad)?;
    let (a, b): (u32, u32) =
        (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
    if !(1..=100).contains(&a) || !(1..=100).contains(&b) {
        return Err(bad());
    }
    Ok((a, b))
}

pub(crate) fn city(p: &mut P, node: &Node, field: &str) -> Option<City> {
    let entries = p.map(node, field, CITY_KEYS);
    let get = |k: &str| entries.iter().find(|e| e.0 == k).map(|e| e.2);
    let f = |k: &str| join(field, k);
    let wall_db = match get("wall") {
        Some(v) => p.scalar(v, &f("wall"), wall)?,
        None => None,
    };
    let lonlat = match get("lonlat") {
        Some(v) => p.boolean(v, &f("lonlat"))?,
        None => false,
    };
    if let Some(m) = get("manhattan") {
        if let Some(k) = ["obstacles", "roads"].into_iter().find(|k| get(k).is_some()) {
            p.err(get(k).unwrap().mark, &f(k), "a Manhattan grid makes its own buildings and streets: give 'manhattan' or obstacles and roads");
            return None;
        }
        return manhattan(p, m, &f("manhattan"), wall_db);
    }
    if get("obstacles").is_none() && get("roads").is_none() {
        p.err(
            node.mark,
            field,
            "a city needs 'manhattan' (a grid of blocks), or 'obstacles' and/or 'roads'",
        );
        return None;
    }
    let mut city = City::default();
    // Files' geometries, projected together (one origin for both files).
    let (mut file_rings, mut file_walls, mut file_lines) = (Vec::new(), Vec::new(), Vec::new());
    if let Some(v) = get("obstacles") {
        match &v.value {
            Value::Seq(items) => {
                city.obstacles = inline_obstacles(p, items, &f("obstacles"), wall_db)?
            }
            _ => {
                let json = geojson(p, v, &f("obstacles"))?;
                (file_rings, file_walls) = Geo::obstacles(&json, wall_db)
                    .map_err(|m| p.err(v.mark, &f("obstacles"), m))
                    .ok()?;
            }
        }
    }
    if let Some(v) = get("roads") {
        city.roads = match &v.value {
            Value::Seq(items) => {
                let mut lines = Vec::new();
                for (i, line) in items.iter().enumerate() {
                    let lf = format!("{}[{i}]", f("roads"));
                    let pts: Vec<Pos> = p
                        .seq(line, &lf)
                        .iter()
                        .enumerate()
                        .filter_map(|(j, n)| position(p, n, &format!("{lf}[{j}]")))
                        .collect();
                    if pts.len() < 2 {
                        p.err(
                            line.mark,
                            &lf,
                            "a road is a list of at least two points, e.g. [[0, 0], [100, 0]]",
                        );
                        return None;
                    }
                    lines.push(pts);
                }
                roads_of(lines)
            }
            _ => {
                let json = geojson(p, v, &f("roads"))?;
                file_lines = Geo::roads(&json).map_err(|m| p.err(v.mark, &f("roads"), m)).ok()?;
                Roads::default()
            }
        };
    }
    let n = file_rings.len();
    let mut projected = project(lonlat, file_rings.into_iter().chain(file_lines).collect());
    let lines = projected.split_off(n);
    if !lines.is_empty() {
        city.roads = roads_of(lines);
    }
    city.obstacles.extend(
        projected
            .into_iter()
            .zip(file_walls)
            .map(|(polygon, wall_db)| Obstacle { polygon, wall_db }),
    );
    let items =
        city.obstacles.iter().map(|o| o.polygon.len()).sum::<usize>() + city.roads.streets.len();
    if items > MAX_CITY_ITEMS {
        p.err(
            node.mark,
            field,
            format!("{items} walls and streets, more than the {MAX_CITY_ITEMS} allowed"),
        );
        return None;
    }
    Some(city)
}

fn manhattan(p: &mut P, node: &Node, field: &str, wall_db: Option<f64>) -> Option<City> {
    let entries = p.map(node, field, &["blocks", "block", "street"]);
    let get = |k: &str| entries.iter().find(|e| e.0 == k).map(|e| e.2);
    let Some(b) = get("blocks") else {
        p.err(node.mark, field, "a Manhattan grid needs 'blocks', e.g. blocks: 5x5");
        return None;
    };
    let blocks = p.scalar(b, &join(field, "blocks"), blocks)?;
    let block_m = match get("block") {
        Some(v) => p.scalar(v, &join(field, "block"), distance_m)?,
        None => 100.0,
    };
    let street_m = match get("street") {
        Some(v) => p.scalar(v, &join(field, "street"), distance_m)?,
        None => 20.0,
    };
    if !(street_m > 0.0 && street_m < block_m) {
        p.err(node.mark, field, format!("the street ({street_m} m) must be wider than 0 and narrower than the block ({block_m} m)"));
        return None;
    }
    Some(City::manhattan(blocks, block_m, street_m, wall_db))
}

fn inline_obstacles(
    p: &mut P,
    items: &[Node],
    field: &str,
    wall_db: Option<f64>,
) -> Option<Vec<Obstacle>> {
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let f = format!("{field}[{i}]");
        let entries = p.map(item, &f, &["polygon", "wall"]);
        let mut o = Obstacle { polygon: Vec::new(), wall_db };
        for (k, _, v) in &entries {
            let kf = join(&f, k);
            match *k {
                "polygon" => {
                    o.polygon = p
                        .seq(v, &kf)
                        .iter()
                        .enumerate()
                        .filter_map(|(j, n)| position(p, n, &format!("{kf}[{j}]")))
                        .collect()
                }
                _ => o.wall_db = p.scalar(v, &kf, wall)?,
            }
        }
        if o.polygon.len() < 3 {
            p.err(item.mark, &f, "an obstacle needs a 'polygon' of at least three corners, e.g. [[0, 0], [50, 0], [50, 30]]");
            return None;
        }
        out.push(o);
    }
    Some(out)
}

/// A GeoJSON file named in the scenario (read as the scenario's other files are),
/// parsed.
fn geojson(p: &mut P, node: &Node, field: &str) -> Option<Json> {
    let (bytes, path) = super::delay::read_file(p, node, field, "GeoJSON")?;
    let Ok(text) = String::from_utf8(bytes) else {
        p.err(
            node.mark,
            field,
            format!("cannot read GeoJSON '{}': not UTF-8 text", path.display()),
        );
        return None;
    };
    match serde_json::from_str(&text) {
        Ok(j) => Some(j),
        Err(e) => {
            p.err(node.mark, field, format!("{}:{}: not JSON: {e}", path.display(), e.line()));
            None
        }
    }
}

/// Streets between consecutive points of each line; points at the same place (to the
/// centimetre) are one crossing.
fn roads_of(lines: Vec<Vec<Pos>>) -> Roads {
    let mut roads = Roads::default();
    let mut at: HashMap<(i64, i64), u32> = HashMap::new();
    let mut id = |roads: &mut Roads, q: Pos| {
        *at.entry(((q.x * 100.0).round() as i64, (q.y * 100.0).round() as i64)).or_insert_with(
            || {
                roads.crossings.push(q);
                roads.crossings.len() as u32 - 1
            },
        )
    };
    for line in lines {
        for w in line.windows(2) {
            let (a, b) = (id(&mut roads, w[0]), id(&mut roads, w[1]));
            if a != b {
                roads.streets.push((a, b));
            }
        }
    }
    roads
}

/// Points to the plane: metres as they are, or (`lonlat`) longitude and latitude
/// projected equirectangularly from the south-west corner of all of them.
fn project(lonlat: bool, rings: Vec<Vec<(f64, f64)>>) -> Vec<Vec<Pos>> {
    if !lonlat {
        return rings
            .into_iter()
            .map(|r| r.into_iter().map(|(x, y)| Pos::new(x, y)).collect())
            .collect();
    }
    let (lon0, lat0) =
        rings.iter().flatten().fold((f64::MAX, f64::MAX), |(a, b), &(x, y)| (a.min(x), b.min(y)));
    let lat1 = rings.iter().flatten().map(|p| p.1).fold(lat0, f64::max);
    let m_per_deg = 6_371_000.0 * std::f64::consts::PI / 180.0;
    let cos = ((lat0 + lat1) / 2.0).to_radians().cos();
    rings
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(|(lon, lat)| {
                    Pos::new((lon - lon0) * m_per_deg * cos, (lat - lat0) * m_per_deg)
                })
                .collect()
        })
        .collect()
}

/// GeoJSON geometries: buildings (polygons) and roads (lines).
struct Geo;

impl Geo {
    /// The geometries of a FeatureCollection, a Feature or a bare geometry, with each
    /// one's properties.
    fn geometries(json: &Json) -> Vec<(&Json, Option<&Json>)> {
        match json.get("type").and_then(Json::as_str) {
            Some("FeatureCollection") => json
                .get("features")
                .and_then(Json::as_array)
                .map(|fs| {
                    fs.iter()
                        .filter_map(|f| Some((f.get("geometry")?, f.get("properties"))))
                        .collect()
                })
                .unwrap_or_default(),
            Some("Feature") => {
                json.get("geometry").map(|g| vec![(g, json.get("properties"))]).unwrap_or_default()
            }
            _ => vec![(json, None)],
        }
    }

    fn point(c: &Json) -> Result<(f64, f64), String> {
        let xy = c
            .as_array()
            .filter(|a| a.len() >= 2)
            .ok_or_else(|| format!("{c} is not a position [x, y]"))?;
        match (xy[0].as_f64(), xy[1].as_f64()) {
            (Some(x), Some(y)) if x.is_finite() && y.is_finite() => Ok((x, y)),
            _ => Err(format!("{c} is not a position [x, y]")),
        }
    }

    fn ring(c: &Json) -> Result<Vec<(f64, f64)>, String> {
        c.as_array().ok_or("a ring is a list of positions")?.iter().map(Geo::point).collect()
    }

    /// Every Polygon's (and MultiPolygon's) outer ring; `wall_db` of its properties, or
    /// `opaque: true`, over the city's `wall`.
    #[allow(clippy::type_complexity)] // (rings and their walls, zipped by the caller)
    fn obstacles(
        json: &Json,
        wall_db: Option<f64>,
    ) -> Result<(Vec<Vec<(f64, f64)>>, Vec<Option<f64>>), String> {
        let mut rings = Vec::new();
        let mut walls = Vec::new();
        for (g, props) in Geo::geometries(json) {
            let own = match props {
                Some(pr) if pr.get("opaque").and_then(Json::as_bool) == Some(true) => None,
                Some(pr) => {
                    pr.get("wall_db").and_then(Json::as_f64).filter(|d| *d >= 0.0).or(wall_db)
                }
                None => wall_db,
            };
            let coords = g.get("coordinates");
            let polys: Vec<&Json> = match g.get("type").and_then(Json::as_str) {
                Some("Polygon") => coords.into_iter().collect(),
                Some("MultiPolygon") => {
                    coords.and_then(Json::as_array).map(|a| a.iter().collect()).unwrap_or_default()
                }
                _ => continue,
            };
            for poly in polys {
                let outer =
                    poly.as_array().and_then(|a| a.first()).ok_or("a Polygon needs its rings")?;
                let mut ring = Geo::ring(outer)?;
                if ring.len() > 1 && ring.first() == ring.last() {
                    ring.pop();
                }
                if ring.len() < 3 {
                    return Err("a Polygon's ring needs at least three corners".into());
                }
                rings.push(ring);
                walls.push(own);
            }
        }
        if rings.is_empty() {
            return Err("no Polygon or MultiPolygon in it (buildings are polygons)".into());
        }
        Ok((rings, walls))
    }

    /// Every LineString's (and MultiLineString's) points, as streets.
    fn roads(json: &Json) -> Result<Vec<Vec<(f64, f64)>>, String> {
        let mut lines = Vec::new();
        for (g, _) in Geo::geometries(json) {
            let coords = g.get("coordinates");
            match g.get("type").and_then(Json::as_str) {
                Some("LineString") => {
                    lines.push(Geo::ring(coords.ok_or("a LineString needs coordinates")?)?)
                }
                Some("MultiLineString") => {
                    for l in coords
                        .and_then(Json::as_array)
                        .ok_or("a MultiLineString needs coordinates")?
                    {
                        lines.push(Geo::ring(l)?);
                    }
                }
                _ => {}
            }
        }
        if lines.is_empty() {
            return Err("no LineString or MultiLineString in it (roads are lines)".into());
        }
        Ok(lines)
    }
}
