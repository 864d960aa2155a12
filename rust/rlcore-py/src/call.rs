//! How the binding calls the core: the buffer's lock ([`Shared::lock`]), and [`run`], which
//! makes one core call with the user's reward callback, or with the GIL released when the call
//! is large. Errors map to Python exceptions in `errors`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use rlcore_core::{her, CoreError, Goals, ReplayCore, RewardFn};
use smallvec::SmallVec;

use crate::convert::{self, type_name, Any, What};
use crate::errors::{Error, Result};

/// Calls that write more than this many bytes release the GIL.
pub const DETACH_BYTES: usize = 1 << 20;

/// The core behind a lock. Large calls run with the GIL released, so a thread that waits for
/// the lock (a collector adding while a prefetch thread samples) waits with the GIL released
/// too, and the two never deadlock.
pub struct Shared {
    core: Mutex<ReplayCore>,
    /// Id of the thread holding `core` (0: none), to refuse re-entrant calls instead of
    /// deadlocking (a `compute_reward` that calls back into its own buffer).
    owner: AtomicU64,
}

/// The locked core; clears the owner on drop.
pub struct Guard<'a> {
    g: MutexGuard<'a, ReplayCore>,
    owner: &'a AtomicU64,
}

impl std::ops::Deref for Guard<'_> {
    type Target = ReplayCore;
    fn deref(&self) -> &ReplayCore {
        &self.g
    }
}
impl std::ops::DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut ReplayCore {
        &mut self.g
    }
}
impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.owner.store(0, Ordering::Release);
    }
}

impl Shared {
    pub fn new(core: ReplayCore) -> Self {
        Shared { core: Mutex::new(core), owner: AtomicU64::new(0) }
    }

    /// Lock the core; a thread that has to wait releases the GIL while it waits.
    pub fn lock<'a>(&'a self, py: Python<'_>) -> Result<Guard<'a>> {
        // the calling thread's Python thread state: unique among live threads, and cheaper to
        // read than a Rust thread-local in a dynamically loaded module
        // SAFETY: attached to the interpreter (`py`), so there is a current thread state.
        let me = unsafe { pyo3::ffi::PyThreadState_Get() as usize as u64 };
        let g = match self.core.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) if self.owner.load(Ordering::Acquire) == me => {
                return Err(CoreError::usage(
                    "the buffer is already in use by this thread (a compute_reward that \
                     calls back into its own buffer?)",
                )
                .into());
            }
            // wait with the GIL released (a guard cannot cross back), then take it with the GIL
            Err(TryLockError::WouldBlock) => loop {
                py.detach(|| drop(self.core.lock()));
                match self.core.try_lock() {
                    Ok(g) => break g,
                    Err(TryLockError::Poisoned(p)) => break p.into_inner(),
                    Err(TryLockError::WouldBlock) => continue,
                }
            },
        };
        self.owner.store(me, Ordering::Release);
        Ok(Guard { g, owner: &self.owner })
    }
}

/// Run the core call `f` that writes `bytes` bytes: with the user's `compute_reward` (`reward`)
/// when given (a Python error it raises is the call's error), else with the GIL released when
/// `bytes` exceeds [`DETACH_BYTES`].
pub fn run<T: Send>(
    py: Python<'_>, bytes: usize, reward: Option<&Any<'_>>,
    f: impl FnOnce(Option<&mut RewardFn<'_>>) -> rlcore_core::Result<T> + Send,
) -> Result<T> {
    let Some(reward) = reward else {
        return Ok(if bytes > DETACH_BYTES { py.detach(|| f(None)) } else { f(None) }?);
    };
    let mut raised: Option<PyErr> = None;
    let mut call = |g: &Goals<'_>| {
        call_reward(py, reward, g).map_err(|e| match e {
            Error::Core(e) => e,
            Error::Py(e) => {
                let msg = e.to_string();
                raised = Some(e);
                CoreError::usage(msg)
            }
        })
    };
    let r = f(Some(&mut call));
    match raised {
        Some(e) => Err(e.into()),
        None => Ok(r?),
    }
}

/// Call the user's vectorised `compute_reward(achieved_goal [M, *G], desired_goal [M, *G],
/// info)` (info: the extra step columns of each pair's transition) and take its M rewards.
fn call_reward(py: Python<'_>, f: &Any<'_>, g: &Goals<'_>) -> Result<Vec<f32>> {
    let dims = |shape: &[usize]| -> SmallVec<[usize; 4]> {
        std::iter::once(g.count).chain(shape.iter().copied()).collect()
    };
    let ag = convert::copy_of(py, g.dtype, &dims(g.shape), g.achieved)?;
    let dg = convert::copy_of(py, g.dtype, &dims(g.shape), g.desired)?;
    let info = PyDict::new(py);
    for c in g.info {
        info.set_item(c.name, convert::copy_of(py, c.dtype, &dims(c.shape), &c.data)?)?;
    }
    let res = f.call1((ag, dg, info))?;
    let r = convert::array(&res, What::Arg("compute_reward result")).map_err(|_| {
        CoreError::dtype(format!(
            "compute_reward must return a numeric array of shape [{}], got {}",
            g.count,
            type_name(&res)
        ))
    })?;
    Ok(her::rewards_from(&r.array(), g.count)?)
}
