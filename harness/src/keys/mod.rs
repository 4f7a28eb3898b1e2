//! The limiter's keys: how the keys a limiter keeps per identity are described (a
//! [`KeyLayout`] of [`KeyTemplate`]s such as `geocode:calls:{identity}:*`), matched and turned
//! into Redis globs, and how a layout is proposed from keys seen when none was described.
//! One place parses a layout; the fault proxy, the observer, the planted setup and the
//! checkers all read the same one.

mod error;
mod layout;
mod suggest;
mod template;

pub use error::KeyError;
pub use layout::{CLOCK_MARK, KeyLayout, LayoutSource, escape_braces, stable_text};
pub use suggest::{Sighting, suggest_templates};
pub use template::KeyTemplate;

/// The placeholder a template must hold exactly once (shared by the templates, the layouts,
/// the suggestions and their errors).
pub const IDENTITY: &str = "{identity}";

/// The most templates a layout may have.
pub const TEMPLATES_MAX: usize = 32;
