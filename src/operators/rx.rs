//! `@rx`: a linear-time regular expression on bytes.
//!
//! ModSecurity compiles with PCRE `DOTALL|MULTILINE` and without UTF mode, so
//! we build a byte regex with Unicode off (ASCII `\w`, `\s`; `.` any byte),
//! dot-matches-newline and multi-line anchors. `\x{hh}` escapes below 0x100
//! are rewritten to `\xhh` (byte escapes); patterns that need Unicode mode to
//! compile at all fall back to it.
//!
//! Example: `SecRule ARGS "@rx (?i)union\s+select" "id:1,deny"`.

use super::Captures;
use super::rx_literals as literals;
use regex::bytes::{Regex, RegexBuilder};
use std::sync::OnceLock;

/// The regex is built on first use: patterns are checked when rules load (a
/// syntax error fails the configuration), but automata are only built for the
/// regexes that actually run. With prefilters most CRS regexes never run on
/// benign traffic, so start-up is faster and each VM holds less memory.
#[derive(Debug)]
pub struct Rx {
    pattern: String,
    unicode: bool,
    /// The pattern matches every value, the whole of it (`^.*$`, `.*`: with `.` matching
    /// newlines): no search needed, TX:0 is the value.
    whole: bool,
    re: OnceLock<Option<Regex>>,
}

fn build(pattern: &str, unicode: bool) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .unicode(unicode)
        .dot_matches_new_line(true)
        .multi_line(true)
        .size_limit(64 << 20)
        // The lazy DFA's transition cache, per regex and per thread. The CRS has ~320
        // regexes: 2 MiB each (the default) let Envoy grow by hundreds of MiB under load.
        // When the cache fills it is cleared and refilled, so a small one costs little on
        // the short values a WAF inspects.
        .dfa_size_limit(256 << 10)
        .build()
}

impl Rx {
    pub fn new(pattern: &str) -> Result<Rx, String> {
        Rx::analyzed(pattern).map(|(rx, _)| rx)
    }

    /// Checks the pattern; also returns its required literals (for the prefilter; None: no
    /// requirement). The patterns of the embedded rule files were analyzed at build time
    /// (`crate::embedded::rx_analysis`): a VM parses only the others.
    pub fn analyzed(pattern: &str) -> Result<(Rx, Option<literals::Literals>), String> {
        let a = match crate::embedded::rx_analysis(pattern) {
            Some(a) => a,
            None => literals::analyze_pattern(pattern)?,
        };
        let pattern = if pattern.is_empty() { ".*" } else { pattern };
        let pattern = if a.unicode { pattern.to_string() } else { literals::byte_escapes(pattern) };
        Ok((Rx { pattern, unicode: a.unicode, whole: a.whole, re: OnceLock::new() }, a.literals))
    }

    /// The compiled regex (built now if it was not yet); None if it cannot be
    /// built (over the size limits), in which case the operator never matches.
    pub fn regex(&self) -> Option<&Regex> {
        self.re.get_or_init(|| build(&self.pattern, self.unicode).ok()).as_ref()
    }

    /// Whether a match's validity can depend on the bytes before it (`^`, `\A`, word
    /// boundaries): searching a slice of a value then differs from searching the value from
    /// an offset. True when the pattern cannot be analyzed (the safe answer).
    pub(crate) fn looks_behind(&self) -> bool {
        use regex_syntax::hir::{Look, LookSet};
        let ends = LookSet::empty().insert(Look::End).insert(Look::EndLF).insert(Look::EndCRLF);
        literals::syntax(&self.pattern, self.unicode).map_or(true, |h| !h.properties().look_set().subtract(ends).is_empty())
    }

    /// The same pattern, matching only at the start of the haystack (`\A(?:...)`).
    pub(crate) fn anchored(&self) -> Rx {
        Rx { pattern: format!("\\A(?:{})", self.pattern), unicode: self.unicode, whole: false, re: OnceLock::new() }
    }

    /// Builds the automaton now; Err when it cannot be built (`wafer check`).
    pub fn build_now(&self) -> Result<(), String> {
        match self.regex() {
            Some(_) => Ok(()),
            None => build(&self.pattern, self.unicode).map(|_| ()).map_err(|e| format!("regular expression too large: {e}")),
        }
    }

    pub fn eval(&self, value: &[u8], capture: bool, caps: &mut Captures) -> bool {
        if self.whole {
            if capture {
                caps.0.clear();
                caps.0.push(value.to_vec());
            }
            return true;
        }
        let Some(re) = self.regex() else { return false };
        // Most values do not match: the plain search decides that without the capture
        // slots `captures` allocates on every call.
        if !capture {
            return re.is_match(value);
        }
        if re.captures_len() == 1 {
            // No group of its own: TX:0 is the match, which the plain search gives.
            let Some(m) = re.find(value) else { return false };
            caps.0.clear();
            caps.0.push(m.as_bytes().to_vec());
            return true;
        }
        if !re.is_match(value) {
            return false;
        }
        match re.captures(value) {
            Some(c) => {
                caps.0 = c.iter().take(10).map(|m| m.map(|m| m.as_bytes().to_vec()).unwrap_or_default()).collect();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Patterns that match every whole value skip the search and agree with it.
    #[test]
    fn whole_value_patterns_agree_with_the_search() {
        let values: [&[u8]; 5] = [b"", b"accept-language", b"a\nb\r\n", b"\xff\x00z", b"\n"];
        for (pattern, whole) in [("^.*$", true), (".*", true), ("^.*", true), (".*$", true), ("", true), ("^.+$", false), ("^.*?$", false), ("^[^\n]*$", false), ("^.*$x", false), ("(?-s)^.*$", false)] {
            let rx = Rx::new(pattern).unwrap();
            assert_eq!(rx.whole, whole, "{pattern}");
            let searched = Rx { whole: false, ..Rx::new(pattern).unwrap() };
            for v in values {
                let (mut a, mut b) = (Captures::default(), Captures::default());
                assert_eq!(rx.eval(v, true, &mut a), searched.eval(v, true, &mut b), "{pattern} {v:?}");
                assert_eq!(a.0, b.0, "{pattern} {v:?}");
                assert_eq!(rx.eval(v, false, &mut a), searched.eval(v, false, &mut b), "{pattern} {v:?}");
            }
        }
    }

    #[test]
    fn pcre_like_flags() {
        let r = Rx::new("a.b").unwrap();
        assert!(r.eval(b"a\nb", false, &mut Captures::default()));
        let r = Rx::new("^b$").unwrap();
        assert!(r.eval(b"a\nb\nc", false, &mut Captures::default()));
        let r = Rx::new("\\w+").unwrap();
        let mut c = Captures::default();
        assert!(r.eval("é".as_bytes(), false, &mut c) == false);
    }

    #[test]
    fn byte_escapes_and_captures() {
        let r = Rx::new("[\\x{80}-\\x{ff}]").unwrap();
        assert!(r.eval(&[0x41, 0xfe], false, &mut Captures::default()));
        let r = Rx::new("(a)(b)?c").unwrap();
        let mut c = Captures::default();
        assert!(r.eval(b"xacx", true, &mut c));
        assert_eq!(c.0, vec![b"ac".to_vec(), b"a".to_vec(), Vec::new()]);
    }

    #[test]
    fn capture_without_groups_is_the_leftmost_first_match() {
        // No group of its own: TX:0 comes from the plain search, as from the capture engine.
        let mut c = Captures(vec![b"stale".to_vec(), b"old".to_vec()]);
        assert!(Rx::new("b+").unwrap().eval(b"abbbcb", true, &mut c));
        assert_eq!(c.0, vec![b"bbb".to_vec()]);
        assert!(Rx::new("a|ab").unwrap().eval(b"xab", true, &mut c));
        assert_eq!(c.0, vec![b"a".to_vec()]);
        assert!(Rx::new("^.*$").unwrap().eval(b"accept-language", true, &mut c));
        assert_eq!(c.0, vec![b"accept-language".to_vec()]);
        assert!(!Rx::new("z").unwrap().eval(b"abc", true, &mut c));
    }

    #[test]
    fn bad_pattern_is_reported() {
        assert!(Rx::new("(unclosed").unwrap_err().contains("invalid regular expression"));
    }
}
