//! rlcore-core: the replay core of rlcore, in pure Rust.
//!
//! - [`storage`]: episode-contiguous ring storage with one terminal row per episode, per-env
//!   segments, continuity check, fixed memory;
//! - [`sampling`]: uniform and prioritized draws, n-step windows, HER relabeling, gathers into
//!   caller-owned arrays;
//! - [`episodes`]: O(1) episode queries; [`per`]: priority updates over [`sumtree`];
//! - [`gae`]: GAE and n-step returns on raw arrays; [`state`]: export/import for save/load;
//!   [`checksum`]: CRC-32C of saved files;
//! - [`validate`]: range checks of count, seed, index and priority arguments.
//!
//! Semantics are specified in DESIGN.md ("Returns, relabeling, priorities — exact semantics").

pub mod checksum;
pub mod dtype;
pub mod episodes;
pub mod error;
pub mod gae;
pub mod per;
pub mod rng;
pub mod sampling;
pub mod state;
pub mod storage;
pub mod sumtree;
pub mod validate;

pub use dtype::DType;
pub use error::{CoreError, Result};
pub use gae::{compute_gae, compute_nstep_returns};
pub use per::MAX_PRIORITY;
pub use sampling::{BatchOut, Plan, RewardFn};
pub use state::{PartLayout, StatePart};
pub use storage::{
    AddOutcome, Array, ColumnSpec, EpisodeDone, GoalStrategy, HerConfig, ReplayCore, Steps,
    RESERVED_NAMES,
};
