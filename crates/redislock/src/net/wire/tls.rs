//! The TLS settings a client's connections share (the roots to trust,
//! read once per process when they are the system's), the server name
//! each `rediss://` connection checks, and what a build without the `tls`
//! feature answers such a URL. The sessions themselves are rustls's, over
//! the socket of `timeouts::Timed`.

/// TLS settings shared by every connection of a client: the roots to trust.
#[derive(Clone)]
pub(crate) struct Tls {
    #[cfg(feature = "tls")]
    config: std::sync::Arc<rustls::ClientConfig>,
}

impl Tls {
    /// Trust `root_pem` (one or more PEM certificates) if given, else the
    /// system's roots (read once per process: a PHP request that makes a
    /// client must not parse them again).
    #[cfg(feature = "tls")]
    pub(crate) fn new(root_pem: Option<&[u8]>) -> Result<Tls, String> {
        static SYSTEM: std::sync::OnceLock<Result<Tls, String>> = std::sync::OnceLock::new();
        match root_pem {
            Some(pem) => Tls::build(Some(pem)),
            None => SYSTEM.get_or_init(|| Tls::build(None)).clone(),
        }
    }

    #[cfg(feature = "tls")]
    fn build(root_pem: Option<&[u8]>) -> Result<Tls, String> {
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        let mut roots = rustls::RootCertStore::empty();
        match root_pem {
            Some(pem) => {
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert = cert.map_err(|e| format!("the TLS root certificate: {e}"))?;
                    roots
                        .add(cert)
                        .map_err(|e| format!("the TLS root certificate: {e}"))?;
                }
                if roots.is_empty() {
                    return Err("the TLS root certificate holds no PEM certificate".into());
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                for cert in found.certs {
                    // A system root rustls cannot use is skipped, as
                    // browsers do.
                    let _ = roots.add(cert);
                }
                if roots.is_empty() {
                    return Err(format!(
                        "no system root certificates found ({}); install ca-certificates \
                         or give tls_ca_file",
                        found
                            .errors
                            .first()
                            .map_or_else(|| "none".to_string(), |e| e.to_string())
                    ));
                }
            }
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Tls {
            config: std::sync::Arc::new(config),
        })
    }
}

/// What a rediss:// URL gets from a build without the `tls` feature.
pub(crate) const NO_TLS: &str = "this build of redislock has no TLS support (the `tls` feature)";

/// The TLS settings and the server name to check for `host`.
#[cfg(feature = "tls")]
pub(crate) fn tls_for(
    tls: Option<&Tls>,
    host: &str,
) -> redis::RedisResult<(
    std::sync::Arc<rustls::ClientConfig>,
    rustls::pki_types::ServerName<'static>,
)> {
    let Some(tls) = tls else {
        return Err(config_error("a rediss:// server needs TLS settings"));
    };
    let name = rustls::pki_types::ServerName::try_from(host.to_owned())
        .map_err(|_| config_error("the host name is not valid for TLS"))?;
    Ok((tls.config.clone(), name))
}

/// A client configuration that cannot work (a TLS setting here).
pub(crate) fn config_error(what: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, what))
}
