//! Hand-written histories for the checkers' unit tests.
