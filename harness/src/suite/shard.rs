//! `--shard K/N`: which part of a suite's cells one CI job runs.

use std::str::FromStr;

/// `--shard K/N`: the K-th of N disjoint parts of the cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 1-based.
    pub index: u32,
    pub count: u32,
}

/// A `--shard` that is not K/N with 1 <= K <= N <= 256.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}`: a shard is K/N with 1 <= K <= N <= 256, e.g. 1/2 and 2/2 for two CI jobs")]
pub struct BadShard {
    pub text: String,
}

impl FromStr for Shard {
    type Err = BadShard;

    fn from_str(s: &str) -> Result<Self, BadShard> {
        let parsed = s
            .split_once('/')
            .and_then(|(k, n)| Some((k.trim().parse::<u32>().ok()?, n.trim().parse::<u32>().ok()?)));
        match parsed {
            Some((index, count)) if (1..=256).contains(&count) && (1..=count).contains(&index) => {
                Ok(Self { index, count })
            }
            _ => Err(BadShard { text: s.to_owned() }),
        }
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}
