//! The machine side of a lab. A controller gives every order to a machine through the
//! typed [`worker::Worker`] trait, one method per order, each with its own result and a
//! [`worker::WorkerError`]; [`worker::LocalWorker`] carries the orders out on this
//! machine (nodes, links, the engine, the programs it [`supervise`]s, the traffic
//! records of [`traffic`]). Another machine's share is reached through its agent:
//! [`route`] (one agent's address, token and TLS over [`channel`]), whose wire format is
//! [`worker::WorkerRequest`] / [`worker::WorkerReply`]; [`door`] is how a command enters
//! a node, here or through its machine's agent. The controller (the lab, its API, the
//! cluster of agents and the agents' server) is vemu-control.

pub mod channel;
pub mod clock;
pub mod door;
pub mod route;
pub mod supervise;
mod sync;
pub mod traffic;
pub mod worker;

pub use supervise::{exit_code, forget_waited, spawn_waited, ProcStatus};
pub use sync::LockExt;
pub use worker::fast_path_wanted;
