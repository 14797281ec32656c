import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.exceptions import ValidationError

from accounts.models import SSHKey
from accounts.services import ssh_key_parse
from accounts.tests import keys


def refusal(text: str) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        ssh_key_parse(text)
    errors = caught.value.error_dict["public_key"]
    assert len(errors) == 1
    return errors[0]


@pytest.mark.parametrize(
    ("make", "key_type", "bits", "prefix"),
    [
        (keys.ed25519_public, SSHKey.KeyType.ED25519, 256, "ssh-ed25519 "),
        (lambda: keys.ecdsa_public(ec.SECP256R1()), SSHKey.KeyType.ECDSA, 256, "ecdsa-sha2-nistp256 "),
        (lambda: keys.ecdsa_public(ec.SECP384R1()), SSHKey.KeyType.ECDSA, 384, "ecdsa-sha2-nistp384 "),
        (lambda: keys.ecdsa_public(ec.SECP521R1()), SSHKey.KeyType.ECDSA, 521, "ecdsa-sha2-nistp521 "),
        (lambda: keys.rsa_public(2048), SSHKey.KeyType.RSA, 2048, "ssh-rsa "),
    ],
    ids=["ed25519", "ecdsa-p256", "ecdsa-p384", "ecdsa-p521", "rsa-2048"],
)
def test_it_accepts_the_modern_key_types(make, key_type, bits, prefix):
    line = make()
    parsed = ssh_key_parse(line)
    assert parsed.key_type == key_type
    assert parsed.bits == bits
    assert parsed.public_key == line
    assert parsed.public_key.startswith(prefix)
    assert parsed.comment == "alice@laptop"
    assert parsed.fingerprint.startswith("SHA256:") and not parsed.fingerprint.endswith("=")


def test_it_normalises_surrounding_whitespace_and_keeps_the_comment():
    line = keys.ed25519_public(comment="alice  on   her laptop")
    kind, data = line.split()[:2]
    parsed = ssh_key_parse(f"\n  {kind}   {data}\talice  on   her laptop  \r\n")
    assert parsed.public_key == f"{kind} {data} alice on her laptop"
    assert parsed.comment == "alice on her laptop"


def test_it_accepts_a_key_without_a_comment():
    line = keys.ed25519_public(comment="")
    parsed = ssh_key_parse(line)
    assert parsed.public_key == line
    assert parsed.comment == ""


def test_it_refuses_garbage():
    error = refusal("hello, this is my key")
    assert error.code == "invalid"
    assert "not an SSH public key" in error.message


def test_it_refuses_a_key_whose_data_is_damaged():
    kind, data, comment = keys.ed25519_public().split()
    error = refusal(f"{kind} {data[:-6]}!!{data[-4:]} {comment}")
    assert error.code == "invalid"
    assert "damaged" in error.message


def test_it_refuses_a_key_whose_type_does_not_match_its_data():
    _kind, data, comment = keys.ed25519_public().split()
    assert refusal(f"ssh-rsa {data} {comment}").code == "invalid"


@pytest.mark.parametrize("private", [keys.openssh_private, keys.pem_private], ids=["openssh", "pem"])
def test_it_refuses_a_private_key_and_warns_not_to_share_it(private):
    error = refusal(private())
    assert error.code == "private_key"
    assert "PRIVATE key" in error.message
    assert "Never paste or share it" in error.message


def test_it_refuses_dsa():
    error = refusal(keys.dsa_public())
    assert error.code == "dsa"
    assert "DSA" in error.message


def test_it_refuses_rsa_below_2048_bits():
    error = refusal(keys.rsa_public(1024))
    assert error.code == "weak_rsa"
    assert "1024 bits" in error.message and "2048" in error.message


def test_it_refuses_several_keys_in_one_paste():
    error = refusal(keys.ed25519_public() + "\n" + keys.ecdsa_public(ec.SECP256R1()))
    assert error.code == "multiple"
    assert "one at a time" in error.message


def test_it_refuses_a_key_broken_over_lines():
    line = keys.rsa_public(2048)
    error = refusal(line[:200] + "\n" + line[200:])
    assert error.code == "multiline"


def test_it_refuses_an_empty_paste():
    assert refusal("   \n ").code == "required"


def test_it_names_an_unsupported_type():
    error = refusal("sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29t user@host")
    assert error.code == "unsupported_type"
    assert "sk-ssh-ed25519@openssh.com" in error.message


def test_it_explains_the_rfc4716_format():
    text = '---- BEGIN SSH2 PUBLIC KEY ----\nComment: "x"\nAAAAC3NzaC1lZDI1NTE5AAAAI\n---- END SSH2 PUBLIC KEY ----'
    error = refusal(text)
    assert error.code == "rfc4716"
    assert "ssh-keygen -i" in error.message
