//! Text for people to read, shared by the error messages of every floor.

/// `items` written one after another with `separator` between them: the list in an error
/// message that names several things (failures, values out of range, missing shards).
pub(crate) fn joined<T: std::fmt::Display>(items: &[T], separator: &str) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(separator)
}
