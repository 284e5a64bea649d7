//! `coldcalls rewrite IN.wasm OUT.wasm HOT.txt [SYMBOLS]`: the functions HOT.txt does not list (and
//! V8 would not inline into listed ones) call through the function table; names from IN's names
//! section or from SYMBOLS (`wasm-opt --symbolmap`); OUT has no names or custom sections.
//! `coldcalls instrument IN.wasm OUT.wasm NAMES.txt [SYMBOLS]`: every function reports its entry to
//! `env.hit(ordinal)` (for `make hot-functions`); NAMES.txt lists the functions by ordinal.
use std::process::ExitCode;
use wafer_coldcalls::{apply_symbol_map, instrument, plan, read, rewrite, write, HotList};

/// Below this share of the hot list's names in the module, the list is from other code: stop
/// rather than build a module whose request path V8 would compile without inlining.
const MIN_FOUND: f64 = 0.8;

fn run(args: &[String]) -> Result<(), String> {
    let rd = |p: &str| std::fs::read(p).map_err(|e| format!("{p}: {e}"));
    let wr = |p: &str, b: &[u8]| std::fs::write(p, b).map_err(|e| format!("{p}: {e}"));
    match args {
        [cmd, input, output, hot, symbols @ ..] if cmd == "rewrite" && symbols.len() <= 1 => {
            let mut m = read(&rd(input)?, false)?;
            if let Some(map) = symbols.first() {
                apply_symbol_map(&mut m, &String::from_utf8_lossy(&rd(map)?))?;
            }
            let list = HotList::parse(&String::from_utf8_lossy(&rd(hot)?));
            let p = plan(&m, &list);
            let (found, listed) = p.found;
            if listed == 0 || (found as f64) < MIN_FOUND * listed as f64 {
                return Err(format!(
                    "{hot}: only {found} of its {listed} functions are in {input}: the list is stale, regenerate it (make hot-functions)"
                ));
            }
            let r = rewrite(&mut m, &p.keep)?;
            wr(output, &write(&mut m)?)?;
            println!(
                "coldcalls: {} functions; {} keep direct calls ({} run by requests, {} inlined into those; {found} of {listed} listed found); \
                 {} call sites in the other {} now call_indirect ({} callees); V8 would have inlined {} times ({} KB) before",
                r.functions, p.keep.len(), p.hot, p.inlined, r.sites, r.cold, r.callees, p.before.0, p.before.1 / 1000
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
        _ => Err("usage: coldcalls rewrite IN.wasm OUT.wasm HOT.txt [SYMBOLS] | coldcalls instrument IN.wasm OUT.wasm NAMES.txt [SYMBOLS]".into()),
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
