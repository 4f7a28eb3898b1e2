//! No pass on nothing: when a run saw none of the keys its layout describes, every verdict
//! about keys, TTLs and windows is unknown, and the reason says what the limiter touched
//! instead and how to describe it.

use super::CheckInput;
use crate::keys::{KeyLayout, Sighting, suggest_templates};

/// How many foreign keys a hint names.
const NAMED_MAX: usize = 2;

/// Why no verdict about the limiter's keys can rest on this run, if none can.
pub(crate) fn keys_unseen(input: &CheckInput<'_>) -> Option<String> {
    if input.history.saw_limiter_keys() {
        return None;
    }
    Some(layout_hint(input.layout, &input.history.foreign_keys()))
}

/// "no key matching `rl:{identity}` was ever seen; keys the limiter touched: `…` (+3) —
/// describe them with `keys` (e.g. `--keys '…'`)".
pub fn layout_hint(layout: &KeyLayout, foreign: &[Sighting]) -> String {
    let mut hint = format!(
        "no key matching {} ({}) was ever seen",
        layout.describe(),
        layout.source
    );
    let mut keys: Vec<&str> = Vec::new();
    for s in foreign {
        if !keys.contains(&s.key.as_str()) {
            keys.push(&s.key);
        }
    }
    if keys.is_empty() {
        hint.push_str(
            "; the limiter's commands named no other key either (does it build its keys inside a script?) — describe its keys with `keys`",
        );
        return hint;
    }
    let named: Vec<String> = keys.iter().take(NAMED_MAX).map(|k| format!("`{k}`")).collect();
    hint.push_str(&format!("; keys the limiter touched: {}", named.join(", ")));
    if keys.len() > NAMED_MAX {
        hint.push_str(&format!(" (+{})", keys.len() - NAMED_MAX));
    }
    hint.push_str(" — describe them with `keys` ([limit] keys, --keys, or the adapter's hello)");
    let suggested = suggest_templates(foreign);
    if !suggested.is_empty() {
        let flags: Vec<String> = suggested
            .iter()
            .map(|t| format!("--keys {}", crate::shell::quote(t)))
            .collect();
        hint.push_str(&format!(", e.g. `{}`", flags.join(" ")));
    }
    hint
}

/// A note for checks that did see limiter keys, when the limiter also named keys of its
/// identities that the layout leaves out (and that were therefore never observed).
pub(crate) fn unobserved_keys_note(input: &CheckInput<'_>) -> Option<String> {
    let foreign: Vec<Sighting> = input
        .history
        .foreign_keys()
        .into_iter()
        .filter(|s| s.identity.is_some())
        .collect();
    let first = foreign.first()?;
    let mut note = format!(
        "the limiter also named keys outside the layout, which were not observed: `{}`",
        first.key
    );
    if foreign.len() > 1 {
        note.push_str(&format!(" (+{})", foreign.len() - 1));
    }
    let suggested = suggest_templates(&foreign);
    if suggested.is_empty() {
        note.push_str(" — add them to `keys` to have them checked");
    } else {
        note.push_str(&format!(
            " — add `{}` to `keys` to have them checked",
            suggested.join("`, `")
        ));
    }
    Some(note)
}
