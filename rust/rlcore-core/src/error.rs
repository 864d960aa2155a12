//! The one error type of the core. The binding maps each variant to one Python exception class.

use std::fmt;

/// Every way a core call can fail. A failed call leaves the buffer exactly as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// An array has the wrong shape (or leading dimension N).
    Shape(String),
    /// An array's dtype cannot be stored without losing information.
    DType(String),
    /// A scalar argument or a value inside an array is out of its allowed range.
    InvalidValue(String),
    /// The buffer holds no sampleable transition.
    Empty(String),
    /// The call is not allowed in the buffer's current state.
    Usage(String),
    /// Saved state is missing parts or inconsistent.
    Corrupt(String),
}

impl CoreError {
    #[cold]
    pub fn shape(msg: impl Into<String>) -> Self {
        CoreError::Shape(msg.into())
    }
    #[cold]
    pub fn dtype(msg: impl Into<String>) -> Self {
        CoreError::DType(msg.into())
    }
    #[cold]
    pub fn value(msg: impl Into<String>) -> Self {
        CoreError::InvalidValue(msg.into())
    }
    #[cold]
    pub fn empty(msg: impl Into<String>) -> Self {
        CoreError::Empty(msg.into())
    }
    #[cold]
    pub fn usage(msg: impl Into<String>) -> Self {
        CoreError::Usage(msg.into())
    }
    #[cold]
    pub fn corrupt(msg: impl Into<String>) -> Self {
        CoreError::Corrupt(msg.into())
    }

    /// The human-readable message (what was expected, what came, how to fix it).
    pub fn message(&self) -> &str {
        match self {
            CoreError::Shape(m)
            | CoreError::DType(m)
            | CoreError::InvalidValue(m)
            | CoreError::Empty(m)
            | CoreError::Usage(m)
            | CoreError::Corrupt(m) => m,
        }
    }
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for CoreError {}

pub type Result<T> = std::result::Result<T, CoreError>;
