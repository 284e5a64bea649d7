//! SecLang syntax: text -> directives with spans (no semantics here).
//!
//! Two layers: [`lexer`] splits a file into directives and their arguments
//! (comments, `\` line continuations, quoted arguments); [`parser`] splits the
//! arguments of `SecRule`/`SecAction` into variables, operator and actions.

pub mod lexer;
pub mod parser;

pub use lexer::{lex, Arg, RawDirective};
pub use parser::{parse_actions, parse_macro, parse_operator, parse_variables, ActionAst, MacroPart, OperatorAst, Selector, VarAst};
