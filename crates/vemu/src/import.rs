//! `vemu import`: another tool's topology (containerlab, IMUNES, an AS-relationship
//! file, GraphML) made a scenario, on standard output; `--as-graph N`, a made-up
//! AS-relationship file.

use anyhow::Result;

use crate::lab::user;

/// What `vemu import` makes of an AS-relationship file, from its flags (`None` when no
/// such flag was given).
pub(crate) fn as_options(
    top: Option<usize>,
    ases: Vec<u32>,
    hosts: Option<&str>,
    router: Option<&str>,
    ixps: &[String],
) -> Result<Option<vemu_scenario::import::AsOptions>> {
    if top.is_none() && ases.is_empty() && hosts.is_none() && router.is_none() && ixps.is_empty() {
        return Ok(None);
    }
    if top.is_some() && !ases.is_empty() {
        return Err(user("--top and --ases choose the ASes two ways: give one"));
    }
    let router = match router {
        Some(r) => vemu_scenario::import::AsRouter::parse(r).map_err(user)?,
        None => Default::default(),
    };
    let mut o = vemu_scenario::import::AsOptions { top, ases, router, ..Default::default() };
    let asns = |flag: &str, list: &str| -> Result<Vec<u32>> {
        list.split(',')
            .map(|a| {
                a.trim().parse().map_err(|_| user(format!("{flag}: '{a}' is not an AS number")))
            })
            .collect()
    };
    match hosts {
        Some("all") => o.all_hosts = true,
        Some(list) => o.hosts = asns("--hosts (a list, or 'all')", list)?,
        None => {}
    }
    for x in ixps {
        o.ixps.push(asns("--ixp", x)?);
    }
    Ok(Some(o))
}

/// `vemu import FILE`: the scenario of another tool's topology, on standard output.
pub(crate) fn import(
    file: &std::path::Path,
    name: Option<&str>,
    as_options: Option<vemu_scenario::import::AsOptions>,
) -> Result<()> {
    use vemu_scenario::import as im;
    let i = if let Some(o) = as_options {
        im::as_rel_file(file, name, &o)
    } else if im::is_clab(file) {
        im::clab_file(file, name, true)
    } else if im::is_imunes(file) {
        im::imunes_file(file, name)
    } else if im::is_as_rel(file) {
        im::as_rel_file(file, name, &im::AsOptions::default())
    } else {
        im::graphml_file(file, name)
    }
    .map_err(user)?;
    print!("{}", i.yaml);
    for w in &i.warnings {
        eprintln!("vemu import: {w}");
    }
    eprintln!("vemu import: {} nodes, {} links", i.nodes, i.links);
    Ok(())
}
