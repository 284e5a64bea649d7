//! Records the git revision the module is built from, for wafer's build identity (the start-up
//! log line and the `wafer.build...` gauge, see `src/build_info.rs`).
//!
//! `WAFER_GIT_REVISION` in the environment wins (builds from a source tarball, reproducible
//! builds); else `git rev-parse --short=12 HEAD`; else `unknown` (no `.git`, no git).
//! It lives in the filter crate, not the engine, so a new commit recompiles the filter (a few
//! thousand lines) and relinks the modules without recompiling the engine.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=WAFER_GIT_REVISION");
    println!("cargo:rerun-if-changed=build.rs");
    let revision = std::env::var("WAFER_GIT_REVISION")
        .ok()
        .filter(|r| !r.trim().is_empty())
        .or_else(|| {
            // Rebuild when HEAD moves: HEAD itself (a branch switch, a detached checkout), its
            // reflog (every commit, also when the branch ref is packed, as after a clone), the
            // branch's ref file and packed-refs. Only files that exist: cargo reruns the
            // script on every build for a missing one.
            let mut watch = vec![
                git(&["rev-parse", "--git-path", "HEAD"]),
                git(&["rev-parse", "--git-path", "logs/HEAD"]),
            ];
            if let Some(branch) = git(&["rev-parse", "--symbolic-full-name", "HEAD"]) {
                watch.push(git(&["rev-parse", "--git-path", &branch]));
            }
            watch.push(git(&["rev-parse", "--git-path", "packed-refs"]));
            for path in watch.into_iter().flatten() {
                if Path::new(&path).exists() {
                    println!("cargo:rerun-if-changed={path}");
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"])
        })
        .unwrap_or_else(|| "unknown".to_string());
    // Only characters that survive a metric name segment and a label value unchanged.
    let revision: String = revision
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    println!("cargo:rustc-env=WAFER_GIT_REVISION={revision}");
}
