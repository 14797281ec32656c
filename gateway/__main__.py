"""``python -m gateway [--host H] [--port P]``: the SSH gateway as its own process (see ``gateway``)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line([sys.argv[0], "gateway", *sys.argv[1:]])
