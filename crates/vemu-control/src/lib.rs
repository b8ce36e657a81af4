//! The controller of a lab: builds it through a [`worker::Worker`], keeps it running,
//! serves its HTTP/JSON API ([`api`]), and tears it down. [`Client`] talks to that API.
//!
//! The boundary between the controller and the machines that host nodes and links is
//! the typed [`worker::Worker`] trait, one method per order: the controller drives its
//! own machine's share in-process ([`worker::LocalWorker`]) and the shares of other
//! machines through their agents ([`cluster::Cluster`]; [`agent`] serves them), whose
//! wire format is [`worker::WorkerRequest`] / [`worker::WorkerReply`].

pub mod agent;
pub mod api;
mod background;
pub mod channel;
pub mod client;
pub mod clock_sync;
pub mod cluster;
pub mod converge;
pub mod daemon;
pub mod door;
pub mod error;
pub mod expect;
pub mod fidelity;
mod files;
pub mod lab;
pub mod labs;
pub mod pcapng;
mod radio;
pub mod report;
pub mod route;
pub mod status;
mod supervise;
mod sync;
mod tasks;
mod timeline;
pub mod traffic;
pub mod wire;
pub mod worker;

pub use client::{list_labs, list_shares, percent_encode, terminal_size, ApiFailure, Client};
pub use files::write_private;
pub use status::*;
pub use supervise::{exit_code, forget_waited, spawn_waited, ProcStatus};
pub(crate) use sync::LockExt;
pub use worker::fast_path_wanted;

/// What clients of the controller see of the engine: the lab clock and its counters.
pub use vemu_engine::{bucket_quantile_ns, LabClock, DELAY_BUCKETS_NS, TUNNEL_FRAME_EXTRA};
pub use vemu_scenario::derive_seed;
