//! backends
