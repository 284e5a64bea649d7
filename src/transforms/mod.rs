//! Transformations (`t:name`): pure functions from bytes to bytes.
//!
//! Each transformation lives in its own file named after its SecLang name and
//! returns `Cow::Borrowed` when the input is unchanged, so a chain of
//! transformations on a clean value never copies it.
//!
//! `t:none` is not a transformation: the parser handles it (it clears the
//! inherited chain).

use std::borrow::Cow;

/// A transformation known to the engine (closed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transform {
    Lowercase,
}

impl Transform {
    /// Looks up a transformation by its SecLang name (case-insensitive).
    pub fn from_name(name: &str) -> Option<Transform> {
        match name.to_ascii_lowercase().as_str() {
            "lowercase" => Some(Transform::Lowercase),
            _ => None,
        }
    }

    /// The canonical SecLang name.
    pub fn name(self) -> &'static str {
        match self {
            Transform::Lowercase => "lowercase",
        }
    }

    /// Applies the transformation. Borrowed output means "unchanged".
    pub fn apply(self, input: &[u8]) -> Cow<'_, [u8]> {
        match self {
            Transform::Lowercase => {
                if input.iter().any(u8::is_ascii_uppercase) {
                    Cow::Owned(input.to_ascii_lowercase())
                } else {
                    Cow::Borrowed(input)
                }
            }
        }
    }
}
