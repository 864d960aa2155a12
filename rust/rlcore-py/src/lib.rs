//! Thin PyO3 binding of `rlcore-core` (module `rlcore._core`): it converts Python objects to
//! the core's types and back ([`convert`]), holds the buffer's lock and releases the GIL for
//! large work ([`buffer`]), and maps the core's errors to Python exceptions in one place
//! ([`errors`]). Every check is the core's.

mod buffer;
mod convert;
mod errors;
mod priorities;
mod returns;
mod sequences;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::buffer::DETACH_BYTES;
use crate::convert::What;

/// The (name, dtype name, shape) of every state part a buffer of `capacity` rows over `num_envs`
/// envs with columns `obs` + `step` (lists of (name, dtype name, shape); both empty before the
/// first add), prioritized replay on or off and `frame_stack` (None or k) has, in
/// `_state_parts` order, computed without building the buffer (a loader checks a save's files
/// against it before allocating anything). Raises InvalidValueError for a capacity or num_envs
/// the buffer refuses, DTypeError for an unknown dtype name, ShapeError/InvalidValueError for
/// columns a frame stack of k refuses.
#[pyfunction]
#[pyo3(signature = (capacity, num_envs, obs, step, prioritized, frame_stack=None))]
fn _state_layout(
    capacity: usize,
    num_envs: usize,
    obs: &Bound<'_, PyAny>,
    step: &Bound<'_, PyAny>,
    prioritized: bool,
    frame_stack: Option<usize>,
) -> errors::Result<Vec<(String, &'static str, Vec<usize>)>> {
    let (o, s) = (convert::specs(obs)?, convert::specs(step)?);
    let layout =
        rlcore_core::state::state_layout_for(capacity, num_envs, &o, &s, prioritized, frame_stack)?;
    Ok(layout
        .into_iter()
        .map(|(name, dtype, shape)| (name, dtype.name(), shape))
        .collect())
}

/// CRC-32C of the bytes of `data` (a numpy array, read in C order) following bytes whose CRC-32C
/// is `value` (0 to start): `_crc32c(b, _crc32c(a)) == _crc32c(concatenation of a and b)`.
/// Releases the GIL for large arrays. Raises DTypeError for an unsupported dtype.
#[pyfunction]
#[pyo3(signature = (data, value=0))]
fn _crc32c(py: Python<'_>, data: &Bound<'_, PyAny>, value: u32) -> errors::Result<u32> {
    let i = convert::array(data, What::Arg("data"))?;
    let bytes = i.array().data;
    let crc = |b: &[u8]| rlcore_core::checksum::crc32c(value, b);
    Ok(if bytes.len() > DETACH_BYTES {
        py.detach(|| crc(bytes))
    } else {
        crc(bytes)
    })
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<buffer::RawBuffer>()?;
    m.add_class::<buffer::AddResult>()?;
    m.add_function(wrap_pyfunction!(returns::_compute_gae, m)?)?;
    m.add_function(wrap_pyfunction!(returns::_compute_nstep_returns, m)?)?;
    m.add_function(wrap_pyfunction!(_state_layout, m)?)?;
    m.add_function(wrap_pyfunction!(_crc32c, m)?)?;
    m.add_function(wrap_pyfunction!(priorities::_priority_update, m)?)?;
    m.add_function(wrap_pyfunction!(priorities::_sequence_update, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_PRIORITY", rlcore_core::MAX_PRIORITY)?;
    m.add("INDEX_ROW_BITS", rlcore_core::index::ROW_BITS)?;
    m.add(
        "RESERVED_NAMES",
        PyTuple::new(m.py(), rlcore_core::RESERVED_NAMES)?,
    )?;
    Ok(())
}
