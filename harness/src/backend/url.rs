//! An existing server the user points at. The harness did not start it, so it never
//! reconfigures, floods or flushes it unless `--allow-reconfigure` says so (checked by the
//! runner before anything is sent).

use async_trait::async_trait;

use super::{Backend, BackendError, ServerHandle, wait_ready};
use crate::error::SetupError;
use crate::history::ServerRole;

#[derive(Debug)]
pub struct UrlBackend {
    url: String,
}

impl UrlBackend {
    pub fn new(url: String) -> Self {
        Self { url }
    }
}

#[async_trait]
impl Backend for UrlBackend {
    fn name(&self) -> &'static str {
        "url"
    }

    fn owns_servers(&self) -> bool {
        false
    }

    fn reproduce_flags(&self) -> String {
        format!("--backend url --url {}", self.url)
    }

    async fn start(
        &self,
        role: ServerRole,
        _run_id: &str,
        _options: super::StartOptions,
    ) -> Result<Box<dyn ServerHandle>, SetupError> {
        if role == ServerRole::Cache {
            return Err(SetupError::Usage(
                "this scenario puts its cache on a separate server ([cache_server]), which --backend url cannot start; run it with the container or process backend".into(),
            ));
        }
        wait_ready(&self.url, std::time::Duration::from_secs(3))
            .await
            .map_err(|e| SetupError::Connect {
                url: self.url.clone(),
                reason: e.to_string(),
            })?;
        Ok(Box::new(External { url: self.url.clone() }))
    }
}

struct External {
    url: String,
}

#[async_trait]
impl ServerHandle for External {
    fn url(&self) -> &str {
        &self.url
    }

    fn describe(&self) -> String {
        format!("external server {}", self.url)
    }

    async fn stop(self: Box<Self>) -> Result<(), BackendError> {
        Ok(())
    }
}
