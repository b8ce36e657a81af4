//! `vemu check`: a scenario loaded and planned, its images prepared, and where it would
//! run — nothing built.

use anyhow::Result;

use crate::up::{images_readable, load_scenario, print_placement};

/// `vemu check`: load and plan a scenario, say what it holds and where it would run.
pub(crate) fn check(
    file: &std::path::Path,
    machines: Option<&str>,
    tenant: &crate::cli::TenantArgs,
) -> Result<()> {
    let plan = load_scenario(file, None, machines, tenant)?;
    images_readable(&plan)?;
    println!(
        "{}: lab '{}' with {} nodes and {} links is valid",
        file.display(),
        plan.name,
        plan.nodes.len(),
        plan.links.len()
    );
    print_placement(&plan);
    Ok(())
}
