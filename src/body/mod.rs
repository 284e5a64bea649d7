//! Request body processors: turn a buffered body into arguments.
//!
//! Every processor here works on a fully buffered body, never panics, runs in
//! time linear in its input and allocates at most an amount bounded by its
//! input and the limits it is given.  None of them recurses on attacker
//! controlled structure.
//!
//! * [`urlencoded`]: `application/x-www-form-urlencoded` bodies and query
//!   strings (ARGS_GET / ARGS_POST), with URLENCODED_ERROR detection.
//! * [`json`]: JSON bodies, argument names as ModSecurity v3 builds them
//!   (`json.a.b`, `json.list.array_0`).
//! * [`multipart`]: `multipart/form-data` with the MULTIPART_* strict flags,
//!   FILES*, and MULTIPART_PART_HEADERS.
//! * [`xml`]: a small non-validating XML parser providing what `XML:/*` and
//!   `XML://@*` need.
//!
//! Error messages ([`BodyError::msg`], [`multipart::MultipartResult::error`])
//! carry the full REQBODY_ERROR_MSG / REQBODY_PROCESSOR_ERROR_MSG text
//! ModSecurity v3 would produce, including the `"JSON parsing error: "`,
//! `"Multipart parsing error: "` or `"XML parsing error: "` prefix that
//! v3's `Transaction::processRequestBody` prepends.

pub mod json;
pub mod multipart;
pub mod pairs;
pub mod urlencoded;
pub mod xml;

use std::fmt;

/// A request body could not be (fully) parsed.
///
/// `msg` is the value REQBODY_ERROR_MSG should take.  Arguments extracted
/// before the error was found have already been pushed to the caller's
/// output (ModSecurity keeps them too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyError {
    pub msg: String,
}

impl BodyError {
    pub fn new(msg: impl Into<String>) -> Self {
        BodyError { msg: msg.into() }
    }
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for BodyError {}

/// A request body processor (the REQBODY_PROCESSOR value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Processor {
    UrlEncoded,
    Multipart,
    Json,
    Xml,
}

impl Processor {
    /// The REQBODY_PROCESSOR string.
    pub fn as_str(self) -> &'static str {
        match self {
            Processor::UrlEncoded => "URLENCODED",
            Processor::Multipart => "MULTIPART",
            Processor::Json => "JSON",
            Processor::Xml => "XML",
        }
    }

    /// The `ctl:requestBodyProcessor=` argument (case-insensitive).
    pub fn from_name(name: &str) -> Option<Processor> {
        [
            Processor::UrlEncoded,
            Processor::Multipart,
            Processor::Json,
            Processor::Xml,
        ]
        .into_iter()
        .find(|p| p.as_str().eq_ignore_ascii_case(name))
    }

    /// The processor ModSecurity v3 picks from the Content-Type request
    /// header alone (`Transaction::addRequestHeader`: case-insensitive prefix
    /// `multipart/form-data` or `application/x-www-form-urlencoded`).  JSON
    /// and XML are only ever selected by `ctl:requestBodyProcessor`.
    pub fn from_content_type(content_type: &[u8]) -> Option<Processor> {
        let has_prefix = |p: &[u8]| {
            content_type
                .get(..p.len())
                .map(|h| h.eq_ignore_ascii_case(p))
                .unwrap_or(false)
        };
        if has_prefix(b"multipart/form-data") {
            Some(Processor::Multipart)
        } else if has_prefix(b"application/x-www-form-urlencoded") {
            Some(Processor::UrlEncoded)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processor_from_content_type_uses_case_insensitive_prefix() {
        assert_eq!(
            Processor::from_content_type(b"Multipart/Form-Data; boundary=x"),
            Some(Processor::Multipart)
        );
        assert_eq!(
            Processor::from_content_type(b"application/x-www-form-urlencoded;charset=UTF-8"),
            Some(Processor::UrlEncoded)
        );
        assert_eq!(Processor::from_content_type(b"application/json"), None);
        assert_eq!(Processor::from_content_type(b""), None);
    }

    #[test]
    fn processor_names() {
        assert_eq!(Processor::from_name("json"), Some(Processor::Json));
        assert_eq!(
            Processor::from_name("XML").map(Processor::as_str),
            Some("XML")
        );
        assert_eq!(Processor::from_name("yaml"), None);
    }
}
