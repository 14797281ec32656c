import shutil
import subprocess

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from accounts.services import ssh_key_parse
from accounts.tests import keys

pytestmark = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen (OpenSSH) is not installed")


@pytest.mark.parametrize(
    "make",
    [keys.ed25519_public, lambda: keys.ecdsa_public(ec.SECP384R1()), lambda: keys.rsa_public(2048)],
    ids=["ed25519", "ecdsa-p384", "rsa-2048"],
)
def test_the_fingerprint_is_the_one_ssh_keygen_prints(tmp_path, make):
    line = make()
    path = tmp_path / "key.pub"
    path.write_text(line + "\n")
    output = subprocess.run(["ssh-keygen", "-lf", str(path)], capture_output=True, text=True, check=True).stdout
    # "256 SHA256:abc… alice@laptop (ED25519)"
    bits, fingerprint = output.split()[:2]
    parsed = ssh_key_parse(line)
    assert parsed.fingerprint == fingerprint
    assert parsed.bits == int(bits)
