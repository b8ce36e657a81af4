//! The scenario model: reads a scenario file, validates it with precise errors, expands
//! defaults, assigns addresses and computes static routes. The result is a [`Plan`]: a
//! plain, serializable description of every node, interface, link and route of a lab,
//! which the controller hands to the machines that build it.
//!
//! This crate does no I/O beyond reading the scenario file.

pub mod aggregate;
pub mod asgraph;
pub mod expect;
mod files;
pub mod generate;
pub mod images;
pub mod import;
pub mod kinds;
pub mod model;
mod names;
pub mod node_kind;
mod parse;
pub mod placement;
mod plan;
pub mod policy;
mod template;
mod trust;
pub mod units;
pub mod yaml;

use std::path::Path;

pub use files::FileStamp;
pub(crate) use files::{read_bytes, read_limited, read_stamped};
pub use images::{ImagePolicy, REFUSED};
pub use model::*;
pub use names::{valid_lab_name, valid_node_name};
pub use node_kind::NodeKind;
pub use plan::{build_plan, derive_seed, port_mtu, AP_BRIDGE};
pub use trust::{Reach, Tenant, Trust, DEFAULT_TENANT_IMAGE_BYTES};

/// Read, validate and plan a scenario file. `name` overrides the scenario's `name`.
pub fn load(path: &Path, name: Option<&str>) -> Result<Plan, Errors> {
    load_file(path, name, None, &Trust::Owner)
}

/// Like [`load`], on `machines` if given (`vemu up --machines`), for whom `trust` says
/// (see [`load_str_as`]).
pub fn load_as(
    path: &Path,
    name: Option<&str>,
    machines: Option<Vec<Machine>>,
    trust: &Trust,
) -> Result<Plan, Errors> {
    load_file(path, name, machines, trust)
}

/// Like [`load`], from text; `file` is used in messages, `stem` is the default lab name.
/// Files the scenario refers to are looked up from the current directory.
pub fn load_str(text: &str, file: &str, stem: &str, name: Option<&str>) -> Result<Plan, Errors> {
    load_str_in(text, file, stem, name, None)
}

/// Like [`load_str`], with files the scenario refers to looked up in `base`.
pub fn load_str_in(
    text: &str,
    file: &str,
    stem: &str,
    name: Option<&str>,
    base: Option<&Path>,
) -> Result<Plan, Errors> {
    load_text(text, file, stem, name, None, base, &Trust::Owner, None)
}

/// Like [`load_str_in`], on `machines` if given, for whom `trust` says: a tenant's
/// scenario that uses what it is not allowed gets an error at each such field, and
/// nothing it names is read.
pub fn load_str_as(
    text: &str,
    file: &str,
    stem: &str,
    name: Option<&str>,
    machines: Option<Vec<Machine>>,
    base: Option<&Path>,
    trust: &Trust,
) -> Result<Plan, Errors> {
    load_text(text, file, stem, name, machines, base, trust, None)
}

/// Like [`load`], with `seed` instead of the scenario's `seed` (every random decision
/// of the lab derives from it: `vemu test --repeat` runs a lab with several).
pub fn load_seeded(
    path: &Path,
    name: Option<&str>,
    machines: Option<Vec<Machine>>,
    seed: Option<u64>,
) -> Result<Plan, Errors> {
    load_file_seeded(path, name, machines, &Trust::Owner, seed)
}

/// Like [`load`], with the machines given on the command line (`vemu up --machines`)
/// instead of the scenario's `machines:`.
pub fn load_on(path: &Path, name: Option<&str>, machines: Vec<Machine>) -> Result<Plan, Errors> {
    load_file(path, name, Some(machines), &Trust::Owner)
}

fn load_file(
    path: &Path,
    name: Option<&str>,
    machines: Option<Vec<Machine>>,
    trust: &Trust,
) -> Result<Plan, Errors> {
    load_file_seeded(path, name, machines, trust, None)
}

fn load_file_seeded(
    path: &Path,
    name: Option<&str>,
    machines: Option<Vec<Machine>>,
    trust: &Trust,
    seed: Option<u64>,
) -> Result<Plan, Errors> {
    let file = path.display().to_string();
    let text = read_limited(path, MAX_SCENARIO_BYTES).map_err(|e| Errors {
        file: file.clone(),
        errors: vec![Error {
            line: 0,
            col: 0,
            field: String::new(),
            message: format!("cannot read: {e}"),
        }],
    })?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("lab");
    load_text(&text, &file, stem, name, machines, path.parent(), trust, seed)
}

#[allow(clippy::too_many_arguments)] // (the loaders' options, one each)
fn load_text(
    text: &str,
    file: &str,
    stem: &str,
    name: Option<&str>,
    machines: Option<Vec<Machine>>,
    base: Option<&Path>,
    trust: &Trust,
    seed: Option<u64>,
) -> Result<Plan, Errors> {
    let wrap = |errors: Vec<Error>| Errors { file: file.to_string(), errors };
    let mut scenario = parse::parse(text, stem, name, machines, base, trust).map_err(wrap)?;
    if let Some(seed) = seed {
        scenario.seed = seed;
    }
    build_plan(&scenario).map_err(wrap)
}

/// Files of measured delays (`delay: {measured: FILE}`), read as the scenario does.
pub mod delay {
    pub use crate::parse::delay::{measured_series, Series};
}
pub use parse::{
    impairment_patch, Scenario, IMPAIRMENT_KEYS, PRIVATE_DIRS, RUNTIME_IMPAIRMENT_KEYS,
};
