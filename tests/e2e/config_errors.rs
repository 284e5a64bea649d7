//! A bad plugin configuration must stop Envoy from taking the configuration, with wafer's
//! message (file:line:col and a caret) in Envoy's log.

use wafer_tests::envoy::{bootstrap, Build, Envoy, Setup, Start};
use wafer_tests::upstream::Upstream;

per_build!(
    invalid_json_config_is_refused_with_position,
    unknown_directive_is_refused_with_position_and_caret,
);

/// Starts Envoy with `plugin_config` and returns its log; fails if Envoy comes up.
fn refused_log(build: Build, label: &str, plugin_config: &str) -> String {
    let setup = Setup::from_env();
    let upstream = Upstream::start().expect("start the upstream");
    let yaml = bootstrap(setup.module(build), plugin_config, upstream.addr());
    match Envoy::start(&setup, label, &yaml).expect("spawn envoy") {
        Start::Exited { code, log } => {
            assert_ne!(
                code,
                Some(0),
                "envoy exited 0 on a bad configuration:\n{log}"
            );
            log
        }
        Start::Live(envoy) => panic!(
            "envoy came up with a bad plugin configuration:\n{}",
            envoy.log()
        ),
        Start::TimedOut { log } => {
            panic!("envoy neither refused nor took the configuration:\n{log}")
        }
    }
}

/// Whether `text` has a `:<line>:<col>:` position (SecLang errors) or serde_json's
/// `line <n> column <m>` (errors in the JSON document itself), with nonzero numbers.
fn has_position(text: &str) -> bool {
    has_colon_position(text) || has_json_position(text)
}

fn has_json_position(text: &str) -> bool {
    text.match_indices(" line ").any(|(i, _)| {
        let rest = &text[i + 6..];
        let line: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let Some(rest) = rest[line.len()..].strip_prefix(" column ") else {
            return false;
        };
        let col: String = rest.chars().take_while(char::is_ascii_digit).collect();
        line.parse::<u32>().is_ok_and(|n| n > 0) && col.parse::<u32>().is_ok_and(|n| n > 0)
    })
}

fn has_colon_position(text: &str) -> bool {
    text.match_indices(':').any(|(i, _)| {
        let rest = &text[i + 1..];
        let line: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let Some(rest) = rest[line.len()..].strip_prefix(':') else {
            return false;
        };
        let col: String = rest.chars().take_while(char::is_ascii_digit).collect();
        rest[col.len()..].starts_with(':')
            && line.parse::<u32>().is_ok_and(|n| n > 0)
            && col.parse::<u32>().is_ok_and(|n| n > 0)
    })
}

#[test]
fn position_detection() {
    assert!(has_position(
        "directives_map[default]:1:5: unknown directive"
    ));
    assert!(!has_position("plugin config: 0:0: x"));
    assert!(!has_position("no position here"));
    assert!(has_position(
        "invalid JSON: key must be a string at line 1 column 55"
    ));
    assert!(!has_position("at line 0 column 0"));
}

fn invalid_json_config_is_refused_with_position(build: Build) {
    let log = refused_log(
        build,
        "bad-json",
        r#"{"directives_map": {"default": ["Include @targeted"]},, }"#,
    );
    assert!(
        log.contains("wafer: invalid plugin configuration"),
        "no wafer message in:\n{log}"
    );
    let line = log
        .lines()
        .find(|l| l.contains("wafer: invalid plugin configuration"))
        .unwrap_or_default();
    assert!(has_position(line), "no line:col in {line:?}");
}

fn unknown_directive_is_refused_with_position_and_caret(build: Build) {
    let config = r#"{"directives_map":{"default":["Include @targeted","SecBogusDirective On"]},"default_directives":"default"}"#;
    let log = refused_log(build, "bad-directive", config);
    assert!(
        log.contains("wafer: invalid plugin configuration"),
        "no wafer message in:\n{log}"
    );
    assert!(
        log.contains("SecBogusDirective"),
        "the message does not name the directive:\n{log}"
    );
    let line = log
        .lines()
        .find(|l| l.contains("wafer: invalid plugin configuration"))
        .unwrap_or_default();
    assert!(has_position(line), "no line:col in {line:?}");
    assert!(
        log.lines().any(|l| l.trim() == "^"),
        "no caret line in:\n{log}"
    );
}
