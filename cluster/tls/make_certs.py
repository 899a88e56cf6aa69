#!/usr/bin/env python
"""Generate a private CA and TLS certificates for a Dask cluster (scheduler, worker, client).

Usage::

    python cluster/tls/make_certs.py --out certs/ [--host 10.0.0.5 --host node1.example.org]
        [--days 365] [--overwrite]

Writes, into ``--out``::

    ca.pem  ca-key.pem                 the certificate authority of this cluster
    scheduler.pem  scheduler-key.pem   used by `dask scheduler`
    worker.pem  worker-key.pem         used by every `dask worker`
    client.pem  client-key.pem         used by clients (dkrr fit --scheduler tls://...)

Every leaf certificate is signed by the CA, valid for ``localhost``, ``127.0.0.1`` and each
``--host``, and usable for both server and client authentication (Dask workers are servers
for their peers and clients of the scheduler). Dask uses *mutual* TLS: each side must show a
certificate signed by the CA, so a client without ``client.pem`` is refused. Keep
``ca-key.pem`` off the cluster; it is only needed to sign more certificates.

The certificates are made with the ``openssl`` command line tool (the ``cryptography``
package is not a dependency of dkrr). Private keys are written with mode 0600.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROLES = ("scheduler", "worker", "client")


def _openssl(*args, cwd):
    exe = shutil.which("openssl")
    if exe is None:
        raise SystemExit("make_certs.py needs the `openssl` command line tool on PATH.")
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"openssl {' '.join(args)} failed:\n{proc.stderr}")


def _subject_alt_names(hosts):
    names = {"DNS:localhost", "IP:127.0.0.1"}
    for host in hosts:
        try:
            ipaddress.ip_address(host)
            names.add(f"IP:{host}")
        except ValueError:
            names.add(f"DNS:{host}")
    return ",".join(sorted(names))


def make_certs(out, *, hosts=(), days=365, overwrite=False, key_bits=2048):
    """Create the CA and the scheduler/worker/client certificates in ``out``.

    Parameters
    ----------
    out : str or path-like
        Output directory (created if needed).
    hosts : sequence of str, default=()
        Extra host names or IP addresses the certificates are valid for, besides
        ``localhost`` and ``127.0.0.1``.
    days : int, default=365
        Validity of every certificate.
    overwrite : bool, default=False
        Replace existing files; otherwise an existing ``ca.pem`` is an error.
    key_bits : int, default=2048
        RSA key size.

    Returns
    -------
    files : dict
        Maps ``"ca"``, ``"ca_key"``, ``"<role>"`` and ``"<role>_key"`` to paths.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if (out / "ca.pem").exists() and not overwrite:
        raise SystemExit(f"{out / 'ca.pem'} exists; pass --overwrite to replace the certificates.")
    san = _subject_alt_names(hosts)
    old_umask = os.umask(0o077)  # keys readable by the owner only
    try:
        with tempfile.TemporaryDirectory(dir=out) as tmp:
            tmp = Path(tmp)
            _openssl(
                "req", "-x509", "-new", "-newkey", f"rsa:{key_bits}", "-nodes", "-sha256",
                "-days", str(days), "-subj", "/O=dkrr/CN=dkrr Dask cluster CA",
                "-keyout", "ca-key.pem", "-out", "ca.pem",
                "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                "-addext", "subjectKeyIdentifier=hash",
                cwd=tmp,
            )
            ext = tmp / "leaf.ext"
            ext.write_text(
                "basicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth,clientAuth\n"
                "subjectKeyIdentifier=hash\n"
                "authorityKeyIdentifier=keyid,issuer\n"
                f"subjectAltName={san}\n"
            )
            for role in ROLES:
                _openssl(
                    "req", "-new", "-newkey", f"rsa:{key_bits}", "-nodes", "-sha256",
                    "-subj", f"/O=dkrr/CN=dask-{role}",
                    "-keyout", f"{role}-key.pem", "-out", f"{role}.csr",
                    cwd=tmp,
                )
                _openssl(
                    "x509", "-req", "-in", f"{role}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
                    "-CAcreateserial", "-sha256", "-days", str(days), "-extfile", "leaf.ext",
                    "-out", f"{role}.pem",
                    cwd=tmp,
                )
            files = {"ca": out / "ca.pem", "ca_key": out / "ca-key.pem"}
            for role in ROLES:
                files[role] = out / f"{role}.pem"
                files[f"{role}_key"] = out / f"{role}-key.pem"
            for path in files.values():
                os.replace(tmp / path.name, path)
    finally:
        os.umask(old_umask)
    for key, path in files.items():
        os.chmod(path, 0o600 if key.endswith("key") else 0o644)
    return files


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument(
        "--host", action="append", default=[],
        help="extra host name or IP the certificates are valid for (repeatable)",
    )
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    files = make_certs(args.out, hosts=args.host, days=args.days, overwrite=args.overwrite)
    for key, path in files.items():
        print(f"{key:14s} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
