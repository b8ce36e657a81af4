//! The machine's system helpers that every layer making system calls shares, knowing
//! nothing of labs, scenarios or frames: vemu's one route netlink client (`netlink`),
//! entering a network namespace (`netns`), CPU sets, pinning and the machine's CPU
//! pressure (`cpus`). `vemu-host` (nodes and devices), `vemu-engine` (its shards' CPUs)
//! and `vemu-fastpath` (its routes and TC objects) stand on it, so that the data plane
//! does not depend on the host layer, nor through it on the scenario model.

pub mod cpus;
pub mod netlink;
pub mod netns;
