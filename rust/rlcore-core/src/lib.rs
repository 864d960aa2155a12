//! rlcore-core: the replay core of rlcore, in pure Rust.
//!
//! Modules, lowest first; each imports only modules above it in this list:
//! - [`error`]: the one error type; [`mem`]: allocation, row copies, byte views;
//!   [`rng`]: the buffer's own generator; [`checksum`]: CRC-32C of saved files;
//! - [`dtype`]: element types, borrowed input arrays, casts;
//! - [`schema`]: columns, row record layout, reserved names, the `"obs.<key>"` convention,
//!   one call's inputs ([`Steps`]) and their lookup by name, column views; [`batch`]: the
//!   layout of a sampled batch (transitions and sequences) and of its output arrays;
//! - [`validate`]: the checks of arguments, of one call's inputs against the schema and (one
//!   check for every kind of batch) of caller-supplied output arrays;
//! - [`index`]: what an index names (a row, or a transition: row and generation);
//! - [`sumtree`] and [`per`]: prioritized replay state, priority updates, weights;
//! - `fill`: per-env alive-row counts (O(log N) draws over N envs);
//! - [`storage`]: episode-contiguous ring storage, `add`/`extend` writes;
//! - [`frames`]: frame-stacked observations (one frame per row, stacks rebuilt at sample
//!   time, the rows whose stacks are gone);
//! - [`episodes`]: O(1) episode queries; [`sampling`]: draws, n-step windows, gathers;
//! - [`her`]: hindsight goal selection and relabeling;
//! - [`sequences`]: fixed-length episode sequences for recurrent agents (burn-in, stored
//!   state, n-step inside the sequence, priorities over starts, HER per sequence);
//! - [`replay`]: [`ReplayCore`], which composes all of the above; [`state`]: its export and
//!   import for save/load;
//! - [`gae`]: GAE and n-step returns on raw arrays (independent of the buffer).
//!
//! Semantics are specified in docs/n-step.md, docs/her.md and docs/per.md.

pub mod batch;
pub mod checksum;
pub mod dtype;
pub mod episodes;
pub mod error;
pub(crate) mod fill;
pub mod frames;
pub mod gae;
pub mod her;
pub mod index;
pub mod mem;
pub mod per;
pub mod replay;
pub mod rng;
pub mod sampling;
pub mod schema;
pub mod sequences;
pub mod state;
pub mod storage;
pub mod sumtree;
pub mod validate;

/// Prioritized replay's exponents and offset when a caller gives none (Schaul et al. 2016).
pub const DEFAULT_ALPHA: f64 = 0.6;
pub const DEFAULT_BETA: f64 = 0.4;
pub const DEFAULT_EPS: f64 = 1e-6;
/// Relabeled goals per original one under HER (Andrychowicz et al. 2017: k = 4).
pub const DEFAULT_FUTURE_K: f64 = 4.0;
/// R2D2's mixture of a sequence's max and mean TD error (Kapturowski et al. 2019: η = 0.9).
pub const DEFAULT_ETA: f64 = 0.9;

pub use batch::{BatchField, Field, OutField, SeqField};
pub use dtype::{Array, DType};
pub use error::{CoreError, Result};
pub use gae::{compute_gae, compute_nstep_returns, GaeInputs, NstepInputs};
pub use her::{GoalStrategy, Goals, HerConfig, RewardFn};
pub use per::{check_priority_update, PerState, MAX_PRIORITY};
pub use replay::{ReplayCore, SampleRequest};
pub use sampling::{BatchOut, Plan};
pub use schema::{ColumnSpec, ColumnView, Obs, Steps, RESERVED_NAMES};
pub use sequences::{sequence_priorities, sequence_priority_update, SeqRequest};
pub use state::{PartLayout, StatePart};
pub use storage::{AddOutcome, EpisodeDone};
pub use validate::OutArray;
