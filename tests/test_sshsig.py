"""engine.base.sshsig against the real ssh-keygen, ssh-agent and ssh-add, with keys made here."""

from __future__ import annotations

import base64
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.base import sshsig
from engine.base.sshsig import NAMESPACE, SigningKeyError, load_signer, normalize_key, verify

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")
needs_agent = pytest.mark.skipif(
    shutil.which("ssh-agent") is None or shutil.which("ssh-add") is None, reason="needs ssh-agent and ssh-add"
)

KEY_TYPES = {
    "ed25519": ["-t", "ed25519"],
    "ecdsa256": ["-t", "ecdsa", "-b", "256"],
    "ecdsa384": ["-t", "ecdsa", "-b", "384"],
    "ecdsa521": ["-t", "ecdsa", "-b", "521"],
    "rsa3072": ["-t", "rsa", "-b", "3072"],
}
MESSAGE = b'{"actor":"alice","kind":"disposition","workspace":"w"}'
FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def keygen(path: Path, *options: str, passphrase: str = "") -> Path:
    subprocess.run(
        ["ssh-keygen", "-q", *options, "-N", passphrase, "-C", "alice@laptop", "-f", str(path)], check=True
    )
    return path


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One unencrypted OpenSSH private key per type (a second ed25519 for swaps), `.pub` beside each."""
    folder = tmp_path_factory.mktemp("keys")
    made = {name: keygen(folder / name, *options) for name, options in KEY_TYPES.items()}
    made["ed25519-bob"] = keygen(folder / "ed25519-bob", "-t", "ed25519")
    return made


def pub(key: Path) -> str:
    return Path(f"{key}.pub").read_text()


def keygen_sign(key: Path, message: bytes, namespace: str = NAMESPACE, *options: str) -> str:
    done = subprocess.run(
        ["ssh-keygen", "-Y", "sign", "-n", namespace, "-f", str(key), *options],
        input=message,
        capture_output=True,
        check=True,
    )
    return done.stdout.decode()


def keygen_verifies(public: str, armored: str, message: bytes, tmp_path: Path) -> bool:
    (tmp_path / "allowed_signers").write_text(f"alice {public}")
    (tmp_path / "sig").write_text(armored)
    done = subprocess.run(
        ["ssh-keygen", "-Y", "verify", "-f", str(tmp_path / "allowed_signers"), "-I", "alice"]
        + ["-n", NAMESPACE, "-s", str(tmp_path / "sig")],
        input=message,
        capture_output=True,
    )
    return done.returncode == 0


def blob_of(armored: str) -> bytes:
    return base64.b64decode("".join(armored.strip().splitlines()[1:-1]))


def armor(blob: bytes) -> str:
    return sshsig._armor(blob)


def with_field(armored: str, index: int, value: bytes) -> str:
    """The signature with one of its five fields (0 = public key, 4 = signature) replaced."""
    fields = list(sshsig._parse(armored))
    fields[index] = value
    return armor(b"SSHSIG\0\0\0\1" + b"".join(sshsig._string(f) for f in fields))


# --- Signing and verifying, both ways against ssh-keygen ---------------------------------------


@pytest.mark.parametrize("kind", KEY_TYPES)
def test_in_process_signature_verifies_with_ssh_keygen(keys: Any, kind: Any, tmp_path: Path) -> None:
    signer = load_signer(keys[kind])
    assert signer.via == "in-process"
    assert signer.public_key == normalize_key(pub(keys[kind]))
    armored = signer.sign(MESSAGE)
    assert armored.startswith("-----BEGIN SSH SIGNATURE-----\n")
    assert keygen_verifies(pub(keys[kind]), armored, MESSAGE, tmp_path)
    assert not keygen_verifies(pub(keys[kind]), armored, MESSAGE + b" ", tmp_path)  # the check can fail
    assert verify(armored, MESSAGE, [pub(keys[kind])]) == signer.public_key


@pytest.mark.parametrize("kind", ["ed25519", "rsa3072"])
def test_deterministic_signatures_are_byte_identical_to_ssh_keygen(keys: Any, kind: Any) -> None:
    # Ed25519 and RSA PKCS#1 v1.5 are deterministic: same key, message and namespace, same bytes.
    assert load_signer(keys[kind]).sign(MESSAGE) == keygen_sign(keys[kind], MESSAGE)


@pytest.mark.parametrize("kind", KEY_TYPES)
def test_ssh_keygen_signature_verifies_in_process(keys: Any, kind: Any) -> None:
    armored = keygen_sign(keys[kind], MESSAGE)
    expected = " ".join(pub(keys[kind]).split()[:2])
    assert verify(armored, MESSAGE, [pub(keys[kind])]) == expected
    assert verify(armored, MESSAGE, [pub(keys["ed25519-bob"]), expected]) == expected
    assert sshsig.signature_key(armored) == expected


@pytest.mark.parametrize("kind", KEY_TYPES)
def test_verify_refuses_what_was_not_signed(keys: Any, kind: Any) -> None:
    armored = keygen_sign(keys[kind], MESSAGE)
    allowed = [pub(keys[kind])]
    assert verify(armored, MESSAGE, allowed) is not None
    assert verify(armored, MESSAGE + b"x", allowed) is None
    assert verify(armored, MESSAGE[:-1], allowed) is None
    assert verify(armored, MESSAGE, allowed, namespace="git") is None
    assert verify(keygen_sign(keys[kind], MESSAGE, "git"), MESSAGE, allowed) is None
    assert verify(armored, MESSAGE, [pub(keys["ed25519-bob"])]) is None
    assert verify(armored, MESSAGE, []) is None


@pytest.mark.parametrize("kind", KEY_TYPES)
def test_a_signature_whose_key_was_swapped_does_not_verify(keys: Any, kind: Any) -> None:
    bob = normalize_key(pub(keys["ed25519-bob"]))
    swapped = with_field(keygen_sign(keys[kind], MESSAGE), 0, base64.b64decode(bob.split()[1]))
    assert sshsig.signature_key(swapped) == bob
    assert verify(swapped, MESSAGE, [bob, pub(keys[kind])]) is None


def test_sha256_signatures_verify_and_the_namespace_must_not_be_empty(keys: Any) -> None:
    armored = keygen_sign(keys["ed25519"], MESSAGE, NAMESPACE, "-O", "hashalg=sha256")
    assert sshsig._parse(armored)[3] == b"sha256"
    assert verify(armored, MESSAGE, [pub(keys["ed25519"])]) is not None
    assert verify(with_field(armored, 3, b"md5"), MESSAGE, [pub(keys["ed25519"])]) is None
    with pytest.raises(ValueError):
        load_signer(keys["ed25519"]).sign(MESSAGE, namespace="")


def test_rsa_signatures_with_sha1_are_refused(keys: Any, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    private = cast(rsa.RSAPrivateKey, serialization.load_ssh_private_key(keys["rsa3072"].read_bytes(), None))

    def rsa_signer(fmt: bytes, hash_algorithm: Any) -> sshsig.Signer:
        return sshsig.Signer(
            pub(keys["rsa3072"]),
            "test",
            lambda data: (
                sshsig._string(fmt) + sshsig._string(private.sign(data, padding.PKCS1v15(), hash_algorithm))
            ),
        )

    sha256 = rsa_signer(b"rsa-sha2-256", hashes.SHA256()).sign(MESSAGE)
    assert verify(sha256, MESSAGE, [pub(keys["rsa3072"])]) is not None
    assert keygen_verifies(pub(keys["rsa3072"]), sha256, MESSAGE, tmp_path)
    sha1 = rsa_signer(b"ssh-rsa", hashes.SHA1()).sign(MESSAGE)
    assert verify(sha1, MESSAGE, [pub(keys["rsa3072"])]) is None
    assert not keygen_verifies(pub(keys["rsa3072"]), sha1, MESSAGE, tmp_path)


def test_ecdsa_numbers_must_be_minimal_non_negative_mpints(keys: Any) -> None:
    # The same (r, s) written with a superfluous zero byte, or without the one that keeps it
    # positive: one signature has one byte form. ECDSA is randomized: sign until r's top bit is set.
    signer, allowed = load_signer(keys["ecdsa256"]), [pub(keys["ecdsa256"])]
    for _ in range(100):
        armored = signer.sign(MESSAGE)
        outer = sshsig._Reader(sshsig._parse(armored)[4])
        fmt, inner = outer.string(), sshsig._Reader(outer.string())
        r, s = inner.mpint(), inner.mpint()
        if r.bit_length() == 256:
            break
    minimal = sshsig._mpint(r)[4:]
    assert minimal[0] == 0 and verify(armored, MESSAGE, allowed) is not None

    def with_r(raw_r: bytes) -> str:
        numbers = sshsig._string(raw_r) + sshsig._mpint(s)
        return with_field(armored, 4, sshsig._string(fmt) + sshsig._string(numbers))

    assert with_r(minimal) == armored
    assert verify(with_r(b"\0" + minimal), MESSAGE, allowed) is None
    assert verify(with_r(minimal[1:]), MESSAGE, allowed) is None


def test_an_rsa_signature_shorter_than_the_modulus_verifies_as_in_openssh(keys: Any, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    private = cast(rsa.RSAPrivateKey, serialization.load_ssh_private_key(keys["rsa3072"].read_bytes(), None))
    starts_with_zero = []

    def sign(data: bytes) -> bytes:
        raw = private.sign(data, padding.PKCS1v15(), hashes.SHA512())
        starts_with_zero.append(raw[0] == 0)
        return sshsig._string(b"rsa-sha2-512") + sshsig._string(raw.lstrip(b"\0"))

    signer = sshsig.Signer(pub(keys["rsa3072"]), "test", sign)
    for n in range(3000):  # one signature in 256 has a leading zero byte
        armored = signer.sign(b"%d" % n)
        if starts_with_zero[-1]:
            break
    assert starts_with_zero[-1]
    assert verify(armored, b"%d" % n, [pub(keys["rsa3072"])]) is not None
    assert keygen_verifies(pub(keys["rsa3072"]), armored, b"%d" % n, tmp_path)


def test_allowed_entries_are_normalized_and_bad_ones_skipped(keys: Any) -> None:
    armored = keygen_sign(keys["ed25519"], MESSAGE)
    line = pub(keys["ed25519"])
    expected = normalize_key(line)
    assert verify(armored, MESSAGE, ["garbage", None, f"  {line}\n"]) == expected  # type: ignore[list-item]
    assert verify(armored, MESSAGE, line) == expected  # one key passed bare
    assert verify(armored, MESSAGE, iter([line])) == expected


# --- verify never raises -------------------------------------------------------------------------


@FAST
@given(text=st.text())
def test_verify_returns_none_for_garbage_text(keys: Any, text: Any) -> None:
    assert verify(text, MESSAGE, [pub(keys["ed25519"])]) is None
    assert sshsig.signature_key(text) is None


@FAST
@given(blob=st.binary(max_size=400))
def test_verify_returns_none_for_garbage_inside_the_armor(keys: Any, blob: Any) -> None:
    assert verify(armor(blob), MESSAGE, [pub(keys["ed25519"])]) is None
    assert verify(armor(b"SSHSIG\0\0\0\1" + blob), MESSAGE, [pub(keys["ed25519"])]) is None


ANYTHING = st.one_of(
    st.none(),
    st.integers(),
    st.floats(),
    st.binary(),
    st.text(),
    st.lists(st.integers()),
    st.dictionaries(st.text(), st.text()),
)


@FAST
@given(armored=ANYTHING, message=ANYTHING, allowed=ANYTHING, namespace=ANYTHING)
def test_verify_returns_none_for_any_types(armored: Any, message: Any, allowed: Any, namespace: Any) -> None:
    assert verify(armored, message, allowed, namespace) is None
    assert sshsig.signature_key(armored) is None


@pytest.mark.parametrize("kind", KEY_TYPES)
def test_verify_returns_none_for_any_wrong_types_around_a_good_signature(keys: Any, kind: Any) -> None:
    armored, allowed = keygen_sign(keys[kind], MESSAGE), [pub(keys[kind])]
    assert verify(armored, MESSAGE.decode(), allowed) is None  # type: ignore[arg-type]  # str, not bytes
    assert verify(armored.encode(), MESSAGE, allowed) is None  # type: ignore[arg-type]
    assert verify(armored, MESSAGE, [b"ssh-ed25519 AAAA"]) is None  # type: ignore[list-item]
    assert verify(armored, MESSAGE, 7) is None  # type: ignore[arg-type]
    assert verify(armored, MESSAGE, allowed, namespace=None) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", KEY_TYPES)
def test_every_truncation_and_bit_flip_of_a_real_signature_is_refused(keys: Any, kind: Any) -> None:
    armored, allowed = keygen_sign(keys[kind], MESSAGE), [pub(keys[kind])]
    blob = blob_of(armored)
    assert armor(blob) == armored and verify(armored, MESSAGE, allowed) is not None
    for end in range(len(blob)):
        assert verify(armor(blob[:end]), MESSAGE, allowed) is None
    for end in range(len(armored.rstrip())):
        assert verify(armored[:end], MESSAGE, allowed) is None
    for bit in range(len(blob) * 8):
        flipped = bytearray(blob)
        flipped[bit // 8] ^= 1 << (bit % 8)
        assert verify(armor(bytes(flipped)), MESSAGE, allowed) is None, bit
    assert verify(armored + "x", MESSAGE, allowed) is None
    assert verify(armor(blob + b"\0"), MESSAGE, allowed) is None


# --- Keys ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KEY_TYPES)
def test_fingerprint_is_what_ssh_keygen_prints(keys: Any, kind: Any) -> None:
    printed = subprocess.run(["ssh-keygen", "-lf", f"{keys[kind]}.pub"], capture_output=True, check=True)
    assert sshsig.fingerprint(pub(keys[kind])) == printed.stdout.decode().split()[1]


def test_normalize_key_drops_the_comment_and_rejects_what_is_not_a_supported_key(keys: Any) -> None:
    kind, blob, comment = pub(keys["ed25519"]).split()
    assert comment == "alice@laptop"
    assert normalize_key(f"{kind} {blob} {comment}\n") == f"{kind} {blob}"
    assert normalize_key(f"{kind} {blob}") == f"{kind} {blob}"
    rsa_kind, rsa_blob, _ = pub(keys["rsa3072"]).split()
    ecdsa_kind, ecdsa_blob, _ = pub(keys["ecdsa256"]).split()
    raw = base64.b64decode(blob)
    ecdsa = sshsig._Reader(base64.b64decode(ecdsa_blob))
    ecdsa.string(), ecdsa.string()
    other_curve = b"".join(sshsig._string(f) for f in [ecdsa_kind.encode(), b"nistp384", ecdsa.string()])
    rejected = [
        f"ssh-rsa {blob}",  # an ed25519 blob said to be RSA
        f"{kind} {rsa_blob}",
        f"ecdsa-sha2-nistp384 {ecdsa_blob}",  # a P-256 key said to be P-384
        f"{ecdsa_kind} {base64.b64encode(other_curve).decode()}",
        f"{kind} {base64.b64encode(raw[:-1]).decode()}",  # truncated
        f"{kind} {base64.b64encode(raw + b'x').decode()}",  # trailing bytes
        f"{kind} {blob[:-4]}",  # not base64
        f"{kind} {blob}!",
        "ssh-dss AAAAB3NzaC1kc3MAAACBAP",
        f"sk-ssh-ed25519@openssh.com {blob}",
        kind,
        "",
    ]
    for line in rejected:
        with pytest.raises(ValueError):
            normalize_key(line)


# --- load_signer ---------------------------------------------------------------------------------


def assert_one_line(error: pytest.ExceptionInfo, *words: str) -> None:
    message = str(error.value)
    assert "\n" not in message and message.strip() == message
    for word in words:
        assert word in message


@pytest.fixture
def no_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


@pytest.mark.parametrize("kind", ["ecdsa256", "rsa3072"])
def test_unencrypted_pem_keys_sign_in_process(kind: Any, tmp_path: Path, no_agent: Any) -> None:
    key = keygen(tmp_path / "pem", *KEY_TYPES[kind], "-m", "PEM")
    assert b"-----BEGIN OPENSSH" not in key.read_bytes()
    signer = load_signer(str(key))
    assert signer.via == "in-process"
    assert keygen_verifies(pub(key), signer.sign(MESSAGE), MESSAGE, tmp_path)


def test_encrypted_key_without_agent_is_refused_in_one_line(tmp_path: Path, no_agent: Any) -> None:
    key = keygen(tmp_path / "enc", "-t", "ed25519", passphrase="secret")
    with pytest.raises(SigningKeyError) as error:
        load_signer(key)
    assert_one_line(error, str(key), "passphrase", "ssh-add")
    with pytest.raises(SigningKeyError) as error:  # not a TTY here: interactive changes nothing
        load_signer(key, interactive=True)
    assert_one_line(error, str(key), "ssh-add")


def test_files_that_are_not_keys_are_refused_naming_the_file(
    tmp_path: Path, keys: Any, no_agent: Any
) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "binary").write_bytes(b"\xff\xfe\0")
    (tmp_path / "two.pub").write_text(pub(keys["ed25519"]) + pub(keys["rsa3072"]))
    (tmp_path / "broken").write_text(
        "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
    )
    for name in ["missing", "notes.txt", "binary", "two.pub", "broken", "."]:
        with pytest.raises(SigningKeyError) as error:
            load_signer(tmp_path / name)
        assert_one_line(error, str(tmp_path / name))


def test_a_public_key_without_an_agent_is_refused(keys: Any, no_agent: Any) -> None:
    with pytest.raises(SigningKeyError) as error:
        load_signer(f"{keys['ed25519']}.pub")
    assert_one_line(error, f"{keys['ed25519']}.pub", "ssh-agent")


def test_importing_the_module_is_cheap() -> None:
    code = "import sys, engine.base.sshsig; print(sorted({'cryptography', 'textual', 'git', 'pydantic'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, text=True)
    assert done.stdout.strip() == "[]"


# --- ssh-agent -----------------------------------------------------------------------------------


def _answers(socket_path: Path) -> bool:
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        try:
            client.connect(str(socket_path))
        except OSError:
            return False
    return True


@pytest.fixture
def agent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """A real ssh-agent of this test's own (its socket in a short /tmp path: sun_path is 108 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="agent-"))
    socket_path = folder / "sock"
    process = subprocess.Popen(["ssh-agent", "-D", "-a", str(socket_path)], stdout=subprocess.DEVNULL)
    askpass = tmp_path / "askpass"
    askpass.write_text("#!/bin/sh\necho secret\n")
    askpass.chmod(0o700)
    env = {**os.environ, "SSH_AUTH_SOCK": str(socket_path), "SSH_ASKPASS": str(askpass)}
    env["SSH_ASKPASS_REQUIRE"] = "force"

    def add(key: Path) -> None:
        subprocess.run(
            ["ssh-add", str(key)], env=env, stdin=subprocess.DEVNULL, capture_output=True, check=True
        )

    try:
        # the socket file appears at bind(), before the agent listens: wait until it answers a connect
        deadline = time.monotonic() + 10
        while not _answers(socket_path):
            assert process.poll() is None and time.monotonic() < deadline, "ssh-agent did not start"
            time.sleep(0.01)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(socket_path))
        yield add
    finally:
        process.terminate()
        process.wait(5)
        shutil.rmtree(folder, ignore_errors=True)


@needs_agent
def test_an_encrypted_key_in_the_agent_signs_through_it(agent: Any, tmp_path: Path) -> None:
    key = keygen(tmp_path / "enc", "-t", "ed25519", passphrase="secret")
    with pytest.raises(SigningKeyError):
        load_signer(key)  # the agent runs but does not hold the key yet
    agent(key)
    Path(f"{key}.pub").unlink()  # the public half comes from the key file itself
    signer = load_signer(key)
    assert signer.via == "ssh-agent"
    armored = signer.sign(MESSAGE)
    assert keygen_verifies(signer.public_key, armored, MESSAGE, tmp_path)
    assert verify(armored, MESSAGE, [signer.public_key]) == signer.public_key


@needs_agent
def test_an_encrypted_pem_key_finds_its_public_half_beside_it(agent: Any, tmp_path: Path) -> None:
    key = keygen(tmp_path / "enc", *KEY_TYPES["ecdsa256"], "-m", "PEM", passphrase="secret")
    agent(key)
    signer = load_signer(key)
    assert signer.via == "ssh-agent"
    assert keygen_verifies(pub(key), signer.sign(MESSAGE), MESSAGE, tmp_path)


@needs_agent
@pytest.mark.parametrize("kind", ["ed25519", "ecdsa521", "rsa3072"])
def test_a_public_key_file_signs_through_the_agent(agent: Any, keys: Any, kind: Any, tmp_path: Path) -> None:
    public = Path(f"{keys[kind]}.pub")
    with pytest.raises(SigningKeyError) as error:
        load_signer(public)
    assert_one_line(error, str(public), "ssh-add")
    agent(keys[kind])
    signer = load_signer(public)
    assert signer.via == "ssh-agent"
    armored = signer.sign(MESSAGE, namespace="other")
    assert verify(armored, MESSAGE, [pub(keys[kind])], namespace="other") == signer.public_key
    armored = signer.sign(MESSAGE)
    assert keygen_verifies(pub(keys[kind]), armored, MESSAGE, tmp_path)
    if kind == "rsa3072":  # the agent was asked for SHA-512, as ssh-keygen does
        assert sshsig._Reader(sshsig._parse(armored)[4]).string() == b"rsa-sha2-512"
        assert armored == keygen_sign(keys[kind], MESSAGE)


# --- Interactive passphrase, on a real pseudo-terminal -------------------------------------------


def run_on_a_terminal(code: str, answer: bytes) -> str:
    """Runs `code` in a child Python whose controlling terminal is a pty; types `answer` when asked."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child
        os.execv(sys.executable, [sys.executable, "-c", code])
    output = b""
    try:
        while select.select([fd], [], [], 20)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child has exited
                break
            if not chunk:
                break
            output += chunk
            if chunk.rstrip().endswith(b":"):
                os.write(fd, answer + b"\n")
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
    return output.decode(errors="replace")


def test_an_encrypted_pem_key_asks_for_its_passphrase_on_a_terminal(tmp_path: Path, no_agent: Any) -> None:
    key = keygen(tmp_path / "enc", *KEY_TYPES["ecdsa256"], "-m", "PEM", passphrase="secret")
    code = (
        "from engine.base.sshsig import load_signer\n"
        f"signer = load_signer({str(key)!r}, interactive=True)\n"
        "print('VIA', signer.via)\n"
        f"open({str(tmp_path / 'sig')!r}, 'w').write(signer.sign({MESSAGE!r}))\n"
    )
    output = run_on_a_terminal(code, b"secret")
    assert "Enter passphrase for" in output and "VIA in-process" in output
    assert keygen_verifies(pub(key), (tmp_path / "sig").read_text(), MESSAGE, tmp_path)
    (tmp_path / "sig").unlink()
    output = run_on_a_terminal(code, b"wrong")
    assert "wrong passphrase" in output and not (tmp_path / "sig").exists()
