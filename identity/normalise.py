"""Pure checks and shapes of what people type: mobile numbers, ID numbers, credit codes, names.

No database and no settings: each function is tested on its own, and every form and service uses the
same one, so "+86 138 0013 8000" and "13800138000" are one number everywhere (and one trial).
"""

from __future__ import annotations

import re
from datetime import date

# Mainland China mobiles: 11 digits starting 13-19. The SMS adapters send domestic texts only, so a
# number elsewhere is refused at the form rather than failing later at the provider.
_CN_MOBILE = re.compile(r"^1[3-9]\d{9}$")
_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"
# GB 32100-2015: the unified social credit code's alphabet (no I, O, Z, S, V) and weights.
_USCC_ALPHABET = "0123456789ABCDEFGHJKLMNPQRTUWXY"
_USCC_WEIGHTS = (1, 3, 9, 27, 19, 26, 16, 17, 20, 29, 25, 13, 8, 24, 10, 30, 28)


def phone_normalise(text: str) -> str | None:
    """``+86`` and 11 digits (E.164), or None when ``text`` is not a mainland mobile number.

    Spaces, dashes and brackets are ignored; a leading ``+86``, ``86`` or ``0086`` is optional.
    """
    digits = re.sub(r"[\s\-()]", "", text or "")
    if digits.startswith("+"):
        digits = digits[1:]
        if not digits.startswith("86"):
            return None
        digits = digits[2:]
    elif digits.startswith("0086"):
        digits = digits[4:]
    elif digits.startswith("86") and len(digits) == 13:
        digits = digits[2:]
    return f"+86{digits}" if _CN_MOBILE.match(digits) else None


def phone_mask(number: str) -> str:
    """``+8613800138000`` → ``138****8000``: enough for its owner to recognise, not to dial."""
    local = number[3:] if number.startswith("+86") else number
    return f"{local[:3]}****{local[-4:]}" if len(local) >= 8 else "****"


def id_number_normalise(text: str) -> str | None:
    """An 18-character 居民身份证 number, upper-case X, whose birth date and check character are valid; else None."""
    value = re.sub(r"\s", "", text or "").upper()
    if not re.fullmatch(r"\d{17}[\dX]", value):
        return None
    try:
        born = date(int(value[6:10]), int(value[10:12]), int(value[12:14]))
    except ValueError:
        return None
    if born.year < 1900 or born > date.today():
        return None
    total = sum(int(d) * w for d, w in zip(value[:17], _ID_WEIGHTS, strict=True))
    return value if _ID_CHECK[total % 11] == value[17] else None


def credit_code_normalise(text: str) -> str | None:
    """An 18-character unified social credit code (统一社会信用代码) with a valid check character; else None."""
    value = re.sub(r"\s", "", text or "").upper()
    if len(value) != 18 or any(c not in _USCC_ALPHABET for c in value):
        return None
    total = sum(_USCC_ALPHABET.index(c) * w for c, w in zip(value[:17], _USCC_WEIGHTS, strict=True))
    check = (31 - total % 31) % 31
    return value if _USCC_ALPHABET[check] == value[17] else None


def name_clean(text: str) -> str:
    """A person's or company's name as typed, with runs of white space made one."""
    return " ".join((text or "").split())


def name_mask(name: str) -> str:
    """The name with all but its first and last characters hidden: 张小三 → 张*三, 张三 → 张*, 王 → 王."""
    name = name_clean(name)
    if len(name) <= 1:
        return name
    if len(name) == 2:
        return f"{name[0]}*"
    return f"{name[0]}{'*' * (len(name) - 2)}{name[-1]}"
