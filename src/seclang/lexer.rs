//! Splits SecLang text into directives.
//!
//! Rules of the format (as ModSecurity's configuration reader):
//! - a line whose first non-blank character is `#` is a comment;
//! - a `\` right before the end of a line joins it with the next line;
//! - arguments are separated by blanks; a double-quoted argument may hold blanks,
//!   and `\"` inside it stands for `"` (every other backslash is kept, so regexes
//!   stay intact).

use crate::error::Error;

/// One argument of a directive, with the byte offset where it starts in the
/// source (inside the quotes for a quoted argument).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    pub text: String,
    pub offset: usize,
}

/// A directive as written: `name arg arg ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawDirective {
    pub name: String,
    pub offset: usize,
    pub args: Vec<Arg>,
}

/// A cursor over the source that skips `\`-newline continuations.
struct Cursor<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn skip_continuation(&mut self) {
        loop {
            let rest = self.src.get(self.pos..).unwrap_or("");
            if rest.starts_with("\\\n") {
                self.pos += 2;
            } else if rest.starts_with("\\\r\n") {
                self.pos += 3;
            } else {
                return;
            }
        }
    }

    fn peek(&mut self) -> Option<char> {
        // Most characters are ASCII and not a backslash: no continuation, no UTF-8 decoding.
        match *self.src.as_bytes().get(self.pos)? {
            b'\\' => self.skip_continuation(),
            b if b.is_ascii() => return Some(char::from(b)),
            _ => {}
        }
        self.src.get(self.pos..).and_then(|s| s.chars().next())
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }
}

/// Splits `src` (named `file` in errors) into directives.
pub fn lex(file: &str, src: &str) -> Result<Vec<RawDirective>, Error> {
    let mut out = Vec::new();
    let mut cur = Cursor { src, pos: 0 };
    loop {
        // Skip blank space and newlines between directives.
        while let Some(c) = cur.peek() {
            if c.is_whitespace() {
                cur.bump();
            } else {
                break;
            }
        }
        let Some(c) = cur.peek() else { break };
        if c == '#' {
            // Comment to end of line. (A continuation at the end of a comment line
            // does not extend the comment, as in ModSecurity's lexer.)
            cur.pos = src[cur.pos..].find('\n').map_or(src.len(), |i| cur.pos + i + 1);
            continue;
        }
        let start = cur.pos;
        let mut args: Vec<Arg> = Vec::new();
        // Read words until end of the logical line.
        loop {
            // Skip blanks: every whitespace but the newline (a word ends at any
            // whitespace, so a vertical tab or form feed must be skipped here too).
            while let Some(c) = cur.peek() {
                if c.is_whitespace() && c != '\n' {
                    cur.bump();
                } else {
                    break;
                }
            }
            match cur.peek() {
                None | Some('\n') => break,
                Some('"') => {
                    let qstart = cur.pos;
                    cur.bump();
                    let offset = cur.pos;
                    let mut text = String::new();
                    let mut closed = false;
                    while let Some(c) = cur.bump() {
                        match c {
                            '\\' => {
                                // `\"` -> `"`; any other escape kept verbatim.
                                if cur.peek() == Some('"') {
                                    cur.bump();
                                    text.push('"');
                                } else {
                                    text.push('\\');
                                }
                            }
                            '"' => {
                                closed = true;
                                break;
                            }
                            '\n' => break,
                            c => text.push(c),
                        }
                    }
                    if !closed {
                        return Err(Error::at(file, src, qstart, "unterminated quoted argument"));
                    }
                    args.push(Arg { text, offset });
                }
                Some(_) => {
                    let offset = cur.pos;
                    let mut text = String::new();
                    while let Some(c) = cur.peek() {
                        if c.is_whitespace() {
                            break;
                        }
                        cur.bump();
                        text.push(c);
                    }
                    args.push(Arg { text, offset });
                }
            }
        }
        if args.is_empty() {
            continue;
        }
        let name = args.remove(0);
        out.push(RawDirective { name: name.text, offset: start, args });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_continuations_and_quotes() {
        let src = "# comment\nSecRuleEngine On\nSecRule ARGS \"@rx a\\\"b\\d\" \\\n  \"id:1,\\\n  phase:2\"\n";
        let d = lex("t", src).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].name, "SecRuleEngine");
        assert_eq!(d[0].args[0].text, "On");
        assert_eq!(d[1].args.len(), 3);
        assert_eq!(d[1].args[1].text, "@rx a\"b\\d");
        assert_eq!(d[1].args[2].text, "id:1,  phase:2");
    }

    /// Found by fuzz/seclang: a vertical tab between words looped forever, pushing empty
    /// arguments.
    #[test]
    fn vertical_tab_and_form_feed_separate_words() {
        let d = lex("t", "SecRule ARGS\x0b\"@rx a\"\x0c\"id:1\"\u{2003}x\n").unwrap();
        assert_eq!(d.len(), 1);
        let args: Vec<&str> = d[0].args.iter().map(|a| a.text.as_str()).collect();
        assert_eq!(args, ["ARGS", "@rx a", "id:1", "x"]);
    }

    #[test]
    fn unterminated_quote_points_at_it() {
        let err = lex("rules/x.conf", "SecRuleEngine On\nSecRule ARGS \"@rx a").unwrap_err();
        assert_eq!((err.line, err.col), (2, 14));
        let shown = err.to_string();
        assert!(shown.starts_with("rules/x.conf:2:14: unterminated quoted argument"), "{shown}");
        assert!(shown.ends_with("\n  SecRule ARGS \"@rx a\n               ^"), "{shown}");
    }
}
