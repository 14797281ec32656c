"""A saved image's recipe is read off its layer, without podman: Debian packages from dpkg's status
against the base's, Python packages from their dist-info folders, deletions from whiteouts, the other
changed files copied from the saved image (``providers.local.runtime.image_recipe``)."""

from __future__ import annotations

import io
import json
import re
import tarfile

from providers.local.runtime.image_recipe import dpkg_status_parse, layer_read, recipe_derive

BASE_REF = "127.0.0.1:5000/console/minimal@sha256:" + "a" * 64
SAVED_REF = "127.0.0.1:5000/users/u7/mine@sha256:" + "b" * 64
SITE = "opt/venv/lib/python3.11/site-packages"

BASE_STATUS = """Package: bash
Status: install ok installed
Architecture: amd64
Version: 5.2.15-2+b2
Description: shell
 more words

Package: nano
Status: install ok installed
Architecture: amd64
Version: 7.2-1

Package: gone-already
Status: deinstall ok config-files
Version: 1.0
"""


def _tar(members: list[tuple]) -> io.BytesIO:
    """(name, data | None for a folder | ("sym", target), uid) → an uncompressed layer tar."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, *rest in members:
            info = tarfile.TarInfo(name)
            info.uid = info.gid = rest[0] if rest else 0
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(data, tuple):
                info.type, info.linkname = tarfile.SYMTYPE, data[1]
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    out.seek(0)
    return out


def _status_with(*extra: tuple[str, str], drop: str = "") -> bytes:
    text = BASE_STATUS
    if drop:
        text = re.sub(rf"Package: {drop}\n(?:.+\n)+\n?", "", text)
    for name, version in extra:
        text += f"\nPackage: {name}\nStatus: install ok installed\nArchitecture: amd64\nVersion: {version}\n"
    return text.encode()


def _steps(text: str) -> list[str]:
    """The recipe's instructions, continuation lines joined, comments left out."""
    return [
        line for line in text.replace("\\\n", " ").splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]


def test_dpkg_status_keeps_only_installed_packages():
    assert dpkg_status_parse(BASE_STATUS) == {"bash": "5.2.15-2+b2", "nano": "7.2-1"}


def test_debian_packages_added_or_upgraded_become_one_apt_install_and_their_files_are_not_copied():
    layer = layer_read(
        _tar(
            [
                ("var/lib/dpkg/status", _status_with(("jq", "1.6-2.1"), ("nano", "7.2-1+deb12u1"))),
                ("var/lib/dpkg/info/jq.list", b"/usr/bin/jq\n/usr/share/doc/jq\n"),
                ("usr/bin/jq", b"\x7fELF"),
                ("etc/motd", b"hello\n"),
            ]
        )
    )
    recipe = recipe_derive(layer, base_ref=BASE_REF, saved_ref=SAVED_REF, base_status=BASE_STATUS)
    assert recipe.apt == ["jq=1.6-2.1", "nano=7.2-1+deb12u1"]
    steps = _steps(recipe.text)
    assert steps[0] == f"FROM {BASE_REF}"
    assert any("apt-get install -y --no-install-recommends jq=1.6-2.1 nano=7.2-1+deb12u1" in s for s in steps)
    copies = [s for s in steps if s.startswith("COPY")]
    assert copies == [f'COPY --from={SAVED_REF} ["/etc/motd", "/etc/"]']  # not /usr/bin/jq: jq's


def test_a_package_the_layer_removed_is_purged():
    layer = layer_read(_tar([("var/lib/dpkg/status", _status_with(drop="nano"))]))
    recipe = recipe_derive(layer, base_ref=BASE_REF, saved_ref=SAVED_REF, base_status=BASE_STATUS)
    assert any("apt-get purge -y nano" in s for s in _steps(recipe.text))
    assert recipe.apt == []


def test_without_the_bases_status_the_rewritten_file_lists_name_the_packages():
    layer = layer_read(
        _tar(
            [
                ("var/lib/dpkg/status", _status_with(("jq", "1.6-2.1"))),
                ("var/lib/dpkg/info/jq.list", b"/usr/bin/jq\n"),
                ("usr/bin/jq", b"\x7fELF"),
            ]
        )
    )
    recipe = recipe_derive(layer, base_ref=BASE_REF, saved_ref=SAVED_REF, base_status=None)
    assert recipe.apt == ["jq=1.6-2.1"]  # bash and nano are in the status too, but their lists were not rewritten
    assert "base's status was not at hand" in recipe.text


def test_python_packages_from_an_index_are_pip_installed_by_version():
    record = b"requests/__init__.py,sha256=x,10\nrequests-2.32.3.dist-info/METADATA,,\n../../../bin/req,,\n"
    layer = layer_read(
        _tar(
            [
                (
                    f"{SITE}/requests-2.32.3.dist-info/METADATA",
                    b"Metadata-Version: 2.1\nName: requests\nVersion: 2.32.3\n",
                ),
                (f"{SITE}/requests-2.32.3.dist-info/RECORD", record),
                (f"{SITE}/requests/__init__.py", b"x"),
                (f"{SITE}/requests/__pycache__/__init__.cpython-311.pyc", b"x"),
                ("opt/venv/bin/req", b"#!/opt/venv/bin/python\n"),
                (f"{SITE}/.wh.urllib3-1.26.0.dist-info", b""),
                (f"{SITE}/.wh.six-1.16.0.dist-info", b""),
                (f"{SITE}/urllib3-2.2.3.dist-info/METADATA", b"Name: urllib3\nVersion: 2.2.3\n"),
            ]
        )
    )
    recipe = recipe_derive(layer, base_ref=BASE_REF, saved_ref=SAVED_REF)
    assert recipe.pip == {"opt/venv": ["requests==2.32.3", "urllib3==2.2.3"]}
    steps = _steps(recipe.text)
    assert any("/opt/venv/bin/pip install" in s and "requests==2.32.3 urllib3==2.2.3" in s for s in steps)
    assert any(s.startswith("RUN /opt/venv/bin/pip uninstall -y") and s.endswith("six") for s in steps)
    assert not any(s.startswith("COPY") for s in steps)  # every file is a package's, or a cache
    assert recipe.copied == 0


def test_a_package_installed_from_a_wheel_file_is_copied_not_installed_by_name():
    direct = json.dumps({"url": "file:///home/user/mine-0.1-py3-none-any.whl", "archive_info": {}}).encode()
    layer = layer_read(
        _tar(
            [
                (f"{SITE}/mine-0.1.dist-info/METADATA", b"Name: mine\nVersion: 0.1\n"),
                (f"{SITE}/mine-0.1.dist-info/direct_url.json", direct),
                (f"{SITE}/mine/__init__.py", b"VALUE = 42\n", 1000),
            ]
        )
    )
    recipe = recipe_derive(layer, base_ref=BASE_REF, saved_ref=SAVED_REF)
    assert recipe.pip == {}
    copies = [s for s in _steps(recipe.text) if s.startswith("COPY")]
    assert f'COPY --from={SAVED_REF} --chown=1000:1000 ["/{SITE}/mine/__init__.py", "/{SITE}/mine/"]' in copies
    assert "installed from a file or URL" in recipe.text


def test_deletions_symlinks_and_the_consoles_paths():
    layer = layer_read(
        _tar(
            [
                ("etc/.wh.issue", b""),
                ("opt/data/.wh..wh..opq", b""),
                ("opt/data/new.txt", b"1"),
                ("usr/local/bin/py", ("sym", "/opt/venv/bin/python")),
                ("run/console-secrets/token", b"secret"),
                ("etc/ssh/ssh_host_ed25519_key", b"key"),
                ("home/user/notes.txt", b"mine"),
                ("opt/we[ird].txt", b"x"),
            ]
        )
    )
    recipe = recipe_derive(layer, base_ref=BASE_REF, saved_ref=SAVED_REF)
    steps = _steps(recipe.text)
    assert any(s.startswith("RUN rm -rf --") and "/etc/issue" in s for s in steps)
    assert any("find /opt/data -mindepth 1 -maxdepth 1 -exec rm -rf -- {} +" in s for s in steps)
    assert any("ln -sfn /opt/venv/bin/python /usr/local/bin/py" in s for s in steps)
    copied = " ".join(s for s in steps if s.startswith("COPY"))
    assert "/opt/data/new.txt" in copied
    for secret in ("console-secrets", "ssh_host_", "home/user", "we[ird]"):
        assert secret not in copied
    assert "# Left out: /opt/we[ird].txt" in recipe.text


def test_too_many_changed_files_are_left_out_and_said_so():
    layer = layer_read(_tar([(f"opt/many/{i}.txt", b"x") for i in range(12)]))
    recipe = recipe_derive(layer, base_ref=BASE_REF, saved_ref=SAVED_REF, max_copied=10)
    assert recipe.copied == 0
    assert not any(s.startswith("COPY") for s in _steps(recipe.text))
    assert "12 changed files: more than 10" in recipe.text


def test_copy_lines_over_their_budget_are_left_out_and_said_so(monkeypatch):
    from providers.local.runtime import image_recipe

    monkeypatch.setattr(image_recipe, "MAX_COPY_BYTES", 2048)
    layer = layer_read(_tar([(f"opt/long/{'x' * 80}-{i}.txt", b"x") for i in range(40)]))
    recipe = recipe_derive(layer, base_ref=BASE_REF, saved_ref=SAVED_REF)
    assert recipe.copied == 0 and not any(s.startswith("COPY") for s in _steps(recipe.text))
    assert "40 changed files: their COPY lines would take" in recipe.text


def test_deletions_come_first_and_a_packages_own_folder_is_not_cleared():
    layer = layer_read(
        _tar(
            [
                ("etc/.wh.issue", b""),
                ("usr/share/jq/.wh..wh..opq", b""),  # overlay marks a folder made anew opaque
                ("usr/share/jq/README", b"jq"),
                ("var/lib/dpkg/status", _status_with(("jq", "1.6-2.1"))),
                ("var/lib/dpkg/info/jq.list", b"/usr/share/jq\n/usr/share/jq/README\n"),
            ]
        )
    )
    steps = _steps(recipe_derive(layer, base_ref=BASE_REF, saved_ref=SAVED_REF, base_status=BASE_STATUS).text)
    assert steps[1].startswith("RUN rm -rf --") and "/etc/issue" in steps[1]
    assert "apt-get install" in steps[2]
    assert not any("/usr/share/jq" in step for step in steps)  # jq's: installing it makes it again
