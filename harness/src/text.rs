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

/// The URL without its user and password, for anything a person reads (errors, notes,
/// reports): `redis://…@host:6379`.
pub fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => format!("{}://…@{}", &url[..scheme], &url[at + 1..]),
        _ => url.to_owned(),
    }
}

/// The first line of `text`: a message's headline, for a line of progress, a table's cell or
/// a summary that has room for one line.
pub(crate) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}
