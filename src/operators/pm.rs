//! `@pm` / `@pmFromFile`: case-insensitive multi-literal match (Aho-Corasick).
//!
//! Example: `SecRule REQUEST_HEADERS:User-Agent "@pm nikto sqlmap" "id:1,deny"`.

use std::sync::OnceLock;
use super::Captures;
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

#[derive(Debug)]
pub struct Pm {
    words: Vec<Vec<u8>>,
    /// Built on first use: with the prefilter most `@pm` rules never need their automaton.
    ac: OnceLock<Option<AhoCorasick>>,
}

/// The pattern lines of a `.data` file: trimmed, no blanks, no `#` comments.
pub fn data_file_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// Largest total size of a word list (bytes): far above the CRS's largest `.data` file.
const MAX_WORD_BYTES: usize = 16 << 20;

impl Pm {
    pub fn new(words: Vec<Vec<u8>>) -> Result<Pm, String> {
        let words: Vec<Vec<u8>> = words.into_iter().filter(|w| !w.is_empty()).collect();
        if words.iter().map(Vec::len).sum::<usize>() > MAX_WORD_BYTES {
            return Err(format!("@pm: word list over {MAX_WORD_BYTES} bytes"));
        }
        Ok(Pm { words, ac: OnceLock::new() })
    }

    /// The words (for the rule set's prefilter).
    pub fn words(&self) -> &[Vec<u8>] {
        &self.words
    }

    fn automaton(&self) -> Option<&AhoCorasick> {
        self.ac
            .get_or_init(|| {
                if self.words.is_empty() {
                    return None;
                }
                AhoCorasickBuilder::new().ascii_case_insensitive(true).match_kind(MatchKind::LeftmostFirst).build(&self.words).ok()
            })
            .as_ref()
    }

    pub fn eval(&self, value: &[u8], capture: bool, caps: &mut Captures) -> bool {
        let Some(ac) = self.automaton() else { return false };
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
