//! `coldcalls rewrite IN.wasm OUT.wasm COLD.txt FREQUENT.txt [SYMBOLS]`: the functions COLD.txt lists
//! (unless V8 would inline them into others) call through the function table, and the others call
//! directly only callees that are small or that FREQUENT.txt lists (and not large); names from
//! IN's names section or from SYMBOLS (`wasm-opt --symbolmap`); OUT has no names or custom sections.
//! `coldcalls instrument IN.wasm OUT.wasm NAMES.txt [SYMBOLS]`: every function reports its entry to
//! `env.hit(ordinal)` (for `make cold-functions`); NAMES.txt lists the functions by ordinal.
use std::process::ExitCode;
use wafer_coldcalls::{apply_symbol_map, instrument, plan, read, rewrite, write, NameList, FREQUENT_CALLEE, SMALL_CALLEE};

/// Below this share of the list's names in the module, the list is from other code (the CLI's
/// own functions are in it too): stop rather than guess.
const MIN_FOUND: f64 = 0.6;

fn run(args: &[String]) -> Result<(), String> {
    let rd = |p: &str| std::fs::read(p).map_err(|e| format!("{p}: {e}"));
    let wr = |p: &str, b: &[u8]| std::fs::write(p, b).map_err(|e| format!("{p}: {e}"));
    match args {
        [cmd, input, output, cold, frequent, symbols @ ..] if cmd == "rewrite" && symbols.len() <= 1 => {
            let mut m = read(&rd(input)?, false)?;
            if let Some(map) = symbols.first() {
                apply_symbol_map(&mut m, &String::from_utf8_lossy(&rd(map)?))?;
            }
            let list = NameList::parse(&String::from_utf8_lossy(&rd(cold)?));
            let frequent_list = NameList::parse(&String::from_utf8_lossy(&rd(frequent)?));
            let p = plan(&m, &list, &frequent_list);
            let (found, listed) = p.found;
            if listed == 0 || (found as f64) < MIN_FOUND * listed as f64 {
                return Err(format!(
                    "{cold}: only {found} of its {listed} functions are in {input}: the list is stale, regenerate it (make cold-functions)"
                ));
            }
            let r = rewrite(&mut m, &p)?;
            wr(output, &write(&mut m)?)?;
            println!(
                "coldcalls: {} functions; {} keep direct calls ({} not listed as cold, {} listed but inlined into those; {found} of {listed} listed found), \
                 to {} callees ({SMALL_CALLEE} bytes or less, or listed as frequent and {FREQUENT_CALLEE} or less; {} of {} frequent found); \
                 {} call sites now call_indirect ({} in the other {} functions, {} in those; {} callees); \
                 V8 would have inlined {} times ({} KB) before, {} times ({} KB) now",
                r.functions, p.keep.len(), p.hot, p.inlined, p.direct.len(), p.frequent_found.0, p.frequent_found.1,
                r.sites, r.sites - r.kept_sites, r.cold, r.kept_sites, r.callees, p.before.0, p.before.1 / 1000, p.after.0, p.after.1 / 1000
            );
            Ok(())
        }
        [cmd, input, output, names, symbols @ ..] if cmd == "instrument" && symbols.len() <= 1 => {
            let mut m = read(&rd(input)?, true)?;
            if let Some(map) = symbols.first() {
                apply_symbol_map(&mut m, &String::from_utf8_lossy(&rd(map)?))?;
            }
            let list = instrument(&mut m);
            wr(output, &write(&mut m)?)?;
            wr(names, (list.join("\n") + "\n").as_bytes())
        }
        _ => Err("usage: coldcalls rewrite IN.wasm OUT.wasm COLD.txt FREQUENT.txt [SYMBOLS] | coldcalls instrument IN.wasm OUT.wasm NAMES.txt [SYMBOLS]".into()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("coldcalls: {e}");
            ExitCode::FAILURE
        }
    }
}
