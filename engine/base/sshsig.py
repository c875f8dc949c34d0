"""SSH signatures (OpenSSH's SSHSIG, as `ssh-keygen -Y sign/verify` makes them), in-process."""

from __future__ import annotations

import base64
import hashlib
import os
import struct
import sys
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePublicKey
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
    from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

    PublicKey = Ed25519PublicKey | EllipticCurvePublicKey | RSAPublicKey  # the kinds SSHSIG carries here
    # cryptography's load_*_private_key: what they return differs between its releases (51 added
    # kinds its own PrivateKeyTypes does not name); _key_signer takes the kinds SSHSIG carries
    LoadKey = Callable[[bytes, bytes | None], object]

# `cryptography` is imported inside the functions that need it: importing this module stays cheap
# for commands that never sign or verify.

NAMESPACE = "regulator"

_MAGIC = b"SSHSIG"
_BEGIN = "-----BEGIN SSH SIGNATURE-----"
_END = "-----END SSH SIGNATURE-----"
_WRAP = 70  # ssh-keygen wraps its armor at 70 columns; byte-identical output is easy to test
_HASHES = {b"sha256": hashlib.sha256, b"sha512": hashlib.sha512}
# key type -> (curve name in the blob, cryptography's curve class, hash of the ECDSA signature)
_ECDSA = {
    "ecdsa-sha2-nistp256": (b"nistp256", "SECP256R1", "SHA256"),
    "ecdsa-sha2-nistp384": (b"nistp384", "SECP384R1", "SHA384"),
    "ecdsa-sha2-nistp521": (b"nistp521", "SECP521R1", "SHA512"),
}
_RSA_FORMATS = {b"rsa-sha2-512": "SHA512", b"rsa-sha2-256": "SHA256"}  # never SHA-1 "ssh-rsa"
_KEY_TYPES = ("ssh-ed25519", *_ECDSA, "ssh-rsa")
_MIN_RSA_BITS = 1024  # OpenSSH refuses shorter RSA keys
_AGENT_TIMEOUT = 30.0  # seconds; an agent key added with `ssh-add -c` waits for a confirmation
_AGENT_RSA_SHA2_512 = 4  # sign-request flag: an RSA signature with SHA-512, not SHA-1


class SigningKeyError(ValueError):
    """A key that cannot sign; the message is one line saying what to do."""


# --- SSH wire format (RFC 4251 §5) --------------------------------------------------------------


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _mpint(n: int) -> bytes:
    """A non-negative mpint: big-endian, a leading zero byte only where the top bit is set."""
    return _string(n.to_bytes(n.bit_length() // 8 + 1, "big") if n else b"")


class _Reader:
    """Reads wire fields; any short read, bad mpint or leftover byte is a ValueError."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("truncated")
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def string(self) -> bytes:
        return self.take(struct.unpack(">I", self.take(4))[0])

    def mpint(self) -> int:
        raw = self.string()
        # Only the minimal, non-negative encoding: one signature has one byte form.
        if raw and (raw[0] & 0x80 or (raw[0] == 0 and (len(raw) == 1 or not raw[1] & 0x80))):
            raise ValueError("not a minimal non-negative mpint")
        return int.from_bytes(raw, "big")

    def end(self) -> None:
        if self.pos != len(self.data):
            raise ValueError("trailing bytes")


# --- Public keys --------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _public_key(blob: bytes) -> tuple[str, PublicKey]:
    """(type, cryptography key) of a public key blob; cached, as the same few keys sign everything."""
    r = _Reader(blob)
    kind = r.string().decode("ascii")
    key: PublicKey
    if kind == "ssh-ed25519":
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        key = Ed25519PublicKey.from_public_bytes(r.string())
    elif kind in _ECDSA:
        from cryptography.hazmat.primitives.asymmetric import ec

        curve, curve_class, _ = _ECDSA[kind]
        if r.string() != curve:
            raise ValueError(f"{kind} key on another curve")
        key = ec.EllipticCurvePublicKey.from_encoded_point(getattr(ec, curve_class)(), r.string())
    elif kind == "ssh-rsa":
        from cryptography.hazmat.primitives.asymmetric import rsa

        e, n = r.mpint(), r.mpint()
        key = rsa.RSAPublicNumbers(e, n).public_key()
        if key.key_size < _MIN_RSA_BITS:
            raise ValueError(f"RSA key shorter than {_MIN_RSA_BITS} bits")
    else:
        raise ValueError(f"unsupported key type {kind!r}")
    r.end()
    return kind, key


def _blob_line(blob: bytes) -> str:
    """The normalized line of a blob, from its embedded type (not parsed further)."""
    return f"{_Reader(blob).string().decode('ascii')} {base64.b64encode(blob).decode()}"


@lru_cache(maxsize=1024)
def _normalize(line: str) -> str:
    fields = line.split()
    if len(fields) < 2 or fields[0] not in _KEY_TYPES:
        raise ValueError(f"not an OpenSSH ed25519, ecdsa or rsa public key: {line[:40]!r}")
    blob = base64.b64decode(fields[1], validate=True)
    kind, _ = _public_key(blob)
    if kind != fields[0]:
        raise ValueError(f"the key says {fields[0]} but its blob is {kind}")
    return _blob_line(blob)


def normalize_key(line: str) -> str:
    """'type base64 comment' -> 'type base64'; ValueError if not a supported OpenSSH public key."""
    return _normalize(line.strip())


def fingerprint(line: str) -> str:
    """'SHA256:…' as `ssh-keygen -lf` prints it."""
    blob = base64.b64decode(normalize_key(line).split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


# --- Signatures ---------------------------------------------------------------------------------


def _armor(blob: bytes) -> str:
    text = base64.b64encode(blob).decode()
    return "\n".join([_BEGIN, *(text[i : i + _WRAP] for i in range(0, len(text), _WRAP)), _END]) + "\n"


def _parse(armored: str) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """(public key blob, namespace, reserved, hash algorithm, signature) of an armored SSHSIG."""
    lines = armored.strip().splitlines()
    if len(lines) < 3 or lines[0].strip() != _BEGIN or lines[-1].strip() != _END:
        raise ValueError("not an armored SSH signature")
    r = _Reader(base64.b64decode("".join(line.strip() for line in lines[1:-1]), validate=True))
    if r.take(6) != _MAGIC or struct.unpack(">I", r.take(4))[0] != 1:
        raise ValueError("not an SSHSIG version 1 blob")
    fields = (r.string(), r.string(), r.string(), r.string(), r.string())
    r.end()
    return fields


def _signed_data(namespace: bytes, reserved: bytes, hash_name: bytes, digest: bytes) -> bytes:
    return _MAGIC + _string(namespace) + _string(reserved) + _string(hash_name) + _string(digest)


def _check(kind: str, key: PublicKey, signature: bytes, data: bytes) -> None:
    """Raises unless `signature` (format string + signature bytes) is `key`'s over `data`."""
    from cryptography.hazmat.primitives.asymmetric import ed25519

    r = _Reader(signature)
    fmt, raw = r.string(), r.string()
    r.end()
    # `kind` and `key` come from one _public_key: the isinstance checks only tell the type checker
    if kind == "ssh-ed25519" and fmt == b"ssh-ed25519" and isinstance(key, ed25519.Ed25519PublicKey):
        key.verify(raw, data)
        return
    # the other kinds' modules only where a key of theirs signed (an ed25519 check imports none)
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

    if kind in _ECDSA and fmt == kind.encode() and isinstance(key, ec.EllipticCurvePublicKey):
        rs = _Reader(raw)
        der = utils.encode_dss_signature(rs.mpint(), rs.mpint())
        rs.end()
        key.verify(der, data, ec.ECDSA(getattr(hashes, _ECDSA[kind][2])()))
    elif kind == "ssh-rsa" and fmt in _RSA_FORMATS and isinstance(key, rsa.RSAPublicKey):
        # OpenSSH accepts a signature shorter than the modulus (leading zeros dropped); OpenSSL not.
        raw = raw.rjust((key.key_size + 7) // 8, b"\0")
        key.verify(raw, data, padding.PKCS1v15(), getattr(hashes, _RSA_FORMATS[fmt])())
    else:
        raise ValueError(f"signature format {fmt!r} does not fit a {kind} key")


def signature_key(armored: str) -> str | None:
    """The normalized public key inside an armored SSHSIG, or None if it cannot be parsed."""
    try:
        return normalize_key(_blob_line(_parse(armored)[0]))
    except Exception:  # any malformed input, of any type, is simply "no key"
        return None


def verify(armored: str, message: bytes, allowed: Iterable[str], namespace: str = NAMESPACE) -> str | None:
    """The allowed key (normalized) that signed `message` in `namespace`, else None; never raises."""
    try:
        return _verify(armored, message, allowed, namespace)
    except Exception:  # garbage, truncation, wrong types, a bad signature: all are "not verified"
        return None


def _verify(armored: str, message: bytes, allowed: Iterable[str], namespace: str) -> str | None:
    blob, ns, reserved, hash_name, signature = _parse(armored)
    if not ns or ns != namespace.encode():
        return None
    signer = _blob_line(blob)
    if signer not in _allowed(allowed):  # cheap refusals before any public-key arithmetic
        return None
    kind, key = _public_key(blob)
    _check(kind, key, signature, _signed_data(ns, reserved, hash_name, _HASHES[hash_name](message).digest()))
    return signer


def _allowed(allowed: Iterable[str]) -> set[str]:
    if isinstance(allowed, str):  # one key passed bare would otherwise be iterated as characters
        allowed = [allowed]
    keys = set()
    for line in allowed:
        try:
            keys.add(normalize_key(line))
        except Exception:  # one bad policy entry must not hide the good ones
            continue
    return keys


# --- Signing ------------------------------------------------------------------------------------


class Signer:
    """Signs with one key: in-process, or through ssh-agent (`via` says which)."""

    __slots__ = ("public_key", "via", "_blob", "_sign_data")

    def __init__(self, public_key: str, via: str, sign_data: Callable[[bytes], bytes]) -> None:
        self.public_key = normalize_key(public_key)
        self.via = via
        self._blob = base64.b64decode(self.public_key.split()[1])
        self._sign_data = sign_data  # signed data -> signature field (format string + bytes)

    def sign(self, message: bytes, namespace: str = NAMESPACE) -> str:
        """Armored SSHSIG over `message` (sha512, as ssh-keygen), accepted by `ssh-keygen -Y verify`."""
        if not namespace:
            raise ValueError("an SSH signature needs a namespace")
        ns, hash_name = namespace.encode(), b"sha512"
        signature = self._sign_data(_signed_data(ns, b"", hash_name, hashlib.sha512(message).digest()))
        fields = (self._blob, ns, b"", hash_name, signature)
        return _armor(_MAGIC + struct.pack(">I", 1) + b"".join(_string(f) for f in fields))

    def __repr__(self) -> str:
        return f"Signer({fingerprint(self.public_key)} via {self.via})"


def _in_process(private_key: object) -> Callable[[bytes], bytes] | None:
    """The sign function of a cryptography private key, or None for a type SSHSIG cannot carry."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa, utils

    if isinstance(private_key, ed25519.Ed25519PrivateKey):
        return lambda data: _string(b"ssh-ed25519") + _string(private_key.sign(data))
    if isinstance(private_key, ec.EllipticCurvePrivateKey):
        kinds = [k for k, (_, curve, _) in _ECDSA.items() if curve.lower() == private_key.curve.name]
        if not kinds:
            return None
        fmt, algorithm = kinds[0].encode(), ec.ECDSA(getattr(hashes, _ECDSA[kinds[0]][2])())

        def sign(data: bytes) -> bytes:
            r, s = utils.decode_dss_signature(private_key.sign(data, algorithm))
            return _string(fmt) + _string(_mpint(r) + _mpint(s))

        return sign
    if isinstance(private_key, rsa.RSAPrivateKey) and private_key.key_size >= _MIN_RSA_BITS:
        return lambda data: (
            _string(b"rsa-sha2-512") + _string(private_key.sign(data, padding.PKCS1v15(), hashes.SHA512()))
        )
    return None


def _agent_call(payload: bytes) -> bytes:
    """One request to the ssh-agent at SSH_AUTH_SOCK, its reply (OSError if there is none)."""
    import socket

    path = os.environ.get("SSH_AUTH_SOCK")
    if not path:
        raise OSError("SSH_AUTH_SOCK is not set")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(_AGENT_TIMEOUT)
        sock.connect(path)
        sock.sendall(_string(payload))
        reply = b""
        while len(reply) < 4 or len(reply) < 4 + struct.unpack(">I", reply[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise OSError("ssh-agent closed the connection")
            reply += chunk
    return reply[4:]


def _agent_keys() -> set[bytes] | None:
    """The public key blobs the agent holds, or None when no agent answers."""
    try:
        reply = _agent_call(b"\x0b")  # SSH2_AGENTC_REQUEST_IDENTITIES
        r = _Reader(reply)
        if r.take(1) != b"\x0c":  # SSH2_AGENT_IDENTITIES_ANSWER
            return None
        blobs = set()
        for _ in range(struct.unpack(">I", r.take(4))[0]):
            blobs.add(r.string())
            r.string()  # the comment
        return blobs
    except (OSError, ValueError):
        return None


def _agent_signer(public: str) -> Signer:
    """A signer through ssh-agent, which the caller has checked holds `public`."""
    blob = base64.b64decode(public.split()[1])
    flags = _AGENT_RSA_SHA2_512 if public.startswith("ssh-rsa ") else 0
    kind, key = _public_key(blob)

    def sign(data: bytes) -> bytes:
        try:  # SSH2_AGENTC_SIGN_REQUEST (13), answered by SSH2_AGENT_SIGN_RESPONSE (14)
            reply = _agent_call(b"\x0d" + _string(blob) + _string(data) + struct.pack(">I", flags))
        except OSError as e:
            raise SigningKeyError(f"ssh-agent did not answer: {e}") from None
        if reply[:1] != b"\x0e":
            raise SigningKeyError(f"ssh-agent refused to sign with {fingerprint(public)}")
        r = _Reader(reply[1:])
        signature = r.string()
        r.end()
        try:  # an old agent may ignore the SHA-2 flag and sign RSA with SHA-1
            _check(kind, key, signature, data)
        except Exception:
            raise SigningKeyError("ssh-agent returned a signature that does not verify") from None
        return signature

    return Signer(public, "ssh-agent", sign)


def _encrypted_public(path: Path, data: bytes) -> str | None:
    """The public half of an encrypted private key: OpenSSH's format stores it in clear, else FILE.pub."""
    try:
        if b"BEGIN OPENSSH PRIVATE KEY" in data:
            body = base64.b64decode(b"".join(data.strip().splitlines()[1:-1]))
            r = _Reader(body)
            if r.take(15) != b"openssh-key-v1\0":
                return None
            for _ in range(3):  # cipher, kdf, kdf options
                r.string()
            r.take(4)  # the number of keys; the first public key follows
            return normalize_key(_blob_line(r.string()))
        return normalize_key(path.with_name(path.name + ".pub").read_text("utf-8"))
    except (OSError, ValueError):
        return None


def _needs_passphrase(path: Path) -> SigningKeyError:
    return SigningKeyError(
        f"key {path} needs a passphrase and is not in ssh-agent: run `ssh-add {path}` first"
    )


def _decrypt_interactively(path: Path, data: bytes, load: LoadKey) -> Signer:
    import getpass
    import importlib.util

    # cryptography decrypts OpenSSH's own format only with the optional `bcrypt` module.
    if b"BEGIN OPENSSH PRIVATE KEY" in data and importlib.util.find_spec("bcrypt") is None:
        raise _needs_passphrase(path)
    for _ in range(3):
        passphrase = getpass.getpass(f"Enter passphrase for {path}: ")
        try:
            key = load(data, passphrase.encode())
        except (TypeError, ValueError):
            continue
        return _key_signer(path, key)
    raise SigningKeyError(f"wrong passphrase for key {path}")


def _key_signer(path: Path, key: object) -> Signer:
    from cryptography.hazmat.primitives import serialization

    sign = _in_process(key)
    if sign is None:
        raise SigningKeyError(f"key {path} is not an ed25519, ecdsa (P-256/384/521) or RSA key")
    public = (
        cast("PrivateKeyTypes", key)
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    return Signer(public.decode(), "in-process", sign)


def _private_signer(path: Path, data: bytes, interactive: bool) -> Signer:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    load: LoadKey
    if b"BEGIN OPENSSH PRIVATE KEY" in data:
        load = serialization.load_ssh_private_key
    else:
        load = serialization.load_pem_private_key
    key: object
    try:
        key = load(data, None)
    except TypeError:  # cryptography's way of saying the key is encrypted and needs a password
        key = None
    except (ValueError, UnsupportedAlgorithm):
        raise SigningKeyError(f"key {path} is not a private key this program can read") from None
    if key is not None:
        return _key_signer(path, key)
    public = _encrypted_public(path, data)
    keys = _agent_keys()
    if public and keys and base64.b64decode(public.split()[1]) in keys:
        return _agent_signer(public)
    if interactive and sys.stdin.isatty() and sys.stdout.isatty():
        return _decrypt_interactively(path, data, load)
    raise _needs_passphrase(path)


def load_signer(path: str | Path, *, interactive: bool = False) -> Signer:
    """A signer for a private key file, or for a public key file whose private half is in ssh-agent."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SigningKeyError(f"cannot read key {path}: {e.strerror or e}") from None
    if b"PRIVATE KEY-----" in data:
        return _private_signer(path, data, interactive)
    try:
        lines = [ln for ln in data.decode("utf-8").splitlines() if ln.strip() and not ln.startswith("#")]
        public = normalize_key(lines[0]) if len(lines) == 1 else None
    except ValueError:
        public = None
    if public is None:
        raise SigningKeyError(f"{path} is not an SSH key: pass a private key or a public key (.pub) file")
    keys = _agent_keys()
    if keys is None:
        raise SigningKeyError(
            f"{path} is a public key and no ssh-agent answers: pass the private key instead"
        )
    if base64.b64decode(public.split()[1]) not in keys:
        raise SigningKeyError(f"the private half of {path} is not in ssh-agent: run `ssh-add` on it first")
    return _agent_signer(public)
