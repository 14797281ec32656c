"""The security log's "device" column: a user agent in a few words."""

import pytest

from accounts.useragent import user_agent_describe


@pytest.mark.parametrize(
    ("user_agent", "described"),
    [
        ("Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0", "Firefox on Linux"),
        (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
            "Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
            "Edge on Windows",
        ),
        (
            "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
            "Version/18.1 Mobile/15E148 Safari/604.1",
            "Safari on iOS",
        ),
        ("Mozilla/5.0 (Linux; Android 14) AppleWebKit/537.36 Chrome/131.0 Mobile Safari/537.36", "Chrome on Android"),
        ("curl/8.5.0", "curl"),
        ("python-requests/2.32.3", "Python"),
        ("gpuctl/0.3 python-httpx/0.28", "gpuctl"),
        ("SomethingElse/1.0", "Unknown client"),
        ("", ""),
    ],
)
def test_it_names_the_browser_and_the_system(user_agent, described):
    assert user_agent_describe(user_agent) == described
