"""Writes a container image as an OCI image-layout archive that `ctr images import` takes:
one uncompressed layer of the given files, a config, a manifest and an index naming the
image. No registry and no container engine is involved."""

import hashlib
import io
import json
import os
import tarfile


def _blob(archive, data, media_type):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo("blobs/sha256/" + digest.split(":")[1])
    info.size = len(data)
    info.mode = 0o644
    archive.addfile(info, io.BytesIO(data))
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def _layer(files, links):
    """files: {path in the image: (host path, mode)}; links: {path: target}."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as layer:
        directories = set()
        for path in list(files) + list(links):
            parts = path.strip("/").split("/")[:-1]
            for i in range(1, len(parts) + 1):
                directories.add("/".join(parts[:i]))
        for directory in sorted(directories):
            info = tarfile.TarInfo(directory)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            layer.addfile(info)
        for path, (source, mode) in sorted(files.items()):
            with open(source, "rb") as f:
                data = f.read()
            info = tarfile.TarInfo(path.strip("/"))
            info.size = len(data)
            info.mode = mode
            layer.addfile(info, io.BytesIO(data))
        for path, target in sorted(links.items()):
            info = tarfile.TarInfo(path.strip("/"))
            info.type = tarfile.SYMTYPE
            info.linkname = target
            layer.addfile(info)
    return out.getvalue()


def write_image(out_path, name, files, links=None, entrypoint=None, cmd=None):
    layer = _layer(files, links or {})
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": entrypoint, "Cmd": cmd, "Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]},
    }
    temporary = out_path + ".tmp"
    with tarfile.open(temporary, mode="w") as archive:
        layout = json.dumps({"imageLayoutVersion": "1.0.0"}).encode()
        info = tarfile.TarInfo("oci-layout")
        info.size = len(layout)
        archive.addfile(info, io.BytesIO(layout))
        config_descriptor = _blob(archive, json.dumps(config).encode(), "application/vnd.oci.image.config.v1+json")
        layer_descriptor = _blob(archive, layer, "application/vnd.oci.image.layer.v1.tar")
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": config_descriptor, "layers": [layer_descriptor]}
        manifest_descriptor = _blob(archive, json.dumps(manifest).encode(), "application/vnd.oci.image.manifest.v1+json")
        manifest_descriptor["annotations"] = {"io.containerd.image.name": name,
                                              "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]}
        manifest_descriptor["platform"] = {"architecture": "amd64", "os": "linux"}
        index = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                            "manifests": [manifest_descriptor]}).encode()
        info = tarfile.TarInfo("index.json")
        info.size = len(index)
        archive.addfile(info, io.BytesIO(index))
    os.replace(temporary, out_path)
