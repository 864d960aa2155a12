//! Thin PyO3 binding of `rlcore-core` (module `rlcore._core`, documented in
//! `python/rlcore/_core.pyi`): [`convert`] turns Python objects into the core's types and back
//! ([`fast`]: the unsafe fast path of `add`), [`arrays`] makes the arrays of a sampled batch,
//! [`call`] holds the buffer's lock and runs a core call (GIL release, reward callback), and
//! [`errors`] maps the core's errors to Python exceptions. Every check is the core's.

mod arrays;
mod buffer;
mod call;
mod convert;
mod errors;
mod fast;
mod functions;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<buffer::RawBuffer>()?;
    m.add_class::<buffer::AddResult>()?;
    m.add_function(wrap_pyfunction!(functions::_compute_gae, m)?)?;
    m.add_function(wrap_pyfunction!(functions::_compute_nstep_returns, m)?)?;
    m.add_function(wrap_pyfunction!(functions::_state_layout, m)?)?;
    m.add_function(wrap_pyfunction!(functions::_crc32c, m)?)?;
    m.add_function(wrap_pyfunction!(functions::_priority_update, m)?)?;
    m.add_function(wrap_pyfunction!(functions::_sequence_update, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_PRIORITY", rlcore_core::MAX_PRIORITY)?;
    m.add("INDEX_ROW_BITS", rlcore_core::index::ROW_BITS)?;
    m.add("RESERVED_NAMES", PyTuple::new(m.py(), rlcore_core::RESERVED_NAMES)?)?;
    Ok(())
}
