//! `@pm` / `@pmFromFile`: case-insensitive multi-literal match (Aho-Corasick).
//!
//! Example: `SecRule REQUEST_HEADERS:User-Agent "@pm nikto sqlmap" "id:1,deny"`.

use super::Captures;
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

#[derive(Debug)]
pub struct Pm {
    ac: Option<AhoCorasick>,
}

/// The pattern lines of a `.data` file: trimmed, no blanks, no `#` comments.
pub fn data_file_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'))
}

impl Pm {
    pub fn new(words: Vec<Vec<u8>>) -> Result<Pm, String> {
        let words: Vec<Vec<u8>> = words.into_iter().filter(|w| !w.is_empty()).collect();
        if words.is_empty() {
            return Ok(Pm { ac: None });
        }
        let ac = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostFirst)
            .build(&words)
            .map_err(|e| format!("cannot build @pm automaton: {e}"))?;
        Ok(Pm { ac: Some(ac) })
    }

    pub fn eval(&self, value: &[u8], capture: bool, caps: &mut Captures) -> bool {
        let Some(ac) = &self.ac else { return false };
        match ac.find(value) {
            Some(m) => {
                if capture {
                    caps.0 = vec![value.get(m.start()..m.end()).unwrap_or_default().to_vec()];
                }
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_insensitive_anywhere() {
        let p = Pm::new(vec![b"nikto".to_vec(), b"sqlmap".to_vec()]).unwrap();
        let mut c = Captures::default();
        assert!(p.eval(b"Mozilla SQLMap/1.0", true, &mut c));
        assert_eq!(c.0, vec![b"SQLMap".to_vec()]);
        assert!(!p.eval(b"curl/8", false, &mut c));
    }
}
