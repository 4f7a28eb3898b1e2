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
/// reports): `redis://…@host:6379`. Also without a scheme (`user:pass@host:6379`, a malformed
/// URL an error shows), and each of several URLs joined by commas (a cluster's seeds).
pub fn redacted(url: &str) -> String {
    // Split only a list of URLs: a password may hold a comma.
    let urls: Vec<&str> = if url.matches("://").count() > 1 {
        url.split(',').collect()
    } else {
        vec![url]
    };
    urls.into_iter()
        .map(|one| {
            let (scheme, rest) = one
                .split_once("://")
                .map_or((String::new(), one), |(s, r)| (format!("{s}://"), r));
            match rest.rfind('@') {
                Some(at) => format!("{scheme}…@{}", &rest[at + 1..]),
                None => one.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The first line of `text`: a message's headline, for a line of progress, a table's cell or
/// a summary that has room for one line.
pub(crate) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}
