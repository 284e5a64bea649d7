// Drives the module's proxy-wasm callbacks in Node's V8 without Envoy, to profile its own code:
//   node --no-liftoff --perf-basic-prof bench/wasi/requests.mjs WASM CONFIG.json N
// N browser-like GETs (PEERS_DIR's headers, a new x-request-id each, a 200 text/html response
// with a 180-byte body; with VARY=1 in the environment, new query and cookie values in each,
// as make bench's GET, new values; with BODY=FILE, a JSON POST of that body to /api/v1/orders instead,
// its body in one callback at end of stream), each through context create, request headers, response headers and
// body, log, done, delete, as Envoy calls them; host calls answered by stubs. Prints the time
// per request and the host calls made per request. Under `perf record`, bench/wasi/perf_report.py
// names the wasm functions (use the module before coldcalls,
// target/wasm32-wasip1/release/wafer_envoy.opt.wasm, with its .symbols).
import fs from 'fs';
import path from 'path';
const VARY = process.env.VARY === '1'; // new query and cookie values in every request
const BODY = process.env.BODY ? fs.readFileSync(process.env.BODY) : null; // a JSON POST with this body instead of the GET
const [wasmPath, cfgPath, nStr] = process.argv.slice(2);
const N = +nStr;
const cfg = fs.readFileSync(cfgPath);
let inst, mem;
const dv = () => new DataView(mem.buffer);
const u32 = (p, v) => dv().setUint32(p, v, true);
const give = (bytes, pp, ps) => { const n = bytes.length; const p = inst.exports.proxy_on_memory_allocate(n); new Uint8Array(mem.buffer, p, n).set(bytes); u32(pp, p); u32(ps, n); return 0; };
function pairs(list) {
  const parts = []; let size = 4 + list.length * 8;
  for (const [k, v] of list) size += k.length + v.length + 2;
  const b = Buffer.alloc(size); b.writeUInt32LE(list.length, 0); let o = 4;
  for (const [k, v] of list) { b.writeUInt32LE(k.length, o); b.writeUInt32LE(v.length, o + 4); o += 8; }
  for (const [k, v] of list) { o += b.write(k, o); b[o++] = 0; o += b.write(v, o); b[o++] = 0; }
  return b;
}
const hdrs = fs.readFileSync(path.join(process.env.PEERS_DIR || path.join(path.dirname(new URL(import.meta.url).pathname), '..', '..', '..', 'shared', 'peers'), 'headers.txt'), 'utf8').trim().split('\n').map(l => { const i = l.indexOf(':'); return [l.slice(0, i).toLowerCase(), l.slice(i + 1).trim()]; });
let rid = 0;
const reqPairs = () => { const t = VARY ? String(rid) : ''; return pairs([[':authority', 'shop.example.com'], ...(BODY ? [[':path', '/api/v1/orders'], [':method', 'POST'], ['content-type', 'application/json'], ['content-length', String(BODY.length)]] : [[':path', '/search?q=shoes' + t + '&page=2' + t + '&sort=price' + t], [':method', 'GET']]), [':scheme', 'http'], ...hdrs.filter(([k]) => k !== 'host'), ['x-forwarded-proto', 'http'], ['x-request-id', 'a1b2c3d4-0000-4000-8000-' + String(rid++).padStart(12, '0')]].map(([k, v]) => (VARY && k === 'cookie') ? [k, v.replace(/=([^;]*)/g, (m, g) => '=' + g + t)] : [k, v])); };
const respPairs = pairs([[':status', '200'], ['content-type', 'text/html'], ['content-length', '180'], ['date', 'Wed, 02 Dec 2026 16:00:00 GMT'], ['server', 'envoy'], ['x-envoy-upstream-service-time', '0']]);
let current = null;
let counting = false;
const counts = {};
const env = new Proxy({}, { get: (_, name) => { const f = envImpl(name); return (...a) => { if (counting) counts[name] = (counts[name] || 0) + 1; return f(...a); }; } });
function envImpl(name) {
  if (name === 'proxy_get_buffer_bytes') return (t, s, m, pp, ps) => t === 7 ? give(cfg, pp, ps) : t === 0 && BODY ? give(BODY.subarray(s, s + m), pp, ps) : give(new Uint8Array(0), pp, ps);
  if (name === 'proxy_get_header_map_pairs') return (t, pp, ps) => give(t === 0 ? current : respPairs, pp, ps);
  if (name === 'proxy_log') return (l, p, n) => { if (l >= 3) console.error('log', l, Buffer.from(mem.buffer, p, n).toString()); return 0; };
  if (name === 'proxy_get_property') return (p, n, pp, ps) => { const path = Buffer.from(mem.buffer, p, n).toString(); if (path.startsWith('source')) return give(Buffer.from('127.0.0.1:40000'), pp, ps); if (path.startsWith('destination')) return give(Buffer.from('127.0.0.1:8080'), pp, ps); if (path.startsWith('request\0protocol')) return give(Buffer.from('HTTP/1.1'), pp, ps); return 1; };
  if (name === 'proxy_get_current_time_nanoseconds') return (p) => { dv().setBigUint64(p, BigInt(Date.now()) * 1000000n, true); return 0; };
  if (name === 'proxy_define_metric') return (t, p, n, pid) => { u32(pid, 1); return 0; };
  if (name === 'proxy_send_local_response') return () => { console.error('local response'); return 0; };
  return () => 0;
}
const wasi = new Proxy({}, { get: (_, name) => {
  if (name === 'random_get') return (p, n) => { crypto.getRandomValues(new Uint8Array(mem.buffer, p, n)); return 0; };
  if (name === 'clock_time_get') return (id, prec, p) => { dv().setBigUint64(p, BigInt(Date.now()) * 1000000n, true); return 0; };
  if (name === 'environ_sizes_get') return (a, b) => { u32(a, 0); u32(b, 0); return 0; };
  if (name === 'fd_write') return (fd, iov, n, pw) => { u32(pw, 0); return 0; };
  if (name === 'proc_exit') return (c) => { throw new Error('exit ' + c); };
  return () => 0;
}});
const mod = new WebAssembly.Module(fs.readFileSync(wasmPath));
inst = new WebAssembly.Instance(mod, { env, wasi_snapshot_preview1: wasi });
mem = inst.exports.memory;
const x = inst.exports;
x._initialize?.();
x.proxy_on_context_create(1, 0);
x.proxy_on_vm_start(1, 0);
if (!x.proxy_on_configure(1, cfg.length)) throw new Error('configure failed');
const prebuilt = []; for (let i = 0; i < (VARY ? N : Math.min(N, 1000)); i++) prebuilt.push(reqPairs()); // VARY: no value comes twice
counting = true;
const t0 = process.hrtime.bigint();
for (let i = 0; i < N; i++) {
  const ctx = 2 + i;
  current = prebuilt[i % prebuilt.length];
  x.proxy_on_context_create(ctx, 1);
  let a = x.proxy_on_request_headers(ctx, 14, BODY ? 0 : 1);
  if (BODY) a |= x.proxy_on_request_body(ctx, BODY.length, 1);
  const b = x.proxy_on_response_headers(ctx, 6, 0);
  const c = x.proxy_on_response_body(ctx, 180, 1);
  if (a | b | c) throw new Error(`paused ${a} ${b} ${c} at ${i}`);
  x.proxy_on_log?.(ctx); x.proxy_on_done?.(ctx); x.proxy_on_delete(ctx);
}
const dt = Number(process.hrtime.bigint() - t0) / 1e3;
console.error(`${N} requests, ${(dt / Math.max(N, 1)).toFixed(2)} us each; host calls per request: ${JSON.stringify(Object.fromEntries(Object.entries(counts).map(([k, v]) => [k, v / Math.max(N, 1)])))}`);
