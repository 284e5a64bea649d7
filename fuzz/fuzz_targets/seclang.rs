//! SecLang text (lexer, parser, compiler) and the plugin configuration JSON: any input is
//! either a ruleset or an error with a position, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // Compiling the embedded CRS takes seconds per input: that path is the transaction
    // target's (it compiles the CRS once); here only small configurations.
    if text.to_ascii_lowercase().contains("crs") {
        return;
    }
    if text.starts_with('{') {
        let _ = wafer::Waf::from_json(data);
        return;
    }
    if let Ok(rs) = wafer::Ruleset::compile("fuzz.conf", text) {
        // Regexes are built on first use; build them all as `wafer check-rules` does
        // (for short inputs: the CRS's big regexes take long to build).
        if text.len() <= 512 {
            let _ = rs.build_all_regexes();
        }
    }
    // The rule-line pieces on their own (variables, operator, actions, macros).
    let _ = wafer::seclang::parser::parse_variables(text);
    let _ = wafer::seclang::parser::parse_operator(text);
    let _ = wafer::seclang::parser::parse_actions(text);
    let _ = wafer::seclang::parser::parse_macro(text);
});
