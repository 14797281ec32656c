"""The local runtime finds the user servers `make local-deps` installs under the checkout's var/."""

from django.conf import settings

from providers.local.runtime.supervisor import _default_code_server, _default_jupyter


def test_the_default_servers_are_looked_for_under_the_checkouts_var_local_deps():
    local_deps = settings.BASE_DIR / "var/local-deps"
    assert _default_jupyter() == str(local_deps / "jupyter/bin/jupyter")
    assert _default_code_server() == str(local_deps / "code-server/node_modules/code-server/out/node/entry.js")
