;; The floor of any proxy-wasm filter, for `make bench` (bench/run.py assembles it with wasm-opt):
;; no rules, no state, nothing but the ABI. With an empty plugin configuration it makes no host
;; call at all (the issue's "empty proxy-wasm filter", the ceiling of a WAF's throughput); with a
;; non-empty one it reads the request headers once per request (proxy_get_header_map_pairs, which
;; calls back into proxy_on_memory_allocate), which any WAF has to do.
(module
  (import "env" "proxy_get_header_map_pairs" (func $pairs (param i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 1024))
  (global $read (mut i32) (i32.const 0))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_memory_allocate") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (local.get $p) (i32.and (i32.add (local.get $n) (i32.const 7)) (i32.const -8))))
    (if (i32.gt_u (global.get $heap) (i32.const 131072))
      (then (global.set $heap (i32.add (i32.const 1024) (local.get $n))) (local.set $p (i32.const 1024))))
    (local.get $p))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_vm_start") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_configure") (param i32) (param $size i32) (result i32)
    (global.set $read (i32.ne (local.get $size) (i32.const 0)))
    (i32.const 1))
  (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
    (if (global.get $read)
      (then
        (global.set $heap (i32.const 1024))
        (drop (call $pairs (i32.const 0) (i32.const 16) (i32.const 20)))))
    (i32.const 0))
)
