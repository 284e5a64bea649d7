// Runs an instrumented wasm32-wasip1 build of the wafer CLI (coldcalls instrument: every function
// calls env.hit(ordinal) on entry) under Node's WASI and writes how often each function ran:
// node cold-functions.mjs CLI.wasm COUNTS.txt wafer-arguments...
import { readFile, writeFile } from 'node:fs/promises';
import { WASI } from 'node:wasi';
import { argv, env, exit } from 'node:process';

const [wasmPath, countsPath, ...args] = argv.slice(2);
const wasi = new WASI({ version: 'preview1', args: ['wafer', ...args], env, preopens: { '/': '/' }, returnOnExit: true });
const module = await WebAssembly.compile(await readFile(wasmPath));
const counts = new Float64Array(1 << 16);
let top = 0;
const imports = wasi.getImportObject();
imports.env = { hit: (i) => { counts[i]++; if (i >= top) top = i + 1; } };
const code = wasi.start(await WebAssembly.instantiate(module, imports));
await writeFile(countsPath, Array.from(counts.slice(0, top)).join('\n') + '\n');
exit(code);
