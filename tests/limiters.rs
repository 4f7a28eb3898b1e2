//! limiters
