//! Load-time errors: where in which SecLang file, and what.

use std::fmt;

/// An error found while loading a configuration or compiling rules.
///
/// `Display` prints `file:line:col: message`, then the offending line and a
/// caret under the column, like regex-syntax does for patterns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// Origin of the text: an embedded file (`@targeted`), or `directives_map[name]`.
    pub file: String,
    /// 1-based line; 0 when the error has no position (e.g. invalid JSON config).
    pub line: usize,
    /// 1-based column (in bytes).
    pub col: usize,
    pub msg: String,
    /// The source line, for the caret display.
    pub source_line: String,
}

impl Error {
    pub fn new(file: impl Into<String>, msg: impl Into<String>) -> Error {
        Error { file: file.into(), line: 0, col: 0, msg: msg.into(), source_line: String::new() }
    }

    pub fn at(file: &str, text: &str, offset: usize, msg: impl Into<String>) -> Error {
        let offset = offset.min(text.len());
        let before = text.get(..offset).unwrap_or("");
        let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
        let line_start = before.rfind('\n').map(|p| p + 1).unwrap_or(0);
        let line_end = text.get(offset..).and_then(|s| s.find('\n')).map(|p| p + offset).unwrap_or(text.len());
        let source_line = text.get(line_start..line_end).unwrap_or("").to_string();
        let col = text.get(line_start..offset).map(|s| s.chars().count()).unwrap_or(0) + 1;
        Error { file: file.to_string(), line, col, msg: msg.into(), source_line }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            return write!(f, "{}: {}", self.file, self.msg);
        }
        write!(f, "{}:{}:{}: {}", self.file, self.line, self.col, self.msg)?;
        if !self.source_line.is_empty() {
            // Show at most 200 chars around the column so long CRS lines stay readable.
            let chars: Vec<char> = self.source_line.chars().collect();
            let col0 = self.col.saturating_sub(1).min(chars.len());
            let start = col0.saturating_sub(100);
            let end = (col0 + 100).min(chars.len());
            let shown: String = chars.get(start..end).map(|c| c.iter().collect()).unwrap_or_default();
            let prefix = if start > 0 { "..." } else { "" };
            write!(f, "\n  {}{}\n  {}{}^", prefix, shown, " ".repeat(prefix.len()), " ".repeat(col0 - start))?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}
