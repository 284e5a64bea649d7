#!/usr/bin/env python3
"""Packs target/wafer.wasm as OCI images without a container engine (python3 stdlib only).

    oci-image.py build   --wasm W --out DIR --tar FILE [--crs-version V] [--source URL]
    oci-image.py extract --layout DIR --tag TAG --out FILE
    oci-image.py digest  --layout DIR --tag TAG
    oci-image.py istio   --layout DIR --tag TAG --url oci://HOST/REPO:TAG --in istio --out DIR

`build` writes an OCI image layout (DIR/oci-layout, DIR/index.json, DIR/blobs/sha256/...)
holding two images of the same module, and FILE, a tar of that layout (what
`skopeo copy oci-archive:FILE ...` reads):

- tag `<version>`: the "compat" variant, what `FROM scratch` + `COPY plugin.wasm ./` builds:
  one `application/vnd.oci.image.layer.v1.tar+gzip` layer whose tar holds `plugin.wasm`.
  Istio's image fetcher takes the last layer of such an image and the file named plugin.wasm.
- tag `<version>-artifact`: the Wasm OCI artifact variant: config
  `application/vnd.module.wasm.config.v1+json` and exactly two layers (that runtime config,
  and the raw module as `application/vnd.module.wasm.content.layer.v1+wasm`), the layer count
  Istio's fetcher requires for this variant.

Reproducible: the same wasm (and the same labels) gives the same bytes and digests. The tar
entries have mtime 0, uid/gid 0, no user names, fixed modes and sorted names; gzip has
mtime 0 and no file name; JSON is written with sorted keys. (The gzip stream also depends on
the zlib version: the same machine image gives the same digest.)

Labels (image config Labels and manifest annotations): org.opencontainers.image.version and
.revision come from the build identity string compiled into the module
(`wafer-build-id: version=... revision=...;`, see envoy-wasm/src/build_info.rs), so they
describe the module and not the working tree; the CRS version is passed in.

`extract` is the pull side, with Istio's rules: it reads the image by tag from a layout,
checks every blob's sha256, and writes the module (compat: `plugin.wasm` from the last layer;
artifact: the wasm layer). `digest` prints the manifest digest (hex), which is what Istio's
WasmPlugin `sha256` is compared with for an `oci://` URL. `istio` writes the manifests of
`--in` to `--out` with `url:` and `sha256:` set to the pushed image (comments kept).
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tarfile

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_LAYER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"
WASM_CONFIG = "application/vnd.module.wasm.config.v1+json"
WASM_LAYER = "application/vnd.module.wasm.content.layer.v1+wasm"
REF_NAME = "org.opencontainers.image.ref.name"
CRS_LABEL = "dev.wafer.crs.version"

BUILD_ID = re.compile(rb"wafer-build-id: version=([0-9A-Za-z.+_-]{1,64}) revision=([0-9A-Za-z_-]{1,64});")


def fail(msg):
    print(f"oci-image: {msg}", file=sys.stderr)
    sys.exit(1)


def canonical_json(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def build_id(wasm):
    found = BUILD_ID.findall(wasm)
    if len(set(found)) != 1:
        fail(f"expected one 'wafer-build-id: version=... revision=...' string in the module, found {len(set(found))}")
    version, revision = found[0]
    return version.decode(), revision.decode()


def deterministic_tar(entries):
    """entries: [(name, bytes, mode)] -> tar bytes, sorted by name, no timestamps or owners."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data, mode in sorted(entries):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def deterministic_gzip(data):
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", fileobj=buf, mode="wb", compresslevel=9, mtime=0) as gz:
        gz.write(data)
    return buf.getvalue()


class Layout:
    def __init__(self):
        self.blobs = {}

    def add(self, media_type, data, annotations=None):
        digest = sha256(data)
        self.blobs[digest] = data
        desc = {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}
        if annotations:
            desc["annotations"] = annotations
        return desc


def cmd_build(args):
    with open(args.wasm, "rb") as f:
        wasm = f.read()
    if wasm[:4] != b"\0asm":
        fail(f"{args.wasm} is not a wasm module")
    version, revision = build_id(wasm)
    labels = {
        "org.opencontainers.image.title": "wafer",
        "org.opencontainers.image.description": "wafer WAF proxy-wasm module (ModSecurity SecLang, OWASP CRS)",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.revision": revision,
        "org.opencontainers.image.licenses": "Apache-2.0",
        CRS_LABEL: args.crs_version or "none",
    }
    if args.source:
        labels["org.opencontainers.image.source"] = args.source
    lay = Layout()

    # Compat variant: one tar+gzip layer with /plugin.wasm.
    layer_tar = deterministic_tar([("plugin.wasm", wasm, 0o644)])
    layer = lay.add(OCI_LAYER_GZIP, deterministic_gzip(layer_tar))
    config = {
        "architecture": "wasm",
        "os": "wasip1",
        "config": {"Labels": labels},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{sha256(layer_tar)}"]},
    }
    compat = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": lay.add(OCI_CONFIG, canonical_json(config)),
        "layers": [layer],
        "annotations": labels,
    }

    # Artifact variant: runtime config + raw module, two layers.
    runtime = canonical_json({"type": "envoy_proxy", "config": {"root_ids": ["wafer"]}})
    artifact = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": lay.add(WASM_CONFIG, runtime),
        "layers": [
            lay.add(WASM_CONFIG, runtime, {"org.opencontainers.image.title": "runtime-config.json"}),
            lay.add(WASM_LAYER, wasm, {"org.opencontainers.image.title": "plugin.wasm"}),
        ],
        "annotations": labels,
    }

    manifests = []
    for tag, manifest in ((version, compat), (f"{version}-artifact", artifact)):
        desc = lay.add(OCI_MANIFEST, canonical_json(manifest), {REF_NAME: tag})
        manifests.append(desc)
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}

    files = [("oci-layout", canonical_json({"imageLayoutVersion": "1.0.0"}), 0o644),
             ("index.json", canonical_json(index), 0o644)]
    files += [(f"blobs/sha256/{d}", b, 0o644) for d, b in lay.blobs.items()]

    if os.path.isdir(args.out):
        shutil.rmtree(args.out)  # no stale blobs from an earlier module
    for name, data, _ in files:
        path = os.path.join(args.out, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    tmp = args.tar + ".tmp"
    with open(tmp, "wb") as f:
        f.write(deterministic_tar(files))
    os.replace(tmp, args.tar)

    print(f"{args.out}: wafer {version} revision {revision}, OWASP CRS {labels[CRS_LABEL]}")
    for desc in manifests:
        print(f"  {desc['annotations'][REF_NAME]:<24} manifest sha256:{desc['digest'][7:]}")
    print(f"  plugin.wasm sha256:{sha256(wasm)} ({len(wasm)} bytes)")
    print(f"{args.tar}: {os.path.getsize(args.tar)} bytes")


def read_blob(layout, desc):
    digest = desc["digest"]
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        fail(f"unsupported digest {digest!r}")
    with open(os.path.join(layout, "blobs", "sha256", digest[7:]), "rb") as f:
        data = f.read()
    if sha256(data) != digest[7:] or len(data) != desc["size"]:
        fail(f"blob {digest} does not match its descriptor")
    return data


def find_manifest(layout, tag):
    with open(os.path.join(layout, "index.json"), "rb") as f:
        index = json.load(f)
    found = [m for m in index.get("manifests", [])
             if m.get("annotations", {}).get(REF_NAME) == tag]
    if not found and len(index.get("manifests", [])) == 1:
        found = index["manifests"]  # `skopeo copy ... oci:DIR` without a tag
    if len(found) != 1:
        fail(f"{layout}: no single manifest tagged {tag!r}")
    return found[0]


def cmd_digest(args):
    print(find_manifest(args.layout, args.tag)["digest"][7:])


def cmd_extract(args):
    desc = find_manifest(args.layout, args.tag)
    manifest = json.loads(read_blob(args.layout, desc))
    layers = manifest.get("layers", [])
    if not layers:
        fail("the image has no layer")
    last = layers[-1]
    if last["mediaType"] in (OCI_LAYER_GZIP, DOCKER_LAYER_GZIP):
        data = gzip.decompress(read_blob(args.layout, last))
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            members = [m for m in tar.getmembers() if m.isfile() and os.path.basename(m.name) == "plugin.wasm"]
            if not members:
                fail("plugin.wasm is not in the last layer")
            wasm = tar.extractfile(members[0]).read()
    else:
        if len(layers) != 2:
            fail(f"an artifact image must have 2 layers, this one has {len(layers)}")
        wasm_layers = [l for l in layers if l["mediaType"] == WASM_LAYER]
        if not wasm_layers:
            fail(f"no {WASM_LAYER} layer")
        wasm = read_blob(args.layout, wasm_layers[0])
    if wasm[:4] != b"\0asm":
        fail("the extracted file is not a wasm module")
    with open(args.out, "wb") as f:
        f.write(wasm)
    print(f"{args.out}: sha256:{sha256(wasm)} ({len(wasm)} bytes)")


PLACEHOLDER_URL = re.compile(r"^(\s*url:\s*)oci://\S+$", re.M)
PLACEHOLDER_SHA = re.compile(r'^(\s*sha256:\s*)"?0{64}"?$', re.M)


def cmd_istio(args):
    digest = find_manifest(args.layout, args.tag)["digest"][7:]
    if not args.url.startswith("oci://"):
        fail("--url must be oci://HOST/REPOSITORY:TAG")
    os.makedirs(args.out, exist_ok=True)
    for name in sorted(os.listdir(args.inp)):
        if not name.endswith(".yaml"):
            continue
        with open(os.path.join(args.inp, name)) as f:
            text = f.read()
        text, n_url = PLACEHOLDER_URL.subn(lambda m: m.group(1) + args.url, text)
        text, n_sha = PLACEHOLDER_SHA.subn(lambda m: f'{m.group(1)}"{digest}"', text)
        if n_url == 0 or n_url != n_sha:
            fail(f"{name}: expected an oci:// url and a placeholder sha256 per WasmPlugin")
        with open(os.path.join(args.out, name), "w") as f:
            f.write(text)
        print(f"{os.path.join(args.out, name)}: url {args.url}, sha256 {digest}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--wasm", required=True)
    b.add_argument("--out", required=True)
    b.add_argument("--tar", required=True)
    b.add_argument("--crs-version", default="")
    b.add_argument("--source", default="")
    for name in ("extract", "digest", "istio"):
        s = sub.add_parser(name)
        s.add_argument("--layout", required=True)
        s.add_argument("--tag", required=True)
        if name in ("extract", "istio"):
            s.add_argument("--out", required=True)
        if name == "istio":
            s.add_argument("--url", required=True)
            s.add_argument("--in", dest="inp", required=True)
    args = p.parse_args()
    {"build": cmd_build, "extract": cmd_extract, "digest": cmd_digest, "istio": cmd_istio}[args.cmd](args)


if __name__ == "__main__":
    main()
