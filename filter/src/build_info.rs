//! What runs: wafer's version, the git revision it was built from, the rule files embedded
//! in the module and the OWASP CRS version.
//!
//! Logged when the module starts (the wasm VM; the dynamic module's configuration), and set
//! as an Envoy gauge whose name carries the same facts (value 1), so `/stats` and Prometheus
//! show what every proxy runs:
//!
//! ```text
//! wafer: build version=0.1.0 revision=528a234c9f01 crs=4.28.0 embedded=@crs-setup-conf, ...
//! wasmcustom.wafer.build.version.0_1_0.revision.528a234c9f01.crs.4_28_0: 1
//! ```
//!
//! [`BUILD_ID`] is one string literal, so it also sits verbatim in the module's data:
//! `scripts/oci-image.py` reads the version and revision from there for the image labels.

use crate::host::{metric_segment, Host, Level};

/// `wafer-build-id: version=<crate version> revision=<git revision or "unknown">;` (the `;`
/// ends it for readers of the module's bytes: the linker packs strings without separators).
pub const BUILD_ID: &str = concat!(
    "wafer-build-id: version=",
    env!("CARGO_PKG_VERSION"),
    " revision=",
    env!("WAFER_GIT_REVISION"),
    ";"
);

/// The embedded OWASP CRS version, `none` without it.
fn crs_version() -> &'static str {
    if wafer::embedded::CRS_VERSION.is_empty() {
        "none"
    } else {
        wafer::embedded::CRS_VERSION
    }
}

/// The embedded rule file names, CRS rule files folded into one `@owasp_crs/*.conf (N files)`.
fn embedded_summary() -> String {
    let mut own: Vec<&str> = Vec::new();
    let mut crs_files = 0usize;
    for name in wafer::embedded::names() {
        if name.starts_with("@owasp_crs/") {
            crs_files += 1;
        } else {
            own.push(name);
        }
    }
    let mut out = own.join(", ");
    if crs_files > 0 {
        out.push_str(&format!(", @owasp_crs/*.conf ({crs_files} files)"));
    }
    out
}

/// The start-up line: [`BUILD_ID`]'s facts, the CRS version and the embedded files.
pub fn line() -> String {
    let id = BUILD_ID.trim_start_matches("wafer-build-id: ").trim_end_matches(';');
    format!("wafer: build {id} crs={} embedded={}", crs_version(), embedded_summary())
}

/// `wafer.build.version.<v>.revision.<r>.crs.<c>`, each value made a name segment.
pub fn gauge_name() -> String {
    format!(
        "wafer.build.version.{}.revision.{}.crs.{}",
        metric_segment(env!("CARGO_PKG_VERSION")),
        metric_segment(env!("WAFER_GIT_REVISION")),
        metric_segment(crs_version())
    )
}

/// Logs the build line and sets the build gauge to 1. Failures of the host are ignored: the
/// identity is informational.
pub fn announce<H: Host>(host: &H) {
    host.log(Level::Info, &line());
    host.set_gauge(&gauge_name(), 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_line_and_gauge() {
        let line = line();
        assert!(line.starts_with("wafer: build version=0.1.0 revision="), "{line}");
        assert!(line.contains(" crs="), "{line}");
        assert!(line.contains("@targeted"), "{line}");
        let gauge = gauge_name();
        assert!(gauge.starts_with("wafer.build.version.0_1_0.revision."), "{gauge}");
        // Envoy splits names at dots: exactly the 7 segments a stats tag regex expects.
        assert_eq!(gauge.split('.').count(), 8, "{gauge}");
    }
}
