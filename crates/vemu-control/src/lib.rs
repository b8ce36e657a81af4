//! The controller of a lab: builds it through vemu-machine's typed `Worker`, keeps it
//! running, serves its HTTP/JSON API ([`api`]), and tears it down. [`Client`] talks to
//! that API.
//!
//! The boundary between the controller and the machines that host nodes and links is
//! the `Worker` trait (vemu-machine), one method per order: the controller drives its
//! own machine's share in-process (`LocalWorker`) and the shares of other machines
//! through their agents ([`cluster::Cluster`]; [`agent`] serves them, with the API's
//! HTTP server), whose wire format is vemu-machine's `WorkerRequest` / `WorkerReply`.

pub mod agent;
pub mod api;
mod background;
pub mod bgp;
pub mod client;
pub mod clock_sync;
pub mod cluster;
pub mod converge;
pub mod daemon;
pub mod error;
pub mod expect;
pub mod fidelity;
mod files;
pub mod lab;
pub mod labs;
pub mod pcapng;
mod radio;
pub mod report;
pub mod status;
mod tasks;
mod timeline;
pub mod wire;

pub use client::{list_labs, list_shares, percent_encode, terminal_size, ApiFailure, Client};
pub use files::write_private;
pub use status::*;
use vemu_machine::LockExt;

/// What clients of the controller see of the engine: the lab clock and its counters.
pub use vemu_engine::{bucket_quantile_ns, LabClock, DELAY_BUCKETS_NS, TUNNEL_FRAME_EXTRA};
pub use vemu_scenario::derive_seed;
