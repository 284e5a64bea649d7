// Runs a wasm32-wasip1 build of the wafer CLI under Node's WASI (V8, the engine Envoy uses),
// with / preopened: `node bench/wasi/run.mjs target/wasm32-wasip1/release/wafer.wasm time ...`.
import { readFile } from 'node:fs/promises';
import { WASI } from 'node:wasi';
import { argv, env, exit } from 'node:process';

const [wasmPath, ...args] = argv.slice(2);
const wasi = new WASI({ version: 'preview1', args: ['wafer', ...args], env, preopens: { '/': '/' }, returnOnExit: true });
const t0 = performance.now();
const module = await WebAssembly.compile(await readFile(wasmPath));
const t1 = performance.now();
const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
console.error(`compile ${(t1 - t0).toFixed(0)} ms`);
const c0 = process.cpuUsage();
const code = wasi.start(instance);
const c = process.cpuUsage(c0);
console.error(`cpu ${((c.user + c.system) / 1000).toFixed(1)} ms`);
exit(code);
