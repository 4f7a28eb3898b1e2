//! The harness's own Redis image, built FROM scratch out of the local `redis-server`
//! binary and the shared libraries it links, tagged with the server's version and built
//! once (later runs reuse it). No registry is needed.

use std::path::{Path, PathBuf};
use std::process::Command;

use testcontainers::GenericBuildableImage;
use testcontainers::core::BuildImageOptions;
use testcontainers::runners::AsyncBuilder;

use crate::error::SetupError;

/// Repository name of the image the harness builds.
pub const IMAGE_NAME: &str = "limiter-harness/redis";

/// A `redis-server` binary found on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalRedis {
    pub binary: PathBuf,
    /// e.g. "7.0.15", from `redis-server --version`.
    pub version: String,
}

/// Find `redis-server` (a path, or a name looked up in PATH) and read its version.
pub fn local_redis(binary: &Path) -> Result<LocalRedis, SetupError> {
    let resolved = resolve_binary(binary).ok_or_else(|| SetupError::RedisBinaryMissing {
        path: binary.to_owned(),
        reason: "no such file, and not found in PATH".into(),
    })?;
    let output = Command::new(&resolved)
        .arg("--version")
        .output()
        .map_err(|e| SetupError::RedisBinaryMissing {
            path: resolved.clone(),
            reason: e.to_string(),
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    let version = parse_version(&text).ok_or_else(|| SetupError::RedisBinaryMissing {
        path: resolved.clone(),
        reason: format!("`--version` printed no version: {}", text.trim()),
    })?;
    Ok(LocalRedis {
        binary: resolved,
        version,
    })
}

fn resolve_binary(binary: &Path) -> Option<PathBuf> {
    if binary.components().count() > 1 {
        return binary.is_file().then(|| binary.to_owned());
    }
    std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(binary))
                .find(|p| p.is_file())
        })
        .unwrap_or(None)
}

/// The version in `redis-server --version` output ("Redis server v=7.0.15 sha=...").
pub fn parse_version(text: &str) -> Option<String> {
    text.split_whitespace()
        .find_map(|word| word.strip_prefix("v="))
        .map(str::to_owned)
}

/// The absolute library paths `ldd` lists for `binary`, the dynamic loader included.
pub fn linked_libraries(binary: &Path) -> Result<Vec<PathBuf>, String> {
    let output = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| format!("running ldd: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "ldd {}: {}",
            binary.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(parse_ldd(&String::from_utf8_lossy(&output.stdout)))
}

fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| {
            let path = match line.split_once("=>") {
                Some((_, right)) => right.split_whitespace().next()?,
                None => line.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// The image for `redis`: built now if this engine does not have it yet.
/// Returns (name, tag).
pub async fn ensure_image(redis: &LocalRedis) -> Result<(String, String), SetupError> {
    let tag = redis.version.clone();
    let image = format!("{IMAGE_NAME}:{tag}");
    let fail = |reason: String| SetupError::ImageBuild {
        image: image.clone(),
        reason,
    };
    let libraries = linked_libraries(&redis.binary).map_err(fail)?;
    let mut build = GenericBuildableImage::new(IMAGE_NAME, &tag).with_dockerfile_string(dockerfile(&redis.version));
    build = build.with_file(
        canonical(&redis.binary).map_err(fail)?,
        "rootfs/usr/local/bin/redis-server",
    );
    for lib in &libraries {
        let target = format!("rootfs{}", lib.display());
        build = build.with_file(canonical(lib).map_err(fail)?, target);
    }
    let _image = build
        .build_image_with(BuildImageOptions::new().with_skip_if_exists(true))
        .await
        .map_err(|e| fail(e.to_string()))?;
    Ok((IMAGE_NAME.to_owned(), tag))
}

fn canonical(path: &Path) -> Result<PathBuf, String> {
    path.canonicalize().map_err(|e| format!("{}: {e}", path.display()))
}

fn dockerfile(version: &str) -> String {
    format!(
        "FROM scratch\n\
         COPY rootfs/ /\n\
         ENV PATH=/usr/local/bin:/usr/bin:/bin\n\
         LABEL {label}=image org.opencontainers.image.version={version}\n\
         EXPOSE 6379\n\
         CMD [\"redis-server\"]\n",
        label = super::LABEL
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_version_and_ldd_paths() {
        let v = parse_version("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64");
        assert_eq!(v.as_deref(), Some("7.0.15"));
        let ldd = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x1)\n\t/lib64/ld-linux-x86-64.so.2 (0x2)\n";
        assert_eq!(
            parse_ldd(ldd),
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libm.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2")
            ]
        );
    }
}
