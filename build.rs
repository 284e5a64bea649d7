//! Embeds SecLang files at build time.
//!
//! - `rules/*.conf` of this repository become `@<name>` (e.g. `rules/targeted.conf`
//!   -> `@targeted`, `rules/recommended-conf.conf` -> `@recommended-conf`).
//! - When `CRS_DIR` names an OWASP CRS checkout, its `crs-setup.conf.example`
//!   becomes `@crs-setup-conf`, each `rules/*.conf` becomes `@owasp_crs/<file>`,
//!   and each `rules/*.data` a data file for `@pmFromFile` by its file name.
//!   CRS files are read from there, never copied into the repository.
//! - With the CRS, the CRS 4 plugins of `CRS_PLUGINS_DIR` (default: `crs-plugins` beside the
//!   CRS checkout): each `<folder>/plugins/<name>-{config,before,after}.conf` becomes
//!   `@crs-plugins/<file>` and each `<folder>/plugins/*.data` a data file. No folder, no
//!   plugins (the build goes on).

use std::collections::BTreeMap;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};

// The engine's own lexer, operator parser and `@rx` analysis (pure files), to analyze the
// embedded files' patterns as a VM would.
#[allow(dead_code)]
#[path = "src/operators/rx_literals.rs"]
mod literals;
#[allow(dead_code)]
#[path = "src/seclang/lexer.rs"]
mod lexer;
#[allow(dead_code)]
#[path = "src/seclang/parser.rs"]
mod parser;
/// What the lexer's errors need (the build skips files it cannot lex: a VM reports them).
mod error {
    pub struct Error;
    impl Error {
        pub fn at(_file: &str, _src: &str, _offset: usize, _msg: &str) -> Error {
            Error
        }
    }
}

fn sorted_files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|e| e == ext)).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Stores `path` deflated in `out` (as `embedded/<n>.z`, `n` counting the files stored) and
/// returns the generated entry: `("name", include_bytes!(..), text length)`. The module carries
/// the CRS text deflated (~5x smaller): each VM's memory holds the data segment, and Envoy
/// and V8 keep copies of the module (docs/performance.md: ~10 MiB of RSS per MB).
fn packed(out: &Path, n: &mut usize, name: &str, path: &Path) -> String {
    let text = fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    assert!(std::str::from_utf8(&text).is_ok(), "{} is not UTF-8", path.display());
    let dir = out.join("embedded");
    fs::create_dir_all(&dir).expect("create OUT_DIR/embedded");
    let z = dir.join(format!("{n}.z"));
    *n += 1;
    fs::write(&z, miniz_oxide::deflate::compress_to_vec(&text, 10)).expect("write a packed file");
    format!("    ({name:?}, include_bytes!({:?}), {}),\n", z.display().to_string(), text.len())
}

/// The `@rx` patterns of `SecRule`s in `files`, each with its analysis (see
/// `src/operators/rx_literals.rs`), as the entries of `RX_ANALYSES`: sorted by the pattern's key,
/// `(hash, hash, length, flags (1: Unicode mode, 2: matches every whole value), literals)`.
/// A VM that meets one of these patterns takes its analysis instead of parsing it; patterns
/// that do not parse are left out (a VM reports their error).
fn rx_analyses(files: &[PathBuf]) -> String {
    let mut entries = BTreeMap::new();
    for path in files {
        let text = fs::read_to_string(path).unwrap_or_default();
        let Ok(directives) = lexer::lex("", &text) else { continue };
        for d in directives.iter().filter(|d| d.name.eq_ignore_ascii_case("SecRule")) {
            let Some(op) = d.args.get(1) else { continue };
            let o = parser::parse_operator(&op.text);
            if !o.name.eq_ignore_ascii_case("rx") {
                continue;
            }
            let key = literals::pattern_key(&o.param);
            if entries.contains_key(&key) {
                continue;
            }
            if let Ok(a) = literals::analyze_pattern(&o.param) {
                let flags = u8::from(a.unicode) | (u8::from(a.whole) << 1);
                let lits = match a.literals {
                    None => "None".to_string(),
                    Some(l) => format!("Some(&[{}])", l.iter().map(|x| format!("b\"{}\"", x.escape_ascii())).collect::<Vec<_>>().join(", ")),
                };
                entries.insert(key, format!("    ({:#x}, {:#x}, {}, {flags}, {lits}),\n", key.0, key.1, key.2));
            }
        }
    }
    entries.into_values().collect()
}

/// The plugin folder: `CRS_PLUGINS_DIR`, else `crs-plugins` beside the CRS checkout `crs_dir`.
fn plugins_dir(crs_dir: &Path) -> Option<PathBuf> {
    if let Some(d) = env::var_os("CRS_PLUGINS_DIR") {
        return Some(PathBuf::from(d));
    }
    let crs = crs_dir.canonicalize().ok()?;
    Some(crs.parent()?.join("crs-plugins"))
}

/// The plugin name of one of its files: `wordpress-rule-exclusions-before.conf` ->
/// `wordpress-rule-exclusions` (CRS 4: `<name>-config.conf`, `-before.conf`, `-after.conf`).
fn plugin_name(file: &str) -> Option<&str> {
    ["-config.conf", "-before.conf", "-after.conf"].iter().find_map(|s| file.strip_suffix(s))
}

/// Embeds the CRS plugins of [`plugins_dir`]: the `plugins/` files of each folder, in folder
/// order. The CRS's own `plugins/empty-*.conf` placeholders are not plugins.
#[allow(clippy::too_many_arguments)]
fn plugins(out: &Path, n: &mut usize, crs_dir: &Path, conf: &mut String, data: &mut String, rule_files: &mut Vec<PathBuf>, names: &mut Vec<String>) {
    println!("cargo:rerun-if-env-changed=CRS_PLUGINS_DIR");
    let Some(dir) = plugins_dir(crs_dir) else { return };
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut folders: Vec<PathBuf> = fs::read_dir(&dir).map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect()).unwrap_or_default();
    folders.sort();
    for folder in folders {
        let files = folder.join("plugins");
        println!("cargo:rerun-if-changed={}", files.display());
        for p in sorted_files(&files, "conf") {
            let file = p.file_name().and_then(|s| s.to_str()).expect("utf-8 file name");
            let Some(name) = plugin_name(file).filter(|n| !n.is_empty() && *n != "empty") else { continue };
            assert!(!conf.contains(&format!("\"@crs-plugins/{file}\"")), "{}: a second plugin file named {file}", p.display());
            if !names.iter().any(|x| x == name) {
                names.push(name.to_string());
            }
            rule_files.push(p.clone());
            conf.push_str(&packed(out, n, &format!("@crs-plugins/{file}"), &p));
        }
        for p in sorted_files(&files, "data") {
            let name = p.file_name().and_then(|s| s.to_str()).expect("utf-8 file name");
            data.push_str(&packed(out, n, name, &p));
        }
    }
    names.sort();
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut packed_n = 0;
    println!("cargo:rerun-if-env-changed=CRS_DIR");
    println!("cargo:rerun-if-changed=rules");
    for f in ["src/operators/rx_literals.rs", "src/seclang/lexer.rs", "src/seclang/parser.rs"] {
        println!("cargo:rerun-if-changed={f}");
    }

    let mut conf = String::new(); // (name, text) entries
    let mut data = String::new();
    let mut rule_files = Vec::new();
    for p in sorted_files(&manifest.join("rules"), "conf") {
        rule_files.push(p.clone());
        println!("cargo:rerun-if-changed={}", p.display());
        let stem = p.file_stem().and_then(|s| s.to_str()).expect("utf-8 file name");
        conf.push_str(&packed(&out, &mut packed_n, &format!("@{stem}"), &p));
    }

    let mut crs_version = String::new();
    let mut plugin_names: Vec<String> = Vec::new();
    println!("cargo::rustc-check-cfg=cfg(wafer_crs)");
    // CRS_DIR, else `make crs`'s ./crs, else a CRS checkout beside the repository.
    let crs_dir = env::var("CRS_DIR").ok().map(PathBuf::from).or_else(|| {
        [manifest.join("crs"), manifest.join("../shared/coreruleset")].into_iter().find(|d| d.join("crs-setup.conf.example").is_file())
    });
    if let Some(dir) = crs_dir {
        let setup = dir.join("crs-setup.conf.example");
        if setup.is_file() {
            println!("cargo:rerun-if-changed={}", dir.display());
            conf.push_str(&packed(&out, &mut packed_n, "@crs-setup-conf", &setup));
            rule_files.push(setup.clone());
            for p in sorted_files(&dir.join("rules"), "conf") {
                rule_files.push(p.clone());
                let name = p.file_name().and_then(|s| s.to_str()).expect("utf-8 file name");
                conf.push_str(&packed(&out, &mut packed_n, &format!("@owasp_crs/{name}"), &p));
            }
            for p in sorted_files(&dir.join("rules"), "data") {
                let name = p.file_name().and_then(|s| s.to_str()).expect("utf-8 file name");
                data.push_str(&packed(&out, &mut packed_n, name, &p));
            }
            plugins(&out, &mut packed_n, &dir, &mut conf, &mut data, &mut rule_files, &mut plugin_names);
            // VERSION holds "tag: v4.28.0" (a release tarball) or just "4.28.0".
            println!("cargo:rustc-cfg=wafer_crs");
            crs_version = fs::read_to_string(dir.join("VERSION"))
                .ok()
                .and_then(|v| v.lines().next().map(|l| l.trim().trim_start_matches("tag:").trim().trim_start_matches('v').to_string()))
                .unwrap_or_else(|| "unknown".into());
        } else {
            println!("cargo:warning=CRS_DIR={} has no crs-setup.conf.example; building without the OWASP CRS", dir.display());
        }
    }

    let src = format!(
        "/// Embedded SecLang files: (include name, deflated text, text length).\npub static CONF_FILES: &[(&str, &[u8], usize)] = &[\n{conf}];\n\
         /// Embedded data files for @pmFromFile: (file name, deflated text, text length).\npub static DATA_FILES: &[(&str, &[u8], usize)] = &[\n{data}];\n\
         /// Version of the embedded OWASP CRS, empty when built without it.\npub static CRS_VERSION: &str = {crs_version:?};\n\
         /// Names of the embedded CRS plugins (`wordpress-rule-exclusions`, ...), sorted.\npub static CRS_PLUGINS: &[&str] = &{plugin_names:?};\n\
         /// The embedded files' `@rx` patterns, analyzed (see `rx_analysis`).\n\
         #[allow(clippy::type_complexity)]\n\
         static RX_ANALYSES: &[(u64, u64, u32, u8, Option<&[&[u8]]>)] = &[\n{rx}];\n",
        rx = rx_analyses(&rule_files)
    );
    fs::write(out.join("embedded.rs"), src).expect("write embedded.rs");
}
