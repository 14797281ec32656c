"""What people type, made one shape: numbers, ID numbers with their check character, credit codes, masks."""

from __future__ import annotations

import pytest

from identity.normalise import credit_code_normalise, id_number_normalise, name_mask, phone_mask, phone_normalise


@pytest.mark.parametrize(
    "typed", ["13800138000", "138 0013 8000", "+86 138-0013-8000", "8613800138000", "008613800138000", "(138)00138000"]
)
def test_every_way_of_writing_a_number_is_one_number(typed):
    assert phone_normalise(typed) == "+8613800138000"


@pytest.mark.parametrize("typed", ["", "12800138000", "1380013800", "+1 415 555 0100", "+85291234567", "phone"])
def test_what_is_not_a_mainland_mobile_is_refused(typed):
    assert phone_normalise(typed) is None


def test_a_number_is_masked_to_its_first_three_and_last_four_digits():
    assert phone_mask("+8613800138000") == "138****8000"


def test_an_id_number_passes_with_its_check_character_in_either_case():
    assert id_number_normalise("11010519491231002x") == "11010519491231002X"
    assert id_number_normalise(" 440308199003071235 ") == "440308199003071235"


@pytest.mark.parametrize(
    "typed",
    [
        "110105194912310021",  # wrong check character
        "440308199003071236",  # one digit off
        "11010519491331002X",  # month 13
        "1101051949123100",  # too short
        "44030830000101000X",  # born in the future
    ],
)
def test_an_id_number_with_a_bad_checksum_or_date_is_refused(typed):
    assert id_number_normalise(typed) is None


def test_a_credit_code_passes_only_with_its_check_character():
    assert credit_code_normalise("91350100m000100y43") == "91350100M000100Y43"
    assert credit_code_normalise("91350100M000100Y44") is None
    assert credit_code_normalise("91350100M000100I43") is None  # I is not in the alphabet
    assert credit_code_normalise("91350100M000100Y4") is None


@pytest.mark.parametrize(
    ("name", "masked"), [("张小三", "张*三"), ("张三", "张*"), ("王", "王"), ("欧阳娜娜", "欧**娜")]
)
def test_names_keep_their_first_and_last_characters(name, masked):
    assert name_mask(name) == masked
