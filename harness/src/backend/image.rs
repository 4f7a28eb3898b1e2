//! The harness's own server image, built FROM scratch out of a server binary (the local
//! `redis-server`, or `--server NAME|PATH`) and the shared libraries it links, named after
//! the product and tagged with its version (`limiter-harness/redis:6.2.14`,
//! `limiter-harness/valkey:9.1.2`), built once (later runs reuse it). No registry is needed.

use std::path::{Path, PathBuf};

use testcontainers::GenericBuildableImage;
use testcontainers::core::BuildImageOptions;
use testcontainers::runners::AsyncBuilder;

use super::BackendError;
use crate::error::SetupError;
use crate::servers::{LocalServer, Product, linked};

/// Repository name of the image the harness builds for `product`.
pub fn image_name(product: Product) -> String {
    format!("limiter-harness/{}", product.name())
}

/// The image for `server`: built now if this engine does not have it yet.
/// Returns (name, tag).
pub async fn ensure_image(server: &LocalServer) -> Result<(String, String), SetupError> {
    let name = image_name(server.product);
    let tag = server.version.clone();
    let image = format!("{name}:{tag}");
    let fail = |reason: String| SetupError::ImageBuild {
        image: image.clone(),
        reason,
    };
    let libraries = linked(&server.binary, &server.env()).map_err(|e| fail(e.to_string()))?;
    if !libraries.missing.is_empty() {
        return Err(fail(format!(
            "ldd finds no {} for {}",
            libraries.missing.join(", "),
            server.binary.display()
        )));
    }
    let program = server.program();
    let mut build = GenericBuildableImage::new(&name, &tag).with_dockerfile_string(dockerfile(server));
    build = build.with_file(
        canonical(&server.binary).map_err(|e| fail(e.to_string()))?,
        format!("rootfs/usr/local/bin/{program}"),
    );
    for lib in &libraries.found {
        let target = format!("rootfs{}", lib.display());
        build = build.with_file(canonical(lib).map_err(|e| fail(e.to_string()))?, target);
    }
    let _image = build
        .build_image_with(BuildImageOptions::new().with_skip_if_exists(true))
        .await
        .map_err(|e| fail(e.to_string()))?;
    Ok((name, tag))
}

fn canonical(path: &Path) -> Result<PathBuf, BackendError> {
    path.canonicalize().map_err(|source| BackendError::Canonical {
        path: path.to_owned(),
        source,
    })
}

/// The image's libraries sit at the paths `ldd` found them at; a library directory of an
/// installed server (Debian's redis-7.0) goes in `LD_LIBRARY_PATH`, as outside.
fn dockerfile(server: &LocalServer) -> String {
    let library_path = server
        .library_dir
        .as_ref()
        .map(|dir| format!("ENV LD_LIBRARY_PATH={}\n", dir.display()))
        .unwrap_or_default();
    format!(
        "FROM scratch\n\
         COPY rootfs/ /\n\
         ENV PATH=/usr/local/bin:/usr/bin:/bin\n\
         {library_path}\
         LABEL {label}=image org.opencontainers.image.version={version}\n\
         EXPOSE 6379\n\
         CMD [\"{program}\"]\n",
        label = super::LABEL,
        version = server.version,
        program = server.program(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_is_named_after_the_product_and_runs_its_program() {
        let valkey = LocalServer {
            binary: PathBuf::from("/c/servers/valkey-9.1/bin/valkey-server"),
            product: Product::Valkey,
            version: "9.1.2".into(),
            library_dir: None,
            spec: Some("valkey-9.1".into()),
        };
        assert_eq!(image_name(valkey.product), "limiter-harness/valkey");
        let file = dockerfile(&valkey);
        assert!(file.contains("CMD [\"valkey-server\"]"), "{file}");
        assert!(!file.contains("LD_LIBRARY_PATH"), "{file}");
        let debian = LocalServer {
            binary: PathBuf::from("/c/servers/redis-7.0/bin/redis-server"),
            product: Product::Redis,
            version: "7.0.15".into(),
            library_dir: Some(PathBuf::from("/c/servers/redis-7.0/lib")),
            spec: Some("redis-7.0".into()),
        };
        let file = dockerfile(&debian);
        assert!(
            file.contains("ENV LD_LIBRARY_PATH=/c/servers/redis-7.0/lib\n"),
            "{file}"
        );
        assert!(file.contains("CMD [\"redis-server\"]"), "{file}");
    }
}
