//! The controller ↔ agent channel: TLS (rustls) authenticated both ways by the token
//! both sides hold, bound to the TLS session so that the token never crosses the wire
//! and a man in the middle (who does not hold it) can neither read nor take over.
//!
//! The agent presents a self-signed certificate made when it starts; the controller
//! does not check it against any authority. Instead both sides take the same secret
//! from the session, `exporter` (RFC 5705 keying material, [`EXPORTER_LABEL`]), and:
//!
//! * the controller sends `Authorization: Bearer HMAC-SHA256(token, exporter ‖ "controller")`;
//! * the agent answers every request with `x-vemu-agent-proof: HMAC-SHA256(token, exporter ‖ "agent")`.
//!
//! A man in the middle has two TLS sessions with two different exporters, so neither
//! proof made on one side holds on the other, and he cannot make them without the token.

use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};

pub const EXPORTER_LABEL: &[u8] = b"EXPORTER-vemu-agent-channel";
/// The agent's proof header.
pub const PROOF_HEADER: &str = "x-vemu-agent-proof";

/// Keying material of one TLS session, the same at both ends.
#[derive(Clone, Copy)]
pub struct Binding(pub [u8; 32]);

impl Binding {
    pub fn of<D>(conn: &rustls::ConnectionCommon<D>) -> Result<Binding> {
        let mut out = [0u8; 32];
        conn.export_keying_material(&mut out[..], EXPORTER_LABEL, None)
            .map_err(|e| anyhow!("TLS keying material: {e}"))?;
        Ok(Binding(out))
    }

    fn mac(&self, token: &str, role: &[u8]) -> ring::hmac::Tag {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.as_bytes());
        let mut ctx = ring::hmac::Context::with_key(&key);
        ctx.update(&self.0);
        ctx.update(role);
        ctx.sign()
    }

    /// What one side sends: the controller's bearer value or the agent's proof.
    pub fn proof(&self, token: &str, role: Role) -> String {
        self.mac(token, role.name()).as_ref().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Whether `given` is `role`'s proof for this session (in constant time).
    pub fn check(&self, token: &str, role: Role, given: &str) -> bool {
        let Some(bytes) = hex(given) else { return false };
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.as_bytes());
        let mut data = self.0.to_vec();
        data.extend_from_slice(role.name());
        ring::hmac::verify(&key, &data, &bytes).is_ok()
    }
}

#[derive(Clone, Copy)]
pub enum Role {
    Controller,
    Agent,
}

impl Role {
    fn name(self) -> &'static [u8] {
        match self {
            Role::Controller => b"controller",
            Role::Agent => b"agent",
        }
    }
}

fn hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The agent's TLS configuration, with a certificate made now.
pub fn server_config() -> Result<Arc<rustls::ServerConfig>> {
    let cert = rcgen::generate_simple_self_signed(vec!["vemu-agent".to_string()])
        .context("making the agent's certificate")?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der()));
    let cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .context("the agent's TLS configuration")?;
    Ok(Arc::new(cfg))
}

/// The controller's TLS configuration: TLS 1.3, any certificate (the token proves who
/// the agent is), signatures of the handshake checked as usual.
pub fn client_config() -> Result<Arc<rustls::ClientConfig>> {
    let p = provider();
    let cfg = rustls::ClientConfig::builder_with_provider(p.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(TokenVerified(p)))
        .with_no_client_auth();
    Ok(Arc::new(cfg))
}

/// Accepts the agent's certificate as it is: see the module documentation.
#[derive(Debug)]
struct TokenVerified(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for TokenVerified {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_hold_only_for_their_session_role_and_token() {
        let (a, b) = (Binding([1; 32]), Binding([2; 32]));
        let p = a.proof("secret-token", Role::Controller);
        assert!(a.check("secret-token", Role::Controller, &p));
        assert!(!b.check("secret-token", Role::Controller, &p), "another session");
        assert!(!a.check("secret-token", Role::Agent, &p), "the other role");
        assert!(!a.check("other-token", Role::Controller, &p), "another token");
        assert!(!a.check("secret-token", Role::Controller, "zz"), "not hex");
        assert!(!a.check("secret-token", Role::Controller, ""), "empty");
        assert!(!a.check("secret-token", Role::Controller, "secret-token"), "the token itself");
    }
}
