#!/usr/bin/env python3
"""Adds V8's compiled form of the module to it, for one Envoy build (opt-in start-up shortcut):

    python3 scripts/precompile.py --envoy ENVOY --wasm target/wafer.wasm --out target/wafer-precompiled.wasm

Envoy's V8 compiles every function of a module with TurboFan when it loads it (Liftoff is off
in proxy-wasm-cpp-host), which is most of wafer's start-up. proxy-wasm-cpp-host can instead
load the module's compiled code from a custom section named
`precompiled_wee8_v<V8 version>_linux_x86_64`, when the Wasm filter's `vm_config` says
`allow_precompiled: true` (off by default: the section is ignored then, and the module loads
as usual). The section holds what V8's `wasm::Module::serialize()` returns: the module's bytes
(length-prefixed), then V8's serialized native module (a header with a magic number, V8's
version hash, the CPU features and the V8 flags, then the machine code).

Only the V8 inside that Envoy build can write that: no other V8 reads it (the magic number
encodes the build's external-reference table, the header its version, flags and CPU
features). So this script lets that Envoy compile the module once and copies the result out:
it starts the Envoy given (`make bench`'s configuration, bench/conf/, with kernel-chosen ports and
an empty wafer configuration), waits until it is ready, stops it and reads its memory
(/proc/PID/mem, as its parent): proxy-wasm-cpp-host
keeps the module serialized for sharing between VMs (`Module::share()`), as a `wasm::vec`
(length, then pointer). The copy is found by its content (the module's bytes after their
length, followed by V8's magic number) and by that vector pointing at it, so nothing is
guessed: a copy that does not deserialize would make Envoy refuse the module.

The result runs only in the same Envoy build on a CPU with the same features: elsewhere V8
rejects the section and, with `allow_precompiled: true`, Envoy fails the module (fail-closed,
as for any bad module); without it the section is ignored. `tests/e2e/precompiled.rs` checks
both, and that a damaged section is refused (so the section is really what Envoy loads).
Linux x86-64 only.
"""
import argparse
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

# V8's wasm serialization header starts with this magic number's high half (its low half
# is the external-reference table's size in that build).
MAGIC_HIGH = 0xC0DE0000
READY_TIMEOUT = 60.0


def leb(n):
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def sections(module):
    """(id, name or None, start, end) of each section of a wasm module."""
    if module[:8] != b"\0asm\x01\0\0\0":
        raise ValueError("not a wasm module (version 1)")
    i, out = 8, []
    while i < len(module):
        sid = module[i]
        size, j = read_leb(module, i + 1)
        end = j + size
        if end > len(module):
            raise ValueError("truncated section")
        name = None
        if sid == 0:
            n, k = read_leb(module, j)
            name = module[k:k + n].decode("utf-8", "replace")
        out.append((sid, name, i, end))
        i = end
    return out


def read_leb(b, i):
    r = shift = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7F) << shift
        shift += 7
        if x < 0x80:
            return r, i


def v8_version(envoy_bin):
    """The V8 version compiled into Envoy's binary (its version string)."""
    with open(envoy_bin, "rb") as f:
        data = f.read()
    if b"precompiled_wee8_v" not in data:
        sys.exit(f"{envoy_bin}: no proxy-wasm V8 precompiled-section support found")
    # "<major>.<minor>.<build>.<patch>", NUL-terminated; found from its ".<build>.<patch>" end
    # (a pattern that starts with a literal is scanned quickly).
    found = set()
    for m in re.finditer(rb"\.\d{3}\.\d{1,3}\x00", data):
        head = re.search(rb"(?<![\d.])[1-9]\d?\.\d{1,2}$", data[max(0, m.start() - 6):m.start()])
        if head:
            found.add((head.group(0) + m.group(0)[:-1]).decode())
    if len(found) != 1:
        sys.exit(f"{envoy_bin}: cannot tell V8's version (candidates: {sorted(found) or 'none'}); pass --v8-version")
    return found.pop()


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bootstrap(wasm):
    """`make bench`'s Envoy configuration (bench/conf/envoy.yaml with wasm-filter.yaml: wafer with
    an empty configuration), every port chosen by the kernel; its upstream is never contacted."""
    def render(name, **kv):
        text = open(os.path.join(ROOT, "bench", "conf", name)).read()
        for k, v in kv.items():
            text = text.replace(f"@{k}@", str(v))
        left = re.findall(r"@[A-Z_]+@", text)
        if left:
            sys.exit(f"bench/conf/{name}: unfilled placeholders {left}")
        return text
    wasm_filter = render("wasm-filter.yaml", PLUGIN_CONFIG=json.dumps("{}"), WASM=json.dumps(wasm)).rstrip("\n")
    return render("envoy.yaml", PORT=0, ADMIN_PORT=0, UPSTREAM_PORT=9, WASM_FILTER=wasm_filter)


def rw_regions(pid):
    """The writable mappings of process `pid` that have resident pages (V8 reserves far more
    address space than it touches)."""
    region = None
    for line in open(f"/proc/{pid}/smaps"):
        fields = line.split()
        if fields and "-" in fields[0] and not fields[0].endswith(":"):
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            region = (lo, hi) if fields[1].startswith("rw") else None
        elif fields and fields[0] == "Rss:" and region and int(fields[1]) > 0:
            yield region
            region = None


def occurrences(data, needle):
    at = data.find(needle)
    while at >= 0:
        yield at
        at = data.find(needle, at + 1)


def find_serialized(pid, module):
    """V8's serialization of `module` in process `pid`: the bytes of the `wasm::vec` that
    holds it (found by content, sized by the vector's own length field)."""
    prefix = leb(len(module)) + module
    regions = {}
    with open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for lo, hi in rw_regions(pid):
            try:
                mem.seek(lo)
                regions[lo] = mem.read(hi - lo)
            except (OSError, OverflowError, ValueError):
                continue
    starts = []
    head = prefix[:4096]
    for lo, data in regions.items():
        for at in occurrences(data, head):
            tail = data[at + len(prefix):at + len(prefix) + 4]
            if data[at:at + len(prefix)] == prefix and len(tail) == 4 and struct.unpack("<I", tail)[0] & 0xFFFF0000 == MAGIC_HIGH:
                starts.append(lo + at)
    found = []
    for start in starts:
        key = struct.pack("<Q", start)
        for lo, data in regions.items():
            # By its six low bytes (a needle ending in the pointer's zero bytes is slow to find).
            for at in occurrences(data, key[:6]):
                if at % 8 or at < 8 or data[at:at + 8] != key:
                    continue
                size = struct.unpack("<Q", data[at - 8:at])[0]
                if len(prefix) + 24 < size < (256 << 20):
                    for blo, bdata in regions.items():
                        off = start - blo
                        if 0 <= off and off + size <= len(bdata):
                            found.append(bdata[off:off + size])
    distinct = {f for f in found}
    if len(distinct) != 1:
        raise RuntimeError(f"found {len(distinct)} distinct serialized copies of the module (want 1)")
    return distinct.pop()


def wait_ready(proc, admin_file, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"envoy exited ({proc.returncode}) before it was ready")
        try:
            with open(admin_file) as f:
                admin = f.read().strip()
            if admin and urllib.request.urlopen(f"http://{admin}/ready", timeout=2).read().strip() == b"LIVE":
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"envoy not ready after {timeout:.0f} s")


def envoy_pids(proc):
    """The process and its descendants (the envoy command may be a wrapper that starts the binary)."""
    pids, todo = [], [proc.pid]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                todo.extend(int(x) for x in f.read().split())
        except OSError:
            pass
    return pids


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envoy", required=True, help="the envoy command or binary that will run the module")
    ap.add_argument("--wasm", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--v8-version", help="V8's version in that Envoy (read from its binary when not given)")
    a = ap.parse_args()
    if not (sys.platform.startswith("linux") and os.uname().machine == "x86_64"):
        sys.exit("precompiled sections exist for Linux x86-64 only")
    module = open(a.wasm, "rb").read()
    try:
        if any(name and name.startswith("precompiled_") for _, name, _, _ in sections(module)):
            sys.exit(f"{a.wasm} already has a precompiled section")
    except (ValueError, IndexError) as e:
        sys.exit(f"{a.wasm}: {e}")
    envoy = shutil.which(a.envoy) or a.envoy
    with tempfile.TemporaryDirectory(prefix="wafer-precompile-") as d:
        conf, admin_file, log = os.path.join(d, "envoy.yaml"), os.path.join(d, "admin.addr"), os.path.join(d, "envoy.log")
        with open(conf, "w") as f:
            f.write(bootstrap(os.path.abspath(a.wasm)))
        with open(log, "wb") as logf:
            proc = subprocess.Popen([envoy, "-c", conf, "--concurrency", "1", "--disable-hot-restart", "-l", "warning",
                                     "--admin-address-path", admin_file], stdin=subprocess.DEVNULL, stdout=logf,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        try:
            t0 = time.monotonic()
            wait_ready(proc, admin_file, READY_TIMEOUT)
            ready = time.monotonic() - t0
            blob, binary, errors = None, None, []
            # Envoy is stopped while its memory is read (its threads would change mappings and
            # buffers between the reads of one scan); a failed scan is tried again (on a busy
            # machine V8 may still hold a second, older serialization for a while).
            for attempt in range(8):
                os.killpg(proc.pid, signal.SIGSTOP)
                try:
                    for pid in envoy_pids(proc):
                        try:
                            blob = find_serialized(pid, module)
                            binary = os.readlink(f"/proc/{pid}/exe")
                            break
                        except (RuntimeError, OSError) as e:
                            errors.append(f"attempt {attempt + 1}, pid {pid}: {e}")
                finally:
                    os.killpg(proc.pid, signal.SIGCONT)
                if blob is not None:
                    break
                time.sleep(1.0)
            if blob is None:
                raise RuntimeError("; ".join(errors))
        except RuntimeError as e:
            sys.exit(f"precompile: {e}\n{open(log, errors='replace').read()[-3000:]}")
        finally:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            proc.wait()
    version = a.v8_version or v8_version(binary)
    name = f"precompiled_wee8_v{version}_linux_x86_64".encode()
    payload = leb(len(name)) + name + blob
    out = module + b"\0" + leb(len(payload)) + payload
    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(out)
    os.replace(tmp, a.out)
    print(f"{a.out}: {len(out):,} bytes ({len(module):,} of module, {len(blob):,} in section {name.decode()}; "
          f"Envoy {binary} compiled it in {ready:.2f} s)")


if __name__ == "__main__":
    main()
